//! Collectives at the C boundary: arguments checked and turned into a schedule
//! (`baton_core::coll`), which the blocking form runs, the nonblocking form starts in the
//! background and the persistent form keeps for `MPI_Start`.
//!
//! Each collective is one function taking a [`Mode`]; the `coll_entry!` macro generates its
//! blocking, `I…` and `…_init` entry points (and the `_c` ones) from that function.

use crate::errors::guard;
use crate::p2p::dtype;
use crate::request::handle_of;
use crate::state::{lib, lib_fast, CommObj, Lib, PersistentOp, PersistentReq};
use baton_abi::consts as c;
use baton_core::coll::algo::{self, Algo, Coll, Shape};
use baton_core::coll::inter::{self, Root};
use baton_core::coll::schedule::{Loc, Region, Schedule};
use baton_core::datatype::Layout;
use baton_core::error::{MpiError, Result};
use baton_core::shm_coll::{ShmColl, ShmKind};
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

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

/// A buffer argument: address, element count and datatype, checked.
pub(crate) struct Buf {
    addr: usize,
    count: usize,
    lay: Arc<Layout>,
}

impl Buf {
    pub(crate) fn new(call: &str, what: &str, p: *const c_void, count: i64, dt: usize) -> Result<Buf> {
        let lay: Arc<Layout> = dtype(call, dt)?.clone();
        if count < 0 {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {what} count {count} is negative")));
        }
        crate::p2p::check_buf(call, p as usize, count as usize, &lay)
            .map_err(|e| MpiError::new(e.class, format!("{} ({what} buffer)", e.msg)))?;
        count
            .checked_mul(lay.size as i64)
            .filter(|&b| b <= isize::MAX as i64)
            .ok_or_else(|| MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {what} count {count} overflows")))?;
        Ok(Buf { addr: p as usize, count: count as usize, lay })
    }

    pub(crate) fn bytes(&self) -> usize {
        self.count * self.lay.size
    }

    /// The buffer as a region of schedule `s`.
    pub(crate) fn region(&self, s: &mut Schedule) -> Loc {
        let (lo, hi) = self.lay.span(self.count);
        // SAFETY: MPI requires a collective's buffers to hold `count` elements of the datatype
        // and to stay valid and untouched by the application until the operation completes (for
        // persistent collectives, until the request is freed); (lo, hi) is exactly what they cover.
        let span = unsafe { UserBuf::new(self.addr.wrapping_add_signed(lo), (hi - lo) as usize) };
        s.region(Region::User { span, base_off: -lo, layout: self.lay.clone() }, self.bytes())
    }
}

/// `n` consecutive blocks of `b` bytes of a window.
pub(crate) fn blocks(whole: Loc, n: usize, b: usize) -> Vec<Loc> {
    (0..n).map(|i| whole.at(i * b, b)).collect()
}

/// `count * n` elements (a buffer of `n` blocks), checked for overflow.
pub(crate) fn times(call: &str, what: &str, count: i64, n: usize) -> Result<i64> {
    count
        .checked_mul(n as i64)
        .ok_or_else(|| MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {what} count {count} overflows")))
}

fn check_root(call: &str, cm: &CommObj, root: c_int) -> Result<()> {
    let n = cm.core.size();
    if !(0..n).contains(&root) {
        return Err(MpiError::new(
            c::MPI_ERR_ROOT,
            format!("{call}: root {root} is out of range for a communicator of size {n}"),
        ));
    }
    Ok(())
}

fn same_size(call: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!("{call}: the send buffer holds {got} bytes where the receive block holds {want} (type signatures differ)"),
        ));
    }
    Ok(())
}

fn in_place_at_root(call: &str) -> MpiError {
    MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: MPI_IN_PLACE is only valid at the root"))
}

/// What a rooted collective's `root` makes of this process on intercommunicator `cm`.
fn inter_root(call: &str, cm: &CommObj, root: c_int) -> Result<Root> {
    let n = cm.core.peer_size();
    match root {
        c::MPI_ROOT => Ok(Root::Me),
        c::MPI_PROC_NULL => Ok(Root::Idle),
        r if (0..n).contains(&r) => Ok(Root::Remote(r)),
        r => Err(MpiError::new(
            c::MPI_ERR_ROOT,
            format!("{call}: root {r} on an intercommunicator is neither MPI_ROOT, MPI_PROC_NULL nor a rank of the remote group (size {n})"),
        )),
    }
}

