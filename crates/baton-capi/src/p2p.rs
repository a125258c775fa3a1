//! Point-to-point communication: argument checks, then the engine.
//!
//! Every call is written once over 64-bit counts; the `int` and `_c` entry points are thin.

use crate::errors::guard;
use crate::state::{lib, CommObj, Lib, PersistentOp, PersistentReq};
use crate::{put_status, MPI_Status};
use baton_abi::consts as c;
use baton_core::datatype::{predefined, predefined_contig_size, Layout};
use baton_core::engine::{DirectEnd, ProcIdx, ReqId, SendData, Sender, Sink, Status};
use baton_core::error::{MpiError, Result};
use baton_core::runtime::State;
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::Arc;

/// The largest tag: the frame header carries tags as 32-bit signed integers.
pub const TAG_UB: c_int = i32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    Standard,
    Sync,
    Ready,
    Buffered,
}

impl SendMode {
    fn call(self, nonblocking: bool) -> &'static str {
        match (self, nonblocking) {
            (SendMode::Standard, false) => "MPI_Send",
            (SendMode::Sync, false) => "MPI_Ssend",
            (SendMode::Ready, false) => "MPI_Rsend",
            (SendMode::Buffered, false) => "MPI_Bsend",
            (SendMode::Standard, true) => "MPI_Isend",
            (SendMode::Sync, true) => "MPI_Issend",
            (SendMode::Ready, true) => "MPI_Irsend",
            (SendMode::Buffered, true) => "MPI_Ibsend",
        }
    }
}

/// A datatype's layout: predefined ones are borrowed (no reference counting on the hot path).
pub enum DtRef {
    Predefined(&'static Arc<Layout>),
    User(Arc<Layout>),
}

impl std::ops::Deref for DtRef {
    type Target = Arc<Layout>;
    fn deref(&self) -> &Arc<Layout> {
        match self {
            DtRef::Predefined(a) => a,
            DtRef::User(a) => a,
        }
    }
}

/// The layout of a datatype usable for communication (predefined, or user-defined and committed).
pub fn dtype(call: &str, h: usize) -> Result<DtRef> {
    if let Some(l) = predefined(h) {
        return Ok(DtRef::Predefined(l));
    }
    let (lay, committed) = dtype_any(call, h)?;
    if !committed {
        return Err(MpiError::new(
            c::MPI_ERR_TYPE,
            format!("{call}: datatype {h:#x} has not been committed (MPI_Type_commit)"),
        ));
    }
    Ok(DtRef::User(lay))
}

/// The layout of any valid datatype, and whether it may be used for communication.
pub fn dtype_any(call: &str, h: usize) -> Result<(Arc<Layout>, bool)> {
    if h == c::MPI_DATATYPE_NULL {
        return Err(MpiError::new(c::MPI_ERR_TYPE, format!("{call}: datatype is MPI_DATATYPE_NULL")));
    }
    if let Some(l) = predefined(h) {
        return Ok((l.clone(), true));
    }
    crate::state::lib_any().and_then(|l| l.t().datatypes.get(h).cloned()).ok_or_else(|| {
        MpiError::new(c::MPI_ERR_TYPE, format!("{call}: datatype {h:#x} is not a valid datatype handle"))
    })
}

fn check_count(call: &str, count: i64) -> Result<usize> {
    if count < 0 {
        return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: count {count} is negative")));
    }
    Ok(count as usize)
}

fn check_peer(call: &str, what: &str, comm: &CommObj, r: c_int, allow_any: bool) -> Result<()> {
    // On an intercommunicator, ranks name the remote group.
    let n = comm.core.peer_size();
    if r == c::MPI_PROC_NULL || (allow_any && r == c::MPI_ANY_SOURCE) || (0..n).contains(&r) {
        return Ok(());
    }
    let of = if comm.core.is_inter() { "the remote group of an intercommunicator" } else { "a communicator" };
    Err(MpiError::new(c::MPI_ERR_RANK, format!("{call}: {what} {r} is out of range for {of} of size {n}")))
}

fn check_tag(call: &str, tag: c_int, allow_any: bool) -> Result<()> {
    if (0..=TAG_UB).contains(&tag) || (allow_any && tag == c::MPI_ANY_TAG) {
        return Ok(());
    }
    Err(MpiError::new(c::MPI_ERR_TAG, format!("{call}: tag {tag} is invalid (valid tags are 0..={TAG_UB})")))
}

/// A NULL buffer is `MPI_BOTTOM`: valid only for a datatype whose data lies at absolute
/// addresses (built from `MPI_Get_address`), never for one that would touch the first page.
pub fn check_buf(call: &str, buf: usize, count: usize, lay: &Layout) -> Result<()> {
    if buf == 0 && count > 0 && lay.size > 0 && lay.true_lb < 4096 {
        return Err(MpiError::new(
            c::MPI_ERR_BUFFER,
            format!("{call}: buffer is NULL but count is {count} of {}", lay.name),
        ));
    }
    Ok(())
}

fn bytes_of(call: &str, count: usize, lay: &Layout) -> Result<usize> {
    count
        .checked_mul(lay.size)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| MpiError::new(c::MPI_ERR_COUNT, format!("{call}: count {count} of {} overflows", lay.name)))
}

