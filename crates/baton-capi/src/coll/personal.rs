//! Gather, scatter, allgather, alltoall and their `v` and `w` forms at the C boundary (with
//! the neighbourhood forms' shared decoding): per-rank arrays become buffers, the device does
//! the rest.

use super::{blocks, buffer, in_place, or_in_place, root_blocks, run, Mode, VSide};
use baton_core::device::coll::Neighborhood;
use baton_core::err;
use baton_core::error::Result;
use std::ffi::{c_int, c_void};

// ----- gather, scatter -----

/// Gather and (with `scatter`) scatter: the root's buffer holds a block of `count` elements
/// per process, the other one this process's block (`MPI_IN_PLACE` at the root).
#[allow(clippy::too_many_arguments)]
fn rooted(
    mode: Mode,
    scatter: bool,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    let call = if scatter { "MPI_Scatter" } else { "MPI_Gather" };
    run(mode, call, comm_h, |d, cm, at| {
        let n = cm.core.peer_size() as usize;
        if scatter {
            let recv = or_in_place(call, "receive", rbuf, rc, rt);
            return d.scatter(at, || blocks(call, "send", sbuf, sc, st, n), recv, root);
        }
        let send = or_in_place(call, "send", sbuf, sc, st);
        d.gather(at, send, || blocks(call, "receive", rbuf, rc, rt, n), root)
    })
}

coll_entry!(PMPI_Gather, PMPI_Igather, PMPI_Gather_init, rooted,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, root: c_int, comm: usize)
    => (false, sbuf, sc as i64, st, rbuf, rc as i64, rt, root, comm));
coll_entry!(PMPI_Gather_c, PMPI_Igather_c, PMPI_Gather_init_c, rooted,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, root: c_int, comm: usize)
    => (false, sbuf, sc, st, rbuf, rc, rt, root, comm));

coll_entry!(PMPI_Gatherv, PMPI_Igatherv, PMPI_Gatherv_init, gather_v,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, d: *mut c_int, rt: usize, root: c_int, comm: usize)
    => (Gv::Gatherv(root), (sbuf, sc as i64, st), rbuf, (rc.cast_const(), d.cast_const(), rt), comm));
coll_entry!(PMPI_Gatherv_c, PMPI_Igatherv_c, PMPI_Gatherv_init_c, gather_v,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: *mut i64, d: *mut isize, rt: usize, root: c_int, comm: usize)
    => (Gv::Gatherv(root), (sbuf, sc, st), rbuf, (rc.cast_const(), d as *const i64, rt), comm));

coll_entry!(PMPI_Scatter, PMPI_Iscatter, PMPI_Scatter_init, rooted,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, root: c_int, comm: usize)
    => (true, sbuf, sc as i64, st, rbuf, rc as i64, rt, root, comm));
coll_entry!(PMPI_Scatter_c, PMPI_Iscatter_c, PMPI_Scatter_init_c, rooted,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, root: c_int, comm: usize)
    => (true, sbuf, sc, st, rbuf, rc, rt, root, comm));

#[allow(clippy::too_many_arguments)]
unsafe fn scatterv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    scounts: *const C,
    displs: *const D,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Scatterv";
    run(mode, call, comm_h, |d, cm, at| {
        let n = cm.core.peer_size() as usize;
        let recv = or_in_place(call, "receive", rbuf, rc, rt);
        // SAFETY: the arrays hold an entry per process at the root, the only process where the
        // device asks for them.
        let send = || unsafe { root_blocks(call, ["sendcounts", "displs"], (scounts, displs, st), ("send", sbuf), n) };
        d.scatterv(at, send, recv, root)
    })
}

coll_entry!(PMPI_Scatterv, PMPI_Iscatterv, PMPI_Scatterv_init, scatterv,
    (sbuf: *mut c_void, sc: *mut c_int, d: *mut c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc, d, st, rbuf, rc as i64, rt, root, comm));
coll_entry!(PMPI_Scatterv_c, PMPI_Iscatterv_c, PMPI_Scatterv_init_c, scatterv,
    (sbuf: *mut c_void, sc: *mut i64, d: *mut isize, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc, d as *const i64, st, rbuf, rc, rt, root, comm));

// ----- allgather, alltoall -----

