//! The type constructors (`MPI_Type_contiguous` ... `MPI_Type_create_darray`,
//! `MPI_Type_create_resized`) as [`Layout`] functions, all built through one [`Builder`].

use super::build::{add, bad, count_of, mul, ovf};
use super::{Builder, Layout};
use crate::error::MpiError;
use baton_abi::consts as c;

impl Layout {
    /// `count` copies of `old` back to back (`MPI_Type_contiguous`). Panics when the result
    /// overflows; [`Layout::try_contiguous`] reports it instead.
    pub fn contiguous(count: usize, old: &Layout) -> Layout {
        Layout::try_contiguous(count as i64, old).expect("MPI_Type_contiguous layout")
    }

    pub fn try_contiguous(count: i64, old: &Layout) -> Result<Layout, MpiError> {
        let mut b = Builder::new();
        b.place(0, count_of("count", count)?, old)?;
        Ok(b.finish(false))
    }

    /// `MPI_Type_vector`: the stride counts extents of `old`.
    pub fn vector(count: i64, blocklength: i64, stride: i64, old: &Layout) -> Result<Layout, MpiError> {
        let stride = isize::try_from(stride).map_err(|_| ovf())?;
        Layout::hvector(count, blocklength, mul(stride, old.extent)?, old)
    }

    /// `MPI_Type_create_hvector`: the stride is in bytes. One block (`blocklength` copies of
    /// `old`) is built once and placed `count` times, so a long vector takes the loop form
    /// without a step per block.
    pub fn hvector(count: i64, blocklength: i64, stride: isize, old: &Layout) -> Result<Layout, MpiError> {
        let count = count_of("count", count)?;
        let bl = count_of("blocklength", blocklength)?;
        let mut block = Builder::new();
        block.place(0, bl, old)?;
        let block = block.finish(false);
        let mut b = Builder::new();
        b.place_strided(0, count, stride, &block)?;
        Ok(b.finish(false))
    }

    /// `MPI_Type_indexed` / `MPI_Type_create_indexed_block`: displacements count extents of `old`.
    pub fn indexed(blocklengths: &[i64], displs: &[i64], old: &Layout) -> Result<Layout, MpiError> {
        let bytes = displs
            .iter()
            .map(|&d| isize::try_from(d).map_err(|_| ovf()).and_then(|d| mul(d, old.extent)))
            .collect::<Result<Vec<_>, _>>()?;
        Layout::hindexed(blocklengths, &bytes, old)
    }

    /// `MPI_Type_create_hindexed` / `..._hindexed_block`: displacements in bytes.
    pub fn hindexed(blocklengths: &[i64], displs: &[isize], old: &Layout) -> Result<Layout, MpiError> {
        let mut b = Builder::new();
        for (i, (&bl, &d)) in blocklengths.iter().zip(displs).enumerate() {
            b.place(d, count_of(&format!("blocklength[{i}]"), bl)?, old)?;
        }
        Ok(b.finish(false))
    }

    /// `MPI_Type_create_struct`.
    pub fn structure(blocklengths: &[i64], displs: &[isize], types: &[&Layout]) -> Result<Layout, MpiError> {
        let mut b = Builder::new();
        for (i, ((&bl, &d), t)) in blocklengths.iter().zip(displs).zip(types).enumerate() {
            b.place(d, count_of(&format!("blocklength[{i}]"), bl)?, t)?;
        }
        Ok(b.finish(true))
    }

    /// `MPI_Type_create_resized`: the same data with explicit lb and extent.
    pub fn resized(old: &Layout, lb: isize, extent: isize) -> Layout {
        let mut l = old.clone();
        l.lb = lb;
        l.extent = extent;
        l.sticky_lb = true;
        l.sticky_ub = true;
        l.name = "";
        l.envelope = None;
        l
    }

    /// `MPI_Type_create_subarray`; `fortran` selects column-major order.
    pub fn subarray(
        sizes: &[i64],
        subsizes: &[i64],
        starts: &[i64],
        fortran: bool,
        old: &Layout,
    ) -> Result<Layout, MpiError> {
        let n = ndims(sizes)?;
        let mut idx: Vec<Vec<i64>> = Vec::with_capacity(n);
        for d in 0..n {
            let (s, sub, st) = (sizes[d], subsizes[d], starts[d]);
            if s <= 0 {
                return Err(bad(format!("sizes[{d}] = {s} must be positive")));
            }
            if sub < 0 || sub > s {
                return Err(bad(format!("subsizes[{d}] = {sub} must lie in 0..={s} (sizes[{d}])")));
            }
            if st < 0 || st > s - sub {
                return Err(bad(format!(
                    "starts[{d}] = {st} must lie in 0..={} (sizes[{d}] - subsizes[{d}])",
                    s - sub
                )));
            }
            idx.push((st..st + sub).collect());
        }
        grid(sizes, &idx, fortran, old)
    }

