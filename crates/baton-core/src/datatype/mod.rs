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
//! The block list is explicit up to [`FLAT_BLOCKS`] separate blocks per element (the flat form,
//! what nearly every type uses): packing and unpacking walk its grouping into [`Run`]s (equal
//! blocks at one stride: a matrix column is one run), a batch of blocks at a time. A constructor
//! that would make more keeps the loop form instead: the element as [`Piece`]s, each so many
//! copies of an older layout at one stride (a vector of 2^27 ints is one piece of one int), so
//! that a type map of any length costs memory and time in proportion to its constructor calls,
//! not to its blocks.
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
    /// The loop form (see the module doc): when set, `blocks`, `runs` and `elems` are empty and
    /// these pieces, in type-map order, hold the data of one element.
    pub pieces: Option<Arc<[Piece]>>,
}

/// `count` copies of `inner`, the first at byte offset `off` of an element, each `stride` bytes
/// after the previous (one loop of a layout's loop form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub off: isize,
    pub count: usize,
    pub stride: isize,
    /// Holds data (its size is not 0).
    pub inner: Arc<Layout>,
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

/// The most separate data blocks one element keeps in the flat form (see the module doc): more
/// take the loop form. Far above what the hot paths' types have, so they stay flat.
pub const FLAT_BLOCKS: usize = 1 << 16;

impl Layout {
    /// Basic elements in one element.
    pub fn basic_count(&self) -> u64 {
        match &self.pieces {
            None => self.elems.iter().map(|&(_, n)| n).sum(),
            Some(ps) => ps.iter().map(|p| p.count as u64 * p.inner.basic_count()).sum(),
        }
    }

    /// The basic element every basic element of the type is, if they are all alike.
    pub fn uniform_basic(&self) -> Option<Basic> {
        match &self.pieces {
            None => {
                let first = self.elems.first()?.0;
                self.elems.iter().all(|e| e.0 == first).then_some(first)
            }
            Some(ps) => {
                let first = ps.first()?.inner.uniform_basic()?;
                ps.iter().all(|p| p.inner.uniform_basic() == Some(first)).then_some(first)
            }
        }
    }

    /// The one data block of a flat layout that has exactly one.
    #[inline]
    pub fn single_block(&self) -> Option<(isize, usize)> {
        match (&self.pieces, &self.blocks[..]) {
            (None, &[b]) => Some(b),
            _ => None,
        }
    }

    /// Basic elements in the first `bytes` packed bytes, or None if they end mid-element.
    pub fn elements_in(&self, bytes: u64) -> Option<u64> {
        if self.size == 0 {
            return Some(0);
        }
        let full = bytes / self.size as u64;
        Some(full * self.basic_count() + self.elements_within(bytes % self.size as u64)?)
    }

    /// Basic elements in the first `rem` (less than `size`) packed bytes of one element.
    fn elements_within(&self, mut rem: u64) -> Option<u64> {
        let mut n = 0;
        if let Some(ps) = &self.pieces {
            for p in ps.iter() {
                let one = p.inner.size as u64;
                if rem >= one * p.count as u64 {
                    rem -= one * p.count as u64;
                    n += p.count as u64 * p.inner.basic_count();
                    continue;
                }
                n += rem / one * p.inner.basic_count();
                return Some(n + p.inner.elements_within(rem % one)?);
            }
            return Some(n);
        }
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
        let per = self.basic_count();
        if per == 0 {
            return 0;
        }
        n / per * self.size as u64 + self.bytes_within(n % per)
    }

    /// Packed bytes of the first `rem` (fewer than one element's) basic elements of an element.
    fn bytes_within(&self, mut rem: u64) -> u64 {
        let mut bytes = 0;
        if let Some(ps) = &self.pieces {
            for p in ps.iter() {
                let per = p.inner.basic_count();
                if rem >= per * p.count as u64 {
                    rem -= per * p.count as u64;
                    bytes += (p.inner.size * p.count) as u64;
                    continue;
                }
                return bytes + rem / per * p.inner.size as u64 + p.inner.bytes_within(rem % per);
            }
            return bytes;
        }
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