/// The standard has no `MPI_IN_PLACE` on intercommunicators.
fn no_in_place(call: &str, cm: &CommObj, what: &str, p: *const c_void) -> Result<()> {
    if cm.core.is_inter() && in_place(p) {
        return Err(MpiError::new(
            c::MPI_ERR_BUFFER,
            format!("{call}: MPI_IN_PLACE is not allowed on an intercommunicator ({what} buffer)"),
        ));
    }
    Ok(())
}

/// Checks the arguments, builds the schedule with `build` and runs it in the form `mode` asks.
fn launch(
    mode: Mode,
    call: &'static str,
    comm_h: usize,
    build: impl FnOnce(&Lib, &Arc<CommObj>) -> Result<Schedule>,
) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        let cm = match comm_h {
            c::MPI_COMM_WORLD => l.world.clone(),
            c::MPI_COMM_SELF => l.self_comm.clone(),
            h => l.comm_arc(call, h)?,
        };
        check_request(call, mode)?;
        let s = build(l, &cm)?;
        submit(l, &cm, comm_h, mode, s)
    })
}

/// A nonblocking or persistent call's request argument must be somewhere to write to.
pub(crate) fn check_request(call: &str, mode: Mode) -> Result<()> {
    match mode {
        Mode::Nonblocking(r) | Mode::Persistent(r) => crate::nonnull_mut(call, "request", r),
        Mode::Blocking => Ok(()),
    }
}

/// Runs schedule `s` in the form `mode` asks: to the end, in the background behind a new
/// request, or kept behind a persistent request (whose pointer [`check_request`] checked).
pub(crate) fn submit(l: &Lib, cm: &Arc<CommObj>, comm_h: usize, mode: Mode, mut s: Schedule) -> Result<()> {
    if !matches!(mode, Mode::Blocking) {
        s.nonblocking();
    }
    match mode {
        Mode::Blocking => s.run(l.mpi.runtime()),
        Mode::Nonblocking(r) => {
            let id = l.mpi.start_coll(Arc::new(Mutex::new(s)), comm_h);
            // SAFETY: checked non-null; the caller's request variable.
            unsafe { *r = handle_of(id) };
            Ok(())
        }
        Mode::Persistent(r) => {
            // A persistent collective keeps its schedule; the point-to-point part is unused.
            let op = PersistentOp {
                send: false,
                mode: crate::p2p::SendMode::Standard,
                buf: 0,
                count: 0,
                dtype: c::MPI_DATATYPE_NULL,
                peer: c::MPI_PROC_NULL,
                tag: 0,
                comm: cm.clone(),
            };
            let h = l.t().persistent.insert(PersistentReq {
                op: Box::new(op),
                coll: Some(Arc::new(Mutex::new(s))),
                active: None,
                comm: comm_h,
            });
            // SAFETY: checked non-null; the caller's request variable.
            unsafe { *r = h };
            Ok(())
        }
    }
}

