//! TCP: frames over stream sockets, for peers on other hosts (and for every peer under
//! `BATON_TRANSPORTS=tcp`).
//!
//! A connection is split in two halves over two descriptors of the same socket, so the runtime
//! can read frames and hand them to the engine while the engine answers through the other half:
//!
//! - [`Tx`]: the sending half. A frame's header and payload leave in one `sendmsg`, straight
//!   from the caller's memory. A whole frame ([`Tx::try_send`]) is taken or refused; when the
//!   kernel takes only part of it, the rest is copied into `out` (at most one eager frame). A
//!   streamed data frame ([`Tx::start_frame`], [`Tx::continue_frame`]) is never copied: the
//!   caller keeps supplying the rest of its payload from its own buffer, and nothing else may
//!   use the connection until it has.
//! - [`Rx`]: the receiving half. It reads into a buffer of its own and hands complete frames to
//!   a [`FrameSink`]; the payload of a large data frame goes straight from the socket into the
//!   memory the sink names (the matched receive buffer), with no intermediate copy.
//! - [`encode`] / [`decode`]: the 48-byte header. `decode` trusts nothing: kind, reserved bytes
//!   and every length are checked before any allocation (fuzzed by `fuzz/`).
//! - [`Poller`] and [`EventFd`]: epoll and eventfd, for a thread that watches many sockets.

use crate::frame::{Header, Kind};
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Bytes of a frame header on the wire.
pub const HEADER_LEN: usize = 48;

/// Why a header was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// No frame kind has this number (or it never travels over TCP).
    Kind(u8),
    /// Bytes reserved for later versions are not zero.
    Reserved,
    /// The payload is longer than this connection accepts.
    TooLong { plen: u64, max: usize },
    /// The payload length does not fit the kind (e.g. an eager frame whose payload is not the
    /// message, or a control frame with a payload).
    Length { kind: Kind, plen: u64, len: u64 },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Kind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::Reserved => write!(f, "reserved header bytes are not zero"),
            FrameError::TooLong { plen, max } => write!(f, "payload of {plen} bytes exceeds the limit of {max}"),
            FrameError::Length { kind, plen, len } => {
                write!(f, "{kind:?} frame with a payload of {plen} bytes for a message of {len}")
            }
        }
    }
}

/// The header of a frame with `plen` payload bytes, as it goes on the wire (little-endian).
///
/// Layout: kind (1), reserved (3), payload length (4), ctx (8), src (4), tag (4), len (8),
/// id (8), aux (8).
pub fn encode(h: &Header, plen: usize) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0] = h.kind as u8;
    b[4..8].copy_from_slice(&(plen as u32).to_le_bytes());
    b[8..16].copy_from_slice(&h.ctx.to_le_bytes());
    b[16..20].copy_from_slice(&h.src.to_le_bytes());
    b[20..24].copy_from_slice(&h.tag.to_le_bytes());
    b[24..32].copy_from_slice(&h.len.to_le_bytes());
    b[32..40].copy_from_slice(&h.id.to_le_bytes());
    b[40..48].copy_from_slice(&h.aux.to_le_bytes());
    b
}

/// Parses a header from the wire; returns it with the length of the payload that follows.
pub fn decode(b: &[u8; HEADER_LEN], max_payload: usize) -> Result<(Header, usize), FrameError> {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let i32_at = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let kind = match Kind::from_u8(b[0]) {
        Some(Kind::Pad) | None => return Err(FrameError::Kind(b[0])),
        Some(k) => k,
    };
    if b[1..4] != [0, 0, 0] {
        return Err(FrameError::Reserved);
    }
    let plen = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as u64;
    if plen > max_payload as u64 {
        return Err(FrameError::TooLong { plen, max: max_payload });
    }
    let h = Header {
        kind,
        ctx: u64_at(8),
        src: i32_at(16),
        tag: i32_at(20),
        len: u64_at(24),
        id: u64_at(32),
        aux: u64_at(40),
    };
    let fits = match kind {
        Kind::Eager | Kind::EagerSync => plen == h.len,
        Kind::Data => plen > 0,
        Kind::Rts | Kind::SyncAck | Kind::Fin | Kind::Cts | Kind::Help | Kind::Pad => plen == 0,
    };
    if !fits {
        return Err(FrameError::Length { kind, plen, len: h.len });
    }
    Ok((h, plen as usize))
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

/// `sendmsg` of up to two pieces, never raising SIGPIPE (we live inside the application's
/// process, whose SIGPIPE disposition is its own). Returns the bytes taken; 0 when the socket
/// buffer is full.
fn send_pieces(fd: RawFd, a: &[u8], b: &[u8]) -> io::Result<usize> {
    let mut iov = [
        libc::iovec { iov_base: a.as_ptr() as *mut libc::c_void, iov_len: a.len() },
        libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() },
    ];
    let cnt = if b.is_empty() { 1 } else { 2 };
    // SAFETY: msghdr is plain data; zeroed is a valid "no name, no control data" value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = cnt;
    loop {
        // SAFETY: the iovecs point into `a` and `b`, which outlive the call; the kernel only
        // reads them.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return if would_block(&e) { Ok(0) } else { Err(e) };
    }
}

