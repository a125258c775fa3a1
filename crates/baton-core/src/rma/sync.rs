//! The window's synchronization calls: fence, post/start/complete/wait, locks and flushes.
//!
//! Completion at a target rests on one rule of the target's service: requests from one origin
//! are carried out in order. So a `Flush` (or `Unlock`) request answered means every request
//! sent before it is done there, and a `Complete` counted means the same for that origin's
//! epoch. A fence completes the operations of this process, then meets the others in a barrier:
//! once every member has passed it, all operations of the epoch are done everywhere.

use super::origin::{Access, Lock, HELD_EXCLUSIVE, HELD_NOCHECK, HELD_NONE, HELD_SHARED};
use super::wire::Ask;
use super::Window;
use crate::engine::{ReqId, SendData, Sender, Sink};
use crate::error::{MpiError, Result};
use crate::progress::{EngineAccess, Progress};
use crate::runtime::Mpi;
use baton_abi::consts as c;
use std::sync::atomic::Ordering::Relaxed;

/// Releases what `held` says this process holds of rank `rank`'s lock in a direct window
/// (releasing the lock word also publishes this process's stores to the target's memory).
fn release_direct(d: &super::Direct, rank: i32, held: u8) {
    match held {
        HELD_SHARED => d.unlock(rank, false),
        HELD_EXCLUSIVE => d.unlock(rank, true),
        _ => std::sync::atomic::fence(std::sync::atomic::Ordering::Release),
    }
}

fn already_locked(call: &str, rank: i32) -> MpiError {
    MpiError::new(
        c::MPI_ERR_RMA_SYNC,
        format!("{call}: this process already holds a lock on rank {rank} of the window"),
    )
}

fn not_locked(call: &str, rank: i32) -> MpiError {
    MpiError::new(
        c::MPI_ERR_RMA_SYNC,
        format!("{call}: this process holds no lock on rank {rank} of the window (MPI_Win_lock first)"),
    )
}

fn lock_all_held(call: &str) -> MpiError {
    MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: this process already holds a lock on the window"))
}

fn not_passive(call: &str, rank: Option<i32>) -> MpiError {
    let whom = rank.map_or("any rank".to_string(), |r| format!("rank {r}"));
    MpiError::new(
        c::MPI_ERR_RMA_SYNC,
        format!("{call}: only valid in a passive-target epoch, and this process holds no lock on {whom} of the window"),
    )
}

/// Takes rank `rank`'s lock in a shared-memory window.
fn acquire(mpi: &Mpi, d: &super::Direct, rank: i32, exclusive: bool) {
    spin_until(mpi, || d.try_lock(rank, exclusive));
}

