//! The collectives without a root on every algorithm, size and memory: barrier, allreduce,
//! allgather and allgatherv, alltoall and alltoallv, reduce-scatter (block and v), scan and exscan.

use crate::buffers::{blocks, junk, pattern, placement, uniform, TBuf};
use crate::matrix::{algos, check_no_error, counts, pow2, Matrix};
use crate::ops::OPS;
use crate::sim::Sim;
use crate::{BIG_BLOCK, BIG_BYTES, BIG_ELEMS, NS};
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
                    let mut jobs: Vec<Vec<Schedule>> = (0..n)
                        .map(|r| {
                            let mut s = sim.sched(r, "MPI_Barrier");
                            algo::barrier(&mut s, a);
                            vec![s]
                        })
                        .collect();
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
    for n in NS {
        for (name, a) in algos(Coll::Allreduce) {
            for op in OPS {
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
                            let len = count * op.unit();
                            let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, count))).collect();
                            let dst: Vec<TBuf> = (0..n)
                                .map(|r| TBuf::new(v.mem, &if in_place { op.input(r, count) } else { junk(r, len) }))
                                .collect();
                            let scheds = (0..n)
                                .map(|r| {
                                    let mut s = sim.sched(r, "MPI_Allreduce");
                                    s.set_reducer(op.reducer());
                                    let d = dst[r].region(&mut s);
                                    let sl = if in_place { d } else { src[r].region(&mut s) };
                                    algo::allreduce(&mut s, a, sl, d);
                                    s
                                })
                                .collect();
                            check_no_error(label, &mut sim.run(label, scheds));
                            let want = op.combined(0, n, 0, count);
                            for r in 0..n {
                                assert!(dst[r].get() == want, "{label}: wrong result at rank {r}");
                                assert!(src[r].get() == op.input(r, count), "{label}: rank {r}'s input was modified");
                            }
                        });
                    }
                }
            }
        }
    }
}

/// Allgather (uniform blocks in one region, or each block a region of its own) and
/// Allgatherv (assorted sizes, scattered, each block its own region).
#[test]
fn allgather_every_algorithm() {
    let mut m = Matrix::new("allgather");
    for n in NS {
        for v_form in [false, true] {
            let (coll, form) = if v_form { (Coll::Allgatherv, "allgatherv") } else { (Coll::Allgather, "allgather") };
            for (name, a) in algos(coll) {
                if a == Algo::RecursiveDoubling && !pow2(n) {
                    continue;
                }
                for b in counts(n, BIG_BYTES) {
                    for in_place in [false, true] {
                        let what = format_args!("{form} {name} n={n} bytes={b} in_place={in_place}");
                        m.case(b == BIG_BYTES, what, |v, label| {
                            // Uniform blocks as separate regions half the time: a message spanning
                            // several blocks is then received whole and spread over them.
                            let split = v_form || v.seed % 2 == 0;
                            let sizes: Vec<usize> = (0..n).map(|i| if v_form { (i * 3 + b) % 10 } else { b }).collect();
                            let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                            let mine = |r: usize| pattern(r, 4, sizes[r]);
                            let sim = Sim::new(n, v.proto, v.seed);
                            let mut wants = Vec::new();
                            let dst: Vec<TBuf> = (0..n)
                                .map(|r| {
                                    let mut init = junk(r, total);
                                    if in_place {
                                        init[offs[r]..offs[r] + sizes[r]].copy_from_slice(&mine(r));
                                    }
                                    let mut want = init.clone();
                                    for i in 0..n {
                                        want[offs[i]..offs[i] + sizes[i]].copy_from_slice(&mine(i));
                                    }
                                    wants.push(want);
                                    TBuf::new(v.mem, &init)
                                })
                                .collect();
                            let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &mine(r))).collect();
                            let scheds = (0..n)
                                .map(|r| {
                                    let mut s = sim.sched(r, "MPI_Allgather");
                                    let bl: Vec<Loc> = if split {
                                        (0..n).map(|i| dst[r].window(&mut s, offs[i], sizes[i])).collect()
                                    } else {
                                        blocks(dst[r].region(&mut s), n, b)
                                    };
                                    let sl = (!in_place).then(|| src[r].region(&mut s));
                                    algo::allgather(&mut s, a, sl, &bl);
                                    s
                                })
                                .collect();
                            check_no_error(label, &mut sim.run(label, scheds));
                            for r in 0..n {
                                assert!(dst[r].get() == wants[r], "{label}: wrong bytes at rank {r}");
                                assert!(src[r].get() == mine(r), "{label}: rank {r}'s input was modified");
                            }
                        });
                    }
                }
            }
        }
    }
}

