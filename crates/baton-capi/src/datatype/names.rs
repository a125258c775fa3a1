//! Names and attributes of datatypes (`MPI_Type_set_name`, `MPI_Type_create_keyval`,
//! `MPI_Type_set_attr`...). Both live in this module's own table ([`extras`]), keyed by handle,
//! so that the shared handle table keeps its `(layout, committed)` entries. Datatype keyvals
//! have their own numbers, apart from communicator keyvals, so that passing one where the other
//! is expected fails.

use crate::attr::{new_keyval, run_copy, run_delete};
use crate::state::{Keyval, Lib};
use crate::validate::{Call, Dt, Out, StrOut};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Per-handle extras: the name set by `MPI_Type_set_name` and the attributes.
#[derive(Default)]
struct Extra {
    name: Option<String>,
    attrs: BTreeMap<c_int, usize>,
}

fn extras() -> MutexGuard<'static, HashMap<usize, Extra>> {
    static X: OnceLock<Mutex<HashMap<usize, Extra>>> = OnceLock::new();
    // A poisoned lock only means a panic elsewhere; the map itself stays consistent.
    X.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn set_name(_cx: Call, _l: &Lib, datatype: Dt, type_name: String) -> Result<()> {
    let mut s = type_name;
    let max = c::MPI_MAX_OBJECT_NAME as usize - 1;
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    extras().entry(datatype.handle).or_default().name = Some(s);
    Ok(())
}

pub(crate) fn get_name(cx: Call, datatype: usize, type_name: StrOut, resultlen: Out<c_int>) -> Result<()> {
    // MPI 4.1 names the null handle too (section 7.8).
    if datatype == c::MPI_DATATYPE_NULL {
        type_name.write("MPI_DATATYPE_NULL", Some(&resultlen));
        return Ok(());
    }
    let datatype = crate::validate::datatype(cx.name, "datatype", datatype)?;
    let set = extras().get(&datatype.handle).and_then(|x| x.name.clone());
    type_name.write(set.as_deref().unwrap_or(datatype.name), Some(&resultlen));
    Ok(())
}

// ----- attributes -----

struct Keyvals {
    next: c_int,
    map: BTreeMap<c_int, Keyval>,
}

