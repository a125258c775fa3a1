//! Test buffers and their contents: patterns only a (rank, purpose) pair produces, the memory
//! kinds a schedule may see ([`Mem`]), the buffer itself ([`TBuf`]) and block placements.

use crate::common::GUARD;
use baton_core::coll::schedule::{Loc, Region, Schedule};
use baton_core::datatype::Layout;
use baton_transport::mem::{Scratch, UserBuf};
use std::sync::Arc;

/// splitmix64.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub fn word(a: usize, b: usize, i: usize) -> u64 {
    mix(((a as u64) << 44) ^ ((b as u64) << 24) ^ i as u64)
}

/// `len` bytes that only (a, b) produces.
pub fn pattern(a: usize, b: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (word(a, b, i) >> 29) as u8).collect()
}

/// What a buffer starts with where the collective writes: something no result equals.
pub fn junk(rank: usize, len: usize) -> Vec<u8> {
    pattern(900 + rank, 77, len)
}

/// How a test buffer is presented to the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mem {
    /// `Region::Scratch`.
    Scratch,
    /// `Region::User` with a contiguous layout: used in place (single-copy reads into it).
    User,
    /// `Region::User` with 6-byte elements (3 bytes, a gap of 2, 3 bytes) every 11 bytes:
    /// packed on sending, unpacked on receiving, reductions through copies.
    Strided,
    /// Each buffer the next of the three kinds in turn, so ranks exchanging a message see it
    /// in different layouts (the same signature, as MPI allows).
    Mixed,
}

pub const MEMS: [Mem; 4] = [Mem::Scratch, Mem::User, Mem::Strided, Mem::Mixed];

thread_local! {
    /// Buffers made with `Mem::Mixed` on this thread (counted from the case number).
    pub static MIXED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn strided_layout() -> Arc<Layout> {
    let byte = Layout::basic("byte", 1);
    Arc::new(Layout::resized(&Layout::vector(2, 3, 5, &byte).unwrap(), 0, 11))
}

/// The packed byte at offset `w` of an 11-byte strided element, if `w` holds data.
fn strided_index(w: usize) -> Option<usize> {
    match w {
        0..=2 => Some(w),
        5..=7 => Some(w - 2),
        _ => None,
    }
}

/// A test buffer of `len` packed bytes. Its memory is a `Scratch` of the test's own, so that
/// engines and schedules may hold raw spans of it while the test keeps it alive.
pub struct TBuf {
    mem: Mem,
    len: usize,
    store: Arc<Scratch>,
    span: UserBuf,
    layout: Arc<Layout>,
}

impl TBuf {
    pub fn new(mem: Mem, data: &[u8]) -> TBuf {
        let mem = match mem {
            Mem::Mixed => MEMS[MIXED.with(|c| c.replace(c.get() + 1)) % 3],
            m => m,
        };
        let len = data.len();
        let (bytes, layout) = match mem {
            Mem::Strided => (len.div_ceil(6) * 11, strided_layout()),
            _ => (len, Arc::new(Layout::basic("byte", 1))),
        };
        let store = Arc::new(Scratch::new(bytes));
        store.write(0, &vec![GUARD; bytes]);
        // SAFETY: the span covers exactly `store`'s allocation, which this value keeps alive;
        // every test drops the schedules using a buffer before the buffer, and reads or writes
        // it only between runs, when no message is in flight.
        let span = unsafe { UserBuf::new(store.addr(), bytes) };
        let b = TBuf { mem, len, store, span, layout };
        b.set(data);
        b
    }

    pub fn set(&self, data: &[u8]) {
        assert_eq!(data.len(), self.len);
        match self.mem {
            Mem::Strided => self.layout.unpack_into(&self.span, 0, 0, data),
            _ => {
                self.store.write(0, data);
            }
        }
    }

    /// The packed bytes; for strided memory also checks that nothing wrote into the gaps.
    pub fn get(&self) -> Vec<u8> {
        match self.mem {
            Mem::Strided => {
                let raw = self.store.read(0, self.store.len());
                for (p, &b) in raw.iter().enumerate() {
                    let data = strided_index(p % 11).map(|k| p / 11 * 6 + k).is_some_and(|k| k < self.len);
                    assert!(data || b == GUARD, "a gap byte of a strided buffer was written (offset {p})");
                }
                let mut v = Vec::new();
                self.layout.pack_range(&self.span, 0, 0, self.len, &mut v);
                v
            }
            _ => self.store.read(0, self.len).to_vec(),
        }
    }

    /// The whole buffer as a new region of `s`.
    pub fn region(&self, s: &mut Schedule) -> Loc {
        let r = match self.mem {
            Mem::Scratch => Region::Scratch(self.store.clone()),
            _ => Region::User { span: self.span, base_off: 0, layout: self.layout.clone() },
        };
        s.region(r, self.len)
    }

    /// `[off, off+len)` as a region of its own (like each block of a `v` collective).
    pub fn window(&self, s: &mut Schedule, off: usize, len: usize) -> Loc {
        self.region(s).at(off, len)
    }

    /// Blocks `sizes[i]` bytes long at `offs[i]`: each a region of its own with `split` (as a `v`
    /// collective has them), else windows of one region over the whole buffer.
    pub fn block_locs(&self, s: &mut Schedule, split: bool, offs: &[usize], sizes: &[usize]) -> Vec<Loc> {
        if split {
            offs.iter().zip(sizes).map(|(&off, &len)| self.window(s, off, len)).collect()
        } else {
            let whole = self.region(s);
            offs.iter().zip(sizes).map(|(&off, &len)| whole.at(off, len)).collect()
        }
    }
}

/// `n` buffers, rank r's holding `data(r)`.
pub fn tbufs(mem: Mem, n: usize, mut data: impl FnMut(usize) -> Vec<u8>) -> Vec<TBuf> {
    (0..n).map(|r| TBuf::new(mem, &data(r))).collect()
}

/// Writes `block(i)` at `offs[i]` of `buf` for every i.
pub fn put_blocks(buf: &mut [u8], offs: &[usize], block: impl Fn(usize) -> Vec<u8>) {
    for (i, &off) in offs.iter().enumerate() {
        let b = block(i);
        buf[off..off + b.len()].copy_from_slice(&b);
    }
}

/// Consecutive blocks of `b` bytes of one window.
pub fn blocks(whole: Loc, n: usize, b: usize) -> Vec<Loc> {
    (0..n).map(|i| whole.at(i * b, b)).collect()
}

/// n blocks of `b` bytes back to back: offsets and buffer length.
pub fn uniform(n: usize, b: usize) -> (Vec<usize>, usize) {
    ((0..n).map(|i| i * b).collect(), n * b)
}

/// A scattered placement of blocks of the given sizes in one buffer: in reverse rank order,
/// each followed by a gap of 0-2 bytes. Returns the offsets and the buffer length.
pub fn placement(sizes: &[usize]) -> (Vec<usize>, usize) {
    let mut offs = vec![0; sizes.len()];
    let mut at = 0;
    for i in (0..sizes.len()).rev() {
        offs[i] = at;
        at += sizes[i] + i % 3;
    }
    (offs, at)
}
