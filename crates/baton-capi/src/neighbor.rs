//! Neighbourhood collectives (`MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)`), in
//! their blocking, nonblocking and persistent forms and with `_c` variants: the communicator's
//! neighbourhood (`baton_core::device::coll::Neighborhood`) sizes the per-neighbour arguments,
//! which become buffers for the device entry (`Device::neighbor_*`). `MPI_IN_PLACE` has no
//! meaning here (a process's send and receive blocks go to different processes) and is refused.
//! The decoding is the other collectives' (`coll::every`, `coll::gather_v`,
//! `coll::alltoall_vw`), so only the entry points are here.

use crate::coll::{alltoall_vw, coll_entry, every, gather_v, v_of, Even, Gv, Vw};
use std::ffi::{c_int, c_void};

coll_entry!(PMPI_Neighbor_allgather PMPI_Ineighbor_allgather PMPI_Neighbor_allgather_init,
    PMPI_Neighbor_allgather_c PMPI_Ineighbor_allgather_c PMPI_Neighbor_allgather_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Count, rt: Handle, comm: Handle)
    => every(Even::NeighborAllgather, (sbuf, sc, st), (rbuf, rc, rt), comm));
coll_entry!(PMPI_Neighbor_alltoall PMPI_Ineighbor_alltoall PMPI_Neighbor_alltoall_init,
    PMPI_Neighbor_alltoall_c PMPI_Ineighbor_alltoall_c PMPI_Neighbor_alltoall_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Count, rt: Handle, comm: Handle)
    => every(Even::NeighborAlltoall, (sbuf, sc, st), (rbuf, rc, rt), comm));
coll_entry!(PMPI_Neighbor_allgatherv PMPI_Ineighbor_allgatherv PMPI_Neighbor_allgatherv_init,
    PMPI_Neighbor_allgatherv_c PMPI_Ineighbor_allgatherv_c PMPI_Neighbor_allgatherv_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Counts, d: Displs, rt: Handle, comm: Handle)
    => gather_v(Gv::NeighborAllgatherv, (sbuf, sc, st), (rbuf, v_of(rc, d, rt)), comm));
coll_entry!(PMPI_Neighbor_alltoallv PMPI_Ineighbor_alltoallv PMPI_Neighbor_alltoallv_init,
    PMPI_Neighbor_alltoallv_c PMPI_Ineighbor_alltoallv_c PMPI_Neighbor_alltoallv_init_c,
    (sbuf: Buf, sc: Counts, sd: Displs, st: Handle, rbuf: Buf, rc: Counts, rd: Displs, rt: Handle, comm: Handle)
    => alltoall_vw(Vw::NeighborAlltoallv, (sbuf, v_of(sc, sd, st)), (rbuf, v_of(rc, rd, rt)), comm));
// MPI_Neighbor_alltoallw's displacements are MPI_Aint in both bindings.
coll_entry!(PMPI_Neighbor_alltoallw PMPI_Ineighbor_alltoallw PMPI_Neighbor_alltoallw_init,
    PMPI_Neighbor_alltoallw_c PMPI_Ineighbor_alltoallw_c PMPI_Neighbor_alltoallw_init_c,
    (sbuf: Buf, sc: Counts, sd: Aints, st: Handles, rbuf: Buf, rc: Counts, rd: Aints, rt: Handles, comm: Handle)
    => alltoall_vw(Vw::NeighborAlltoallw, (sbuf, (sc, sd, (0, st))), (rbuf, (rc, rd, (0, rt))), comm));
