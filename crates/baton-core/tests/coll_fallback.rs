//! The chooser's strictness (`BATON_COLL_FALLBACK`): when the algorithm `BATON_COLL_<NAME>`
//! forces cannot serve a call, `error` fails the call with a message naming the call, the
//! variable, the algorithm and why; `silent` and `warn` hand the call to the algorithm chosen
//! without the variable, which always serves it. Every collective, every forced algorithm and a
//! grid of call shapes are checked against [`algo::unfit`]; then some fallbacks run on a small
//! simulator (one engine per rank, an eager-only network in memory, the ranks' schedules
//! advanced in turn until all complete) and must give the right result.

use baton_core::coll::algo::{self, Algo, Chooser, Coll, Fallback, Shape, COLLS};
use baton_core::coll::schedule::{Loc, Region, Schedule};
use baton_core::coll::Reducer;
use baton_core::comm::Comm;
use baton_core::engine::{Engine, Net, ProcIdx, Sender};
use baton_core::group::Group;
use baton_core::progress::EngineAccess;
use baton_transport::frame::Header;
use baton_transport::mem::{Scratch, UserBuf};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;

/// Shapes a call of `coll` can have: blocks of different sizes only where the collective has
/// a `v` form (allgatherv and alltoallv always say so).
fn shapes(coll: Coll) -> Vec<Shape> {
    let v_form = matches!(coll, Coll::Gather | Coll::Scatter | Coll::ReduceScatter);
    let mut out = Vec::new();
    for n in [1, 2, 3, 4, 5, 7, 8, 16, 17] {
        for bytes in [0, 8, 1000, baton_core::shm_coll::MAX_BYTES, baton_core::shm_coll::MAX_BYTES + 1, 1 << 20] {
            for uniform in [true, false] {
                let uniform = match coll {
                    Coll::Allgatherv | Coll::Alltoallv => false,
                    _ if !v_form => true,
                    _ => uniform,
                };
                for commutative in [true, false] {
                    for elems in [0, 3, 1000] {
                        for shm in [true, false] {
                            out.push(Shape { n, bytes, uniform, commutative, elems, shm });
                        }
                    }
                }
            }
        }
    }
    out
}

fn forced(coll: Coll) -> Vec<Algo> {
    coll.algos().iter().map(|a| Algo::parse(a).expect("every listed algorithm has a name")).collect()
}

fn call_of(coll: Coll) -> String {
    format!("MPI_{coll:?}")
}

#[test]
fn the_error_names_the_call_the_variable_the_algorithm_and_why() {
    let ch = Chooser::new(&[(Coll::Allreduce, Algo::Rabenseifner)], Fallback::Error);
    let sh = Shape { n: 4, bytes: 800, uniform: true, commutative: false, elems: 100, shm: true };
    let e = ch.choose(Coll::Allreduce, "MPI_Allreduce", sh).unwrap_err();
    assert_eq!(e.class, baton_abi::consts::MPI_ERR_ARG);
    assert_eq!(
        e.msg,
        "MPI_Allreduce: BATON_COLL_ALLREDUCE=rabenseifner cannot serve this call (the operation is not \
         commutative); BATON_COLL_FALLBACK=error"
    );
    let ch = Chooser::new(&[(Coll::Bcast, Algo::Shm)], Fallback::Error);
    let sh = Shape { n: 4, bytes: 1 << 20, uniform: true, commutative: true, elems: 0, shm: true };
    let e = ch.choose(Coll::Bcast, "MPI_Ibcast", sh).unwrap_err();
    assert!(e.msg.starts_with("MPI_Ibcast: BATON_COLL_BCAST=shm cannot serve this call (1048576 bytes"), "{}", e.msg);
    let sh = Shape { bytes: 8, shm: false, ..sh };
    let e = ch.choose(Coll::Bcast, "MPI_Bcast", sh).unwrap_err();
    assert!(e.msg.contains("(the communicator has no shared-memory collective area)"), "{}", e.msg);
}

