//! Datatype constructors (`MPI_Type_vector` ... `MPI_Type_create_resized`, `MPI_Type_dup`, the
//! Fortran 90 kinds), `MPI_Type_commit`, `MPI_Type_free`, and the lookups of predefined types
//! (`MPI_Type_match_size`, `MPI_Type_get_value_index`).
//!
//! Each constructor records its arguments for `MPI_Type_get_contents` ([`Args`]): the `int`
//! forms record counts as integers and displacements as addresses, the `_c` forms every count and
//! displacement as a large count.

use super::hold;
use super::names::{copy_attrs, forget};
use super::type_arg;
use crate::state::Lib;
use crate::validate::{self, Call, Dt, Out};
use baton_abi::consts as c;
use baton_core::datatype::{predefined, Envelope, Layout, TypeArg};
use baton_core::error::{MpiError, Result};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Arc, Mutex, OnceLock};

fn in_call(call: &str) -> impl Fn(MpiError) -> MpiError + '_ {
    move |e| MpiError::new(e.class, format!("{call}: {}", e.msg))
}

fn blocklens(call: &str, v: &[i64]) -> Result<()> {
    match v.iter().position(|&b| b < 0) {
        Some(i) => Err(MpiError::negative(call, &format!("array_of_blocklengths[{i}]"), v[i])),
        None => Ok(()),
    }
}

fn register(l: &Lib, newtype: Out<usize>, lay: Layout) -> Result<()> {
    hold::sweep(l);
    newtype.put(l.t().datatypes.insert((Arc::new(lay), false)));
    Ok(())
}

/// How a constructor's integer arguments are recorded for `MPI_Type_get_contents`.
struct Args {
    large: bool,
    ints: Vec<i32>,
    addrs: Vec<isize>,
    counts: Vec<i64>,
}

impl Args {
    fn new(cx: Call) -> Args {
        Args { large: cx.large, ints: Vec::new(), addrs: Vec::new(), counts: Vec::new() }
    }
    /// An argument that is an `int` in the plain form.
    fn int(&mut self, v: &[i64]) -> &mut Args {
        match self.large {
            false => self.ints.extend(v.iter().map(|&x| x as i32)),
            true => self.counts.extend_from_slice(v),
        }
        self
    }
    /// An argument that is an `MPI_Aint` in the plain form.
    fn addr(&mut self, v: &[i64]) -> &mut Args {
        match self.large {
            false => self.addrs.extend(v.iter().map(|&x| x as isize)),
            true => self.counts.extend_from_slice(v),
        }
        self
    }
    /// An argument that stays an `int` in both forms.
    fn always_int(&mut self, v: &[i32]) -> &mut Args {
        self.ints.extend_from_slice(v);
        self
    }
    fn envelope(&mut self, combiner: i32, types: Vec<TypeArg>) -> Envelope {
        Envelope {
            combiner,
            ints: std::mem::take(&mut self.ints),
            addrs: std::mem::take(&mut self.addrs),
            counts: std::mem::take(&mut self.counts),
            types,
            base: 0,
        }
    }
}

pub(crate) fn contiguous(cx: Call, l: &Lib, count: usize, oldtype: Dt, newtype: Out<usize>) -> Result<()> {
    let t = type_arg(&oldtype);
    let lay = Layout::try_contiguous(count as i64, &t.layout).map_err(in_call(cx.name))?;
    let env = Args::new(cx).int(&[count as i64]).envelope(c::MPI_COMBINER_CONTIGUOUS, vec![t]);
    register(l, newtype, lay.with_envelope(env))
}

/// `MPI_Type_vector` (stride in extents) and, with `BYTES`, `MPI_Type_create_hvector` (stride
/// in bytes).
pub(crate) fn vector<const BYTES: bool>(
    cx: Call,
    l: &Lib,
    count: usize,
    blocklength: usize,
    stride: i64,
    oldtype: Dt,
    newtype: Out<usize>,
) -> Result<()> {
    let t = type_arg(&oldtype);
    let (n, bl) = (count as i64, blocklength as i64);
    let mut a = Args::new(cx);
    let (lay, comb) = if BYTES {
        a.int(&[n, bl]).addr(&[stride]);
        (Layout::hvector(n, bl, stride as isize, &t.layout), c::MPI_COMBINER_HVECTOR)
    } else {
        a.int(&[n, bl, stride]);
        (Layout::vector(n, bl, stride, &t.layout), c::MPI_COMBINER_VECTOR)
    };
    let lay = lay.map_err(in_call(cx.name))?;
    register(l, newtype, lay.with_envelope(a.envelope(comb, vec![t])))
}

