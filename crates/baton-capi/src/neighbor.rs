//! Neighbourhood collectives (`MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)`), in
//! their blocking, nonblocking and persistent forms and with `_c` variants.
//!
//! Each call turns its arguments into one round of the schedule engine
//! (`baton_core::topo::neighbor_exchange`): receives from the topology's sources, sends to its
//! destinations, in the order `baton_core::topo::Topology::neighbors` gives. Blocking calls run
//! the schedule, nonblocking ones start it in the background, persistent ones keep it for
//! `MPI_Start`, exactly as `coll.rs` does for the other collectives. `MPI_IN_PLACE` has no
//! meaning here (a process's send and receive blocks go to different processes) and is refused.

use crate::coll::{blocks, check_request, coll_entry, regions, submit, times, Buf, Mode, VSide};
use crate::errors::guard;
use crate::state::{lib, CommObj};
use baton_abi::consts as c;
use baton_core::coll::schedule::Schedule;
use baton_core::err;
use baton_core::error::Result;
use baton_core::topo::{neighbor_exchange, Neighbors, Topology};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

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
        check_request(call, mode)?;
        let nb = topo.neighbors(cm.core.rank);
        let s = build(&cm, &nb, matches!(*topo, Topology::Cart(_)))?;
        submit(l, &cm, comm_h, mode, s)
    })
}

fn no_in_place(call: &str, p: *const c_void) -> Result<()> {
    if p as usize == c::MPI_IN_PLACE {
        return Err(err!(MPI_ERR_BUFFER, "{call}: MPI_IN_PLACE is not valid for a neighbourhood collective"));
    }
    Ok(())
}

/// A checked buffer argument (`MPI_IN_PLACE` refused).
fn area(call: &str, what: &str, p: *const c_void, count: i64, dt: usize) -> Result<Buf> {
    no_in_place(call, p)?;
    Buf::new(call, what, p, count, dt)
}

/// The per-neighbour blocks of a `v`/`w` side as checked buffers (`MPI_IN_PLACE` refused).
fn areas(call: &str, what: &str, side: &VSide, base: *const c_void) -> Result<Vec<Buf>> {
    no_in_place(call, base)?;
    side.bufs(call, what, base)
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
        let send = area(call, "send", sbuf, sc, st)?;
        let block = area(call, "receive", rbuf, rc, rt)?;
        let recv = area(call, "receive", rbuf, times(call, "receive", rc, indeg)?, rt)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let src = send.region(&mut s);
        let dst = blocks(recv.region(&mut s), indeg, block.bytes());
        neighbor_exchange(&mut s, cart, nb, &vec![src; outdeg], &dst);
        Ok(s)
    })
}

coll_entry!(PMPI_Neighbor_allgather, PMPI_Ineighbor_allgather, PMPI_Neighbor_allgather_init, allgather,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Neighbor_allgather_c, PMPI_Ineighbor_allgather_c, PMPI_Neighbor_allgather_init_c, allgather,
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
        let send = area(call, "send", sbuf, sc, st)?;
        let names = ["recvcounts", "displs", ""];
        // SAFETY: one count and one displacement per source, per the standard.
        let side =
            unsafe { VSide::read(call, names, rcounts, displs, (rt, std::ptr::null()), false, nb.sources.len())? };
        let recv = areas(call, "receive", &side, rbuf)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let src = send.region(&mut s);
        let dst = regions(&mut s, &recv);
        neighbor_exchange(&mut s, cart, nb, &vec![src; outdeg], &dst);
        Ok(s)
    })
}

coll_entry!(PMPI_Neighbor_allgatherv, PMPI_Ineighbor_allgatherv, PMPI_Neighbor_allgatherv_init, allgatherv,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, d: *mut c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc, d, rt, comm));
coll_entry!(PMPI_Neighbor_allgatherv_c, PMPI_Ineighbor_allgatherv_c, PMPI_Neighbor_allgatherv_init_c, allgatherv,
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
        let sblock = area(call, "send", sbuf, sc, st)?;
        let rblock = area(call, "receive", rbuf, rc, rt)?;
        let send = area(call, "send", sbuf, times(call, "send", sc, outdeg)?, st)?;
        let recv = area(call, "receive", rbuf, times(call, "receive", rc, indeg)?, rt)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let src = blocks(send.region(&mut s), outdeg, sblock.bytes());
        let dst = blocks(recv.region(&mut s), indeg, rblock.bytes());
        neighbor_exchange(&mut s, cart, nb, &src, &dst);
        Ok(s)
    })
}

coll_entry!(PMPI_Neighbor_alltoall, PMPI_Ineighbor_alltoall, PMPI_Neighbor_alltoall_init, alltoall,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Neighbor_alltoall_c, PMPI_Ineighbor_alltoall_c, PMPI_Neighbor_alltoall_init_c, alltoall,
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
                VSide::read(call, ["sendcounts", "sdispls", "sendtypes"], sc, sd, st, w, nb.destinations.len())?,
                VSide::read(call, ["recvcounts", "rdispls", "recvtypes"], rc, rd, rt, w, nb.sources.len())?,
            )
        };
        let send = areas(call, "send", &snd, sbuf)?;
        let recv = areas(call, "receive", &rcv, rbuf)?;
        let mut s = Schedule::new(cm.core.clone(), call);
        let src = regions(&mut s, &send);
        let dst = regions(&mut s, &recv);
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

coll_entry!(PMPI_Neighbor_alltoallv, PMPI_Ineighbor_alltoallv, PMPI_Neighbor_alltoallv_init, alltoallv,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut c_int, rt: usize, comm: usize)
    => (sbuf, sc, sd, st, rbuf, rc, rd, rt, comm));
coll_entry!(PMPI_Neighbor_alltoallv_c, PMPI_Ineighbor_alltoallv_c, PMPI_Neighbor_alltoallv_init_c, alltoallv,
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

coll_entry!(PMPI_Neighbor_alltoallw, PMPI_Ineighbor_alltoallw, PMPI_Neighbor_alltoallw_init, alltoallw,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut isize, rt: *mut usize, comm: usize)
    => (sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm));
coll_entry!(PMPI_Neighbor_alltoallw_c, PMPI_Ineighbor_alltoallw_c, PMPI_Neighbor_alltoallw_init_c, alltoallw,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: *mut usize, comm: usize)
    => (sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm));
