//! The target side of a window: [`Exposure`], the service that carries out what origins ask of
//! this process's window memory, at every progress pass.
//!
//! Requests from one origin are carried out in the order they were sent (each origin has its
//! own queue), which gives the standard's default ordering of accumulates and makes a lock
//! request hold back that origin's later operations until it is granted, while other origins go
//! on. A request arrives whole before it is carried out, so every accumulate is atomic with
//! respect to every other: they all run here, one at a time, under the engine's lock.

use super::wire::{Ask, Shape};
use super::{op_from_code, Memory};
use crate::engine::{Engine, Net, ProcIdx, ReqId, SendData, Sender, Sink, ANY_SOURCE, ANY_TAG};
use crate::progress::Service;
use baton_transport::frame::Kind;
use baton_transport::mem::UserBuf;
use baton_transport::region::Region;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// The target side of one window in this process.
pub struct Exposure {
    /// The window's request context (requests arrive here) and reply context (answers go there).
    pub(super) ctx: u64,
    pub(super) reply_ctx: u64,
    /// This process's rank in the window, and the process of every rank.
    pub(super) me: i32,
    pub(super) procs: Vec<ProcIdx>,
    /// The window's name for messages.
    pub(super) name: String,
    pub(super) served: Mutex<Served>,
    /// Requests queued in `served` (read without its lock: a pass with none and no unexpected
    /// message at all returns at once).
    queued: std::sync::atomic::AtomicUsize,
    /// Whether origins send requests here at all: not where every member reaches the window's
    /// memory directly ([`super::direct`]).
    pub(super) by_request: std::sync::atomic::AtomicBool,
}

/// What the service keeps between passes.
pub struct Served {
    pub memory: Memory,
    /// The mapping `memory` lies in, when Baton allocated it: kept as long as anything may
    /// still serve a request into it.
    _keep: Option<Arc<Region>>,
    /// Requests of each origin rank, oldest first.
    queues: Vec<VecDeque<Incoming>>,
    /// Requests queued over all origins (a pass with none returns at once).
    queued: usize,
    pub lock: LockTable,
    /// `Complete` requests carried out so far and not yet counted by `MPI_Win_wait`.
    pub completes: usize,
}

/// A request as it reaches the target: whole (an eager message's bytes, or a rendezvous one's
/// once arrived), or still arriving (its receive).
enum Incoming {
    Whole(Vec<u8>),
    Arriving(ReqId),
}

/// Who holds this window's lock (passive target).
#[derive(Default)]
pub struct LockTable {
    /// Per origin rank: 0 none, 1 shared, 2 exclusive.
    held: Vec<u8>,
    shared: usize,
    exclusive: bool,
}

impl LockTable {
    fn grant(&mut self, origin: usize, exclusive: bool) -> bool {
        if self.exclusive || (exclusive && self.shared > 0) {
            return false;
        }
        if exclusive {
            self.exclusive = true;
        } else {
            self.shared += 1;
        }
        self.held[origin] = 1 + exclusive as u8;
        true
    }

    fn release(&mut self, origin: usize) {
        match std::mem::take(&mut self.held[origin]) {
            1 => self.shared -= 1,
            2 => self.exclusive = false,
            _ => {}
        }
    }
}

/// What carrying out a request came to.
enum Outcome {
    Done,
    /// A lock that cannot be granted yet: the request stays first in its origin's queue.
    Blocked,
}

impl Exposure {
    pub(super) fn new(
        ctx: u64,
        reply_ctx: u64,
        me: i32,
        procs: Vec<ProcIdx>,
        name: String,
        memory: Memory,
        keep: Option<Arc<Region>>,
    ) -> Self {
        let n = procs.len();
        Exposure {
            ctx,
            reply_ctx,
            me,
            procs,
            name,
            queued: std::sync::atomic::AtomicUsize::new(0),
            by_request: std::sync::atomic::AtomicBool::new(true),
            served: Mutex::new(Served {
                memory,
                _keep: keep,
                queues: (0..n).map(|_| VecDeque::new()).collect(),
                queued: 0,
                lock: LockTable { held: vec![0; n], ..Default::default() },
                completes: 0,
            }),
        }
    }

