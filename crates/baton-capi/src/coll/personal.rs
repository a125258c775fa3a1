//! Gather, scatter, allgather, alltoall and their `v` and `w` forms at the C boundary, with the
//! neighbourhood collectives' decoding (their entry points are in `neighbor.rs`): per-rank
//! (per-neighbour) arrays become buffers, the device does the rest. Each family is one function
//! over an enum of its members, so that gather and scatter, or a collective and its
//! neighbourhood form, share their decoding.

use super::{blocks, buffer, in_place, or_in_place, run, v_of, Mode, Side, Spread, VSide};
use baton_core::device::coll::Neighborhood;
use baton_core::err;
use baton_core::error::Result;
use std::ffi::{c_int, c_void};

// ----- gather, scatter -----

/// Gather and (with `scatter`) scatter: the root's buffer holds a block of `count` elements
/// per process, the other one this process's block (`MPI_IN_PLACE` at the root).
fn rooted(mode: Mode, scatter: bool, (sbuf, sc, st): Side, (rbuf, rc, rt): Side, root: c_int, comm_h: usize) -> c_int {
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

coll_entry!(PMPI_Gather PMPI_Igather PMPI_Gather_init, PMPI_Gather_c PMPI_Igather_c PMPI_Gather_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Count, rt: Handle, root: c_int, comm: Handle)
    => rooted(false, (sbuf, sc, st), (rbuf, rc, rt), root, comm));
coll_entry!(PMPI_Scatter PMPI_Iscatter PMPI_Scatter_init, PMPI_Scatter_c PMPI_Iscatter_c PMPI_Scatter_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Count, rt: Handle, root: c_int, comm: Handle)
    => rooted(true, (sbuf, sc, st), (rbuf, rc, rt), root, comm));

/// Scatterv: the root's blocks (`sendcounts`, `displs`, read at the root only, where the device
/// asks for them) and this process's receive buffer.
unsafe fn scatterv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    (sbuf, spread): (*const c_void, Spread<C, D>),
    (rbuf, rc, rt): Side,
    root: c_int,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Scatterv";
    run(mode, call, comm_h, |d, cm, at| {
        let n = cm.core.peer_size() as usize;
        let recv = or_in_place(call, "receive", rbuf, rc, rt);
        // SAFETY: the arrays hold an entry per process at the root, the only process where the
        // device asks for them.
        let send =
            || unsafe { VSide::read(call, ["sendcounts", "displs", ""], spread, false, n)?.bufs(call, "send", sbuf) };
        d.scatterv(at, send, recv, root)
    })
}

coll_entry!(PMPI_Scatterv PMPI_Iscatterv PMPI_Scatterv_init, PMPI_Scatterv_c PMPI_Iscatterv_c PMPI_Scatterv_init_c,
    (sbuf: Buf, sc: Counts, d: Displs, st: Handle, rbuf: Buf, rc: Count, rt: Handle, root: c_int, comm: Handle)
    => scatterv((sbuf, v_of(sc, d, st)), (rbuf, rc, rt), root, comm));

// ----- allgather, alltoall (and their neighbourhood forms) -----

/// The collectives whose sides are equal blocks: one block sent to every process (allgather)
/// or a block per process (alltoall), a block received from each; per neighbour for the
/// neighbourhood forms.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Even {
    Allgather,
    Alltoall,
    NeighborAllgather,
    NeighborAlltoall,
}

