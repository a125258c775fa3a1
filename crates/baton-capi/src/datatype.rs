//! Derived datatypes: constructors, envelope and contents, packing (native and external32),
//! names, size matching and attributes on datatypes.
//!
//! Every function is written once over 64-bit counts; the `int` and `_c` entry points are thin
//! and differ only in how the constructor's arguments are recorded for
//! `MPI_Type_get_contents` (the `_c` forms record counts and displacements as large counts).
//! Names and attributes of datatypes live in this module's own table, keyed by handle, so that
//! the shared handle table keeps its `(layout, committed)` entries.

use crate::errors::guard;
use crate::nonnull_mut;
use crate::p2p::{dtype, dtype_any};
use crate::state::{lib, Lib};
use baton_abi::consts as c;
use baton_core::datatype::{predefined, Envelope, Layout, TypeArg};
use baton_core::error::{MpiError, Result};
use baton_transport::mem::UserBuf;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

const W: usize = c::MPI_COMM_WORLD;

fn out<T: Copy>(call: &str, arg: &str, p: *mut T, v: T) -> Result<()> {
    nonnull_mut(call, arg, p)?;
    // SAFETY: checked non-null; the caller provides room for one value.
    unsafe { *p = v };
    Ok(())
}

/// Reads the C array `p` of `n` values; a null pointer with `n > 0` is MPI_ERR_ARG.
fn arr<T: Copy, U>(call: &str, arg: &str, p: *mut T, n: usize, f: impl Fn(T) -> U) -> Result<Vec<U>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    nonnull_mut(call, arg, p)?;
    // SAFETY: the caller provides `n` readable values at `p` (checked non-null).
    let s = unsafe { std::slice::from_raw_parts(p as *const T, n) };
    Ok(s.iter().map(|&v| f(v)).collect())
}

fn count(call: &str, arg: &str, n: i64) -> Result<usize> {
    usize::try_from(n).map_err(|_| MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {arg} {n} is negative")))
}

fn blocklens(call: &str, v: &[i64]) -> Result<()> {
    match v.iter().position(|&b| b < 0) {
        Some(i) => Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: blocklength[{i}] = {} is negative", v[i]))),
        None => Ok(()),
    }
}

fn in_call(call: &str) -> impl Fn(MpiError) -> MpiError + '_ {
    move |e| MpiError::new(e.class, format!("{call}: {}", e.msg))
}

/// A datatype argument of a constructor, recorded for `MPI_Type_get_contents`.
fn type_arg(call: &str, h: usize) -> Result<TypeArg> {
    let (layout, committed) = dtype_any(call, h)?;
    Ok(TypeArg { predefined: if predefined(h).is_some() { h } else { 0 }, layout, committed })
}

fn register(l: &Lib, call: &str, newtype: *mut usize, lay: Layout) -> Result<()> {
    nonnull_mut(call, "newtype", newtype)?;
    let h = l.t().datatypes.insert((Arc::new(lay), false));
    out(call, "newtype", newtype, h)
}

/// How a constructor's integer arguments are recorded: as `int`s and addresses, or (for the
/// `_c` forms) as large counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Int,
    Large,
}

struct Args {
    ints: Vec<i32>,
    addrs: Vec<isize>,
    counts: Vec<i64>,
}

impl Args {
    fn new() -> Args {
        Args { ints: Vec::new(), addrs: Vec::new(), counts: Vec::new() }
    }
    /// An argument that is an `int` in the plain form.
    fn int(&mut self, form: Form, v: &[i64]) -> &mut Args {
        match form {
            Form::Int => self.ints.extend(v.iter().map(|&x| x as i32)),
            Form::Large => self.counts.extend_from_slice(v),
        }
        self
    }
    /// An argument that is an `MPI_Aint` in the plain form.
    fn addr(&mut self, form: Form, v: &[isize]) -> &mut Args {
        match form {
            Form::Int => self.addrs.extend_from_slice(v),
            Form::Large => self.counts.extend(v.iter().map(|&x| x as i64)),
        }
        self
    }
    /// An argument that stays an `int` in both forms.
    fn always_int(&mut self, v: &[i64]) -> &mut Args {
        self.ints.extend(v.iter().map(|&x| x as i32));
        self
    }
    fn envelope(&mut self, combiner: i32, types: Vec<TypeArg>) -> Envelope {
        Envelope {
            combiner,
            ints: std::mem::take(&mut self.ints),
            addrs: std::mem::take(&mut self.addrs),
            counts: std::mem::take(&mut self.counts),
            types,
        }
    }
}

// ----- constructors -----

