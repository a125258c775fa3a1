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

/// The span that `n` elements of `lay` at `buf` lie in, and the offset of `buf` in it.
fn span_of(buf: *const c_void, n: usize, lay: &Layout) -> (UserBuf, isize) {
    let (lo, hi) = lay.span(n);
    // SAFETY: MPI requires `buf` to hold (to pack) or have room for (to unpack) `n` elements of
    // the datatype; (lo, hi) is exactly the bytes they cover.
    (unsafe { UserBuf::new((buf as usize).wrapping_add_signed(lo), (hi - lo) as usize) }, -lo)
}

/// Packs `n` elements at `buf` in native packed form.
fn pack_native(buf: *const c_void, n: usize, lay: &Layout) -> Vec<u8> {
    let (span, base) = span_of(buf, n, lay);
    let mut v = Vec::with_capacity(n * lay.size);
    lay.pack_from(&span, base, n, &mut v);
    v
}

/// Writes native packed bytes into `n` elements at `buf`.
fn unpack_native(buf: *mut c_void, n: usize, lay: &Layout, src: &[u8]) {
    let (span, base) = span_of(buf, n, lay);
    lay.unpack_into(&span, base, 0, src);
}

/// Where the packed bytes of a call lie in its packed buffer (capacity `cap`): from `*position`
/// on, `n` of them: checks that they fit and gives `*position`. `what` names them and the
/// capacity in the error ("packed bytes", "do not fit in outsize").
fn room(call: &str, cap: i64, position: &CountOut, n: usize, what: (&str, &str)) -> Result<usize> {
    let pos = position_of(call, position)?;
    let end = pos + n;
    if end as i128 > cap as i128 {
        let (bytes, room) = what;
        return Err(MpiError::new(c::MPI_ERR_TRUNCATE, format!("{call}: {n} {bytes} at position {pos} {room} {cap}")));
    }
    Ok(pos)
}

/// How a call writes the packed stream: in the native form or in `external32`.
#[derive(Clone, Copy)]
enum Rep {
    Native,
    External32,
}

impl Rep {
    /// Packed bytes of one element of `lay`.
    fn per(self, lay: &Layout) -> usize {
        match self {
            Rep::Native => lay.size,
            Rep::External32 => lay.external_size(),
        }
    }

    /// Checks that `n` elements' packed bytes (and their native bytes, which both forms
    /// build first) are addressable; gives the packed ones.
    fn bytes(self, call: &str, arg: &str, n: usize, lay: &Layout) -> Result<usize> {
        packed_bytes(call, arg, n, lay.size.max(self.per(lay)))?;
        Ok(n * self.per(lay))
    }
}

/// `MPI_Pack` and `MPI_Pack_external`: `incount` elements at `inbuf` appended to `outbuf`
/// (capacity `outsize`) at `*position`.
#[allow(clippy::too_many_arguments)]
fn pack_to(
    call: &str,
    rep: Rep,
    inbuf: *const c_void,
    incount: usize,
    lay: &Layout,
    outbuf: *mut c_void,
    outsize: i64,
    position: &CountOut,
) -> Result<()> {
    let n = rep.bytes(call, "incount", incount, lay)?;
    let native = pack_native(inbuf, incount, lay);
    let bytes = match rep {
        Rep::Native => native,
        Rep::External32 => lay.to_external(&native),
    };
    debug_assert_eq!(bytes.len(), n);
    let pos = room(call, outsize, position, n, ("packed bytes", "do not fit in outsize"))?;
    if n > 0 {
        crate::nonnull_mut(call, "outbuf", outbuf)?;
        // SAFETY: the caller provides `outsize` >= pos + n writable bytes at `outbuf`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (outbuf as *mut u8).add(pos), n) };
    }
    position.put((pos + n) as i64)
}

/// `MPI_Unpack` and `MPI_Unpack_external`: the packed bytes at `inbuf[*position..]` (capacity
/// `insize`) written into `outcount` elements at `outbuf`.
#[allow(clippy::too_many_arguments)]
fn unpack_from(
    call: &str,
    rep: Rep,
    inbuf: *const c_void,
    insize: i64,
    position: &CountOut,
    outbuf: *mut c_void,
    outcount: usize,
    lay: &Layout,
) -> Result<()> {
    let n = rep.bytes(call, "outcount", outcount, lay)?;
    let pos = room(call, insize, position, n, ("bytes to unpack", "run past insize"))?;
    if n == 0 {
        return position.put(pos as i64);
    }
    crate::nonnull(call, "inbuf", inbuf)?;
    // SAFETY: the caller provides `insize` >= pos + n readable bytes at `inbuf`.
    let src = unsafe { std::slice::from_raw_parts((inbuf as *const u8).add(pos), n) };
    match rep {
        Rep::Native => unpack_native(outbuf, outcount, lay, src),
        Rep::External32 => unpack_native(outbuf, outcount, lay, &lay.from_external(src)),
    }
    position.put((pos + n) as i64)
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
    pack_to(cx.name, Rep::Native, inbuf, incount, &datatype, outbuf, outsize, &position)
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
    unpack_from(cx.name, Rep::Native, inbuf, insize, &position, outbuf, outcount, &datatype)
}

pub(crate) fn pack_size(
    cx: Call,
    _l: &Lib,
    incount: usize,
    datatype: Dt,
    _comm: CommRef,
    size: CountOut,
) -> Result<()> {
    size.put(Rep::Native.bytes(cx.name, "incount", incount, &datatype)? as i64)
}

fn datarep(call: &str, rep: &str) -> Result<Rep> {
    if rep != "external32" {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: datarep {rep:?} is not supported (only \"external32\")"),
        ));
    }
    Ok(Rep::External32)
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
    pack_to(cx.name, datarep(cx.name, &rep)?, inbuf, incount, &datatype, outbuf, outsize, &position)
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
    unpack_from(cx.name, datarep(cx.name, &rep)?, inbuf, insize, &position, outbuf, outcount, &datatype)
}

pub(crate) fn pack_external_size(
    cx: Call,
    _l: &Lib,
    rep: String,
    incount: usize,
    datatype: Dt,
    size: CountOut,
) -> Result<()> {
    let rep = datarep(cx.name, &rep)?;
    size.put(rep.bytes(cx.name, "incount", incount, &datatype)? as i64)
}
