//! Dynamic processes: spawn, ports, accept/connect, names, join, disconnect, the parent.
//! The work is in `baton_core::dpm`; this is the arguments that matter at the root only, and
//! handles. The entry points are generated (`abi/bindings.tsv`), except `MPI_Comm_disconnect`,
//! whose errors go to the handler of the communicator it frees.

use crate::comm::{free_comm, register};
use crate::errors::guard;
use crate::state::{lib, CommObj, CommRef, Lib};
use crate::validate::{Call, Out, StrOut};
use crate::{cstr_in, nonnull_mut};
use baton_abi::consts as c;
use baton_core::comm::Comm;
use baton_core::dpm::{self, SpawnCmd};
use baton_core::error::{MpiError, Result};
use std::ffi::{c_char, c_int};

/// An info argument's (key, value) pairs (role `info`).
type Pairs = Vec<(String, String)>;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// In a spawned process, right after `MPI_Init`: the intercommunicator to the parents.
pub(crate) fn connect_parent(l: &Lib) -> Result<()> {
    let Some(port) = l.mpi.parent_port.clone() else { return Ok(()) };
    let core = dpm::connect_parent(&l.mpi, &port)
        .map_err(|e| MpiError::new(e.class, format!("MPI_Init: cannot connect to the parent job: {}", e.msg)))?;
    let h = register(l, &l.world, core);
    // The standard's default name for the parent communicator (MPI 4.1 section 7.8).
    if let Some(obj) = l.t().comms.get(h) {
        *obj.name.lock().unwrap() = "MPI_COMM_PARENT".to_string();
    }
    l.parent.store(h, Ordering::SeqCst);
    Ok(())
}

pub(crate) fn get_parent(_cx: Call, l: &Lib, parent: Out<usize>) -> Result<()> {
    let mut h = l.parent.load(Ordering::SeqCst);
    // Freed with MPI_Comm_free: there is no parent communicator any more.
    if h != c::MPI_COMM_NULL && l.t().comms.get(h).is_none() {
        h = c::MPI_COMM_NULL;
    }
    parent.put(h);
    Ok(())
}

/// A NULL-terminated `char *argv[]` (`MPI_ARGV_NULL`: none).
unsafe fn argv_in(call: &str, argv: *mut *mut c_char) -> Result<Vec<String>> {
    let mut v = Vec::new();
    if argv.is_null() {
        return Ok(v);
    }
    for i in 0.. {
        // SAFETY: the array is NULL-terminated per the MPI contract.
        let a = unsafe { *argv.add(i) };
        if a.is_null() {
            break;
        }
        // SAFETY: each element is a NUL-terminated string.
        v.push(unsafe { cstr_in(call, "argv", a) }?);
        if i > 100_000 {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: argv is not NULL-terminated")));
        }
    }
    Ok(v)
}

/// The reserved keys the launcher understands; the working directory defaults to ours.
fn spawn_info(call: &str, info: usize) -> Result<Vec<(String, String)>> {
    let mut kv = crate::info::info_pairs(call, info)?;
    if !kv.iter().any(|(k, _)| k == "wdir") {
        if let Ok(d) = std::env::current_dir() {
            kv.push(("wdir".into(), d.to_string_lossy().into_owned()));
        }
    }
    Ok(kv)
}

fn check_maxprocs(call: &str, n: c_int) -> Result<u32> {
    if n < 1 {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: maxprocs {n} must be at least 1")));
    }
    Ok(n as u32)
}

/// Finishes a spawn: errcodes, the new handle (`MPI_COMM_NULL` when it failed).
fn spawn_finish(
    cx: Call,
    l: &Lib,
    cmds: Option<Result<Vec<SpawnCmd>>>,
    (root, comm): (c_int, &CommObj),
    intercomm: Out<usize>,
    errcodes: *mut c_int,
) -> Result<()> {
    let (asked, r) = dpm::spawn(&l.mpi, cx.name, cmds, root, &comm.core);
    let code = match &r {
        Ok(_) => c::MPI_SUCCESS,
        Err(e) => e.class,
    };
    if !errcodes.is_null() {
        // SAFETY: the caller provides one entry per process asked for.
        unsafe { std::slice::from_raw_parts_mut(errcodes, asked) }.fill(code);
    }
    finish(l, comm, r, intercomm)
}

/// Registers the intercommunicator a spawn, accept or connect made over `comm` (it takes
/// `comm`'s error handler), or gives `MPI_COMM_NULL` and the error.
fn finish(l: &Lib, comm: &CommObj, r: Result<Comm>, newcomm: Out<usize>) -> Result<()> {
    match r {
        Ok(core) => {
            newcomm.put(register(l, comm, core));
            Ok(())
        }
        Err(e) => {
            newcomm.put(c::MPI_COMM_NULL);
            Err(e)
        }
    }
}

/// One command as the root passed it: program, `argv` (null: none), maxprocs, info.
unsafe fn spawn_cmd(
    call: &str,
    command_arg: &str,
    command: *mut c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: usize,
) -> Result<SpawnCmd> {
    // SAFETY: NUL-terminated strings and a NULL-terminated argv, per the MPI contract.
    let (program, args) = unsafe { (cstr_in(call, command_arg, command)?, argv_in(call, argv)?) };
    Ok(SpawnCmd { program, args, maxprocs: check_maxprocs(call, maxprocs)?, info: spawn_info(call, info)? })
}

