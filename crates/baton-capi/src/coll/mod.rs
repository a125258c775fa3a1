//! Collectives at the C boundary. Each function decodes its handles and buffers (the `unsafe`
//! steps that turn addresses into [`Buffer`]s), checks what needs no communicator (datatypes,
//! counts, `NULL` pointers, per-rank arrays), calls its device entry
//! (`baton_core::device::coll`: roots, `MPI_IN_PLACE` rules, the algorithm, shared memory or a
//! schedule, the form) and writes the request handle a nonblocking or persistent call returns.
//!
//! Each collective is one function taking a [`Mode`]; the `coll_entry!` macro generates its
//! blocking, `I…` and `…_init` entry points (and the `_c` ones) from that function.

use crate::errors::guard;
use crate::p2p::dtype;
use crate::request::handle_of;
use crate::state::{lib, lib_fast, CommObj, Lib, PersistentEntry};
use baton_abi::consts as c;
use baton_core::datatype::Layout;
use baton_core::device::coll::Call;
use baton_core::device::{Buffer, Device, Form, Persistent, Started};
use baton_core::err;
use baton_core::error::Result;
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Which form of a collective was called.
#[derive(Clone, Copy)]
pub(crate) enum Mode {
    Blocking,
    /// `MPI_I…`: the request handle goes here.
    Nonblocking(*mut usize),
    /// `MPI_…_init`: the persistent request handle goes here.
    Persistent(*mut usize),
}

fn in_place(p: *const c_void) -> bool {
    p as usize == c::MPI_IN_PLACE
}

/// `count` elements of `lay` at `p` pass the checks every buffer argument must (`what` names
/// the buffer in messages); the count as a size.
#[inline(always)]
fn checked(call: &str, what: &str, p: *const c_void, count: i64, lay: &Layout) -> Result<usize> {
    // The usual case, decided here without a call: a non-negative count whose bytes fit, at an
    // address (a NULL one passes only with nothing to hold).
    let n = count as usize;
    if count >= 0 && (!p.is_null() || count == 0) && n.checked_mul(lay.size).is_some_and(|b| b <= isize::MAX as usize) {
        return Ok(n);
    }
    checked_slowly(call, what, p, count, lay)
}

/// [`checked`] for the cases its first test leaves: each check in turn, with its message.
#[cold]
fn checked_slowly(call: &str, what: &str, p: *const c_void, count: i64, lay: &Layout) -> Result<usize> {
    if count < 0 {
        return Err(err!(MPI_ERR_COUNT, "{call}: {what} count {count} is negative"));
    }
    crate::p2p::check_buf(call, p as usize, count as usize, lay).map_err(|mut e| {
        e.msg = format!("{} ({what} buffer)", e.msg);
        e
    })?;
    count
        .checked_mul(lay.size as i64)
        .filter(|&b| b <= isize::MAX as i64)
        .ok_or_else(|| err!(MPI_ERR_COUNT, "{call}: {what} count {count} overflows"))?;
    Ok(count as usize)
}

/// The device's view of `count` elements of `lay` at `p` (checked).
#[inline(always)]
fn span_of(p: *const c_void, count: usize, lay: Arc<Layout>) -> Buffer {
    let (lo, hi) = lay.span(count);
    // SAFETY: MPI requires a collective's buffers to hold `count` elements of the datatype and
    // to stay valid and untouched by the application until the operation completes (for
    // persistent collectives, until the request is freed); (lo, hi) is exactly what they cover.
    let span = unsafe { UserBuf::new((p as usize).wrapping_add_signed(lo), (hi - lo) as usize) };
    Buffer { span, base_off: -lo, layout: lay, count }
}

/// A buffer argument: `count` elements of datatype `dt` at `p`.
#[inline(always)]
pub(crate) fn buffer(call: &str, what: &str, p: *const c_void, count: i64, dt: usize) -> Result<Buffer> {
    let lay = dtype(call, dt)?;
    let count = checked(call, what, p, count, &lay)?;
    Ok(span_of(p, count, lay.clone()))
}

