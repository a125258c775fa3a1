//! Rendezvous (remote read, or `Cts` and streamed `Data` when reads are refused, byte-stream
//! pieces over lanes), probe and mprobe, owned sinks, and request slots.

use crate::common::GUARD;
use crate::sim::{contig, guarded, pat, sim, status, ByteStream};
use crate::TRUNCATE;
use baton_core::engine::{Action, ProcIdx, ReqId, Sink, Status, ANY_SOURCE, ANY_TAG};
use baton_transport::frame::{Header, Kind};

// ---------------------------------------------------------------------------------------------
// Rendezvous
// ---------------------------------------------------------------------------------------------

#[test]
fn rendezvous_with_remote_read() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 1000);
    let sd = s.send(0, 1, 1, 2, &msg, false);
    s.pump();
    assert!(!s.done(0, sd), "the receiver has not matched yet");
    assert!(s.w.reads.is_empty());
    let (r, buf) = s.post(1, 1, 0, 2, 1000);
    // Matching records the copy in the outbox; the progress pass carries it out.
    assert!(!s.done(1, r) && s.w.reads.is_empty(), "matching copies nothing");
    assert!(matches!(s.eng[1].actions(), [Action::Copy { from: 0, req, .. }] if *req == r));
    s.with(1, |e, n| e.run_actions(n));
    assert!(s.eng[1].actions().is_empty());
    assert!(s.done(1, r), "the read completes the receive");
    assert_eq!(s.w.reads, vec![(1, 0, msg.as_ptr() as u64, 1000)]);
    assert!(!s.done(0, sd), "the send waits for Fin");
    s.pump();
    assert!(s.done(0, sd));
    assert_eq!(s.kinds(0, 1), vec![Kind::Rts]);
    assert_eq!(s.kinds(1, 0), vec![Kind::Fin]);
    s.assert_received(1, r, status(0, 2, 1000, 0), &buf, &msg, "");
    // The Rts told the size and the sender's address.
    let rts = s.w.log[0].2;
    assert_eq!((rts.len, rts.aux), (1000, msg.as_ptr() as u64));
}

#[test]
fn rendezvous_streamed_when_reads_are_refused() {
    for size in [65, 128, 129, 255, 1000, 1023, 4097] {
        for cap in [1, 2, usize::MAX] {
            for posted_first in [true, false] {
                let mut s = sim(2, cap, false);
                let msg = pat(size, size);
                let mut buf = guarded(size);
                let (sd, r) = s.exchange(&msg, &mut buf, size, posted_first);
                let what = format!("size {size} cap {cap} posted {posted_first}");
                assert!(s.done(0, sd) && s.done(1, r), "{what}");
                s.assert_received(1, r, status(0, 2, size as u64, 0), &buf, &msg, &what);
                assert_eq!(s.kinds(1, 0), vec![Kind::Cts], "{what}");
                let data: Vec<_> = s.w.log.iter().filter(|l| l.2.kind == Kind::Data).collect();
                assert_eq!(data.len(), size.div_ceil(128), "{what}");
                let mut off = 0;
                for d in data {
                    assert_eq!(d.2.aux as usize, off, "{what}: Data offsets in order");
                    assert_eq!(d.2.id, r.wire(), "{what}: Data addressed to the receive request");
                    assert!(d.3 <= 128 && d.3 > 0);
                    off += d.3;
                }
                assert_eq!(off, size);
                assert!(s.w.reads.is_empty());
            }
        }
    }
}

/// A receive waits for streamed data from its `Cts` until the last byte lands, and no longer
/// when its sender fails first: TCP reads its bulk lanes only while one does.
#[test]
fn a_receive_awaits_streamed_data_from_its_cts_to_its_end() {
    for fail in [false, true] {
        let mut s = sim(2, 1, false);
        let msg = pat(4, 1000);
        let (r, buf) = s.post(1, 1, 0, 2, 1000);
        assert!(!s.eng[1].awaits_stream());
        let sd = s.send(0, 1, 1, 2, &msg, false);
        // Until the Cts has been sent: the Rts reaches the receiver, which answers.
        while s.kinds(1, 0).is_empty() {
            assert!(!s.eng[1].awaits_stream());
            assert!(s.step(), "stuck before the Cts");
        }
        assert!(s.eng[1].awaits_stream() && !s.done(1, r), "fail {fail}");
        if fail {
            assert!(s.eng[1].fail_peer(0, |_, _| false, 77));
            assert_eq!(s.get(1, r).status.error, 77);
        } else {
            s.pump();
            assert!(s.done(0, sd) && s.done(1, r));
            assert_eq!(&buf[..1000], &msg[..]);
        }
        assert!(!s.eng[1].awaits_stream(), "fail {fail}");
    }
}

