//! The rooted collectives on every algorithm, size, root and memory: bcast, reduce, gather and
//! gatherv, scatter and scatterv.

use crate::buffers::{blocks, junk, pattern, placement, uniform, TBuf};
use crate::matrix::{algos, check_no_error, counts, roots, Matrix};
use crate::ops::OPS;
use crate::sim::Sim;
use crate::{BIG_BYTES, BIG_ELEMS, NS};
use baton_core::coll::algo::{self, Algo, Coll};
use baton_core::coll::schedule::Loc;

#[test]
fn bcast_every_algorithm() {
    let mut m = Matrix::new("bcast");
    for n in NS {
        for (name, a) in algos(Coll::Bcast) {
            for len in counts(n, BIG_BYTES) {
                for root in roots(n) {
                    m.case(len == BIG_BYTES, format_args!("{name} n={n} bytes={len} root={root}"), |v, label| {
                        let sim = Sim::new(n, v.proto, v.seed);
                        let bufs: Vec<TBuf> = (0..n)
                            .map(|r| TBuf::new(v.mem, &if r == root { pattern(root, 1, len) } else { junk(r, len) }))
                            .collect();
                        let scheds = (0..n)
                            .map(|r| {
                                let mut s = sim.sched(r, "MPI_Bcast");
                                let l = bufs[r].region(&mut s);
                                algo::bcast(&mut s, a, root as i32, l);
                                s
                            })
                            .collect();
                        check_no_error(label, &mut sim.run(label, scheds));
                        for (r, b) in bufs.iter().enumerate() {
                            assert!(b.get() == pattern(root, 1, len), "{label}: rank {r} holds the wrong bytes");
                        }
                    });
                }
            }
        }
    }
}

#[test]
fn reduce_every_algorithm() {
    let mut m = Matrix::new("reduce");
    for n in NS {
        for (name, a) in algos(Coll::Reduce) {
            for op in OPS {
                for count in counts(n, BIG_ELEMS) {
                    for root in roots(n) {
                        for in_place in [false, true] {
                            let what =
                                format_args!("{name} {op:?} n={n} count={count} root={root} in_place={in_place}");
                            m.case(count == BIG_ELEMS, what, |v, label| {
                                let sim = Sim::new(n, v.proto, v.seed);
                                let len = count * op.unit();
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, count))).collect();
                                let init = if in_place { op.input(root, count) } else { junk(root, len) };
                                let dst = TBuf::new(v.mem, &init);
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Reduce");
                                        s.set_reducer(op.reducer());
                                        let d = (r == root).then(|| dst.region(&mut s));
                                        let sl = match d {
                                            Some(d) if in_place => d,
                                            _ => src[r].region(&mut s),
                                        };
                                        algo::reduce(&mut s, a, root as i32, sl, d);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                assert!(dst.get() == op.combined(0, n, 0, count), "{label}: wrong result at the root");
                                for (r, b) in src.iter().enumerate() {
                                    assert!(b.get() == op.input(r, count), "{label}: rank {r}'s input was modified");
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Gather (uniform blocks, every algorithm) and Gatherv (blocks of assorted sizes, scattered
/// in the root's buffer, each its own region; linear, the one algorithm for it).
#[test]
fn gather_every_algorithm() {
    let mut m = Matrix::new("gather");
    for n in NS {
        for (name, a) in algos(Coll::Gather) {
            for v_form in [false, true] {
                if v_form && a == Algo::Binomial {
                    continue;
                }
                let form = if v_form { "gatherv" } else { "gather" };
                for b in counts(n, BIG_BYTES) {
                    for root in roots(n) {
                        for in_place in [false, true] {
                            let what = format_args!("{form} {name} n={n} bytes={b} root={root} in_place={in_place}");
                            m.case(b == BIG_BYTES, what, |v, label| {
                                let sizes: Vec<usize> =
                                    (0..n).map(|i| if v_form { (i * 5 + b) % 11 } else { b }).collect();
                                let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                                let mine = |r: usize| pattern(r, 2, sizes[r]);
                                let mut init = junk(root, total);
                                if in_place {
                                    init[offs[root]..offs[root] + sizes[root]].copy_from_slice(&mine(root));
                                }
                                let mut want = init.clone();
                                for i in 0..n {
                                    want[offs[i]..offs[i] + sizes[i]].copy_from_slice(&mine(i));
                                }
                                let sim = Sim::new(n, v.proto, v.seed);
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &mine(r))).collect();
                                let dst = TBuf::new(v.mem, &init);
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Gather");
                                        let bl: Vec<Loc> = if r != root {
                                            Vec::new()
                                        } else if v_form {
                                            (0..n).map(|i| dst.window(&mut s, offs[i], sizes[i])).collect()
                                        } else {
                                            blocks(dst.region(&mut s), n, b)
                                        };
                                        let sl = (!(in_place && r == root)).then(|| src[r].region(&mut s));
                                        algo::gather(&mut s, a, root as i32, sl, &bl, sizes[r]);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                assert!(dst.get() == want, "{label}: wrong bytes at the root");
                                for (r, s) in src.iter().enumerate() {
                                    assert!(s.get() == mine(r), "{label}: rank {r}'s input was modified");
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Scatter (uniform, every algorithm) and Scatterv (assorted sizes, linear).
#[test]
fn scatter_every_algorithm() {
    let mut m = Matrix::new("scatter");
    for n in NS {
        for (name, a) in algos(Coll::Scatter) {
            for v_form in [false, true] {
                if v_form && a == Algo::Binomial {
                    continue;
                }
                let form = if v_form { "scatterv" } else { "scatter" };
                for b in counts(n, BIG_BYTES) {
                    for root in roots(n) {
                        for in_place in [false, true] {
                            let what = format_args!("{form} {name} n={n} bytes={b} root={root} in_place={in_place}");
                            m.case(b == BIG_BYTES, what, |v, label| {
                                let sizes: Vec<usize> =
                                    (0..n).map(|i| if v_form { (i * 7 + b) % 13 } else { b }).collect();
                                let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                                let theirs = |r: usize| pattern(r, 3, sizes[r]);
                                let mut whole = junk(root, total);
                                for i in 0..n {
                                    whole[offs[i]..offs[i] + sizes[i]].copy_from_slice(&theirs(i));
                                }
                                let sim = Sim::new(n, v.proto, v.seed);
                                let src = TBuf::new(v.mem, &whole);
                                let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &junk(r, sizes[r]))).collect();
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Scatter");
                                        let bl: Vec<Loc> = if r != root {
                                            Vec::new()
                                        } else if v_form {
                                            (0..n).map(|i| src.window(&mut s, offs[i], sizes[i])).collect()
                                        } else {
                                            blocks(src.region(&mut s), n, b)
                                        };
                                        let dl = (!(in_place && r == root)).then(|| dst[r].region(&mut s));
                                        algo::scatter(&mut s, a, root as i32, &bl, dl, sizes[r]);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                assert!(src.get() == whole, "{label}: the root's send buffer was modified");
                                for (r, d) in dst.iter().enumerate() {
                                    let want = if in_place && r == root { junk(r, sizes[r]) } else { theirs(r) };
                                    assert!(d.get() == want, "{label}: wrong bytes at rank {r}");
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}
