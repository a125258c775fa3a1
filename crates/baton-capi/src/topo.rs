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

use crate::comm::register_topo;
use crate::errors::guard;
use crate::state::{lib, CommObj, Lib};
use crate::{nonnull, nonnull_mut};
use baton_abi::consts as c;
use baton_core::comm::{hash_words, Comm};
use baton_core::err;
use baton_core::error::Result;
use baton_core::group::Group;
use baton_core::topo::{dims_create, Cart, DistGraph, EdgeShare, Graph, Topology, Weighting};
use std::ffi::c_int;
use std::sync::Arc;

fn put<T: Copy>(call: &str, arg: &str, p: *mut T, v: T) -> Result<()> {
    nonnull_mut(call, arg, p)?;
    // SAFETY: checked non-null; the caller owns the location.
    unsafe { *p = v };
    Ok(())
}

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

fn non_negative(call: &str, arg: &str, n: c_int) -> Result<usize> {
    usize::try_from(n).map_err(|_| err!(MPI_ERR_ARG, "{call}: {arg} is {n}, must be non-negative"))
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Dims_create";
        let n = non_negative(call, "ndims", ndims)?;
        // SAFETY: `dims` holds `ndims` ints (in/out), per the standard.
        let given = unsafe { read_ints(call, "dims", dims, n)? };
        let filled = dims_create(nnodes, &given)?;
        // SAFETY: same array, same length.
        unsafe { write_ints(call, "dims", dims, &filled) }
    })
}

