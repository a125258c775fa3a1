//! Building intercommunicators, and intracommunicators from them.
//!
//! An intercommunicator needs one context id that both groups agree on. Each group derives a
//! proposal from its own communicator as for any child communicator (every member, so the
//! derivation counters stay in step); the two local leaders swap their proposals and their
//! groups over the peer communicator, and each combines the two proposals symmetrically,
//! `hash(min, max)`, then broadcasts the result and the remote group to its members. The swap
//! travels on a context of the peer communicator reserved for it, under the caller's tag, so
//! it can match neither application messages nor other creations with other tags; a proposal is
//! unique among its group's communicators, so two creations never get the same id.
//!
//! Communicators created from an intercommunicator (dup, split, create, merge) derive their ids
//! from it like any child: both groups call these collectively, in the same order, so both
//! counters stay in step. Whatever one group must know of the other (split colors, the
//! `high` flag, the group given to create) crosses between the leaders and is broadcast.

use crate::comm::{hash_words, Comm};
use crate::dpm::{put_strings, Reader};
use crate::engine::ProcIdx;
use crate::error::{MpiError, Result};
use crate::group::Group;
use crate::runtime::Mpi;
use baton_abi::consts as c;
use baton_pmi::auth::Secret;
use std::sync::Arc;

const DISC_CREATE: u64 = 0x0069_6372_6561_7465;
const DISC_SWAP: u64 = 0x6963_7377_6170;
const DISC_MERGE: u64 = 0x006d_6572_6765;
const DISC_SPLIT: u64 = 0x6973_706c_6974;
const DISC_SUB: u64 = 0x0069_6373_7562;

/// A process's identity across jobs: (job id, rank in its job), the same to every process
/// (process table indices need not be).
type Id = (u64, u32);

fn ids_of(mpi: &Mpi, g: &Group) -> Vec<Id> {
    g.procs.iter().map(|&p| mpi.proc_id(p)).collect()
}

fn encode_ids(ids: &[Id], out: &mut Vec<u8>) {
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    for &(job, rank) in ids {
        out.extend_from_slice(&job.to_le_bytes());
        out.extend_from_slice(&rank.to_le_bytes());
    }
}

/// Reads a little-endian word from `b` at `*at`, advancing.
fn word<const N: usize>(b: &[u8], at: &mut usize) -> Option<[u8; N]> {
    let w = b.get(*at..*at + N)?.try_into().ok()?;
    *at += N;
    Some(w)
}

fn decode_ids(call: &str, b: &[u8], at: &mut usize) -> Result<Vec<Id>> {
    let bad = || MpiError::new(c::MPI_ERR_INTERN, format!("{call}: malformed group description from the other group"));
    let n = u32::from_le_bytes(word(b, at).ok_or_else(bad)?) as usize;
    let mut ids = Vec::with_capacity(n.min(b.len() / 12));
    for _ in 0..n {
        let job = u64::from_le_bytes(word(b, at).ok_or_else(bad)?);
        let rank = u32::from_le_bytes(word(b, at).ok_or_else(bad)?);
        ids.push((job, rank));
    }
    Ok(ids)
}

/// The group of processes `ids`, all of which this process must know.
fn resolve(mpi: &Mpi, call: &str, ids: &[Id]) -> Result<Group> {
    let procs = ids
        .iter()
        .map(|&(job, rank)| {
            mpi.proc_index(job, rank).ok_or_else(|| {
                MpiError::new(
                    c::MPI_ERR_INTERN,
                    format!(
                        "{call}: the remote group holds rank {rank} of job {job:#x}, a process this one does not know"
                    ),
                )
            })
        })
        .collect::<Result<Vec<ProcIdx>>>()?;
    Ok(Group::new(procs))
}

/// The local leader's verdict, broadcast to its group: the context id and the remote group,
/// or the error that the leader met (so that no member waits for a leader that gave up).
fn encode_verdict(v: &Result<(u64, Vec<Id>)>) -> Vec<u8> {
    let mut out = Vec::new();
    match v {
        Ok((ctx, ids)) => {
            out.push(0);
            out.extend_from_slice(&ctx.to_le_bytes());
            encode_ids(ids, &mut out);
        }
        Err(e) => encode_error(e, &mut out),
    }
    out
}

fn encode_error(e: &MpiError, out: &mut Vec<u8>) {
    out.push(1);
    out.extend_from_slice(&e.class.to_le_bytes());
    out.extend_from_slice(e.msg.as_bytes());
}

