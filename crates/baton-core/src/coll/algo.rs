//! Collective algorithms: each fills a [`Schedule`] for the calling rank.
//!
//! Every function here sees only byte counts, ranks and windows ([`Loc`]), and decides message
//! boundaries from byte counts alone, so ranks with different datatypes (same signature) build
//! matching schedules. Buffers come as windows: `blocks[i]` is rank `i`'s block of a gathered or
//! scattered buffer; `None` for a source means `MPI_IN_PLACE` (the data already sits in the
//! destination).
//!
//! [`Algo`] names the algorithms; [`choose`] picks one per call, from the sizes or from
//! `BATON_COLL_<COLLECTIVE>`. It is the only place that decides, for the shared-memory fast
//! paths as for schedules. When the forced algorithm cannot serve a call (e.g. a ring allreduce
//! for a non-commutative operation; [`unfit`] says why), `BATON_COLL_FALLBACK` ([`Fallback`])
//! decides: another algorithm runs, silently or with a warning, or the call fails.
//! [`Chooser`] holds these settings; tests build their own.
//!
//! Alltoall's algorithms live in `algo/alltoall.rs`, reduce-scatter's and the scans' in
//! `algo/reduce_scatter.rs`, gather's and scatter's in `algo/rooted.rs`; the others here.

use super::schedule::{Loc, Schedule};
use crate::error::{MpiError, Result};
use crate::shm_coll::ShmKind;
use baton_abi::consts as c;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

mod allreduce;
mod alltoall;
mod reduce_scatter;
mod rooted;

pub use allreduce::allreduce;
pub use alltoall::alltoall;
pub use reduce_scatter::{reduce_scatter, scan};
pub use rooted::{gather, scatter, Flow};

/// The collectives whose algorithm can be chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coll {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Scatter,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    ReduceScatter,
    Scan,
}

/// Every collective whose algorithm can be chosen, in declaration order.
pub const COLLS: [Coll; 12] = [
    Coll::Barrier,
    Coll::Bcast,
    Coll::Reduce,
    Coll::Allreduce,
    Coll::Gather,
    Coll::Scatter,
    Coll::Allgather,
    Coll::Allgatherv,
    Coll::Alltoall,
    Coll::Alltoallv,
    Coll::ReduceScatter,
    Coll::Scan,
];

// The chooser's tables are indexed by `Coll as usize`.
const _: () = {
    let mut i = 0;
    while i < COLLS.len() {
        assert!(COLLS[i] as usize == i, "COLLS lists the collectives in declaration order");
        i += 1;
    }
};

/// Every algorithm, by the name `BATON_COLL_*` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    Dissemination,
    Binomial,
    ScatterAllgather,
    RecursiveDoubling,
    Rabenseifner,
    Ring,
    ReduceBcast,
    Linear,
    Bruck,
    Pairwise,
    Mesh,
    ReduceScatterv,
    RecursiveHalving,
    Shm,
}

/// Every algorithm by the name `BATON_COLL_*` gives it.
const NAMES: [(&str, Algo); 14] = [
    ("dissemination", Algo::Dissemination),
    ("binomial", Algo::Binomial),
    ("scatter_allgather", Algo::ScatterAllgather),
    ("recursive_doubling", Algo::RecursiveDoubling),
    ("rabenseifner", Algo::Rabenseifner),
    ("ring", Algo::Ring),
    ("reduce_bcast", Algo::ReduceBcast),
    ("linear", Algo::Linear),
    ("bruck", Algo::Bruck),
    ("pairwise", Algo::Pairwise),
    ("mesh", Algo::Mesh),
    ("reduce_scatterv", Algo::ReduceScatterv),
    ("recursive_halving", Algo::RecursiveHalving),
    ("shm", Algo::Shm),
];

impl Algo {
    /// The algorithm `BATON_COLL_*` calls `s`.
    pub fn parse(s: &str) -> Option<Algo> {
        NAMES.iter().find(|(n, _)| *n == s).map(|&(_, a)| a)
    }

