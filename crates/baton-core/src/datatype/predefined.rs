//! The predefined datatypes: a table of [`Layout`]s keyed by standard ABI handle value, and the
//! layouts of one basic element and of the MINLOC/MAXLOC pair types.

use super::{runs_of, Basic, Conv, Layout};
use baton_abi::consts as c;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

impl Layout {
    /// A basic element of `size` bytes copied byte for byte in external32 (see
    /// [`Layout::basic_typed`] for the others).
    pub fn basic(name: &'static str, size: usize) -> Layout {
        Layout::basic_typed(name, Basic { size: size as u32, ext: size as u32, conv: Conv::Raw }, size.min(16))
    }

    pub fn basic_typed(name: &'static str, b: Basic, align: usize) -> Layout {
        let size = b.size as usize;
        Layout::fixed(name, size, vec![(0, size)], vec![(b, 1)], align)
    }

    /// The C struct `{ A a; B b; }` used by the MINLOC/MAXLOC pair types.
    fn pair(name: &'static str, a: Basic, b: Basic, b_align: usize, struct_align: usize) -> Layout {
        let (asz, bsz) = (a.size as usize, b.size as usize);
        let b_off = asz.div_ceil(b_align) * b_align;
        let extent = (b_off + bsz).div_ceil(struct_align) * struct_align;
        let blocks = if b_off == asz { vec![(0, asz + bsz)] } else { vec![(0, asz), (b_off as isize, bsz)] };
        let elems = if a == b { vec![(a, 2)] } else { vec![(a, 1), (b, 1)] };
        Layout::fixed(name, extent, blocks, elems, struct_align)
    }

    /// A predefined layout: lb 0, no markers, the data in `blocks` (in memory order, the first
    /// at offset 0).
    fn fixed(
        name: &'static str,
        extent: usize,
        blocks: Vec<(isize, usize)>,
        elems: Vec<(Basic, u64)>,
        align: usize,
    ) -> Layout {
        let end = blocks.last().map_or(0, |&(off, len)| off as usize + len);
        Layout {
            size: blocks.iter().map(|&(_, len)| len).sum(),
            lb: 0,
            extent: extent as isize,
            true_lb: 0,
            true_extent: end as isize,
            runs: runs_of(&blocks),
            blocks,
            elems,
            name,
            align,
            sticky_lb: false,
            sticky_ub: false,
            envelope: None,
            pieces: None,
        }
    }
}

/// Predefined datatype handles lie in 0x200..0x300 (the ABI's datatype range).
const FIRST: usize = 0x200;
const SLOTS: usize = 0x100;

struct Table {
    layouts: Vec<Option<Arc<Layout>>>,
    /// Size of each contiguous predefined type, 0 for the others and for unused handles: the
    /// point-to-point express paths ask only this, one load instead of a walk through the layout.
    contig: [u32; SLOTS],
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        let mut layouts = vec![None; SLOTS];
        let mut contig = [0; SLOTS];
        for (h, l) in build() {
            if l.is_contiguous() {
                contig[h - FIRST] = l.size as u32;
            }
            layouts[h - FIRST] = Some(l);
        }
        Table { layouts, contig }
    })
}

