//! Matching and the eager path: messages posted before and after they arrive, non-overtaking
//! order through full and blocked rings, wildcards, contexts, truncation, cancel and synchronous
//! sends.

use crate::common::GUARD;
use crate::sim::{assert_guard, contig, guarded, pat, sim, status};
use crate::TRUNCATE;
use baton_core::engine::{Sink, ANY_SOURCE, ANY_TAG};
use baton_transport::frame::Kind;

// ---------------------------------------------------------------------------------------------
// Basics
// ---------------------------------------------------------------------------------------------

#[test]
fn eager_message_posted_before_and_unexpected_before() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 40);
    let (r, a) = s.post(1, 3, 0, 9, 64);
    assert!(s.eng[1].is_posted_recv(r));
    let sd = s.send(0, 1, 3, 9, &msg, false);
    // A standard eager send completes as soon as its frame is pushed.
    assert!(s.done(0, sd));
    assert!(!s.done(1, r));
    s.pump();
    assert!(s.done(1, r));
    assert!(!s.eng[1].is_posted_recv(r));
    s.assert_received(1, r, status(0, 9, 40, 0), &a, &msg, "");
    assert!(s.eng[1].completed_any);

    // Unexpected first: the message waits, a later receive takes it at once.
    let msg2 = pat(2, 17);
    let sd2 = s.send(0, 1, 3, 9, &msg2, false);
    s.pump();
    assert!(s.done(0, sd2));
    assert_eq!(s.eng[1].unexpected_len(), 1);
    let (r2, b) = s.post(1, 3, 0, 9, 64);
    assert!(s.done(1, r2), "a receive matching an unexpected eager message completes at once");
    assert_eq!(s.eng[1].unexpected_len(), 0);
    s.assert_received(1, r2, status(0, 9, 17, 0), &b, &msg2, "");
    assert_eq!(s.kinds(0, 1), vec![Kind::Eager, Kind::Eager]);
    assert!(s.kinds(1, 0).is_empty());
}

#[test]
fn zero_byte_messages() {
    for read_ok in [true, false] {
        let mut s = sim(2, 1, read_ok);
        let (r, a) = s.post(1, 1, 0, 0, 0);
        let sd = s.send(0, 1, 1, 0, &[], true);
        s.pump();
        assert!(s.done(0, sd) && s.done(1, r));
        assert_eq!(s.get(1, r).status, status(0, 0, 0, 0));
        assert_guard(&a, 0);
    }
}

#[test]
fn eager_limit_is_capped_by_the_frame_size() {
    let mut s = sim(2, usize::MAX, true);
    s.w.eager = 1000;
    s.w.max_frame = 64;
    let msg = pat(3, 100);
    let (r, a) = s.post(1, 1, 0, 0, 100);
    let sd = s.send(0, 1, 1, 0, &msg, false);
    s.pump();
    assert_eq!(s.kinds(0, 1), vec![Kind::Rts], "100 bytes exceed the 64-byte frame: rendezvous");
    assert!(s.done(0, sd) && s.done(1, r));
    assert_eq!(&a[..100], &msg[..]);
    // Exactly the eager limit still goes eagerly.
    s.w.max_frame = 1 << 20;
    let msg2 = pat(4, 1000);
    let (r2, b) = s.post(1, 1, 0, 0, 1000);
    s.send(0, 1, 1, 0, &msg2, false);
    s.pump();
    assert_eq!(s.kinds(0, 1).last(), Some(&Kind::Eager));
    assert!(s.done(1, r2));
    assert_eq!(&b[..1000], &msg2[..]);
}

// ---------------------------------------------------------------------------------------------
// Ordering
// ---------------------------------------------------------------------------------------------

/// Sizes around the eager limit (64) and the frame size (128), zero included.
fn mixed_size(k: usize) -> usize {
    [10, 300, 64, 65, 0, 129, 1, 1000, 127, 256][k % 10]
}

