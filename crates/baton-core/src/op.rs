//! Predefined reduction operations on packed data.
//!
//! Reductions work on the packed byte stream of a predefined datatype (pair types packed as
//! value then index), so they never see padding. Each loop reads fixed-size chunks and writes
//! them back, which the compiler turns into vector code for the common types.

use crate::error::{MpiError, Result};
use baton_abi::consts as c;

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
}

/// How a predefined type's values combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Int {
        size: usize,
        signed: bool,
    },
    Float {
        size: usize,
    },
    Complex {
        size: usize,
    },
    Logical {
        size: usize,
    },
    Byte,
    /// (value class, index size) for MINLOC/MAXLOC.
    Pair {
        value: PairValue,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PairValue {
    F32,
    F64,
    I16,
    I32,
    I64,
}

fn class(dt: usize) -> Option<Class> {
    use Class::*;
    let long = std::mem::size_of::<libc::c_long>();
    Some(match dt {
        c::MPI_SHORT | c::MPI_INT16_T | c::MPI_INTEGER2 => Int { size: 2, signed: true },
        c::MPI_INT | c::MPI_INT32_T | c::MPI_INTEGER | c::MPI_INTEGER4 => Int { size: 4, signed: true },
        c::MPI_LONG => Int { size: long, signed: true },
        c::MPI_LONG_LONG | c::MPI_INT64_T | c::MPI_INTEGER8 | c::MPI_AINT | c::MPI_OFFSET | c::MPI_COUNT => {
            Int { size: 8, signed: true }
        }
        c::MPI_SIGNED_CHAR | c::MPI_INT8_T | c::MPI_INTEGER1 => Int { size: 1, signed: true },
        c::MPI_UNSIGNED_CHAR | c::MPI_UINT8_T => Int { size: 1, signed: false },
        c::MPI_UNSIGNED_SHORT | c::MPI_UINT16_T => Int { size: 2, signed: false },
        c::MPI_UNSIGNED | c::MPI_UINT32_T => Int { size: 4, signed: false },
        c::MPI_UNSIGNED_LONG => Int { size: long, signed: false },
        c::MPI_UNSIGNED_LONG_LONG | c::MPI_UINT64_T => Int { size: 8, signed: false },
        c::MPI_FLOAT | c::MPI_REAL | c::MPI_REAL4 => Float { size: 4 },
        c::MPI_DOUBLE | c::MPI_DOUBLE_PRECISION | c::MPI_REAL8 => Float { size: 8 },
        c::MPI_C_FLOAT_COMPLEX | c::MPI_CXX_FLOAT_COMPLEX | c::MPI_COMPLEX | c::MPI_COMPLEX8 => Complex { size: 4 },
        c::MPI_C_DOUBLE_COMPLEX | c::MPI_CXX_DOUBLE_COMPLEX | c::MPI_DOUBLE_COMPLEX | c::MPI_COMPLEX16 => {
            Complex { size: 8 }
        }
        c::MPI_C_BOOL | c::MPI_CXX_BOOL | c::MPI_LOGICAL1 => Logical { size: 1 },
        c::MPI_LOGICAL | c::MPI_LOGICAL4 => Logical { size: 4 },
        c::MPI_LOGICAL2 => Logical { size: 2 },
        c::MPI_LOGICAL8 => Logical { size: 8 },
        c::MPI_BYTE => Byte,
        c::MPI_FLOAT_INT | c::MPI_2REAL => Pair { value: PairValue::F32 },
        c::MPI_DOUBLE_INT | c::MPI_2DOUBLE_PRECISION => Pair { value: PairValue::F64 },
        c::MPI_SHORT_INT => Pair { value: PairValue::I16 },
        c::MPI_2INT | c::MPI_2INTEGER => Pair { value: PairValue::I32 },
        c::MPI_LONG_INT => Pair { value: if long == 8 { PairValue::I64 } else { PairValue::I32 } },
        _ => return None,
    })
}

/// Index size (bytes) of a pair type in packed form.
fn pair_index_size(dt: usize) -> usize {
    match dt {
        c::MPI_2REAL => 4,
        c::MPI_2DOUBLE_PRECISION => 8,
        _ => 4,
    }
}

/// Checks that `op` is defined for datatype `dt` (the `MPI_ERR_OP` rules of the standard).
pub fn check(call: &str, op: Op, dt: usize, dt_name: &str) -> Result<()> {
    let cl = class(dt);
    let ok = match (op, cl) {
        (Op::Replace | Op::NoOp, _) => true,
        (_, None) => false,
        (Op::Sum | Op::Prod, Some(Class::Int { .. } | Class::Float { .. } | Class::Complex { .. })) => true,
        (Op::Max | Op::Min, Some(Class::Int { .. } | Class::Float { .. })) => true,
        (Op::Land | Op::Lor | Op::Lxor, Some(Class::Int { .. } | Class::Logical { .. })) => true,
        (Op::Band | Op::Bor | Op::Bxor, Some(Class::Int { .. } | Class::Byte | Class::Logical { .. })) => true,
        (Op::Minloc | Op::Maxloc, Some(Class::Pair { .. })) => true,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(MpiError::new(c::MPI_ERR_OP, format!("{call}: {} is not defined for datatype {dt_name}", op.name())))
    }
}

macro_rules! each {
    ($t:ty, $inp:expr, $io:expr, |$a:ident, $b:ident| $e:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (o, i) in $io.chunks_exact_mut(N).zip($inp.chunks_exact(N)) {
            let $a = <$t>::from_ne_bytes(i.try_into().unwrap());
            let $b = <$t>::from_ne_bytes((&*o).try_into().unwrap());
            o.copy_from_slice(&($e).to_ne_bytes());
        }
    }};
}

