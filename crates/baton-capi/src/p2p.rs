//! Point-to-point communication at the C boundary: argument checks and buffer decoding, then one
//! entry of the device ([`baton_core::device`]), which does the rest.
//!
//! The express paths take the commonest calls (a predefined contiguous datatype or a small
//! message of a committed derived one, a communicator at hand without a lookup, a plain rank and
//! tag) straight to one express entry of the device; anything else, errors included, takes the
//! generic path, which checks every argument and builds a [`Buffer`].
//!
//! Every call is written once over 64-bit counts; the `int` and `_c` entry points are thin.

use crate::errors::guard;
use crate::state::{lib, CommObj, Lib, PersistentEntry};
use crate::twins::{twins, CountOut};
use crate::{put_status, MPI_Status};
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

/// The largest tag: the frame header carries tags as 32-bit signed integers.
pub const TAG_UB: c_int = i32::MAX;

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

/// The application buffer of `count` elements of `lay` at `buf` (whose other checks the caller
/// made), or an error naming `call` when their size overflows.
pub fn user_buffer(call: &str, buf: usize, count: usize, lay: &Arc<Layout>) -> Result<Buffer> {
    if count.checked_mul(lay.size).is_none_or(|n| n > isize::MAX as usize) {
        return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: count {count} of {} overflows", lay.name)));
    }
    let (lo, hi) = lay.span(count);
    // SAFETY: MPI requires the buffer to hold (to send) or have room for (to receive) `count`
    // elements of the datatype, valid for the whole operation, not modified while a send reads
    // it and not accessed while a receive fills it; (lo, hi) is exactly the bytes they cover.
    let span = unsafe { UserBuf::new(buf.wrapping_add_signed(lo), (hi - lo) as usize) };
    Ok(Buffer { span, base_off: -lo, layout: lay.clone(), count })
}

/// Which side of a message a call is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// `dest`: a rank or `MPI_PROC_NULL`, a valid tag.
    Send,
    /// `source`: `MPI_ANY_SOURCE` and `MPI_ANY_TAG` allowed too.
    Recv,
}

/// Checks a point-to-point call's arguments (`count` elements of `dt` at `buf`, rank `peer` of
/// `comm`, `tag`) and decodes its buffer.
fn message<'a>(
    call: &str,
    comm: &'a CommObj,
    buf: usize,
    count: i64,
    dt: usize,
    peer: c_int,
    tag: c_int,
    side: Side,
) -> Result<(Envelope<'a>, Buffer)> {
    let lay = dtype(call, dt)?;
    let count = check_count(call, count)?;
    let recv = side == Side::Recv;
    check_peer(call, if recv { "source" } else { "dest" }, comm, peer, recv)?;
    check_tag(call, tag, recv)?;
    check_buf(call, buf, count, &lay)?;
    let b = user_buffer(call, buf, count, &lay)?;
    Ok((Envelope { comm: &comm.core, peer, tag, handle: comm.handle.load(Ordering::Relaxed) }, b))
}

/// Runs `call` on communicator `comm_h` under its error handler: `f` gets the library and the
/// communicator.
fn on_comm(call: &str, comm_h: usize, f: impl FnOnce(&Lib, &CommObj) -> Result<()>) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        let comm = l.comm(call, comm_h)?;
        f(l, &comm)
    })
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

fn blocking_send(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    comm_h: usize,
    mode: SendMode,
) -> c_int {
    if matches!(mode, SendMode::Standard | SendMode::Ready)
        && (express_send(comm_h, buf, count, dt, dest, tag, Sender::Waits)
            || express_send_typed(comm_h, buf, count, dt, dest, tag))
    {
        return c::MPI_SUCCESS;
    }
    let call = mode.call(false);
    on_comm(call, comm_h, |l, comm| {
        let (to, data) = message(call, comm, buf as usize, count, dt, dest, tag, Side::Send)?;
        l.mpi.send(call, to, &data, mode)
    })
}

