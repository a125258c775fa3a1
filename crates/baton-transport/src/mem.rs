//! Spans of application memory handed to MPI calls.
//!
//! MPI's contract is that a buffer passed to a communication call stays valid and untouched
//! (for sends: unmodified; for receives: not accessed) until the operation completes. The C
//! boundary states that contract once, when it builds a [`UserBuf`]; everything above then reads
//! and writes through bounds-checked methods.

/// A span of the application's memory, valid until the operation that owns it completes.
#[derive(Clone, Copy, Debug)]
pub struct UserBuf {
    addr: usize,
    len: usize,
}

impl UserBuf {
    /// # Safety
    /// `[addr, addr+len)` must be valid for reads (and for writes if used as a receive buffer)
    /// until the MPI operation that owns this span completes, and must not be accessed by the
    /// application in a conflicting way meanwhile. `addr` may be anything when `len` is 0.
    pub unsafe fn new(addr: usize, len: usize) -> UserBuf {
        UserBuf { addr, len }
    }

    pub const fn empty() -> UserBuf {
        UserBuf { addr: 0, len: 0 }
    }

    pub fn addr(&self) -> usize {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes `[off, off+n)`, clamped to the span.
    #[inline]
    pub fn read(&self, off: usize, n: usize) -> &[u8] {
        let off = off.min(self.len);
        let n = n.min(self.len - off);
        if n == 0 {
            return &[];
        }
        // SAFETY: in bounds of a span the constructor's caller vouched for.
        unsafe { std::slice::from_raw_parts((self.addr + off) as *const u8, n) }
    }

    /// Copies `src` to offset `off`, never past the end; returns how many bytes were written.
    pub fn write(&self, off: usize, src: &[u8]) -> usize {
        if off >= self.len {
            return 0;
        }
        let n = src.len().min(self.len - off);
        if n > 0 {
            // SAFETY: in bounds of a writable span the constructor's caller vouched for; `src`
            // cannot overlap it unless the application aliased send and receive buffers, which
            // MPI forbids; `copy` (memmove) stays defined even then.
            unsafe { std::ptr::copy(src.as_ptr(), (self.addr + off) as *mut u8, n) };
        }
        n
    }

    /// Copies `src` as `src.len() / n` blocks of `n` bytes to offsets `at`, `at + stride`, ...
    /// (the blocks of a derived datatype). Blocks of 4 to 16 bytes move as two overlapping
    /// words: a `memmove` call per block would cost more than the copy. Blocks that would fall
    /// outside the span are clipped as [`write`](Self::write) clips.
    #[inline(always)]
    pub fn put_strided(&self, at: isize, n: usize, stride: isize, src: &[u8]) {
        let k = src.len().checked_div(n).unwrap_or(0) as isize;
        if k == 0 {
            return;
        }
        let last = (k - 1).checked_mul(stride).and_then(|d| d.checked_add(at));
        let inside = last.is_some_and(|last| {
            let (lo, hi) = (at.min(last), at.max(last));
            lo >= 0 && (hi as usize).checked_add(n).is_some_and(|e| e <= self.len)
        });
        if !inside {
            for (i, b) in src.chunks_exact(n).enumerate() {
                let o = at.wrapping_add((i as isize).wrapping_mul(stride));
                if o >= 0 {
                    self.write(o as usize, b);
                }
            }
            return;
        }
        let base = self.addr as *mut u8;
        let s = src.as_ptr();
        // SAFETY: every block `[at + i*stride, +n)` lies in a writable span the constructor's
        // caller vouched for: the first and the last do (checked above) and the others lie
        // between them. `src` holds k*n bytes. Each block's words are loaded before they are
        // stored, so an aliased source (which MPI forbids) would still behave as `memmove`.
        unsafe {
            let mut d = base.offset(at);
            if (8..=16).contains(&n) {
                for i in 0..k as usize {
                    let p = s.add(i * n);
                    let x = std::ptr::read_unaligned(p as *const u64);
                    let y = std::ptr::read_unaligned(p.add(n - 8) as *const u64);
                    std::ptr::write_unaligned(d as *mut u64, x);
                    std::ptr::write_unaligned(d.add(n - 8) as *mut u64, y);
                    d = d.wrapping_offset(stride);
                }
            } else if (4..8).contains(&n) {
                for i in 0..k as usize {
                    let p = s.add(i * n);
                    let x = std::ptr::read_unaligned(p as *const u32);
                    let y = std::ptr::read_unaligned(p.add(n - 4) as *const u32);
                    std::ptr::write_unaligned(d as *mut u32, x);
                    std::ptr::write_unaligned(d.add(n - 4) as *mut u32, y);
                    d = d.wrapping_offset(stride);
                }
            } else {
                for i in 0..k as usize {
                    std::ptr::copy(s.add(i * n), d, n);
                    d = d.wrapping_offset(stride);
                }
            }
        }
    }

    /// The first `n` bytes of the span (all of it if shorter).
    pub fn prefix(&self, n: usize) -> UserBuf {
        UserBuf { addr: self.addr, len: n.min(self.len) }
    }

    /// A raw pointer for system calls that fill the span (single-copy reads).
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.addr as *mut u8
    }
}

