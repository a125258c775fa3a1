//! Allreduce: recursive doubling, Rabenseifner's reduce-scatter + allgather (recursive halving
//! then doubling), ring, reduce + bcast, and shared memory.

use super::*;

pub fn allreduce(s: &mut Schedule, a: Algo, src: Loc, dst: Loc) {
    if s.size() == 1 {
        s.copy(src, dst);
        return;
    }
    match a {
        Algo::Shm => s.shm(ShmKind::Allreduce, Some(src), Some(dst), dst.len),
        Algo::ReduceBcast => {
            reduce_binomial(s, 0, src, Some(dst));
            bcast_binomial(s, 0, dst);
        }
        Algo::Ring => allreduce_ring(s, src, dst),
        Algo::Rabenseifner => allreduce_rd(s, src, dst, true),
        _ => allreduce_rd(s, src, dst, false),
    }
}

/// Folds a communicator of any size onto a power of two (Rabenseifner's way): of the first
/// 2·rem ranks, each even one hands its vector to the odd one above and sits out. Returns the
/// new rank (None for those sitting out), the power of two, a map back to real ranks, and
/// whether `acc` now holds this rank's data. It does not for a rank that did not fold unless
/// `copy` asks: Rabenseifner's first round then reads `src` itself, which saves a pass over
/// the whole vector.
fn fold(s: &mut Schedule, src: Loc, acc: Loc, copy: bool) -> (Option<i32>, i32, i32, bool) {
    let (n, me) = (s.size(), s.rank());
    let p2 = 1 << (31 - (n as u32).leading_zeros());
    let rem = n - p2;
    if me < 2 * rem {
        if me % 2 == 0 {
            s.send(me + 1, src);
            s.end_round();
            return (None, p2, rem, false);
        }
        let t = s.scratch(src.len);
        s.recv(me - 1, t);
        s.copy(src, acc);
        s.reduce(t, acc, true);
        s.end_round();
        return (Some(me / 2), p2, rem, true);
    }
    if copy {
        s.copy(src, acc);
        s.end_round();
    }
    (Some(me - rem), p2, rem, copy || src == acc)
}

fn unfold_rank(v: i32, rem: i32) -> i32 {
    if v < rem {
        v * 2 + 1
    } else {
        v + rem
    }
}

/// Recursive doubling (whole vectors, log p exchanges), or with `halving` Rabenseifner's
/// reduce-scatter by recursive halving followed by an allgather by recursive doubling.
fn allreduce_rd(s: &mut Schedule, src: Loc, dst: Loc, halving: bool) {
    let me = s.rank();
    let acc = accumulator(s, dst);
    // Rabenseifner's first round can read plain input where it lies; anything else is copied
    // into the accumulator first.
    let copy = !halving || !s.is_plain(src);
    let (newrank, p2, rem, in_acc) = fold(s, src, acc, copy);
    if let Some(nr) = newrank {
        if halving {
            let unit = s.reducer().map_or(1, |r| r.unit);
            let chunks = split(acc, unit, p2 as usize);
            let src_chunks = split(src, unit, p2 as usize);
            // Until the first round has run, this rank's data may still be in `src` only.
            let mut from_src = !in_acc;
            // Scratch for what the rounds receive: each round keeps an aligned block of
            // chunks within the one before, so the largest half (or, when the first round
            // receives straight into `acc`, the largest quarter) bounds them all.
            let parts = if from_src { 4 } else { 2 }.min(p2 as usize);
            let need = if from_src && p2 == 2 {
                0
            } else {
                let per = p2 as usize / parts;
                (0..parts).map(|q| span(&chunks, q * per, (q + 1) * per).len).max().unwrap_or(0)
            };
            let t = s.scratch(need);
            let (mut lo, mut hi) = (0usize, p2 as usize);
            let mut mask = p2 / 2;
            while mask >= 1 {
                let pn = nr ^ mask;
                let peer = unfold_rank(pn, rem);
                let mid = (lo + hi) / 2;
                let (keep, give) = if nr & mask == 0 { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) };
                let keep_acc = span(&chunks, keep.0, keep.1);
                if from_src {
                    // The peer's half lands straight in `acc`, and ours is reduced into it:
                    // no copy of the input first.
                    s.send(peer, span(&src_chunks, give.0, give.1));
                    s.recv(peer, keep_acc);
                    s.reduce(span(&src_chunks, keep.0, keep.1), keep_acc, nr < pn);
                    from_src = false;
                } else {
                    let tk = t.at(0, keep_acc.len);
                    s.send(peer, span(&chunks, give.0, give.1));
                    s.recv(peer, tk);
                    s.reduce(tk, keep_acc, pn < nr);
                }
                s.end_round();
                (lo, hi) = keep;
                mask /= 2;
            }
            let mut mask = 1;
            while mask < p2 {
                let pn = nr ^ mask;
                let peer = unfold_rank(pn, rem);
                let mine = (nr & !(mask - 1)) as usize;
                let theirs = (pn & !(mask - 1)) as usize;
                s.send(peer, span(&chunks, mine, mine + mask as usize));
                s.recv(peer, span(&chunks, theirs, theirs + mask as usize));
                s.end_round();
                mask <<= 1;
            }
        } else {
            let t = s.scratch(acc.len);
            let mut mask = 1;
            while mask < p2 {
                let pn = nr ^ mask;
                let peer = unfold_rank(pn, rem);
                s.send(peer, acc);
                s.recv(peer, t);
                s.reduce(t, acc, pn < nr);
                s.end_round();
                mask <<= 1;
            }
        }
    }
    if me < 2 * rem {
        if me % 2 == 1 {
            s.send(me - 1, acc);
        } else {
            s.recv(me + 1, acc);
        }
        s.end_round();
    }
    s.copy(acc, dst);
}

/// Ring allreduce: a ring reduce-scatter then a ring allgather, 2(n-1) steps of len/n bytes;
/// the bandwidth-optimal choice for long vectors.
fn allreduce_ring(s: &mut Schedule, src: Loc, dst: Loc) {
    let (n, me) = (s.size(), s.rank());
    let acc = accumulator(s, dst);
    s.copy(src, acc);
    s.end_round();
    let unit = s.reducer().map_or(1, |r| r.unit);
    let chunks = split(acc, unit, n as usize);
    let biggest = chunks.iter().map(|c| c.len).max().unwrap_or(0);
    let t = s.scratch(biggest);
    let (left, right) = (ring_idx(me - 1, n), ring_idx(me + 1, n));
    for i in 0..n - 1 {
        let into = chunks[ring_idx(me - i - 1, n) as usize];
        s.send(right, chunks[ring_idx(me - i, n) as usize]);
        s.recv(left, t.at(0, into.len));
        s.reduce(t.at(0, into.len), into, true);
        s.end_round();
    }
    for i in 0..n - 1 {
        s.send(right, chunks[ring_idx(me + 1 - i, n) as usize]);
        s.recv(left, chunks[ring_idx(me - i, n) as usize]);
        s.end_round();
    }
    s.copy(acc, dst);
}