    pub fn served(&self) -> MutexGuard<'_, Served> {
        self.served.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `data` to origin rank `to` under reply tag `id`.
    fn reply(&self, engine: &mut Engine, net: &mut dyn Net, to: usize, id: i32, data: Vec<u8>) {
        let r = engine.send(
            net,
            self.procs[to],
            self.reply_ctx,
            self.me,
            id,
            SendData::Packed(data),
            false,
            Sender::GoesOn,
        );
        engine.release(r);
    }

    /// The memory an operation at `off` with `shape` touches, and where its address lies in it;
    /// None (after a message) when any of it lies outside the window.
    fn resolve(&self, s: &Served, what: &str, origin: usize, off: i64, shape: &Shape) -> Option<(UserBuf, i64)> {
        let Some((lo, hi)) = shape.range() else { return Some((UserBuf::empty(), 0)) };
        let found = match &s.memory {
            Memory::Span(b) => {
                (off.checked_add(lo)? >= 0 && off.checked_add(hi)? <= b.len() as i64).then_some((*b, off))
            }
            Memory::Dynamic(regions) => regions.iter().find_map(|r| {
                let start = r.addr() as i64;
                let rel = off.checked_sub(start)?;
                (rel.checked_add(lo)? >= 0 && rel.checked_add(hi)? <= r.len() as i64).then_some((*r, rel))
            }),
        };
        if found.is_none() {
            // The origin checks what it can (every window but a dynamic one) before sending: this
            // is the last guard, which writes nothing and says why.
            eprintln!(
                "baton: {what} from rank {origin} to {}: bytes [{}, {}) at target offset or address {off} lie \
                 outside the window's memory (nothing was written)",
                self.name,
                off.saturating_add(lo),
                off.saturating_add(hi)
            );
        }
        found
    }

    /// Carries out one request from `origin`.
    fn execute(&self, s: &mut Served, engine: &mut Engine, net: &mut dyn Net, origin: usize, msg: &[u8]) -> Outcome {
        let Some((ask, data)) = Ask::decode(msg) else {
            eprintln!("baton: {}: a malformed one-sided request from rank {origin} was dropped", self.name);
            return Outcome::Done;
        };
        match ask {
            Ask::Put { off, shape } => {
                if let Some((mem, at)) = self.resolve(s, "MPI_Put", origin, off, &shape) {
                    let mut done = 0;
                    for (o, n) in shape.blocks() {
                        mem.write((at + o) as usize, &data[done.min(data.len())..(done + n).min(data.len())]);
                        done += n;
                    }
                }
            }
            Ask::Get { id, off, shape } => {
                let mut out = vec![0u8; shape.bytes() as usize];
                if let Some((mem, at)) = self.resolve(s, "MPI_Get", origin, off, &shape) {
                    gather(&mem, at, &shape, &mut out);
                }
                self.reply(engine, net, origin, id, out);
            }
            Ask::Acc { op, basic, off, shape } => {
                if let Some((mem, at)) = self.resolve(s, "MPI_Accumulate", origin, off, &shape) {
                    combine(&mem, at, &shape, op, basic, data);
                }
            }
            Ask::GetAcc { id, op, basic, off, shape } => {
                let mut out = vec![0u8; shape.bytes() as usize];
                if let Some((mem, at)) = self.resolve(s, "MPI_Get_accumulate", origin, off, &shape) {
                    gather(&mem, at, &shape, &mut out);
                    combine(&mem, at, &shape, op, basic, data);
                }
                self.reply(engine, net, origin, id, out);
            }
            Ask::Cas { id, len, off } => {
                let len = len as usize;
                let shape = Shape::contiguous(len);
                let mut old = vec![0u8; len];
                if let Some((mem, at)) = self.resolve(s, "MPI_Compare_and_swap", origin, off, &shape) {
                    if data.len() == 2 * len {
                        mem.modify(at as usize, len, |cur| {
                            old.copy_from_slice(cur);
                            if cur == &data[len..] {
                                cur.copy_from_slice(&data[..len]);
                            }
                        });
                    }
                }
                self.reply(engine, net, origin, id, old);
            }
            Ask::Lock { exclusive, notify, id } => {
                if !s.lock.grant(origin, exclusive) {
                    return Outcome::Blocked;
                }
                if notify {
                    self.reply(engine, net, origin, id, Vec::new());
                }
            }
            Ask::Unlock { id } => {
                s.lock.release(origin);
                self.reply(engine, net, origin, id, Vec::new());
            }
            Ask::Flush { id } => self.reply(engine, net, origin, id, Vec::new()),
            Ask::Complete => s.completes += 1,
        }
        Outcome::Done
    }
}