#[test]
fn every_forced_algorithm_on_every_shape_under_every_policy() {
    let (mut fit, mut unfit) = (0, 0);
    for coll in COLLS {
        let call = call_of(coll);
        for sh in shapes(coll) {
            let auto = Chooser::new(&[], Fallback::Error).choose(coll, &call, sh).expect("nothing forced: no error");
            assert!(
                algo::unfit(coll, auto, &sh).is_none(),
                "{coll:?} on {sh:?}: the choice by size, {auto:?}, cannot serve"
            );
            for a in forced(coll) {
                let why = algo::unfit(coll, a, &sh).filter(|_| sh.n > 1);
                let label = format!("{coll:?} forced to {a:?} on {sh:?}");
                for policy in [Fallback::Silent, Fallback::Warn, Fallback::Error] {
                    let got = Chooser::new(&[(coll, a)], policy).choose(coll, &call, sh);
                    match (&why, policy) {
                        (None, _) => assert_eq!(got, Ok(a), "{label}, {policy:?}"),
                        (Some(_), Fallback::Silent | Fallback::Warn) => {
                            assert_eq!(got, Ok(auto), "{label}, {policy:?}")
                        }
                        (Some(why), Fallback::Error) => {
                            let want = format!(
                                "{call}: {}={} cannot serve this call ({why}); BATON_COLL_FALLBACK=error",
                                coll.env_name(),
                                a.name()
                            );
                            assert_eq!(got.map_err(|e| e.msg), Err(want), "{label}");
                        }
                    }
                }
                if why.is_some() {
                    unfit += 1;
                } else {
                    fit += 1;
                }
            }
        }
    }
    // Both branches must have been taken many times, or the grid tests nothing.
    assert!(fit > 1000 && unfit > 1000, "{fit} shapes fit, {unfit} did not");
}

#[test]
fn on_one_process_every_algorithm_serves() {
    for coll in COLLS {
        for a in forced(coll) {
            let sh = Shape { n: 1, bytes: 1 << 20, uniform: false, commutative: false, elems: 0, shm: false };
            let got = Chooser::new(&[(coll, a)], Fallback::Error).choose(coll, "MPI_X", sh);
            assert_eq!(got, Ok(a), "{coll:?} forced to {a:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A small simulator: eager messages only, delivered whole, in order.
// ---------------------------------------------------------------------------------------------

type Frame = (Header, Vec<u8>);

/// Frames in flight, `rings[from][to]`.
struct Wire {
    rings: Vec<Vec<VecDeque<Frame>>>,
}

struct Link<'a> {
    w: &'a mut Wire,
    me: ProcIdx,
}

impl Net for Link<'_> {
    fn try_send(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        self.w.rings[self.me as usize][to as usize].push_back((*h, payload.to_vec()));
        true
    }

    fn max_frame(&self, _to: ProcIdx) -> usize {
        1 << 30
    }

    fn eager_limit(&self, _to: ProcIdx, _sender: Sender) -> usize {
        1 << 30
    }

    fn read_remote(&mut self, _from: ProcIdx, _addr: u64, _dst: &UserBuf) -> bool {
        false
    }

    fn read_remote_into(&mut self, _from: ProcIdx, _addr: u64, _dst: &mut [u8]) -> bool {
        false
    }
}

struct Sim {
    world: RefCell<(Vec<Engine>, Wire)>,
    comms: Vec<Arc<Comm>>,
}

struct At<'a> {
    sim: &'a Sim,
    me: usize,
}

impl EngineAccess for At<'_> {
    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine, &mut dyn Net) -> R) -> R {
        let mut w = self.sim.world.borrow_mut();
        let (eng, wire) = &mut *w;
        f(&mut eng[self.me], &mut Link { w: wire, me: self.me as ProcIdx })
    }
}

impl Sim {
    fn new(n: usize) -> Sim {
        let group = Arc::new(Group::new((0..n as ProcIdx).collect()));
        let rings = (0..n).map(|_| (0..n).map(|_| VecDeque::new()).collect()).collect();
        Sim {
            world: RefCell::new(((0..n).map(|_| Engine::new()).collect(), Wire { rings })),
            comms: (0..n).map(|r| Arc::new(Comm::new(0x5eed_0000, group.clone(), r as i32))).collect(),
        }
    }

