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
    #[inline]
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

    /// [`write`](Self::write) for a large copy between memories of different processes (a
    /// one-sided put or get into a window mapped by both): above 64 KiB on x86-64 it uses the
    /// string-move instruction, which the CPU runs as whole-line stores without first reading the
    /// destination lines (the library copy reads them: a quarter slower on the machines measured,
    /// docs/PERFORMANCE.md, one-sided). Where `src` and the span overlap, it falls back to
    /// `write`.
    #[inline]
    pub fn write_bulk(&self, off: usize, src: &[u8]) -> usize {
        if off >= self.len {
            return 0;
        }
        let n = src.len().min(self.len - off);
        let (dst, s) = (self.addr + off, src.as_ptr() as usize);
        let overlap = s < dst + n && dst < s + n;
        if !cfg!(target_arch = "x86_64") || n < (64 << 10) || overlap {
            return self.write(off, &src[..n]);
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `[dst, dst+n)` is in bounds of a writable span the constructor's caller vouched
        // for, `src` is readable for `n` bytes, and the two do not overlap (checked above);
        // `rep movsb` copies exactly `rcx` bytes forward from `rsi` to `rdi` (the direction flag
        // is clear, as the ABI guarantees at every call).
        unsafe {
            std::arch::asm!(
                "rep movsb",
                inout("rcx") n => _,
                inout("rdi") dst => _,
                inout("rsi") s => _,
                options(nostack, preserves_flags)
            );
        }
        n
    }

    /// Copies `src` as `src.len() / n` blocks of `n` bytes to offsets `at`, `at + stride`, ...
    /// (the blocks of a derived datatype). Blocks that would fall outside the span are clipped
    /// as [`write`](Self::write) clips.
    #[inline(always)]
    pub fn put_strided(&self, at: isize, n: usize, stride: isize, src: &[u8]) {
        let k = src.len().checked_div(n).unwrap_or(0);
        if !self.holds_blocks(at, n, stride, k) {
            for (i, b) in src.chunks_exact(n).enumerate() {
                let o = at.wrapping_add((i as isize).wrapping_mul(stride));
                if o >= 0 {
                    self.write(o as usize, b);
                }
            }
            return;
        }
        // SAFETY: every block lies in a writable span the constructor's caller vouched for
        // (`holds_blocks`); `src` holds k*n bytes and, MPI forbidding aliased buffers, does not
        // overlap them (each block's words are loaded before they are stored anyway).
        unsafe { copy_blocks(src.as_ptr(), n as isize, (self.addr as *mut u8).wrapping_offset(at), stride, n, k) }
    }

    /// Fills `dst` with `dst.len() / n` blocks of `n` bytes read at offsets `at`, `at + stride`,
    /// ...; false (and nothing read) if a block lies outside the span.
    #[inline(always)]
    pub fn get_strided(&self, at: isize, n: usize, stride: isize, dst: &mut [u8]) -> bool {
        let k = dst.len().checked_div(n).unwrap_or(0);
        if !self.holds_blocks(at, n, stride, k) {
            return false;
        }
        // SAFETY: every block lies in a readable span the constructor's caller vouched for
        // (`holds_blocks`); `dst` is ours, k*n bytes long.
        unsafe { copy_blocks((self.addr as *const u8).wrapping_offset(at), stride, dst.as_mut_ptr(), n as isize, n, k) }
        true
    }

    /// Whether `k` blocks of `n` bytes at `at`, `at + stride`, ... all lie in the span: the
    /// first and the last do, and the others lie between them.
    #[inline(always)]
    fn holds_blocks(&self, at: isize, n: usize, stride: isize, k: usize) -> bool {
        if k == 0 {
            return true;
        }
        let last = (k as isize - 1).checked_mul(stride).and_then(|d| d.checked_add(at));
        last.is_some_and(|last| {
            let (lo, hi) = (at.min(last), at.max(last));
            lo >= 0 && (hi as usize).checked_add(n).is_some_and(|e| e <= self.len)
        })
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

/// Destination strides from which [`copy_blocks`] paces its stores (each block on a line of
/// its own, and a run of them in few cache sets).
const SPARSE_STRIDE: usize = 1024;

/// Copies `k` blocks of `n` bytes from `src`, `src + sstride`, ... to `dst`, `dst + dstride`, ....
/// Blocks of 4 to 16 bytes (single elements, small structs) move as two overlapping words, where
/// a `memmove` call per block would cost more than the copy. (Neither prefetching a few blocks
/// ahead nor loading from a group of destination blocks before storing to them pays for blocks a
/// cache line or more apart: docs/PERFORMANCE.md, derived datatypes.)
///
/// # Safety
/// Every source block must be readable and every destination block writable.
#[inline(always)]
unsafe fn copy_blocks(src: *const u8, sstride: isize, dst: *mut u8, dstride: isize, n: usize, k: usize) {
    // SAFETY: the caller's guarantee, passed on.
    unsafe {
        if dstride.unsigned_abs() >= SPARSE_STRIDE {
            copy_blocks_paced::<true>(src, sstride, dst, dstride, n, k)
        } else {
            copy_blocks_paced::<false>(src, sstride, dst, dstride, n, k)
        }
    }
}

/// [`copy_blocks`]; with `PACE`, one more store after each block, to a stack slot that is
/// surely in L1. Blocks far apart each miss the cache (a matrix column), and back-to-back
/// missing stores can retire slower than when a store that hits sits between them, so the
/// scatter of a column paces its stores that way (docs/PERFORMANCE.md, derived datatypes,
/// backs the choice and [`SPARSE_STRIDE`]).
///
/// # Safety
/// As for [`copy_blocks`].
#[inline(always)]
unsafe fn copy_blocks_paced<const PACE: bool>(
    src: *const u8,
    sstride: isize,
    dst: *mut u8,
    dstride: isize,
    n: usize,
    k: usize,
) {
    // SAFETY (whole body): the caller guarantees every block, and `each_block` hands the
    // closures block starts only.
    unsafe {
        if (8..=16).contains(&n) {
            each_block::<PACE>(src, sstride, dst, dstride, k, |s, d| two_words::<u64>(s, d, n))
        } else if (4..8).contains(&n) {
            each_block::<PACE>(src, sstride, dst, dstride, k, |s, d| two_words::<u32>(s, d, n))
        } else {
            each_block::<PACE>(src, sstride, dst, dstride, k, |s, d| std::ptr::copy(s, d, n))
        }
    }
}

/// Calls `f(source block, destination block)` for `k` blocks, the pointers stepping by the
/// strides with wrapping arithmetic; with `PACE`, stores to a local after each block (see
/// [`copy_blocks_paced`]).
///
/// # Safety
/// `f` must be safe to call on every block start the strides reach.
#[inline(always)]
unsafe fn each_block<const PACE: bool>(
    mut src: *const u8,
    sstride: isize,
    mut dst: *mut u8,
    dstride: isize,
    k: usize,
    f: impl Fn(*const u8, *mut u8),
) {
    let mut pace = 0u8;
    for _ in 0..k {
        f(src, dst);
        if PACE {
            // SAFETY: `pace` is a local.
            unsafe { std::ptr::write_volatile(&mut pace, 0) };
        }
        src = src.wrapping_offset(sstride);
        dst = dst.wrapping_offset(dstride);
    }
}

/// Moves a block of `n` bytes, `size_of::<W>() <= n <= 2 * size_of::<W>()`, as two words of
/// type `W` that overlap when `n` is less than two words.
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes.
#[inline(always)]
unsafe fn two_words<W: Copy>(src: *const u8, dst: *mut u8, n: usize) {
    let w = std::mem::size_of::<W>();
    // SAFETY: both words lie inside the block (caller's contract); unaligned accesses.
    unsafe {
        let x = std::ptr::read_unaligned(src as *const W);
        let y = std::ptr::read_unaligned(src.add(n - w) as *const W);
        std::ptr::write_unaligned(dst as *mut W, x);
        std::ptr::write_unaligned(dst.add(n - w) as *mut W, y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scattering packed blocks and gathering them back, against a byte-by-byte reference, for
    /// every copy loop: block sizes around the word-pair cases, strides below and above the
    /// paced one, forwards and backwards.
    #[test]
    fn strided_copies_match_a_byte_reference() {
        for n in [1usize, 3, 4, 7, 8, 12, 16, 17, 40] {
            for stride in [n as isize, 64, 1000, SPARSE_STRIDE as isize, 8192, -(SPARSE_STRIDE as isize), -4096] {
                if stride.unsigned_abs() < n {
                    continue;
                }
                let k = 37;
                let span = stride.unsigned_abs() * (k - 1) + n;
                let at: isize = if stride < 0 { (span - n) as isize } else { 0 };
                let packed: Vec<u8> = (0..n * k).map(|i| (i * 31 % 253) as u8 + 1).collect();
                let mut mem = vec![0u8; span];
                // SAFETY: `mem` outlives `buf` and is not otherwise used while `buf` writes it.
                let buf = unsafe { UserBuf::new(mem.as_mut_ptr() as usize, span) };
                buf.put_strided(at, n, stride, &packed);
                let mut want = vec![0u8; span];
                for b in 0..k {
                    let o = (at + b as isize * stride) as usize;
                    want[o..o + n].copy_from_slice(&packed[b * n..(b + 1) * n]);
                }
                assert_eq!(mem, want, "scatter n={n} stride={stride}");
                let mut back = vec![0u8; n * k];
                // SAFETY: as above; only read now.
                let buf = unsafe { UserBuf::new(mem.as_ptr() as usize, span) };
                assert!(buf.get_strided(at, n, stride, &mut back));
                assert_eq!(back, packed, "gather n={n} stride={stride}");
            }
        }
    }

    #[test]
    fn bulk_writes_copy_exactly_and_clip() {
        for len in [0usize, 5, 64 << 10, (1 << 20) + 3] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut mem = vec![0xeeu8; len + 16];
            // SAFETY: `mem` outlives `buf` and is not otherwise used while `buf` writes it.
            let buf = unsafe { UserBuf::new(mem.as_mut_ptr() as usize, len + 8) };
            assert_eq!(buf.write_bulk(8, &src), len);
            assert_eq!(&mem[8..8 + len], &src[..]);
            assert!(mem[..8].iter().chain(&mem[8 + len..]).all(|&b| b == 0xee), "len {len}: wrote outside");
            // Clipped at the span's end, like `write`.
            assert_eq!(buf.write_bulk(len + 4, &src), len.min(4));
        }
    }
}