/// Copies the bytes `shape` describes at `at` in `mem` into `out`, in packed order.
fn gather(mem: &UserBuf, at: i64, shape: &Shape, out: &mut [u8]) {
    let mut done = 0;
    for (o, n) in shape.blocks() {
        let src = mem.read((at + o) as usize, n);
        out[done..done + src.len()].copy_from_slice(src);
        done += n;
    }
}

/// `target = data op target` over the bytes `shape` describes at `at` in `mem`, combined as a
/// packed stream (an element may span blocks: `MPI_SHORT_INT` has a gap).
fn combine(mem: &UserBuf, at: i64, shape: &Shape, op: u8, basic: u32, data: &[u8]) {
    let Some(op) = op_from_code(op) else { return };
    let mut cur = vec![0u8; shape.bytes() as usize];
    if data.len() != cur.len() {
        return;
    }
    gather(mem, at, shape, &mut cur);
    crate::op::apply(op, basic as usize, data, &mut cur);
    let mut done = 0;
    for (o, n) in shape.blocks() {
        mem.write((at + o) as usize, &cur[done..done + n]);
        done += n;
    }
}

impl Service for Exposure {
    fn needs_progress(&self) -> bool {
        self.by_request.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn serve(&self, engine: &mut Engine, net: &mut dyn Net) {
        use std::sync::atomic::Ordering::Relaxed;
        if engine.unexpected_len() == 0 && self.queued.load(Relaxed) == 0 {
            return;
        }
        let mut s = self.served();
        while let Some(u) = engine.mprobe(self.ctx, ANY_SOURCE, ANY_TAG) {
            let from = u.h.src as usize;
            if from >= s.queues.len() {
                // Not a member's request: receive it to let the sender go on, and drop it.
                let id = engine.mrecv(net, u, Sink::Owned(Vec::new()));
                engine.release(id);
                continue;
            }
            // An eager message is whole already: its bytes are taken as they are.
            let item = if u.h.kind == Kind::Eager {
                Incoming::Whole(u.data)
            } else {
                let len = u.h.len as usize;
                Incoming::Arriving(engine.mrecv(net, u, Sink::Owned(vec![0; len])))
            };
            s.queues[from].push_back(item);
            s.queued += 1;
        }
        if s.queued == 0 {
            return;
        }
        for origin in 0..s.queues.len() {
            while let Some(front) = s.queues[origin].front_mut() {
                if let Incoming::Arriving(id) = *front {
                    match engine.get_mut(id) {
                        Some(r) if !r.complete => break,
                        Some(r) => {
                            let msg = r.owned.take().unwrap_or_default();
                            engine.release(id);
                            *front = Incoming::Whole(msg);
                        }
                        None => *front = Incoming::Whole(Vec::new()),
                    }
                }
                let Some(Incoming::Whole(msg)) = s.queues[origin].pop_front() else { break };
                if let Outcome::Blocked = self.execute(&mut s, engine, net, origin, &msg) {
                    s.queues[origin].push_front(Incoming::Whole(msg));
                    break;
                }
                s.queued -= 1;
            }
        }
        self.queued.store(s.queued, Relaxed);
    }
}
