//! Datatype layouts: where the bytes of one element lie, and packing to and from a byte stream.
//!
//! A [`Layout`] is the normalized form of a type map: per element, the list of contiguous data
//! blocks in type-map order (blocks that follow each other both in the type map and in memory are
//! merged), the basic elements run-length encoded, plus extent and bounds. Every constructor
//! (`contiguous`, `vector`, ..., `darray`, `resized`) places copies of older layouts through one
//! [`Builder`], so they all normalize the same way. Contiguous types take the direct path
//! everywhere; the others are packed into (or unpacked from) the packed byte stream that travels
//! on the wire, in type-map order (so a vector with a negative stride packs its last block first,
//! as the standard's type map says).
//!
//! The block list is explicit: a vector of a million separate blocks holds a million entries
//! ([`MAX_BLOCKS`] bounds what a constructor may build). Packing and unpacking walk its grouping
//! into [`Run`]s instead (equal blocks at one stride: a matrix column is one run), a batch of
//! blocks at a time.
//!
//! Predefined types live in a table keyed by their standard ABI handle value.

use crate::error::MpiError;
use baton_abi::consts as c;
use baton_transport::mem::UserBuf;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// How a basic element is written in the "external32" representation (big-endian, the
/// standard's sizes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conv {
    /// Single bytes: copied as they are.
    Raw,
    /// An integer; `ext` may differ from the native size (`long` is 4 bytes in external32).
    Int { signed: bool },
    /// An IEEE float of the same size on both sides: byte order only.
    Float,
    /// Two IEEE floats (real, imaginary).
    Complex,
    /// C `long double` (x87 80-bit extended on x86-64, IEEE quad elsewhere) as IEEE quad.
    LongDouble,
    /// Two `long double`s.
    LongDoubleComplex,
}

/// A basic (predefined, non-pair) element: what `MPI_Get_elements` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Basic {
    /// Native size in bytes.
    pub size: u32,
    /// Size in external32.
    pub ext: u32,
    pub conv: Conv,
}

/// One datatype argument of a constructor, as `MPI_Type_get_contents` gives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeArg {
    /// The handle when the argument is a predefined type; 0 for a derived type (the contents
    /// call then makes a new handle for `layout`).
    pub predefined: usize,
    pub layout: Arc<Layout>,
    pub committed: bool,
}

/// The constructor call that made a derived type (`MPI_Type_get_envelope/get_contents`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub combiner: i32,
    pub ints: Vec<i32>,
    pub addrs: Vec<isize>,
    /// Large counts: every count and displacement argument of a `_c` constructor.
    pub counts: Vec<i64>,
    pub types: Vec<TypeArg>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of data in one element (the type's size).
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_extent: isize,
    /// Data blocks of one element in type-map order: (byte offset from the element's start,
    /// length). Neighbours in the list are merged when they are also neighbours in memory.
    pub blocks: Vec<(isize, usize)>,
    /// The same blocks as runs of equal, equally spaced blocks: what packing and unpacking
    /// walk (a column of a matrix is one run, not a list of its elements).
    pub runs: Vec<Run>,
    /// Basic elements of one element in type-map order, run-length encoded: (element, repeat).
    pub elems: Vec<(Basic, u64)>,
    pub name: &'static str,
    /// Alignment of the most aligned basic element (the standard's epsilon rounding of a struct's
    /// extent uses it).
    pub align: usize,
    /// Whether lb / ub come from explicit markers (`MPI_Type_create_resized`, subarray, darray):
    /// such bounds propagate through later constructors instead of the data's bounds.
    pub sticky_lb: bool,
    pub sticky_ub: bool,
    /// The constructor call; None for predefined types.
    pub envelope: Option<Arc<Envelope>>,
}

/// `count` blocks of `len` bytes, the first at byte offset `off` of an element, each `stride`
/// bytes after the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub off: isize,
    pub len: usize,
    pub stride: isize,
    pub count: usize,
}

