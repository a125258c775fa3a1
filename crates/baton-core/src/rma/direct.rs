//! Windows whose members all run on this host, reached by the origin itself. Where Baton
//! allocates the memory (`MPI_Win_allocate`, `MPI_Win_allocate_shared`), one [`Region`] holds
//! every member's part, mapped by all: an origin copies for puts and gets and runs hardware
//! atomics for the elements of accumulates. Where the application brought its memory
//! (`MPI_Win_create`), the region holds only the control lines and an origin reads and writes
//! the target's memory with single-copy transfers (`process_vm_readv`/`writev`), accumulates
//! under the target's mutex. Either way nothing is left owed to a target when a call returns,
//! so flushes cost nothing, a fence is a barrier, and a target computing without calling MPI
//! does not hold anyone up.
//!
//! Important types: [`Direct`] (the region, each rank's [`Part`] and control line).
//!
//! Each rank has a control line after the parts: the word of its window lock ([`ShmLock`],
//! shared or exclusive, `MPI_Win_lock`) and the word of a mutex for the accumulates that no
//! hardware atomic serves (elements over 8 bytes, or not aligned to their size). An element is
//! always updated the same way (its size and address decide), so the two kinds of update never
//! meet on one element, and every accumulate is atomic per element, as the standard asks.

use super::wire::Shape;
use crate::comm::Comm;
use crate::op::Op;
use crate::runtime::Mpi;
use baton_transport::atomic::ShmLock;
use baton_transport::cma;
use baton_transport::mem::UserBuf;
use baton_transport::region::Region;
use std::sync::Arc;

const LINE: usize = 64;
/// Word offsets within a control line.
const LOCK: usize = 0;
const ACC_MUTEX: usize = 8;
/// Post notices this rank has received as an origin, and `Complete`s as a target, not yet
/// taken by `MPI_Win_start` / `MPI_Win_wait`. Counting suffices: a target posts again only after
/// its wait, which needs this origin's complete, so a notice never belongs to a later epoch than
/// the start that takes it.
const POSTS: usize = 16;
const COMPLETES: usize = 24;

/// A single-copy transfer that failed after the window's probe succeeded: the target's memory
/// went away (the application freed it early) or the kernel changed its mind. Nothing was
/// written elsewhere; say so once per call.
fn report(r: std::io::Result<()>, rank: i32) {
    if let Err(e) = r {
        eprintln!("baton: a one-sided transfer to rank {rank} of a window failed: {e}");
    }
}

fn round_up(n: usize) -> usize {
    n.div_ceil(LINE) * LINE
}

/// What an accumulate combines: `data` (packed; empty for `MPI_NO_OP`) with operation `op` over
/// elements of `width` bytes of predefined datatype `basic`.
#[derive(Clone, Copy)]
pub struct Combine<'a> {
    pub op: Op,
    pub basic: usize,
    pub width: usize,
    pub data: &'a [u8],
}

/// Where a rank's window memory is, as this process reaches it.
#[derive(Clone)]
pub enum Part {
    /// In the region, at this offset, this many bytes.
    Mapped { off: usize, size: usize },
    /// This process's own memory.
    Own(UserBuf),
    /// Another process's memory, by address.
    Remote { pid: i32, base: usize, size: usize },
    /// Another process's `MPI_Alloc_mem` memory, mapped here too.
    Shared(Arc<Region>, UserBuf),
}

/// What a member of an `MPI_Win_create` window tells the others of its memory: where it is in
/// its process, and, when it lies in `MPI_Alloc_mem` memory, how to map that ([`Region::handle`]
/// and the offset in it).
#[derive(Clone, Copy, Debug)]
pub struct Member {
    pub pid: i32,
    pub base: usize,
    pub size: usize,
    pub region: Option<(i32, usize, usize)>,
}

/// `MPI_Alloc_mem` memory of at least [`ALLOC_SHARED_MIN`] bytes: regions peers on this host can
/// map, so that a window created over it is reached by loads, stores and atomics like one Baton
/// allocated. Each keeps its descriptor until `MPI_Free_mem` (peers open it through it).
static ALLOCATED: std::sync::Mutex<Vec<Arc<Region>>> = std::sync::Mutex::new(Vec::new());

