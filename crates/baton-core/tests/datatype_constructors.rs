//! Every constructor's layout against a type map computed element by element from the
//! standard's definitions (a list of (displacement, size) per basic element, in type-map order).

use baton_abi::consts as c;
use baton_core::datatype::{predefined, Layout};
use baton_transport::mem::UserBuf;

/// A reference type map: basic elements in order, and the bounds.
#[derive(Clone, Debug)]
struct Tm {
    e: Vec<(isize, usize)>,
    lb: isize,
    ub: isize,
}

impl Tm {
    /// The start of a constructor's type map: no entry, bounds to be set by the first copy.
    fn open() -> Tm {
        Tm { e: Vec::new(), lb: isize::MAX, ub: isize::MIN }
    }

    /// Appends `old`'s type map with every displacement moved by `at` bytes: the one step all the
    /// standard's constructor definitions (MPI 4.1 section 5.1.2) are made of. The copy's bounds
    /// (markers for a resized type, else its own lb and ub) widen the result's.
    fn copy_at(&mut self, at: isize, old: &Tm) {
        self.e.extend(old.e.iter().map(|&(o, s)| (at + o, s)));
        self.lb = self.lb.min(at + old.lb);
        self.ub = self.ub.max(at + old.ub);
    }

    /// The finished type map; one that received no copy (every block empty) has lb = ub = 0.
    fn close(mut self) -> Tm {
        if self.lb > self.ub {
            (self.lb, self.ub) = (0, 0);
        }
        self
    }

    fn extent(&self) -> isize {
        self.ub - self.lb
    }
}

fn basic(h: usize) -> (Layout, Tm) {
    let l = (**predefined(h).unwrap()).clone();
    let s = l.size;
    (l, Tm { e: vec![(0, s)], lb: 0, ub: s as isize })
}

// The references below transcribe the type maps of MPI 4.1 section 5.1.2 from each constructor's
// own arguments: blocks of consecutive copies of `old` (element j of a block at its start plus
// j * ex, with `ex` the extent of `old`), block i starting at
//   contiguous        0, one block of count elements
//   vector            stride * i * ex
//   hvector           stride * i                      (stride in bytes)
//   indexed           displs[i] * ex                  (blocklengths[i] elements)
//   hindexed          displs[i]                       (displacements in bytes)
//   indexed_block     displs[i] * ex                  (one blocklength for all blocks)
//   hindexed_block    displs[i]

/// Blocks given as (start in bytes, copies of `old`), in type-map order.
fn r_blocks(blocks: impl IntoIterator<Item = (isize, usize)>, old: &Tm) -> Tm {
    let mut t = Tm::open();
    for (start, bl) in blocks {
        for j in 0..bl as isize {
            t.copy_at(start + j * old.extent(), old);
        }
    }
    t.close()
}

fn r_contiguous(count: usize, old: &Tm) -> Tm {
    r_blocks([(0, count)], old)
}

fn r_vector(count: usize, bl: usize, stride: isize, old: &Tm) -> Tm {
    r_blocks((0..count as isize).map(|i| (stride * i * old.extent(), bl)), old)
}

fn r_hvector(count: usize, bl: usize, stride: isize, old: &Tm) -> Tm {
    r_blocks((0..count as isize).map(|i| (stride * i, bl)), old)
}

fn r_indexed(bls: &[usize], displs: &[isize], old: &Tm) -> Tm {
    r_blocks(displs.iter().zip(bls).map(|(&d, &bl)| (d * old.extent(), bl)), old)
}

fn r_hindexed(bls: &[usize], displs: &[isize], old: &Tm) -> Tm {
    r_blocks(displs.iter().zip(bls).map(|(&d, &bl)| (d, bl)), old)
}

fn r_indexed_block(count: usize, bl: usize, displs: &[isize], old: &Tm) -> Tm {
    assert_eq!(displs.len(), count, "reference: one displacement per block");
    r_blocks(displs.iter().map(|&d| (d * old.extent(), bl)), old)
}

fn r_hindexed_block(count: usize, bl: usize, displs: &[isize], old: &Tm) -> Tm {
    assert_eq!(displs.len(), count, "reference: one displacement per block");
    r_blocks(displs.iter().map(|&d| (d, bl)), old)
}