/// A byte-stream transport (TCP): data frames leave in pieces, over several lanes, while
/// eager and synchronous messages keep their order on lane 0; data is placed directly.
#[test]
fn byte_stream_pieces_lanes_and_direct_placement() {
    for piece in [1, 7, 50] {
        for lanes in [1, 2, 3] {
            for direct in [false, true] {
                let what = format!("piece {piece} lanes {lanes} direct {direct}");
                let mut s = sim(2, 4, false);
                s.w.stream = ByteStream::new(piece, lanes, direct);
                s.w.max_frame = 64;
                s.w.eager = 16;
                let sizes = [300, 5, 1000, 0, 17, 64, 129];
                let msgs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(k, &n)| pat(k + 1, n)).collect();
                let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&n| guarded(n)).collect();
                let mut recvs = Vec::new();
                for (k, b) in bufs.iter_mut().enumerate() {
                    let cap = sizes[k];
                    recvs.push(s.recv(1, 1, 0, 3, contig(b, cap)));
                }
                let sends: Vec<ReqId> =
                    msgs.iter().enumerate().map(|(k, m)| s.send(0, 1, 1, 3, m, k % 3 == 1)).collect();
                s.pump();
                for k in 0..sizes.len() {
                    assert!(s.done(0, sends[k]), "{what}: send {k}");
                    let st = status(0, 3, sizes[k] as u64, 0);
                    s.assert_received(1, recvs[k], st, &bufs[k], &msgs[k], &format!("{what}: receive {k}"));
                }
                assert!(s.w.stream.as_ref().unwrap().mid.is_empty(), "{what}: a frame left unfinished");
            }
        }
    }
}

#[test]
fn several_streams_at_once() {
    let mut s = sim(3, 2, false);
    s.w.max_frame = 50;
    s.w.eager = 10;
    let m: Vec<Vec<u8>> = (0..6).map(|k| pat(k, 333 + k * 17)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..6).map(|_| guarded(500)).collect();
    let mut recvs = Vec::new();
    for (k, b) in bufs.iter_mut().enumerate() {
        recvs.push(s.recv(2, 1, (k % 2) as i32, 0, contig(b, 500)));
    }
    let sends: Vec<(ProcIdx, ReqId)> = m
        .iter()
        .enumerate()
        .map(|(k, x)| ((k % 2) as ProcIdx, s.send((k % 2) as ProcIdx, 2, 1, 0, x, false)))
        .collect();
    s.pump();
    for k in 0..6 {
        assert!(s.done(sends[k].0, sends[k].1));
        s.assert_received(2, recvs[k], status((k % 2) as i32, 0, m[k].len() as u64, 0), &bufs[k], &m[k], "");
    }
}

#[test]
fn packed_send_data() {
    for read_ok in [true, false] {
        let mut s = sim(2, usize::MAX, read_ok);
        let msg = pat(9, 777);
        let (r, buf) = s.post(1, 1, 0, 0, 777);
        let sd = s.send_packed(0, 1, 1, 0, msg.clone());
        s.pump();
        assert!(s.done(0, sd) && s.done(1, r));
        assert_eq!(&buf[..777], &msg[..]);
    }
}

// ---------------------------------------------------------------------------------------------
// Probe, mprobe, owned sinks
// ---------------------------------------------------------------------------------------------