/// Allgather, alltoall and their neighbourhood forms: the receive buffer holds a block of `rc`
/// elements per process (per source), the send buffer one block or (alltoall) a block per
/// process (per destination).
pub(crate) fn every(mode: Mode, which: Even, (sbuf, sc, st): Side, (rbuf, rc, rt): Side, comm_h: usize) -> c_int {
    let call = match which {
        Even::Allgather => "MPI_Allgather",
        Even::Alltoall => "MPI_Alltoall",
        Even::NeighborAllgather => "MPI_Neighbor_allgather",
        Even::NeighborAlltoall => "MPI_Neighbor_alltoall",
    };
    run(mode, call, comm_h, |d, cm, at| {
        let n = cm.core.peer_size() as usize;
        if let Even::Allgather | Even::Alltoall = which {
            let recv = blocks(call, "receive", rbuf, rc, rt, n)?;
            if which == Even::Alltoall {
                let send = if in_place(sbuf) { None } else { Some(blocks(call, "send", sbuf, sc, st, n)?) };
                return d.alltoall(at, send, recv);
            }
            return d.allgather(at, or_in_place(call, "send", sbuf, sc, st)?, recv);
        }
        let nbh = neighborhood(call, cm, sbuf, rbuf)?;
        let recv = blocks(call, "receive", rbuf, rc, rt, nbh.sources())?;
        if which == Even::NeighborAlltoall {
            let send = blocks(call, "send", sbuf, sc, st, nbh.destinations())?;
            return d.neighbor_alltoall(at, &nbh, send, recv);
        }
        d.neighbor_allgather(at, &nbh, buffer(call, "send", sbuf, sc, st)?, recv)
    })
}

coll_entry!(PMPI_Allgather PMPI_Iallgather PMPI_Allgather_init, PMPI_Allgather_c PMPI_Iallgather_c PMPI_Allgather_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Count, rt: Handle, comm: Handle)
    => every(Even::Allgather, (sbuf, sc, st), (rbuf, rc, rt), comm));
coll_entry!(PMPI_Alltoall PMPI_Ialltoall PMPI_Alltoall_init, PMPI_Alltoall_c PMPI_Ialltoall_c PMPI_Alltoall_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Count, rt: Handle, comm: Handle)
    => every(Even::Alltoall, (sbuf, sc, st), (rbuf, rc, rt), comm));

/// A neighbourhood collective's communicator's neighbours; its buffers must not be
/// `MPI_IN_PLACE` (a process's send and receive blocks go to different processes).
fn neighborhood(
    call: &str,
    cm: &crate::state::CommObj,
    sbuf: *const c_void,
    rbuf: *const c_void,
) -> Result<Neighborhood> {
    let nbh = Neighborhood::of(call, cm.topo.as_deref(), cm.core.rank)?;
    if in_place(sbuf) || in_place(rbuf) {
        return Err(err!(MPI_ERR_BUFFER, "{call}: MPI_IN_PLACE is not valid for a neighbourhood collective"));
    }
    Ok(nbh)
}

// ----- the v and w forms -----

/// The collectives that receive a count and a displacement's worth per process (or source).
#[derive(Clone, Copy)]
pub(crate) enum Gv {
    /// With its root.
    Gatherv(c_int),
    Allgatherv,
    NeighborAllgatherv,
}

/// Gatherv, allgatherv and the neighbourhood allgatherv: the send buffer, and a receive buffer
/// per process (at the root only for gatherv, per source for the neighbourhood form).
pub(crate) unsafe fn gather_v<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    gv: Gv,
    (sbuf, sc, st): Side,
    (rbuf, spread): (*const c_void, Spread<C, D>),
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
            VSide::read(call, ["recvcounts", "displs", ""], spread, false, n)?.bufs(call, "receive", rbuf)
        };
        match gv {
            Gv::Gatherv(root) => d.gatherv(at, or_in_place(call, "send", sbuf, sc, st), || recv(n), root),
            Gv::Allgatherv => {
                let recv = recv(n)?;
                d.allgatherv(at, or_in_place(call, "send", sbuf, sc, st)?, recv)
            }
            Gv::NeighborAllgatherv => {
                let nbh = neighborhood(call, cm, sbuf, rbuf)?;
                let send = buffer(call, "send", sbuf, sc, st)?;
                d.neighbor_allgatherv(at, &nbh, send, recv(nbh.sources())?)
            }
        }
    })
}

