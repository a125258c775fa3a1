//! Packing and unpacking: the walk over a [`Layout`]'s runs (or, in the loop form, its pieces)
//! that copies a window of the packed stream to or from the elements in a user buffer.

use super::{Layout, Piece};
use baton_transport::mem::UserBuf;

impl Layout {
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
        let len = dst.len();
        let mut f = |at, done, n, k, stride| {
            let ok = span.get_strided(at, n, stride, &mut dst[done..done + n * k]);
            assert!(ok, "a datatype's block lies outside the span computed from that datatype");
        };
        match &self.pieces {
            None => self.walk(base_off, start, len, f),
            Some(ps) => self.walk_pieces(ps, base_off, start, len, &mut f),
        }
    }

    /// Writes packed bytes `src`, which start at packed offset `packed_off`, into the elements at
    /// `base_off` within `span`.
    pub fn unpack_into(&self, span: &UserBuf, base_off: isize, packed_off: usize, src: &[u8]) {
        let mut f = |at, done, n, k, stride| span.put_strided(at, n, stride, &src[done..done + n * k]);
        match &self.pieces {
            None => self.walk(base_off, packed_off, src.len(), f),
            Some(ps) => self.walk_pieces(ps, base_off, packed_off, src.len(), &mut f),
        }
    }

    /// Calls `f(offset, block length, blocks, stride)` for each batch of equally long, equally
    /// spaced blocks of `count` elements, the first element at offset 0, in packed order (what a
    /// one-sided operation tells its target about the target datatype).
    pub fn for_each_batch(&self, count: usize, mut f: impl FnMut(isize, usize, usize, isize)) {
        let len = self.size * count;
        let mut g = |at, _done, n, k, stride| f(at, n, k, stride);
        match &self.pieces {
            None => self.walk(0, 0, len, g),
            Some(ps) => self.walk_pieces(ps, 0, 0, len, &mut g),
        }
    }

    /// Calls `f(memory offset, offset within the window, block length, blocks, stride)` for
    /// each batch of equally long, equally spaced pieces of the packed window
    /// `[start, start+len)`, in order (consecutive in the window); memory offsets are relative to
    /// the span that holds the elements at `base_off`. Pieces cut by the window's ends come as
    /// batches of one. The flat form only (see [`Layout::walk_pieces`] for the loop form).
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

    /// [`Layout::walk`] over the loop form (`ps`, this layout's pieces): each piece's copies in turn, whole copies of a
    /// one-block inner layout as one batch, the others through the inner layout's own walk.
    fn walk_pieces(
        &self,
        ps: &[Piece],
        base_off: isize,
        start: usize,
        len: usize,
        f: &mut dyn FnMut(isize, usize, usize, usize, isize),
    ) {
        let mut elem = start / self.size;
        let mut within = start % self.size;
        let mut done = 0usize;
        loop {
            let ebase = base_off + elem as isize * self.extent;
            for p in ps {
                let one = p.inner.size;
                if within >= one * p.count {
                    within -= one * p.count;
                    continue;
                }
                let (mut i, mut skip) = (within / one, within % one);
                within = 0;
                while i < p.count && done < len {
                    let at = ebase + p.off + i as isize * p.stride;
                    if let (0, Some((off, blen))) = (skip, p.inner.single_block()) {
                        let k = (p.count - i).min((len - done) / blen);
                        if k > 0 {
                            f(at + off, done, blen, k, p.stride);
                            done += k * blen;
                            i += k;
                            continue;
                        }
                    }
                    let n = (one - skip).min(len - done);
                    let d0 = done;
                    let mut g = |a, d, m, k, s| f(a, d0 + d, m, k, s);
                    match &p.inner.pieces {
                        None => p.inner.walk(at, skip, n, g),
                        Some(inner) => p.inner.walk_pieces(inner, at, skip, n, &mut g),
                    }
                    done += n;
                    skip = 0;
                    i += 1;
                }
                if done == len {
                    return;
                }
            }
            elem += 1;
        }
    }
}