/// Groups a block list (in type-map order) into runs.
pub fn runs_of(blocks: &[(isize, usize)]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for &(off, len) in blocks {
        match runs.last_mut() {
            Some(r) if r.len == len && r.count == 1 => {
                r.stride = off - r.off;
                r.count = 2;
            }
            Some(r) if r.len == len && r.off + r.count as isize * r.stride == off => r.count += 1,
            _ => runs.push(Run { off, len, stride: len as isize, count: 1 }),
        }
    }
    runs
}

/// The most separate data blocks one element of a type may have (see the module doc).
pub const MAX_BLOCKS: usize = 1 << 26;

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

fn ovf() -> MpiError {
    MpiError::new(c::MPI_ERR_TYPE, "the type's size or displacements overflow the address space")
}

fn bad(msg: String) -> MpiError {
    MpiError::new(c::MPI_ERR_ARG, msg)
}

fn mul(a: isize, b: isize) -> Result<isize, MpiError> {
    a.checked_mul(b).ok_or_else(ovf)
}

fn add(a: isize, b: isize) -> Result<isize, MpiError> {
    a.checked_add(b).ok_or_else(ovf)
}

fn count_of(what: &str, v: i64) -> Result<usize, MpiError> {
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

impl Layout {
    /// A basic element of `size` bytes copied byte for byte in external32 (see
    /// [`Layout::basic_typed`] for the others).
    pub fn basic(name: &'static str, size: usize) -> Layout {
        Layout::basic_typed(name, Basic { size: size as u32, ext: size as u32, conv: Conv::Raw }, size.min(16))
    }

    pub fn basic_typed(name: &'static str, b: Basic, align: usize) -> Layout {
        let size = b.size as usize;
        Layout {
            size,
            lb: 0,
            extent: size as isize,
            true_lb: 0,
            true_extent: size as isize,
            blocks: vec![(0, size)],
            runs: runs_of(&[(0, size)]),
            elems: vec![(b, 1)],
            name,
            align,
            sticky_lb: false,
            sticky_ub: false,
            envelope: None,
        }
    }

    /// The C struct `{ A a; B b; }` used by the MINLOC/MAXLOC pair types.
    fn pair(name: &'static str, a: Basic, b: Basic, b_align: usize, struct_align: usize) -> Layout {
        let (asz, bsz) = (a.size as usize, b.size as usize);
        let b_off = asz.div_ceil(b_align) * b_align;
        let end = b_off + bsz;
        let extent = end.div_ceil(struct_align) * struct_align;
        let blocks = if b_off == asz { vec![(0, asz + bsz)] } else { vec![(0, asz), (b_off as isize, bsz)] };
        let elems = if a == b { vec![(a, 2)] } else { vec![(a, 1), (b, 1)] };
        Layout {
            size: asz + bsz,
            lb: 0,
            extent: extent as isize,
            true_lb: 0,
            true_extent: end as isize,
            runs: runs_of(&blocks),
            blocks,
            elems,
            name,
            align: struct_align,
            sticky_lb: false,
            sticky_ub: false,
            envelope: None,
        }
    }

    /// This layout recording `env` as the call that made it.
    pub fn with_envelope(mut self, env: Envelope) -> Layout {
        self.envelope = Some(Arc::new(env));
        self
    }

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

    /// `MPI_Type_create_hvector`: the stride is in bytes.
    pub fn hvector(count: i64, blocklength: i64, stride: isize, old: &Layout) -> Result<Layout, MpiError> {
        let count = count_of("count", count)?;
        let bl = count_of("blocklength", blocklength)?;
        let mut b = Builder::new();
        for i in 0..count {
            let at = mul(isize::try_from(i).map_err(|_| ovf())?, stride)?;
            b.place(at, bl, old)?;
        }
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
        let n = sizes.len();
        if n == 0 {
            return Err(bad("ndims must be positive".to_string()));
        }
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
        let n = gsizes.len();
        if n == 0 {
            return Err(bad("ndims must be positive".to_string()));
        }
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

    /// Basic elements in the first `bytes` packed bytes, or None if they end mid-element.
    pub fn elements_in(&self, bytes: u64) -> Option<u64> {
        if self.size == 0 {
            return Some(0);
        }
        let per: u64 = self.elems.iter().map(|&(_, n)| n).sum();
        let full = bytes / self.size as u64;
        let mut rem = bytes % self.size as u64;
        let mut n = full * per;
        for &(b, k) in &self.elems {
            if rem == 0 {
                break;
            }
            let run = b.size as u64 * k;
            if rem >= run {
                rem -= run;
                n += k;
            } else {
                n += rem / b.size as u64;
                if !rem.is_multiple_of(b.size as u64) {
                    return None;
                }
                rem = 0;
            }
        }
        Some(n)
    }

    /// Packed bytes taken by `n` basic elements.
    pub fn bytes_for_elements(&self, n: u64) -> u64 {
        let per: u64 = self.elems.iter().map(|&(_, k)| k).sum();
        if per == 0 {
            return 0;
        }
        let mut bytes = n / per * self.size as u64;
        let mut rem = n % per;
        for &(b, k) in &self.elems {
            let t = rem.min(k);
            bytes += t * b.size as u64;
            rem -= t;
        }
        bytes
    }

    /// Elements sit back to back with no gaps: the bytes can be used in place.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.blocks.len() == 1 && self.blocks[0] == (0, self.size) && self.extent == self.size as isize
    }

    /// Byte range touched by `count` elements, relative to the buffer address: (low, high).
    #[inline]
    pub fn span(&self, count: usize) -> (isize, isize) {
        if count == 0 || self.size == 0 {
            return (0, 0);
        }
        let last = (count as isize - 1) * self.extent;
        let lo = self.true_lb.min(last + self.true_lb);
        let hi = (self.true_lb + self.true_extent).max(last + self.true_lb + self.true_extent);
        (lo, hi)
    }

    /// Packs `count` elements found at `base_off` within `span` into `out`.
    pub fn pack_from(&self, span: &UserBuf, base_off: isize, count: usize, out: &mut Vec<u8>) {
        self.pack_range(span, base_off, 0, self.size * count, out);
    }

    /// Appends to `out` the packed bytes `[start, start+len)` of the elements at `base_off`
    /// within `span` (a window of the packed stream, which need not begin or end on an element).
    pub fn pack_range(&self, span: &UserBuf, base_off: isize, start: usize, len: usize, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + len, 0);
        self.pack_window(span, base_off, start, &mut out[at..]);
    }

    /// Fills `dst` with the packed bytes from packed offset `start` on of the elements at
    /// `base_off` within `span`: a frame's window packed straight into the transport's memory.
    pub fn pack_window(&self, span: &UserBuf, base_off: isize, start: usize, dst: &mut [u8]) {
        self.walk(base_off, start, dst.len(), |at, done, n, k, stride| {
            let ok = span.get_strided(at, n, stride, &mut dst[done..done + n * k]);
            assert!(ok, "a datatype's block lies outside the span computed from that datatype");
        });
    }

    /// Writes packed bytes `src`, which start at packed offset `packed_off`, into the elements at
    /// `base_off` within `span`.
    pub fn unpack_into(&self, span: &UserBuf, base_off: isize, packed_off: usize, src: &[u8]) {
        self.walk(base_off, packed_off, src.len(), |at, done, n, k, stride| {
            span.put_strided(at, n, stride, &src[done..done + n * k])
        });
    }

    /// Calls `f(memory offset, offset within the window, block length, blocks, stride)` for
    /// each batch of equally long, equally spaced pieces of the packed window
    /// `[start, start+len)`, in order (consecutive in the window); memory offsets are relative to
    /// the span that holds the elements at `base_off`. Pieces cut by the window's ends come as
    /// batches of one.
    #[inline(always)]
    fn walk(&self, base_off: isize, start: usize, len: usize, mut f: impl FnMut(isize, usize, usize, usize, isize)) {
        if self.size == 0 || len == 0 {
            return;
        }
        let mut elem = start / self.size;
        let mut within = start % self.size;
        let mut done = 0usize;
        // One block per element (arrays of structs, of pairs): the elements themselves are the
        // run, with the extent as stride.
        if let [r] = self.runs[..] {
            if r.count == 1 {
                let mut at = base_off + elem as isize * self.extent + r.off;
                if within > 0 {
                    let n = (r.len - within).min(len);
                    f(at + within as isize, 0, n, 1, 0);
                    done = n;
                    at += self.extent;
                }
                let k = (len - done) / r.len;
                if k > 0 {
                    f(at, done, r.len, k, self.extent);
                    done += k * r.len;
                    at += k as isize * self.extent;
                }
                if done < len {
                    f(at, done, len - done, 1, 0);
                }
                return;
            }
        }
        loop {
            let ebase = base_off + elem as isize * self.extent;
            for r in &self.runs {
                let bytes = r.len * r.count;
                if within >= bytes {
                    within -= bytes;
                    continue;
                }
                let mut i = within / r.len;
                let skip = within % r.len;
                within = 0;
                let mut at = ebase + r.off + i as isize * r.stride;
                if skip > 0 {
                    let n = (r.len - skip).min(len - done);
                    f(at + skip as isize, done, n, 1, 0);
                    done += n;
                    if done == len {
                        return;
                    }
                    i += 1;
                    at += r.stride;
                }
                let k = (r.count - i).min((len - done) / r.len);
                if k > 0 {
                    f(at, done, r.len, k, r.stride);
                    done += k * r.len;
                    i += k;
                    at += k as isize * r.stride;
                }
                if done == len {
                    return;
                }
                if i < r.count {
                    // The window ends inside this block.
                    f(at, done, len - done, 1, 0);
                    return;
                }
            }
            elem += 1;
        }
    }

    /// Bytes of one element in external32.
    pub fn external_size(&self) -> usize {
        self.elems.iter().map(|&(b, n)| b.ext as usize * n as usize).sum()
    }

    /// Converts the native packed bytes of whole elements to external32.
    pub fn to_external(&self, native: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(native.len() / self.size.max(1) * self.external_size());
        let mut src = native;
        while src.len() >= self.size && self.size > 0 {
            for &(b, n) in &self.elems {
                for _ in 0..n {
                    encode(b, &src[..b.size as usize], &mut out);
                    src = &src[b.size as usize..];
                }
            }
        }
        out
    }

    /// Converts external32 bytes of whole elements to native packed bytes.
    pub fn from_external(&self, ext: &[u8]) -> Vec<u8> {
        let esz = self.external_size();
        let mut out = Vec::with_capacity(ext.len() / esz.max(1) * self.size);
        let mut src = ext;
        while src.len() >= esz && esz > 0 {
            for &(b, n) in &self.elems {
                for _ in 0..n {
                    decode(b, &src[..b.ext as usize], &mut out);
                    src = &src[b.ext as usize..];
                }
            }
        }
        out
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

fn encode(b: Basic, v: &[u8], out: &mut Vec<u8>) {
    match b.conv {
        Conv::Raw => out.extend_from_slice(v),
        Conv::Int { signed } => {
            let mut x = [0u8; 16];
            x[..v.len()].copy_from_slice(v);
            let mut n = if cfg!(target_endian = "little") {
                u128::from_le_bytes(x)
            } else {
                u128::from_be_bytes(x) >> (128 - 8 * v.len())
            };
            if signed && v.len() < 16 && n >> (8 * v.len() - 1) & 1 == 1 {
                n |= !0u128 << (8 * v.len());
            }
            out.extend_from_slice(&n.to_be_bytes()[16 - b.ext as usize..]);
        }
        Conv::Float => out.extend(native_to_be(v)),
        Conv::Complex => {
            let h = v.len() / 2;
            out.extend(native_to_be(&v[..h]));
            out.extend(native_to_be(&v[h..]));
        }
        Conv::LongDouble => encode_ld(v, out),
        Conv::LongDoubleComplex => {
            let h = v.len() / 2;
            encode_ld(&v[..h], out);
            encode_ld(&v[h..], out);
        }
    }
}

fn decode(b: Basic, v: &[u8], out: &mut Vec<u8>) {
    match b.conv {
        Conv::Raw => out.extend_from_slice(v),
        Conv::Int { signed } => {
            let mut x = [0u8; 16];
            x[16 - v.len()..].copy_from_slice(v);
            let mut n = u128::from_be_bytes(x);
            if signed && v.len() < 16 && n >> (8 * v.len() - 1) & 1 == 1 {
                n |= !0u128 << (8 * v.len());
            }
            let sz = b.size as usize;
            if cfg!(target_endian = "little") {
                out.extend_from_slice(&n.to_le_bytes()[..sz]);
            } else {
                out.extend_from_slice(&n.to_be_bytes()[16 - sz..]);
            }
        }
        Conv::Float => out.extend(native_to_be(v)),
        Conv::Complex => {
            let h = v.len() / 2;
            out.extend(native_to_be(&v[..h]));
            out.extend(native_to_be(&v[h..]));
        }
        Conv::LongDouble => decode_ld(v, out),
        Conv::LongDoubleComplex => {
            let h = v.len() / 2;
            decode_ld(&v[..h], out);
            decode_ld(&v[h..], out);
        }
    }
}

/// Native byte order to big-endian (and back: the same permutation).
fn native_to_be(v: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let rev = cfg!(target_endian = "little");
    (0..v.len()).map(move |i| if rev { v[v.len() - 1 - i] } else { v[i] })
}

/// x87 80-bit extended (in 16 bytes) to IEEE quad, big-endian. Both have a 15-bit exponent with
/// the same bias; x87 keeps the integer bit explicitly.
fn encode_ld(v: &[u8], out: &mut Vec<u8>) {
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "x86") {
        let mant = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
        let se = u16::from_le_bytes([v[8], v[9]]) as u128;
        let frac = ((mant & !(1u64 << 63)) as u128) << 49;
        out.extend_from_slice(&((se << 112) | frac).to_be_bytes());
    } else {
        out.extend(native_to_be(v));
    }
}

fn decode_ld(v: &[u8], out: &mut Vec<u8>) {
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "x86") {
        let q = u128::from_be_bytes(v[..16].try_into().expect("16 bytes"));
        let se = (q >> 112) as u16;
        let int_bit = if se & 0x7fff != 0 { 1u64 << 63 } else { 0 };
        let mant = ((q >> 49) as u64 & !(1u64 << 63)) | int_bit;
        out.extend_from_slice(&mant.to_le_bytes());
        out.extend_from_slice(&se.to_le_bytes());
        out.extend_from_slice(&[0u8; 6]);
    } else {
        out.extend(native_to_be(v));
    }
}

