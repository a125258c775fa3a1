//! Single-copy reads of (and writes to) another process's memory (`process_vm_readv`, "cross-memory attach").
//!
//! The kernel allows them between processes of one user unless Yama's ptrace scope or a seccomp
//! filter forbids it; [`allow_peers`] relaxes Yama for this process, and callers detect failure at
//! the first read and fall back to copying through the shared segment.

use crate::mem::UserBuf;
use std::io;

/// Lets processes of the same user read this one's memory when Yama's scope is 1 (restricted to
/// descendants). Harmless where Yama is absent.
pub fn allow_peers() {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if scope.trim() == "1" {
        // SAFETY: prctl with integer arguments has no memory effects.
        unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
    }
}

/// Reads `dst.len()` bytes at `remote_addr` in process `pid` into the application's span `dst`.
pub fn read(pid: i32, remote_addr: usize, dst: &UserBuf) -> io::Result<()> {
    // SAFETY: `dst` is writable for its length (see `UserBuf::new`).
    unsafe { transfer(Dir::Read, pid, remote_addr, dst.as_mut_ptr(), dst.len()) }
}

/// Reads `dst.len()` bytes at `remote_addr` in process `pid` into `dst`.
pub fn read_into(pid: i32, remote_addr: usize, dst: &mut [u8]) -> io::Result<()> {
    // SAFETY: a writable slice.
    unsafe { transfer(Dir::Read, pid, remote_addr, dst.as_mut_ptr(), dst.len()) }
}

/// Writes `src` to `remote_addr` in process `pid` (the helper's half of a cooperative copy,
/// see [`crate::coop`]).
pub fn write(pid: i32, remote_addr: usize, src: &[u8]) -> io::Result<()> {
    // SAFETY: a readable slice; a write never stores through the local pointer.
    unsafe { transfer(Dir::Write, pid, remote_addr, src.as_ptr() as *mut u8, src.len()) }
}

#[derive(Clone, Copy)]
enum Dir {
    Read,
    Write,
}

/// Copies `len` bytes between `[base, base+len)` here and `remote_addr` in process `pid`, in
/// as many calls as the kernel needs (it may copy less than asked).
///
/// # Safety
/// `[base, base+len)` must be writable for `Dir::Read` and readable for `Dir::Write`.
unsafe fn transfer(dir: Dir, pid: i32, remote_addr: usize, base: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            // SAFETY: offset within the range the caller describes.
            iov_base: unsafe { base.add(done) } as *mut libc::c_void,
            iov_len: len - done,
        };
        let remote = libc::iovec { iov_base: (remote_addr + done) as *mut libc::c_void, iov_len: len - done };
        // SAFETY: `local` lies inside the caller's range (writable for a read); the kernel checks
        // the remote range and fails with EFAULT rather than touching anything else.
        let n = unsafe {
            match dir {
                Dir::Read => libc::process_vm_readv(pid, &local, 1, &remote, 1, 0),
                Dir::Write => libc::process_vm_writev(pid, &local, 1, &remote, 1, 0),
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "process_vm_readv/writev copied 0 bytes"));
        }
        done += n as usize;
    }
    Ok(())
}