fn decode_error(call: &str, b: &[u8]) -> MpiError {
    let mut at = 1;
    let Some(class) = word(b, &mut at).map(i32::from_le_bytes) else {
        return MpiError::new(c::MPI_ERR_INTERN, format!("{call}: malformed message from the local leader"));
    };
    let why = String::from_utf8_lossy(&b[at..]);
    let why = why.strip_prefix(call).and_then(|w| w.strip_prefix(": ")).unwrap_or(&why);
    MpiError::new(class, format!("{call}: the local leader reported: {why}"))
}

fn decode_verdict(call: &str, b: &[u8]) -> Result<(u64, Vec<Id>)> {
    let bad = || MpiError::new(c::MPI_ERR_INTERN, format!("{call}: malformed message from the local leader"));
    let mut at = 1;
    match b.first() {
        Some(0) => {
            let ctx = u64::from_le_bytes(word(b, &mut at).ok_or_else(bad)?);
            Ok((ctx, decode_ids(call, b, &mut at)?))
        }
        Some(1) => Err(decode_error(call, b)),
        _ => Err(bad()),
    }
}

/// What the local leader of `MPI_Intercomm_create` was given: the peer communicator and the
/// remote leader's rank in it, or the error met looking them up.
pub type LeaderArgs<'a> = Result<(&'a Comm, i32)>;

/// `MPI_Intercomm_create` over `local` (an intracommunicator) with leader `leader`; `peer` is
/// significant at the leader only.
///
/// When the two groups together hold processes of more than one job, a member may not know
/// every process of the remote group (a child spawned by one parent has never met the other
/// parents' children): the groups then also swap how each of their members is reached
/// ([`learn_remote`]).
pub fn create(mpi: &Mpi, local: &Comm, leader: i32, peer: Option<LeaderArgs<'_>>, tag: i32) -> Result<Comm> {
    let call = "MPI_Intercomm_create";
    let n = local.size();
    if !(0..n).contains(&leader) {
        return Err(MpiError::rank_out_of_range_of(call, "local_leader", leader, n, "local_comm"));
    }
    let proposal = local.derive_ctx(hash_words(&[DISC_CREATE, tag as u64]));
    let link = (local.rank == leader).then(|| {
        peer.unwrap_or_else(|| Err(MpiError::new(c::MPI_ERR_INTERN, format!("{call}: the leader has no peer"))))
    });
    let local_ids = ids_of(mpi, &local.group);
    let verdict = match &link {
        Some(args) => {
            let v = args.clone().and_then(|(peer, remote_leader)| {
                leader_swap(call, &local_ids, peer, remote_leader, tag, proposal, mpi)
            });
            mpi.bcast_internal(local, leader, encode_verdict(&v));
            v
        }
        None => decode_verdict(call, &mpi.bcast_internal(local, leader, Vec::new())),
    };
    let (ctx, remote_ids) = verdict?;
    // Every member computes the same answer from the same identities, so all take part.
    let job = local_ids[0].0;
    let spans = local_ids.iter().chain(&remote_ids).any(|id| id.0 != job);
    if spans {
        let link = link.map(|a| a.expect("the leader's swap succeeded"));
        learn_remote(mpi, call, local, leader, link, tag, &remote_ids)?;
    }
    let remote = Arc::new(resolve(mpi, call, &remote_ids)?);
    let me = mpi.proc_id(mpi.me).0;
    let foreign: Vec<ProcIdx> = remote.procs.iter().copied().filter(|&p| mpi.proc_id(p).0 != me).collect();
    if !foreign.is_empty() {
        // As an intercommunicator from accept or connect: its disconnect releases them.
        mpi.dpm.use_procs(&foreign);
        mpi.dpm.comms.lock().unwrap_or_else(|e| e.into_inner()).push((ctx & !1, remote.clone()));
    }
    Ok(Comm::new_inter(ctx, local.group.clone(), local.rank, remote))
}

