//! Neighbourhood collectives (`MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)`), in
//! their blocking, nonblocking and persistent forms and with `_c` variants: the communicator's
//! neighbourhood (`baton_core::device::coll::Neighborhood`) sizes the per-neighbour arguments,
//! which become buffers for the device entry (`Device::neighbor_*`). `MPI_IN_PLACE` has no
//! meaning here (a process's send and receive blocks go to different processes) and is refused.
//! The `v` and `w` forms share their decoding with the other collectives' (`coll::gather_v`,
//! `coll::alltoall_vw`).

use crate::coll::{alltoall_vw, blocks, buffer, coll_entry, gather_v, neighbor_in_place, run, Gv, Mode, Vw};
use baton_core::device::coll::{Call, Neighborhood};
use baton_core::device::{Device, Started};
use baton_core::error::Result;
use std::ffi::{c_int, c_void};

/// Looks up the communicator's neighbourhood and lets `f` decode the arguments and call the
/// device; `sbuf` and `rbuf` must not be `MPI_IN_PLACE`.
fn launch(
    mode: Mode,
    call: &'static str,
    comm_h: usize,
    (sbuf, rbuf): (*const c_void, *const c_void),
    f: impl FnOnce(&Device, Call, &Neighborhood) -> Result<Started>,
) -> c_int {
    run(mode, call, comm_h, |d, cm, at| {
        let nbh = Neighborhood::of(call, cm.topo.as_deref(), cm.core.rank)?;
        neighbor_in_place(call, sbuf)?;
        neighbor_in_place(call, rbuf)?;
        f(d, at, &nbh)
    })
}

/// `MPI_Neighbor_allgather` (the same `sc` elements to every destination) and, with `alltoall`,
/// `MPI_Neighbor_alltoall` (a block of `sc` elements per destination).
#[allow(clippy::too_many_arguments)]
fn even(
    mode: Mode,
    alltoall: bool,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = if alltoall { "MPI_Neighbor_alltoall" } else { "MPI_Neighbor_allgather" };
    launch(mode, call, comm_h, (sbuf, rbuf), |d, at, nbh| {
        let recv = blocks(call, "receive", rbuf, rc, rt, nbh.sources())?;
        if alltoall {
            let send = blocks(call, "send", sbuf, sc, st, nbh.destinations())?;
            return d.neighbor_alltoall(at, nbh, send, recv);
        }
        d.neighbor_allgather(at, nbh, buffer(call, "send", sbuf, sc, st)?, recv)
    })
}

coll_entry!(PMPI_Neighbor_allgather, PMPI_Ineighbor_allgather, PMPI_Neighbor_allgather_init, even,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (false, sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Neighbor_allgather_c, PMPI_Ineighbor_allgather_c, PMPI_Neighbor_allgather_init_c, even,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (false, sbuf, sc, st, rbuf, rc, rt, comm));
coll_entry!(PMPI_Neighbor_alltoall, PMPI_Ineighbor_alltoall, PMPI_Neighbor_alltoall_init, even,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (true, sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Neighbor_alltoall_c, PMPI_Ineighbor_alltoall_c, PMPI_Neighbor_alltoall_init_c, even,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (true, sbuf, sc, st, rbuf, rc, rt, comm));

coll_entry!(PMPI_Neighbor_allgatherv, PMPI_Ineighbor_allgatherv, PMPI_Neighbor_allgatherv_init, gather_v,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, d: *mut c_int, rt: usize, comm: usize)
    => (Gv::NeighborAllgatherv, (sbuf, sc as i64, st), rbuf, (rc.cast_const(), d.cast_const(), rt), comm));
coll_entry!(PMPI_Neighbor_allgatherv_c, PMPI_Ineighbor_allgatherv_c, PMPI_Neighbor_allgatherv_init_c, gather_v,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: *mut i64, d: *mut isize, rt: usize, comm: usize)
    => (Gv::NeighborAllgatherv, (sbuf, sc, st), rbuf, (rc.cast_const(), d as *const i64, rt), comm));

coll_entry!(PMPI_Neighbor_alltoallv, PMPI_Ineighbor_alltoallv, PMPI_Neighbor_alltoallv_init, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut c_int, rt: usize, comm: usize)
    => (Vw::NeighborAlltoallv, sbuf, (sc.cast_const(), sd.cast_const(), (st, std::ptr::null())),
        rbuf, (rc.cast_const(), rd.cast_const(), (rt, std::ptr::null())), comm));
coll_entry!(PMPI_Neighbor_alltoallv_c, PMPI_Ineighbor_alltoallv_c, PMPI_Neighbor_alltoallv_init_c, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: usize, comm: usize)
    => (Vw::NeighborAlltoallv, sbuf, (sc.cast_const(), sd as *const i64, (st, std::ptr::null())),
        rbuf, (rc.cast_const(), rd as *const i64, (rt, std::ptr::null())), comm));
coll_entry!(PMPI_Neighbor_alltoallw, PMPI_Ineighbor_alltoallw, PMPI_Neighbor_alltoallw_init, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut isize, rt: *mut usize, comm: usize)
    => (Vw::NeighborAlltoallw, sbuf, (sc.cast_const(), sd as *const i64, (0, st.cast_const())),
        rbuf, (rc.cast_const(), rd as *const i64, (0, rt.cast_const())), comm));
coll_entry!(PMPI_Neighbor_alltoallw_c, PMPI_Ineighbor_alltoallw_c, PMPI_Neighbor_alltoallw_init_c, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: *mut usize, comm: usize)
    => (Vw::NeighborAlltoallw, sbuf, (sc.cast_const(), sd as *const i64, (0, st.cast_const())),
        rbuf, (rc.cast_const(), rd as *const i64, (0, rt.cast_const())), comm));