    /// One schedule per rank, each built by `build(rank, schedule)`, run to completion.
    fn run(&self, call: &'static str, mut build: impl FnMut(usize, &mut Schedule)) {
        let n = self.comms.len();
        let mut scheds: Vec<Schedule> = (0..n)
            .map(|r| {
                let mut s = Schedule::new(self.comms[r].clone(), call);
                build(r, &mut s);
                s
            })
            .collect();
        let mut done = vec![false; n];
        for _ in 0..100_000 {
            for r in 0..n {
                if !done[r] {
                    done[r] = scheds[r].progress(&At { sim: self, me: r });
                }
            }
            let mut w = self.world.borrow_mut();
            let (eng, wire) = &mut *w;
            let mut frames = Vec::new();
            for (from, row) in wire.rings.iter_mut().enumerate() {
                for (to, ring) in row.iter_mut().enumerate() {
                    frames.extend(ring.drain(..).map(|f| (from, to, f)));
                }
            }
            for (from, to, (h, p)) in frames {
                eng[to].on_frame(&mut Link { w: wire, me: to as ProcIdx }, from as ProcIdx, &h, &p);
            }
            if done.iter().all(|&d| d) {
                for s in &mut scheds {
                    s.take_error().unwrap();
                }
                return;
            }
        }
        panic!("{call}: the schedules never completed");
    }

    fn shape(&self, bytes: usize) -> Shape {
        Shape::of(&self.comms[0], bytes)
    }
}

/// Scratch memory holding `data`, as a region of `s`.
fn region(s: &mut Schedule, mem: &Arc<Scratch>) -> Loc {
    s.region(Region::Scratch(mem.clone()), mem.len())
}

fn filled(data: &[u8]) -> Arc<Scratch> {
    let m = Arc::new(Scratch::new(data.len()));
    m.write(0, data);
    m
}

/// A reducer that combines `unit`-byte elements one pair at a time: `op(in, inout)`.
fn elementwise(commutative: bool, unit: usize, op: fn(&[u8], &mut [u8])) -> Reducer {
    Reducer {
        commutative,
        unit,
        f: Arc::new(move |i: &[u8], io: &mut [u8]| {
            for (a, b) in i.chunks_exact(unit).zip(io.chunks_exact_mut(unit)) {
                op(a, b);
            }
        }),
    }
}

/// The sum of 8-byte words (commutative).
fn sum() -> Reducer {
    elementwise(true, 8, |a, b| {
        let v = u64::from_le_bytes(a.try_into().unwrap()).wrapping_add(u64::from_le_bytes((*b).try_into().unwrap()));
        b.copy_from_slice(&v.to_le_bytes());
    })
}

/// Composition of affine maps x -> a x + b, 16 bytes each (not commutative): `inout = in ∘
/// inout`.
fn compose(x: (u64, u64), y: (u64, u64)) -> (u64, u64) {
    (x.0.wrapping_mul(y.0), x.0.wrapping_mul(y.1).wrapping_add(x.1))
}

fn affine() -> Reducer {
    elementwise(false, 16, |a, b| {
        let w = |s: &[u8], k: usize| u64::from_le_bytes(s[8 * k..8 * k + 8].try_into().unwrap());
        let (p, q) = compose((w(a, 0), w(a, 1)), (w(b, 0), w(b, 1)));
        b[..8].copy_from_slice(&p.to_le_bytes());
        b[8..].copy_from_slice(&q.to_le_bytes());
    })
}

fn words(v: impl IntoIterator<Item = u64>) -> Vec<u8> {
    v.into_iter().flat_map(u64::to_le_bytes).collect()
}

/// Rank `r`'s map for element `i`.
fn map(r: usize, i: usize) -> (u64, u64) {
    (2 * (r as u64 * 31 + i as u64) + 1, r as u64 * 1000 + i as u64)
}

