//! One-sided operations and synchronization: the implementations behind the generated entry
//! points of `MPI_Put` ... `MPI_Win_sync` (see `abi/bindings.tsv`). Each decodes its buffers and
//! calls one device entry; windows themselves are in [`crate::win`].

use crate::p2p::user_buffer;
use crate::request::handle_of;
use crate::state::{Lib, WinObj, WinRef};
use crate::validate::{Call, Data, Dt, Out, Remote};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use baton_core::group::Group;
use baton_core::rma::origin::Target;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

fn give(request: Option<Out<usize>>, id: Option<baton_core::engine::ReqId>) {
    if let (Some(r), Some(id)) = (request, id) {
        r.put(handle_of(id));
    }
}

/// The plain form and the request form (`MPI_R…`) of an operation, both calling `$any` with
/// the request the application wants (None for the plain form).
macro_rules! plain_and_request {
    ($plain:ident, $req:ident, $any:ident, $($p:ident: $t:ty),*) => {
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn $plain(cx: Call, l: &Lib, $($p: $t),*) -> Result<()> {
            $any(cx, l, $($p),*, None)
        }

        #[allow(clippy::too_many_arguments)]
        pub(crate) fn $req(cx: Call, l: &Lib, $($p: $t),*, request: Out<usize>) -> Result<()> {
            $any(cx, l, $($p),*, Some(request))
        }
    };
}

plain_and_request!(put, rput, put_any, origin: Data, at: Remote, win: WinRef);
plain_and_request!(get, rget, get_any, origin: Data, at: Remote, win: WinRef);
plain_and_request!(accumulate, raccumulate, acc_any, origin: Data, at: Remote, op: usize, win: WinRef);
plain_and_request!(get_accumulate, rget_accumulate, get_acc_any, origin: Data, result: Data, at: Remote, op: usize,
    win: WinRef);

fn put_any(cx: Call, l: &Lib, origin: Data, at: Remote, win: WinRef, request: Option<Out<usize>>) -> Result<()> {
    let b = user_buffer(cx.name, origin)?;
    let want = request.is_some();
    give(request, l.mpi.put(cx.name, &win.core, &b, at.target(), want)?);
    Ok(())
}

fn get_any(cx: Call, l: &Lib, origin: Data, at: Remote, win: WinRef, request: Option<Out<usize>>) -> Result<()> {
    let b = user_buffer(cx.name, origin)?;
    let want = request.is_some();
    give(request, l.mpi.get(cx.name, &win.core, &b, at.target(), want)?);
    Ok(())
}

