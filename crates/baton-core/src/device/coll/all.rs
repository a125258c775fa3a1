//! The collectives where every process gives and gets: barrier, allgather and alltoall (with
//! their `v` and `w` forms).

use super::{choose, direct, even, no_in_place, same_size, sched, sched_for, Blocks, Call};
use crate::coll::algo::{self, Algo, Coll, Shape};
use crate::coll::inter;
use crate::device::{Buffer, Device, Started};
use crate::error::Result;
use crate::shm_coll::ShmKind;
use std::ops::ControlFlow;

impl Device {
    /// `MPI_Barrier`.
    #[inline]
    pub fn barrier(&self, at: Call) -> Result<Started> {
        const CALL: &str = "MPI_Barrier";
        let comm = at.comm;
        if comm.is_inter() {
            let mut s = sched(&at, CALL);
            inter::barrier(&mut s);
            return self.in_form(&at, s);
        }
        self.attach(&at);
        let a = choose(&at, Coll::Barrier, CALL, Shape::of(comm, 0))?;
        if let Some(sh) = direct(&at, a) {
            return Ok(self.shm_direct(sh, ShmKind::Barrier, None, |_, _| {}));
        }
        let mut s = sched_for(&at, CALL, a);
        algo::barrier(&mut s, a);
        self.in_form(&at, s)
    }

    /// `MPI_Allgather`: `recv` holds a block per rank (of the remote group on an
    /// intercommunicator); `send` is None for `MPI_IN_PLACE`.
    #[inline]
    pub fn allgather(&self, at: Call, send: Option<Buffer>, recv: Buffer) -> Result<Started> {
        self.even_blocks(at, Coll::Allgather, send, recv)
    }

    /// Allgather or alltoall with equal blocks: the checks, then the area, the schedule or
    /// nothing more than the shared-memory protocol.
    #[inline]
    fn even_blocks(&self, at: Call, coll: Coll, send: Option<Buffer>, recv: Buffer) -> Result<Started> {
        let call = if coll == Coll::Alltoall { "MPI_Alltoall" } else { "MPI_Allgather" };
        let comm = at.comm;
        let n = comm.peer_size() as usize;
        no_in_place(call, comm, "send", send.is_none())?;
        if let (Some(sb), false) = (&send, comm.is_inter()) {
            // An alltoall sends a block per rank, an allgather one block.
            let sent = if coll == Coll::Alltoall { even(sb, n) } else { sb.bytes() };
            same_size(call, sent, even(&recv, n))?;
        }
        let a = match self.even_algo(&at, call, coll, send.as_ref(), &recv)? {
            ControlFlow::Break(done) => return Ok(done),
            ControlFlow::Continue(a) => a,
        };
        match coll {
            Coll::Alltoall => self.alltoall_any(at, call, a, send.map(Blocks::Even), Blocks::Even(recv)),
            _ => self.allgather_any(at, call, a, send, Blocks::Even(recv)),
        }
    }

    /// `MPI_Allgatherv`: `recv` holds a buffer per rank.
    pub fn allgatherv(&self, at: Call, send: Option<Buffer>, recv: Vec<Buffer>) -> Result<Started> {
        const CALL: &str = "MPI_Allgatherv";
        let comm = at.comm;
        no_in_place(CALL, comm, "send", send.is_none())?;
        let a = if comm.is_inter() {
            None
        } else {
            if let Some(sb) = &send {
                same_size(CALL, sb.bytes(), recv[comm.rank as usize].bytes())?;
            }
            Some(algo::choose(Coll::Allgatherv, CALL, Shape { n: comm.size(), ..Default::default() })?)
        };
        self.allgather_any(at, CALL, a, send, Blocks::Each(recv))
    }

