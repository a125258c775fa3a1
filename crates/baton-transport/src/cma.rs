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

/// Most iovecs one `process_vm_readv`/`writev` call takes on each side (`UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// Reads the spans `remote` (address, length) of process `pid` into the spans `local` (offset,
/// length) of `dst`, in order: the two lists describe one stream of bytes, cut differently
/// (the layouts of two derived datatypes). Fails, moving nothing, if a local span lies outside
/// `dst` or the two lists differ in total length; the kernel checks the remote spans.
pub fn readv(pid: i32, dst: &UserBuf, local: &[(usize, usize)], remote: &[(usize, usize)]) -> io::Result<()> {
    transfer_vectored(Dir::Read, pid, dst, local, remote)
}

/// Writes the spans `local` (offset, length) of `src` to the spans `remote` (address, length) of
/// process `pid`; checked as [`readv`] checks.
pub fn writev(pid: i32, src: &UserBuf, local: &[(usize, usize)], remote: &[(usize, usize)]) -> io::Result<()> {
    transfer_vectored(Dir::Write, pid, src, local, remote)
}

fn transfer_vectored(
    dir: Dir,
    pid: i32,
    buf: &UserBuf,
    local: &[(usize, usize)],
    remote: &[(usize, usize)],
) -> io::Result<()> {
    let call = match dir {
        Dir::Read => "cma::readv",
        Dir::Write => "cma::writev",
    };
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, format!("{call}: {why}"));
    let mut total = 0usize;
    for &(off, n) in local {
        if off.checked_add(n).is_none_or(|end| end > buf.len()) {
            return Err(invalid(format!("local span ({off}, {n}) lies outside the buffer of {} bytes", buf.len())));
        }
        // Cannot overflow by much: every span lies in the buffer, but many may repeat.
        total = total.checked_add(n).ok_or_else(|| invalid("local spans total more than usize".into()))?;
    }
    let remote_total = remote.iter().try_fold(0usize, |t, &(_, n)| t.checked_add(n));
    if remote_total != Some(total) {
        return Err(invalid(format!("local spans total {total} bytes, remote spans {remote_total:?}")));
    }
    let (mut here, mut there) = (Spans::new(local), Spans::new(remote));
    let mut liov = Vec::with_capacity(local.len().min(IOV_MAX));
    let mut riov = Vec::with_capacity(remote.len().min(IOV_MAX));
    let mut done = 0usize;
    while done < total {
        here.next_batch(&mut liov, |off| buf.as_mut_ptr().wrapping_add(off));
        there.next_batch(&mut riov, |addr| addr as *mut u8);
        // SAFETY: every local iovec lies inside `buf` (checked above), which is writable for a
        // read and readable for a write (`UserBuf::new`); the kernel checks the remote ones and
        // fails with EFAULT rather than touching anything else.
        let n = unsafe {
            match dir {
                Dir::Read => {
                    libc::process_vm_readv(pid, liov.as_ptr(), liov.len() as _, riov.as_ptr(), riov.len() as _, 0)
                }
                Dir::Write => {
                    libc::process_vm_writev(pid, liov.as_ptr(), liov.len() as _, riov.as_ptr(), riov.len() as _, 0)
                }
            }
        };
        let Some(n) = copied(n, call)? else { continue };
        // The kernel may stop short (at most IOV_MAX iovecs a side, or a fault part way): both
        // sides resume from the byte after the last one copied.
        here.advance(n);
        there.advance(n);
        done += n;
    }
    Ok(())
}

/// A position in a list of (start, length) spans, from which batches of iovecs are cut.
struct Spans<'a> {
    spans: &'a [(usize, usize)],
    /// The span holding the next byte.
    at: usize,
    /// Bytes of that span already moved.
    skip: usize,
}

impl<'a> Spans<'a> {
    fn new(spans: &'a [(usize, usize)]) -> Spans<'a> {
        Spans { spans, at: 0, skip: 0 }
    }

    /// Refills `out` with iovecs for the next (at most [`IOV_MAX`]) non-empty spans, `to_ptr`
    /// turning a span's start into an address.
    fn next_batch(&self, out: &mut Vec<libc::iovec>, to_ptr: impl Fn(usize) -> *mut u8) {
        out.clear();
        let mut skip = self.skip;
        for &(start, n) in &self.spans[self.at..] {
            if n > skip {
                out.push(libc::iovec {
                    iov_base: to_ptr(start).wrapping_add(skip) as *mut libc::c_void,
                    iov_len: n - skip,
                });
                if out.len() == IOV_MAX {
                    break;
                }
            }
            skip = 0;
        }
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let left = self.spans[self.at].1 - self.skip;
            if n < left {
                self.skip += n;
                return;
            }
            n -= left;
            self.at += 1;
            self.skip = 0;
        }
    }
}