/// Makes every member know the processes of the remote group: each local member describes
/// itself ([`Mpi::describe_self`]), the leaders swap their groups' descriptions and halves of
/// a fresh secret (which the connections between the two groups prove), the leader
/// broadcasts the other group's, and each member enters those it does not know
/// ([`Mpi::add_remote`]) and trusts the secret for the remote jobs. The leaders always swap,
/// an error included, so that neither waits for one that gave up.
fn learn_remote(
    mpi: &Mpi,
    call: &str,
    local: &Comm,
    leader: i32,
    link: Option<(&Comm, i32)>,
    tag: i32,
    remote_ids: &[Id],
) -> Result<()> {
    let mine = match mpi.describe_self() {
        Ok(d) => format!("+{d}"),
        Err(e) => format!("!{}", e.msg),
    };
    let all = mpi.allgather(local, mine.into_bytes());
    let bytes = match link {
        Some((peer, remote_leader)) => {
            let out = leaders_swap_cards(mpi, call, &all, peer, remote_leader, tag, remote_ids.len());
            let mut b = Vec::new();
            match &out {
                Ok((secret, descs)) => {
                    b.push(0);
                    b.extend_from_slice(&secret.0);
                    put_strings(&mut b, descs);
                }
                Err(e) => encode_error(e, &mut b),
            }
            mpi.bcast_internal(local, leader, b)
        }
        None => mpi.bcast_internal(local, leader, Vec::new()),
    };
    let (secret, descs) = decode_cards(call, &bytes)?;
    let id_of = |d: &str| -> Option<Id> {
        let mut w = d.split(' ');
        Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
    };
    let mut unknown = Vec::new();
    for d in descs {
        match id_of(&d) {
            Some(id) if remote_ids.contains(&id) => {
                if mpi.proc_index(id.0, id.1).is_none() {
                    unknown.push(d);
                }
            }
            _ => {
                return Err(MpiError::new(
                    c::MPI_ERR_INTERN,
                    format!("{call}: the remote leader described a process outside the remote group: '{d}'"),
                ))
            }
        }
    }
    if !unknown.is_empty() {
        mpi.add_remote(&unknown, &secret).map_err(|e| MpiError::new(e.class, format!("{call}: {}", e.msg)))?;
    }
    let me = mpi.proc_id(mpi.me).0;
    let mut jobs: Vec<u64> = remote_ids.iter().map(|id| id.0).filter(|&j| j != me).collect();
    jobs.sort_unstable();
    jobs.dedup();
    mpi.trust_jobs(&secret, &jobs);
    Ok(())
}

/// The leader's part of [`learn_remote`]: `all` holds the local members' descriptions (or
/// why one has none); returns the secret and the remote group's `n` descriptions.
fn leaders_swap_cards(
    mpi: &Mpi,
    call: &str,
    all: &[Vec<u8>],
    peer: &Comm,
    remote_leader: i32,
    tag: i32,
    n: usize,
) -> Result<(Secret, Vec<String>)> {
    let descs = all
        .iter()
        .enumerate()
        .map(|(r, b)| {
            let s = String::from_utf8_lossy(b);
            match s.strip_prefix('+') {
                Some(d) => Ok(d.to_string()),
                None => Err(MpiError::new(
                    c::MPI_ERR_OTHER,
                    format!(
                        "{call}: rank {r} of local_comm cannot be reached by other jobs: {}",
                        s.trim_start_matches('!')
                    ),
                )),
            }
        })
        .collect::<Result<Vec<String>>>();
    let half = Secret::generate().map_err(|e| MpiError::new(c::MPI_ERR_OTHER, format!("{call}: {e}")));
    let mut msg = Vec::new();
    match (&descs, &half) {
        (Ok(d), Ok(h)) => {
            msg.push(0);
            msg.extend_from_slice(&h.0);
            put_strings(&mut msg, d);
        }
        _ => msg.push(1),
    }
    // The same context and tag as the groups' swap, which came before in that order.
    let ctx = hash_words(&[peer.ctx, DISC_SWAP]) | 1;
    let s = mpi.isend_ctx(peer.proc_of(remote_leader), ctx, peer.rank, tag, msg);
    let got = mpi.recv_ctx(ctx, remote_leader, tag);
    mpi.wait(s);
    let (h, _) = (half?, descs?);
    let bad = || MpiError::new(c::MPI_ERR_INTERN, format!("{call}: malformed descriptions from the remote leader"));
    match got.first() {
        Some(0) => {
            let mut r = Reader { b: &got, at: 1 };
            let theirs = r.take(32).ok_or_else(bad)?;
            let mut secret = h.0;
            for (a, b) in secret.iter_mut().zip(theirs) {
                *a ^= b;
            }
            let remote = r.strings().ok_or_else(bad)?;
            if remote.len() != n {
                return Err(bad());
            }
            Ok((Secret(secret), remote))
        }
        Some(1) => Err(MpiError::new(
            c::MPI_ERR_OTHER,
            format!("{call}: a member of the remote group cannot be reached by other jobs"),
        )),
        _ => Err(bad()),
    }
}

