//! Point-to-point communication at the C boundary: the implementations behind the entry points
//! that `abi/bindings.tsv` generates (sends in every mode, receives, probes, matched receives,
//! persistent requests, the buffered-send buffers of the process and of communicators). Their arguments arrive checked
//! ([`crate::validate`]); each builds a [`Buffer`] and an [`Envelope`] and calls one entry of
//! the device ([`baton_core::device`]), which does the rest.
//!
//! The express paths (`*_express`, flag `express` in the table) take the commonest calls (a
//! predefined contiguous datatype or a small message of a committed derived one, a
//! communicator at hand without a lookup, a plain rank and tag) straight to one express entry
//! of the device before any check; anything else, errors included, takes the checked path.
//!
//! The send modes are the implementations' const generic `M` (`p2p::send::<1>` is
//! `MPI_Ssend`): [`SendMode`] as its index, see [`mode`].

use crate::errors::guard;
use crate::request::handle_of;
use crate::state::{CommObj, CommRef, Lib, PersistentEntry};
use crate::validate::{self, Call, Count, CountOut, Data, Matching, Message, Out, StatusOut};
use baton_abi::consts as c;
use baton_core::datatype::{predefined, predefined_contig_size, Layout};
pub use baton_core::device::check_status;
use baton_core::device::{Buffer, Detached, Envelope, Matched, Persistent};
use baton_core::engine::{ProcIdx, Sender, Status};
use baton_core::error::{MpiError, Result};
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use baton_core::device::SendMode;

/// The send mode of const generic `M`: 0 standard, 1 synchronous, 2 ready, 3 buffered.
pub const fn mode(m: u8) -> SendMode {
    match m {
        0 => SendMode::Standard,
        1 => SendMode::Sync,
        2 => SendMode::Ready,
        _ => SendMode::Buffered,
    }
}

/// The application buffer `d` describes (checked by its roles), or an error naming `call` when
/// its size overflows.
pub fn user_buffer(call: &str, d: Data) -> Result<Buffer> {
    let Data { buf, count, datatype: dt } = d;
    if count.checked_mul(dt.size).is_none_or(|n| n > isize::MAX as usize) {
        return Err(MpiError::count_overflow(call, "count", count, validate::type_name(&dt)));
    }
    let (lo, hi) = dt.span(count);
    // SAFETY: MPI requires the buffer to hold (to send) or have room for (to receive) `count`
    // elements of the datatype, valid for the whole operation, not modified while a send reads
    // it and not accessed while a receive fills it; (lo, hi) is exactly the bytes they cover.
    let span = unsafe { UserBuf::new((buf as usize).wrapping_add_signed(lo), (hi - lo) as usize) };
    Ok(Buffer { span, base_off: -lo, layout: dt.into_layout_ref(), count })
}

/// Message `m` on `comm`: its buffer and where it goes or comes from.
fn parts<'a>(cx: Call, m: Message, comm: &'a CommObj) -> Result<(Envelope<'a>, Buffer)> {
    let to = Envelope { comm: &comm.core, peer: m.peer, tag: m.tag, handle: comm.handle.load(Ordering::Relaxed) };
    Ok((to, user_buffer(cx.name, m.data)?))
}

/// Waits until every buffered send has left (finalize).
pub fn bsend_flush(l: &Lib) {
    l.mpi.buffer_flush();
}

// ----- the express paths -----

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
    l.mpi.send_eager_now(to, ctx, rank, tag, span.read(0, n), sender)
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
    l.mpi.send_eager_now(to, ctx, rank, tag, packed, Sender::Waits)
}

/// `MPI_Recv` of a small message of a derived datatype on the express path (`ctx` from
/// [`express_recv_ctx`]): received into the stack, then unpacked; None to take the generic path.
fn express_recv_typed(
    l: &Lib,
    comm_h: usize,
    ctx: u64,
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
) -> Option<Status> {
    if predefined(dt).is_some() {
        return None;
    }
    let (lay, n, span, base) = express_typed(l, buf, count, dt)?;
    let mut storage = MaybeUninit::uninit();
    let packed = stack_bytes(&mut storage, n);
    // SAFETY: `packed` is not touched until the receive has completed, which `recv_now` waits
    // for before it returns.
    let local = unsafe { UserBuf::new(packed.as_mut_ptr() as usize, n) };
    let s = l.mpi.recv_now(comm_h, ctx, src, tag, local);
    let got = (s.bytes as usize).min(n);
    lay.unpack_into(&span, base, 0, &packed[..got]);
    Some(s)
}