fn blocking_recv(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm_h: usize,
    status: *mut MPI_Status,
) -> c_int {
    let express = || {
        let l = crate::state::lib_fast()?;
        let ctx = express_recv_ctx(l, comm_h, src, tag)?;
        match express_recv_span(buf, count, dt) {
            Some(span) => Some(l.mpi.recv_now(comm_h, ctx, src, tag, span)),
            None => express_recv_typed(l, comm_h, ctx, buf, count, dt, src, tag),
        }
    };
    if let Some(s) = express() {
        // SAFETY: status is MPI_STATUS_IGNORE (null) or points to a caller-owned MPI_Status.
        unsafe { put_status(status, &s, false) };
        return if s.error == 0 { c::MPI_SUCCESS } else { guard(comm_h, || check_status("MPI_Recv", &s)) };
    }
    let call = "MPI_Recv";
    on_comm(call, comm_h, |l, comm| {
        let (from, into) = message(call, comm, buf as usize, count, dt, src, tag, Side::Recv)?;
        let s = l.mpi.recv(from, &into);
        // SAFETY: status is MPI_STATUS_IGNORE (null) or points to a caller-owned MPI_Status.
        unsafe { put_status(status, &s, false) };
        check_status(call, &s)
    })
}

fn nonblocking_send(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    dest: c_int,
    tag: c_int,
    comm_h: usize,
    request: *mut usize,
    mode: SendMode,
) -> c_int {
    if matches!(mode, SendMode::Standard | SendMode::Ready)
        && !request.is_null()
        && express_send(comm_h, buf, count, dt, dest, tag, Sender::GoesOn)
    {
        // SAFETY: checked non-null; MPI gives us the handle to write.
        unsafe { *request = crate::request::SENT };
        return c::MPI_SUCCESS;
    }
    let call = mode.call(true);
    on_comm(call, comm_h, |l, comm| {
        crate::nonnull_mut(call, "request", request)?;
        let (to, data) = message(call, comm, buf as usize, count, dt, dest, tag, Side::Send)?;
        let id = l.mpi.start_send(call, to, &data, mode)?;
        // SAFETY: checked non-null above.
        unsafe { *request = crate::request::handle_of(id) };
        Ok(())
    })
}

fn nonblocking_recv(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    src: c_int,
    tag: c_int,
    comm_h: usize,
    request: *mut usize,
) -> c_int {
    if let Some(l) = crate::state::lib_fast().filter(|_| !request.is_null()) {
        let express =
            express_recv_span(buf, count, dt).and_then(|span| Some((span, express_recv_ctx(l, comm_h, src, tag)?)));
        if let Some((span, ctx)) = express {
            let id = l.mpi.post_recv(comm_h, ctx, src, tag, span);
            // SAFETY: checked non-null; MPI gives us the handle to write.
            unsafe { *request = crate::request::handle_of(id) };
            return c::MPI_SUCCESS;
        }
    }
    let call = "MPI_Irecv";
    on_comm(call, comm_h, |l, comm| {
        crate::nonnull_mut(call, "request", request)?;
        let (from, into) = message(call, comm, buf as usize, count, dt, src, tag, Side::Recv)?;
        let id = l.mpi.start_recv(from, &into);
        // SAFETY: checked non-null above.
        unsafe { *request = crate::request::handle_of(id) };
        Ok(())
    })
}

/// `MPI_Send_init` and its modes (`Some(mode)`), or `MPI_Recv_init` (None): the arguments are
/// checked now, as the standard allows, so that `MPI_Start` cannot fail on them later.
fn persistent(
    buf: *mut c_void,
    count: i64,
    dt: usize,
    peer: c_int,
    tag: c_int,
    comm_h: usize,
    request: *mut usize,
    call: &str,
    mode: Option<SendMode>,
) -> c_int {
    on_comm(call, comm_h, |l, comm| {
        crate::nonnull_mut(call, "request", request)?;
        let side = if mode.is_some() { Side::Send } else { Side::Recv };
        let (_, b) = message(call, comm, buf as usize, count, dt, peer, tag, side)?;
        let core = comm.core.clone();
        let op = match mode {
            Some(mode) => Persistent::Send { comm: core, data: b, dest: peer, tag, mode },
            None => Persistent::Recv { comm: core, buf: b, src: peer, tag },
        };
        let h = l.t().persistent.insert(PersistentEntry { op, active: None, comm: comm_h });
        // SAFETY: checked non-null above.
        unsafe { *request = h };
        Ok(())
    })
}

