//! The schedule engine and the driver themselves: windows gathered and spread, concurrent
//! schedules kept apart by their tags, restarts of persistent schedules, size mismatches, the
//! deadlock report, and each wire setting using the protocol it stands for.

use crate::buffers::{blocks, junk, pattern, tbufs, Mem, TBuf};
use crate::matrix::{algos, Matrix};
use crate::ops::Op;
use crate::sim::{check_no_error, Proto, Sim, PROTOS};
use crate::BIG_BYTES;
use baton_core::coll::algo::{self, Algo, Coll};
use baton_core::coll::schedule::Schedule;
use baton_transport::frame::Kind;

/// The schedule engine itself: messages gathered from windows of several regions (with gaps
/// and empty ones) and spread over windows with gaps in one region, over adjacent windows
/// (taken as one), and over windows of two regions.
#[test]
fn messages_gather_and_spread_windows() {
    let mut m = Matrix::new("windows");
    for scale in [1, 20] {
        m.case(true, format_args!("scale={scale}"), |v, label| {
            let x = |k: usize| k * scale;
            let sim = Sim::new(2, v.proto, v.seed);
            let (pa, pb) = (pattern(0, 1, x(40)), pattern(0, 2, x(40)));
            let (a, b) = (TBuf::new(v.mem, &pa), TBuf::new(v.mem, &pb));
            let (mut wc, mut wd) = (junk(1, x(60)), junk(2, x(10)));
            let (c, d) = (TBuf::new(v.mem, &wc), TBuf::new(v.mem, &wd));
            // Per message: the windows sent, (buffer, offset, length) in a and b; the windows
            // received into, in c and d.
            let msgs = [
                (
                    vec![(0, 0, x(5)), (1, x(10), x(7)), (0, x(20), 0), (0, x(30), x(9))],
                    vec![(0, 0, x(4)), (0, x(10), x(6)), (0, x(30), x(8)), (0, x(50), x(3))],
                ),
                (vec![(0, x(5), x(3)), (0, x(8), x(4))], vec![(0, x(40), x(2)), (0, x(42), x(5))]),
                (vec![(1, 0, x(6))], vec![(1, x(2), x(3)), (0, x(20), x(3))]),
            ];
            let mut s0 = sim.sched(0, "MPI_Test");
            let mut s1 = sim.sched(1, "MPI_Test");
            let send_regions = [a.region(&mut s0), b.region(&mut s0)];
            let recv_regions = [c.region(&mut s1), d.region(&mut s1)];
            for (sent, recvd) in &msgs {
                s0.send_v(1, sent.iter().map(|&(r, off, len)| send_regions[r].at(off, len)).collect());
                s1.recv_v(0, recvd.iter().map(|&(r, off, len)| recv_regions[r].at(off, len)).collect());
                let bytes: Vec<u8> =
                    sent.iter().flat_map(|&(r, off, len)| [&pa, &pb][r][off..off + len].to_vec()).collect();
                let mut at = 0;
                for &(r, off, len) in recvd {
                    let w = if r == 0 { &mut wc } else { &mut wd };
                    w[off..off + len].copy_from_slice(&bytes[at..at + len]);
                    at += len;
                }
                assert_eq!(at, bytes.len());
            }
            check_no_error(label, &mut sim.run(label, vec![s0, s1]));
            assert!(c.get() == wc, "{label}: wrong bytes in the first receive region");
            assert!(d.get() == wd, "{label}: wrong bytes in the second receive region");
            assert!(a.get() == pa && b.get() == pb, "{label}: a send buffer was modified");
        });
    }
}

/// What one schedule of the concurrency test checks once everything has run.
type Check = Box<dyn Fn(&str)>;

