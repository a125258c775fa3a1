//! Shared-memory collectives: barrier, bcast, reduce, allreduce, allgather and alltoall through
//! flags and buffers in the job's segment, with no messages at all.
//!
//! Every process has a slot in the segment's collective area ([`CollSlot`]): [`COLL_POSTS`]
//! post lines (a sequence number and up to 56 bytes of data) and two data buffers. The
//! shared-memory collectives of a communicator are numbered 1, 2, 3, ... in call order (the
//! same on every member); collective `seq` uses post line `seq % COLL_POSTS` and, for data
//! that does not fit the line, buffer `seq % 2`. A process
//! - writes its data (into the post line when it fits, else into the buffer), then publishes
//!   `post[seq % COLL_POSTS] = seq` (release): that is its arrival;
//! - reads what it needs (every contribution for allreduce and allgather, its own block of every
//!   process's row for alltoall, the root's data for bcast) once the writers' post lines say `seq`;
//! - arrives at `seq` only after finishing `seq - 1` (nonblocking collectives included);
//! - before writing data into a buffer, waits until every member has arrived at `seq - 1`: a
//!   member arrives there only after finishing `seq - 2`, the last collective that could read
//!   that buffer; before writing data into its post line, until every member has arrived at
//!   `seq - COLL_POSTS + 1`, after the line's last use. For allreduce, allgather, alltoall and
//!   barrier this holds already (this process saw every arrival at `seq - 1`), so they never
//!   wait for it; a bcast root or a reduce contributor with small data may run up to
//!   `COLL_POSTS - 1` collectives ahead of the others, which is what lets a loop of them
//!   proceed without a context switch per call when ranks share cores.
//!
//! So a small allreduce costs each process one cache-line transfer per peer (its post line,
//! number and data together) and no "done" flag at all, where separate arrive, done and data
//! lines would cost three.
//!
//! Allreduce has every process combine all contributions itself, in rank order, straight from
//! the segment: for the small messages this serves, reading n cache-resident vectors is cheaper
//! than any exchange, and a non-commutative operation comes out in the right order for free.
//!
//! Allgather and alltoall pay off most with more ranks than cores: every process writes all it
//! sends at once and reads all it receives after the last arrival, so each is scheduled about
//! once per collective, where message-based algorithms need a turn per round or per message.
//!
//! Areas: every process has [`COLL_AREAS`] slots, one per area. The world uses area 0 from
//! `MPI_Init`. Another intracommunicator of the job's processes gets an area at its first
//! blocking barrier, bcast, reduce, allreduce, allgather or alltoall (the same call at every
//! member, since members call collectives in the same order): the members exchange which areas each has free and the
//! last sequence number each used in them ([`crate::runtime::Mpi::attach_shm`]), take the lowest area free at
//! all, and number their collectives from above every member's last number, so that a post line
//! left from the area's previous communicator never reads as an arrival. `MPI_Comm_free` gives
//! the area back ([`crate::runtime::Mpi::detach_shm`]) after an exchange that shows every member done with all
//! its collectives there; if one is not (a nonblocking collective still pending), the area stays
//! taken. A process with `MPI_THREAD_MULTIPLE` offers no free area (two of its threads could
//! agree on the same area for two communicators at once), so its communicators other than the
//! world use point-to-point algorithms; it still takes part in the exchange, since its peers
//! may run at another thread level.

use crate::op::Reducer;
use crate::progress::Progress;
pub use baton_transport::shm::COLL_AREAS;
use baton_transport::shm::{CollSlot, Segment, COLL_DATA, COLL_INLINE, COLL_POSTS};
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
    area: usize,
    /// The first sequence number of this communicator in its area.
    first: u64,
    next: AtomicU64,
    /// The last collective whose data this process published, and the last it finished.
    started: AtomicU64,
    finished: AtomicU64,
}

/// Which collective a shared-memory step performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmKind {
    Barrier,
    Bcast {
        root: usize,
    },
    Reduce {
        root: usize,
    },
    Allreduce,
    /// Every process writes its block; every process reads all blocks.
    Allgather,
    /// Every process writes one block per rank, in rank order; rank r reads block r of each.
    Alltoall,
}

impl ShmColl {
    /// The collectives of a communicator whose rank r has segment slot `slots[r]` (this
    /// process rank `me`) in area `area`, numbered from `first` (at least 1).
    pub fn new(seg: Arc<Segment>, slots: Vec<usize>, me: usize, area: usize, first: u64) -> ShmColl {
        ShmColl {
            seg,
            slots,
            me,
            area,
            first,
            next: AtomicU64::new(first),
            started: AtomicU64::new(first - 1),
            finished: AtomicU64::new(first - 1),
        }
    }

    pub fn segment(&self) -> &Arc<Segment> {
        &self.seg
    }

    pub fn area(&self) -> usize {
        self.area
    }

    /// The last sequence number handed out.
    pub fn last_seq(&self) -> u64 {
        self.next.load(Ordering::Acquire) - 1
    }

    /// Whether every collective numbered so far has finished here.
    pub fn idle(&self) -> bool {
        self.finished.load(Ordering::Acquire) == self.last_seq()
    }

    pub fn size(&self) -> usize {
        self.slots.len()
    }

    /// Numbers the next shared-memory collective (called when it starts, in call order).
    pub fn next_seq(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The post line of collective `seq`.
    fn line(&self, seq: u64) -> usize {
        (seq % COLL_POSTS as u64) as usize
    }

    fn slot(&self, rank: usize) -> CollSlot<'_> {
        self.seg.coll_slot(self.slots[rank], self.area)
    }

