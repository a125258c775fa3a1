//! Communicators: queries, creation (dup, split, create), intercommunicators, naming, error
//! handlers.

use crate::attr::{copy_attrs_on_dup, delete_all_attrs};
use crate::errors::guard;
use crate::state::{lib, CommObj, Lib, UserErrhandler};
use crate::{cstr_in, cstr_out, empty_status, nonnull_mut};
use baton_abi::consts as c;
use baton_core::comm::{hash_words, Comm};
use baton_core::error::{MpiError, Result};
use baton_core::group::Group;
use baton_core::intercomm;
use baton_core::topo::Topology;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) fn out<T: Copy>(call: &str, arg: &str, p: *mut T, v: T) -> Result<()> {
    nonnull_mut(call, arg, p)?;
    // SAFETY: checked non-null; the caller owns the location.
    unsafe { *p = v };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_size(comm: usize, size: *mut c_int) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_size")?;
        let cm = l.comm("MPI_Comm_size", comm)?;
        out("MPI_Comm_size", "size", size, cm.core.size())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_rank(comm: usize, rank: *mut c_int) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_rank")?;
        let cm = l.comm("MPI_Comm_rank", comm)?;
        out("MPI_Comm_rank", "rank", rank, cm.core.rank)
    })
}

/// Registers a new communicator derived from `parent` (inherits its error handler).
pub(crate) fn register(l: &Lib, parent: &CommObj, core: Comm) -> usize {
    register_topo(l, parent, core, None)
}

/// Like [`register`], with a process topology attached.
pub(crate) fn register_topo(l: &Lib, parent: &CommObj, core: Comm, topo: Option<Arc<Topology>>) -> usize {
    let obj = CommObj::with_topo(Arc::new(core), "", parent.errhandler.load(Ordering::SeqCst), topo);
    let h = l.t().comms.insert(obj.clone());
    obj.handle.store(h, Ordering::Relaxed);
    h
}

fn dup(l: &Lib, call: &str, comm: usize) -> Result<usize> {
    let parent = l.comm(call, comm)?;
    let disc = u64::from_le_bytes(*b"dup\0\0\0\0\0");
    let core = if parent.core.is_inter() {
        intercomm::dup(&parent.core, disc)
    } else {
        Comm::new(parent.core.derive_ctx(disc), parent.core.group.clone(), parent.core.rank)
    };
    // The standard has duplicates keep the topology.
    let h = register_topo(l, &parent, core, parent.topo.clone());
    let child = l.t().comms.get(h).cloned().expect("just inserted");
    copy_attrs_on_dup(comm, &parent, h, &child)?;
    *child.info.lock().unwrap() = parent.info.lock().unwrap().clone();
    Ok(h)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup(comm: usize, newcomm: *mut usize) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_dup")?;
        nonnull_mut("MPI_Comm_dup", "newcomm", newcomm)?;
        let h = dup(l, "MPI_Comm_dup", comm)?;
        out("MPI_Comm_dup", "newcomm", newcomm, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup_with_info(comm: usize, info: usize, newcomm: *mut usize) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_dup_with_info")?;
        nonnull_mut("MPI_Comm_dup_with_info", "newcomm", newcomm)?;
        let kv = crate::info::info_pairs("MPI_Comm_dup_with_info", info)?;
        let h = dup(l, "MPI_Comm_dup_with_info", comm)?;
        if let Some(o) = l.t().comms.get(h) {
            *o.info.lock().unwrap() = kv;
        }
        out("MPI_Comm_dup_with_info", "newcomm", newcomm, h)
    })
}

