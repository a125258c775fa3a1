//! Groups: the standard's constructors and queries over `baton_core::group::Group`.

use crate::errors::guard;
use crate::nonnull_mut;
use crate::state::{lib, Lib};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use baton_core::group::Group;
use std::ffi::c_int;
use std::sync::Arc;

const W: usize = c::MPI_COMM_WORLD;

fn out<T: Copy>(call: &str, arg: &str, p: *mut T, v: T) -> Result<()> {
    nonnull_mut(call, arg, p)?;
    // SAFETY: checked non-null.
    unsafe { *p = v };
    Ok(())
}

unsafe fn int_array<'a>(call: &str, arg: &str, n: c_int, p: *const c_int) -> Result<&'a [c_int]> {
    if n < 0 {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: n {n} is negative")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    crate::nonnull(call, arg, p)?;
    // SAFETY: the caller passes `n` ints.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// Ranks must be valid for `g` and distinct.
fn check_ranks(call: &str, g: &Group, ranks: &[c_int]) -> Result<()> {
    let mut seen = vec![false; g.procs.len()];
    for &r in ranks {
        if r < 0 || r >= g.size() {
            return Err(MpiError::new(
                c::MPI_ERR_RANK,
                format!("{call}: rank {r} is out of range for a group of size {}", g.size()),
            ));
        }
        if std::mem::replace(&mut seen[r as usize], true) {
            return Err(MpiError::new(c::MPI_ERR_RANK, format!("{call}: rank {r} appears twice")));
        }
    }
    Ok(())
}

fn ranges(call: &str, g: &Group, n: c_int, r: *mut [c_int; 3]) -> Result<Vec<c_int>> {
    if n < 0 {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: n {n} is negative")));
    }
    let rs: &[[c_int; 3]] = if n == 0 {
        &[]
    } else {
        crate::nonnull_mut(call, "ranges", r)?;
        // SAFETY: the caller passes `n` triplets.
        unsafe { std::slice::from_raw_parts(r, n as usize) }
    };
    for &[first, last, stride] in rs {
        if stride == 0 {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: a range has stride 0")));
        }
        for v in [first, last] {
            if v < 0 || v >= g.size() {
                return Err(MpiError::new(
                    c::MPI_ERR_RANK,
                    format!("{call}: rank {v} is out of range for a group of size {}", g.size()),
                ));
            }
        }
    }
    let ranks = Group::expand_ranges(rs);
    check_ranks(call, g, &ranks)?;
    Ok(ranks)
}

fn new(l: &Lib, call: &str, out_p: *mut usize, g: Group) -> Result<()> {
    let h = l.new_group(g);
    out(call, "newgroup", out_p, h)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_size(group: usize, size: *mut c_int) -> c_int {
    guard(W, || {
        let g = lib("MPI_Group_size")?.group("MPI_Group_size", group)?;
        out("MPI_Group_size", "size", size, g.size())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_rank(group: usize, rank: *mut c_int) -> c_int {
    guard(W, || {
        let l = lib("MPI_Group_rank")?;
        let g = l.group("MPI_Group_rank", group)?;
        out("MPI_Group_rank", "rank", rank, g.rank_of(l.mpi.me))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_incl(group: usize, n: c_int, ranks: *const c_int, newgroup: *mut usize) -> c_int {
    guard(W, || {
        let call = "MPI_Group_incl";
        let l = lib(call)?;
        let g = l.group(call, group)?;
        // SAFETY: `n` ints per the MPI contract.
        let r = unsafe { int_array(call, "ranks", n, ranks)? };
        check_ranks(call, &g, r)?;
        new(l, call, newgroup, g.incl(r))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_excl(group: usize, n: c_int, ranks: *const c_int, newgroup: *mut usize) -> c_int {
    guard(W, || {
        let call = "MPI_Group_excl";
        let l = lib(call)?;
        let g = l.group(call, group)?;
        // SAFETY: `n` ints per the MPI contract.
        let r = unsafe { int_array(call, "ranks", n, ranks)? };
        check_ranks(call, &g, r)?;
        new(l, call, newgroup, g.excl(r))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_range_incl(
    group: usize,
    n: c_int,
    r: *mut [c_int; 3],
    newgroup: *mut usize,
) -> c_int {
    guard(W, || {
        let call = "MPI_Group_range_incl";
        let l = lib(call)?;
        let g = l.group(call, group)?;
        let ranks = ranges(call, &g, n, r)?;
        new(l, call, newgroup, g.incl(&ranks))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_range_excl(
    group: usize,
    n: c_int,
    r: *mut [c_int; 3],
    newgroup: *mut usize,
) -> c_int {
    guard(W, || {
        let call = "MPI_Group_range_excl";
        let l = lib(call)?;
        let g = l.group(call, group)?;
        let ranks = ranges(call, &g, n, r)?;
        new(l, call, newgroup, g.excl(&ranks))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_translate_ranks(
    a: usize,
    n: c_int,
    ranks: *const c_int,
    b: usize,
    out_ranks: *mut c_int,
) -> c_int {
    guard(W, || {
        let call = "MPI_Group_translate_ranks";
        let l = lib(call)?;
        let (ga, gb) = (l.group(call, a)?, l.group(call, b)?);
        // SAFETY: `n` ints per the MPI contract.
        let r = unsafe { int_array(call, "ranks1", n, ranks)? };
        for &x in r {
            if x != c::MPI_PROC_NULL && (x < 0 || x >= ga.size()) {
                return Err(MpiError::new(
                    c::MPI_ERR_RANK,
                    format!("{call}: rank {x} is out of range for group1 of size {}", ga.size()),
                ));
            }
        }
        let t = ga.translate(r, &gb);
        if !t.is_empty() {
            nonnull_mut(call, "ranks2", out_ranks)?;
            // SAFETY: the caller provides `n` ints.
            unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), out_ranks, t.len()) };
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_compare(a: usize, b: usize, result: *mut c_int) -> c_int {
    guard(W, || {
        let call = "MPI_Group_compare";
        let l = lib(call)?;
        let (ga, gb) = (l.group(call, a)?, l.group(call, b)?);
        out(call, "result", result, ga.compare(&gb))
    })
}

fn binop(call: &str, a: usize, b: usize, newgroup: *mut usize, f: impl Fn(&Group, &Group) -> Group) -> c_int {
    guard(W, || {
        let l = lib(call)?;
        let (ga, gb): (Arc<Group>, Arc<Group>) = (l.group(call, a)?, l.group(call, b)?);
        new(l, call, newgroup, f(&ga, &gb))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_union(a: usize, b: usize, newgroup: *mut usize) -> c_int {
    binop("MPI_Group_union", a, b, newgroup, Group::union)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_intersection(a: usize, b: usize, newgroup: *mut usize) -> c_int {
    binop("MPI_Group_intersection", a, b, newgroup, Group::intersection)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_difference(a: usize, b: usize, newgroup: *mut usize) -> c_int {
    binop("MPI_Group_difference", a, b, newgroup, Group::difference)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_free(group: *mut usize) -> c_int {
    guard(W, || {
        let call = "MPI_Group_free";
        let l = lib(call)?;
        nonnull_mut(call, "group", group)?;
        // SAFETY: checked non-null.
        let h = unsafe { *group };
        if h != c::MPI_GROUP_EMPTY && l.t().groups.remove(h).is_none() {
            return Err(MpiError::new(c::MPI_ERR_GROUP, format!("{call}: group {h:#x} is not a valid group handle")));
        }
        out(call, "group", group, c::MPI_GROUP_NULL)
    })
}