fn build() -> HashMap<usize, Arc<Layout>> {
    use std::mem::{align_of, size_of};
    use Conv::*;
    let ld = size_of::<f64>() * 2; // long double on x86-64 and aarch64 Linux: 16 bytes
    let long = size_of::<libc::c_long>();
    let wchar = size_of::<libc::wchar_t>();
    let (s, u) = (Int { signed: true }, Int { signed: false });
    // (handle, name, native size, external32 size, conversion, alignment)
    let basic: &[(usize, &'static str, usize, usize, Conv, usize)] = &[
        (c::MPI_AINT, "MPI_AINT", 8, 8, s, 8),
        (c::MPI_COUNT, "MPI_COUNT", 8, 8, s, 8),
        (c::MPI_OFFSET, "MPI_OFFSET", 8, 8, s, 8),
        (c::MPI_PACKED, "MPI_PACKED", 1, 1, Raw, 1),
        (c::MPI_SHORT, "MPI_SHORT", 2, 2, s, 2),
        (c::MPI_INT, "MPI_INT", 4, 4, s, 4),
        (c::MPI_LONG, "MPI_LONG", long, 4, s, align_of::<libc::c_long>()),
        (c::MPI_LONG_LONG, "MPI_LONG_LONG", 8, 8, s, 8),
        (c::MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", 2, 2, u, 2),
        (c::MPI_UNSIGNED, "MPI_UNSIGNED", 4, 4, u, 4),
        (c::MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", long, 4, u, align_of::<libc::c_ulong>()),
        (c::MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 8, 8, u, 8),
        (c::MPI_FLOAT, "MPI_FLOAT", 4, 4, Float, 4),
        (c::MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", 8, 8, Complex, 4),
        (c::MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX", 8, 8, Complex, 4),
        (c::MPI_DOUBLE, "MPI_DOUBLE", 8, 8, Float, 8),
        (c::MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 16, 16, Complex, 8),
        (c::MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX", 16, 16, Complex, 8),
        (c::MPI_LOGICAL, "MPI_LOGICAL", 4, 4, s, 4),
        (c::MPI_INTEGER, "MPI_INTEGER", 4, 4, s, 4),
        (c::MPI_REAL, "MPI_REAL", 4, 4, Float, 4),
        (c::MPI_COMPLEX, "MPI_COMPLEX", 8, 8, Complex, 4),
        (c::MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 8, 8, Float, 8),
        (c::MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX", 16, 16, Complex, 8),
        (c::MPI_CHARACTER, "MPI_CHARACTER", 1, 1, Raw, 1),
        (c::MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", ld, 16, LongDouble, ld),
        (c::MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX", 2 * ld, 32, LongDoubleComplex, ld),
        (c::MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX", 2 * ld, 32, LongDoubleComplex, ld),
        (c::MPI_C_BOOL, "MPI_C_BOOL", 1, 1, Raw, 1),
        (c::MPI_CXX_BOOL, "MPI_CXX_BOOL", 1, 1, Raw, 1),
        (c::MPI_WCHAR, "MPI_WCHAR", wchar, 2, u, align_of::<libc::wchar_t>()),
        (c::MPI_INT8_T, "MPI_INT8_T", 1, 1, Raw, 1),
        (c::MPI_UINT8_T, "MPI_UINT8_T", 1, 1, Raw, 1),
        (c::MPI_CHAR, "MPI_CHAR", 1, 1, Raw, 1),
        (c::MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, 1, Raw, 1),
        (c::MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, 1, Raw, 1),
        (c::MPI_BYTE, "MPI_BYTE", 1, 1, Raw, 1),
        (c::MPI_INT16_T, "MPI_INT16_T", 2, 2, s, 2),
        (c::MPI_UINT16_T, "MPI_UINT16_T", 2, 2, u, 2),
        (c::MPI_INT32_T, "MPI_INT32_T", 4, 4, s, 4),
        (c::MPI_UINT32_T, "MPI_UINT32_T", 4, 4, u, 4),
        (c::MPI_INT64_T, "MPI_INT64_T", 8, 8, s, 8),
        (c::MPI_UINT64_T, "MPI_UINT64_T", 8, 8, u, 8),
        (c::MPI_LOGICAL1, "MPI_LOGICAL1", 1, 1, Raw, 1),
        (c::MPI_INTEGER1, "MPI_INTEGER1", 1, 1, Raw, 1),
        (c::MPI_LOGICAL2, "MPI_LOGICAL2", 2, 2, s, 2),
        (c::MPI_INTEGER2, "MPI_INTEGER2", 2, 2, s, 2),
        (c::MPI_REAL2, "MPI_REAL2", 2, 2, Float, 2),
        (c::MPI_LOGICAL4, "MPI_LOGICAL4", 4, 4, s, 4),
        (c::MPI_INTEGER4, "MPI_INTEGER4", 4, 4, s, 4),
        (c::MPI_REAL4, "MPI_REAL4", 4, 4, Float, 4),
        (c::MPI_COMPLEX4, "MPI_COMPLEX4", 4, 4, Complex, 2),
        (c::MPI_LOGICAL8, "MPI_LOGICAL8", 8, 8, s, 8),
        (c::MPI_INTEGER8, "MPI_INTEGER8", 8, 8, s, 8),
        (c::MPI_REAL8, "MPI_REAL8", 8, 8, Float, 8),
        (c::MPI_COMPLEX8, "MPI_COMPLEX8", 8, 8, Complex, 4),
        (c::MPI_LOGICAL16, "MPI_LOGICAL16", 16, 16, s, 16),
        (c::MPI_INTEGER16, "MPI_INTEGER16", 16, 16, s, 16),
        (c::MPI_REAL16, "MPI_REAL16", 16, 16, Float, 16),
        (c::MPI_COMPLEX16, "MPI_COMPLEX16", 16, 16, Complex, 8),
        (c::MPI_COMPLEX32, "MPI_COMPLEX32", 32, 32, Complex, 16),
    ];
    let mut m: HashMap<usize, Arc<Layout>> = HashMap::new();
    let mut basics: HashMap<usize, Basic> = HashMap::new();
    for &(h, n, size, ext, conv, align) in basic {
        let b = Basic { size: size as u32, ext: ext as u32, conv };
        basics.insert(h, b);
        m.insert(h, Arc::new(Layout::basic_typed(n, b, align)));
    }
    let b = |h: usize| basics[&h];
    let ia = align_of::<i32>();
    let pairs = [
        (c::MPI_FLOAT_INT, Layout::pair("MPI_FLOAT_INT", b(c::MPI_FLOAT), b(c::MPI_INT), ia, 4)),
        (c::MPI_2INT, Layout::pair("MPI_2INT", b(c::MPI_INT), b(c::MPI_INT), 4, 4)),
        (c::MPI_2REAL, Layout::pair("MPI_2REAL", b(c::MPI_REAL), b(c::MPI_REAL), 4, 4)),
        (
            c::MPI_2DOUBLE_PRECISION,
            Layout::pair("MPI_2DOUBLE_PRECISION", b(c::MPI_DOUBLE_PRECISION), b(c::MPI_DOUBLE_PRECISION), 8, 8),
        ),
        (c::MPI_2INTEGER, Layout::pair("MPI_2INTEGER", b(c::MPI_INTEGER), b(c::MPI_INTEGER), 4, 4)),
        (c::MPI_DOUBLE_INT, Layout::pair("MPI_DOUBLE_INT", b(c::MPI_DOUBLE), b(c::MPI_INT), ia, align_of::<f64>())),
        (c::MPI_LONG_INT, Layout::pair("MPI_LONG_INT", b(c::MPI_LONG), b(c::MPI_INT), ia, align_of::<libc::c_long>())),
        (c::MPI_SHORT_INT, Layout::pair("MPI_SHORT_INT", b(c::MPI_SHORT), b(c::MPI_INT), ia, 4)),
        (c::MPI_LONG_DOUBLE_INT, Layout::pair("MPI_LONG_DOUBLE_INT", b(c::MPI_LONG_DOUBLE), b(c::MPI_INT), ia, ld)),
    ];
    for (h, lay) in pairs {
        m.insert(h, Arc::new(lay));
    }
    m
}

/// The layout of a predefined datatype, by its ABI handle value.
#[inline]
pub fn predefined(handle: usize) -> Option<&'static Arc<Layout>> {
    table().layouts.get(handle.wrapping_sub(FIRST))?.as_ref()
}

/// The size of a contiguous predefined datatype (`MPI_INT`, `MPI_2INT`, ...) by its ABI handle
/// value; None for the others and for handles that are not predefined datatypes.
#[inline]
pub fn predefined_contig_size(handle: usize) -> Option<usize> {
    let n = *table().contig.get(handle.wrapping_sub(FIRST))?;
    (n != 0).then_some(n as usize)
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