fn acc_any(
    cx: Call,
    l: &Lib,
    origin: Data,
    at: Remote,
    op: usize,
    win: WinRef,
    request: Option<Out<usize>>,
) -> Result<()> {
    let (o, basic) = rma_op(cx, op, &origin, at.count)?;
    let b = user_buffer(cx.name, origin)?;
    let want = request.is_some();
    give(request, l.mpi.accumulate(cx.name, &win.core, &b, at.target(), o, basic, want)?);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn get_acc_any(
    cx: Call,
    l: &Lib,
    origin: Data,
    result: Data,
    at: Remote,
    op: usize,
    win: WinRef,
    request: Option<Out<usize>>,
) -> Result<()> {
    // With MPI_NO_OP the origin buffer is ignored: its datatype may be anything.
    let (o, basic) = rma_op(cx, op, if op == c::MPI_NO_OP { &result } else { &origin }, at.count)?;
    let ob = user_buffer(cx.name, origin)?;
    let rb = user_buffer(cx.name, result)?;
    let want = request.is_some();
    give(request, l.mpi.get_accumulate(cx.name, &win.core, &ob, &rb, at.target(), o, basic, want)?);
    Ok(())
}

/// The operation and basic datatype of an accumulate whose elements are `data`'s. An operation
/// that combines nothing (no element on either side) is not checked against the datatype, as
/// other MPIs do not check it.
fn rma_op(cx: Call, op: usize, data: &Data, target_count: usize) -> Result<(baton_core::op::Op, usize)> {
    let checked = crate::ops::rma_op(cx.name, op, data.datatype.handle, data.datatype.layout());
    match checked {
        Err(e) if data.count == 0 && target_count == 0 && e.class == c::MPI_ERR_OP && op != 0 => {
            let o = baton_core::op::Op::from_handle(op).ok_or(e)?;
            Ok((o, data.datatype.handle))
        }
        r => r,
    }
}

/// The single element of predefined datatype `dt` an atomic operation works on.
fn element(cx: Call, dt: &Dt, what: &str) -> Result<()> {
    if !dt.is_predefined() {
        return Err(MpiError::new(
            c::MPI_ERR_TYPE,
            format!("{}: {what} must be a predefined datatype, not a derived one", cx.name),
        ));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch_and_op(
    cx: Call,
    l: &Lib,
    origin_addr: *mut c_void,
    result_addr: *mut c_void,
    datatype: Dt,
    target_rank: c_int,
    target_disp: isize,
    op: usize,
    win: WinRef,
) -> Result<()> {
    element(cx, &datatype, "datatype")?;
    let (o, basic) = crate::ops::rma_op(cx.name, op, datatype.handle, datatype.layout())?;
    if result_addr.is_null() {
        return Err(MpiError::null_pointer(cx.name, "result_addr"));
    }
    if origin_addr.is_null() && op != c::MPI_NO_OP {
        return Err(MpiError::null_pointer(cx.name, "origin_addr"));
    }
    let ob = user_buffer(cx.name, Data::new(origin_addr, (op != c::MPI_NO_OP) as usize, datatype.clone()))?;
    let rb = user_buffer(cx.name, Data::new(result_addr, 1, datatype.clone()))?;
    let t = Target { rank: target_rank, disp: target_disp as i64, count: 1, layout: datatype.layout() };
    l.mpi.get_accumulate(cx.name, &win.core, &ob, &rb, t, o, basic, false)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn compare_and_swap(
    cx: Call,
    l: &Lib,
    origin_addr: *mut c_void,
    compare_addr: *mut c_void,
    result_addr: *mut c_void,
    datatype: Dt,
    target_rank: c_int,
    target_disp: isize,
    win: WinRef,
) -> Result<()> {
    element(cx, &datatype, "datatype")?;
    for (p, n) in [(origin_addr, "origin_addr"), (compare_addr, "compare_addr"), (result_addr, "result_addr")] {
        if p.is_null() {
            return Err(MpiError::null_pointer(cx.name, n));
        }
    }
    let buf = |p| user_buffer(cx.name, Data::new(p, 1, datatype.clone()));
    let (ob, cb, rb) = (buf(origin_addr)?, buf(compare_addr)?, buf(result_addr)?);
    let t = Target { rank: target_rank, disp: target_disp as i64, count: 1, layout: datatype.layout() };
    l.mpi.compare_and_swap(cx.name, &win.core, &ob, &cb, &rb, t)
}

// ----- synchronization -----

/// The window ranks of `group`'s members, or an error naming one that is not in the window.
fn ranks_in(cx: Call, win: &WinObj, group: &Group) -> Result<Vec<i32>> {
    let wg = &win.core.comm.group;
    group
        .procs
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let r = wg.rank_of(p);
            if r < 0 {
                return Err(MpiError::new(
                    c::MPI_ERR_GROUP,
                    format!("{}: rank {i} of group is not a member of the window's group", cx.name),
                ));
            }
            Ok(r)
        })
        .collect()
}

fn assert_ok(cx: Call, assert: c_int) -> Result<()> {
    let known =
        c::MPI_MODE_NOCHECK | c::MPI_MODE_NOSTORE | c::MPI_MODE_NOPUT | c::MPI_MODE_NOPRECEDE | c::MPI_MODE_NOSUCCEED;
    if assert & !known != 0 {
        return Err(MpiError::new(c::MPI_ERR_ASSERT, format!("{}: assert {assert:#x} has unknown bits", cx.name)));
    }
    Ok(())
}

pub(crate) fn fence(cx: Call, l: &Lib, assert: c_int, win: WinRef) -> Result<()> {
    assert_ok(cx, assert)?;
    l.mpi.win_fence(cx.name, &win.core, assert, l.thread_level == c::MPI_THREAD_MULTIPLE)
}

pub(crate) fn start(cx: Call, l: &Lib, group: Arc<Group>, assert: c_int, win: WinRef) -> Result<()> {
    assert_ok(cx, assert)?;
    let ranks = ranks_in(cx, &win, &group)?;
    win.core.start(&l.mpi, cx.name, ranks, assert)
}

pub(crate) fn complete(cx: Call, l: &Lib, win: WinRef) -> Result<()> {
    win.core.complete(&l.mpi, cx.name)
}

pub(crate) fn post(cx: Call, l: &Lib, group: Arc<Group>, assert: c_int, win: WinRef) -> Result<()> {
    assert_ok(cx, assert)?;
    let ranks = ranks_in(cx, &win, &group)?;
    win.core.post(&l.mpi, cx.name, ranks, assert)
}

pub(crate) fn wait(cx: Call, l: &Lib, win: WinRef) -> Result<()> {
    win.core.wait(&l.mpi, cx.name, true).map(|_| ())
}

pub(crate) fn test(cx: Call, l: &Lib, win: WinRef, flag: Out<c_int>) -> Result<()> {
    flag.put(win.core.wait(&l.mpi, cx.name, false)? as c_int);
    Ok(())
}

pub(crate) fn lock(cx: Call, l: &Lib, lock_type: c_int, rank: c_int, assert: c_int, win: WinRef) -> Result<()> {
    assert_ok(cx, assert)?;
    let exclusive = match lock_type {
        c::MPI_LOCK_EXCLUSIVE => true,
        c::MPI_LOCK_SHARED => false,
        t => {
            return Err(MpiError::new(
                c::MPI_ERR_LOCKTYPE,
                format!("{}: lock_type {t} is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE", cx.name),
            ))
        }
    };
    if rank == c::MPI_PROC_NULL {
        return Ok(());
    }
    win.core.lock(&l.mpi, cx.name, exclusive, rank, assert)
}

pub(crate) fn unlock(cx: Call, l: &Lib, rank: c_int, win: WinRef) -> Result<()> {
    if rank == c::MPI_PROC_NULL {
        return Ok(());
    }
    win.core.unlock(&l.mpi, cx.name, rank)
}

pub(crate) fn lock_all(cx: Call, l: &Lib, assert: c_int, win: WinRef) -> Result<()> {
    assert_ok(cx, assert)?;
    win.core.lock_all(&l.mpi, cx.name, assert)
}

pub(crate) fn unlock_all(cx: Call, l: &Lib, win: WinRef) -> Result<()> {
    win.core.unlock_all(&l.mpi, cx.name)
}

pub(crate) fn flush(cx: Call, l: &Lib, rank: c_int, win: WinRef) -> Result<()> {
    if rank == c::MPI_PROC_NULL {
        return Ok(());
    }
    win.core.flush(&l.mpi, cx.name, Some(rank), true)
}

pub(crate) fn flush_local(cx: Call, l: &Lib, rank: c_int, win: WinRef) -> Result<()> {
    if rank == c::MPI_PROC_NULL {
        return Ok(());
    }
    win.core.flush(&l.mpi, cx.name, Some(rank), false)
}

pub(crate) fn flush_all(cx: Call, l: &Lib, win: WinRef) -> Result<()> {
    win.core.flush(&l.mpi, cx.name, None, true)
}

pub(crate) fn flush_local_all(cx: Call, l: &Lib, win: WinRef) -> Result<()> {
    win.core.flush(&l.mpi, cx.name, None, false)
}

pub(crate) fn sync(_cx: Call, l: &Lib, win: WinRef) -> Result<()> {
    win.core.sync(&l.mpi);
    Ok(())
}