    /// The name `BATON_COLL_*` gives this algorithm.
    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(_, a)| *a == self).map_or("?", |(n, _)| n)
    }
}

impl Coll {
    /// The setting that forces this collective's algorithm (`BATON_COLL_<NAME>`), which also
    /// holds the list of its algorithms' names.
    pub fn setting(self) -> &'static baton_settings::Setting<&'static str> {
        use baton_settings as s;
        match self {
            Coll::Barrier => &s::COLL_BARRIER,
            Coll::Bcast => &s::COLL_BCAST,
            Coll::Reduce => &s::COLL_REDUCE,
            Coll::Allreduce => &s::COLL_ALLREDUCE,
            Coll::Gather => &s::COLL_GATHER,
            Coll::Scatter => &s::COLL_SCATTER,
            Coll::Allgather => &s::COLL_ALLGATHER,
            Coll::Allgatherv => &s::COLL_ALLGATHERV,
            Coll::Alltoall => &s::COLL_ALLTOALL,
            Coll::Alltoallv => &s::COLL_ALLTOALLV,
            Coll::ReduceScatter => &s::COLL_REDUCE_SCATTER,
            Coll::Scan => &s::COLL_SCAN,
        }
    }

    pub fn env_name(self) -> &'static str {
        self.setting().meta.name
    }

    /// The algorithms this collective has, the first being the general fallback.
    pub fn algos(self) -> &'static [&'static str] {
        self.setting().meta.algorithms()
    }
}

/// The algorithms forced by the environment, read once, by collective (in [`COLLS`] order); a
/// name the registry lists but this file lacks is an error every collective of that kind reports.
fn forced_by_env() -> &'static [std::result::Result<Option<Algo>, String>] {
    static FORCED: OnceLock<Vec<std::result::Result<Option<Algo>, String>>> = OnceLock::new();
    FORCED.get_or_init(|| {
        COLLS
            .iter()
            .map(|&k| match k.setting().get() {
                // `MPI_Init` has refused names not in the collective's list; an error here
                // means the registry lists an algorithm this file does not implement, which
                // its test prevents.
                "auto" => Ok(None),
                v => Algo::parse(v)
                    .map(Some)
                    .ok_or_else(|| format!("{}={v}: this build has no such algorithm", k.env_name())),
            })
            .collect()
    })
}

/// `BATON_COLL_FALLBACK`, read once: what a forced algorithm that cannot serve a call leads to.
fn fallback_by_env() -> std::result::Result<Fallback, String> {
    static POLICY: OnceLock<std::result::Result<Fallback, String>> = OnceLock::new();
    POLICY
        .get_or_init(|| {
            Ok(match baton_settings::COLL_FALLBACK.get() {
                "warn" => Fallback::Warn,
                "error" => Fallback::Error,
                _ => Fallback::Silent,
            })
        })
        .clone()
}

/// What happens when the algorithm `BATON_COLL_<NAME>` forces cannot serve a call (a ring
/// allreduce for a non-commutative operation, shared memory for a message too large for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// The call runs the algorithm chosen without the variable.
    Silent,
    /// The same, and the first such call of each collective says so on stderr.
    Warn,
    /// The call fails with an error naming the call, the variable, the algorithm and why:
    /// a test that forces an algorithm learns where it did not run.
    Error,
}

/// What [`choose`] looks at.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shape {
    /// Processes in the communicator.
    pub n: i32,
    /// Bytes of the whole vector (reductions, bcast) or of one block (gather, alltoall, ...).
    pub bytes: usize,
    /// Whether every block has the same size (regular, not `v`, collectives).
    pub uniform: bool,
    /// Whether the reduction is commutative (true when there is none).
    pub commutative: bool,
    /// Elements of the reduction's datatype (reductions only; splitting needs whole elements).
    pub elems: usize,
    /// Whether the communicator has a shared-memory collective area.
    pub shm: bool,
}