/// A struct's type map: member i is `bls[i]` copies of `olds[i]` from byte `displs[i]` on. The
/// extent is then rounded up to a multiple of `align` (the standard's epsilon for the most
/// aligned member), which applies because no member here has markers.
fn r_struct(bls: &[usize], displs: &[isize], olds: &[&Tm], align: isize) -> Tm {
    let mut t = Tm::open();
    for ((&bl, &d), old) in bls.iter().zip(displs).zip(olds) {
        for j in 0..bl as isize {
            t.copy_at(d + j * old.extent(), old);
        }
    }
    let mut t = t.close();
    t.ub += (align - t.extent() % align) % align;
    t
}

/// `MPI_Type_create_indexed_block` as the C boundary builds it: baton-core has no block
/// constructor of its own, the C entry point gives each of the `count` displacements the one
/// blocklength and calls [`Layout::indexed`].
fn indexed_block(count: usize, bl: i64, displs: &[i64], old: &Layout) -> Layout {
    assert_eq!(displs.len(), count);
    Layout::indexed(&vec![bl; count], displs, old).unwrap()
}

/// `MPI_Type_create_hindexed_block`, likewise through [`Layout::hindexed`].
fn hindexed_block(count: usize, bl: i64, displs: &[isize], old: &Layout) -> Layout {
    assert_eq!(displs.len(), count);
    Layout::hindexed(&vec![bl; count], displs, old).unwrap()
}

/// Every index tuple of `sizes` in type-map order (C: last index fastest), kept when `keep`.
fn r_grid(sizes: &[usize], fortran: bool, keep: &dyn Fn(&[usize]) -> bool, old: &Tm) -> Tm {
    let n = sizes.len();
    let ext = old.ub - old.lb;
    let total: usize = sizes.iter().product();
    let mut t = Tm { e: Vec::new(), lb: 0, ub: total as isize * ext };
    for lin in 0..total {
        // Decompose the linear memory index into per-dimension indices.
        let mut idx = vec![0usize; n];
        let mut r = lin;
        let order: Vec<usize> = if fortran { (0..n).collect() } else { (0..n).rev().collect() };
        for &d in &order {
            idx[d] = r % sizes[d];
            r /= sizes[d];
        }
        if keep(&idx) {
            t.e.extend(old.e.iter().map(|&(o, s)| (lin as isize * ext + o, s)));
        }
    }
    t
}

fn bytes_of_tm(t: &Tm) -> Vec<isize> {
    t.e.iter().flat_map(|&(o, s)| o..o + s as isize).collect()
}

fn bytes_of_layout(l: &Layout) -> Vec<isize> {
    l.blocks.iter().flat_map(|&(o, s)| o..o + s as isize).collect()
}

fn same(l: &Layout, t: &Tm, what: &str) {
    assert_eq!(bytes_of_layout(l), bytes_of_tm(t), "{what}: data bytes in type-map order");
    assert_eq!(l.size, t.e.iter().map(|e| e.1).sum::<usize>(), "{what}: size");
    assert_eq!((l.lb, l.extent), (t.lb, t.ub - t.lb), "{what}: lb, extent");
    if !t.e.is_empty() {
        let lo = t.e.iter().map(|e| e.0).min().unwrap();
        let hi = t.e.iter().map(|e| e.0 + e.1 as isize).max().unwrap();
        assert_eq!((l.true_lb, l.true_extent), (lo, hi - lo), "{what}: true bounds");
    }
    assert_eq!(l.elements_in(l.size as u64), Some(t.e.len() as u64), "{what}: basic elements");
    // Blocks are normalized: no two neighbours could have been merged.
    for w in l.blocks.windows(2) {
        assert_ne!(w[0].0 + w[0].1 as isize, w[1].0, "{what}: unmerged blocks {w:?}");
    }
    // Packing real memory follows the type map byte for byte.
    check_pack(l, what);
}

fn check_pack(l: &Layout, what: &str) {
    let count = 3usize;
    let (lo, hi) = l.span(count);
    let mem: Vec<u8> = (0..(hi - lo) as usize).map(|i| (i * 7 + 3) as u8).collect();
    // SAFETY: the test's own vector outlives the span.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let mut packed = Vec::new();
    l.pack_from(&span, -lo, count, &mut packed);
    let mut want = Vec::new();
    for e in 0..count as isize {
        for b in bytes_of_layout(l) {
            want.push(mem[(b + e * l.extent - lo) as usize]);
        }
    }
    assert_eq!(packed, want, "{what}: packed bytes");
    // Unpacking into a poisoned buffer restores the data and leaves the gaps alone.
    let mut dst = vec![0xEEu8; mem.len()];
    // SAFETY: as above.
    let dspan = unsafe { UserBuf::new(dst.as_mut_ptr() as usize, dst.len()) };
    let mid = packed.len() / 2;
    l.unpack_into(&dspan, -lo, 0, &packed[..mid]);
    l.unpack_into(&dspan, -lo, mid, &packed[mid..]);
    let mut touched = vec![false; mem.len()];
    for e in 0..count as isize {
        for b in bytes_of_layout(l) {
            touched[(b + e * l.extent - lo) as usize] = true;
        }
    }
    for i in 0..mem.len() {
        if touched[i] {
            assert_eq!(dst[i], mem[i], "{what}: unpacked byte {i}");
        } else {
            assert_eq!(dst[i], 0xEE, "{what}: gap byte {i} was written");
        }
    }
}

