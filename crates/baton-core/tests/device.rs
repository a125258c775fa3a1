//! The device's point-to-point, completion and buffered-send entries, driven in one process: a
//! singleton (no launcher) whose messages to itself go through the loopback queue, so every
//! entry runs its real code (engine, progress, waiting) without other processes. Each test has
//! a device of its own.

use baton_abi::consts as c;
use baton_core::datatype::predefined;
use baton_core::device::{
    check_status, proc_null_status, Awaited, Buffer, Detached, Device, Envelope, Matched, NoSuchRequest, Persistent,
    SendMode,
};
use baton_core::engine::Sender;
use baton_core::runtime::Mpi;
use baton_transport::mem::UserBuf;

fn device() -> Device {
    Device::new(Mpi::init().expect("a singleton process starts without a launcher"))
}

/// `v` as a buffer of bytes.
fn bytes(v: &mut [u8]) -> Buffer {
    let layout = predefined(c::MPI_BYTE).unwrap().clone();
    // SAFETY: every test keeps `v` alive and leaves it alone until the operations on it end.
    let span = unsafe { UserBuf::new(v.as_mut_ptr() as usize, v.len()) };
    Buffer { span, base_off: 0, layout: layout.into(), count: v.len() }
}

/// Rank 0 of the world (this process), with `tag`.
fn me(d: &Device, tag: i32) -> Envelope<'_> {
    Envelope { comm: &d.world, peer: 0, tag, handle: c::MPI_COMM_WORLD }
}

#[test]
fn every_send_mode_reaches_a_posted_receive() {
    let d = device();
    d.buffer_attach("MPI_Buffer_attach", 0x1000, 4096, false).unwrap();
    for (k, mode) in [SendMode::Standard, SendMode::Sync, SendMode::Ready, SendMode::Buffered].into_iter().enumerate() {
        let mut out = [k as u8 + 1; 24];
        let mut into = [0u8; 24];
        let r = d.start_recv(me(&d, 3), &bytes(&mut into));
        d.send(mode.call(false), me(&d, 3), &bytes(&mut out), mode).unwrap();
        let done = d.wait_one(Awaited::Request(r)).unwrap();
        assert_eq!((done.status.source, done.status.tag, done.status.bytes), (0, 3, 24), "{mode:?}");
        assert_eq!(done.comm, c::MPI_COMM_WORLD, "the request carries the handle given");
        assert_eq!(into, out, "{mode:?}");
    }
    d.buffer_detach("MPI_Buffer_detach").unwrap();
}

#[test]
fn a_receive_finds_a_message_sent_before_it() {
    let d = device();
    let mut out = *b"eight by";
    let mut into = [0u8; 8];
    d.send("MPI_Send", me(&d, 1), &bytes(&mut out), SendMode::Standard).unwrap();
    let s = d.recv(me(&d, 1), &bytes(&mut into));
    assert_eq!((s.source, s.tag, s.bytes, s.error), (0, 1, 8, 0));
    assert_eq!(&into, b"eight by");
    // The express entries: a send without a request, a receive through the direct slot, and a
    // posted receive.
    let (ctx, to) = (d.world.ctx, d.world.proc_of(0));
    assert!(d.send_eager_now(to, ctx, 0, 2, b"express!", Sender::Waits));
    let s = d.recv_now(c::MPI_COMM_WORLD, ctx, 0, 2, bytes(&mut into).span);
    assert_eq!((s.tag, s.bytes), (2, 8));
    assert_eq!(&into, b"express!");
    let r = d.post_recv(c::MPI_COMM_WORLD, ctx, c::MPI_ANY_SOURCE, c::MPI_ANY_TAG, bytes(&mut into).span);
    assert!(d.send_eager_now(to, ctx, 0, 4, b"posted 1", Sender::GoesOn));
    let done = d.wait_one(Awaited::Request(r)).unwrap();
    assert_eq!((done.status.source, done.status.tag), (0, 4));
    assert_eq!(&into, b"posted 1");
}

#[test]
fn a_longer_message_truncates_and_says_so() {
    let d = device();
    let mut out = [7u8; 16];
    let mut into = [0u8; 8];
    d.send("MPI_Send", me(&d, 5), &bytes(&mut out), SendMode::Standard).unwrap();
    let s = d.recv(me(&d, 5), &bytes(&mut into));
    assert_eq!(s.error, c::MPI_ERR_TRUNCATE);
    assert_eq!(into, [7u8; 8]);
    let e = check_status("MPI_Recv", &s).unwrap_err();
    assert_eq!(e.class, c::MPI_ERR_TRUNCATE);
    assert_eq!(e.msg, "MPI_Recv: message from rank 0 (tag 5) is longer than the receive buffer (8 bytes received)");
    let gone = baton_core::engine::Status { error: c::MPI_ERR_PROC_ABORTED, ..s };
    assert_eq!(check_status("MPI_Wait", &gone).unwrap_err().class, c::MPI_ERR_PROC_ABORTED);
    assert!(check_status("MPI_Recv", &proc_null_status()).is_ok());
}