/// Several collectives in flight at once on one communicator, all with messages of the same
/// sizes between the same peers, so only their tags keep them apart; each rank starts them in
/// the same order (MPI's rule) but advances them in its own order and joins at its own time.
#[test]
fn concurrent_schedules_do_not_cross_match() {
    let mut m = Matrix::new("concurrent");
    for n in [2, 3, 5, 8, 12, 17] {
        for count in [3, 40] {
            m.case(true, format_args!("n={n} count={count}"), |v, label| {
                let sim = Sim::new(n, v.proto, v.seed);
                // The checks own the buffers: declared first, dropped after the schedules.
                let mut checks: Vec<Check> = Vec::new();
                let mut jobs: Vec<Vec<Schedule>> = (0..n).map(|_| Vec::new()).collect();
                let len = count * 8;
                // Three allreduces with different inputs, two of them by the same algorithm.
                for (k, a) in
                    [Algo::RecursiveDoubling, Algo::ReduceBcast, Algo::RecursiveDoubling].into_iter().enumerate()
                {
                    let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &Op::Sum.input(r + 50 * k, count))).collect();
                    for (r, job) in jobs.iter_mut().enumerate() {
                        let mut s = sim.sched(r, "MPI_Allreduce");
                        s.set_reducer(Op::Sum.reducer());
                        let d = dst[r].region(&mut s);
                        algo::allreduce(&mut s, a, d, d);
                        job.push(s);
                    }
                    // Ranks 50·k.. stand for this allreduce's inputs.
                    let want = Op::Sum.combined(50 * k, 50 * k + n, 0, count);
                    checks.push(Box::new(move |label| {
                        for (r, d) in dst.iter().enumerate() {
                            assert!(d.get() == want, "{label}: allreduce {k} wrong at rank {r}");
                        }
                    }));
                }
                // Bcasts of the same length from two roots, and a ring allgather and a pairwise
                // alltoall with blocks of that length.
                for root in [0, n - 1] {
                    let bufs: Vec<TBuf> = (0..n)
                        .map(|r| TBuf::new(v.mem, &if r == root { pattern(root, 9, len) } else { junk(r, len) }))
                        .collect();
                    for (r, job) in jobs.iter_mut().enumerate() {
                        let mut s = sim.sched(r, "MPI_Bcast");
                        let l = bufs[r].region(&mut s);
                        algo::bcast(&mut s, Algo::Binomial, root as i32, l);
                        job.push(s);
                    }
                    checks.push(Box::new(move |label| {
                        for (r, b) in bufs.iter().enumerate() {
                            assert!(b.get() == pattern(root, 9, len), "{label}: bcast from {root} wrong at rank {r}");
                        }
                    }));
                }
                let gathered: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &junk(r, n * len))).collect();
                let exchanged: Vec<TBuf> = (0..n)
                    .map(|r| TBuf::new(v.mem, &(0..n).flat_map(|j| pattern(r, 2000 + j, len)).collect::<Vec<_>>()))
                    .collect();
                for r in 0..n {
                    let mut s = sim.sched(r, "MPI_Allgather");
                    let mine = TBuf::new(Mem::Scratch, &pattern(r, 8, len));
                    let sl = mine.region(&mut s);
                    let bl = blocks(gathered[r].region(&mut s), n, len);
                    algo::allgather(&mut s, Algo::Ring, Some(sl), &bl);
                    jobs[r].push(s);
                    let mut s = sim.sched(r, "MPI_Alltoall");
                    let bl = blocks(exchanged[r].region(&mut s), n, len);
                    algo::alltoall(&mut s, Algo::Pairwise, None, &bl);
                    jobs[r].push(s);
                }
                checks.push(Box::new(move |label| {
                    let all: Vec<u8> = (0..n).flat_map(|j| pattern(j, 8, len)).collect();
                    for r in 0..n {
                        assert!(gathered[r].get() == all, "{label}: allgather wrong at rank {r}");
                        let want: Vec<u8> = (0..n).flat_map(|i| pattern(i, 2000 + r, len)).collect();
                        assert!(exchanged[r].get() == want, "{label}: alltoall wrong at rank {r}");
                    }
                }));
                let start: Vec<usize> = (0..n).map(|r| (r * 5) % 7).collect();
                sim.run_all(label, &mut jobs, &start);
                for (r, job) in jobs.iter_mut().enumerate() {
                    for s in job.iter_mut() {
                        if let Err(e) = s.take_error() {
                            panic!("{label}: rank {r} reported {}", e.msg);
                        }
                    }
                }
                for c in &checks {
                    c(label);
                }
            });
        }
    }
}

/// A persistent collective: the same schedules run again after `restart` with new inputs.
#[test]
fn restarted_schedules_run_again() {
    let mut m = Matrix::new("restart");
    for n in [1, 3, 4, 7] {
        for (name, a) in algos(Coll::Allreduce) {
            let count = 2 * n + 1;
            m.case(true, format_args!("{name} n={n} count={count}"), |v, label| {
                let sim = Sim::new(n, v.proto, v.seed);
                let src = tbufs(v.mem, n, |r| Op::Sum.input(r, count));
                let dst = tbufs(v.mem, n, |r| junk(r, count * 8));
                let mut scheds = sim.scheds("MPI_Allreduce_init", |r, s| {
                    s.set_reducer(Op::Sum.reducer());
                    let (sl, d) = (src[r].region(s), dst[r].region(s));
                    algo::allreduce(s, a, sl, d);
                });
                for round in 0..3 {
                    for (r, b) in src.iter().enumerate() {
                        b.set(&Op::Sum.input(r + 10 * round, count));
                    }
                    for s in &mut scheds {
                        s.restart();
                    }
                    scheds = sim.run(&format!("{label} start {round}"), scheds);
                    check_no_error(label, &mut scheds);
                    // Ranks 10·round.. stand for this start's inputs.
                    let want = Op::Sum.combined(10 * round, 10 * round + n, 0, count);
                    for (r, d) in dst.iter().enumerate() {
                        assert!(d.get() == want, "{label}: start {round} wrong at rank {r}");
                    }
                }
            });
        }
    }
}

