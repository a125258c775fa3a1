//! Reduction operations: the predefined ops (on predefined datatypes and on derived datatypes
//! built from one basic type), user-defined ones (`MPI_Op_create`, `MPI_Op_create_c`), turned
//! into the [`Reducer`] the collectives apply; `MPI_Op_free`, `MPI_Op_commutative` and
//! `MPI_Reduce_local`.
//!
//! A user function is called without any library lock held, from whichever thread runs the
//! reduction. Collectives hand reducers packed bytes; a user function expects elements laid
//! out as its datatype describes (and aligned as C requires), so packed data is laid out in
//! scratch memory first unless it already is in that form.

use crate::state::{lib, Lib};
use crate::state::{UserFn, UserFnInt, UserFnLarge, UserOp};
use crate::validate::{self, Call, Dt, Out};
use baton_abi::consts as c;
use baton_core::coll::Reducer;
use baton_core::datatype::{predefined, Layout};
use baton_core::error::{HandleKind, MpiError, Result};
use baton_core::op::{self, Kind, Op};
use baton_transport::mem::UserBuf;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

fn bad_op(call: &str, h: usize) -> MpiError {
    MpiError::invalid_handle(call, "op", HandleKind::Op, h)
}

fn user_op(call: &str, h: usize) -> Result<UserOp> {
    lib(call)?.t().ops.get(h).copied().ok_or_else(|| bad_op(call, h))
}

/// How a datatype is named in messages.
fn type_name(dt: usize, lay: &Layout) -> String {
    if lay.name.is_empty() {
        format!("{dt:#x} (derived)")
    } else {
        lay.name.to_string()
    }
}

/// The predefined datatypes a derived one is built from, in first-use order (an
/// `MPI_Type_create_f90_*` type stands for its base type).
fn leaves(lay: &Layout, out: &mut Vec<usize>) {
    if let Some(env) = &lay.envelope {
        if env.base != 0 && !out.contains(&env.base) {
            out.push(env.base);
        }
        for t in &env.types {
            if t.predefined != 0 {
                if !out.contains(&t.predefined) {
                    out.push(t.predefined);
                }
            } else {
                leaves(&t.layout, out);
            }
        }
    }
}