macro_rules! int_op {
    ($t:ty, $op:expr, $inp:expr, $io:expr) => {
        match $op {
            Op::Sum => each!($t, $inp, $io, |a, b| b.wrapping_add(a)),
            Op::Prod => each!($t, $inp, $io, |a, b| b.wrapping_mul(a)),
            Op::Max => each!($t, $inp, $io, |a, b| if a > b { a } else { b }),
            Op::Min => each!($t, $inp, $io, |a, b| if a < b { a } else { b }),
            Op::Land => each!($t, $inp, $io, |a, b| ((a != 0) && (b != 0)) as $t),
            Op::Lor => each!($t, $inp, $io, |a, b| ((a != 0) || (b != 0)) as $t),
            Op::Lxor => each!($t, $inp, $io, |a, b| ((a != 0) != (b != 0)) as $t),
            Op::Band => each!($t, $inp, $io, |a, b| a & b),
            Op::Bor => each!($t, $inp, $io, |a, b| a | b),
            Op::Bxor => each!($t, $inp, $io, |a, b| a ^ b),
            _ => unreachable!(),
        }
    };
}

macro_rules! float_op {
    ($t:ty, $op:expr, $inp:expr, $io:expr) => {
        match $op {
            Op::Sum => each!($t, $inp, $io, |a, b| b + a),
            Op::Prod => each!($t, $inp, $io, |a, b| b * a),
            Op::Max => each!($t, $inp, $io, |a, b| if a > b { a } else { b }),
            Op::Min => each!($t, $inp, $io, |a, b| if a < b { a } else { b }),
            _ => unreachable!(),
        }
    };
}

macro_rules! complex_op {
    ($t:ty, $op:expr, $inp:expr, $io:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (o, i) in $io.chunks_exact_mut(2 * N).zip($inp.chunks_exact(2 * N)) {
            let get = |s: &[u8], k: usize| <$t>::from_ne_bytes(s[k * N..(k + 1) * N].try_into().unwrap());
            let (ar, ai, br, bi) = (get(i, 0), get(i, 1), get(o, 0), get(o, 1));
            let (r, im) = match $op {
                Op::Sum => (br + ar, bi + ai),
                _ => (br * ar - bi * ai, br * ai + bi * ar),
            };
            o[..N].copy_from_slice(&r.to_ne_bytes());
            o[N..].copy_from_slice(&im.to_ne_bytes());
        }
    }};
}

macro_rules! loc_op {
    ($t:ty, $ix:ty, $op:expr, $inp:expr, $io:expr) => {{
        const V: usize = std::mem::size_of::<$t>();
        const I: usize = std::mem::size_of::<$ix>();
        for (o, i) in $io.chunks_exact_mut(V + I).zip($inp.chunks_exact(V + I)) {
            let av = <$t>::from_ne_bytes(i[..V].try_into().unwrap());
            let bv = <$t>::from_ne_bytes(o[..V].try_into().unwrap());
            let ai = <$ix>::from_ne_bytes(i[V..].try_into().unwrap());
            let bi = <$ix>::from_ne_bytes(o[V..].try_into().unwrap());
            let take_a = match $op {
                Op::Minloc => av < bv || (av == bv && ai < bi),
                _ => av > bv || (av == bv && ai < bi),
            };
            if take_a {
                o.copy_from_slice(i);
            }
        }
    }};
}

