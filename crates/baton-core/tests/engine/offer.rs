//! A receive posted first offers its buffer to its sender (`engine::offer`): the sender writes
//! the message when it waits first, the receiver reads it when it comes first, a cancel
//! withdraws the offer while nothing is written, and any other message voids it.

use crate::sim::{contig, guarded, pat, sim, status, Sim};
use baton_core::engine::ReqId;
use baton_transport::frame::Kind;

const N: usize = 300_000;

/// Process 1 posts a receive of `N` bytes from process 0 (context 1, tag 4), offers it, and
/// the offer reaches process 0. Returns the simulation, the receive and its buffer.
fn offered() -> (Sim, ReqId, Vec<u8>) {
    let mut s = sim(2, usize::MAX, true);
    s.w.offers = true;
    let mut buf = guarded(N);
    s.w.writable.push((1, buf.as_ptr() as usize, N));
    let r = s.recv(1, 1, 0, 4, contig(&mut buf, N));
    s.with(1, |e, n| e.offer(n, r, 0));
    assert_eq!(s.count(Kind::Offer), 1);
    s.deliver();
    (s, r, buf)
}

#[test]
fn a_sender_that_waits_first_writes_the_whole_message() {
    let (mut s, r, buf) = offered();
    let msg = pat(3, N);
    let sd = s.send(0, 1, 1, 4, &msg, false);
    assert_eq!(s.kinds(0, 1), vec![Kind::RtsPut]);
    // The sender's wait: every chunk, before the receiver has read the RtsPut.
    s.with(0, |e, n| e.progress(n));
    assert_eq!(s.w.writes.iter().map(|w| w.3).sum::<usize>(), N);
    s.pump();
    assert!(s.done(1, r) && s.done(0, sd));
    s.assert_received(1, r, status(0, 4, N as u64, 0), &buf, &msg, "written by the sender");
    assert!(s.w.reads.is_empty(), "the receiver read nothing");
    assert_eq!(s.count(Kind::Fin), 1);
}

#[test]
fn a_receiver_that_comes_first_reads_it() {
    let (mut s, r, buf) = offered();
    let msg = pat(5, N);
    let sd = s.send(0, 1, 1, 4, &msg, false);
    // The RtsPut reaches the receiver before the sender makes progress.
    s.deliver();
    s.with(1, |e, n| e.progress(n));
    assert!(s.done(1, r), "the receiver copied every chunk itself");
    s.pump();
    assert!(s.done(0, sd));
    s.assert_received(1, r, status(0, 4, N as u64, 0), &buf, &msg, "read by the receiver");
    assert!(s.w.writes.is_empty());
}

#[test]
fn a_cancel_withdraws_the_offer_and_the_message_goes_on_as_an_rts() {
    let (mut s, r, _buf) = offered();
    assert!(s.with(1, |e, n| e.cancel_recv(n, r)));
    assert!(s.get(1, r).status.cancelled);
    let msg = pat(7, N);
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.with(0, |e, n| e.progress(n));
    assert!(s.w.writes.is_empty(), "nothing written into the cancelled receive's buffer");
    s.pump();
    // Unexpected now; a second receive takes it as a plain rendezvous.
    let mut b2 = guarded(N);
    let r2 = s.recv(1, 1, 0, 4, contig(&mut b2, N));
    s.pump();
    assert!(s.done(1, r2) && s.done(0, sd));
    s.assert_received(1, r2, status(0, 4, N as u64, 0), &b2, &msg, "after the cancel");
}

#[test]
fn a_cancel_after_the_sender_began_fails_and_the_receive_completes() {
    let (mut s, r, buf) = offered();
    let msg = pat(8, N);
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.with(0, |e, n| e.progress(n));
    assert!(!s.with(1, |e, n| e.cancel_recv(n, r)), "chunks are written: too late to cancel");
    s.pump();
    assert!(s.done(1, r) && s.done(0, sd));
    assert!(!s.get(1, r).status.cancelled);
    s.assert_received(1, r, status(0, 4, N as u64, 0), &buf, &msg, "cancel refused");
}

#[test]
fn another_message_first_voids_the_offer() {
    let (mut s, r, buf) = offered();
    // A small message that the offered receive matches, then a large one for a later receive.
    let small = pat(1, 40);
    let big = pat(2, N);
    let s1 = s.send(0, 1, 1, 4, &small, false);
    let s2 = s.send(0, 1, 1, 4, &big, false);
    assert_eq!(s.kinds(0, 1), vec![Kind::Eager, Kind::Rts], "the offer holds for the next message only");
    s.pump();
    assert!(s.done(1, r) && s.done(0, s1));
    s.assert_received(1, r, status(0, 4, 40, 0), &buf, &small, "the small one");
    let mut b2 = guarded(N);
    let r2 = s.recv(1, 1, 0, 4, contig(&mut b2, N));
    s.pump();
    assert!(s.done(1, r2) && s.done(0, s2));
    s.assert_received(1, r2, status(0, 4, N as u64, 0), &b2, &big, "the large one");
    assert!(s.w.writes.is_empty());
}

#[test]
fn no_offer_where_an_earlier_receive_could_take_the_message() {
    let mut s = sim(2, usize::MAX, true);
    s.w.offers = true;
    let mut any = guarded(N);
    let mut mine = guarded(N);
    let _first = s.recv(1, 1, -1, 4, contig(&mut any, N));
    let r = s.recv(1, 1, 0, 4, contig(&mut mine, N));
    s.with(1, |e, n| e.offer(n, r, 0));
    assert_eq!(s.count(Kind::Offer), 0, "an MPI_ANY_SOURCE receive posted earlier comes first");
}