/// A buffer argument that may be `MPI_IN_PLACE` (None).
#[inline]
fn or_in_place(call: &str, what: &str, p: *const c_void, count: i64, dt: usize) -> Result<Option<Buffer>> {
    if in_place(p) {
        return Ok(None);
    }
    buffer(call, what, p, count, dt).map(Some)
}

/// A buffer argument of `n` blocks of `count` elements: a block's checks first (their messages
/// name its count), then the whole buffer's.
#[inline]
pub(crate) fn blocks(call: &str, what: &str, p: *const c_void, count: i64, dt: usize, n: usize) -> Result<Buffer> {
    let lay = dtype(call, dt)?;
    checked(call, what, p, count, &lay)?;
    let total =
        count.checked_mul(n as i64).ok_or_else(|| err!(MPI_ERR_COUNT, "{call}: {what} count {count} overflows"))?;
    let total = checked(call, what, p, total, &lay)?;
    Ok(span_of(p, total, lay.clone()))
}

/// Looks the communicator up, checks the request argument, and lets `f` decode the rest and
/// call the device; then hands the result over in the form `mode` asks.
#[inline(always)]
pub(crate) fn run(
    mode: Mode,
    call: &'static str,
    comm_h: usize,
    f: impl FnOnce(&Device, &CommObj, Call) -> Result<Started>,
) -> c_int {
    guard(comm_h, || {
        let l = match lib_fast() {
            Some(l) => l,
            None => lib(call)?,
        };
        let cm = l.comm(call, comm_h)?;
        let form = match mode {
            Mode::Blocking => Form::Blocking,
            Mode::Nonblocking(r) => {
                crate::nonnull_mut(call, "request", r)?;
                Form::Nonblocking
            }
            Mode::Persistent(r) => {
                crate::nonnull_mut(call, "request", r)?;
                Form::Persistent
            }
        };
        let at =
            Call { comm: &cm.core, handle: comm_h, form, thread_multiple: l.thread_level == c::MPI_THREAD_MULTIPLE };
        let started = f(&l.mpi, &cm, at)?;
        match mode {
            // A blocking call's collective is over (`Started::Done`).
            Mode::Blocking => Ok(()),
            _ => hand_over(l, comm_h, mode, started),
        }
    })
}

/// Writes the request a nonblocking call started, or keeps a persistent call's schedule behind
/// a new persistent request (pointers checked by [`run`]).
fn hand_over(l: &Lib, comm_h: usize, mode: Mode, started: Started) -> Result<()> {
    match (mode, started) {
        // SAFETY: checked non-null; the caller's request variable.
        (Mode::Nonblocking(r), Started::Request(id)) => unsafe { *r = handle_of(id) },
        (Mode::Persistent(r), Started::Persistent(op @ Persistent::Coll(_))) => {
            let h = l.t().persistent.insert(PersistentEntry { op, active: None, comm: comm_h });
            // SAFETY: checked non-null; the caller's request variable.
            unsafe { *r = h };
        }
        _ => return Err(err!(MPI_ERR_INTERN, "a collective's device entry answered in another form than called")),
    }
    Ok(())
}

