//! The collectives without a root on every algorithm, size and memory: barrier, allreduce,
//! allgather and allgatherv, alltoall and alltoallv, reduce-scatter (block and v), scan and exscan.

use crate::buffers::{junk, pattern, put_blocks, tbufs, TBuf};
use crate::matrix::{algos, counts, pow2, reduction_cases, symmetric_block_cases, BlockCase, Matrix};
use crate::ops::ReductionBufs;
use crate::sim::Sim;
use crate::{BIG_BLOCK, BIG_ELEMS, NS};
use baton_core::coll::algo::{self, Algo, Coll};
use baton_core::coll::schedule::{Loc, Schedule};

#[test]
fn barrier_waits_for_the_last_arrival() {
    let mut m = Matrix::new("barrier");
    for n in NS {
        for (name, a) in algos(Coll::Barrier) {
            for stagger in [0, 3] {
                m.case(true, format_args!("{name} n={n} stagger={stagger}"), |v, label| {
                    let sim = Sim::new(n, v.proto, v.seed);
                    let mut jobs: Vec<Vec<Schedule>> =
                        sim.scheds("MPI_Barrier", |_, s| algo::barrier(s, a)).into_iter().map(|s| vec![s]).collect();
                    // Arrivals in a scrambled rank order.
                    let start: Vec<usize> = (0..n).map(|r| stagger * ((r * 7 + 3) % n)).collect();
                    let done = sim.run_all(label, &mut jobs, &start);
                    let last = *start.iter().max().unwrap();
                    for (r, d) in done.iter().enumerate() {
                        assert!(
                            d[0] >= last,
                            "{label}: rank {r} left at pass {} before the last arrival at {last}",
                            d[0]
                        );
                    }
                });
            }
        }
    }
}

#[test]
fn allreduce_every_algorithm() {
    let mut m = Matrix::new("allreduce");
    for (n, name, a, op) in reduction_cases(Coll::Allreduce) {
        for count in counts(n, BIG_ELEMS) {
            // Rabenseifner and the ring cut the vector into n pieces combined in the order
            // they meet: commutative operations on at least n elements only.
            if matches!(a, Algo::Rabenseifner | Algo::Ring) && !(op.commutative() && count >= n) {
                continue;
            }
            for in_place in [false, true] {
                let what = format_args!("{name} {op:?} n={n} count={count} in_place={in_place}");
                m.case(count == BIG_ELEMS, what, |v, label| {
                    let sim = Sim::new(n, v.proto, v.seed);
                    let bufs = ReductionBufs::new(v.mem, n, op, count, in_place);
                    sim.run_ok(label, "MPI_Allreduce", |r, s| {
                        let (sl, d) = bufs.regions(r, s);
                        algo::allreduce(s, a, sl, d);
                    });
                    let want = op.combined(0, n, 0, count);
                    for r in 0..n {
                        bufs.check(label, r, &want);
                    }
                });
            }
        }
    }
}

/// Allgather (uniform blocks in one region, or each block a region of its own) and
/// Allgatherv (assorted sizes, scattered, each block its own region).
#[test]
fn allgather_every_algorithm() {
    let colls = [(Coll::Allgather, "allgather"), (Coll::Allgatherv, "allgatherv")];
    let skip = |a: Algo, n: usize| a == Algo::RecursiveDoubling && !pow2(n);
    symmetric_block_cases("allgather", colls, skip, |v, label, c| {
        let BlockCase { n, a, v_form, b, in_place, .. } = c;
        // Uniform blocks as separate regions half the time: a message spanning several blocks is
        // then received whole and spread over them.
        let split = v_form || v.seed % 2 == 0;
        let (sizes, offs, total) = c.layout(|i| (i * 3 + b) % 10);
        let mine = |r: usize| pattern(r, 4, sizes[r]);
        let sim = Sim::new(n, v.proto, v.seed);
        let mut wants = Vec::new();
        let dst = tbufs(v.mem, n, |r| {
            let mut init = junk(r, total);
            if in_place {
                init[offs[r]..offs[r] + sizes[r]].copy_from_slice(&mine(r));
            }
            let mut want = init.clone();
            put_blocks(&mut want, &offs, mine);
            wants.push(want);
            init
        });
        let src = tbufs(v.mem, n, mine);
        sim.run_ok(label, "MPI_Allgather", |r, s| {
            let bl = dst[r].block_locs(s, split, &offs, &sizes);
            let sl = (!in_place).then(|| src[r].region(s));
            algo::allgather(s, a, sl, &bl);
        });
        for r in 0..n {
            assert!(dst[r].get() == wants[r], "{label}: wrong bytes at rank {r}");
            assert!(src[r].get() == mine(r), "{label}: rank {r}'s input was modified");
        }
    });
}

