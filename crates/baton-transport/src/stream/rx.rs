//! [`Rx`], the receiving half of a connection, and the [`FrameSink`] it delivers to.
//!
//! `Rx` reads into a buffer of its own and hands complete frames to the sink; the payload of a
//! large data frame goes straight from the socket into the memory the sink names (the matched
//! receive buffer, [`FrameSink::place`]), with no intermediate copy. It is generic over its byte
//! [`Source`] so that the decoding can be tested and fuzzed without sockets. Invariants:
//! `start <= end <= buf.len()`; the buffer only grows to hold the longest frame that arrives
//! whole (bounded by the connection's payload limit); while a frame is placed directly
//! (`direct`), only its payload is read.

use super::header::{decode, HEADER_LEN};
use super::would_block;
use crate::frame::{Header, Kind};
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

/// What the receiving half reads: a non-blocking byte stream (`WouldBlock` when empty).
pub trait Source: Read {
    /// Whether a read would find something, asked without the cost a read has for a packet
    /// on its way in (see [`Rx::set_poll_first`]).
    fn readable(&self) -> bool;
}

impl Source for TcpStream {
    fn readable(&self) -> bool {
        crate::sys::wait_readable(self.as_raw_fd(), 0)
    }
}

/// What [`FrameSink::place`] calls with the final place of a data frame's payload: it moves
/// bytes there and returns how many.
pub type Fill<'a> = dyn FnMut(&mut [u8]) -> io::Result<usize> + 'a;

/// Where the receiving half delivers what it reads.
pub trait FrameSink {
    /// A complete frame and its payload.
    fn frame(&mut self, h: &Header, payload: &[u8]);
    /// If the payload (`plen` bytes) of data frame `h` has a final place in memory, calls
    /// `fill` with that memory from payload byte `at` to the end of the frame and returns what
    /// it returned. `None` (what a sink that never places says): no such place, so the frame
    /// is buffered and given to [`frame`](Self::frame).
    fn place(&mut self, _h: &Header, _plen: usize, _at: usize, _fill: &mut Fill<'_>) -> Option<io::Result<usize>> {
        None
    }
    /// `n` more payload bytes of data frame `h` were written by `place`.
    fn placed(&mut self, _h: &Header, _n: usize) {}
}

/// Data frames at least this long go straight into their final place.
const DIRECT_MIN: usize = 4096;
/// Buffered bytes [`Rx::rewind`] moves to the front of the buffer before a read, at most.
const REWIND_MAX: usize = 4096;
/// Initial size of the receive buffer; it grows to hold the longest frame that arrives whole.
pub(super) const RX_INITIAL: usize = 64 * 1024;

/// A data frame whose payload is being written to its final place.
#[derive(Clone, Copy)]
struct Direct {
    h: Header,
    plen: usize,
    got: usize,
}

/// What one call to [`Rx::receive`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Frames (or pieces of directly placed frames) delivered.
    pub delivered: usize,
    /// The peer closed the connection (end of file).
    pub closed: bool,
}

/// The receiving half of a connection (generic over the byte source so the decoder can be
/// fuzzed without sockets).
pub struct Rx<S = TcpStream> {
    sock: S,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    direct: Option<Direct>,
    max_payload: usize,
    poll_first: bool,
    /// The last read found the socket empty.
    idle: bool,
}

impl Rx<TcpStream> {
    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl<S> Rx<S> {
    /// The byte source (the fuzzer asks how much of its input was read).
    pub(super) fn source(&self) -> &S {
        &self.sock
    }

    /// Bytes the receive buffer holds now (the fuzzer checks its bound).
    pub(super) fn buffer_len(&self) -> usize {
        self.buf.len()
    }
}

impl<S: Source> Rx<S> {
    /// A receiving half reading `sock`, which must not block (`WouldBlock` when empty).
    pub fn new(sock: S, max_payload: usize) -> Rx<S> {
        let buf = vec![0; RX_INITIAL];
        Rx { sock, buf, start: 0, end: 0, direct: None, max_payload, poll_first: false, idle: false }
    }

