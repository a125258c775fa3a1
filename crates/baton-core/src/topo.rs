//! Process topologies (the standard's chapter "Process Topologies"): Cartesian grids, graphs and
//! distributed graphs, as pure arithmetic on ranks.
//!
//! A topology is attached to a communicator when the communicator is created (at the C
//! boundary) and shared, unchanged, by its duplicates. Nothing here sends a message: the one
//! constructor that needs communication, `MPI_Dist_graph_create`, encodes each process's share
//! of the edges with [`EdgeShare::encode`], lets the caller allgather the shares, and rebuilds
//! each process's neighbour lists with [`DistGraph::from_shares`].
//!
//! Reordering is never done: a process keeps its rank of the old communicator, which the
//! standard allows (`reorder` is a permission, not a request). Baton runs on processes that are
//! all equally distant from each other (one host today), so there is no placement to improve.
//!
//! Important types:
//! - [`Topology`]: what a communicator carries; [`Topology::neighbors`] gives the neighbour
//!   order every neighbourhood collective uses.
//! - [`Cart`]: a grid, row-major (the last dimension varies fastest), with coordinate
//!   conversions, shifts and sub-grids.
//! - [`Graph`], [`DistGraph`]: adjacency in the standard's two forms.
//! - [`neighbor_plan`], [`neighbor_exchange`]: the schedule of every neighbourhood collective.

use crate::coll::schedule::{Loc, Schedule};
use crate::err;
use crate::error::Result;
use baton_abi::consts as c;

/// A communicator's process topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    Cart(Cart),
    Graph(Graph),
    DistGraph(DistGraph),
}

/// The processes a neighbourhood collective receives from and sends to, in buffer-block order.
/// `MPI_PROC_NULL` entries keep their block but move no data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbors {
    pub sources: Vec<i32>,
    pub destinations: Vec<i32>,
}

impl Topology {
    /// The `status` of `MPI_Topo_test`.
    pub fn kind(&self) -> i32 {
        match self {
            Topology::Cart(_) => c::MPI_CART,
            Topology::Graph(_) => c::MPI_GRAPH,
            Topology::DistGraph(_) => c::MPI_DIST_GRAPH,
        }
    }

    /// Neighbours of `rank` in the order the standard fixes for neighbourhood collectives: on a
    /// grid, for each dimension the neighbour at -1 and then the one at +1 (both lists alike);
    /// on a graph, `MPI_Graph_neighbors` order (both lists alike); on a distributed graph, the
    /// sources for receiving and the destinations for sending.
    pub fn neighbors(&self, rank: i32) -> Neighbors {
        match self {
            Topology::Cart(cart) => {
                let mut list = Vec::with_capacity(2 * cart.ndims());
                for d in 0..cart.ndims() {
                    let (below, above) = cart.shift(rank, d, 1);
                    list.push(below);
                    list.push(above);
                }
                Neighbors { sources: list.clone(), destinations: list }
            }
            Topology::Graph(g) => {
                let list = g.neighbors(rank).to_vec();
                Neighbors { sources: list.clone(), destinations: list }
            }
            Topology::DistGraph(g) => Neighbors { sources: g.sources.clone(), destinations: g.destinations.clone() },
        }
    }
}

// ----- MPI_Dims_create -----

/// `MPI_Dims_create`: fills the zero entries of `dims` so that the product of all entries is
/// `nnodes`, as balanced as possible and non-increasing; non-zero entries are kept.
///
/// "As balanced as possible" is made precise as: the filled entries have the smallest spread
/// (largest minus smallest) of all factorizations (the measure of Träff and Lübbe, "Specification
/// guideline violations by MPI_Dims_create", EuroMPI 2015); among equally spread ones, the one
/// with the largest smallest entry; among those, the lexicographically smallest. So 5040 on 3
/// gives 21x16x15 (spread 6, smallest 15), not 20x18x14 (spread 6, smallest 14), as MPICH does;
/// 6 on 2 gives 3x2, 24 on 3 gives 4x3x2, a prime p on 3 gives p x1x1.
pub fn dims_create(nnodes: i32, dims: &[i32]) -> Result<Vec<i32>> {
    const CALL: &str = "MPI_Dims_create";
    if nnodes <= 0 {
        return Err(err!(MPI_ERR_ARG, "{CALL}: nnodes is {nnodes}, must be positive"));
    }
    let mut fixed: u64 = 1;
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 {
            return Err(err!(MPI_ERR_DIMS, "{CALL}: dims[{i}] is {d}, must be zero (free) or positive"));
        }
        if d > 0 {
            fixed = fixed.saturating_mul(d as u64);
        }
    }
    let n = nnodes as u64;
    if !n.is_multiple_of(fixed) {
        return Err(err!(
            MPI_ERR_DIMS,
            "{CALL}: nnodes {nnodes} is not a multiple of {fixed}, the product of the non-zero entries of dims"
        ));
    }
    let free = dims.iter().filter(|&&d| d == 0).count();
    if free == 0 && fixed != n {
        return Err(err!(
            MPI_ERR_DIMS,
            "{CALL}: every entry of dims is fixed and their product {fixed} is not nnodes {nnodes}"
        ));
    }
    let mut fill = balanced(n / fixed, free).into_iter();
    Ok(dims.iter().map(|&d| if d == 0 { fill.next().unwrap_or(1) as i32 } else { d }).collect())
}