#[test]
fn contiguous_vector_hvector() {
    let (int, ti) = basic(c::MPI_INT);
    let (dbl, td) = basic(c::MPI_DOUBLE);
    same(&Layout::try_contiguous(5, &int).unwrap(), &r_contiguous(5, &ti), "contiguous");
    same(&Layout::try_contiguous(0, &int).unwrap(), &r_contiguous(0, &ti), "contiguous 0");
    let v = Layout::vector(4, 2, 3, &int).unwrap();
    let tv = r_vector(4, 2, 3, &ti);
    same(&v, &tv, "vector");
    let neg = Layout::vector(3, 1, -2, &dbl).unwrap();
    same(&neg, &r_vector(3, 1, -2, &td), "vector with a negative stride");
    let hv = Layout::hvector(3, 2, 20, &int).unwrap();
    same(&hv, &r_hvector(3, 2, 20, &ti), "hvector");
    // A vector of vectors (strides measured in the inner vector's extent).
    let vv = Layout::vector(2, 1, 2, &v).unwrap();
    same(&vv, &r_vector(2, 1, 2, &tv), "vector of vectors");
    // Contiguous blocks merge into one run.
    assert_eq!(Layout::vector(4, 3, 3, &int).unwrap().blocks, vec![(0, 48)]);
    assert!(Layout::vector(4, 3, 3, &int).unwrap().is_contiguous());
}

#[test]
fn indexed_family() {
    let (int, ti) = basic(c::MPI_INT);
    let (sh, ts) = basic(c::MPI_SHORT);
    let l = Layout::indexed(&[2, 1, 3], &[5, 0, 10], &int).unwrap();
    same(&l, &r_indexed(&[2, 1, 3], &[5, 0, 10], &ti), "indexed");
    let l = Layout::hindexed(&[1, 0, 2], &[7, 100, -3], &sh).unwrap();
    same(&l, &r_hindexed(&[1, 0, 2], &[7, 100, -3], &ts), "hindexed with a zero block");
    let l = Layout::indexed(&[0, 2, 1], &[3, -4, 1], &sh).unwrap();
    same(&l, &r_indexed(&[0, 2, 1], &[3, -4, 1], &ts), "indexed, negative and out of order");
}

/// Old types for the block constructors: basic, derived with lb below 0 (a vector with a negative
/// stride), resized below and above its data, and resized to less than its data (copies overlap).
fn block_olds() -> Vec<(&'static str, Layout, Tm)> {
    let (int, ti) = basic(c::MPI_INT);
    let (dbl, td) = basic(c::MPI_DOUBLE);
    let neg = Layout::vector(3, 1, -2, &dbl).unwrap();
    let tneg = r_vector(3, 1, -2, &td);
    assert_eq!(neg.lb, -32);
    let low = Layout::resized(&int, -4, 12);
    let tlow = Tm { e: ti.e.clone(), lb: -4, ub: 8 };
    let pair = Layout::vector(2, 1, 3, &int).unwrap();
    let high = Layout::resized(&pair, 4, 20);
    let thigh = Tm { e: r_vector(2, 1, 3, &ti).e, lb: 4, ub: 24 };
    let two = Layout::try_contiguous(2, &dbl).unwrap();
    let short = Layout::resized(&two, 0, 8);
    let tshort = Tm { e: r_contiguous(2, &td).e, lb: 0, ub: 8 };
    vec![
        ("int", int, ti),
        ("vector(3, 1, -2) of double", neg, tneg),
        ("int resized to lb -4, extent 12", low, tlow),
        ("vector(2, 1, 3) of int resized to lb 4, extent 20", high, thigh),
        ("2 doubles resized to extent 8", short, tshort),
    ]
}

