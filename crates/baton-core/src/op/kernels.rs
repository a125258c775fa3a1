//! The element kernels: `inout = input op inout` over packed elements of one number format.
//!
//! [`Elem`] loads and stores an element of the packed stream, [`Arith`] and [`Bits`] give the
//! operations; the primitive types implement them natively, [`Half`], [`Ext80`] and [`Quad`]
//! through [`soft_float`](super::soft_float).

use super::soft_float as soft;
use super::Op;
use std::cmp::Ordering;

/// An element as stored in the packed stream.
pub(super) trait Elem: Copy + PartialOrd {
    /// Bytes it takes in the packed stream.
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
}

/// Arithmetic of the integer and floating kinds.
pub(super) trait Arith: Elem {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

/// Bitwise and logical operations of the integer kinds (C `!= 0` is "true"; results are 0 or 1).
pub(super) trait Bits: Elem {
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn truth(self) -> bool;
    fn from_truth(t: bool) -> Self;
}

macro_rules! primitive {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("chunk of the element's size"))
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes())
            }
        }
    )*};
}
primitive!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128, f32, f64);

macro_rules! integers {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
        impl Bits for $t {
            #[inline(always)]
            fn and(self, o: Self) -> Self { self & o }
            #[inline(always)]
            fn or(self, o: Self) -> Self { self | o }
            #[inline(always)]
            fn xor(self, o: Self) -> Self { self ^ o }
            #[inline(always)]
            fn truth(self) -> bool { self != 0 }
            #[inline(always)]
            fn from_truth(t: bool) -> Self { t as $t }
        }
    )*};
}
integers!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);

macro_rules! floats {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
        }
    )*};
}
floats!(f32, f64);

/// Software formats: the raw bits, compared and combined by [`soft`].
macro_rules! soft_float {
    ($name:ident, $fmt:expr, $size:expr) => {
        #[derive(Clone, Copy, Debug)]
        pub(super) struct $name(pub(super) u128);
        impl PartialEq for $name {
            fn eq(&self, o: &Self) -> bool {
                $fmt.cmp(self.0, o.0) == Some(Ordering::Equal)
            }
        }
        impl PartialOrd for $name {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                $fmt.cmp(self.0, o.0)
            }
        }
        impl Elem for $name {
            const SIZE: usize = $size;
            fn load(b: &[u8]) -> Self {
                $name($fmt.load(b))
            }
            fn store(self, b: &mut [u8]) {
                $fmt.store(self.0, b)
            }
        }
        impl Arith for $name {
            fn add(self, o: Self) -> Self {
                $name($fmt.add(self.0, o.0))
            }
            fn sub(self, o: Self) -> Self {
                $name($fmt.add(self.0, $fmt.neg(o.0)))
            }
            fn mul(self, o: Self) -> Self {
                $name($fmt.mul(self.0, o.0))
            }
        }
    };
}
soft_float!(Half, soft::HALF, 2);
// 10 bytes of value in the 16 that `long double` takes in memory.
soft_float!(Ext80, soft::X87, 16);
soft_float!(Quad, soft::QUAD, 16);

/// `inout[k] = f(input[k], inout[k])` for every element.
#[inline(always)]
fn zip<T: Elem>(input: &[u8], inout: &mut [u8], f: impl Fn(T, T) -> T) {
    for (o, i) in inout.chunks_exact_mut(T::SIZE).zip(input.chunks_exact(T::SIZE)) {
        f(T::load(i), T::load(o)).store(o);
    }
}

pub(super) fn integer<T: Arith + Bits>(op: Op, input: &[u8], inout: &mut [u8]) {
    match op {
        Op::Land => zip::<T>(input, inout, |a, b| T::from_truth(a.truth() & b.truth())),
        Op::Lor => zip::<T>(input, inout, |a, b| T::from_truth(a.truth() | b.truth())),
        Op::Lxor => zip::<T>(input, inout, |a, b| T::from_truth(a.truth() ^ b.truth())),
        Op::Band => zip::<T>(input, inout, |a, b| a.and(b)),
        Op::Bor => zip::<T>(input, inout, |a, b| a.or(b)),
        Op::Bxor => zip::<T>(input, inout, |a, b| a.xor(b)),
        _ => floating::<T>(op, input, inout),
    }
}

pub(super) fn floating<T: Arith>(op: Op, input: &[u8], inout: &mut [u8]) {
    match op {
        Op::Sum => zip::<T>(input, inout, |a, b| a.add(b)),
        Op::Prod => zip::<T>(input, inout, |a, b| a.mul(b)),
        // As C's `a > b ? a : b`: a NaN in `input` leaves `inout` as it is.
        Op::Max => zip::<T>(input, inout, |a, b| if a > b { a } else { b }),
        Op::Min => zip::<T>(input, inout, |a, b| if a < b { a } else { b }),
        _ => debug_assert!(false, "{} on an arithmetic type was not checked", op.name()),
    }
}

pub(super) fn complex<T: Arith>(op: Op, input: &[u8], inout: &mut [u8]) {
    let n = T::SIZE;
    for (o, i) in inout.chunks_exact_mut(2 * n).zip(input.chunks_exact(2 * n)) {
        let (ar, ai) = (T::load(&i[..n]), T::load(&i[n..]));
        let (br, bi) = (T::load(&o[..n]), T::load(&o[n..]));
        let (r, im) = match op {
            Op::Sum => (ar.add(br), ai.add(bi)),
            Op::Prod => (ar.mul(br).sub(ai.mul(bi)), ar.mul(bi).add(ai.mul(br))),
            _ => {
                debug_assert!(false, "{} on a complex type was not checked", op.name());
                return;
            }
        };
        r.store(&mut o[..n]);
        im.store(&mut o[n..]);
    }
}

pub(super) fn loc<V: Elem, I: Elem>(op: Op, input: &[u8], inout: &mut [u8]) {
    let (v, w) = (V::SIZE, V::SIZE + I::SIZE);
    let max = op == Op::Maxloc;
    for (o, i) in inout.chunks_exact_mut(w).zip(input.chunks_exact(w)) {
        let (av, bv) = (V::load(&i[..v]), V::load(&o[..v]));
        // Equal values keep the lower index (the standard's definition of both operations).
        let take = match av.partial_cmp(&bv) {
            Some(Ordering::Equal) => I::load(&i[v..]) < I::load(&o[v..]),
            Some(Ordering::Greater) => max,
            Some(Ordering::Less) => !max,
            None => false,
        };
        if take {
            o.copy_from_slice(i);
        }
    }
}
