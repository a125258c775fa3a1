//! The reductions: reduce, allreduce, scan, exscan and reduce-scatter (both forms).

use super::{
    check_root, choose, direct, in_place_at_root, inter_root, no_in_place, require_intra, sched, sched_for, Arg, Call,
    Lazy,
};
use crate::coll::algo::{self, Coll, Shape};
use crate::coll::inter::{self, Root};
use crate::coll::schedule::{Loc, Schedule};
use crate::coll::Reducer;
use crate::comm::Comm;
use crate::device::{Buffer, Device, Started};
use crate::error::Result;
use crate::shm_coll::ShmKind;

/// The shape of a reduction of `recv`'s vector with `op`.
fn vector_shape(comm: &Comm, recv: &Buffer, op: &Reducer) -> Shape {
    Shape { commutative: op.commutative, elems: recv.bytes() / op.unit.max(1), ..Shape::of(comm, recv.bytes()) }
}

/// Schedule `s` reducing with `op`, and its send and receive windows (the receive buffer's for
/// both with `MPI_IN_PLACE`).
fn reduction(mut s: Schedule, send: Option<Buffer>, recv: &Buffer, op: Reducer) -> (Schedule, Loc, Loc) {
    s.set_reducer(op);
    let dst = recv.region(&mut s);
    let src = send.map_or(dst, |b| b.region(&mut s));
    (s, src, dst)
}

impl Device {
    /// `MPI_Reduce`: `recv` is significant at the root only, `send` (None for `MPI_IN_PLACE`,
    /// at the root) and `op` wherever this process contributes.
    #[inline]
    pub fn reduce(
        &self,
        at: Call,
        send: Arg<Option<Buffer>>,
        recv: impl Lazy<Buffer>,
        op: Arg<Reducer>,
        root: i32,
    ) -> Result<Started> {
        const CALL: &str = "MPI_Reduce";
        let comm = at.comm;
        let in_place = matches!(send, Ok(None));
        if comm.is_inter() {
            let root = inter_root(CALL, comm, root)?;
            let rb = if root == Root::Me { Some(recv()?) } else { None };
            let sb = match root {
                Root::Remote(_) => {
                    no_in_place(CALL, comm, "send", in_place)?;
                    send?
                }
                _ => None,
            };
            let r = if root == Root::Idle { None } else { Some(op?) };
            let mut s = sched(&at, CALL);
            if let Some(r) = r {
                s.set_reducer(r);
            }
            let dst = rb.map(|b| b.region(&mut s));
            let src = sb.map(|b| b.region(&mut s));
            inter::reduce(&mut s, root, src, dst);
            return self.in_form(&at, s);
        }
        check_root(CALL, comm, root)?;
        let is_root = comm.rank == root;
        if in_place && !is_root {
            return Err(in_place_at_root(CALL));
        }
        let rb = if is_root { Some(recv()?) } else { None };
        let sb = send?;
        let r = op?;
        let input = sb.as_ref().or(rb.as_ref()).expect("in place only at the root");
        self.attach(&at);
        let shape = Shape { commutative: r.commutative, ..Shape::of(comm, input.bytes()) };
        let a = choose(&at, Coll::Reduce, CALL, shape)?;
        if let Some(sh) = direct(&at, a) {
            let dst = match &rb {
                Some(b) => b.contiguous().map(Some),
                None => Some(None),
            };
            if let (Some(src), Some(dst)) = (input.contiguous(), dst) {
                let kind = ShmKind::Reduce { root: root as usize };
                return Ok(self.shm_direct(sh, kind, Some(src.read(0, src.len())), |sh, seq| {
                    if let Some(d) = dst {
                        d.modify(0, src.len(), |acc| sh.combine(seq, &r, acc));
                    }
                }));
            }
        }
        let mut s = sched_for(&at, CALL, a);
        s.set_reducer(r);
        let dst = rb.map(|b| b.region(&mut s));
        let src = match sb {
            Some(b) => b.region(&mut s),
            None => dst.expect("in place only at the root"),
        };
        algo::reduce(&mut s, a, root, src, dst);
        self.in_form(&at, s)
    }