/// A block constructor against its reference over every old type of [`block_olds`], with
/// blocklengths 0, 1 and 3 and each list of displacements in `displs`. `build` and `reference`
/// take (count, blocklength, displacements, old type).
fn check_block_constructor(
    call: &str,
    displs: &[&[isize]],
    build: impl Fn(usize, i64, &[isize], &Layout) -> Layout,
    reference: impl Fn(usize, usize, &[isize], &Tm) -> Tm,
) {
    for (name, old, told) in block_olds() {
        for bl in [0usize, 1, 3] {
            for &d in displs {
                let what = format!("{call}({}, {bl}, {d:?}) of {name}", d.len());
                same(&build(d.len(), bl as i64, d, &old), &reference(d.len(), bl, d, &told), &what);
            }
        }
    }
}

#[test]
fn indexed_block_expands_one_blocklength() {
    // Displacements in elements: in order, out of order with negatives, one negative, none.
    let displs: [&[isize]; 4] = [&[0, 2, 7], &[5, -2, 0, 3], &[-6], &[]];
    check_block_constructor(
        "indexed_block",
        &displs,
        |count, bl, d, old| indexed_block(count, bl, &d.iter().map(|&x| x as i64).collect::<Vec<_>>(), old),
        r_indexed_block,
    );
    let (sh, ts) = basic(c::MPI_SHORT);
    same(&indexed_block(2, 2, &[4, 1], &sh), &r_indexed_block(2, 2, &[4, 1], &ts), "indexed_block of short");
}

#[test]
fn hindexed_block_expands_one_blocklength() {
    // Displacements in bytes: in order, unaligned and out of order with a negative, one
    // negative, none.
    let displs: [&[isize]; 4] = [&[0, 40, 100], &[90, -12, 0, 7], &[-50], &[]];
    check_block_constructor("hindexed_block", &displs, hindexed_block, r_hindexed_block);
    let (int, ti) = basic(c::MPI_INT);
    same(&hindexed_block(2, 3, &[1, 30], &int), &r_hindexed_block(2, 3, &[1, 30], &ti), "hindexed_block of int");
}

#[test]
fn struct_pads_to_the_most_aligned_member() {
    let (int, ti) = basic(c::MPI_INT);
    let (dbl, td) = basic(c::MPI_DOUBLE);
    let (ch, tc) = basic(c::MPI_CHAR);
    // struct { double d; char c; int i[2]; } => extent 24
    let l = Layout::structure(&[1, 1, 2], &[0, 8, 12], &[&dbl, &ch, &int]).unwrap();
    same(&l, &r_struct(&[1, 1, 2], &[0, 8, 12], &[&td, &tc, &ti], 8), "struct");
    assert_eq!(l.extent, 24);
    // struct { int; char } => 8
    let l = Layout::structure(&[1, 1], &[0, 4], &[&int, &ch]).unwrap();
    assert_eq!((l.size, l.extent), (5, 8));
    // Members out of address order keep the type-map order.
    let l = Layout::structure(&[1, 1], &[8, 0], &[&int, &dbl]).unwrap();
    same(&l, &r_struct(&[1, 1], &[8, 0], &[&ti, &td], 8), "struct out of order");
    assert_eq!(l.blocks, vec![(8, 4), (0, 8)]);
}

#[test]
fn resized_bounds_are_sticky() {
    let (int, ti) = basic(c::MPI_INT);
    let r = Layout::resized(&int, -4, 12);
    let tr = Tm { e: ti.e.clone(), lb: -4, ub: 8 };
    same(&r, &tr, "resized");
    let v = Layout::try_contiguous(3, &r).unwrap();
    same(&v, &r_contiguous(3, &tr), "contiguous of resized");
    // A struct with a sticky member takes the markers and no epsilon.
    let (ch, _) = basic(c::MPI_CHAR);
    let s = Layout::structure(&[1, 1], &[0, 100], &[&r, &ch]).unwrap();
    assert_eq!((s.lb, s.extent), (-4, 12));
    assert!(s.sticky_lb && s.sticky_ub);
}

#[test]
fn subarray_c_and_fortran() {
    let (dbl, td) = basic(c::MPI_DOUBLE);
    let sizes = [4usize, 5, 6];
    let sub = [2usize, 3, 2];
    let st = [1usize, 2, 3];
    let keep = |i: &[usize]| (0..3).all(|d| i[d] >= st[d] && i[d] < st[d] + sub[d]);
    let w = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let l = Layout::subarray(&w(&sizes), &w(&sub), &w(&st), false, &dbl).unwrap();
    same(&l, &r_grid(&sizes, false, &keep, &td), "subarray C");
    let l = Layout::subarray(&w(&sizes), &w(&sub), &w(&st), true, &dbl).unwrap();
    same(&l, &r_grid(&sizes, true, &keep, &td), "subarray Fortran");
    assert!(Layout::subarray(&[4], &[3], &[2], false, &dbl).is_err());
}

