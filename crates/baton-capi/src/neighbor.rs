//! Neighbourhood collectives (`MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)`), in
//! their blocking, nonblocking and persistent forms and with `_c` variants.
//!
//! Each call turns its arguments into one round of the schedule engine
//! (`baton_core::topo::neighbor_exchange`): receives from the topology's sources, sends to its
//! destinations, in the order `baton_core::topo::Topology::neighbors` gives. Blocking calls run
//! the schedule, nonblocking ones start it in the background, persistent ones keep it for
//! `MPI_Start`, exactly as `coll.rs` does for the other collectives. `MPI_IN_PLACE` has no
//! meaning here (a process's send and receive blocks go to different processes) and is refused.

use crate::coll::{Buf, Mode};
use crate::errors::guard;
use crate::p2p::dtype;
use crate::request::handle_of;
use crate::state::{lib, CommObj, PersistentOp, PersistentReq};
use baton_abi::consts as c;
use baton_core::coll::schedule::{Loc, Region, Schedule};
use baton_core::err;
use baton_core::error::Result;
use baton_core::topo::{neighbor_exchange, Neighbors, Topology};
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

/// Checks the communicator and its topology, builds the schedule with `build` (given the
/// communicator, its neighbours and whether they come from a grid) and runs it in the form
/// `mode` asks.
fn launch(
    mode: Mode,
    call: &'static str,
    comm_h: usize,
    build: impl FnOnce(&Arc<CommObj>, &Neighbors, bool) -> Result<Schedule>,
) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        let cm = l.comm_arc(call, comm_h)?;
        let topo = cm.topo.clone().ok_or_else(|| {
            err!(MPI_ERR_TOPOLOGY, "{call}: comm has no process topology (neighbourhood collectives need one)")
        })?;
        if let Mode::Nonblocking(r) | Mode::Persistent(r) = mode {
            crate::nonnull_mut(call, "request", r)?;
        }
        let nb = topo.neighbors(cm.core.rank);
        let mut s = build(&cm, &nb, matches!(*topo, Topology::Cart(_)))?;
        match mode {
            Mode::Blocking => s.run(&l.mpi),
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
    })
}

/// A checked buffer argument: `count` elements of `dt` at `addr`.
struct Area {
    addr: usize,
    count: usize,
    dt: usize,
}

impl Area {
    fn new(call: &str, what: &str, p: *const c_void, count: i64, dt: usize) -> Result<Area> {
        if p as usize == c::MPI_IN_PLACE {
            return Err(err!(MPI_ERR_BUFFER, "{call}: MPI_IN_PLACE is not valid for a neighbourhood collective"));
        }
        Buf::new(call, what, p, count, dt)?;
        Ok(Area { addr: p as usize, count: count as usize, dt })
    }

    /// The buffer as a region of schedule `s`.
    fn region(&self, call: &str, s: &mut Schedule) -> Result<Loc> {
        let lay = dtype(call, self.dt)?.clone();
        let (lo, hi) = lay.span(self.count);
        // SAFETY: MPI requires a collective's buffers to hold `count` elements of the datatype
        // and to stay valid and untouched by the application until the operation completes (for
        // persistent collectives, until the request is freed); (lo, hi) is exactly what they cover.
        let span = unsafe { UserBuf::new(self.addr.wrapping_add_signed(lo), (hi - lo) as usize) };
        let bytes = self.count * lay.size;
        Ok(s.region(Region::User { span, base_off: -lo, layout: lay }, bytes))
    }
}

/// `count * n` elements, checked for overflow.
fn times(call: &str, what: &str, count: i64, n: usize) -> Result<i64> {
    count.checked_mul(n as i64).ok_or_else(|| err!(MPI_ERR_COUNT, "{call}: {what} count {count} overflows"))
}

/// `n` consecutive blocks of `b` bytes of a window.
fn blocks(whole: Loc, n: usize, b: usize) -> Vec<Loc> {
    (0..n).map(|i| whole.at(i * b, b)).collect()
}

/// The `n` entries of an int, MPI_Count or MPI_Aint array argument, widened.
unsafe fn wide<T: Copy + Into<i64>>(call: &str, what: &str, p: *const T, n: usize) -> Result<Vec<i64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    crate::nonnull(call, what, p)?;
    // SAFETY: non-null; the standard has these arrays hold one entry per neighbour.
    Ok(unsafe { std::slice::from_raw_parts(p, n) }.iter().map(|&v| v.into()).collect())
}

/// One side of a `v`/`w` call: per-neighbour counts, displacements and datatypes;
/// displacements count extents of the datatype (`v`) or bytes (`w`).
struct Side {
    counts: Vec<i64>,
    displs: Vec<i64>,
    types: Vec<usize>,
    bytes_displs: bool,
}

