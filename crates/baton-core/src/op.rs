//! Predefined reduction operations on packed data.
//!
//! Reductions work on the packed byte stream of a datatype (pair types packed as value then
//! index), so they never see padding. Every predefined datatype that some operation accepts has a
//! [`Kind`]: the standard's group of basic types it belongs to (which decides the operations
//! allowed, MPI 4.1 section 6.9.2) and the number format the kernels compute in. A derived
//! datatype whose basic elements all share one kernel is reduced the same way over its packed
//! stream (the C boundary finds its kind).
//!
//! The kernels are generic over the element type and dispatch on the operation once per call,
//! outside the loop, so each loop body is a straight chunk-load, combine, store that the compiler
//! turns into vector code for the primitive types. The formats Rust has no type for (IEEE
//! half, x87 80-bit extended `long double`, IEEE quad for `REAL*16` and for `long double`
//! elsewhere) go through the software floating point of [`soft`], correctly rounded to nearest
//! even as the hardware (or libgcc) does it for C and Fortran.

use crate::error::{MpiError, Result};
use baton_abi::consts as c;
use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Prod,
    Max,
    Min,
    Land,
    Lor,
    Lxor,
    Band,
    Bor,
    Bxor,
    Minloc,
    Maxloc,
    Replace,
    NoOp,
}

impl Op {
    pub fn from_handle(h: usize) -> Option<Op> {
        Some(match h {
            c::MPI_SUM => Op::Sum,
            c::MPI_PROD => Op::Prod,
            c::MPI_MAX => Op::Max,
            c::MPI_MIN => Op::Min,
            c::MPI_LAND => Op::Land,
            c::MPI_LOR => Op::Lor,
            c::MPI_LXOR => Op::Lxor,
            c::MPI_BAND => Op::Band,
            c::MPI_BOR => Op::Bor,
            c::MPI_BXOR => Op::Bxor,
            c::MPI_MINLOC => Op::Minloc,
            c::MPI_MAXLOC => Op::Maxloc,
            c::MPI_REPLACE => Op::Replace,
            c::MPI_NO_OP => Op::NoOp,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "MPI_SUM",
            Op::Prod => "MPI_PROD",
            Op::Max => "MPI_MAX",
            Op::Min => "MPI_MIN",
            Op::Land => "MPI_LAND",
            Op::Lor => "MPI_LOR",
            Op::Lxor => "MPI_LXOR",
            Op::Band => "MPI_BAND",
            Op::Bor => "MPI_BOR",
            Op::Bxor => "MPI_BXOR",
            Op::Minloc => "MPI_MINLOC",
            Op::Maxloc => "MPI_MAXLOC",
            Op::Replace => "MPI_REPLACE",
            Op::NoOp => "MPI_NO_OP",
        }
    }

    /// Whether the standard defines this operation on datatypes of group `g`.
    pub fn allowed(self, g: Group) -> bool {
        use Group::*;
        match self {
            Op::Replace | Op::NoOp => true,
            Op::Max | Op::Min => matches!(g, CInteger | FortranInteger | MultiLanguage | Floating),
            Op::Sum | Op::Prod => matches!(g, CInteger | FortranInteger | MultiLanguage | Floating | Complex),
            Op::Land | Op::Lor | Op::Lxor => matches!(g, CInteger | Logical),
            Op::Band | Op::Bor | Op::Bxor => matches!(g, CInteger | FortranInteger | MultiLanguage | Byte),
            Op::Minloc | Op::Maxloc => g == Pair,
        }
    }
}

/// The standard's groups of basic datatypes for reductions. `MPI_CHAR`, `MPI_WCHAR` and
/// `MPI_CHARACTER` hold printable characters and belong to none; the optional Fortran
/// `MPI_LOGICALn` types count as logical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    CInteger,
    FortranInteger,
    MultiLanguage,
    Floating,
    Complex,
    Logical,
    Byte,
    /// The MINLOC/MAXLOC pair types.
    Pair,
}

/// A number format the kernels compute in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Num {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    I128,
    U128,
    F16,
    F32,
    F64,
    X87,
    F128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Scalar,
    /// Real and imaginary parts.
    Complex,
    /// Value then index, the index in this format.
    Pair(Num),
}

/// What a predefined datatype is to the reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub group: Group,
    num: Num,
    shape: Shape,
}

impl Kind {
    /// Whether packed data of both kinds is combined by the same code (a derived datatype may
    /// mix such basic types, e.g. `MPI_INT` and `MPI_INT32_T`).
    pub fn same_kernel(self, o: Kind) -> bool {
        self.num == o.num && self.shape == o.shape
    }
}

/// `long double`: x87 extended precision (stored in 16 bytes) on x86, IEEE quad on the other
/// 64-bit Linux targets.
const LONG_DOUBLE: Num = if cfg!(any(target_arch = "x86_64", target_arch = "x86")) { Num::X87 } else { Num::F128 };