    /// `MPI_Allreduce` (`send` None for `MPI_IN_PLACE`).
    #[inline]
    pub fn allreduce(&self, at: Call, send: Option<Buffer>, recv: Buffer, op: Reducer) -> Result<Started> {
        const CALL: &str = "MPI_Allreduce";
        let comm = at.comm;
        no_in_place(CALL, comm, "send", send.is_none())?;
        if comm.is_inter() {
            let (mut s, src, dst) = reduction(sched(&at, CALL), send, &recv, op);
            inter::allreduce(&mut s, src, dst);
            return self.in_form(&at, s);
        }
        self.attach(&at);
        let a = choose(&at, Coll::Allreduce, CALL, vector_shape(comm, &recv, &op))?;
        if let (Some(sh), Some(d)) = (direct(&at, a), recv.contiguous()) {
            let src = match &send {
                None => Some(d),
                Some(b) => b.contiguous(),
            };
            // In place, the contribution is copied into the segment before the result is written.
            if let Some(src) = src {
                return Ok(self.shm_direct(sh, ShmKind::Allreduce, Some(src.read(0, d.len())), |sh, seq| {
                    d.modify(0, d.len(), |acc| sh.combine(seq, &op, acc))
                }));
            }
        }
        let (mut s, src, dst) = reduction(sched_for(&at, CALL, a), send, &recv, op);
        algo::allreduce(&mut s, a, src, dst);
        self.in_form(&at, s)
    }

    /// `MPI_Scan` (`send` None for `MPI_IN_PLACE`).
    pub fn scan(&self, at: Call, send: Option<Buffer>, recv: Buffer, op: Reducer) -> Result<Started> {
        self.scan_any(at, false, send, recv, op)
    }

    /// `MPI_Exscan` (`send` None for `MPI_IN_PLACE`).
    pub fn exscan(&self, at: Call, send: Option<Buffer>, recv: Buffer, op: Reducer) -> Result<Started> {
        self.scan_any(at, true, send, recv, op)
    }

    fn scan_any(&self, at: Call, exclusive: bool, send: Option<Buffer>, recv: Buffer, op: Reducer) -> Result<Started> {
        let call = if exclusive { "MPI_Exscan" } else { "MPI_Scan" };
        require_intra(call, at.comm)?;
        let a = algo::choose(Coll::Scan, call, vector_shape(at.comm, &recv, &op))?;
        let (mut s, src, dst) = reduction(sched(&at, call), send, &recv, op);
        algo::scan(&mut s, a, src, dst, exclusive);
        self.in_form(&at, s)
    }

    /// `MPI_Reduce_scatter`: `counts[r]` elements of the result for local rank `r`. `send` holds
    /// the whole vector; None for `MPI_IN_PLACE`, where `recv` holds it and gets this rank's
    /// block at its start.
    pub fn reduce_scatter(
        &self,
        at: Call,
        send: Option<Buffer>,
        recv: Buffer,
        counts: &[usize],
        op: Reducer,
    ) -> Result<Started> {
        self.reduce_scatter_any(at, "MPI_Reduce_scatter", send, recv, counts, op)
    }

    /// `MPI_Reduce_scatter_block`: `count` elements of the result for every rank; the buffers
    /// as for [`reduce_scatter`](Self::reduce_scatter).
    pub fn reduce_scatter_block(
        &self,
        at: Call,
        send: Option<Buffer>,
        recv: Buffer,
        count: usize,
        op: Reducer,
    ) -> Result<Started> {
        let counts = vec![count; at.comm.size() as usize];
        self.reduce_scatter_any(at, "MPI_Reduce_scatter_block", send, recv, &counts, op)
    }

    fn reduce_scatter_any(
        &self,
        at: Call,
        call: &'static str,
        send: Option<Buffer>,
        recv: Buffer,
        counts: &[usize],
        op: Reducer,
    ) -> Result<Started> {
        let comm = at.comm;
        no_in_place(call, comm, "send", send.is_none())?;
        let me = comm.rank as usize;
        let (whole, mine) = match send {
            Some(w) => (w, recv),
            None => (recv.clone(), Buffer { count: counts[me], ..recv }),
        };
        let size = whole.layout.size;
        let lens: Vec<usize> = counts.iter().map(|&c| c * size).collect();
        if comm.is_inter() {
            // Each group's result is the other group's vector, cut by this group's counts.
            let mut s = sched(&at, call);
            s.set_reducer(op);
            let src = whole.region(&mut s);
            let dst = mine.region(&mut s);
            inter::reduce_scatter(&mut s, src, &lens, dst);
            return self.in_form(&at, s);
        }
        let shape = Shape {
            uniform: counts.iter().all(|&c| c == counts[0]),
            commutative: op.commutative,
            elems: counts.iter().sum(),
            ..Shape::of(comm, whole.bytes())
        };
        let a = algo::choose(Coll::ReduceScatter, call, shape)?;
        let mut s = sched(&at, call);
        s.set_reducer(op);
        let src = whole.region(&mut s);
        let dst = mine.region(&mut s);
        let mut at_off = 0;
        let bl: Vec<Loc> = lens
            .iter()
            .map(|&len| {
                let w = src.at(at_off, len);
                at_off += len;
                w
            })
            .collect();
        algo::reduce_scatter(&mut s, a, src, &bl, dst);
        self.in_form(&at, s)
    }
}