/// The most balanced non-increasing `k` factors of `m` (see [`dims_create`]), by a
/// branch-and-bound search over the divisors of `m`.
fn balanced(m: u64, k: usize) -> Vec<u64> {
    if k == 0 {
        return Vec::new();
    }
    let mut divisors: Vec<u64> = Vec::new();
    let mut d = 1;
    while d * d <= m {
        if m.is_multiple_of(d) {
            divisors.push(d);
            if d * d != m {
                divisors.push(m / d);
            }
        }
        d += 1;
    }
    divisors.sort_unstable();
    // m x 1 x ... x 1 always fits: the search starts from it and only improves on it.
    let mut search = Search { k, divisors, best: vec![1; k], cur: Vec::with_capacity(k) };
    search.best[0] = m;
    search.extend(m);
    search.best
}

struct Search {
    k: usize,
    /// The divisors of the number being factored, ascending.
    divisors: Vec<u64>,
    /// The best factorization so far, non-increasing.
    best: Vec<u64>,
    /// The factors chosen so far, non-increasing.
    cur: Vec<u64>,
}

impl Search {
    /// Whether non-increasing `a` beats `b`: smaller spread, then larger smallest entry, then
    /// lexicographically smaller.
    fn better(a: &[u64], b: &[u64]) -> bool {
        let (sa, sb) = (a[0] - a[a.len() - 1], b[0] - b[b.len() - 1]);
        (sa, std::cmp::Reverse(a[a.len() - 1]), a) < (sb, std::cmp::Reverse(b[b.len() - 1]), b)
    }

    fn spread(&self) -> u64 {
        self.best[0] - self.best[self.k - 1]
    }

    /// Chooses the remaining factors, whose product is `rest`, each at most the last one chosen.
    fn extend(&mut self, rest: u64) {
        let left = self.k - self.cur.len();
        if left == 0 {
            if rest == 1 && Self::better(&self.cur, &self.best) {
                self.best.clone_from(&self.cur);
            }
            return;
        }
        // The smallest of the remaining factors is at most the left-th root of their product.
        let root = kth_root(rest, left);
        let Some(&first) = self.cur.first() else {
            // The largest entry: from the smallest possible (the k-th root, rounded up) upwards,
            // which meets balanced candidates first, until it alone spreads too far.
            let lo = if pow_at_least(root, left, rest) { root } else { root + 1 };
            let start = self.divisors.partition_point(|&d| d < lo);
            for i in start..self.divisors.len() {
                let f = self.divisors[i];
                if f - root > self.spread() {
                    break;
                }
                if rest.is_multiple_of(f) {
                    self.cur.push(f);
                    self.extend(rest / f);
                    self.cur.pop();
                }
            }
            return;
        };
        if first - root > self.spread() {
            return;
        }
        let ub = self.cur.last().copied().unwrap_or(rest).min(rest);
        // From the largest allowed factor down: the result's smallest entry is at most this
        // factor, so once the first entry minus it exceeds the best spread, every smaller one
        // does too; and `left` factors of at most f reach at most f^left.
        let hi = self.divisors.partition_point(|&d| d <= ub);
        for i in (0..hi).rev() {
            let f = self.divisors[i];
            if first - f > self.spread() || !pow_at_least(f, left, rest) {
                break;
            }
            if rest.is_multiple_of(f) {
                self.cur.push(f);
                self.extend(rest / f);
                self.cur.pop();
            }
        }
    }
}

/// Whether `f^k >= m`.
fn pow_at_least(f: u64, k: usize, m: u64) -> bool {
    u32::try_from(k).ok().and_then(|k| (f as u128).checked_pow(k)).is_none_or(|p| p >= m as u128)
}

/// The largest `r` with `r^k <= m` (`k >= 1`).
fn kth_root(m: u64, k: usize) -> u64 {
    let (mut lo, mut hi) = (1u64, m.max(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if pow_at_least(mid, k, m) && !pow_equal(mid, k, m) {
            hi = mid - 1;
        } else {
            lo = mid;
        }
    }
    lo
}

/// Whether `f^k == m`.
fn pow_equal(f: u64, k: usize, m: u64) -> bool {
    u32::try_from(k).ok().and_then(|k| (f as u128).checked_pow(k)) == Some(m as u128)
}

// ----- Cartesian grids -----

/// A Cartesian grid: its extents and which dimensions wrap around. Ranks are numbered
/// row-major, so the last dimension varies fastest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cart {
    pub dims: Vec<i32>,
    pub periods: Vec<bool>,
}

/// A sub-grid of `MPI_Cart_sub`, as seen by one of its members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubCart {
    pub cart: Cart,
    /// Ranks in the parent grid of the sub-grid's members, in sub-grid rank order.
    pub members: Vec<i32>,
    /// The calling process's rank in the sub-grid.
    pub rank: i32,
    /// Identifies the sub-grid among its siblings (the parent rank of its first member).
    pub color: i32,
}

impl Cart {
    /// Checks a grid for `call` (`MPI_Cart_create`, `MPI_Cart_map`) over a communicator of
    /// `comm_size` processes.
    pub fn new(call: &str, dims: &[i32], periods: &[bool], comm_size: i32) -> Result<Cart> {
        let mut n: i64 = 1;
        for (i, &d) in dims.iter().enumerate() {
            if d <= 0 {
                return Err(err!(MPI_ERR_DIMS, "{call}: dims[{i}] is {d}, must be positive"));
            }
            n = n.saturating_mul(d as i64);
        }
        if n > comm_size as i64 {
            return Err(err!(
                MPI_ERR_ARG,
                "{call}: dims describe a grid of {n} processes, more than the {comm_size} of the communicator"
            ));
        }
        Ok(Cart { dims: dims.to_vec(), periods: periods.to_vec() })
    }