/// The kind of predefined datatype `dt`, or None when no reduction operation applies to it.
pub fn kind(dt: usize) -> Option<Kind> {
    use Group::*;
    use Num::*;
    let long = if std::mem::size_of::<libc::c_long>() == 8 { I64 } else { I32 };
    let ulong = if long == I64 { U64 } else { U32 };
    let (group, num, shape) = match dt {
        c::MPI_SIGNED_CHAR | c::MPI_INT8_T => (CInteger, I8, Shape::Scalar),
        c::MPI_UNSIGNED_CHAR | c::MPI_UINT8_T => (CInteger, U8, Shape::Scalar),
        c::MPI_SHORT | c::MPI_INT16_T => (CInteger, I16, Shape::Scalar),
        c::MPI_UNSIGNED_SHORT | c::MPI_UINT16_T => (CInteger, U16, Shape::Scalar),
        c::MPI_INT | c::MPI_INT32_T => (CInteger, I32, Shape::Scalar),
        c::MPI_UNSIGNED | c::MPI_UINT32_T => (CInteger, U32, Shape::Scalar),
        c::MPI_LONG => (CInteger, long, Shape::Scalar),
        c::MPI_UNSIGNED_LONG => (CInteger, ulong, Shape::Scalar),
        c::MPI_LONG_LONG | c::MPI_INT64_T => (CInteger, I64, Shape::Scalar),
        c::MPI_UNSIGNED_LONG_LONG | c::MPI_UINT64_T => (CInteger, U64, Shape::Scalar),
        c::MPI_INTEGER1 => (FortranInteger, I8, Shape::Scalar),
        c::MPI_INTEGER2 => (FortranInteger, I16, Shape::Scalar),
        c::MPI_INTEGER | c::MPI_INTEGER4 => (FortranInteger, I32, Shape::Scalar),
        c::MPI_INTEGER8 => (FortranInteger, I64, Shape::Scalar),
        c::MPI_INTEGER16 => (FortranInteger, I128, Shape::Scalar),
        c::MPI_AINT | c::MPI_OFFSET | c::MPI_COUNT => (MultiLanguage, I64, Shape::Scalar),
        c::MPI_REAL2 => (Floating, F16, Shape::Scalar),
        c::MPI_FLOAT | c::MPI_REAL | c::MPI_REAL4 => (Floating, F32, Shape::Scalar),
        c::MPI_DOUBLE | c::MPI_DOUBLE_PRECISION | c::MPI_REAL8 => (Floating, F64, Shape::Scalar),
        c::MPI_LONG_DOUBLE => (Floating, LONG_DOUBLE, Shape::Scalar),
        c::MPI_REAL16 => (Floating, F128, Shape::Scalar),
        c::MPI_COMPLEX4 => (Complex, F16, Shape::Complex),
        c::MPI_C_FLOAT_COMPLEX | c::MPI_CXX_FLOAT_COMPLEX | c::MPI_COMPLEX | c::MPI_COMPLEX8 => {
            (Complex, F32, Shape::Complex)
        }
        c::MPI_C_DOUBLE_COMPLEX | c::MPI_CXX_DOUBLE_COMPLEX | c::MPI_DOUBLE_COMPLEX | c::MPI_COMPLEX16 => {
            (Complex, F64, Shape::Complex)
        }
        c::MPI_C_LONG_DOUBLE_COMPLEX | c::MPI_CXX_LONG_DOUBLE_COMPLEX => (Complex, LONG_DOUBLE, Shape::Complex),
        c::MPI_COMPLEX32 => (Complex, F128, Shape::Complex),
        c::MPI_C_BOOL | c::MPI_CXX_BOOL | c::MPI_LOGICAL1 => (Logical, U8, Shape::Scalar),
        c::MPI_LOGICAL2 => (Logical, U16, Shape::Scalar),
        c::MPI_LOGICAL | c::MPI_LOGICAL4 => (Logical, U32, Shape::Scalar),
        c::MPI_LOGICAL8 => (Logical, U64, Shape::Scalar),
        c::MPI_LOGICAL16 => (Logical, U128, Shape::Scalar),
        c::MPI_BYTE => (Byte, U8, Shape::Scalar),
        c::MPI_FLOAT_INT => (Pair, F32, Shape::Pair(I32)),
        c::MPI_DOUBLE_INT => (Pair, F64, Shape::Pair(I32)),
        c::MPI_LONG_INT => (Pair, long, Shape::Pair(I32)),
        c::MPI_SHORT_INT => (Pair, I16, Shape::Pair(I32)),
        c::MPI_2INT | c::MPI_2INTEGER => (Pair, I32, Shape::Pair(I32)),
        c::MPI_LONG_DOUBLE_INT => (Pair, LONG_DOUBLE, Shape::Pair(I32)),
        // Fortran's pairs carry the index in the value's type.
        c::MPI_2REAL => (Pair, F32, Shape::Pair(F32)),
        c::MPI_2DOUBLE_PRECISION => (Pair, F64, Shape::Pair(F64)),
        _ => return None,
    };
    Some(Kind { group, num, shape })
}

fn not_defined(call: &str, op: Op, dt_name: &str) -> MpiError {
    MpiError::new(c::MPI_ERR_OP, format!("{call}: {} is not defined for datatype {dt_name}", op.name()))
}

/// Checks that `op` is defined for a datatype of kind `k` (None: a type no operation applies to),
/// with the `MPI_ERR_OP` the standard asks for otherwise.
pub fn check_kind(call: &str, op: Op, k: Option<Kind>, dt_name: &str) -> Result<()> {
    match (op, k) {
        (Op::Replace | Op::NoOp, _) => Ok(()),
        (_, Some(k)) if op.allowed(k.group) => Ok(()),
        _ => Err(not_defined(call, op, dt_name)),
    }
}

