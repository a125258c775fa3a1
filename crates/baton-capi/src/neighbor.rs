//! Neighbourhood collectives (`MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)`), in
//! their blocking, nonblocking and persistent forms and with `_c` variants: the communicator's
//! neighbourhood (`baton_core::device::coll::Neighborhood`) sizes the per-neighbour arguments,
//! which become buffers for the device entry (`Device::neighbor_*`). `MPI_IN_PLACE` has no
//! meaning here (a process's send and receive blocks go to different processes) and is refused.

use crate::coll::{blocks, buffer, coll_entry, run, Mode, VSide};
use baton_abi::consts as c;
use baton_core::device::coll::{Call, Neighborhood};
use baton_core::device::{Buffer, Device, Started};
use baton_core::err;
use baton_core::error::Result;
use std::ffi::{c_int, c_void};

/// Looks up the communicator's neighbourhood and lets `f` decode the arguments and call the
/// device.
fn launch(
    mode: Mode,
    call: &'static str,
    comm_h: usize,
    f: impl FnOnce(&Device, Call, &Neighborhood) -> Result<Started>,
) -> c_int {
    run(mode, call, comm_h, |d, cm, at| f(d, at, &Neighborhood::of(call, cm.topo.as_deref(), cm.core.rank)?))
}

fn no_in_place(call: &str, p: *const c_void) -> Result<()> {
    if p as usize == c::MPI_IN_PLACE {
        return Err(err!(MPI_ERR_BUFFER, "{call}: MPI_IN_PLACE is not valid for a neighbourhood collective"));
    }
    Ok(())
}

/// A buffer argument (`MPI_IN_PLACE` refused).
fn area(call: &str, what: &str, p: *const c_void, count: i64, dt: usize) -> Result<Buffer> {
    no_in_place(call, p)?;
    buffer(call, what, p, count, dt)
}

/// A buffer argument of `n` blocks of `count` elements (`MPI_IN_PLACE` refused).
fn block_area(call: &str, what: &str, p: *const c_void, count: i64, dt: usize, n: usize) -> Result<Buffer> {
    no_in_place(call, p)?;
    blocks(call, what, p, count, dt, n)
}

/// The per-neighbour blocks of a `v`/`w` side as buffers (`MPI_IN_PLACE` refused).
fn areas(call: &str, what: &str, side: &VSide, base: *const c_void) -> Result<Vec<Buffer>> {
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
    launch(mode, call, comm_h, |d, at, nbh| {
        let send = area(call, "send", sbuf, sc, st)?;
        let recv = block_area(call, "receive", rbuf, rc, rt, nbh.sources())?;
        d.neighbor_allgather(at, nbh, send, recv)
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
    launch(mode, call, comm_h, |d, at, nbh| {
        let send = area(call, "send", sbuf, sc, st)?;
        let names = ["recvcounts", "displs", ""];
        // SAFETY: one count and one displacement per source, per the standard.
        let side = unsafe { VSide::read(call, names, rcounts, displs, (rt, std::ptr::null()), false, nbh.sources())? };
        d.neighbor_allgatherv(at, nbh, send, areas(call, "receive", &side, rbuf)?)
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
    launch(mode, call, comm_h, |d, at, nbh| {
        let send = block_area(call, "send", sbuf, sc, st, nbh.destinations())?;
        let recv = block_area(call, "receive", rbuf, rc, rt, nbh.sources())?;
        d.neighbor_alltoall(at, nbh, send, recv)
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
    launch(mode, call, comm_h, |d, at, nbh| {
        // SAFETY: one count, displacement (and datatype for w) per destination and per source,
        // per the standard.
        let (snd, rcv) = unsafe {
            (
                VSide::read(call, ["sendcounts", "sdispls", "sendtypes"], sc, sd, st, w, nbh.destinations())?,
                VSide::read(call, ["recvcounts", "rdispls", "recvtypes"], rc, rd, rt, w, nbh.sources())?,
            )
        };
        let send = areas(call, "send", &snd, sbuf)?;
        let recv = areas(call, "receive", &rcv, rbuf)?;
        match w {
            false => d.neighbor_alltoallv(at, nbh, send, recv),
            true => d.neighbor_alltoallw(at, nbh, send, recv),
        }
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