/// The four indexed constructors: displacements in extents or bytes; `block` when one
/// blocklength serves every block.
fn any_indexed(
    cx: Call,
    l: &Lib,
    (bytes, block): (bool, bool),
    bl: &[i64],
    displs: &[i64],
    oldtype: Dt,
    newtype: Out<usize>,
) -> Result<()> {
    blocklens(cx.name, bl)?;
    let t = type_arg(&oldtype);
    let k = displs.len();
    let full_bl: Cow<[i64]> = if block { Cow::Owned(vec![bl[0]; k]) } else { Cow::Borrowed(bl) };
    let lay = if bytes {
        let db: Vec<isize> = displs.iter().map(|&x| x as isize).collect();
        Layout::hindexed(&full_bl, &db, &t.layout)
    } else {
        Layout::indexed(&full_bl, displs, &t.layout)
    }
    .map_err(in_call(cx.name))?;
    let mut a = Args::new(cx);
    a.int(&[k as i64]).int(bl);
    if bytes {
        a.addr(displs);
    } else {
        a.int(displs);
    }
    let comb = match (bytes, block) {
        (false, false) => c::MPI_COMBINER_INDEXED,
        (true, false) => c::MPI_COMBINER_HINDEXED,
        (false, true) => c::MPI_COMBINER_INDEXED_BLOCK,
        (true, true) => c::MPI_COMBINER_HINDEXED_BLOCK,
    };
    register(l, newtype, lay.with_envelope(a.envelope(comb, vec![t])))
}

/// `MPI_Type_indexed` and, with `BYTES`, `MPI_Type_create_hindexed`.
pub(crate) fn indexed<const BYTES: bool>(
    cx: Call,
    l: &Lib,
    _count: usize,
    array_of_blocklengths: Cow<[i64]>,
    array_of_displacements: Cow<[i64]>,
    oldtype: Dt,
    newtype: Out<usize>,
) -> Result<()> {
    any_indexed(cx, l, (BYTES, false), &array_of_blocklengths, &array_of_displacements, oldtype, newtype)
}

/// `MPI_Type_create_indexed_block` and, with `BYTES`, `MPI_Type_create_hindexed_block`.
pub(crate) fn indexed_block<const BYTES: bool>(
    cx: Call,
    l: &Lib,
    _count: usize,
    blocklength: usize,
    array_of_displacements: Cow<[i64]>,
    oldtype: Dt,
    newtype: Out<usize>,
) -> Result<()> {
    any_indexed(cx, l, (BYTES, true), &[blocklength as i64], &array_of_displacements, oldtype, newtype)
}

