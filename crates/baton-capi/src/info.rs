//! Info objects: ordered (key, value) string pairs, and the role `info` of
//! `abi/bindings.tsv` ([`info_arg`]). The entry points are generated.

use crate::cstr_out;
use crate::handles::{Kind, Table};
use crate::state::{lib_any, phase, Lib};
use crate::validate::{Call, Out, StrOut};
use baton_abi::consts as c;
use baton_core::error::{HandleKind, MpiError, Result};
use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard, OnceLock};

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

/// What `MPI_INFO_ENV` says about how this process was started: the keys the standard lists
/// for it (MPI 4.1, "Passing Information to MPI_INIT") whose values Baton knows. `soft` and `file` are left out: `mpiexec` has no such
/// options, so there is nothing to report. Before `MPI_Init`, `maxprocs` comes from the
/// launcher's environment and `thread_level` (the level requested at start-up) is not known yet.
fn env_pairs(l: Option<&Lib>) -> Pairs {
    let args: Vec<String> = std::env::args().collect();
    let mut v = vec![
        ("command".to_string(), args.first().cloned().unwrap_or_default()),
        ("argv".to_string(), args.iter().skip(1).cloned().collect::<Vec<_>>().join(" ")),
        ("host".to_string(), baton_transport::sys::hostname()),
        ("arch".to_string(), std::env::consts::ARCH.to_string()),
        ("wdir".to_string(), std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()),
    ];
    let launched = std::env::var(baton_settings::protocol::SIZE.name).ok().filter(|n| n.parse::<u32>().is_ok());
    if let Some(n) = l.map(|l| l.mpi.world.size().to_string()).or(launched) {
        v.push(("maxprocs".to_string(), n));
    }
    if let Some(l) = l {
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
pub(crate) fn info_arg(call: &str, arg: &str, h: usize) -> Result<Pairs> {
    pairs_of(call, arg, h)
}

fn pairs_of(call: &str, arg: &str, h: usize) -> Result<Pairs> {
    match h {
        c::MPI_INFO_NULL => Ok(Vec::new()),
        c::MPI_INFO_ENV => Ok(env_pairs(initialized())),
        _ => infos().get(h).cloned().ok_or_else(|| MpiError::invalid_handle(call, arg, HandleKind::Info, h)),
    }
}

fn bad(call: &str, h: usize) -> MpiError {
    MpiError::invalid_handle(call, "info", HandleKind::Info, h)
}

fn with_info<R>(call: &str, h: usize, f: impl FnOnce(&mut Pairs) -> Result<R>) -> Result<R> {
    if h == c::MPI_INFO_ENV {
        return f(&mut env_pairs(initialized()));
    }
    let mut t = infos();
    let p = t.get_mut(h).ok_or_else(|| bad(call, h))?;
    f(p)
}

/// A key, which must be neither empty nor as long as `MPI_MAX_INFO_KEY`.
fn key(call: &str, s: String) -> Result<String> {
    if s.is_empty() || s.len() >= c::MPI_MAX_INFO_KEY as usize {
        return Err(MpiError::new(
            c::MPI_ERR_INFO_KEY,
            format!("{call}: key of length {} is empty or not shorter than MPI_MAX_INFO_KEY", s.len()),
        ));
    }
    Ok(s)
}

pub(crate) fn create(_cx: Call, info: Out<usize>) -> Result<()> {
    info.put(infos().insert(Vec::new()));
    Ok(())
}

pub(crate) fn create_env(_cx: Call, _argc: c_int, _argv: *mut *mut c_char, info: Out<usize>) -> Result<()> {
    // Allowed before MPI_Init: the keys that need the library are left out then.
    info.put(infos().insert(env_pairs(initialized())));
    Ok(())
}

pub(crate) fn set(cx: Call, info: usize, k: String, value: String) -> Result<()> {
    let call = cx.name;
    let k = key(call, k)?;
    if value.len() >= c::MPI_MAX_INFO_VAL as usize {
        return Err(MpiError::new(c::MPI_ERR_INFO_VALUE, format!("{call}: value longer than MPI_MAX_INFO_VAL")));
    }
    if info == c::MPI_INFO_ENV {
        return Err(MpiError::new(c::MPI_ERR_INFO, format!("{call}: MPI_INFO_ENV cannot be modified")));
    }
    with_info(call, info, |p| {
        match p.iter_mut().find(|(kk, _)| *kk == k) {
            Some(e) => e.1 = value,
            None => p.push((k, value)),
        }
        Ok(())
    })
}

pub(crate) fn delete(cx: Call, info: usize, k: String) -> Result<()> {
    let call = cx.name;
    let k = key(call, k)?;
    if info == c::MPI_INFO_ENV {
        return Err(MpiError::new(c::MPI_ERR_INFO, format!("{call}: MPI_INFO_ENV cannot be modified")));
    }
    with_info(call, info, |p| {
        let n = p.len();
        p.retain(|(kk, _)| *kk != k);
        if p.len() == n {
            return Err(MpiError::new(c::MPI_ERR_INFO_NOKEY, format!("{call}: key '{k}' is not set")));
        }
        Ok(())
    })
}

fn lookup(call: &str, info: usize, k: String) -> Result<Option<String>> {
    let k = key(call, k)?;
    with_info(call, info, |p| Ok(p.iter().find(|(kk, _)| *kk == k).map(|(_, v)| v.clone())))
}

pub(crate) fn get(
    cx: Call,
    info: usize,
    k: String,
    valuelen: usize,
    value: *mut c_char,
    flag: Out<c_int>,
) -> Result<()> {
    let v = lookup(cx.name, info, k)?;
    if let Some(v) = &v {
        crate::nonnull_mut(cx.name, "value", value)?;
        // SAFETY: the caller provides valuelen+1 bytes.
        unsafe { cstr_out(v, value, valuelen + 1, std::ptr::null_mut()) };
    }
    flag.put(v.is_some() as c_int);
    Ok(())
}

pub(crate) fn get_string(
    cx: Call,
    info: usize,
    k: String,
    buflen: Out<c_int>,
    value: *mut c_char,
    flag: Out<c_int>,
) -> Result<()> {
    let v = lookup(cx.name, info, k)?;
    if let Some(v) = &v {
        let room = buflen.get();
        if room > 0 {
            crate::nonnull_mut(cx.name, "value", value)?;
            // SAFETY: the caller provides `room` bytes.
            unsafe { cstr_out(v, value, room as usize, std::ptr::null_mut()) };
        }
        buflen.put(v.len() as c_int + 1);
    }
    flag.put(v.is_some() as c_int);
    Ok(())
}

pub(crate) fn get_valuelen(cx: Call, info: usize, k: String, valuelen: *mut c_int, flag: Out<c_int>) -> Result<()> {
    let v = lookup(cx.name, info, k)?;
    if let Some(v) = &v {
        crate::nonnull_mut(cx.name, "valuelen", valuelen)?;
        // SAFETY: checked non-null; the caller provides one int.
        unsafe { *valuelen = v.len() as c_int };
    }
    flag.put(v.is_some() as c_int);
    Ok(())
}

pub(crate) fn get_nkeys(cx: Call, info: usize, nkeys: Out<c_int>) -> Result<()> {
    nkeys.put(with_info(cx.name, info, |p| Ok(p.len()))? as c_int);
    Ok(())
}

pub(crate) fn get_nthkey(cx: Call, info: usize, n: c_int, k: StrOut) -> Result<()> {
    let found = with_info(cx.name, info, |p| {
        let nth = usize::try_from(n).ok().and_then(|i| p.get(i));
        nth.map(|(kk, _)| kk.clone()).ok_or_else(|| {
            MpiError::new(
                c::MPI_ERR_ARG,
                format!("{}: n {n} is out of range for an info with {} keys", cx.name, p.len()),
            )
        })
    })?;
    k.write(&found, None);
    Ok(())
}

pub(crate) fn dup(cx: Call, info: usize, newinfo: Out<usize>) -> Result<()> {
    if info == c::MPI_INFO_NULL {
        return Err(bad(cx.name, info));
    }
    let p = info_pairs(cx.name, info)?;
    newinfo.put(infos().insert(p));
    Ok(())
}

pub(crate) fn free(cx: Call, info: Out<usize>) -> Result<()> {
    let h = info.get();
    if infos().remove(h).is_none() {
        return Err(bad(cx.name, h));
    }
    info.put(c::MPI_INFO_NULL);
    Ok(())
}

/// Fortran ABI details: none until a Fortran layer provides them with `MPI_Abi_set_fortran_info`.
static FORTRAN_INFO: Mutex<Option<Pairs>> = Mutex::new(None);

pub(crate) fn get_fortran_info(_cx: Call, info: Out<usize>) -> Result<()> {
    let stored = FORTRAN_INFO.lock().unwrap_or_else(|e| e.into_inner()).clone();
    info.put(match stored {
        Some(p) => infos().insert(p),
        None => c::MPI_INFO_NULL,
    });
    Ok(())
}

pub(crate) fn set_fortran_info(cx: Call, info: Pairs) -> Result<()> {
    let mut g = FORTRAN_INFO.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_some() {
        return Err(MpiError::new(c::MPI_ERR_ABI, format!("{}: the Fortran ABI details were already set", cx.name)));
    }
    *g = Some(info);
    Ok(())
}

/// The table index of a LOGICAL size, which must be a power of two up to 16. The booleans
/// themselves live with the reductions that use them (`baton_core::op::fortran_booleans`).
fn logical_size(call: &str, logical_size: c_int) -> Result<usize> {
    usize::try_from(logical_size).ok().filter(|&n| baton_core::op::fortran::size_index(n).is_some()).ok_or_else(|| {
        MpiError::new(c::MPI_ERR_ARG, format!("{call}: logical_size {logical_size} is not a power of two from 1 to 16"))
    })
}

pub(crate) fn get_fortran_booleans(
    cx: Call,
    logical_size_arg: c_int,
    logical_true: *mut std::ffi::c_void,
    logical_false: *mut std::ffi::c_void,
    is_set: Out<c_int>,
) -> Result<()> {
    let n = logical_size(cx.name, logical_size_arg)?;
    let stored = baton_core::op::fortran_booleans(n);
    if let Some((t, f)) = &stored {
        crate::nonnull_mut(cx.name, "logical_true", logical_true)?;
        crate::nonnull_mut(cx.name, "logical_false", logical_false)?;
        // SAFETY: non-null; the caller provides one LOGICAL of `logical_size` bytes at each.
        unsafe {
            std::ptr::copy_nonoverlapping(t.as_ptr(), logical_true as *mut u8, n);
            std::ptr::copy_nonoverlapping(f.as_ptr(), logical_false as *mut u8, n);
        }
    }
    is_set.put(stored.is_some() as c_int);
    Ok(())
}

pub(crate) fn set_fortran_booleans(
    cx: Call,
    logical_size_arg: c_int,
    logical_true: *mut std::ffi::c_void,
    logical_false: *mut std::ffi::c_void,
) -> Result<()> {
    let n = logical_size(cx.name, logical_size_arg)?;
    crate::nonnull(cx.name, "logical_true", logical_true as *const u8)?;
    crate::nonnull(cx.name, "logical_false", logical_false as *const u8)?;
    // SAFETY: non-null; the caller passes one LOGICAL of `logical_size` bytes at each.
    let (t, f) = unsafe {
        (
            std::slice::from_raw_parts(logical_true as *const u8, n),
            std::slice::from_raw_parts(logical_false as *const u8, n),
        )
    };
    if t == f {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{}: logical_true and logical_false are the same {n}-byte value", cx.name),
        ));
    }
    // As with MPI_Abi_set_fortran_info, only the first call (here: for a size) counts.
    if !baton_core::op::set_fortran_booleans(n, t, f) {
        return Err(MpiError::new(
            c::MPI_ERR_ABI,
            format!("{}: the booleans of {n}-byte LOGICALs were already set", cx.name),
        ));
    }
    Ok(())
}
