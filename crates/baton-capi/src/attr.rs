//! Attribute caching on communicators: keyvals, copy callbacks on dup, delete callbacks on
//! delete, overwrite and free, and the predefined attributes of `MPI_COMM_WORLD`. The callback
//! runners ([`run_copy`], [`run_delete`]) serve datatype attributes too (`datatype::names`).
//!
//! Attributes are kept in the order they were first set ([`Attrs`](crate::state::Attrs)): `MPI_Finalize` deletes
//! those of `MPI_COMM_SELF` in the reverse order, as the standard requires, and freeing any
//! communicator does the same. A keyval freed while attributes still use it lives on (its
//! `uses` count) until the last of them is deleted, so their delete callbacks still run.
//!
//! Callbacks are application code that may call MPI, so they run with no lock held.

use crate::state::{lib, Attrs, CommObj, CommRef, Keyval, Lib};
use crate::validate::{Call, Out, TAG_UB as TAG_UB_VALUE};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

type CopyFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void) -> c_int;

/// `MPI_*_NULL_COPY_FN` / `MPI_*_NULL_DELETE_FN` and `MPI_*_DUP_FN` in the ABI.
const NULL_FN: usize = 0;
const DUP_FN: usize = 1;

/// The error a callback's return code `rc` makes: the application's own code stays itself (so
/// the call returns exactly `rc`), any other code keeps its class.
fn callback_error(rc: c_int, msg: String) -> MpiError {
    let class =
        if crate::errors::is_user_code(rc) { rc } else { crate::errors::class_of(rc).unwrap_or(c::MPI_ERR_OTHER) };
    MpiError::new(class, msg)
}

/// A keyval made from the application's callbacks (uses: attributes set with it).
pub(crate) fn new_keyval(copy_fn: *mut c_void, delete_fn: *mut c_void, extra: *mut c_void, uses: usize) -> Keyval {
    Keyval { copy_fn: copy_fn as usize, delete_fn: delete_fn as usize, extra: extra as usize, freed: false, uses }
}

/// Runs the delete callback of keyval `k` on value `val` of object `obj` (a communicator or
/// datatype handle; `of` names the kind).
pub(crate) fn run_delete(of: &str, obj: usize, k: c_int, kv: &Keyval, val: usize) -> Result<()> {
    if kv.delete_fn == NULL_FN {
        return Ok(());
    }
    // SAFETY: registered by the application as an MPI_Comm/Type_delete_attr_function, which
    // have this signature.
    let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete_fn) };
    // SAFETY: calling application code with the values it gave us; no lock is held.
    let rc = unsafe { f(obj, k, val as *mut c_void, kv.extra as *mut c_void) };
    if rc != c::MPI_SUCCESS {
        return Err(callback_error(rc, format!("attribute delete callback for {of} keyval {k} returned error {rc}")));
    }
    Ok(())
}

/// Runs the copy callback of keyval `k` on value `v` of `old` being duplicated by `call`: the
/// value the duplicate gets, if any.
pub(crate) fn run_copy(call: &str, old: usize, k: c_int, kv: &Keyval, v: usize) -> Result<Option<usize>> {
    match kv.copy_fn {
        NULL_FN => Ok(None),
        DUP_FN => Ok(Some(v)),
        f => {
            // SAFETY: registered by the application as an MPI_Comm/Type_copy_attr_function.
            let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
            let mut out: usize = 0;
            let mut flag: c_int = 0;
            let (extra, val, out_p) =
                (kv.extra as *mut c_void, v as *mut c_void, &mut out as *mut usize as *mut c_void);
            // SAFETY: application callback with valid pointers to locals; no lock is held.
            let rc = unsafe { f(old, k, extra, val, out_p, &mut flag) };
            if rc != c::MPI_SUCCESS {
                return Err(callback_error(
                    rc,
                    format!("{call}: attribute copy callback for keyval {k} returned error {rc}"),
                ));
            }
            Ok((flag != 0).then_some(out))
        }
    }
}

/// Values of the predefined attributes; the application receives pointers to them.
static TAG_UB: AtomicI32 = AtomicI32::new(TAG_UB_VALUE);
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

pub(crate) fn keyval(l: &Lib, call: &str, k: c_int) -> Result<Keyval> {
    l.t().keyvals.get(&k).copied().ok_or_else(|| MpiError::invalid_keyval(call, k, "communicator"))
}

pub(crate) fn release_keyval(l: &Lib, k: c_int) {
    let mut t = l.t();
    if let Some(kv) = t.keyvals.get_mut(&k) {
        kv.uses -= 1;
        if kv.freed && kv.uses == 0 {
            t.keyvals.remove(&k);
        }
    }
}

