//! Info objects: ordered (key, value) string pairs.

use crate::errors::guard;
use crate::handles::{Kind, Table};
use crate::state::{lib_any, phase, Lib};
use crate::validate::Call;
use crate::{cstr_in, cstr_out, nonnull_mut};
use baton_abi::consts as c;
use baton_core::error::{HandleKind, MpiError, Result};
use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard, OnceLock};

const W: usize = c::MPI_COMM_WORLD;
pub type Pairs = Vec<(String, String)>;

/// Info objects live outside the library state: MPI allows them before `MPI_Init` and after
/// `MPI_Finalize`.
pub fn infos() -> MutexGuard<'static, Table<Pairs>> {
    static T: OnceLock<Mutex<Table<Pairs>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(Table::new(Kind::Info))).lock().unwrap_or_else(|e| e.into_inner())
}

fn initialized() -> Option<&'static Lib> {
    lib_any().filter(|_| phase() == 1)
}

/// What `MPI_INFO_ENV` says about how this process was started.
fn env_pairs(l: Option<&Lib>) -> Pairs {
    let args: Vec<String> = std::env::args().collect();
    let mut v = vec![
        ("command".to_string(), args.first().cloned().unwrap_or_default()),
        ("argv".to_string(), args.iter().skip(1).cloned().collect::<Vec<_>>().join(" ")),
        ("host".to_string(), baton_transport::sys::hostname()),
        ("arch".to_string(), std::env::consts::ARCH.to_string()),
        ("wdir".to_string(), std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()),
    ];
    if let Some(l) = l {
        v.push(("maxprocs".to_string(), l.mpi.world.size().to_string()));
        let level = match l.thread_level {
            c::MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
            c::MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
            c::MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
            _ => "MPI_THREAD_MULTIPLE",
        };
        v.push(("thread_level".to_string(), level.to_string()));
    }
    v
}

/// The pairs of info `h` (MPI_INFO_NULL gives none).
pub fn info_pairs(call: &str, h: usize) -> Result<Pairs> {
    pairs_of(call, "info", h)
}

/// Role `info` of `abi/bindings.tsv`: the pairs of info argument `arg` (`MPI_INFO_NULL`
/// gives none).
pub(crate) fn info_arg(cx: Call, arg: &str, h: usize) -> Result<Pairs> {
    pairs_of(cx.name, arg, h)
}

fn pairs_of(call: &str, arg: &str, h: usize) -> Result<Pairs> {
    match h {
        c::MPI_INFO_NULL => Ok(Vec::new()),
        c::MPI_INFO_ENV => Ok(env_pairs(initialized())),
        _ => infos().get(h).cloned().ok_or_else(|| MpiError::invalid_handle(call, arg, HandleKind::Info, h)),
    }
}

fn bad(call: &str, h: usize) -> MpiError {
    MpiError::new(c::MPI_ERR_INFO, format!("{call}: info {h:#x} is not a valid info handle"))
}

fn with_info<R>(call: &str, h: usize, f: impl FnOnce(&mut Pairs) -> Result<R>) -> Result<R> {
    if h == c::MPI_INFO_ENV {
        return f(&mut env_pairs(initialized()));
    }
    let mut t = infos();
    let p = t.get_mut(h).ok_or_else(|| bad(call, h))?;
    f(p)
}

fn key(call: &str, k: *const c_char) -> Result<String> {
    // SAFETY: NUL-terminated per the MPI contract (checked non-null).
    let s = unsafe { cstr_in(call, "key", k)? };
    if s.is_empty() || s.len() >= c::MPI_MAX_INFO_KEY as usize {
        return Err(MpiError::new(
            c::MPI_ERR_INFO_KEY,
            format!("{call}: key of length {} is empty or not shorter than MPI_MAX_INFO_KEY", s.len()),
        ));
    }
    Ok(s)
}