impl Side {
    /// Reads `n` entries of each array; `types.1` non-null means one datatype per block (`w`).
    unsafe fn read<C: Copy + Into<i64>, D: Copy + Into<i64>>(
        call: &str,
        names: [&str; 3],
        counts: *const C,
        displs: *const D,
        types: (usize, *const usize),
        w: bool,
        n: usize,
    ) -> Result<Side> {
        // SAFETY: forwarded contract: one entry per neighbour in each array.
        let (counts, displs) = unsafe { (wide(call, names[0], counts, n)?, wide(call, names[1], displs, n)?) };
        if let Some((i, bad)) = counts.iter().enumerate().find(|(_, &v)| v < 0) {
            return Err(err!(MPI_ERR_COUNT, "{call}: {}[{i}] is negative ({bad})", names[0]));
        }
        let types = if w && n > 0 {
            crate::nonnull(call, names[2], types.1)?;
            // SAFETY: non-null, one datatype per neighbour.
            unsafe { std::slice::from_raw_parts(types.1, n) }.to_vec()
        } else {
            vec![types.0; n]
        };
        Ok(Side { counts, displs, types, bytes_displs: w })
    }

    fn areas(&self, call: &str, what: &str, base: *const c_void) -> Result<Vec<Area>> {
        if base as usize == c::MPI_IN_PLACE {
            return Err(err!(MPI_ERR_BUFFER, "{call}: MPI_IN_PLACE is not valid for a neighbourhood collective"));
        }
        (0..self.counts.len())
            .map(|i| {
                let dt = self.types[i];
                let off = if self.bytes_displs {
                    self.displs[i] as isize
                } else {
                    self.displs[i] as isize * dtype(call, dt)?.extent
                };
                let addr = (base as usize).wrapping_add_signed(off);
                Area::new(call, what, addr as *const c_void, self.counts[i], dt)
            })
            .collect()
    }
}

fn regions(call: &str, s: &mut Schedule, areas: &[Area]) -> Result<Vec<Loc>> {
    areas.iter().map(|a| a.region(call, s)).collect()
}

/// Generates the blocking, nonblocking and persistent entry points of one collective.
macro_rules! neighbor_entry {
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

// ----- allgather -----

#[allow(clippy::too_many_arguments)]
fn allgather(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Neighbor_allgather";
    launch(mode, call, comm_h, |cm, nb, cart| {
        let (indeg, outdeg) = (nb.sources.len(), nb.destinations.len());
        let send = Area::new(call, "send", sbuf, sc, st)?;
        let block = Area::new(call, "receive", rbuf, rc, rt)?;
        let recv = Area::new(call, "receive", rbuf, times(call, "receive", rc, indeg)?, rt)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let src = send.region(call, &mut s)?;
        let b = block.count * dtype(call, rt)?.size;
        let dst = blocks(recv.region(call, &mut s)?, indeg, b);
        neighbor_exchange(&mut s, cart, nb, &vec![src; outdeg], &dst);
        Ok(s)
    })
}

neighbor_entry!(PMPI_Neighbor_allgather, PMPI_Ineighbor_allgather, PMPI_Neighbor_allgather_init, allgather,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
neighbor_entry!(PMPI_Neighbor_allgather_c, PMPI_Ineighbor_allgather_c, PMPI_Neighbor_allgather_init_c, allgather,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (sbuf, sc, st, rbuf, rc, rt, comm));

#[allow(clippy::too_many_arguments)]
unsafe fn allgatherv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rcounts: *const C,
    displs: *const D,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Neighbor_allgatherv";
    launch(mode, call, comm_h, |cm, nb, cart| {
        let outdeg = nb.destinations.len();
        let send = Area::new(call, "send", sbuf, sc, st)?;
        // SAFETY: one count and one displacement per source, per the standard.
        let side = unsafe {
            Side::read(
                call,
                ["recvcounts", "displs", ""],
                rcounts,
                displs,
                (rt, std::ptr::null()),
                false,
                nb.sources.len(),
            )?
        };
        let recv = side.areas(call, "receive", rbuf)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let src = send.region(call, &mut s)?;
        let dst = regions(call, &mut s, &recv)?;
        neighbor_exchange(&mut s, cart, nb, &vec![src; outdeg], &dst);
        Ok(s)
    })
}

neighbor_entry!(PMPI_Neighbor_allgatherv, PMPI_Ineighbor_allgatherv, PMPI_Neighbor_allgatherv_init, allgatherv,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, d: *mut c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc, d, rt, comm));
neighbor_entry!(PMPI_Neighbor_allgatherv_c, PMPI_Ineighbor_allgatherv_c, PMPI_Neighbor_allgatherv_init_c, allgatherv,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: *mut i64, d: *mut isize, rt: usize, comm: usize)
    => (sbuf, sc, st, rbuf, rc, d as *const i64, rt, comm));

