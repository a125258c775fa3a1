//! The origin side of a window: [`Access`], the epochs this process has open and what each
//! target still owes it, and the operations (`MPI_Put`, `MPI_Get`, the accumulates).
//!
//! An operation is sent at once as a request (its data packed into the message, so the
//! origin's buffer is free again when the call returns). A lock is taken lazily: `MPI_Win_lock`
//! on another process only notes it, and the lock request leaves just before the first
//! operation to that target, in the same queue at the target, which holds that origin's later
//! requests until the lock is granted. An epoch without operations costs no message.

use super::direct::Combine;
use super::wire::{Ask, Shape};
use super::{op_code, Flavor, Window};
use crate::datatype::Layout;
use crate::engine::{ReqId, SendData, Sender, Sink};
use crate::error::{MpiError, Result};
use crate::op::Op;
use crate::progress::EngineAccess;
use crate::runtime::Mpi;
use baton_abi::consts as c;

/// A direct window's lock states per target (the epoch state `Fast` keeps).
pub const HELD_NONE: u8 = 0;
pub const HELD_SHARED: u8 = 1;
pub const HELD_EXCLUSIVE: u8 = 2;
pub const HELD_NOCHECK: u8 = 3;

/// A passive-target lock as this origin sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    None,
    /// `MPI_Win_lock` was called; no request has gone yet.
    Wanted {
        exclusive: bool,
    },
    /// The lock request has gone (granted by the time anything after it is carried out).
    Asked {
        exclusive: bool,
    },
    /// `MPI_MODE_NOCHECK`: the application promises no conflicting lock, so none is asked for.
    NoCheck,
}

/// What one target owes this origin.
#[derive(Clone, Debug)]
pub(crate) struct Owed {
    pub lock: Lock,
    /// Requests that write (put, accumulate) sent since the last completion at the target.
    pub dirty: bool,
    /// Receives of fetched data this process posted itself (released once complete).
    pub fetches: Vec<ReqId>,
    /// Receives of fetched data the application holds as requests (`MPI_Rget`...): waited for
    /// by flushes but released by the application.
    pub requests: Vec<ReqId>,
}

/// The origin side of one window in this process.
pub struct Access {
    pub(crate) owed: Vec<Owed>,
    next_id: i32,
    /// A fence opened an access epoch (closed by a fence with `MPI_MODE_NOSUCCEED`).
    pub(crate) fence: bool,
    /// `MPI_Win_start`'s group, as ranks of the window, until `MPI_Win_complete`.
    pub(crate) started: Option<Vec<i32>>,
    /// `MPI_Win_post`'s group size, until `MPI_Win_wait` (or a successful `MPI_Win_test`).
    pub(crate) posted: Option<usize>,
    /// Inside `MPI_Win_lock_all` .. `MPI_Win_unlock_all`.
    pub(crate) lock_all: bool,
}

impl Access {
    pub(crate) fn new(n: usize) -> Access {
        Access {
            owed: vec![Owed { lock: Lock::None, dirty: false, fetches: Vec::new(), requests: Vec::new() }; n],
            next_id: 0,
            fence: false,
            started: None,
            posted: None,
            lock_all: false,
        }
    }

    /// A fresh reply tag (1 ..= 2^30; 0 is the tag of post notices).
    pub(crate) fn next_id(&mut self) -> i32 {
        self.next_id = self.next_id % (1 << 30) + 1;
        self.next_id
    }

    /// Fails unless an access epoch to `rank` is open.
    pub(crate) fn check_epoch(&self, call: &str, rank: i32) -> Result<()> {
        let open = self.owed.get(rank as usize).is_some_and(|o| o.lock != Lock::None)
            || self.fence
            || self.started.as_ref().is_some_and(|g| g.contains(&rank));
        if open {
            return Ok(());
        }
        Err(no_epoch(call, rank))
    }

