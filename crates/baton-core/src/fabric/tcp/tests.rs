//! `TcpNet` over loopback sockets: connections, lanes, congestion control, coalescing.

use super::*;
use baton_transport::frame::Kind;
use baton_transport::stream::{self, HEADER_LEN};
use std::net::{Ipv4Addr, TcpListener};

fn net(me: ProcIdx, secret: &Secret, stripes: usize) -> (TcpNet, SocketAddr) {
    net_eager(me, secret, stripes, 1024)
}

fn net_eager(me: ProcIdx, secret: &Secret, stripes: usize, eager_max: usize) -> (TcpNet, SocketAddr) {
    let cfg = TcpConfig {
        eager_max,
        chunk: 4096,
        stripes,
        iface: None,
        connect_timeout: Duration::from_secs(10),
        congestion: Congestion::System,
        bulk_congestion: Congestion::System,
        coalesce: 16 * 1024,
    };
    let id = Identity { me, job: 7, nprocs: 2, secret: secret.clone(), whoami: format!("test process {me}") };
    TcpNet::start(id, cfg, IpAddr::V4(Ipv4Addr::LOCALHOST), Box::new(|| {})).unwrap()
}

/// Processes 0 and 1 on loopback, each knowing the other's address, with `stripes` bulk
/// lanes; `setup` adjusts both before anything connects.
fn pair(eager_max: usize, stripes: usize, setup: impl Fn(&mut TcpNet)) -> (TcpNet, TcpNet) {
    let secret = Secret::generate().unwrap();
    let (mut a, addr_a) = net_eager(0, &secret, stripes, eager_max);
    let (mut b, addr_b) = net_eager(1, &secret, stripes, eager_max);
    for n in [&mut a, &mut b] {
        setup(n);
        n.set_peer(0, Some(addr_a), "ha");
        n.set_peer(1, Some(addr_b), "hb");
    }
    (a, b)
}

/// The receiving halves of the `n` connections `b` adopts first (waiting up to 10 s for
/// them), lane 0's first.
fn adopted_n(b: &mut TcpNet, n: usize) -> Vec<NewRx> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut rx = Vec::new();
    while rx.len() < n && Instant::now() < deadline {
        b.adopt_incoming();
        rx.extend(b.take_new_rx());
    }
    assert!(rx.len() >= n, "b adopted {} of {n} connections", rx.len());
    rx.sort_by_key(|r| r.bulk);
    rx
}

/// The receiving half of lane 0's connection, which `b` adopts.
fn adopted(b: &mut TcpNet) -> Rx {
    adopted_n(b, 1).swap_remove(0).rx
}

struct Frames(Vec<Header>);
impl FrameSink for Frames {
    fn frame(&mut self, h: &Header, _payload: &[u8]) {
        self.0.push(*h);
    }
}

/// Both processes dial each other at the same moment, on every lane: each pair must end
/// with exactly one working connection per lane, whichever dial won.
#[test]
fn simultaneous_connects_leave_one_connection_per_lane() {
    for round in 0..20 {
        let stripes = round % 3;
        let lanes = stripes + 1;
        let secret = Secret::generate().unwrap();
        let (mut a, addr_a) = net(0, &secret, stripes);
        let (mut b, addr_b) = net(1, &secret, stripes);
        for n in [&mut a, &mut b] {
            n.set_peer(0, Some(addr_a), "ha");
            n.set_peer(1, Some(addr_b), "hb");
        }
        let go = Arc::new(std::sync::Barrier::new(2));
        let (ga, gb) = (go.clone(), go);
        let ta = std::thread::spawn(move || {
            ga.wait();
            let ok = a.open(1);
            (a, ok)
        });
        let tb = std::thread::spawn(move || {
            gb.wait();
            let ok = b.open(0);
            (b, ok)
        });
        let (mut a, oka) = ta.join().unwrap();
        let (mut b, okb) = tb.join().unwrap();
        assert!(oka && okb, "round {round}: {:?} {:?}", a.fatal, b.fatal);
        // Connections the other side won may still be on their way to the adopting side.
        let deadline = Instant::now() + Duration::from_secs(5);
        let (mut rx_a, mut rx_b) = (Vec::new(), Vec::new());
        while (rx_a.len() < lanes || rx_b.len() < lanes) && Instant::now() < deadline {
            a.adopt_incoming();
            b.adopt_incoming();
            rx_a.extend(a.take_new_rx());
            rx_b.extend(b.take_new_rx());
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        a.adopt_incoming();
        b.adopt_incoming();
        rx_a.extend(a.take_new_rx());
        rx_b.extend(b.take_new_rx());
        assert_eq!((rx_a.len(), rx_b.len()), (lanes, lanes), "round {round}: one connection per lane");
        // Lane 0 carries frames both ways.
        let h = Header::control(Kind::Fin, round as u64, 0);
        assert!(a.try_send(1, &h, &[]) && b.try_send(0, &h, &[]));
        for rx in [&mut rx_a, &mut rx_b] {
            let mut got = Frames(Vec::new());
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.0.is_empty() && Instant::now() < deadline {
                for r in rx.iter_mut() {
                    r.rx.receive(&mut got).unwrap();
                }
            }
            assert_eq!(got.0, vec![h], "round {round}");
        }
        a.shutdown();
        b.shutdown();
    }
}

/// Both ends of a connection run the algorithm `BATON_TCP_CONGESTION` names (reno: every
/// Linux kernel has it and lets any process choose it).
#[test]
fn both_ends_of_a_connection_run_the_named_congestion_control() {
    let (mut a, mut b) = pair(1024, 0, |n| n.cfg.congestion = Congestion::Named("reno".into()));
    let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: 8, id: 0, aux: 0 };
    assert!(a.try_send(1, &h, &[1; 8]), "{:?}", a.fatal);
    let rx = adopted(&mut b);
    assert_eq!(stream::congestion(&rx.raw_fd()).unwrap(), "reno", "accepting end");
    let dialled = a.lane(1, 0).expect("a's connection").raw_fd();
    assert_eq!(stream::congestion(&dialled).unwrap(), "reno", "dialling end");
    assert!(!a.warned_congestion && !b.warned_congestion);
    a.shutdown();
    b.shutdown();
}

