//! Dynamic processes: spawn, ports, accept/connect, names, join, disconnect, the parent.
//! The work is in `baton_core::dpm`; this is argument checking and handles.

use crate::comm::{free_comm, register};
use crate::errors::guard;
use crate::state::{lib, Lib};
use crate::{cstr_in, cstr_out, nonnull_mut};
use baton_abi::consts as c;
use baton_core::comm::Comm;
use baton_core::dpm::{self, SpawnCmd};
use baton_core::error::{MpiError, Result};
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn out<T: Copy>(call: &str, arg: &str, p: *mut T, v: T) -> Result<()> {
    nonnull_mut(call, arg, p)?;
    // SAFETY: checked non-null; the caller owns the location.
    unsafe { *p = v };
    Ok(())
}

/// Registers an intercommunicator to another job; it takes the error handler of the
/// communicator it was created over.
fn register_new(l: &Lib, call: &str, parent_h: usize, core: Comm) -> Result<usize> {
    let parent = l.comm(call, parent_h)?;
    Ok(register(l, &parent, core))
}

/// In a spawned process, right after `MPI_Init`: the intercommunicator to the parents.
pub(crate) fn connect_parent(l: &Lib) -> Result<()> {
    let Some(port) = l.mpi.parent_port.clone() else { return Ok(()) };
    let core = dpm::connect_parent(&l.mpi, &port)
        .map_err(|e| MpiError::new(e.class, format!("MPI_Init: cannot connect to the parent job: {}", e.msg)))?;
    let h = register_new(l, "MPI_Init", c::MPI_COMM_WORLD, core)?;
    l.parent.store(h, Ordering::SeqCst);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_parent(parent: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Comm_get_parent";
        let l = lib(call)?;
        let mut h = l.parent.load(Ordering::SeqCst);
        // Freed with MPI_Comm_free: there is no parent communicator any more.
        if h != c::MPI_COMM_NULL && l.t().comms.get(h).is_none() {
            h = c::MPI_COMM_NULL;
        }
        out(call, "parent", parent, h)
    })
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

/// Finishes a spawn: errcodes, the new handle.
fn spawn_finish(
    l: &Lib,
    call: &str,
    comm: usize,
    (asked, r): (usize, Result<Comm>),
    intercomm: *mut usize,
    errcodes: *mut c_int,
) -> Result<()> {
    let code = match &r {
        Ok(_) => c::MPI_SUCCESS,
        Err(e) => e.class,
    };
    if !errcodes.is_null() {
        // SAFETY: the caller provides one entry per process asked for.
        unsafe { std::slice::from_raw_parts_mut(errcodes, asked) }.fill(code);
    }
    match r {
        Ok(core) => {
            let h = register_new(l, call, comm, core)?;
            out(call, "intercomm", intercomm, h)
        }
        Err(e) => {
            if !intercomm.is_null() {
                // SAFETY: non-null out pointer.
                unsafe { *intercomm = c::MPI_COMM_NULL };
            }
            Err(e)
        }
    }
}

