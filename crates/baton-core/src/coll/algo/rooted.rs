//! Gather and scatter: linear (the root exchanges every block itself) and binomial (each
//! subtree's blocks travel as one message).

use super::{ring_idx, Algo};
use crate::coll::schedule::{Loc, Schedule};

/// Gathers every rank's `src` into `blocks` at the root (`blocks` is empty elsewhere; `src` is
/// None at a root using `MPI_IN_PLACE`).
pub fn gather(s: &mut Schedule, a: Algo, root: i32, src: Option<Loc>, blocks: &[Loc], block_len: usize) {
    if a == Algo::Binomial && s.size() > 1 {
        return gather_binomial(s, root, src, blocks, block_len);
    }
    rooted_linear(s, Flow::Gather, root, src, blocks)
}

/// Which way a rooted collective moves its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// From every rank to the root.
    Gather,
    /// From the root to every rank.
    Scatter,
}

impl Flow {
    /// Posts this rank's side of moving block `l` between the root and another rank: `at_root`
    /// says whether this rank is the root, `peer` is the other side, `remote` that the peer is
    /// in the remote group of an intercommunicator.
    pub(in crate::coll) fn post(self, s: &mut Schedule, at_root: bool, peer: i32, l: Loc, remote: bool) {
        let sends = (self == Flow::Gather) != at_root;
        match (sends, remote) {
            (true, false) => s.send(peer, l),
            (false, false) => s.recv(peer, l),
            (true, true) => s.send_remote(peer, l),
            (false, true) => s.recv_remote(peer, l),
        }
    }
}

/// The root exchanges each block with its rank directly; `mine` is this rank's own block (None
/// at a root using `MPI_IN_PLACE`).
fn rooted_linear(s: &mut Schedule, flow: Flow, root: i32, mine: Option<Loc>, blocks: &[Loc]) {
    let (n, me) = (s.size(), s.rank());
    if me != root {
        flow.post(s, false, root, mine.expect("ranks other than the root have their block"), false);
    } else {
        for i in (0..n).filter(|&i| i != me) {
            flow.post(s, true, i, blocks[i as usize], false);
        }
        match (mine, flow) {
            (Some(m), Flow::Gather) => s.copy(m, blocks[me as usize]),
            (Some(m), Flow::Scatter) => s.copy(blocks[me as usize], m),
            (None, _) => {}
        }
    }
    s.end_round();
}

fn subtree(vr: i32, n: i32) -> (i32, i32) {
    let low = if vr == 0 { (n as u32).next_power_of_two() as i32 } else { vr & -vr };
    (low, low.min(n - vr))
}

/// Each subtree's blocks travel as one message up a binomial tree.
fn gather_binomial(s: &mut Schedule, root: i32, src: Option<Loc>, blocks: &[Loc], b: usize) {
    let (n, me) = (s.size(), s.rank());
    let vr = ring_idx(me - root, n);
    let real = |v: i32| (v + root) % n;
    let (low, size) = subtree(vr, n);
    let src = src.unwrap_or_else(|| blocks[me as usize]);
    if size == 1 {
        s.send(real(vr - low), src);
        s.end_round();
        return;
    }
    let tmp = s.scratch(size as usize * b);
    let mut m = 1;
    while m < low && vr + m < n {
        let cs = m.min(n - vr - m) as usize;
        s.recv(real(vr + m), tmp.at(m as usize * b, cs * b));
        m <<= 1;
    }
    s.copy(src, tmp.at(0, b));
    s.end_round();
    if vr != 0 {
        s.send(real(vr - low), tmp);
    } else {
        for v in 0..n {
            s.copy(tmp.at(v as usize * b, b), blocks[real(v) as usize]);
        }
    }
    s.end_round();
}

/// Scatters `blocks` (at the root) so that every rank gets its block in `dst` (None at a root
/// using `MPI_IN_PLACE`).
pub fn scatter(s: &mut Schedule, a: Algo, root: i32, blocks: &[Loc], dst: Option<Loc>, block_len: usize) {
    if a == Algo::Binomial && s.size() > 1 {
        return scatter_binomial(s, root, blocks, dst, block_len);
    }
    rooted_linear(s, Flow::Scatter, root, dst, blocks)
}

fn scatter_binomial(s: &mut Schedule, root: i32, blocks: &[Loc], dst: Option<Loc>, b: usize) {
    let (n, me) = (s.size(), s.rank());
    let vr = ring_idx(me - root, n);
    let real = |v: i32| (v + root) % n;
    let (low, size) = subtree(vr, n);
    if size == 1 {
        s.recv(real(vr - low), dst.expect("non-root ranks have a receive buffer"));
        s.end_round();
        return;
    }
    let tmp = s.scratch(size as usize * b);
    if vr == 0 {
        for v in 0..n {
            s.copy(blocks[real(v) as usize], tmp.at(v as usize * b, b));
        }
    } else {
        s.recv(real(vr - low), tmp);
    }
    s.end_round();
    let mut m = 1;
    while m < low && vr + m < n {
        let cs = m.min(n - vr - m) as usize;
        s.send(real(vr + m), tmp.at(m as usize * b, cs * b));
        m <<= 1;
    }
    if let Some(d) = dst {
        s.copy(tmp.at(0, b), d);
    }
    s.end_round();
}
