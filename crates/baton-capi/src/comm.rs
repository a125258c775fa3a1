//! Communicators: queries, creation (dup, split, create), intercommunicators, naming, error
//! handlers. The entry points are generated (`abi/bindings.tsv`), except `MPI_Comm_free` and
//! `MPI_Comm_call_errhandler`, whose errors go to a handler found differently.

use crate::attr::{copy_attrs_on_dup, delete_all_attrs};
use crate::errors::guard;
use crate::state::{lib, CommObj, CommRef, Lib, UserErrhandler};
use crate::validate::{Call, Out, StrOut};
use baton_abi::consts as c;
use baton_core::comm::{hash_words, Comm};
use baton_core::error::{MpiError, Result};
use baton_core::group::Group;
use baton_core::intercomm;
use baton_core::topo::Topology;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[inline]
pub(crate) fn size(_cx: Call, _l: &Lib, comm: CommRef, size: Out<c_int>) -> Result<()> {
    size.put(comm.core.size());
    Ok(())
}

#[inline]
pub(crate) fn rank(_cx: Call, _l: &Lib, comm: CommRef, rank: Out<c_int>) -> Result<()> {
    rank.put(comm.core.rank);
    Ok(())
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

/// Registers a communicator made from groups, which has no parent: it takes the error handler
/// and info the call names, and holds a reference to that handler, as
/// `MPI_Comm_set_errhandler`'s communicators do.
pub(crate) fn register_from_groups(l: &Lib, core: Comm, errhandler: usize, info: Vec<(String, String)>) -> usize {
    let obj = CommObj::new(Arc::new(core), "", errhandler);
    let mut t = l.t();
    if let Some(u) = t.errhandlers.get_mut(errhandler) {
        u.refs += 1;
    }
    let h = t.comms.insert(obj.clone());
    drop(t);
    obj.handle.store(h, Ordering::Relaxed);
    *obj.info.lock().unwrap() = info;
    h
}

/// The duplicate of `parent` (its info replaced by `info` when given), registered.
fn dup_of(l: &Lib, parent: &CommObj, info: Option<Vec<(String, String)>>) -> Result<usize> {
    let disc = u64::from_le_bytes(*b"dup\0\0\0\0\0");
    let core = if parent.core.is_inter() {
        intercomm::dup(&parent.core, disc)
    } else {
        Comm::new(parent.core.derive_ctx(disc), parent.core.group.clone(), parent.core.rank)
    };
    // The standard has duplicates keep the topology.
    let h = register_topo(l, parent, core, parent.topo.clone());
    let child = l.t().comms.get(h).cloned().expect("just inserted");
    if let Err(e) = copy_attrs_on_dup(parent.handle.load(Ordering::Relaxed), parent, h, &child) {
        // A failed copy callback fails the dup: the duplicate never reaches the application.
        l.t().comms.remove(h);
        return Err(e);
    }
    *child.info.lock().unwrap() = info.unwrap_or_else(|| parent.info.lock().unwrap().clone());
    Ok(h)
}

pub(crate) fn dup(_cx: Call, l: &Lib, comm: CommRef, newcomm: Out<usize>) -> Result<()> {
    newcomm.put(dup_of(l, &comm, None)?);
    Ok(())
}

pub(crate) fn dup_with_info(
    _cx: Call,
    l: &Lib,
    comm: CommRef,
    info: Vec<(String, String)>,
    newcomm: Out<usize>,
) -> Result<()> {
    newcomm.put(dup_of(l, &comm, Some(info))?);
    Ok(())
}

/// Context ids are derived locally, so the duplicate is ready at once.
fn idup_of(
    l: &Lib,
    comm: &CommObj,
    info: Option<Vec<(String, String)>>,
    newcomm: Out<usize>,
    request: Out<usize>,
) -> Result<()> {
    let h = dup_of(l, comm, info)?;
    let id = l.mpi.finished_request(crate::empty_status());
    newcomm.put(h);
    request.put(crate::request::handle_of(id));
    Ok(())
}

pub(crate) fn idup(_cx: Call, l: &Lib, comm: CommRef, newcomm: Out<usize>, request: Out<usize>) -> Result<()> {
    idup_of(l, &comm, None, newcomm, request)
}

pub(crate) fn idup_with_info(
    _cx: Call,
    l: &Lib,
    comm: CommRef,
    info: Vec<(String, String)>,
    newcomm: Out<usize>,
    request: Out<usize>,
) -> Result<()> {
    idup_of(l, &comm, Some(info), newcomm, request)
}

/// Splits `parent` by (color, key) gathered from every member.
fn split_of(l: &Lib, call: &str, parent: &CommObj, color: c_int, key: c_int) -> Result<usize> {
    if color < 0 && color != c::MPI_UNDEFINED {
        return Err(MpiError::negative(call, "color", color as i64));
    }
    if parent.core.is_inter() {
        return Ok(match intercomm::split(&l.mpi, &parent.core, color, key)? {
            Some(core) => register(l, parent, core),
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
    // Each member sent (color, key); those of this color are ordered by key, then rank.
    let word = |b: &[u8], i: usize| c_int::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    let mut members: Vec<(c_int, usize)> =
        all.iter().enumerate().filter(|(_, b)| word(b, 0) == color).map(|(r, b)| (word(b, 1), r)).collect();
    members.sort();
    let procs: Vec<u32> = members.iter().map(|&(_, r)| parent.core.local_proc(r as c_int)).collect();
    let my = members.iter().position(|&(_, r)| r as c_int == parent.core.rank).unwrap() as c_int;
    Ok(register(l, parent, Comm::new(ctx, Arc::new(Group::new(procs)), my)))
}

pub(crate) fn split(cx: Call, l: &Lib, comm: CommRef, color: c_int, key: c_int, newcomm: Out<usize>) -> Result<()> {
    newcomm.put(split_of(l, cx.name, &comm, color, key)?);
    Ok(())
}

/// The one value of info key `mpi_hw_resource_type` Baton knows: a shared-memory domain. Other
/// resource names (NUMA nodes, caches...) are finer than the host, which is all Baton can tell.
const HW_RESOURCE_KEY: &str = "mpi_hw_resource_type";
const HW_SHARED_MEMORY: &str = "mpi_shared_memory";

pub(crate) fn split_type(
    cx: Call,
    l: &Lib,
    comm: CommRef,
    split_type: c_int,
    key: c_int,
    info: Vec<(String, String)>,
    newcomm: Out<usize>,
) -> Result<()> {
    let call = cx.name;
    // The guided kinds split by the resource info names; a missing or unknown one gives
    // MPI_COMM_NULL (MPI 4.1 section 7.4.2), yet the call stays collective.
    let guided = matches!(split_type, c::MPI_COMM_TYPE_HW_GUIDED | c::MPI_COMM_TYPE_RESOURCE_GUIDED);
    let known = info.iter().any(|(k, v)| k == HW_RESOURCE_KEY && v == HW_SHARED_MEMORY);
    let color = match split_type {
        c::MPI_UNDEFINED => c::MPI_UNDEFINED,
        _ if guided && !known => c::MPI_UNDEFINED,
        // One shared-memory domain per host and job: color by host name and job.
        c::MPI_COMM_TYPE_SHARED
        | c::MPI_COMM_TYPE_HW_UNGUIDED
        | c::MPI_COMM_TYPE_HW_GUIDED
        | c::MPI_COMM_TYPE_RESOURCE_GUIDED => {
            let p = comm.core.local_proc(comm.core.rank);
            let mut words: Vec<u64> = l.mpi.proc_host(p).bytes().map(u64::from).collect();
            // Processes of other jobs (spawned, connected) share no memory segment with this
            // one even on the same host, so the job is part of the color; an intercommunicator
            // joins the two sides by host alone (its groups do not share memory anyway).
            if !comm.core.is_inter() {
                words.push(l.mpi.proc_id(p).0);
            }
            (hash_words(&words) & 0x3fff_ffff) as c_int
        }
        other => {
            let e = format!("{call}: split_type {other} is not a valid split type");
            return Err(MpiError::new(c::MPI_ERR_ARG, e));
        }
    };
    // The hardware-guided kinds ask for a strict subset; one host is the finest Baton knows.
    let mut h = split_of(l, call, &comm, color, key)?;
    if split_type == c::MPI_COMM_TYPE_HW_UNGUIDED && h != c::MPI_COMM_NULL {
        let same = l.t().comms.get(h).map(|o| o.core.size()) == Some(comm.core.size());
        if same {
            free_comm(l, call, h)?;
            h = c::MPI_COMM_NULL;
        }
    }
    newcomm.put(h);
    Ok(())
}

fn check_subgroup(call: &str, parent: &CommObj, g: &Group) -> Result<()> {
    if g.procs.iter().any(|&p| parent.core.group.rank_of(p) == c::MPI_UNDEFINED) {
        return Err(MpiError::new(c::MPI_ERR_GROUP, format!("{call}: group has a process outside the communicator")));
    }
    Ok(())
}

pub(crate) fn create(cx: Call, l: &Lib, comm: CommRef, group: Arc<Group>, newcomm: Out<usize>) -> Result<()> {
    check_subgroup(cx.name, &comm, &group)?;
    let h = if comm.core.is_inter() {
        match intercomm::create_sub(&l.mpi, &comm.core, &group)? {
            Some(core) => register(l, &comm, core),
            None => c::MPI_COMM_NULL,
        }
    } else {
        let ctx = comm.core.derive_ctx(hash_words(&group.procs.iter().map(|&p| p as u64).collect::<Vec<_>>()));
        match group.rank_of(comm.core.local_proc(comm.core.rank)) {
            c::MPI_UNDEFINED => c::MPI_COMM_NULL,
            me => register(l, &comm, Comm::new(ctx, group.clone(), me)),
        }
    };
    newcomm.put(h);
    Ok(())
}

pub(crate) fn create_group(
    cx: Call,
    l: &Lib,
    comm: CommRef,
    group: Arc<Group>,
    tag: c_int,
    newcomm: Out<usize>,
) -> Result<()> {
    check_subgroup(cx.name, &comm, &group)?;
    let me = group.rank_of(comm.core.local_proc(comm.core.rank));
    if me == c::MPI_UNDEFINED {
        return Err(MpiError::new(c::MPI_ERR_GROUP, format!("{}: the calling process is not in group", cx.name)));
    }
    let ctx = comm.core.derive_ctx_for_group(tag, &group);
    newcomm.put(register(l, &comm, Comm::new(ctx, group.clone(), me)));
    Ok(())
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

/// # Safety
/// `comm` must be null or valid for reading and writing one handle.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_free(comm: *mut usize) -> c_int {
    // Errors go to the handler of the communicator being freed.
    // SAFETY: read only when non-null, per the caller's contract.
    let h = if comm.is_null() { c::MPI_COMM_NULL } else { unsafe { *comm } };
    guard(h, || {
        let l = lib("MPI_Comm_free")?;
        crate::nonnull_mut("MPI_Comm_free", "comm", comm)?;
        free_comm(l, "MPI_Comm_free", h)?;
        // SAFETY: checked non-null.
        unsafe { *comm = c::MPI_COMM_NULL };
        Ok(())
    })
}

#[inline]
pub(crate) fn compare(_cx: Call, _l: &Lib, comm1: CommRef, comm2: CommRef, result: Out<c_int>) -> Result<()> {
    let (ca, cb) = (&comm1, &comm2);
    let r = if Arc::ptr_eq(ca, cb) {
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
    result.put(r);
    Ok(())
}

#[inline]
pub(crate) fn test_inter(_cx: Call, _l: &Lib, comm: CommRef, flag: Out<c_int>) -> Result<()> {
    flag.put(comm.core.is_inter() as c_int);
    Ok(())
}

/// The remote group of `cm`, or an MPI_ERR_COMM error naming `call` for an intracommunicator.
fn remote_of(call: &str, cm: &CommObj) -> Result<Arc<Group>> {
    cm.core.remote.clone().ok_or_else(|| MpiError::not_intercomm(call, "comm"))
}

pub(crate) fn remote_size(cx: Call, _l: &Lib, comm: CommRef, size: Out<c_int>) -> Result<()> {
    size.put(remote_of(cx.name, &comm)?.size());
    Ok(())
}

pub(crate) fn remote_group(cx: Call, l: &Lib, comm: CommRef, group: Out<usize>) -> Result<()> {
    let g = remote_of(cx.name, &comm)?;
    group.put(l.new_group((*g).clone()));
    Ok(())
}

pub(crate) fn intercomm_create(
    cx: Call,
    l: &'static Lib,
    local_comm: CommRef,
    local_leader: c_int,
    peer_comm: usize,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: Out<usize>,
) -> Result<()> {
    // The peer communicator means something at the local leader only; an error met there
    // still goes to the group, so that nobody waits for the leader.
    let peer =
        (local_comm.core.rank == local_leader).then(|| crate::validate::comm(l, cx.name, "peer_comm", peer_comm));
    let args = peer.as_ref().map(|p| match p {
        Ok(p) => Ok((&*p.core, remote_leader)),
        Err(e) => Err(e.clone()),
    });
    let core = intercomm::create(&l.mpi, &local_comm.core, local_leader, args, tag)?;
    newintercomm.put(register(l, &local_comm, core));
    Ok(())
}

pub(crate) fn create_from_groups(
    _cx: Call,
    l: &Lib,
    local_group: Arc<Group>,
    _local_leader: c_int,
    remote_group: Arc<Group>,
    _remote_leader: c_int,
    stringtag: String,
    info: Vec<(String, String)>,
    errhandler: usize,
    newintercomm: Out<usize>,
) -> Result<()> {
    let core = intercomm::create_from_groups(&l.mpi, l.mpi.me, &local_group, &remote_group, &stringtag)?;
    newintercomm.put(register_from_groups(l, core, errhandler, info));
    Ok(())
}

pub(crate) fn merge(cx: Call, l: &Lib, intercomm: CommRef, high: bool, newintracomm: Out<usize>) -> Result<()> {
    if !intercomm.core.is_inter() {
        return Err(MpiError::not_intercomm(cx.name, "intercomm"));
    }
    let core = intercomm::merge(&l.mpi, &intercomm.core, high)?;
    newintracomm.put(register(l, &intercomm, core));
    Ok(())
}

pub(crate) fn group(_cx: Call, l: &Lib, comm: CommRef, group: Out<usize>) -> Result<()> {
    group.put(l.new_group((*comm.core.group).clone()));
    Ok(())
}

pub(crate) fn set_name(_cx: Call, _l: &Lib, comm: CommRef, comm_name: String) -> Result<()> {
    let max = c::MPI_MAX_OBJECT_NAME as usize - 1;
    *comm.name.lock().unwrap() = comm_name.chars().take(max).collect();
    Ok(())
}

pub(crate) fn get_name(cx: Call, l: &'static Lib, comm: usize, comm_name: StrOut, resultlen: Out<c_int>) -> Result<()> {
    // MPI 4.1 names the null handle too (section 7.8).
    if comm == c::MPI_COMM_NULL {
        comm_name.write("MPI_COMM_NULL", Some(&resultlen));
        return Ok(());
    }
    let comm = crate::validate::comm(l, cx.name, "comm", comm)?;
    let n = comm.name.lock().unwrap().clone();
    comm_name.write(&n, Some(&resultlen));
    Ok(())
}

pub(crate) fn set_info(_cx: Call, _l: &Lib, comm: CommRef, info: Vec<(String, String)>) -> Result<()> {
    *comm.info.lock().unwrap() = info;
    Ok(())
}

pub(crate) fn get_info(_cx: Call, _l: &Lib, comm: CommRef, info_used: Out<usize>) -> Result<()> {
    let kv = comm.info.lock().unwrap().clone();
    info_used.put(crate::info::infos().insert(kv));
    Ok(())
}

// ----- error handlers -----

pub(crate) fn create_errhandler(
    _cx: Call,
    l: &Lib,
    comm_errhandler_fn: *mut c_void,
    errhandler: Out<usize>,
) -> Result<()> {
    errhandler.put(l.t().errhandlers.insert(UserErrhandler { func: comm_errhandler_fn as usize, refs: 1 }));
    Ok(())
}

pub(crate) fn set_errhandler(_cx: Call, l: &Lib, comm: CommRef, errhandler: usize) -> Result<()> {
    let mut t = l.t();
    if let Some(u) = t.errhandlers.get_mut(errhandler) {
        u.refs += 1;
    }
    let old = comm.errhandler.swap(errhandler, Ordering::SeqCst);
    release_errhandler(&mut t, old);
    Ok(())
}

pub(crate) fn release_errhandler(t: &mut crate::state::Tables, h: usize) {
    if let Some(u) = t.errhandlers.get_mut(h) {
        u.refs -= 1;
        if u.refs == 0 {
            t.errhandlers.remove(h);
        }
    }
}

pub(crate) fn get_errhandler(_cx: Call, l: &Lib, comm: CommRef, errhandler: Out<usize>) -> Result<()> {
    let h = comm.errhandler.load(Ordering::SeqCst);
    // The caller gets a reference of its own, released by MPI_Errhandler_free.
    if let Some(u) = l.t().errhandlers.get_mut(h) {
        u.refs += 1;
    }
    errhandler.put(h);
    Ok(())
}

pub(crate) fn errhandler_free(cx: Call, l: &Lib, errhandler: Out<usize>) -> Result<()> {
    let h = crate::validate::errhandler(l, cx.name, "errhandler", errhandler.get())?;
    release_errhandler(&mut l.t(), h);
    errhandler.put(c::MPI_ERRHANDLER_NULL);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_call_errhandler(comm: usize, code: c_int) -> c_int {
    // A bad communicator is reported (to MPI_COMM_WORLD's handler); a good one gets `code`
    // through its own handler, and the call itself succeeds.
    let found = lib("MPI_Comm_call_errhandler").and_then(|l| l.comm("MPI_Comm_call_errhandler", comm).map(|_| ()));
    if let Err(e) = found {
        return crate::errors::raise(comm, e);
    }
    let class = crate::errors::class_of(code).unwrap_or(c::MPI_ERR_UNKNOWN);
    let text = crate::errors::string_of(code).unwrap_or_default();
    crate::errors::raise_code(comm, code, MpiError::new(class, text));
    c::MPI_SUCCESS
}