/// Streamed data goes round robin on the bulk lanes, everything else on lane 0; each lane
/// runs its own congestion setting, at both ends. Without bulk lanes, data goes on lane 0.
#[test]
fn streamed_data_takes_the_bulk_lanes_which_run_their_own_congestion_control() {
    let system = stream::congestion(&TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
    let (mut a, mut b) = pair(1024, 2, |n| n.cfg.bulk_congestion = Congestion::Named("reno".into()));
    let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: 8, id: 0, aux: 0 };
    assert!(a.try_send(1, &h, &[1; 8]), "{:?}", a.fatal);
    let rx = adopted_n(&mut b, 3);
    assert_eq!(rx.iter().map(|r| r.bulk).collect::<Vec<_>>(), [false, true, true]);
    for (i, r) in rx.iter().enumerate() {
        let want = if r.bulk { "reno" } else { system.as_str() };
        assert_eq!(stream::congestion(&r.rx.raw_fd()).unwrap(), want, "accepting end, connection {i}");
    }
    for lane in 0..3 {
        let want = if lane > 0 { "reno" } else { system.as_str() };
        let fd = a.lane(1, lane).expect("a's connection").raw_fd();
        assert_eq!(stream::congestion(&fd).unwrap(), want, "dialling end, lane {lane}");
    }
    let data = Header::control(Kind::Data, 5, 0);
    let lanes: Vec<usize> = (0..3).map(|_| a.start_data(1, &data, &[9; 100]).expect("started").0).collect();
    assert_eq!(lanes, [1, 2, 1]);
    a.shutdown();
    b.shutdown();

    let (mut a, b) = pair(1024, 0, |_| {});
    assert_eq!(a.start_data(1, &data, &[9; 100]).expect("started").0, 0);
    assert!(a.tx[1].len() == 1, "a bulk lane without BATON_TCP_STRIPES");
    a.shutdown();
    b.shutdown();
}

/// A connection's receiving half is out of the epoll set until it is watched (a socket in
/// the set costs every packet an epoll wake-up), in it while watched, and out again after.
#[test]
fn receiving_sockets_are_in_the_epoll_set_only_while_watched() {
    let (mut a, mut b) = pair(1024, 0, |_| {});
    let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: 8, id: 0, aux: 0 };
    assert!(a.try_send(1, &h, &[1; 8]), "{:?}", a.fatal);
    let rx = adopted(&mut b);
    let fd = rx.raw_fd() as u64;
    let ready = |b: &TcpNet| {
        // The frame is on its way: wait for it to show while watched.
        let mut out = Vec::new();
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            b.ready_fds(&mut out);
            if out.contains(&fd) || Instant::now() > until {
                return out.contains(&fd);
            }
        }
    };
    let mut out = Vec::new();
    b.ready_fds(&mut out);
    assert!(!out.contains(&fd), "a new connection's socket is watched from the start");
    b.watch(&rx);
    assert!(ready(&b), "a watched socket with a frame in it is not reported readable");
    b.unwatch(&rx);
    b.ready_fds(&mut out);
    assert!(!out.contains(&fd), "an unwatched socket is still reported");
    a.shutdown();
    b.shutdown();
}