/// Predefined datatype handles lie in 0x200..0x300 (the ABI's datatype range).
const FIRST: usize = 0x200;
const SLOTS: usize = 0x100;

struct Table {
    layouts: Vec<Option<Arc<Layout>>>,
    /// Size of each contiguous predefined type, 0 for the others and for unused handles: the
    /// point-to-point express paths ask only this, one load instead of a walk through the layout.
    contig: [u32; SLOTS],
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        let mut layouts = vec![None; SLOTS];
        let mut contig = [0; SLOTS];
        for (h, l) in build() {
            if l.is_contiguous() {
                contig[h - FIRST] = l.size as u32;
            }
            layouts[h - FIRST] = Some(l);
        }
        Table { layouts, contig }
    })
}

fn build() -> HashMap<usize, Arc<Layout>> {
    use std::mem::{align_of, size_of};
    use Conv::*;
    let ld = size_of::<f64>() * 2; // long double on x86-64 and aarch64 Linux: 16 bytes
    let long = size_of::<libc::c_long>();
    let wchar = size_of::<libc::wchar_t>();
    let (s, u) = (Int { signed: true }, Int { signed: false });
    // (handle, name, native size, external32 size, conversion, alignment)
    let basic: &[(usize, &'static str, usize, usize, Conv, usize)] = &[
        (c::MPI_AINT, "MPI_AINT", 8, 8, s, 8),
        (c::MPI_COUNT, "MPI_COUNT", 8, 8, s, 8),
        (c::MPI_OFFSET, "MPI_OFFSET", 8, 8, s, 8),
        (c::MPI_PACKED, "MPI_PACKED", 1, 1, Raw, 1),
        (c::MPI_SHORT, "MPI_SHORT", 2, 2, s, 2),
        (c::MPI_INT, "MPI_INT", 4, 4, s, 4),
        (c::MPI_LONG, "MPI_LONG", long, 4, s, align_of::<libc::c_long>()),
        (c::MPI_LONG_LONG, "MPI_LONG_LONG", 8, 8, s, 8),
        (c::MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", 2, 2, u, 2),
        (c::MPI_UNSIGNED, "MPI_UNSIGNED", 4, 4, u, 4),
        (c::MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", long, 4, u, align_of::<libc::c_ulong>()),
        (c::MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 8, 8, u, 8),
        (c::MPI_FLOAT, "MPI_FLOAT", 4, 4, Float, 4),
        (c::MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", 8, 8, Complex, 4),
        (c::MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX", 8, 8, Complex, 4),
        (c::MPI_DOUBLE, "MPI_DOUBLE", 8, 8, Float, 8),
        (c::MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 16, 16, Complex, 8),
        (c::MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX", 16, 16, Complex, 8),
        (c::MPI_LOGICAL, "MPI_LOGICAL", 4, 4, s, 4),
        (c::MPI_INTEGER, "MPI_INTEGER", 4, 4, s, 4),
        (c::MPI_REAL, "MPI_REAL", 4, 4, Float, 4),
        (c::MPI_COMPLEX, "MPI_COMPLEX", 8, 8, Complex, 4),
        (c::MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 8, 8, Float, 8),
        (c::MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX", 16, 16, Complex, 8),
        (c::MPI_CHARACTER, "MPI_CHARACTER", 1, 1, Raw, 1),
        (c::MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", ld, 16, LongDouble, ld),
        (c::MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX", 2 * ld, 32, LongDoubleComplex, ld),
        (c::MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX", 2 * ld, 32, LongDoubleComplex, ld),
        (c::MPI_C_BOOL, "MPI_C_BOOL", 1, 1, Raw, 1),
        (c::MPI_CXX_BOOL, "MPI_CXX_BOOL", 1, 1, Raw, 1),
        (c::MPI_WCHAR, "MPI_WCHAR", wchar, 2, u, align_of::<libc::wchar_t>()),
        (c::MPI_INT8_T, "MPI_INT8_T", 1, 1, Raw, 1),
        (c::MPI_UINT8_T, "MPI_UINT8_T", 1, 1, Raw, 1),
        (c::MPI_CHAR, "MPI_CHAR", 1, 1, Raw, 1),
        (c::MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, 1, Raw, 1),
        (c::MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, 1, Raw, 1),
        (c::MPI_BYTE, "MPI_BYTE", 1, 1, Raw, 1),
        (c::MPI_INT16_T, "MPI_INT16_T", 2, 2, s, 2),
        (c::MPI_UINT16_T, "MPI_UINT16_T", 2, 2, u, 2),
        (c::MPI_INT32_T, "MPI_INT32_T", 4, 4, s, 4),
        (c::MPI_UINT32_T, "MPI_UINT32_T", 4, 4, u, 4),
        (c::MPI_INT64_T, "MPI_INT64_T", 8, 8, s, 8),
        (c::MPI_UINT64_T, "MPI_UINT64_T", 8, 8, u, 8),
        (c::MPI_LOGICAL1, "MPI_LOGICAL1", 1, 1, Raw, 1),
        (c::MPI_INTEGER1, "MPI_INTEGER1", 1, 1, Raw, 1),
        (c::MPI_LOGICAL2, "MPI_LOGICAL2", 2, 2, s, 2),
        (c::MPI_INTEGER2, "MPI_INTEGER2", 2, 2, s, 2),
        (c::MPI_REAL2, "MPI_REAL2", 2, 2, Float, 2),
        (c::MPI_LOGICAL4, "MPI_LOGICAL4", 4, 4, s, 4),
        (c::MPI_INTEGER4, "MPI_INTEGER4", 4, 4, s, 4),
        (c::MPI_REAL4, "MPI_REAL4", 4, 4, Float, 4),
        (c::MPI_COMPLEX4, "MPI_COMPLEX4", 4, 4, Complex, 2),
        (c::MPI_LOGICAL8, "MPI_LOGICAL8", 8, 8, s, 8),
        (c::MPI_INTEGER8, "MPI_INTEGER8", 8, 8, s, 8),
        (c::MPI_REAL8, "MPI_REAL8", 8, 8, Float, 8),
        (c::MPI_COMPLEX8, "MPI_COMPLEX8", 8, 8, Complex, 4),
        (c::MPI_LOGICAL16, "MPI_LOGICAL16", 16, 16, s, 16),
        (c::MPI_INTEGER16, "MPI_INTEGER16", 16, 16, s, 16),
        (c::MPI_REAL16, "MPI_REAL16", 16, 16, Float, 16),
        (c::MPI_COMPLEX16, "MPI_COMPLEX16", 16, 16, Complex, 8),
        (c::MPI_COMPLEX32, "MPI_COMPLEX32", 32, 32, Complex, 16),
    ];
    let mut m: HashMap<usize, Arc<Layout>> = HashMap::new();
    let mut basics: HashMap<usize, Basic> = HashMap::new();
    for &(h, n, size, ext, conv, align) in basic {
        let b = Basic { size: size as u32, ext: ext as u32, conv };
        basics.insert(h, b);
        m.insert(h, Arc::new(Layout::basic_typed(n, b, align)));
    }
    let b = |h: usize| basics[&h];
    let ia = align_of::<i32>();
    let pairs = [
        (c::MPI_FLOAT_INT, Layout::pair("MPI_FLOAT_INT", b(c::MPI_FLOAT), b(c::MPI_INT), ia, 4)),
        (c::MPI_2INT, Layout::pair("MPI_2INT", b(c::MPI_INT), b(c::MPI_INT), 4, 4)),
        (c::MPI_2REAL, Layout::pair("MPI_2REAL", b(c::MPI_REAL), b(c::MPI_REAL), 4, 4)),
        (
            c::MPI_2DOUBLE_PRECISION,
            Layout::pair("MPI_2DOUBLE_PRECISION", b(c::MPI_DOUBLE_PRECISION), b(c::MPI_DOUBLE_PRECISION), 8, 8),
        ),
        (c::MPI_2INTEGER, Layout::pair("MPI_2INTEGER", b(c::MPI_INTEGER), b(c::MPI_INTEGER), 4, 4)),
        (c::MPI_DOUBLE_INT, Layout::pair("MPI_DOUBLE_INT", b(c::MPI_DOUBLE), b(c::MPI_INT), ia, align_of::<f64>())),
        (c::MPI_LONG_INT, Layout::pair("MPI_LONG_INT", b(c::MPI_LONG), b(c::MPI_INT), ia, align_of::<libc::c_long>())),
        (c::MPI_SHORT_INT, Layout::pair("MPI_SHORT_INT", b(c::MPI_SHORT), b(c::MPI_INT), ia, 4)),
        (c::MPI_LONG_DOUBLE_INT, Layout::pair("MPI_LONG_DOUBLE_INT", b(c::MPI_LONG_DOUBLE), b(c::MPI_INT), ia, ld)),
    ];
    for (h, lay) in pairs {
        m.insert(h, Arc::new(lay));
    }
    m
}

/// The layout of a predefined datatype, by its ABI handle value.
#[inline]
pub fn predefined(handle: usize) -> Option<&'static Arc<Layout>> {
    table().layouts.get(handle.wrapping_sub(FIRST))?.as_ref()
}

/// The size of a contiguous predefined datatype (`MPI_INT`, `MPI_2INT`, ...) by its ABI handle
/// value; None for the others and for handles that are not predefined datatypes.
#[inline]
pub fn predefined_contig_size(handle: usize) -> Option<usize> {
    let n = *table().contig.get(handle.wrapping_sub(FIRST))?;
    (n != 0).then_some(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_types_match_the_c_structs() {
        let d = predefined(c::MPI_DOUBLE_INT).unwrap();
        assert_eq!((d.size, d.extent, d.true_extent), (12, 16, 12));
        assert_eq!(d.blocks, vec![(0, 12)]);
        let s = predefined(c::MPI_SHORT_INT).unwrap();
        assert_eq!((s.size, s.extent), (6, 8));
        assert_eq!(s.blocks, vec![(0, 2), (4, 4)]);
        assert!(predefined(c::MPI_2INT).unwrap().is_contiguous());
        assert!(!d.is_contiguous());
        assert_eq!(predefined(c::MPI_LONG_DOUBLE_INT).unwrap().extent, 32);
    }
}
