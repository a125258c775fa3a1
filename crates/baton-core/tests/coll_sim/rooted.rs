//! The rooted collectives on every algorithm, size, root and memory: bcast, reduce, gather and
//! gatherv, scatter and scatterv.

use crate::buffers::{junk, pattern, put_blocks, tbufs, TBuf};
use crate::matrix::{algos, counts, reduction_cases, rooted_block_cases, roots, BlockCase, Matrix};
use crate::sim::Sim;
use crate::{BIG_BYTES, BIG_ELEMS, NS};
use baton_core::coll::algo::{self, Coll};

#[test]
fn bcast_every_algorithm() {
    let mut m = Matrix::new("bcast");
    for n in NS {
        for (name, a) in algos(Coll::Bcast) {
            for len in counts(n, BIG_BYTES) {
                for root in roots(n) {
                    m.case(len == BIG_BYTES, format_args!("{name} n={n} bytes={len} root={root}"), |v, label| {
                        let sim = Sim::new(n, v.proto, v.seed);
                        let bufs = tbufs(v.mem, n, |r| if r == root { pattern(root, 1, len) } else { junk(r, len) });
                        sim.run_ok(label, "MPI_Bcast", |r, s| {
                            let l = bufs[r].region(s);
                            algo::bcast(s, a, root as i32, l);
                        });
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
    for (n, name, a, op) in reduction_cases(Coll::Reduce) {
        for count in counts(n, BIG_ELEMS) {
            for root in roots(n) {
                for in_place in [false, true] {
                    let what = format_args!("{name} {op:?} n={n} count={count} root={root} in_place={in_place}");
                    m.case(count == BIG_ELEMS, what, |v, label| {
                        let sim = Sim::new(n, v.proto, v.seed);
                        let src = tbufs(v.mem, n, |r| op.input(r, count));
                        let dst = TBuf::new(v.mem, &op.initial(root, count, in_place));
                        sim.run_ok(label, "MPI_Reduce", |r, s| {
                            s.set_reducer(op.reducer());
                            let d = (r == root).then(|| dst.region(s));
                            let sl = match d {
                                Some(d) if in_place => d,
                                _ => src[r].region(s),
                            };
                            algo::reduce(s, a, root as i32, sl, d);
                        });
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

/// Gather (uniform blocks, every algorithm) and Gatherv (blocks of assorted sizes, scattered
/// in the root's buffer, each its own region; linear, the one algorithm for it).
#[test]
fn gather_every_algorithm() {
    rooted_block_cases("gather", Coll::Gather, ["gather", "gatherv"], |v, label, c| {
        let BlockCase { n, a, v_form, b, root, in_place } = c;
        let (sizes, offs, total) = c.layout(|i| (i * 5 + b) % 11);
        let mine = |r: usize| pattern(r, 2, sizes[r]);
        let mut init = junk(root, total);
        if in_place {
            init[offs[root]..offs[root] + sizes[root]].copy_from_slice(&mine(root));
        }
        let mut want = init.clone();
        put_blocks(&mut want, &offs, mine);
        let sim = Sim::new(n, v.proto, v.seed);
        let src = tbufs(v.mem, n, mine);
        let dst = TBuf::new(v.mem, &init);
        sim.run_ok(label, "MPI_Gather", |r, s| {
            let bl = if r == root { dst.block_locs(s, v_form, &offs, &sizes) } else { Vec::new() };
            let sl = (!(in_place && r == root)).then(|| src[r].region(s));
            algo::gather(s, a, root as i32, sl, &bl, sizes[r]);
        });
        assert!(dst.get() == want, "{label}: wrong bytes at the root");
        for (r, s) in src.iter().enumerate() {
            assert!(s.get() == mine(r), "{label}: rank {r}'s input was modified");
        }
    });
}

/// Scatter (uniform, every algorithm) and Scatterv (assorted sizes, linear).
#[test]
fn scatter_every_algorithm() {
    rooted_block_cases("scatter", Coll::Scatter, ["scatter", "scatterv"], |v, label, c| {
        let BlockCase { n, a, v_form, b, root, in_place } = c;
        let (sizes, offs, total) = c.layout(|i| (i * 7 + b) % 13);
        let theirs = |r: usize| pattern(r, 3, sizes[r]);
        let mut whole = junk(root, total);
        put_blocks(&mut whole, &offs, theirs);
        let sim = Sim::new(n, v.proto, v.seed);
        let src = TBuf::new(v.mem, &whole);
        let dst = tbufs(v.mem, n, |r| junk(r, sizes[r]));
        sim.run_ok(label, "MPI_Scatter", |r, s| {
            let bl = if r == root { src.block_locs(s, v_form, &offs, &sizes) } else { Vec::new() };
            let dl = (!(in_place && r == root)).then(|| dst[r].region(s));
            algo::scatter(s, a, root as i32, &bl, dl, sizes[r]);
        });
        assert!(src.get() == whole, "{label}: the root's send buffer was modified");
        for (r, d) in dst.iter().enumerate() {
            let want = if in_place && r == root { junk(r, sizes[r]) } else { theirs(r) };
            assert!(d.get() == want, "{label}: wrong bytes at rank {r}");
        }
    });
}