/// Reads the `dims` and `periods` arguments of a grid of `ndims` dimensions.
unsafe fn grid_args(
    call: &str,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
) -> Result<(Vec<i32>, Vec<bool>)> {
    let n = non_negative(call, "ndims", ndims)?;
    // SAFETY: the standard has both arrays hold `ndims` ints.
    let (dims, periods) = unsafe { (read_ints(call, "dims", dims, n)?, read_ints(call, "periods", periods, n)?) };
    Ok((dims, periods.iter().map(|&p| p != 0).collect()))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_create(
    comm_old: usize,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    _reorder: c_int,
    comm_cart: *mut usize,
) -> c_int {
    guard(comm_old, || {
        let call = "MPI_Cart_create";
        let l = lib(call)?;
        let parent = l.comm(call, comm_old)?;
        crate::comm::require_intra(call, "comm_old", &parent)?;
        nonnull_mut(call, "comm_cart", comm_cart)?;
        // SAFETY: forwarded array contracts of MPI_Cart_create.
        let (dims, periods) = unsafe { grid_args(call, ndims, dims, periods)? };
        let cart = Cart::new(call, &dims, &periods, parent.core.size())?;
        let disc = hash_words(&[DISC_CART, hash_words(&dims.iter().map(|&d| d as u64).collect::<Vec<_>>())]);
        let h = create_first(l, &parent, cart.size(), disc, Topology::Cart(cart));
        put(call, "comm_cart", comm_cart, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_map(
    comm: usize,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Cart_map";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        // SAFETY: forwarded array contracts of MPI_Cart_map.
        let (dims, periods) = unsafe { grid_args(call, ndims, dims, periods)? };
        let cart = Cart::new(call, &dims, &periods, cm.core.size())?;
        let r = if cm.core.rank < cart.size() { cm.core.rank } else { c::MPI_UNDEFINED };
        put(call, "newrank", newrank, r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cartdim_get(comm: usize, ndims: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Cartdim_get";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let cart = cart_of(call, &cm)?;
        put(call, "ndims", ndims, cart.ndims() as c_int)
    })
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_get(
    comm: usize,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Cart_get";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let cart = cart_of(call, &cm)?;
        maxdims_arg(call, maxdims, cart)?;
        let periodic: Vec<i32> = cart.periods.iter().map(|&p| p as i32).collect();
        // SAFETY: each array holds `maxdims` ints, at least the `ndims` written.
        unsafe {
            write_ints(call, "dims", dims, &cart.dims)?;
            write_ints(call, "periods", periods, &periodic)?;
            write_ints(call, "coords", coords, &cart.coords(cm.core.rank))
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_rank(comm: usize, coords: *const c_int, rank: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Cart_rank";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let cart = cart_of(call, &cm)?;
        // SAFETY: `coords` holds one int per dimension of the grid.
        let at = unsafe { read_ints(call, "coords", coords, cart.ndims())? };
        put(call, "rank", rank, cart.rank_of(call, &at)?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_coords(comm: usize, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Cart_coords";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let cart = cart_of(call, &cm)?;
        if !(0..cart.size()).contains(&rank) {
            return Err(err!(MPI_ERR_RANK, "{call}: rank {rank} is not a rank of comm (0..{})", cart.size() - 1));
        }
        maxdims_arg(call, maxdims, cart)?;
        // SAFETY: `coords` holds `maxdims` ints, at least the `ndims` written.
        unsafe { write_ints(call, "coords", coords, &cart.coords(rank)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_shift(
    comm: usize,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Cart_shift";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let cart = cart_of(call, &cm)?;
        let dir = usize::try_from(direction).ok().filter(|&d| d < cart.ndims()).ok_or_else(|| {
            err!(MPI_ERR_ARG, "{call}: direction is {direction}, not a dimension of the grid (0..{})", cart.ndims())
        })?;
        nonnull_mut(call, "rank_source", rank_source)?;
        nonnull_mut(call, "rank_dest", rank_dest)?;
        let (src, dst) = cart.shift(cm.core.rank, dir, disp);
        put(call, "rank_source", rank_source, src)?;
        put(call, "rank_dest", rank_dest, dst)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_sub(comm: usize, remain_dims: *const c_int, newcomm: *mut usize) -> c_int {
    guard(comm, || {
        let call = "MPI_Cart_sub";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let cart = cart_of(call, &cm)?;
        nonnull_mut(call, "newcomm", newcomm)?;
        // SAFETY: `remain_dims` holds one int per dimension of the grid.
        let remain = unsafe { read_ints(call, "remain_dims", remain_dims, cart.ndims())? };
        let remain: Vec<bool> = remain.iter().map(|&r| r != 0).collect();
        let sub = cart.sub(cm.core.rank, &remain);
        // Every sub-grid is computed locally; its members agree on the context id because they
        // share the color, and every process of comm derives exactly once.
        let ctx = cm.core.derive_ctx(hash_words(&[DISC_CART_SUB, sub.color as u64]));
        let procs = sub.members.iter().map(|&r| cm.core.local_proc(r)).collect();
        let core = Comm::new(ctx, Arc::new(Group::new(procs)), sub.rank);
        let h = register_topo(l, &cm, core, Some(Arc::new(Topology::Cart(sub.cart))));
        put(call, "newcomm", newcomm, h)
    })
}

// ----- graphs -----

/// Reads the `index` and `edges` arguments of a graph of `nnodes` nodes and checks them.
unsafe fn graph_args(
    call: &str,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    comm_size: i32,
) -> Result<Graph> {
    let n = non_negative(call, "nnodes", nnodes)?;
    // SAFETY: the standard has `index` hold `nnodes` ints.
    let index = unsafe { read_ints(call, "index", index, n)? };
    let m = Graph::edge_count(call, &index)?;
    // SAFETY: `edges` holds as many ints as `index` counts.
    let edges = unsafe { read_ints(call, "edges", edges, m)? };
    Graph::new(call, index, edges, comm_size)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_create(
    comm_old: usize,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    _reorder: c_int,
    comm_graph: *mut usize,
) -> c_int {
    guard(comm_old, || {
        let call = "MPI_Graph_create";
        let l = lib(call)?;
        let parent = l.comm(call, comm_old)?;
        crate::comm::require_intra(call, "comm_old", &parent)?;
        nonnull_mut(call, "comm_graph", comm_graph)?;
        // SAFETY: forwarded array contracts of MPI_Graph_create.
        let g = unsafe { graph_args(call, nnodes, index, edges, parent.core.size())? };
        let h = create_first(l, &parent, g.nnodes(), DISC_GRAPH, Topology::Graph(g));
        put(call, "comm_graph", comm_graph, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_map(
    comm: usize,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Graph_map";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        // SAFETY: forwarded array contracts of MPI_Graph_map.
        let g = unsafe { graph_args(call, nnodes, index, edges, cm.core.size())? };
        let r = if cm.core.rank < g.nnodes() { cm.core.rank } else { c::MPI_UNDEFINED };
        put(call, "newrank", newrank, r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graphdims_get(comm: usize, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Graphdims_get";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = graph_of(call, &cm)?;
        put(call, "nnodes", nnodes, g.nnodes())?;
        put(call, "nedges", nedges, g.edges.len() as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_get(
    comm: usize,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Graph_get";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = graph_of(call, &cm)?;
        let ni = non_negative(call, "maxindex", maxindex)?.min(g.index.len());
        let ne = non_negative(call, "maxedges", maxedges)?.min(g.edges.len());
        // SAFETY: the application's arrays hold `maxindex` and `maxedges` ints; no more is written.
        unsafe {
            write_ints(call, "index", index, &g.index[..ni])?;
            write_ints(call, "edges", edges, &g.edges[..ne])
        }
    })
}

fn node_arg(call: &str, g: &Graph, rank: c_int) -> Result<()> {
    if !(0..g.nnodes()).contains(&rank) {
        return Err(err!(MPI_ERR_RANK, "{call}: rank {rank} is not a node of the graph (0..{})", g.nnodes() - 1));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_neighbors_count(comm: usize, rank: c_int, nneighbors: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Graph_neighbors_count";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = graph_of(call, &cm)?;
        node_arg(call, g, rank)?;
        put(call, "nneighbors", nneighbors, g.neighbors(rank).len() as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_neighbors(
    comm: usize,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Graph_neighbors";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = graph_of(call, &cm)?;
        node_arg(call, g, rank)?;
        let list = g.neighbors(rank);
        let n = non_negative(call, "maxneighbors", maxneighbors)?.min(list.len());
        // SAFETY: the application's array holds `maxneighbors` ints; no more is written.
        unsafe { write_ints(call, "neighbors", neighbors, &list[..n]) }
    })
}

// ----- distributed graphs -----

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_create_adjacent(
    comm_old: usize,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    info: usize,
    _reorder: c_int,
    comm_dist_graph: *mut usize,
) -> c_int {
    guard(comm_old, || {
        let call = "MPI_Dist_graph_create_adjacent";
        let l = lib(call)?;
        let parent = l.comm(call, comm_old)?;
        crate::comm::require_intra(call, "comm_old", &parent)?;
        nonnull_mut(call, "comm_dist_graph", comm_dist_graph)?;
        crate::info::info_pairs(call, info)?;
        let nin = non_negative(call, "indegree", indegree)?;
        let nout = non_negative(call, "outdegree", outdegree)?;
        // SAFETY: the standard has the sources and destinations arrays and their weights hold
        // `indegree` and `outdegree` ints.
        let (ins, outs) = unsafe {
            let src = read_ints(call, "sources", sources, nin)?;
            let (sw, swk) = weights_arg(call, "sourceweights", sourceweights, nin)?;
            let dst = read_ints(call, "destinations", destinations, nout)?;
            let (dw, dwk) = weights_arg(call, "destweights", destweights, nout)?;
            ((src, sw, swk), (dst, dw, dwk))
        };
        let g = DistGraph::adjacent(call, parent.core.size(), ins, outs)?;
        let h = create_first(l, &parent, parent.core.size(), DISC_DIST_GRAPH, Topology::DistGraph(g));
        put(call, "comm_dist_graph", comm_dist_graph, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_create(
    comm_old: usize,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights: *const c_int,
    info: usize,
    _reorder: c_int,
    comm_dist_graph: *mut usize,
) -> c_int {
    guard(comm_old, || {
        let call = "MPI_Dist_graph_create";
        let l = lib(call)?;
        let parent = l.comm(call, comm_old)?;
        crate::comm::require_intra(call, "comm_old", &parent)?;
        let size = parent.core.size();
        let share = (|| -> Result<EdgeShare> {
            nonnull_mut(call, "comm_dist_graph", comm_dist_graph)?;
            crate::info::info_pairs(call, info)?;
            let n = non_negative(call, "n", n)?;
            // SAFETY: the standard has `sources` and `degrees` hold `n` ints, and
            // `destinations` and `weights` as many as the degrees add up to.
            unsafe {
                let src = read_ints(call, "sources", sources, n)?;
                let deg = read_ints(call, "degrees", degrees, n)?;
                let m = EdgeShare::edge_count(call, &deg)?;
                let dst = read_ints(call, "destinations", destinations, m)?;
                let (w, wk) = weights_arg(call, "weights", weights, m)?;
                EdgeShare::new(call, size, &src, &deg, &dst, &w, wk)
            }
        })();
        // A process whose own arguments failed still takes part, so that the others fail too
        // instead of waiting for it.
        let shares = l.mpi.runtime().allgather(&parent.core, EdgeShare::encode(share.as_ref().ok()));
        share?;
        let g = DistGraph::from_shares(call, parent.core.rank, &shares)?;
        let h = create_first(l, &parent, size, DISC_DIST_GRAPH, Topology::DistGraph(g));
        put(call, "comm_dist_graph", comm_dist_graph, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors_count(
    comm: usize,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Dist_graph_neighbors_count";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = dist_graph_of(call, &cm)?;
        put(call, "indegree", indegree, g.sources.len() as c_int)?;
        put(call, "outdegree", outdegree, g.destinations.len() as c_int)?;
        put(call, "weighted", weighted, g.weighted as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors(
    comm: usize,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Dist_graph_neighbors";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        let g = dist_graph_of(call, &cm)?;
        let nin = non_negative(call, "maxindegree", maxindegree)?.min(g.sources.len());
        let nout = non_negative(call, "maxoutdegree", maxoutdegree)?.min(g.destinations.len());
        // Weights are written only for a weighted graph, and never through the special values.
        let wanted = |p: *mut c_int| g.weighted && !matches!(p as usize, c::MPI_UNWEIGHTED | c::MPI_WEIGHTS_EMPTY);
        // SAFETY: the application's arrays hold `maxindegree` and `maxoutdegree` ints; no more
        // is written.
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
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Topo_test(comm: usize, status: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Topo_test";
        let l = lib(call)?;
        let cm = l.comm(call, comm)?;
        put(call, "status", status, cm.topo.as_ref().map_or(c::MPI_UNDEFINED, |t| t.kind()))
    })
}