/// `MPI_Comm_spawn`: the command and its arguments matter at the root only.
pub(crate) fn spawn(
    cx: Call,
    l: &Lib,
    command: *mut c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: usize,
    root: c_int,
    comm: CommRef,
    intercomm: Out<usize>,
    array_of_errcodes: *mut c_int,
) -> Result<()> {
    // SAFETY: the arguments follow the MPI contract at the root.
    let cmds = (comm.core.rank == root)
        .then(|| Ok(vec![unsafe { spawn_cmd(cx.name, "command", command, argv, maxprocs, info) }?]));
    spawn_finish(cx, l, cmds, (root, &comm), intercomm, array_of_errcodes)
}

/// `MPI_Comm_spawn_multiple`: the commands and their arguments matter at the root only.
pub(crate) fn spawn_multiple(
    cx: Call,
    l: &Lib,
    count: c_int,
    array_of_commands: *mut *mut c_char,
    array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *mut c_int,
    array_of_info: *mut usize,
    root: c_int,
    comm: CommRef,
    intercomm: Out<usize>,
    array_of_errcodes: *mut c_int,
) -> Result<()> {
    let call = cx.name;
    let cmds = (comm.core.rank == root).then(|| {
        if count < 1 {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: count {count} must be at least 1")));
        }
        nonnull_mut(call, "array_of_commands", array_of_commands)?;
        nonnull_mut(call, "array_of_maxprocs", array_of_maxprocs)?;
        nonnull_mut(call, "array_of_info", array_of_info)?;
        let mut v = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            // SAFETY: arrays of `count` entries per the MPI contract (checked non-null).
            let (cmd, n, info) =
                unsafe { (*array_of_commands.add(i), *array_of_maxprocs.add(i), *array_of_info.add(i)) };
            // SAFETY: MPI_ARGVS_NULL (null) means no arguments for any command.
            let argv = if array_of_argv.is_null() { std::ptr::null_mut() } else { unsafe { *array_of_argv.add(i) } };
            // SAFETY: as above.
            v.push(unsafe { spawn_cmd(call, "array_of_commands", cmd, argv, n, info) }?);
        }
        Ok(v)
    });
    spawn_finish(cx, l, cmds, (root, &comm), intercomm, array_of_errcodes)
}

pub(crate) fn open_port(_cx: Call, l: &Lib, _info: Pairs, port_name: StrOut) -> Result<()> {
    port_name.write(&l.mpi.dpm.open_port()?, None);
    Ok(())
}

pub(crate) fn close_port(_cx: Call, l: &Lib, port_name: String) -> Result<()> {
    l.mpi.dpm.close_port(&port_name)
}

/// `MPI_Comm_accept` and, without `ACCEPT`, `MPI_Comm_connect`: the port name and info matter
/// at the root only.
pub(crate) fn accept<const ACCEPT: bool>(
    cx: Call,
    l: &Lib,
    port_name: *mut c_char,
    info: usize,
    root: c_int,
    comm: CommRef,
    newcomm: Out<usize>,
) -> Result<()> {
    let port = if comm.core.rank == root {
        crate::info::info_arg(cx.name, "info", info)?;
        // SAFETY: NUL-terminated at the root per the MPI contract (checked non-null).
        Some(unsafe { cstr_in(cx.name, "port_name", port_name) }?)
    } else {
        None
    };
    let core = if ACCEPT {
        dpm::accept(&l.mpi, port.as_deref(), root, &comm.core, None)
    } else {
        dpm::connect(&l.mpi, port.as_deref(), root, &comm.core)
    };
    finish(l, &comm, core, newcomm)
}

/// # Safety
/// `comm` must be null or valid for reading and writing one handle.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_disconnect(comm: *mut usize) -> c_int {
    // Errors go to the handler of the communicator being disconnected.
    // SAFETY: read only when non-null, per the caller's contract.
    let h = if comm.is_null() { c::MPI_COMM_NULL } else { unsafe { *comm } };
    guard(h, || {
        let call = "MPI_Comm_disconnect";
        let l = lib(call)?;
        nonnull_mut(call, "comm", comm)?;
        let cm = l.comm_arc(call, h)?;
        // Processes the application's other communicators still reach stay connected.
        let kept: Vec<_> = {
            let t = l.t();
            t.comms
                .values()
                .filter(|o| !Arc::ptr_eq(o, &cm))
                .flat_map(|o| o.core.group.procs.iter().chain(o.core.peers().procs.iter()).copied().collect::<Vec<_>>())
                .collect()
        };
        dpm::disconnect(&l.mpi, &cm.core, &kept);
        free_comm(l, call, h)?;
        let _ = l.parent.compare_exchange(h, c::MPI_COMM_NULL, Ordering::SeqCst, Ordering::SeqCst);
        // SAFETY: checked non-null.
        unsafe { *comm = c::MPI_COMM_NULL };
        Ok(())
    })
}

pub(crate) fn join(_cx: Call, l: &Lib, fd: c_int, intercomm: Out<usize>) -> Result<()> {
    let core = dpm::join(&l.mpi, fd)?;
    intercomm.put(register(l, &l.self_comm, core));
    Ok(())
}

/// `MPI_Publish_name` and, without `PUBLISH`, `MPI_Unpublish_name`.
pub(crate) fn publish_name<const PUBLISH: bool>(
    _: Call,
    _: &Lib,
    service: String,
    _: Pairs,
    port: String,
) -> Result<()> {
    if PUBLISH {
        baton_core::names::publish(&service, &port)
    } else {
        baton_core::names::unpublish(&service, &port)
    }
}

pub(crate) fn lookup_name(_: Call, _: &Lib, service: String, _: Pairs, port: StrOut) -> Result<()> {
    port.write(&baton_core::names::lookup(&service)?, None);
    Ok(())
}
