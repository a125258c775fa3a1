//! One-sided communication: windows, the operations that reach into them and the epochs that
//! order those operations.
//!
//! Two paths carry the operations, chosen per window when it is created, alike at every member:
//! - **Direct** ([`direct`]): every member runs on this host. The origin reaches the target's
//!   memory itself, mapped (memory Baton or `MPI_Alloc_mem` allocated) or by single-copy
//!   transfers (other application memory); locks and notices are words in shared memory.
//! - **Requests**: otherwise. An operation travels as a request message to its target
//!   ([`wire`]), carried out there by the window's [`Exposure`] ([`target`]), a service the
//!   runtime runs at every progress pass of the target process (inside any MPI call). Answers
//!   (fetched bytes, acknowledgements) come back on a context of their own, into receives the
//!   origin posted before asking, so fetched data lands straight in the origin's buffer.
//!
//! Important types:
//! - [`Window`]: one window in this process: its communicator, the size and displacement unit
//!   of every member's memory, the target side ([`Exposure`]), the origin side ([`Access`]) and,
//!   on the direct path, [`Direct`].
//! - [`Spec`] and [`Provide`]: what a member brings to a new window.
//! - [`Memory`]: this process's memory in the window (one span, or the regions attached to a
//!   dynamic window).
//! - [`Access`] ([`origin`]): the origin's epochs (fence, post/start/complete/wait, locks) and
//!   the operations each target still owes an answer for; `Fast`, the same epochs of a direct
//!   window, read without a lock.
//!
//! Origins check what they can before anything is sent (ranks, epochs, displacements against the
//! target's window size), so a bad call fails at the call with a message naming it; the target
//! checks again and never writes outside its memory.

pub mod direct;
pub mod origin;
pub mod sync;
pub mod target;
#[cfg(test)]
mod tests;
pub mod wire;

pub use direct::Direct;
pub use origin::Access;
pub use target::Exposure;

use crate::comm::{hash_words, Comm};
use crate::error::{MpiError, Result};
use crate::op::Op;
use crate::progress::Service;
use crate::runtime::Mpi;
use baton_abi::consts as c;
use baton_transport::mem::UserBuf;
use baton_transport::region::Region;
use std::sync::{Arc, Mutex, MutexGuard};

/// How a window's memory came to be (`MPI_WIN_CREATE_FLAVOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Create,
    Allocate,
    Shared,
    Dynamic,
}

impl Flavor {
    /// The `MPI_WIN_FLAVOR_*` value.
    pub fn code(self) -> i32 {
        match self {
            Flavor::Create => c::MPI_WIN_FLAVOR_CREATE,
            Flavor::Allocate => c::MPI_WIN_FLAVOR_ALLOCATE,
            Flavor::Shared => c::MPI_WIN_FLAVOR_SHARED,
            Flavor::Dynamic => c::MPI_WIN_FLAVOR_DYNAMIC,
        }
    }
}

/// This process's memory in a window.
#[derive(Clone, Debug)]
pub enum Memory {
    /// One span (created from the application's memory, or allocated for it).
    Span(UserBuf),
    /// The regions attached to a dynamic window; operations name absolute addresses.
    Dynamic(Vec<UserBuf>),
}

/// Where a new window's memory comes from.
#[derive(Clone, Copy, Debug)]
pub enum Provide {
    /// The application's (`MPI_Win_create`).
    User(UserBuf),
    /// Allocated by Baton (`MPI_Win_allocate`; `shared`: `MPI_Win_allocate_shared`, whose
    /// parts are back to back unless `noncontig`).
    Allocate { shared: bool, noncontig: bool },
    /// Attached later (`MPI_Win_create_dynamic`).
    Dynamic,
}

/// What a member brings to a new window.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub provide: Provide,
    /// Bytes of memory and the displacement unit.
    pub size: usize,
    pub disp_unit: usize,
}

/// What every member knows of another's window memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct Peer {
    pub size: usize,
    pub disp_unit: usize,
}

/// One window in this process.
pub struct Window {
    /// The window's own communicator: the creating one's group, a fresh context. Requests travel
    /// on its point-to-point context, the window's synchronizations on its collective one.
    pub comm: Arc<Comm>,
    pub flavor: Flavor,
    /// This process's memory: its start address, bytes, displacement unit.
    pub base: usize,
    pub size: usize,
    pub disp_unit: usize,
    pub peers: Vec<Peer>,
    pub exposure: Arc<Exposure>,
    service: Arc<dyn Service>,
    access: Mutex<Access>,
    /// The members' memory, when they all run on this host: origins then reach targets
    /// themselves ([`direct`]).
    pub direct: Option<Direct>,
    /// The epochs of a direct window, read without `access`'s lock by the operations.
    pub(crate) fast: Fast,
}

