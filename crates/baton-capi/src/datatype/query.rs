//! What a datatype is: size and extents (`MPI_Type_size`, `MPI_Type_get_extent`,
//! `MPI_Type_get_true_extent` in their `int`, `_c` and `_x` forms), and the constructor call
//! that made it (`MPI_Type_get_envelope`, `MPI_Type_get_contents`).

use crate::state::Lib;
use crate::validate::{Call, CountOut, Dt, Out};
use baton_abi::consts as c;
use baton_core::datatype::Envelope;
use baton_core::error::{MpiError, Result};
use std::ffi::c_int;

#[inline]
pub(crate) fn size(_cx: Call, datatype: Dt, size: CountOut) -> Result<()> {
    size.put_or_undefined(datatype.size as i64);
    Ok(())
}

#[inline]
pub(crate) fn extent(_cx: Call, datatype: Dt, lb: CountOut, extent: CountOut) -> Result<()> {
    lb.put(datatype.lb as i64)?;
    extent.put(datatype.extent as i64)
}

#[inline]
pub(crate) fn true_extent(_cx: Call, datatype: Dt, true_lb: CountOut, true_extent: CountOut) -> Result<()> {
    true_lb.put(datatype.true_lb as i64)?;
    true_extent.put(datatype.true_extent as i64)
}

/// The envelope of a derived type; an error for a predefined one, or for one made by a
/// large-count constructor when the caller has nowhere to put large counts.
fn envelope_of(cx: Call, dt: &Dt, large: bool) -> Result<Option<&Envelope>> {
    let e = dt.envelope.as_deref();
    if !large && e.is_some_and(|e| !e.counts.is_empty()) {
        return Err(MpiError::new(
            c::MPI_ERR_TYPE,
            format!("{}: datatype {:#x} was made by a large-count constructor; use {}_c", cx.name, dt.handle, cx.name),
        ));
    }
    Ok(e)
}

pub(crate) fn envelope(
    cx: Call,
    datatype: Dt,
    num_integers: CountOut,
    num_addresses: CountOut,
    num_large_counts: Option<Out<i64>>,
    num_datatypes: CountOut,
    combiner: Out<c_int>,
) -> Result<()> {
    let e = envelope_of(cx, &datatype, num_large_counts.is_some())?;
    let n = e.map_or([0; 4], |e| [e.ints.len(), e.addrs.len(), e.counts.len(), e.types.len()]);
    num_integers.put(n[0] as i64)?;
    num_addresses.put(n[1] as i64)?;
    if let Some(p) = num_large_counts {
        p.put(n[2] as i64);
    }
    num_datatypes.put(n[3] as i64)?;
    combiner.put(e.map_or(c::MPI_COMBINER_NAMED, |e| e.combiner));
    Ok(())
}

/// Writes `v` to the C array `p` of capacity `max`.
fn fill<T: Copy>(call: &str, arg: &str, p: *mut T, max: i64, v: &[T]) -> Result<()> {
    if (max as i128) < v.len() as i128 {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: max for {arg} is {max} but the datatype has {} values", v.len()),
        ));
    }
    if v.is_empty() {
        return Ok(());
    }
    crate::nonnull_mut(call, arg, p)?;
    // SAFETY: the caller provides `max` >= v.len() writable values at `p` (checked non-null).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(())
}

pub(crate) fn contents(
    cx: Call,
    l: &Lib,
    datatype: Dt,
    max_integers: i64,
    max_addresses: i64,
    max_large_counts: Option<i64>,
    max_datatypes: i64,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut isize,
    array_of_large_counts: Option<*mut i64>,
    array_of_datatypes: *mut usize,
) -> Result<()> {
    let call = cx.name;
    let Some(e) = envelope_of(cx, &datatype, max_large_counts.is_some())? else {
        return Err(MpiError::new(
            c::MPI_ERR_TYPE,
            format!("{call}: datatype {:#x} is predefined (MPI_COMBINER_NAMED) and has no contents", datatype.handle),
        ));
    };
    fill(call, "array_of_integers", array_of_integers, max_integers, &e.ints)?;
    fill(call, "array_of_addresses", array_of_addresses, max_addresses, &e.addrs)?;
    if let (Some(p), Some(max)) = (array_of_large_counts, max_large_counts) {
        fill(call, "array_of_large_counts", p, max, &e.counts)?;
    }
    if (max_datatypes as i128) < e.types.len() as i128 {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: max_datatypes is {max_datatypes} but the datatype has {} datatypes", e.types.len()),
        ));
    }
    crate::nonnull_mut(call, "array_of_datatypes", array_of_datatypes)?;
    // Predefined types are given back as they are, derived ones as new handles the
    // application frees.
    let handles: Vec<usize> = {
        let mut t = l.t();
        e.types
            .iter()
            .map(|a| if a.predefined != 0 { a.predefined } else { t.datatypes.insert((a.layout.clone(), a.committed)) })
            .collect()
    };
    fill(call, "array_of_datatypes", array_of_datatypes, max_datatypes, &handles)
}