    pub fn ndims(&self) -> usize {
        self.dims.len()
    }

    /// Number of processes in the grid (1 for a zero-dimensional grid).
    pub fn size(&self) -> i32 {
        self.dims.iter().product()
    }

    /// Coordinates of `rank` (which must be below [`size`](Self::size)).
    pub fn coords(&self, rank: i32) -> Vec<i32> {
        let mut out = vec![0; self.ndims()];
        let mut r = rank;
        for i in (0..self.ndims()).rev() {
            out[i] = r % self.dims[i];
            r /= self.dims[i];
        }
        out
    }

    /// Rank at `coords`: periodic dimensions wrap any coordinate, non-periodic ones reject a
    /// coordinate outside the grid (`MPI_Cart_rank`).
    pub fn rank_of(&self, call: &str, coords: &[i32]) -> Result<i32> {
        let mut r: i32 = 0;
        for (i, (&d, &x)) in self.dims.iter().zip(coords).enumerate() {
            let x = if self.periods[i] {
                x.rem_euclid(d)
            } else if (0..d).contains(&x) {
                x
            } else {
                return Err(err!(
                    MPI_ERR_ARG,
                    "{call}: coords[{i}] is {x}, outside 0..{} of non-periodic dimension {i}",
                    d - 1
                ));
            };
            r = r * d + x;
        }
        Ok(r)
    }

    /// The `(source, dest)` of `MPI_Cart_shift`: the ranks `disp` steps below and above `rank`
    /// along `direction` (which must be a valid dimension), or `MPI_PROC_NULL` past the border
    /// of a non-periodic dimension.
    pub fn shift(&self, rank: i32, direction: usize, disp: i32) -> (i32, i32) {
        let coords = self.coords(rank);
        let step = |delta: i64| {
            let d = self.dims[direction] as i64;
            let x = coords[direction] as i64 + delta;
            let x = if self.periods[direction] {
                x.rem_euclid(d)
            } else if (0..d).contains(&x) {
                x
            } else {
                return c::MPI_PROC_NULL;
            };
            let mut at = coords.clone();
            at[direction] = x as i32;
            self.rank_of("MPI_Cart_shift", &at).expect("coordinates inside the grid")
        };
        (step(-(disp as i64)), step(disp as i64))
    }

    /// The sub-grid containing `rank` that keeps the dimensions where `remain` is true
    /// (`MPI_Cart_sub`). With no dimension kept each process is a zero-dimensional grid alone.
    pub fn sub(&self, rank: i32, remain: &[bool]) -> SubCart {
        let me = self.coords(rank);
        let kept: Vec<usize> = (0..self.ndims()).filter(|&i| remain[i]).collect();
        let cart = Cart {
            dims: kept.iter().map(|&i| self.dims[i]).collect(),
            periods: kept.iter().map(|&i| self.periods[i]).collect(),
        };
        let members: Vec<i32> = (0..cart.size())
            .map(|k| {
                let sub = cart.coords(k);
                let mut at = me.clone();
                for (j, &i) in kept.iter().enumerate() {
                    at[i] = sub[j];
                }
                self.rank_of("MPI_Cart_sub", &at).expect("coordinates inside the grid")
            })
            .collect();
        let mine: Vec<i32> = kept.iter().map(|&i| me[i]).collect();
        let my_rank = cart.rank_of("MPI_Cart_sub", &mine).expect("coordinates inside the grid");
        SubCart { color: members[0], members, rank: my_rank, cart }
    }
}

// ----- graphs -----

/// A graph of `MPI_Graph_create`: node i's neighbours are `edges[index[i-1]..index[i]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    pub index: Vec<i32>,
    pub edges: Vec<i32>,
}

impl Graph {
    /// Number of edges `index` describes, after checking it is a cumulative count.
    pub fn edge_count(call: &str, index: &[i32]) -> Result<usize> {
        let mut prev = 0;
        for (i, &x) in index.iter().enumerate() {
            if x < prev {
                return Err(err!(
                    MPI_ERR_ARG,
                    "{call}: index[{i}] is {x}, below {prev}: index must hold non-decreasing cumulative degrees"
                ));
            }
            prev = x;
        }
        Ok(prev as usize)
    }

    /// Checks a graph for `call` (`MPI_Graph_create`, `MPI_Graph_map`) over a communicator of
    /// `comm_size` processes. Self-loops and repeated edges are allowed, as the standard says.
    pub fn new(call: &str, index: Vec<i32>, edges: Vec<i32>, comm_size: i32) -> Result<Graph> {
        let nnodes = index.len();
        if nnodes > comm_size as usize {
            return Err(err!(
                MPI_ERR_ARG,
                "{call}: nnodes is {nnodes}, more than the {comm_size} processes of the communicator"
            ));
        }
        let n = Self::edge_count(call, &index)?;
        debug_assert_eq!(n, edges.len());
        if let Some((i, &e)) = edges.iter().enumerate().find(|(_, &e)| !(0..nnodes as i32).contains(&e)) {
            return Err(err!(MPI_ERR_RANK, "{call}: edges[{i}] is {e}, not a node of the graph (0..{nnodes})"));
        }
        Ok(Graph { index, edges })
    }