/// The context id of a receive on the express path: a valid tag or `MPI_ANY_TAG` (the generic
/// path reports the others), a plain source or `MPI_ANY_SOURCE`; None to take the generic path.
#[inline]
fn express_recv_ctx(l: &Lib, comm_h: usize, src: c_int, tag: c_int) -> Option<u64> {
    if tag < 0 && tag != c::MPI_ANY_TAG {
        return None;
    }
    express_comm(l, comm_h, src, true).map(|(_, ctx, _)| ctx)
}

/// The receive buffer of the express path (a predefined contiguous datatype); None to take
/// another path.
#[inline]
fn express_recv_span(buf: *mut c_void, count: i64, dt: usize) -> Option<UserBuf> {
    let n = express_bytes(count, dt, buf)?;
    // SAFETY: MPI requires the receive buffer to have room for `count` elements of the
    // (contiguous) datatype and not to be accessed until the receive completes.
    Some(unsafe { UserBuf::new(buf as usize, n) })
}

// ----- sends and receives -----

/// `MPI_Send` and `MPI_Rsend` of an eager message, contiguous or small and typed, before any
/// check; the other modes always take the checked path.
#[inline]
pub(crate) fn send_express<const M: u8>(
    _cx: Call,
    buf: *const c_void,
    count: impl Count,
    datatype: usize,
    dest: c_int,
    tag: c_int,
    comm: usize,
) -> Option<c_int> {
    let (buf, count) = (buf as *mut c_void, count.wide());
    let express = matches!(mode(M), SendMode::Standard | SendMode::Ready)
        && (express_send(comm, buf, count, datatype, dest, tag, Sender::Waits)
            || express_send_typed(comm, buf, count, datatype, dest, tag));
    express.then_some(c::MPI_SUCCESS)
}

pub(crate) fn send<const M: u8>(cx: Call, l: &Lib, m: Message, comm: CommRef) -> Result<()> {
    let (to, data) = parts(cx, m, &comm)?;
    l.mpi.send(cx.name, to, &data, mode(M))
}

/// `MPI_Isend` and `MPI_Irsend` of an eager message that leaves at once: its request is
/// [`crate::request::SENT`].
#[inline]
pub(crate) fn isend_express<const M: u8>(
    _cx: Call,
    buf: *const c_void,
    count: impl Count,
    datatype: usize,
    dest: c_int,
    tag: c_int,
    comm: usize,
    request: *mut usize,
) -> Option<c_int> {
    let express = matches!(mode(M), SendMode::Standard | SendMode::Ready)
        && !request.is_null()
        && express_send(comm, buf as *mut c_void, count.wide(), datatype, dest, tag, Sender::GoesOn);
    if !express {
        return None;
    }
    // SAFETY: checked non-null; MPI gives us the handle to write.
    unsafe { *request = crate::request::SENT };
    Some(c::MPI_SUCCESS)
}

pub(crate) fn isend<const M: u8>(cx: Call, l: &Lib, m: Message, comm: CommRef, request: Out<usize>) -> Result<()> {
    let (to, data) = parts(cx, m, &comm)?;
    request.put(handle_of(l.mpi.start_send(cx.name, to, &data, mode(M))?));
    Ok(())
}

/// `MPI_Recv` of a contiguous message, or of a small typed one, before any check.
#[inline]
pub(crate) fn recv_express(
    cx: Call,
    buf: *mut c_void,
    count: impl Count,
    datatype: usize,
    source: c_int,
    tag: c_int,
    comm: usize,
    status: *mut crate::MPI_Status,
) -> Option<c_int> {
    let count = count.wide();
    let l = crate::state::lib_fast()?;
    let ctx = express_recv_ctx(l, comm, source, tag)?;
    let s = match express_recv_span(buf, count, datatype) {
        Some(span) => l.mpi.recv_now(comm, ctx, source, tag, span),
        None => express_recv_typed(l, comm, ctx, buf, count, datatype, source, tag)?,
    };
    // SAFETY: status is MPI_STATUS_IGNORE (null) or points to a caller-owned MPI_Status.
    unsafe { StatusOut::new(status) }.put(&s, false);
    Some(if s.error == 0 { c::MPI_SUCCESS } else { guard(comm, || check_status(cx.name, &s)) })
}

