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
//! elsewhere) go through the software floating point of [`soft_float`], correctly rounded to
//! nearest even as the hardware (or libgcc) does it for C and Fortran.
//!
//! The important types: [`Op`] (a predefined operation), [`Kind`] (what a datatype is to the
//! reductions: its [`Group`] and number format) and [`Reducer`] (the combining function a
//! collective runs, predefined or user-defined). The element kernels live in [`kernels`];
//! [`fortran`] keeps the Fortran `LOGICAL` values a Fortran layer registers.

pub mod fortran;
mod kernels;
mod soft_float;
#[cfg(test)]
mod tests;

use crate::error::{MpiError, Result};
use baton_abi::consts as c;
pub use fortran::{booleans as fortran_booleans, set_booleans as set_fortran_booleans};
use kernels::{complex, floating, integer, loc, Ext80, Half, Quad};

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

    /// Whether this operation applies to datatypes of group `g`: the standard's table, widened
    /// as MPICH widens it (programs rely on it): the logical operations also take the Fortran
    /// integer and multi-language types (`MPI_AINT`, `MPI_OFFSET`, `MPI_COUNT`). README's
    /// "Beyond the standard" lists these.
    pub fn allowed(self, g: Group) -> bool {
        use Group::*;
        match self {
            Op::Replace | Op::NoOp => true,
            Op::Max | Op::Min => matches!(g, CInteger | FortranInteger | MultiLanguage | Floating),
            Op::Sum | Op::Prod => matches!(g, CInteger | FortranInteger | MultiLanguage | Floating | Complex),
            Op::Land | Op::Lor | Op::Lxor => matches!(g, CInteger | FortranInteger | MultiLanguage | Logical),
            Op::Band | Op::Bor | Op::Bxor => matches!(g, CInteger | FortranInteger | MultiLanguage | Byte),
            Op::Minloc | Op::Maxloc => g == Pair,
        }
    }
}

/// The standard's groups of basic datatypes for reductions. `MPI_WCHAR` and `MPI_CHARACTER`
/// hold printable characters and belong to none; `MPI_CHAR`, which the standard leaves out too,
/// counts as a C integer here as in MPICH (the OSU benchmarks reduce it); the optional Fortran
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
    /// A Fortran `LOGICAL`, whose true and false may be registered (`MPI_Abi_set_fortran_booleans`).
    fortran_logical: bool,
}

impl Kind {
    /// Whether packed data of both kinds is combined by the same code (a derived datatype may
    /// mix such basic types, e.g. `MPI_INT` and `MPI_INT32_T`).
    pub fn same_kernel(self, o: Kind) -> bool {
        self.num == o.num && self.shape == o.shape && self.fortran_logical == o.fortran_logical
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
        // A C `char`, signed or not as the platform's is (beyond the standard, see `Group`).
        c::MPI_CHAR if std::ffi::c_char::MIN == 0 => (CInteger, U8, Shape::Scalar),
        c::MPI_CHAR => (CInteger, I8, Shape::Scalar),
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
    let fortran_logical = matches!(
        dt,
        c::MPI_LOGICAL | c::MPI_LOGICAL1 | c::MPI_LOGICAL2 | c::MPI_LOGICAL4 | c::MPI_LOGICAL8 | c::MPI_LOGICAL16
    );
    Some(Kind { group, num, shape, fortran_logical })
}

/// Whether predefined datatype `dt` is a plain integer (what a hardware fetch-and-add sums).
pub fn is_integer(dt: usize) -> bool {
    kind(dt).is_some_and(|k| {
        matches!(k.group, Group::CInteger | Group::FortranInteger | Group::MultiLanguage)
            && k.shape == Shape::Scalar
            && !k.fortran_logical
    })
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

/// `$kernel::<T>(args)` with `T` the element type of floating format `$num`.
macro_rules! by_float {
    ($num:expr, $kernel:ident($($arg:expr),*)) => {
        match $num {
            Num::F16 => $kernel::<Half>($($arg),*),
            Num::F32 => $kernel::<f32>($($arg),*),
            Num::F64 => $kernel::<f64>($($arg),*),
            Num::X87 => $kernel::<Ext80>($($arg),*),
            Num::F128 => $kernel::<Quad>($($arg),*),
            n => debug_assert!(false, "{n:?} is not a floating format"),
        }
    };
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
    if k.fortran_logical && matches!(op, Op::Land | Op::Lor | Op::Lxor) {
        let size = match k.num {
            U8 => 1,
            U16 => 2,
            U32 => 4,
            U64 => 8,
            _ => 16,
        };
        if fortran::logical(op, size, input, inout) {
            return;
        }
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
            float => by_float!(float, floating(op, input, inout)),
        },
        Shape::Complex => by_float!(k.num, complex(op, input, inout)),
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
