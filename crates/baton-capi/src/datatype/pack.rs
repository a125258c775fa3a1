//! Packing: `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size` in native form and their `_external`
//! twins in the `external32` representation, each in its `int` and `_c` forms.
//!
//! `position` is read and advanced through a [`CountOut`], so one implementation serves the
//! `int *`, `MPI_Aint *` and `MPI_Count *` forms.

use crate::state::{CommRef, Lib};
use crate::validate::{Call, CountOut, Dt};
use baton_abi::consts as c;
use baton_core::datatype::Layout;
use baton_core::error::{MpiError, Result};
use baton_transport::mem::UserBuf;
use std::ffi::c_void;

/// The position argument, which must not be negative.
fn position_of(call: &str, p: &CountOut) -> Result<usize> {
    let v = p.get();
    usize::try_from(v).map_err(|_| MpiError::negative(call, "position", v))
}

fn packed_bytes(call: &str, arg: &str, n: usize, per: usize) -> Result<usize> {
    n.checked_mul(per)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| MpiError::count_overflow(call, arg, n, format_args!("{per}-byte elements")))
}

/// Packs `n` elements at `buf` in native packed form.
fn pack_native(buf: *const c_void, n: usize, lay: &Layout) -> Vec<u8> {
    let (lo, hi) = lay.span(n);
    // SAFETY: MPI requires `buf` to hold `n` elements of the datatype; (lo, hi) is exactly the
    // bytes they cover.
    let span = unsafe { UserBuf::new((buf as usize).wrapping_add_signed(lo), (hi - lo) as usize) };
    let mut v = Vec::with_capacity(n * lay.size);
    lay.pack_from(&span, -lo, n, &mut v);
    v
}

/// Writes native packed bytes into `n` elements at `buf`.
fn unpack_native(buf: *mut c_void, n: usize, lay: &Layout, src: &[u8]) {
    let (lo, hi) = lay.span(n);
    // SAFETY: MPI requires `buf` to have room for `n` elements of the datatype.
    let span = unsafe { UserBuf::new((buf as usize).wrapping_add_signed(lo), (hi - lo) as usize) };
    lay.unpack_into(&span, -lo, 0, src);
}

/// Copies `bytes` into `outbuf[*position..]` (capacity `outsize`) and advances `position`.
fn put(call: &str, outbuf: *mut c_void, outsize: i64, position: &CountOut, bytes: &[u8]) -> Result<()> {
    let pos = position_of(call, position)?;
    let end = pos + bytes.len();
    if end as i128 > outsize as i128 {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!("{call}: {} packed bytes at position {pos} do not fit in outsize {outsize}", bytes.len()),
        ));
    }
    if !bytes.is_empty() {
        crate::nonnull_mut(call, "outbuf", outbuf)?;
        // SAFETY: the caller provides `outsize` >= end writable bytes at `outbuf`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (outbuf as *mut u8).add(pos), bytes.len()) };
    }
    position.put(end as i64)
}

/// The `n` bytes of `inbuf[*position..]` (capacity `insize`), advancing `position`.
fn take<'a>(call: &str, inbuf: *const c_void, insize: i64, position: &CountOut, n: usize) -> Result<&'a [u8]> {
    let pos = position_of(call, position)?;
    let end = pos + n;
    if end as i128 > insize as i128 {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!("{call}: {n} bytes to unpack at position {pos} run past insize {insize}"),
        ));
    }
    position.put(end as i64)?;
    if n == 0 {
        return Ok(&[]);
    }
    crate::nonnull(call, "inbuf", inbuf)?;
    // SAFETY: the caller provides `insize` >= end readable bytes at `inbuf`.
    Ok(unsafe { std::slice::from_raw_parts((inbuf as *const u8).add(pos), n) })
}

pub(crate) fn pack(
    cx: Call,
    _l: &Lib,
    inbuf: *const c_void,
    incount: usize,
    datatype: Dt,
    outbuf: *mut c_void,
    outsize: i64,
    position: CountOut,
    _comm: CommRef,
) -> Result<()> {
    packed_bytes(cx.name, "incount", incount, datatype.size)?;
    put(cx.name, outbuf, outsize, &position, &pack_native(inbuf, incount, &datatype))
}

pub(crate) fn unpack(
    cx: Call,
    _l: &Lib,
    inbuf: *const c_void,
    insize: i64,
    position: CountOut,
    outbuf: *mut c_void,
    outcount: usize,
    datatype: Dt,
    _comm: CommRef,
) -> Result<()> {
    let bytes = packed_bytes(cx.name, "outcount", outcount, datatype.size)?;
    let src = take(cx.name, inbuf, insize, &position, bytes)?;
    unpack_native(outbuf, outcount, &datatype, src);
    Ok(())
}

pub(crate) fn pack_size(
    cx: Call,
    _l: &Lib,
    incount: usize,
    datatype: Dt,
    _comm: CommRef,
    size: CountOut,
) -> Result<()> {
    size.put(packed_bytes(cx.name, "incount", incount, datatype.size)? as i64)
}

fn datarep(call: &str, rep: &str) -> Result<()> {
    if rep != "external32" {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: datarep {rep:?} is not supported (only \"external32\")"),
        ));
    }
    Ok(())
}

pub(crate) fn pack_external(
    cx: Call,
    _l: &Lib,
    rep: String,
    inbuf: *const c_void,
    incount: usize,
    datatype: Dt,
    outbuf: *mut c_void,
    outsize: i64,
    position: CountOut,
) -> Result<()> {
    datarep(cx.name, &rep)?;
    let lay: &Layout = &datatype;
    packed_bytes(cx.name, "incount", incount, lay.size.max(lay.external_size()))?;
    let ext = lay.to_external(&pack_native(inbuf, incount, lay));
    put(cx.name, outbuf, outsize, &position, &ext)
}

pub(crate) fn unpack_external(
    cx: Call,
    _l: &Lib,
    rep: String,
    inbuf: *const c_void,
    insize: i64,
    position: CountOut,
    outbuf: *mut c_void,
    outcount: usize,
    datatype: Dt,
) -> Result<()> {
    datarep(cx.name, &rep)?;
    let lay: &Layout = &datatype;
    packed_bytes(cx.name, "outcount", outcount, lay.size.max(lay.external_size()))?;
    let src = take(cx.name, inbuf, insize, &position, outcount * lay.external_size())?;
    unpack_native(outbuf, outcount, lay, &lay.from_external(src));
    Ok(())
}

pub(crate) fn pack_external_size(
    cx: Call,
    _l: &Lib,
    rep: String,
    incount: usize,
    datatype: Dt,
    size: CountOut,
) -> Result<()> {
    datarep(cx.name, &rep)?;
    size.put(packed_bytes(cx.name, "incount", incount, datatype.external_size())? as i64)
}
