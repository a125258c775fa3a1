//! [`fuzz_rx`]: the receive path on arbitrary bytes, for the fuzzers.

use super::header::{decode, HEADER_LEN};
use super::rx::{Fill, FrameSink, Rx, Source, RX_INITIAL};
use crate::frame::{Header, Kind};
use std::io::{self, Read};

/// The fuzzing entry point (`fuzz/` runs it coverage-guided; CI runs it for a bounded time
/// from `examples/fuzz_tcp.rs`). Feeds `data` to a receiving half as a peer would, in reads
/// cut at sizes the first byte chooses, and checks that whatever arrives is handled without a
/// panic, an out-of-bounds write or a buffer beyond the frame limit.
pub fn fuzz_rx(data: &[u8]) {
    const MAX: usize = 64 * 1024;
    /// Hands out `data` a few bytes at a time, then "would block".
    struct Pieces<'a> {
        data: &'a [u8],
        pos: usize,
        cut: usize,
    }
    impl Source for Pieces<'_> {
        fn readable(&self) -> bool {
            true
        }
    }
    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.pos == self.data.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // Vary the piece size so every split point of a header or payload is reached.
            let n = buf.len().min(self.data.len() - self.pos).min(1 + (self.pos * 7 + self.cut) % (self.cut + 1));
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }
    struct Check {
        dst: Vec<u8>,
        placed: usize,
    }
    impl FrameSink for Check {
        fn frame(&mut self, h: &Header, payload: &[u8]) {
            assert!(payload.len() <= MAX);
            if matches!(h.kind, Kind::Eager | Kind::EagerSync) {
                assert_eq!(payload.len() as u64, h.len);
            }
        }
        fn place(&mut self, h: &Header, plen: usize, at: usize, fill: &mut Fill<'_>) -> Option<io::Result<usize>> {
            assert!(at <= plen && plen <= MAX);
            let start = (h.aux as usize).checked_add(at)?;
            let end = (h.aux as usize).checked_add(plen)?;
            if end > self.dst.len() {
                return None;
            }
            let window = end - start;
            let r = fill(&mut self.dst[start..end]);
            if let Ok(n) = r {
                assert!(n <= window);
            }
            Some(r)
        }
        fn placed(&mut self, _h: &Header, n: usize) {
            self.placed += n;
        }
    }
    let Some((&first, rest)) = data.split_first() else { return };
    let mut rx = Rx::new(Pieces { data: rest, pos: 0, cut: first as usize % 97 }, MAX);
    let mut sink = Check { dst: vec![0; 4 * MAX], placed: 0 };
    for _ in 0..rest.len() + 2 {
        match rx.receive(&mut sink) {
            Ok(r) if r.delivered == 0 && rx.source().pos == rest.len() => break,
            Ok(_) => {}
            Err(_) => break,
        }
        assert!(rx.buffer_len() <= (HEADER_LEN + MAX).next_power_of_two().max(RX_INITIAL));
    }
    assert!(sink.placed <= rest.len());
    if let Some(h) = rest.first_chunk::<HEADER_LEN>() {
        let _ = decode(h, MAX);
    }
}