    /// `MPI_Type_create_darray` for process `rank` of `size`.
    #[allow(clippy::too_many_arguments)]
    pub fn darray(
        size: i32,
        rank: i32,
        gsizes: &[i64],
        distribs: &[i32],
        dargs: &[i32],
        psizes: &[i32],
        fortran: bool,
        old: &Layout,
    ) -> Result<Layout, MpiError> {
        let n = ndims(gsizes)?;
        if size <= 0 || rank < 0 || rank >= size {
            return Err(bad(format!("rank {rank} is not in 0..{size}")));
        }
        let prod: i64 = psizes.iter().map(|&p| p as i64).product();
        if psizes.iter().any(|&p| p <= 0) || prod != size as i64 {
            return Err(bad(format!("the product of psizes {psizes:?} is not size {size}")));
        }
        // Process grid coordinates are row-major whatever the array order.
        let mut coords = vec![0i64; n];
        let mut r = rank as i64;
        for d in (0..n).rev() {
            coords[d] = r % psizes[d] as i64;
            r /= psizes[d] as i64;
        }
        let mut idx: Vec<Vec<i64>> = Vec::with_capacity(n);
        for d in 0..n {
            let (g, p, k) = (gsizes[d], psizes[d] as i64, dargs[d]);
            if g <= 0 {
                return Err(bad(format!("gsizes[{d}] = {g} must be positive")));
            }
            let mine: Vec<i64> = match distribs[d] {
                c::MPI_DISTRIBUTE_NONE => {
                    if p != 1 {
                        return Err(bad(format!("distribs[{d}] is MPI_DISTRIBUTE_NONE but psizes[{d}] is {p}, not 1")));
                    }
                    (0..g).collect()
                }
                c::MPI_DISTRIBUTE_BLOCK => {
                    let b = if k == c::MPI_DISTRIBUTE_DFLT_DARG { (g + p - 1) / p } else { k as i64 };
                    if b <= 0 || b * p < g {
                        return Err(bad(format!(
                            "dargs[{d}] = {k}: blocks of {b} on {p} processes do not cover gsizes[{d}] = {g}"
                        )));
                    }
                    let lo = (coords[d] * b).min(g);
                    (lo..(lo + b).min(g)).collect()
                }
                c::MPI_DISTRIBUTE_CYCLIC => {
                    let b = if k == c::MPI_DISTRIBUTE_DFLT_DARG { 1 } else { k as i64 };
                    if b <= 0 {
                        return Err(bad(format!("dargs[{d}] = {k} must be positive")));
                    }
                    (0..g).filter(|i| (i / b) % p == coords[d]).collect()
                }
                x => return Err(bad(format!("distribs[{d}] = {x} is not an MPI_DISTRIBUTE_ constant"))),
            };
            idx.push(mine);
        }
        grid(gsizes, &idx, fortran, old)
    }
}

/// The number of dimensions of a subarray or distributed array: that of `sizes`, at least one.
fn ndims<T>(sizes: &[T]) -> Result<usize, MpiError> {
    match sizes.len() {
        0 => Err(bad("ndims must be positive".to_string())),
        n => Ok(n),
    }
}

/// The layout of `old` at every point of the cartesian product of `idx` (one list of indices per
/// dimension) of an array of `sizes`, in type-map order (last dimension fastest in C order, first
/// in Fortran order), with lb 0 and the whole array as extent (subarray and darray).
fn grid(sizes: &[i64], idx: &[Vec<i64>], fortran: bool, old: &Layout) -> Result<Layout, MpiError> {
    let n = sizes.len();
    // dims[0] is the slowest dimension, dims[n-1] the fastest (contiguous in memory).
    let dims: Vec<usize> = if fortran { (0..n).rev().collect() } else { (0..n).collect() };
    let mut stride = vec![0isize; n];
    let mut s = old.extent;
    for &d in dims.iter().rev() {
        stride[d] = s;
        s = mul(s, isize::try_from(sizes[d]).map_err(|_| ovf())?)?;
    }
    let total_extent = s;
    let mut b = Builder::new();
    if idx.iter().all(|v| !v.is_empty()) {
        let fast = dims[n - 1];
        // Runs of consecutive indices in the fastest dimension become one placement each.
        let mut runs: Vec<(i64, usize)> = Vec::new();
        for &i in &idx[fast] {
            match runs.last_mut() {
                Some(r) if r.0 + r.1 as i64 == i => r.1 += 1,
                _ => runs.push((i, 1)),
            }
        }
        let mut pos = vec![0usize; n - 1];
        'outer: loop {
            let mut base = 0isize;
            for (k, &d) in dims[..n - 1].iter().enumerate() {
                base = add(base, mul(idx[d][pos[k]] as isize, stride[d])?)?;
            }
            for &(i, len) in &runs {
                b.place(add(base, mul(i as isize, stride[fast])?)?, len, old)?;
            }
            let mut k = n - 1;
            loop {
                if k == 0 {
                    break 'outer;
                }
                k -= 1;
                pos[k] += 1;
                if pos[k] < idx[dims[k]].len() {
                    break;
                }
                pos[k] = 0;
            }
        }
    }
    let mut l = b.finish(false);
    l.lb = 0;
    l.extent = total_extent;
    l.sticky_lb = true;
    l.sticky_ub = true;
    Ok(l)
}