/// The communicator of spawn, accept or connect, checked before the root-only arguments are
/// read.
fn spawn_comm<'a>(l: &'a Lib, call: &str, comm: usize, root: c_int) -> Result<crate::state::CommRef<'a>> {
    let cm = l.comm(call, comm)?;
    dpm::check_root(call, root, &cm.core)?;
    Ok(cm)
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_spawn(
    command: *mut c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: usize,
    root: c_int,
    comm: usize,
    intercomm: *mut usize,
    errcodes: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_spawn";
        let l = lib(call)?;
        nonnull_mut(call, "intercomm", intercomm)?;
        let cm = spawn_comm(l, call, comm, root)?;
        // SAFETY: the arguments follow the MPI contract at the root.
        let cmds = (cm.core.rank == root)
            .then(|| Ok(vec![unsafe { spawn_cmd(call, "command", command, argv, maxprocs, info) }?]));
        let r = dpm::spawn(&l.mpi, call, cmds, root, &cm.core);
        spawn_finish(l, call, comm, r, intercomm, errcodes)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_spawn_multiple(
    count: c_int,
    commands: *mut *mut c_char,
    argvs: *mut *mut *mut c_char,
    maxprocs: *mut c_int,
    infos: *mut usize,
    root: c_int,
    comm: usize,
    intercomm: *mut usize,
    errcodes: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_spawn_multiple";
        let l = lib(call)?;
        nonnull_mut(call, "intercomm", intercomm)?;
        let cm = spawn_comm(l, call, comm, root)?;
        let cmds = (cm.core.rank == root).then(|| {
            if count < 1 {
                return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: count {count} must be at least 1")));
            }
            nonnull_mut(call, "array_of_commands", commands)?;
            nonnull_mut(call, "array_of_maxprocs", maxprocs)?;
            nonnull_mut(call, "array_of_info", infos)?;
            let mut v = Vec::with_capacity(count as usize);
            for i in 0..count as usize {
                // SAFETY: arrays of `count` entries per the MPI contract (checked non-null).
                let (cmd, n, info) = unsafe { (*commands.add(i), *maxprocs.add(i), *infos.add(i)) };
                // SAFETY: MPI_ARGVS_NULL (null) means no arguments for any command.
                let argv = if argvs.is_null() { std::ptr::null_mut() } else { unsafe { *argvs.add(i) } };
                // SAFETY: as above.
                v.push(unsafe { spawn_cmd(call, "array_of_commands", cmd, argv, n, info) }?);
            }
            Ok(v)
        });
        let r = dpm::spawn(&l.mpi, call, cmds, root, &cm.core);
        spawn_finish(l, call, comm, r, intercomm, errcodes)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Open_port(info: usize, port_name: *mut c_char) -> c_int {
    guard(c::MPI_COMM_SELF, || {
        let call = "MPI_Open_port";
        let l = lib(call)?;
        crate::info::info_pairs(call, info)?;
        nonnull_mut(call, "port_name", port_name)?;
        let name = l.mpi.dpm.open_port()?;
        // SAFETY: the caller provides MPI_MAX_PORT_NAME bytes.
        unsafe { cstr_out(&name, port_name, c::MPI_MAX_PORT_NAME as usize, std::ptr::null_mut()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Close_port(port_name: *mut c_char) -> c_int {
    guard(c::MPI_COMM_SELF, || {
        let call = "MPI_Close_port";
        let l = lib(call)?;
        // SAFETY: NUL-terminated per the MPI contract (checked non-null).
        let name = unsafe { cstr_in(call, "port_name", port_name) }?;
        l.mpi.dpm.close_port(&name)
    })
}

/// Accept or connect: the port name and info matter at the root only.
unsafe fn accept_or_connect(
    call: &str,
    port_name: *mut c_char,
    info: usize,
    root: c_int,
    comm: usize,
    newcomm: *mut usize,
    accepting: bool,
) -> c_int {
    guard(comm, || {
        let l = lib(call)?;
        nonnull_mut(call, "newcomm", newcomm)?;
        let cm = spawn_comm(l, call, comm, root)?;
        let port = if cm.core.rank == root {
            crate::info::info_pairs(call, info)?;
            // SAFETY: NUL-terminated at the root per the MPI contract (checked non-null).
            Some(unsafe { cstr_in(call, "port_name", port_name) }?)
        } else {
            None
        };
        let core = if accepting {
            dpm::accept(&l.mpi, port.as_deref(), root, &cm.core, None)
        } else {
            dpm::connect(&l.mpi, port.as_deref(), root, &cm.core)
        };
        match core {
            Ok(core) => {
                let h = register_new(l, call, comm, core)?;
                out(call, "newcomm", newcomm, h)
            }
            Err(e) => {
                // SAFETY: checked non-null above.
                unsafe { *newcomm = c::MPI_COMM_NULL };
                Err(e)
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_accept(
    port_name: *mut c_char,
    info: usize,
    root: c_int,
    comm: usize,
    newcomm: *mut usize,
) -> c_int {
    // SAFETY: forwarded as received.
    unsafe { accept_or_connect("MPI_Comm_accept", port_name, info, root, comm, newcomm, true) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_connect(
    port_name: *mut c_char,
    info: usize,
    root: c_int,
    comm: usize,
    newcomm: *mut usize,
) -> c_int {
    // SAFETY: forwarded as received.
    unsafe { accept_or_connect("MPI_Comm_connect", port_name, info, root, comm, newcomm, false) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_disconnect(comm: *mut usize) -> c_int {
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
        out(call, "comm", comm, c::MPI_COMM_NULL)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_join(fd: c_int, intercomm: *mut usize) -> c_int {
    guard(c::MPI_COMM_SELF, || {
        let call = "MPI_Comm_join";
        let l = lib(call)?;
        nonnull_mut(call, "intercomm", intercomm)?;
        let core = dpm::join(&l.mpi, fd)?;
        let h = register_new(l, call, c::MPI_COMM_SELF, core)?;
        out(call, "intercomm", intercomm, h)
    })
}

/// Publish and unpublish: a service name and a port name, both read.
unsafe fn name_and_port(
    call: &str,
    service_name: *mut c_char,
    info: usize,
    port_name: *mut c_char,
    f: impl FnOnce(&str, &str) -> Result<()>,
) -> c_int {
    guard(c::MPI_COMM_SELF, || {
        lib(call)?;
        crate::info::info_pairs(call, info)?;
        // SAFETY: NUL-terminated per the MPI contract (checked non-null).
        let (service, port) =
            unsafe { (cstr_in(call, "service_name", service_name)?, cstr_in(call, "port_name", port_name)?) };
        f(&service, &port)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Publish_name(service_name: *mut c_char, info: usize, port_name: *mut c_char) -> c_int {
    // SAFETY: forwarded as received.
    unsafe { name_and_port("MPI_Publish_name", service_name, info, port_name, baton_core::names::publish) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpublish_name(service_name: *mut c_char, info: usize, port_name: *mut c_char) -> c_int {
    // SAFETY: forwarded as received.
    unsafe { name_and_port("MPI_Unpublish_name", service_name, info, port_name, baton_core::names::unpublish) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Lookup_name(service_name: *mut c_char, info: usize, port_name: *mut c_char) -> c_int {
    guard(c::MPI_COMM_SELF, || {
        let call = "MPI_Lookup_name";
        lib(call)?;
        crate::info::info_pairs(call, info)?;
        nonnull_mut(call, "port_name", port_name)?;
        // SAFETY: NUL-terminated per the MPI contract (checked non-null).
        let service = unsafe { cstr_in(call, "service_name", service_name) }?;
        let port = baton_core::names::lookup(&service)?;
        // SAFETY: the caller provides MPI_MAX_PORT_NAME bytes.
        unsafe { cstr_out(&port, port_name, c::MPI_MAX_PORT_NAME as usize, std::ptr::null_mut()) };
        Ok(())
    })
}