/// Smaller allocations come from the heap: a region costs a page and a descriptor.
pub const ALLOC_SHARED_MIN: usize = 4096;

/// `MPI_Alloc_mem`: memory peers can map, or None (then the caller takes the heap's).
pub fn alloc_mem(size: usize) -> Option<UserBuf> {
    if size < ALLOC_SHARED_MIN {
        return None;
    }
    let r = Arc::new(Region::create(size).ok()?);
    let b = r.buf().prefix(size);
    ALLOCATED.lock().unwrap_or_else(|e| e.into_inner()).push(r);
    Some(b)
}

/// `MPI_Free_mem`: whether `addr` was such memory (now unmapped here; peers' mappings of a
/// window over it stay valid until they drop them).
pub fn free_mem(addr: usize) -> bool {
    let mut a = ALLOCATED.lock().unwrap_or_else(|e| e.into_inner());
    match a.iter().position(|r| r.addr() == addr) {
        Some(i) => {
            a.remove(i);
            true
        }
        None => false,
    }
}

/// The `MPI_Alloc_mem` region holding all of `span`, and where `span` starts in it.
pub fn allocated_holding(span: &UserBuf) -> Option<(Arc<Region>, usize)> {
    let a = ALLOCATED.lock().unwrap_or_else(|e| e.into_inner());
    a.iter()
        .find(|r| span.addr() >= r.addr() && span.addr() + span.len() <= r.addr() + r.len())
        .map(|r| (r.clone(), span.addr() - r.addr()))
}

/// A window whose members all run on this host.
pub struct Direct {
    pub region: Arc<Region>,
    /// The whole mapping, valid while `region` lives.
    buf: UserBuf,
    parts: Vec<Part>,
    /// Offset of rank 0's control line.
    ctl: usize,
    /// Accumulates may use hardware atomics: every part is mapped (else all go through the
    /// target's mutex, since a single-copy transfer is not atomic).
    atomics: bool,
}

impl Direct {
    /// Maps one region for every member of `comm`, whose sizes are `sizes`: parts back to back
    /// when `contiguous` (`MPI_Win_allocate_shared`'s default), else each on its own cache lines.
    /// Collective; None at every member when any could not map it.
    pub fn map(mpi: &Mpi, comm: &Comm, sizes: &[usize], contiguous: bool) -> Option<Direct> {
        let mut parts = Vec::with_capacity(sizes.len());
        let mut at = 0usize;
        for &size in sizes {
            parts.push(Part::Mapped { off: at, size });
            at = at.checked_add(if contiguous { size } else { round_up(size) })?;
        }
        Self::with_region(mpi, comm, parts, round_up(at), true)
    }

    /// A window of the application's memory (`own` here; `members`: what each told the others):
    /// control lines in a region; the memory mapped where every member's lies in `MPI_Alloc_mem`
    /// memory, else reached by single-copy transfers. Collective; None at every member when any
    /// can reach neither way.
    pub fn reach(mpi: &Mpi, comm: &Comm, own: UserBuf, members: &[Member]) -> Option<Direct> {
        let me = comm.rank as usize;
        // Mapping first: every member with memory must have it in a region, and every member
        // must map every other's.
        if members.iter().all(|m| m.size == 0 || m.region.is_some()) {
            let parts: Vec<Option<Part>> = members
                .iter()
                .enumerate()
                .map(|(r, m)| match m.region {
                    _ if r == me => Some(Part::Own(own)),
                    _ if m.size == 0 => Some(Part::Own(UserBuf::empty())),
                    Some((fd, len, off)) => {
                        let region = Arc::new(Region::open(m.pid, fd, len).ok()?);
                        let buf = region.buf().sub(off, m.size);
                        (buf.len() == m.size).then_some(Part::Shared(region, buf))
                    }
                    None => None,
                })
                .collect();
            let ok = parts.iter().all(Option::is_some);
            let all = mpi.allgather(comm, vec![ok as u8]);
            if all.iter().all(|b| b.first() == Some(&1)) {
                return Self::with_region(mpi, comm, parts.into_iter().flatten().collect(), 0, true);
            }
        }
        let parts: Vec<Part> = members
            .iter()
            .enumerate()
            .map(
                |(r, m)| if r == me { Part::Own(own) } else { Part::Remote { pid: m.pid, base: m.base, size: m.size } },
            )
            .collect();
        // One byte from every other member with memory: the kernel may forbid single-copy
        // transfers (a seccomp filter, ptrace rules), and every member must agree before any
        // uses them.
        let mut probe = [0u8; 1];
        let ok = parts.iter().all(|p| match *p {
            Part::Remote { pid, base, size } if size > 0 => cma::read_into(pid, base, &mut probe).is_ok(),
            _ => true,
        });
        let all = mpi.allgather(comm, vec![ok as u8]);
        if !all.iter().all(|b| b.first() == Some(&1)) {
            return None;
        }
        Self::with_region(mpi, comm, parts, 0, false)
    }