/// Alltoall (uniform, every algorithm) and Alltoallv (assorted sizes per pair, scattered, each
/// block its own region; symmetric sizes when in place, as `MPI_IN_PLACE` requires).
#[test]
fn alltoall_every_algorithm() {
    let mut m = Matrix::new("alltoall");
    for n in NS {
        for v_form in [false, true] {
            let (coll, form) = if v_form { (Coll::Alltoallv, "alltoallv") } else { (Coll::Alltoall, "alltoall") };
            for (name, a) in algos(coll) {
                for b in counts(n, BIG_BYTES) {
                    for in_place in [false, true] {
                        let what = format_args!("{form} {name} n={n} bytes={b} in_place={in_place}");
                        m.case(b == BIG_BYTES, what, |v, label| {
                            // size(i, j): the bytes rank i sends to rank j.
                            let size = |i: usize, j: usize| match (v_form, in_place) {
                                (false, _) => b,
                                (true, false) => (i * 3 + j * 5 + b) % 9,
                                (true, true) => (i + j + b) % 7,
                            };
                            let block = |i: usize, j: usize| pattern(i, 1000 + j, size(i, j));
                            let split = v_form || v.seed % 2 == 0;
                            // Rank r's send (or receive) side: sizes, offsets, buffer length.
                            let side = |r: usize, recv: bool| {
                                let sizes: Vec<usize> =
                                    (0..n).map(|j| if recv { size(j, r) } else { size(r, j) }).collect();
                                let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                                (sizes, offs, total)
                            };
                            let sim = Sim::new(n, v.proto, v.seed);
                            let (mut src, mut sent, mut dst, mut wants) =
                                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                            for r in 0..n {
                                let (ss, so, st) = side(r, false);
                                let mut whole = junk(r + 100, st);
                                for j in 0..n {
                                    whole[so[j]..so[j] + ss[j]].copy_from_slice(&block(r, j));
                                }
                                let (ds, dofs, dt) = side(r, true);
                                let init = if in_place { whole.clone() } else { junk(r, dt) };
                                let mut want = init.clone();
                                for i in 0..n {
                                    want[dofs[i]..dofs[i] + ds[i]].copy_from_slice(&block(i, r));
                                }
                                src.push(TBuf::new(v.mem, &whole));
                                sent.push(whole);
                                dst.push(TBuf::new(v.mem, &init));
                                wants.push(want);
                            }
                            let scheds = (0..n)
                                .map(|r| {
                                    let mut s = sim.sched(r, "MPI_Alltoall");
                                    let (ds, dofs, _) = side(r, true);
                                    let dl: Vec<Loc> = if split {
                                        (0..n).map(|i| dst[r].window(&mut s, dofs[i], ds[i])).collect()
                                    } else {
                                        blocks(dst[r].region(&mut s), n, b)
                                    };
                                    let sl: Option<Vec<Loc>> = (!in_place).then(|| {
                                        let (ss, so, _) = side(r, false);
                                        if split {
                                            (0..n).map(|j| src[r].window(&mut s, so[j], ss[j])).collect()
                                        } else {
                                            blocks(src[r].region(&mut s), n, b)
                                        }
                                    });
                                    algo::alltoall(&mut s, a, sl.as_deref(), &dl);
                                    s
                                })
                                .collect();
                            check_no_error(label, &mut sim.run(label, scheds));
                            for r in 0..n {
                                assert!(dst[r].get() == wants[r], "{label}: wrong bytes at rank {r}");
                                if !in_place {
                                    assert!(src[r].get() == sent[r], "{label}: rank {r}'s input was modified");
                                }
                            }
                        });
                    }
                }
            }
        }
    }
}

/// Reduce_scatter_block (equal counts) and Reduce_scatter (assorted counts, some zero); in
/// place as the C layer builds it: the whole vector and the result are two regions over the
/// same memory.
#[test]
fn reduce_scatter_every_algorithm() {
    let mut m = Matrix::new("reduce_scatter");
    for n in NS {
        for (name, a) in algos(Coll::ReduceScatter) {
            for op in OPS {
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
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, total))).collect();
                                let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &junk(r, cnt[r] * u))).collect();
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Reduce_scatter");
                                        s.set_reducer(op.reducer());
                                        let whole = src[r].region(&mut s);
                                        let d = if in_place {
                                            src[r].window(&mut s, 0, cnt[r] * u)
                                        } else {
                                            dst[r].region(&mut s)
                                        };
                                        let bl: Vec<Loc> = (0..n).map(|i| whole.at(first[i] * u, cnt[i] * u)).collect();
                                        algo::reduce_scatter(&mut s, a, whole, &bl, d);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                for r in 0..n {
                                    let want = op.combined(0, n, first[r], cnt[r]);
                                    if in_place {
                                        let got = src[r].get();
                                        assert!(got[..cnt[r] * u] == want[..], "{label}: wrong result at rank {r}");
                                    } else {
                                        assert!(dst[r].get() == want, "{label}: wrong result at rank {r}");
                                        assert!(
                                            src[r].get() == op.input(r, total),
                                            "{label}: rank {r}'s input was modified"
                                        );
                                    }
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Scan and Exscan (rank 0's exclusive result is undefined: its buffer must be left alone).
#[test]
fn scan_every_algorithm() {
    let mut m = Matrix::new("scan");
    for n in NS {
        for (name, a) in algos(Coll::Scan) {
            for op in OPS {
                for exclusive in [false, true] {
                    let form = if exclusive { "exclusive" } else { "inclusive" };
                    for count in counts(n, BIG_ELEMS) {
                        for in_place in [false, true] {
                            let what = format_args!("{form} {name} {op:?} n={n} count={count} in_place={in_place}");
                            m.case(count == BIG_ELEMS, what, |v, label| {
                                let sim = Sim::new(n, v.proto, v.seed);
                                let len = count * op.unit();
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, count))).collect();
                                let init = |r: usize| if in_place { op.input(r, count) } else { junk(r, len) };
                                let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &init(r))).collect();
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Scan");
                                        s.set_reducer(op.reducer());
                                        let d = dst[r].region(&mut s);
                                        let sl = if in_place { d } else { src[r].region(&mut s) };
                                        algo::scan(&mut s, a, sl, d, exclusive);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                for r in 0..n {
                                    let want = match (exclusive, r) {
                                        (true, 0) => init(0),
                                        (true, _) => op.combined(0, r, 0, count),
                                        (false, _) => op.combined(0, r + 1, 0, count),
                                    };
                                    assert!(dst[r].get() == want, "{label}: wrong result at rank {r}");
                                    assert!(
                                        src[r].get() == op.input(r, count),
                                        "{label}: rank {r}'s input was modified"
                                    );
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}
