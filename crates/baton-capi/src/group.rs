//! Groups: the standard's constructors and queries over `baton_core::group::Group`, and
//! `MPI_Comm_create_from_group` (a communicator from a group alone). The entry points are
//! generated (`abi/bindings.tsv`); handles, counts and arrays arrive checked.

use crate::state::Lib;
use crate::validate::{Call, Out};
use baton_abi::consts as c;
use baton_core::comm::{hash_words, Comm};
use baton_core::error::{HandleKind, MpiError, Result};
use baton_core::group::Group;
use std::ffi::c_int;
use std::sync::Arc;

fn out_of_range(call: &str, r: c_int, g: &Group, of: &str) -> MpiError {
    MpiError::rank_out_of_range_of(call, "rank", r, g.size(), of)
}

/// Ranks must be valid for `g` and distinct.
fn check_ranks(call: &str, g: &Group, ranks: &[c_int]) -> Result<()> {
    let mut seen = vec![false; g.procs.len()];
    for &r in ranks {
        if r < 0 || r >= g.size() {
            return Err(out_of_range(call, r, g, "a group"));
        }
        if std::mem::replace(&mut seen[r as usize], true) {
            return Err(MpiError::new(c::MPI_ERR_RANK, format!("{call}: rank {r} appears twice")));
        }
    }
    Ok(())
}

/// The ranks `(first, last, stride)` triplets name, their ends and strides checked.
fn expand(call: &str, g: &Group, ranges: &[[c_int; 3]]) -> Result<Vec<c_int>> {
    for &[first, last, stride] in ranges {
        if stride == 0 {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: a range has stride 0")));
        }
        if let Some(v) = [first, last].into_iter().find(|&v| v < 0 || v >= g.size()) {
            return Err(out_of_range(call, v, g, "a group"));
        }
    }
    // The ranks are checked (range, duplicates) with those of MPI_Group_incl.
    Ok(Group::expand_ranges(ranges))
}

fn new(l: &Lib, newgroup: Out<usize>, g: Group) -> Result<()> {
    newgroup.put(l.new_group(g));
    Ok(())
}

#[inline]
pub(crate) fn size(_cx: Call, _l: &Lib, group: Arc<Group>, size: Out<c_int>) -> Result<()> {
    size.put(group.size());
    Ok(())
}

#[inline]
pub(crate) fn rank(_cx: Call, l: &Lib, group: Arc<Group>, rank: Out<c_int>) -> Result<()> {
    rank.put(group.rank_of(l.mpi.me));
    Ok(())
}

/// `MPI_Group_incl` and, with `EXCL`, `MPI_Group_excl`.
pub(crate) fn incl<const EXCL: bool>(
    cx: Call,
    l: &Lib,
    group: Arc<Group>,
    _n: usize,
    ranks: &[c_int],
    newgroup: Out<usize>,
) -> Result<()> {
    check_ranks(cx.name, &group, ranks)?;
    new(l, newgroup, if EXCL { group.excl(ranks) } else { group.incl(ranks) })
}

/// `MPI_Group_range_incl` and, with `EXCL`, `MPI_Group_range_excl`.
pub(crate) fn range_incl<const EXCL: bool>(
    cx: Call,
    l: &Lib,
    group: Arc<Group>,
    n: usize,
    ranges: &[[c_int; 3]],
    newgroup: Out<usize>,
) -> Result<()> {
    let ranks = expand(cx.name, &group, ranges)?;
    incl::<EXCL>(cx, l, group, n, &ranks, newgroup)
}

pub(crate) fn translate_ranks(
    cx: Call,
    _l: &Lib,
    group1: Arc<Group>,
    _n: usize,
    ranks1: &[c_int],
    group2: Arc<Group>,
    ranks2: *mut c_int,
) -> Result<()> {
    if let Some(&x) = ranks1.iter().find(|&&x| x != c::MPI_PROC_NULL && (x < 0 || x >= group1.size())) {
        return Err(out_of_range(cx.name, x, &group1, "group1"));
    }
    let t = group1.translate(ranks1, &group2);
    if !t.is_empty() {
        crate::nonnull_mut(cx.name, "ranks2", ranks2)?;
        // SAFETY: the caller provides `n` ints, as many as `ranks1` has.
        unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), ranks2, t.len()) };
    }
    Ok(())
}

#[inline]
pub(crate) fn compare(_cx: Call, _l: &Lib, group1: Arc<Group>, group2: Arc<Group>, result: Out<c_int>) -> Result<()> {
    result.put(group1.compare(&group2));
    Ok(())
}

pub(crate) fn union(_cx: Call, l: &Lib, a: Arc<Group>, b: Arc<Group>, newgroup: Out<usize>) -> Result<()> {
    new(l, newgroup, a.union(&b))
}

pub(crate) fn intersection(_cx: Call, l: &Lib, a: Arc<Group>, b: Arc<Group>, newgroup: Out<usize>) -> Result<()> {
    new(l, newgroup, a.intersection(&b))
}

pub(crate) fn difference(_cx: Call, l: &Lib, a: Arc<Group>, b: Arc<Group>, newgroup: Out<usize>) -> Result<()> {
    new(l, newgroup, a.difference(&b))
}

pub(crate) fn free(cx: Call, l: &Lib, group: Out<usize>) -> Result<()> {
    let h = group.get();
    if h != c::MPI_GROUP_EMPTY && l.t().groups.remove(h).is_none() {
        return Err(MpiError::invalid_handle(cx.name, "group", HandleKind::Group, h));
    }
    group.put(c::MPI_GROUP_NULL);
    Ok(())
}

/// `MPI_Comm_create_from_group`: a communicator over `group`, made by its members alone. Until
/// sessions exist the groups come from the world process set (`MPI_Comm_group` of
/// `MPI_COMM_WORLD` and groups made from it). As with `MPI_Intercomm_create_from_groups`, every
/// member knows the whole group, so the context id is derived from the members' identities and
/// `stringtag` with no message: the members must pass the same `stringtag` (the standard's
/// rule), and different tags keep creations over one group apart whatever order threads make
/// them in.
pub(crate) fn create_from_group(
    cx: Call,
    l: &Lib,
    group: Arc<Group>,
    stringtag: String,
    info: crate::info::Pairs,
    errhandler: usize,
    newcomm: Out<usize>,
) -> Result<()> {
    const DISC: u64 = u64::from_le_bytes(*b"fromgrp\0");
    let call = cx.name;
    let me = group.rank_of(l.mpi.me);
    if me == c::MPI_UNDEFINED {
        return Err(MpiError::new(c::MPI_ERR_GROUP, format!("{call}: the calling process is not in group")));
    }
    if let Some(&p) = group.procs.iter().find(|&&p| l.world.core.group.rank_of(p) == c::MPI_UNDEFINED) {
        let (job, r) = l.mpi.proc_id(p);
        return Err(MpiError::new(
            c::MPI_ERR_GROUP,
            format!(
                "{call}: group holds rank {r} of job {job:#x}, outside the world process set (the only one until \
                 sessions)"
            ),
        ));
    }
    let ids: Vec<u64> = group
        .procs
        .iter()
        .map(|&p| {
            let (job, r) = l.mpi.proc_id(p);
            hash_words(&[job, r as u64])
        })
        .collect();
    let tag = hash_words(&stringtag.bytes().map(u64::from).collect::<Vec<_>>());
    let ctx = l.mpi.derive_ctx_from_groups(hash_words(&[hash_words(&ids), tag, DISC]));
    newcomm.put(crate::comm::register_from_groups(l, Comm::new(ctx, group.clone(), me), errhandler, info));
    Ok(())
}
