//! [`Tx`], the sending half of a connection.
//!
//! A frame's header and payload leave in one `sendmsg`, straight from the caller's memory. A
//! whole frame ([`Tx::try_send`]) is taken or refused; when the kernel takes only part of it,
//! the rest is copied into `out` and must leave ([`Tx::flush`]) before anything else. A
//! streamed data frame ([`Tx::start_frame`], [`Tx::continue_frame`]) is never copied: the
//! caller keeps supplying the rest of its payload from its own buffer, and nothing else may use
//! the connection until it has. Invariant: at most one frame is unfinished, either as bytes in
//! `out` or as `owed` payload, never both.

use super::header::{encode, HEADER_LEN};
use super::would_block;
use crate::frame::Header;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

/// `sendmsg` of up to two pieces, never raising SIGPIPE (we live inside the application's
/// process, whose SIGPIPE disposition is its own). Returns the bytes taken; 0 when the socket
/// buffer is full.
#[inline]
pub(super) fn send_pieces(fd: RawFd, a: &[u8], b: &[u8]) -> io::Result<usize> {
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

/// The sending half of a connection (made by [`super::split`]).
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
        self.send_new(h, payload, false, |tx, hdr, n| {
            if n < HEADER_LEN + payload.len() {
                // The kernel took part: the rest must follow before any other frame.
                if n < HEADER_LEN {
                    tx.out.extend_from_slice(&hdr[n..]);
                    tx.out.extend_from_slice(payload);
                } else {
                    tx.out.extend_from_slice(&payload[n - HEADER_LEN..]);
                }
            }
            true
        })
    }

    /// Sends the header of a new frame and as much of `payload` as the kernel takes, in one
    /// `sendmsg`, then lets `took` keep what the kernel did not take (given the header and the
    /// bytes taken; `out` is empty then). `none` when nothing left: a streamed frame is
    /// unfinished, earlier bytes are unsent, or the socket is full. Inlined, closure and all,
    /// into both callers: it starts every frame, and each keeps the code of a hand-written one.
    #[inline(always)]
    fn send_new<R>(
        &mut self,
        h: &Header,
        payload: &[u8],
        none: R,
        took: impl FnOnce(&mut Tx, &[u8; HEADER_LEN], usize) -> R,
    ) -> io::Result<R> {
        if self.owed > 0 || !self.flush()? {
            return Ok(none);
        }
        debug_assert!(self.out.is_empty() && self.out_pos == 0);
        let hdr = encode(h, payload.len());
        let n = send_pieces(self.sock.as_raw_fd(), &hdr, payload)?;
        if n == 0 {
            return Ok(none);
        }
        Ok(took(self, &hdr, n))
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
        self.send_new(h, payload, None, |tx, hdr, n| {
            if n < HEADER_LEN {
                tx.out.extend_from_slice(&hdr[n..]);
            }
            let took = n.saturating_sub(HEADER_LEN);
            tx.owed = payload.len() - took;
            Some(took)
        })
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

    pub(super) fn new(sock: TcpStream) -> Tx {
        Tx { sock, out: Vec::new(), out_pos: 0, owed: 0 }
    }
}