/// Copies the attributes of `old` onto its duplicate `new` through their copy callbacks. When
/// a callback fails, the attributes already copied are deleted again (their delete callbacks
/// run) and the callback's error is returned: the caller then drops `new`.
pub fn copy_attrs_on_dup(old_h: usize, old: &CommObj, new_h: usize, new: &CommObj) -> Result<()> {
    let l = lib("MPI_Comm_dup")?;
    let attrs = old.attrs.lock().unwrap().pairs();
    for (k, v) in attrs {
        let Ok(kv) = keyval(l, "MPI_Comm_dup", k) else { continue };
        match run_copy("MPI_Comm_dup", old_h, k, &kv, v) {
            Ok(Some(v)) => {
                new.attrs.lock().unwrap().insert(k, v);
                if let Some(kv) = l.t().keyvals.get_mut(&k) {
                    kv.uses += 1;
                }
            }
            Ok(None) => {}
            Err(e) => {
                // The copy failed: what was copied goes, and its delete errors matter less
                // than the copy's.
                let _ = delete_all_attrs(l, new_h, new);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Deletes every attribute of `comm` (before it is freed, and `MPI_COMM_SELF`'s at the start of
/// `MPI_Finalize`), running delete callbacks in the reverse order of setting. Every attribute
/// goes even when a callback fails; the first failure is returned.
pub fn delete_all_attrs(l: &Lib, h: usize, obj: &CommObj) -> Result<()> {
    delete_all_in(l, Holder { attrs: &obj.attrs, handle: h, kind: "communicator" }, "MPI_Comm_free")
}

/// Deletes every attribute of `o`, which `call` frees, newest first; every one goes even when a
/// callback fails, and the first failure is returned.
pub(crate) fn delete_all_in(l: &Lib, o: Holder, call: &str) -> Result<()> {
    let Holder { attrs, handle: h, kind } = o;
    let attrs = attrs.lock().unwrap().take_newest_first();
    let mut first_err = None;
    for (k, v) in attrs {
        if let Ok(kv) = keyval(l, call, k) {
            if let Err(e) = run_delete(kind, h, k, &kv, v) {
                first_err.get_or_insert(e);
            }
            release_keyval(l, k);
        }
    }
    first_err.map_or(Ok(()), Err)
}

pub(crate) fn create_keyval(
    _cx: Call,
    l: &Lib,
    comm_copy_attr_fn: *mut c_void,
    comm_delete_attr_fn: *mut c_void,
    comm_keyval: Out<c_int>,
    extra_state: *mut c_void,
) -> Result<()> {
    let mut t = l.t();
    t.next_keyval += 1;
    let k = t.next_keyval;
    t.keyvals.insert(k, new_keyval(comm_copy_attr_fn, comm_delete_attr_fn, extra_state, 1));
    comm_keyval.put(k);
    Ok(())
}

pub(crate) fn free_keyval(cx: Call, l: &Lib, comm_keyval: Out<c_int>) -> Result<()> {
    let k = comm_keyval.get();
    if is_predefined_key(k) {
        return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{}: predefined keyval {k} cannot be freed", cx.name)));
    }
    match l.t().keyvals.get_mut(&k) {
        Some(kv) if !kv.freed => kv.freed = true,
        _ => return Err(MpiError::invalid_keyval(cx.name, k, "communicator")),
    }
    release_keyval(l, k);
    comm_keyval.put(c::MPI_KEYVAL_INVALID);
    Ok(())
}

fn holder(cm: &CommObj) -> Holder<'_> {
    Holder { attrs: &cm.attrs, handle: handle_of(cm), kind: "communicator" }
}

fn handle_of(cm: &CommObj) -> usize {
    cm.handle.load(Ordering::Relaxed)
}

pub(crate) fn set_attr(cx: Call, l: &Lib, comm: CommRef, comm_keyval: c_int, attribute_val: *mut c_void) -> Result<()> {
    let k = comm_keyval;
    if is_predefined_key(k) {
        return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{}: predefined attribute {k} is read-only", cx.name)));
    }
    set_in(cx, l, holder(&comm), k, attribute_val)
}

/// An object that carries attributes: its attributes, its handle and its kind ("communicator",
/// "window"), which messages and callbacks name.
pub(crate) struct Holder<'a> {
    pub attrs: &'a std::sync::Mutex<Attrs>,
    pub handle: usize,
    pub kind: &'static str,
}

/// Sets attribute `k` of `o` to `v`, running the delete callback of the value it replaces.
pub(crate) fn set_in(cx: Call, l: &Lib, o: Holder, k: c_int, v: *mut c_void) -> Result<()> {
    let Holder { attrs, handle: h, kind } = o;
    let kv = keyval(l, cx.name, k)?;
    if kv.freed {
        return Err(MpiError::invalid_keyval(cx.name, k, kind));
    }
    let old = attrs.lock().unwrap().insert(k, v as usize);
    match old {
        Some(v) => run_delete(kind, h, k, &kv, v)?,
        None => {
            if let Some(kv) = l.t().keyvals.get_mut(&k) {
                kv.uses += 1;
            }
        }
    }
    Ok(())
}

pub(crate) fn get_attr(
    cx: Call,
    l: &Lib,
    comm: CommRef,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: Out<c_int>,
) -> Result<()> {
    let k = comm_keyval;
    let found = if is_predefined_key(k) {
        if handle_of(&comm) == c::MPI_COMM_WORLD {
            predefined(l, k).map(|p| p as usize)
        } else {
            None
        }
    } else {
        keyval(l, cx.name, k)?;
        comm.attrs.lock().unwrap().get(k)
    };
    flag.put(found.is_some() as c_int);
    if let Some(v) = found {
        // SAFETY: `attribute_val` is really a `void **` (the standard's C binding), checked
        // non-null by its role.
        unsafe { *(attribute_val as *mut usize) = v };
    }
    Ok(())
}

pub(crate) fn delete_attr(cx: Call, l: &Lib, comm: CommRef, comm_keyval: c_int) -> Result<()> {
    delete_in(cx, l, holder(&comm), comm_keyval)
}

/// Deletes attribute `k` of `o`, running its delete callback.
pub(crate) fn delete_in(cx: Call, l: &Lib, o: Holder, k: c_int) -> Result<()> {
    let Holder { attrs, handle: h, kind } = o;
    let kv = keyval(l, cx.name, k)?;
    let Some(v) = attrs.lock().unwrap().remove(k) else {
        return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{}: no attribute is set for keyval {k}", cx.name)));
    };
    run_delete(kind, h, k, &kv, v)?;
    release_keyval(l, k);
    Ok(())
}