fn run_non_overtaking(read_ok: bool, cap: usize, posted_before: usize) {
    const N: usize = 40;
    let mut s = sim(2, cap, read_ok);
    let msgs: Vec<Vec<u8>> = (0..N).map(|k| pat(k, mixed_size(k))).collect();
    let mut bufs: Vec<Vec<u8>> = (0..N).map(|_| guarded(1000)).collect();
    let mut recvs = Vec::new();
    for b in bufs.iter_mut().take(posted_before) {
        recvs.push(s.recv(1, 5, 0, 7, contig(b, 1000)));
    }
    let mut sends = Vec::new();
    for (k, m) in msgs.iter().enumerate() {
        sends.push(s.send(0, 1, 5, 7, m, false));
        if k % 3 == 2 {
            // Room appears in the ring while earlier frames still wait in the engine's queue:
            // the next send must queue behind them, not jump ahead into the ring.
            s.deliver();
        }
    }
    if cap < N {
        assert!(s.eng[0].has_outgoing(), "a full ring must leave frames in the engine's queue");
        assert!(s.w.refused > 0);
    }
    // Let some traffic through before the remaining receives are posted.
    for _ in 0..3 {
        s.step();
    }
    for b in bufs.iter_mut().skip(posted_before) {
        recvs.push(s.recv(1, 5, 0, 7, contig(b, 1000)));
    }
    s.pump();
    assert!(!s.eng[0].has_outgoing() && !s.eng[1].has_outgoing());
    assert_eq!(s.w.queued(), 0);
    assert_eq!(s.eng[1].unexpected_len(), 0);
    for k in 0..N {
        let r = s.get(1, recvs[k]);
        assert!(r.complete, "receive {k} incomplete (read_ok {read_ok}, cap {cap}, posted {posted_before})");
        let what = format!("receive {k}");
        s.assert_received(1, recvs[k], status(0, 7, msgs[k].len() as u64, 0), &bufs[k], &msgs[k], &what);
        assert!(s.done(0, sends[k]), "send {k}");
    }
    // The wire carried the matching frames in send order.
    let order: Vec<u64> =
        s.w.log.iter().filter(|l| l.0 == 0 && matches!(l.2.kind, Kind::Eager | Kind::Rts)).map(|l| l.2.len).collect();
    assert_eq!(order, msgs.iter().map(|m| m.len() as u64).collect::<Vec<_>>());
    if !read_ok {
        assert!(s.count(Kind::Cts) > 0 && s.count(Kind::Data) > 0);
        assert_eq!(s.count(Kind::Fin), 0);
    } else {
        assert_eq!(s.count(Kind::Cts), 0);
    }
}

#[test]
fn non_overtaking_mixed_eager_and_rendezvous() {
    for read_ok in [true, false] {
        for cap in [1, 2, 3, 7, usize::MAX] {
            for posted_before in [0, 13, 40] {
                run_non_overtaking(read_ok, cap, posted_before);
            }
        }
    }
}

#[test]
fn blocked_ring_keeps_order_and_control_frames_queue_too() {
    let mut s = sim(2, usize::MAX, true);
    s.w.blocked = vec![(0, 1)];
    let big = pat(1, 500);
    let small = pat(2, 8);
    let s1 = s.send(0, 1, 1, 4, &big, false);
    let s2 = s.send(0, 1, 1, 4, &small, false);
    assert!(s.w.log.is_empty() && s.eng[0].has_outgoing());
    assert!(!s.done(0, s2), "an eager send queued behind a full ring is not complete yet");
    s.pump();
    assert!(s.w.log.is_empty() && s.eng[0].has_outgoing());
    // The ring frees up but only one frame fits at a time; the small message must not overtake.
    s.w.blocked.clear();
    s.w.cap = 1;
    let mut a = guarded(500);
    let mut b = guarded(500);
    let r1 = s.recv(1, 1, 0, ANY_TAG, contig(&mut a, 500));
    let r2 = s.recv(1, 1, ANY_SOURCE, 4, contig(&mut b, 500));
    // The receiver's Fin has to wait in its own queue while the ring back is blocked.
    s.w.blocked = vec![(1, 0)];
    s.pump();
    assert_eq!(s.kinds(0, 1), vec![Kind::Rts, Kind::Eager]);
    assert!(s.done(1, r1) && s.done(1, r2));
    assert_eq!(s.get(1, r1).status.bytes, 500);
    assert_eq!(&a[..500], &big[..]);
    assert_eq!(&b[..8], &small[..]);
    assert!(s.done(0, s2));
    assert!(!s.done(0, s1), "the Fin is stuck behind the blocked ring");
    assert!(s.eng[1].has_outgoing());
    s.w.blocked.clear();
    s.pump();
    assert!(s.done(0, s1));
    assert!(!s.eng[1].has_outgoing());
}

