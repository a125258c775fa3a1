//! The engine's outbox: a matched rendezvous records its copy ([`Action::Copy`]) instead of
//! making it inside the frame's handling; the progress pass carries the copies out, in order,
//! once its frames are read. Failures of the sender take its copies out of the outbox.

use crate::sim::{pat, sim, status, Sim};
use baton_abi::consts as c;
use baton_core::engine::{Action, ReqId};
use baton_transport::frame::Kind;

#[test]
fn a_burst_of_rendezvous_frames_is_matched_before_any_copy() {
    let mut s = sim(2, usize::MAX, true);
    let msgs: Vec<Vec<u8>> = (0..3).map(|k| pat(k, 500 + 100 * k)).collect();
    let posted: Vec<_> = msgs.iter().map(|m| s.post(1, 1, 0, 7, m.len())).collect();
    let sends: Vec<_> = msgs.iter().map(|m| s.send(0, 1, 1, 7, m, false)).collect();
    // Every Rts crosses and matches: the copies wait, none has been read.
    while s.deliver() {}
    let queued: Vec<ReqId> = s.eng[1]
        .actions()
        .iter()
        .map(|a| match a {
            Action::Copy { from: 0, req, h } if h.kind == Kind::Rts => *req,
            a => panic!("{a:?} in the outbox"),
        })
        .collect();
    assert_eq!(queued, posted.iter().map(|(r, _)| *r).collect::<Vec<_>>());
    assert!(s.w.reads.is_empty());
    assert!(posted.iter().all(|(r, _)| !s.done(1, *r)));
    assert!(s.eng[1].has_outgoing(), "a waiting copy keeps the process from sleeping");
    assert!(s.kinds(1, 0).is_empty(), "no Fin before its copy");
    // The pass carries them out in matching order, each answered by its Fin.
    s.with(1, |e, n| e.progress(n));
    assert!(s.eng[1].actions().is_empty());
    let read: Vec<u64> = s.w.reads.iter().map(|r| r.2).collect();
    assert_eq!(read, msgs.iter().map(|m| m.as_ptr() as u64).collect::<Vec<_>>());
    assert_eq!(s.kinds(1, 0), [Kind::Fin; 3]);
    s.pump();
    for (k, (r, buf)) in posted.iter().enumerate() {
        assert!(s.done(0, sends[k]));
        s.assert_received(1, *r, status(0, 7, msgs[k].len() as u64, 0), buf, &msgs[k], "");
    }
}

/// A rendezvous of `size` bytes from process 0 matched by a receive of `cap` bytes at process 1,
/// every frame delivered but nothing carried out: the simulation, the message, the receive and
/// its buffer, and the send.
fn matched(read_ok: bool, size: usize, cap: usize) -> (Sim, Vec<u8>, ReqId, Vec<u8>, ReqId) {
    let mut s = sim(2, usize::MAX, read_ok);
    let msg = pat(size, size);
    let (r, buf) = s.post(1, 1, 0, 2, cap);
    let sd = s.send(0, 1, 1, 2, &msg, false);
    while s.deliver() {}
    (s, msg, r, buf, sd)
}

#[test]
fn a_copy_the_receiver_cannot_make_asks_for_the_data_when_carried_out() {
    let (mut s, msg, r, buf, sd) = matched(false, 700, 700);
    assert!(matches!(s.eng[1].actions(), [Action::Copy { from: 0, req, .. }] if *req == r));
    assert!(s.kinds(1, 0).is_empty());
    s.with(1, |e, n| e.run_actions(n));
    assert_eq!(s.kinds(1, 0), [Kind::Cts], "the refused read turns into a request to stream");
    assert!(s.eng[1].awaits_stream());
    s.pump();
    assert!(s.done(0, sd));
    s.assert_received(1, r, status(0, 2, 700, 0), &buf, &msg, "");
}

#[test]
fn a_sender_that_fails_takes_its_copies_out_of_the_outbox() {
    let (mut s, _msg, r, _buf, _sd) = matched(true, 900, 900);
    assert!(matches!(s.eng[1].actions(), [Action::Copy { from: 0, req, .. }] if *req == r));
    assert!(s.eng[1].fail_peer(0, |_, _| false, c::MPI_ERR_PROC_ABORTED));
    assert!(s.eng[1].actions().is_empty());
    assert_eq!(s.get(1, r).status.error, c::MPI_ERR_PROC_ABORTED);
    assert!(s.done(1, r));
    s.with(1, |e, n| e.progress(n));
    assert!(s.w.reads.is_empty(), "nothing is read from a process that is gone");
}

#[test]
fn a_message_with_nothing_to_copy_needs_no_action() {
    // A rendezvous truncated to nothing is answered at match time.
    let (mut s, _msg, r, _buf, sd) = matched(true, 300, 0);
    assert!(s.eng[1].actions().is_empty());
    assert!(s.done(1, r));
    assert_eq!(s.kinds(1, 0), [Kind::Fin]);
    s.pump();
    assert!(s.done(0, sd));
    assert_eq!(s.get(1, r).status, status(0, 2, 0, crate::TRUNCATE));
}