    /// Maps a region of `ctl` bytes of parts plus a control line per member (collective).
    fn with_region(mpi: &Mpi, comm: &Comm, parts: Vec<Part>, ctl: usize, atomics: bool) -> Option<Direct> {
        let len = ctl.checked_add(LINE * parts.len())?;
        let created = if comm.rank == 0 { Region::create(len).ok() } else { None };
        let announce: Vec<u8> = match &created {
            Some(r) => {
                let (pid, fd, n) = r.handle();
                [pid as i64, fd as i64, n as i64].iter().flat_map(|v| v.to_le_bytes()).collect()
            }
            None => Vec::new(),
        };
        let got = mpi.bcast_internal(comm, 0, announce);
        let word = |i: usize| got.get(8 * i..8 * i + 8).map(|w| i64::from_le_bytes(w.try_into().unwrap_or_default()));
        let region = match created {
            Some(r) => Some(r),
            None => match (word(0), word(1), word(2)) {
                (Some(pid), Some(fd), Some(n)) => Region::open(pid as i32, fd as i32, n as usize).ok(),
                _ => None,
            },
        };
        let ok = region.as_ref().is_some_and(|r| r.len() >= len);
        let all = mpi.allgather(comm, vec![ok as u8]);
        let mut region = region?;
        if !all.iter().all(|b| b.first() == Some(&1)) {
            return None;
        }
        region.close_fd();
        let buf = region.buf();
        Some(Direct { region: Arc::new(region), buf, parts, ctl, atomics })
    }

    /// Rank `r`'s memory as a span of this process, if it is mapped here.
    pub fn mapped(&self, r: i32) -> Option<UserBuf> {
        match &self.parts[r as usize] {
            &Part::Mapped { off, size } => Some(self.buf.sub(off, size)),
            &Part::Own(b) => Some(b),
            &Part::Shared(_, b) => Some(b),
            Part::Remote { .. } => None,
        }
    }

    /// Rank `r`'s memory mapped here, for `MPI_Win_allocate`'s callers.
    pub fn part(&self, r: i32) -> UserBuf {
        self.mapped(r).unwrap_or(UserBuf::empty())
    }

    /// Writes `src` at offset `at` of rank `r`'s memory.
    fn write(&self, r: i32, at: usize, src: &[u8]) {
        match self.parts[r as usize] {
            Part::Remote { pid, base, .. } => report(cma::write(pid, base + at, src), r),
            _ => {
                self.part(r).write_bulk(at, src);
            }
        }
    }

    /// Reads `dst.len()` bytes at offset `at` of rank `r`'s memory.
    fn read(&self, r: i32, at: usize, dst: &mut [u8]) {
        match self.parts[r as usize] {
            Part::Remote { pid, base, .. } => report(cma::read_into(pid, base + at, dst), r),
            _ => dst.copy_from_slice(self.part(r).read(at, dst.len())),
        }
    }