fn contiguous(form: Form, n: i64, old: usize, newtype: *mut usize) -> c_int {
    guard(W, || {
        let call = if form == Form::Int { "MPI_Type_contiguous" } else { "MPI_Type_contiguous_c" };
        let l = lib(call)?;
        count(call, "count", n)?;
        let t = type_arg(call, old)?;
        let lay = Layout::try_contiguous(n, &t.layout).map_err(in_call(call))?;
        let env = Args::new().int(form, &[n]).envelope(c::MPI_COMBINER_CONTIGUOUS, vec![t]);
        register(l, call, newtype, lay.with_envelope(env))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_contiguous(n: c_int, old: usize, newtype: *mut usize) -> c_int {
    contiguous(Form::Int, n as i64, old, newtype)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_contiguous_c(n: i64, old: usize, newtype: *mut usize) -> c_int {
    contiguous(Form::Large, n, old, newtype)
}

/// Vector (stride in extents) and hvector (stride in bytes).
fn vector(form: Form, bytes: bool, n: i64, bl: i64, stride: i64, old: usize, newtype: *mut usize) -> c_int {
    guard(W, || {
        let call = match (bytes, form) {
            (false, Form::Int) => "MPI_Type_vector",
            (false, Form::Large) => "MPI_Type_vector_c",
            (true, Form::Int) => "MPI_Type_create_hvector",
            (true, Form::Large) => "MPI_Type_create_hvector_c",
        };
        let l = lib(call)?;
        count(call, "count", n)?;
        blocklens(call, &[bl])?;
        let t = type_arg(call, old)?;
        let mut a = Args::new();
        let (lay, comb) = if bytes {
            a.int(form, &[n, bl]).addr(form, &[stride as isize]);
            (Layout::hvector(n, bl, stride as isize, &t.layout), c::MPI_COMBINER_HVECTOR)
        } else {
            a.int(form, &[n, bl, stride]);
            (Layout::vector(n, bl, stride, &t.layout), c::MPI_COMBINER_VECTOR)
        };
        let lay = lay.map_err(in_call(call))?;
        register(l, call, newtype, lay.with_envelope(a.envelope(comb, vec![t])))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_vector(n: c_int, bl: c_int, stride: c_int, old: usize, nt: *mut usize) -> c_int {
    vector(Form::Int, false, n as i64, bl as i64, stride as i64, old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_vector_c(n: i64, bl: i64, stride: i64, old: usize, nt: *mut usize) -> c_int {
    vector(Form::Large, false, n, bl, stride, old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hvector(
    n: c_int,
    bl: c_int,
    stride: isize,
    old: usize,
    nt: *mut usize,
) -> c_int {
    vector(Form::Int, true, n as i64, bl as i64, stride as i64, old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hvector_c(n: i64, bl: i64, stride: i64, old: usize, nt: *mut usize) -> c_int {
    vector(Form::Large, true, n, bl, stride, old, nt)
}

/// What kind of indexed constructor: displacements in extents or bytes, one blocklength or many.
#[derive(Clone, Copy)]
struct Indexed {
    bytes: bool,
    block: bool,
}

impl Indexed {
    fn call(self, form: Form) -> &'static str {
        match (self.bytes, self.block, form) {
            (false, false, Form::Int) => "MPI_Type_indexed",
            (false, false, Form::Large) => "MPI_Type_indexed_c",
            (true, false, Form::Int) => "MPI_Type_create_hindexed",
            (true, false, Form::Large) => "MPI_Type_create_hindexed_c",
            (false, true, Form::Int) => "MPI_Type_create_indexed_block",
            (false, true, Form::Large) => "MPI_Type_create_indexed_block_c",
            (true, true, Form::Int) => "MPI_Type_create_hindexed_block",
            (true, true, Form::Large) => "MPI_Type_create_hindexed_block_c",
        }
    }
}

/// The four indexed constructors. `bls` and `displs` read the C arrays once the count is known.
fn indexed(
    form: Form,
    kind: Indexed,
    n: i64,
    bls: impl FnOnce(&str, usize) -> Result<Vec<i64>>,
    displs: impl FnOnce(&str, usize) -> Result<Vec<i64>>,
    old: usize,
    newtype: *mut usize,
) -> c_int {
    guard(W, || {
        let call = kind.call(form);
        let l = lib(call)?;
        let k = count(call, "count", n)?;
        let bl = bls(call, k)?;
        blocklens(call, &bl)?;
        let d = displs(call, k)?;
        let t = type_arg(call, old)?;
        let full_bl: Vec<i64> = if kind.block { vec![bl.first().copied().unwrap_or(0); k] } else { bl.clone() };
        let lay = if kind.bytes {
            let db: Vec<isize> = d.iter().map(|&x| x as isize).collect();
            Layout::hindexed(&full_bl, &db, &t.layout)
        } else {
            Layout::indexed(&full_bl, &d, &t.layout)
        }
        .map_err(in_call(call))?;
        let mut a = Args::new();
        a.int(form, &[n]).int(form, &bl);
        if kind.bytes {
            a.addr(form, &d.iter().map(|&x| x as isize).collect::<Vec<_>>());
        } else {
            a.int(form, &d);
        }
        let comb = match (kind.bytes, kind.block) {
            (false, false) => c::MPI_COMBINER_INDEXED,
            (true, false) => c::MPI_COMBINER_HINDEXED,
            (false, true) => c::MPI_COMBINER_INDEXED_BLOCK,
            (true, true) => c::MPI_COMBINER_HINDEXED_BLOCK,
        };
        register(l, call, newtype, lay.with_envelope(a.envelope(comb, vec![t])))
    })
}

fn ints(p: *mut c_int, arg: &'static str) -> impl FnOnce(&str, usize) -> Result<Vec<i64>> {
    move |call, n| arr(call, arg, p, n, |v| v as i64)
}

fn longs<T: Copy + Into<i64>>(p: *mut T, arg: &'static str) -> impl FnOnce(&str, usize) -> Result<Vec<i64>> {
    move |call, n| arr(call, arg, p, n, |v| v.into())
}

fn aints(p: *mut isize, arg: &'static str) -> impl FnOnce(&str, usize) -> Result<Vec<i64>> {
    move |call, n| arr(call, arg, p, n, |v| v as i64)
}

fn one(v: i64) -> impl FnOnce(&str, usize) -> Result<Vec<i64>> {
    move |_, _| Ok(vec![v])
}

const IDX: Indexed = Indexed { bytes: false, block: false };
const HIDX: Indexed = Indexed { bytes: true, block: false };
const IDXB: Indexed = Indexed { bytes: false, block: true };
const HIDXB: Indexed = Indexed { bytes: true, block: true };

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_indexed(
    n: c_int,
    bls: *mut c_int,
    displs: *mut c_int,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(
        Form::Int,
        IDX,
        n as i64,
        ints(bls, "array_of_blocklengths"),
        ints(displs, "array_of_displacements"),
        old,
        nt,
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_indexed_c(
    n: i64,
    bls: *mut i64,
    displs: *mut i64,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(Form::Large, IDX, n, longs(bls, "array_of_blocklengths"), longs(displs, "array_of_displacements"), old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed(
    n: c_int,
    bls: *mut c_int,
    displs: *mut isize,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(
        Form::Int,
        HIDX,
        n as i64,
        ints(bls, "array_of_blocklengths"),
        aints(displs, "array_of_displacements"),
        old,
        nt,
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed_c(
    n: i64,
    bls: *mut i64,
    displs: *mut i64,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(Form::Large, HIDX, n, longs(bls, "array_of_blocklengths"), longs(displs, "array_of_displacements"), old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_indexed_block(
    n: c_int,
    bl: c_int,
    displs: *mut c_int,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(Form::Int, IDXB, n as i64, one(bl as i64), ints(displs, "array_of_displacements"), old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_indexed_block_c(
    n: i64,
    bl: i64,
    displs: *mut i64,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(Form::Large, IDXB, n, one(bl), longs(displs, "array_of_displacements"), old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed_block(
    n: c_int,
    bl: c_int,
    displs: *mut isize,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(Form::Int, HIDXB, n as i64, one(bl as i64), aints(displs, "array_of_displacements"), old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed_block_c(
    n: i64,
    bl: i64,
    displs: *mut i64,
    old: usize,
    nt: *mut usize,
) -> c_int {
    indexed(Form::Large, HIDXB, n, one(bl), longs(displs, "array_of_displacements"), old, nt)
}

fn structure(
    form: Form,
    n: i64,
    bls: impl FnOnce(&str, usize) -> Result<Vec<i64>>,
    displs: impl FnOnce(&str, usize) -> Result<Vec<i64>>,
    types: *mut usize,
    newtype: *mut usize,
) -> c_int {
    guard(W, || {
        let call = if form == Form::Int { "MPI_Type_create_struct" } else { "MPI_Type_create_struct_c" };
        let l = lib(call)?;
        let k = count(call, "count", n)?;
        let bl = bls(call, k)?;
        blocklens(call, &bl)?;
        let d: Vec<isize> = displs(call, k)?.into_iter().map(|x| x as isize).collect();
        let hs = arr(call, "array_of_types", types, k, |h| h)?;
        let ts = hs
            .iter()
            .enumerate()
            .map(|(i, &h)| type_arg(&format!("{call}: array_of_types[{i}]"), h))
            .collect::<Result<Vec<_>>>()?;
        let lays: Vec<&Layout> = ts.iter().map(|t| &*t.layout).collect();
        let lay = Layout::structure(&bl, &d, &lays).map_err(in_call(call))?;
        let mut a = Args::new();
        a.int(form, &[n]).int(form, &bl).addr(form, &d);
        register(l, call, newtype, lay.with_envelope(a.envelope(c::MPI_COMBINER_STRUCT, ts)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_struct(
    n: c_int,
    bls: *mut c_int,
    displs: *mut isize,
    types: *mut usize,
    nt: *mut usize,
) -> c_int {
    structure(
        Form::Int,
        n as i64,
        ints(bls, "array_of_blocklengths"),
        aints(displs, "array_of_displacements"),
        types,
        nt,
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_struct_c(
    n: i64,
    bls: *mut i64,
    displs: *mut i64,
    types: *mut usize,
    nt: *mut usize,
) -> c_int {
    structure(Form::Large, n, longs(bls, "array_of_blocklengths"), longs(displs, "array_of_displacements"), types, nt)
}

fn order_is_fortran(call: &str, order: c_int) -> Result<bool> {
    match order {
        c::MPI_ORDER_C => Ok(false),
        c::MPI_ORDER_FORTRAN => Ok(true),
        o => Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        )),
    }
}

fn ndims_of(call: &str, ndims: c_int) -> Result<usize> {
    if ndims <= 0 {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: ndims {ndims} must be positive")));
    }
    Ok(ndims as usize)
}

type Reader<'a> = Box<dyn FnOnce(&str, usize) -> Result<Vec<i64>> + 'a>;

fn subarray(
    form: Form,
    ndims: c_int,
    sizes: Reader,
    subsizes: Reader,
    starts: Reader,
    order: c_int,
    old: usize,
    newtype: *mut usize,
) -> c_int {
    guard(W, || {
        let call = if form == Form::Int { "MPI_Type_create_subarray" } else { "MPI_Type_create_subarray_c" };
        let l = lib(call)?;
        let n = ndims_of(call, ndims)?;
        let (sz, sub, st) = (sizes(call, n)?, subsizes(call, n)?, starts(call, n)?);
        let fortran = order_is_fortran(call, order)?;
        let t = type_arg(call, old)?;
        let lay = Layout::subarray(&sz, &sub, &st, fortran, &t.layout).map_err(in_call(call))?;
        let mut a = Args::new();
        a.always_int(&[ndims as i64]).int(form, &sz).int(form, &sub).int(form, &st).always_int(&[order as i64]);
        register(l, call, newtype, lay.with_envelope(a.envelope(c::MPI_COMBINER_SUBARRAY, vec![t])))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_subarray(
    ndims: c_int,
    sizes: *mut c_int,
    subsizes: *mut c_int,
    starts: *mut c_int,
    order: c_int,
    old: usize,
    nt: *mut usize,
) -> c_int {
    subarray(
        Form::Int,
        ndims,
        Box::new(ints(sizes, "array_of_sizes")),
        Box::new(ints(subsizes, "array_of_subsizes")),
        Box::new(ints(starts, "array_of_starts")),
        order,
        old,
        nt,
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_subarray_c(
    ndims: c_int,
    sizes: *mut i64,
    subsizes: *mut i64,
    starts: *mut i64,
    order: c_int,
    old: usize,
    nt: *mut usize,
) -> c_int {
    subarray(
        Form::Large,
        ndims,
        Box::new(longs(sizes, "array_of_sizes")),
        Box::new(longs(subsizes, "array_of_subsizes")),
        Box::new(longs(starts, "array_of_starts")),
        order,
        old,
        nt,
    )
}

fn darray(
    form: Form,
    (size, rank, ndims): (c_int, c_int, c_int),
    gsizes: Reader,
    distribs: *mut c_int,
    dargs: *mut c_int,
    psizes: *mut c_int,
    order: c_int,
    old: usize,
    newtype: *mut usize,
) -> c_int {
    guard(W, || {
        let call = if form == Form::Int { "MPI_Type_create_darray" } else { "MPI_Type_create_darray_c" };
        let l = lib(call)?;
        let n = ndims_of(call, ndims)?;
        let g = gsizes(call, n)?;
        let di = arr(call, "array_of_distribs", distribs, n, |v| v)?;
        let da = arr(call, "array_of_dargs", dargs, n, |v| v)?;
        let ps = arr(call, "array_of_psizes", psizes, n, |v| v)?;
        let fortran = order_is_fortran(call, order)?;
        let t = type_arg(call, old)?;
        let lay = Layout::darray(size, rank, &g, &di, &da, &ps, fortran, &t.layout).map_err(in_call(call))?;
        let wide = |v: &[i32]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        let mut a = Args::new();
        a.always_int(&[size as i64, rank as i64, ndims as i64]).int(form, &g);
        a.always_int(&wide(&di)).always_int(&wide(&da)).always_int(&wide(&ps)).always_int(&[order as i64]);
        register(l, call, newtype, lay.with_envelope(a.envelope(c::MPI_COMBINER_DARRAY, vec![t])))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *mut c_int,
    distribs: *mut c_int,
    dargs: *mut c_int,
    psizes: *mut c_int,
    order: c_int,
    old: usize,
    nt: *mut usize,
) -> c_int {
    let g: Reader = Box::new(ints(gsizes, "array_of_gsizes"));
    darray(Form::Int, (size, rank, ndims), g, distribs, dargs, psizes, order, old, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_darray_c(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *mut i64,
    distribs: *mut c_int,
    dargs: *mut c_int,
    psizes: *mut c_int,
    order: c_int,
    old: usize,
    nt: *mut usize,
) -> c_int {
    let g: Reader = Box::new(longs(gsizes, "array_of_gsizes"));
    darray(Form::Large, (size, rank, ndims), g, distribs, dargs, psizes, order, old, nt)
}

fn resized(form: Form, old: usize, lb: isize, extent: isize, newtype: *mut usize) -> c_int {
    guard(W, || {
        let call = if form == Form::Int { "MPI_Type_create_resized" } else { "MPI_Type_create_resized_c" };
        let l = lib(call)?;
        let t = type_arg(call, old)?;
        if lb.checked_add(extent).is_none() {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: lb {lb} + extent {extent} overflows")));
        }
        let lay = Layout::resized(&t.layout, lb, extent);
        let env = Args::new().addr(form, &[lb, extent]).envelope(c::MPI_COMBINER_RESIZED, vec![t]);
        register(l, call, newtype, lay.with_envelope(env))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_resized(old: usize, lb: isize, extent: isize, nt: *mut usize) -> c_int {
    resized(Form::Int, old, lb, extent, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_resized_c(old: usize, lb: i64, extent: i64, nt: *mut usize) -> c_int {
    resized(Form::Large, old, lb as isize, extent as isize, nt)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_dup(old: usize, newtype: *mut usize) -> c_int {
    guard(W, || {
        let call = "MPI_Type_dup";
        let l = lib(call)?;
        let t = type_arg(call, old)?;
        nonnull_mut(call, "newtype", newtype)?;
        let committed = t.committed;
        let mut lay = (*t.layout).clone();
        lay.name = "";
        let lay = lay.with_envelope(Args::new().envelope(c::MPI_COMBINER_DUP, vec![t]));
        let h = l.t().datatypes.insert((Arc::new(lay), committed));
        out(call, "newtype", newtype, h)?;
        copy_attrs(old, h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_commit(dt: *mut usize) -> c_int {
    guard(W, || {
        let call = "MPI_Type_commit";
        let l = lib(call)?;
        nonnull_mut(call, "datatype", dt)?;
        // SAFETY: checked non-null.
        let h = unsafe { *dt };
        if predefined(h).is_some() {
            return Ok(());
        }
        match l.t().datatypes.get_mut(h) {
            Some(e) => {
                e.1 = true;
                Ok(())
            }
            None => Err(invalid(call, h)),
        }
    })
}

fn invalid(call: &str, h: usize) -> MpiError {
    if h == c::MPI_DATATYPE_NULL {
        return MpiError::new(c::MPI_ERR_TYPE, format!("{call}: datatype is MPI_DATATYPE_NULL"));
    }
    MpiError::new(c::MPI_ERR_TYPE, format!("{call}: datatype {h:#x} is not a valid datatype handle"))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free(dt: *mut usize) -> c_int {
    guard(W, || {
        let call = "MPI_Type_free";
        let l = lib(call)?;
        nonnull_mut(call, "datatype", dt)?;
        // SAFETY: checked non-null.
        let h = unsafe { *dt };
        if predefined(h).is_some() || f90_types().lock().unwrap_or_else(|e| e.into_inner()).values().any(|&t| t == h) {
            return Err(MpiError::new(c::MPI_ERR_TYPE, format!("{call}: predefined datatypes cannot be freed")));
        }
        if l.t().datatypes.get(h).is_none() {
            return Err(invalid(call, h));
        }
        // Delete callbacks run first (they may still query the type), then the handle goes.
        delete_all_attrs(h)?;
        extras().remove(&h);
        // Operations in flight hold their own reference to the layout, so freeing is safe.
        l.t().datatypes.remove(h);
        out(call, "datatype", dt, c::MPI_DATATYPE_NULL)
    })
}

// ----- envelope and contents -----

/// (ints, addresses, large counts, datatypes, combiner) of a datatype.
fn envelope_of(call: &str, dt: usize) -> Result<(Option<Arc<Envelope>>, [usize; 4], c_int)> {
    let (lay, _) = dtype_any(call, dt)?;
    Ok(match &lay.envelope {
        None => (None, [0; 4], c::MPI_COMBINER_NAMED),
        Some(e) => (Some(e.clone()), [e.ints.len(), e.addrs.len(), e.counts.len(), e.types.len()], e.combiner),
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_envelope(
    dt: usize,
    ni: *mut c_int,
    na: *mut c_int,
    nd: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    guard(W, || {
        let call = "MPI_Type_get_envelope";
        lib(call)?;
        let (_, n, comb) = envelope_of(call, dt)?;
        if n[2] > 0 {
            return Err(MpiError::new(
                c::MPI_ERR_TYPE,
                format!("{call}: datatype {dt:#x} was made by a large-count constructor; use MPI_Type_get_envelope_c"),
            ));
        }
        out(call, "num_integers", ni, n[0] as c_int)?;
        out(call, "num_addresses", na, n[1] as c_int)?;
        out(call, "num_datatypes", nd, n[3] as c_int)?;
        out(call, "combiner", combiner, comb)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_envelope_c(
    dt: usize,
    ni: *mut i64,
    na: *mut i64,
    nl: *mut i64,
    nd: *mut i64,
    combiner: *mut c_int,
) -> c_int {
    guard(W, || {
        let call = "MPI_Type_get_envelope_c";
        lib(call)?;
        let (_, n, comb) = envelope_of(call, dt)?;
        out(call, "num_integers", ni, n[0] as i64)?;
        out(call, "num_addresses", na, n[1] as i64)?;
        out(call, "num_large_counts", nl, n[2] as i64)?;
        out(call, "num_datatypes", nd, n[3] as i64)?;
        out(call, "combiner", combiner, comb)
    })
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
    nonnull_mut(call, arg, p)?;
    // SAFETY: the caller provides `max` >= v.len() writable values at `p` (checked non-null).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(())
}

/// Handles for the datatype arguments: predefined ones as they are, derived ones as new handles
/// the application frees.
fn type_handles(l: &Lib, e: &Envelope) -> Vec<usize> {
    let mut t = l.t();
    e.types
        .iter()
        .map(|a| if a.predefined != 0 { a.predefined } else { t.datatypes.insert((a.layout.clone(), a.committed)) })
        .collect()
}

fn contents(
    call: &str,
    dt: usize,
    max: [i64; 4],
    ints: *mut c_int,
    addrs: *mut isize,
    counts: Option<*mut i64>,
    types: *mut usize,
) -> Result<()> {
    let l = lib(call)?;
    let (e, _, _) = envelope_of(call, dt)?;
    let Some(e) = e else {
        return Err(MpiError::new(
            c::MPI_ERR_TYPE,
            format!("{call}: datatype {dt:#x} is predefined (MPI_COMBINER_NAMED) and has no contents"),
        ));
    };
    if counts.is_none() && !e.counts.is_empty() {
        return Err(MpiError::new(
            c::MPI_ERR_TYPE,
            format!("{call}: datatype {dt:#x} was made by a large-count constructor; use MPI_Type_get_contents_c"),
        ));
    }
    fill(call, "array_of_integers", ints, max[0], &e.ints)?;
    fill(call, "array_of_addresses", addrs, max[1], &e.addrs)?;
    if let Some(p) = counts {
        fill(call, "array_of_large_counts", p, max[2], &e.counts)?;
    }
    if (max[3] as i128) < e.types.len() as i128 {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: max_datatypes is {} but the datatype has {} datatypes", max[3], e.types.len()),
        ));
    }
    nonnull_mut(call, "array_of_datatypes", types)?;
    fill(call, "array_of_datatypes", types, max[3], &type_handles(l, &e))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_contents(
    dt: usize,
    mi: c_int,
    ma: c_int,
    md: c_int,
    ints: *mut c_int,
    addrs: *mut isize,
    types: *mut usize,
) -> c_int {
    guard(W, || contents("MPI_Type_get_contents", dt, [mi as i64, ma as i64, 0, md as i64], ints, addrs, None, types))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_contents_c(
    dt: usize,
    mi: i64,
    ma: i64,
    ml: i64,
    md: i64,
    ints: *mut c_int,
    addrs: *mut isize,
    counts: *mut i64,
    types: *mut usize,
) -> c_int {
    guard(W, || contents("MPI_Type_get_contents_c", dt, [mi, ma, ml, md], ints, addrs, Some(counts), types))
}

// ----- packing -----

/// Checks `position` and reads it.
fn position_of(call: &str, p: *mut i64) -> Result<usize> {
    nonnull_mut(call, "position", p)?;
    // SAFETY: checked non-null.
    let v = unsafe { *p };
    usize::try_from(v).map_err(|_| MpiError::new(c::MPI_ERR_ARG, format!("{call}: position {v} is negative")))
}

fn packed_bytes(call: &str, n: usize, per: usize) -> Result<usize> {
    n.checked_mul(per)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| MpiError::new(c::MPI_ERR_COUNT, format!("{call}: count {n} of {per}-byte elements overflows")))
}

/// Packs `n` elements at `buf` in native packed form.
fn pack_native(buf: usize, n: usize, lay: &Layout) -> Vec<u8> {
    let (lo, hi) = lay.span(n);
    // SAFETY: MPI requires `buf` to hold `n` elements of the datatype; (lo, hi) is exactly the
    // bytes they cover.
    let span = unsafe { UserBuf::new(buf.wrapping_add_signed(lo), (hi - lo) as usize) };
    let mut v = Vec::with_capacity(n * lay.size);
    lay.pack_from(&span, -lo, n, &mut v);
    v
}

/// Writes native packed bytes into `n` elements at `buf`.
fn unpack_native(buf: usize, n: usize, lay: &Layout, src: &[u8]) {
    let (lo, hi) = lay.span(n);
    // SAFETY: MPI requires `buf` to have room for `n` elements of the datatype.
    let span = unsafe { UserBuf::new(buf.wrapping_add_signed(lo), (hi - lo) as usize) };
    lay.unpack_into(&span, -lo, 0, src);
}

/// Copies `bytes` into `outbuf[*position..]` (capacity `outsize`) and advances `position`.
fn put(call: &str, outbuf: *mut c_void, outsize: i64, position: *mut i64, bytes: &[u8]) -> Result<()> {
    let pos = position_of(call, position)?;
    let end = pos + bytes.len();
    if end as i128 > outsize as i128 {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!("{call}: {} packed bytes at position {pos} do not fit in outsize {outsize}", bytes.len()),
        ));
    }
    if !bytes.is_empty() {
        nonnull_mut(call, "outbuf", outbuf)?;
        // SAFETY: the caller provides `outsize` >= end writable bytes at `outbuf`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (outbuf as *mut u8).add(pos), bytes.len()) };
    }
    out(call, "position", position, end as i64)
}

/// The `n` bytes of `inbuf[*position..]` (capacity `insize`), advancing `position`.
fn take<'a>(call: &str, inbuf: *mut c_void, insize: i64, position: *mut i64, n: usize) -> Result<&'a [u8]> {
    let pos = position_of(call, position)?;
    let end = pos + n;
    if end as i128 > insize as i128 {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!("{call}: {n} bytes to unpack at position {pos} run past insize {insize}"),
        ));
    }
    out(call, "position", position, end as i64)?;
    if n == 0 {
        return Ok(&[]);
    }
    nonnull_mut(call, "inbuf", inbuf)?;
    // SAFETY: the caller provides `insize` >= end readable bytes at `inbuf`.
    Ok(unsafe { std::slice::from_raw_parts((inbuf as *const u8).add(pos), n) })
}

fn check_buf(call: &str, arg: &str, buf: *mut c_void, n: usize, lay: &Layout) -> Result<()> {
    if buf.is_null() && n > 0 && lay.size > 0 {
        return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: {arg} is NULL but count is {n}")));
    }
    Ok(())
}

fn pack(
    call: &str,
    inbuf: *mut c_void,
    incount: i64,
    dt: usize,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut i64,
    comm: usize,
) -> Result<()> {
    let l = lib(call)?;
    l.comm(call, comm)?;
    let n = count(call, "incount", incount)?;
    let lay = dtype(call, dt)?;
    packed_bytes(call, n, lay.size)?;
    check_buf(call, "inbuf", inbuf, n, &lay)?;
    put(call, outbuf, outsize, position, &pack_native(inbuf as usize, n, &lay))
}

fn unpack(
    call: &str,
    inbuf: *mut c_void,
    insize: i64,
    position: *mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    dt: usize,
    comm: usize,
) -> Result<()> {
    let l = lib(call)?;
    l.comm(call, comm)?;
    let n = count(call, "outcount", outcount)?;
    let lay = dtype(call, dt)?;
    let bytes = packed_bytes(call, n, lay.size)?;
    check_buf(call, "outbuf", outbuf, n, &lay)?;
    let src = take(call, inbuf, insize, position, bytes)?;
    unpack_native(outbuf as usize, n, &lay, src);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack(
    inbuf: *mut c_void,
    incount: c_int,
    dt: usize,
    outbuf: *mut c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: usize,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Pack";
        nonnull_mut(call, "position", position)?;
        // SAFETY: checked non-null.
        let mut pos = unsafe { *position } as i64;
        pack(call, inbuf, incount as i64, dt, outbuf, outsize as i64, &mut pos, comm)?;
        out(call, "position", position, pos as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_c(
    inbuf: *mut c_void,
    incount: i64,
    dt: usize,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut i64,
    comm: usize,
) -> c_int {
    guard(comm, || pack("MPI_Pack_c", inbuf, incount, dt, outbuf, outsize, position, comm))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpack(
    inbuf: *mut c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut c_void,
    outcount: c_int,
    dt: usize,
    comm: usize,
) -> c_int {
    guard(comm, || {
        let call = "MPI_Unpack";
        nonnull_mut(call, "position", position)?;
        // SAFETY: checked non-null.
        let mut pos = unsafe { *position } as i64;
        unpack(call, inbuf, insize as i64, &mut pos, outbuf, outcount as i64, dt, comm)?;
        out(call, "position", position, pos as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpack_c(
    inbuf: *mut c_void,
    insize: i64,
    position: *mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    dt: usize,
    comm: usize,
) -> c_int {
    guard(comm, || unpack("MPI_Unpack_c", inbuf, insize, position, outbuf, outcount, dt, comm))
}

fn pack_size(call: &str, incount: i64, dt: usize, comm: usize) -> Result<i64> {
    let l = lib(call)?;
    l.comm(call, comm)?;
    let n = count(call, "incount", incount)?;
    let lay = dtype_any(call, dt)?.0;
    Ok(packed_bytes(call, n, lay.size)? as i64)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_size(incount: c_int, dt: usize, comm: usize, size: *mut c_int) -> c_int {
    guard(comm, || {
        let call = "MPI_Pack_size";
        let v = pack_size(call, incount as i64, dt, comm)?;
        let v = c_int::try_from(v).map_err(|_| {
            MpiError::new(
                c::MPI_ERR_COUNT,
                format!("{call}: the packed size {v} does not fit in an int; use MPI_Pack_size_c"),
            )
        })?;
        out(call, "size", size, v)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_size_c(incount: i64, dt: usize, comm: usize, size: *mut i64) -> c_int {
    guard(comm, || {
        let call = "MPI_Pack_size_c";
        let v = pack_size(call, incount, dt, comm)?;
        out(call, "size", size, v)
    })
}

fn datarep(call: &str, p: *mut c_char) -> Result<()> {
    // SAFETY: a NUL-terminated string per the MPI contract (checked for null).
    let s = unsafe { crate::cstr_in(call, "datarep", p) }?;
    if s != "external32" {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: datarep {s:?} is not supported (only \"external32\")"),
        ));
    }
    Ok(())
}

fn pack_external(
    call: &str,
    rep: *mut c_char,
    inbuf: *mut c_void,
    incount: i64,
    dt: usize,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut i64,
) -> Result<()> {
    lib(call)?;
    datarep(call, rep)?;
    let n = count(call, "incount", incount)?;
    let lay = dtype(call, dt)?;
    packed_bytes(call, n, lay.size.max(lay.external_size()))?;
    check_buf(call, "inbuf", inbuf, n, &lay)?;
    let ext = lay.to_external(&pack_native(inbuf as usize, n, &lay));
    put(call, outbuf, outsize, position, &ext)
}

fn unpack_external(
    call: &str,
    rep: *mut c_char,
    inbuf: *mut c_void,
    insize: i64,
    position: *mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    dt: usize,
) -> Result<()> {
    lib(call)?;
    datarep(call, rep)?;
    let n = count(call, "outcount", outcount)?;
    let lay = dtype(call, dt)?;
    let bytes = packed_bytes(call, n, lay.size.max(lay.external_size()))? / lay.size.max(lay.external_size()).max(1)
        * lay.external_size();
    check_buf(call, "outbuf", outbuf, n, &lay)?;
    let src = take(call, inbuf, insize, position, bytes)?;
    unpack_native(outbuf as usize, n, &lay, &lay.from_external(src));
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_external(
    rep: *mut c_char,
    inbuf: *mut c_void,
    incount: c_int,
    dt: usize,
    outbuf: *mut c_void,
    outsize: isize,
    position: *mut isize,
) -> c_int {
    guard(W, || {
        let call = "MPI_Pack_external";
        let mut pos = position_of(call, position as *mut i64)? as i64;
        pack_external(call, rep, inbuf, incount as i64, dt, outbuf, outsize as i64, &mut pos)?;
        out(call, "position", position, pos as isize)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_external_c(
    rep: *mut c_char,
    inbuf: *mut c_void,
    incount: i64,
    dt: usize,
    outbuf: *mut c_void,
    outsize: i64,
    position: *mut i64,
) -> c_int {
    guard(W, || pack_external("MPI_Pack_external_c", rep, inbuf, incount, dt, outbuf, outsize, position))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpack_external(
    rep: *mut c_char,
    inbuf: *mut c_void,
    insize: isize,
    position: *mut isize,
    outbuf: *mut c_void,
    outcount: c_int,
    dt: usize,
) -> c_int {
    guard(W, || {
        let call = "MPI_Unpack_external";
        let mut pos = position_of(call, position as *mut i64)? as i64;
        unpack_external(call, rep, inbuf, insize as i64, &mut pos, outbuf, outcount as i64, dt)?;
        out(call, "position", position, pos as isize)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpack_external_c(
    rep: *mut c_char,
    inbuf: *mut c_void,
    insize: i64,
    position: *mut i64,
    outbuf: *mut c_void,
    outcount: i64,
    dt: usize,
) -> c_int {
    guard(W, || unpack_external("MPI_Unpack_external_c", rep, inbuf, insize, position, outbuf, outcount, dt))
}

fn pack_external_size(call: &str, rep: *mut c_char, incount: i64, dt: usize) -> Result<i64> {
    lib(call)?;
    datarep(call, rep)?;
    let n = count(call, "incount", incount)?;
    let lay = dtype_any(call, dt)?.0;
    Ok(packed_bytes(call, n, lay.external_size())? as i64)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_external_size(
    rep: *mut c_char,
    incount: c_int,
    dt: usize,
    size: *mut isize,
) -> c_int {
    guard(W, || {
        let call = "MPI_Pack_external_size";
        let v = pack_external_size(call, rep, incount as i64, dt)?;
        out(call, "size", size, v as isize)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_external_size_c(rep: *mut c_char, incount: i64, dt: usize, size: *mut i64) -> c_int {
    guard(W, || {
        let call = "MPI_Pack_external_size_c";
        let v = pack_external_size(call, rep, incount, dt)?;
        out(call, "size", size, v)
    })
}

// ----- names, size matching -----

/// Per-handle extras: the name set by `MPI_Type_set_name` and the attributes.
#[derive(Default)]
struct Extra {
    name: Option<String>,
    attrs: BTreeMap<c_int, usize>,
}

fn extras() -> MutexGuard<'static, HashMap<usize, Extra>> {
    static X: OnceLock<Mutex<HashMap<usize, Extra>>> = OnceLock::new();
    // A poisoned lock only means a panic elsewhere; the map itself stays consistent.
    X.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// A datatype handle that names a valid datatype (predefined or user-defined).
fn valid(call: &str, dt: usize) -> Result<Arc<Layout>> {
    dtype_any(call, dt).map(|(l, _)| l)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_set_name(dt: usize, name: *mut c_char) -> c_int {
    guard(W, || {
        let call = "MPI_Type_set_name";
        lib(call)?;
        valid(call, dt)?;
        // SAFETY: a NUL-terminated string per the MPI contract (checked for null).
        let mut s = unsafe { crate::cstr_in(call, "type_name", name) }?;
        let max = c::MPI_MAX_OBJECT_NAME as usize - 1;
        if s.len() > max {
            let mut cut = max;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
        }
        extras().entry(dt).or_default().name = Some(s);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_name(dt: usize, name: *mut c_char, len: *mut c_int) -> c_int {
    guard(W, || {
        let call = "MPI_Type_get_name";
        let lay = valid(call, dt)?;
        nonnull_mut(call, "type_name", name)?;
        nonnull_mut(call, "resultlen", len)?;
        let set = extras().get(&dt).and_then(|x| x.name.clone());
        let text = set.as_deref().unwrap_or(lay.name);
        // SAFETY: the caller provides MPI_MAX_OBJECT_NAME bytes.
        unsafe { crate::cstr_out(text, name, c::MPI_MAX_OBJECT_NAME as usize, len) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_match_size(typeclass: c_int, size: c_int, dt: *mut usize) -> c_int {
    guard(W, || {
        let call = "MPI_Type_match_size";
        lib(call)?;
        let found = match (typeclass, size) {
            (c::MPI_TYPECLASS_INTEGER, 1) => Some(c::MPI_INTEGER1),
            (c::MPI_TYPECLASS_INTEGER, 2) => Some(c::MPI_INTEGER2),
            (c::MPI_TYPECLASS_INTEGER, 4) => Some(c::MPI_INTEGER4),
            (c::MPI_TYPECLASS_INTEGER, 8) => Some(c::MPI_INTEGER8),
            (c::MPI_TYPECLASS_INTEGER, 16) => Some(c::MPI_INTEGER16),
            (c::MPI_TYPECLASS_REAL, 2) => Some(c::MPI_REAL2),
            (c::MPI_TYPECLASS_REAL, 4) => Some(c::MPI_REAL4),
            (c::MPI_TYPECLASS_REAL, 8) => Some(c::MPI_REAL8),
            (c::MPI_TYPECLASS_REAL, 16) => Some(c::MPI_REAL16),
            (c::MPI_TYPECLASS_COMPLEX, 4) => Some(c::MPI_COMPLEX4),
            (c::MPI_TYPECLASS_COMPLEX, 8) => Some(c::MPI_COMPLEX8),
            (c::MPI_TYPECLASS_COMPLEX, 16) => Some(c::MPI_COMPLEX16),
            (c::MPI_TYPECLASS_COMPLEX, 32) => Some(c::MPI_COMPLEX32),
            (c::MPI_TYPECLASS_INTEGER | c::MPI_TYPECLASS_REAL | c::MPI_TYPECLASS_COMPLEX, _) => None,
            _ => {
                return Err(MpiError::new(
                    c::MPI_ERR_ARG,
                    format!("{call}: typeclass {typeclass} is not an MPI_TYPECLASS_ constant"),
                ))
            }
        };
        let h = found.ok_or_else(|| {
            MpiError::new(
                c::MPI_ERR_ARG,
                format!("{call}: no predefined type of typeclass {typeclass} has size {size}"),
            )
        })?;
        out(call, "datatype", dt, h)
    })
}

// ----- Fortran 90 parameterized types -----

/// Handles given out by `MPI_Type_create_f90_*`, by (combiner, p, r): the standard makes them
/// predefined (never freed), and the same arguments give the same handle.
type F90Types = Mutex<HashMap<(c_int, c_int, c_int), usize>>;

fn f90_types() -> &'static F90Types {
    static T: OnceLock<F90Types> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The smallest kind whose decimal precision and exponent range reach `p` and `r` (Fortran's
/// `SELECTED_REAL_KIND`; `MPI_UNDEFINED` means "any"), for IEEE binary32/64/128.
fn f90_real_kind(call: &str, p: c_int, r: c_int, complex: bool) -> Result<usize> {
    let und = |v: c_int| v == c::MPI_UNDEFINED;
    if und(p) && und(r) {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: p and r are both MPI_UNDEFINED")));
    }
    let kinds = [
        (6, 37, c::MPI_REAL4, c::MPI_COMPLEX8),
        (15, 307, c::MPI_REAL8, c::MPI_COMPLEX16),
        (33, 4931, c::MPI_REAL16, c::MPI_COMPLEX32),
    ];
    kinds
        .iter()
        .find(|k| (und(p) || p <= k.0) && (und(r) || r <= k.1))
        .map(|k| if complex { k.3 } else { k.2 })
        .ok_or_else(|| {
            MpiError::new(
                c::MPI_ERR_ARG,
                format!("{call}: no floating-point type has a precision of {p} digits and an exponent range of {r} (the most is 33 and 4931)"),
            )
        })
}

fn f90_type(call: &str, combiner: c_int, p: c_int, r: c_int, newtype: *mut usize) -> Result<()> {
    let l = lib(call)?;
    nonnull_mut(call, "newtype", newtype)?;
    let base = match combiner {
        c::MPI_COMBINER_F90_INTEGER => {
            let kinds = [
                (2, c::MPI_INTEGER1),
                (4, c::MPI_INTEGER2),
                (9, c::MPI_INTEGER4),
                (18, c::MPI_INTEGER8),
                (38, c::MPI_INTEGER16),
            ];
            kinds.iter().find(|k| r <= k.0 && r != c::MPI_UNDEFINED).map(|k| k.1).ok_or_else(|| {
                MpiError::new(
                    c::MPI_ERR_ARG,
                    format!("{call}: no integer type has a decimal range of {r} (the most is 38)"),
                )
            })?
        }
        _ => f90_real_kind(call, p, r, combiner == c::MPI_COMBINER_F90_COMPLEX)?,
    };
    let mut cache = f90_types().lock().unwrap_or_else(|e| e.into_inner());
    let h = match cache.get(&(combiner, p, r)) {
        Some(&h) => h,
        None => {
            let ints: &[i64] =
                if combiner == c::MPI_COMBINER_F90_INTEGER { &[r as i64] } else { &[p as i64, r as i64] };
            let mut lay = (**predefined(base).expect("predefined kind")).clone();
            lay.name = "";
            let lay = lay.with_envelope(Args::new().int(Form::Int, ints).envelope(combiner, Vec::new()));
            let h = l.t().datatypes.insert((Arc::new(lay), true));
            cache.insert((combiner, p, r), h);
            h
        }
    };
    out(call, "newtype", newtype, h)
}

/// # Safety
/// `newtype` must be valid for one write (it is checked for null).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut usize) -> c_int {
    guard(W, || f90_type("MPI_Type_create_f90_real", c::MPI_COMBINER_F90_REAL, p, r, newtype))
}

/// # Safety
/// `newtype` must be valid for one write (it is checked for null).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut usize) -> c_int {
    guard(W, || f90_type("MPI_Type_create_f90_complex", c::MPI_COMBINER_F90_COMPLEX, p, r, newtype))
}

/// # Safety
/// `newtype` must be valid for one write (it is checked for null).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_f90_integer(r: c_int, newtype: *mut usize) -> c_int {
    guard(W, || f90_type("MPI_Type_create_f90_integer", c::MPI_COMBINER_F90_INTEGER, c::MPI_UNDEFINED, r, newtype))
}

/// # Safety
/// `pair_type` must be valid for one write (it is checked for null).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_value_index(
    value_type: usize,
    index_type: usize,
    pair_type: *mut usize,
) -> c_int {
    guard(W, || {
        let call = "MPI_Type_get_value_index";
        lib(call)?;
        for (h, arg) in [(value_type, "value_type"), (index_type, "index_type")] {
            dtype_any(call, h).map_err(|e| MpiError::new(e.class, format!("{} (argument {arg})", e.msg)))?;
        }
        // The predefined value-index pairs of MPI_MINLOC / MPI_MAXLOC; any other combination
        // has none (the standard's answer is then MPI_DATATYPE_NULL, not an error).
        let pair = match (value_type, index_type) {
            (c::MPI_FLOAT, c::MPI_INT) => c::MPI_FLOAT_INT,
            (c::MPI_DOUBLE, c::MPI_INT) => c::MPI_DOUBLE_INT,
            (c::MPI_LONG, c::MPI_INT) => c::MPI_LONG_INT,
            (c::MPI_SHORT, c::MPI_INT) => c::MPI_SHORT_INT,
            (c::MPI_INT, c::MPI_INT) => c::MPI_2INT,
            (c::MPI_LONG_DOUBLE, c::MPI_INT) => c::MPI_LONG_DOUBLE_INT,
            (c::MPI_REAL, c::MPI_REAL) => c::MPI_2REAL,
            (c::MPI_DOUBLE_PRECISION, c::MPI_DOUBLE_PRECISION) => c::MPI_2DOUBLE_PRECISION,
            (c::MPI_INTEGER, c::MPI_INTEGER) => c::MPI_2INTEGER,
            _ => c::MPI_DATATYPE_NULL,
        };
        out(call, "pair_type", pair_type, pair)
    })
}

// ----- attributes -----

type CopyFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(usize, c_int, *mut c_void, *mut c_void) -> c_int;

/// `MPI_TYPE_NULL_COPY_FN` / `MPI_TYPE_NULL_DELETE_FN` and `MPI_TYPE_DUP_FN` in the ABI.
const NULL_FN: usize = 0;
const DUP_FN: usize = 1;

#[derive(Clone, Copy)]
struct TypeKeyval {
    copy_fn: usize,
    delete_fn: usize,
    extra: usize,
    freed: bool,
    /// Attributes currently set with this keyval.
    uses: usize,
}

struct Keyvals {
    next: c_int,
    map: BTreeMap<c_int, TypeKeyval>,
}

/// Datatype keyvals have their own numbers (apart from communicator keyvals, so that passing
/// one where the other is expected fails).
fn keyvals() -> MutexGuard<'static, Keyvals> {
    static K: OnceLock<Mutex<Keyvals>> = OnceLock::new();
    K.get_or_init(|| Mutex::new(Keyvals { next: 0x10000, map: BTreeMap::new() }))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn keyval(call: &str, k: c_int) -> Result<TypeKeyval> {
    keyvals()
        .map
        .get(&k)
        .copied()
        .filter(|kv| !kv.freed)
        .ok_or_else(|| MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: keyval {k} is not a valid datatype keyval")))
}

fn release_keyval(k: c_int) {
    let mut kvs = keyvals();
    if let Some(kv) = kvs.map.get_mut(&k) {
        kv.uses = kv.uses.saturating_sub(1);
        if kv.freed && kv.uses == 0 {
            kvs.map.remove(&k);
        }
    }
}

fn call_delete(dt: usize, k: c_int, kv: &TypeKeyval, val: usize) -> Result<()> {
    if kv.delete_fn == NULL_FN {
        return Ok(());
    }
    // SAFETY: registered by the application as an MPI_Type_delete_attr_function.
    let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete_fn) };
    // SAFETY: calling application code with the values it gave us; no lock is held.
    let rc = unsafe { f(dt, k, val as *mut c_void, kv.extra as *mut c_void) };
    if rc != c::MPI_SUCCESS {
        return Err(MpiError::new(
            crate::errors::class_of(rc).unwrap_or(c::MPI_ERR_OTHER),
            format!("attribute delete callback for datatype keyval {k} returned error {rc}"),
        ));
    }
    Ok(())
}

/// Runs the delete callbacks of every attribute of `dt` (on `MPI_Type_free`).
fn delete_all_attrs(dt: usize) -> Result<()> {
    let attrs: Vec<(c_int, usize)> =
        extras().get_mut(&dt).map(|x| std::mem::take(&mut x.attrs).into_iter().collect()).unwrap_or_default();
    for (k, v) in attrs {
        let kv = keyvals().map.get(&k).copied();
        if let Some(kv) = kv {
            call_delete(dt, k, &kv, v)?;
            release_keyval(k);
        }
    }
    Ok(())
}

/// Copies the attributes of `old` onto its duplicate `new` through their copy callbacks.
fn copy_attrs(old: usize, new: usize) -> Result<()> {
    let attrs: Vec<(c_int, usize)> =
        extras().get(&old).map(|x| x.attrs.iter().map(|(&k, &v)| (k, v)).collect()).unwrap_or_default();
    for (k, v) in attrs {
        let Some(kv) = keyvals().map.get(&k).copied() else { continue };
        let copied = match kv.copy_fn {
            NULL_FN => None,
            DUP_FN => Some(v),
            f => {
                // SAFETY: registered by the application as an MPI_Type_copy_attr_function.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut val: usize = 0;
                let mut flag: c_int = 0;
                // SAFETY: application callback with valid pointers to locals; no lock is held.
                let rc = unsafe {
                    f(
                        old,
                        k,
                        kv.extra as *mut c_void,
                        v as *mut c_void,
                        &mut val as *mut usize as *mut c_void,
                        &mut flag,
                    )
                };
                if rc != c::MPI_SUCCESS {
                    return Err(MpiError::new(
                        crate::errors::class_of(rc).unwrap_or(c::MPI_ERR_OTHER),
                        format!("MPI_Type_dup: attribute copy callback for keyval {k} returned error {rc}"),
                    ));
                }
                (flag != 0).then_some(val)
            }
        };
        if let Some(val) = copied {
            extras().entry(new).or_default().attrs.insert(k, val);
            if let Some(kv) = keyvals().map.get_mut(&k) {
                kv.uses += 1;
            }
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_keyval(
    copy_fn: *mut c_void,
    delete_fn: *mut c_void,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    guard(W, || {
        let call = "MPI_Type_create_keyval";
        lib(call)?;
        nonnull_mut(call, "type_keyval", keyval)?;
        let mut kvs = keyvals();
        let k = kvs.next;
        kvs.next += 1;
        let kv = TypeKeyval {
            copy_fn: copy_fn as usize,
            delete_fn: delete_fn as usize,
            extra: extra as usize,
            freed: false,
            uses: 0,
        };
        kvs.map.insert(k, kv);
        drop(kvs);
        out(call, "type_keyval", keyval, k)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free_keyval(keyval: *mut c_int) -> c_int {
    guard(W, || {
        let call = "MPI_Type_free_keyval";
        lib(call)?;
        nonnull_mut(call, "type_keyval", keyval)?;
        // SAFETY: checked non-null.
        let k = unsafe { *keyval };
        keyval_of(call, k)?;
        let mut kvs = keyvals();
        if let Some(kv) = kvs.map.get_mut(&k) {
            kv.freed = true;
            if kv.uses == 0 {
                kvs.map.remove(&k);
            }
        }
        drop(kvs);
        out(call, "type_keyval", keyval, c::MPI_KEYVAL_INVALID)
    })
}

fn keyval_of(call: &str, k: c_int) -> Result<TypeKeyval> {
    keyval(call, k)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_set_attr(dt: usize, k: c_int, val: *mut c_void) -> c_int {
    guard(W, || {
        let call = "MPI_Type_set_attr";
        lib(call)?;
        valid(call, dt)?;
        let kv = keyval(call, k)?;
        let old = extras().entry(dt).or_default().attrs.insert(k, val as usize);
        match old {
            Some(v) => call_delete(dt, k, &kv, v),
            None => {
                if let Some(kv) = keyvals().map.get_mut(&k) {
                    kv.uses += 1;
                }
                Ok(())
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_attr(dt: usize, k: c_int, val: *mut c_void, flag: *mut c_int) -> c_int {
    guard(W, || {
        let call = "MPI_Type_get_attr";
        lib(call)?;
        valid(call, dt)?;
        keyval(call, k)?;
        nonnull_mut(call, "flag", flag)?;
        let v = extras().get(&dt).and_then(|x| x.attrs.get(&k).copied());
        if let Some(v) = v {
            nonnull_mut(call, "attribute_val", val)?;
            // SAFETY: `attribute_val` is really a `void **` (standard C binding); checked non-null.
            unsafe { *(val as *mut usize) = v };
        }
        out(call, "flag", flag, v.is_some() as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_delete_attr(dt: usize, k: c_int) -> c_int {
    guard(W, || {
        let call = "MPI_Type_delete_attr";
        lib(call)?;
        valid(call, dt)?;
        let kv = keyval(call, k)?;
        let old = extras().get_mut(&dt).and_then(|x| x.attrs.remove(&k));
        let Some(v) = old else {
            return Err(MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: no attribute is set for keyval {k}")));
        };
        call_delete(dt, k, &kv, v)?;
        release_keyval(k);
        Ok(())
    })
}
