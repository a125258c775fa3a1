//! [`Poller`] (an epoll set) and [`EventFd`]: what a thread that watches many sockets, and is
//! woken by others, is built from.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

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
