//! The loop form of layouts (type maps of more than `FLAT_BLOCKS` blocks): each type is checked
//! against a type map expanded from the standard's definitions, byte for byte, in packing
//! windows that start and end anywhere, in unpacking, element counting and external32.

use baton_abi::consts as c;
use baton_core::datatype::{predefined, Layout, FLAT_BLOCKS};
use baton_transport::mem::UserBuf;
use std::time::Instant;

/// A reference type: its layout, and its type map as (displacement, size) of each basic element
/// with its bounds.
struct Ref {
    l: Layout,
    map: Vec<(isize, usize)>,
    lb: isize,
    ub: isize,
}

fn basic(h: usize) -> Ref {
    let l = (**predefined(h).unwrap()).clone();
    let s = l.size;
    Ref { l, map: vec![(0, s)], lb: 0, ub: s as isize }
}

/// `count` blocks of `bl` copies of `old`, block i at byte `stride * i` (the standard's hvector).
fn hvector(count: usize, bl: usize, stride: isize, old: &Ref) -> Ref {
    let l = Layout::hvector(count as i64, bl as i64, stride, &old.l).unwrap();
    let ex = old.ub - old.lb;
    let mut map = Vec::new();
    let (mut lb, mut ub) = (isize::MAX, isize::MIN);
    for i in 0..count as isize {
        for j in 0..bl as isize {
            let at = i * stride + j * ex;
            map.extend(old.map.iter().map(|&(o, s)| (at + o, s)));
            lb = lb.min(at + old.lb);
            ub = ub.max(at + old.ub);
        }
    }
    if lb > ub {
        (lb, ub) = (0, 0);
    }
    Ref { l, map, lb, ub }
}

/// The standard's hindexed: block i of `bls[i]` copies of `old` at byte `displs[i]`.
fn hindexed(bls: &[i64], displs: &[isize], old: &Ref) -> Ref {
    let l = Layout::hindexed(bls, displs, &old.l).unwrap();
    let ex = old.ub - old.lb;
    let mut map = Vec::new();
    let (mut lb, mut ub) = (isize::MAX, isize::MIN);
    for (&n, &d) in bls.iter().zip(displs) {
        for j in 0..n as isize {
            let at = d + j * ex;
            map.extend(old.map.iter().map(|&(o, s)| (at + o, s)));
            lb = lb.min(at + old.lb);
            ub = ub.max(at + old.ub);
        }
    }
    Ref { l, map, lb, ub }
}

fn resized(old: &Ref, lb: isize, extent: isize) -> Ref {
    Ref { l: Layout::resized(&old.l, lb, extent), map: old.map.clone(), lb, ub: lb + extent }
}

/// Checks `r.l` against its reference type map with `count` elements.
fn check(r: &Ref, count: usize, what: &str) {
    let l = &r.l;
    assert!(l.pieces.is_some() && l.blocks.is_empty(), "{what}: expected the loop form");
    assert_eq!(l.size, r.map.iter().map(|e| e.1).sum::<usize>(), "{what}: size");
    assert_eq!((l.lb, l.extent), (r.lb, r.ub - r.lb), "{what}: bounds");
    let lo = r.map.iter().map(|e| e.0).min().unwrap();
    let hi = r.map.iter().map(|e| e.0 + e.1 as isize).max().unwrap();
    assert_eq!((l.true_lb, l.true_extent), (lo, hi - lo), "{what}: true bounds");
    let n = r.map.len() as u64;
    assert_eq!(l.basic_count(), n, "{what}: basic elements");
    assert_eq!(l.elements_in(l.size as u64 * 2), Some(2 * n), "{what}: elements in two");
    // Partial elements: after each of the first basic elements, and inside one.
    let mut bytes = 0u64;
    for (k, &(_, s)) in r.map.iter().enumerate().take(50) {
        assert_eq!(l.elements_in(bytes), Some(k as u64), "{what}: elements in {bytes} bytes");
        assert_eq!(l.bytes_for_elements(k as u64), bytes, "{what}: bytes of {k} elements");
        if s > 1 {
            assert_eq!(l.elements_in(bytes + 1), None, "{what}: a cut element");
        }
        bytes += s as u64;
    }
    // Packing follows the type map byte for byte, in any window.
    let (slo, shi) = l.span(count);
    let mem: Vec<u8> = (0..(shi - slo) as usize).map(|i| (i * 7 + i / 251) as u8).collect();
    // SAFETY: the test's own vector outlives the span.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let mut want = Vec::with_capacity(l.size * count);
    for e in 0..count as isize {
        for &(o, s) in &r.map {
            let at = (o + e * l.extent - slo) as usize;
            want.extend_from_slice(&mem[at..at + s]);
        }
    }
    let mut packed = Vec::new();
    l.pack_from(&span, -slo, count, &mut packed);
    assert!(packed == want, "{what}: packed bytes differ");
    let total = want.len();
    for &(a, b) in &[(0, 1), (1, 7), (3, total / 3 + 5), (total / 2 - 3, total), (total - 2, total)] {
        let mut w = Vec::new();
        l.pack_range(&span, -slo, a, b - a, &mut w);
        assert!(w[..] == want[a..b], "{what}: window {a}..{b}");
    }
    // Unpacking in three uneven windows restores the data and leaves the gaps alone.
    let mut dst = vec![0xEEu8; mem.len()];
    // SAFETY: as above.
    let dspan = unsafe { UserBuf::new(dst.as_mut_ptr() as usize, dst.len()) };
    let cuts = [0, total / 3 + 1, total / 2 + 3, total];
    for w in cuts.windows(2) {
        l.unpack_into(&dspan, -slo, w[0], &want[w[0]..w[1]]);
    }
    let mut touched = vec![false; mem.len()];
    for e in 0..count as isize {
        for &(o, s) in &r.map {
            let at = (o + e * l.extent - slo) as usize;
            touched[at..at + s].iter_mut().for_each(|t| *t = true);
        }
    }
    for i in 0..mem.len() {
        let expect = if touched[i] { mem[i] } else { 0xEE };
        assert_eq!(dst[i], expect, "{what}: unpacked byte {i}");
    }
    // external32 (the types here have native-sized elements): a round trip.
    assert_eq!(l.external_size(), l.size, "{what}: external size");
    assert!(l.from_external(&l.to_external(&want)) == want, "{what}: external32 round trip");
}

