//! Process topologies at the C boundary: constructors (which create communicators carrying a
//! `baton_core::topo::Topology`), queries and the mapping functions.
//!
//! `reorder` is accepted and ignored (see `baton_core::topo`): every process keeps its rank of
//! `comm_old`, so a grid or graph smaller than `comm_old` is made of its first ranks and the
//! others get `MPI_COMM_NULL`. The info arguments are checked and otherwise unused. Creating a
//! topology communicator costs no message, except `MPI_Dist_graph_create`, which allgathers the
//! edges so that each process learns its own in- and out-neighbours.
//!
//! Array lengths given by the application (`maxdims`, `maxindex`, `maxneighbors`, ...) bound
//! what is written. A grid query with fewer than `ndims` entries is an error (partial
//! coordinates mean nothing); a graph query writes the first entries that fit, as Open MPI
//! does (MPICH reports an error instead).
//!
//! The entry points are generated (`abi/bindings.tsv`): communicators, lengths and the arrays
//! whose length is an argument arrive checked; arrays sized by the topology are read here.

use crate::comm::register_topo;
use crate::info::Pairs;
use crate::state::{CommObj, CommRef, Lib};
use crate::validate::{Call, Out};
use crate::{nonnull, nonnull_mut};
use baton_abi::consts as c;
use baton_core::comm::{hash_words, Comm};
use baton_core::err;
use baton_core::error::Result;
use baton_core::group::Group;
use baton_core::topo::{dims_create as dims_create_core, Cart, DistGraph, EdgeShare, Graph, Topology, Weighting};
use std::ffi::c_int;
use std::sync::Arc;

/// Copies `n` ints from the application (none, and no pointer check, when `n` is 0).
unsafe fn read_ints(call: &str, arg: &str, p: *const c_int, n: usize) -> Result<Vec<i32>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    nonnull(call, arg, p)?;
    // SAFETY: non-null; the standard has the caller pass `n` ints here.
    Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// Writes `vals` to an application array (nothing, and no pointer check, when empty).
unsafe fn write_ints(call: &str, arg: &str, p: *mut c_int, vals: &[i32]) -> Result<()> {
    if vals.is_empty() {
        return Ok(());
    }
    nonnull_mut(call, arg, p)?;
    // SAFETY: non-null; the caller provides room for at least `vals.len()` ints (the callers
    // never write more than the length the application gave).
    unsafe { std::ptr::copy_nonoverlapping(vals.as_ptr(), p, vals.len()) };
    Ok(())
}

/// What a weights argument of length `n` says (`MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY`, an array,
/// or, with no edges, anything at all), and the weights when there are some.
unsafe fn weights_arg(call: &str, arg: &str, p: *const c_int, n: usize) -> Result<(Vec<i32>, Weighting)> {
    match p as usize {
        c::MPI_UNWEIGHTED => Ok((Vec::new(), Weighting::Unweighted)),
        c::MPI_WEIGHTS_EMPTY if n > 0 => {
            Err(err!(MPI_ERR_ARG, "{call}: {arg} is MPI_WEIGHTS_EMPTY but there are {n} edges to weigh"))
        }
        c::MPI_WEIGHTS_EMPTY => Ok((Vec::new(), Weighting::Weighted)),
        _ if n == 0 => Ok((Vec::new(), Weighting::Either)),
        // SAFETY: forwarded contract: `n` ints at `p` (checked non-null inside).
        _ => Ok((unsafe { read_ints(call, arg, p, n)? }, Weighting::Weighted)),
    }
}

fn topology<'a>(call: &str, cm: &'a CommObj) -> Result<&'a Topology> {
    cm.topo.as_deref().ok_or_else(|| err!(MPI_ERR_TOPOLOGY, "{call}: comm has no process topology"))
}

fn kind_name(t: &Topology) -> &'static str {
    match t {
        Topology::Cart(_) => "a Cartesian",
        Topology::Graph(_) => "a graph",
        Topology::DistGraph(_) => "a distributed graph",
    }
}

