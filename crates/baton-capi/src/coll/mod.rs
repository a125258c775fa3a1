//! Collectives at the C boundary. Each function decodes its handles and buffers (the `unsafe`
//! steps that turn addresses into [`Buffer`]s), checks what needs no communicator (datatypes,
//! counts, `NULL` pointers, per-rank arrays), calls its device entry
//! (`baton_core::device::coll`: roots, `MPI_IN_PLACE` rules, the algorithm, shared memory or a
//! schedule, the form) and writes the request handle a nonblocking or persistent call returns.
//!
//! Each collective is one function taking a [`Mode`]; the `coll_entry!` macro generates its
//! blocking, `I…` and `…_init` entry points (and the `_c` ones) from that function.

use crate::errors::guard;
use crate::request::handle_of;
use crate::state::{lib, lib_fast, CommObj, Lib, PersistentEntry};
use crate::validate;
use baton_abi::consts as c;
use baton_core::datatype::Layout;
use baton_core::device::coll::Call;
use baton_core::device::{Buffer, Device, Form, LayoutRef, Persistent, Started};
use baton_core::err;
use baton_core::error::Result;
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};

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

/// A buffer argument as the application passed it: address, count and datatype handle.
pub(crate) type Side = (*const c_void, i64, usize);

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
    validate::buf(call, "buffer", p, count as usize, lay).map_err(|mut e| {
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
fn span_of(p: *const c_void, count: usize, lay: LayoutRef) -> Buffer {
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
    let lay = validate::datatype_committed(call, "datatype", dt)?.into_layout_ref();
    let count = checked(call, what, p, count, &lay)?;
    Ok(span_of(p, count, lay))
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
    let lay = validate::datatype_committed(call, "datatype", dt)?.into_layout_ref();
    checked(call, what, p, count, &lay)?;
    let total =
        count.checked_mul(n as i64).ok_or_else(|| err!(MPI_ERR_COUNT, "{call}: {what} count {count} overflows"))?;
    let total = checked(call, what, p, total, &lay)?;
    Ok(span_of(p, total, lay))
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

/// Generates the six entry points of one collective: blocking, `I…` and `…_init`, each in the
/// `int` binding and the `_c` one, which differ only in the width of their counts. Argument types
/// are one token each, those that differ by binding marked: `Count` (`int` or `MPI_Count`),
/// `Counts` (an array of them), `Displs` (`int` or `MPI_Aint` displacements), `Aints` (`MPI_Aint`
/// displacements in both); `Buf`, `Handle` and `Handles` are the same in both. Each body first
/// turns its arguments into one form ([`Count`]s into `i64`, arrays into `*const` pointers to
/// 64-bit values where the widths differ), then evaluates the call after `=>` with them.
macro_rules! coll_entry {
    ($b:ident $i:ident $p:ident, $bc:ident $ic:ident $pc:ident,
     ($($a:ident: $t:tt),*) => $imp:ident($($arg:expr),*)) => {
        $crate::coll::coll_entry!(@one int $b $i $p, ($($a: $t),*) => $imp($($arg),*));
        $crate::coll::coll_entry!(@one big $bc $ic $pc, ($($a: $t),*) => $imp($($arg),*));
    };
    (@one $w:ident $b:ident $i:ident $p:ident, ($($a:ident: $t:tt),*) => $imp:ident($($arg:expr),*)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $b($($a: $crate::coll::coll_ty!($w $t)),*) -> c_int {
            $(let $a = $crate::coll::coll_arg!($w $a $t);)*
            $imp($crate::coll::Mode::Blocking, $($arg),*)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $i($($a: $crate::coll::coll_ty!($w $t),)* request: *mut usize) -> c_int {
            $(let $a = $crate::coll::coll_arg!($w $a $t);)*
            $imp($crate::coll::Mode::Nonblocking(request), $($arg),*)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $p($($a: $crate::coll::coll_ty!($w $t),)* _info: usize, request: *mut usize) -> c_int {
            $(let $a = $crate::coll::coll_arg!($w $a $t);)*
            $imp($crate::coll::Mode::Persistent(request), $($arg),*)
        }
    };
}

/// An argument's type in the `int` or the `_c` (`big`) binding (see [`coll_entry!`]).
macro_rules! coll_ty {
    (int Count) => { c_int };
    (big Count) => { i64 };
    (int Counts) => { *mut c_int };
    (big Counts) => { *mut i64 };
    (int Displs) => { *mut c_int };
    ($w:ident Displs) => { *mut isize };
    ($w:ident Aints) => { *mut isize };
    ($w:ident Buf) => { *mut c_void };
    ($w:ident Handle) => { usize };
    ($w:ident Handles) => { *mut usize };
    ($w:ident $t:tt) => { $t };
}

/// An argument in the one form the collective's function takes (see [`coll_entry!`]).
macro_rules! coll_arg {
    ($w:ident $a:ident Count) => {
        $a as i64
    };
    (int $a:ident Displs) => {
        $a.cast_const()
    };
    ($w:ident $a:ident Displs) => {
        $a as *const i64
    };
    ($w:ident $a:ident Aints) => {
        $a as *const i64
    };
    ($w:ident $a:ident Counts) => {
        $a.cast_const()
    };
    ($w:ident $a:ident Handles) => {
        $a.cast_const()
    };
    ($w:ident $a:ident $t:tt) => {
        $a
    };
}
pub(crate) use {coll_arg, coll_entry, coll_ty};

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

/// The counts, displacements and datatype(s) of a `v` or `w` side as the application passed
/// them: one datatype handle for a `v` side, an array of them (the handle unused) for a `w` one.
pub(crate) type Spread<C, D> = (*const C, *const D, (usize, *const usize));

/// A `v` side: its arrays and its one datatype.
pub(crate) fn v_of<C, D>(counts: *const C, displs: *const D, dt: usize) -> Spread<C, D> {
    (counts, displs, (dt, std::ptr::null()))
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
    /// them) and, for `w`, of the datatypes array; otherwise every block is of the one datatype.
    pub(crate) unsafe fn read<C: Copy + Into<i64>, D: Copy + Into<i64>>(
        call: &str,
        names: [&str; 3],
        (counts, displs, types): Spread<C, D>,
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
                    self.displs[i] as isize * validate::datatype_committed(call, "datatype", dt)?.extent
                };
                let addr = (base as usize).wrapping_add_signed(off);
                buffer(call, what, addr as *const c_void, self.counts[i], dt)
            })
            .collect()
    }
}

// ----- barrier, bcast -----

fn barrier(mode: Mode, comm_h: usize) -> c_int {
    run(mode, "MPI_Barrier", comm_h, |d, _, at| d.barrier(at))
}

coll_entry!(@one int PMPI_Barrier PMPI_Ibarrier PMPI_Barrier_init, (comm: Handle) => barrier(comm));

fn bcast(mode: Mode, (buf, count, dt): Side, root: c_int, comm_h: usize) -> c_int {
    let call = "MPI_Bcast";
    run(mode, call, comm_h, |d, _, at| d.bcast(at, buffer(call, "", buf, count, dt), root))
}

coll_entry!(PMPI_Bcast PMPI_Ibcast PMPI_Bcast_init, PMPI_Bcast_c PMPI_Ibcast_c PMPI_Bcast_init_c,
    (buf: Buf, count: Count, dt: Handle, root: c_int, comm: Handle) => bcast((buf, count, dt), root, comm));

// ----- reductions -----

/// A reduction's arguments: send and receive buffers, count, datatype and operation handle.
type Vector = (*const c_void, *mut c_void, i64, usize, usize);

fn reduce(mode: Mode, (sbuf, rbuf, count, dt, oph): Vector, root: c_int, comm_h: usize) -> c_int {
    let call = "MPI_Reduce";
    run(mode, call, comm_h, |d, _, at| {
        let send = or_in_place(call, "send", sbuf, count, dt);
        let op = crate::ops::reducer(call, oph, dt);
        d.reduce(at, send, || buffer(call, "receive", rbuf, count, dt), op, root)
    })
}

coll_entry!(PMPI_Reduce PMPI_Ireduce PMPI_Reduce_init, PMPI_Reduce_c PMPI_Ireduce_c PMPI_Reduce_init_c,
    (sbuf: Buf, rbuf: Buf, count: Count, dt: Handle, op: Handle, root: c_int, comm: Handle)
    => reduce((sbuf, rbuf, count, dt, op), root, comm));

/// The reductions every process gets a result of: allreduce, scan and exscan.
#[derive(Clone, Copy)]
enum Whole {
    Allreduce,
    Scan,
    Exscan,
}

fn vector(mode: Mode, which: Whole, (sbuf, rbuf, count, dt, oph): Vector, comm_h: usize) -> c_int {
    let call = match which {
        Whole::Allreduce => "MPI_Allreduce",
        Whole::Scan => "MPI_Scan",
        Whole::Exscan => "MPI_Exscan",
    };
    run(mode, call, comm_h, |d, _, at| {
        let recv = buffer(call, "receive", rbuf, count, dt)?;
        let send = or_in_place(call, "send", sbuf, count, dt)?;
        let op = crate::ops::reducer(call, oph, dt)?;
        match which {
            Whole::Allreduce => d.allreduce(at, send, recv, op),
            Whole::Scan => d.scan(at, send, recv, op),
            Whole::Exscan => d.exscan(at, send, recv, op),
        }
    })
}

coll_entry!(PMPI_Allreduce PMPI_Iallreduce PMPI_Allreduce_init, PMPI_Allreduce_c PMPI_Iallreduce_c PMPI_Allreduce_init_c,
    (sbuf: Buf, rbuf: Buf, count: Count, dt: Handle, op: Handle, comm: Handle)
    => vector(Whole::Allreduce, (sbuf, rbuf, count, dt, op), comm));
coll_entry!(PMPI_Scan PMPI_Iscan PMPI_Scan_init, PMPI_Scan_c PMPI_Iscan_c PMPI_Scan_init_c,
    (sbuf: Buf, rbuf: Buf, count: Count, dt: Handle, op: Handle, comm: Handle)
    => vector(Whole::Scan, (sbuf, rbuf, count, dt, op), comm));
coll_entry!(PMPI_Exscan PMPI_Iexscan PMPI_Exscan_init, PMPI_Exscan_c PMPI_Iexscan_c PMPI_Exscan_init_c,
    (sbuf: Buf, rbuf: Buf, count: Count, dt: Handle, op: Handle, comm: Handle)
    => vector(Whole::Exscan, (sbuf, rbuf, count, dt, op), comm));

/// Reduce_scatter (`counts` per rank, read once the communicator is known) and
/// Reduce_scatter_block (`count` for every rank).
enum Cut<C> {
    Each(*const C),
    Block(i64),
}

/// Reduce-scatter, both forms: the whole vector (at `sbuf`, or at `rbuf` with `MPI_IN_PLACE`,
/// which the device then gets as the receive buffer) and this rank's block.
unsafe fn reduce_scatter<C: Copy + Into<i64>>(
    mode: Mode,
    cut: Cut<C>,
    (sbuf, rbuf, _, dt, oph): Vector,
    comm_h: usize,
) -> c_int {
    let call = match cut {
        Cut::Each(_) => "MPI_Reduce_scatter",
        Cut::Block(_) => "MPI_Reduce_scatter_block",
    };
    run(mode, call, comm_h, |d, cm, at| {
        let n = cm.core.size() as usize;
        let counts = match cut {
            // SAFETY: one count per process of the (local) group.
            Cut::Each(p) => unsafe { wide(call, "recvcounts", p, n)? },
            Cut::Block(c) => vec![c; n],
        };
        if let Some(bad) = counts.iter().find(|&&c| c < 0) {
            return Err(err!(MPI_ERR_COUNT, "{call}: recvcounts holds a negative count {bad}"));
        }
        let total: i64 = counts.iter().sum();
        let whole = buffer(call, "send", if in_place(sbuf) { rbuf } else { sbuf }, total, dt)?;
        let mine = buffer(call, "receive", rbuf, counts[cm.core.rank as usize], dt)?;
        let (send, recv) = if in_place(sbuf) { (None, whole) } else { (Some(whole), mine) };
        let op = crate::ops::reducer(call, oph, dt)?;
        match cut {
            Cut::Each(_) => {
                d.reduce_scatter(at, send, recv, &counts.iter().map(|&c| c as usize).collect::<Vec<_>>(), op)
            }
            Cut::Block(c) => d.reduce_scatter_block(at, send, recv, c as usize, op),
        }
    })
}

coll_entry!(PMPI_Reduce_scatter PMPI_Ireduce_scatter PMPI_Reduce_scatter_init,
    PMPI_Reduce_scatter_c PMPI_Ireduce_scatter_c PMPI_Reduce_scatter_init_c,
    (sbuf: Buf, rbuf: Buf, rc: Counts, dt: Handle, op: Handle, comm: Handle)
    => reduce_scatter(Cut::Each(rc), (sbuf, rbuf, 0, dt, op), comm));
coll_entry!(PMPI_Reduce_scatter_block PMPI_Ireduce_scatter_block PMPI_Reduce_scatter_block_init,
    PMPI_Reduce_scatter_block_c PMPI_Ireduce_scatter_block_c PMPI_Reduce_scatter_block_init_c,
    (sbuf: Buf, rbuf: Buf, rc: Count, dt: Handle, op: Handle, comm: Handle)
    => reduce_scatter(Cut::<i64>::Block(rc), (sbuf, rbuf, 0, dt, op), comm));

// The collectives of personal data (gather, scatter, allgather, alltoall and their v/w forms).
mod personal;
pub use personal::*;