/// An eager frame larger than the socket takes at once is finished by the progress pass's
/// `flush_unsent`, with nothing else sent after it (a sender that only polls).
#[test]
fn a_frame_the_kernel_took_in_part_is_finished_by_polling() {
    // Far beyond a loopback socket's send buffer.
    let payload = vec![7u8; 8 << 20];
    let (mut a, mut b) = pair(payload.len(), 0, |_| {});
    let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: payload.len() as u64, id: 0, aux: 0 };
    assert!(a.try_send(1, &h, &payload), "{:?}", a.fatal);
    assert!(a.flush_unsent(), "the kernel took all of 8 MiB at once");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut rx = adopted(&mut b);
    let mut got = Frames(Vec::new());
    while got.0.is_empty() && Instant::now() < deadline {
        a.flush_unsent();
        rx.receive(&mut got).unwrap();
    }
    assert_eq!(got.0, vec![h]);
    assert!(!a.flush_unsent());
    a.shutdown();
    b.shutdown();
}

/// Reads `rx` until `n` more frames have come (10 s at most), or, with `n` 0, for 50 ms.
fn read_frames(rx: &mut Rx, n: usize) -> Vec<i32> {
    let mut got = Frames(Vec::new());
    let limit = if n == 0 { Duration::from_millis(50) } else { Duration::from_secs(10) };
    let deadline = Instant::now() + limit;
    while (n == 0 || got.0.len() < n) && Instant::now() < deadline {
        rx.receive(&mut got).unwrap();
    }
    got.0.iter().map(|h| h.tag).collect()
}

/// The frames of a sender that goes on form bursts: the first frame leaves at once, the
/// ones that follow wait for the next progress pass, a frame that is not queued (too
/// large, or from a sender that waits) or a full batch, and then leave in order.
#[test]
fn a_burst_of_small_frames_waits_for_the_next_pass_and_keeps_its_order() {
    let (mut a, mut b) = pair(64 * 1024, 0, |n| n.coalesce_gap = Duration::from_secs(3600));
    let h = |tag: i32, len: usize| Header { kind: Kind::Eager, ctx: 1, src: 0, tag, len: len as u64, id: 0, aux: 0 };
    let small = [5u8; 100];
    let large = vec![6u8; 20 * 1024];
    assert!(a.try_send_more(1, &h(0, 100), &small), "{:?}", a.fatal);
    let mut rx = adopted(&mut b);
    assert_eq!(read_frames(&mut rx, 1), [0], "the first frame of a burst waits");
    assert!(a.try_send_more(1, &h(1, 100), &small));
    assert!(a.try_send_more(1, &h(2, 100), &small));
    assert_eq!(read_frames(&mut rx, 0), [] as [i32; 0], "a queued frame left before the pass");
    assert!(!a.flush_unsent(), "the pass left frames behind");
    assert_eq!(read_frames(&mut rx, 2), [1, 2]);
    // A new pass: a new burst.
    assert!(a.try_send_more(1, &h(3, 100), &small));
    assert_eq!(read_frames(&mut rx, 1), [3]);
    assert!(a.try_send_more(1, &h(4, 100), &small));
    assert!(a.try_send_more(1, &h(5, large.len()), &large), "over BATON_TCP_COALESCE: sent at once");
    assert_eq!(read_frames(&mut rx, 2), [4, 5]);
    assert!(a.try_send_more(1, &h(6, 100), &small));
    assert!(a.try_send(1, &h(7, 100), &small), "a sender that waits");
    assert_eq!(read_frames(&mut rx, 2), [6, 7]);
    // A batch leaves once the next frame would fill it, that frame with it.
    assert!(!a.flush_unsent());
    let len = large.len() / 2;
    let (mut sent, mut queued) = (Vec::new(), 0);
    loop {
        let tag = 8 + sent.len() as i32;
        assert!(a.try_send_more(1, &h(tag, len), &large[..len]));
        sent.push(tag);
        if sent.len() > 1 {
            if queued + len >= send::COALESCE_BATCH {
                break;
            }
            queued += HEADER_LEN + len;
        }
    }
    assert_eq!(read_frames(&mut rx, sent.len()), sent, "a full batch waited for the pass");
    // A send that comes later than the gap after the previous one starts a burst.
    a.coalesce_gap = Duration::ZERO;
    assert!(a.try_send_more(1, &h(100, 100), &small));
    assert!(a.try_send_more(1, &h(101, 100), &small));
    assert_eq!(read_frames(&mut rx, 2), [100, 101]);
    // BATON_TCP_COALESCE=0: never queued.
    a.coalesce_gap = Duration::from_secs(3600);
    a.cfg.coalesce = 0;
    assert!(a.try_send_more(1, &h(102, 100), &small));
    assert!(a.try_send_more(1, &h(103, 0), &[]));
    assert_eq!(read_frames(&mut rx, 2), [102, 103]);
    a.shutdown();
    b.shutdown();
}

