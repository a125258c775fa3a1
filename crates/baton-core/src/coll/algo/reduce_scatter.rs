//! Reduce-scatter (pairwise, recursive halving, reduce then scatter) and the prefix
//! reductions (recursive doubling, linear).

use super::{accumulator, reduce_binomial, ring_idx, span, Algo};
use crate::coll::schedule::{Loc, Schedule};

/// Reduces `src` (the whole vector, cut into `blocks` windows per rank) and leaves block `me`
/// of the result in `dst`.
pub fn reduce_scatter(s: &mut Schedule, a: Algo, src: Loc, blocks: &[Loc], dst: Loc) {
    let (n, me) = (s.size(), s.rank());
    if n == 1 {
        s.copy(blocks[0], dst);
        s.end_round();
        return;
    }
    match a {
        Algo::Pairwise => {
            let acc = s.scratch(dst.len);
            let t = s.scratch(dst.len);
            s.copy(blocks[me as usize], acc);
            s.end_round();
            for k in 1..n {
                let (to, from) = (ring_idx(me + k, n), ring_idx(me - k, n));
                s.send(to, blocks[to as usize]);
                s.recv(from, t);
                s.reduce(t, acc, true);
                s.end_round();
            }
            s.copy(acc, dst);
            s.end_round();
        }
        Algo::RecursiveHalving => {
            let acc = s.scratch(src.len);
            let t = s.scratch(src.len);
            // The blocks as windows of acc and t (same offsets as in src).
            let rel = |l: Loc, base: Loc| base.at(l.off - src.off, l.len);
            s.copy(src, acc);
            s.end_round();
            let (mut lo, mut hi) = (0usize, n as usize);
            let mut mask = n / 2;
            while mask >= 1 {
                let peer = me ^ mask;
                let mid = (lo + hi) / 2;
                let (keep, give) = if me & mask == 0 { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) };
                let ab: Vec<Loc> = blocks.iter().map(|l| rel(*l, acc)).collect();
                let tb: Vec<Loc> = blocks.iter().map(|l| rel(*l, t)).collect();
                s.send(peer, span(&ab, give.0, give.1));
                s.recv(peer, span(&tb, keep.0, keep.1));
                s.reduce(span(&tb, keep.0, keep.1), span(&ab, keep.0, keep.1), peer < me);
                s.end_round();
                (lo, hi) = keep;
                mask /= 2;
            }
            s.copy(rel(blocks[me as usize], acc), dst);
            s.end_round();
        }
        _ => {
            let full = s.scratch(src.len);
            reduce_binomial(s, 0, src, Some(full));
            let rel: Vec<Loc> = blocks.iter().map(|l| full.at(l.off - src.off, l.len)).collect();
            if me == 0 {
                for i in 1..n {
                    s.send(i, rel[i as usize]);
                }
                s.copy(rel[0], dst);
            } else {
                s.recv(0, dst);
            }
            s.end_round();
        }
    }
}

/// Inclusive (or, with `exclusive`, exclusive) prefix reduction of `src` into `dst`.
pub fn scan(s: &mut Schedule, a: Algo, src: Loc, dst: Loc, exclusive: bool) {
    let (n, me) = (s.size(), s.rank());
    let len = src.len;
    if a == Algo::Linear {
        let t = s.scratch(len);
        if exclusive {
            if me > 0 {
                s.recv(me - 1, t);
            }
            let acc = s.scratch(len);
            if me > 0 && me < n - 1 {
                s.copy(t, acc);
                s.reduce(src, acc, false);
            } else {
                s.copy(src, acc);
            }
            if me > 0 {
                s.copy(t, dst);
            }
            s.end_round();
            if me < n - 1 {
                s.send(me + 1, acc);
                s.end_round();
            }
        } else {
            let acc = accumulator(s, dst);
            if me > 0 {
                s.recv(me - 1, t);
            }
            s.copy(src, acc);
            if me > 0 {
                s.reduce(t, acc, true);
            }
            s.end_round();
            if me < n - 1 {
                s.send(me + 1, acc);
                s.end_round();
            }
            s.copy(acc, dst);
            s.end_round();
        }
        return;
    }
    let partial = s.scratch(len);
    let result = accumulator(s, dst);
    s.copy(src, partial);
    if !exclusive {
        s.copy(src, result);
    }
    s.end_round();
    let t = s.scratch(len);
    let mut have = !exclusive;
    let mut mask = 1;
    while mask < n {
        let peer = me ^ mask;
        if peer < n {
            s.send(peer, partial);
            s.recv(peer, t);
            if peer < me {
                if have {
                    s.reduce(t, result, true);
                } else {
                    s.copy(t, result);
                }
                have = true;
                s.reduce(t, partial, true);
            } else {
                s.reduce(t, partial, false);
            }
            s.end_round();
        }
        mask <<= 1;
    }
    if have {
        s.copy(result, dst);
        s.end_round();
    }
}