impl Shape {
    /// The shape of a call on `comm` moving `bytes`.
    pub fn of(comm: &crate::comm::Comm, bytes: usize) -> Shape {
        Shape { n: comm.size(), bytes, uniform: true, commutative: true, elems: 0, shm: comm.shm.get().is_some() }
    }
}

/// Why an algorithm cannot serve a call (see [`unfit`]); its `Display` is the reason as the
/// messages give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfit {
    NotCommutative,
    /// Fewer elements than processes: the vector cannot be split among them.
    FewElements {
        elems: usize,
        n: usize,
    },
    NotPowerOfTwo {
        n: usize,
    },
    Uneven,
    NoArea,
    /// More bytes per process than the shared-memory area takes.
    TooLarge {
        bytes: usize,
    },
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Unfit::NotCommutative => write!(f, "the operation is not commutative"),
            Unfit::FewElements { elems, n } => write!(f, "{elems} elements are fewer than the {n} processes"),
            Unfit::NotPowerOfTwo { n } => write!(f, "{n} processes are not a power of two"),
            Unfit::Uneven => write!(f, "the blocks differ in size"),
            Unfit::NoArea => write!(f, "the communicator has no shared-memory collective area"),
            Unfit::TooLarge { bytes } => {
                write!(f, "{bytes} bytes per process exceed the {} the area takes", crate::shm_coll::MAX_BYTES)
            }
        }
    }
}

/// Why algorithm `a` cannot serve `coll` on `sh`; None when it can.
#[inline]
pub fn unfit(coll: Coll, a: Algo, sh: &Shape) -> Option<Unfit> {
    let n = sh.n.max(0) as usize;
    let commutes = || (!sh.commutative).then_some(Unfit::NotCommutative);
    let enough = || (sh.elems < n).then_some(Unfit::FewElements { elems: sh.elems, n });
    let pow2 = || (!n.is_power_of_two()).then_some(Unfit::NotPowerOfTwo { n });
    let uniform = || (!sh.uniform).then_some(Unfit::Uneven);
    let shm = |bytes: usize| {
        if !sh.shm {
            Some(Unfit::NoArea)
        } else if bytes > crate::shm_coll::MAX_BYTES {
            Some(Unfit::TooLarge { bytes })
        } else {
            uniform()
        }
    };
    match a {
        Algo::Rabenseifner => commutes().or_else(enough),
        Algo::Ring if coll == Coll::Allreduce => commutes().or_else(enough),
        Algo::RecursiveHalving => commutes().or_else(pow2),
        Algo::Pairwise if coll == Coll::ReduceScatter => commutes(),
        Algo::Binomial if matches!(coll, Coll::Gather | Coll::Scatter) => uniform(),
        Algo::Bruck | Algo::Mesh => uniform(),
        Algo::RecursiveDoubling if coll == Coll::Allgather => pow2(),
        // An alltoall process publishes a block for every rank at once.
        Algo::Shm if coll == Coll::Alltoall => shm(sh.bytes.saturating_mul(n)),
        Algo::Shm => shm(sh.bytes),
        _ => None,
    }
}

/// The choice of algorithms: those forced (by collective, indexed by `Coll as usize`; an error for a
/// name that does not exist) and what happens when a forced one cannot serve a call.
/// [`choose`] uses the environment's; tests make their own.
pub struct Chooser {
    forced: Vec<std::result::Result<Option<Algo>, String>>,
    fallback: std::result::Result<Fallback, String>,
    /// Whether a [`Fallback::Warn`] line was written, by collective.
    warned: [AtomicBool; COLLS.len()],
}

