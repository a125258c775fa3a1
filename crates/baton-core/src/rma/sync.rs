//! The window's synchronization calls: fence, post/start/complete/wait, locks and flushes.
//!
//! Completion at a target rests on one rule of the target's service: requests from one origin
//! are carried out in order. So a `Flush` (or `Unlock`) request answered means every request
//! sent before it is done there, and a `Complete` counted means the same for that origin's
//! epoch. A fence completes the operations of this process, then meets the others in a barrier:
//! once every member has passed it, all operations of the epoch are done everywhere.

use super::origin::{Access, Lock};
use super::wire::Ask;
use super::Window;
use crate::engine::{ReqId, SendData, Sender, Sink};
use crate::error::{MpiError, Result};
use crate::progress::{EngineAccess, Progress};
use crate::runtime::Mpi;
use baton_abi::consts as c;

/// Takes rank `rank`'s lock in a shared-memory window, letting communication move meanwhile
/// (the holder may wait for a message from this process before it unlocks).
fn acquire(mpi: &Mpi, d: &super::Direct, rank: i32, exclusive: bool) {
    let mut tries = 0u32;
    while !d.try_lock(rank, exclusive) {
        tries += 1;
        if tries.is_multiple_of(16) {
            mpi.poll();
        }
        std::thread::yield_now();
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
        self.access().fence = assert & c::MPI_MODE_NOSUCCEED == 0;
    }

    /// `MPI_Win_start`: an access epoch to `group` (ranks of the window), once each has posted.
    pub fn start(&self, mpi: &Mpi, call: &str, group: Vec<i32>, assert: i32) -> Result<()> {
        let mut a = self.access();
        if a.started.is_some() {
            return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: an MPI_Win_start epoch is already open")));
        }
        if assert & c::MPI_MODE_NOCHECK == 0 {
            for &r in &group {
                let reply_ctx = self.exposure.reply_ctx;
                mpi.recv_ctx(reply_ctx, r, TAG_POST);
            }
        }
        a.started = Some(group);
        Ok(())
    }

    /// `MPI_Win_complete`.
    pub fn complete(&self, mpi: &Mpi, call: &str) -> Result<()> {
        let mut a = self.access();
        let Some(group) = a.started.take() else {
            return Err(MpiError::new(c::MPI_ERR_RMA_SYNC, format!("{call}: no MPI_Win_start epoch is open")));
        };
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
        let mut a = self.access();
        if a.lock_all || a.owed[rank as usize].lock != Lock::None {
            return Err(MpiError::new(
                c::MPI_ERR_RMA_SYNC,
                format!("{call}: this process already holds a lock on rank {rank} of the window"),
            ));
        }
        if assert & c::MPI_MODE_NOCHECK != 0 {
            a.owed[rank as usize].lock = Lock::NoCheck;
        } else if let Some(d) = &self.direct {
            acquire(mpi, d, rank, exclusive);
            a.owed[rank as usize].lock = Lock::Asked { exclusive };
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
        if let Some(d) = &self.direct {
            // Releasing the lock word publishes this process's stores to the target's memory.
            if let Lock::Asked { exclusive } = a.owed[rank as usize].lock {
                d.unlock(rank, exclusive);
            }
            a.owed[rank as usize].lock = Lock::None;
            return;
        }
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
        let mut a = self.access();
        if a.lock_all || a.owed[rank as usize].lock == Lock::None {
            return Err(MpiError::new(
                c::MPI_ERR_RMA_SYNC,
                format!("{call}: this process holds no lock on rank {rank} of the window (MPI_Win_lock first)"),
            ));
        }
        self.release(mpi, &mut a, rank);
        Ok(())
    }

    /// `MPI_Win_lock_all`: a shared lock on every member, each asked for at the first operation.
    pub fn lock_all(&self, mpi: &Mpi, call: &str, assert: i32) -> Result<()> {
        let mut a = self.access();
        if a.lock_all || a.owed.iter().any(|o| o.lock != Lock::None) {
            return Err(MpiError::new(
                c::MPI_ERR_RMA_SYNC,
                format!("{call}: this process already holds a lock on the window"),
            ));
        }
        let lock = match (&self.direct, assert & c::MPI_MODE_NOCHECK != 0) {
            (_, true) => Lock::NoCheck,
            (Some(d), false) => {
                for r in 0..self.peers.len() as i32 {
                    acquire(mpi, d, r, false);
                }
                Lock::Asked { exclusive: false }
            }
            (None, false) => Lock::Wanted { exclusive: false },
        };
        a.owed.iter_mut().for_each(|o| o.lock = lock);
        a.lock_all = true;
        Ok(())
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(&self, mpi: &Mpi, call: &str) -> Result<()> {
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
        let whom = rank.map_or("any rank".to_string(), |r| format!("rank {r}"));
        Err(MpiError::new(
            c::MPI_ERR_RMA_SYNC,
            format!(
                "{call}: only valid in a passive-target epoch, and this process holds no lock on {whom} of the window"
            ),
        ))
    }

    /// `MPI_Win_flush` and `MPI_Win_flush_local` (`remote` false): one target, or all (`None`).
    pub fn flush(&self, mpi: &Mpi, call: &str, rank: Option<i32>, remote: bool) -> Result<()> {
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
    /// operations of others, and lets requests waiting for this process be served.
    pub fn sync(&self, mpi: &Mpi) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        mpi.poll();
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}