#[test]
fn probe_reports_without_receiving() {
    for size in [12, 800] {
        let mut s = sim(2, usize::MAX, true);
        assert!(s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).is_none());
        let msg = pat(1, size);
        let sd = s.send(0, 1, 1, 44, &msg, false);
        s.pump();
        let st = s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).expect("probe");
        assert_eq!(st, status(0, 44, size as u64, 0));
        assert_eq!(s.eng[1].probe(1, 0, 44), Some(st));
        assert!(s.eng[1].probe(1, 0, 45).is_none());
        assert!(s.eng[1].probe(1, 1, 44).is_none());
        assert!(s.eng[1].probe(2, 0, 44).is_none());
        assert_eq!(s.eng[1].unexpected_len(), 1, "probe leaves the message queued");
        let (r, buf) = s.post(1, 1, 0, 44, size);
        s.pump();
        assert!(s.done(1, r) && s.done(0, sd));
        assert_eq!(&buf[..size], &msg[..]);
        assert!(s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).is_none());
    }
}

#[test]
fn mprobe_then_mrecv() {
    for read_ok in [true, false] {
        for size in [12, 800] {
            let mut s = sim(2, 2, read_ok);
            let first = pat(1, size);
            let second = pat(2, size);
            let s1 = s.send(0, 1, 1, 3, &first, false);
            let s2 = s.send(0, 1, 1, 3, &second, false);
            s.pump();
            assert!(s.eng[1].mprobe(1, 0, 4).is_none());
            let msg = s.eng[1].mprobe(1, ANY_SOURCE, 3).expect("mprobe");
            assert_eq!((msg.from, msg.h.src, msg.h.tag, msg.h.len), (0, 0, 3, size as u64));
            assert_eq!(s.eng[1].unexpected_len(), 1);
            // A normal receive cannot take the mprobed message: it gets the second one.
            let (r2, b2) = s.post(1, 1, 0, 3, size);
            s.pump();
            assert!(s.done(1, r2));
            assert_eq!(&b2[..size], &second[..]);
            // Nor does a wildcard receive posted now.
            let (rw, bw) = s.post(1, 1, ANY_SOURCE, ANY_TAG, size);
            s.pump();
            assert!(!s.done(1, rw));
            assert!(s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).is_none());
            let mut b1 = guarded(size);
            let r1 = s.with(1, |e, n| e.mrecv(n, msg, contig(&mut b1, size)));
            s.pump();
            assert!(s.done(1, r1) && s.done(0, s1) && s.done(0, s2));
            assert_eq!(s.get(1, r1).status, status(0, 3, size as u64, 0));
            assert_eq!(&b1[..size], &first[..]);
            assert!(!s.done(1, rw));
            assert!(s.with(1, |e, n| e.cancel_recv(n, rw)));
            assert!(bw.iter().all(|&b| b == GUARD));
        }
    }
}

#[test]
fn owned_sink_gives_the_data_back() {
    for read_ok in [true, false] {
        for (size, cap) in [(0, 0), (40, 40), (40, 100), (900, 900), (900, 129)] {
            let mut s = sim(2, 2, read_ok);
            let msg = pat(3, size);
            let r = s.recv(1, 1, 0, 0, Sink::Owned(vec![0xAB; cap]));
            assert!(s.get(1, r).owned.is_none());
            let sd = s.send(0, 1, 1, 0, &msg, false);
            s.pump();
            assert!(s.done(0, sd) && s.done(1, r));
            let req = s.get(1, r);
            let n = size.min(cap);
            let err = if size > cap { TRUNCATE } else { 0 };
            assert_eq!(req.status, status(0, 0, n as u64, err));
            let owned = req.owned.as_ref().expect("owned data");
            assert_eq!(owned.len(), cap);
            assert_eq!(&owned[..n], &msg[..n]);
            assert!(owned[n..].iter().all(|&b| b == 0xAB));
        }
    }
}

#[test]
fn owned_sink_on_an_unexpected_and_an_mprobed_message() {
    for read_ok in [true, false] {
        let mut s = sim(2, usize::MAX, read_ok);
        let a = pat(1, 300);
        let b = pat(2, 20);
        s.send(0, 1, 1, 0, &a, false);
        s.send(0, 1, 1, 1, &b, false);
        s.pump();
        let m = s.eng[1].mprobe(1, 0, 0).unwrap();
        let ra = s.with(1, |e, n| e.mrecv(n, m, Sink::Owned(vec![0; 300])));
        let rb = s.recv(1, 1, 0, 1, Sink::Owned(vec![0; 20]));
        s.pump();
        assert_eq!(s.get(1, ra).owned.as_deref(), Some(&a[..]));
        assert_eq!(s.get(1, rb).owned.as_deref(), Some(&b[..]));
    }
}