/// Allgather (a block of `sc` elements to every process) and (with `alltoall`) alltoall (a
/// block per process): the receive buffer holds a block of `rc` elements per process.
#[allow(clippy::too_many_arguments)]
fn every(
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
    let call = if alltoall { "MPI_Alltoall" } else { "MPI_Allgather" };
    run(mode, call, comm_h, |d, cm, at| {
        let n = cm.core.peer_size() as usize;
        let recv = blocks(call, "receive", rbuf, rc, rt, n)?;
        if alltoall {
            let send = if in_place(sbuf) { None } else { Some(blocks(call, "send", sbuf, sc, st, n)?) };
            return d.alltoall(at, send, recv);
        }
        d.allgather(at, or_in_place(call, "send", sbuf, sc, st)?, recv)
    })
}

coll_entry!(PMPI_Allgather, PMPI_Iallgather, PMPI_Allgather_init, every,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (false, sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Allgather_c, PMPI_Iallgather_c, PMPI_Allgather_init_c, every,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (false, sbuf, sc, st, rbuf, rc, rt, comm));

/// The collectives that receive a count and a displacement's worth per process (or source).
#[derive(Clone, Copy)]
pub(crate) enum Gv {
    /// With its root.
    Gatherv(c_int),
    Allgatherv,
    NeighborAllgatherv,
}

/// Gatherv, allgatherv and the neighbourhood allgatherv: the send buffer (`count` elements of
/// a datatype), and a receive buffer per process (`counts`, `displs` and a datatype; at the
/// root only for gatherv, per source for the neighbourhood form).
pub(crate) unsafe fn gather_v<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    gv: Gv,
    (sbuf, sc, st): (*const c_void, i64, usize),
    rbuf: *mut c_void,
    (counts, displs, rt): (*const C, *const D, usize),
    comm_h: usize,
) -> c_int {
    let call = match gv {
        Gv::Gatherv(_) => "MPI_Gatherv",
        Gv::Allgatherv => "MPI_Allgatherv",
        Gv::NeighborAllgatherv => "MPI_Neighbor_allgatherv",
    };
    run(mode, call, comm_h, |d, cm, at| {
        let n = cm.core.peer_size() as usize;
        // SAFETY (every use): the arrays hold an entry per process (per source for the
        // neighbourhood form), per the standard; gatherv's only at the root, the only process
        // where the device asks for them.
        let recv = |n| unsafe {
            VSide::read(call, ["recvcounts", "displs", ""], counts, displs, (rt, std::ptr::null()), false, n)?
                .bufs(call, "receive", rbuf)
        };
        match gv {
            Gv::Gatherv(root) => d.gatherv(at, or_in_place(call, "send", sbuf, sc, st), || recv(n), root),
            Gv::Allgatherv => {
                let recv = recv(n)?;
                d.allgatherv(at, or_in_place(call, "send", sbuf, sc, st)?, recv)
            }
            Gv::NeighborAllgatherv => {
                let nbh = Neighborhood::of(call, cm.topo.as_deref(), cm.core.rank)?;
                neighbor_in_place(call, sbuf)?;
                neighbor_in_place(call, rbuf)?;
                let send = buffer(call, "send", sbuf, sc, st)?;
                d.neighbor_allgatherv(at, &nbh, send, recv(nbh.sources())?)
            }
        }
    })
}

coll_entry!(PMPI_Allgatherv, PMPI_Iallgatherv, PMPI_Allgatherv_init, gather_v,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, d: *mut c_int, rt: usize, comm: usize)
    => (Gv::Allgatherv, (sbuf, sc as i64, st), rbuf, (rc.cast_const(), d.cast_const(), rt), comm));
coll_entry!(PMPI_Allgatherv_c, PMPI_Iallgatherv_c, PMPI_Allgatherv_init_c, gather_v,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: *mut i64, d: *mut isize, rt: usize, comm: usize)
    => (Gv::Allgatherv, (sbuf, sc, st), rbuf, (rc.cast_const(), d as *const i64, rt), comm));

// ----- the v and w forms of alltoall -----

