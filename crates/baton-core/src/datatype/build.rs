//! The [`Builder`] every constructor places copies of older layouts through, and the checked
//! arithmetic the constructors share.

use super::{runs_of, Basic, Layout, Piece, FLAT_BLOCKS};
use crate::error::MpiError;
use baton_abi::consts as c;
use std::sync::Arc;

/// Places copies of layouts one after the other in type-map order and tracks the bounds.
///
/// It builds the flat form until that would pass [`FLAT_BLOCKS`] blocks, then the loop form:
/// what was placed flat so far becomes the first piece, and every later placement one piece.
#[derive(Default)]
pub struct Builder {
    size: usize,
    blocks: Vec<(isize, usize)>,
    elems: Vec<(Basic, u64)>,
    /// The loop form's pieces (empty while the layout is flat).
    pieces: Vec<Piece>,
    /// The last layout placed as a piece, by address, so that the pieces of one constructor
    /// share one copy of it (the layouts placed outlive the builder's use of them).
    shared: Option<(usize, Arc<Layout>)>,
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

    fn push_block(&mut self, at: isize, len: usize) {
        if len == 0 {
            return;
        }
        match self.blocks.last_mut() {
            Some(last) if last.0 + last.1 as isize == at => last.1 += len,
            _ => self.blocks.push((at, len)),
        }
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
        self.place_strided(at, n, old.extent, old)
    }

    /// Places `n` copies of `old`, the first at byte displacement `at`, each `stride` bytes after
    /// the previous (the blocks of a vector).
    pub fn place_strided(&mut self, at: isize, n: usize, stride: isize, old: &Layout) -> Result<(), MpiError> {
        if n == 0 {
            return Ok(());
        }
        let ni = isize::try_from(n).map_err(|_| ovf())?;
        let last = mul(ni - 1, stride)?;
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
        // Data blocks and elements, copy after copy: one block when the copies touch.
        match old.single_block() {
            Some((off, len)) if len as isize == stride && self.pieces.is_empty() => self.push_block(at + off, len * n),
            _ if !self.pieces.is_empty()
                || old.pieces.is_some()
                || self.blocks.len().saturating_add(n.saturating_mul(old.blocks.len())) > FLAT_BLOCKS =>
            {
                self.flush();
                let inner = match &self.shared {
                    Some((addr, l)) if *addr == old as *const Layout as usize => l.clone(),
                    _ => {
                        let l = Arc::new(old.clone());
                        self.shared = Some((old as *const Layout as usize, l.clone()));
                        l
                    }
                };
                self.pieces.push(Piece { off: at, count: n, stride, inner });
                return Ok(());
            }
            _ => {
                for e in 0..ni {
                    let base = at + e * stride;
                    for &(off, len) in &old.blocks {
                        self.push_block(base + off, len);
                    }
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

    /// In the loop form, turns what was placed flat since the last piece into a piece.
    fn flush(&mut self) {
        if self.blocks.is_empty() {
            return;
        }
        let blocks = std::mem::take(&mut self.blocks);
        let elems = std::mem::take(&mut self.elems);
        let lo = blocks.iter().map(|b| b.0).min().unwrap_or(0);
        let hi = blocks.iter().map(|b| b.0 + b.1 as isize).max().unwrap_or(0);
        let size = blocks.iter().map(|b| b.1).sum();
        let flat = Layout {
            size,
            lb: lo,
            extent: hi - lo,
            true_lb: lo,
            true_extent: hi - lo,
            runs: runs_of(&blocks),
            blocks,
            elems,
            name: "",
            align: self.align,
            sticky_lb: false,
            sticky_ub: false,
            envelope: None,
            pieces: None,
        };
        self.pieces.push(Piece { off: 0, count: 1, stride: 0, inner: Arc::new(flat) });
    }

    /// The layout of what was placed. `pad` applies the standard's epsilon (a struct's extent
    /// rounded up to its most aligned element) when no marker fixes the bounds.
    pub fn finish(mut self, pad: bool) -> Layout {
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
        let pieces = if self.pieces.is_empty() {
            None
        } else {
            self.flush();
            Some(Arc::from(std::mem::take(&mut self.pieces)))
        };
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
            pieces,
        }
    }
}