/// The bytes a send takes from `buf`: the span itself when contiguous, else its elements, which
/// the engine packs frame by frame.
pub fn send_data(call: &str, buf: usize, count: usize, lay: &Arc<Layout>) -> Result<SendData> {
    let n = bytes_of(call, count, lay)?;
    let (lo, hi) = lay.span(count);
    // SAFETY: MPI requires the send buffer to hold `count` elements of the datatype and to stay
    // valid and unmodified until the send completes; (lo, hi) is exactly the bytes they cover.
    let span = unsafe { UserBuf::new(buf.wrapping_add_signed(lo), (hi - lo) as usize) };
    if lay.blocks.len() == 1 && lay.extent == lay.size as isize && lay.blocks[0].0 == 0 {
        return Ok(SendData::User(span.prefix(n)));
    }
    Ok(SendData::Typed { span, base_off: -lo, layout: lay.clone(), len: n })
}

/// Where a receive puts its bytes.
pub fn sink(call: &str, buf: usize, count: usize, lay: &Arc<Layout>) -> Result<Sink> {
    let n = bytes_of(call, count, lay)?;
    let (lo, hi) = lay.span(count);
    // SAFETY: MPI requires the receive buffer to have room for `count` elements of the
    // datatype and not to be accessed until the receive completes.
    let span = unsafe { UserBuf::new(buf.wrapping_add_signed(lo), (hi - lo) as usize) };
    if lay.is_contiguous() {
        return Ok(Sink::Contig(span.prefix(n)));
    }
    Ok(Sink::Typed { span, base_off: -lo, layout: lay.clone(), start: 0, len: n })
}

fn proc_null_status() -> Status {
    Status { source: c::MPI_PROC_NULL, tag: c::MPI_ANY_TAG, error: 0, bytes: 0, cancelled: false }
}

/// Space accounting for buffered sends against the buffer the application attached.
#[derive(Default)]
pub struct BsendState {
    pub addr: usize,
    pub size: usize,
    pub attached: bool,
    pub automatic: bool,
    pub inflight: Vec<(ReqId, usize)>,
}

fn bsend_used(st: &mut State, b: &mut BsendState) -> usize {
    b.inflight.retain(|&(id, _)| {
        let done = st.engine.get(id).is_none_or(|r| r.complete);
        if done {
            st.engine.release(id);
        }
        !done
    });
    b.inflight.iter().map(|&(_, n)| n).sum()
}

/// Waits until every buffered send has left (detach, finalize).
pub fn bsend_flush(l: &Lib) {
    let ids: Vec<ReqId> = std::mem::take(&mut l.t().bsend.inflight).into_iter().map(|(id, _)| id).collect();
    for id in ids {
        l.mpi.wait(id);
    }
}

/// Starts a send; returns the engine request.
pub fn start_send(
    l: &Lib,
    call: &str,
    comm: &CommObj,
    buf: usize,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    mode: SendMode,
) -> Result<ReqId> {
    Ok(send_inner(l, call, comm, buf, count, dt, dest, tag, mode, false)?.expect("kept"))
}

/// Starts a send. With `release_if_done`, a send complete on return (an eager message that
/// fit in the ring) is released under the same lock and `None` is returned.
fn send_inner(
    l: &Lib,
    call: &str,
    comm: &CommObj,
    buf: usize,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    mode: SendMode,
    release_if_done: bool,
) -> Result<Option<ReqId>> {
    let lay = dtype(call, dt)?;
    let count = check_count(call, count)?;
    check_peer(call, "dest", comm, dest, false)?;
    check_tag(call, tag, false)?;
    check_buf(call, buf, count, &lay)?;
    if dest == c::MPI_PROC_NULL {
        return Ok(Some(l.mpi.lock().engine.completed(proc_null_status())));
    }
    let mut data = send_data(call, buf, count, &lay)?;
    let to = comm.core.proc_of(dest);
    if mode == SendMode::Buffered {
        data = SendData::Packed(data.to_vec());
        let need = data.len() + c::MPI_BSEND_OVERHEAD as usize;
        let mut t = l.t();
        let mut st = l.mpi.lock();
        let used = bsend_used(&mut st, &mut t.bsend);
        if !t.bsend.automatic {
            if !t.bsend.attached {
                return Err(MpiError::new(
                    c::MPI_ERR_BUFFER,
                    format!("{call}: no buffer is attached (MPI_Buffer_attach)"),
                ));
            }
            if used + need > t.bsend.size {
                return Err(MpiError::new(
                    c::MPI_ERR_BUFFER,
                    format!(
                        "{call}: attached buffer too small: {need} bytes needed, {} free",
                        t.bsend.size - used.min(t.bsend.size)
                    ),
                ));
            }
        }
        let State { engine, fabric, .. } = &mut *st;
        let id = engine.send(fabric, to, comm.core.ctx, comm.core.rank, tag, data, false, Sender::GoesOn);
        t.bsend.inflight.push((id, need));
        // The application's request (if any) completes at once: the data is ours now.
        return Ok(Some(engine.completed(crate::empty_status())));
    }
    let mut st = l.mpi.lock();
    let State { engine, fabric, .. } = &mut *st;
    let sender = if release_if_done { Sender::Waits } else { Sender::GoesOn };
    if matches!(mode, SendMode::Standard | SendMode::Ready) {
        if let SendData::User(b) = &data {
            if engine.send_now(fabric, to, comm.core.ctx, comm.core.rank, tag, b.read(0, b.len()), sender) {
                // Gone already: a blocking send is done, a nonblocking one gets a request that
                // is complete from the start.
                return Ok(if release_if_done { None } else { Some(engine.completed(crate::empty_status())) });
            }
        }
    }
    let id = engine.send(fabric, to, comm.core.ctx, comm.core.rank, tag, data, mode == SendMode::Sync, sender);
    if let Some(r) = engine.get_mut(id) {
        r.comm = comm.handle.load(std::sync::atomic::Ordering::Relaxed);
    }
    if release_if_done && engine.get(id).is_some_and(|r| r.complete) {
        engine.release(id);
        return Ok(None);
    }
    Ok(Some(id))
}