#[test]
fn posted_receives_match_in_post_order_and_unexpected_in_arrival_order() {
    let mut s = sim(2, usize::MAX, true);
    // Posted first: the earliest posted matching receive wins, even if a later one is exact.
    let mut a = guarded(8);
    let mut b = guarded(8);
    let ra = s.recv(1, 1, ANY_SOURCE, ANY_TAG, contig(&mut a, 8));
    let rb = s.recv(1, 1, 0, 5, contig(&mut b, 8));
    let m1 = pat(1, 8);
    s.send(0, 1, 1, 5, &m1, false);
    s.pump();
    assert!(s.done(1, ra) && !s.done(1, rb));
    assert_eq!(&a[..8], &m1[..]);
    let m2 = pat(2, 8);
    s.send(0, 1, 1, 5, &m2, false);
    s.pump();
    assert!(s.done(1, rb));
    assert_eq!(&b[..8], &m2[..]);

    // Unexpected first: a wildcard receive takes the earliest arrival.
    let m3 = pat(3, 4);
    let m4 = pat(4, 4);
    s.send(0, 1, 1, 30, &m3, false);
    s.send(0, 1, 1, 20, &m4, false);
    s.pump();
    assert_eq!(s.eng[1].unexpected_len(), 2);
    let (rc, c) = s.post(1, 1, ANY_SOURCE, ANY_TAG, 8);
    assert_eq!(s.get(1, rc).status, status(0, 30, 4, 0));
    assert_eq!(&c[..4], &m3[..]);
    // A specific tag skips over non-matching earlier arrivals.
    s.send(0, 1, 1, 40, &m3, false);
    s.pump();
    let (rd, _d) = s.post(1, 1, 0, 40, 8);
    assert_eq!(s.get(1, rd).status, status(0, 40, 4, 0));
    assert_eq!(s.eng[1].unexpected_len(), 1);
    let (re, e) = s.post(1, 1, 0, 20, 8);
    assert_eq!(s.get(1, re).status, status(0, 20, 4, 0));
    assert_eq!(&e[..4], &m4[..]);
    assert_eq!(s.eng[1].unexpected_len(), 0);
}

// ---------------------------------------------------------------------------------------------
// Wildcards and contexts
// ---------------------------------------------------------------------------------------------

#[test]
fn any_source_and_any_tag_report_the_actual_envelope() {
    for read_ok in [true, false] {
        let mut s = sim(3, 2, read_ok);
        let m0 = pat(10, 30); // eager from 0
        let m1 = pat(11, 700); // rendezvous from 1
        let mut a = guarded(1000);
        let mut b = guarded(1000);
        let mut c = guarded(1000);
        let ra = s.recv(2, 9, ANY_SOURCE, 11, contig(&mut a, 1000));
        let rb = s.recv(2, 9, 1, ANY_TAG, contig(&mut b, 1000));
        let rc = s.recv(2, 9, ANY_SOURCE, ANY_TAG, contig(&mut c, 1000));
        let s0 = s.send(0, 2, 9, 11, &m0, false);
        let s1 = s.send(1, 2, 9, 22, &m1, false);
        s.pump();
        assert!(s.done(0, s0) && s.done(1, s1));
        assert_eq!(s.get(2, ra).status, status(0, 11, 30, 0));
        assert_eq!(&a[..30], &m0[..]);
        assert_eq!(s.get(2, rb).status, status(1, 22, 700, 0));
        assert_eq!(&b[..700], &m1[..]);
        assert!(!s.done(2, rc));
        // The last wildcard takes whatever comes next, from anyone.
        let m2 = pat(12, 5);
        let s2 = s.send(1, 2, 9, 99, &m2, false);
        s.pump();
        assert!(s.done(1, s2));
        s.assert_received(2, rc, status(1, 99, 5, 0), &c, &m2, "");
    }
}

#[test]
fn any_source_across_unexpected_senders() {
    let mut s = sim(3, usize::MAX, true);
    let m0 = pat(1, 10);
    let m1 = pat(2, 200);
    let s1 = s.send(1, 2, 4, 3, &m1, false);
    s.pump();
    let s0 = s.send(0, 2, 4, 3, &m0, false);
    s.pump();
    assert_eq!(s.eng[2].unexpected_len(), 2);
    let mut a = guarded(200);
    let mut b = guarded(200);
    let ra = s.recv(2, 4, ANY_SOURCE, 3, contig(&mut a, 200));
    let rb = s.recv(2, 4, ANY_SOURCE, 3, contig(&mut b, 200));
    s.pump();
    assert_eq!(s.get(2, ra).status, status(1, 3, 200, 0), "the earlier arrival (from 1) first");
    assert_eq!(s.get(2, rb).status, status(0, 3, 10, 0));
    assert_eq!(&a[..200], &m1[..]);
    assert_eq!(&b[..10], &m0[..]);
    assert!(s.done(0, s0) && s.done(1, s1));
}