fn out<T: Copy>(call: &str, arg: &str, p: *mut T, v: T) -> Result<()> {
    nonnull_mut(call, arg, p)?;
    // SAFETY: checked non-null.
    unsafe { *p = v };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_create(info: *mut usize) -> c_int {
    guard(W, || {
        nonnull_mut("MPI_Info_create", "info", info)?;
        let h = infos().insert(Vec::new());
        out("MPI_Info_create", "info", info, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut usize) -> c_int {
    guard(W, || {
        nonnull_mut("MPI_Info_create_env", "info", info)?;
        // Allowed before MPI_Init: the keys that need the library are left out then.
        let h = infos().insert(env_pairs(initialized()));
        out("MPI_Info_create_env", "info", info, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_set(info: usize, k: *const c_char, v: *const c_char) -> c_int {
    guard(W, || {
        let call = "MPI_Info_set";
        let k = key(call, k)?;
        // SAFETY: NUL-terminated per the MPI contract (checked non-null).
        let v = unsafe { cstr_in(call, "value", v)? };
        if v.len() >= c::MPI_MAX_INFO_VAL as usize {
            return Err(MpiError::new(c::MPI_ERR_INFO_VALUE, format!("{call}: value longer than MPI_MAX_INFO_VAL")));
        }
        if info == c::MPI_INFO_ENV {
            return Err(MpiError::new(c::MPI_ERR_INFO, format!("{call}: MPI_INFO_ENV cannot be modified")));
        }
        with_info(call, info, |p| {
            match p.iter_mut().find(|(kk, _)| *kk == k) {
                Some(e) => e.1 = v,
                None => p.push((k, v)),
            }
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_delete(info: usize, k: *const c_char) -> c_int {
    guard(W, || {
        let call = "MPI_Info_delete";
        let k = key(call, k)?;
        with_info(call, info, |p| {
            let n = p.len();
            p.retain(|(kk, _)| *kk != k);
            if p.len() == n {
                return Err(MpiError::new(c::MPI_ERR_INFO_NOKEY, format!("{call}: key '{k}' is not set")));
            }
            Ok(())
        })
    })
}

fn lookup(call: &str, info: usize, k: *const c_char) -> Result<Option<String>> {
    let k = key(call, k)?;
    with_info(call, info, |p| Ok(p.iter().find(|(kk, _)| *kk == k).map(|(_, v)| v.clone())))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get(
    info: usize,
    k: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    guard(W, || {
        let call = "MPI_Info_get";
        nonnull_mut(call, "flag", flag)?;
        if valuelen < 0 {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: valuelen {valuelen} is negative")));
        }
        let v = lookup(call, info, k)?;
        if let Some(v) = &v {
            nonnull_mut(call, "value", value)?;
            // SAFETY: the caller provides valuelen+1 bytes.
            unsafe { cstr_out(v, value, valuelen as usize + 1, std::ptr::null_mut()) };
        }
        out(call, "flag", flag, v.is_some() as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_string(
    info: usize,
    k: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    guard(W, || {
        let call = "MPI_Info_get_string";
        nonnull_mut(call, "flag", flag)?;
        nonnull_mut(call, "buflen", buflen)?;
        let v = lookup(call, info, k)?;
        if let Some(v) = &v {
            // SAFETY: checked non-null.
            let room = unsafe { *buflen };
            if room > 0 {
                nonnull_mut(call, "value", value)?;
                // SAFETY: the caller provides `room` bytes.
                unsafe { cstr_out(v, value, room as usize, std::ptr::null_mut()) };
            }
            out(call, "buflen", buflen, v.len() as c_int + 1)?;
        }
        out(call, "flag", flag, v.is_some() as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_valuelen(
    info: usize,
    k: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    guard(W, || {
        let call = "MPI_Info_get_valuelen";
        nonnull_mut(call, "flag", flag)?;
        let v = lookup(call, info, k)?;
        if let Some(v) = &v {
            out(call, "valuelen", valuelen, v.len() as c_int)?;
        }
        out(call, "flag", flag, v.is_some() as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_nkeys(info: usize, n: *mut c_int) -> c_int {
    guard(W, || {
        let k = with_info("MPI_Info_get_nkeys", info, |p| Ok(p.len()))?;
        out("MPI_Info_get_nkeys", "nkeys", n, k as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_nthkey(info: usize, n: c_int, k: *mut c_char) -> c_int {
    guard(W, || {
        let call = "MPI_Info_get_nthkey";
        nonnull_mut(call, "key", k)?;
        let key = with_info(call, info, |p| {
            p.get(n.max(0) as usize).filter(|_| n >= 0).map(|(kk, _)| kk.clone()).ok_or_else(|| {
                MpiError::new(
                    c::MPI_ERR_ARG,
                    format!("{call}: n {n} is out of range for an info with {} keys", p.len()),
                )
            })
        })?;
        // SAFETY: the caller provides MPI_MAX_INFO_KEY bytes.
        unsafe { cstr_out(&key, k, c::MPI_MAX_INFO_KEY as usize, std::ptr::null_mut()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_dup(info: usize, newinfo: *mut usize) -> c_int {
    guard(W, || {
        nonnull_mut("MPI_Info_dup", "newinfo", newinfo)?;
        if info == c::MPI_INFO_NULL {
            return Err(bad("MPI_Info_dup", info));
        }
        let p = info_pairs("MPI_Info_dup", info)?;
        let h = infos().insert(p);
        out("MPI_Info_dup", "newinfo", newinfo, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_free(info: *mut usize) -> c_int {
    guard(W, || {
        nonnull_mut("MPI_Info_free", "info", info)?;
        // SAFETY: checked non-null.
        let h = unsafe { *info };
        if infos().remove(h).is_none() {
            return Err(bad("MPI_Info_free", h));
        }
        out("MPI_Info_free", "info", info, c::MPI_INFO_NULL)
    })
}

/// Fortran ABI details: none until a Fortran layer provides them with `MPI_Abi_set_fortran_info`.
static FORTRAN_INFO: Mutex<Option<Pairs>> = Mutex::new(None);

#[no_mangle]
pub unsafe extern "C" fn PMPI_Abi_get_fortran_info(info: *mut usize) -> c_int {
    guard(W, || {
        nonnull_mut("MPI_Abi_get_fortran_info", "info", info)?;
        let stored = FORTRAN_INFO.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let h = match stored {
            Some(p) => infos().insert(p),
            None => c::MPI_INFO_NULL,
        };
        out("MPI_Abi_get_fortran_info", "info", info, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Abi_set_fortran_info(info: usize) -> c_int {
    guard(W, || {
        let call = "MPI_Abi_set_fortran_info";
        let p = info_pairs(call, info)?;
        let mut g = FORTRAN_INFO.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_some() {
            return Err(MpiError::new(c::MPI_ERR_ABI, format!("{call}: the Fortran ABI details were already set")));
        }
        *g = Some(p);
        Ok(())
    })
}