pub(crate) fn recv(cx: Call, l: &Lib, m: Message, comm: CommRef, status: StatusOut) -> Result<()> {
    let (from, into) = parts(cx, m, &comm)?;
    received(cx, &l.mpi.recv(from, &into), status)
}

use baton_core::engine::PROGRESS_RECV_MIN as OFFER_MIN;

/// `MPI_Irecv` into a contiguous buffer, posted before any check.
#[inline]
pub(crate) fn irecv_express(
    _cx: Call,
    buf: *mut c_void,
    count: impl Count,
    datatype: usize,
    source: c_int,
    tag: c_int,
    comm: usize,
    request: *mut usize,
) -> Option<c_int> {
    let l = crate::state::lib_fast().filter(|_| !request.is_null())?;
    // A large receive may offer its buffer to its sender, which needs the sender's process:
    // the checked path finds it (its cost does not count next to the message's).
    let span = express_recv_span(buf, count.wide(), datatype).filter(|s| s.len() < OFFER_MIN)?;
    let ctx = express_recv_ctx(l, comm, source, tag)?;
    let id = l.mpi.post_recv(comm, ctx, source, tag, span);
    // SAFETY: checked non-null; MPI gives us the handle to write.
    unsafe { *request = handle_of(id) };
    Some(c::MPI_SUCCESS)
}

pub(crate) fn irecv(cx: Call, l: &Lib, m: Message, comm: CommRef, request: Out<usize>) -> Result<()> {
    let (from, into) = parts(cx, m, &comm)?;
    request.put(handle_of(l.mpi.start_recv(from, &into)));
    Ok(())
}

/// `MPI_Send_init` and its modes: the arguments are checked now, as the standard allows, so
/// that `MPI_Start` cannot fail on them later.
pub(crate) fn send_init<const M: u8>(cx: Call, l: &Lib, m: Message, comm: CommRef, request: Out<usize>) -> Result<()> {
    let (dest, tag) = (m.peer, m.tag);
    let data = user_buffer(cx.name, m.data)?;
    let op = Persistent::Send { comm: comm.core.clone(), data, dest, tag, mode: mode(M) };
    persistent(l, op, &comm, request)
}

/// `MPI_Recv_init`, checked now as [`send_init`] is.
pub(crate) fn recv_init(cx: Call, l: &Lib, m: Message, comm: CommRef, request: Out<usize>) -> Result<()> {
    let (src, tag) = (m.peer, m.tag);
    let buf = user_buffer(cx.name, m.data)?;
    persistent(l, Persistent::Recv { comm: comm.core.clone(), buf, src, tag }, &comm, request)
}

/// Registers persistent request `op` on `comm` (inactive) and writes its handle.
fn persistent(l: &Lib, op: Persistent, comm: &CommObj, request: Out<usize>) -> Result<()> {
    let comm = comm.handle.load(Ordering::Relaxed);
    request.put(l.t().persistent.insert(PersistentEntry { op, active: None, comm }));
    Ok(())
}

/// Writes a completed receive's status (unless ignored) and turns it into the call's result.
fn received(cx: Call, s: &Status, status: StatusOut) -> Result<()> {
    status.put(s, false);
    check_status(cx.name, s)
}

pub(crate) fn sendrecv(
    cx: Call,
    l: &Lib,
    send: Message,
    recv: Message,
    comm: CommRef,
    status: StatusOut,
) -> Result<()> {
    let (from, into) = parts(cx, recv, &comm)?;
    let (to, data) = parts(cx, send, &comm)?;
    received(cx, &l.mpi.sendrecv(to, &data, from, &into), status)
}

/// The message goes to `m.peer` with `m.tag` and is replaced by one from `source` with
/// `recvtag`.
pub(crate) fn sendrecv_replace(
    cx: Call,
    l: &Lib,
    m: Message,
    source: c_int,
    recvtag: c_int,
    comm: CommRef,
    status: StatusOut,
) -> Result<()> {
    let (to, b) = parts(cx, m, &comm)?;
    let from = Envelope { peer: source, tag: recvtag, ..to };
    received(cx, &l.mpi.sendrecv_replace(to, from, &b), status)
}

