//! Shared memory that one process creates and its peers on the host map: the memory of windows
//! that Baton allocates (`MPI_Win_allocate`, `MPI_Win_allocate_shared`), so that origins load,
//! store and run hardware atomics on a target's memory directly.
//!
//! [`Region`] is one mapping of a fresh memfd. Its creator hands out [`Region::handle`], three
//! plain integers; a peer passes them to [`Region::open`], which reopens the memfd through
//! `/proc/<pid>/fd/<fd>` and maps it. The creator keeps the descriptor until every peer has
//! opened ([`Region::close_fd`] afterwards); each mapping keeps the memory alive on its own, so
//! the memory goes away with the last process that maps it, crashes included.
//!
//! ## Who can reach it
//! A memfd has no name in any file system. The only ways in are inheriting or being passed the
//! descriptor, or `/proc/<pid>/fd/<fd>` of a process holding it, and the kernel lets a process
//! open another's `/proc/<pid>/fd` entries only if it may ptrace-read that process
//! (`PTRACE_MODE_READ`): same user and a dumpable target, or `CAP_SYS_PTRACE`. Yama's ptrace
//! scope restricts attaching, not that read check, so it does not stand in the way. The path
//! names the creator by its pid as the opener sees it, so both must share a pid namespace (and
//! `/proc`); where they do not, `open` fails and the caller reaches the memory another way.
//!
//! ## Why the size is sealed
//! A store through a mapping past the end of its file raises `SIGBUS`. The creator seals the
//! memfd's size (`F_SEAL_SHRINK`, `F_SEAL_GROW`, then `F_SEAL_SEAL`) before handing it out, and
//! [`Region::open`] maps only a sealed file of exactly the announced size, so no process (a
//! confused peer included) can shrink the memory under a mapping.

use crate::mem::UserBuf;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Seals every region carries: its size can never change, nor can the seals.
const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// A read/write shared mapping of a memfd, unmapped on drop.
pub struct Region {
    /// Start of the mapping; null when `len` is 0 (nothing is mapped then).
    base: *mut u8,
    /// Bytes mapped: a whole number of pages.
    len: usize,
    /// The memfd, kept by the creator until its peers have opened it.
    fd: Option<OwnedFd>,
}

// SAFETY: the value owns a mapping (an address range) and a descriptor, both usable from any
// thread; access to the bytes goes through `UserBuf`, whose callers order conflicting accesses
// as MPI requires of window memory.
unsafe impl Send for Region {}
// SAFETY: as above; no method mutates the mapping's bookkeeping through `&self`.
unsafe impl Sync for Region {}

fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl Region {
    /// A fresh, zero-filled region of at least `len` bytes (rounded up to whole pages; 0 maps
    /// nothing but still yields a handle peers can open).
    pub fn create(len: usize) -> io::Result<Region> {
        let page = page_size();
        let len = len
            .checked_next_multiple_of(page)
            .filter(|&l| l <= libc::off_t::MAX as usize)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "Region::create: len is too large"))?;
        // SAFETY: plain syscall with a static NUL-terminated name; failure is checked.
        let raw = unsafe { libc::memfd_create(c"baton-region".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just created and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscalls on our own descriptor; failures are checked.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let base = map(&fd, len)?;
        Ok(Region { base, len, fd: Some(fd) })
    }

    /// Maps the region that process `pid` created and announced as `(pid, fd, len)` with
    /// [`handle`](Self::handle). Fails if the descriptor is gone (the creator closed it or
    /// exited), is not a sealed memfd of exactly `len` bytes, or belongs to another user.
    pub fn open(pid: i32, fd: i32, len: usize) -> io::Result<Region> {
        let path = std::ffi::CString::new(format!("/proc/{pid}/fd/{fd}")).expect("no NUL in a formatted path");
        // SAFETY: a NUL-terminated path; the result is checked before use.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just opened and own alone.
        let file = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: F_GET_SEALS takes no pointer; a file without seal support fails with EINVAL.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & SEALS != SEALS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("Region::open: /proc/{pid}/fd/{fd} is not a sealed Baton region"),
            ));
        }
        // SAFETY: an all-zero `stat` is a valid value for fstat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a live, writable stat buffer.
        if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if st.st_size as u64 != len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("Region::open: /proc/{pid}/fd/{fd} holds {} bytes, not the announced {len}", st.st_size),
            ));
        }
        // The mapping keeps the memory; this process needs no descriptor afterwards.
        let base = map(&file, len)?;
        Ok(Region { base, len, fd: None })
    }

    /// What a peer on this host passes to [`open`](Self::open): this process's id, the memfd's
    /// descriptor (-1 once [`close_fd`](Self::close_fd) ran, and in a region that was opened
    /// rather than created) and the mapped length.
    pub fn handle(&self) -> (i32, i32, usize) {
        let fd = self.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
        (std::process::id() as i32, fd, self.len)
    }

    /// Closes the memfd's descriptor, keeping the mapping. Call it once every peer has opened
    /// the region: later `open`s of the handle fail.
    pub fn close_fd(&mut self) {
        self.fd = None;
    }

    /// The whole mapping as a span of memory for the engine to read, write and run atomics on.
    ///
    /// The span is valid while this `Region` lives: `UserBuf` carries no lifetime, so whoever
    /// holds the region must drop every span (and every operation using one) before dropping
    /// it. Other processes map the same bytes, so concurrent accesses there follow MPI's rules
    /// for window memory (conflicting accesses need synchronization or atomics).
    pub fn buf(&self) -> UserBuf {
        // SAFETY: `[base, base+len)` is a read/write mapping that stays mapped until drop (see
        // above for the holder's side of the contract); with `len` 0 nothing is accessed.
        unsafe { UserBuf::new(self.base as usize, self.len) }
    }

    /// The mapping's address in this process (0 when nothing is mapped).
    pub fn addr(&self) -> usize {
        self.base as usize
    }

    /// Bytes mapped: the requested length rounded up to whole pages.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Maps `len` bytes of `fd` shared and read/write; nothing (a null base) for 0 bytes, which
