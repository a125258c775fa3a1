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

    /// The first `n` bytes of the span (all of it if shorter).
    pub fn prefix(&self, n: usize) -> UserBuf {
        UserBuf { addr: self.addr, len: n.min(self.len) }
    }

    /// A raw pointer for system calls that fill the span (single-copy reads).
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.addr as *mut u8
    }
}