/// The congestion control algorithm a socket runs (`TCP_CONGESTION`), such as `cubic`.
pub fn congestion(sock: &impl AsRawFd) -> io::Result<String> {
    let mut name = [0u8; 32];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `name` and stores the length it wrote.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let got = &name[..(len as usize).min(name.len())];
    let end = got.iter().position(|&b| b == 0).unwrap_or(got.len());
    Ok(String::from_utf8_lossy(&got[..end]).into_owned())
}

/// Switches a socket to congestion control algorithm `name`. The kernel refuses one it does
/// not have, and for a process without `CAP_NET_ADMIN` one outside
/// `net.ipv4.tcp_allowed_congestion_control` (`reno` is always allowed).
pub fn set_congestion(sock: &impl AsRawFd, name: &str) -> io::Result<()> {
    // SAFETY: the kernel reads `name.len()` bytes from `name`, which outlives the call.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Splits an established (authenticated) connection into its two halves.
pub fn split(sock: TcpStream, max_payload: usize) -> io::Result<(Tx, Rx)> {
    sock.set_nonblocking(true)?;
    sock.set_nodelay(true)?;
    let rsock = sock.try_clone()?;
    let far = sock.peer_addr().is_ok_and(|a| !a.ip().to_canonical().is_loopback());
    let mut rx = Rx::new(rsock, max_payload);
    rx.set_poll_first(far);
    Ok((Tx { sock, out: Vec::new(), out_pos: 0, owed: 0 }, rx))
}

/// The sending half of a connection.
pub struct Tx {
    sock: TcpStream,
    /// The unsent tail of an accepted frame, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    /// Payload bytes of a started frame that its owner has still to supply.
    owed: usize,
}

impl Tx {
    /// Writes what is left of earlier frames; true when nothing is left.
    pub fn flush(&mut self) -> io::Result<bool> {
        while self.out_pos < self.out.len() {
            let n = send_pieces(self.sock.as_raw_fd(), &self.out[self.out_pos..], &[])?;
            if n == 0 {
                return Ok(false);
            }
            self.out_pos += n;
        }
        if !self.out.is_empty() {
            self.out.clear();
            self.out_pos = 0;
        }
        Ok(true)
    }

    /// Tells the peer this side sends nothing more (it reads to the end and closes). Frames
    /// still queued here are lost, so callers flush first.
    pub fn shutdown_write(self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Write);
    }

    /// Bytes accepted but not yet handed to the kernel (the rest of a frame the kernel took
    /// only part of). Nothing but [`flush`](Self::flush) sends them.
    pub fn has_out(&self) -> bool {
        self.out_pos < self.out.len()
    }

    /// Bytes accepted but not yet handed to the kernel, or a streamed frame left unfinished.
    pub fn busy(&self) -> bool {
        self.out_pos < self.out.len() || self.owed > 0
    }

    /// Sends a whole frame, or nothing (false: the connection is busy; try later).
    pub fn try_send(&mut self, h: &Header, payload: &[u8]) -> io::Result<bool> {
        if self.owed > 0 || !self.flush()? {
            return Ok(false);
        }
        let hdr = encode(h, payload.len());
        let n = send_pieces(self.sock.as_raw_fd(), &hdr, payload)?;
        if n == 0 {
            return Ok(false);
        }
        if n < HEADER_LEN + payload.len() {
            // The kernel took part: the rest must follow before any other frame.
            self.out.clear();
            self.out_pos = 0;
            if n < HEADER_LEN {
                self.out.extend_from_slice(&hdr[n..]);
                self.out.extend_from_slice(payload);
            } else {
                self.out.extend_from_slice(&payload[n - HEADER_LEN..]);
            }
        }
        Ok(true)
    }

    /// Queues a whole frame behind what is unsent, without a system call: it leaves with them
    /// at the next [`flush`](Self::flush), in one `sendmsg`. False (nothing queued) while a
    /// streamed frame is unfinished, whose payload must come first.
    pub fn append(&mut self, h: &Header, payload: &[u8]) -> bool {
        if self.owed > 0 {
            return false;
        }
        self.out.extend_from_slice(&encode(h, payload.len()));
        self.out.extend_from_slice(payload);
        true
    }

    /// Bytes accepted but not yet handed to the kernel.
    pub fn unsent_len(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Starts a frame whose payload may leave in pieces. `None`: the frame did not start (try
    /// later); `Some(n)`: it started and `n` payload bytes left. The caller must then supply
    /// the rest of the payload, and only that, through [`continue_frame`](Self::continue_frame).
    pub fn start_frame(&mut self, h: &Header, payload: &[u8]) -> io::Result<Option<usize>> {
        if self.owed > 0 || !self.flush()? {
            return Ok(None);
        }
        let hdr = encode(h, payload.len());
        let n = send_pieces(self.sock.as_raw_fd(), &hdr, payload)?;
        if n == 0 {
            return Ok(None);
        }
        if n < HEADER_LEN {
            self.out.clear();
            self.out_pos = 0;
            self.out.extend_from_slice(&hdr[n..]);
            self.owed = payload.len();
            return Ok(Some(0));
        }
        let took = n - HEADER_LEN;
        self.owed = payload.len() - took;
        Ok(Some(took))
    }

    /// Continues the frame started by [`start_frame`](Self::start_frame): `rest` is the rest of
    /// its payload. Returns the bytes taken.
    pub fn continue_frame(&mut self, rest: &[u8]) -> io::Result<usize> {
        debug_assert_eq!(rest.len(), self.owed, "a streamed frame continues with exactly its remaining payload");
        if !self.flush()? {
            return Ok(0);
        }
        let n = send_pieces(self.sock.as_raw_fd(), &rest[..rest.len().min(self.owed)], &[])?;
        self.owed -= n;
        Ok(n)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

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

/// Where the receiving half delivers what it reads.
pub trait FrameSink {
    /// A complete frame and its payload.
    fn frame(&mut self, h: &Header, payload: &[u8]);
    /// If the payload (`plen` bytes) of data frame `h` has a final place in memory, calls
    /// `fill` with that memory from payload byte `at` to the end of the frame and returns what
    /// it returned. `None`: no such place (the frame is then buffered and given to
    /// [`frame`](Self::frame)).
    fn place(
        &mut self,
        h: &Header,
        plen: usize,
        at: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> io::Result<usize>,
    ) -> Option<io::Result<usize>>;
    /// `n` more payload bytes of data frame `h` were written by `place`.
    fn placed(&mut self, h: &Header, n: usize);
}

/// Data frames at least this long go straight into their final place.
const DIRECT_MIN: usize = 4096;
/// Buffered bytes [`Rx::rewind`] moves to the front of the buffer before a read, at most.
const REWIND_MAX: usize = 4096;
/// Initial size of the receive buffer; it grows to hold the longest frame that arrives whole.
const RX_INITIAL: usize = 64 * 1024;

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

impl<S: Source> Rx<S> {
    /// A receiving half reading `sock`, which must not block (`WouldBlock` when empty).
    pub fn new(sock: S, max_payload: usize) -> Rx<S> {
        let buf = vec![0; RX_INITIAL];
        Rx { sock, buf, start: 0, end: 0, direct: None, max_payload, poll_first: false, idle: false }
    }

    /// Whether a socket that was empty at the last read is asked with `poll` whether anything
    /// arrived before it is read again ([`split`] turns this on for peers not on loopback).
    ///
    /// A receiver waiting for a message reads its socket over and over; every `recv` takes
    /// the socket's lock, which the kernel also needs to queue an arriving packet, and `poll`
    /// does not take it. Across a veth pair (bridge and netfilter on the packet's way) that
    /// made a 4 KiB ping-pong 2–10 % faster (16 KiB: within that size's run-to-run spread);
    /// on loopback, where the sender's own system call queues the packet, the extra call cost
    /// 3–5 % at 4 and 16 KiB. Only an idle socket is asked first, so a stream of frames costs
    /// no extra system call.
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
    pub fn receive(&mut self, sink: &mut dyn FrameSink) -> io::Result<Received> {
        let mut out = Received::default();
        // A read that did not fill the space offered emptied the socket: another read now would
        // almost surely find nothing, and that system call would delay the caller's answer (a
        // ping-pong's reply) by a microsecond. The next call reads again.
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
    /// the buffer; without this its end came every few frames, and a 16 KiB frame then took
    /// two reads, the first of the few hundred bytes left (in a quarter to a third of a
    /// ping-pong's messages).
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

/// The fuzzing entry point (`fuzz/` runs it coverage-guided; CI runs it for a bounded time
/// from `examples/fuzz_tcp.rs`). Feeds `data` to a receiving half as a peer would, in reads
/// cut at sizes the first byte chooses, and checks that whatever arrives is handled without a
/// panic, an out-of-bounds write or a buffer beyond the frame limit.
pub fn fuzz_rx(data: &[u8]) {
    const MAX: usize = 64 * 1024;
    /// Hands out `data` a few bytes at a time, then "would block".
    struct Pieces<'a> {
        data: &'a [u8],
        pos: usize,
        cut: usize,
    }
    impl Source for Pieces<'_> {
        fn readable(&self) -> bool {
            true
        }
    }
    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pos == self.data.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // Vary the piece size so every split point of a header or payload is reached.
            let n = buf.len().min(self.data.len() - self.pos).min(1 + (self.pos * 7 + self.cut) % (self.cut + 1));
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }
    struct Check {
        dst: Vec<u8>,
        placed: usize,
    }
    impl FrameSink for Check {
        fn frame(&mut self, h: &Header, payload: &[u8]) {
            assert!(payload.len() <= MAX);
            if matches!(h.kind, Kind::Eager | Kind::EagerSync) {
                assert_eq!(payload.len() as u64, h.len);
            }
        }
        fn place(
            &mut self,
            h: &Header,
            plen: usize,
            at: usize,
            fill: &mut dyn FnMut(&mut [u8]) -> io::Result<usize>,
        ) -> Option<io::Result<usize>> {
            assert!(at <= plen && plen <= MAX);
            let start = (h.aux as usize).checked_add(at)?;
            let end = (h.aux as usize).checked_add(plen)?;
            if end > self.dst.len() {
                return None;
            }
            let window = end - start;
            let r = fill(&mut self.dst[start..end]);
            if let Ok(n) = r {
                assert!(n <= window);
            }
            Some(r)
        }
        fn placed(&mut self, _h: &Header, n: usize) {
            self.placed += n;
        }
    }
    let Some((&first, rest)) = data.split_first() else { return };
    let mut rx = Rx::new(Pieces { data: rest, pos: 0, cut: first as usize % 97 }, MAX);
    let mut sink = Check { dst: vec![0; 4 * MAX], placed: 0 };
    for _ in 0..rest.len() + 2 {
        match rx.receive(&mut sink) {
            Ok(r) if r.delivered == 0 && rx.sock.pos == rest.len() => break,
            Ok(_) => {}
            Err(_) => break,
        }
        assert!(rx.buf.len() <= (HEADER_LEN + MAX).next_power_of_two().max(RX_INITIAL));
    }
    assert!(sink.placed <= rest.len());
    if let Some(h) = rest.first_chunk::<HEADER_LEN>() {
        let _ = decode(h, MAX);
    }
}

/// An epoll set.
pub struct Poller {
    fd: OwnedFd,
}

impl Poller {
    pub fn new() -> io::Result<Poller> {
        // SAFETY: plain system call; the result is checked and owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
        Ok(Poller { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    fn ctl(&self, op: i32, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Watches `fd` for input (level-triggered), reporting `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token)
    }

    /// Watches `fd` for the next input only (until [`rearm`](Self::rearm)).
    pub fn add_oneshot(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, token)
    }

    /// Arms a one-shot watch again.
    pub fn rearm(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, token)
    }

    pub fn remove(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout_ms` (-1: forever, 0: just look) and returns the tokens of ready
    /// descriptors.
    pub fn wait(&self, timeout_ms: i32, tokens: &mut Vec<u64>) -> io::Result<()> {
        tokens.clear();
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 32];
        // SAFETY: the kernel writes at most `evs.len()` entries into `evs`.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        tokens.extend(evs[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

impl AsFd for Poller {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An eventfd: a counter one thread bumps to wake another that polls it.
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain system call; the result is checked and owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64; a full counter (EAGAIN) already means "woken".
        unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; EAGAIN (nothing pending) is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn hdr(kind: Kind, len: u64) -> Header {
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
    struct Collect {
        frames: Vec<(Header, Vec<u8>)>,
        dst: Vec<u8>,
        direct: bool,
        placed: usize,
    }

    impl FrameSink for Collect {
        fn frame(&mut self, h: &Header, payload: &[u8]) {
            self.frames.push((*h, payload.to_vec()));
        }
        fn place(
            &mut self,
            h: &Header,
            plen: usize,
            at: usize,
            fill: &mut dyn FnMut(&mut [u8]) -> io::Result<usize>,
        ) -> Option<io::Result<usize>> {
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
        let mut sink = Collect { frames: Vec::new(), dst: Vec::new(), direct: false, placed: 0 };
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
        let mut sink = Collect { frames: Vec::new(), dst: Vec::new(), direct: false, placed: 0 };
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
        let mut sink = Collect { frames: Vec::new(), dst: Vec::new(), direct: false, placed: 0 };
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

    #[test]
    fn frames_arrive_in_order_whole() {
        let ((mut tx, _), (_, mut rx)) = pair(1 << 20);
        let mut sink = Collect { frames: Vec::new(), dst: Vec::new(), direct: false, placed: 0 };
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
        let mut sink = Collect { frames: Vec::new(), dst: Vec::new(), direct: false, placed: 0 };
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
}