/// What a `process_vm_*` call's return value `n` says: bytes copied, `None` to retry (a signal
/// interrupted it), or the error (`what` names the call for a copy of nothing).
fn copied(n: isize, what: &str) -> io::Result<Option<usize>> {
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(None) } else { Err(e) };
    }
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{what}: the kernel copied 0 bytes")));
    }
    Ok(Some(n as usize))
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
        let Some(n) = copied(n, "process_vm_readv/writev")? else { continue };
        done += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_pid() -> i32 {
        std::process::id() as i32
    }

    /// Spans of 1 to 13 bytes, `gap` bytes apart, covering `total` bytes from `start`.
    fn cut(start: usize, total: usize, seed: usize, gap: usize) -> Vec<(usize, usize)> {
        let (mut v, mut at, mut left, mut k) = (Vec::new(), start, total, seed);
        while left > 0 {
            k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let n = (k >> 16) % 13 + 1;
            let n = n.min(left);
            v.push((at, n));
            if k % 7 == 0 {
                v.push((at + n, 0));
            }
            at += n + gap;
            left -= n;
        }
        v
    }

    /// Moves a stream through more than IOV_MAX spans on each side, cut differently on the two
    /// sides, from one buffer of this process to another and back, against a plain gather.
    #[test]
    fn vectored_copies_within_own_process() {
        const TOTAL: usize = 20_000;
        let src: Vec<u8> = (0..3 * TOTAL).map(|i| (i * 7 % 251) as u8).collect();
        let remote = cut(src.as_ptr() as usize, TOTAL, 1, 2);
        assert!(remote.len() > 2 * IOV_MAX);
        let mut dst = vec![0u8; 2 * TOTAL];
        let local = cut(0, TOTAL, 2, 1);
        // SAFETY: `dst` outlives the span and is only accessed through it until the copy ends.
        let dbuf = unsafe { UserBuf::new(dst.as_mut_ptr() as usize, dst.len()) };
        readv(own_pid(), &dbuf, &local, &remote).unwrap();
        let stream: Vec<u8> =
            remote.iter().flat_map(|&(a, n)| src[a - src.as_ptr() as usize..][..n].iter().copied()).collect();
        let got: Vec<u8> = local.iter().flat_map(|&(o, n)| dst[o..o + n].iter().copied()).collect();
        assert_eq!(got, stream);
        assert!(local.windows(2).all(|w| dst[w[0].0 + w[0].1] == 0 || w[0].1 == 0), "gaps untouched");

        // And back, into a third buffer cut like `remote`.
        let mut back = vec![0u8; 3 * TOTAL];
        let there: Vec<(usize, usize)> =
            remote.iter().map(|&(a, n)| (a - src.as_ptr() as usize + back.as_mut_ptr() as usize, n)).collect();
        writev(own_pid(), &dbuf, &local, &there).unwrap();
        for &(a, n) in &remote {
            let o = a - src.as_ptr() as usize;
            assert_eq!(back[o..o + n], src[o..o + n]);
        }
    }

    #[test]
    fn bad_spans_are_refused_before_copying() {
        let mut mem = vec![0u8; 64];
        let other = [9u8; 64];
        // SAFETY: `mem` outlives the span and is only accessed through it meanwhile.
        let b = unsafe { UserBuf::new(mem.as_mut_ptr() as usize, mem.len()) };
        let r = [(other.as_ptr() as usize, 8)];
        let e = readv(own_pid(), &b, &[(60, 8)], &r).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("cma::readv") && e.to_string().contains("outside"), "{e}");
        assert!(readv(own_pid(), &b, &[(usize::MAX, 2)], &r).is_err());
        let e = writev(own_pid(), &b, &[(0, 4)], &r).unwrap_err();
        assert!(e.to_string().contains("cma::writev") && e.to_string().contains("total"), "{e}");
        // A remote span that is not mapped: the kernel refuses.
        assert!(readv(own_pid(), &b, &[(0, 8)], &[(8, 8)]).is_err());
        assert!(mem.iter().all(|&x| x == 0));
        // Nothing to move is fine.
        readv(own_pid(), &b, &[], &[]).unwrap();
        readv(own_pid(), &b, &[(3, 0)], &[(0, 0)]).unwrap();
    }
}
