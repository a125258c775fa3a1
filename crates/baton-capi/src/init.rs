//! Start-up, shutdown and facts about the library and the process. `MPI_Init`,
//! `MPI_Init_thread` (whose errors are fatal: there is no handler yet) and `MPI_Abort` are
//! written here; the other entry points are generated (`abi/bindings.tsv`).

use crate::state::{self, install, lib, lib_any, new_tables, phase, Lib};
use crate::validate::{Call, Out, StrOut};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use baton_core::runtime::Mpi;
use std::ffi::{c_char, c_int};
use std::sync::Mutex;

static INIT_LOCK: Mutex<()> = Mutex::new(());

/// `mpiexec` of the installation this library belongs to (`PREFIX/lib/libmpi_abi.so.1` →
/// `PREFIX/bin/mpiexec`), for a singleton that spawns.
fn launcher_next_to_library() -> Option<std::path::PathBuf> {
    // SAFETY: Dl_info is plain data; zeroed is a valid "nothing found" value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address (a function of this library) and fills `info`.
    let found = unsafe { libc::dladdr(launcher_next_to_library as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated path owned by the loader.
    let lib = std::path::PathBuf::from(unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_str().ok()?);
    let exe = std::fs::canonicalize(lib).ok()?.parent()?.parent()?.join("bin").join("mpiexec");
    exe.is_file().then_some(exe)
}

fn do_init(required: c_int, call: &str) -> baton_core::error::Result<c_int> {
    let _g = INIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    match phase() {
        1 => return Err(MpiError::new(c::MPI_ERR_OTHER, format!("{call}: MPI is already initialized"))),
        2 => {
            return Err(MpiError::new(
                c::MPI_ERR_OTHER,
                format!("{call}: MPI cannot be initialized again after MPI_Finalize"),
            ))
        }
        _ => {}
    }
    let valid = [c::MPI_THREAD_SINGLE, c::MPI_THREAD_FUNNELED, c::MPI_THREAD_SERIALIZED, c::MPI_THREAD_MULTIPLE];
    if !valid.contains(&required) {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: required thread level {required} is not a valid level"),
        ));
    }
    let mpi = Mpi::init().map_err(|e| MpiError::new(e.class, e.msg))?;
    if let Some(p) = launcher_next_to_library() {
        let _ = baton_core::dpm::LAUNCHER.set(p);
    }
    let tables = new_tables(&mpi);
    // Every level up to MPI_THREAD_MULTIPLE is provided: the engine is behind a lock.
    let (world, self_comm) = (tables.world.clone(), tables.self_comm.clone());
    install(Lib {
        mpi: baton_core::device::Device::new(mpi),
        world,
        self_comm,
        tables: Mutex::new(tables),
        thread_level: required,
        main_thread: std::thread::current().id(),
        parent: std::sync::atomic::AtomicUsize::new(c::MPI_COMM_NULL),
    });
    let l = lib(call)?;
    l.mpi.runtime().start_progress_thread();
    // A spawned process meets its parents before MPI_Init returns.
    crate::dpm::connect_parent(l)?;
    Ok(required)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    match do_init(c::MPI_THREAD_SINGLE, "MPI_Init") {
        Ok(_) => c::MPI_SUCCESS,
        Err(e) => crate::errors::fatal(&e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    match do_init(required, "MPI_Init_thread") {
        Ok(p) => {
            if !provided.is_null() {
                // SAFETY: non-null out pointer.
                unsafe { *provided = p };
            }
            c::MPI_SUCCESS
        }
        Err(e) => crate::errors::fatal(&e),
    }
}

#[inline]
pub(crate) fn initialized(_cx: Call, flag: Out<c_int>) -> Result<()> {
    flag.put((phase() >= 1) as c_int);
    Ok(())
}

#[inline]
pub(crate) fn finalized(_cx: Call, flag: Out<c_int>) -> Result<()> {
    flag.put((phase() == 2) as c_int);
    Ok(())
}

pub(crate) fn finalize(_cx: Call, l: &Lib) -> Result<()> {
    // Attributes on MPI_COMM_SELF are deleted first, as the standard requires.
    let self_comm = l.t().self_comm.clone();
    crate::attr::delete_all_attrs(l, c::MPI_COMM_SELF, &self_comm)?;
    crate::p2p::bsend_flush(l);
    l.mpi.finalize();
    state::PHASE.store(2, std::sync::atomic::Ordering::SeqCst);
    Ok(())
}

#[inline]
pub(crate) fn query_thread(_cx: Call, l: &Lib, provided: Out<c_int>) -> Result<()> {
    provided.put(l.thread_level);
    Ok(())
}

#[inline]
pub(crate) fn is_thread_main(_cx: Call, l: &Lib, flag: Out<c_int>) -> Result<()> {
    flag.put((std::thread::current().id() == l.main_thread) as c_int);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Abort(comm: usize, code: c_int) -> c_int {
    // What the program printed must reach the terminal before the launcher ends this process:
    // stdout is a pipe to the launcher, so stdio holds up to a buffer of it.
    // SAFETY: fflush(NULL) flushes every open output stream; it takes no pointer of ours.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    let comm = match comm {
        c::MPI_COMM_WORLD => "MPI_COMM_WORLD".to_owned(),
        c::MPI_COMM_SELF => "MPI_COMM_SELF".to_owned(),
        other => format!("{other:#x}"),
    };
    let msg = format!("MPI_Abort({comm}, {code}) was called");
    match lib_any() {
        Some(l) => l.mpi.abort(code, &msg),
        None => {
            eprintln!("Baton: {msg}");
            std::process::exit(code & 0xff);
        }
    }
}

pub(crate) fn get_version(_cx: Call, version: Out<c_int>, subversion: Out<c_int>) -> Result<()> {
    version.put(c::MPI_VERSION);
    subversion.put(c::MPI_SUBVERSION);
    Ok(())
}

pub const LIBRARY_VERSION: &str = concat!("Baton ", env!("CARGO_PKG_VERSION"), " (MPI 5.0 standard ABI 1.0)");

pub(crate) fn get_library_version(_cx: Call, version: StrOut, resultlen: Out<c_int>) -> Result<()> {
    version.write(LIBRARY_VERSION, Some(&resultlen));
    Ok(())
}

pub(crate) fn get_processor_name(_cx: Call, name: StrOut, resultlen: Out<c_int>) -> Result<()> {
    name.write(&baton_transport::sys::hostname(), Some(&resultlen));
    Ok(())
}

pub(crate) fn abi_get_version(_cx: Call, abi_major: Out<c_int>, abi_minor: Out<c_int>) -> Result<()> {
    abi_major.put(c::MPI_ABI_VERSION);
    abi_minor.put(c::MPI_ABI_SUBVERSION);
    Ok(())
}

pub(crate) fn abi_get_info(_cx: Call, _l: &Lib, info: Out<usize>) -> Result<()> {
    let size = |n: usize| n.to_string();
    let kv = vec![
        ("mpi_aint_size".to_string(), size(std::mem::size_of::<isize>())),
        ("mpi_count_size".to_string(), size(8)),
        ("mpi_offset_size".to_string(), size(8)),
        ("mpi_abi_version".to_string(), "1.0".to_string()),
        ("mpi_library_version".to_string(), LIBRARY_VERSION.to_string()),
    ];
    info.put(crate::info::infos().insert(kv));
    Ok(())
}