impl Chooser {
    /// `forced` algorithms and the `fallback` policy, as given.
    pub fn new(forced: &[(Coll, Algo)], fallback: Fallback) -> Chooser {
        let forced = COLLS.iter().map(|k| Ok(forced.iter().find(|(c, _)| c == k).map(|&(_, a)| a))).collect::<Vec<_>>();
        Chooser { forced, fallback: Ok(fallback), warned: Default::default() }
    }

    /// `BATON_COLL_<NAME>` and `BATON_COLL_FALLBACK`, read once.
    pub fn from_env() -> &'static Chooser {
        static ENV: OnceLock<Chooser> = OnceLock::new();
        ENV.get_or_init(|| Chooser {
            forced: forced_by_env().to_vec(),
            fallback: fallback_by_env(),
            warned: Default::default(),
        })
    }

    /// The algorithm for `call` (a call of collective `coll` on `sh`): the forced one if it can
    /// serve the call, else one chosen by size, or, under [`Fallback::Error`], an error. On one
    /// process every algorithm serves (none has anything to send).
    #[inline]
    pub fn choose(&self, coll: Coll, call: &str, sh: Shape) -> Result<Algo> {
        let a = match &self.forced[coll as usize] {
            Ok(None) => return Ok(auto(coll, &sh)),
            Ok(Some(a)) => *a,
            Err(m) => return Err(MpiError::new(c::MPI_ERR_ARG, m.clone())),
        };
        match unfit(coll, a, &sh) {
            Some(why) if sh.n > 1 => self.fall_back(coll, a, call, why).map(|()| auto(coll, &sh)),
            _ => Ok(a),
        }
    }

    /// What the policy says when forced algorithm `a` cannot serve `call`: Ok to run another.
    #[cold]
    fn fall_back(&self, coll: Coll, a: Algo, call: &str, why: Unfit) -> Result<()> {
        let policy = self.fallback.clone().map_err(|m| MpiError::new(c::MPI_ERR_ARG, m))?;
        let what = format!("{}={} cannot serve this call ({why})", coll.env_name(), a.name());
        match policy {
            Fallback::Error => {
                return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: {what}; BATON_COLL_FALLBACK=error")))
            }
            Fallback::Warn if !self.warned[coll as usize].swap(true, Ordering::Relaxed) => {
                eprintln!("baton: {call}: {what}; another algorithm runs (BATON_COLL_FALLBACK=warn; said once per collective)")
            }
            _ => {}
        }
        Ok(())
    }
}

/// The algorithm for a call of `coll` on `sh`, as [`Chooser::from_env`] chooses it.
#[inline]
pub fn choose(coll: Coll, call: &str, sh: Shape) -> Result<Algo> {
    Chooser::from_env().choose(coll, call, sh)
}

/// The algorithm chosen by size, process count and operation, which always serves the call.
#[inline]
pub(crate) fn auto(coll: Coll, sh: &Shape) -> Algo {
    let pow2 = || sh.n > 0 && (sh.n & (sh.n - 1)) == 0;
    let applies = |a: Algo| unfit(coll, a, sh).is_none();
    match coll {
        Coll::Barrier | Coll::Bcast | Coll::Reduce | Coll::Allreduce | Coll::Allgather | Coll::Alltoall
            if applies(Algo::Shm) && sh.n > 1 =>
        {
            Algo::Shm
        }
        Coll::Barrier => Algo::Dissemination,
        Coll::Bcast => {
            if sh.bytes >= 128 * 1024 && sh.n > 2 {
                Algo::ScatterAllgather
            } else {
                Algo::Binomial
            }
        }
        Coll::Reduce => Algo::Binomial,
        Coll::Allreduce => {
            if sh.bytes > 16 * 1024 && applies(Algo::Rabenseifner) {
                Algo::Rabenseifner
            } else {
                Algo::RecursiveDoubling
            }
        }
        Coll::Gather | Coll::Scatter => {
            if sh.uniform && sh.bytes * (sh.n as usize) <= 32 * 1024 && sh.n > 2 {
                Algo::Binomial
            } else {
                Algo::Linear
            }
        }
        Coll::Allgather => {
            if sh.bytes * (sh.n as usize) > 64 * 1024 {
                Algo::Ring
            } else if pow2() {
                Algo::RecursiveDoubling
            } else {
                Algo::Bruck
            }
        }
        Coll::Allgatherv => Algo::Ring,
        Coll::Alltoall => {
            if sh.n >= 16 && sh.bytes <= 256 {
                Algo::Mesh
            } else if sh.n <= 8 {
                Algo::Linear
            } else {
                Algo::Pairwise
            }
        }
        Coll::Alltoallv => {
            if sh.n <= 8 {
                Algo::Linear
            } else {
                Algo::Pairwise
            }
        }
        Coll::ReduceScatter => {
            if applies(Algo::RecursiveHalving) {
                Algo::RecursiveHalving
            } else if sh.commutative {
                Algo::Pairwise
            } else {
                Algo::ReduceScatterv
            }
        }
        Coll::Scan => Algo::RecursiveDoubling,
    }
}