/// `MPI_Isendrecv`: one request, complete when the receive is (the outgoing bytes are copied).
pub(crate) fn isendrecv(
    cx: Call,
    l: &Lib,
    send: Message,
    recv: Message,
    comm: CommRef,
    request: Out<usize>,
) -> Result<()> {
    let (from, into) = parts(cx, recv, &comm)?;
    let (to, data) = parts(cx, send, &comm)?;
    request.put(handle_of(l.mpi.start_sendrecv(to, &data, from, &into)));
    Ok(())
}

/// `MPI_Isendrecv_replace`: the message goes to `m.peer` with `m.tag` and is replaced by one
/// from `source` with `recvtag`; the outgoing copy belongs to the send, not to the buffer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn isendrecv_replace(
    cx: Call,
    l: &Lib,
    m: Message,
    source: c_int,
    recvtag: c_int,
    comm: CommRef,
    request: Out<usize>,
) -> Result<()> {
    let (to, b) = parts(cx, m, &comm)?;
    let from = Envelope { peer: source, tag: recvtag, ..to };
    request.put(handle_of(l.mpi.start_sendrecv(to, &b, from, &b)));
    Ok(())
}

// ----- probes and matched receives -----

pub(crate) fn probe(_cx: Call, l: &Lib, on: Matching, comm: CommRef, status: StatusOut) -> Result<()> {
    status.put(&l.mpi.probe(&comm.core, on.source, on.tag), false);
    Ok(())
}

pub(crate) fn iprobe(_cx: Call, l: &Lib, on: Matching, comm: CommRef, flag: Out<c_int>, st: StatusOut) -> Result<()> {
    let found = l.mpi.iprobe(&comm.core, on.source, on.tag);
    flag.put(found.is_some() as c_int);
    if let Some(s) = found {
        st.put(&s, false);
    }
    Ok(())
}

pub(crate) fn mprobe(_cx: Call, l: &Lib, on: Matching, comm: CommRef, msg: Out<usize>, st: StatusOut) -> Result<()> {
    let m = l.mpi.mprobe(&comm.core, on.source, on.tag);
    keep_matched(l, m, &comm, msg, st);
    Ok(())
}

/// `MPI_Improbe`: `flag` says whether a message was matched (and `message` written).
pub(crate) fn improbe(
    _cx: Call,
    l: &Lib,
    on: Matching,
    comm: CommRef,
    flag: Out<c_int>,
    message: Out<usize>,
    status: StatusOut,
) -> Result<()> {
    let found = l.mpi.improbe(&comm.core, on.source, on.tag);
    flag.put(found.is_some() as c_int);
    if let Some(m) = found {
        keep_matched(l, m, &comm, message, status);
    }
    Ok(())
}

/// A message a probe matched: its status reported, its handle written (kept with its
/// communicator until `MPI_Mrecv` takes it).
fn keep_matched(l: &Lib, m: Matched, comm: &Arc<CommObj>, message: Out<usize>, status: StatusOut) {
    status.put(&m.status(), false);
    message.put(match m {
        Matched::NoProc => c::MPI_MESSAGE_NO_PROC,
        Matched::Message(m) => l.t().messages.insert((m, comm.clone())),
    });
}

/// The matched message behind `message` (which becomes `MPI_MESSAGE_NULL`).
fn take_matched(cx: Call, l: &Lib, message: &Out<usize>) -> Result<Matched> {
    let mh = message.get();
    let m = if mh == c::MPI_MESSAGE_NO_PROC {
        Matched::NoProc
    } else {
        let (m, _comm) =
            l.t().messages.remove(mh).ok_or_else(|| {
                MpiError::invalid_handle(cx.name, "message", baton_core::error::HandleKind::Message, mh)
            })?;
        Matched::Message(m)
    };
    message.put(c::MPI_MESSAGE_NULL);
    Ok(m)
}

pub(crate) fn mrecv(cx: Call, l: &Lib, d: Data, message: Out<usize>, status: StatusOut) -> Result<()> {
    let into = user_buffer(cx.name, d)?;
    let m = take_matched(cx, l, &message)?;
    received(cx, &l.mpi.mrecv(m, &into), status)
}

