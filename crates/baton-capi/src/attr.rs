//! Attribute caching on communicators: keyvals, copy callbacks on dup, delete callbacks on
//! delete, overwrite and free, and the predefined attributes of `MPI_COMM_WORLD`.
//!
//! Callbacks are application code that may call MPI, so they run with no lock held.

use crate::errors::guard;
use crate::nonnull_mut;
use crate::state::{lib, CommObj, Keyval, Lib};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

type CopyFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void) -> c_int;

const NULL_FN: usize = 0;
const DUP_FN: usize = 1;

/// Values of the predefined attributes; the application receives pointers to them.
static TAG_UB: AtomicI32 = AtomicI32::new(crate::p2p::TAG_UB);
static UNIVERSE: AtomicI32 = AtomicI32::new(1);
static APPNUM: AtomicI32 = AtomicI32::new(0);
static WTIME_GLOBAL: AtomicI32 = AtomicI32::new(0);
static HOST: AtomicI32 = AtomicI32::new(c::MPI_PROC_NULL);
static IO: AtomicI32 = AtomicI32::new(c::MPI_ANY_SOURCE);
static LASTUSED: AtomicI32 = AtomicI32::new(0);

fn predefined(l: &Lib, keyval: c_int) -> Option<*mut c_void> {
    let a = match keyval {
        c::MPI_TAG_UB => &TAG_UB,
        c::MPI_UNIVERSE_SIZE => {
            UNIVERSE.store(l.mpi.universe_size, Ordering::Relaxed);
            &UNIVERSE
        }
        c::MPI_APPNUM => {
            APPNUM.store(l.mpi.appnum, Ordering::Relaxed);
            &APPNUM
        }
        c::MPI_WTIME_IS_GLOBAL => &WTIME_GLOBAL,
        c::MPI_HOST => &HOST,
        c::MPI_IO => &IO,
        c::MPI_LASTUSEDCODE => {
            LASTUSED.store(crate::errors::last_used_code(), Ordering::Relaxed);
            &LASTUSED
        }
        _ => return None,
    };
    Some(a.as_ptr() as *mut c_void)
}

fn is_predefined_key(k: c_int) -> bool {
    matches!(
        k,
        c::MPI_TAG_UB
            | c::MPI_UNIVERSE_SIZE
            | c::MPI_APPNUM
            | c::MPI_WTIME_IS_GLOBAL
            | c::MPI_HOST
            | c::MPI_IO
            | c::MPI_LASTUSEDCODE
    )
}

fn keyval(l: &Lib, call: &str, k: c_int) -> Result<Keyval> {
    l.t().keyvals.get(&k).copied().ok_or_else(|| {
        MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: keyval {k} is not a valid communicator keyval"))
    })
}

fn call_delete(comm: usize, k: c_int, kv: &Keyval, val: usize) -> Result<()> {
    if kv.delete_fn == NULL_FN {
        return Ok(());
    }
    // SAFETY: registered by the application as an MPI_Comm_delete_attr_function.
    let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete_fn) };
    // SAFETY: calling application code with the values it gave us.
    let rc = unsafe { f(comm, k, val as *mut c_void, kv.extra as *mut c_void) };
    if rc != c::MPI_SUCCESS {
        return Err(MpiError::new(
            crate::errors::class_of(rc).unwrap_or(c::MPI_ERR_OTHER),
            format!("attribute delete callback for keyval {k} returned error {rc}"),
        ));
    }
    Ok(())
}

fn release_keyval(l: &Lib, k: c_int) {
    let mut t = l.t();
    if let Some(kv) = t.keyvals.get_mut(&k) {
        kv.uses -= 1;
        if kv.freed && kv.uses == 0 {
            t.keyvals.remove(&k);
        }
    }
}

/// Copies the attributes of `old` onto its duplicate `new` through their copy callbacks.
pub fn copy_attrs_on_dup(old_h: usize, old: &CommObj, _new_h: usize, new: &CommObj) -> Result<()> {
    let l = lib("MPI_Comm_dup")?;
    let attrs: Vec<(c_int, usize)> = old.attrs.lock().unwrap().iter().map(|(&k, &v)| (k, v)).collect();
    for (k, v) in attrs {
        let Ok(kv) = keyval(l, "MPI_Comm_dup", k) else { continue };
        let copied = match kv.copy_fn {
            NULL_FN => None,
            DUP_FN => Some(v),
            f => {
                // SAFETY: registered by the application as an MPI_Comm_copy_attr_function.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut out: usize = 0;
                let mut flag: c_int = 0;
                // SAFETY: application callback with valid pointers to locals.
                let rc = unsafe {
                    f(
                        old_h,
                        k,
                        kv.extra as *mut c_void,
                        v as *mut c_void,
                        &mut out as *mut usize as *mut c_void,
                        &mut flag,
                    )
                };
                if rc != c::MPI_SUCCESS {
                    return Err(MpiError::new(
                        crate::errors::class_of(rc).unwrap_or(c::MPI_ERR_OTHER),
                        format!("MPI_Comm_dup: attribute copy callback for keyval {k} returned error {rc}"),
                    ));
                }
                (flag != 0).then_some(out)
            }
        };
        if let Some(v) = copied {
            new.attrs.lock().unwrap().insert(k, v);
            if let Some(kv) = l.t().keyvals.get_mut(&k) {
                kv.uses += 1;
            }
        }
    }
    Ok(())
}