impl UserBuf {
    /// The bytes `[off, off+n)` as a span of their own, clamped to this one.
    pub fn sub(&self, off: usize, n: usize) -> UserBuf {
        let off = off.min(self.len);
        UserBuf { addr: self.addr + off, len: n.min(self.len - off) }
    }

    /// Runs `f` on the bytes `[off, off+n)` (clamped) for in-place updates such as reductions.
    pub fn modify<R>(&self, off: usize, n: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let off = off.min(self.len);
        let n = n.min(self.len - off);
        if n == 0 {
            return f(&mut []);
        }
        // SAFETY: in bounds of a writable span the constructor's caller vouched for; no other
        // reference into it is live while the library combines data in place.
        f(unsafe { std::slice::from_raw_parts_mut((self.addr + off) as *mut u8, n) })
    }
}

/// Memory of the library's own that operations in flight read and write: the intermediate
/// buffers of collective schedules. Shared through an `Arc`, so every operation using it keeps
/// it alive; like application buffers, a range is never read by one operation while another
/// writes it (a schedule orders its steps so), which is what makes the methods below sound to
/// call from several places.
pub struct Scratch {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the allocation is plain bytes owned by this value; access discipline is the
// schedules' (see the type's doc), as for application buffers shared with the engine.
unsafe impl Send for Scratch {}
// SAFETY: as above.
unsafe impl Sync for Scratch {}

impl Scratch {
    pub fn new(len: usize) -> Scratch {
        let b: Box<[u8]> = vec![0u8; len].into_boxed_slice();
        Scratch { ptr: Box::into_raw(b) as *mut u8, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    fn clamp(&self, off: usize, n: usize) -> (usize, usize) {
        let off = off.min(self.len);
        (off, n.min(self.len - off))
    }

    pub fn read(&self, off: usize, n: usize) -> &[u8] {
        let (off, n) = self.clamp(off, n);
        // SAFETY: in bounds of our own allocation; no writer of this range is active (type doc).
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), n) }
    }

    pub fn write(&self, off: usize, src: &[u8]) -> usize {
        let (off, n) = self.clamp(off, src.len());
        // SAFETY: in bounds; memmove stays defined even if `src` came from this allocation.
        unsafe { std::ptr::copy(src.as_ptr(), self.ptr.add(off), n) };
        n
    }

    pub fn modify<R>(&self, off: usize, n: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let (off, n) = self.clamp(off, n);
        // SAFETY: in bounds; no other access to this range is active (type doc).
        f(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), n) })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a boxed slice of exactly this length.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}
