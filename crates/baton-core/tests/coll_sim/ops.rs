//! The reductions the tests run ([`Op`]) and the results they must give, computed element by
//! element from rank and index; the buffers of a case in which every rank has a result
//! ([`ReductionBufs`]).

use crate::buffers::{junk, tbufs, word, Mem, TBuf};
use baton_core::coll::schedule::{Loc, Schedule};
use baton_core::coll::Reducer;
use std::sync::Arc;

/// The operations: wrapping addition of u64 (commutative) and composition of affine maps
/// x -> a·x + b on (a, b) pairs of u64 (not commutative, so a result shows the rank order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Affine,
}

pub const OPS: [Op; 2] = [Op::Sum, Op::Affine];

fn u64s(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

fn put(out: &mut [u8], words: impl IntoIterator<Item = u64>) {
    for (c, w) in out.chunks_exact_mut(8).zip(words) {
        c.copy_from_slice(&w.to_le_bytes());
    }
}

/// `(a, b) ∘ (c, d)`: x -> a·(c·x + d) + b.
fn compose(x: (u64, u64), y: (u64, u64)) -> (u64, u64) {
    (x.0.wrapping_mul(y.0), x.0.wrapping_mul(y.1).wrapping_add(x.1))
}

impl Op {
    pub fn unit(self) -> usize {
        match self {
            Op::Sum => 8,
            Op::Affine => 16,
        }
    }

    pub fn commutative(self) -> bool {
        self == Op::Sum
    }

    pub fn reducer(self) -> Reducer {
        let unit = self.unit();
        let f: Arc<baton_core::coll::ReduceFn> = match self {
            Op::Sum => Arc::new(move |input: &[u8], inout: &mut [u8]| {
                assert_eq!(input.len(), inout.len(), "a reduction over windows of different lengths");
                assert_eq!(inout.len() % unit, 0, "a reduction split inside an element");
                let sum: Vec<u64> = u64s(input).zip(u64s(inout)).map(|(a, b)| a.wrapping_add(b)).collect();
                put(inout, sum);
            }),
            Op::Affine => Arc::new(move |input: &[u8], inout: &mut [u8]| {
                assert_eq!(input.len(), inout.len(), "a reduction over windows of different lengths");
                assert_eq!(inout.len() % unit, 0, "a reduction split inside an element");
                let x: Vec<u64> = u64s(input).collect();
                let y: Vec<u64> = u64s(inout).collect();
                let out = x.chunks_exact(2).zip(y.chunks_exact(2)).flat_map(|(x, y)| {
                    let (a, b) = compose((x[0], x[1]), (y[0], y[1]));
                    [a, b]
                });
                put(inout, out.collect::<Vec<_>>());
            }),
        };
        Reducer { commutative: self.commutative(), unit, f }
    }

    /// Element `i` of rank `r`'s contribution, as u64 words.
    fn elem(self, r: usize, i: usize) -> Vec<u64> {
        match self {
            Op::Sum => vec![word(r, 5, i)],
            // Odd multipliers keep products odd: no information is lost mod 2^64.
            Op::Affine => vec![word(r, 6, i) | 1, word(r, 7, i)],
        }
    }

    /// Rank `r`'s `count` elements, packed.
    pub fn input(self, r: usize, count: usize) -> Vec<u8> {
        let mut v = vec![0u8; count * self.unit()];
        put(&mut v, (0..count).flat_map(|i| self.elem(r, i)));
        v
    }

    /// What rank `r`'s result buffer holds before a call on `count` elements: its input when
    /// the call works in place, else junk.
    pub fn initial(self, r: usize, count: usize, in_place: bool) -> Vec<u8> {
        if in_place {
            self.input(r, count)
        } else {
            junk(r, count * self.unit())
        }
    }

    /// Elements `[first, first+count)` combined over ranks `lo..hi` in rank order.
    pub fn combined(self, lo: usize, hi: usize, first: usize, count: usize) -> Vec<u8> {
        assert!(lo < hi);
        let mut v = vec![0u8; count * self.unit()];
        put(
            &mut v,
            (first..first + count).flat_map(|i| {
                (lo + 1..hi).fold(self.elem(lo, i), |acc, r| {
                    let y = self.elem(r, i);
                    match self {
                        Op::Sum => vec![acc[0].wrapping_add(y[0])],
                        Op::Affine => {
                            let (a, b) = compose((acc[0], acc[1]), (y[0], y[1]));
                            vec![a, b]
                        }
                    }
                })
            }),
        );
        v
    }
}

/// The buffers of a reduction in which every rank has a result of `count` elements (allreduce,
/// scan): each rank's input and its result buffer (see [`Op::initial`]).
pub struct ReductionBufs {
    op: Op,
    count: usize,
    in_place: bool,
    pub src: Vec<TBuf>,
    pub dst: Vec<TBuf>,
}

impl ReductionBufs {
    pub fn new(mem: Mem, n: usize, op: Op, count: usize, in_place: bool) -> ReductionBufs {
        let src = tbufs(mem, n, |r| op.input(r, count));
        let dst = tbufs(mem, n, |r| op.initial(r, count, in_place));
        ReductionBufs { op, count, in_place, src, dst }
    }

    /// Readies rank `r`'s schedule `s`: the operation's reducer, and the (send, receive)
    /// regions, both the result buffer in place.
    pub fn regions(&self, r: usize, s: &mut Schedule) -> (Loc, Loc) {
        s.set_reducer(self.op.reducer());
        let d = self.dst[r].region(s);
        let sl = if self.in_place { d } else { self.src[r].region(s) };
        (sl, d)
    }

    /// Fails case `label` unless rank `r` holds `want` and its input is as it was.
    pub fn check(&self, label: &str, r: usize, want: &[u8]) {
        assert!(self.dst[r].get() == want, "{label}: wrong result at rank {r}");
        assert!(self.src[r].get() == self.op.input(r, self.count), "{label}: rank {r}'s input was modified");
    }
}