fn decode_cards(call: &str, b: &[u8]) -> Result<(Secret, Vec<String>)> {
    let bad = || MpiError::new(c::MPI_ERR_INTERN, format!("{call}: malformed message from the local leader"));
    match b.first() {
        Some(0) => {
            let mut r = Reader { b, at: 1 };
            let secret = Secret(r.take(32).ok_or_else(bad)?.try_into().map_err(|_| bad())?);
            Ok((secret, r.strings().ok_or_else(bad)?))
        }
        Some(1) => Err(decode_error(call, b)),
        _ => Err(bad()),
    }
}

/// The leaders' exchange: checks the leader's arguments, swaps proposal and group with the
/// remote leader, and returns the agreed context id and the remote group.
fn leader_swap(
    call: &str,
    local_ids: &[Id],
    peer: &Comm,
    remote_leader: i32,
    tag: i32,
    proposal: u64,
    mpi: &Mpi,
) -> Result<(u64, Vec<Id>)> {
    let pn = peer.peer_size();
    if !(0..pn).contains(&remote_leader) {
        return Err(MpiError::rank_out_of_range_of(call, "remote_leader", remote_leader, pn, "peer_comm"));
    }
    if local_ids.contains(&mpi.proc_id(peer.proc_of(remote_leader))) {
        return Err(MpiError::new(
            c::MPI_ERR_RANK,
            format!(
                "{call}: remote_leader {remote_leader} of peer_comm is a member of local_comm (the two groups must be disjoint)"
            ),
        ));
    }
    if tag < 0 {
        return Err(MpiError::new(c::MPI_ERR_TAG, format!("{call}: tag {tag} is invalid")));
    }
    let ctx = hash_words(&[peer.ctx, DISC_SWAP]) | 1;
    let mut msg = proposal.to_le_bytes().to_vec();
    encode_ids(local_ids, &mut msg);
    let s = mpi.isend_ctx(peer.proc_of(remote_leader), ctx, peer.rank, tag, msg);
    let got = mpi.recv_ctx(ctx, remote_leader, tag);
    mpi.wait(s);
    let mut at = 0;
    let theirs = u64::from_le_bytes(word(&got, &mut at).ok_or_else(|| {
        MpiError::new(c::MPI_ERR_INTERN, format!("{call}: malformed message from the remote leader"))
    })?);
    let remote = decode_ids(call, &got, &mut at)?;
    if remote.iter().any(|id| local_ids.contains(id)) {
        return Err(MpiError::new(c::MPI_ERR_COMM, format!("{call}: the local and remote groups overlap")));
    }
    let agreed = hash_words(&[proposal.min(theirs), proposal.max(theirs), DISC_CREATE]);
    Ok((agreed, remote))
}

/// `MPI_Intercomm_create_from_groups`: both groups are given in full to every member, so the
/// context id is derived from them and `tag` alone, with no message.
pub fn create_from_groups(mpi: &Mpi, me: ProcIdx, local: &Arc<Group>, remote: &Arc<Group>, tag: &str) -> Result<Comm> {
    let call = "MPI_Intercomm_create_from_groups";
    let rank = local.rank_of(me);
    if rank == c::MPI_UNDEFINED {
        return Err(MpiError::new(c::MPI_ERR_GROUP, format!("{call}: the calling process is not in local_group")));
    }
    if remote.procs.iter().any(|&p| local.rank_of(p) != c::MPI_UNDEFINED) {
        return Err(MpiError::new(c::MPI_ERR_GROUP, format!("{call}: local_group and remote_group overlap")));
    }
    let ids = |g: &Group| {
        let words: Vec<u64> = g
            .procs
            .iter()
            .map(|&p| {
                let (job, r) = mpi.proc_id(p);
                hash_words(&[job, r as u64])
            })
            .collect();
        hash_words(&words)
    };
    let (a, b) = (ids(local), ids(remote));
    let t = hash_words(&tag.bytes().map(u64::from).collect::<Vec<_>>());
    let ctx = mpi.derive_ctx_from_groups(hash_words(&[a.min(b), a.max(b), t]));
    Ok(Comm::new_inter(ctx, local.clone(), rank, remote.clone()))
}