fn sched(cm: &CommObj, call: &'static str) -> Schedule {
    Schedule::new(cm.core.clone(), call)
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

// ----- the shared-memory fast path -----

/// A blocking barrier, bcast, reduce, allreduce, allgather or alltoall is where a
/// communicator gets its shared-memory area, if it can have one (`Mpi::attach_shm`): every member calls it there.
/// An invalid handle is left to the call's own checks, which report it.
fn attach_shm(call: &str, mode: &Mode, comm_h: usize) {
    if !matches!(mode, Mode::Blocking) || comm_h == c::MPI_COMM_WORLD || comm_h == c::MPI_COMM_SELF {
        return;
    }
    let Some(l) = lib_fast() else { return };
    if let Ok(cm) = l.comm(call, comm_h) {
        l.mpi.attach_shm(&cm.core, l.thread_level == c::MPI_THREAD_MULTIPLE);
    }
}

/// A blocking call on contiguous data that would run a single shared-memory step skips the
/// schedule: `f` runs with the communicator's area when `coll` on `bytes` (with `shape`'s
/// other facts) chooses shared memory. None sends the call down the general path, which also
/// reports any argument error.
fn shm_fast(
    call: &str,
    comm_h: usize,
    coll: Coll,
    bytes: usize,
    tweak: impl FnOnce(Shape) -> Shape,
    f: impl FnOnce(&Lib, &CommObj, &ShmColl) -> Result<()>,
) -> Option<c_int> {
    let l = lib_fast()?;
    let cm = l.comm(call, comm_h).ok()?;
    let sh = cm.core.shm.get()?;
    if algo::choose(coll, tweak(Shape::of(&cm.core, bytes))).ok()? != Algo::Shm {
        return None;
    }
    Some(guard(comm_h, || f(l, &cm, sh)))
}

/// The shared-memory fast path of a blocking allgather or alltoall on contiguous buffers whose
/// blocks (`count` elements of the datatype) agree in size; None sends the call down the
/// general path.
fn blocks_fast(
    call: &str,
    mode: &Mode,
    comm_h: usize,
    send: (*const c_void, i64, usize),
    recv: (*mut c_void, i64, usize),
    coll: Coll,
) -> Option<c_int> {
    if !matches!(mode, Mode::Blocking) {
        return None;
    }
    let (sblk, rblk) = (contig_span(call, send.0, send.1, send.2)?, contig_span(call, recv.0, recv.1, recv.2)?);
    let b = rblk.len();
    if sblk.len() != b {
        return None;
    }
    shm_fast(
        call,
        comm_h,
        coll,
        b,
        |s| s,
        |l, cm, sh| {
            let n = cm.core.size() as usize;
            let kind = if coll == Coll::Alltoall { ShmKind::Alltoall } else { ShmKind::Allgather };
            let sent = sh.published(kind, b);
            // SAFETY: MPI requires the send buffer to hold `sent` bytes (a block per rank for
            // alltoall) and the receive buffer a block per rank, for the duration of this call.
            let (src, dst) = unsafe { (UserBuf::new(send.0 as usize, sent), UserBuf::new(recv.0 as usize, n * b)) };
            let seq = sh.run_blocking(l.mpi.runtime(), kind, Some(src.read(0, sent)));
            for r in 0..n {
                dst.write(r * b, sh.block(kind, r, seq, b));
            }
            sh.finish(seq);
            Ok(())
        },
    )
}

/// The bytes of `count` elements of contiguous datatype `dt` at `p`, when that is what they
/// are (None: non-contiguous, invalid or NULL; the general path takes those).
fn contig_span(call: &str, p: *const c_void, count: i64, dt: usize) -> Option<UserBuf> {
    let lay = dtype(call, dt).ok()?;
    let len = usize::try_from(count).ok()?.checked_mul(lay.size)?;
    if !lay.is_contiguous() || (p.is_null() && len > 0) || in_place(p) {
        return None;
    }
    // SAFETY: MPI requires the buffer to hold `count` elements of the datatype for the
    // duration of this blocking call.
    Some(unsafe { UserBuf::new(p as usize, len) })
}

// ----- barrier, bcast -----

fn barrier(mode: Mode, comm_h: usize) -> c_int {
    let call = "MPI_Barrier";
    attach_shm(call, &mode, comm_h);
    if let Mode::Blocking = mode {
        if let Some(rc) = shm_fast(
            call,
            comm_h,
            Coll::Barrier,
            0,
            |s| s,
            |l, _, sh| {
                let seq = sh.run_blocking(l.mpi.runtime(), ShmKind::Barrier, None);
                sh.finish(seq);
                Ok(())
            },
        ) {
            return rc;
        }
    }
    launch(mode, call, comm_h, |_, cm| {
        let mut s = sched(cm, call);
        if cm.core.is_inter() {
            inter::barrier(&mut s);
            return Ok(s);
        }
        let a = algo::choose(Coll::Barrier, Shape::of(&cm.core, 0))?;
        algo::barrier(&mut s, a);
        Ok(s)
    })
}

coll_entry!(PMPI_Barrier, PMPI_Ibarrier, PMPI_Barrier_init, barrier, (comm: usize) => (comm));

fn bcast(mode: Mode, buf: *mut c_void, count: i64, dt: usize, root: c_int, comm_h: usize) -> c_int {
    let call = "MPI_Bcast";
    attach_shm(call, &mode, comm_h);
    if let (Mode::Blocking, Some(b)) = (mode, contig_span(call, buf, count, dt)) {
        let fast = shm_fast(
            call,
            comm_h,
            Coll::Bcast,
            b.len(),
            |s| s,
            |l, cm, sh| {
                check_root(call, cm, root)?;
                let me = cm.core.rank == root;
                let seq = sh.run_blocking(
                    l.mpi.runtime(),
                    ShmKind::Bcast { root: root as usize },
                    me.then(|| b.read(0, b.len())),
                );
                if !me {
                    b.write(0, sh.data(root as usize, seq, b.len()));
                }
                sh.finish(seq);
                Ok(())
            },
        );
        if let Some(rc) = fast {
            return rc;
        }
    }
    launch(mode, call, comm_h, |_, cm| {
        if cm.core.is_inter() {
            let root = inter_root(call, cm, root)?;
            let b = match root {
                Root::Idle => None,
                _ => Some(Buf::new(call, "", buf, count, dt)?),
            };
            let mut s = sched(cm, call);
            if let Some(b) = b {
                let l = b.region(&mut s);
                inter::bcast(&mut s, root, l);
            }
            return Ok(s);
        }
        check_root(call, cm, root)?;
        let b = Buf::new(call, "", buf, count, dt)?;
        let a = algo::choose(Coll::Bcast, Shape::of(&cm.core, b.bytes()))?;
        let mut s = sched(cm, call);
        let l = b.region(&mut s);
        algo::bcast(&mut s, a, root, l);
        Ok(s)
    })
}

coll_entry!(PMPI_Bcast, PMPI_Ibcast, PMPI_Bcast_init, bcast,
    (buf: *mut c_void, count: c_int, dt: usize, root: c_int, comm: usize) => (buf, count as i64, dt, root, comm));
coll_entry!(PMPI_Bcast_c, PMPI_Ibcast_c, PMPI_Bcast_init_c, bcast,
    (buf: *mut c_void, count: i64, dt: usize, root: c_int, comm: usize) => (buf, count, dt, root, comm));

// ----- reductions -----

/// Reduce: `rbuf` matters at the root only.
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
    attach_shm(call, &mode, comm_h);
    if let Mode::Blocking = mode {
        let d = contig_span(call, rbuf, count, dt);
        let src = if in_place(sbuf) { d } else { contig_span(call, sbuf, count, dt) };
        let len = src.map(|b| b.len());
        if let (Some(src), Some(len), Ok(r)) = (src, len, crate::ops::reducer(call, oph, dt)) {
            let tweak = |s: Shape| Shape { commutative: r.commutative, elems: count as usize, ..s };
            let fast = shm_fast(call, comm_h, Coll::Reduce, len, tweak, |l, cm, sh| {
                check_root(call, cm, root)?;
                let me = cm.core.rank == root;
                // The root's receive buffer is checked only at the root, like the general path.
                let dst = match (me, d) {
                    (true, Some(d)) => Some(d),
                    (true, None) => {
                        return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: receive buffer is NULL")))
                    }
                    (false, _) if in_place(sbuf) => return Err(in_place_at_root(call)),
                    (false, _) => None,
                };
                let seq =
                    sh.run_blocking(l.mpi.runtime(), ShmKind::Reduce { root: root as usize }, Some(src.read(0, len)));
                if let Some(d) = dst {
                    d.modify(0, len, |acc| sh.combine(seq, &r, acc));
                }
                sh.finish(seq);
                Ok(())
            });
            if let Some(rc) = fast {
                return rc;
            }
        }
    }
    launch(mode, call, comm_h, |_, cm| {
        if cm.core.is_inter() {
            let root = inter_root(call, cm, root)?;
            let rb = if root == Root::Me { Some(Buf::new(call, "receive", rbuf, count, dt)?) } else { None };
            let sb = match root {
                Root::Remote(_) => {
                    no_in_place(call, cm, "send", sbuf)?;
                    Some(Buf::new(call, "send", sbuf, count, dt)?)
                }
                _ => None,
            };
            let r = if root == Root::Idle { None } else { Some(crate::ops::reducer(call, oph, dt)?) };
            let mut s = sched(cm, call);
            if let Some(r) = r {
                s.set_reducer(r);
            }
            let dst = rb.map(|b| b.region(&mut s));
            let src = sb.map(|b| b.region(&mut s));
            inter::reduce(&mut s, root, src, dst);
            return Ok(s);
        }
        check_root(call, cm, root)?;
        let is_root = cm.core.rank == root;
        if in_place(sbuf) && !is_root {
            return Err(in_place_at_root(call));
        }
        let rb = if is_root { Some(Buf::new(call, "receive", rbuf, count, dt)?) } else { None };
        let sb = if in_place(sbuf) { None } else { Some(Buf::new(call, "send", sbuf, count, dt)?) };
        let r = crate::ops::reducer(call, oph, dt)?;
        let shape = Shape { commutative: r.commutative, ..Shape::of(&cm.core, count as usize * dtype(call, dt)?.size) };
        let a = algo::choose(Coll::Reduce, shape)?;
        let mut s = sched(cm, call);
        s.set_reducer(r);
        let dst = rb.map(|b| b.region(&mut s));
        let src = match sb {
            Some(b) => b.region(&mut s),
            None => dst.expect("in place only at the root"),
        };
        algo::reduce(&mut s, a, root, src, dst);
        Ok(s)
    })
}