fn keyvals() -> MutexGuard<'static, Keyvals> {
    static K: OnceLock<Mutex<Keyvals>> = OnceLock::new();
    K.get_or_init(|| Mutex::new(Keyvals { next: 0x10000, map: BTreeMap::new() }))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Keyval `k`, also when freed while attributes still use it (they stay reachable until they
/// go); only a new attribute needs a keyval that is not freed (see `set_attr`).
fn keyval(call: &str, k: c_int) -> Result<Keyval> {
    keyvals().map.get(&k).copied().ok_or_else(|| MpiError::invalid_keyval(call, k, "datatype"))
}

fn release_keyval(k: c_int) {
    let mut kvs = keyvals();
    if let Some(kv) = kvs.map.get_mut(&k) {
        kv.uses = kv.uses.saturating_sub(1);
        if kv.freed && kv.uses == 0 {
            kvs.map.remove(&k);
        }
    }
}

fn use_keyval(k: c_int) {
    if let Some(kv) = keyvals().map.get_mut(&k) {
        kv.uses += 1;
    }
}

/// Forgets `dt` (on `MPI_Type_free`): its name, and its attributes through their delete
/// callbacks.
pub(super) fn forget(dt: usize) -> Result<()> {
    let attrs: Vec<(c_int, usize)> =
        extras().get_mut(&dt).map(|x| std::mem::take(&mut x.attrs).into_iter().collect()).unwrap_or_default();
    for (k, v) in attrs {
        let kv = keyvals().map.get(&k).copied();
        if let Some(kv) = kv {
            run_delete("datatype", dt, k, &kv, v)?;
            release_keyval(k);
        }
    }
    extras().remove(&dt);
    Ok(())
}

/// Copies the attributes of `old` onto its duplicate `new` through their copy callbacks.
pub(super) fn copy_attrs(old: usize, new: usize) -> Result<()> {
    let attrs: Vec<(c_int, usize)> =
        extras().get(&old).map(|x| x.attrs.iter().map(|(&k, &v)| (k, v)).collect()).unwrap_or_default();
    for (k, v) in attrs {
        let Some(kv) = keyvals().map.get(&k).copied() else { continue };
        match run_copy("MPI_Type_dup", old, k, &kv, v) {
            Ok(Some(val)) => {
                extras().entry(new).or_default().attrs.insert(k, val);
                use_keyval(k);
            }
            Ok(None) => {}
            Err(e) => {
                // What was copied goes again; the copy's error is the one to report.
                let _ = forget(new);
                return Err(e);
            }
        }
    }
    Ok(())
}

pub(crate) fn create_keyval(
    _cx: Call,
    _l: &Lib,
    type_copy_attr_fn: *mut c_void,
    type_delete_attr_fn: *mut c_void,
    type_keyval: Out<c_int>,
    extra_state: *mut c_void,
) -> Result<()> {
    let mut kvs = keyvals();
    let k = kvs.next;
    kvs.next += 1;
    kvs.map.insert(k, new_keyval(type_copy_attr_fn, type_delete_attr_fn, extra_state, 0));
    type_keyval.put(k);
    Ok(())
}

pub(crate) fn free_keyval(cx: Call, _l: &Lib, type_keyval: Out<c_int>) -> Result<()> {
    let k = type_keyval.get();
    if keyval(cx.name, k)?.freed {
        return Err(MpiError::invalid_keyval(cx.name, k, "datatype"));
    }
    let mut kvs = keyvals();
    if let Some(kv) = kvs.map.get_mut(&k) {
        kv.freed = true;
        if kv.uses == 0 {
            kvs.map.remove(&k);
        }
    }
    drop(kvs);
    type_keyval.put(c::MPI_KEYVAL_INVALID);
    Ok(())
}

pub(crate) fn set_attr(cx: Call, _l: &Lib, datatype: Dt, type_keyval: c_int, attribute_val: *mut c_void) -> Result<()> {
    let (dt, k) = (datatype.handle, type_keyval);
    let kv = keyval(cx.name, k)?;
    if kv.freed {
        return Err(MpiError::invalid_keyval(cx.name, k, "datatype"));
    }
    let old = extras().entry(dt).or_default().attrs.insert(k, attribute_val as usize);
    match old {
        Some(v) => run_delete("datatype", dt, k, &kv, v),
        None => {
            use_keyval(k);
            Ok(())
        }
    }
}

pub(crate) fn get_attr(
    cx: Call,
    _l: &Lib,
    datatype: Dt,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    flag: Out<c_int>,
) -> Result<()> {
    keyval(cx.name, type_keyval)?;
    let v = extras().get(&datatype.handle).and_then(|x| x.attrs.get(&type_keyval).copied());
    if let Some(v) = v {
        crate::nonnull_mut(cx.name, "attribute_val", attribute_val)?;
        // SAFETY: `attribute_val` is really a `void **` (standard C binding); checked non-null.
        unsafe { *(attribute_val as *mut usize) = v };
    }
    flag.put(v.is_some() as c_int);
    Ok(())
}

pub(crate) fn delete_attr(cx: Call, _l: &Lib, datatype: Dt, type_keyval: c_int) -> Result<()> {
    let (dt, k) = (datatype.handle, type_keyval);
    let kv = keyval(cx.name, k)?;
    let Some(v) = extras().get_mut(&dt).and_then(|x| x.attrs.remove(&k)) else {
        return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{}: no attribute is set for keyval {k}", cx.name)));
    };
    run_delete("datatype", dt, k, &kv, v)?;
    release_keyval(k);
    Ok(())
}
