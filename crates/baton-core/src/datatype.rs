//! Datatype layouts: where the bytes of one element lie, and packing to and from a byte stream.
//!
//! A [`Layout`] is the normalized form of a type map: per element, a sorted list of merged
//! contiguous blocks, plus extent and bounds. Contiguous types take the direct path everywhere;
//! the others are packed into (or unpacked from) the packed byte stream that travels on the wire.
//! Predefined types live in a table keyed by their standard ABI handle value.

use baton_abi::consts as c;
use baton_transport::mem::UserBuf;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of data in one element (the type's size).
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_extent: isize,
    /// Data blocks of one element: (byte offset from the element's start, length), sorted, merged.
    pub blocks: Vec<(isize, usize)>,
    /// Sizes of the basic elements of one element, in order (for `MPI_Get_elements`).
    pub elems: Vec<usize>,
    pub name: &'static str,
}

impl Layout {
    pub fn basic(name: &'static str, size: usize) -> Layout {
        Layout {
            size,
            lb: 0,
            extent: size as isize,
            true_lb: 0,
            true_extent: size as isize,
            blocks: vec![(0, size)],
            elems: vec![size],
            name,
        }
    }

    /// The C struct `{ A a; B b; }` used by the MINLOC/MAXLOC pair types.
    fn pair(name: &'static str, a: usize, b: usize, b_align: usize, struct_align: usize) -> Layout {
        let b_off = a.div_ceil(b_align) * b_align;
        let end = b_off + b;
        let extent = end.div_ceil(struct_align) * struct_align;
        let blocks = if b_off == a { vec![(0, a + b)] } else { vec![(0, a), (b_off as isize, b)] };
        Layout {
            size: a + b,
            lb: 0,
            extent: extent as isize,
            true_lb: 0,
            true_extent: end as isize,
            blocks,
            elems: vec![a, b],
            name,
        }
    }

    /// `count` copies of `old` back to back (`MPI_Type_contiguous`).
    pub fn contiguous(count: usize, old: &Layout) -> Layout {
        let mut blocks: Vec<(isize, usize)> = Vec::new();
        for e in 0..count as isize {
            for &(off, len) in &old.blocks {
                let at = e * old.extent + off;
                match blocks.last_mut() {
                    Some(last) if last.0 + last.1 as isize == at => last.1 += len,
                    _ => blocks.push((at, len)),
                }
            }
        }
        let (true_lb, true_extent) =
            if count == 0 { (0, 0) } else { (old.true_lb, (count as isize - 1) * old.extent + old.true_extent) };
        Layout {
            size: old.size * count,
            lb: old.lb,
            extent: old.extent * count as isize,
            true_lb,
            true_extent,
            blocks,
            elems: old.elems.iter().copied().cycle().take(old.elems.len() * count).collect(),
            name: "",
        }
    }

    /// Basic elements in the first `bytes` packed bytes, or None if they end mid-element.
    pub fn elements_in(&self, bytes: u64) -> Option<u64> {
        if self.size == 0 {
            return Some(0);
        }
        let full = bytes / self.size as u64;
        let mut rem = (bytes % self.size as u64) as usize;
        let mut n = full * self.elems.len() as u64;
        for &e in &self.elems {
            if rem == 0 {
                break;
            }
            if rem < e {
                return None;
            }
            rem -= e;
            n += 1;
        }
        Some(n)
    }

    /// Packed bytes taken by `n` basic elements.
    pub fn bytes_for_elements(&self, n: u64) -> u64 {
        let k = self.elems.len() as u64;
        let mut bytes = n / k * self.size as u64;
        for &e in self.elems.iter().take((n % k) as usize) {
            bytes += e as u64;
        }
        bytes
    }

    /// Elements sit back to back with no gaps: the bytes can be used in place.
    pub fn is_contiguous(&self) -> bool {
        self.blocks.len() == 1 && self.blocks[0] == (0, self.size) && self.extent == self.size as isize
    }

    /// Byte range touched by `count` elements, relative to the buffer address: (low, high).
    pub fn span(&self, count: usize) -> (isize, isize) {
        if count == 0 || self.size == 0 {
            return (0, 0);
        }
        let last = (count as isize - 1) * self.extent;
        let lo = self.true_lb.min(last + self.true_lb);
        let hi = (self.true_lb + self.true_extent).max(last + self.true_lb + self.true_extent);
        (lo, hi)
    }

