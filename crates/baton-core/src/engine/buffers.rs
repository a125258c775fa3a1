//! Where a message's bytes come from ([`SendData`]) and go to ([`Sink`]), and what a completed
//! operation reports ([`Status`]).

use super::{Net, ProcIdx, BOUNCE};
use crate::datatype::Layout;
use baton_transport::mem::{Scratch, UserBuf};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub error: i32,
    /// Bytes received (or set by `Status_set_elements`).
    pub bytes: u64,
    pub cancelled: bool,
}

/// Bytes to send: the application's buffer, a packed copy owned by the request, or elements of
/// a derived datatype packed window by window as they leave.
pub enum SendData {
    User(UserBuf),
    Packed(Vec<u8>),
    /// Bytes `[off, off+len)` of a collective schedule's scratch memory.
    Scratch(Arc<Scratch>, usize, usize),
    /// The `len` packed bytes of the elements of `layout` at `base_off` within `span`. Never
    /// packed whole: each frame packs its own window (into the ring record itself where the
    /// transport allows), so a large message is gathered while earlier frames are unpacked.
    Typed {
        span: UserBuf,
        base_off: isize,
        layout: Arc<Layout>,
        len: usize,
    },
}

impl SendData {
    /// The bytes, when they lie contiguous in memory (every form but `Typed`).
    #[inline]
    pub fn contig(&self) -> Option<&[u8]> {
        match self {
            SendData::User(b) => Some(b.read(0, b.len())),
            SendData::Packed(v) => Some(v),
            SendData::Scratch(s, off, len) => Some(s.read(*off, *len)),
            SendData::Typed { .. } => None,
        }
    }
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            SendData::Typed { len, .. } => *len,
            d => d.contig().map_or(0, <[u8]>::len),
        }
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Elements of a derived datatype spread over at least four times their bytes (a column
    /// of a matrix, not an array of structs): gathering them misses the cache at every few.
    #[inline]
    pub(super) fn is_sparse(&self) -> bool {
        matches!(self, SendData::Typed { span, len, .. } if span.len() / 4 >= *len)
    }
    /// Fills `dst` with the bytes from offset `off` on.
    pub fn pack(&self, off: usize, dst: &mut [u8]) {
        match self {
            SendData::Typed { span, base_off, layout, .. } => layout.pack_window(span, *base_off, off, dst),
            d => dst.copy_from_slice(&d.contig().expect("contiguous")[off..off + dst.len()]),
        }
    }
    /// A packed copy of all the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        match self.contig() {
            Some(b) => b.to_vec(),
            None => {
                let mut v = vec![0u8; self.len()];
                self.pack(0, &mut v);
                v
            }
        }
    }
    /// Where a receiver may read the bytes directly; 0 (none) for a datatype's elements, which
    /// the receiver cannot locate without the sender's type map.
    #[inline]
    pub(super) fn addr(&self) -> u64 {
        match self {
            SendData::User(b) => b.addr() as u64,
            SendData::Packed(v) => v.as_ptr() as u64,
            SendData::Scratch(s, off, _) => (s.addr() + off) as u64,
            SendData::Typed { .. } => 0,
        }
    }
}

/// Where received bytes go: a contiguous span, `count` elements of a layout within a span, or a
/// buffer of the library's own (internal messages), handed back through [`Request::owned`].
pub enum Sink {
    Contig(UserBuf),
    /// Packed bytes `[start, start+len)` of the elements of `layout` at `base_off` within `span`.
    Typed {
        span: UserBuf,
        base_off: isize,
        layout: Arc<Layout>,
        start: usize,
        len: usize,
    },
    Owned(Vec<u8>),
    /// Bytes `[off, off+len)` of a collective schedule's scratch memory.
    Scratch(Arc<Scratch>, usize, usize),
}

impl Sink {
    #[inline]
    pub fn capacity(&self) -> usize {
        match self {
            Sink::Contig(b) => b.len(),
            Sink::Typed { len, .. } => *len,
            Sink::Owned(v) => v.len(),
            Sink::Scratch(_, _, len) => *len,
        }
    }
    /// Writes packed bytes `src` at packed offset `off`, clipped to the capacity.
    pub fn write(&mut self, off: usize, src: &[u8]) {
        let cap = self.capacity();
        if off >= cap {
            return;
        }
        let src = &src[..src.len().min(cap - off)];
        match self {
            Sink::Contig(b) => {
                b.write(off, src);
            }
            Sink::Typed { span, base_off, layout, start, .. } => layout.unpack_into(span, *base_off, *start + off, src),
            Sink::Owned(v) => v[off..off + src.len()].copy_from_slice(src),
            Sink::Scratch(s, at, _) => {
                s.write(*at + off, src);
            }
        }
    }
}

pub(super) fn read_into_sink(
    net: &mut dyn Net,
    from: ProcIdx,
    addr: u64,
    sink: &mut Sink,
    n: usize,
    bounce: &mut Vec<u8>,
) -> bool {
    match sink {
        Sink::Contig(buf) => net.read_remote(from, addr, &buf.prefix(n)),
        Sink::Owned(v) => net.read_remote_into(from, addr, &mut v[..n]),
        Sink::Scratch(s, off, _) => s.modify(*off, n, |d| net.read_remote_into(from, addr, d)),
        Sink::Typed { .. } => {
            // Read and unpack in cache-sized pieces: one pass over memory for the receive
            // buffer, where reading the message whole first would make a second. (A read
            // straight into the blocks, one iovec each, costs the kernel more per block than
            // this copy: docs/PERFORMANCE.md.)
            bounce.resize(BOUNCE.min(n), 0);
            let mut off = 0;
            while off < n {
                let k = (n - off).min(bounce.len());
                if !net.read_remote_into(from, addr + off as u64, &mut bounce[..k]) {
                    return false;
                }
                sink.write(off, &bounce[..k]);
                off += k;
            }
            true
        }
    }
}
