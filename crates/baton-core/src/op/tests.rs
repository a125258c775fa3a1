use super::kernels::{Elem, Half, Quad};
use super::soft_float as soft;
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
fn char_reduces_as_the_platform_char() {
    let signed = std::ffi::c_char::MIN != 0;
    // 0xf0 is -16 as a signed char, 240 as an unsigned one.
    let want = if signed { 5u8 } else { 0xf0 };
    assert_eq!(run(c::MPI_MAX, c::MPI_CHAR, &[0xf0u8], &[5u8]), bytes(&[want]));
    assert_eq!(run(c::MPI_SUM, c::MPI_CHAR, &[100u8], &[27u8]), bytes(&[127u8]));
    assert_eq!(run(c::MPI_LAND, c::MPI_COUNT, &[2i64, 0], &[7i64, 7]), bytes(&[1i64, 0]));
}

#[test]
fn the_standard_groups() {
    let bad = |op: Op, dt: usize| check("t", op, dt, "t").unwrap_err().class;
    assert_eq!(bad(Op::Sum, c::MPI_2INT), c::MPI_ERR_OP);
    assert_eq!(bad(Op::Band, c::MPI_DOUBLE), c::MPI_ERR_OP);
    assert_eq!(bad(Op::Max, c::MPI_C_DOUBLE_COMPLEX), c::MPI_ERR_OP);
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
        // Beyond the standard, as MPICH: MPI_CHAR as a C integer, logical operations on the
        // Fortran integer and multi-language types.
        (Op::Sum, c::MPI_CHAR),
        (Op::Max, c::MPI_CHAR),
        (Op::Bxor, c::MPI_CHAR),
        (Op::Land, c::MPI_INTEGER),
        (Op::Lor, c::MPI_AINT),
        (Op::Lxor, c::MPI_COUNT),
    ] {
        assert!(check("t", op, dt, "t").is_ok(), "{} on {dt:#x}", op.name());
    }
}