/// Binomial bcasts from rank 0, each rank's over its buffer in `bufs`.
fn bcast_from_0(sim: &Sim, bufs: &[TBuf]) -> Vec<Schedule> {
    sim.scheds("MPI_Bcast", |r, s| {
        let l = bufs[r].region(s);
        algo::bcast(s, Algo::Binomial, 0, l);
    })
}

/// A message longer or shorter than its receive (type signatures that differ between ranks)
/// is reported as a truncation naming the sender, on every wire; the run still ends.
#[test]
fn mismatched_sizes_are_reported() {
    let mut m = Matrix::new("mismatch");
    for (sent, expected) in [(16, 8), (8, 16), (300, 100), (100, 300)] {
        m.case(true, format_args!("sent={sent} expected={expected}"), |v, label| {
            let sim = Sim::new(2, v.proto, v.seed);
            let bufs = [TBuf::new(v.mem, &pattern(0, 1, sent)), TBuf::new(v.mem, &junk(1, expected))];
            let mut scheds = sim.run(label, bcast_from_0(&sim, &bufs));
            assert!(scheds[0].take_error().is_ok(), "{label}: the sender saw an error");
            let e = scheds[1].take_error().expect_err("a truncation");
            assert_eq!(e.class, baton_abi::consts::MPI_ERR_TRUNCATE, "{label}");
            let got = if sent > expected { "more".to_string() } else { sent.to_string() };
            let want = format!("MPI_Bcast: rank 0 sent {got} bytes where {expected} were expected");
            assert!(e.msg.starts_with(&want), "{label}: message {:?}", e.msg);
            let n = sent.min(expected);
            assert!(bufs[1].get()[..n] == pattern(0, 1, sent)[..n], "{label}: the bytes that fit were lost");
        });
    }
}

/// The driver itself: a rendezvous nobody receives and a receive nobody sends to are reported
/// with the rank, the round and the messages.
#[test]
fn a_deadlock_is_reported() {
    let sim = Sim::new(3, Proto::Read, 1);
    let scheds = (0..3)
        .map(|r| {
            let mut s = sim.sched(r, "MPI_Test");
            if r == 2 {
                let t = s.scratch(200);
                s.send(0, t);
                let t = s.scratch(24);
                s.recv(1, t);
            }
            s
        })
        .collect();
    let Err(err) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run("stuck", scheds))) else {
        panic!("the driver missed a deadlock");
    };
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.starts_with("deadlock in stuck"), "{msg}");
    let want =
        "rank 2 (schedule 0): MPI_Test round 0 of 1, waiting for a receive of 24 bytes from rank 1, a send to rank 0";
    assert!(msg.contains(want), "{msg}");
    assert!(!msg.contains("rank 0 (") && !msg.contains("rank 1 ("), "{msg}");
}

/// Each wire setting exercises the protocol it stands for.
#[test]
fn every_protocol_is_exercised() {
    for proto in PROTOS {
        let n = 4;
        let sim = Sim::new(n, proto, 7);
        let bufs = tbufs(Mem::User, n, |r| if r == 0 { pattern(0, 1, BIG_BYTES) } else { junk(r, BIG_BYTES) });
        sim.run(&format!("{proto:?}"), bcast_from_0(&sim, &bufs));
        for b in &bufs {
            assert!(b.get() == pattern(0, 1, BIG_BYTES));
        }
        let (rts, fin, cts, data) =
            (sim.count(Kind::Rts), sim.count(Kind::Fin), sim.count(Kind::Cts), sim.count(Kind::Data));
        let refused = sim.world.borrow().wire.refused;
        match proto {
            Proto::Eager => assert_eq!((rts, sim.count(Kind::Eager)), (0, 3)),
            Proto::Read => assert_eq!((rts, fin, cts, data), (3, 3, 0, 0)),
            Proto::Stream => {
                assert_eq!((rts, fin, cts), (3, 0, 3));
                assert_eq!(data, 3 * BIG_BYTES.div_ceil(100) as u64);
                assert!(refused > 0, "no frame ever waited for ring space");
            }
        }
    }
}
