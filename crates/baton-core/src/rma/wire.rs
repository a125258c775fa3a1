//! What an origin asks of a target, as bytes: the messages of the one-sided protocol, with no
//! I/O of their own (encoded by the origin, decoded by the target's service, tested here alone).
//!
//! Important types: [`Ask`] (one request: an operation or a synchronization step), [`Shape`]
//! (where the target's bytes lie: the target datatype flattened by the origin, which alone knows
//! it) and [`Batch`] (equally long, equally spaced blocks). A request travels as one message on
//! the window's request context, its tag the request's kind; data to write follows the header in
//! the same message. Answers (fetched data, acknowledgements, grants) travel on the window's reply
//! context under the tag the request named, so the origin can post their receives first, straight
//! into its own buffers.

use crate::datatype::Layout;

/// `len`-byte blocks at `at`, `at + stride`, ... (`count` of them), offsets in bytes from the
/// operation's target address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    pub at: i64,
    pub len: u64,
    pub count: u64,
    pub stride: i64,
}

/// Where an operation's bytes lie at the target, in the order of the packed stream. The first
/// batch is kept inline: most operations have one, and then describing them allocates nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    first: Option<Batch>,
    rest: Vec<Batch>,
}

impl Shape {
    #[cfg(test)]
    pub(crate) fn from_batches(bs: impl IntoIterator<Item = Batch>) -> Shape {
        let mut s = Shape::default();
        bs.into_iter().for_each(|b| s.push(b));
        s
    }

    fn push(&mut self, b: Batch) {
        match self.first {
            None => self.first = Some(b),
            Some(_) => self.rest.push(b),
        }
    }

    fn last_mut(&mut self) -> Option<&mut Batch> {
        match self.rest.last_mut() {
            Some(b) => Some(b),
            None => self.first.as_mut(),
        }
    }

    /// The batches, in packed order.
    pub fn batches(&self) -> impl Iterator<Item = &Batch> {
        self.first.iter().chain(self.rest.iter())
    }

    fn count(&self) -> usize {
        self.first.is_some() as usize + self.rest.len()
    }

    /// The blocks of `count` elements of `layout`, the first element at offset 0.
    pub fn of(layout: &Layout, count: usize) -> Shape {
        if layout.is_contiguous() {
            return Shape::contiguous(layout.size * count);
        }
        let mut shape = Shape::default();
        layout.for_each_batch(count, |at, n, k, stride| {
            let mut b = Batch { at: at as i64, len: n as u64, count: k as u64, stride: stride as i64 };
            // Blocks back to back are one block.
            if b.count > 1 && b.stride == b.len as i64 {
                b = Batch { len: b.len * b.count, count: 1, stride: 0, ..b };
            }
            // A block that continues the previous one is one block.
            if let Some(last) = shape.last_mut() {
                if last.count == 1 && b.count == 1 && last.at + last.len as i64 == b.at {
                    last.len += b.len;
                    return;
                }
            }
            shape.push(b);
        });
        shape
    }

    /// `len` bytes in one block at offset 0.
    pub fn contiguous(len: usize) -> Shape {
        Shape { first: Some(Batch { at: 0, len: len as u64, count: 1, stride: 0 }), rest: Vec::new() }
    }

    /// Every block as (offset, length), in packed order.
    pub fn blocks(&self) -> impl Iterator<Item = (i64, usize)> + '_ {
        self.batches().flat_map(|b| (0..b.count).map(move |i| (b.at + i as i64 * b.stride, b.len as usize)))
    }

    /// Total bytes.
    pub fn bytes(&self) -> u64 {
        self.batches().map(|b| b.len * b.count).sum()
    }

    /// The byte range `[lo, hi)` the blocks touch, relative to the target address.
    pub fn range(&self) -> Option<(i64, i64)> {
        let mut r: Option<(i64, i64)> = None;
        for b in self.batches() {
            if b.count == 0 || b.len == 0 {
                continue;
            }
            let last = b.at + (b.count as i64 - 1) * b.stride;
            let (lo, hi) = (b.at.min(last), b.at.max(last) + b.len as i64);
            r = Some(r.map_or((lo, hi), |(a, z)| (a.min(lo), z.max(hi))));
        }
        r
    }
}