/// The epoch state a direct window's operations check: lock-free, since every operation reads it
/// and a lock taken per call would cost as much as the operation. Only this process's own calls
/// change it (concurrent epochs on one window from several threads are the application's error).
#[derive(Default)]
pub(crate) struct Fast {
    /// Per target: [`origin::HELD_NONE`] or what is held (shared, exclusive, `MPI_MODE_NOCHECK`).
    pub locks: Vec<std::sync::atomic::AtomicU8>,
    pub lock_all: std::sync::atomic::AtomicBool,
    pub fence: std::sync::atomic::AtomicBool,
    /// An `MPI_Win_start` epoch is open (its group is in `Access`).
    pub started: std::sync::atomic::AtomicBool,
}

/// Operations as one byte on the wire.
const OPS: [Op; 14] = [
    Op::Sum,
    Op::Prod,
    Op::Max,
    Op::Min,
    Op::Land,
    Op::Lor,
    Op::Lxor,
    Op::Band,
    Op::Bor,
    Op::Bxor,
    Op::Minloc,
    Op::Maxloc,
    Op::Replace,
    Op::NoOp,
];

pub fn op_code(op: Op) -> u8 {
    OPS.iter().position(|&o| o == op).unwrap_or(0) as u8
}

pub fn op_from_code(b: u8) -> Option<Op> {
    OPS.get(b as usize).copied()
}