coll_entry!(PMPI_Gatherv PMPI_Igatherv PMPI_Gatherv_init, PMPI_Gatherv_c PMPI_Igatherv_c PMPI_Gatherv_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Counts, d: Displs, rt: Handle, root: c_int, comm: Handle)
    => gather_v(Gv::Gatherv(root), (sbuf, sc, st), (rbuf, v_of(rc, d, rt)), comm));
coll_entry!(PMPI_Allgatherv PMPI_Iallgatherv PMPI_Allgatherv_init, PMPI_Allgatherv_c PMPI_Iallgatherv_c PMPI_Allgatherv_init_c,
    (sbuf: Buf, sc: Count, st: Handle, rbuf: Buf, rc: Counts, d: Displs, rt: Handle, comm: Handle)
    => gather_v(Gv::Allgatherv, (sbuf, sc, st), (rbuf, v_of(rc, d, rt)), comm));

/// The collectives whose sides are a count, a displacement and (`w`) a datatype per process,
/// or per neighbour.
#[derive(Clone, Copy)]
pub(crate) enum Vw {
    Alltoallv,
    Alltoallw,
    NeighborAlltoallv,
    NeighborAlltoallw,
}

/// Alltoallv, alltoallw and their neighbourhood forms: each side becomes a buffer per process
/// or neighbour (no send side with `MPI_IN_PLACE`).
pub(crate) unsafe fn alltoall_vw<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    vw: Vw,
    (sbuf, send): (*const c_void, Spread<C, D>),
    (rbuf, recv): (*const c_void, Spread<C, D>),
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
            _ => Some(neighborhood(call, cm, sbuf, rbuf)?),
        };
        let n = cm.core.peer_size() as usize;
        let (outs, ins) = nbh.as_ref().map_or((n, n), |h| (h.destinations(), h.sources()));
        // SAFETY: one entry per process (per destination on the send side, per source on the
        // receive side of a neighbourhood collective) in each array, per the standard.
        let recv = unsafe { VSide::read(call, ["recvcounts", "rdispls", "recvtypes"], recv, w, ins)? };
        let send = match in_place(sbuf) {
            true => None,
            // SAFETY: as above.
            false => Some(unsafe { VSide::read(call, ["sendcounts", "sdispls", "sendtypes"], send, w, outs)? }),
        };
        let recv = recv.bufs(call, "receive", rbuf)?;
        let send = send.map(|v| v.bufs(call, "send", sbuf)).transpose()?;
        match (vw, nbh, send) {
            (Vw::Alltoallv, _, send) => d.alltoallv(at, send, recv),
            (Vw::Alltoallw, _, send) => d.alltoallw(at, send, recv),
            (_, Some(h), Some(send)) => d.neighbor_alltoallvw(at, call, &h, send, recv),
            _ => unreachable!("a neighbourhood collective has a neighbourhood and no MPI_IN_PLACE"),
        }
    })
}

coll_entry!(PMPI_Alltoallv PMPI_Ialltoallv PMPI_Alltoallv_init, PMPI_Alltoallv_c PMPI_Ialltoallv_c PMPI_Alltoallv_init_c,
    (sbuf: Buf, sc: Counts, sd: Displs, st: Handle, rbuf: Buf, rc: Counts, rd: Displs, rt: Handle, comm: Handle)
    => alltoall_vw(Vw::Alltoallv, (sbuf, v_of(sc, sd, st)), (rbuf, v_of(rc, rd, rt)), comm));
coll_entry!(PMPI_Alltoallw PMPI_Ialltoallw PMPI_Alltoallw_init, PMPI_Alltoallw_c PMPI_Ialltoallw_c PMPI_Alltoallw_init_c,
    (sbuf: Buf, sc: Counts, sd: Displs, st: Handles, rbuf: Buf, rc: Counts, rd: Displs, rt: Handles, comm: Handle)
    => alltoall_vw(Vw::Alltoallw, (sbuf, (sc, sd, (0, st))), (rbuf, (rc, rd, (0, rt))), comm));