/// `inout = input op inout`, elementwise over packed data of datatype `dt`.
/// The caller has checked the pair with [`check`] and that both slices have the same length.
pub fn apply(op: Op, dt: usize, input: &[u8], inout: &mut [u8]) {
    match op {
        Op::NoOp => return,
        Op::Replace => {
            inout.copy_from_slice(input);
            return;
        }
        _ => {}
    }
    match class(dt).expect("checked") {
        Class::Int { size: 1, signed: true } => int_op!(i8, op, input, inout),
        Class::Int { size: 1, signed: false } => int_op!(u8, op, input, inout),
        Class::Int { size: 2, signed: true } => int_op!(i16, op, input, inout),
        Class::Int { size: 2, signed: false } => int_op!(u16, op, input, inout),
        Class::Int { size: 4, signed: true } => int_op!(i32, op, input, inout),
        Class::Int { size: 4, signed: false } => int_op!(u32, op, input, inout),
        Class::Int { signed: true, .. } => int_op!(i64, op, input, inout),
        Class::Int { signed: false, .. } => int_op!(u64, op, input, inout),
        Class::Float { size: 4 } => float_op!(f32, op, input, inout),
        Class::Float { .. } => float_op!(f64, op, input, inout),
        Class::Complex { size: 4 } => complex_op!(f32, op, input, inout),
        Class::Complex { .. } => complex_op!(f64, op, input, inout),
        Class::Logical { size: 1 } | Class::Byte => int_op!(u8, op, input, inout),
        Class::Logical { size: 2 } => int_op!(u16, op, input, inout),
        Class::Logical { size: 4 } => int_op!(u32, op, input, inout),
        Class::Logical { .. } => int_op!(u64, op, input, inout),
        Class::Pair { value } => {
            let ix = pair_index_size(dt);
            match (value, ix) {
                (PairValue::F32, 4) if dt == c::MPI_2REAL => loc_op!(f32, f32_index, op, input, inout),
                (PairValue::F32, _) => loc_op!(f32, i32, op, input, inout),
                (PairValue::F64, 8) => loc_op!(f64, f64_index, op, input, inout),
                (PairValue::F64, _) => loc_op!(f64, i32, op, input, inout),
                (PairValue::I16, _) => loc_op!(i16, i32, op, input, inout),
                (PairValue::I32, _) => loc_op!(i32, i32, op, input, inout),
                (PairValue::I64, _) => loc_op!(i64, i32, op, input, inout),
            }
        }
    }
}

// MPI_2REAL and MPI_2DOUBLE_PRECISION carry their index as a floating value.
#[allow(non_camel_case_types)]
type f32_index = f32;
#[allow(non_camel_case_types)]
type f64_index = f64;

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn sums_and_extremes() {
        let mut io = ints(&[1, 5, -3]);
        apply(Op::Sum, c::MPI_INT, &ints(&[10, 20, 30]), &mut io);
        assert_eq!(io, ints(&[11, 25, 27]));
        apply(Op::Max, c::MPI_INT, &ints(&[100, 0, 0]), &mut io);
        assert_eq!(io, ints(&[100, 25, 27]));
        let mut f: Vec<u8> = [1.5f64, 2.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        apply(Op::Prod, c::MPI_DOUBLE, &f.clone(), &mut f);
        assert_eq!(f, [2.25f64, 4.0].iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>());
    }

    #[test]
    fn minloc_takes_the_lower_index_on_ties() {
        let pair = |v: f64, i: i32| [v.to_ne_bytes().to_vec(), i.to_ne_bytes().to_vec()].concat();
        let mut io = pair(3.0, 7);
        apply(Op::Minloc, c::MPI_DOUBLE_INT, &pair(3.0, 2), &mut io);
        assert_eq!(io, pair(3.0, 2));
        apply(Op::Maxloc, c::MPI_DOUBLE_INT, &pair(9.0, 5), &mut io);
        assert_eq!(io, pair(9.0, 5));
    }

    #[test]
    fn invalid_pairs_are_op_errors() {
        assert_eq!(check("t", Op::Sum, c::MPI_2INT, "MPI_2INT").unwrap_err().class, c::MPI_ERR_OP);
        assert_eq!(check("t", Op::Band, c::MPI_DOUBLE, "MPI_DOUBLE").unwrap_err().class, c::MPI_ERR_OP);
        assert!(check("t", Op::Bxor, c::MPI_BYTE, "MPI_BYTE").is_ok());
        assert!(check("t", Op::Sum, c::MPI_C_DOUBLE_COMPLEX, "c").is_ok());
    }
}
