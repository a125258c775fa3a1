//! Frames over byte streams (TCP sockets): for peers on other hosts, and for every peer under
//! `BATON_TRANSPORTS=tcp`. Who connects to whom, and how a connection is authenticated, is
//! `baton-core`'s business (`fabric::tcp`); this module carries frames on a connection once it
//! is established.
//!
//! A connection is split ([`split`]) in two halves over two descriptors of the same socket, so
//! the runtime can read frames and hand them to the engine while the engine answers through
//! the other half:
//!
//! - [`Tx`] (`tx.rs`): the sending half. Header and payload leave in one `sendmsg` from the
//!   caller's memory; only the rest of a frame the kernel took in part is copied, and a
//!   streamed data frame is never copied.
//! - [`Rx`] (`rx.rs`): the receiving half. Hands complete frames to a [`FrameSink`] and places
//!   the payload of large data frames straight into the receive buffer.
//! - [`encode`] / [`decode`] (`header.rs`): the 48-byte header. `decode` trusts nothing: kind,
//!   reserved bytes and every length are checked before any allocation (fuzzed through
//!   [`fuzz_rx`] by `fuzz/` and `examples/fuzz_tcp.rs`).
//! - [`Poller`] and [`EventFd`] (`poll.rs`): epoll and eventfd, for a thread that watches many
//!   sockets.
//!
//! Per frame, neither half takes a lock or calls through a trait object other than the sink,
//! and they allocate only to grow their own buffers.

mod fuzz;
mod header;
mod poll;
mod rx;
mod tx;

pub use fuzz::fuzz_rx;
pub use header::{decode, encode, FrameError, HEADER_LEN};
pub use poll::{EventFd, Poller};
pub use rx::{Fill, FrameSink, Received, Rx, Source};
pub use tx::Tx;

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// Whether an error only means "not now" (the socket is full or empty, or a signal came).
#[inline]
fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

/// The congestion control algorithm a socket runs (`TCP_CONGESTION`), such as `cubic`.
pub fn congestion(sock: &impl AsRawFd) -> io::Result<String> {
    let mut name = [0u8; 32];
    let mut len = name.len() as libc::socklen_t;
    let (fd, opt) = (sock.as_raw_fd(), libc::TCP_CONGESTION);
    // SAFETY: the kernel writes at most `len` bytes into `name` and stores the length it wrote.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, opt, name.as_mut_ptr().cast(), &mut len) };
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
    let (fd, opt, len) = (sock.as_raw_fd(), libc::TCP_CONGESTION, name.len() as libc::socklen_t);
    // SAFETY: the kernel reads `len` bytes from `name`, which outlives the call.
    let r = unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, opt, name.as_ptr().cast(), len) };
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
    Ok((Tx::new(sock), rx))
}

#[cfg(test)]
mod tests;