#[test]
fn contexts_never_cross() {
    for size in [16, 600] {
        let mut s = sim(2, usize::MAX, true);
        let on_a = pat(1, size);
        let on_b = pat(2, size);
        let mut rb_buf = guarded(size);
        // A wildcard receive on context B does not take a message on context A.
        let rb = s.recv(1, 200, ANY_SOURCE, ANY_TAG, contig(&mut rb_buf, size));
        let sa = s.send(0, 1, 100, 1, &on_a, false);
        s.pump();
        assert!(!s.done(1, rb));
        assert_eq!(s.eng[1].unexpected_len(), 1);
        assert!(rb_buf.iter().all(|&b| b == GUARD));
        assert!(s.eng[1].probe(200, ANY_SOURCE, ANY_TAG).is_none());
        assert!(s.eng[1].probe(100, ANY_SOURCE, ANY_TAG).is_some());
        // Context B's own message matches it.
        let sb = s.send(0, 1, 200, 1, &on_b, false);
        s.pump();
        assert!(s.done(1, rb));
        assert_eq!(&rb_buf[..size], &on_b[..]);
        assert_eq!(s.eng[1].unexpected_len(), 1);
        // And the context A message is still there for a context A receive.
        let (ra, ra_buf) = s.post(1, 100, 0, 1, size);
        s.pump();
        assert!(s.done(1, ra) && s.done(0, sa) && s.done(0, sb));
        assert_eq!(&ra_buf[..size], &on_a[..]);
        assert_eq!(s.eng[1].unexpected_len(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Truncation
// ---------------------------------------------------------------------------------------------

fn run_truncation(size: usize, cap: usize, read_ok: bool, posted_first: bool) {
    let mut s = sim(2, 2, read_ok);
    let msg = pat(5, size);
    let mut buf = guarded(cap);
    let (sd, r) = s.exchange(&msg, &mut buf, cap, posted_first);
    let what = format!("size {size} cap {cap} read {read_ok} posted {posted_first}");
    assert!(s.done(0, sd), "{what}: send");
    assert!(s.done(1, r), "{what}: recv");
    s.assert_received(1, r, status(0, 2, cap as u64, TRUNCATE), &buf, &msg[..cap], &what);
    for &(_, _, _, n) in &s.w.reads {
        assert!(n <= cap, "{what}: read {n} bytes into a {cap}-byte buffer");
    }
}

#[test]
fn truncation_eager() {
    for posted_first in [true, false] {
        run_truncation(60, 10, true, posted_first);
        run_truncation(60, 0, true, posted_first);
        run_truncation(64, 63, false, posted_first);
    }
}

#[test]
fn truncation_rendezvous_with_read() {
    for posted_first in [true, false] {
        for (size, cap) in [(1000, 300), (65, 64), (500, 0), (129, 128)] {
            run_truncation(size, cap, true, posted_first);
        }
    }
}

#[test]
fn truncation_rendezvous_streamed() {
    for posted_first in [true, false] {
        for (size, cap) in [(1000, 300), (65, 64), (500, 0), (1000, 129), (1000, 128), (257, 1)] {
            run_truncation(size, cap, false, posted_first);
        }
    }
}

#[test]
fn exact_fit_is_not_truncation() {
    for read_ok in [true, false] {
        for size in [64, 65, 256] {
            let mut s = sim(2, usize::MAX, read_ok);
            let msg = pat(6, size);
            let (r, buf) = s.post(1, 1, 0, 0, size);
            s.send(0, 1, 1, 0, &msg, false);
            s.pump();
            s.assert_received(1, r, status(0, 0, size as u64, 0), &buf, &msg, "");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cancel
// ---------------------------------------------------------------------------------------------

#[test]
fn cancel_posted_receive() {
    let mut s = sim(2, usize::MAX, true);
    let (r, buf) = s.post(1, 1, 0, 5, 16);
    assert!(s.with(1, |e, n| e.cancel_recv(n, r)));
    let req = s.get(1, r);
    assert!(req.complete && req.status.cancelled);
    assert_eq!(req.status.bytes, 0);
    assert!(!s.eng[1].is_posted_recv(r));
    assert!(!s.with(1, |e, n| e.cancel_recv(n, r)), "a second cancel does nothing");
    // A later message is not delivered to the cancelled receive.
    let msg = pat(1, 16);
    s.send(0, 1, 1, 5, &msg, false);
    s.pump();
    assert_eq!(s.eng[1].unexpected_len(), 1);
    assert!(buf.iter().all(|&b| b == GUARD));
    assert!(s.get(1, r).status.cancelled);
    // Cancelling an Owned receive hands the buffer back.
    let ro = s.recv(1, 1, 0, 6, Sink::Owned(vec![7u8; 3]));
    assert!(s.with(1, |e, n| e.cancel_recv(n, ro)));
    assert!(s.get(1, ro).status.cancelled);
    assert_eq!(s.get(1, ro).owned.as_deref(), Some(&[7u8, 7, 7][..]));
}

#[test]
fn cancel_after_match_fails() {
    // Matched and complete (eager).
    let mut s = sim(2, usize::MAX, false);
    let (r, _buf) = s.post(1, 1, 0, 5, 600);
    let msg = pat(1, 16);
    s.send(0, 1, 1, 5, &msg, false);
    s.pump();
    assert!(s.done(1, r));
    assert!(!s.with(1, |e, n| e.cancel_recv(n, r)));
    assert!(!s.get(1, r).status.cancelled);
    assert_eq!(s.get(1, r).status, status(0, 5, 16, 0));

    // Matched a rendezvous, still streaming (reads refused): too late to cancel.
    let mut buf2 = guarded(600);
    let big = pat(2, 600);
    let sd = s.send(0, 1, 1, 5, &big, false);
    s.step(); // Rts delivered: unexpected
    assert_eq!(s.eng[1].unexpected_len(), 1);
    let r2 = s.recv(1, 1, 0, 5, contig(&mut buf2, 600));
    assert!(!s.done(1, r2), "matched an Rts, waiting for Data");
    assert!(!s.eng[1].is_posted_recv(r2));
    assert!(!s.with(1, |e, n| e.cancel_recv(n, r2)));
    s.pump();
    assert!(s.done(1, r2) && s.done(0, sd));
    assert!(!s.get(1, r2).status.cancelled);
    assert_eq!(&buf2[..600], &big[..]);
}

// ---------------------------------------------------------------------------------------------
// Synchronous sends
// ---------------------------------------------------------------------------------------------

#[test]
fn synchronous_send_waits_for_the_match() {
    for size in [0, 20, 64, 65, 900] {
        for read_ok in [true, false] {
            let mut s = sim(2, 3, read_ok);
            let msg = pat(1, size);
            let sd = s.send(0, 1, 1, 8, &msg, true);
            s.pump();
            assert!(!s.done(0, sd), "size {size}: a synchronous send completed before any match");
            assert_eq!(s.eng[1].unexpected_len(), 1);
            // Other traffic does not complete it either.
            let other = pat(2, 4);
            let (ro, _ob) = s.post(1, 1, 0, 9, 4);
            s.send(0, 1, 1, 9, &other, false);
            s.pump();
            assert!(s.done(1, ro) && !s.done(0, sd));
            let (r, buf) = s.post(1, 1, 0, 8, size);
            s.pump();
            assert!(s.done(1, r) && s.done(0, sd), "size {size} read {read_ok}");
            assert_eq!(s.get(1, r).status, status(0, 8, size as u64, 0));
            assert_eq!(&buf[..size], &msg[..]);
            let k = s.kinds(1, 0);
            if size <= 64 {
                assert_eq!(k, vec![Kind::SyncAck]);
            } else if read_ok {
                assert_eq!(k, vec![Kind::Fin]);
            } else {
                assert_eq!(k, vec![Kind::Cts]);
            }
        }
    }
}

#[test]
fn synchronous_send_to_a_posted_receive() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 30);
    let (r, buf) = s.post(1, 1, 0, 8, 30);
    let sd = s.send(0, 1, 1, 8, &msg, true);
    assert!(!s.done(0, sd));
    s.step(); // EagerSync delivered, SyncAck pushed
    assert!(s.done(1, r) && !s.done(0, sd));
    s.pump();
    assert!(s.done(0, sd));
    assert_eq!(s.kinds(0, 1), vec![Kind::EagerSync]);
    assert_eq!(s.kinds(1, 0), vec![Kind::SyncAck]);
    assert_eq!(&buf[..30], &msg[..]);
}