/// `MPI_Intercomm_merge`: the group whose `high` is false comes first; when both groups give
/// the same value, the group holding the process with the smaller identity (job, rank) does.
pub fn merge(mpi: &Mpi, inter: &Comm, high: bool) -> Result<Comm> {
    let remote = inter.remote.as_ref().expect("an intercommunicator");
    let ctx = inter.derive_ctx(DISC_MERGE);
    let theirs = mpi.leader_swap(inter, vec![high as u8]);
    let their_high = theirs.first().is_some_and(|&b| b != 0);
    let least = |g: &Group| g.procs.iter().map(|&p| mpi.proc_id(p)).min();
    let local_first = if high != their_high { !high } else { least(&inter.group) < least(remote) };
    let (first, second) = if local_first { (&inter.group, remote) } else { (remote, &inter.group) };
    let mut procs = first.procs.clone();
    procs.extend_from_slice(&second.procs);
    let rank = if local_first { inter.rank } else { first.size() + inter.rank };
    Ok(Comm::new(ctx, Arc::new(Group::new(procs)), rank))
}

/// A duplicate of an intercommunicator (no message).
pub fn dup(inter: &Comm, disc: u64) -> Comm {
    let remote = inter.remote.clone().expect("an intercommunicator");
    Comm::new_inter(inter.derive_ctx(disc), inter.group.clone(), inter.rank, remote)
}

/// `MPI_Comm_split` on an intercommunicator: processes of one color in the local group face
/// those of the same color in the remote group. None (`MPI_COMM_NULL`) for `MPI_UNDEFINED`
/// and for a color the other group does not have.
pub fn split(mpi: &Mpi, inter: &Comm, color: i32, key: i32) -> Result<Option<Comm>> {
    let local = inter.local.as_ref().expect("an intercommunicator");
    let remote = inter.remote.as_ref().expect("an intercommunicator");
    let mine = [color.to_le_bytes(), key.to_le_bytes()].concat();
    let here: Vec<u8> = mpi.allgather(local, mine).concat();
    let there = mpi.leader_swap(inter, here.clone());
    // Every member derives once, whatever its color, so the counters stay in step.
    let ctx = inter.derive_ctx(hash_words(&[DISC_SPLIT, color as u32 as u64]));
    if color == c::MPI_UNDEFINED {
        return Ok(None);
    }
    let members = |all: &[u8], g: &Group| -> Group {
        let mut m: Vec<(i32, usize)> = all
            .chunks_exact(8)
            .enumerate()
            .filter_map(|(r, b)| {
                let col = i32::from_le_bytes(b[0..4].try_into().unwrap());
                let k = i32::from_le_bytes(b[4..8].try_into().unwrap());
                (col == color).then_some((k, r))
            })
            .collect();
        m.sort();
        Group::new(m.iter().map(|&(_, r)| g.procs[r]).collect())
    };
    if there.len() != remote.procs.len() * 8 {
        return Err(MpiError::new(c::MPI_ERR_INTERN, "MPI_Comm_split: malformed colors from the remote group"));
    }
    let mine_g = members(&here, &inter.group);
    let theirs_g = members(&there, remote);
    if theirs_g.procs.is_empty() {
        return Ok(None);
    }
    let rank = mine_g.rank_of(inter.local_proc(inter.rank));
    Ok(Some(Comm::new_inter(ctx, Arc::new(mine_g), rank, Arc::new(theirs_g))))
}

/// `MPI_Comm_create` on an intercommunicator: `g` (a subgroup of the local group, the same at
/// every local member) faces the subgroup the remote group gave. None (`MPI_COMM_NULL`) for a
/// process outside `g`, and when either subgroup is empty.
pub fn create_sub(mpi: &Mpi, inter: &Comm, g: &Arc<Group>) -> Result<Option<Comm>> {
    let remote = inter.remote.as_ref().expect("an intercommunicator");
    let ranks: Vec<u8> = g.procs.iter().flat_map(|&p| (inter.group.rank_of(p) as u32).to_le_bytes()).collect();
    let there = mpi.leader_swap(inter, ranks);
    let ctx = inter.derive_ctx(DISC_SUB);
    let mut procs = Vec::with_capacity(there.len() / 4);
    for b in there.chunks_exact(4) {
        let r = u32::from_le_bytes(b.try_into().unwrap()) as usize;
        let p = remote.procs.get(r).copied().ok_or_else(|| {
            MpiError::new(
                c::MPI_ERR_INTERN,
                format!("MPI_Comm_create: the remote group named its rank {r}, out of range"),
            )
        })?;
        procs.push(p);
    }
    let me = g.rank_of(inter.local_proc(inter.rank));
    if me == c::MPI_UNDEFINED || procs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Comm::new_inter(ctx, g.clone(), me, Arc::new(Group::new(procs)))))
}