/// A process of another job that is gone (nothing listens at its address any more) is
/// found lost by a probe within the limit; a live one is connected.
#[test]
fn probe_finds_a_vanished_process_and_connects_a_live_one() {
    let secret = Secret::generate().unwrap();
    let (mut a, _) = net(0, &secret, 1);
    let (b, addr_b) = net(1, &secret, 1);
    let gone = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    // Processes 2 and 3 "of another job": 3 no longer listens.
    let link = Secret::generate().unwrap();
    a.add_peer(2, (8, 0), Some(addr_b), "hb", Some(secret.clone()));
    a.add_peer(3, (8, 1), Some(gone), "hc", Some(link));
    // Process 2 is really `b` under another identity: teach `b` to accept it.
    b.sh.index.lock().unwrap().insert((7, 0), 0);
    let t0 = Instant::now();
    assert!(!a.probe(3, Duration::from_millis(500)));
    assert!(a.is_lost(3) && a.fatal.is_none(), "{:?}", a.fatal);
    assert!(t0.elapsed() < Duration::from_secs(3));
    // What a lost process is sent goes nowhere, and no dial is tried again.
    let h = Header::control(Kind::Fin, 1, 0);
    assert!(a.try_send(3, &h, &[]) && !a.was_connected(3));
    assert!(a.probe(2, Duration::from_secs(5)), "{:?} {:?}", a.lost, a.fatal);
    assert!(a.was_connected(2));
    a.shutdown();
    b.shutdown();
}

/// The conversation the blocking side of `baton_pmi::auth` holds (as the bootstrap does), then
/// the naming and the verdict, written out step by step: the set-up machines must speak it
/// unchanged, as a client to the service thread and as a dialler to such a server.
#[test]
fn the_set_up_speaks_the_same_bytes_as_a_blocking_conversation() {
    use baton_pmi::auth::{client_handshake_keyed, server_handshake_keyed, TRANSPORT};
    use std::io::{Read, Write};
    let ident = |job: u64, rank: u32, lane: u32| {
        let mut id = b"BTID".to_vec();
        id.extend(job.to_le_bytes());
        id.extend(rank.to_le_bytes());
        id.extend(lane.to_le_bytes());
        id
    };

    // A blocking client (process 0 of job 7) to the service thread of `b`.
    let secret = Secret::generate().unwrap();
    let (mut b, addr_b) = net(1, &secret, 0);
    b.set_peer(0, None, "ha");
    let mut s = std::net::TcpStream::connect(addr_b).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    client_handshake_keyed(&mut s, &secret, &TRANSPORT).unwrap();
    s.write_all(&ident(7, 0, 0)).unwrap();
    let mut verdict = [0u8; 1];
    s.read_exact(&mut verdict).unwrap();
    assert_eq!(verdict, [1], "ACCEPT");
    let mut rx = adopted(&mut b);
    let h = Header::control(Kind::Fin, 3, 0);
    s.write_all(&stream::encode(&h, 0)).unwrap();
    assert_eq!(read_frames(&mut rx, 1), [0]);
    b.shutdown();

    // `a` dials a blocking server that accepts it; the first frame follows the verdict.
    let (mut a, _) = net(0, &secret, 0);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    a.set_peer(1, Some(l.local_addr().unwrap()), "hb");
    let held = secret.clone();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let proved = server_handshake_keyed(&mut s, |k| (*k == held.key_id()).then(|| held.clone()), &TRANSPORT);
        assert!(proved.unwrap() == held);
        let mut id = [0u8; 20];
        s.read_exact(&mut id).unwrap();
        s.write_all(&[1]).unwrap();
        let mut frame = [0u8; HEADER_LEN];
        s.read_exact(&mut frame).unwrap();
        (id, frame)
    });
    let h = Header::control(Kind::Fin, 4, 0);
    assert!(a.try_send(1, &h, &[]), "{:?}", a.fatal);
    let (id, frame) = server.join().unwrap();
    assert_eq!(id[..], ident(7, 0, 0)[..]);
    assert_eq!(frame, stream::encode(&h, 0));
    a.shutdown();
}