impl Window {
    /// Creates a window over `comm` (collective): every member brings its memory (or has it
    /// allocated), size and displacement unit; all learn each other's.
    pub fn create(mpi: &Mpi, call: &str, comm: &Comm, spec: Spec) -> Result<Arc<Window>> {
        let Spec { provide, size, disp_unit } = spec;
        if comm.is_inter() {
            return Err(MpiError::not_intracomm(call, "comm"));
        }
        let ctx = comm.derive_ctx(0x7769_6e64_6f77);
        let wcomm = Arc::new(Comm::new(ctx, comm.group.clone(), comm.rank));
        let reply_ctx = hash_words(&[ctx, 0x0072_6570_6c79]) & !1;
        let addr = match provide {
            Provide::User(b) => b.addr(),
            _ => 0,
        };
        let pid = std::process::id() as u64;
        // Memory of MPI_Alloc_mem can be mapped by peers: how (descriptor, region size, offset).
        let region = match provide {
            Provide::User(b) if !b.is_empty() => direct::allocated_holding(&b),
            _ => None,
        };
        let (fd, rlen, roff) = match &region {
            Some((r, off)) => {
                let (_, fd, len) = r.handle();
                (fd as i64 as u64, len as u64, *off as u64)
            }
            None => (u64::MAX, 0, 0),
        };
        let mine: Vec<u8> = [size as u64, disp_unit as u64, addr as u64, pid, fd, rlen, roff]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let all = mpi.allgather(&wcomm, mine);
        let word = |b: &[u8], i: usize| {
            b.get(8 * i..8 * i + 8).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap_or_default())) as usize
        };
        let peers: Vec<Peer> = all.iter().map(|b| Peer { size: word(b, 0), disp_unit: word(b, 1) }).collect();
        let host = mpi.proc_host(mpi.me);
        let one_host = comm.group.procs.iter().all(|&p| mpi.proc_host(p) == host);
        // `BATON_TRANSPORTS=tcp` keeps every byte on sockets, the operations on windows Baton
        // allocates included; `MPI_Win_allocate_shared` asks for shared memory by name.
        let shm = crate::runtime::transports_allowed().is_ok_and(|(shm, _)| shm);
        let (flavor, direct, memory, keep) = match provide {
            Provide::User(b) => {
                let direct = if one_host && shm {
                    let members: Vec<direct::Member> = all
                        .iter()
                        .map(|w| direct::Member {
                            pid: word(w, 3) as i32,
                            base: word(w, 2),
                            size: word(w, 0),
                            region: (word(w, 4) as u64 != u64::MAX)
                                .then(|| (word(w, 4) as i32, word(w, 5), word(w, 6))),
                        })
                        .collect();
                    Direct::reach(mpi, &wcomm, b, &members)
                } else {
                    None
                };
                let keep = direct.as_ref().map(|d| d.region.clone());
                (Flavor::Create, direct, Memory::Span(b), keep)
            }
            Provide::Dynamic => (Flavor::Dynamic, None, Memory::Dynamic(Vec::new()), None),
            Provide::Allocate { shared, noncontig } => {
                let sizes: Vec<usize> = peers.iter().map(|p| p.size).collect();
                let direct = if one_host && (shm || shared) {
                    Direct::map(mpi, &wcomm, &sizes, shared && !noncontig)
                } else {
                    None
                };
                let flavor = if shared { Flavor::Shared } else { Flavor::Allocate };
                match direct {
                    Some(d) => {
                        let part = d.part(comm.rank);
                        let keep = d.region.clone();
                        (flavor, Some(d), Memory::Span(part), Some(keep))
                    }
                    None if shared => {
                        let why = if one_host {
                            "the shared memory could not be mapped by every process"
                        } else {
                            "the processes of comm do not all run on one host"
                        };
                        return Err(MpiError::new(c::MPI_ERR_RMA_SHARED, format!("{call}: {why}")));
                    }
                    None => {
                        let r = Region::create(size).map_err(|e| {
                            MpiError::new(c::MPI_ERR_NO_MEM, format!("{call}: cannot allocate {size} bytes: {e}"))
                        })?;
                        let r = Arc::new(r);
                        (flavor, None, Memory::Span(r.buf().prefix(size)), Some(r))
                    }
                }
            }
        };
        let base = match &memory {
            Memory::Span(b) => b.addr(),
            Memory::Dynamic(_) => 0,
        };
        let n = comm.size() as usize;
        let procs = comm.group.procs.clone();
        let exposure = Arc::new(Exposure::new(ctx, reply_ctx, comm.rank, procs, "the window".into(), memory, keep));
        exposure.by_request.store(direct.is_none(), std::sync::atomic::Ordering::Relaxed);
        let service: Arc<dyn Service> = exposure.clone();
        mpi.add_service(service.clone());
        Ok(Arc::new(Window {
            comm: wcomm,
            flavor,
            base,
            size,
            disp_unit,
            peers,
            exposure,
            service,
            access: Mutex::new(Access::new(n)),
            direct,
            fast: Fast { locks: (0..n).map(|_| Default::default()).collect(), ..Default::default() },
        }))
    }

    /// Rank `r`'s memory as this process maps it (`MPI_Win_shared_query`): (address, bytes),
    /// or None when this process cannot load and store it.
    pub fn shared_part(&self, r: i32) -> Option<(usize, usize)> {
        match &self.direct {
            Some(d) => {
                let b = d.part(r);
                Some((b.addr(), b.len()))
            }
            None if r == self.comm.rank => Some((self.base, self.size)),
            None => None,
        }
    }

    pub(crate) fn access(&self) -> MutexGuard<'_, Access> {
        self.access.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn rank(&self) -> i32 {
        self.comm.rank
    }

    pub fn size_of_group(&self) -> i32 {
        self.comm.size()
    }

    /// Frees the window (collective): fails while this process still has an epoch open; else
    /// waits until every member is done with it, then stops serving it.
    pub fn free(&self, mpi: &Mpi, call: &str) -> Result<()> {
        self.access().check_closed(call)?;
        self.check_closed_direct(call)?;
        mpi.detach_shm(&self.comm);
        mpi.barrier(&self.comm);
        mpi.remove_service(&self.service);
        Ok(())
    }

    /// Attaches `region` to a dynamic window (`MPI_Win_attach`).
    pub fn attach(&self, call: &str, region: UserBuf) -> Result<()> {
        let mut s = self.exposure.served();
        let Memory::Dynamic(regions) = &mut s.memory else {
            return Err(MpiError::new(
                c::MPI_ERR_RMA_FLAVOR,
                format!("{call}: the window was not made by MPI_Win_create_dynamic"),
            ));
        };
        let (lo, hi) = (region.addr(), region.addr() + region.len());
        if let Some(o) = regions.iter().find(|r| r.addr() < hi && lo < r.addr() + r.len()) {
            return Err(MpiError::new(
                c::MPI_ERR_RMA_ATTACH,
                format!(
                    "{call}: memory [{lo:#x}, {hi:#x}) overlaps memory attached before at [{:#x}, {:#x})",
                    o.addr(),
                    o.addr() + o.len()
                ),
            ));
        }
        regions.push(region);
        Ok(())
    }

    /// Detaches the region that starts at `addr` (`MPI_Win_detach`).
    pub fn detach(&self, call: &str, addr: usize) -> Result<()> {
        let mut s = self.exposure.served();
        let Memory::Dynamic(regions) = &mut s.memory else {
            return Err(MpiError::new(
                c::MPI_ERR_RMA_FLAVOR,
                format!("{call}: the window was not made by MPI_Win_create_dynamic"),
            ));
        };
        match regions.iter().position(|r| r.addr() == addr) {
            Some(i) => {
                regions.remove(i);
                Ok(())
            }
            None => Err(MpiError::new(
                c::MPI_ERR_RMA_ATTACH,
                format!("{call}: no memory attached to the window starts at address {addr:#x}"),
            )),
        }
    }
}