#[test]
fn darray_block_and_cyclic() {
    let (int, ti) = basic(c::MPI_INT);
    let g = [7usize, 9];
    let ps = [2i32, 3];
    for rank in 0..6 {
        let coords = [rank as usize / 3, rank as usize % 3];
        for fortran in [false, true] {
            // dim 0 block (default), dim 1 cyclic(2)
            let bs = g[0].div_ceil(2);
            let keep = |i: &[usize]| i[0] / bs == coords[0] && (i[1] / 2) % 3 == coords[1];
            let l = Layout::darray(
                6,
                rank,
                &[7, 9],
                &[c::MPI_DISTRIBUTE_BLOCK, c::MPI_DISTRIBUTE_CYCLIC],
                &[c::MPI_DISTRIBUTE_DFLT_DARG, 2],
                &ps,
                fortran,
                &int,
            )
            .unwrap();
            // The type map visits dimension 1 in increasing global index within each row, which
            // is the order of memory for C; for Fortran the first dimension is fastest.
            let t = r_grid(&g, fortran, &keep, &ti);
            same(&l, &t, &format!("darray rank {rank} fortran {fortran}"));
        }
    }
}

#[test]
fn nested_struct_of_vectors_of_subarrays() {
    let (int, _) = basic(c::MPI_INT);
    let (ch, tc) = basic(c::MPI_CHAR);
    let sa = Layout::subarray(&[4, 4], &[2, 2], &[1, 1], false, &int).unwrap();
    let tsa = {
        let (_, ti) = basic(c::MPI_INT);
        r_grid(&[4, 4], false, &|i: &[usize]| (1..3).contains(&i[0]) && (1..3).contains(&i[1]), &ti)
    };
    let v = Layout::hvector(2, 1, 100, &sa).unwrap();
    let tv = r_hvector(2, 1, 100, &tsa);
    same(&v, &tv, "hvector of subarrays");
    let s = Layout::structure(&[1, 3], &[0, 200], &[&v, &ch]).unwrap();
    let mut t = r_struct(&[1, 3], &[0, 200], &[&tv, &tc], 1);
    // The sticky bounds of the subarray fix lb; the char block's end sets no ub marker, so ub is
    // the largest marker of the subarray copies (100 + 64).
    t.lb = 0;
    t.ub = 164;
    same(&s, &t, "struct of vectors of subarrays");
}

#[test]
fn overflow_and_bad_arguments_are_reported() {
    let (int, _) = basic(c::MPI_INT);
    let e = Layout::hvector(4, 1, isize::MAX / 2, &int).unwrap_err();
    assert_eq!(e.class, c::MPI_ERR_TYPE, "{}", e.msg);
    let e = Layout::try_contiguous(-1, &int).unwrap_err();
    assert_eq!(e.class, c::MPI_ERR_COUNT);
    let e = Layout::darray(4, 0, &[10], &[c::MPI_DISTRIBUTE_BLOCK], &[2], &[4], false, &int).unwrap_err();
    assert_eq!(e.class, c::MPI_ERR_ARG, "{}", e.msg);
}

#[test]
fn external32_is_big_endian_with_standard_sizes() {
    let l = Layout::structure(
        &[1, 1, 1],
        &[0, 8, 16],
        &[
            &**predefined(c::MPI_INT).unwrap(),
            &**predefined(c::MPI_LONG).unwrap(),
            &**predefined(c::MPI_DOUBLE).unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(l.external_size(), 4 + 4 + 8);
    let mut native = Vec::new();
    native.extend_from_slice(&(-2i32).to_ne_bytes());
    native.extend_from_slice(&(-3i64).to_ne_bytes()[..std::mem::size_of::<libc::c_long>()]);
    native.extend_from_slice(&1.5f64.to_ne_bytes());
    let ext = l.to_external(&native);
    let mut want = Vec::new();
    want.extend_from_slice(&(-2i32).to_be_bytes());
    want.extend_from_slice(&(-3i32).to_be_bytes());
    want.extend_from_slice(&1.5f64.to_be_bytes());
    assert_eq!(ext, want);
    assert_eq!(l.from_external(&ext), native);
}