fn cart_of<'a>(call: &str, cm: &'a CommObj) -> Result<&'a Cart> {
    match topology(call, cm)? {
        Topology::Cart(g) => Ok(g),
        t => Err(err!(MPI_ERR_TOPOLOGY, "{call}: comm has {} topology, not a Cartesian one", kind_name(t))),
    }
}

fn graph_of<'a>(call: &str, cm: &'a CommObj) -> Result<&'a Graph> {
    match topology(call, cm)? {
        Topology::Graph(g) => Ok(g),
        t => Err(err!(MPI_ERR_TOPOLOGY, "{call}: comm has {} topology, not a graph one", kind_name(t))),
    }
}

fn dist_graph_of<'a>(call: &str, cm: &'a CommObj) -> Result<&'a DistGraph> {
    match topology(call, cm)? {
        Topology::DistGraph(g) => Ok(g),
        t => Err(err!(MPI_ERR_TOPOLOGY, "{call}: comm has {} topology, not a distributed graph one", kind_name(t))),
    }
}

/// Discriminators of the derived context ids, one per constructor.
const DISC_CART: u64 = u64::from_le_bytes(*b"cart\0\0\0\0");
const DISC_CART_SUB: u64 = u64::from_le_bytes(*b"cartsub\0");
const DISC_GRAPH: u64 = u64::from_le_bytes(*b"graph\0\0\0");
const DISC_DIST_GRAPH: u64 = u64::from_le_bytes(*b"distgrph");

/// The communicator of the first `n` ranks of `parent` (ranks kept) carrying `topo`, or
/// `MPI_COMM_NULL` for the ranks left out.
fn create_first(l: &Lib, parent: &CommObj, n: i32, disc: u64, topo: Topology) -> usize {
    // Left-out ranks derive too, so that every member's derivation counter stays in step.
    let ctx = parent.core.derive_ctx(hash_words(&[disc, n as u64]));
    let me = parent.core.rank;
    if me >= n {
        return c::MPI_COMM_NULL;
    }
    let group = if n == parent.core.size() {
        parent.core.group.clone()
    } else {
        Arc::new(Group::new(parent.core.group.procs[..n as usize].to_vec()))
    };
    register_topo(l, parent, Comm::new(ctx, group, me), Some(Arc::new(topo)))
}

// ----- Cartesian -----

pub(crate) fn dims_create(cx: Call, nnodes: c_int, ndims: usize, dims: *mut c_int) -> Result<()> {
    // SAFETY: `dims` holds `ndims` ints (in/out), per the standard.
    let given = unsafe { read_ints(cx.name, "dims", dims, ndims)? };
    let filled = dims_create_core(nnodes, &given)?;
    // SAFETY: same array, same length.
    unsafe { write_ints(cx.name, "dims", dims, &filled) }
}

pub(crate) fn cart_create(
    cx: Call,
    l: &Lib,
    comm_old: CommRef,
    _ndims: usize,
    dims: &[c_int],
    periods: &[c_int],
    _reorder: c_int,
    comm_cart: Out<usize>,
) -> Result<()> {
    let periods: Vec<bool> = periods.iter().map(|&p| p != 0).collect();
    let cart = Cart::new(cx.name, dims, &periods, comm_old.core.size())?;
    let disc = hash_words(&[DISC_CART, hash_words(&dims.iter().map(|&d| d as u64).collect::<Vec<_>>())]);
    comm_cart.put(create_first(l, &comm_old, cart.size(), disc, Topology::Cart(cart)));
    Ok(())
}

pub(crate) fn cart_map(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    _ndims: usize,
    dims: &[c_int],
    periods: &[c_int],
    newrank: Out<c_int>,
) -> Result<()> {
    let periods: Vec<bool> = periods.iter().map(|&p| p != 0).collect();
    let cart = Cart::new(cx.name, dims, &periods, comm.core.size())?;
    newrank.put(if comm.core.rank < cart.size() { comm.core.rank } else { c::MPI_UNDEFINED });
    Ok(())
}