/// Deletes every attribute of `comm` (before it is freed), running delete callbacks.
pub fn delete_all_attrs(l: &Lib, h: usize, obj: &CommObj) -> Result<()> {
    let attrs: Vec<(c_int, usize)> = std::mem::take(&mut *obj.attrs.lock().unwrap()).into_iter().collect();
    for (k, v) in attrs {
        if let Ok(kv) = keyval(l, "MPI_Comm_free", k) {
            call_delete(h, k, &kv, v)?;
            release_keyval(l, k);
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_keyval(
    copy_fn: *mut c_void,
    delete_fn: *mut c_void,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Comm_create_keyval";
        let l = lib(call)?;
        nonnull_mut(call, "comm_keyval", keyval)?;
        let mut t = l.t();
        t.next_keyval += 1;
        let k = t.next_keyval;
        t.keyvals.insert(
            k,
            Keyval {
                copy_fn: copy_fn as usize,
                delete_fn: delete_fn as usize,
                extra: extra as usize,
                freed: false,
                uses: 1,
            },
        );
        // SAFETY: checked non-null.
        unsafe { *keyval = k };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_free_keyval(keyval: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Comm_free_keyval";
        let l = lib(call)?;
        nonnull_mut(call, "comm_keyval", keyval)?;
        // SAFETY: checked non-null.
        let k = unsafe { *keyval };
        if is_predefined_key(k) {
            return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: predefined keyval {k} cannot be freed")));
        }
        keyval_mut_free(l, call, k)?;
        release_keyval(l, k);
        // SAFETY: checked non-null.
        unsafe { *keyval = c::MPI_KEYVAL_INVALID };
        Ok(())
    })
}

fn keyval_mut_free(l: &Lib, call: &str, k: c_int) -> Result<()> {
    let mut t = l.t();
    match t.keyvals.get_mut(&k) {
        Some(kv) if !kv.freed => {
            kv.freed = true;
            Ok(())
        }
        _ => Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: keyval {k} is not a valid communicator keyval"))),
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_attr(comm: usize, k: c_int, val: *mut c_void) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_set_attr";
        let l = lib(call)?;
        let obj = l.comm(call, comm)?;
        if is_predefined_key(k) {
            return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: predefined attribute {k} is read-only")));
        }
        let kv = keyval(l, call, k)?;
        let old = obj.attrs.lock().unwrap().insert(k, val as usize);
        match old {
            Some(v) => call_delete(comm, k, &kv, v)?,
            None => {
                if let Some(kv) = l.t().keyvals.get_mut(&k) {
                    kv.uses += 1;
                }
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_attr(comm: usize, k: c_int, val: *mut c_void, flag: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_get_attr";
        let l = lib(call)?;
        let obj = l.comm(call, comm)?;
        nonnull_mut(call, "flag", flag)?;
        nonnull_mut(call, "attribute_val", val)?;
        let found = if is_predefined_key(k) {
            if comm == c::MPI_COMM_WORLD {
                predefined(l, k).map(|p| p as usize)
            } else {
                None
            }
        } else {
            keyval(l, call, k)?;
            obj.attrs.lock().unwrap().get(&k).copied()
        };
        // SAFETY: `val` is really a `void **` (the standard's C binding); both checked non-null.
        unsafe {
            *flag = found.is_some() as c_int;
            if let Some(v) = found {
                *(val as *mut usize) = v;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_delete_attr(comm: usize, k: c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Comm_delete_attr";
        let l = lib(call)?;
        let obj = l.comm(call, comm)?;
        let kv = keyval(l, call, k)?;
        let old = obj.attrs.lock().unwrap().remove(&k);
        let Some(v) = old else {
            return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: no attribute is set for keyval {k}")));
        };
        call_delete(comm, k, &kv, v)?;
        release_keyval(l, k);
        Ok(())
    })
}