    fn wake_others(&self) {
        for (r, &s) in self.slots.iter().enumerate() {
            if r != self.me {
                self.seg.wake(s);
            }
        }
    }

    fn writes(&self, kind: ShmKind) -> bool {
        match kind {
            ShmKind::Barrier => false,
            ShmKind::Bcast { root } => root == self.me,
            ShmKind::Reduce { .. } | ShmKind::Allreduce | ShmKind::Allgather | ShmKind::Alltoall => true,
        }
    }

    /// Whether rank `r` has arrived at collective `seq` (or a later one on the same line).
    fn arrived(&self, r: usize, seq: u64) -> bool {
        self.slot(r).post(self.line(seq)).load(Ordering::Acquire) >= seq
    }

    /// The bytes a process publishes for `kind` with blocks of `len` bytes (a block per rank
    /// for alltoall, one otherwise).
    pub fn published(&self, kind: ShmKind, len: usize) -> usize {
        match kind {
            ShmKind::Alltoall => len * self.size(),
            _ => len,
        }
    }

    /// Whether collective `seq` may publish its data (`bytes` in all) now.
    pub fn can_start(&self, kind: ShmKind, seq: u64, bytes: usize) -> bool {
        // A process arrives at `seq` only once it has finished `seq - 1` (not merely started it,
        // as nonblocking collectives could): that is what lets an arrival stand for "done with
        // everything before", so no separate done flag is needed.
        if self.started.load(Ordering::Acquire) != seq - 1 || self.finished.load(Ordering::Acquire) != seq - 1 {
            return false;
        }
        // Writing needs every reader of the last collective that used the same place done with
        // it: `seq - 2` for a buffer, `seq - COLL_POSTS` for a post line. The first ones of this
        // communicator have no earlier reader of this area to wait for: the area's previous
        // communicator was freed only once all its members were done with it.
        let back = if bytes <= COLL_INLINE { COLL_POSTS as u64 - 1 } else { 1 };
        !self.writes(kind) || seq <= self.first + back || (0..self.size()).all(|r| self.arrived(r, seq - back))
    }

    /// Publishes this process's part of collective `seq` (`data`: its contribution, if any).
    pub fn start(&self, kind: ShmKind, seq: u64, data: Option<&[u8]>) {
        let mine = self.slot(self.me);
        if let (true, Some(d)) = (self.writes(kind), data) {
            if d.len() <= COLL_INLINE {
                mine.write_inline(self.line(seq), d);
            } else {
                mine.write((seq % 2) as usize, 0, d);
            }
        }
        // SeqCst: pairs with a sleeper's SeqCst registration (see `Segment::ring`).
        mine.post(self.line(seq)).store(seq, Ordering::SeqCst);
        self.started.store(seq, Ordering::Release);
        self.wake_others();
    }

    /// Whether collective `seq` has what it needs to finish here.
    pub fn can_finish(&self, kind: ShmKind, seq: u64) -> bool {
        if self.finished.load(Ordering::Acquire) != seq - 1 {
            return false;
        }
        let arrived = |r: usize| self.arrived(r, seq);
        match kind {
            ShmKind::Barrier | ShmKind::Allreduce | ShmKind::Allgather | ShmKind::Alltoall => {
                (0..self.size()).all(arrived)
            }
            ShmKind::Reduce { root } if root == self.me => (0..self.size()).all(arrived),
            ShmKind::Reduce { .. } => true,
            ShmKind::Bcast { root } => root == self.me || arrived(root),
        }
    }

    /// Rank `r`'s data for collective `seq` (valid once [`can_finish`](Self::can_finish)).
    pub fn data(&self, r: usize, seq: u64, len: usize) -> &[u8] {
        self.data_at(r, seq, len, 0, len)
    }

    /// Bytes `off..off + len` of the `total` bytes rank `r` published for collective `seq`
    /// (valid once [`can_finish`](Self::can_finish)); where they lie depends on `total`.
    pub fn data_at(&self, r: usize, seq: u64, total: usize, off: usize, len: usize) -> &[u8] {
        if total <= COLL_INLINE {
            &self.slot(r).read_inline(self.line(seq), total)[off..off + len]
        } else {
            self.slot(r).read((seq % 2) as usize, off, len)
        }
    }

    /// Rank `r`'s block of `len` bytes for this process in allgather or alltoall `seq` (valid
    /// once [`can_finish`](Self::can_finish)): all it published, or its block for this rank.
    pub fn block(&self, kind: ShmKind, r: usize, seq: u64, len: usize) -> &[u8] {
        match kind {
            ShmKind::Alltoall => self.data_at(r, seq, len * self.size(), self.me * len, len),
            _ => self.data(r, seq, len),
        }
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
    pub fn run_blocking(&self, mpi: &impl Progress, kind: ShmKind, data: Option<&[u8]>) -> u64 {
        let seq = self.next_seq();
        let bytes = data.map_or(0, <[u8]>::len);
        if !self.can_start(kind, seq, bytes) {
            mpi.block_until(|_| self.can_start(kind, seq, bytes).then_some(()));
        }
        self.start(kind, seq, data);
        if !self.can_finish(kind, seq) {
            mpi.block_until(|_| self.can_finish(kind, seq).then_some(()));
        }
        seq
    }

    /// Marks collective `seq` finished here. Nothing is published: the others learn it from
    /// this process's arrival at the next collective.
    pub fn finish(&self, seq: u64) {
        self.finished.store(seq, Ordering::Release);
    }
}