pub(crate) fn cartdim_get(cx: Call, _l: &Lib, comm: CommRef, ndims: Out<c_int>) -> Result<()> {
    ndims.put(cart_of(cx.name, &comm)?.ndims() as c_int);
    Ok(())
}

fn maxdims_arg(call: &str, maxdims: c_int, cart: &Cart) -> Result<()> {
    if (maxdims as i64) < cart.ndims() as i64 {
        return Err(err!(
            MPI_ERR_ARG,
            "{call}: maxdims is {maxdims}, below the {} dimensions of the grid",
            cart.ndims()
        ));
    }
    Ok(())
}

pub(crate) fn cart_get(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> Result<()> {
    let call = cx.name;
    let cart = cart_of(call, &comm)?;
    maxdims_arg(call, maxdims, cart)?;
    let periodic: Vec<i32> = cart.periods.iter().map(|&p| p as i32).collect();
    // SAFETY: each array holds `maxdims` ints, at least the `ndims` written.
    unsafe {
        write_ints(call, "dims", dims, &cart.dims)?;
        write_ints(call, "periods", periods, &periodic)?;
        write_ints(call, "coords", coords, &cart.coords(comm.core.rank))
    }
}

pub(crate) fn cart_rank(cx: Call, _l: &Lib, comm: CommRef, coords: *mut c_int, rank: Out<c_int>) -> Result<()> {
    let cart = cart_of(cx.name, &comm)?;
    // SAFETY: `coords` holds one int per dimension of the grid.
    let at = unsafe { read_ints(cx.name, "coords", coords, cart.ndims())? };
    rank.put(cart.rank_of(cx.name, &at)?);
    Ok(())
}

pub(crate) fn cart_coords(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> Result<()> {
    let cart = cart_of(cx.name, &comm)?;
    maxdims_arg(cx.name, maxdims, cart)?;
    // SAFETY: `coords` holds `maxdims` ints, at least the `ndims` written.
    unsafe { write_ints(cx.name, "coords", coords, &cart.coords(rank)) }
}

pub(crate) fn cart_shift(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    direction: c_int,
    disp: c_int,
    rank_source: Out<c_int>,
    rank_dest: Out<c_int>,
) -> Result<()> {
    let cart = cart_of(cx.name, &comm)?;
    let dir = usize::try_from(direction).ok().filter(|&d| d < cart.ndims()).ok_or_else(|| {
        err!(MPI_ERR_ARG, "{}: direction is {direction}, not a dimension of the grid (0..{})", cx.name, cart.ndims())
    })?;
    let (src, dst) = cart.shift(comm.core.rank, dir, disp);
    rank_source.put(src);
    rank_dest.put(dst);
    Ok(())
}

pub(crate) fn cart_sub(cx: Call, l: &Lib, comm: CommRef, remain_dims: *mut c_int, newcomm: Out<usize>) -> Result<()> {
    let cart = cart_of(cx.name, &comm)?;
    // SAFETY: `remain_dims` holds one int per dimension of the grid.
    let remain = unsafe { read_ints(cx.name, "remain_dims", remain_dims, cart.ndims())? };
    let remain: Vec<bool> = remain.iter().map(|&r| r != 0).collect();
    let sub = cart.sub(comm.core.rank, &remain);
    // Every sub-grid is computed locally; its members agree on the context id because they
    // share the color, and every process of comm derives exactly once.
    let ctx = comm.core.derive_ctx(hash_words(&[DISC_CART_SUB, sub.color as u64]));
    let procs = sub.members.iter().map(|&r| comm.core.local_proc(r)).collect();
    let core = Comm::new(ctx, Arc::new(Group::new(procs)), sub.rank);
    newcomm.put(register_topo(l, &comm, core, Some(Arc::new(Topology::Cart(sub.cart)))));
    Ok(())
}

// ----- graphs -----

/// The graph of `index` (already read) and `edges` (as many as `index` counts), checked.
fn graph_args(call: &str, index: &[c_int], edges: *const c_int, comm_size: i32) -> Result<Graph> {
    let m = Graph::edge_count(call, index)?;
    // SAFETY: `edges` holds as many ints as `index` counts.
    let edges = unsafe { read_ints(call, "edges", edges, m)? };
    Graph::new(call, index.to_vec(), edges, comm_size)
}

pub(crate) fn graph_create(
    cx: Call,
    l: &Lib,
    comm_old: CommRef,
    _nnodes: usize,
    indx: &[c_int],
    edges: *mut c_int,
    _reorder: c_int,
    comm_graph: Out<usize>,
) -> Result<()> {
    let g = graph_args(cx.name, indx, edges, comm_old.core.size())?;
    comm_graph.put(create_first(l, &comm_old, g.nnodes(), DISC_GRAPH, Topology::Graph(g)));
    Ok(())
}

pub(crate) fn graph_map(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    _nnodes: usize,
    indx: &[c_int],
    edges: *mut c_int,
    newrank: Out<c_int>,
) -> Result<()> {
    let g = graph_args(cx.name, indx, edges, comm.core.size())?;
    newrank.put(if comm.core.rank < g.nnodes() { comm.core.rank } else { c::MPI_UNDEFINED });
    Ok(())
}

pub(crate) fn graphdims_get(cx: Call, _l: &Lib, comm: CommRef, nnodes: Out<c_int>, nedges: Out<c_int>) -> Result<()> {
    let g = graph_of(cx.name, &comm)?;
    nnodes.put(g.nnodes());
    nedges.put(g.edges.len() as c_int);
    Ok(())
}

pub(crate) fn graph_get(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    maxindex: usize,
    maxedges: usize,
    indx: *mut c_int,
    edges: *mut c_int,
) -> Result<()> {
    let g = graph_of(cx.name, &comm)?;
    let (ni, ne) = (maxindex.min(g.index.len()), maxedges.min(g.edges.len()));
    // SAFETY: the application's arrays hold `maxindex` and `maxedges` ints; no more is written.
    unsafe {
        write_ints(cx.name, "indx", indx, &g.index[..ni])?;
        write_ints(cx.name, "edges", edges, &g.edges[..ne])
    }
}

pub(crate) fn graph_neighbors_count(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    rank: c_int,
    nneighbors: Out<c_int>,
) -> Result<()> {
    nneighbors.put(graph_of(cx.name, &comm)?.neighbors(rank).len() as c_int);
    Ok(())
}

pub(crate) fn graph_neighbors(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    rank: c_int,
    maxneighbors: usize,
    neighbors: *mut c_int,
) -> Result<()> {
    let list = graph_of(cx.name, &comm)?.neighbors(rank);
    let n = maxneighbors.min(list.len());
    // SAFETY: the application's array holds `maxneighbors` ints; no more is written.
    unsafe { write_ints(cx.name, "neighbors", neighbors, &list[..n]) }
}

// ----- distributed graphs -----

pub(crate) fn dist_graph_create_adjacent(
    cx: Call,
    l: &Lib,
    comm_old: CommRef,
    indegree: usize,
    sources: &[c_int],
    sourceweights: *mut c_int,
    outdegree: usize,
    destinations: &[c_int],
    destweights: *mut c_int,
    _info: Pairs,
    _reorder: c_int,
    comm_dist_graph: Out<usize>,
) -> Result<()> {
    let call = cx.name;
    // SAFETY: the standard has the weights hold `indegree` and `outdegree` ints.
    let ((sw, swk), (dw, dwk)) = unsafe {
        (
            weights_arg(call, "sourceweights", sourceweights, indegree)?,
            weights_arg(call, "destweights", destweights, outdegree)?,
        )
    };
    let (ins, outs) = ((sources.to_vec(), sw, swk), (destinations.to_vec(), dw, dwk));
    let size = comm_old.core.size();
    let g = DistGraph::adjacent(call, size, ins, outs)?;
    comm_dist_graph.put(create_first(l, &comm_old, size, DISC_DIST_GRAPH, Topology::DistGraph(g)));
    Ok(())
}

/// `MPI_Dist_graph_create`: only `comm_old` is checked before the call, since a process whose
/// own arguments fail still takes part in the allgather, so that the others fail too instead of
/// waiting for it.
pub(crate) fn dist_graph_create(
    cx: Call,
    l: &Lib,
    comm_old: CommRef,
    n: c_int,
    sources: *mut c_int,
    degrees: *mut c_int,
    destinations: *mut c_int,
    weights: *mut c_int,
    info: usize,
    _reorder: c_int,
    comm_dist_graph: *mut usize,
) -> Result<()> {
    let call = cx.name;
    let size = comm_old.core.size();
    let share = (|| -> Result<EdgeShare> {
        nonnull_mut(call, "comm_dist_graph", comm_dist_graph)?;
        crate::info::info_arg(call, "info", info)?;
        let n = crate::validate::nonneg(call, "n", n)?;
        // SAFETY: the standard has `sources` and `degrees` hold `n` ints, and `destinations`
        // and `weights` as many as the degrees add up to.
        unsafe {
            let src = read_ints(call, "sources", sources, n)?;
            let deg = read_ints(call, "degrees", degrees, n)?;
            let m = EdgeShare::edge_count(call, &deg)?;
            let dst = read_ints(call, "destinations", destinations, m)?;
            let (w, wk) = weights_arg(call, "weights", weights, m)?;
            EdgeShare::new(call, size, &src, &deg, &dst, &w, wk)
        }
    })();
    let shares = l.mpi.runtime().allgather(&comm_old.core, EdgeShare::encode(share.as_ref().ok()));
    share?;
    let g = DistGraph::from_shares(call, comm_old.core.rank, &shares)?;
    let h = create_first(l, &comm_old, size, DISC_DIST_GRAPH, Topology::DistGraph(g));
    // SAFETY: checked non-null above (the share would have failed otherwise).
    unsafe { *comm_dist_graph = h };
    Ok(())
}

pub(crate) fn dist_graph_neighbors_count(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    indegree: Out<c_int>,
    outdegree: Out<c_int>,
    weighted: Out<c_int>,
) -> Result<()> {
    let g = dist_graph_of(cx.name, &comm)?;
    indegree.put(g.sources.len() as c_int);
    outdegree.put(g.destinations.len() as c_int);
    weighted.put(g.weighted as c_int);
    Ok(())
}

pub(crate) fn dist_graph_neighbors(
    cx: Call,
    _l: &Lib,
    comm: CommRef,
    maxindegree: usize,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: usize,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> Result<()> {
    let call = cx.name;
    let g = dist_graph_of(call, &comm)?;
    let (nin, nout) = (maxindegree.min(g.sources.len()), maxoutdegree.min(g.destinations.len()));
    // Weights are written only for a weighted graph, and never through the special values.
    let wanted = |p: *mut c_int| g.weighted && !matches!(p as usize, c::MPI_UNWEIGHTED | c::MPI_WEIGHTS_EMPTY);
    // SAFETY: the application's arrays hold `maxindegree` and `maxoutdegree` ints; no more is
    // written.
    unsafe {
        write_ints(call, "sources", sources, &g.sources[..nin])?;
        write_ints(call, "destinations", destinations, &g.destinations[..nout])?;
        if wanted(sourceweights) {
            write_ints(call, "sourceweights", sourceweights, &g.source_weights[..nin])?;
        }
        if wanted(destweights) {
            write_ints(call, "destweights", destweights, &g.dest_weights[..nout])?;
        }
    }
    Ok(())
}

#[inline]
pub(crate) fn topo_test(_cx: Call, _l: &Lib, comm: CommRef, status: Out<c_int>) -> Result<()> {
    status.put(comm.topo.as_ref().map_or(c::MPI_UNDEFINED, |t| t.kind()));
    Ok(())
}