pub(crate) fn structure(
    cx: Call,
    l: &Lib,
    count: usize,
    array_of_blocklengths: Cow<[i64]>,
    array_of_displacements: Cow<[i64]>,
    array_of_types: &[usize],
    newtype: Out<usize>,
) -> Result<()> {
    let bl = &*array_of_blocklengths;
    blocklens(cx.name, bl)?;
    let d: Vec<isize> = array_of_displacements.iter().map(|&x| x as isize).collect();
    let ts = array_of_types
        .iter()
        .enumerate()
        .map(|(i, &h)| validate::datatype(cx.name, &format!("array_of_types[{i}]"), h).map(|dt| type_arg(&dt)))
        .collect::<Result<Vec<_>>>()?;
    let lays: Vec<&Layout> = ts.iter().map(|t| &*t.layout).collect();
    let lay = Layout::structure(bl, &d, &lays).map_err(in_call(cx.name))?;
    let mut a = Args::new(cx);
    a.int(&[count as i64]).int(bl).addr(&array_of_displacements);
    register(l, newtype, lay.with_envelope(a.envelope(c::MPI_COMBINER_STRUCT, ts)))
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

/// A grid needs at least one dimension (the role `nonneg` lets 0 through).
fn dims_positive(call: &str, ndims: usize) -> Result<()> {
    if ndims == 0 {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: ndims 0 must be positive")));
    }
    Ok(())
}

pub(crate) fn subarray(
    cx: Call,
    l: &Lib,
    ndims: usize,
    array_of_sizes: Cow<[i64]>,
    array_of_subsizes: Cow<[i64]>,
    array_of_starts: Cow<[i64]>,
    order: c_int,
    oldtype: Dt,
    newtype: Out<usize>,
) -> Result<()> {
    dims_positive(cx.name, ndims)?;
    let fortran = order_is_fortran(cx.name, order)?;
    let t = type_arg(&oldtype);
    let (sz, sub, st) = (&*array_of_sizes, &*array_of_subsizes, &*array_of_starts);
    let lay = Layout::subarray(sz, sub, st, fortran, &t.layout).map_err(in_call(cx.name))?;
    let mut a = Args::new(cx);
    a.always_int(&[ndims as i32]).int(sz).int(sub).int(st).always_int(&[order]);
    register(l, newtype, lay.with_envelope(a.envelope(c::MPI_COMBINER_SUBARRAY, vec![t])))
}

pub(crate) fn darray(
    cx: Call,
    l: &Lib,
    size: c_int,
    rank: c_int,
    ndims: usize,
    array_of_gsizes: Cow<[i64]>,
    array_of_distribs: &[c_int],
    array_of_dargs: &[c_int],
    array_of_psizes: &[c_int],
    order: c_int,
    oldtype: Dt,
    newtype: Out<usize>,
) -> Result<()> {
    dims_positive(cx.name, ndims)?;
    let (g, di, da, ps) = (&*array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes);
    let fortran = order_is_fortran(cx.name, order)?;
    let t = type_arg(&oldtype);
    let lay = Layout::darray(size, rank, g, di, da, ps, fortran, &t.layout).map_err(in_call(cx.name))?;
    let mut a = Args::new(cx);
    a.always_int(&[size, rank, ndims as i32]).int(g).always_int(di).always_int(da).always_int(ps).always_int(&[order]);
    register(l, newtype, lay.with_envelope(a.envelope(c::MPI_COMBINER_DARRAY, vec![t])))
}

pub(crate) fn resized(cx: Call, l: &Lib, oldtype: Dt, lb: i64, extent: i64, newtype: Out<usize>) -> Result<()> {
    let t = type_arg(&oldtype);
    let (lb, extent) = (lb as isize, extent as isize);
    if lb.checked_add(extent).is_none() {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{}: lb {lb} + extent {extent} overflows", cx.name)));
    }
    let lay = Layout::resized(&t.layout, lb, extent);
    let env = Args::new(cx).addr(&[lb as i64, extent as i64]).envelope(c::MPI_COMBINER_RESIZED, vec![t]);
    register(l, newtype, lay.with_envelope(env))
}

pub(crate) fn dup(cx: Call, l: &Lib, oldtype: Dt, newtype: Out<usize>) -> Result<()> {
    let t = type_arg(&oldtype);
    let committed = t.committed;
    let mut lay = (*t.layout).clone();
    lay.name = "";
    let lay = lay.with_envelope(Args::new(cx).envelope(c::MPI_COMBINER_DUP, vec![t]));
    let h = l.t().datatypes.insert((Arc::new(lay), committed));
    if let Err(e) = copy_attrs(oldtype.handle, h) {
        // A failed copy callback fails the dup: the new type never reaches the application.
        l.t().datatypes.remove(h);
        return Err(e);
    }
    newtype.put(h);
    Ok(())
}

pub(crate) fn commit(cx: Call, l: &Lib, datatype: Out<usize>) -> Result<()> {
    let h = datatype.get();
    if predefined(h).is_some() {
        return Ok(());
    }
    match l.t().datatypes.get_mut(h) {
        Some(e) => {
            e.1 = true;
            Ok(())
        }
        None => Err(MpiError::invalid_handle(cx.name, "datatype", baton_core::error::HandleKind::Datatype, h)),
    }
}

pub(crate) fn free(cx: Call, l: &Lib, datatype: Out<usize>) -> Result<()> {
    let h = datatype.get();
    if predefined(h).is_some() || f90_types().lock().unwrap_or_else(|e| e.into_inner()).values().any(|&t| t == h) {
        return Err(MpiError::new(c::MPI_ERR_TYPE, format!("{}: predefined datatypes cannot be freed", cx.name)));
    }
    let invalid = || MpiError::invalid_handle(cx.name, "datatype", baton_core::error::HandleKind::Datatype, h);
    if l.t().datatypes.get(h).is_none() {
        return Err(invalid());
    }
    hold::sweep(l);
    // Delete callbacks run first (they may still query the type), then the handle goes, unless
    // an operation in flight still gives it to a user function (`hold`). Operations hold their
    // own reference to the layout, so freeing is safe for them either way.
    match hold::release(h) {
        hold::Release::AlreadyFreed => return Err(invalid()),
        hold::Release::Kept => forget(h)?,
        hold::Release::Remove => {
            forget(h)?;
            l.t().datatypes.remove(h);
        }
    }
    datatype.put(c::MPI_DATATYPE_NULL);
    Ok(())
}

// ----- lookups of predefined types -----

/// The predefined types `MPI_Type_match_size` chooses from: (typeclass, size, handle).
const SIZED: [(c_int, c_int, usize); 13] = [
    (c::MPI_TYPECLASS_INTEGER, 1, c::MPI_INTEGER1),
    (c::MPI_TYPECLASS_INTEGER, 2, c::MPI_INTEGER2),
    (c::MPI_TYPECLASS_INTEGER, 4, c::MPI_INTEGER4),
    (c::MPI_TYPECLASS_INTEGER, 8, c::MPI_INTEGER8),
    (c::MPI_TYPECLASS_INTEGER, 16, c::MPI_INTEGER16),
    (c::MPI_TYPECLASS_REAL, 2, c::MPI_REAL2),
    (c::MPI_TYPECLASS_REAL, 4, c::MPI_REAL4),
    (c::MPI_TYPECLASS_REAL, 8, c::MPI_REAL8),
    (c::MPI_TYPECLASS_REAL, 16, c::MPI_REAL16),
    (c::MPI_TYPECLASS_COMPLEX, 4, c::MPI_COMPLEX4),
    (c::MPI_TYPECLASS_COMPLEX, 8, c::MPI_COMPLEX8),
    (c::MPI_TYPECLASS_COMPLEX, 16, c::MPI_COMPLEX16),
    (c::MPI_TYPECLASS_COMPLEX, 32, c::MPI_COMPLEX32),
];

pub(crate) fn match_size(cx: Call, _l: &Lib, typeclass: c_int, size: c_int, datatype: Out<usize>) -> Result<()> {
    if !SIZED.iter().any(|e| e.0 == typeclass) {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{}: typeclass {typeclass} is not an MPI_TYPECLASS_ constant", cx.name),
        ));
    }
    let h = SIZED.iter().find(|e| (e.0, e.1) == (typeclass, size)).map(|e| e.2).ok_or_else(|| {
        MpiError::new(
            c::MPI_ERR_ARG,
            format!("{}: no predefined type of typeclass {typeclass} has size {size}", cx.name),
        )
    })?;
    datatype.put(h);
    Ok(())
}