// ---------------------------------------------------------------------------------------------
// Request slots
// ---------------------------------------------------------------------------------------------

#[test]
fn release_frees_the_slot_and_stale_ids_are_not_found() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 8);
    let (r, _buf) = s.post(1, 1, 0, 0, 8);
    s.send(0, 1, 1, 0, &msg, false);
    s.pump();
    assert!(s.done(1, r));
    s.eng[1].release(r);
    assert!(s.eng[1].get(r).is_none());
    assert!(s.eng[1].get_mut(r).is_none());
    s.eng[1].release(r); // releasing a stale id is harmless
    let again = s.eng[1].completed(Status::default());
    assert_eq!(again.idx, r.idx, "the freed slot is reused");
    assert_ne!(again.gen, r.gen);
    assert!(s.eng[1].get(r).is_none(), "the old generation must not find the new request");
    assert!(s.eng[1].get(again).unwrap().complete);
    assert_eq!(ReqId::from_wire(again.wire()), again);

    // A stale Fin (old generation) must not complete the send that now owns the slot.
    let m1 = pat(2, 8);
    let s1 = s.send(0, 1, 1, 0, &m1, false);
    assert!(s.done(0, s1));
    s.pump();
    s.eng[0].release(s1);
    let big = pat(3, 500);
    let s2 = s.send(0, 1, 1, 0, &big, false);
    assert_eq!(s2.idx, s1.idx);
    s.pump();
    assert!(!s.done(0, s2));
    let stale = Header::control(Kind::Fin, s1.wire(), 0);
    s.with(0, |e, n| e.on_frame(n, 1, &stale, &[]));
    assert!(!s.done(0, s2), "a Fin for an old generation completed the slot's new request");
    let stale_cts = Header::control(Kind::Cts, s1.wire(), 0);
    s.with(0, |e, n| e.on_frame(n, 1, &stale_cts, &[]));
    assert!(!s.eng[0].has_outgoing());
    s.eng[1].mprobe(1, 0, 0).expect("the first 8-byte message");
    let (r2, b2) = s.post(1, 1, 0, 0, 500);
    s.pump();
    assert!(s.done(0, s2) && s.done(1, r2));
    assert_eq!(&b2[..500], &big[..]);
}

#[test]
fn release_of_active_requests_detaches_them() {
    for read_ok in [true, false] {
        let mut s = sim(2, 1, read_ok);
        // An active receive.
        let (r, buf) = s.post(1, 1, 0, 0, 600);
        s.eng[1].release(r);
        let req = s.get(1, r);
        assert!(req.detached && !req.complete);
        assert!(s.eng[1].is_posted_recv(r), "a detached receive still matches");
        // An active rendezvous send.
        let big = pat(1, 600);
        let sd = s.send(0, 1, 1, 0, &big, false);
        s.eng[0].release(sd);
        assert!(s.get(0, sd).detached);
        s.pump();
        assert_eq!(&buf[..600], &big[..], "the detached receive still wrote its data");
        assert!(s.eng[1].get(r).is_none(), "completed detached receive dropped");
        assert!(s.eng[0].get(sd).is_none(), "completed detached send dropped");
        // Both slots are free again.
        let n1 = s.eng[1].completed(Status::default());
        let n0 = s.eng[0].completed(Status::default());
        assert_eq!((n1.idx, n0.idx), (r.idx, sd.idx));
        assert!(s.eng[1].get(r).is_none() && s.eng[0].get(sd).is_none());

        // A synchronous eager send detached while waiting for its SyncAck.
        let small = pat(2, 10);
        let ss = s.send(0, 1, 1, 0, &small, true);
        s.pump();
        s.eng[0].release(ss);
        assert!(s.eng[0].get(ss).is_some());
        let (r2, _b2) = s.post(1, 1, 0, 0, 10);
        s.pump();
        assert!(s.done(1, r2));
        assert!(s.eng[0].get(ss).is_none());
    }
}
