//! Cooperative copies of large rendezvous messages: the receiver alone, shared with the sender,
//! a chunk the sender failed, truncation, and reads refused midway.

use crate::common::GUARD;
use crate::sim::{assert_guard, contig, guarded, pat, sim, status, Sim};
use crate::TRUNCATE;
use baton_abi::consts as c;
use baton_core::engine::{Action, ReqId};
use baton_transport::frame::{Header, Kind};

/// A simulation where messages from 1000 bytes on are copied cooperatively; `n` bytes go from
/// process 0 to process 1 into a receive of `cap` bytes. Returns the simulation, the receive
/// buffer, the message and the two requests, pumped to the end.
fn coop_run(n: usize, cap: usize, helper_chunks: usize, helper_fails: bool) -> (Sim, Vec<u8>, Vec<u8>, ReqId, ReqId) {
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    s.w.helper_chunks = helper_chunks;
    s.w.helper_fails = helper_fails;
    let msg = pat(9, n);
    let mut a = guarded(cap);
    s.w.writable.push((1, a.as_ptr() as usize, cap));
    let r = s.recv(1, 1, 0, 4, contig(&mut a, cap));
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.pump();
    (s, a, msg, r, sd)
}

#[test]
fn cooperative_copy_by_the_receiver_alone() {
    // 300 000 bytes: chunks of 64 KiB, 5 of them.
    let (s, a, msg, r, sd) = coop_run(300_000, 300_000, 0, false);
    assert!(s.done(1, r) && s.done(0, sd));
    s.assert_received(1, r, status(0, 4, 300_000, 0), &a, &msg, "");
    assert_eq!(s.count(Kind::Help), 1, "the sender is invited");
    assert_eq!(s.count(Kind::Fin), 1);
    // Alone, the receiver claims runs that double: chunk 0, then 1, then 2-3, then 4.
    assert_eq!(s.w.reads.len(), 4);
    assert_eq!(s.w.reads.iter().map(|r| r.3).collect::<Vec<_>>(), vec![65536, 65536, 131072, 300_000 - 4 * 65536]);
    assert!(s.w.writes.is_empty(), "the invitation came after every chunk was taken");
}

#[test]
fn cooperative_copy_shared_with_the_sender() {
    let (s, a, msg, r, sd) = coop_run(300_000, 300_000, 3, false);
    assert!(s.done(1, r) && s.done(0, sd));
    s.assert_received(1, r, status(0, 4, 300_000, 0), &a, &msg, "");
    assert_eq!(s.w.reads.len(), 2, "the receiver copied the first chunk and one more");
}

#[test]
fn cooperative_copy_takes_over_a_chunk_the_sender_failed() {
    let (s, a, msg, r, _) = coop_run(300_000, 300_000, 1, true);
    assert!(s.done(1, r));
    assert_eq!(s.get(1, r).status.error, 0);
    assert_eq!(&a[..300_000], &msg[..]);
    // Chunks: the first read, one by the helper, one failed and read again here, two more.
    assert_eq!(s.w.reads.len(), 4);
}

#[test]
fn cooperative_copy_of_a_truncated_message() {
    let (s, a, msg, r, sd) = coop_run(300_000, 200_000, 1, false);
    assert!(s.done(1, r) && s.done(0, sd));
    s.assert_received(1, r, status(0, 4, 200_000, TRUNCATE), &a, &msg[..200_000], "");
}

#[test]
fn the_sender_writes_the_chunks_it_takes() {
    // The sender's side alone: its send waits for the receiver (the Rts is not delivered) when
    // an invitation for a transfer begun on the slot arrives.
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    let msg = pat(3, 200_000);
    let mut a = guarded(200_000);
    // The sender writes through this address while the test does not touch `a`.
    let at = a.as_mut_ptr() as usize;
    s.w.writable.push((1, at, 200_000));
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.w.coop_slots[0][1].begin(42, 1);
    let invite = Header { kind: Kind::Help, ctx: 42, src: 0, tag: 65536, len: 200_000, id: sd.wire(), aux: at as u64 };
    s.with(0, |e, n| e.on_frame(n, 1, &invite, &[]));
    // The invitation is recorded; the writes leave the frame's handling.
    assert!(s.w.writes.is_empty());
    assert_eq!(s.eng[0].actions(), [Action::Help { from: 1, h: invite }]);
    s.with(0, |e, n| e.run_actions(n));
    assert_eq!(s.w.coop_slots[0][1].helped(42), 3, "chunks 1 to 3 of 4");
    assert_eq!(s.w.writes.len(), 3);
    assert_eq!(&a[65536..200_000], &msg[65536..]);
    assert!(a[..65536].iter().all(|&b| b == GUARD), "chunk 0 stays the receiver's");
    // A stale invitation (another transfer number) writes nothing.
    let stale = Header { ctx: 41, ..invite };
    s.with(0, |e, n| e.on_frame(n, 1, &stale, &[]));
    s.with(0, |e, n| e.run_actions(n));
    assert_eq!(s.w.writes.len(), 3);
    assert!(!s.done(0, sd), "the send completes with the receiver's Fin only");

    // A write the kernel refuses is reported in the slot, and the sender takes no more.
    s.w.coop_slots[0][1].begin(43, 1);
    s.w.read_ok = false;
    let refused = Header { ctx: 43, ..invite };
    s.with(0, |e, n| e.on_frame(n, 1, &refused, &[]));
    s.with(0, |e, n| e.run_actions(n));
    assert_eq!(s.w.coop_slots[0][1].failed(43), Some(1));
    assert_eq!(s.w.coop_slots[0][1].claim(43, 4), Some(2), "chunks 2 and 3 are left to the receiver");
}

#[test]
fn cooperative_copies_from_one_sender_follow_each_other() {
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    let msgs: Vec<Vec<u8>> = (0..3).map(|k| pat(20 + k, 150_000)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..3).map(|_| guarded(150_000)).collect();
    let mut rs = Vec::new();
    for b in bufs.iter_mut() {
        s.w.writable.push((1, b.as_ptr() as usize, 150_000));
        rs.push(s.recv(1, 1, 0, 4, contig(b, 150_000)));
    }
    let sds: Vec<ReqId> = msgs.iter().map(|m| s.send(0, 1, 1, 4, m, false)).collect();
    s.pump();
    for k in 0..3 {
        assert!(s.done(1, rs[k]) && s.done(0, sds[k]));
        assert_eq!(&bufs[k][..150_000], &msgs[k][..]);
        assert_guard(&bufs[k], 150_000);
    }
    assert_eq!(s.count(Kind::Help), 3);
}

#[test]
fn cooperative_copy_with_a_read_refused_midway_fails_the_receive() {
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    s.w.reads_left = Some(1);
    let msg = pat(9, 300_000);
    let mut a = guarded(300_000);
    s.w.writable.push((1, a.as_ptr() as usize, 300_000));
    let r = s.recv(1, 1, 0, 4, contig(&mut a, 300_000));
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.pump();
    assert!(s.done(1, r) && s.done(0, sd), "no side waits for chunks nobody copies");
    assert_eq!(s.get(1, r).status.error, c::MPI_ERR_OTHER);
}
