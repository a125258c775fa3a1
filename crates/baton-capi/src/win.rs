//! Windows as objects: creation in every flavor, `MPI_Win_free`, dynamic attachment, groups,
//! names, info, attributes and error handlers. The operations and synchronizations on a window
//! are in [`crate::rma`].
//!
//! The memory of `MPI_Win_allocate` and `MPI_Win_allocate_shared` is core's (shared memory the
//! members on one host all map); the application's memory (`MPI_Win_create`, `MPI_Win_attach`)
//! becomes spans here, the one `unsafe` step.

use crate::attr;
use crate::state::{lib, Lib, WinObj, WinRef};
use crate::validate::{Call, CountOut, Out, StrOut};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use baton_core::rma::{Provide, Spec, Window};
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

fn disp_unit_of(call: &str, disp_unit: usize) -> Result<usize> {
    if disp_unit == 0 {
        return Err(MpiError::new(c::MPI_ERR_DISP, format!("{call}: disp_unit must be positive, not 0")));
    }
    Ok(disp_unit)
}

/// Registers window `core`, made over communicator `comm` (whose error handler it inherits).
fn register(l: &Lib, comm_errh: usize, core: Arc<Window>, info: Vec<(String, String)>) -> usize {
    let obj = Arc::new(WinObj {
        attr_size: core.size as isize,
        attr_disp_unit: core.disp_unit as c_int,
        attr_flavor: core.flavor.code(),
        attr_model: c::MPI_WIN_UNIFIED,
        core,
        handle: AtomicUsize::new(c::MPI_WIN_NULL),
        name: Mutex::new(String::new()),
        errhandler: AtomicUsize::new(comm_errh),
        attrs: Mutex::new(Default::default()),
        info: Mutex::new(info),
    });
    let mut t = l.t();
    if let Some(u) = t.errhandlers.get_mut(comm_errh) {
        u.refs += 1;
    }
    let h = t.wins.insert(obj.clone());
    obj.handle.store(h, Ordering::Relaxed);
    h
}

pub(crate) fn create(
    cx: Call,
    l: &Lib,
    base: *mut c_void,
    size: usize,
    disp_unit: usize,
    info: Vec<(String, String)>,
    comm: crate::state::CommRef,
    win: Out<usize>,
) -> Result<()> {
    let du = disp_unit_of(cx.name, disp_unit)?;
    if base.is_null() && size > 0 {
        return Err(MpiError::null_pointer(cx.name, "base"));
    }
    // SAFETY: MPI_Win_create's contract: `size` bytes at `base` stay valid until MPI_Win_free,
    // and the application accesses them only as the window's synchronization allows.
    let span = unsafe { UserBuf::new(base as usize, size) };
    let core = l.mpi.win_create(cx.name, &comm.core, Spec { provide: Provide::User(span), size, disp_unit: du })?;
    win.put(register(l, comm.errhandler.load(Ordering::SeqCst), core, info));
    Ok(())
}

/// `MPI_Win_allocate` and (`SHARED`) `MPI_Win_allocate_shared`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allocate<const SHARED: bool>(
    cx: Call,
    l: &Lib,
    size: usize,
    disp_unit: usize,
    info: Vec<(String, String)>,
    comm: crate::state::CommRef,
    baseptr: *mut c_void,
    win: Out<usize>,
) -> Result<()> {
    let du = disp_unit_of(cx.name, disp_unit)?;
    let noncontig = info.iter().any(|(k, v)| k == "alloc_shared_noncontig" && v == "true");
    let provide = Provide::Allocate { shared: SHARED, noncontig };
    let core = l.mpi.win_create(cx.name, &comm.core, Spec { provide, size, disp_unit: du })?;
    // SAFETY: `baseptr` is really a `void **` (the standard's C binding), checked non-null.
    unsafe { *(baseptr as *mut usize) = core.base };
    win.put(register(l, comm.errhandler.load(Ordering::SeqCst), core, info));
    Ok(())
}