coll_entry!(PMPI_Alltoall, PMPI_Ialltoall, PMPI_Alltoall_init, every,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (true, sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Alltoall_c, PMPI_Ialltoall_c, PMPI_Alltoall_init_c, every,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (true, sbuf, sc, st, rbuf, rc, rt, comm));

/// The collectives whose sides are a count, a displacement and (`w`) a datatype per process,
/// or per neighbour.
#[derive(Clone, Copy)]
pub(crate) enum Vw {
    Alltoallv,
    Alltoallw,
    NeighborAlltoallv,
    NeighborAlltoallw,
}

/// The neighbourhood collectives refuse `MPI_IN_PLACE`: a process's send and receive blocks go
/// to different processes.
pub(crate) fn neighbor_in_place(call: &str, p: *const c_void) -> Result<()> {
    if in_place(p) {
        return Err(err!(MPI_ERR_BUFFER, "{call}: MPI_IN_PLACE is not valid for a neighbourhood collective"));
    }
    Ok(())
}

/// Alltoallv, alltoallw and their neighbourhood forms: each side (counts, displacements and
/// the datatypes: one for a `v` side, an array for a `w` one) becomes a buffer per process or
/// neighbour (no send side with `MPI_IN_PLACE`).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoall_vw<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    vw: Vw,
    sbuf: *const c_void,
    (sc, sd, st): (*const C, *const D, (usize, *const usize)),
    rbuf: *mut c_void,
    (rc, rd, rt): (*const C, *const D, (usize, *const usize)),
    comm_h: usize,
) -> c_int {
    let (call, w) = match vw {
        Vw::Alltoallv => ("MPI_Alltoallv", false),
        Vw::Alltoallw => ("MPI_Alltoallw", true),
        Vw::NeighborAlltoallv => ("MPI_Neighbor_alltoallv", false),
        Vw::NeighborAlltoallw => ("MPI_Neighbor_alltoallw", true),
    };
    run(mode, call, comm_h, |d, cm, at| {
        let nbh = match vw {
            Vw::Alltoallv | Vw::Alltoallw => None,
            _ => Some(Neighborhood::of(call, cm.topo.as_deref(), cm.core.rank)?),
        };
        let n = cm.core.peer_size() as usize;
        let (outs, ins) = nbh.as_ref().map_or((n, n), |h| (h.destinations(), h.sources()));
        if nbh.is_some() {
            neighbor_in_place(call, sbuf)?;
            neighbor_in_place(call, rbuf)?;
        }
        // SAFETY: one entry per process (per destination on the send side, per source on the
        // receive side of a neighbourhood collective) in each array, per the standard.
        let recv = unsafe { VSide::read(call, ["recvcounts", "rdispls", "recvtypes"], rc, rd, rt, w, ins)? };
        let send = match in_place(sbuf) {
            true => None,
            // SAFETY: as above.
            false => Some(unsafe { VSide::read(call, ["sendcounts", "sdispls", "sendtypes"], sc, sd, st, w, outs)? }),
        };
        let recv = recv.bufs(call, "receive", rbuf)?;
        let send = match send {
            Some(v) => Some(v.bufs(call, "send", sbuf)?),
            None => None,
        };
        match (vw, nbh, send) {
            (Vw::Alltoallv, _, send) => d.alltoallv(at, send, recv),
            (Vw::Alltoallw, _, send) => d.alltoallw(at, send, recv),
            (Vw::NeighborAlltoallv, Some(h), Some(send)) => d.neighbor_alltoallv(at, &h, send, recv),
            (_, Some(h), Some(send)) => d.neighbor_alltoallw(at, &h, send, recv),
            _ => unreachable!("a neighbourhood collective has a neighbourhood and no MPI_IN_PLACE"),
        }
    })
}

coll_entry!(PMPI_Alltoallv, PMPI_Ialltoallv, PMPI_Alltoallv_init, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut c_int, rt: usize, comm: usize)
    => (Vw::Alltoallv, sbuf, (sc.cast_const(), sd.cast_const(), (st, std::ptr::null())),
        rbuf, (rc.cast_const(), rd.cast_const(), (rt, std::ptr::null())), comm));
coll_entry!(PMPI_Alltoallv_c, PMPI_Ialltoallv_c, PMPI_Alltoallv_init_c, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: usize, comm: usize)
    => (Vw::Alltoallv, sbuf, (sc.cast_const(), sd as *const i64, (st, std::ptr::null())),
        rbuf, (rc.cast_const(), rd as *const i64, (rt, std::ptr::null())), comm));
coll_entry!(PMPI_Alltoallw, PMPI_Ialltoallw, PMPI_Alltoallw_init, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut c_int, st: *mut usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut c_int, rt: *mut usize, comm: usize)
    => (Vw::Alltoallw, sbuf, (sc.cast_const(), sd.cast_const(), (0, st.cast_const())),
        rbuf, (rc.cast_const(), rd.cast_const(), (0, rt.cast_const())), comm));
coll_entry!(PMPI_Alltoallw_c, PMPI_Ialltoallw_c, PMPI_Alltoallw_init_c, alltoall_vw,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: *mut usize, comm: usize)
    => (Vw::Alltoallw, sbuf, (sc.cast_const(), sd as *const i64, (0, st.cast_const())),
        rbuf, (rc.cast_const(), rd as *const i64, (0, rt.cast_const())), comm));