    /// Whether a socket that was empty at the last read is asked with `poll` whether anything
    /// arrived before it is read again ([`super::split`] turns this on for peers not on loopback).
    ///
    /// A receiver waiting for a message reads its socket over and over; every `recv` takes
    /// the socket's lock, which the kernel also needs to queue an arriving packet, and `poll`
    /// does not take it. Across a veth pair (bridge and netfilter on the packet's way) that
    /// shortens a mid-size ping-pong; on loopback, where the sender's own system call queues
    /// the packet, the extra call costs more than it saves (docs/PERFORMANCE.md, TCP). Only an
    /// idle socket is asked first, so a stream of frames costs no extra system call.
    pub fn set_poll_first(&mut self, on: bool) {
        self.poll_first = on;
    }

    /// Whether complete frames wait in the buffer (no system call needed to deliver them).
    pub fn has_buffered_frame(&self) -> bool {
        let avail = self.end - self.start;
        if self.direct.is_some() {
            return avail > 0;
        }
        if avail < HEADER_LEN {
            return false;
        }
        let hdr: &[u8; HEADER_LEN] = self.buf[self.start..self.start + HEADER_LEN].try_into().expect("header");
        match decode(hdr, self.max_payload) {
            Ok((_, plen)) => avail >= HEADER_LEN + plen,
            Err(_) => true,
        }
    }

    /// Reads what has arrived and delivers it; never blocks. A protocol violation is returned
    /// as an `InvalidData` error (the connection is then unusable).
    ///
    /// Never inlined: it is large, and the progress loop that calls it serves shared memory
    /// too, which should not carry it.
    #[inline(never)]
    pub fn receive(&mut self, sink: &mut dyn FrameSink) -> io::Result<Received> {
        let mut out = Received::default();
        // A read that did not fill the space offered emptied the socket: another read now would
        // almost surely find nothing, and that system call would delay the caller's answer (a
        // ping-pong's reply). The next call reads again.
        let mut drained = false;
        // Bounded, so one busy peer cannot keep the caller from its other work.
        for _ in 0..64 {
            if let Some(d) = self.direct {
                if !self.continue_direct(d, sink, &mut out)? {
                    return Ok(out);
                }
                continue;
            }
            let avail = self.end - self.start;
            if avail >= HEADER_LEN {
                let hdr: &[u8; HEADER_LEN] = self.buf[self.start..self.start + HEADER_LEN].try_into().expect("header");
                let (h, plen) = decode(hdr, self.max_payload)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                if avail >= HEADER_LEN + plen {
                    let p = self.start + HEADER_LEN;
                    sink.frame(&h, &self.buf[p..p + plen]);
                    self.start = p + plen;
                    out.delivered += 1;
                    continue;
                }
                if h.kind == Kind::Data && plen >= DIRECT_MIN && sink.place(&h, plen, 0, &mut |_| Ok(0)).is_some() {
                    self.start += HEADER_LEN;
                    self.direct = Some(Direct { h, plen, got: 0 });
                    continue;
                }
                // The frame arrives whole into the buffer: make room for it.
                self.make_room(HEADER_LEN + plen);
            } else {
                self.make_room(HEADER_LEN);
            }
            if drained {
                return Ok(out);
            }
            self.rewind();
            if self.poll_first && self.idle && self.start == self.end && !self.sock.readable() {
                return Ok(out);
            }
            let offered = self.buf.len() - self.end;
            match self.fill()? {
                Some(0) => {
                    out.closed = true;
                    return Ok(out);
                }
                Some(n) => drained = n < offered,
                None => return Ok(out),
            }
        }
        Ok(out)
    }

    /// Before a read: starts an empty buffer over at its front, and moves a few bytes left of a
    /// partly read frame (part of its header: a whole header gets its frame room from
    /// `make_room`) there when little room is left behind them. Reads go to the free end of
    /// the buffer; without this its end came every few frames, and a frame then took two
    /// reads, the first of the few bytes left there.
    fn rewind(&mut self) {
        let live = self.end - self.start;
        if live == 0 {
            (self.start, self.end) = (0, 0);
        } else if live <= REWIND_MAX && self.buf.len() - self.end < self.buf.len() / 4 {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, live);
        }
    }