pub(crate) fn value_index(_cx: Call, _l: &Lib, value_type: Dt, index_type: Dt, pair_type: Out<usize>) -> Result<()> {
    // The predefined value-index pairs of MPI_MINLOC / MPI_MAXLOC; any other combination has
    // none (the standard's answer is then MPI_DATATYPE_NULL, not an error).
    let pair = match (value_type.handle, index_type.handle) {
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
    pair_type.put(pair);
    Ok(())
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

fn f90_type(cx: Call, l: &Lib, combiner: c_int, p: c_int, r: c_int, newtype: Out<usize>) -> Result<()> {
    let call = cx.name;
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
            let ints: &[i32] = if combiner == c::MPI_COMBINER_F90_INTEGER { &[r] } else { &[p, r] };
            let mut lay = (**predefined(base).expect("predefined kind")).clone();
            lay.name = "";
            let env = Envelope { base, ..Args::new(cx).always_int(ints).envelope(combiner, Vec::new()) };
            let lay = lay.with_envelope(env);
            let h = l.t().datatypes.insert((Arc::new(lay), true));
            cache.insert((combiner, p, r), h);
            h
        }
    };
    newtype.put(h);
    Ok(())
}

/// `MPI_Type_create_f90_real` and, with `COMPLEX`, `MPI_Type_create_f90_complex`.
pub(crate) fn f90_real<const COMPLEX: bool>(cx: Call, l: &Lib, p: c_int, r: c_int, newtype: Out<usize>) -> Result<()> {
    let combiner = if COMPLEX { c::MPI_COMBINER_F90_COMPLEX } else { c::MPI_COMBINER_F90_REAL };
    f90_type(cx, l, combiner, p, r, newtype)
}

pub(crate) fn f90_integer(cx: Call, l: &Lib, r: c_int, newtype: Out<usize>) -> Result<()> {
    f90_type(cx, l, c::MPI_COMBINER_F90_INTEGER, c::MPI_UNDEFINED, r, newtype)
}
