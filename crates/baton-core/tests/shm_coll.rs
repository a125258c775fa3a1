//! The shared-memory collectives ([`baton_core::shm_coll`]) without processes: each "process"
//! is a thread with its own [`ShmColl`] over one private segment, waiting by spinning. Every
//! kind runs many times in a row, so post lines and data buffers are reused across laps, with
//! small (inline) and large (buffer) data, and contributions that differ per rank and per call.

use baton_core::engine::Engine;
use baton_core::op::Reducer;
use baton_core::progress::Progress;
use baton_core::shm_coll::{ShmColl, ShmKind, MAX_BYTES};
use baton_transport::shm::{Segment, COLL_POSTS};
use std::sync::{Arc, Barrier, Mutex};

/// Waits by spinning on the condition (the shared-memory collectives pass no engine work).
struct Spin(Mutex<Engine>);

impl Progress for Spin {
    fn block_until<T>(&self, mut ready: impl FnMut(&mut Engine) -> Option<T>) -> T {
        loop {
            if let Some(v) = ready(&mut self.0.lock().unwrap()) {
                return v;
            }
            std::thread::yield_now();
        }
    }
}

/// Runs `body(rank, coll, spin)` on `n` threads sharing one segment's area 0.
fn on_threads(n: usize, body: impl Fn(usize, &ShmColl, &Spin) + Sync) {
    let seg = Arc::new(Segment::private(n, 4096).unwrap());
    std::thread::scope(|s| {
        for r in 0..n {
            let seg = seg.clone();
            let body = &body;
            s.spawn(move || {
                let coll = ShmColl::new(seg, (0..n).collect(), r, 0, 1);
                body(r, &coll, &Spin(Mutex::new(Engine::new())));
            });
        }
    });
}

/// Rank `r`'s contribution to call `i`: `len` bytes no other rank or call has.
fn contribution(r: usize, i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (r * 31 + i * 7 + k * 3) as u8).collect()
}

fn wrapping_sum() -> Reducer {
    Reducer {
        commutative: true,
        unit: 1,
        f: Arc::new(|input: &[u8], inout: &mut [u8]| {
            for (o, i) in inout.iter_mut().zip(input) {
                *o = o.wrapping_add(*i);
            }
        }),
    }
}

/// Keeps the left operand: with rank-ordered application the result is rank 0's data, which
/// only holds if the contributions are combined in rank order.
fn first_wins() -> Reducer {
    Reducer { commutative: false, unit: 1, f: Arc::new(|input: &[u8], inout: &mut [u8]| inout.copy_from_slice(input)) }
}

const CALLS: usize = 3 * COLL_POSTS;

#[test]
fn allreduce_combines_every_contribution_in_rank_order_across_laps() {
    for n in [2, 3, 5] {
        for len in [8, 56, 1000, MAX_BYTES] {
            on_threads(n, |r, coll, spin| {
                for i in 0..CALLS / 8 {
                    let mine = contribution(r, i, len);
                    let seq = coll.run_blocking(spin, ShmKind::Allreduce, Some(&mine));
                    let mut acc = vec![0u8; len];
                    coll.combine(seq, &wrapping_sum(), &mut acc);
                    let mut want = vec![0u8; len];
                    for q in 0..n {
                        for (w, c) in want.iter_mut().zip(contribution(q, i, len)) {
                            *w = w.wrapping_add(c);
                        }
                    }
                    assert_eq!(acc, want, "n {n} len {len} call {i} rank {r}");
                    coll.combine(seq, &first_wins(), &mut acc);
                    assert_eq!(acc, contribution(0, i, len), "order: n {n} len {len} call {i}");
                    coll.finish(seq);
                }
            });
        }
    }
}

#[test]
fn bcast_delivers_the_roots_data_even_when_the_root_runs_ahead() {
    for n in [2, 4] {
        for len in [16, 4096] {
            let start = Barrier::new(n);
            on_threads(n, |r, coll, spin| {
                start.wait();
                for i in 0..CALLS {
                    let root = i % n;
                    // The root publishes; the others only wait for it.
                    let data = (r == root).then(|| contribution(root, i, len));
                    let seq = coll.run_blocking(spin, ShmKind::Bcast { root }, data.as_deref());
                    if r != root {
                        assert_eq!(coll.data(root, seq, len), &contribution(root, i, len)[..], "n {n} call {i}");
                    }
                    coll.finish(seq);
                }
            });
        }
    }
}

#[test]
fn allgather_and_alltoall_hand_every_rank_its_blocks() {
    for n in [2, 3, 4] {
        for b in [4, 100, MAX_BYTES / 4 / 4] {
            on_threads(n, |r, coll, spin| {
                for i in 0..COLL_POSTS + 3 {
                    let mine = contribution(r, i, b);
                    let seq = coll.run_blocking(spin, ShmKind::Allgather, Some(&mine));
                    for q in 0..n {
                        assert_eq!(coll.block(ShmKind::Allgather, q, seq, b), &contribution(q, i, b)[..]);
                    }
                    coll.finish(seq);
                    // Alltoall: rank r's row holds a block for every rank.
                    let row: Vec<u8> = (0..n).flat_map(|to| contribution(r * 100 + to, i, b)).collect();
                    let seq = coll.run_blocking(spin, ShmKind::Alltoall, Some(&row));
                    for q in 0..n {
                        assert_eq!(coll.block(ShmKind::Alltoall, q, seq, b), &contribution(q * 100 + r, i, b)[..]);
                    }
                    coll.finish(seq);
                }
            });
        }
    }
}

#[test]
fn barrier_holds_everyone_until_the_last_arrives() {
    let n = 4;
    let arrived = std::sync::atomic::AtomicUsize::new(0);
    on_threads(n, |_, coll, spin| {
        for i in 0..CALLS {
            arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let seq = coll.run_blocking(spin, ShmKind::Barrier, None);
            // Nobody leaves barrier i before all n have arrived at it.
            assert!(arrived.load(std::sync::atomic::Ordering::SeqCst) >= (i + 1) * n);
            coll.finish(seq);
        }
    });
}
