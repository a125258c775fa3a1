//! Shared-memory collectives: barrier, bcast, reduce and allreduce through flags and buffers
//! in the job's segment, with no messages at all.
//!
//! Every process has a slot in the segment's collective area ([`CollSlot`]): an `arrive` and a
//! `done` word and two data buffers. The shared-memory collectives of a communicator are
//! numbered 1, 2, 3, ... in call order (the same on every member); collective `seq` uses data
//! buffer `seq % 2`. A process
//! - writes its data into its buffer, then publishes `arrive = seq` (release);
//! - reads what it needs (every contribution for allreduce, the root's data for bcast) once the
//!   writers' `arrive` words say `seq`, then publishes `done = seq`;
//! - before writing buffer `seq % 2` again, waits until every member's `done` reached `seq - 2`,
//!   the last collective that used it.
//!
//! Allreduce has every process combine all contributions itself, in rank order, straight from
//! the segment: for the small messages this serves, reading n cache-resident vectors is cheaper
//! than any exchange, and a non-commutative operation comes out in the right order for free.
//! Only a communicator spanning the whole segment (the world, today) has an area.

use super::Reducer;
use crate::runtime::Mpi;
use baton_transport::shm::{CollSlot, Segment, COLL_DATA};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The largest message the shared-memory collectives take.
pub const MAX_BYTES: usize = COLL_DATA;

/// A communicator's use of the collective area.
pub struct ShmColl {
    seg: Arc<Segment>,
    /// Segment slot of each rank of the communicator.
    slots: Vec<usize>,
    me: usize,
    next: AtomicU64,
    /// The last collective whose data this process published, and the last it finished.
    started: AtomicU64,
    finished: AtomicU64,
}

/// Which collective a shared-memory step performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmKind {
    Barrier,
    Bcast { root: usize },
    Reduce { root: usize },
    Allreduce,
}

impl ShmColl {
    pub fn new(seg: Arc<Segment>, slots: Vec<usize>, me: usize) -> ShmColl {
        ShmColl { seg, slots, me, next: AtomicU64::new(1), started: AtomicU64::new(0), finished: AtomicU64::new(0) }
    }

    pub fn size(&self) -> usize {
        self.slots.len()
    }

    /// Numbers the next shared-memory collective (called when it starts, in call order).
    pub fn next_seq(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn slot(&self, rank: usize) -> CollSlot<'_> {
        self.seg.coll_slot(self.slots[rank])
    }

    fn wake_others(&self) {
        for (r, &s) in self.slots.iter().enumerate() {
            if r != self.me {
                self.seg.ring(s);
            }
        }
    }

    fn writes(&self, kind: ShmKind) -> bool {
        match kind {
            ShmKind::Barrier => false,
            ShmKind::Bcast { root } => root == self.me,
            ShmKind::Reduce { .. } | ShmKind::Allreduce => true,
        }
    }

    /// Whether collective `seq` may publish its data now.
    pub fn can_start(&self, kind: ShmKind, seq: u64) -> bool {
        if self.started.load(Ordering::Acquire) != seq - 1 {
            return false;
        }
        !self.writes(kind) || seq < 3 || (0..self.size()).all(|r| self.slot(r).done.load(Ordering::Acquire) >= seq - 2)
    }

    /// Publishes this process's part of collective `seq` (`data`: its contribution, if any).
    pub fn start(&self, kind: ShmKind, seq: u64, data: Option<&[u8]>) {
        let mine = self.slot(self.me);
        if let (true, Some(d)) = (self.writes(kind), data) {
            mine.write((seq % 2) as usize, 0, d);
        }
        // SeqCst: pairs with a sleeper's SeqCst registration (see `Segment::ring`).
        mine.arrive.store(seq, Ordering::SeqCst);
        self.started.store(seq, Ordering::Release);
        self.wake_others();
    }

    /// Whether collective `seq` has what it needs to finish here.
    pub fn can_finish(&self, kind: ShmKind, seq: u64) -> bool {
        if self.finished.load(Ordering::Acquire) != seq - 1 {
            return false;
        }
        let arrived = |r: usize| self.slot(r).arrive.load(Ordering::Acquire) >= seq;
        match kind {
            ShmKind::Barrier | ShmKind::Allreduce => (0..self.size()).all(arrived),
            ShmKind::Reduce { root } if root == self.me => (0..self.size()).all(arrived),
            ShmKind::Reduce { .. } => true,
            ShmKind::Bcast { root } => root == self.me || arrived(root),
        }
    }

    /// Rank `r`'s data for collective `seq` (valid once [`can_finish`](Self::can_finish)).
    pub fn data(&self, r: usize, seq: u64, len: usize) -> &[u8] {
        self.slot(r).read((seq % 2) as usize, 0, len)
    }

    /// Combines every member's contribution to collective `seq` into `acc`, in rank order:
    /// right to left, each step's input the lower rank's.
    pub fn combine(&self, seq: u64, r: &Reducer, acc: &mut [u8]) {
        let n = self.size();
        acc.copy_from_slice(self.data(n - 1, seq, acc.len()));
        for k in (0..n - 1).rev() {
            r.apply(self.data(k, seq, acc.len()), acc);
        }
    }

    /// The first half of a blocking shared-memory collective run without a schedule (the fast
    /// path of blocking calls on contiguous data): numbers it, publishes `data` and waits until
    /// what it needs has arrived. The caller then reads (with [`data`](Self::data) or
    /// [`combine`](Self::combine)) and calls [`finish`](Self::finish).
    pub fn run_blocking(&self, mpi: &Mpi, kind: ShmKind, data: Option<&[u8]>) -> u64 {
        let seq = self.next_seq();
        if !self.can_start(kind, seq) {
            mpi.block(|_| self.can_start(kind, seq).then_some(()));
        }
        self.start(kind, seq, data);
        if !self.can_finish(kind, seq) {
            mpi.block(|_| self.can_finish(kind, seq).then_some(()));
        }
        seq
    }

    /// Marks collective `seq` finished here.
    pub fn finish(&self, seq: u64) {
        self.slot(self.me).done.store(seq, Ordering::SeqCst);
        self.finished.store(seq, Ordering::Release);
        self.wake_others();
    }
}
