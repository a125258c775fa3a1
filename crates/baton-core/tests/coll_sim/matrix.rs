//! Which cases run, and on which wire and memory: the algorithms of each collective, the counts
//! and roots tried, and [`Matrix`], which gives consecutive cases every combination of wire and
//! memory in turn.

use crate::buffers::{Mem, MEMS, MIXED};
use crate::sim::{Proto, PROTOS};
use baton_core::coll::algo::{Algo, Coll};
use baton_core::coll::schedule::Schedule;

fn algo_of(name: &str) -> Algo {
    match name {
        "dissemination" => Algo::Dissemination,
        "binomial" => Algo::Binomial,
        "scatter_allgather" => Algo::ScatterAllgather,
        "recursive_doubling" => Algo::RecursiveDoubling,
        "rabenseifner" => Algo::Rabenseifner,
        "ring" => Algo::Ring,
        "reduce_bcast" => Algo::ReduceBcast,
        "linear" => Algo::Linear,
        "bruck" => Algo::Bruck,
        "pairwise" => Algo::Pairwise,
        "mesh" => Algo::Mesh,
        "reduce_scatterv" => Algo::ReduceScatterv,
        "recursive_halving" => Algo::RecursiveHalving,
        other => panic!("algorithm {other} is not covered by these tests: add it"),
    }
}

/// Every algorithm of `coll` that runs on messages (shared memory needs a real segment).
pub fn algos(coll: Coll) -> Vec<(&'static str, Algo)> {
    coll.algos().iter().filter(|&&a| a != "shm").map(|&a| (a, algo_of(a))).collect()
}

pub fn pow2(n: usize) -> bool {
    n.is_power_of_two()
}

/// Counts (bytes or elements): none, one, odd, fewer than n, a few more than n, a few KiB.
pub fn counts(n: usize, big: usize) -> Vec<usize> {
    let mut v = vec![0, 1, 7, n.saturating_sub(1), n + 3, big];
    v.sort_unstable();
    v.dedup();
    v
}

/// Every root at small n, else the ends and the middle.
pub fn roots(n: usize) -> Vec<usize> {
    if n <= 5 {
        (0..n).collect()
    } else {
        vec![0, 1, n / 2, n - 1]
    }
}

/// The wire, memory kind and driver seed of one run of a case.
pub struct Variant {
    pub proto: Proto,
    pub mem: Mem,
    pub seed: u64,
}

/// Numbers the runs of one test and gives each a variant: consecutive runs take every
/// combination of wire and memory in turn.
pub struct Matrix {
    name: &'static str,
    k: usize,
}

impl Matrix {
    pub fn new(name: &'static str) -> Matrix {
        Matrix { name, k: 0 }
    }

    /// Runs case `what` once, or once per wire with `every_wire` (the largest sizes, where
    /// the protocols differ most).
    pub fn case(&mut self, every_wire: bool, what: std::fmt::Arguments, mut f: impl FnMut(&Variant, &str)) {
        for _ in 0..if every_wire { PROTOS.len() } else { 1 } {
            let k = self.k;
            self.k += 1;
            let v = Variant { proto: PROTOS[k % 3], mem: MEMS[(k / 3) % MEMS.len()], seed: k as u64 };
            // Mixed memory depends on the case alone, whichever thread runs it.
            MIXED.with(|c| c.set(k));
            let label = format!("{} {what} [{:?} wire, {:?} memory, seed {}]", self.name, v.proto, v.mem, v.seed);
            f(&v, &label);
        }
    }
}

pub fn check_no_error(label: &str, scheds: &mut [Schedule]) {
    for (r, s) in scheds.iter_mut().enumerate() {
        if let Err(e) = s.take_error() {
            panic!("{label}: rank {r} reported {}", e.msg);
        }
    }
}