pub(crate) fn create_dynamic(
    cx: Call,
    l: &Lib,
    info: Vec<(String, String)>,
    comm: crate::state::CommRef,
    win: Out<usize>,
) -> Result<()> {
    let core = l.mpi.win_create(cx.name, &comm.core, Spec { provide: Provide::Dynamic, size: 0, disp_unit: 1 })?;
    win.put(register(l, comm.errhandler.load(Ordering::SeqCst), core, info));
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_free(win: *mut usize) -> c_int {
    const CALL: &str = "MPI_Win_free";
    if win.is_null() {
        return crate::errors::raise(c::MPI_COMM_WORLD, MpiError::null_pointer(CALL, "win"));
    }
    // SAFETY: non-null, and the standard's binding makes it an `MPI_Win *`.
    let h = unsafe { *win };
    crate::errors::guard_win(h, || {
        let l = lib(CALL)?;
        let obj = l.win(CALL, "win", h)?;
        obj.core.free(&l.mpi, CALL)?;
        let deleted = attr::delete_all_in(l, holder(&obj), CALL);
        let mut t = l.t();
        t.wins.remove(h);
        crate::state::WIN_EPOCH.fetch_add(1, Ordering::AcqRel);
        let eh = obj.errhandler.load(Ordering::SeqCst);
        crate::comm::release_errhandler(&mut t, eh);
        drop(t);
        // SAFETY: as above.
        unsafe { *win = c::MPI_WIN_NULL };
        deleted
    })
}

pub(crate) fn attach(cx: Call, _l: &Lib, win: WinRef, base: *mut c_void, size: usize) -> Result<()> {
    if base.is_null() && size > 0 {
        return Err(MpiError::null_pointer(cx.name, "base"));
    }
    // SAFETY: MPI_Win_attach's contract: the memory stays valid until MPI_Win_detach.
    let span = unsafe { UserBuf::new(base as usize, size) };
    win.core.attach(cx.name, span)
}

pub(crate) fn detach(cx: Call, _l: &Lib, win: WinRef, base: *mut c_void) -> Result<()> {
    win.core.detach(cx.name, base as usize)
}

pub(crate) fn get_group(_cx: Call, l: &Lib, win: WinRef, group: Out<usize>) -> Result<()> {
    group.put(l.new_group((*win.core.comm.group).clone()));
    Ok(())
}

pub(crate) fn set_name(_cx: Call, _l: &Lib, win: WinRef, win_name: String) -> Result<()> {
    let max = c::MPI_MAX_OBJECT_NAME as usize - 1;
    *win.name.lock().unwrap() = win_name.chars().take(max).collect();
    Ok(())
}

pub(crate) fn get_name(cx: Call, l: &Lib, win: usize, win_name: StrOut, resultlen: Out<c_int>) -> Result<()> {
    // MPI 4.1 names the null handle too (section 7.8).
    if win == c::MPI_WIN_NULL {
        win_name.write("MPI_WIN_NULL", Some(&resultlen));
        return Ok(());
    }
    let w = l.win(cx.name, "win", win)?;
    let n = w.name.lock().unwrap().clone();
    win_name.write(&n, Some(&resultlen));
    Ok(())
}

pub(crate) fn set_info(_cx: Call, _l: &Lib, win: WinRef, info: Vec<(String, String)>) -> Result<()> {
    let mut cur = win.info.lock().unwrap();
    for (k, v) in info {
        match cur.iter_mut().find(|(ck, _)| *ck == k) {
            Some(e) => e.1 = v,
            None => cur.push((k, v)),
        }
    }
    Ok(())
}

pub(crate) fn get_info(_cx: Call, _l: &Lib, win: WinRef, info_used: Out<usize>) -> Result<()> {
    let mut kv = win.info.lock().unwrap().clone();
    // The hints whose values Baton follows, as it follows them.
    for (k, v) in [("accumulate_ordering", "rar,raw,war,waw"), ("accumulate_ops", "same_op_no_op")] {
        if !kv.iter().any(|(ck, _)| ck == k) {
            kv.push((k.to_string(), v.to_string()));
        }
    }
    info_used.put(crate::info::infos().insert(kv));
    Ok(())
}

pub(crate) fn set_errhandler(_cx: Call, l: &Lib, win: WinRef, errhandler: usize) -> Result<()> {
    let mut t = l.t();
    if let Some(u) = t.errhandlers.get_mut(errhandler) {
        u.refs += 1;
    }
    let old = win.errhandler.swap(errhandler, Ordering::SeqCst);
    crate::comm::release_errhandler(&mut t, old);
    Ok(())
}

pub(crate) fn get_errhandler(_cx: Call, l: &Lib, win: WinRef, errhandler: Out<usize>) -> Result<()> {
    let h = win.errhandler.load(Ordering::SeqCst);
    if let Some(u) = l.t().errhandlers.get_mut(h) {
        u.refs += 1;
    }
    errhandler.put(h);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_call_errhandler(win: usize, code: c_int) -> c_int {
    const CALL: &str = "MPI_Win_call_errhandler";
    if let Err(e) = lib(CALL).and_then(|l| l.win(CALL, "win", win)) {
        return crate::errors::raise_win(win, e);
    }
    let class = crate::errors::class_of(code).unwrap_or(c::MPI_ERR_UNKNOWN);
    let text = crate::errors::string_of(code).unwrap_or_default();
    crate::errors::raise_win_code(win, code, MpiError::new(class, text));
    c::MPI_SUCCESS
}

// ----- attributes -----

fn holder(w: &WinObj) -> attr::Holder<'_> {
    attr::Holder { attrs: &w.attrs, handle: w.handle.load(Ordering::Relaxed), kind: "window" }
}

fn is_predefined_key(k: c_int) -> bool {
    matches!(k, c::MPI_WIN_BASE | c::MPI_WIN_SIZE | c::MPI_WIN_DISP_UNIT | c::MPI_WIN_CREATE_FLAVOR | c::MPI_WIN_MODEL)
}

pub(crate) fn set_attr(cx: Call, l: &Lib, win: WinRef, win_keyval: c_int, attribute_val: *mut c_void) -> Result<()> {
    let k = win_keyval;
    if is_predefined_key(k) {
        return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{}: predefined attribute {k} is read-only", cx.name)));
    }
    attr::set_in(cx, l, holder(&win), k, attribute_val)
}

pub(crate) fn get_attr(
    cx: Call,
    l: &Lib,
    win: WinRef,
    win_keyval: c_int,
    attribute_val: *mut c_void,
    flag: Out<c_int>,
) -> Result<()> {
    let k = win_keyval;
    let found = match k {
        c::MPI_WIN_BASE => Some(win.core.base),
        c::MPI_WIN_SIZE => Some(&win.attr_size as *const isize as usize),
        c::MPI_WIN_DISP_UNIT => Some(&win.attr_disp_unit as *const c_int as usize),
        c::MPI_WIN_CREATE_FLAVOR => Some(&win.attr_flavor as *const c_int as usize),
        c::MPI_WIN_MODEL => Some(&win.attr_model as *const c_int as usize),
        _ => {
            attr::keyval(l, cx.name, k)?;
            win.attrs.lock().unwrap().get(k)
        }
    };
    flag.put(found.is_some() as c_int);
    if let Some(v) = found {
        // SAFETY: `attribute_val` is really a `void **` (the standard's C binding), checked
        // non-null by its role.
        unsafe { *(attribute_val as *mut usize) = v };
    }
    Ok(())
}

pub(crate) fn delete_attr(cx: Call, l: &Lib, win: WinRef, win_keyval: c_int) -> Result<()> {
    attr::delete_in(cx, l, holder(&win), win_keyval)
}

// ----- shared memory -----

pub(crate) fn shared_query(
    _cx: Call,
    _l: &Lib,
    win: WinRef,
    rank: c_int,
    size: Out<isize>,
    disp_unit: CountOut,
    baseptr: *mut c_void,
) -> Result<()> {
    let w = &win.core;
    // MPI_PROC_NULL asks for the first member whose memory is not empty.
    let r = if rank == c::MPI_PROC_NULL {
        (0..w.size_of_group()).find(|&r| w.peers[r as usize].size > 0).unwrap_or(0)
    } else {
        rank
    };
    let (base, sz) = w.shared_part(r).unwrap_or((0, 0));
    size.put(sz as isize);
    disp_unit.put(w.peers.get(r as usize).map_or(1, |p| p.disp_unit) as i64)?;
    // SAFETY: `baseptr` is really a `void **` (the standard's C binding), checked non-null.
    unsafe { *(baseptr as *mut usize) = if sz > 0 || r == w.rank() { base } else { 0 } };
    Ok(())
}