    pub fn nnodes(&self) -> i32 {
        self.index.len() as i32
    }

    /// Neighbours of node `rank` (which must be a node), in the order given at creation.
    pub fn neighbors(&self, rank: i32) -> &[i32] {
        let r = rank as usize;
        let start = if r == 0 { 0 } else { self.index[r - 1] as usize };
        &self.edges[start..self.index[r] as usize]
    }
}

// ----- distributed graphs -----

/// What a weights argument said about the graph. A process with no edges may pass anything
/// (NULL included) without saying whether the graph is weighted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weighting {
    /// `MPI_UNWEIGHTED`.
    Unweighted,
    /// An array of weights, or `MPI_WEIGHTS_EMPTY`.
    Weighted,
    /// No edges and a weights argument that is neither of the above.
    Either,
}

impl Weighting {
    /// Combines two processes' (or two arguments') statements; `None` when they contradict.
    pub fn merge(self, other: Weighting) -> Option<Weighting> {
        match (self, other) {
            (Weighting::Either, x) | (x, Weighting::Either) => Some(x),
            (a, b) if a == b => Some(a),
            _ => None,
        }
    }

    fn code(self) -> u8 {
        match self {
            Weighting::Unweighted => 1,
            Weighting::Weighted => 2,
            Weighting::Either => 3,
        }
    }

    fn from_code(b: u8) -> Option<Weighting> {
        match b {
            1 => Some(Weighting::Unweighted),
            2 => Some(Weighting::Weighted),
            3 => Some(Weighting::Either),
            _ => None,
        }
    }
}

/// A distributed graph as one process knows it: its in-edges and out-edges, with weights
/// (all 1 when the graph is unweighted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistGraph {
    pub sources: Vec<i32>,
    pub source_weights: Vec<i32>,
    pub destinations: Vec<i32>,
    pub dest_weights: Vec<i32>,
    pub weighted: bool,
}

fn check_ranks(call: &str, arg: &str, ranks: &[i32], comm_size: i32) -> Result<()> {
    match ranks.iter().enumerate().find(|(_, &r)| !(0..comm_size).contains(&r)) {
        Some((i, &r)) => {
            Err(err!(MPI_ERR_RANK, "{call}: {arg}[{i}] is {r}, not a rank of comm_old (0..{})", comm_size - 1))
        }
        None => Ok(()),
    }
}

impl DistGraph {
    /// `MPI_Dist_graph_create_adjacent`: the calling process gives its own neighbours. A weight
    /// vector may be empty when its weighting is not [`Weighting::Weighted`].
    pub fn adjacent(
        call: &str,
        comm_size: i32,
        (sources, source_weights, sw): (Vec<i32>, Vec<i32>, Weighting),
        (destinations, dest_weights, dw): (Vec<i32>, Vec<i32>, Weighting),
    ) -> Result<DistGraph> {
        check_ranks(call, "sources", &sources, comm_size)?;
        check_ranks(call, "destinations", &destinations, comm_size)?;
        let weighting = sw.merge(dw).ok_or_else(|| {
            err!(MPI_ERR_ARG, "{call}: one of sourceweights and destweights is MPI_UNWEIGHTED and the other is not")
        })?;
        let weighted = weighting != Weighting::Unweighted;
        let fill = |w: Vec<i32>, n: usize| if w.len() == n { w } else { vec![1; n] };
        Ok(DistGraph {
            source_weights: fill(source_weights, sources.len()),
            dest_weights: fill(dest_weights, destinations.len()),
            sources,
            destinations,
            weighted,
        })
    }

    /// `MPI_Dist_graph_create`, second half: every process's [`EdgeShare::encode`] output, in
    /// rank order, turned into the neighbour lists of process `me`. In-edges and out-edges
    /// keep the order of the shares (by contributing rank, then argument order), so every
    /// process agrees on the order without further messages.
    pub fn from_shares(call: &str, me: i32, shares: &[Vec<u8>]) -> Result<DistGraph> {
        let mut weighting = Weighting::Either;
        for (p, share) in shares.iter().enumerate() {
            let Some(w) = share.first().copied().and_then(Weighting::from_code) else {
                return Err(err!(MPI_ERR_ARG, "{call}: process {p} of comm_old gave invalid arguments"));
            };
            weighting = weighting.merge(w).ok_or_else(|| {
                err!(MPI_ERR_ARG, "{call}: some processes gave MPI_UNWEIGHTED as weights and others did not")
            })?;
        }
        let mut g = DistGraph {
            sources: Vec::new(),
            source_weights: Vec::new(),
            destinations: Vec::new(),
            dest_weights: Vec::new(),
            weighted: weighting != Weighting::Unweighted,
        };
        for share in shares {
            for e in share[1..].chunks_exact(12) {
                let word = |i: usize| i32::from_le_bytes(e[4 * i..4 * i + 4].try_into().unwrap());
                let (src, dst, w) = (word(0), word(1), word(2));
                if dst == me {
                    g.sources.push(src);
                    g.source_weights.push(w);
                }
                if src == me {
                    g.destinations.push(dst);
                    g.dest_weights.push(w);
                }
            }
        }
        Ok(g)
    }
}

/// One process's part of `MPI_Dist_graph_create`: edges `(source, destination, weight)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeShare {
    pub weighting: Weighting,
    pub edges: Vec<[i32; 3]>,
}

