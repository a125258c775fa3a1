//! Bcast, gather and scatter (with their `v` forms): the collectives with a root.

use super::{
    check_root, choose, direct, in_place_at_root, inter_root, no_in_place, same_size, sched, sched_for, Arg, Blocks,
    Call, Lazy,
};
use crate::coll::algo::{self, Coll, Flow, Shape};
use crate::coll::inter::{self, Root};
use crate::coll::schedule::{Loc, Schedule};
use crate::device::{Buffer, Device, Started};
use crate::error::Result;
use crate::shm_coll::ShmKind;

impl Device {
    /// `MPI_Bcast`: `buf` is not significant at an intercommunicator process that is neither
    /// the root nor in the receiving group (`MPI_PROC_NULL`).
    #[inline]
    pub fn bcast(&self, at: Call, buf: Arg<Buffer>, root: i32) -> Result<Started> {
        const CALL: &str = "MPI_Bcast";
        let comm = at.comm;
        if comm.is_inter() {
            let root = inter_root(CALL, comm, root)?;
            let buf = if root == Root::Idle { None } else { Some(buf?) };
            let mut s = sched(&at, CALL);
            if let Some(b) = buf {
                let l = b.region(&mut s);
                inter::bcast(&mut s, root, l);
            }
            return self.in_form(&at, s);
        }
        check_root(CALL, comm, root)?;
        let buf = buf?;
        self.attach(&at);
        let a = choose(&at, Coll::Bcast, CALL, Shape::of(comm, buf.bytes()))?;
        if let (Some(sh), Some(b)) = (direct(&at, a), buf.contiguous()) {
            let me = comm.rank == root;
            let kind = ShmKind::Bcast { root: root as usize };
            return Ok(self.shm_direct(sh, kind, me.then(|| b.read(0, b.len())), |sh, seq| {
                if !me {
                    b.write(0, sh.data(root as usize, seq, b.len()));
                }
            }));
        }
        let mut s = sched_for(&at, CALL, a);
        let l = buf.region(&mut s);
        algo::bcast(&mut s, a, root, l);
        self.in_form(&at, s)
    }

    /// `MPI_Gather`: `recv` holds a block per rank; `send` is None for `MPI_IN_PLACE` (at the
    /// root).
    pub fn gather(&self, at: Call, send: Arg<Option<Buffer>>, recv: impl Lazy<Buffer>, root: i32) -> Result<Started> {
        self.rooted(at, Flow::Gather, send, || recv().map(Blocks::Even), false, root)
    }

    /// `MPI_Gatherv`: `recv` holds the root's blocks.
    pub fn gatherv(
        &self,
        at: Call,
        send: Arg<Option<Buffer>>,
        recv: impl Lazy<Vec<Buffer>>,
        root: i32,
    ) -> Result<Started> {
        self.rooted(at, Flow::Gather, send, || recv().map(Blocks::Each), true, root)
    }

    /// `MPI_Scatter`: `send` holds a block per rank; `recv` is None for `MPI_IN_PLACE` (at the
    /// root).
    pub fn scatter(&self, at: Call, send: impl Lazy<Buffer>, recv: Arg<Option<Buffer>>, root: i32) -> Result<Started> {
        self.rooted(at, Flow::Scatter, recv, || send().map(Blocks::Even), false, root)
    }

    /// `MPI_Scatterv`: `send` holds the root's blocks.
    pub fn scatterv(
        &self,
        at: Call,
        send: impl Lazy<Vec<Buffer>>,
        recv: Arg<Option<Buffer>>,
        root: i32,
    ) -> Result<Started> {
        self.rooted(at, Flow::Scatter, recv, || send().map(Blocks::Each), true, root)
    }

    /// Gather and scatter: `mine` is this process's block (None for `MPI_IN_PLACE`), `blocks`
    /// the root's, a buffer per rank in the `v` forms.
    fn rooted(
        &self,
        at: Call,
        flow: Flow,
        mine: Arg<Option<Buffer>>,
        blocks: impl Lazy<Blocks>,
        v: bool,
        root: i32,
    ) -> Result<Started> {
        let uniform = !v;
        let call = match (flow, uniform) {
            (Flow::Gather, true) => "MPI_Gather",
            (Flow::Gather, false) => "MPI_Gatherv",
            (Flow::Scatter, true) => "MPI_Scatter",
            (Flow::Scatter, false) => "MPI_Scatterv",
        };
        let mine_what = if flow == Flow::Gather { "send" } else { "receive" };
        let comm = at.comm;
        let in_place = matches!(mine, Ok(None));
        if comm.is_inter() {
            let root = inter_root(call, comm, root)?;
            let n = comm.peer_size() as usize;
            let mut s;
            match root {
                Root::Me => {
                    no_in_place(call, comm, mine_what, in_place)?;
                    let bl = blocks()?;
                    s = sched(&at, call);
                    let locs = bl.locs(&mut s, n);
                    run_inter(&mut s, flow, root, None, &locs);
                }
                Root::Idle => s = sched(&at, call),
                Root::Remote(_) => {
                    no_in_place(call, comm, mine_what, in_place)?;
                    let m = mine?.expect("not in place");
                    s = sched(&at, call);
                    let l = m.region(&mut s);
                    run_inter(&mut s, flow, root, Some(l), &[]);
                }
            }
            return self.in_form(&at, s);
        }
        check_root(call, comm, root)?;
        let (n, is_root) = (comm.size(), comm.rank == root);
        if in_place && !is_root {
            return Err(in_place_at_root(call));
        }
        let mine = mine?;
        let blocks = if is_root { Some(blocks()?) } else { None };
        let even = match &blocks {
            Some(Blocks::Even(b)) => Some(super::even(b, n as usize)),
            _ => None,
        };
        let b = match (&mine, even) {
            (_, Some(rb)) => {
                if let Some(m) = &mine {
                    let (send, recv) = if flow == Flow::Gather { (m.bytes(), rb) } else { (rb, m.bytes()) };
                    same_size(call, send, recv)?;
                }
                rb
            }
            (Some(m), None) => m.bytes(),
            (None, None) => 0,
        };
        let a = algo::choose(flow_coll(flow), call, Shape { n, bytes: b, uniform, ..Default::default() })?;
        let mut s = sched(&at, call);
        let locs = blocks.map_or_else(Vec::new, |bl| bl.locs(&mut s, n as usize));
        let m = mine.map(|x| x.region(&mut s));
        match flow {
            Flow::Gather => algo::gather(&mut s, a, root, m, &locs, b),
            Flow::Scatter => algo::scatter(&mut s, a, root, &locs, m, b),
        }
        self.in_form(&at, s)
    }
}

fn flow_coll(flow: Flow) -> Coll {
    match flow {
        Flow::Gather => Coll::Gather,
        Flow::Scatter => Coll::Scatter,
    }
}

fn run_inter(s: &mut Schedule, flow: Flow, root: Root, mine: Option<Loc>, blocks: &[Loc]) {
    match flow {
        Flow::Gather => inter::gather(s, root, mine, blocks),
        Flow::Scatter => inter::scatter(s, root, blocks, mine),
    }
}
