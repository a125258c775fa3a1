//! Communicators as the engine sees them: a context id, a group, and this process's rank.
//! An intercommunicator adds a remote group: its point-to-point ranks name processes of the
//! remote group, while `rank` stays this process's rank in its own (local) group, which is the
//! source a receiver on the other side sees.
//!
//! Context ids are derived, not negotiated: a child's id is a hash of its parent's id, the
//! number of communicators the parent has created so far (every member creates them in the same
//! order, since creation is collective) and a discriminator (split color, group). Members thus
//! agree without a message, `Comm_dup` costs nothing on the wire, and 64 bits make collisions
//! negligible. Bit 0 separates point-to-point traffic (0) from the library's collective traffic
//! (1), so an application's `MPI_ANY_TAG` receive can never match a collective's message.

use crate::engine::ProcIdx;
use crate::group::Group;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct Comm {
    /// Context id for point-to-point; `ctx | 1` carries collective traffic.
    pub ctx: u64,
    /// The local group (the only group of an intracommunicator).
    pub group: Arc<Group>,
    /// This process's rank in the local group.
    pub rank: i32,
    /// The processes that ranks in sends and receives name: the group itself, or the remote
    /// group of an intercommunicator. Kept apart from `remote` so that the send path does not
    /// branch on the kind of communicator.
    peers: Arc<Group>,
    /// The remote group of an intercommunicator.
    pub remote: Option<Arc<Group>>,
    /// An intercommunicator's private intracommunicator over its local group, which carries
    /// the local halves of its collectives (and of its creation calls). Its messages cannot
    /// mix with the intercommunicator's, whose ranks name remote processes.
    pub local: Option<Arc<Comm>>,
    /// Communicators created from this one so far (the derivation counter).
    created: AtomicU64,
    /// Per (tag, group) counters for `Comm_create_group`, which only the group's members call.
    created_for_group: Mutex<HashMap<(i32, u64), u64>>,
    /// Blocking collective operations started on this communicator (tags for their messages).
    pub coll_seq: AtomicU64,
    /// Nonblocking and persistent collective operations initiated on this communicator, numbered
    /// apart from the blocking ones (see [`Comm::next_coll_tag`]).
    pub nb_coll_seq: AtomicU64,
    /// The shared-memory collective area, for a communicator that has one.
    pub shm: std::sync::OnceLock<Arc<crate::shm_coll::ShmColl>>,
    /// Whether [`Mpi::attach_shm`](crate::runtime::Mpi::attach_shm) has looked for an area.
    pub shm_checked: AtomicBool,
}

/// splitmix64 finalizer: a fast, well-mixed 64-bit hash step.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub fn hash_words(words: &[u64]) -> u64 {
    words.iter().fold(0x6261_746f_6e00_0000, |h, &w| mix(h ^ w))
}

impl Comm {
    pub fn new(ctx: u64, group: Arc<Group>, rank: i32) -> Comm {
        Comm {
            ctx: ctx & !1,
            peers: group.clone(),
            group,
            rank,
            remote: None,
            local: None,
            created: AtomicU64::new(0),
            created_for_group: Mutex::new(HashMap::new()),
            coll_seq: AtomicU64::new(0),
            nb_coll_seq: AtomicU64::new(0),
            shm: std::sync::OnceLock::new(),
            shm_checked: AtomicBool::new(false),
        }
    }

    /// An intercommunicator between `group` (where this process has rank `rank`) and
    /// `remote`, with context id `ctx`, which both sides must have agreed on. This is all the
    /// dynamic-process calls need once they know the remote processes and the context.
    pub fn new_inter(ctx: u64, group: Arc<Group>, rank: i32, remote: Arc<Group>) -> Comm {
        let ctx = ctx & !1;
        // Only this side's members use the local communicator, and they only send to one
        // another, so both sides may use the same id; it must not depend on process table
        // indices, which differ between members when the group spans jobs.
        let local = Comm::new(hash_words(&[ctx, 0x006c_6f63_616c]), group.clone(), rank);
        Comm {
            peers: remote.clone(),
            remote: Some(remote),
            local: Some(Arc::new(local)),
            ..Comm::new(ctx, group, rank)
        }
    }

    /// Size of the local group (what `MPI_Comm_size` reports).
    pub fn size(&self) -> i32 {
        self.group.size()
    }

    pub fn is_inter(&self) -> bool {
        self.remote.is_some()
    }

    /// How many ranks sends and receives may name: the remote group's size on an
    /// intercommunicator, else the size.
    pub fn peer_size(&self) -> i32 {
        self.peers.size()
    }

    /// The group that point-to-point ranks name.
    pub fn peers(&self) -> &Arc<Group> {
        &self.peers
    }

    /// The tag of the next blocking collective operation on this communicator. Every member
    /// starts its collectives in the same order, so they agree on it; distinct tags keep several
    /// collectives in flight apart. Tags below 64 are the runtime's own. Blocking and nonblocking
    /// (or persistent) collectives are numbered in two sequences with disjoint tag ranges, as
    /// MPICH and Open MPI keep them apart: a program that starts a nonblocking collective before
    /// a barrier on one rank and after it on another (mpi4py's `MPI_Comm_iagree` over
    /// `MPI_Iallreduce` does) still matches each call with its own.
    pub fn next_coll_tag(&self) -> i32 {
        64 + (self.coll_seq.fetch_add(1, Ordering::Relaxed) % (1 << 29)) as i32
    }

    /// The tag of the next nonblocking or persistent collective (see [`Comm::next_coll_tag`]).
    pub fn next_nb_coll_tag(&self) -> i32 {
        64 + (1 << 29) + (self.nb_coll_seq.fetch_add(1, Ordering::Relaxed) % (1 << 29)) as i32
    }

    pub fn coll_ctx(&self) -> u64 {
        self.ctx | 1
    }

    /// The process that point-to-point rank `rank` names (in the remote group on an
    /// intercommunicator).
    pub fn proc_of(&self, rank: i32) -> ProcIdx {
        self.peers.procs[rank as usize]
    }

    /// The process of local rank `rank`.
    pub fn local_proc(&self, rank: i32) -> ProcIdx {
        self.group.procs[rank as usize]
    }

    /// Context id for the next communicator created collectively from this one.
    pub fn derive_ctx(&self, discriminator: u64) -> u64 {
        let n = self.created.fetch_add(1, Ordering::Relaxed);
        hash_words(&[self.ctx, n, discriminator]) & !1
    }

    /// Context id for `Comm_create_group(self, group, tag)`.
    pub fn derive_ctx_for_group(&self, tag: i32, group: &Group) -> u64 {
        let gh = hash_words(&group.procs.iter().map(|&p| p as u64).collect::<Vec<_>>());
        let mut m = self.created_for_group.lock().unwrap();
        let n = m.entry((tag, gh)).or_insert(0);
        *n += 1;
        hash_words(&[self.ctx, 0x6372_6561_7465, tag as u64, gh, *n]) & !1
    }
}
