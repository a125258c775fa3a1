//! Tests of both halves over real loopback sockets, and of the header codec.

use super::tx::send_pieces;
use super::*;
use crate::frame::{Header, Kind};
use std::net::TcpListener;

pub(super) fn hdr(kind: Kind, len: u64) -> Header {
    Header { kind, ctx: 0x1122_3344_5566_7788, src: -3, tag: 77, len, id: 9, aux: u64::MAX }
}

#[test]
fn header_round_trip_and_rejections() {
    for (h, plen) in [(hdr(Kind::Eager, 5), 5), (hdr(Kind::Rts, 1 << 40), 0), (hdr(Kind::Data, 0), 100)] {
        assert_eq!(decode(&encode(&h, plen), 1 << 20), Ok((h, plen)));
    }
    let mut b = encode(&hdr(Kind::Eager, 5), 5);
    b[2] = 1;
    assert_eq!(decode(&b, 100), Err(FrameError::Reserved));
    assert_eq!(decode(&encode(&hdr(Kind::Eager, 5), 5), 4), Err(FrameError::TooLong { plen: 5, max: 4 }));
    assert!(matches!(decode(&encode(&hdr(Kind::Eager, 6), 5), 100), Err(FrameError::Length { .. })));
    assert!(matches!(decode(&encode(&hdr(Kind::Fin, 0), 1), 100), Err(FrameError::Length { .. })));
    assert!(matches!(decode(&encode(&hdr(Kind::Data, 0), 0), 100), Err(FrameError::Length { .. })));
    let mut b = encode(&hdr(Kind::Fin, 0), 0);
    b[0] = 0;
    assert_eq!(decode(&b, 100), Err(FrameError::Kind(0)));
    b[0] = 200;
    assert_eq!(decode(&b, 100), Err(FrameError::Kind(200)));
}

fn pair(max: usize) -> ((Tx, Rx), (Tx, Rx)) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    (split(a, max).unwrap(), split(b, max).unwrap())
}

/// Records frames; places data frames into `dst` when `direct`.
pub(super) struct Collect {
    pub(super) frames: Vec<(Header, Vec<u8>)>,
    dst: Vec<u8>,
    direct: bool,
    placed: usize,
}

impl Collect {
    /// A sink that places nothing directly.
    pub(super) fn buffering() -> Collect {
        Collect { frames: Vec::new(), dst: Vec::new(), direct: false, placed: 0 }
    }
}

impl FrameSink for Collect {
    fn frame(&mut self, h: &Header, payload: &[u8]) {
        self.frames.push((*h, payload.to_vec()));
    }
    fn place(&mut self, h: &Header, plen: usize, at: usize, fill: &mut Fill<'_>) -> Option<io::Result<usize>> {
        if !self.direct {
            return None;
        }
        let start = h.aux as usize + at;
        let end = h.aux as usize + plen;
        Some(fill(&mut self.dst[start..end]))
    }
    fn placed(&mut self, _h: &Header, n: usize) {
        self.placed += n;
    }
}

fn pump(tx: &mut Tx, rx: &mut Rx, sink: &mut Collect, until: impl Fn(&Collect) -> bool) {
    for _ in 0..1_000_000 {
        tx.flush().unwrap();
        rx.receive(sink).unwrap();
        if until(sink) {
            return;
        }
    }
    panic!("nothing arrived");
}

#[test]
fn frames_arrive_in_order_whole() {
    let ((mut tx, _), (_, mut rx)) = pair(1 << 20);
    let mut sink = Collect::buffering();
    let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let mut sent = 0;
    for i in 0..200u64 {
        let payload = if i % 50 == 7 { &big[..] } else { &big[..(i as usize % 13)] };
        let h = Header { id: i, ..hdr(Kind::Eager, payload.len() as u64) };
        while !tx.try_send(&h, payload).unwrap() {
            rx.receive(&mut sink).unwrap();
        }
        sent += 1;
    }
    pump(&mut tx, &mut rx, &mut sink, |s| s.frames.len() == sent);
    for (i, (h, p)) in sink.frames.iter().enumerate() {
        assert_eq!(h.id, i as u64);
        let want = if i % 50 == 7 { &big[..] } else { &big[..(i % 13)] };
        assert_eq!(p, want);
    }
}

#[test]
fn streamed_frame_goes_straight_to_its_place() {
    let ((mut tx, _), (_, mut rx)) = pair(1 << 20);
    let total = 3 << 20;
    let src: Vec<u8> = (0..total).map(|i| (i * 7 % 251) as u8).collect();
    let mut sink = Collect { frames: Vec::new(), dst: vec![0; total], direct: true, placed: 0 };
    let chunk = 1 << 20;
    let mut off = 0;
    while off < total {
        let end = (off + chunk).min(total);
        let h = Header { aux: off as u64, ..hdr(Kind::Data, 0) };
        let Some(mut took) = tx.start_frame(&h, &src[off..end]).unwrap() else {
            rx.receive(&mut sink).unwrap();
            continue;
        };
        while off + took < end {
            took += tx.continue_frame(&src[off + took..end]).unwrap();
            rx.receive(&mut sink).unwrap();
        }
        off = end;
    }
    pump(&mut tx, &mut rx, &mut sink, |s| s.placed == total);
    assert!(sink.frames.is_empty());
    assert!(sink.dst == src);
}

#[test]
fn garbage_is_a_protocol_error_and_eof_is_reported() {
    let ((tx, _), (_, mut rx)) = pair(1024);
    let mut sink = Collect::buffering();
    send_pieces(tx.raw_fd(), &[0xff; 64], &[]).unwrap();
    let mut err = None;
    for _ in 0..100_000 {
        match rx.receive(&mut sink) {
            Err(e) => {
                err = Some(e);
                break;
            }
            Ok(_) => continue,
        }
    }
    assert_eq!(err.expect("decode error").kind(), io::ErrorKind::InvalidData);

    let ((tx, rx_a), (_, mut rx)) = pair(1024);
    drop(tx);
    drop(rx_a);
    let mut closed = false;
    for _ in 0..100_000 {
        if rx.receive(&mut sink).unwrap().closed {
            closed = true;
            break;
        }
    }
    assert!(closed);
}
