//! A bounded, dependency-free fuzzer for the TCP frame decoder, for CI (no nightly compiler
//! needed): mutates valid frame streams (bit flips, overwritten bytes, lengths off by a little or
//! a lot, truncation, splicing) and random bytes, and runs `baton_transport::stream::fuzz_rx` on
//! each.
//! For coverage-guided fuzzing use `fuzz/` with cargo-fuzz (same entry point).
//!
//! Usage: `fuzz_tcp [SECONDS] [SEED]` (default 20 s, seed from the clock). Prints the seed so a
//! failure can be replayed.

use baton_transport::frame::{Header, Kind};
use baton_transport::stream::{encode, fuzz_rx};
use std::time::{Duration, Instant};

/// xorshift64*: deterministic from the seed, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A plausible stream: a few frames of every kind, with payloads.
fn valid_stream(r: &mut Rng) -> Vec<u8> {
    let mut out = vec![r.next() as u8];
    for _ in 0..1 + r.below(6) {
        let kind =
            [Kind::Eager, Kind::EagerSync, Kind::Rts, Kind::SyncAck, Kind::Fin, Kind::Cts, Kind::Data][r.below(7)];
        let plen = match kind {
            Kind::Eager | Kind::EagerSync | Kind::Data => [1, 7, 48, 4096, 5000, 70_000][r.below(6)],
            _ => 0,
        };
        let len = if matches!(kind, Kind::Eager | Kind::EagerSync) { plen as u64 } else { r.next() % (1 << 20) };
        let aux = if kind == Kind::Data { (r.next() % (200_000)) & !7 } else { r.next() };
        let h = Header { kind, ctx: r.next(), src: r.next() as i32, tag: r.next() as i32, len, id: r.next(), aux };
        out.extend_from_slice(&encode(&h, plen));
        out.extend((0..plen).map(|i| (i as u8) ^ 0x5a));
    }
    out
}

fn mutate(r: &mut Rng, mut v: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + r.below(4) {
        if v.len() < 2 {
            break;
        }
        let at = 1 + r.below(v.len() - 1);
        match r.below(6) {
            0 => v[at] ^= 1 << r.below(8),
            1 => v[at] = r.next() as u8,
            2 => {
                // A length field (payload length sits at header offset 4) nudged or blown up.
                let hdr = 1 + (r.below(v.len()) / 48) * 48;
                if hdr + 8 <= v.len() {
                    let n = u32::from_le_bytes(v[hdr + 4..hdr + 8].try_into().unwrap());
                    let m = match r.below(3) {
                        0 => n.wrapping_add(1 + r.below(8) as u32),
                        1 => n.wrapping_sub(1 + r.below(8) as u32),
                        _ => r.next() as u32,
                    };
                    v[hdr + 4..hdr + 8].copy_from_slice(&m.to_le_bytes());
                }
            }
            3 => v.truncate(at),
            4 => {
                let other = valid_stream(r);
                v.splice(at..at, other[1..].iter().copied());
            }
            _ => v.extend((0..r.below(100)).map(|_| r.next() as u8)),
        }
    }
    v
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    }) | 1;
    println!("fuzz_tcp: seed {seed}, {secs} s");
    let mut r = Rng(seed);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut runs: u64 = 0;
    while Instant::now() < end {
        for _ in 0..64 {
            let input = match r.below(8) {
                0 => (0..r.below(300)).map(|_| r.next() as u8).collect(),
                1 => valid_stream(&mut r),
                _ => {
                    let s = valid_stream(&mut r);
                    mutate(&mut r, s)
                }
            };
            fuzz_rx(&input);
            runs += 1;
        }
    }
    println!("fuzz_tcp: {runs} inputs, no failure");
}