    fn counter(&self, r: i32, which: usize) -> &std::sync::atomic::AtomicU64 {
        self.buf
            .atomic_u64(self.ctl + LINE * r as usize + which)
            .expect("control lines are aligned and inside the region")
    }

    fn word(&self, r: i32, which: usize) -> ShmLock<'_> {
        ShmLock::new(self.counter(r, which))
    }

    /// `MPI_Win_post` to origin `r`, or `MPI_Win_complete` to target `r` (`complete`).
    pub fn notify(&self, r: i32, complete: bool) {
        let which = if complete { COMPLETES } else { POSTS };
        self.counter(r, which).fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Takes `n` notices addressed to rank `me` if that many have come (posts, or completes).
    pub fn take(&self, me: i32, n: usize, complete: bool) -> bool {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        let c = self.counter(me, if complete { COMPLETES } else { POSTS });
        let n = n as u64;
        c.fetch_update(AcqRel, Acquire, |v| (v >= n).then(|| v - n)).is_ok()
    }

    /// Tries to take rank `r`'s window lock.
    pub fn try_lock(&self, r: i32, exclusive: bool) -> bool {
        let l = self.word(r, LOCK);
        if exclusive {
            l.try_lock_exclusive()
        } else {
            l.try_lock_shared()
        }
    }

    pub fn unlock(&self, r: i32, exclusive: bool) {
        let l = self.word(r, LOCK);
        if exclusive {
            l.unlock_exclusive()
        } else {
            l.unlock_shared()
        }
    }

    /// Runs `f` holding rank `r`'s accumulate mutex (held for a few element updates only).
    fn with_mutex<R>(&self, r: i32, f: impl FnOnce() -> R) -> R {
        let m = self.word(r, ACC_MUTEX);
        let mut spins = 0u32;
        while !m.try_lock_exclusive() {
            spins += 1;
            if spins.is_multiple_of(64) {
                // The holder may be waiting for this core (more ranks than cores).
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let out = f();
        m.unlock_exclusive();
        out
    }

    /// `MPI_Put`: packed `data` into rank `r`'s memory at `off` as `shape` lays it out.
    pub fn put(&self, r: i32, off: i64, shape: &Shape, data: &[u8]) {
        let mut done = 0;
        for (o, n) in shape.blocks() {
            self.write(r, (off + o) as usize, &data[done..done + n]);
            done += n;
        }
    }

    /// `MPI_Get` into a contiguous origin buffer `dst`: straight from the target's memory.
    pub fn get_into(&self, r: i32, off: i64, shape: &Shape, dst: &UserBuf) {
        if let Part::Remote { pid, base, .. } = self.parts[r as usize] {
            let mut local = Vec::new();
            let mut remote = Vec::new();
            let mut done = 0;
            for (o, n) in shape.blocks() {
                local.push((done, n));
                remote.push((base + (off + o) as usize, n));
                done += n;
            }
            return report(cma::readv(pid, dst, &local, &remote), r);
        }
        let mem = self.part(r);
        let mut done = 0;
        for (o, n) in shape.blocks() {
            dst.write_bulk(done, mem.read((off + o) as usize, n));
            done += n;
        }
    }

    /// `MPI_Get`: the bytes `shape` lays out at `off` of rank `r`'s memory, packed into `out`.
    pub fn get(&self, r: i32, off: i64, shape: &Shape, out: &mut [u8]) {
        let mut done = 0;
        for (o, n) in shape.blocks() {
            self.read(r, (off + o) as usize, &mut out[done..done + n]);
            done += n;
        }
    }

    /// The accumulates: `target = data op target` at `off` of rank `r`'s memory as `shape`
    /// lays it out, the old elements packed into `old` when given.
    pub fn accumulate(&self, r: i32, off: i64, shape: &Shape, c: Combine, mut old: Option<&mut [u8]>) {
        let Combine { op, basic, width, data } = c;
        let width = width.max(1);
        // An element split over blocks (MPI_SHORT_INT's gap) is combined packed, as is all memory
        // no atomic reaches.
        if !self.atomics || shape.blocks().any(|(_, n)| n % width != 0) {
            return self.accumulate_locked(r, off, shape, c, old);
        }
        let mem = self.part(r);
        let integer = crate::op::is_integer(basic);
        let mut done = 0;
        for (o, n) in shape.blocks() {
            let at = (off + o) as usize;
            for i in 0..n / width {
                let e = at + i * width;
                let src = data.get(done + i * width..done + (i + 1) * width).unwrap_or(&[]);
                let mut prev = [0u8; 8];
                let word = |b: &[u8]| {
                    let mut w = [0u8; 8];
                    w[..b.len()].copy_from_slice(b);
                    u64::from_ne_bytes(w)
                };
                // The common operations have an instruction of their own.
                let quick = match op {
                    _ if width > 8 || src.len() != width && op != Op::NoOp => None,
                    Op::NoOp => mem.atomic_load(e, width),
                    Op::Replace => mem.atomic_swap(e, width, word(src)),
                    Op::Sum if integer => mem.atomic_fetch_add(e, width, word(src)),
                    _ => None,
                };
                let atomic = quick.map(|v| prev = v.to_ne_bytes()).is_some()
                    || width <= 8
                        && mem
                            .atomic_fetch_update(e, width, |cur| {
                                if op == Op::NoOp || src.len() != width {
                                    return None;
                                }
                                let mut b = cur.to_ne_bytes();
                                crate::op::apply(op, basic, src, &mut b[..width]);
                                Some(u64::from_ne_bytes(b))
                            })
                            .map(|v| prev = v.to_ne_bytes())
                            .is_some();
                let pos = done + i * width;
                if atomic {
                    if let Some(out) = old.as_deref_mut() {
                        out[pos..pos + width].copy_from_slice(&prev[..width]);
                    }
                    continue;
                }
                self.with_mutex(r, || {
                    mem.modify(e, width, |cur| {
                        if let Some(out) = old.as_deref_mut() {
                            out[pos..pos + width].copy_from_slice(cur);
                        }
                        if op != Op::NoOp && src.len() == width {
                            crate::op::apply(op, basic, src, cur);
                        }
                    })
                });
            }
            done += n;
        }
    }

    /// The accumulates no hardware atomic serves: under the target's mutex, the target's bytes
    /// gathered, combined as a packed stream (the reduction kernels' form) and written back.
    fn accumulate_locked(&self, r: i32, off: i64, shape: &Shape, c: Combine, old: Option<&mut [u8]>) {
        let Combine { op, basic, data, .. } = c;
        self.with_mutex(r, || {
            let mut cur = vec![0u8; shape.bytes() as usize];
            self.get(r, off, shape, &mut cur);
            if let Some(out) = old {
                out.copy_from_slice(&cur);
            }
            if op != Op::NoOp && data.len() == cur.len() {
                crate::op::apply(op, basic, data, &mut cur);
                self.put(r, off, shape, &cur);
            }
        })
    }

    /// `MPI_Compare_and_swap` on the element of `width` bytes at `off` of rank `r`: stores
    /// `new` where it equals `compare`; the old element goes to `old`.
    pub fn compare_and_swap(&self, r: i32, off: i64, width: usize, new: &[u8], compare: &[u8], old: &mut [u8]) {
        let e = off as usize;
        if !self.atomics {
            return self.with_mutex(r, || {
                self.read(r, e, old);
                if old == compare {
                    self.write(r, e, new);
                }
            });
        }
        let mem = self.part(r);
        let word = |b: &[u8]| {
            let mut w = [0u8; 8];
            w[..b.len()].copy_from_slice(b);
            u64::from_ne_bytes(w)
        };
        if width <= 8 {
            let (n, c) = (word(new), word(compare));
            if let Some(v) = mem.atomic_fetch_update(e, width, |cur| (cur == c).then_some(n)) {
                old.copy_from_slice(&v.to_ne_bytes()[..width]);
                return;
            }
        }
        self.with_mutex(r, || {
            mem.modify(e, width, |cur| {
                old.copy_from_slice(cur);
                if cur == compare {
                    cur.copy_from_slice(new);
                }
            })
        });
    }
}