// ----- helpers -----

fn ring_idx(i: i32, n: i32) -> i32 {
    i.rem_euclid(n)
}

/// Cuts `len` bytes into `parts` windows at multiples of `unit` (the first ones may be larger).
fn split(whole: Loc, unit: usize, parts: usize) -> Vec<Loc> {
    let unit = unit.max(1);
    let elems = whole.len / unit;
    (0..parts)
        .map(|i| {
            let a = i * elems / parts;
            let b = (i + 1) * elems / parts;
            let end = if i + 1 == parts { whole.len } else { b * unit };
            whole.at(a * unit, end - a * unit)
        })
        .collect()
}

/// The window covering windows `chunks[a..b]` (adjacent by construction).
fn span(chunks: &[Loc], a: usize, b: usize) -> Loc {
    if a >= b {
        return chunks[a.min(chunks.len() - 1)].at(0, 0);
    }
    let first = chunks[a];
    let last = chunks[b - 1];
    Loc { region: first.region, off: first.off, len: last.off + last.len - first.off }
}

/// A window to accumulate into: the destination itself when it is plain memory, else scratch
/// (a non-contiguous destination would be packed and unpacked at every step).
fn accumulator(s: &mut Schedule, dst: Loc) -> Loc {
    if s.is_plain(dst) {
        dst
    } else {
        s.scratch(dst.len)
    }
}

// ----- barrier -----

/// Dissemination barrier: ⌈log2 n⌉ rounds; in round k each rank signals rank+2^k.
pub fn barrier(s: &mut Schedule, a: Algo) {
    let (n, me) = (s.size(), s.rank());
    if a == Algo::Shm && n > 1 {
        return s.shm(ShmKind::Barrier, None, None, 0);
    }
    let empty = s.scratch(0);
    let mut k = 1;
    while k < n {
        s.send(ring_idx(me + k, n), empty);
        s.recv(ring_idx(me - k, n), empty);
        s.end_round();
        k *= 2;
    }
}

// ----- bcast -----

pub fn bcast(s: &mut Schedule, a: Algo, root: i32, buf: Loc) {
    if s.size() == 1 {
        return;
    }
    match a {
        Algo::Shm => {
            let src = (s.rank() == root).then_some(buf);
            s.shm(ShmKind::Bcast { root: root as usize }, src, Some(buf), buf.len)
        }
        Algo::ScatterAllgather => bcast_scatter_allgather(s, root, buf),
        _ => bcast_binomial(s, root, buf),
    }
}

fn bcast_binomial(s: &mut Schedule, root: i32, buf: Loc) {
    let (n, me) = (s.size(), s.rank());
    let vr = ring_idx(me - root, n);
    let real = |v: i32| (v + root) % n;
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            s.recv(real(vr - mask), buf);
            s.end_round();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            s.send(real(vr + mask), buf);
        }
        mask >>= 1;
    }
    s.end_round();
}

