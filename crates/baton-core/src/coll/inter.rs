//! Intercommunicator collectives, each filling a [`Schedule`] for the calling process.
//!
//! On an intercommunicator's schedule, [`Schedule::send`] and [`Schedule::recv`] address the
//! local group (through the intercommunicator's private local communicator) and
//! [`Schedule::send_remote`] / [`Schedule::recv_remote`] the remote group. The local phases are
//! therefore the intracommunicator algorithms of [`super::algo`], unchanged:
//!
//! - data that crosses once (bcast, reduce, allreduce, reduce-scatter, barrier) is combined or
//!   spread inside a group and crosses between the two local leaders (local rank 0);
//! - data that is personal to each pair of processes (gather, scatter, allgather, alltoall and
//!   their `v`/`w` forms) goes straight from process to process, one message per pair, which
//!   also serves blocks of different sizes without telling anybody else their counts.
//!
//! Each group's results come from the other group's data, as the standard defines them; a
//! non-commutative reduction is applied in the rank order of the group that contributes.

use super::algo::{self, Algo};
use super::schedule::{Loc, Schedule};

/// What the `root` argument of a rooted collective makes of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// `MPI_ROOT`: this process is the root.
    Me,
    /// `MPI_PROC_NULL`: in the root's group, but not the root; takes no part.
    Idle,
    /// The root is this rank of the remote group.
    Remote(i32),
}

/// Window of `len` bytes at local rank 0 (the leader), where a group's combined data meets.
fn at_leader(s: &mut Schedule, len: usize) -> Option<Loc> {
    (s.rank() == 0).then(|| s.scratch(len))
}

/// A barrier of the local group, then the leaders meet, then the leader releases its group.
pub fn barrier(s: &mut Schedule) {
    algo::barrier(s, Algo::Dissemination);
    s.end_round();
    let token = s.scratch(0);
    if s.rank() == 0 {
        s.send_remote(0, token);
        s.recv_remote(0, token);
        s.end_round();
    }
    algo::bcast(s, Algo::Binomial, 0, token);
}

/// The root sends to the remote leader, which broadcasts within its group.
pub fn bcast(s: &mut Schedule, root: Root, buf: Loc) {
    match root {
        Root::Me => {
            s.send_remote(0, buf);
            s.end_round();
        }
        Root::Idle => {}
        Root::Remote(r) => {
            if s.rank() == 0 {
                s.recv_remote(r, buf);
                s.end_round();
            }
            algo::bcast(s, Algo::Binomial, 0, buf);
        }
    }
}

/// The contributing group reduces to its leader, which sends the result to the root.
pub fn reduce(s: &mut Schedule, root: Root, src: Option<Loc>, dst: Option<Loc>) {
    match root {
        Root::Me => {
            s.recv_remote(0, dst.expect("the root has a receive buffer"));
            s.end_round();
        }
        Root::Idle => {}
        Root::Remote(r) => {
            let src = src.expect("contributors have a send buffer");
            let acc = at_leader(s, src.len);
            algo::reduce(s, Algo::Binomial, 0, src, acc);
            s.end_round();
            if let Some(acc) = acc {
                s.send_remote(r, acc);
                s.end_round();
            }
        }
    }
}

/// Each group reduces to its leader; the leaders swap results and broadcast what they got.
pub fn allreduce(s: &mut Schedule, src: Loc, dst: Loc) {
    let acc = at_leader(s, src.len);
    algo::reduce(s, Algo::Binomial, 0, src, acc);
    s.end_round();
    if let Some(acc) = acc {
        s.send_remote(0, acc);
        s.recv_remote(0, dst);
        s.end_round();
    }
    algo::bcast(s, Algo::Binomial, 0, dst);
}

/// Each group reduces its whole vector to its leader; the leaders swap them, and each scatters
/// the other group's result over its own group in `blocks` (lengths per local rank).
pub fn reduce_scatter(s: &mut Schedule, src: Loc, block_lens: &[usize], dst: Loc) {
    let acc = at_leader(s, src.len);
    algo::reduce(s, Algo::Binomial, 0, src, acc);
    s.end_round();
    let mut blocks = Vec::new();
    if let Some(acc) = acc {
        let theirs = s.scratch(src.len);
        s.send_remote(0, acc);
        s.recv_remote(0, theirs);
        s.end_round();
        let mut at = 0;
        for &len in block_lens {
            blocks.push(theirs.at(at, len));
            at += len;
        }
    }
    let b = block_lens.first().copied().unwrap_or(0);
    algo::scatter(s, Algo::Linear, 0, &blocks, Some(dst), b);
}

/// The root receives block `r` from remote rank `r`.
pub fn gather(s: &mut Schedule, root: Root, src: Option<Loc>, blocks: &[Loc]) {
    let mine = || src.expect("contributors have a send buffer");
    rooted_blocks(s, root, blocks, Schedule::recv_remote, mine, Schedule::send_remote);
}

/// The root sends block `r` to remote rank `r`.
pub fn scatter(s: &mut Schedule, root: Root, blocks: &[Loc], dst: Option<Loc>) {
    let mine = || dst.expect("receivers have a receive buffer");
    rooted_blocks(s, root, blocks, Schedule::send_remote, mine, Schedule::recv_remote);
}

/// One round in which block `r` of the root moves, by `at_root`, to or from remote rank `r`,
/// and each process of the other group moves its own buffer (`mine`) by `at_other`: gather
/// and scatter are this exchange in opposite directions.
fn rooted_blocks(
    s: &mut Schedule,
    root: Root,
    blocks: &[Loc],
    at_root: fn(&mut Schedule, i32, Loc),
    mine: impl FnOnce() -> Loc,
    at_other: fn(&mut Schedule, i32, Loc),
) {
    match root {
        Root::Me => {
            for (r, &b) in blocks.iter().enumerate() {
                at_root(s, r as i32, b);
            }
        }
        Root::Idle => {}
        Root::Remote(r) => at_other(s, r, mine()),
    }
    s.end_round();
}

/// Every process sends `src` to every remote process and receives block `r` from remote rank `r`.
pub fn allgather(s: &mut Schedule, src: Loc, blocks: &[Loc]) {
    for (r, &b) in blocks.iter().enumerate() {
        s.recv_remote(r as i32, b);
    }
    for r in 0..s.remote_size() {
        s.send_remote(r, src);
    }
    s.end_round();
}

/// Block `r` of `src` goes to remote rank `r`; block `r` of `dst` comes from it.
pub fn alltoall(s: &mut Schedule, src: &[Loc], dst: &[Loc]) {
    for (r, &b) in dst.iter().enumerate() {
        s.recv_remote(r as i32, b);
    }
    for (r, &b) in src.iter().enumerate() {
        s.send_remote(r as i32, b);
    }
    s.end_round();
}
