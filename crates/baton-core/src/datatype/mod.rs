//! Datatype layouts: where the bytes of one element lie, and packing to and from a byte stream.
//!
//! A [`Layout`] is the normalized form of a type map: per element, the list of contiguous data
//! blocks in type-map order (blocks that follow each other both in the type map and in memory are
//! merged), the basic elements run-length encoded, plus extent and bounds. Every constructor
//! (`contiguous`, `vector`, ..., `darray`, `resized`: `constructors.rs`) places copies of older
//! layouts through one [`Builder`], so they all normalize the same way. Contiguous types take the
//! direct path everywhere; the others are packed into (or unpacked from) the packed byte stream
//! that travels on the wire, in type-map order (so a vector with a negative stride packs its last
//! block first, as the standard's type map says): `pack.rs`.
//!
//! The block list is explicit: a vector of a million separate blocks holds a million entries
//! ([`MAX_BLOCKS`] bounds what a constructor may build). Packing and unpacking walk its grouping
//! into [`Run`]s instead (equal blocks at one stride: a matrix column is one run), a batch of
//! blocks at a time.
//!
//! Each basic element is a [`Basic`], whose [`Conv`] says how it is written in external32
//! (`external32.rs`). A derived type records the call that made it as an [`Envelope`] of
//! [`TypeArg`]s (`MPI_Type_get_envelope/get_contents`). Predefined types live in a table keyed by
//! their standard ABI handle value ([`predefined`], `predefined.rs`).

mod build;
mod constructors;
mod envelope;
mod external32;
mod pack;
mod predefined;

pub use build::Builder;
pub use envelope::{Envelope, TypeArg};
pub use predefined::{predefined, predefined_contig_size};

use std::sync::Arc;

/// How a basic element is written in the "external32" representation (big-endian, the
/// standard's sizes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conv {
    /// Single bytes: copied as they are.
    Raw,
    /// An integer; `ext` may differ from the native size (`long` is 4 bytes in external32).
    Int { signed: bool },
    /// An IEEE float of the same size on both sides: byte order only.
    Float,
    /// Two IEEE floats (real, imaginary).
    Complex,
    /// C `long double` (x87 80-bit extended on x86-64, IEEE quad elsewhere) as IEEE quad.
    LongDouble,
    /// Two `long double`s.
    LongDoubleComplex,
}

/// A basic (predefined, non-pair) element: what `MPI_Get_elements` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Basic {
    /// Native size in bytes.
    pub size: u32,
    /// Size in external32.
    pub ext: u32,
    pub conv: Conv,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of data in one element (the type's size).
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_extent: isize,
    /// Data blocks of one element in type-map order: (byte offset from the element's start,
    /// length). Neighbours in the list are merged when they are also neighbours in memory.
    pub blocks: Vec<(isize, usize)>,
    /// The same blocks as runs of equal, equally spaced blocks: what packing and unpacking
    /// walk (a column of a matrix is one run, not a list of its elements).
    pub runs: Vec<Run>,
    /// Basic elements of one element in type-map order, run-length encoded: (element, repeat).
    pub elems: Vec<(Basic, u64)>,
    pub name: &'static str,
    /// Alignment of the most aligned basic element (the standard's epsilon rounding of a struct's
    /// extent uses it).
    pub align: usize,
    /// Whether lb / ub come from explicit markers (`MPI_Type_create_resized`, subarray, darray):
    /// such bounds propagate through later constructors instead of the data's bounds.
    pub sticky_lb: bool,
    pub sticky_ub: bool,
    /// The constructor call; None for predefined types.
    pub envelope: Option<Arc<Envelope>>,
}

/// `count` blocks of `len` bytes, the first at byte offset `off` of an element, each `stride`
/// bytes after the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub off: isize,
    pub len: usize,
    pub stride: isize,
    pub count: usize,
}

/// Groups a block list (in type-map order) into runs.
pub fn runs_of(blocks: &[(isize, usize)]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for &(off, len) in blocks {
        match runs.last_mut() {
            Some(r) if r.len == len && r.count == 1 => {
                r.stride = off - r.off;
                r.count = 2;
            }
            Some(r) if r.len == len && r.off + r.count as isize * r.stride == off => r.count += 1,
            _ => runs.push(Run { off, len, stride: len as isize, count: 1 }),
        }
    }
    runs
}

/// The most separate data blocks one element of a type may have (see the module doc).
pub const MAX_BLOCKS: usize = 1 << 26;

impl Layout {
    /// Basic elements in the first `bytes` packed bytes, or None if they end mid-element.
    pub fn elements_in(&self, bytes: u64) -> Option<u64> {
        if self.size == 0 {
            return Some(0);
        }
        let per: u64 = self.elems.iter().map(|&(_, n)| n).sum();
        let full = bytes / self.size as u64;
        let mut rem = bytes % self.size as u64;
        let mut n = full * per;
        for &(b, k) in &self.elems {
            if rem == 0 {
                break;
            }
            let run = b.size as u64 * k;
            if rem >= run {
                rem -= run;
                n += k;
            } else {
                n += rem / b.size as u64;
                if !rem.is_multiple_of(b.size as u64) {
                    return None;
                }
                rem = 0;
            }
        }
        Some(n)
    }

    /// Packed bytes taken by `n` basic elements.
    pub fn bytes_for_elements(&self, n: u64) -> u64 {
        let per: u64 = self.elems.iter().map(|&(_, k)| k).sum();
        if per == 0 {
            return 0;
        }
        let mut bytes = n / per * self.size as u64;
        let mut rem = n % per;
        for &(b, k) in &self.elems {
            let t = rem.min(k);
            bytes += t * b.size as u64;
            rem -= t;
        }
        bytes
    }

    /// Elements sit back to back with no gaps: the bytes can be used in place.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.blocks.len() == 1 && self.blocks[0] == (0, self.size) && self.extent == self.size as isize
    }

    /// Byte range touched by `count` elements, relative to the buffer address: (low, high).
    #[inline]
    pub fn span(&self, count: usize) -> (isize, isize) {
        if count == 0 || self.size == 0 {
            return (0, 0);
        }
        let last = (count as isize - 1) * self.extent;
        let lo = self.true_lb.min(last + self.true_lb);
        let hi = (self.true_lb + self.true_extent).max(last + self.true_lb + self.true_extent);
        (lo, hi)
    }
}