impl EdgeShare {
    /// Checks and flattens the arguments: `n` sources, `degrees[i]` destinations for source i,
    /// `weights` parallel to `destinations` (empty when not weighted).
    pub fn new(
        call: &str,
        comm_size: i32,
        sources: &[i32],
        degrees: &[i32],
        destinations: &[i32],
        weights: &[i32],
        weighting: Weighting,
    ) -> Result<EdgeShare> {
        let n = Self::edge_count(call, degrees)?;
        if destinations.len() != n || sources.len() != degrees.len() {
            return Err(err!(MPI_ERR_ARG, "{call}: sources, degrees and destinations disagree in length"));
        }
        check_ranks(call, "sources", sources, comm_size)?;
        check_ranks(call, "destinations", destinations, comm_size)?;
        let mut edges = Vec::with_capacity(n);
        let mut next = 0;
        for (&s, &deg) in sources.iter().zip(degrees) {
            for _ in 0..deg {
                let w = weights.get(next).copied().unwrap_or(1);
                edges.push([s, destinations[next], w]);
                next += 1;
            }
        }
        Ok(EdgeShare { weighting, edges })
    }

    /// Number of edges `degrees` announces, after checking each degree is non-negative.
    pub fn edge_count(call: &str, degrees: &[i32]) -> Result<usize> {
        let mut n = 0usize;
        for (i, &deg) in degrees.iter().enumerate() {
            if deg < 0 {
                return Err(err!(MPI_ERR_ARG, "{call}: degrees[{i}] is {deg}, must be non-negative"));
            }
            n += deg as usize;
        }
        Ok(n)
    }