/// One request from an origin to a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Writes the data that follows at `off` (bytes from the target window's base, or an
    /// address in a dynamic window).
    Put { off: i64, shape: Shape },
    /// Answers with the bytes, under reply tag `id`.
    Get { id: i32, off: i64, shape: Shape },
    /// Combines the data that follows into the target's with operation `op` over elements of
    /// predefined datatype `basic` (its handle).
    Acc { op: u8, basic: u32, off: i64, shape: Shape },
    /// As `Acc`, answering first with the bytes as they were (`MPI_Get_accumulate`,
    /// `MPI_Fetch_and_op`).
    GetAcc { id: i32, op: u8, basic: u32, off: i64, shape: Shape },
    /// Compares the element at `off` with the second half of the data and, when equal, stores the
    /// first half; answers with the old element.
    Cas { id: i32, len: u32, off: i64 },
    /// Asks for the lock; `notify`: answer under `id` once granted (a lock on oneself, which
    /// must be held when `MPI_Win_lock` returns).
    Lock { exclusive: bool, notify: bool, id: i32 },
    /// Releases the lock after everything asked before; answers under `id`.
    Unlock { id: i32 },
    /// Answers under `id` once everything asked before is done.
    Flush { id: i32 },
    /// Ends this origin's access epoch of post/start/complete/wait.
    Complete,
}

const PUT: u8 = 1;
const GET: u8 = 2;
const ACC: u8 = 3;
const GET_ACC: u8 = 4;
const CAS: u8 = 5;
const LOCK: u8 = 6;
const UNLOCK: u8 = 7;
const FLUSH: u8 = 8;
const COMPLETE: u8 = 9;

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn shape(&mut self, s: &Shape) {
        self.u32(s.count() as u32);
        for b in s.batches() {
            self.i64(b.at);
            self.u64(b.len);
            self.u64(b.count);
            self.i64(b.stride);
        }
    }
}

struct R<'a>(&'a [u8]);

impl R<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (a, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|a| a[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_le_bytes)
    }
    fn shape(&mut self) -> Option<Shape> {
        let n = self.u32()? as usize;
        // Each batch takes 32 bytes: a count the message cannot hold is garbage.
        if n > self.0.len() / 32 {
            return None;
        }
        let mut shape = Shape::default();
        for _ in 0..n {
            shape.push(Batch { at: self.i64()?, len: self.u64()?, count: self.u64()?, stride: self.i64()? });
        }
        Some(shape)
    }
}

