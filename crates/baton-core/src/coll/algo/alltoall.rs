//! Alltoall: linear, pairwise, Bruck's, message combining over a 2-D mesh, and shared memory.

use super::{ring_idx, Algo};
use crate::coll::schedule::{Loc, Schedule};
use crate::shm_coll::ShmKind;

/// `src[j]` of every rank i to `dst[i]` of rank j. `src` None: in place (the data is in `dst`).
pub fn alltoall(s: &mut Schedule, a: Algo, src: Option<&[Loc]>, dst: &[Loc]) {
    let (n, me) = (s.size(), s.rank());
    let copies: Vec<Loc>;
    let src = match src {
        Some(v) => v,
        None => {
            // In place: the outgoing blocks must survive the incoming ones.
            let total: usize = dst.iter().map(|l| l.len).sum();
            let t = s.scratch(total);
            let mut at = 0;
            copies = dst
                .iter()
                .map(|l| {
                    let w = t.at(at, l.len);
                    at += l.len;
                    w
                })
                .collect();
            for (d, c) in dst.iter().zip(&copies) {
                s.copy(*d, *c);
            }
            s.end_round();
            &copies
        }
    };
    match a {
        Algo::Shm if n > 1 => alltoall_shm(s, src, dst),
        Algo::Bruck if n > 1 => alltoall_bruck(s, src, dst),
        Algo::Mesh if n > 1 => alltoall_mesh(s, src, dst),
        Algo::Linear => {
            for i in (0..n).filter(|&i| i != me) {
                s.recv(i, dst[i as usize]);
                s.send(i, src[i as usize]);
            }
            s.copy(src[me as usize], dst[me as usize]);
            s.end_round();
        }
        _ => {
            s.copy(src[me as usize], dst[me as usize]);
            s.end_round();
            for k in 1..n {
                let (to, from) = (ring_idx(me + k, n), ring_idx(me - k, n));
                s.send(to, src[to as usize]);
                s.recv(from, dst[from as usize]);
                s.end_round();
            }
        }
    }
}

/// Alltoall through the collective area: one shared-memory step, with copies through scratch
/// where the blocks do not lie end to end.
fn alltoall_shm(s: &mut Schedule, src: &[Loc], dst: &[Loc]) {
    let (n, b) = (s.size() as usize, dst[0].len);
    let from = Loc::joined(src).unwrap_or_else(|| {
        let t = s.scratch(n * b);
        for (i, &l) in src.iter().enumerate() {
            s.copy(l, t.at(i * b, b));
        }
        s.end_round();
        t
    });
    match Loc::joined(dst) {
        Some(to) => s.shm(ShmKind::Alltoall, Some(from), Some(to), b),
        None => {
            let t = s.scratch(n * b);
            s.shm(ShmKind::Alltoall, Some(from), Some(t), b);
            for (i, &l) in dst.iter().enumerate() {
                s.copy(t.at(i * b, b), l);
            }
        }
    }
    s.end_round();
}

/// Bruck's alltoall: log n rounds; in round k every block whose (rotated) index has bit k set
/// moves k ranks on, all in one message.
fn alltoall_bruck(s: &mut Schedule, src: &[Loc], dst: &[Loc]) {
    let (n, me) = (s.size(), s.rank());
    let b = dst[0].len;
    let tmp = s.scratch(n as usize * b);
    let at = |i: i32| tmp.at(i as usize * b, b);
    for i in 0..n {
        s.copy(src[ring_idx(me + i, n) as usize], at(i));
    }
    s.end_round();
    let stage = s.scratch(n as usize * b);
    let mut k = 1;
    while k < n {
        let idx: Vec<i32> = (0..n).filter(|i| i & k != 0).collect();
        s.send_v(ring_idx(me + k, n), idx.iter().map(|&i| at(i)).collect());
        s.recv(ring_idx(me - k, n), stage.at(0, idx.len() * b));
        for (j, &i) in idx.iter().enumerate() {
            s.copy(stage.at(j * b, b), at(i));
        }
        s.end_round();
        k *= 2;
    }
    for i in 0..n {
        s.copy(at(i), dst[ring_idx(me - i, n) as usize]);
    }
    s.end_round();
}

/// Which rank relays the block from `src` to `dst` in the 2-D mesh of `cols` columns: the one
/// in the source's row and the destination's column (the row above when the last, partial row
/// has no such rank).
fn relay(src: i32, dst: i32, cols: i32, n: i32) -> i32 {
    let r = (src / cols) * cols + dst % cols;
    if r < n {
        r
    } else {
        r - cols
    }
}

/// Message combining over a virtual 2-D mesh: a block goes from (x1,y1) to (x2,y2) via
/// (x1,y2), so each rank sends about 2√n combined messages instead of n small ones.
fn alltoall_mesh(s: &mut Schedule, src: &[Loc], dst: &[Loc]) {
    let (n, me) = (s.size(), s.rank());
    let b = dst[0].len;
    let cols = (1..=n).find(|c| c * c >= n).unwrap_or(1);
    let my_col: Vec<i32> = (0..n).filter(|d| d % cols == me % cols).collect();
    // The (source, destination) pairs this rank relays, each with a slot in the staging area.
    let mut relayed = Vec::new();
    for sr in 0..n {
        for &d in &my_col {
            if relay(sr, d, cols, n) == me {
                relayed.push((sr, d));
            }
        }
    }
    let stage = s.scratch(relayed.len() * b);
    let slot = |sr: i32, d: i32| {
        let i = relayed.iter().position(|&p| p == (sr, d)).expect("relayed pair");
        stage.at(i * b, b)
    };
    // Phase 1: to each relay the blocks it forwards for this rank, in destination order.
    for r in 0..n {
        let ds: Vec<i32> = (0..n).filter(|&d| relay(me, d, cols, n) == r).collect();
        if ds.is_empty() {
            continue;
        }
        if r == me {
            for &d in &ds {
                s.copy(src[d as usize], slot(me, d));
            }
        } else {
            s.send_v(r, ds.iter().map(|&d| src[d as usize]).collect());
        }
    }
    for sr in (0..n).filter(|&sr| sr != me) {
        let ds: Vec<Loc> = my_col.iter().filter(|&&d| relay(sr, d, cols, n) == me).map(|&d| slot(sr, d)).collect();
        if !ds.is_empty() {
            s.recv_v(sr, ds);
        }
    }
    s.end_round();
    // Phase 2: to each destination in this column the blocks relayed for it, in source order.
    for &d in &my_col {
        let srcs: Vec<i32> = (0..n).filter(|&sr| relay(sr, d, cols, n) == me).collect();
        if srcs.is_empty() {
            continue;
        }
        if d == me {
            for &sr in &srcs {
                s.copy(slot(sr, me), dst[sr as usize]);
            }
        } else {
            s.send_v(d, srcs.iter().map(|&sr| slot(sr, d)).collect());
        }
    }
    for r in (0..n).filter(|&r| r != me) {
        let srcs: Vec<Loc> = (0..n).filter(|&sr| relay(sr, me, cols, n) == r).map(|sr| dst[sr as usize]).collect();
        if !srcs.is_empty() {
            s.recv_v(r, srcs);
        }
    }
    s.end_round();
}