/// mmap refuses.
fn map(fd: &OwnedFd, len: usize) -> io::Result<*mut u8> {
    if len == 0 {
        return Ok(std::ptr::null_mut());
    }
    crate::shm::map(fd.as_raw_fd(), len)
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: our own mapping, unmapped once; spans from `buf` must be gone by now
            // (see `buf`).
            unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Environment variable through which `opened_by_another_process` hands its region's
    /// handle to the copy of this test binary it starts.
    const CHILD_ENV: &str = "REGION_TEST_CHILD_HANDLE";

    #[test]
    fn two_mappings_of_one_region_see_each_others_stores() {
        let a = Region::create(10_000).unwrap();
        assert_eq!(a.len() % page_size(), 0);
        assert!(a.len() >= 10_000);
        assert!(a.buf().read(0, a.len()).iter().all(|&b| b == 0));
        let (pid, fd, len) = a.handle();
        assert_eq!(pid, std::process::id() as i32);
        let b = Region::open(pid, fd, len).unwrap();
        assert_ne!(a.addr(), b.addr());
        assert_eq!(b.len(), a.len());
        a.buf().write(17, b"from a");
        assert_eq!(b.buf().read(17, 6), b"from a");
        b.buf().write(len - 6, b"from b");
        assert_eq!(a.buf().read(len - 6, 6), b"from b");
        // The opened mapping outlives the creator's; the memory stays.
        drop(a);
        assert_eq!(b.buf().read(17, 6), b"from a");
    }

    #[test]
    fn empty_regions_open_and_map_nothing() {
        let a = Region::create(0).unwrap();
        assert!(a.is_empty() && a.buf().is_empty() && a.addr() == 0);
        let (pid, fd, len) = a.handle();
        let b = Region::open(pid, fd, len).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.handle().1, -1, "an opened region keeps no descriptor");
    }

    #[test]
    fn bad_handles_are_refused() {
        let mut a = Region::create(1).unwrap();
        let (pid, fd, len) = a.handle();
        let wrong_len = Region::open(pid, fd, len * 2).err().unwrap();
        assert_eq!(wrong_len.kind(), io::ErrorKind::InvalidData);
        // A memfd whose size could still change is not taken for a region.
        // SAFETY: plain syscall with a static name; the descriptor is owned right away.
        let unsealed = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"unsealed".as_ptr(), libc::MFD_CLOEXEC)) };
        let not_region = Region::open(pid, unsealed.as_raw_fd(), 0).err().unwrap();
        assert_eq!(not_region.kind(), io::ErrorKind::InvalidData);
        // Sizes cannot change under a mapping.
        // SAFETY: ftruncate on a descriptor the region owns; it must fail (sealed).
        assert_ne!(unsafe { libc::ftruncate(fd, 0) }, 0);
        a.close_fd();
        assert_eq!(a.handle().1, -1);
        assert!(Region::open(pid, fd, len).is_err());
        // The creator's mapping survives closing the descriptor.
        a.buf().write(0, b"x");
        assert_eq!(a.buf().read(0, 1), b"x");
    }

    /// Starts this test binary again, running only [`child_side`], which opens the region
    /// through `/proc/<our pid>/fd` (the memfd is close-on-exec, so it is not inherited), checks
    /// what we stored and stores an answer we then read.
    #[test]
    fn opened_by_another_process() {
        let r = Region::create(3 * 4096).unwrap();
        r.buf().write(4096, b"parent");
        let (pid, fd, len) = r.handle();
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "region::tests::child_side", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, format!("{pid} {fd} {len}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stdout));
        assert!(String::from_utf8_lossy(&out.stdout).contains("child opened the region"));
        assert_eq!(r.buf().read(2 * 4096, 5), b"child");
    }

    /// The other process's half of `opened_by_another_process`; without the variable (a plain
    /// test run) there is no region to open and it returns.
    #[test]
    fn child_side() {
        let Ok(h) = std::env::var(CHILD_ENV) else { return };
        let v: Vec<usize> = h.split(' ').map(|x| x.parse().unwrap()).collect();
        assert_ne!(v[0], std::process::id() as usize);
        let r = Region::open(v[0] as i32, v[1] as i32, v[2]).unwrap();
        assert_eq!(r.buf().read(4096, 6), b"parent");
        r.buf().write(2 * 4096, b"child");
        println!("child opened the region");
    }

    /// Another user cannot open the memfd through `/proc`, the same user can. Switching users
    /// needs root; elsewhere only the positive half runs.
    #[test]
    fn other_users_cannot_open_it() {
        use std::os::unix::process::CommandExt;
        let r = Region::create(4096).unwrap();
        let (pid, fd, _) = r.handle();
        let probe = || {
            let mut c = Command::new("/bin/sh");
            c.arg("-c").arg(format!(": < /proc/{pid}/fd/{fd}")).stderr(std::process::Stdio::null());
            c
        };
        assert!(probe().status().unwrap().success(), "the same user must be able to open the region");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let st = probe().uid(65534).gid(65534).status().unwrap();
            assert!(!st.success(), "another user opened the region");
        }
    }
}