/// A blocking send: like [`start_send`], then waits. An eager send that left at once is released
/// under the same lock, the common case for small messages.
fn send_and_wait(
    l: &Lib,
    call: &str,
    comm: &CommObj,
    buf: usize,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    mode: SendMode,
) -> Result<()> {
    if let Some(id) = send_inner(l, call, comm, buf, count, dt, dest, tag, mode, true)? {
        l.mpi.wait(id);
    }
    Ok(())
}

/// Posts a receive; returns the engine request.
pub fn start_recv(
    l: &Lib,
    call: &str,
    comm: &CommObj,
    buf: usize,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
) -> Result<ReqId> {
    let lay = dtype(call, dt)?;
    let count = check_count(call, count)?;
    check_peer(call, "source", comm, src, true)?;
    check_tag(call, tag, true)?;
    check_buf(call, buf, count, &lay)?;
    if src == c::MPI_PROC_NULL {
        return Ok(l.mpi.lock().engine.completed(proc_null_status()));
    }
    let sink = sink(call, buf, count, &lay)?;
    let mut st = l.mpi.lock();
    let State { engine, fabric, .. } = &mut *st;
    let id = engine.recv(fabric, comm.core.ctx, src, tag, sink);
    if let Some(r) = engine.get_mut(id) {
        r.comm = comm.handle.load(std::sync::atomic::Ordering::Relaxed);
    }
    Ok(id)
}

/// Turns a completed receive's status into the call's result.
pub fn check_status(call: &str, s: &Status) -> Result<()> {
    if s.error == c::MPI_ERR_TRUNCATE {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!(
                "{call}: message from rank {} (tag {}) is longer than the receive buffer ({} bytes received)",
                s.source, s.tag, s.bytes
            ),
        ));
    }
    if s.error == c::MPI_ERR_PROC_ABORTED {
        return Err(MpiError::new(
            c::MPI_ERR_PROC_ABORTED,
            format!("{call}: a process of another job this operation needed is gone (it crashed or ended without MPI_Comm_disconnect)"),
        ));
    }
    Ok(())
}

/// The byte count of the commonest calls: a predefined contiguous datatype with a plain count.
/// `None` sends the call down the generic path, which checks everything and reports any error.
#[inline]
fn express_bytes(count: i64, dt: usize, buf: *mut c_void) -> Option<usize> {
    let size = predefined_contig_size(dt)?;
    if count < 0 {
        return None;
    }
    let n = (count as usize).checked_mul(size).filter(|&n| n <= isize::MAX as usize)?;
    if n > 0 && buf.is_null() {
        return None;
    }
    Some(n)
}

/// What a point-to-point call needs of its communicator: the process that `peer` names (or
/// None for `MPI_ANY_SOURCE`), the context id and this process's rank. None when the handle is
/// not at hand without a lookup or `peer` is not a plain rank (`MPI_PROC_NULL`, out of range).
#[inline]
fn express_comm(l: &Lib, comm_h: usize, peer: c_int, any_ok: bool) -> Option<(Option<ProcIdx>, u64, i32)> {
    l.with_comm_fast(comm_h, |cm| {
        let core = &cm.core;
        let to = if (0..core.peer_size()).contains(&peer) {
            Some(core.proc_of(peer))
        } else if any_ok && peer == c::MPI_ANY_SOURCE {
            None
        } else {
            return None;
        };
        Some((to, core.ctx, core.rank))
    })
    .flatten()
}

/// `MPI_Send` (`sender`: `Waits`) or `MPI_Isend` (`GoesOn`) of an eager message on the
/// express path; false to take the generic path.
#[inline]
fn express_send(
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    sender: Sender,
) -> bool {
    let Some(l) = crate::state::lib_fast() else { return false };
    let Some(n) = express_bytes(count, dt, buf) else { return false };
    if tag < 0 {
        return false;
    }
    let Some((Some(to), ctx, rank)) = express_comm(l, comm_h, dest, false) else { return false };
    // SAFETY: MPI requires `buf` to hold `count` elements of the (contiguous) datatype during
    // the call; the bytes are copied into the ring before it returns.
    let span = unsafe { UserBuf::new(buf as usize, n) };
    let mut st = l.mpi.lock();
    let State { engine, fabric, .. } = &mut *st;
    engine.send_now(fabric, to, ctx, rank, tag, span.read(0, n), sender)
}

/// Largest packed size of a derived-datatype message the express paths take: they pack it on
/// the stack (sending) or receive it there and unpack it (receiving).
const EXPRESS_TYPED_MAX: usize = 1024;

/// The first `n` bytes of the express typed paths' stack buffer, zeroed. A small message uses
/// a few of its bytes, and zeroing all 1 KiB at every call would cost about what packing them
/// does.
fn stack_bytes(buf: &mut MaybeUninit<[u8; EXPRESS_TYPED_MAX]>, n: usize) -> &mut [u8] {
    let n = n.min(EXPRESS_TYPED_MAX);
    let p = buf.as_mut_ptr().cast::<u8>();
    // SAFETY: `p` points to EXPRESS_TYPED_MAX bytes owned through `buf`; the first `n` are
    // initialised here, before the slice over them is made.
    unsafe {
        std::ptr::write_bytes(p, 0, n);
        std::slice::from_raw_parts_mut(p, n)
    }
}