/// A send mode's blocking, nonblocking and persistent calls, in both widths.
macro_rules! send_fns {
    ($mode:expr, $b:ident, $b_c:ident, $nb:ident, $nb_c:ident, $init:ident, $init_c:ident, $init_name:expr) => {
        twins!($b, $b_c => blocking_send(buf: (*mut c_void), count: Count, dt: usize, dest: c_int, tag: c_int,
            comm: usize; $mode));
        twins!($nb, $nb_c => nonblocking_send(buf: (*mut c_void), count: Count, dt: usize, dest: c_int, tag: c_int,
            comm: usize, request: (*mut usize); $mode));
        twins!($init, $init_c => persistent(buf: (*mut c_void), count: Count, dt: usize, dest: c_int, tag: c_int,
            comm: usize, request: (*mut usize); $init_name, Some($mode)));
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

twins!(PMPI_Recv, PMPI_Recv_c => blocking_recv(buf: (*mut c_void), count: Count, dt: usize, src: c_int, tag: c_int,
    comm: usize, status: (*mut MPI_Status)));
twins!(PMPI_Irecv, PMPI_Irecv_c => nonblocking_recv(buf: (*mut c_void), count: Count, dt: usize, src: c_int,
    tag: c_int, comm: usize, request: (*mut usize)));
twins!(PMPI_Recv_init, PMPI_Recv_init_c => persistent(buf: (*mut c_void), count: Count, dt: usize, src: c_int,
    tag: c_int, comm: usize, request: (*mut usize); "MPI_Recv_init", None));

/// Writes a completed receive's status (unless ignored) and turns it into the call's result.
fn received(call: &str, s: &Status, status: *mut MPI_Status) -> Result<()> {
    // SAFETY: status is MPI_STATUS_IGNORE (null) or points to a caller-owned MPI_Status.
    unsafe { put_status(status, s, false) };
    check_status(call, s)
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
    let call = "MPI_Sendrecv";
    on_comm(call, comm_h, |l, comm| {
        let (from, into) = message(call, comm, rbuf as usize, rcount, rdt, src, rtag, Side::Recv)?;
        let (to, data) = message(call, comm, sbuf as usize, scount, sdt, dest, stag, Side::Send)?;
        received(call, &l.mpi.sendrecv(to, &data, from, &into), status)
    })
}

twins!(PMPI_Sendrecv, PMPI_Sendrecv_c => sendrecv(sbuf: (*mut c_void), scount: Count, sdt: usize, dest: c_int,
    stag: c_int, rbuf: (*mut c_void), rcount: Count, rdt: usize, src: c_int, rtag: c_int, comm: usize,
    status: (*mut MPI_Status)));

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
    let call = "MPI_Sendrecv_replace";
    on_comm(call, comm_h, |l, comm| {
        let (to, b) = message(call, comm, buf as usize, count, dt, dest, stag, Side::Send)?;
        check_peer(call, "source", comm, src, true)?;
        check_tag(call, rtag, true)?;
        let from = Envelope { peer: src, tag: rtag, ..to };
        received(call, &l.mpi.sendrecv_replace(to, from, &b), status)
    })
}

twins!(PMPI_Sendrecv_replace, PMPI_Sendrecv_replace_c => sendrecv_replace(buf: (*mut c_void), count: Count,
    dt: usize, dest: c_int, stag: c_int, src: c_int, rtag: c_int, comm: usize, status: (*mut MPI_Status)));

// ----- probes and matched receives -----

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
        let s = l.mpi.probe(&comm.core, src, tag);
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
        let found = l.mpi.iprobe(&comm.core, src, tag);
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
        let found =
            if blocking { Some(l.mpi.mprobe(&comm.core, src, tag)) } else { l.mpi.improbe(&comm.core, src, tag) };
        // SAFETY: out pointers checked above (flag only when nonblocking); status ignore or
        // caller-owned.
        unsafe {
            if !blocking {
                *flag = found.is_some() as c_int;
            }
            if let Some(m) = found {
                put_status(status, &m.status(), false);
                *message = match m {
                    Matched::NoProc => c::MPI_MESSAGE_NO_PROC,
                    Matched::Message(m) => l.t().messages.insert((m, comm)),
                };
            }
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

/// The matched message behind `*message` (which becomes `MPI_MESSAGE_NULL`) and the buffer to
/// receive it into.
fn matched(l: &Lib, call: &str, buf: usize, count: i64, dt: usize, message: *mut usize) -> Result<(Matched, Buffer)> {
    crate::nonnull_mut(call, "message", message)?;
    // SAFETY: checked non-null.
    let mh = unsafe { *message };
    let lay = dtype(call, dt)?;
    let n = check_count(call, count)?;
    check_buf(call, buf, n, &lay)?;
    let b = user_buffer(call, buf, n, &lay)?;
    let m = if mh == c::MPI_MESSAGE_NO_PROC {
        Matched::NoProc
    } else {
        let (m, _comm) = l.t().messages.remove(mh).ok_or_else(|| {
            MpiError::new(c::MPI_ERR_REQUEST, format!("{call}: message {mh:#x} is not a valid message handle"))
        })?;
        Matched::Message(m)
    };
    // SAFETY: as above.
    unsafe { *message = c::MPI_MESSAGE_NULL };
    Ok((m, b))
}

fn mrecv(buf: *mut c_void, count: i64, dt: usize, message: *mut usize, status: *mut MPI_Status) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Mrecv";
        let l = lib(call)?;
        let (m, into) = matched(l, call, buf as usize, count, dt, message)?;
        received(call, &l.mpi.mrecv(m, &into), status)
    })
}