/// Generates the blocking, nonblocking and persistent entry points of one collective.
macro_rules! coll_entry {
    ($b:ident, $i:ident, $p:ident, $imp:ident, ($($a:ident : $t:ty),*) => ($($arg:expr),*)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $b($($a: $t),*) -> c_int {
            $imp(Mode::Blocking, $($arg),*)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $i($($a: $t,)* request: *mut usize) -> c_int {
            $imp(Mode::Nonblocking(request), $($arg),*)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $p($($a: $t,)* _info: usize, request: *mut usize) -> c_int {
            $imp(Mode::Persistent(request), $($arg),*)
        }
    };
}
pub(crate) use coll_entry;

// ----- per-rank arrays -----

unsafe fn array<'a, T: Copy>(call: &str, what: &str, p: *const T, n: usize) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    crate::nonnull(call, what, p)?;
    // SAFETY: the standard makes these arrays hold one entry per process of the communicator.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The `n` entries of an int or MPI_Count / MPI_Aint array argument, widened.
unsafe fn wide<T: Copy + Into<i64>>(call: &str, what: &str, p: *const T, n: usize) -> Result<Vec<i64>> {
    // SAFETY: forwarded caller contract.
    Ok(unsafe { array(call, what, p, n)? }.iter().map(|&v| v.into()).collect())
}

/// Per-rank (or per-neighbour) blocks of a `v` or `w` argument: counts, displacements (in
/// extents of the block's datatype for `v`, in bytes for `w`) and datatypes.
pub(crate) struct VSide {
    counts: Vec<i64>,
    displs: Vec<i64>,
    types: Vec<usize>,
    bytes_displs: bool,
}

impl VSide {
    /// Reads `n` entries of the counts and displacements arrays (`names` as the call calls
    /// them) and, for `w`, of the datatypes array `types.1`; otherwise every block is of `types.0`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn read<C: Copy + Into<i64>, D: Copy + Into<i64>>(
        call: &str,
        names: [&str; 3],
        counts: *const C,
        displs: *const D,
        types: (usize, *const usize),
        w: bool,
        n: usize,
    ) -> Result<VSide> {
        // SAFETY: forwarded contract: one entry per block in each array.
        let (counts, displs) = unsafe { (wide(call, names[0], counts, n)?, wide(call, names[1], displs, n)?) };
        if let Some((i, bad)) = counts.iter().enumerate().find(|(_, &v)| v < 0) {
            return Err(err!(MPI_ERR_COUNT, "{call}: {}[{i}] is negative ({bad})", names[0]));
        }
        let types = if w {
            // SAFETY: as above.
            unsafe { array(call, names[2], types.1, n)? }.to_vec()
        } else {
            vec![types.0; n]
        };
        Ok(VSide { counts, displs, types, bytes_displs: w })
    }

    /// Every block as a checked buffer.
    pub(crate) fn bufs(&self, call: &str, what: &str, base: *const c_void) -> Result<Vec<Buffer>> {
        (0..self.counts.len())
            .map(|i| {
                let dt = self.types[i];
                let off = if self.bytes_displs {
                    self.displs[i] as isize
                } else {
                    self.displs[i] as isize * dtype(call, dt)?.extent
                };
                let addr = (base as usize).wrapping_add_signed(off);
                buffer(call, what, addr as *const c_void, self.counts[i], dt)
            })
            .collect()
    }
}

/// The receive (`what`) blocks of a rooted `v` collective, read at the root only, where the
/// device asks for them: one count and one displacement per process of the `n`.
unsafe fn root_blocks<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    call: &str,
    names: [&str; 2],
    (counts, displs, dt): (*const C, *const D, usize),
    (what, base): (&str, *const c_void),
    n: usize,
) -> Result<Vec<Buffer>> {
    // SAFETY: forwarded contract: one entry per process at the root.
    let side =
        unsafe { VSide::read(call, [names[0], names[1], ""], counts, displs, (dt, std::ptr::null()), false, n)? };
    side.bufs(call, what, base)
}

// ----- barrier, bcast -----

fn barrier(mode: Mode, comm_h: usize) -> c_int {
    run(mode, "MPI_Barrier", comm_h, |d, _, at| d.barrier(at))
}

coll_entry!(PMPI_Barrier, PMPI_Ibarrier, PMPI_Barrier_init, barrier, (comm: usize) => (comm));

fn bcast(mode: Mode, buf: *mut c_void, count: i64, dt: usize, root: c_int, comm_h: usize) -> c_int {
    let call = "MPI_Bcast";
    run(mode, call, comm_h, |d, _, at| d.bcast(at, buffer(call, "", buf, count, dt), root))
}

coll_entry!(PMPI_Bcast, PMPI_Ibcast, PMPI_Bcast_init, bcast,
    (buf: *mut c_void, count: c_int, dt: usize, root: c_int, comm: usize) => (buf, count as i64, dt, root, comm));