/// What the express paths need of `count` elements of a committed derived datatype at `buf`:
/// its layout, their packed size, the span they lie in and the offset of `buf` in it. None to
/// take the generic path (which reports whatever is wrong, and takes `MPI_BOTTOM`).
fn express_typed(l: &Lib, buf: *mut c_void, count: i64, dt: usize) -> Option<(Arc<Layout>, usize, UserBuf, isize)> {
    if count < 0 || buf.is_null() {
        return None;
    }
    let lay = match l.t().datatypes.get(dt) {
        Some((lay, true)) => lay.clone(),
        _ => return None,
    };
    let n = (count as usize).checked_mul(lay.size).filter(|&n| n <= EXPRESS_TYPED_MAX)?;
    let (lo, hi) = lay.span(count as usize);
    // SAFETY: MPI requires `buf` to hold `count` elements of the datatype for the call; (lo,
    // hi) is exactly the bytes they cover.
    let span = unsafe { UserBuf::new((buf as usize).wrapping_add_signed(lo), (hi - lo) as usize) };
    Some((lay, n, span, -lo))
}

/// `MPI_Send` of a small message of a derived datatype on the express path: packed on the stack
/// and sent as the contiguous express path sends; false to take the generic path.
fn express_send_typed(comm_h: usize, buf: *mut c_void, count: i64, dt: usize, dest: c_int, tag: c_int) -> bool {
    if predefined(dt).is_some() {
        return false;
    }
    let Some(l) = crate::state::lib_fast() else { return false };
    if tag < 0 {
        return false;
    }
    let Some((Some(to), ctx, rank)) = express_comm(l, comm_h, dest, false) else { return false };
    let Some((lay, n, span, base)) = express_typed(l, buf, count, dt) else { return false };
    let mut storage = MaybeUninit::uninit();
    let packed = stack_bytes(&mut storage, n);
    lay.pack_window(&span, base, 0, packed);
    let mut st = l.mpi.lock();
    let State { engine, fabric, .. } = &mut *st;
    engine.send_now(fabric, to, ctx, rank, tag, packed, Sender::Waits)
}

/// `MPI_Recv` of a small message of a derived datatype on the express path: received into the
/// stack, then unpacked; None to take the generic path.
fn express_recv_typed(
    l: &Lib,
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
) -> Option<Status> {
    if predefined(dt).is_some() || !express_recv_tag(tag) {
        return None;
    }
    let (_, ctx, _) = express_comm(l, comm_h, src, true)?;
    let (lay, n, span, base) = express_typed(l, buf, count, dt)?;
    let mut storage = MaybeUninit::uninit();
    let packed = stack_bytes(&mut storage, n);
    // SAFETY: `packed` is not touched until the receive has completed, which this function
    // waits for before it returns.
    let local = unsafe { UserBuf::new(packed.as_mut_ptr() as usize, n) };
    let s = wait_express_recv(l, comm_h, ctx, src, tag, local);
    let got = (s.bytes as usize).min(n);
    lay.unpack_into(&span, base, 0, &packed[..got]);
    Some(s)
}

/// Whether a receive's tag is one the express paths take (a valid one or `MPI_ANY_TAG`; the
/// generic path reports the others).
fn express_recv_tag(tag: c_int) -> bool {
    tag >= 0 || tag == c::MPI_ANY_TAG
}

/// What a receive on the express path needs: the context id and the receive buffer; None to
/// take the generic path.
#[inline]
fn express_recv_target(
    l: &Lib,
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
) -> Option<(u64, UserBuf)> {
    let n = express_bytes(count, dt, buf)?;
    if !express_recv_tag(tag) {
        return None;
    }
    let (_, ctx, _) = express_comm(l, comm_h, src, true)?;
    // SAFETY: MPI requires the receive buffer to have room for `count` elements of the
    // (contiguous) datatype and not to be accessed until the receive completes.
    Some((ctx, unsafe { UserBuf::new(buf as usize, n) }))
}

/// Posts receive request on `engine` for `span` (the express paths' receive).
fn post_express_recv(st: &mut State, comm_h: usize, ctx: u64, src: c_int, tag: c_int, span: UserBuf) -> ReqId {
    let State { engine, fabric, .. } = st;
    let id = engine.recv(fabric, ctx, src, tag, Sink::Contig(span));
    if let Some(r) = engine.get_mut(id) {
        // Its error handler, should it complete with an error (truncation).
        r.comm = comm_h;
    }
    id
}

/// Posts a receive on the express path; None to take the generic path.
#[inline]
fn express_irecv(
    l: &Lib,
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
) -> Option<ReqId> {
    let (ctx, span) = express_recv_target(l, comm_h, buf, count, dt, src, tag)?;
    Some(post_express_recv(&mut l.mpi.lock(), comm_h, ctx, src, tag, span))
}

/// Receives into `span` through the engine's direct slot and waits for it.
#[inline]
fn wait_express_recv(l: &Lib, comm_h: usize, ctx: u64, src: c_int, tag: c_int, span: UserBuf) -> Status {
    // Another thread's blocking receive may hold the engine's direct slot: then a request.
    let request = {
        let mut st = l.mpi.lock();
        let State { engine, fabric, .. } = &mut *st;
        if engine.recv_direct(fabric, ctx, src, tag, span) {
            None
        } else {
            Some(post_express_recv(&mut st, comm_h, ctx, src, tag, span))
        }
    };
    match request {
        None => match l.mpi.block(|st| st.engine.take_direct()) {
            DirectEnd::Done(s) => s,
            DirectEnd::Request(id) => l.mpi.wait_pending(id).0,
        },
        Some(id) => l.mpi.wait_pending(id).0,
    }
}