pub(crate) fn imrecv(cx: Call, l: &Lib, d: Data, message: Out<usize>, request: Out<usize>) -> Result<()> {
    let into = user_buffer(cx.name, d)?;
    let m = take_matched(cx, l, &message)?;
    request.put(handle_of(l.mpi.imrecv(m, &into)));
    Ok(())
}

// ----- buffered-send buffer -----

/// `size` is checked only for a buffer of the application's: with `MPI_BUFFER_AUTOMATIC` the
/// standard ignores it.
pub(crate) fn buffer_attach(cx: Call, l: &Lib, buffer: *mut c_void, size: i64) -> Result<()> {
    attach_to(cx, l, None, buffer, size)
}

/// `MPI_Buffer_attach` (`ctx` None) or `MPI_Comm_attach_buffer` to the communicator of context
/// `ctx`.
fn attach_to(cx: Call, l: &Lib, ctx: Option<u64>, buffer: *mut c_void, size: i64) -> Result<()> {
    let automatic = buffer as usize == c::MPI_BUFFER_AUTOMATIC;
    let size = if automatic { 0 } else { validate::count(cx.name, "size", size)? };
    if !automatic {
        let bytes = predefined(c::MPI_BYTE).expect("MPI_BYTE is predefined");
        validate::buf(cx.name, "buffer", buffer, size, bytes)?;
    }
    l.mpi.comm_buffer_attach(cx.name, ctx, buffer as usize, size, automatic)
}

/// `buffer_addr` is really a `void **` (the standard's binding); `size` may be NULL.
pub(crate) fn buffer_detach(cx: Call, l: &Lib, buffer_addr: *mut c_void, size: Option<CountOut>) -> Result<()> {
    detach_from(cx, l, None, buffer_addr, size)
}

/// `MPI_Buffer_detach` (`ctx` None) or `MPI_Comm_detach_buffer` of the communicator of context
/// `ctx`.
fn detach_from(cx: Call, l: &Lib, ctx: Option<u64>, buffer_addr: *mut c_void, size: Option<CountOut>) -> Result<()> {
    let (addr, n) = match l.mpi.comm_buffer_detach(cx.name, ctx)? {
        Detached::User { addr, size } => (addr, size),
        Detached::Automatic => (c::MPI_BUFFER_AUTOMATIC, 0),
    };
    // SAFETY: checked non-null (role `nonnull`); the application passes the address of a
    // pointer.
    unsafe { *(buffer_addr as *mut usize) = addr };
    if let Some(size) = size {
        size.put_clamped(n as i64);
    }
    Ok(())
}

pub(crate) fn buffer_flush(_cx: Call, l: &Lib) -> Result<()> {
    l.mpi.buffer_flush();
    Ok(())
}

pub(crate) fn buffer_iflush(_cx: Call, l: &'static Lib, request: Out<usize>) -> Result<()> {
    request.put(handle_of(l.mpi.comm_buffer_iflush(None)));
    Ok(())
}

/// `MPI_Comm_attach_buffer`: buffered sends on `comm` use this buffer instead of the process's.
pub(crate) fn comm_attach_buffer(cx: Call, l: &Lib, comm: CommRef, buffer: *mut c_void, size: i64) -> Result<()> {
    attach_to(cx, l, Some(comm.core.ctx), buffer, size)
}

pub(crate) fn comm_detach_buffer(
    cx: Call,
    l: &Lib,
    comm: CommRef,
    buffer_addr: *mut c_void,
    size: Option<CountOut>,
) -> Result<()> {
    detach_from(cx, l, Some(comm.core.ctx), buffer_addr, size)
}

pub(crate) fn comm_flush_buffer(_cx: Call, l: &Lib, comm: CommRef) -> Result<()> {
    l.mpi.comm_buffer_flush(Some(comm.core.ctx));
    Ok(())
}

pub(crate) fn comm_iflush_buffer(_cx: Call, l: &'static Lib, comm: CommRef, request: Out<usize>) -> Result<()> {
    request.put(handle_of(l.mpi.comm_buffer_iflush(Some(comm.core.ctx))));
    Ok(())
}