const BIG: usize = FLAT_BLOCKS + 4465;

#[test]
fn long_vectors_take_the_loop_form() {
    let int = basic(c::MPI_INT);
    check(&hvector(BIG, 1, 8, &int), 2, "vector of ints");
    check(&hvector(BIG, 1, -12, &int), 2, "negative stride");
    let short = basic(c::MPI_SHORT);
    let col = hvector(BIG, 2, 10, &short);
    check(&hvector(3, 1, 1 << 20, &col), 1, "vector of vectors");
    check(&hvector(2, 2, -(1 << 21), &col), 1, "blocks of vectors, negative stride");
    check(&resized(&col, -8, 1 << 19), 3, "resized");
}

#[test]
fn loop_form_inside_indexed_and_struct_like_types() {
    let int = basic(c::MPI_INT);
    let long = hvector(BIG, 1, 8, &int);
    let far = (BIG * 8) as isize + 64;
    check(&hindexed(&[1, 2, 1], &[0, far, -64], &long), 2, "hindexed of long vectors");
    // Flat blocks before and after a long vector: the builder turns the first into a piece.
    let parts = [(-16isize, &int), (0, &long), ((BIG * 8 + 4) as isize, &int)];
    let st = Ref {
        l: Layout::structure(&[3, 1, 2], &parts.map(|p| p.0), &parts.map(|p| &p.1.l)).unwrap(),
        map: parts
            .iter()
            .zip([3, 1, 2])
            .flat_map(|(&(d, r), n)| {
                let ex = r.ub - r.lb;
                (0..n).flat_map(move |j| r.map.iter().map(move |&(o, s)| (d + j * ex + o, s)))
            })
            .collect(),
        lb: -16,
        ub: (BIG * 8 + 12) as isize,
    };
    check(&st, 2, "struct around a long vector");
}

#[test]
fn mixed_basic_types_convert_to_external32_in_order() {
    // A pair (int, double) repeated more than FLAT_BLOCKS times: not one basic kind.
    let int = predefined(c::MPI_INT).unwrap();
    let dbl = predefined(c::MPI_DOUBLE).unwrap();
    let pair = Layout::structure(&[1, 1], &[0, 8], &[int, dbl]).unwrap();
    let v = Layout::hvector(BIG as i64, 1, 32, &pair).unwrap();
    assert!(v.pieces.is_some());
    assert_eq!(v.external_size(), BIG * 12);
    let mut native = Vec::new();
    for i in 0..BIG as i32 {
        native.extend_from_slice(&i.to_ne_bytes());
        native.extend_from_slice(&(i as f64 * 0.5).to_ne_bytes());
    }
    let ext = v.to_external(&native);
    assert_eq!(ext.len(), BIG * 12);
    assert_eq!(&ext[12 * 7..12 * 7 + 4], &7i32.to_be_bytes());
    assert_eq!(&ext[12 * 7 + 4..12 * 8], &3.5f64.to_be_bytes());
    assert_eq!(v.from_external(&ext), native);
}

#[test]
fn a_vector_of_2_27_ints_is_cheap_and_packs_correctly() {
    let int = predefined(c::MPI_INT).unwrap();
    let t0 = Instant::now();
    let v = Layout::vector(1 << 27, 1, 2, int).unwrap();
    // Nested: 2^14 vectors of 2^14 ints, 2^28 blocks in all.
    let inner = Layout::vector(1 << 14, 1, 3, int).unwrap();
    let nest = Layout::hvector(1 << 14, 1, 1 << 20, &inner).unwrap();
    assert!(t0.elapsed().as_secs_f64() < 1.0, "building took {:?}", t0.elapsed());
    assert!(v.blocks.is_empty() && v.elems.is_empty());
    assert_eq!(v.size, 4 << 27);
    assert_eq!(v.extent, ((1 << 28) - 1) * 4);
    assert_eq!(v.elements_in(v.size as u64), Some(1 << 27));
    assert_eq!(nest.size, 4 << 28);
    assert_eq!(nest.basic_count(), 1 << 28);
    // Every block at one address (stride 0): a window at the very end of 2^27 copies.
    let one = Layout::hvector(1 << 27, 1, 0, int).unwrap();
    let x = 0x0403_0201i32.to_ne_bytes();
    // SAFETY: `x` outlives the span.
    let span = unsafe { UserBuf::new(x.as_ptr() as usize, 4) };
    let mut w = Vec::new();
    one.pack_range(&span, 0, (4 << 27) - 6, 6, &mut w);
    assert_eq!(w, [x[2], x[3], x[0], x[1], x[2], x[3]]);
}