/// Checks that `op` is defined for predefined datatype `dt` (the `MPI_ERR_OP` rules of the
/// standard). `MPI_REPLACE` and `MPI_NO_OP` apply to every type.
pub fn check(call: &str, op: Op, dt: usize, dt_name: &str) -> Result<()> {
    check_kind(call, op, kind(dt), dt_name)
}

/// `inout = input op inout`, elementwise over packed data of predefined datatype `dt`.
/// The caller has checked the pair with [`check`] and that both slices have the same length.
pub fn apply(op: Op, dt: usize, input: &[u8], inout: &mut [u8]) {
    match (op, kind(dt)) {
        (Op::NoOp, _) => {}
        (Op::Replace, _) => inout.copy_from_slice(input),
        (_, Some(k)) => apply_kind(op, k, input, inout),
        (_, None) => debug_assert!(false, "{} on datatype {dt:#x} was not checked", op.name()),
    }
}

/// `inout = input op inout` over packed elements of kind `k` (checked with [`check_kind`]).
/// An operation the kind does not support leaves `inout` alone.
pub fn apply_kind(op: Op, k: Kind, input: &[u8], inout: &mut [u8]) {
    use Num::*;
    match op {
        Op::NoOp => return,
        Op::Replace => {
            inout.copy_from_slice(input);
            return;
        }
        _ => {}
    }
    match k.shape {
        Shape::Scalar => match k.num {
            I8 => integer::<i8>(op, input, inout),
            U8 => integer::<u8>(op, input, inout),
            I16 => integer::<i16>(op, input, inout),
            U16 => integer::<u16>(op, input, inout),
            I32 => integer::<i32>(op, input, inout),
            U32 => integer::<u32>(op, input, inout),
            I64 => integer::<i64>(op, input, inout),
            U64 => integer::<u64>(op, input, inout),
            I128 => integer::<i128>(op, input, inout),
            U128 => integer::<u128>(op, input, inout),
            F16 => floating::<Half>(op, input, inout),
            F32 => floating::<f32>(op, input, inout),
            F64 => floating::<f64>(op, input, inout),
            X87 => floating::<Ext80>(op, input, inout),
            F128 => floating::<Quad>(op, input, inout),
        },
        Shape::Complex => match k.num {
            F16 => complex::<Half>(op, input, inout),
            F32 => complex::<f32>(op, input, inout),
            F64 => complex::<f64>(op, input, inout),
            X87 => complex::<Ext80>(op, input, inout),
            F128 => complex::<Quad>(op, input, inout),
            _ => debug_assert!(false, "no complex type of {:?}", k.num),
        },
        Shape::Pair(ix) => match (k.num, ix) {
            (F32, I32) => loc::<f32, i32>(op, input, inout),
            (F64, I32) => loc::<f64, i32>(op, input, inout),
            (I16, I32) => loc::<i16, i32>(op, input, inout),
            (I32, I32) => loc::<i32, i32>(op, input, inout),
            (I64, I32) => loc::<i64, i32>(op, input, inout),
            (X87, I32) => loc::<Ext80, i32>(op, input, inout),
            (F128, I32) => loc::<Quad, i32>(op, input, inout),
            (F32, F32) => loc::<f32, f32>(op, input, inout),
            (F64, F64) => loc::<f64, f64>(op, input, inout),
            _ => debug_assert!(false, "no pair type of {:?} and {ix:?}", k.num),
        },
    }
}

/// An element as stored in the packed stream.
trait Elem: Copy + PartialOrd {
    /// Bytes it takes in the packed stream.
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
}