/// `MPI_Recv` on the express path; None to take the generic path.
#[inline]
fn express_recv(
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    status: *mut MPI_Status,
) -> Option<c_int> {
    let l = crate::state::lib_fast()?;
    let s = match express_recv_target(l, comm_h, buf, count, dt, src, tag) {
        Some((ctx, span)) => wait_express_recv(l, comm_h, ctx, src, tag, span),
        None => express_recv_typed(l, comm_h, buf, count, dt, src, tag)?,
    };
    // SAFETY: status is MPI_STATUS_IGNORE (null) or points to a caller-owned MPI_Status.
    unsafe { put_status(status, &s, false) };
    Some(if s.error == 0 { c::MPI_SUCCESS } else { guard(comm_h, || check_status("MPI_Recv", &s)) })
}

fn blocking_send(
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    mode: SendMode,
) -> c_int {
    if matches!(mode, SendMode::Standard | SendMode::Ready)
        && (express_send(comm_h, buf, count, dt, dest, tag, Sender::Waits)
            || express_send_typed(comm_h, buf, count, dt, dest, tag))
    {
        return c::MPI_SUCCESS;
    }
    guard(comm_h, || {
        let call = mode.call(false);
        let l = lib(call)?;
        let comm = l.comm(call, comm_h)?;
        send_and_wait(l, call, &comm, buf as usize, count, dt, dest, tag, mode)
    })
}

fn blocking_recv(
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    status: *mut MPI_Status,
) -> c_int {
    if let Some(rc) = express_recv(comm_h, buf, count, dt, src, tag, status) {
        return rc;
    }
    guard(comm_h, || {
        let l = lib("MPI_Recv")?;
        let comm = l.comm("MPI_Recv", comm_h)?;
        let id = start_recv(l, "MPI_Recv", &comm, buf as usize, count, dt, src, tag)?;
        let (s, _) = l.mpi.wait_pending(id);
        // SAFETY: status is MPI_STATUS_IGNORE (null) or points to a caller-owned MPI_Status.
        unsafe { put_status(status, &s, false) };
        check_status("MPI_Recv", &s)
    })
}

fn out_request(call: &str, request: *mut usize) -> Result<()> {
    crate::nonnull_mut(call, "request", request)
}

fn nonblocking_send(
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    mode: SendMode,
    request: *mut usize,
) -> c_int {
    if matches!(mode, SendMode::Standard | SendMode::Ready)
        && !request.is_null()
        && express_send(comm_h, buf, count, dt, dest, tag, Sender::GoesOn)
    {
        // SAFETY: checked non-null; MPI gives us the handle to write.
        unsafe { *request = crate::request::SENT };
        return c::MPI_SUCCESS;
    }
    guard(comm_h, || {
        let call = mode.call(true);
        let l = lib(call)?;
        out_request(call, request)?;
        let comm = l.comm(call, comm_h)?;
        let id = start_send(l, call, &comm, buf as usize, count, dt, dest, tag, mode)?;
        // SAFETY: checked non-null above.
        unsafe { *request = crate::request::handle_of(id) };
        Ok(())
    })
}

fn nonblocking_recv(
    comm_h: usize,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    request: *mut usize,
) -> c_int {
    if let Some(l) = crate::state::lib_fast().filter(|_| !request.is_null()) {
        if let Some(id) = express_irecv(l, comm_h, buf, count, dt, src, tag) {
            // SAFETY: checked non-null; MPI gives us the handle to write.
            unsafe { *request = crate::request::handle_of(id) };
            return c::MPI_SUCCESS;
        }
    }
    guard(comm_h, || {
        let l = lib("MPI_Irecv")?;
        out_request("MPI_Irecv", request)?;
        let comm = l.comm("MPI_Irecv", comm_h)?;
        let id = start_recv(l, "MPI_Irecv", &comm, buf as usize, count, dt, src, tag)?;
        // SAFETY: checked non-null above.
        unsafe { *request = crate::request::handle_of(id) };
        Ok(())
    })
}

fn persistent(comm_h: usize, call: &str, op: PersistentOpArgs, request: *mut usize) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        out_request(call, request)?;
        let comm = l.comm_arc(call, comm_h)?;
        // Check the arguments now, as the standard allows, so Start cannot fail on them later.
        let lay = dtype(call, op.dtype)?;
        let count = check_count(call, op.count)?;
        check_peer(call, if op.send { "dest" } else { "source" }, &comm, op.peer, !op.send)?;
        check_tag(call, op.tag, !op.send)?;
        check_buf(call, op.buf, count, &lay)?;
        let p = PersistentOp {
            send: op.send,
            mode: op.mode,
            buf: op.buf,
            count: op.count,
            dtype: op.dtype,
            peer: op.peer,
            tag: op.tag,
            comm,
        };
        let h = l.t().persistent.insert(PersistentReq { op: Box::new(p), coll: None, active: None, comm: comm_h });
        // SAFETY: checked non-null above.
        unsafe { *request = h };
        Ok(())
    })
}

struct PersistentOpArgs {
    send: bool,
    mode: SendMode,
    buf: usize,
    count: i64,
    dtype: usize,
    peer: c_int,
    tag: c_int,
}