impl Ask {
    /// The request's header; its data (if any) follows in the same message.
    pub fn encode(&self, data: &[u8]) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(48 + data.len()));
        match self {
            Ask::Put { off, shape } => {
                w.u8(PUT);
                w.i64(*off);
                w.shape(shape);
            }
            Ask::Get { id, off, shape } => {
                w.u8(GET);
                w.i32(*id);
                w.i64(*off);
                w.shape(shape);
            }
            Ask::Acc { op, basic, off, shape } => {
                w.u8(ACC);
                w.u8(*op);
                w.u32(*basic);
                w.i64(*off);
                w.shape(shape);
            }
            Ask::GetAcc { id, op, basic, off, shape } => {
                w.u8(GET_ACC);
                w.i32(*id);
                w.u8(*op);
                w.u32(*basic);
                w.i64(*off);
                w.shape(shape);
            }
            Ask::Cas { id, len, off } => {
                w.u8(CAS);
                w.i32(*id);
                w.u32(*len);
                w.i64(*off);
            }
            Ask::Lock { exclusive, notify, id } => {
                w.u8(LOCK);
                w.u8(*exclusive as u8 | (*notify as u8) << 1);
                w.i32(*id);
            }
            Ask::Unlock { id } => {
                w.u8(UNLOCK);
                w.i32(*id);
            }
            Ask::Flush { id } => {
                w.u8(FLUSH);
                w.i32(*id);
            }
            Ask::Complete => w.u8(COMPLETE),
        }
        w.0.extend_from_slice(data);
        w.0
    }

    /// A request and its data, or None for bytes that are not one.
    pub fn decode(msg: &[u8]) -> Option<(Ask, &[u8])> {
        let mut r = R(msg);
        let ask = match r.u8()? {
            PUT => Ask::Put { off: r.i64()?, shape: r.shape()? },
            GET => Ask::Get { id: r.i32()?, off: r.i64()?, shape: r.shape()? },
            ACC => Ask::Acc { op: r.u8()?, basic: r.u32()?, off: r.i64()?, shape: r.shape()? },
            GET_ACC => Ask::GetAcc { id: r.i32()?, op: r.u8()?, basic: r.u32()?, off: r.i64()?, shape: r.shape()? },
            CAS => Ask::Cas { id: r.i32()?, len: r.u32()?, off: r.i64()? },
            LOCK => {
                let f = r.u8()?;
                Ask::Lock { exclusive: f & 1 != 0, notify: f & 2 != 0, id: r.i32()? }
            }
            UNLOCK => Ask::Unlock { id: r.i32()? },
            FLUSH => Ask::Flush { id: r.i32()? },
            COMPLETE => Ask::Complete,
            _ => return None,
        };
        Some((ask, r.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::predefined;
    use baton_abi::consts as c;

    fn shape() -> Shape {
        Shape::from_batches([
            Batch { at: 0, len: 8, count: 1, stride: 0 },
            Batch { at: 16, len: 4, count: 3, stride: -8 },
        ])
    }

    #[test]
    fn every_request_survives_the_wire() {
        let asks = [
            Ask::Put { off: 24, shape: shape() },
            Ask::Get { id: 7, off: -3, shape: shape() },
            Ask::Acc { op: 2, basic: 0x20b, off: 0, shape: shape() },
            Ask::GetAcc { id: 9, op: 13, basic: 0x201, off: 1 << 40, shape: Shape::default() },
            Ask::Cas { id: 1, len: 8, off: 64 },
            Ask::Lock { exclusive: true, notify: false, id: 0 },
            Ask::Lock { exclusive: false, notify: true, id: 5 },
            Ask::Unlock { id: 3 },
            Ask::Flush { id: 4 },
            Ask::Complete,
        ];
        for a in asks {
            let bytes = a.encode(b"data");
            let (back, data) = Ask::decode(&bytes).unwrap();
            assert_eq!(back, a);
            assert_eq!(data, b"data");
        }
    }

    #[test]
    fn garbage_is_refused() {
        assert_eq!(Ask::decode(&[]), None);
        assert_eq!(Ask::decode(&[99]), None);
        // A shape claiming more batches than the message holds.
        let mut b = Ask::Put { off: 0, shape: Shape::default() }.encode(&[]);
        b[9..13].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(Ask::decode(&b), None);
    }

    #[test]
    fn shapes_follow_the_datatype() {
        let int = predefined(c::MPI_INT).unwrap();
        let s = Shape::of(int, 5);
        assert_eq!(s.batches().copied().collect::<Vec<_>>(), vec![Batch { at: 0, len: 20, count: 1, stride: 0 }]);
        assert_eq!(s.bytes(), 20);
        assert_eq!(s.range(), Some((0, 20)));
        let v = Layout::vector(3, 1, 2, int).unwrap();
        let s = Shape::of(&v, 2);
        assert_eq!(s.bytes(), 24);
        let blocks: Vec<_> = s.blocks().collect();
        assert_eq!(blocks.len(), 6);
        assert_eq!(blocks[0], (0, 4));
        assert_eq!(blocks[1], (8, 4));
        assert_eq!(s.range(), Some((0, blocks.last().unwrap().0 + 4)));
        assert_eq!(Shape::of(int, 0).range(), None);
    }
}
