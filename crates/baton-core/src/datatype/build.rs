//! The [`Builder`] every constructor places copies of older layouts through, and the checked
//! arithmetic the constructors share.

use super::{runs_of, Basic, Layout, MAX_BLOCKS};
use crate::error::MpiError;
use baton_abi::consts as c;

/// Places copies of layouts one after the other in type-map order and tracks the bounds.
#[derive(Default)]
pub struct Builder {
    size: usize,
    blocks: Vec<(isize, usize)>,
    elems: Vec<(Basic, u64)>,
    data: Option<(isize, isize)>,
    lb_nat: Option<isize>,
    ub_nat: Option<isize>,
    lb_sticky: Option<isize>,
    ub_sticky: Option<isize>,
    align: usize,
}

pub(super) fn ovf() -> MpiError {
    MpiError::new(c::MPI_ERR_TYPE, "the type's size or displacements overflow the address space")
}

pub(super) fn bad(msg: String) -> MpiError {
    MpiError::new(c::MPI_ERR_ARG, msg)
}

pub(super) fn mul(a: isize, b: isize) -> Result<isize, MpiError> {
    a.checked_mul(b).ok_or_else(ovf)
}

pub(super) fn add(a: isize, b: isize) -> Result<isize, MpiError> {
    a.checked_add(b).ok_or_else(ovf)
}

pub(super) fn count_of(what: &str, v: i64) -> Result<usize, MpiError> {
    let class = if what == "count" { c::MPI_ERR_COUNT } else { c::MPI_ERR_ARG };
    usize::try_from(v).map_err(|_| MpiError::new(class, format!("{what} {v} is negative")))
}

impl Builder {
    pub fn new() -> Builder {
        Builder { align: 1, ..Default::default() }
    }

    fn push_block(&mut self, at: isize, len: usize) -> Result<(), MpiError> {
        if len == 0 {
            return Ok(());
        }
        match self.blocks.last_mut() {
            Some(last) if last.0 + last.1 as isize == at => last.1 += len,
            _ => {
                if self.blocks.len() >= MAX_BLOCKS {
                    return Err(MpiError::new(
                        c::MPI_ERR_TYPE,
                        format!(
                            "the type map would have more than {MAX_BLOCKS} separate blocks per element \
                         (a loop-based representation is not implemented yet)"
                        ),
                    ));
                }
                self.blocks.push((at, len));
            }
        }
        Ok(())
    }

    fn push_elems(&mut self, b: Basic, n: u64) {
        if n == 0 {
            return;
        }
        match self.elems.last_mut() {
            Some(last) if last.0 == b => last.1 += n,
            _ => self.elems.push((b, n)),
        }
    }

    /// Places `n` copies of `old`, the first at byte displacement `at`, each `old.extent` after
    /// the previous (one block of `MPI_Type_create_hindexed` / a struct entry).
    pub fn place(&mut self, at: isize, n: usize, old: &Layout) -> Result<(), MpiError> {
        if n == 0 {
            return Ok(());
        }
        let ni = isize::try_from(n).map_err(|_| ovf())?;
        let last = mul(ni - 1, old.extent)?;
        let (lo_shift, hi_shift) = (last.min(0), last.max(0));
        self.size = old.size.checked_mul(n).and_then(|s| s.checked_add(self.size)).ok_or_else(ovf)?;
        if self.size > isize::MAX as usize {
            return Err(ovf());
        }
        // Bounds: markers, when the old type has them, else the old type's own bounds.
        let lb = add(add(at, old.lb)?, lo_shift)?;
        let ub = add(add(add(at, old.lb)?, old.extent)?, hi_shift)?;
        if old.size > 0 || old.sticky_lb || old.sticky_ub {
            let slot = if old.sticky_lb { &mut self.lb_sticky } else { &mut self.lb_nat };
            *slot = Some(slot.map_or(lb, |v| v.min(lb)));
            let slot = if old.sticky_ub { &mut self.ub_sticky } else { &mut self.ub_nat };
            *slot = Some(slot.map_or(ub, |v| v.max(ub)));
            self.align = self.align.max(old.align);
        }
        if old.size == 0 {
            return Ok(());
        }
        let dlo = add(add(at, old.true_lb)?, lo_shift)?;
        let dhi = add(add(add(at, old.true_lb)?, old.true_extent)?, hi_shift)?;
        self.data = Some(self.data.map_or((dlo, dhi), |(a, b)| (a.min(dlo), b.max(dhi))));
        // Data blocks and elements, copy after copy.
        if old.blocks.len() == 1 && old.blocks[0].1 as isize == old.extent {
            let (off, len) = old.blocks[0];
            self.push_block(at + off, len * n)?;
        } else {
            for e in 0..ni {
                let base = at + e * old.extent;
                for &(off, len) in &old.blocks {
                    self.push_block(base + off, len)?;
                }
            }
        }
        if old.elems.len() == 1 {
            self.push_elems(old.elems[0].0, old.elems[0].1 * n as u64);
        } else {
            for _ in 0..n {
                for &(b, k) in &old.elems {
                    self.push_elems(b, k);
                }
            }
        }
        Ok(())
    }

    /// The layout of what was placed. `pad` applies the standard's epsilon (a struct's extent
    /// rounded up to its most aligned element) when no marker fixes the bounds.
    pub fn finish(self, pad: bool) -> Layout {
        let sticky_lb = self.lb_sticky.is_some();
        let sticky_ub = self.ub_sticky.is_some();
        let lb = self.lb_sticky.or(self.lb_nat).unwrap_or(0);
        let mut ub = self.ub_sticky.or(self.ub_nat).unwrap_or(lb);
        if pad && !sticky_lb && !sticky_ub && self.align > 1 {
            let a = self.align as isize;
            let ext = ub - lb;
            ub += (a - ext.rem_euclid(a)) % a;
        }
        let (true_lb, true_hi) = self.data.unwrap_or((0, 0));
        Layout {
            size: self.size,
            lb,
            extent: ub - lb,
            true_lb,
            true_extent: true_hi - true_lb,
            runs: runs_of(&self.blocks),
            blocks: self.blocks,
            elems: self.elems,
            name: "",
            align: self.align,
            sticky_lb,
            sticky_ub,
            envelope: None,
        }
    }
}