fn idup(call: &str, comm: usize, info: Option<usize>, newcomm: *mut usize, request: *mut usize) -> c_int {
    guard(comm, || {
        let l = lib(call)?;
        nonnull_mut(call, "newcomm", newcomm)?;
        nonnull_mut(call, "request", request)?;
        let kv = info.map(|i| crate::info::info_pairs(call, i)).transpose()?;
        // Context ids are derived locally, so the duplicate is ready at once.
        let h = dup(l, call, comm)?;
        if let (Some(kv), Some(o)) = (kv, l.t().comms.get(h)) {
            *o.info.lock().unwrap() = kv;
        }
        let id = l.mpi.lock().engine.completed(empty_status());
        let r = crate::request::handle_of(id);
        out(call, "newcomm", newcomm, h)?;
        out(call, "request", request, r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_idup(comm: usize, newcomm: *mut usize, request: *mut usize) -> c_int {
    idup("MPI_Comm_idup", comm, None, newcomm, request)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_idup_with_info(
    comm: usize,
    info: usize,
    newcomm: *mut usize,
    request: *mut usize,
) -> c_int {
    idup("MPI_Comm_idup_with_info", comm, Some(info), newcomm, request)
}

/// Splits `parent` by (color, key) gathered from every member.
fn split(l: &Lib, call: &str, comm: usize, color: c_int, key: c_int) -> Result<usize> {
    let parent = l.comm(call, comm)?;
    if color < 0 && color != c::MPI_UNDEFINED {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: color {color} is negative")));
    }
    if parent.core.is_inter() {
        return Ok(match intercomm::split(&l.mpi, &parent.core, color, key)? {
            Some(core) => register(l, &parent, core),
            None => c::MPI_COMM_NULL,
        });
    }
    let mine = [color.to_le_bytes(), key.to_le_bytes()].concat();
    let all = l.mpi.runtime().allgather(&parent.core, mine);
    // Every member derives once, whatever its color, so the counters stay in step.
    let ctx = parent.core.derive_ctx(hash_words(&[0x73706c6974, color as u32 as u64]));
    if color == c::MPI_UNDEFINED {
        return Ok(c::MPI_COMM_NULL);
    }
    let mut members: Vec<(c_int, usize)> = all
        .iter()
        .enumerate()
        .filter_map(|(r, b)| {
            let col = c_int::from_le_bytes(b[0..4].try_into().unwrap());
            let k = c_int::from_le_bytes(b[4..8].try_into().unwrap());
            (col == color).then_some((k, r))
        })
        .collect();
    members.sort();
    let procs: Vec<u32> = members.iter().map(|&(_, r)| parent.core.local_proc(r as c_int)).collect();
    let my = members.iter().position(|&(_, r)| r as c_int == parent.core.rank).unwrap() as c_int;
    Ok(register(l, &parent, Comm::new(ctx, Arc::new(Group::new(procs)), my)))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_split(comm: usize, color: c_int, key: c_int, newcomm: *mut usize) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_split")?;
        nonnull_mut("MPI_Comm_split", "newcomm", newcomm)?;
        let h = split(l, "MPI_Comm_split", comm, color, key)?;
        out("MPI_Comm_split", "newcomm", newcomm, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_split_type(
    comm: usize,
    split_type: c_int,
    key: c_int,
    _info: usize,
    newcomm: *mut usize,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_split_type";
        let l = lib(call)?;
        nonnull_mut(call, "newcomm", newcomm)?;
        let cm = l.comm(call, comm)?;
        require_intra(call, "comm", &cm)?;
        let color = match split_type {
            c::MPI_UNDEFINED => c::MPI_UNDEFINED,
            // One shared-memory domain per host and job: color by host name and job.
            c::MPI_COMM_TYPE_SHARED
            | c::MPI_COMM_TYPE_HW_UNGUIDED
            | c::MPI_COMM_TYPE_HW_GUIDED
            | c::MPI_COMM_TYPE_RESOURCE_GUIDED => {
                // Processes of other jobs (spawned, connected) share no memory segment with
                // this one even on the same host, so the job is part of the color.
                let parent = l.comm(call, comm)?;
                let p = parent.core.local_proc(parent.core.rank);
                let mut words: Vec<u64> = l.mpi.proc_host(p).bytes().map(u64::from).collect();
                words.push(l.mpi.proc_id(p).0);
                (hash_words(&words) & 0x3fff_ffff) as c_int
            }
            other => {
                return Err(MpiError::new(
                    c::MPI_ERR_ARG,
                    format!("{call}: split_type {other} is not a valid split type"),
                ))
            }
        };
        // The hardware-guided kinds ask for a strict subset; one host is the finest Baton knows.
        let h = split(l, call, comm, color, key)?;
        let h = if matches!(split_type, c::MPI_COMM_TYPE_HW_UNGUIDED) && h != c::MPI_COMM_NULL {
            let same = l.t().comms.get(h).map(|o| o.core.size()) == Some(l.comm(call, comm)?.core.size());
            if same {
                free_comm(l, call, h)?;
                c::MPI_COMM_NULL
            } else {
                h
            }
        } else {
            h
        };
        out(call, "newcomm", newcomm, h)
    })
}

fn check_subgroup(call: &str, parent: &CommObj, g: &Group) -> Result<()> {
    for p in &g.procs {
        if parent.core.group.rank_of(*p) == c::MPI_UNDEFINED {
            return Err(MpiError::new(
                c::MPI_ERR_GROUP,
                format!("{call}: group has a process outside the communicator"),
            ));
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create(comm: usize, group: usize, newcomm: *mut usize) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_create";
        let l = lib(call)?;
        nonnull_mut(call, "newcomm", newcomm)?;
        let parent = l.comm(call, comm)?;
        let g = l.group(call, group)?;
        check_subgroup(call, &parent, &g)?;
        if parent.core.is_inter() {
            let h = match intercomm::create_sub(&l.mpi, &parent.core, &g)? {
                Some(core) => register(l, &parent, core),
                None => c::MPI_COMM_NULL,
            };
            return out(call, "newcomm", newcomm, h);
        }
        let gh = hash_words(&g.procs.iter().map(|&p| p as u64).collect::<Vec<_>>());
        let ctx = parent.core.derive_ctx(gh);
        let me = g.rank_of(parent.core.local_proc(parent.core.rank));
        let h =
            if me == c::MPI_UNDEFINED { c::MPI_COMM_NULL } else { register(l, &parent, Comm::new(ctx, g.clone(), me)) };
        out(call, "newcomm", newcomm, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_group(comm: usize, group: usize, tag: c_int, newcomm: *mut usize) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_create_group";
        let l = lib(call)?;
        nonnull_mut(call, "newcomm", newcomm)?;
        let parent = l.comm(call, comm)?;
        require_intra(call, "comm", &parent)?;
        let g = l.group(call, group)?;
        check_subgroup(call, &parent, &g)?;
        if tag < 0 {
            return Err(MpiError::new(c::MPI_ERR_TAG, format!("{call}: tag {tag} is negative")));
        }
        let me = g.rank_of(parent.core.local_proc(parent.core.rank));
        if me == c::MPI_UNDEFINED {
            return Err(MpiError::new(c::MPI_ERR_GROUP, format!("{call}: the calling process is not in group")));
        }
        let ctx = parent.core.derive_ctx_for_group(tag, &g);
        let h = register(l, &parent, Comm::new(ctx, g.clone(), me));
        out(call, "newcomm", newcomm, h)
    })
}

pub(crate) fn free_comm(l: &Lib, call: &str, h: usize) -> Result<()> {
    if h == c::MPI_COMM_WORLD || h == c::MPI_COMM_SELF {
        return Err(MpiError::new(c::MPI_ERR_COMM, format!("{call}: predefined communicators cannot be freed")));
    }
    let obj = l.comm(call, h)?;
    delete_all_attrs(l, h, &obj)?;
    // Collective (as the call is): its shared-memory area goes back once all are done with it.
    l.mpi.detach_shm(&obj.core);
    l.t().comms.remove(h);
    crate::state::COMM_EPOCH.fetch_add(1, Ordering::AcqRel);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_free(comm: *mut usize) -> c_int {
    let h = if comm.is_null() { c::MPI_COMM_NULL } else { unsafe { *comm } };
    guard(h, || {
        let l = lib("MPI_Comm_free")?;
        nonnull_mut("MPI_Comm_free", "comm", comm)?;
        free_comm(l, "MPI_Comm_free", h)?;
        out("MPI_Comm_free", "comm", comm, c::MPI_COMM_NULL)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_compare(a: usize, b: usize, result: *mut c_int) -> c_int {
    guard(a, || {
        let call = "MPI_Comm_compare";
        let l = lib(call)?;
        let (ca, cb) = (l.comm(call, a)?, l.comm(call, b)?);
        let r = if Arc::ptr_eq(&ca, &cb) {
            c::MPI_IDENT
        } else {
            match (&ca.core.remote, &cb.core.remote) {
                // The weaker of the two groups' comparisons.
                (Some(ra), Some(rb)) => match (ca.core.group.compare(&cb.core.group), ra.compare(rb)) {
                    (c::MPI_IDENT, c::MPI_IDENT) => c::MPI_CONGRUENT,
                    (c::MPI_UNEQUAL, _) | (_, c::MPI_UNEQUAL) => c::MPI_UNEQUAL,
                    _ => c::MPI_SIMILAR,
                },
                (None, None) => match ca.core.group.compare(&cb.core.group) {
                    c::MPI_IDENT => c::MPI_CONGRUENT,
                    other => other,
                },
                _ => c::MPI_UNEQUAL,
            }
        };
        out(call, "result", result, r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_test_inter(comm: usize, flag: *mut c_int) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_test_inter")?;
        let cm = l.comm("MPI_Comm_test_inter", comm)?;
        out("MPI_Comm_test_inter", "flag", flag, cm.core.is_inter() as c_int)
    })
}

/// An MPI_ERR_COMM error unless `cm` is an intracommunicator (`arg` names it).
pub(crate) fn require_intra(call: &str, arg: &str, cm: &CommObj) -> Result<()> {
    if cm.core.is_inter() {
        return Err(MpiError::new(
            c::MPI_ERR_COMM,
            format!("{call}: {arg} is an intercommunicator; this call needs an intracommunicator"),
        ));
    }
    Ok(())
}

/// The remote group of `cm`, or an MPI_ERR_COMM error naming `call` for an intracommunicator.
fn remote_of(call: &str, cm: &CommObj) -> Result<Arc<Group>> {
    cm.core.remote.clone().ok_or_else(|| {
        MpiError::new(c::MPI_ERR_COMM, format!("{call}: comm is an intracommunicator; it has no remote group"))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_remote_size(comm: usize, size: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_remote_size";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = remote_of(call, &cm)?;
        out(call, "size", size, g.size())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_remote_group(comm: usize, group: *mut usize) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_remote_group";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = remote_of(call, &cm)?;
        nonnull_mut(call, "group", group)?;
        let h = l.new_group((*g).clone());
        out(call, "group", group, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_create(
    local_comm: usize,
    local_leader: c_int,
    peer_comm: usize,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut usize,
) -> c_int {
    guard(local_comm, || {
        let call = "MPI_Intercomm_create";
        let l = lib(call)?;
        nonnull_mut(call, "newintercomm", newintercomm)?;
        let local = l.comm(call, local_comm)?;
        require_intra(call, "local_comm", &local)?;
        // The peer communicator means something at the local leader only; an error met there
        // still goes to the group, so that nobody waits for the leader.
        let peer = (local.core.rank == local_leader).then(|| l.comm_arc(call, peer_comm));
        let args = peer.as_ref().map(|p| match p {
            Ok(p) => Ok((&*p.core, remote_leader)),
            Err(e) => Err(MpiError::new(e.class, e.msg.replace("comm ", "peer_comm "))),
        });
        let core = intercomm::create(&l.mpi, &local.core, local_leader, args, tag)?;
        let h = register(l, &local, core);
        out(call, "newintercomm", newintercomm, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_create_from_groups(
    local_group: usize,
    local_leader: c_int,
    remote_group: usize,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: usize,
    errhandler: usize,
    newintercomm: *mut usize,
) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Intercomm_create_from_groups";
        let l = lib(call)?;
        nonnull_mut(call, "newintercomm", newintercomm)?;
        let (lg, rg) = (l.group(call, local_group)?, l.group(call, remote_group)?);
        for (what, r, g) in [("local_leader", local_leader, &lg), ("remote_leader", remote_leader, &rg)] {
            if !(0..g.size()).contains(&r) {
                return Err(MpiError::new(
                    c::MPI_ERR_RANK,
                    format!("{call}: {what} {r} is out of range for a group of size {}", g.size()),
                ));
            }
        }
        // SAFETY: NUL-terminated string per the MPI contract (checked non-null).
        let tag = unsafe { cstr_in(call, "stringtag", stringtag)? };
        let kv = crate::info::info_pairs(call, info)?;
        if !errhandler_valid(l, errhandler) {
            return Err(MpiError::new(
                c::MPI_ERR_ERRHANDLER,
                format!("{call}: errhandler {errhandler:#x} is not a valid error handler"),
            ));
        }
        let core = intercomm::create_from_groups(&l.mpi, l.mpi.me, &lg, &rg, &tag)?;
        let obj = CommObj::new(Arc::new(core), "", errhandler);
        let mut t = l.t();
        if let Some(u) = t.errhandlers.get_mut(errhandler) {
            u.refs += 1;
        }
        let h = t.comms.insert(obj.clone());
        drop(t);
        obj.handle.store(h, Ordering::Relaxed);
        *obj.info.lock().unwrap() = kv;
        out(call, "newintercomm", newintercomm, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_merge(intercomm: usize, high: c_int, newintracomm: *mut usize) -> c_int {
    guard(intercomm, || {
        let call = "MPI_Intercomm_merge";
        let l = lib(call)?;
        nonnull_mut(call, "newintracomm", newintracomm)?;
        let cm = l.comm(call, intercomm)?;
        if !cm.core.is_inter() {
            return Err(MpiError::new(
                c::MPI_ERR_COMM,
                format!("{call}: intercomm is an intracommunicator; this call needs an intercommunicator"),
            ));
        }
        let core = intercomm::merge(&l.mpi, &cm.core, high != 0)?;
        let h = register(l, &cm, core);
        out(call, "newintracomm", newintracomm, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_group(comm: usize, group: *mut usize) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_group")?;
        let cm = l.comm("MPI_Comm_group", comm)?;
        nonnull_mut("MPI_Comm_group", "group", group)?;
        let h = l.new_group((*cm.core.group).clone());
        out("MPI_Comm_group", "group", group, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_name(comm: usize, name: *const c_char) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_set_name")?;
        let cm = l.comm("MPI_Comm_set_name", comm)?;
        // SAFETY: NUL-terminated string per the MPI contract (checked non-null).
        let s = unsafe { cstr_in("MPI_Comm_set_name", "comm_name", name)? };
        let max = c::MPI_MAX_OBJECT_NAME as usize - 1;
        *cm.name.lock().unwrap() = s.chars().take(max).collect();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_name(comm: usize, name: *mut c_char, len: *mut c_int) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_get_name")?;
        let cm = l.comm("MPI_Comm_get_name", comm)?;
        nonnull_mut("MPI_Comm_get_name", "comm_name", name)?;
        nonnull_mut("MPI_Comm_get_name", "resultlen", len)?;
        let n = cm.name.lock().unwrap().clone();
        // SAFETY: the caller provides MPI_MAX_OBJECT_NAME bytes.
        unsafe { cstr_out(&n, name, c::MPI_MAX_OBJECT_NAME as usize, len) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_info(comm: usize, info: usize) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_set_info")?;
        let cm = l.comm("MPI_Comm_set_info", comm)?;
        let kv = crate::info::info_pairs("MPI_Comm_set_info", info)?;
        *cm.info.lock().unwrap() = kv;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_info(comm: usize, info: *mut usize) -> c_int {
    guard(comm, || {
        let l = lib("MPI_Comm_get_info")?;
        let cm = l.comm("MPI_Comm_get_info", comm)?;
        nonnull_mut("MPI_Comm_get_info", "info_used", info)?;
        let kv = cm.info.lock().unwrap().clone();
        let h = crate::info::infos().insert(kv);
        out("MPI_Comm_get_info", "info_used", info, h)
    })
}

// ----- error handlers -----

fn errhandler_valid(l: &Lib, h: usize) -> bool {
    matches!(h, c::MPI_ERRORS_ARE_FATAL | c::MPI_ERRORS_RETURN | c::MPI_ERRORS_ABORT)
        || l.t().errhandlers.get(h).is_some()
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_errhandler(func: *mut c_void, errhandler: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Comm_create_errhandler";
        let l = lib(call)?;
        crate::nonnull_mut(call, "comm_errhandler_fn", func)?;
        nonnull_mut(call, "errhandler", errhandler)?;
        let h = l.t().errhandlers.insert(UserErrhandler { func: func as usize, refs: 1 });
        out(call, "errhandler", errhandler, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_errhandler(comm: usize, errhandler: usize) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_set_errhandler";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        if !errhandler_valid(l, errhandler) {
            return Err(MpiError::new(
                c::MPI_ERR_ERRHANDLER,
                format!("{call}: errhandler {errhandler:#x} is not a valid error handler"),
            ));
        }
        let mut t = l.t();
        if let Some(u) = t.errhandlers.get_mut(errhandler) {
            u.refs += 1;
        }
        let old = cm.errhandler.swap(errhandler, Ordering::SeqCst);
        release_errhandler(&mut t, old);
        Ok(())
    })
}

fn release_errhandler(t: &mut crate::state::Tables, h: usize) {
    if let Some(u) = t.errhandlers.get_mut(h) {
        u.refs -= 1;
        if u.refs == 0 {
            t.errhandlers.remove(h);
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_errhandler(comm: usize, errhandler: *mut usize) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_get_errhandler";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let h = cm.errhandler.load(Ordering::SeqCst);
        // The caller gets a reference of its own, released by MPI_Errhandler_free.
        if let Some(u) = l.t().errhandlers.get_mut(h) {
            u.refs += 1;
        }
        out(call, "errhandler", errhandler, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_free(errhandler: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Errhandler_free";
        let l = lib(call)?;
        nonnull_mut(call, "errhandler", errhandler)?;
        // SAFETY: checked non-null.
        let h = unsafe { *errhandler };
        if !errhandler_valid(l, h) {
            return Err(MpiError::new(
                c::MPI_ERR_ERRHANDLER,
                format!("{call}: errhandler {h:#x} is not a valid error handler"),
            ));
        }
        release_errhandler(&mut l.t(), h);
        out(call, "errhandler", errhandler, c::MPI_ERRHANDLER_NULL)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_call_errhandler(comm: usize, code: c_int) -> c_int {
    let ok = lib("MPI_Comm_call_errhandler").and_then(|l| l.comm("MPI_Comm_call_errhandler", comm)).is_ok();
    if !ok {
        return guard(comm, || {
            lib("MPI_Comm_call_errhandler").and_then(|l| l.comm("MPI_Comm_call_errhandler", comm)).map(|_| ())
        });
    }
    let class = crate::errors::class_of(code).unwrap_or(c::MPI_ERR_UNKNOWN);
    let text = crate::errors::string_of(code).unwrap_or_default();
    crate::errors::raise_code(comm, code, MpiError::new(class, text));
    c::MPI_SUCCESS
}