    /// Fails while an epoch is open (`MPI_Win_free`).
    pub(crate) fn check_closed(&self, call: &str) -> Result<()> {
        let what = if self.lock_all {
            Some("an MPI_Win_lock_all epoch".to_string())
        } else if let Some(r) = self.owed.iter().position(|o| o.lock != Lock::None) {
            Some(format!("a lock on rank {r}"))
        } else if self.started.is_some() {
            Some("an MPI_Win_start epoch".to_string())
        } else {
            self.posted.map(|_| "an MPI_Win_post epoch".to_string())
        };
        match what {
            Some(w) => Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: the window still has {w} open"))),
            None => Ok(()),
        }
    }
}

/// Bytes of one basic element of an accumulate: predefined datatype `basic`'s size, else (a
/// type no kernel knows) the whole target element.
fn element_size(basic: usize, layout: &Layout) -> usize {
    crate::datatype::predefined(basic).map_or(layout.size, |l| l.size)
}

/// A request that is complete from the start (an operation carried out in the call).
pub(crate) fn done(mpi: &Mpi) -> ReqId {
    let st = crate::engine::Status { source: c::MPI_ANY_SOURCE, tag: c::MPI_ANY_TAG, ..Default::default() };
    mpi.with_engine(|e, _| e.completed(st))
}

/// The error of an operation to `rank` outside every epoch.
fn no_epoch(call: &str, rank: i32) -> MpiError {
    MpiError::new(
        c::MPI_ERR_RMA_SYNC,
        format!(
            "{call}: no access epoch to target rank {rank} of the window is open (call MPI_Win_fence, \
                 MPI_Win_start with a group holding it, MPI_Win_lock or MPI_Win_lock_all first)"
        ),
    )
}

/// Where an operation lands: `count` elements of `layout` at displacement `disp` of rank `rank`.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub rank: i32,
    pub disp: i64,
    pub count: usize,
    pub layout: &'a Layout,
}