    /// Moves buffered bytes to the front and grows the buffer so `need` bytes fit from `start`.
    fn make_room(&mut self, need: usize) {
        if self.start + need <= self.buf.len() {
            return;
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if need > self.buf.len() {
            self.buf.resize(need.next_power_of_two(), 0);
        }
    }

    /// One `recv` into the free end of the buffer: `None` when nothing is there now, `Some(0)`
    /// at end of file.
    fn fill(&mut self) -> io::Result<Option<usize>> {
        if self.end == self.buf.len() {
            self.make_room(self.end - self.start + 1);
        }
        match self.sock.read(&mut self.buf[self.end..]) {
            Ok(n) => {
                self.end += n;
                self.idle = false;
                Ok(Some(n))
            }
            Err(e) if would_block(&e) => {
                self.idle = true;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Moves payload of the directly placed frame `d`: buffered bytes first, then straight from
    /// the socket. Returns false when nothing more can be read now.
    fn continue_direct(&mut self, mut d: Direct, sink: &mut dyn FrameSink, out: &mut Received) -> io::Result<bool> {
        let buffered = (self.end - self.start).min(d.plen - d.got);
        let moved = if buffered > 0 {
            let src = &self.buf[self.start..self.start + buffered];
            let r = sink.place(&d.h, d.plen, d.got, &mut |dst| {
                let k = dst.len().min(src.len());
                dst[..k].copy_from_slice(&src[..k]);
                Ok(k)
            });
            let k = r.unwrap_or(Ok(0))?;
            self.start += k;
            k
        } else {
            let sock = &mut self.sock;
            let mut eof = false;
            let r = sink.place(&d.h, d.plen, d.got, &mut |dst| match sock.read(dst) {
                Ok(0) if !dst.is_empty() => {
                    eof = true;
                    Ok(0)
                }
                Ok(n) => Ok(n),
                Err(e) if would_block(&e) => Ok(0),
                Err(e) => Err(e),
            });
            let k = r.unwrap_or(Ok(0))?;
            if eof {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed in the middle of a frame"));
            }
            k
        };
        if moved == 0 {
            if buffered > 0 {
                // The sink refused bytes it accepted before: its receive went away. Drop the rest
                // of the frame through the buffer instead.
                return Err(io::Error::new(io::ErrorKind::InvalidData, "data frame lost its destination"));
            }
            return Ok(false);
        }
        d.got += moved;
        sink.placed(&d.h, moved);
        out.delivered += 1;
        self.direct = if d.got == d.plen { None } else { Some(d) };
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::header::encode;
    use super::super::tests::{hdr, Collect};
    use super::*;

    /// A socket stand-in: bytes that have "arrived", how many each read returned, and how many
    /// times it was asked whether it is readable.
    struct Arrived {
        bytes: std::collections::VecDeque<u8>,
        reads: Vec<usize>,
        empty_reads: usize,
        polls: std::cell::Cell<usize>,
    }

    fn arrived() -> Arrived {
        Arrived { bytes: Default::default(), reads: Vec::new(), empty_reads: 0, polls: Default::default() }
    }

    impl Source for Arrived {
        fn readable(&self) -> bool {
            self.polls.set(self.polls.get() + 1);
            !self.bytes.is_empty()
        }
    }

    impl Read for Arrived {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.bytes.is_empty() {
                self.empty_reads += 1;
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.bytes.len());
            for (d, s) in buf.iter_mut().zip(self.bytes.drain(..n)) {
                *d = s;
            }
            self.reads.push(n);
            Ok(n)
        }
    }

    /// Frames of 16 KiB arriving one at a time (a ping-pong) each take one read: the buffer
    /// starts over at its front when empty, instead of offering the few bytes left at its end.
    #[test]
    fn a_frame_that_arrives_whole_takes_one_read() {
        let mut rx = Rx::new(arrived(), 1 << 20);
        let mut sink = Collect::buffering();
        let payload: Vec<u8> = (0..16384u32).map(|i| (i % 251) as u8).collect();
        for i in 0..40u64 {
            let h = Header { id: i, ..hdr(Kind::Eager, payload.len() as u64) };
            rx.sock.bytes.extend(encode(&h, payload.len()));
            rx.sock.bytes.extend(&payload);
            rx.receive(&mut sink).unwrap();
            assert_eq!(sink.frames.len(), i as usize + 1, "frame {i} not delivered");
            assert_eq!(rx.sock.reads, [HEADER_LEN + payload.len()], "frame {i}: reads");
            rx.sock.reads.clear();
        }
        assert!(sink.frames.iter().all(|(_, p)| *p == payload));
    }

    /// A receiver waiting on a far peer reads its empty socket once, then only polls it until
    /// bytes arrive; frames that keep coming are read without polls.
    #[test]
    fn an_idle_socket_is_polled_before_it_is_read() {
        let mut sink = Collect::buffering();
        let mut near = Rx::new(arrived(), 1 << 20);
        for _ in 0..5 {
            assert_eq!(near.receive(&mut sink).unwrap().delivered, 0);
        }
        assert_eq!((near.sock.empty_reads, near.sock.polls.get()), (5, 0), "loopback: reads only");

        let mut rx = Rx::new(arrived(), 1 << 20);
        rx.set_poll_first(true);
        for _ in 0..5 {
            assert_eq!(rx.receive(&mut sink).unwrap().delivered, 0);
        }
        assert_eq!((rx.sock.empty_reads, rx.sock.polls.get()), (1, 4));
        let payload = vec![7u8; 4096];
        let frame = |i: u64| {
            let mut f = encode(&Header { id: i, ..hdr(Kind::Eager, payload.len() as u64) }, payload.len()).to_vec();
            f.extend(&payload);
            f
        };
        rx.sock.bytes.extend(frame(0));
        assert_eq!(rx.receive(&mut sink).unwrap().delivered, 1);
        assert_eq!(rx.sock.polls.get(), 5, "a poll, then the read");
        for i in 1..4 {
            rx.sock.bytes.extend(frame(i));
            assert_eq!(rx.receive(&mut sink).unwrap().delivered, 1);
        }
        assert_eq!(rx.sock.polls.get(), 5, "frames that keep coming need no poll");
        assert_eq!(rx.sock.reads.len(), 4);
        assert_eq!(sink.frames.len(), 4);
    }

    /// Part of a frame's header left near the buffer's end moves to the front before the next
    /// read, so the rest of that frame comes in one read too. (With the whole header there,
    /// `make_room` already makes room for the frame.)
    #[test]
    fn a_partial_frame_near_the_end_moves_to_the_front() {
        let mut rx = Rx::new(arrived(), 1 << 20);
        let mut sink = Collect::buffering();
        let payload = vec![9u8; 20_000];
        let mut stream = Vec::new();
        for i in 0..4u64 {
            stream.extend(encode(&Header { id: i, ..hdr(Kind::Eager, payload.len() as u64) }, payload.len()));
            stream.extend(&payload);
        }
        // Three frames and part of the fourth's header fit the initial buffer with under a
        // quarter of it left behind them.
        let cut = 3 * (HEADER_LEN + payload.len()) + HEADER_LEN / 2;
        assert!(cut < RX_INITIAL && RX_INITIAL - cut < RX_INITIAL / 4);
        rx.sock.bytes.extend(&stream[..cut]);
        rx.receive(&mut sink).unwrap();
        assert_eq!(sink.frames.len(), 3);
        rx.sock.reads.clear();
        rx.sock.bytes.extend(&stream[cut..]);
        rx.receive(&mut sink).unwrap();
        assert_eq!(sink.frames.len(), 4);
        assert_eq!(rx.sock.reads, [stream.len() - cut], "the rest of the fourth frame: reads");
    }
}