    /// The bytes this process contributes to the allgather; `None` (a process whose own
    /// arguments failed) still contributes, so that every process returns an error instead of
    /// waiting for it.
    pub fn encode(share: Option<&EdgeShare>) -> Vec<u8> {
        let Some(s) = share else { return vec![0] };
        let mut out = Vec::with_capacity(1 + 12 * s.edges.len());
        out.push(s.weighting.code());
        for e in &s.edges {
            for w in e {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        out
    }
}

// ----- neighbourhood collectives -----

/// One step of a neighbourhood exchange, by block index (see [`neighbor_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborStep {
    /// Send block `send` to this process's own receive block `recv`, locally.
    Copy {
        send: usize,
        recv: usize,
    },
    Recv(usize),
    Send(usize),
}

/// The steps of one neighbourhood exchange for process `me`: send block i goes to
/// `nb.destinations[i]`, receive block i comes from `nb.sources[i]`; `MPI_PROC_NULL` entries
/// move nothing. `cart` says the lists come from a Cartesian topology; the lengths (bytes) of
/// the blocks decide only which blocks to oneself may be copied.
///
/// When a process appears more than once in a list, which block meets which is decided by the
/// order messages are posted (one tag per schedule, and messages between two processes do not
/// overtake). Receives are posted in list order. On a graph, sends are too: the k-th edge to a
/// process meets the k-th edge from it. On a grid the standard wants the block sent towards -1
/// to land in the receiver's +1 block and vice versa, which matters when both neighbours along a
/// periodic dimension of size 1 or 2 are the same process; posting each dimension's +1 send
/// before its -1 send gives exactly that, and changes nothing for distinct neighbours.
///
/// Blocks this process sends to itself are paired with its receives from itself in the same
/// posting order and copied locally; a pair whose lengths differ (an erroneous call) goes
/// through the engine instead, which reports the mismatch.
pub fn neighbor_plan(me: i32, cart: bool, nb: &Neighbors, send_len: &[usize], recv_len: &[usize]) -> Vec<NeighborStep> {
    debug_assert_eq!(send_len.len(), nb.destinations.len());
    debug_assert_eq!(recv_len.len(), nb.sources.len());
    let send_order: Vec<usize> =
        if cart { (0..send_len.len()).map(|i| i ^ 1).collect() } else { (0..send_len.len()).collect() };
    let mut steps = Vec::new();
    let mut sent_locally = vec![false; send_len.len()];
    let mut received_locally = vec![false; recv_len.len()];
    let self_sends = send_order.iter().copied().filter(|&i| nb.destinations[i] == me);
    let self_recvs = (0..recv_len.len()).filter(|&i| nb.sources[i] == me);
    for (si, ri) in self_sends.zip(self_recvs) {
        if send_len[si] == recv_len[ri] {
            steps.push(NeighborStep::Copy { send: si, recv: ri });
            sent_locally[si] = true;
            received_locally[ri] = true;
        }
    }
    for (i, &peer) in nb.sources.iter().enumerate() {
        if peer != c::MPI_PROC_NULL && !received_locally[i] {
            steps.push(NeighborStep::Recv(i));
        }
    }
    for i in send_order {
        if nb.destinations[i] != c::MPI_PROC_NULL && !sent_locally[i] {
            steps.push(NeighborStep::Send(i));
        }
    }
    steps
}

/// Fills `s` with the neighbourhood exchange of [`neighbor_plan`], in one round: `send[i]` and
/// `recv[i]` are the windows of the blocks.
pub fn neighbor_exchange(s: &mut Schedule, cart: bool, nb: &Neighbors, send: &[Loc], recv: &[Loc]) {
    let send_len: Vec<usize> = send.iter().map(|l| l.len).collect();
    let recv_len: Vec<usize> = recv.iter().map(|l| l.len).collect();
    for step in neighbor_plan(s.rank(), cart, nb, &send_len, &recv_len) {
        match step {
            NeighborStep::Copy { send: si, recv: ri } => s.copy(send[si], recv[ri]),
            NeighborStep::Recv(i) => s.recv(nb.sources[i], recv[i]),
            NeighborStep::Send(i) => s.send(nb.destinations[i], send[i]),
        }
    }
    s.end_round();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_create_known_answers() {
        assert_eq!(dims_create(6, &[0, 0]).unwrap(), vec![3, 2]);
        assert_eq!(dims_create(7, &[0, 0, 0]).unwrap(), vec![7, 1, 1]);
        assert_eq!(dims_create(16, &[0, 0, 0]).unwrap(), vec![4, 2, 2]);
        assert_eq!(dims_create(24, &[0, 0, 0]).unwrap(), vec![4, 3, 2]);
        assert_eq!(dims_create(36, &[0, 0, 0]).unwrap(), vec![4, 3, 3]);
        assert_eq!(dims_create(100, &[0, 0]).unwrap(), vec![10, 10]);
        assert_eq!(dims_create(1, &[0, 0, 0]).unwrap(), vec![1, 1, 1]);
        assert_eq!(dims_create(12, &[0, 3, 0]).unwrap(), vec![2, 3, 2]);
        assert_eq!(dims_create(12, &[0, 0, 0, 0]).unwrap(), vec![3, 2, 2, 1]);
        assert_eq!(dims_create(8, &[2, 4]).unwrap(), vec![2, 4]);
        assert_eq!(dims_create(1, &[]).unwrap(), Vec::<i32>::new());
        assert_eq!(dims_create(1 << 20, &[0; 20]).unwrap(), vec![2; 20]);
        assert_eq!(dims_create(2_147_483_647, &[0, 0]).unwrap(), vec![2_147_483_647, 1]);
        // Equal spreads: the larger smallest entry wins.
        assert_eq!(dims_create(5040, &[0, 0, 0]).unwrap(), vec![21, 16, 15]);
        assert_eq!(dims_create(5040, &[0, 7, 0, 0]).unwrap(), vec![10, 7, 9, 8]);
    }

    #[test]
    fn dims_create_is_balanced_and_sorted() {
        for n in 1..400 {
            for k in 1..5 {
                let d = dims_create(n, &vec![0; k]).unwrap();
                assert_eq!(d.iter().product::<i32>(), n);
                assert!(d.windows(2).all(|w| w[0] >= w[1]), "{n} on {k}: {d:?}");
                // No other factorization has a smaller spread, or the same spread and a larger
                // smallest entry.
                let mut all = Vec::new();
                factorizations(n as u64, k, n as u64, &mut Vec::new(), &mut all);
                let key = |f: &[u64]| (f[0] - f[f.len() - 1], std::cmp::Reverse(f[f.len() - 1]));
                let best = all.iter().map(|f| key(f)).min().unwrap();
                let got: Vec<u64> = d.iter().map(|&x| x as u64).collect();
                assert_eq!(key(&got), best, "{n} on {k}: {d:?}");
            }
        }
    }

    /// Every non-increasing factorization of `n` into `k` factors none above `m` (brute force).
    fn factorizations(n: u64, k: usize, m: u64, cur: &mut Vec<u64>, out: &mut Vec<Vec<u64>>) {
        if k == 0 {
            if n == 1 {
                out.push(cur.clone());
            }
            return;
        }
        for d in 1..=m.min(n) {
            if n.is_multiple_of(d) {
                cur.push(d);
                factorizations(n / d, k - 1, d, cur, out);
                cur.pop();
            }
        }
    }

    #[test]
    fn dims_create_large_inputs_are_quick() {
        // Highly composite sizes with many dimensions must not take long.
        for (n, k) in [(735_134_400, 3), (720_720, 8), (1 << 30, 30), (2_147_483_646, 4)] {
            let d = dims_create(n, &vec![0; k]).unwrap();
            assert_eq!(d.iter().map(|&x| x as i64).product::<i64>(), n as i64);
        }
    }

    #[test]
    fn dims_create_errors() {
        let class = |r: Result<Vec<i32>>| r.unwrap_err().class;
        assert_eq!(class(dims_create(7, &[2, 0])), c::MPI_ERR_DIMS);
        assert_eq!(class(dims_create(6, &[-1, 0])), c::MPI_ERR_DIMS);
        assert_eq!(class(dims_create(6, &[2, 2])), c::MPI_ERR_DIMS);
        assert_eq!(class(dims_create(0, &[0])), c::MPI_ERR_ARG);
        assert_eq!(class(dims_create(2, &[])), c::MPI_ERR_DIMS);
    }

    fn grid(dims: &[i32], periods: &[bool]) -> Cart {
        Cart::new("t", dims, periods, dims.iter().product()).unwrap()
    }

    #[test]
    fn cart_coords_round_trip_row_major() {
        let g = grid(&[3, 4, 2], &[false, true, false]);
        assert_eq!(g.size(), 24);
        for r in 0..24 {
            let c = g.coords(r);
            assert_eq!(c, vec![r / 8, (r / 2) % 4, r % 2]);
            assert_eq!(g.rank_of("t", &c).unwrap(), r);
        }
        // Periodic dimension 1 wraps, non-periodic dimension 0 rejects.
        assert_eq!(g.rank_of("t", &[1, -1, 1]).unwrap(), g.rank_of("t", &[1, 3, 1]).unwrap());
        assert_eq!(g.rank_of("t", &[1, 9, 0]).unwrap(), g.rank_of("t", &[1, 1, 0]).unwrap());
        assert_eq!(g.rank_of("t", &[3, 0, 0]).unwrap_err().class, c::MPI_ERR_ARG);
        let zero = grid(&[], &[]);
        assert_eq!((zero.size(), zero.coords(0), zero.rank_of("t", &[]).unwrap()), (1, vec![], 0));
    }

    #[test]
    fn cart_shift_periodic_and_borders() {
        let ring = grid(&[5], &[true]);
        assert_eq!(ring.shift(0, 0, 1), (4, 1));
        assert_eq!(ring.shift(4, 0, 1), (3, 0));
        assert_eq!(ring.shift(2, 0, -7), (4, 0));
        assert_eq!(ring.shift(2, 0, 0), (2, 2));
        let line = grid(&[5], &[false]);
        assert_eq!(line.shift(0, 0, 1), (c::MPI_PROC_NULL, 1));
        assert_eq!(line.shift(4, 0, 1), (3, c::MPI_PROC_NULL));
        assert_eq!(line.shift(2, 0, 3), (c::MPI_PROC_NULL, c::MPI_PROC_NULL));
        assert_eq!(line.shift(2, 0, i32::MIN), (c::MPI_PROC_NULL, c::MPI_PROC_NULL));
        let torus = grid(&[2, 3], &[true, true]);
        // rank 4 is (1,1): dimension 1 neighbours (1,0)=3 and (1,2)=5; dimension 0 (0,1)=1 twice.
        assert_eq!(torus.shift(4, 1, 1), (3, 5));
        assert_eq!(torus.shift(4, 0, 1), (1, 1));
    }

    #[test]
    fn cart_sub_keeps_the_sub_grid() {
        let g = grid(&[2, 3, 4], &[true, false, true]);
        // Rank 17 is (1, 1, 1). Keeping dimensions 0 and 2: the 2x4 grid with middle coord 1.
        let s = g.sub(17, &[true, false, true]);
        assert_eq!(s.cart, Cart { dims: vec![2, 4], periods: vec![true, true] });
        let expect: Vec<i32> = (0..8).map(|k| (k / 4) * 12 + 4 + k % 4).collect();
        assert_eq!(s.members, expect);
        assert_eq!(s.rank, 5);
        assert_eq!(s.members[s.rank as usize], 17);
        // Siblings get distinct colors, members of one sub-grid the same.
        let colors: Vec<i32> = (0..24).map(|r| g.sub(r, &[true, false, true]).color).collect();
        for a in 0..24 {
            for b in 0..24 {
                assert_eq!(colors[a] == colors[b], g.coords(a as i32)[1] == g.coords(b as i32)[1]);
            }
        }
        let none = g.sub(17, &[false, false, false]);
        assert_eq!((none.cart.size(), none.members.clone(), none.rank), (1, vec![17], 0));
    }

    #[test]
    fn cart_errors() {
        assert_eq!(Cart::new("t", &[2, 0], &[false, false], 4).unwrap_err().class, c::MPI_ERR_DIMS);
        assert_eq!(Cart::new("t", &[3, 2], &[false, false], 4).unwrap_err().class, c::MPI_ERR_ARG);
        assert_eq!(Cart::new("t", &[1 << 16, 1 << 16], &[false, false], 4).unwrap_err().class, c::MPI_ERR_ARG);
        assert!(Cart::new("t", &[2, 2], &[false, false], 5).is_ok());
    }

    #[test]
    fn cart_neighbors_order() {
        let t = Topology::Cart(grid(&[3, 2], &[false, true]));
        // Rank 0 is (0,0): dim 0 below is off the grid, above is (1,0)=2; dim 1 wraps to (0,1)=1.
        let n = t.neighbors(0);
        assert_eq!(n.sources, vec![c::MPI_PROC_NULL, 2, 1, 1]);
        assert_eq!(n.sources, n.destinations);
        assert_eq!(t.kind(), c::MPI_CART);
    }

    #[test]
    fn graph_neighbors_and_errors() {
        // The standard's example: 4 nodes, 0-1, 0-3, 1-0, 2-3, 3-0, 3-2.
        let g = Graph::new("t", vec![2, 3, 4, 6], vec![1, 3, 0, 3, 0, 2], 4).unwrap();
        assert_eq!(g.neighbors(0), &[1, 3]);
        assert_eq!(g.neighbors(1), &[0]);
        assert_eq!(g.neighbors(3), &[0, 2]);
        assert_eq!(Topology::Graph(g).neighbors(3).destinations, vec![0, 2]);
        assert_eq!(Graph::edge_count("t", &[2, 1]).unwrap_err().class, c::MPI_ERR_ARG);
        assert_eq!(Graph::new("t", vec![1, 2], vec![0, 2], 4).unwrap_err().class, c::MPI_ERR_RANK);
        assert_eq!(Graph::new("t", vec![0; 5], vec![], 4).unwrap_err().class, c::MPI_ERR_ARG);
        let empty = Graph::new("t", vec![0, 0], vec![], 2).unwrap();
        assert!(empty.neighbors(1).is_empty());
    }

    #[test]
    fn neighbor_plan_pairs_blocks() {
        use NeighborStep::*;
        let two = Topology::Cart(grid(&[2], &[true]));
        // Both neighbours of rank 0 are rank 1: the +1 block goes first, so it meets the
        // receiver's first receive, the one from its -1 neighbour.
        let p = neighbor_plan(0, true, &two.neighbors(0), &[4, 4], &[4, 4]);
        assert_eq!(p, vec![Recv(0), Recv(1), Send(1), Send(0)]);
        // Alone on a periodic dimension: the -1 block comes back as the +1 block.
        let one = Topology::Cart(grid(&[1, 3], &[true, false]));
        let p = neighbor_plan(0, true, &one.neighbors(0), &[4; 4], &[4; 4]);
        assert_eq!(p, vec![Copy { send: 1, recv: 0 }, Copy { send: 0, recv: 1 }, Recv(3), Send(3)]);
        // A graph's self-loops pair in list order; a length mismatch goes to the engine.
        let me_twice = Neighbors { sources: vec![0, 2, 0], destinations: vec![0, 0] };
        let p = neighbor_plan(0, false, &me_twice, &[4, 8], &[4, 4, 4]);
        assert_eq!(p, vec![Copy { send: 0, recv: 0 }, Recv(1), Recv(2), Send(1)]);
        // MPI_PROC_NULL moves nothing.
        let line = Topology::Cart(grid(&[3], &[false]));
        let p = neighbor_plan(0, true, &line.neighbors(0), &[4, 4], &[4, 4]);
        assert_eq!(p, vec![Recv(1), Send(1)]);
    }

    #[test]
    fn weighting_merge() {
        use Weighting::*;
        assert_eq!(Either.merge(Weighted), Some(Weighted));
        assert_eq!(Unweighted.merge(Either), Some(Unweighted));
        assert_eq!(Either.merge(Either), Some(Either));
        assert_eq!(Unweighted.merge(Weighted), None);
    }

    #[test]
    fn dist_graph_redistributes_edges() {
        // 3 processes. P0 says 0->1 (w5), 0->2 (w6); P1 says 2->0 (w7); P2 says 1->1 (w8), 1->0 (w9).
        let shares = [
            EdgeShare::new("t", 3, &[0], &[2], &[1, 2], &[5, 6], Weighting::Weighted).unwrap(),
            EdgeShare::new("t", 3, &[2], &[1], &[0], &[7], Weighting::Weighted).unwrap(),
            EdgeShare::new("t", 3, &[1], &[2], &[1, 0], &[8, 9], Weighting::Weighted).unwrap(),
        ];
        let bytes: Vec<Vec<u8>> = shares.iter().map(|s| EdgeShare::encode(Some(s))).collect();
        let g0 = DistGraph::from_shares("t", 0, &bytes).unwrap();
        assert_eq!((g0.sources.clone(), g0.source_weights.clone()), (vec![2, 1], vec![7, 9]));
        assert_eq!((g0.destinations.clone(), g0.dest_weights.clone()), (vec![1, 2], vec![5, 6]));
        let g1 = DistGraph::from_shares("t", 1, &bytes).unwrap();
        assert_eq!((g1.sources.clone(), g1.source_weights.clone()), (vec![0, 1], vec![5, 8]));
        assert_eq!((g1.destinations.clone(), g1.dest_weights.clone()), (vec![1, 0], vec![8, 9]));
        assert!(g1.weighted);
        let n = Topology::DistGraph(g1).neighbors(1);
        assert_eq!((n.sources, n.destinations), (vec![0, 1], vec![1, 0]));
    }

    #[test]
    fn dist_graph_weighting_and_errors() {
        let unw = EdgeShare::new("t", 2, &[0], &[1], &[1], &[], Weighting::Unweighted).unwrap();
        let none = EdgeShare::new("t", 2, &[], &[], &[], &[], Weighting::Either).unwrap();
        let wtd = EdgeShare::new("t", 2, &[1], &[1], &[0], &[3], Weighting::Weighted).unwrap();
        let enc = |s: &EdgeShare| EdgeShare::encode(Some(s));
        let g = DistGraph::from_shares("t", 1, &[enc(&unw), enc(&none)]).unwrap();
        assert!(!g.weighted);
        assert_eq!(g.sources, vec![0]);
        let mixed = DistGraph::from_shares("t", 1, &[enc(&unw), enc(&wtd)]);
        assert_eq!(mixed.unwrap_err().class, c::MPI_ERR_ARG);
        let failed = DistGraph::from_shares("t", 0, &[enc(&none), EdgeShare::encode(None)]);
        assert_eq!(failed.unwrap_err().class, c::MPI_ERR_ARG);
        let e = EdgeShare::new("t", 2, &[0], &[1], &[2], &[], Weighting::Unweighted).unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_RANK);
        let e = EdgeShare::new("t", 2, &[0], &[-1], &[], &[], Weighting::Unweighted).unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_ARG);
        let a = DistGraph::adjacent(
            "t",
            4,
            (vec![1, 2], vec![], Weighting::Unweighted),
            (vec![3], vec![], Weighting::Unweighted),
        )
        .unwrap();
        assert!(!a.weighted);
        assert_eq!(a.dest_weights, vec![1]);
        let bad = DistGraph::adjacent(
            "t",
            4,
            (vec![1], vec![], Weighting::Unweighted),
            (vec![3], vec![2], Weighting::Weighted),
        );
        assert_eq!(bad.unwrap_err().class, c::MPI_ERR_ARG);
        let bad =
            DistGraph::adjacent("t", 4, (vec![4], vec![], Weighting::Unweighted), (vec![], vec![], Weighting::Either));
        assert_eq!(bad.unwrap_err().class, c::MPI_ERR_RANK);
    }
}