coll_entry!(PMPI_Bcast_c, PMPI_Ibcast_c, PMPI_Bcast_init_c, bcast,
    (buf: *mut c_void, count: i64, dt: usize, root: c_int, comm: usize) => (buf, count, dt, root, comm));

// ----- reductions -----

#[allow(clippy::too_many_arguments)]
fn reduce(
    mode: Mode,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    oph: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Reduce";
    run(mode, call, comm_h, |d, _, at| {
        let send = or_in_place(call, "send", sbuf, count, dt);
        let op = crate::ops::reducer(call, oph, dt);
        d.reduce(at, send, || buffer(call, "receive", rbuf, count, dt), op, root)
    })
}

coll_entry!(PMPI_Reduce, PMPI_Ireduce, PMPI_Reduce_init, reduce,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: c_int, dt: usize, op: usize, root: c_int, comm: usize)
    => (sbuf, rbuf, count as i64, dt, op, root, comm));
coll_entry!(PMPI_Reduce_c, PMPI_Ireduce_c, PMPI_Reduce_init_c, reduce,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: i64, dt: usize, op: usize, root: c_int, comm: usize)
    => (sbuf, rbuf, count, dt, op, root, comm));

/// Allreduce, Scan and Exscan: the buffers and the operation, for `f` to call the device with.
#[allow(clippy::too_many_arguments)]
fn vector(
    mode: Mode,
    call: &'static str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    oph: usize,
    comm_h: usize,
    f: impl FnOnce(&Device, Call, Option<Buffer>, Buffer, baton_core::coll::Reducer) -> Result<Started>,
) -> c_int {
    run(mode, call, comm_h, |d, _, at| {
        let recv = buffer(call, "receive", rbuf, count, dt)?;
        let send = or_in_place(call, "send", sbuf, count, dt)?;
        f(d, at, send, recv, crate::ops::reducer(call, oph, dt)?)
    })
}

fn allreduce(
    mode: Mode,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    oph: usize,
    comm_h: usize,
) -> c_int {
    vector(mode, "MPI_Allreduce", sbuf, rbuf, count, dt, oph, comm_h, |d, at, s, r, op| d.allreduce(at, s, r, op))
}

coll_entry!(PMPI_Allreduce, PMPI_Iallreduce, PMPI_Allreduce_init, allreduce,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: c_int, dt: usize, op: usize, comm: usize)
    => (sbuf, rbuf, count as i64, dt, op, comm));
coll_entry!(PMPI_Allreduce_c, PMPI_Iallreduce_c, PMPI_Allreduce_init_c, allreduce,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: i64, dt: usize, op: usize, comm: usize)
    => (sbuf, rbuf, count, dt, op, comm));

#[allow(clippy::too_many_arguments)]
fn scan(
    mode: Mode,
    exclusive: bool,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    oph: usize,
    comm_h: usize,
) -> c_int {
    match exclusive {
        false => vector(mode, "MPI_Scan", sbuf, rbuf, count, dt, oph, comm_h, |d, at, s, r, op| d.scan(at, s, r, op)),
        true => {
            vector(mode, "MPI_Exscan", sbuf, rbuf, count, dt, oph, comm_h, |d, at, s, r, op| d.exscan(at, s, r, op))
        }
    }
}

coll_entry!(PMPI_Scan, PMPI_Iscan, PMPI_Scan_init, scan,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: c_int, dt: usize, op: usize, comm: usize)
    => (false, sbuf, rbuf, count as i64, dt, op, comm));
coll_entry!(PMPI_Scan_c, PMPI_Iscan_c, PMPI_Scan_init_c, scan,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: i64, dt: usize, op: usize, comm: usize)
    => (false, sbuf, rbuf, count, dt, op, comm));
coll_entry!(PMPI_Exscan, PMPI_Iexscan, PMPI_Exscan_init, scan,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: c_int, dt: usize, op: usize, comm: usize)
    => (true, sbuf, rbuf, count as i64, dt, op, comm));