#[test]
fn an_allreduce_of_a_non_commutative_op_falls_back_to_an_ordered_algorithm() {
    let elems = 9;
    for n in 2..=9 {
        let sim = Sim::new(n);
        let sh = Shape { commutative: false, elems, ..sim.shape(elems * 16) };
        for a in [Algo::Rabenseifner, Algo::Ring] {
            let e = Chooser::new(&[(Coll::Allreduce, a)], Fallback::Error).choose(Coll::Allreduce, "MPI_Allreduce", sh);
            assert!(e.unwrap_err().msg.contains("(the operation is not commutative)"));
            let got =
                Chooser::new(&[(Coll::Allreduce, a)], Fallback::Silent).choose(Coll::Allreduce, "MPI_Allreduce", sh);
            let fallback = got.unwrap();
            assert_ne!(fallback, a);
            let outs: Vec<Arc<Scratch>> = (0..n).map(|_| Arc::new(Scratch::new(elems * 16))).collect();
            sim.run("MPI_Allreduce", |r, s| {
                s.set_reducer(affine());
                let src = region(s, &filled(&words((0..elems).flat_map(|i| [map(r, i).0, map(r, i).1]))));
                let dst = region(s, &outs[r]);
                algo::allreduce(s, fallback, src, dst);
            });
            let want = words((0..elems).flat_map(|i| {
                let m = (1..n).fold(map(0, i), |acc, r| compose(acc, map(r, i)));
                [m.0, m.1]
            }));
            for (r, o) in outs.iter().enumerate() {
                assert_eq!(o.read(0, o.len()), &want[..], "n {n}, {a:?} fell back to {fallback:?}: rank {r}");
            }
        }
    }
}

#[test]
fn a_reduce_scatter_on_a_non_power_of_two_falls_back() {
    let per = 5;
    for n in [3, 5, 6, 7] {
        let sim = Sim::new(n);
        let total = per * n;
        let sh = Shape { elems: total, ..sim.shape(total * 8) };
        let a = Algo::RecursiveHalving;
        let e = Chooser::new(&[(Coll::ReduceScatter, a)], Fallback::Error).choose(
            Coll::ReduceScatter,
            "MPI_Reduce_scatter",
            sh,
        );
        assert!(e.unwrap_err().msg.contains(&format!("({n} processes are not a power of two)")));
        let fallback = Chooser::new(&[(Coll::ReduceScatter, a)], Fallback::Warn)
            .choose(Coll::ReduceScatter, "MPI_Reduce_scatter", sh)
            .unwrap();
        let outs: Vec<Arc<Scratch>> = (0..n).map(|_| Arc::new(Scratch::new(per * 8))).collect();
        sim.run("MPI_Reduce_scatter", |r, s| {
            s.set_reducer(sum());
            let src = region(s, &filled(&words((0..total).map(|i| (r * 100 + i) as u64))));
            let dst = region(s, &outs[r]);
            let blocks: Vec<Loc> = (0..n).map(|k| src.at(k * per * 8, per * 8)).collect();
            algo::reduce_scatter(s, fallback, src, &blocks, dst);
        });
        for (r, o) in outs.iter().enumerate() {
            let want = words((0..per).map(|j| (0..n).map(|q| (q * 100 + r * per + j) as u64).sum::<u64>()));
            assert_eq!(o.read(0, o.len()), &want[..], "n {n}: {fallback:?}, rank {r}");
        }
    }
}

#[test]
fn a_gatherv_falls_back_from_the_binomial_tree() {
    for n in [3, 4, 8] {
        let sim = Sim::new(n);
        let len = |r: usize| 8 * (r + 1);
        let sh = Shape { n: n as i32, bytes: len(0), uniform: false, ..Default::default() };
        let e =
            Chooser::new(&[(Coll::Gather, Algo::Binomial)], Fallback::Error).choose(Coll::Gather, "MPI_Gatherv", sh);
        assert!(e.unwrap_err().msg.contains("(the blocks differ in size)"));
        let fallback = Chooser::new(&[(Coll::Gather, Algo::Binomial)], Fallback::Silent)
            .choose(Coll::Gather, "MPI_Gatherv", sh)
            .unwrap();
        let root = n - 1;
        let total: usize = (0..n).map(len).sum();
        let out = Arc::new(Scratch::new(total));
        sim.run("MPI_Gatherv", |r, s| {
            let src = region(s, &filled(&vec![r as u8 + 1; len(r)]));
            let blocks = if r == root {
                let whole = region(s, &out);
                let mut at = 0;
                (0..n)
                    .map(|q| {
                        at += len(q);
                        whole.at(at - len(q), len(q))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            algo::gather(s, fallback, root as i32, Some(src), &blocks, len(r));
        });
        let want: Vec<u8> = (0..n).flat_map(|q| vec![q as u8 + 1; len(q)]).collect();
        assert_eq!(out.read(0, total), &want[..], "n {n}: {fallback:?}");
    }
}