/// Alltoall (uniform, every algorithm) and Alltoallv (assorted sizes per pair, scattered, each
/// block its own region; symmetric sizes when in place, as `MPI_IN_PLACE` requires).
#[test]
fn alltoall_every_algorithm() {
    let colls = [(Coll::Alltoall, "alltoall"), (Coll::Alltoallv, "alltoallv")];
    let skip_none = |_: Algo, _: usize| false;
    symmetric_block_cases("alltoall", colls, skip_none, |v, label, c| {
        let BlockCase { n, a, v_form, b, in_place, .. } = c;
        // size(i, j): the bytes rank i sends to rank j.
        let size = |i: usize, j: usize| match (v_form, in_place) {
            (false, _) => b,
            (true, false) => (i * 3 + j * 5 + b) % 9,
            (true, true) => (i + j + b) % 7,
        };
        let block = |i: usize, j: usize| pattern(i, 1000 + j, size(i, j));
        let split = v_form || v.seed % 2 == 0;
        // Rank r's send (or receive) side: sizes, offsets, buffer length.
        let side = |r: usize, recv: bool| c.layout(|j| if recv { size(j, r) } else { size(r, j) });
        let sim = Sim::new(n, v.proto, v.seed);
        let (mut src, mut sent, mut dst, mut wants) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in 0..n {
            let (_, so, st) = side(r, false);
            let mut whole = junk(r + 100, st);
            put_blocks(&mut whole, &so, |j| block(r, j));
            let (_, dofs, dt) = side(r, true);
            let init = if in_place { whole.clone() } else { junk(r, dt) };
            let mut want = init.clone();
            put_blocks(&mut want, &dofs, |i| block(i, r));
            src.push(TBuf::new(v.mem, &whole));
            sent.push(whole);
            dst.push(TBuf::new(v.mem, &init));
            wants.push(want);
        }
        sim.run_ok(label, "MPI_Alltoall", |r, s| {
            let (ds, dofs, _) = side(r, true);
            let dl = dst[r].block_locs(s, split, &dofs, &ds);
            let sl: Option<Vec<Loc>> = (!in_place).then(|| {
                let (ss, so, _) = side(r, false);
                src[r].block_locs(s, split, &so, &ss)
            });
            algo::alltoall(s, a, sl.as_deref(), &dl);
        });
        for r in 0..n {
            assert!(dst[r].get() == wants[r], "{label}: wrong bytes at rank {r}");
            if !in_place {
                assert!(src[r].get() == sent[r], "{label}: rank {r}'s input was modified");
            }
        }
    });
}

/// Reduce_scatter_block (equal counts) and Reduce_scatter (assorted counts, some zero); in
/// place as the C layer builds it: the whole vector and the result are two regions over the
/// same memory.
#[test]
fn reduce_scatter_every_algorithm() {
    let mut m = Matrix::new("reduce_scatter");
    for (n, name, a, op) in reduction_cases(Coll::ReduceScatter) {
        match a {
            Algo::RecursiveHalving if !(op.commutative() && pow2(n)) => continue,
            Algo::Pairwise if !op.commutative() => continue,
            _ => {}
        }
        for equal in [true, false] {
            for c in counts(n, BIG_BLOCK) {
                for in_place in [false, true] {
                    let what = format_args!("{name} {op:?} n={n} count={c} equal={equal} in_place={in_place}");
                    m.case(c == BIG_BLOCK, what, |v, label| {
                        let cnt: Vec<usize> = (0..n).map(|i| if equal { c } else { (i * 5 + c) % 6 }).collect();
                        let first: Vec<usize> = (0..n).map(|i| cnt[..i].iter().sum()).collect();
                        let total: usize = cnt.iter().sum();
                        let u = op.unit();
                        let sim = Sim::new(n, v.proto, v.seed);
                        let src = tbufs(v.mem, n, |r| op.input(r, total));
                        let dst = tbufs(v.mem, n, |r| junk(r, cnt[r] * u));
                        sim.run_ok(label, "MPI_Reduce_scatter", |r, s| {
                            s.set_reducer(op.reducer());
                            let whole = src[r].region(s);
                            let d = if in_place { src[r].window(s, 0, cnt[r] * u) } else { dst[r].region(s) };
                            let bl: Vec<Loc> = (0..n).map(|i| whole.at(first[i] * u, cnt[i] * u)).collect();
                            algo::reduce_scatter(s, a, whole, &bl, d);
                        });
                        for r in 0..n {
                            let want = op.combined(0, n, first[r], cnt[r]);
                            if in_place {
                                let got = src[r].get();
                                assert!(got[..cnt[r] * u] == want[..], "{label}: wrong result at rank {r}");
                            } else {
                                assert!(dst[r].get() == want, "{label}: wrong result at rank {r}");
                                assert!(src[r].get() == op.input(r, total), "{label}: rank {r}'s input was modified");
                            }
                        }
                    });
                }
            }
        }
    }
}

/// Scan and Exscan (rank 0's exclusive result is undefined: its buffer must be left alone).
#[test]
fn scan_every_algorithm() {
    let mut m = Matrix::new("scan");
    for (n, name, a, op) in reduction_cases(Coll::Scan) {
        for exclusive in [false, true] {
            let form = if exclusive { "exclusive" } else { "inclusive" };
            for count in counts(n, BIG_ELEMS) {
                for in_place in [false, true] {
                    let what = format_args!("{form} {name} {op:?} n={n} count={count} in_place={in_place}");
                    m.case(count == BIG_ELEMS, what, |v, label| {
                        let sim = Sim::new(n, v.proto, v.seed);
                        let bufs = ReductionBufs::new(v.mem, n, op, count, in_place);
                        sim.run_ok(label, "MPI_Scan", |r, s| {
                            let (sl, d) = bufs.regions(r, s);
                            algo::scan(s, a, sl, d, exclusive);
                        });
                        for r in 0..n {
                            let want = match (exclusive, r) {
                                (true, 0) => op.initial(0, count, in_place),
                                (true, _) => op.combined(0, r, 0, count),
                                (false, _) => op.combined(0, r + 1, 0, count),
                            };
                            bufs.check(label, r, &want);
                        }
                    });
                }
            }
        }
    }
}