coll_entry!(PMPI_Exscan_c, PMPI_Iexscan_c, PMPI_Exscan_init_c, scan,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: i64, dt: usize, op: usize, comm: usize)
    => (true, sbuf, rbuf, count, dt, op, comm));

/// Reduce-scatter's buffers for `counts` elements per rank: the whole vector (at `sbuf`, or
/// at `rbuf` with `MPI_IN_PLACE`, which the device then gets as the receive buffer) and this
/// rank's block; the counts as sizes.
fn scatter_bufs(
    call: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    counts: &[i64],
    dt: usize,
    me: usize,
) -> Result<(Option<Buffer>, Buffer, Vec<usize>)> {
    if let Some(bad) = counts.iter().find(|&&c| c < 0) {
        return Err(err!(MPI_ERR_COUNT, "{call}: recvcounts holds a negative count {bad}"));
    }
    let total: i64 = counts.iter().sum();
    let whole = buffer(call, "send", if in_place(sbuf) { rbuf } else { sbuf }, total, dt)?;
    let mine = buffer(call, "receive", rbuf, counts[me], dt)?;
    let sizes = counts.iter().map(|&c| c as usize).collect();
    Ok(if in_place(sbuf) { (None, whole, sizes) } else { (Some(whole), mine, sizes) })
}

unsafe fn reduce_scatter_v<C: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: *const C,
    dt: usize,
    oph: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Reduce_scatter";
    run(mode, call, comm_h, |d, cm, at| {
        // SAFETY: one count per process of the (local) group.
        let counts = unsafe { wide(call, "recvcounts", rcounts, cm.core.size() as usize)? };
        let (send, recv, counts) = scatter_bufs(call, sbuf, rbuf, &counts, dt, cm.core.rank as usize)?;
        d.reduce_scatter(at, send, recv, &counts, crate::ops::reducer(call, oph, dt)?)
    })
}

coll_entry!(PMPI_Reduce_scatter, PMPI_Ireduce_scatter, PMPI_Reduce_scatter_init, reduce_scatter_v,
    (sbuf: *mut c_void, rbuf: *mut c_void, rc: *mut c_int, dt: usize, op: usize, comm: usize)
    => (sbuf, rbuf, rc, dt, op, comm));
coll_entry!(PMPI_Reduce_scatter_c, PMPI_Ireduce_scatter_c, PMPI_Reduce_scatter_init_c, reduce_scatter_v,
    (sbuf: *mut c_void, rbuf: *mut c_void, rc: *mut i64, dt: usize, op: usize, comm: usize)
    => (sbuf, rbuf, rc, dt, op, comm));

fn reduce_scatter_block(
    mode: Mode,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rc: i64,
    dt: usize,
    oph: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Reduce_scatter_block";
    run(mode, call, comm_h, |d, cm, at| {
        let counts = vec![rc; cm.core.size() as usize];
        let (send, recv, _) = scatter_bufs(call, sbuf, rbuf, &counts, dt, cm.core.rank as usize)?;
        d.reduce_scatter_block(at, send, recv, rc as usize, crate::ops::reducer(call, oph, dt)?)
    })
}

coll_entry!(PMPI_Reduce_scatter_block, PMPI_Ireduce_scatter_block, PMPI_Reduce_scatter_block_init, reduce_scatter_block,
    (sbuf: *mut c_void, rbuf: *mut c_void, rc: c_int, dt: usize, op: usize, comm: usize)
    => (sbuf, rbuf, rc as i64, dt, op, comm));
coll_entry!(PMPI_Reduce_scatter_block_c, PMPI_Ireduce_scatter_block_c, PMPI_Reduce_scatter_block_init_c, reduce_scatter_block,
    (sbuf: *mut c_void, rbuf: *mut c_void, rc: i64, dt: usize, op: usize, comm: usize)
    => (sbuf, rbuf, rc, dt, op, comm));

// The collectives of personal data (gather, scatter, allgather, alltoall and their v/w forms).
mod personal;
pub use personal::*;