    /// The algorithm of an allgather or alltoall with equal blocks on an intracommunicator
    /// (None on an intercommunicator, which has its own), or the call done through the area.
    fn even_algo(
        &self,
        at: &Call,
        call: &'static str,
        coll: Coll,
        send: Option<&Buffer>,
        recv: &Buffer,
    ) -> Result<ControlFlow<Started, Option<Algo>>> {
        if at.comm.is_inter() {
            return Ok(ControlFlow::Continue(None));
        }
        self.attach(at);
        let b = even(recv, at.comm.size() as usize);
        let a = choose(at, coll, call, Shape::of(at.comm, b))?;
        let kind = if coll == Coll::Alltoall { ShmKind::Alltoall } else { ShmKind::Allgather };
        if let (Some(sh), Some(sb)) = (direct(at, a), send) {
            if let Some(done) = self.blocks_direct(sh, kind, sb, recv) {
                return Ok(ControlFlow::Break(done));
            }
        }
        Ok(ControlFlow::Continue(Some(a)))
    }

    /// An allgather's schedule with algorithm `a` (None: the intercommunicator's).
    fn allgather_any(
        &self,
        at: Call,
        call: &'static str,
        a: Option<Algo>,
        send: Option<Buffer>,
        recv: Blocks,
    ) -> Result<Started> {
        let mut s = a.map_or_else(|| sched(&at, call), |a| sched_for(&at, call, a));
        let dst = recv.locs(&mut s, at.comm.peer_size() as usize);
        let src = send.map(|x| x.region(&mut s));
        match a {
            Some(a) => algo::allgather(&mut s, a, src, &dst),
            None => inter::allgather(&mut s, src.expect("not in place"), &dst),
        }
        self.in_form(&at, s)
    }

    /// `MPI_Alltoall`: both buffers hold a block per rank (of the remote group on an
    /// intercommunicator); `send` is None for `MPI_IN_PLACE`.
    #[inline]
    pub fn alltoall(&self, at: Call, send: Option<Buffer>, recv: Buffer) -> Result<Started> {
        self.even_blocks(at, Coll::Alltoall, send, recv)
    }

    /// `MPI_Alltoallv`: a buffer per rank on each side (no send side for `MPI_IN_PLACE`).
    pub fn alltoallv(&self, at: Call, send: Option<Vec<Buffer>>, recv: Vec<Buffer>) -> Result<Started> {
        self.alltoall_vw(at, "MPI_Alltoallv", send, recv)
    }

    /// `MPI_Alltoallw`: as [`alltoallv`](Self::alltoallv), each block with its own datatype.
    pub fn alltoallw(&self, at: Call, send: Option<Vec<Buffer>>, recv: Vec<Buffer>) -> Result<Started> {
        self.alltoall_vw(at, "MPI_Alltoallw", send, recv)
    }

    fn alltoall_vw(
        &self,
        at: Call,
        call: &'static str,
        send: Option<Vec<Buffer>>,
        recv: Vec<Buffer>,
    ) -> Result<Started> {
        let comm = at.comm;
        no_in_place(call, comm, "send", send.is_none())?;
        let a = if comm.is_inter() {
            None
        } else {
            let me = comm.rank as usize;
            if let Some(sb) = &send {
                same_size(call, sb[me].bytes(), recv[me].bytes())?;
            }
            Some(algo::choose(Coll::Alltoallv, call, Shape { n: comm.size(), ..Default::default() })?)
        };
        self.alltoall_any(at, call, a, send.map(Blocks::Each), Blocks::Each(recv))
    }

    /// An alltoall's schedule with algorithm `a` (None: the intercommunicator's).
    fn alltoall_any(
        &self,
        at: Call,
        call: &'static str,
        a: Option<Algo>,
        send: Option<Blocks>,
        recv: Blocks,
    ) -> Result<Started> {
        let n = at.comm.peer_size() as usize;
        let mut s = a.map_or_else(|| sched(&at, call), |a| sched_for(&at, call, a));
        let dst = recv.locs(&mut s, n);
        let src = send.map(|b| b.locs(&mut s, n));
        match a {
            Some(a) => algo::alltoall(&mut s, a, src.as_deref(), &dst),
            None => inter::alltoall(&mut s, &src.expect("not in place"), &dst),
        }
        self.in_form(&at, s)
    }
}