// ----- alltoall -----

#[allow(clippy::too_many_arguments)]
fn alltoall(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Neighbor_alltoall";
    launch(mode, call, comm_h, |cm, nb, cart| {
        let (indeg, outdeg) = (nb.sources.len(), nb.destinations.len());
        let sblock = Area::new(call, "send", sbuf, sc, st)?;
        let rblock = Area::new(call, "receive", rbuf, rc, rt)?;
        let send = Area::new(call, "send", sbuf, times(call, "send", sc, outdeg)?, st)?;
        let recv = Area::new(call, "receive", rbuf, times(call, "receive", rc, indeg)?, rt)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let sb = sblock.count * dtype(call, st)?.size;
        let rb = rblock.count * dtype(call, rt)?.size;
        let src = blocks(send.region(call, &mut s)?, outdeg, sb);
        let dst = blocks(recv.region(call, &mut s)?, indeg, rb);
        neighbor_exchange(&mut s, cart, nb, &src, &dst);
        Ok(s)
    })
}

neighbor_entry!(PMPI_Neighbor_alltoall, PMPI_Ineighbor_alltoall, PMPI_Neighbor_alltoall_init, alltoall,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
neighbor_entry!(PMPI_Neighbor_alltoall_c, PMPI_Ineighbor_alltoall_c, PMPI_Neighbor_alltoall_init_c, alltoall,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (sbuf, sc, st, rbuf, rc, rt, comm));

/// Alltoallv and alltoallw: both sides read, then one block per neighbour.
#[allow(clippy::too_many_arguments)]
unsafe fn alltoall_vw<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    call: &'static str,
    w: bool,
    sbuf: *const c_void,
    (sc, sd, st): (*const C, *const D, (usize, *const usize)),
    rbuf: *mut c_void,
    (rc, rd, rt): (*const C, *const D, (usize, *const usize)),
    comm_h: usize,
) -> c_int {
    launch(mode, call, comm_h, |cm, nb, cart| {
        // SAFETY: one count, displacement (and datatype for w) per destination and per source,
        // per the standard.
        let (snd, rcv) = unsafe {
            (
                Side::read(call, ["sendcounts", "sdispls", "sendtypes"], sc, sd, st, w, nb.destinations.len())?,
                Side::read(call, ["recvcounts", "rdispls", "recvtypes"], rc, rd, rt, w, nb.sources.len())?,
            )
        };
        let send = snd.areas(call, "send", sbuf)?;
        let recv = rcv.areas(call, "receive", rbuf)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let src = regions(call, &mut s, &send)?;
        let dst = regions(call, &mut s, &recv)?;
        neighbor_exchange(&mut s, cart, nb, &src, &dst);
        Ok(s)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    sc: *const C,
    sd: *const D,
    st: usize,
    rbuf: *mut c_void,
    rc: *const C,
    rd: *const D,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let none = std::ptr::null();
    // SAFETY: forwarded array contracts.
    unsafe {
        alltoall_vw(
            mode,
            "MPI_Neighbor_alltoallv",
            false,
            sbuf,
            (sc, sd, (st, none)),
            rbuf,
            (rc, rd, (rt, none)),
            comm_h,
        )
    }
}

neighbor_entry!(PMPI_Neighbor_alltoallv, PMPI_Ineighbor_alltoallv, PMPI_Neighbor_alltoallv_init, alltoallv,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut c_int, rt: usize, comm: usize)
    => (sbuf, sc, sd, st, rbuf, rc, rd, rt, comm));
neighbor_entry!(PMPI_Neighbor_alltoallv_c, PMPI_Ineighbor_alltoallv_c, PMPI_Neighbor_alltoallv_init_c, alltoallv,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: usize, comm: usize)
    => (sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm));

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw<C: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    sc: *const C,
    sd: *const i64,
    st: *const usize,
    rbuf: *mut c_void,
    rc: *const C,
    rd: *const i64,
    rt: *const usize,
    comm_h: usize,
) -> c_int {
    // SAFETY: forwarded array contracts.
    unsafe {
        alltoall_vw(mode, "MPI_Neighbor_alltoallw", true, sbuf, (sc, sd, (0, st)), rbuf, (rc, rd, (0, rt)), comm_h)
    }
}

neighbor_entry!(PMPI_Neighbor_alltoallw, PMPI_Ineighbor_alltoallw, PMPI_Neighbor_alltoallw_init, alltoallw,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut isize, rt: *mut usize, comm: usize)
    => (sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm));
neighbor_entry!(PMPI_Neighbor_alltoallw_c, PMPI_Ineighbor_alltoallw_c, PMPI_Neighbor_alltoallw_init_c, alltoallw,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: *mut usize, comm: usize)
    => (sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm));
