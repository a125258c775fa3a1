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
    read_raw(pid, remote_addr, dst.as_mut_ptr(), dst.len())
}

/// Reads `dst.len()` bytes at `remote_addr` in process `pid` into `dst`.
pub fn read_into(pid: i32, remote_addr: usize, dst: &mut [u8]) -> io::Result<()> {
    read_raw(pid, remote_addr, dst.as_mut_ptr(), dst.len())
}

/// Writes `src` to `remote_addr` in process `pid` (the helper's half of a cooperative copy,
/// see [`crate::coop`]).
pub fn write(pid: i32, remote_addr: usize, src: &[u8]) -> io::Result<()> {
    let mut done = 0usize;
    while done < src.len() {
        let local = libc::iovec { iov_base: src[done..].as_ptr() as *mut libc::c_void, iov_len: src.len() - done };
        let remote = libc::iovec { iov_base: (remote_addr + done) as *mut libc::c_void, iov_len: src.len() - done };
        // SAFETY: `local` describes the readable slice `src`; the kernel checks the remote range
        // and fails with EFAULT rather than touching anything else.
        let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "process_vm_writev wrote 0 bytes"));
        }
        done += n as usize;
    }
    Ok(())
}

fn read_raw(pid: i32, remote_addr: usize, base: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            // SAFETY: offset within the writable range the public callers describe.
            iov_base: unsafe { base.add(done) } as *mut libc::c_void,
            iov_len: len - done,
        };
        let remote = libc::iovec { iov_base: (remote_addr + done) as *mut libc::c_void, iov_len: len - done };
        // SAFETY: `local` lies inside a writable range (see `UserBuf::new`); the kernel checks the
        // remote range and fails with EFAULT rather than touching anything else.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "process_vm_readv read 0 bytes"));
        }
        done += n as usize;
    }
    Ok(())
}