/// Arithmetic of the integer and floating kinds.
trait Arith: Elem {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

/// Bitwise and logical operations of the integer kinds (C `!= 0` is "true"; results are 0 or 1).
trait Bits: Elem {
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
        struct $name(u128);
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

fn integer<T: Arith + Bits>(op: Op, input: &[u8], inout: &mut [u8]) {
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

fn floating<T: Arith>(op: Op, input: &[u8], inout: &mut [u8]) {
    match op {
        Op::Sum => zip::<T>(input, inout, |a, b| a.add(b)),
        Op::Prod => zip::<T>(input, inout, |a, b| a.mul(b)),
        // As C's `a > b ? a : b`: a NaN in `input` leaves `inout` as it is.
        Op::Max => zip::<T>(input, inout, |a, b| if a > b { a } else { b }),
        Op::Min => zip::<T>(input, inout, |a, b| if a < b { a } else { b }),
        _ => debug_assert!(false, "{} on an arithmetic type was not checked", op.name()),
    }
}

fn complex<T: Arith>(op: Op, input: &[u8], inout: &mut [u8]) {
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

fn loc<V: Elem, I: Elem>(op: Op, input: &[u8], inout: &mut [u8]) {
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

/// `f(input, inout)`: see [`Reducer`].
pub type ReduceFn = dyn Fn(&[u8], &mut [u8]) + Send + Sync;

/// The combining function of a reduction: `f(input, inout)` sets `inout = input ∘ inout` over
/// packed elements of the reduction's datatype. `input` always holds the contributions of the
/// lower ranks, so a non-commutative operation is applied in rank order.
#[derive(Clone)]
pub struct Reducer {
    pub commutative: bool,
    /// Bytes of one element of the datatype: a reduction may be split only at multiples of it.
    pub unit: usize,
    pub f: std::sync::Arc<ReduceFn>,
}

impl Reducer {
    pub fn apply(&self, input: &[u8], inout: &mut [u8]) {
        (self.f)(input, inout)
    }
}

/// Software binary floating point, correctly rounded to nearest even: what the kernels use for
/// the formats Rust has no type for. Values are the raw bits in a `u128` (sign above exponent
/// above fraction).
mod soft {
    use std::cmp::Ordering;

    /// A binary interchange-like format. `frac` counts the stored fraction bits, the integer bit
    /// included when `explicit` (x87 stores it; IEEE formats imply it).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Fmt {
        pub exp: u32,
        pub frac: u32,
        pub explicit: bool,
        /// Bytes of the value in memory.
        pub bytes: usize,
    }

    pub const HALF: Fmt = Fmt { exp: 5, frac: 10, explicit: false, bytes: 2 };
    pub const X87: Fmt = Fmt { exp: 15, frac: 64, explicit: true, bytes: 10 };
    pub const QUAD: Fmt = Fmt { exp: 15, frac: 112, explicit: false, bytes: 16 };

    /// A decoded value; a finite one is `sig * 2^exp` with `sig` non-zero.
    #[derive(Clone, Copy, Debug)]
    enum V {
        Nan,
        Inf(bool),
        Zero(bool),
        Fin(bool, i32, u128),
    }

    impl Fmt {
        /// Significand bits.
        fn prec(self) -> u32 {
            if self.explicit {
                self.frac
            } else {
                self.frac + 1
            }
        }

        fn bias(self) -> i32 {
            (1 << (self.exp - 1)) - 1
        }

        fn field_max(self) -> u128 {
            (1 << self.exp) - 1
        }

        fn sign_bit(self) -> u128 {
            1 << (self.exp + self.frac)
        }

        /// Exponent of the last significand bit of the smallest normal number (and of every
        /// subnormal one).
        fn emin(self) -> i32 {
            2 - self.bias() - self.prec() as i32
        }

        pub fn load(self, b: &[u8]) -> u128 {
            let mut x = [0u8; 16];
            if cfg!(target_endian = "little") {
                x[..self.bytes].copy_from_slice(&b[..self.bytes]);
                u128::from_le_bytes(x)
            } else {
                x[16 - self.bytes..].copy_from_slice(&b[..self.bytes]);
                u128::from_be_bytes(x)
            }
        }

        /// Writes the value's bytes, leaving any padding after them (x87's 6 bytes) alone.
        pub fn store(self, v: u128, b: &mut [u8]) {
            if cfg!(target_endian = "little") {
                b[..self.bytes].copy_from_slice(&v.to_le_bytes()[..self.bytes]);
            } else {
                b[..self.bytes].copy_from_slice(&v.to_be_bytes()[16 - self.bytes..]);
            }
        }

        pub fn neg(self, x: u128) -> u128 {
            x ^ self.sign_bit()
        }

        fn decode(self, x: u128) -> V {
            let sign = x & self.sign_bit() != 0;
            let field = (x >> self.frac) & self.field_max();
            let frac = x & ((1 << self.frac) - 1);
            let int_bit = 1u128 << (self.prec() - 1);
            if field == self.field_max() {
                // x87 infinities have the integer bit set; without it ("pseudo-infinity") the
                // encoding is invalid, which the hardware treats as a NaN.
                let rest = if self.explicit { frac & !int_bit } else { frac };
                return if rest == 0 && (!self.explicit || frac & int_bit != 0) { V::Inf(sign) } else { V::Nan };
            }
            if field == 0 {
                return if frac == 0 { V::Zero(sign) } else { V::Fin(sign, self.emin(), frac) };
            }
            let sig = if self.explicit {
                if frac & int_bit == 0 {
                    // An "unnormal": invalid operand to the x87.
                    return V::Nan;
                }
                frac
            } else {
                frac | int_bit
            };
            V::Fin(sign, field as i32 - self.bias() - (self.prec() as i32 - 1), sig)
        }

        /// The default quiet NaN the hardware produces for invalid operations.
        fn nan(self) -> u128 {
            let quiet = 1u128 << (self.prec() - 2);
            let int_bit = if self.explicit { 1u128 << (self.prec() - 1) } else { 0 };
            self.sign_bit() | (self.field_max() << self.frac) | int_bit | quiet
        }

        fn inf(self, sign: bool) -> u128 {
            let int_bit = if self.explicit { 1u128 << (self.prec() - 1) } else { 0 };
            (if sign { self.sign_bit() } else { 0 }) | (self.field_max() << self.frac) | int_bit
        }

        fn quieted(self, x: u128) -> u128 {
            x | (1u128 << (self.prec() - 2))
        }

        /// `sig * 2^e` rounded to nearest even and encoded. When bits were lost before, `sig`
        /// carries at least two bits below the result's last bit and has its lowest bit set
        /// ("sticky"), which is all the rounding needs to know about them.
        fn round(self, sign: bool, sig: u128, e: i32) -> u128 {
            let s = if sign { self.sign_bit() } else { 0 };
            if sig == 0 {
                return s;
            }
            let p = self.prec() as i32;
            let len = 128 - sig.leading_zeros() as i32;
            let target = (e + len - p).max(self.emin());
            let mut sig = if target > e { shr_even(sig, (target - e) as u32) } else { sig << (e - target) };
            let mut e = target;
            if sig >> p != 0 {
                // Rounding carried into a new bit: the significand is now exactly 2^p.
                sig >>= 1;
                e += 1;
            }
            let int_bit = 1u128 << (p - 1);
            let field = if sig & int_bit != 0 { (e - self.emin() + 1) as u128 } else { 0 };
            if field >= self.field_max() {
                return self.inf(sign);
            }
            let frac = if self.explicit { sig } else { sig & (int_bit - 1) };
            s | (field << self.frac) | frac
        }

        /// A finite value with its significand shifted up to exactly `prec` bits.
        fn normal(self, e: i32, sig: u128) -> (i32, u128) {
            let sh = sig.leading_zeros() as i32 - (128 - self.prec() as i32);
            (e - sh, sig << sh)
        }

        pub fn add(self, a: u128, b: u128) -> u128 {
            match (self.decode(a), self.decode(b)) {
                (V::Nan, _) => self.quieted(a),
                (_, V::Nan) => self.quieted(b),
                (V::Inf(x), V::Inf(y)) if x != y => self.nan(),
                (V::Inf(_), _) => a,
                (_, V::Inf(_)) => b,
                (V::Zero(x), V::Zero(y)) => self.round(x && y, 0, 0),
                (V::Zero(_), V::Fin(s, e, m)) | (V::Fin(s, e, m), V::Zero(_)) => self.round(s, m, e),
                (V::Fin(sa, ea, ma), V::Fin(sb, eb, mb)) => {
                    let (ea, ma) = self.normal(ea, ma);
                    let (eb, mb) = self.normal(eb, mb);
                    let ((s, e, big), (_, es, small)) =
                        if (ea, ma) >= (eb, mb) { ((sa, ea, ma), (sb, eb, mb)) } else { ((sb, eb, mb), (sa, ea, ma)) };
                    // Three guard bits, and the bits shifted out of the smaller operand folded
                    // into its lowest one.
                    let (big, small) = (big << 3, small << 3);
                    let d = (e - es) as u32;
                    let aligned = if d == 0 {
                        small
                    } else if d > self.prec() + 3 {
                        1
                    } else {
                        (small >> d) | (small & ((1 << d) - 1) != 0) as u128
                    };
                    let sig = if sa == sb { big + aligned } else { big - aligned };
                    // An exact zero difference is +0 when rounding to nearest.
                    self.round(s && sig != 0, sig, e - 3)
                }
            }
        }

        pub fn mul(self, a: u128, b: u128) -> u128 {
            match (self.decode(a), self.decode(b)) {
                (V::Nan, _) => self.quieted(a),
                (_, V::Nan) => self.quieted(b),
                (V::Inf(_), V::Zero(_)) | (V::Zero(_), V::Inf(_)) => self.nan(),
                (V::Inf(x), V::Inf(y) | V::Fin(y, _, _)) | (V::Fin(x, _, _), V::Inf(y)) => self.inf(x != y),
                (V::Zero(x), V::Zero(y) | V::Fin(y, _, _)) | (V::Fin(x, _, _), V::Zero(y)) => self.round(x != y, 0, 0),
                (V::Fin(sa, ea, ma), V::Fin(sb, eb, mb)) => {
                    let (hi, lo) = mul_wide(ma, mb);
                    let e = ea + eb;
                    if hi == 0 {
                        return self.round(sa != sb, lo, e);
                    }
                    // Keep 125 bits (enough for rounding at any precision up to 113) and fold
                    // the rest into the sticky bit.
                    let len = 256 - hi.leading_zeros();
                    let sh = len - 125;
                    let sig = (hi << (128 - sh)) | (lo >> sh) | (lo & ((1 << sh) - 1) != 0) as u128;
                    self.round(sa != sb, sig, e + sh as i32)
                }
            }
        }

        /// Numeric comparison: None when either is a NaN; the two zeros are equal.
        pub fn cmp(self, a: u128, b: u128) -> Option<Ordering> {
            // (negative, magnitude class, exponent, significand) with significands normalized,
            // so that magnitudes order lexicographically.
            let key = |v: V| -> Option<(bool, u8, i32, u128)> {
                Some(match v {
                    V::Nan => return None,
                    V::Zero(_) => (false, 0, 0, 0),
                    V::Fin(s, e, m) => {
                        let (e, m) = self.normal(e, m);
                        (s, 1, e, m)
                    }
                    V::Inf(s) => (s, 2, 0, 0),
                })
            };
            let (na, ca, ea, ma) = key(self.decode(a))?;
            let (nb, cb, eb, mb) = key(self.decode(b))?;
            Some(match (na, nb) {
                (false, true) => Ordering::Greater,
                (true, false) => Ordering::Less,
                (neg, _) => {
                    let o = (ca, ea, ma).cmp(&(cb, eb, mb));
                    if neg {
                        o.reverse()
                    } else {
                        o
                    }
                }
            })
        }
    }

    /// `x >> sh` rounded to nearest, ties to even.
    fn shr_even(x: u128, sh: u32) -> u128 {
        if sh > 128 {
            return 0;
        }
        if sh == 128 {
            return (x > 1 << 127) as u128;
        }
        let q = x >> sh;
        let rem = x & ((1 << sh) - 1);
        let half = 1u128 << (sh - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    }

    /// The 256-bit product of two numbers below 2^127, as (high, low) halves.
    fn mul_wide(a: u128, b: u128) -> (u128, u128) {
        let m = u64::MAX as u128;
        let (a0, a1, b0, b1) = (a & m, a >> 64, b & m, b >> 64);
        let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
        let mid = (p00 >> 64) + (p01 & m) + (p10 & m);
        let lo = (p00 & m) | (mid << 64);
        let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
        (hi, lo)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        const SINGLE: Fmt = Fmt { exp: 8, frac: 23, explicit: false, bytes: 4 };
        const DOUBLE: Fmt = Fmt { exp: 11, frac: 52, explicit: false, bytes: 8 };

        /// A deterministic stream of awkward bit patterns: random, near powers of two,
        /// subnormals, extremes, zeros, infinities and NaNs.
        fn patterns(n: usize) -> Vec<u64> {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let mut v = vec![0, 1 << 63, 1, 0x7ff0 << 48, 0xfff0 << 48, 0x7ff8 << 48, 0x7fef_ffff_ffff_ffff];
            for i in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.push(match i % 4 {
                    0 => x,
                    1 => x & 0x800f_ffff_ffff_ffff | (((x >> 52) & 3) + 1020) << 52,
                    2 => x & 0x8000_0000_ffff_ffff,
                    _ => x & 0xfff0_0000_0000_0000 | (x & 7),
                });
            }
            v
        }

        fn same64(a: f64, got: u128) -> bool {
            let g = f64::from_bits(got as u64);
            (a.is_nan() && g.is_nan()) || a.to_bits() == g.to_bits()
        }

        #[test]
        fn double_matches_the_hardware() {
            let p = patterns(3000);
            for (k, &a) in p.iter().enumerate() {
                for &b in p.iter().skip(k % 7).step_by(37) {
                    let (x, y) = (f64::from_bits(a), f64::from_bits(b));
                    let (a, b) = (a as u128, b as u128);
                    assert!(same64(x + y, DOUBLE.add(a, b)), "{x:e} + {y:e}");
                    assert!(same64(x * y, DOUBLE.mul(a, b)), "{x:e} * {y:e}");
                    assert_eq!(x.partial_cmp(&y), DOUBLE.cmp(a, b), "{x:e} <> {y:e}");
                }
            }
        }

        #[test]
        fn single_matches_the_hardware() {
            let p: Vec<u32> = patterns(3000).iter().map(|&x| (x >> 32) as u32 ^ x as u32).collect();
            for (k, &a) in p.iter().enumerate() {
                for &b in p.iter().skip(k % 5).step_by(41) {
                    let (x, y) = (f32::from_bits(a), f32::from_bits(b));
                    let ok = |r: f32, got: u128| {
                        let g = f32::from_bits(got as u32);
                        (r.is_nan() && g.is_nan()) || r.to_bits() == g.to_bits()
                    };
                    assert!(ok(x + y, SINGLE.add(a as u128, b as u128)), "{x:e} + {y:e}");
                    assert!(ok(x * y, SINGLE.mul(a as u128, b as u128)), "{x:e} * {y:e}");
                }
            }
        }

        /// An x87 value from a double (exact: 64 significand bits hold 53).
        fn ext(x: f64) -> u128 {
            let b = x.to_bits();
            let sign = (b >> 63) as u128;
            let field = ((b >> 52) & 0x7ff) as i32;
            let frac = (b & ((1 << 52) - 1)) as u128;
            assert!(field != 0 && field != 0x7ff, "normal doubles only");
            let e = field - 1023 + 16383;
            (sign << 79) | ((e as u128) << 64) | (1 << 63) | (frac << 11)
        }

        #[test]
        fn x87_and_quad_agree_with_double_where_exact() {
            for (x, y) in [(1.5, 2.25), (-3.0, 0.125), (1e300, 1e300), (7.0, -7.0), (1e-300, 3.0)] {
                assert_eq!(X87.add(ext(x), ext(y)), if x + y == 0.0 { 0 } else { ext(x + y) });
                // Products that are exact in a double are exact in x87 too.
                if (x * y).is_finite() && (x * y).abs() > 1e-290 {
                    assert_eq!(X87.mul(ext(x), ext(y)), ext(x * y), "{x} * {y}");
                }
            }
            // 1e300 * 1e300 fits x87's exponent range though not a double's.
            assert_eq!(X87.cmp(X87.mul(ext(1e300), ext(1e300)), ext(1e300)), Some(Ordering::Greater));
            let one = 0x3fffu128 << 112;
            let two = 0x4000u128 << 112;
            assert_eq!(QUAD.add(one, one), two);
            assert_eq!(QUAD.mul(two, QUAD.neg(two)), QUAD.neg(0x4001u128 << 112));
            // 1 + 2^-113 is a tie between 1 and 1 + 2^-112: even wins.
            let tiny = (0x3fffu128 - 113) << 112;
            assert_eq!(QUAD.add(one, tiny), one);
            assert_eq!(QUAD.add(one, QUAD.add(tiny, tiny)), one | 1);
        }

        #[test]
        fn x87_rounds_at_64_bits() {
            // (2^64 - 1) * 2^-63 plus 2^-64 lies halfway to 2: rounds to even (2).
            let max_sig = (0x3fffu128 << 64) | u64::MAX as u128;
            let half_ulp = (0x3fffu128 - 64) << 64 | 1 << 63;
            assert_eq!(X87.add(max_sig, half_ulp), (0x4000u128 << 64) | 1 << 63);
            // The x87 largest value doubled overflows to infinity (integer bit set).
            let big = (0x7ffeu128 << 64) | u64::MAX as u128;
            assert_eq!(X87.add(big, big), (0x7fffu128 << 64) | 1 << 63);
        }

        #[test]
        fn half_rounds_and_overflows() {
            let h = |x: u16| x as u128;
            assert_eq!(HALF.add(h(0x3c00), h(0x3c00)), h(0x4000)); // 1 + 1 = 2
            assert_eq!(HALF.add(h(0x3c00), h(0x1000)), h(0x3c00)); // 1 + 2^-11: tie, even
            assert_eq!(HALF.mul(h(0x7bff), h(0x4000)), h(0x7c00)); // 65504 * 2 = inf
            assert_eq!(HALF.mul(h(0x0001), h(0x3800)), h(0x0000)); // smallest subnormal / 2: tie to 0
            assert_eq!(HALF.mul(h(0x0003), h(0x3800)), h(0x0002)); // 1.5 ulp: tie to even 2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Elem>(v: &[T]) -> Vec<u8> {
        let mut out = vec![0u8; v.len() * T::SIZE];
        for (x, o) in v.iter().zip(out.chunks_exact_mut(T::SIZE)) {
            x.store(o);
        }
        out
    }

    fn run<T: Elem>(op: usize, dt: usize, input: &[T], inout: &[T]) -> Vec<u8> {
        let o = Op::from_handle(op).unwrap();
        check("t", o, dt, "t").unwrap();
        let mut io = bytes(inout);
        apply(o, dt, &bytes(input), &mut io);
        io
    }

    #[test]
    fn integers() {
        assert_eq!(run(c::MPI_SUM, c::MPI_INT, &[10, 20, i32::MAX], &[1, 5, 1]), bytes(&[11, 25, i32::MIN]));
        assert_eq!(run(c::MPI_PROD, c::MPI_SHORT, &[3i16, -2], &[4, 7]), bytes(&[12i16, -14]));
        assert_eq!(run(c::MPI_MAX, c::MPI_UNSIGNED_CHAR, &[200u8, 5], &[5, 200]), bytes(&[200u8, 200]));
        assert_eq!(run(c::MPI_MIN, c::MPI_SIGNED_CHAR, &[-100i8, 5], &[5, 100]), bytes(&[-100i8, 5]));
        assert_eq!(run(c::MPI_MAX, c::MPI_UINT64_T, &[u64::MAX, 0], &[1, 1]), bytes(&[u64::MAX, 1]));
        assert_eq!(run(c::MPI_SUM, c::MPI_INTEGER16, &[1i128 << 100], &[1]), bytes(&[(1i128 << 100) + 1]));
        assert_eq!(run(c::MPI_SUM, c::MPI_COUNT, &[1i64 << 40], &[-1]), bytes(&[(1i64 << 40) - 1]));
    }

    #[test]
    fn logical_and_bitwise() {
        assert_eq!(run(c::MPI_LAND, c::MPI_INT, &[2, 0, 7, 0], &[-1, 5, 0, 0]), bytes(&[1, 0, 0, 0]));
        assert_eq!(run(c::MPI_LOR, c::MPI_C_BOOL, &[1u8, 0, 1, 0], &[1, 1, 0, 0]), bytes(&[1u8, 1, 1, 0]));
        assert_eq!(run(c::MPI_LXOR, c::MPI_LOGICAL, &[1u32, 0, 1, 0], &[1, 1, 0, 0]), bytes(&[0u32, 1, 1, 0]));
        assert_eq!(run(c::MPI_BAND, c::MPI_BYTE, &[0xf0u8, 0x3c], &[0x3c, 0xff]), bytes(&[0x30u8, 0x3c]));
        assert_eq!(run(c::MPI_BOR, c::MPI_UNSIGNED, &[0xf0u32], &[0x0f]), bytes(&[0xffu32]));
        assert_eq!(run(c::MPI_BXOR, c::MPI_AINT, &[0xf0i64], &[0xff]), bytes(&[0x0fi64]));
    }

    #[test]
    fn floating() {
        assert_eq!(run(c::MPI_PROD, c::MPI_DOUBLE, &[1.5f64, 2.0], &[1.5, 2.0]), bytes(&[2.25f64, 4.0]));
        assert_eq!(run(c::MPI_SUM, c::MPI_REAL, &[0.5f32, -1.0], &[0.25, 1.0]), bytes(&[0.75f32, 0.0]));
        assert_eq!(run(c::MPI_MIN, c::MPI_FLOAT, &[-0.5f32, 3.0], &[1.0, 2.0]), bytes(&[-0.5f32, 2.0]));
        // MPI_REAL2 is IEEE half: 1.5 * 3 = 4.5, 1 + 1 = 2, max(-2, 1) = 1.
        assert_eq!(run(c::MPI_PROD, c::MPI_REAL2, &[Half(0x3e00)], &[Half(0x4200)]), bytes(&[Half(0x4480)]));
        assert_eq!(run(c::MPI_SUM, c::MPI_REAL2, &[Half(0x3c00)], &[Half(0x3c00)]), bytes(&[Half(0x4000)]));
        assert_eq!(run(c::MPI_MAX, c::MPI_REAL2, &[Half(0xc000)], &[Half(0x3c00)]), bytes(&[Half(0x3c00)]));
        // REAL16 is IEEE quad: 3 + 0.5 = 3.5.
        let q = |se: u128, f: u128| Quad(se << 112 | f << 100);
        assert_eq!(run(c::MPI_SUM, c::MPI_REAL16, &[q(0x4000, 0x800)], &[q(0x3ffe, 0)]), bytes(&[q(0x4000, 0xc00)]));
    }

    #[test]
    fn long_double_keeps_its_padding() {
        // long double 3 and 4 (x87 on x86, quad elsewhere), padding bytes set to a marker.
        let ld = |x: u128| {
            let mut b = [0xa5u8; 16];
            if LONG_DOUBLE == Num::X87 {
                let e = 16383 + (127 - x.leading_zeros()) as u128;
                soft::X87.store((e << 64) | x << x.leading_zeros() >> 64, &mut b);
            } else {
                let e = 16383 + (127 - x.leading_zeros()) as u128;
                soft::QUAD.store((e << 112) | ((x << (x.leading_zeros() + 1)) >> 16), &mut b);
            }
            b.to_vec()
        };
        let mut io = ld(4);
        apply(Op::Prod, c::MPI_LONG_DOUBLE, &ld(3), &mut io);
        assert_eq!(io, ld(12));
        apply(Op::Sum, c::MPI_LONG_DOUBLE, &ld(3), &mut io);
        assert_eq!(io, ld(15));
        apply(Op::Min, c::MPI_LONG_DOUBLE, &ld(3), &mut io);
        assert_eq!(io, ld(3));
    }

    #[test]
    fn complex_products() {
        // (1 + 2i)(3 - 1i) = 5 + 5i
        assert_eq!(run(c::MPI_PROD, c::MPI_C_DOUBLE_COMPLEX, &[1.0f64, 2.0], &[3.0, -1.0]), bytes(&[5.0f64, 5.0]));
        assert_eq!(run(c::MPI_SUM, c::MPI_COMPLEX, &[1.0f32, 2.0], &[3.0, -1.0]), bytes(&[4.0f32, 1.0]));
        // The same in half precision (COMPLEX4): 1 = 0x3c00, 2 = 0x4000, 3 = 0x4200, -1 = 0xbc00, 5 = 0x4500.
        let h = |v: &[u16]| v.iter().map(|&x| Half(x as u128)).collect::<Vec<_>>();
        assert_eq!(
            run(c::MPI_PROD, c::MPI_COMPLEX4, &h(&[0x3c00, 0x4000]), &h(&[0x4200, 0xbc00])),
            bytes(&h(&[0x4500, 0x4500]))
        );
    }

    #[test]
    fn minloc_takes_the_lower_index_on_ties() {
        let pair = |v: f64, i: i32| [v.to_ne_bytes().to_vec(), i.to_ne_bytes().to_vec()].concat();
        let mut io = pair(3.0, 7);
        apply(Op::Minloc, c::MPI_DOUBLE_INT, &pair(3.0, 2), &mut io);
        assert_eq!(io, pair(3.0, 2));
        apply(Op::Maxloc, c::MPI_DOUBLE_INT, &pair(9.0, 5), &mut io);
        assert_eq!(io, pair(9.0, 5));
        apply(Op::Minloc, c::MPI_DOUBLE_INT, &pair(9.0, 8), &mut io);
        assert_eq!(io, pair(9.0, 5));
        let real = |v: f32, i: f32| bytes(&[v, i]);
        let mut io = real(1.0, 4.0);
        apply(Op::Maxloc, c::MPI_2REAL, &real(1.0, 3.0), &mut io);
        assert_eq!(io, real(1.0, 3.0));
        let mut io = bytes(&[5i16, 0, 0]);
        io.truncate(6);
        let mut inp = bytes(&[2i16, 0, 0]);
        inp.truncate(6);
        inp[2..].copy_from_slice(&9i32.to_ne_bytes());
        apply(Op::Minloc, c::MPI_SHORT_INT, &inp, &mut io);
        assert_eq!(io, inp);
    }

    #[test]
    fn the_standard_groups() {
        let bad = |op: Op, dt: usize| check("t", op, dt, "t").unwrap_err().class;
        assert_eq!(bad(Op::Sum, c::MPI_2INT), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Band, c::MPI_DOUBLE), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Sum, c::MPI_CHAR), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Max, c::MPI_C_DOUBLE_COMPLEX), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Land, c::MPI_INTEGER), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Land, c::MPI_DOUBLE), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Band, c::MPI_C_BOOL), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Minloc, c::MPI_INT), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Sum, c::MPI_WCHAR), c::MPI_ERR_OP);
        assert_eq!(bad(Op::Bor, c::MPI_PACKED), c::MPI_ERR_OP);
        for (op, dt) in [
            (Op::Bxor, c::MPI_BYTE),
            (Op::Sum, c::MPI_C_LONG_DOUBLE_COMPLEX),
            (Op::Band, c::MPI_INTEGER8),
            (Op::Max, c::MPI_OFFSET),
            (Op::Lxor, c::MPI_CXX_BOOL),
            (Op::Land, c::MPI_UINT16_T),
            (Op::Maxloc, c::MPI_LONG_DOUBLE_INT),
            (Op::Replace, c::MPI_CHAR),
        ] {
            assert!(check("t", op, dt, "t").is_ok(), "{} on {dt:#x}", op.name());
        }
    }
}