    /// Packs `count` elements found at `base_off` within `span` into `out`.
    pub fn pack_from(&self, span: &UserBuf, base_off: isize, count: usize, out: &mut Vec<u8>) {
        out.reserve(self.size * count);
        for e in 0..count as isize {
            for &(off, len) in &self.blocks {
                let at = (base_off + e * self.extent + off) as usize;
                out.extend_from_slice(span.read(at, len));
            }
        }
    }

    /// Writes packed bytes `src`, which start at packed offset `packed_off`, into the elements at
    /// `base_off` within `span`.
    pub fn unpack_into(&self, span: &UserBuf, base_off: isize, packed_off: usize, mut src: &[u8]) {
        if self.size == 0 {
            return;
        }
        let mut elem = packed_off / self.size;
        let mut within = packed_off % self.size;
        while !src.is_empty() {
            let mut seen = 0usize;
            for &(off, len) in &self.blocks {
                if within >= seen + len {
                    seen += len;
                    continue;
                }
                let skip = within - seen;
                let n = (len - skip).min(src.len());
                let at = base_off + elem as isize * self.extent + off + skip as isize;
                span.write(at as usize, &src[..n]);
                src = &src[n..];
                within += n;
                seen += len;
                if src.is_empty() {
                    return;
                }
            }
            elem += 1;
            within = 0;
        }
    }
}

/// Predefined datatype handles lie in 0x200..0x300 (the ABI's datatype range).
const FIRST: usize = 0x200;
const SLOTS: usize = 0x100;

fn table() -> &'static [Option<Arc<Layout>>] {
    static T: OnceLock<Vec<Option<Arc<Layout>>>> = OnceLock::new();
    T.get_or_init(|| {
        let mut v = vec![None; SLOTS];
        for (h, l) in build() {
            v[h - FIRST] = Some(l);
        }
        v
    })
}

