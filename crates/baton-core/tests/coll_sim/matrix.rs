//! Which cases run, and on which wire and memory: the algorithms of each collective, the counts
//! and roots tried, and [`Matrix`], which gives consecutive cases every combination of wire and
//! memory in turn.

use crate::buffers::{placement, uniform, Mem, MEMS, MIXED};
use crate::ops::{Op, OPS};
use crate::sim::{Proto, PROTOS};
use crate::{BIG_BYTES, NS};
use baton_core::coll::algo::{Algo, Coll};

fn algo_of(name: &str) -> Algo {
    match Algo::parse(name) {
        Some(Algo::Shm) | None => panic!("algorithm {name} is not covered by these tests: add it"),
        Some(a) => a,
    }
}

/// Every algorithm of `coll` that runs on messages (shared memory needs a real segment).
pub fn algos(coll: Coll) -> Vec<(&'static str, Algo)> {
    coll.algos().iter().filter(|&&a| a != "shm").map(|&a| (a, algo_of(a))).collect()
}

/// The outer loops of a reduction's cases: every size, algorithm (with its name) and operation.
pub fn reduction_cases(coll: Coll) -> impl Iterator<Item = (usize, &'static str, Algo, Op)> {
    NS.into_iter().flat_map(move |n| {
        algos(coll).into_iter().flat_map(move |(name, a)| OPS.into_iter().map(move |op| (n, name, a, op)))
    })
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

/// One case of a collective that moves a block per rank (gather, scatter, allgather, alltoall and
/// their `v` forms): `b` is the uniform block size, from which the `v` forms derive assorted
/// ones; `root` is 0 where the collective has none.
#[derive(Clone, Copy)]
pub struct BlockCase {
    pub n: usize,
    pub a: Algo,
    pub v_form: bool,
    pub b: usize,
    pub root: usize,
    pub in_place: bool,
}

impl BlockCase {
    /// The blocks of one buffer: their sizes (`v_size(i)` for block i in the `v` form, else `b`),
    /// their offsets (scattered by [`placement`] in the `v` form, else back to back) and the
    /// buffer's length.
    pub fn layout(&self, v_size: impl Fn(usize) -> usize) -> (Vec<usize>, Vec<usize>, usize) {
        let sizes: Vec<usize> = (0..self.n).map(|i| if self.v_form { v_size(i) } else { self.b }).collect();
        let (offs, total) = if self.v_form { placement(&sizes) } else { uniform(self.n, self.b) };
        (sizes, offs, total)
    }
}

/// Every case of a rooted block collective, `coll` and its `v` form (`forms`: the labels of the
/// two): each size, algorithm (binomial has no `v` form), form, block size, root and in-place
/// setting, as the cases of test `test`.
pub fn rooted_block_cases(
    test: &'static str,
    coll: Coll,
    forms: [&str; 2],
    mut f: impl FnMut(&Variant, &str, BlockCase),
) {
    let mut m = Matrix::new(test);
    for n in NS {
        for (name, a) in algos(coll) {
            for v_form in [false, true] {
                if v_form && a == Algo::Binomial {
                    continue;
                }
                let form = forms[v_form as usize];
                for b in counts(n, BIG_BYTES) {
                    for root in roots(n) {
                        for in_place in [false, true] {
                            let what = format_args!("{form} {name} n={n} bytes={b} root={root} in_place={in_place}");
                            let c = BlockCase { n, a, v_form, b, root, in_place };
                            m.case(b == BIG_BYTES, what, |v, label| f(v, label, c));
                        }
                    }
                }
            }
        }
    }
}

/// Every case of a block collective without a root: each size, form (`colls`: the plain and the
/// `v` collective with their labels), algorithm except where `skip(algorithm, n)`, block size and
/// in-place setting, as the cases of test `test`.
pub fn symmetric_block_cases(
    test: &'static str,
    colls: [(Coll, &str); 2],
    skip: impl Fn(Algo, usize) -> bool,
    mut f: impl FnMut(&Variant, &str, BlockCase),
) {
    let mut m = Matrix::new(test);
    for n in NS {
        for v_form in [false, true] {
            let (coll, form) = colls[v_form as usize];
            for (name, a) in algos(coll) {
                if skip(a, n) {
                    continue;
                }
                for b in counts(n, BIG_BYTES) {
                    for in_place in [false, true] {
                        let what = format_args!("{form} {name} n={n} bytes={b} in_place={in_place}");
                        let c = BlockCase { n, a, v_form, b, root: 0, in_place };
                        m.case(b == BIG_BYTES, what, |v, label| f(v, label, c));
                    }
                }
            }
        }
    }
}