fn imrecv(buf: *mut c_void, count: i64, dt: usize, message: *mut usize, request: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Imrecv";
        let l = lib(call)?;
        crate::nonnull_mut(call, "request", request)?;
        let (m, into) = matched(l, call, buf as usize, count, dt, message)?;
        let id = l.mpi.imrecv(m, &into);
        // SAFETY: checked non-null.
        unsafe { *request = crate::request::handle_of(id) };
        Ok(())
    })
}

twins!(PMPI_Mrecv, PMPI_Mrecv_c => mrecv(buf: (*mut c_void), count: Count, dt: usize, message: (*mut usize),
    status: (*mut MPI_Status)));
twins!(PMPI_Imrecv, PMPI_Imrecv_c => imrecv(buf: (*mut c_void), count: Count, dt: usize, message: (*mut usize),
    request: (*mut usize)));

// ----- buffered-send buffer -----

fn buffer_attach(buf: *mut c_void, size: i64) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Buffer_attach";
        let l = lib(call)?;
        let automatic = buf as usize == c::MPI_BUFFER_AUTOMATIC;
        if !automatic {
            if size < 0 {
                return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: size {size} is negative")));
            }
            if buf.is_null() && size > 0 {
                return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: buffer is NULL")));
            }
        }
        l.mpi.buffer_attach(call, buf as usize, size.max(0) as usize, automatic)
    })
}

fn buffer_detach(addr: *mut c_void, size: CountOut) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Buffer_detach";
        let l = lib(call)?;
        crate::nonnull_mut(call, "buffer_addr", addr)?;
        let (a, n) = match l.mpi.buffer_detach(call)? {
            Detached::User { addr, size } => (addr, size),
            Detached::Automatic => (c::MPI_BUFFER_AUTOMATIC, 0),
        };
        // SAFETY: `addr` is really a `void **` (standard C binding); checked non-null. The size
        // is written unless NULL; an `int` one gets at most `INT_MAX`.
        unsafe {
            *(addr as *mut usize) = a;
            if !size.is_null() {
                size.put(if matches!(size, CountOut::Int(_)) { n.min(c_int::MAX as usize) } else { n } as i64);
            }
        }
        Ok(())
    })
}

twins!(PMPI_Buffer_attach, PMPI_Buffer_attach_c => buffer_attach(buf: (*mut c_void), size: Count));
twins!(PMPI_Buffer_detach, PMPI_Buffer_detach_c => buffer_detach(addr: (*mut c_void), size: CountPtr));

#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_flush() -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        lib("MPI_Buffer_flush")?.mpi.buffer_flush();
        Ok(())
    })
}