impl Window {
    /// A direct window's [`Access::check_epoch`], from the lock-free state.
    fn check_epoch_direct(&self, call: &str, rank: i32) -> Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let f = &self.fast;
        if f.locks[rank as usize].load(Relaxed) != HELD_NONE || f.fence.load(Relaxed) {
            return Ok(());
        }
        if f.started.load(Relaxed) {
            return self.access().check_epoch(call, rank);
        }
        Err(no_epoch(call, rank))
    }

    /// The byte offset (or, in a dynamic window, the address) and the shape of `t`, checked
    /// against the target's window where the origin knows its size.
    fn locate(&self, call: &str, t: &Target) -> Result<(i64, Shape)> {
        let shape = Shape::of(t.layout, t.count);
        if self.flavor == Flavor::Dynamic {
            return Ok((t.disp, shape));
        }
        let peer = self.peers[t.rank as usize];
        let off = t.disp.checked_mul(peer.disp_unit as i64);
        let inside = |off: i64| match shape.range() {
            None => true,
            Some((lo, hi)) => {
                off.checked_add(lo).is_some_and(|a| a >= 0)
                    && off.checked_add(hi).is_some_and(|z| z <= peer.size as i64)
            }
        };
        match off {
            Some(off) if inside(off) => Ok((off, shape)),
            _ => {
                let (lo, hi) = shape.range().unwrap_or((0, 0));
                Err(MpiError::new(
                    c::MPI_ERR_RMA_RANGE,
                    format!(
                        "{call}: target_disp {} (displacement unit {}) and {} element(s) of the target datatype \
                         reach bytes [{}, {}) of target rank {}'s window memory, which has {} bytes",
                        t.disp,
                        peer.disp_unit,
                        t.count,
                        off.map_or(i64::MIN, |o| o.saturating_add(lo)),
                        off.map_or(i64::MAX, |o| o.saturating_add(hi)),
                        t.rank,
                        peer.size
                    ),
                ))
            }
        }
    }

    /// Fails unless the origin's `bytes` fill the target datatype exactly.
    fn check_sizes(call: &str, what: &str, bytes: usize, shape: &Shape) -> Result<()> {
        if bytes as u64 == shape.bytes() {
            return Ok(());
        }
        Err(MpiError::new(
            c::MPI_ERR_TYPE,
            format!(
                "{call}: the {what} holds {bytes} bytes but the target count and datatype hold {} (the type \
                 signatures must match)",
                shape.bytes()
            ),
        ))
    }

    /// Sends request `msg` to `rank`, after the lock request if this is the epoch's first.
    fn send_ask(&self, mpi: &Mpi, a: &mut Access, rank: i32, msg: Vec<u8>) {
        let to = self.comm.proc_of(rank);
        let (ctx, me) = (self.comm.ctx, self.comm.rank);
        let lock = &mut a.owed[rank as usize].lock;
        let first = match *lock {
            Lock::Wanted { exclusive } => {
                *lock = Lock::Asked { exclusive };
                Some(Ask::Lock { exclusive, notify: false, id: 0 }.encode(&[]))
            }
            _ => None,
        };
        mpi.with_engine(|e, n| {
            for m in first.into_iter().chain(std::iter::once(msg)) {
                let id = e.send(n, to, ctx, me, 0, SendData::Packed(m), false, Sender::GoesOn);
                e.release(id);
            }
        });
    }

    /// Posts the receive of the answer to a request under a fresh tag, then sends the request
    /// `make(tag)`.
    fn ask_with_answer(
        &self,
        mpi: &Mpi,
        a: &mut Access,
        rank: i32,
        sink: Sink,
        make: impl FnOnce(i32) -> Vec<u8>,
    ) -> ReqId {
        let id = a.next_id();
        let reply_ctx = self.exposure.reply_ctx;
        let rid = mpi.with_engine(|e, n| e.recv(n, reply_ctx, rank, id, sink));
        self.send_ask(mpi, a, rank, make(id));
        rid
    }

    /// `MPI_Put`: `data` is the origin buffer, packed.
    pub fn put(&self, mpi: &Mpi, call: &str, t: Target, data: &[u8]) -> Result<()> {
        let (off, shape) = self.locate(call, &t)?;
        Self::check_sizes(call, "origin buffer", data.len(), &shape)?;
        if let Some(d) = &self.direct {
            self.check_epoch_direct(call, t.rank)?;
            d.put(t.rank, off, &shape, data);
            return Ok(());
        }
        let mut a = self.access();
        a.check_epoch(call, t.rank)?;
        let msg = Ask::Put { off, shape }.encode(data);
        self.send_ask(mpi, &mut a, t.rank, msg);
        a.owed[t.rank as usize].dirty = true;
        Ok(())
    }

    /// `MPI_Get`: the bytes arrive in `sink` (the origin buffer). With `request`, the receive is
    /// returned for the application to complete (`MPI_Rget`).
    pub fn get(&self, mpi: &Mpi, call: &str, t: Target, mut sink: Sink, request: bool) -> Result<Option<ReqId>> {
        let (off, shape) = self.locate(call, &t)?;
        Self::check_sizes(call, "origin buffer", sink.capacity(), &shape)?;
        if let Some(d) = &self.direct {
            self.check_epoch_direct(call, t.rank)?;
            match &sink {
                Sink::Contig(dst) => d.get_into(t.rank, off, &shape, dst),
                _ => {
                    let mut v = vec![0u8; shape.bytes() as usize];
                    d.get(t.rank, off, &shape, &mut v);
                    sink.write(0, &v);
                }
            }
            return Ok(request.then(|| done(mpi)));
        }
        let mut a = self.access();
        a.check_epoch(call, t.rank)?;
        let rid = self.ask_with_answer(mpi, &mut a, t.rank, sink, |id| Ask::Get { id, off, shape }.encode(&[]));
        Ok(self.owe(&mut a, t.rank, rid, request))
    }

    fn owe(&self, a: &mut Access, rank: i32, rid: ReqId, request: bool) -> Option<ReqId> {
        let o = &mut a.owed[rank as usize];
        if request {
            o.requests.push(rid);
            Some(rid)
        } else {
            o.fetches.push(rid);
            None
        }
    }

    /// `MPI_Accumulate`: combines packed `data` into the target with `op` over elements of
    /// predefined datatype `basic`.
    pub fn accumulate(&self, mpi: &Mpi, call: &str, t: Target, op: Op, basic: usize, data: &[u8]) -> Result<()> {
        let (off, shape) = self.locate(call, &t)?;
        Self::check_sizes(call, "origin buffer", data.len(), &shape)?;
        if let Some(d) = &self.direct {
            self.check_epoch_direct(call, t.rank)?;
            let width = element_size(basic, t.layout);
            d.accumulate(t.rank, off, &shape, Combine { op, basic, width, data }, None);
            return Ok(());
        }
        let mut a = self.access();
        a.check_epoch(call, t.rank)?;
        let msg = Ask::Acc { op: op_code(op), basic: basic as u32, off, shape }.encode(data);
        self.send_ask(mpi, &mut a, t.rank, msg);
        a.owed[t.rank as usize].dirty = true;
        Ok(())
    }

    /// `MPI_Get_accumulate` (and `MPI_Fetch_and_op`): the target's bytes as they were arrive in
    /// `sink` (the result buffer); `data` (empty for `MPI_NO_OP`) is combined in.
    #[allow(clippy::too_many_arguments)]
    pub fn get_accumulate(
        &self,
        mpi: &Mpi,
        call: &str,
        t: Target,
        op: Op,
        basic: usize,
        data: &[u8],
        sink: Sink,
        request: bool,
    ) -> Result<Option<ReqId>> {
        let (off, shape) = self.locate(call, &t)?;
        if op != Op::NoOp {
            Self::check_sizes(call, "origin buffer", data.len(), &shape)?;
        }
        Self::check_sizes(call, "result buffer", sink.capacity(), &shape)?;
        let data = if op == Op::NoOp { &[][..] } else { data };
        if let Some(d) = &self.direct {
            self.check_epoch_direct(call, t.rank)?;
            let mut sink = sink;
            let n = shape.bytes() as usize;
            let width = element_size(basic, t.layout);
            // A single element (MPI_Fetch_and_op's case) needs no allocation.
            let mut small = [0u8; 32];
            let mut big = Vec::new();
            let old = if n <= small.len() {
                &mut small[..n]
            } else {
                big.resize(n, 0);
                &mut big[..]
            };
            d.accumulate(t.rank, off, &shape, Combine { op, basic, width, data }, Some(&mut *old));
            sink.write(0, old);
            return Ok(request.then(|| done(mpi)));
        }
        let mut a = self.access();
        a.check_epoch(call, t.rank)?;
        let rid = self.ask_with_answer(mpi, &mut a, t.rank, sink, |id| {
            Ask::GetAcc { id, op: op_code(op), basic: basic as u32, off, shape }.encode(data)
        });
        // The answer leaves the target after the update: once it has landed, the operation is
        // complete there, and a flush needs no round trip of its own for it.
        Ok(self.owe(&mut a, t.rank, rid, request))
    }

    /// `MPI_Compare_and_swap` on one element of `layout` (predefined): `data` is the origin
    /// element then the compare element.
    pub fn compare_and_swap(&self, mpi: &Mpi, call: &str, t: Target, data: &[u8], sink: Sink) -> Result<()> {
        let (off, shape) = self.locate(call, &t)?;
        let len = t.layout.size;
        debug_assert_eq!(shape.bytes() as usize, len);
        if let Some(d) = &self.direct {
            self.check_epoch_direct(call, t.rank)?;
            let mut sink = sink;
            let mut old = vec![0u8; len];
            d.compare_and_swap(t.rank, off, len, &data[..len], &data[len..], &mut old);
            sink.write(0, &old);
            return Ok(());
        }
        let mut a = self.access();
        a.check_epoch(call, t.rank)?;
        let rid =
            self.ask_with_answer(mpi, &mut a, t.rank, sink, |id| Ask::Cas { id, len: len as u32, off }.encode(data));
        self.owe(&mut a, t.rank, rid, false);
        Ok(())
    }
}