/// Binomial scatter of n pieces, then a ring allgather of them: each link carries about the
/// message once instead of log n times.
fn bcast_scatter_allgather(s: &mut Schedule, root: i32, buf: Loc) {
    let (n, me) = (s.size(), s.rank());
    let vr = ring_idx(me - root, n);
    let real = |v: i32| (v + root) % n;
    let chunks = split(buf, 1, n as usize);
    let sub = |v: i32, m: i32| span(&chunks, v as usize, (v + m).min(n) as usize);
    let low = if vr == 0 { (n as u32).next_power_of_two() as i32 } else { vr & -vr };
    if vr != 0 {
        s.recv(real(vr - low), sub(vr, low));
        s.end_round();
    }
    let mut m = low >> 1;
    while m > 0 {
        if vr + m < n {
            s.send(real(vr + m), sub(vr + m, m));
        }
        m >>= 1;
    }
    s.end_round();
    let (left, right) = (real(ring_idx(vr - 1, n)), real((vr + 1) % n));
    for i in 0..n - 1 {
        s.send(right, chunks[ring_idx(vr - i, n) as usize]);
        s.recv(left, chunks[ring_idx(vr - i - 1, n) as usize]);
        s.end_round();
    }
}

// ----- reduce -----

/// Reduces `src` of every rank into `dst` at `root` (binomial tree). For a non-commutative
/// operation the tree is built on unrotated ranks, so every subtree is a run of consecutive
/// ranks combined in order, and rank 0 forwards the result to the root.
pub fn reduce(s: &mut Schedule, a: Algo, root: i32, src: Loc, dst: Option<Loc>) {
    if a == Algo::Shm && s.size() > 1 {
        return s.shm(ShmKind::Reduce { root: root as usize }, Some(src), dst, src.len);
    }
    reduce_binomial(s, root, src, dst)
}

fn reduce_binomial(s: &mut Schedule, root: i32, src: Loc, dst: Option<Loc>) {
    let (n, me) = (s.size(), s.rank());
    let commutative = s.reducer().is_none_or(|r| r.commutative);
    let base = if commutative { root } else { 0 };
    let vr = ring_idx(me - base, n);
    let real = |v: i32| (v + base) % n;
    let len = src.len;
    let low = if vr == 0 { (n as u32).next_power_of_two() as i32 } else { vr & -vr };
    let children: Vec<i32> = (0..31).map(|b| 1 << b).take_while(|&m| m < low).filter(|&m| vr + m < n).collect();
    let mut acc = src;
    if !children.is_empty() {
        acc = match dst {
            Some(d) if me == root => accumulator(s, d),
            _ => s.scratch(len),
        };
        // The first child's vector lands in the accumulator itself and this rank's, the lower,
        // is folded in from the left: no copy of the source first. Not in place, where the
        // accumulator is the source.
        let direct = acc != src;
        let tmps: Vec<Loc> =
            children.iter().enumerate().map(|(i, _)| if i == 0 && direct { acc } else { s.scratch(len) }).collect();
        for (m, t) in children.iter().zip(&tmps) {
            s.recv(real(vr + m), *t);
        }
        if direct {
            s.reduce(src, acc, true);
        }
        for t in tmps.into_iter().skip(direct as usize) {
            s.reduce(t, acc, false);
        }
        s.end_round();
    }
    if vr != 0 {
        s.send(real(vr - low), acc);
        s.end_round();
        if me == root {
            // Non-commutative with a root other than 0: the result comes from rank 0.
            s.recv(0, dst.expect("root has a receive buffer"));
            s.end_round();
        }
        return;
    }
    if me == root {
        s.copy(acc, dst.expect("root has a receive buffer"));
        s.end_round();
    } else {
        s.send(root, acc);
        s.end_round();
    }
}

// ----- allgather -----