coll_entry!(PMPI_Reduce, PMPI_Ireduce, PMPI_Reduce_init, reduce,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: c_int, dt: usize, op: usize, root: c_int, comm: usize)
    => (sbuf, rbuf, count as i64, dt, op, root, comm));
coll_entry!(PMPI_Reduce_c, PMPI_Ireduce_c, PMPI_Reduce_init_c, reduce,
    (sbuf: *mut c_void, rbuf: *mut c_void, count: i64, dt: usize, op: usize, root: c_int, comm: usize)
    => (sbuf, rbuf, count, dt, op, root, comm));

/// The shared part of Allreduce, Scan and Exscan: send and receive windows and the reducer.
fn reduction_bufs(
    call: &'static str,
    cm: &CommObj,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    oph: usize,
) -> Result<(Schedule, Loc, Loc, Shape)> {
    no_in_place(call, cm, "send", sbuf)?;
    let rb = Buf::new(call, "receive", rbuf, count, dt)?;
    let sb = if in_place(sbuf) { None } else { Some(Buf::new(call, "send", sbuf, count, dt)?) };
    let r = crate::ops::reducer(call, oph, dt)?;
    let shape =
        Shape { commutative: r.commutative, elems: rb.bytes() / r.unit.max(1), ..Shape::of(&cm.core, rb.bytes()) };
    let mut s = sched(cm, call);
    s.set_reducer(r);
    let dst = rb.region(&mut s);
    let src = match sb {
        Some(b) => b.region(&mut s),
        None => dst,
    };
    Ok((s, src, dst, shape))
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
    let call = "MPI_Allreduce";
    attach_shm(call, &mode, comm_h);
    if let (Mode::Blocking, Some(d)) = (mode, contig_span(call, rbuf, count, dt)) {
        let src = if in_place(sbuf) { Some(None) } else { contig_span(call, sbuf, count, dt).map(Some) };
        if let (Some(src), Ok(r)) = (src, crate::ops::reducer(call, oph, dt)) {
            let tweak = |s: Shape| Shape { commutative: r.commutative, elems: count as usize, ..s };
            let fast = shm_fast(call, comm_h, Coll::Allreduce, d.len(), tweak, |l, _, sh| {
                // In place, the contribution is copied into the segment before the result is written.
                let seq = sh.run_blocking(l.mpi.runtime(), ShmKind::Allreduce, Some(src.unwrap_or(d).read(0, d.len())));
                d.modify(0, d.len(), |acc| sh.combine(seq, &r, acc));
                sh.finish(seq);
                Ok(())
            });
            if let Some(rc) = fast {
                return rc;
            }
        }
    }
    launch(mode, call, comm_h, |_, cm| {
        let (mut s, src, dst, shape) = reduction_bufs(call, cm, sbuf, rbuf, count, dt, oph)?;
        if cm.core.is_inter() {
            inter::allreduce(&mut s, src, dst);
            return Ok(s);
        }
        let a = algo::choose(Coll::Allreduce, shape)?;
        algo::allreduce(&mut s, a, src, dst);
        Ok(s)
    })
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
    let call = if exclusive { "MPI_Exscan" } else { "MPI_Scan" };
    launch(mode, call, comm_h, |_, cm| {
        // The standard defines no prefix reduction across two groups.
        crate::comm::require_intra(call, "comm", cm)?;
        let (mut s, src, dst, shape) = reduction_bufs(call, cm, sbuf, rbuf, count, dt, oph)?;
        let a = algo::choose(Coll::Scan, shape)?;
        algo::scan(&mut s, a, src, dst, exclusive);
        Ok(s)
    })
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

/// Reduce_scatter (`counts` per rank) and Reduce_scatter_block (`counts` None, `count` each).
#[allow(clippy::too_many_arguments)]
fn reduce_scatter(
    mode: Mode,
    call: &'static str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    counts: Option<Vec<i64>>,
    dt: usize,
    oph: usize,
    comm_h: usize,
) -> c_int {
    launch(mode, call, comm_h, |_, cm| {
        let (n, me) = (cm.core.size() as usize, cm.core.rank as usize);
        let counts = counts.unwrap_or_else(|| vec![count; n]);
        if let Some(bad) = counts.iter().find(|&&c| c < 0) {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: recvcounts holds a negative count {bad}")));
        }
        let total: i64 = counts.iter().sum();
        no_in_place(call, cm, "send", sbuf)?;
        let whole = Buf::new(call, "send", if in_place(sbuf) { rbuf } else { sbuf }, total, dt)?;
        let mine = Buf::new(call, "receive", rbuf, counts[me], dt)?;
        let r = crate::ops::reducer(call, oph, dt)?;
        let size = whole.lay.size;
        let shape = Shape {
            uniform: counts.iter().all(|&c| c == counts[0]),
            commutative: r.commutative,
            elems: total as usize,
            ..Shape::of(&cm.core, whole.bytes())
        };
        let a = algo::choose(Coll::ReduceScatter, shape)?;
        let mut s = sched(cm, call);
        s.set_reducer(r);
        let src = whole.region(&mut s);
        let dst = mine.region(&mut s);
        if cm.core.is_inter() {
            // Each group's result is the other group's vector, cut by this group's counts.
            let lens: Vec<usize> = counts.iter().map(|&c| c as usize * size).collect();
            inter::reduce_scatter(&mut s, src, &lens, dst);
            return Ok(s);
        }
        let mut at = 0;
        let bl: Vec<Loc> = counts
            .iter()
            .map(|&c| {
                let w = src.at(at, c as usize * size);
                at += c as usize * size;
                w
            })
            .collect();
        algo::reduce_scatter(&mut s, a, src, &bl, dst);
        Ok(s)
    })
}

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

/// Size of the communicator and this process's rank in it, for reading per-rank array
/// arguments before the call proper (None for an invalid handle, which the call then reports).
fn comm_info(comm_h: usize) -> Option<(usize, c_int)> {
    let l = lib("").ok()?;
    let core = match comm_h {
        c::MPI_COMM_WORLD => l.world.core.clone(),
        c::MPI_COMM_SELF => l.self_comm.core.clone(),
        h => l.comm_arc("", h).ok()?.core.clone(),
    };
    Some((core.size() as usize, core.rank))
}

fn comm_size(comm_h: usize) -> usize {
    comm_info(comm_h).map_or(0, |(n, _)| n)
}

/// The communicator behind `comm_h`, if valid (its errors are reported by the call proper).
fn comm_core(comm_h: usize) -> Option<Arc<baton_core::comm::Comm>> {
    let l = lib("").ok()?;
    Some(match comm_h {
        c::MPI_COMM_WORLD => l.world.core.clone(),
        c::MPI_COMM_SELF => l.self_comm.core.clone(),
        h => l.comm_arc("", h).ok()?.core.clone(),
    })
}

/// How many ranks per-peer array arguments cover: the remote group's size on an
/// intercommunicator, else the size.
fn comm_peers(comm_h: usize) -> usize {
    comm_core(comm_h).map_or(0, |c| c.peer_size() as usize)
}

unsafe fn reduce_scatter_v<C: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: *const C,
    dt: usize,
    op: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Reduce_scatter";
    // SAFETY: one count per process (an invalid communicator yields none and fails in launch).
    match unsafe { wide(call, "recvcounts", rcounts, comm_size(comm_h)) } {
        Ok(v) => reduce_scatter(mode, call, sbuf, rbuf, 0, Some(v), dt, op, comm_h),
        Err(e) => guard(comm_h, || Err(e)),
    }
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
    op: usize,
    comm_h: usize,
) -> c_int {
    reduce_scatter(mode, "MPI_Reduce_scatter_block", sbuf, rbuf, rc, None, dt, op, comm_h)
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