/// The kind of elements predefined op `o` combines in datatype `dt`: the type's own for a
/// predefined one; for a derived one, that of its basic types, which must all allow `o` and
/// share one kernel (the standard's rule: a predefined op on a derived datatype applies to each
/// basic element).
fn predefined_kind(call: &str, o: Op, dt: usize, lay: &Layout) -> Result<Kind> {
    let name = type_name(dt, lay);
    if predefined(dt).is_some() {
        let k = op::kind(dt);
        op::check_kind(call, o, k, &name)?;
        return k
            .ok_or_else(|| MpiError::new(c::MPI_ERR_OP, format!("{call}: {} is not defined for {name}", o.name())));
    }
    let mut base = Vec::new();
    leaves(lay, &mut base);
    let mut found: Option<(usize, Kind)> = None;
    for &b in &base {
        let bname = predefined(b).map(|l| l.name).unwrap_or("?");
        let k = op::kind(b).filter(|k| o.allowed(k.group)).ok_or_else(|| {
            MpiError::new(
                c::MPI_ERR_OP,
                format!("{call}: {} is not defined for datatype {name}: it contains {bname}", o.name()),
            )
        })?;
        match found {
            None => found = Some((b, k)),
            Some((first, fk)) if !fk.same_kernel(k) => {
                let fname = predefined(first).map(|l| l.name).unwrap_or("?");
                return Err(MpiError::new(
                    c::MPI_ERR_OP,
                    format!(
                        "{call}: {} cannot combine datatype {name}: it mixes {fname} and {bname} (a predefined \
                         operation needs one basic type)",
                        o.name()
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    found.map(|(_, k)| k).ok_or_else(|| {
        MpiError::new(
            c::MPI_ERR_OP,
            format!("{call}: {} is not defined for datatype {name}: it has no basic elements", o.name()),
        )
    })
}

/// What `op` handle `oph` does: a predefined operation and the kind of elements it combines in
/// `dt`, or a user function.
enum Resolved {
    Predefined(Op, Kind),
    User(UserOp),
}

fn resolve(call: &str, oph: usize, dt: usize, lay: &Layout) -> Result<Resolved> {
    match Op::from_handle(oph) {
        Some(o @ (Op::Replace | Op::NoOp)) => Err(MpiError::new(
            c::MPI_ERR_OP,
            format!("{call}: {} is only valid in one-sided accumulate operations", o.name()),
        )),
        Some(o) => Ok(Resolved::Predefined(o, predefined_kind(call, o, dt, lay)?)),
        None => Ok(Resolved::User(user_op(call, oph)?)),
    }
}

/// What an accumulate's `op` does to `dt` (the origin datatype): the operation and the predefined
/// datatype of its basic elements (a handle the target computes with). One-sided accumulates take
/// predefined operations only, `MPI_REPLACE` and `MPI_NO_OP` included.
pub(crate) fn rma_op(call: &str, oph: usize, dt: usize, lay: &Layout) -> Result<(Op, usize)> {
    let Some(o) = Op::from_handle(oph) else {
        return Err(MpiError::new(
            c::MPI_ERR_OP,
            format!("{call}: one-sided accumulate operations take predefined operations only, not op {oph:#x}"),
        ));
    };
    let basic = if predefined(dt).is_some() {
        dt
    } else {
        let mut base = Vec::new();
        leaves(lay, &mut base);
        base.first().copied().unwrap_or(c::MPI_BYTE)
    };
    if !matches!(o, Op::Replace | Op::NoOp) {
        predefined_kind(call, o, dt, lay)?;
    }
    Ok((o, basic))
}

/// Predefined op handles lie in `[OP_FIRST, OP_FIRST + 32)`, predefined datatypes in
/// `[DT_FIRST, DT_FIRST + 256)` (the ABI's numbering).
const OP_FIRST: usize = c::MPI_OP_NULL;
const DT_FIRST: usize = 0x200;

/// Reducers of predefined ops on predefined types, built once: a small allreduce otherwise
/// spends a fifth of its instructions building one (allocation, two lookups, checks).
fn predefined_reducers() -> &'static [std::sync::OnceLock<Reducer>] {
    static T: std::sync::OnceLock<Vec<std::sync::OnceLock<Reducer>>> = std::sync::OnceLock::new();
    T.get_or_init(|| (0..32 * 256).map(|_| std::sync::OnceLock::new()).collect())
}

/// The reducer for op handle `oph` applied to datatype handle `dt`, checked (`MPI_ERR_OP` when
/// the op is not defined for the type).
pub(crate) fn reducer(call: &str, oph: usize, dt: usize) -> Result<Reducer> {
    let (o, d) = (oph.wrapping_sub(OP_FIRST), dt.wrapping_sub(DT_FIRST));
    if o < 32 && d < 256 {
        let slot = &predefined_reducers()[o * 256 + d];
        if let Some(r) = slot.get() {
            return Ok(r.clone());
        }
        // Errors are not cached: each names its own call.
        let r = build_reducer(call, oph, dt)?;
        return Ok(slot.get_or_init(|| r).clone());
    }
    build_reducer(call, oph, dt)
}

fn build_reducer(call: &str, oph: usize, dt: usize) -> Result<Reducer> {
    let lay: Arc<Layout> = validate::datatype_committed(call, "datatype", dt)?.arc();
    let unit = lay.size.max(1);
    Ok(match resolve(call, oph, dt, &lay)? {
        Resolved::Predefined(o, k) => {
            Reducer { commutative: true, unit, f: Arc::new(move |i, io| op::apply_kind(o, k, i, io)) }
        }
        Resolved::User(u) => {
            // The function receives the handle `dt`: it must stay valid for as long as this
            // reducer may run, even when the application frees the type meanwhile.
            let held = (predefined(dt).is_none()).then(|| crate::datatype::hold::hold(dt));
            let f = move |i: &[u8], io: &mut [u8]| {
                let _ = &held;
                packed_user(&u, dt, &lay, i, io)
            };
            Reducer { commutative: u.commutative, unit, f: Arc::new(f) }
        }
    })
}

/// Elements the scratch buffers of one user call hold at most, so that a large reduction does
/// not double its memory.
const PIECE_BYTES: usize = 1 << 22;

/// `inout = input ∘ inout` through user function `u` over packed elements of `lay`.
fn packed_user(u: &UserOp, dt: usize, lay: &Layout, input: &[u8], inout: &mut [u8]) {
    if lay.size == 0 {
        return;
    }
    let n = inout.len().min(input.len()) / lay.size;
    let aligned = |p: usize| p.is_multiple_of(lay.align.max(1));
    if lay.is_contiguous() && aligned(input.as_ptr() as usize) && aligned(inout.as_ptr() as usize) {
        // The packed form is the memory form: no copies. The function gets `input` through a
        // `*mut` because that is its C type; MPI does not let it write there.
        u.call(dt, input.as_ptr() as usize, inout.as_mut_ptr() as usize, n, lay.extent);
        return;
    }
    let per = (PIECE_BYTES / lay.extent.unsigned_abs().max(lay.size)).max(1);
    let mut done = 0;
    while done < n {
        let k = per.min(n - done);
        let (a, b) = (done * lay.size, (done + k) * lay.size);
        laid_out(u, dt, lay, &input[a..b], &mut inout[a..b], k);
        done += k;
    }
}

/// One user call on `k` packed elements, laid out as the datatype says in aligned scratch
/// memory.
fn laid_out(u: &UserOp, dt: usize, lay: &Layout, input: &[u8], inout: &mut [u8], k: usize) {
    let (lo, hi) = lay.span(k);
    let len = (hi - lo) as usize;
    // u128 words: aligned for every basic type; zeroed so gaps hold no stale data.
    let mut a = vec![0u128; len.div_ceil(16)];
    let mut b = vec![0u128; len.div_ceil(16)];
    let (pa, pb) = (a.as_mut_ptr() as usize, b.as_mut_ptr() as usize);
    // SAFETY: `a` and `b` are live, writable allocations of at least `len` bytes, and nothing
    // else touches them until they are dropped at the end of this function.
    let (sa, sb) = unsafe { (UserBuf::new(pa, len), UserBuf::new(pb, len)) };
    lay.unpack_into(&sa, -lo, 0, input);
    lay.unpack_into(&sb, -lo, 0, inout);
    u.call(dt, pa.wrapping_add_signed(-lo), pb.wrapping_add_signed(-lo), k, lay.extent);
    let mut out = Vec::with_capacity(inout.len());
    lay.pack_from(&sb, -lo, k, &mut out);
    inout.copy_from_slice(&out);
}

// ----- MPI_Op_create, MPI_Op_free, MPI_Op_commutative -----

/// `MPI_Op_create` and `MPI_Op_create_c`: the function takes `int` or `MPI_Count` lengths.
pub(crate) fn op_create(cx: Call, l: &Lib, user_fn: *mut c_void, commute: bool, op: Out<usize>) -> Result<()> {
    let func = if cx.large {
        // SAFETY: non-null; MPI_Op_create_c takes a pointer to an MPI_User_function_c, which
        // has this signature (MPI_Datatype is a pointer-sized handle in the standard ABI).
        UserFn::Large(unsafe { std::mem::transmute::<*mut c_void, UserFnLarge>(user_fn) })
    } else {
        // SAFETY: as above, for MPI_Op_create's MPI_User_function.
        UserFn::Int(unsafe { std::mem::transmute::<*mut c_void, UserFnInt>(user_fn) })
    };
    op.put(l.t().ops.insert(UserOp { func, commutative: commute }));
    Ok(())
}

pub(crate) fn op_free(cx: Call, l: &Lib, op: Out<usize>) -> Result<()> {
    let h = op.get();
    if let Some(o) = Op::from_handle(h) {
        return Err(MpiError::new(
            c::MPI_ERR_OP,
            format!("{}: {} is predefined and cannot be freed", cx.name, o.name()),
        ));
    }
    // Reducers of operations still in flight hold their own copy of the function.
    l.t().ops.remove(h).ok_or_else(|| bad_op(cx.name, h))?;
    op.put(c::MPI_OP_NULL);
    Ok(())
}

pub(crate) fn commutative(cx: Call, _l: &Lib, op: usize, commute: Out<c_int>) -> Result<()> {
    // Every predefined operation is commutative.
    let v = Op::from_handle(op).is_some() || user_op(cx.name, op)?.commutative;
    commute.put(v as c_int);
    Ok(())
}

// ----- MPI_Reduce_local -----

/// `inoutbuf = inbuf op inoutbuf` over `count` elements of `dt`, between the application's
/// buffers: a predefined op on a contiguous type works in place, other types are packed; a user
/// function is called on the buffers themselves.
pub(crate) fn reduce_local(
    cx: Call,
    _l: &Lib,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: usize,
    datatype: Dt,
    op: usize,
) -> Result<()> {
    let call = cx.name;
    let (dt, lay) = (datatype.handle, datatype.layout());
    let how = resolve(call, op, dt, lay)?;
    let bytes = count
        .checked_mul(lay.size)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| MpiError::count_overflow(call, "count", count, type_name(dt, lay)))?;
    for (p, what) in [(inbuf as usize, "inbuf"), (inoutbuf as usize, "inoutbuf")] {
        if p == c::MPI_IN_PLACE {
            return Err(MpiError::new(
                c::MPI_ERR_BUFFER,
                format!("{call}: {what} is MPI_IN_PLACE, which it does not accept"),
            ));
        }
    }
    if bytes == 0 {
        return Ok(());
    }
    let (inp, io) = (inbuf as usize, inoutbuf as usize);
    match how {
        Resolved::User(u) => u.call(dt, inp, io, count, lay.extent),
        Resolved::Predefined(o, k) => {
            let (lo, hi) = lay.span(count);
            let len = (hi - lo) as usize;
            // SAFETY: MPI_Reduce_local's contract: both buffers hold `count` elements of the
            // datatype, covering exactly [buf+lo, buf+hi), and `inoutbuf` is writable.
            let (si, so) = unsafe {
                (UserBuf::new(inp.wrapping_add_signed(lo), len), UserBuf::new(io.wrapping_add_signed(lo), len))
            };
            if lay.is_contiguous() {
                // In place; MPI forbids aliased buffers, but a copy keeps an application that
                // passes them anyway away from undefined behaviour.
                let overlap = inp < io + bytes && io < inp + bytes;
                let copy;
                let input = if overlap {
                    copy = si.read(0, bytes).to_vec();
                    &copy[..]
                } else {
                    si.read(0, bytes)
                };
                // SAFETY: `inoutbuf` holds `bytes` writable bytes (contiguous type: lo is 0) that
                // `input` does not overlap, and nothing else accesses them during the call.
                let out = unsafe { std::slice::from_raw_parts_mut(io as *mut u8, bytes) };
                op::apply_kind(o, k, input, out);
            } else {
                let (mut input, mut acc) = (Vec::with_capacity(bytes), Vec::with_capacity(bytes));
                lay.pack_from(&si, -lo, count, &mut input);
                lay.pack_from(&so, -lo, count, &mut acc);
                op::apply_kind(o, k, &input, &mut acc);
                lay.unpack_into(&so, -lo, 0, &acc);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::datatype::predefined;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);
    const DT: usize = 0x1234;

    /// Composes affine maps {a, gap, b, gap}: v = "u, then v".
    unsafe extern "C" fn compose_strided(inp: *mut c_void, io: *mut c_void, len: *mut c_int, dt: *mut usize) {
        // SAFETY: called by `UserOp::call` with `len` elements of the strided type at both.
        unsafe {
            assert_eq!(*dt, DT);
            CALLS.fetch_add(1, Ordering::Relaxed);
            let (u, v) = (inp as *const u32, io as *mut u32);
            for k in 0..*len as usize {
                let (ua, ub, va, vb) = (*u.add(4 * k), *u.add(4 * k + 2), *v.add(4 * k), *v.add(4 * k + 2));
                *v.add(4 * k) = va.wrapping_mul(ua);
                *v.add(4 * k + 2) = va.wrapping_mul(ub).wrapping_add(vb);
            }
        }
    }

    unsafe extern "C" fn compose_c(inp: *mut c_void, io: *mut c_void, len: *mut i64, dt: *mut usize) {
        // SAFETY: as above, packed pairs {a, b}; alignment is the caller's promise.
        unsafe {
            assert_eq!(*dt, DT);
            assert!((inp as usize).is_multiple_of(4) && (io as usize).is_multiple_of(4));
            let (u, v) = (inp as *const u32, io as *mut u32);
            for k in 0..*len as usize {
                let (ua, ub, va, vb) = (*u.add(2 * k), *u.add(2 * k + 1), *v.add(2 * k), *v.add(2 * k + 1));
                *v.add(2 * k) = va.wrapping_mul(ua);
                *v.add(2 * k + 1) = va.wrapping_mul(ub).wrapping_add(vb);
            }
        }
    }

    fn packed(v: &[(u32, u32)]) -> Vec<u8> {
        v.iter().flat_map(|&(a, b)| [a.to_ne_bytes(), b.to_ne_bytes()].concat()).collect()
    }

    fn then((ua, ub): (u32, u32), (va, vb): (u32, u32)) -> (u32, u32) {
        (va.wrapping_mul(ua), va.wrapping_mul(ub).wrapping_add(vb))
    }

    #[test]
    fn user_functions_see_the_datatype_layout_in_order() {
        let uint = predefined(c::MPI_UNSIGNED).unwrap();
        let strided = Layout::resized(&Layout::vector(2, 1, 2, uint).unwrap(), 0, 16);
        let u = UserOp { func: UserFn::Int(compose_strided), commutative: false };
        // More elements than one scratch piece holds.
        let n = PIECE_BYTES / 16 + 3;
        let x: Vec<(u32, u32)> = (0..n as u32).map(|k| (2 * k + 1, k)).collect();
        let y: Vec<(u32, u32)> = (0..n as u32).map(|k| (k | 1, 7 * k)).collect();
        let mut io = packed(&y);
        CALLS.store(0, Ordering::Relaxed);
        packed_user(&u, DT, &strided, &packed(&x), &mut io);
        assert_eq!(CALLS.load(Ordering::Relaxed), 2);
        let want: Vec<(u32, u32)> = x.iter().zip(&y).map(|(&a, &b)| then(a, b)).collect();
        assert_eq!(io, packed(&want));
    }

    #[test]
    fn misaligned_packed_data_is_realigned() {
        let pair = Layout::contiguous(2, predefined(c::MPI_UNSIGNED).unwrap());
        let u = UserOp { func: UserFn::Large(compose_c), commutative: false };
        let x = [(3u32, 1u32), (5, 2)];
        let y = [(7u32, 4u32), (9, 8)];
        let mut inp = vec![0u8];
        inp.extend(packed(&x));
        let mut io = vec![0u8];
        io.extend(packed(&y));
        packed_user(&u, DT, &pair, &inp[1..], &mut io[1..]);
        assert_eq!(&io[1..], &packed(&[then(x[0], y[0]), then(x[1], y[1])])[..]);
    }
}