#[test]
fn proc_null_completes_at_once() {
    let d = device();
    let mut buf = [9u8; 4];
    let null = Envelope { peer: c::MPI_PROC_NULL, ..me(&d, 0) };
    assert_eq!(d.recv(null, &bytes(&mut buf)), proc_null_status());
    assert_eq!(buf, [9u8; 4], "nothing is written");
    for mode in [SendMode::Standard, SendMode::Sync, SendMode::Buffered] {
        let s = d.start_send("MPI_Isend", null, &bytes(&mut buf), mode).unwrap();
        assert!(d.test_one(Awaited::Request(s)).unwrap().is_some(), "{mode:?}");
    }
    let r = d.start_recv(null, &bytes(&mut buf));
    assert_eq!(d.wait_one(Awaited::Request(r)).unwrap().status, proc_null_status());
    assert_eq!(d.probe(&d.world, c::MPI_PROC_NULL, 0), proc_null_status());
    assert!(matches!(d.improbe(&d.world, c::MPI_PROC_NULL, 0), Some(Matched::NoProc)));
    assert_eq!(d.mrecv(Matched::NoProc, &bytes(&mut buf)), proc_null_status());
}

#[test]
fn probes_see_a_message_and_matched_probes_take_it() {
    let d = device();
    assert!(d.iprobe(&d.world, 0, 6).is_none());
    assert!(d.improbe(&d.world, 0, 6).is_none());
    let mut out = *b"probe me";
    d.send("MPI_Send", me(&d, 6), &bytes(&mut out), SendMode::Standard).unwrap();
    let s = d.iprobe(&d.world, c::MPI_ANY_SOURCE, 6).expect("the message is there");
    assert_eq!((s.source, s.tag, s.bytes), (0, 6, 8));
    assert_eq!(d.probe(&d.world, 0, c::MPI_ANY_TAG).bytes, 8);
    let m = d.mprobe(&d.world, 0, 6);
    assert_eq!(m.status().bytes, 8);
    assert!(d.iprobe(&d.world, 0, 6).is_none(), "a matched message is out of matching");
    let mut into = [0u8; 8];
    let r = d.imrecv(m, &bytes(&mut into));
    assert_eq!(d.wait_one(Awaited::Request(r)).unwrap().status.bytes, 8);
    assert_eq!(&into, b"probe me");
}

#[test]
fn sendrecv_and_sendrecv_replace_exchange_with_self() {
    let d = device();
    let mut out = [1u8, 2, 3, 4];
    let mut into = [0u8; 4];
    let s = d.sendrecv(me(&d, 8), &bytes(&mut out), me(&d, 8), &bytes(&mut into));
    assert_eq!((s.tag, s.bytes), (8, 4));
    assert_eq!(into, out);
    // Replace: the bytes sent are those the buffer held before the same buffer received.
    let mut buf = [5u8, 6, 7, 8];
    let s = d.sendrecv_replace(me(&d, 9), me(&d, 9), &bytes(&mut buf));
    assert_eq!((s.tag, s.bytes), (9, 4));
    assert_eq!(buf, [5, 6, 7, 8]);
}

#[test]
fn persistent_operations_start_again_each_round() {
    let d = device();
    let mut out = [0u8; 4];
    let mut into = [0u8; 4];
    let send =
        Persistent::Send { comm: d.world.clone(), data: bytes(&mut out), dest: 0, tag: 11, mode: SendMode::Standard };
    let recv = Persistent::Recv { comm: d.world.clone(), buf: bytes(&mut into), src: 0, tag: 11 };
    for round in 0..3u8 {
        bytes(&mut out).span.write(0, &[round; 4]);
        let r = d.start(&recv, 0x99).unwrap();
        let s = d.start(&send, 0x99).unwrap();
        let done = d.wait_all(&[Awaited::Request(s), Awaited::Request(r)]).unwrap();
        assert_eq!(done[1].status.bytes, 4);
        assert_eq!(done[1].comm, 0x99);
        assert_eq!(into, [round; 4]);
    }
}