/// Every rank's `src` into `blocks[rank]` everywhere (`src` None: in place in `blocks`).
pub fn allgather(s: &mut Schedule, a: Algo, src: Option<Loc>, blocks: &[Loc]) {
    let (n, me) = (s.size(), s.rank());
    let own = blocks[me as usize];
    let src = src.unwrap_or(own);
    match a {
        Algo::Shm if n > 1 => {
            // The blocks of a receive buffer lie end to end in its region; scratch otherwise.
            let b = own.len;
            match Loc::joined(blocks) {
                Some(all) => s.shm(ShmKind::Allgather, Some(src), Some(all), b),
                None => {
                    let t = s.scratch(n as usize * b);
                    s.shm(ShmKind::Allgather, Some(src), Some(t), b);
                    for (i, &l) in blocks.iter().enumerate() {
                        s.copy(t.at(i * b, b), l);
                    }
                }
            }
            s.end_round();
        }
        Algo::Bruck if n > 1 => {
            let b = own.len;
            let tmp = s.scratch(n as usize * b);
            s.copy(src, tmp.at(0, b));
            s.end_round();
            let mut k = 1;
            while k < n {
                let cnt = k.min(n - k) as usize;
                s.send(ring_idx(me - k, n), tmp.at(0, cnt * b));
                s.recv(ring_idx(me + k, n), tmp.at(k as usize * b, cnt * b));
                s.end_round();
                k *= 2;
            }
            for i in 0..n {
                s.copy(tmp.at(i as usize * b, b), blocks[ring_idx(me + i, n) as usize]);
            }
            s.end_round();
        }
        Algo::RecursiveDoubling if n > 1 => {
            // The first step sends the caller's block from where it lies (see the ring below).
            s.send(me ^ 1, src);
            s.recv(me ^ 1, blocks[(me ^ 1) as usize]);
            copy_own(s, src, own);
            s.end_round();
            let mut mask = 2;
            while mask < n {
                let peer = me ^ mask;
                let mine = (me & !(mask - 1)) as usize;
                let theirs = (peer & !(mask - 1)) as usize;
                s.send_v(peer, blocks[mine..mine + mask as usize].to_vec());
                s.recv_v(peer, blocks[theirs..theirs + mask as usize].to_vec());
                s.end_round();
                mask <<= 1;
            }
        }
        Algo::Linear => {
            for i in (0..n).filter(|&i| i != me) {
                s.send(i, src);
                s.recv(i, blocks[i as usize]);
            }
            s.copy(src, own);
            s.end_round();
        }
        _ if n == 1 => {
            copy_own(s, src, own);
            s.end_round();
        }
        _ => {
            // The first step sends the caller's block from where it lies and copies it into
            // place afterwards. Sending the fresh copy instead made the peer read lines this
            // process had just written: 64 KiB with 2 ranks took 20 µs, against 10 µs for a
            // copy and a sendrecv from the send buffer.
            let (left, right) = (ring_idx(me - 1, n), ring_idx(me + 1, n));
            s.send(right, src);
            s.recv(left, blocks[left as usize]);
            copy_own(s, src, own);
            s.end_round();
            for i in 1..n - 1 {
                s.send(right, blocks[ring_idx(me - i, n) as usize]);
                s.recv(left, blocks[ring_idx(me - i - 1, n) as usize]);
                s.end_round();
            }
        }
    }
}

/// Copies this rank's block into its place in the result, unless it is there already (in place).
fn copy_own(s: &mut Schedule, src: Loc, own: Loc) {
    if src != own {
        s.copy(src, own);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name the settings registry lists for a collective is one this file implements.
    #[test]
    fn every_listed_algorithm_is_implemented() {
        for k in COLLS {
            assert!(!k.algos().is_empty(), "{k:?}");
            for a in k.algos() {
                assert!(Algo::parse(a).is_some(), "{}: {a}", k.env_name());
            }
        }
    }
}