/// Waits for what another process of a direct window does in shared memory, letting
/// communication move meanwhile (that process may wait for a message from this one first):
/// spinning briefly, then yielding the core between tries, and once the wait is long, sleeping
/// between them (up to 100 µs), so that a rank waiting for a slow peer leaves the cores to the
/// ranks that work, and never loops on `sched_yield` alone (which starves under load).
fn spin_until(mpi: &Mpi, mut ready: impl FnMut() -> bool) {
    let mut tries = 0u32;
    while !ready() {
        tries += 1;
        if tries < 64 {
            std::hint::spin_loop();
            continue;
        }
        if tries.is_multiple_of(16) {
            mpi.poll();
        }
        if tries < 4096 {
            std::thread::yield_now();
        } else {
            let us = ((tries - 4096) / 64).clamp(1, 100) as u64;
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }
}

/// The tag of post notices on the reply context.
const TAG_POST: i32 = 0;

impl Window {
    /// Sends `ask` (made from a fresh tag) to `rank` and waits for its answer.
    fn round_trip(&self, mpi: &Mpi, a: &mut Access, rank: i32, make: impl FnOnce(i32) -> Ask) {
        let id = a.next_id();
        let reply_ctx = self.exposure.reply_ctx;
        let to = self.comm.proc_of(rank);
        let (ctx, me) = (self.comm.ctx, self.comm.rank);
        let msg = make(id).encode(&[]);
        let rid = mpi.with_engine(|e, n| {
            let rid = e.recv(n, reply_ctx, rank, id, Sink::Owned(Vec::new()));
            let s = e.send(n, to, ctx, me, 0, SendData::Packed(msg), false, Sender::GoesOn);
            e.release(s);
            rid
        });
        mpi.wait(rid);
    }

    /// Waits until the fetches from `rank` have landed (releasing this process's own receives).
    fn land_fetches(&self, mpi: &Mpi, a: &mut Access, rank: usize) {
        let o = &mut a.owed[rank];
        if o.fetches.is_empty() && o.requests.is_empty() {
            return;
        }
        let (mine, theirs) = (std::mem::take(&mut o.fetches), std::mem::take(&mut o.requests));
        let done = |e: &crate::engine::Engine, id: &ReqId| e.get(*id).is_none_or(|r| r.complete);
        mpi.block_until(|e| (mine.iter().chain(&theirs).all(|id| done(e, id))).then_some(()));
        mpi.with_engine(|e, _| mine.iter().for_each(|&id| e.release(id)));
    }

    /// Completes every operation to `rank` at the target (`remote`) or only at this process.
    fn complete_to(&self, mpi: &Mpi, a: &mut Access, rank: i32, remote: bool) {
        if remote && a.owed[rank as usize].dirty && !matches!(a.owed[rank as usize].lock, Lock::Wanted { .. }) {
            self.round_trip(mpi, a, rank, |id| Ask::Flush { id });
            a.owed[rank as usize].dirty = false;
        }
        self.land_fetches(mpi, a, rank as usize);
    }

    /// `MPI_Win_fence`, before the barrier: completes this process's operations of the epoch
    /// at their targets (unless `MPI_MODE_NOPRECEDE` says there were none).
    pub fn fence_begin(&self, mpi: &Mpi, _call: &str, assert: i32) -> Result<()> {
        if self.direct.is_some() {
            // Nothing is owed: every operation was carried out in its call.
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            return Ok(());
        }
        let mut a = self.access();
        if assert & c::MPI_MODE_NOPRECEDE == 0 {
            for r in 0..self.peers.len() as i32 {
                self.complete_to(mpi, &mut a, r, true);
            }
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// `MPI_Win_fence`, after the barrier: every member's operations of the epoch are done; the
    /// next epoch opens unless `MPI_MODE_NOSUCCEED` says none follows.
    pub fn fence_end(&self, assert: i32) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let open = assert & c::MPI_MODE_NOSUCCEED == 0;
        if self.direct.is_some() {
            self.fast.fence.store(open, Relaxed);
        } else {
            self.access().fence = open;
        }
    }

    /// `MPI_Win_start`: an access epoch to `group` (ranks of the window), once each has posted.
    pub fn start(&self, mpi: &Mpi, call: &str, group: Vec<i32>, assert: i32) -> Result<()> {
        let mut a = self.access();
        if a.started.is_some() {
            return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: an MPI_Win_start epoch is already open")));
        }
        if assert & c::MPI_MODE_NOCHECK == 0 {
            if let Some(d) = &self.direct {
                let me = self.comm.rank;
                spin_until(mpi, || d.take(me, group.len(), false));
            } else {
                for &r in &group {
                    let reply_ctx = self.exposure.reply_ctx;
                    mpi.recv_ctx(reply_ctx, r, TAG_POST);
                }
            }
        }
        a.started = Some(group);
        self.fast.started.store(true, Relaxed);
        Ok(())
    }

    /// `MPI_Win_complete`.
    pub fn complete(&self, mpi: &Mpi, call: &str) -> Result<()> {
        let mut a = self.access();
        let Some(group) = a.started.take() else {
            return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: no MPI_Win_start epoch is open")));
        };
        self.fast.started.store(false, Relaxed);
        if let Some(d) = &self.direct {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            group.iter().for_each(|&r| d.notify(r, true));
            return Ok(());
        }
        for &r in &group {
            let to = self.comm.proc_of(r);
            let (ctx, me) = (self.comm.ctx, self.comm.rank);
            let msg = Ask::Complete.encode(&[]);
            mpi.with_engine(|e, n| {
                let s = e.send(n, to, ctx, me, 0, SendData::Packed(msg), false, Sender::GoesOn);
                e.release(s);
            });
            a.owed[r as usize].dirty = false;
            self.land_fetches(mpi, &mut a, r as usize);
        }
        Ok(())
    }

    /// `MPI_Win_post`: an exposure epoch to `group` (ranks of the window).
    pub fn post(&self, mpi: &Mpi, call: &str, group: Vec<i32>, assert: i32) -> Result<()> {
        let mut a = self.access();
        if a.posted.is_some() {
            return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: an MPI_Win_post epoch is already open")));
        }
        let reply_ctx = self.exposure.reply_ctx;
        let me = self.comm.rank;
        // With MPI_MODE_NOCHECK the matching starts carry it too and wait for no notice: one
        // sent anyway would be taken by a later epoch's start, too early.
        let notify = if assert & c::MPI_MODE_NOCHECK == 0 { &group[..] } else { &[] };
        if let Some(d) = &self.direct {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            notify.iter().for_each(|&r| d.notify(r, false));
            a.posted = Some(group.len());
            return Ok(());
        }
        for &r in notify {
            let to = self.comm.proc_of(r);
            mpi.with_engine(|e, n| {
                let s = e.send(n, to, reply_ctx, me, TAG_POST, SendData::Packed(Vec::new()), false, Sender::GoesOn);
                e.release(s);
            });
        }
        a.posted = Some(group.len());
        Ok(())
    }

    /// `MPI_Win_wait` (`block`) or `MPI_Win_test`: whether every origin of the exposure epoch
    /// has completed; the epoch ends when they have.
    pub fn wait(&self, mpi: &Mpi, call: &str, block: bool) -> Result<bool> {
        let mut a = self.access();
        let Some(n) = a.posted else {
            return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: no MPI_Win_post epoch is open")));
        };
        if let Some(d) = &self.direct {
            let me = self.comm.rank;
            let done = if block {
                spin_until(mpi, || d.take(me, n, true));
                true
            } else {
                mpi.poll();
                d.take(me, n, true)
            };
            if done {
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                a.posted = None;
            }
            return Ok(done);
        }
        let exp = &self.exposure;
        let done = if block {
            mpi.block_until(|_| (exp.served().completes >= n).then_some(()));
            true
        } else {
            mpi.poll();
            exp.served().completes >= n
        };
        if done {
            exp.served().completes -= n;
            a.posted = None;
        }
        Ok(done)
    }

    /// `MPI_Win_lock`.
    pub fn lock(&self, mpi: &Mpi, call: &str, exclusive: bool, rank: i32, assert: i32) -> Result<()> {
        if let Some(d) = &self.direct {
            let f = &self.fast;
            if f.lock_all.load(Relaxed) || f.locks[rank as usize].load(Relaxed) != HELD_NONE {
                return Err(already_locked(call, rank));
            }
            let held = if assert & c::MPI_MODE_NOCHECK != 0 {
                HELD_NOCHECK
            } else {
                acquire(mpi, d, rank, exclusive);
                if exclusive {
                    HELD_EXCLUSIVE
                } else {
                    HELD_SHARED
                }
            };
            f.locks[rank as usize].store(held, Relaxed);
            return Ok(());
        }
        let mut a = self.access();
        if a.lock_all || a.owed[rank as usize].lock != Lock::None {
            return Err(already_locked(call, rank));
        }
        if assert & c::MPI_MODE_NOCHECK != 0 {
            a.owed[rank as usize].lock = Lock::NoCheck;
        } else if rank == self.comm.rank {
            // The application may load and store its own window memory once this returns: the
            // lock must be held by then.
            self.round_trip(mpi, &mut a, rank, |id| Ask::Lock { exclusive, notify: true, id });
            a.owed[rank as usize].lock = Lock::Asked { exclusive };
        } else {
            a.owed[rank as usize].lock = Lock::Wanted { exclusive };
        }
        Ok(())
    }

    /// Ends the passive epoch to `rank`: its operations complete there, the lock is released.
    fn release(&self, mpi: &Mpi, a: &mut Access, rank: i32) {
        match a.owed[rank as usize].lock {
            Lock::Asked { .. } => {
                self.round_trip(mpi, a, rank, |id| Ask::Unlock { id });
                a.owed[rank as usize].dirty = false;
            }
            _ => self.complete_to(mpi, a, rank, true),
        }
        self.land_fetches(mpi, a, rank as usize);
        a.owed[rank as usize].lock = Lock::None;
    }

    /// `MPI_Win_unlock`.
    pub fn unlock(&self, mpi: &Mpi, call: &str, rank: i32) -> Result<()> {
        if let Some(d) = &self.direct {
            let f = &self.fast;
            let held = f.locks[rank as usize].load(Relaxed);
            if f.lock_all.load(Relaxed) || held == HELD_NONE {
                return Err(not_locked(call, rank));
            }
            release_direct(d, rank, held);
            f.locks[rank as usize].store(HELD_NONE, Relaxed);
            return Ok(());
        }
        let mut a = self.access();
        if a.lock_all || a.owed[rank as usize].lock == Lock::None {
            return Err(not_locked(call, rank));
        }
        self.release(mpi, &mut a, rank);
        Ok(())
    }

    /// `MPI_Win_lock_all`: a shared lock on every member, each asked for at the first operation.
    pub fn lock_all(&self, mpi: &Mpi, call: &str, assert: i32) -> Result<()> {
        let nocheck = assert & c::MPI_MODE_NOCHECK != 0;
        if let Some(d) = &self.direct {
            let f = &self.fast;
            if f.lock_all.load(Relaxed) || f.locks.iter().any(|l| l.load(Relaxed) != HELD_NONE) {
                return Err(lock_all_held(call));
            }
            for (r, l) in f.locks.iter().enumerate() {
                if !nocheck {
                    acquire(mpi, d, r as i32, false);
                }
                l.store(if nocheck { HELD_NOCHECK } else { HELD_SHARED }, Relaxed);
            }
            f.lock_all.store(true, Relaxed);
            return Ok(());
        }
        let mut a = self.access();
        if a.lock_all || a.owed.iter().any(|o| o.lock != Lock::None) {
            return Err(lock_all_held(call));
        }
        let lock = if nocheck { Lock::NoCheck } else { Lock::Wanted { exclusive: false } };
        a.owed.iter_mut().for_each(|o| o.lock = lock);
        a.lock_all = true;
        Ok(())
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(&self, mpi: &Mpi, call: &str) -> Result<()> {
        if let Some(d) = &self.direct {
            let f = &self.fast;
            if !f.lock_all.load(Relaxed) {
                return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: no MPI_Win_lock_all epoch is open")));
            }
            for (r, l) in f.locks.iter().enumerate() {
                release_direct(d, r as i32, l.load(Relaxed));
                l.store(HELD_NONE, Relaxed);
            }
            f.lock_all.store(false, Relaxed);
            return Ok(());
        }
        let mut a = self.access();
        if !a.lock_all {
            return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: no MPI_Win_lock_all epoch is open")));
        }
        for r in 0..self.peers.len() as i32 {
            self.release(mpi, &mut a, r);
        }
        a.lock_all = false;
        Ok(())
    }

    fn check_passive(&self, a: &Access, call: &str, rank: Option<i32>) -> Result<()> {
        let ok = match rank {
            Some(r) => a.owed[r as usize].lock != Lock::None,
            None => a.owed.iter().any(|o| o.lock != Lock::None),
        };
        if ok {
            return Ok(());
        }
        Err(not_passive(call, rank))
    }

    /// Fails while a direct window still has a passive epoch open (`MPI_Win_free`).
    pub(crate) fn check_closed_direct(&self, call: &str) -> Result<()> {
        let f = &self.fast;
        let what = if f.lock_all.load(Relaxed) {
            Some("an MPI_Win_lock_all epoch".to_string())
        } else {
            f.locks.iter().position(|l| l.load(Relaxed) != HELD_NONE).map(|r| format!("a lock on rank {r}"))
        };
        match what {
            Some(w) => Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: the window still has {w} open"))),
            None => Ok(()),
        }
    }

    /// `MPI_Win_flush` and `MPI_Win_flush_local` (`remote` false): one target, or all (`None`).
    pub fn flush(&self, mpi: &Mpi, call: &str, rank: Option<i32>, remote: bool) -> Result<()> {
        if self.direct.is_some() {
            // Every operation was carried out in its call: only the epoch is checked.
            let f = &self.fast;
            let held = |r: usize| f.locks[r].load(Relaxed) != HELD_NONE;
            let ok = match rank {
                Some(r) => held(r as usize),
                None => (0..f.locks.len()).any(held),
            };
            return if ok { Ok(()) } else { Err(not_passive(call, rank)) };
        }
        let mut a = self.access();
        self.check_passive(&a, call, rank)?;
        match rank {
            Some(r) => self.complete_to(mpi, &mut a, r, remote),
            None => {
                for r in 0..self.peers.len() as i32 {
                    if a.owed[r as usize].lock != Lock::None {
                        self.complete_to(mpi, &mut a, r, remote);
                    }
                }
            }
        }
        Ok(())
    }

    /// `MPI_Win_sync`: orders this process's loads and stores to its window memory with the
    /// operations of others, and (a window served by requests) lets those waiting for this
    /// process be served, so a target that polls its memory with `MPI_Win_sync` sees the puts.
    pub fn sync(&self, mpi: &Mpi) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // A direct window's operations need no service from this process.
        if self.direct.is_none() {
            mpi.poll();
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
    }
}