fn build() -> HashMap<usize, Arc<Layout>> {
    {
        use std::mem::{align_of, size_of};
        let ld = size_of::<f64>() * 2; // long double on x86-64 and aarch64 Linux: 16 bytes
        let basic: &[(usize, &'static str, usize)] = &[
            (c::MPI_AINT, "MPI_AINT", 8),
            (c::MPI_COUNT, "MPI_COUNT", 8),
            (c::MPI_OFFSET, "MPI_OFFSET", 8),
            (c::MPI_PACKED, "MPI_PACKED", 1),
            (c::MPI_SHORT, "MPI_SHORT", 2),
            (c::MPI_INT, "MPI_INT", 4),
            (c::MPI_LONG, "MPI_LONG", size_of::<libc::c_long>()),
            (c::MPI_LONG_LONG, "MPI_LONG_LONG", 8),
            (c::MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", 2),
            (c::MPI_UNSIGNED, "MPI_UNSIGNED", 4),
            (c::MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", size_of::<libc::c_ulong>()),
            (c::MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 8),
            (c::MPI_FLOAT, "MPI_FLOAT", 4),
            (c::MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", 8),
            (c::MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX", 8),
            (c::MPI_DOUBLE, "MPI_DOUBLE", 8),
            (c::MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 16),
            (c::MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX", 16),
            (c::MPI_LOGICAL, "MPI_LOGICAL", 4),
            (c::MPI_INTEGER, "MPI_INTEGER", 4),
            (c::MPI_REAL, "MPI_REAL", 4),
            (c::MPI_COMPLEX, "MPI_COMPLEX", 8),
            (c::MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 8),
            (c::MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX", 16),
            (c::MPI_CHARACTER, "MPI_CHARACTER", 1),
            (c::MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", ld),
            (c::MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX", 2 * ld),
            (c::MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX", 2 * ld),
            (c::MPI_C_BOOL, "MPI_C_BOOL", 1),
            (c::MPI_CXX_BOOL, "MPI_CXX_BOOL", 1),
            (c::MPI_WCHAR, "MPI_WCHAR", size_of::<libc::wchar_t>()),
            (c::MPI_INT8_T, "MPI_INT8_T", 1),
            (c::MPI_UINT8_T, "MPI_UINT8_T", 1),
            (c::MPI_CHAR, "MPI_CHAR", 1),
            (c::MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1),
            (c::MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1),
            (c::MPI_BYTE, "MPI_BYTE", 1),
            (c::MPI_INT16_T, "MPI_INT16_T", 2),
            (c::MPI_UINT16_T, "MPI_UINT16_T", 2),
            (c::MPI_INT32_T, "MPI_INT32_T", 4),
            (c::MPI_UINT32_T, "MPI_UINT32_T", 4),
            (c::MPI_INT64_T, "MPI_INT64_T", 8),
            (c::MPI_UINT64_T, "MPI_UINT64_T", 8),
            (c::MPI_LOGICAL1, "MPI_LOGICAL1", 1),
            (c::MPI_INTEGER1, "MPI_INTEGER1", 1),
            (c::MPI_LOGICAL2, "MPI_LOGICAL2", 2),
            (c::MPI_INTEGER2, "MPI_INTEGER2", 2),
            (c::MPI_REAL2, "MPI_REAL2", 2),
            (c::MPI_LOGICAL4, "MPI_LOGICAL4", 4),
            (c::MPI_INTEGER4, "MPI_INTEGER4", 4),
            (c::MPI_REAL4, "MPI_REAL4", 4),
            (c::MPI_COMPLEX4, "MPI_COMPLEX4", 4),
            (c::MPI_LOGICAL8, "MPI_LOGICAL8", 8),
            (c::MPI_INTEGER8, "MPI_INTEGER8", 8),
            (c::MPI_REAL8, "MPI_REAL8", 8),
            (c::MPI_COMPLEX8, "MPI_COMPLEX8", 8),
            (c::MPI_LOGICAL16, "MPI_LOGICAL16", 16),
            (c::MPI_INTEGER16, "MPI_INTEGER16", 16),
            (c::MPI_REAL16, "MPI_REAL16", 16),
            (c::MPI_COMPLEX16, "MPI_COMPLEX16", 16),
            (c::MPI_COMPLEX32, "MPI_COMPLEX32", 32),
        ];
        let mut m: HashMap<usize, Arc<Layout>> =
            basic.iter().map(|&(h, n, s)| (h, Arc::new(Layout::basic(n, s)))).collect();
        let (i, ia) = (size_of::<i32>(), align_of::<i32>());
        let l = size_of::<libc::c_long>();
        let pairs = [
            (c::MPI_FLOAT_INT, Layout::pair("MPI_FLOAT_INT", 4, i, ia, 4)),
            (c::MPI_2INT, Layout::pair("MPI_2INT", 4, 4, 4, 4)),
            (c::MPI_2REAL, Layout::pair("MPI_2REAL", 4, 4, 4, 4)),
            (c::MPI_2DOUBLE_PRECISION, Layout::pair("MPI_2DOUBLE_PRECISION", 8, 8, 8, 8)),
            (c::MPI_2INTEGER, Layout::pair("MPI_2INTEGER", 4, 4, 4, 4)),
            (c::MPI_DOUBLE_INT, Layout::pair("MPI_DOUBLE_INT", 8, i, ia, align_of::<f64>())),
            (c::MPI_LONG_INT, Layout::pair("MPI_LONG_INT", l, i, ia, align_of::<libc::c_long>())),
            (c::MPI_SHORT_INT, Layout::pair("MPI_SHORT_INT", 2, i, ia, 4)),
            (c::MPI_LONG_DOUBLE_INT, Layout::pair("MPI_LONG_DOUBLE_INT", ld, i, ia, ld)),
        ];
        for (h, lay) in pairs {
            m.insert(h, Arc::new(lay));
        }
        m
    }
}

/// The layout of a predefined datatype, by its ABI handle value.
#[inline]
pub fn predefined(handle: usize) -> Option<&'static Arc<Layout>> {
    table().get(handle.wrapping_sub(FIRST))?.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_types_match_the_c_structs() {
        let d = predefined(c::MPI_DOUBLE_INT).unwrap();
        assert_eq!((d.size, d.extent, d.true_extent), (12, 16, 12));
        assert_eq!(d.blocks, vec![(0, 12)]);
        let s = predefined(c::MPI_SHORT_INT).unwrap();
        assert_eq!((s.size, s.extent), (6, 8));
        assert_eq!(s.blocks, vec![(0, 2), (4, 4)]);
        assert!(predefined(c::MPI_2INT).unwrap().is_contiguous());
        assert!(!d.is_contiguous());
        assert_eq!(predefined(c::MPI_LONG_DOUBLE_INT).unwrap().extent, 32);
    }
}