#[test]
fn buffered_sends_need_room_in_the_attached_buffer() {
    let d = device();
    let mut out = [3u8; 8];
    let e = d.send("MPI_Bsend", me(&d, 1), &bytes(&mut out), SendMode::Buffered).unwrap_err();
    assert_eq!((e.class, e.msg.as_str()), (c::MPI_ERR_BUFFER, "MPI_Bsend: no buffer is attached (MPI_Buffer_attach)"));
    d.buffer_attach("MPI_Buffer_attach", 0x1000, 100, false).unwrap();
    let need = 8 + c::MPI_BSEND_OVERHEAD as usize;
    let e = d.start_send("MPI_Ibsend", me(&d, 1), &bytes(&mut out), SendMode::Buffered).unwrap_err();
    assert_eq!(e.msg, format!("MPI_Ibsend: attached buffer too small: {need} bytes needed, 100 free"));
    assert_eq!(d.buffer_detach("MPI_Buffer_detach").unwrap(), Detached::User { addr: 0x1000, size: 100 });
    d.buffer_attach("MPI_Buffer_attach", 0x2000, 2 * need, false).unwrap();
    let first = d.start_send("MPI_Ibsend", me(&d, 1), &bytes(&mut out), SendMode::Buffered).unwrap();
    // The application's request is complete at once, and its buffer free for reuse.
    assert!(d.test_one(Awaited::Request(first)).unwrap().is_some());
    out = [4u8; 8];
    d.send("MPI_Bsend", me(&d, 1), &bytes(&mut out), SendMode::Buffered).unwrap();
    let mut into = [0u8; 8];
    assert_eq!(d.recv(me(&d, 1), &bytes(&mut into)).bytes, 8);
    assert_eq!(into, [3u8; 8]);
    assert_eq!(d.recv(me(&d, 1), &bytes(&mut into)).bytes, 8);
    assert_eq!(into, [4u8; 8]);
    d.buffer_flush();
    assert_eq!(d.buffer_detach("MPI_Buffer_detach").unwrap(), Detached::User { addr: 0x2000, size: 2 * need });
    assert!(d.buffer_detach("MPI_Buffer_detach").is_err());
}

#[test]
fn completion_calls_report_what_completed_by_index() {
    let d = device();
    let mut bufs = [[0u8; 2]; 3];
    let [a, b, c3] = &mut bufs;
    let reqs = [
        Awaited::Request(d.start_recv(me(&d, 21), &bytes(a))),
        Awaited::Inactive,
        Awaited::Request(d.start_recv(me(&d, 22), &bytes(b))),
        Awaited::Request(d.start_recv(me(&d, 23), &bytes(c3))),
    ];
    assert_eq!(d.test_any(&reqs).unwrap(), None);
    assert_eq!(d.test_some(&reqs).unwrap(), vec![]);
    assert!(d.test_all(&reqs).unwrap().is_none());
    let mut out = [1u8, 2];
    d.send("MPI_Send", me(&d, 22), &bytes(&mut out), SendMode::Standard).unwrap();
    let (i, done) = d.wait_any(&reqs).unwrap().expect("an active request completed");
    assert_eq!((i, done.status.tag), (2, 22));
    // The request taken is released: its id names nothing any more.
    assert_eq!(d.test_any(&reqs), Err(NoSuchRequest(2)));
    let rest = [reqs[0], reqs[1], reqs[3]];
    d.send("MPI_Send", me(&d, 23), &bytes(&mut out), SendMode::Standard).unwrap();
    d.send("MPI_Send", me(&d, 21), &bytes(&mut out), SendMode::Standard).unwrap();
    let some = d.wait_some(&rest).unwrap();
    assert_eq!(some.iter().map(|(i, c)| (*i, c.status.tag)).collect::<Vec<_>>(), vec![(0, 21), (2, 23)]);
    assert_eq!(d.wait_any(&[Awaited::Inactive]).unwrap(), None, "nothing active: nothing to wait for");
    assert!(d.wait_some(&[Awaited::Inactive]).unwrap().is_empty());
    assert_eq!(d.wait_all(&[Awaited::Done, Awaited::Inactive]).unwrap().len(), 2);
}

#[test]
fn cancel_free_and_get_status_of_engine_requests() {
    let d = device();
    let mut buf = [0u8; 4];
    let r = d.start_recv(me(&d, 31), &bytes(&mut buf));
    assert_eq!(d.request_status(Awaited::Request(r)).unwrap(), None);
    assert!(d.cancel(r));
    let s = d.request_status(Awaited::Request(r)).unwrap().expect("a cancelled receive is complete");
    assert!(s.cancelled);
    assert!(d.wait_one(Awaited::Request(r)).unwrap().status.cancelled);
    let stale = r;
    assert!(!d.cancel(stale));
    assert!(!d.free_request(stale));
    assert_eq!(d.wait_one(Awaited::Request(stale)), Err(NoSuchRequest(0)));
    assert_eq!(d.request_status(Awaited::Request(stale)), Err(NoSuchRequest(0)));
    // A freed receive goes on: the message it matches is consumed, not left for the next one.
    let freed = d.start_recv(me(&d, 32), &bytes(&mut buf));
    assert!(d.free_request(freed));
    let mut out = [6u8; 4];
    d.send("MPI_Send", me(&d, 32), &bytes(&mut out), SendMode::Standard).unwrap();
    d.poll();
    assert!(d.iprobe(&d.world, 0, 32).is_none());
    assert_eq!(buf, [6u8; 4]);
    let done = d.finished_request(proc_null_status());
    assert_eq!(d.test_one(Awaited::Request(done)).unwrap().unwrap().status, proc_null_status());
}