macro_rules! send_fns {
    ($mode:expr, $blocking:ident, $blocking_c:ident, $nb:ident, $nb_c:ident, $init:ident, $init_c:ident, $init_name:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $blocking(
            buf: *mut c_void,
            count: c_int,
            dt: usize,
            dest: c_int,
            tag: c_int,
            comm: usize,
        ) -> c_int {
            blocking_send(comm, buf, count as i64, dt, dest, tag, $mode)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $blocking_c(
            buf: *mut c_void,
            count: i64,
            dt: usize,
            dest: c_int,
            tag: c_int,
            comm: usize,
        ) -> c_int {
            blocking_send(comm, buf, count, dt, dest, tag, $mode)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $nb(
            buf: *mut c_void,
            count: c_int,
            dt: usize,
            dest: c_int,
            tag: c_int,
            comm: usize,
            request: *mut usize,
        ) -> c_int {
            nonblocking_send(comm, buf, count as i64, dt, dest, tag, $mode, request)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $nb_c(
            buf: *mut c_void,
            count: i64,
            dt: usize,
            dest: c_int,
            tag: c_int,
            comm: usize,
            request: *mut usize,
        ) -> c_int {
            nonblocking_send(comm, buf, count, dt, dest, tag, $mode, request)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $init(
            buf: *mut c_void,
            count: c_int,
            dt: usize,
            dest: c_int,
            tag: c_int,
            comm: usize,
            request: *mut usize,
        ) -> c_int {
            let op = PersistentOpArgs {
                send: true,
                mode: $mode,
                buf: buf as usize,
                count: count as i64,
                dtype: dt,
                peer: dest,
                tag,
            };
            persistent(comm, $init_name, op, request)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $init_c(
            buf: *mut c_void,
            count: i64,
            dt: usize,
            dest: c_int,
            tag: c_int,
            comm: usize,
            request: *mut usize,
        ) -> c_int {
            let op = PersistentOpArgs { send: true, mode: $mode, buf: buf as usize, count, dtype: dt, peer: dest, tag };
            persistent(comm, $init_name, op, request)
        }
    };
}

send_fns!(
    SendMode::Standard,
    PMPI_Send,
    PMPI_Send_c,
    PMPI_Isend,
    PMPI_Isend_c,
    PMPI_Send_init,
    PMPI_Send_init_c,
    "MPI_Send_init"
);
send_fns!(
    SendMode::Sync,
    PMPI_Ssend,
    PMPI_Ssend_c,
    PMPI_Issend,
    PMPI_Issend_c,
    PMPI_Ssend_init,
    PMPI_Ssend_init_c,
    "MPI_Ssend_init"
);
send_fns!(
    SendMode::Ready,
    PMPI_Rsend,
    PMPI_Rsend_c,
    PMPI_Irsend,
    PMPI_Irsend_c,
    PMPI_Rsend_init,
    PMPI_Rsend_init_c,
    "MPI_Rsend_init"
);
send_fns!(
    SendMode::Buffered,
    PMPI_Bsend,
    PMPI_Bsend_c,
    PMPI_Ibsend,
    PMPI_Ibsend_c,
    PMPI_Bsend_init,
    PMPI_Bsend_init_c,
    "MPI_Bsend_init"
);

#[no_mangle]
pub unsafe extern "C" fn PMPI_Recv(
    buf: *mut c_void,
    count: c_int,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    status: *mut MPI_Status,
) -> c_int {
    blocking_recv(comm, buf, count as i64, dt, src, tag, status)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Recv_c(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    status: *mut MPI_Status,
) -> c_int {
    blocking_recv(comm, buf, count, dt, src, tag, status)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    request: *mut usize,
) -> c_int {
    nonblocking_recv(comm, buf, count as i64, dt, src, tag, request)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Irecv_c(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    request: *mut usize,
) -> c_int {
    nonblocking_recv(comm, buf, count, dt, src, tag, request)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Recv_init(
    buf: *mut c_void,
    count: c_int,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    request: *mut usize,
) -> c_int {
    let op = PersistentOpArgs {
        send: false,
        mode: SendMode::Standard,
        buf: buf as usize,
        count: count as i64,
        dtype: dt,
        peer: src,
        tag,
    };
    persistent(comm, "MPI_Recv_init", op, request)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Recv_init_c(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm: usize,
    request: *mut usize,
) -> c_int {
    let op =
        PersistentOpArgs { send: false, mode: SendMode::Standard, buf: buf as usize, count, dtype: dt, peer: src, tag };
    persistent(comm, "MPI_Recv_init", op, request)
}

fn sendrecv(
    sbuf: *mut c_void,
    scount: i64,
    sdt: usize,
    dest: c_int,
    stag: c_int,
    rbuf: *mut c_void,
    rcount: i64,
    rdt: usize,
    src: c_int,
    rtag: c_int,
    comm_h: usize,
    status: *mut MPI_Status,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Sendrecv";
        let l = lib(call)?;
        let comm = l.comm(call, comm_h)?;
        let r = start_recv(l, call, &comm, rbuf as usize, rcount, rdt, src, rtag)?;
        let s = start_send(l, call, &comm, sbuf as usize, scount, sdt, dest, stag, SendMode::Standard)?;
        l.mpi.wait(s);
        let (st, _) = l.mpi.wait(r);
        // SAFETY: status is ignore (null) or a caller-owned status.
        unsafe { put_status(status, &st, false) };
        check_status(call, &st)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv(
    sbuf: *mut c_void,
    scount: c_int,
    sdt: usize,
    dest: c_int,
    stag: c_int,
    rbuf: *mut c_void,
    rcount: c_int,
    rdt: usize,
    src: c_int,
    rtag: c_int,
    comm: usize,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv(sbuf, scount as i64, sdt, dest, stag, rbuf, rcount as i64, rdt, src, rtag, comm, status)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv_c(
    sbuf: *mut c_void,
    scount: i64,
    sdt: usize,
    dest: c_int,
    stag: c_int,
    rbuf: *mut c_void,
    rcount: i64,
    rdt: usize,
    src: c_int,
    rtag: c_int,
    comm: usize,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, src, rtag, comm, status)
}

fn sendrecv_replace(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    dest: c_int,
    stag: c_int,
    src: c_int,
    rtag: c_int,
    comm_h: usize,
    status: *mut MPI_Status,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Sendrecv_replace";
        let l = lib(call)?;
        let comm = l.comm(call, comm_h)?;
        let lay = dtype(call, dt)?;
        let n = check_count(call, count)?;
        check_peer(call, "dest", &comm, dest, false)?;
        check_tag(call, stag, false)?;
        check_buf(call, buf as usize, n, &lay)?;
        // The outgoing bytes are copied first: the same buffer receives.
        let data = SendData::Packed(send_data(call, buf as usize, n, &lay)?.to_vec());
        let r = start_recv(l, call, &comm, buf as usize, count, dt, src, rtag)?;
        let s = if dest == c::MPI_PROC_NULL {
            l.mpi.lock().engine.completed(proc_null_status())
        } else {
            let mut st = l.mpi.lock();
            let State { engine, fabric, .. } = &mut *st;
            engine.send(
                fabric,
                comm.core.proc_of(dest),
                comm.core.ctx,
                comm.core.rank,
                stag,
                data,
                false,
                Sender::Waits,
            )
        };
        l.mpi.wait(s);
        let (st, _) = l.mpi.wait(r);
        // SAFETY: status is ignore (null) or a caller-owned status.
        unsafe { put_status(status, &st, false) };
        check_status(call, &st)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    dt: usize,
    dest: c_int,
    stag: c_int,
    src: c_int,
    rtag: c_int,
    comm: usize,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv_replace(buf, count as i64, dt, dest, stag, src, rtag, comm, status)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv_replace_c(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    dest: c_int,
    stag: c_int,
    src: c_int,
    rtag: c_int,
    comm: usize,
    status: *mut MPI_Status,
) -> c_int {
    sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, status)
}

// ----- probes -----

fn probe_args(call: &str, l: &Lib, comm_h: usize, src: c_int, tag: c_int) -> Result<Arc<CommObj>> {
    let comm = l.comm_arc(call, comm_h)?;
    check_peer(call, "source", &comm, src, true)?;
    check_tag(call, tag, true)?;
    Ok(comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Probe(src: c_int, tag: c_int, comm_h: usize, status: *mut MPI_Status) -> c_int {
    guard(comm_h, || {
        let l = lib("MPI_Probe")?;
        let comm = probe_args("MPI_Probe", l, comm_h, src, tag)?;
        let s = if src == c::MPI_PROC_NULL {
            proc_null_status()
        } else {
            let ctx = comm.core.ctx;
            l.mpi.block(|st| st.engine.probe(ctx, src, tag))
        };
        // SAFETY: status is ignore (null) or a caller-owned status.
        unsafe { put_status(status, &s, false) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iprobe(
    src: c_int,
    tag: c_int,
    comm_h: usize,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    guard(comm_h, || {
        let l = lib("MPI_Iprobe")?;
        crate::nonnull_mut("MPI_Iprobe", "flag", flag)?;
        let comm = probe_args("MPI_Iprobe", l, comm_h, src, tag)?;
        let found = if src == c::MPI_PROC_NULL {
            Some(proc_null_status())
        } else {
            l.mpi.poll();
            l.mpi.lock().engine.probe(comm.core.ctx, src, tag)
        };
        // SAFETY: flag checked non-null; status ignore or caller-owned.
        unsafe {
            *flag = found.is_some() as c_int;
            if let Some(s) = found {
                put_status(status, &s, false);
            }
        }
        Ok(())
    })
}

fn mprobe_common(
    call: &str,
    src: c_int,
    tag: c_int,
    comm_h: usize,
    blocking: bool,
    flag: *mut c_int,
    message: *mut usize,
    status: *mut MPI_Status,
) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        crate::nonnull_mut(call, "message", message)?;
        if !blocking {
            crate::nonnull_mut(call, "flag", flag)?;
        }
        let comm = probe_args(call, l, comm_h, src, tag)?;
        let set = |found: bool, h: usize, s: &Status| {
            // SAFETY: out pointers checked above (flag only when non-blocking).
            unsafe {
                if !blocking {
                    *flag = found as c_int;
                }
                if found {
                    *message = h;
                    put_status(status, s, false);
                }
            }
        };
        if src == c::MPI_PROC_NULL {
            set(true, c::MPI_MESSAGE_NO_PROC, &proc_null_status());
            return Ok(());
        }
        let ctx = comm.core.ctx;
        let msg = if blocking {
            Some(l.mpi.block(|st| st.engine.mprobe(ctx, src, tag)))
        } else {
            l.mpi.poll();
            l.mpi.lock().engine.mprobe(ctx, src, tag)
        };
        match msg {
            Some(m) => {
                let s = Status { source: m.h.src, tag: m.h.tag, error: 0, bytes: m.h.len, cancelled: false };
                let h = l.t().messages.insert((m, comm));
                set(true, h, &s);
            }
            None => set(false, 0, &crate::empty_status()),
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Mprobe(
    src: c_int,
    tag: c_int,
    comm: usize,
    message: *mut usize,
    status: *mut MPI_Status,
) -> c_int {
    mprobe_common("MPI_Mprobe", src, tag, comm, true, std::ptr::null_mut(), message, status)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Improbe(
    src: c_int,
    tag: c_int,
    comm: usize,
    flag: *mut c_int,
    message: *mut usize,
    status: *mut MPI_Status,
) -> c_int {
    mprobe_common("MPI_Improbe", src, tag, comm, false, flag, message, status)
}

/// Starts receiving a matched message; `None` for MPI_MESSAGE_NO_PROC.
fn start_mrecv(l: &Lib, call: &str, buf: usize, count: i64, dt: usize, message: *mut usize) -> Result<Option<ReqId>> {
    crate::nonnull_mut(call, "message", message)?;
    // SAFETY: checked non-null.
    let mh = unsafe { *message };
    let lay = dtype(call, dt)?;
    let n = check_count(call, count)?;
    check_buf(call, buf, n, &lay)?;
    if mh == c::MPI_MESSAGE_NO_PROC {
        // SAFETY: as above.
        unsafe { *message = c::MPI_MESSAGE_NULL };
        return Ok(None);
    }
    let (m, _comm) = l.t().messages.remove(mh).ok_or_else(|| {
        MpiError::new(c::MPI_ERR_REQUEST, format!("{call}: message {mh:#x} is not a valid message handle"))
    })?;
    // SAFETY: as above.
    unsafe { *message = c::MPI_MESSAGE_NULL };
    let sink = sink(call, buf, n, &lay)?;
    let mut st = l.mpi.lock();
    let State { engine, fabric, .. } = &mut *st;
    Ok(Some(engine.mrecv(fabric, m, sink)))
}

fn mrecv(buf: *mut c_void, count: i64, dt: usize, message: *mut usize, status: *mut MPI_Status) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let l = lib("MPI_Mrecv")?;
        let id = start_mrecv(l, "MPI_Mrecv", buf as usize, count, dt, message)?;
        let s = match id {
            Some(id) => l.mpi.wait(id).0,
            None => proc_null_status(),
        };
        // SAFETY: status ignore or caller-owned.
        unsafe { put_status(status, &s, false) };
        check_status("MPI_Mrecv", &s)
    })
}

fn imrecv(buf: *mut c_void, count: i64, dt: usize, message: *mut usize, request: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let l = lib("MPI_Imrecv")?;
        out_request("MPI_Imrecv", request)?;
        let id = start_mrecv(l, "MPI_Imrecv", buf as usize, count, dt, message)?;
        let id = id.unwrap_or_else(|| l.mpi.lock().engine.completed(proc_null_status()));
        // SAFETY: checked non-null.
        unsafe { *request = crate::request::handle_of(id) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    dt: usize,
    message: *mut usize,
    status: *mut MPI_Status,
) -> c_int {
    mrecv(buf, count as i64, dt, message, status)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Mrecv_c(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    message: *mut usize,
    status: *mut MPI_Status,
) -> c_int {
    mrecv(buf, count, dt, message, status)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    dt: usize,
    message: *mut usize,
    request: *mut usize,
) -> c_int {
    imrecv(buf, count as i64, dt, message, request)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Imrecv_c(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    message: *mut usize,
    request: *mut usize,
) -> c_int {
    imrecv(buf, count, dt, message, request)
}

// ----- buffered-send buffer -----

fn buffer_attach(buf: *mut c_void, size: i64) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Buffer_attach";
        let l = lib(call)?;
        let mut t = l.t();
        if t.bsend.attached {
            return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: a buffer is already attached")));
        }
        if buf as usize == c::MPI_BUFFER_AUTOMATIC {
            t.bsend.attached = true;
            t.bsend.automatic = true;
            return Ok(());
        }
        if size < 0 {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: size {size} is negative")));
        }
        if buf.is_null() && size > 0 {
            return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: buffer is NULL")));
        }
        t.bsend = BsendState {
            addr: buf as usize,
            size: size as usize,
            attached: true,
            automatic: false,
            inflight: std::mem::take(&mut t.bsend.inflight),
        };
        Ok(())
    })
}

fn buffer_detach(addr: *mut c_void, size_out: &mut dyn FnMut(usize)) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Buffer_detach";
        let l = lib(call)?;
        crate::nonnull_mut(call, "buffer_addr", addr)?;
        // Detach blocks until every message sent from the buffer has left.
        bsend_flush(l);
        let mut t = l.t();
        if !t.bsend.attached {
            return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: no buffer is attached")));
        }
        let b = std::mem::take(&mut t.bsend);
        // SAFETY: `addr` is really a `void **` (standard C binding); checked non-null.
        unsafe { *(addr as *mut usize) = if b.automatic { c::MPI_BUFFER_AUTOMATIC } else { b.addr } };
        size_out(b.size);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_attach(buf: *mut c_void, size: c_int) -> c_int {
    buffer_attach(buf, size as i64)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_attach_c(buf: *mut c_void, size: i64) -> c_int {
    buffer_attach(buf, size)
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_detach(addr: *mut c_void, size: *mut c_int) -> c_int {
    buffer_detach(addr, &mut |n| {
        if !size.is_null() {
            // SAFETY: non-null out pointer.
            unsafe { *size = n.min(c_int::MAX as usize) as c_int };
        }
    })
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_detach_c(addr: *mut c_void, size: *mut i64) -> c_int {
    buffer_detach(addr, &mut |n| {
        if !size.is_null() {
            // SAFETY: non-null out pointer.
            unsafe { *size = n as i64 };
        }
    })
}
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_flush() -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        bsend_flush(lib("MPI_Buffer_flush")?);
        Ok(())
    })
}

/// Used by `MPI_Start`: starts one round of a persistent operation.
pub fn start_persistent(l: &Lib, op: &PersistentOp) -> Result<ReqId> {
    if op.send {
        start_send(l, "MPI_Start", &op.comm, op.buf, op.count, op.dtype, op.peer, op.tag, op.mode)
    } else {
        start_recv(l, "MPI_Start", &op.comm, op.buf, op.count, op.dtype, op.peer, op.tag)
    }
}
