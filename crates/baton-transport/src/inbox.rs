//! A process's inbox: shared-memory rings from processes of *other* jobs on the same machine
//! (spawned children, jobs met through ports), so that they talk as fast as processes of one
//! job do.
//!
//! The job segment ([`crate::shm::Segment`]) is sized at start-up for the job's own processes;
//! processes that arrive later cannot join it. Instead each process that meets other jobs
//! creates an inbox: a memfd it keeps open, with its own doorbell and [`SLOTS`] rings, each
//! leased by one sender. A sender maps the inbox through `/proc/PID/fd/FD` (same user, same
//! machine; checked against the owner's identity in the header), claims a free slot with a
//! compare-and-swap, writes its identity and a fresh stamp key there and sends through the
//! ring like any shared-memory producer. The owner notices new leases by a generation counter
//! (one load per progress pass) and reads them like its other rings.
//!
//! A lease ends in two steps: the sender marks it closed after its last frame; the owner drains
//! the ring, drops its reader and frees the slot. The fresh key of the next lease makes every
//! record of the previous one invalid, so a ring needs no clearing. The memfd has no name and
//! dies with the last process that maps it: nothing is left behind, crashes included.

use crate::shm::{map, random_key, Consumer, ProcCtl, Producer, RING_CTL_BYTES};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const MAGIC: u64 = u64::from_le_bytes(*b"BATONIB1");
const PAGE: usize = 4096;
/// Senders one inbox holds at once; a sender that finds none free uses TCP.
pub const SLOTS: usize = 32;
const CTL_OFF: usize = 512;
const SLOT_TABLE_OFF: usize = 1024;
const SLOT_BYTES: usize = 64;
const _: () = assert!(SLOT_TABLE_OFF + SLOTS * SLOT_BYTES <= PAGE);

const FREE: u64 = 0;
const CLAIMING: u64 = 1;
const LIVE: u64 = 2;
const CLOSED: u64 = 3;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    ring_size: u64,
    owner_job: u64,
    owner_rank: u64,
    /// Bumped whenever a lease starts or closes.
    generation: AtomicU64,
}

#[repr(C)]
struct Slot {
    state: AtomicU64,
    job: u64,
    rank: u64,
    key: u64,
}

/// A mapping of some process's inbox (our own, or one we send into).
pub struct Inbox {
    base: *mut u8,
    bytes: usize,
    ring_size: usize,
    /// Our own inbox's memfd: kept open so that senders can map it.
    fd: Option<OwnedFd>,
}

// SAFETY: shared memory accessed through atomics and the single-producer / single-consumer
// discipline of each leased ring.
unsafe impl Send for Inbox {}
// SAFETY: as above.
unsafe impl Sync for Inbox {}

/// A lease the owner has not read yet: which slot, who holds it, and its stamp key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub slot: usize,
    pub job: u64,
    pub rank: u32,
    key: u64,
}

fn bytes_for(ring_size: usize) -> usize {
    PAGE + SLOTS * (RING_CTL_BYTES + ring_size)
}

impl Inbox {
    /// Creates this process's inbox; `(job, rank)` is who owns it.
    pub fn create(job: u64, rank: u32, ring_size: usize) -> io::Result<Inbox> {
        assert!(ring_size.is_power_of_two() && ring_size >= 4096);
        // SAFETY: plain syscall with a static name; the result is checked.
        let fd = unsafe { libc::memfd_create(c"baton-inbox".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let bytes = bytes_for(ring_size);
        // SAFETY: sizing our own memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), bytes as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let base = map(fd.as_raw_fd(), bytes)?;
        // SAFETY: nobody else maps it yet; plain integer fields in the first page.
        unsafe {
            let h = base as *mut Header;
            (*h).ring_size = ring_size as u64;
            (*h).owner_job = job;
            (*h).owner_rank = rank as u64;
        }
        let ib = Inbox { base, bytes, ring_size, fd: Some(fd) };
        ib.header().magic.store(MAGIC, Ordering::Release);
        Ok(ib)
    }

    /// The descriptor senders open as `/proc/PID/fd/FD`.
    pub fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// Maps the inbox of process `pid` (descriptor `fd`), which must belong to `(job, rank)`.
    pub fn attach(pid: i32, fd: RawFd, job: u64, rank: u32) -> io::Result<Inbox> {
        let path = std::ffi::CString::new(format!("/proc/{pid}/fd/{fd}")).expect("no NUL");
        // SAFETY: plain syscall on a path we built; the result is checked.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own; closed when this function returns (the mapping
        // keeps the memory).
        let f = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: fstat into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to `st`.
        if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes = st.st_size as usize;
        if bytes < PAGE {
            return Err(io::Error::other("not an inbox (too small)"));
        }
        let base = map(f.as_raw_fd(), bytes)?;
        // SAFETY: the header lies in the first page, which exists.
        let h = unsafe { &*(base as *const Header) };
        let ring_size = h.ring_size as usize;
        let ib = Inbox { base, bytes, ring_size, fd: None };
        // A pid of another namespace, or a reused pid, must not lead us to a stranger's memory.
        if h.magic.load(Ordering::Acquire) != MAGIC
            || !ring_size.is_power_of_two()
            || bytes_for(ring_size) != bytes
            || (h.owner_job, h.owner_rank) != (job, rank as u64)
        {
            return Err(io::Error::other("not the inbox of the expected process"));
        }
        Ok(ib)
    }

    fn header(&self) -> &Header {
        // SAFETY: the first page holds the header.
        unsafe { &*(self.base as *const Header) }
    }

    /// The owner's doorbell.
    pub fn ctl(&self) -> &ProcCtl {
        // SAFETY: in the first page, 128-byte aligned.
        unsafe { &*(self.base.add(CTL_OFF) as *const ProcCtl) }
    }

    fn slot(&self, i: usize) -> &Slot {
        assert!(i < SLOTS);
        // SAFETY: the slot table lies in the first page.
        unsafe { &*(self.base.add(SLOT_TABLE_OFF + i * SLOT_BYTES) as *const Slot) }
    }

    fn slot_mut(&self, i: usize) -> *mut Slot {
        assert!(i < SLOTS);
        // SAFETY: as above.
        unsafe { self.base.add(SLOT_TABLE_OFF + i * SLOT_BYTES) as *mut Slot }
    }

    fn ring_base(&self, i: usize) -> *mut u8 {
        assert!(i < SLOTS);
        // SAFETY: in bounds by the layout (`bytes_for`).
        unsafe { self.base.add(PAGE + i * (RING_CTL_BYTES + self.ring_size)) }
    }

    /// Changes whenever a lease starts or closes.
    pub fn generation(&self) -> u64 {
        self.header().generation.load(Ordering::Acquire)
    }

    /// Sender side: leases a free slot for `(job, rank)` and returns its producer, or `None`
    /// when every slot is taken.
    pub fn claim(self: &Arc<Self>, job: u64, rank: u32) -> Option<(usize, Producer)> {
        for i in 0..SLOTS {
            let s = self.slot(i);
            if s.state.compare_exchange(FREE, CLAIMING, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            let key = random_key();
            let base = self.ring_base(i);
            // SAFETY: the slot is ours (CLAIMING): nobody reads these fields or the ring until
            // the LIVE store below; the previous lease's reader was dropped before the owner
            // freed the slot, so resetting its published position races with nobody.
            unsafe {
                let p = self.slot_mut(i);
                (*p).job = job;
                (*p).rank = rank as u64;
                (*p).key = key;
                (*(base as *const AtomicU64)).store(0, Ordering::Relaxed);
            }
            s.state.store(LIVE, Ordering::Release);
            self.header().generation.fetch_add(1, Ordering::AcqRel);
            // SAFETY: the ring and the owner's doorbell lie in this mapping, kept alive by the
            // Arc; this producer is the lease's only writer.
            let prod = unsafe { Producer::raw(self.clone(), base, self.ring_size, self.ctl(), key) };
            return Some((i, prod));
        }
        None
    }

    /// Sender side: ends the lease of `slot` after its last frame (which the owner still reads).
    pub fn close(&self, slot: usize) {
        self.slot(slot).state.store(CLOSED, Ordering::Release);
        self.header().generation.fetch_add(1, Ordering::AcqRel);
        self.wake_owner();
    }

    /// Owner side: leases not in `known`, live or already closed (a short lease may have
    /// ended before its owner looked; its frames still wait in the ring).
    pub fn new_leases(&self, known: &[usize]) -> Vec<Lease> {
        (0..SLOTS)
            .filter(|i| !known.contains(i))
            .filter_map(|i| {
                let s = self.slot(i);
                // The fields are read only after LIVE or CLOSED (acquire) was seen; only the owner frees
                // a slot, so they cannot change under us.
                if !matches!(s.state.load(Ordering::Acquire), LIVE | CLOSED) {
                    return None;
                }
                Some(Lease { slot: i, job: s.job, rank: s.rank as u32, key: s.key })
            })
            .collect()
    }

    /// Owner side: the reader of a lease.
    pub fn reader(self: &Arc<Self>, l: &Lease) -> Consumer {
        // SAFETY: the ring lies in this mapping, kept alive by the Arc; the owner is the only
        // reader of each lease.
        unsafe { Consumer::raw(self.clone(), self.ring_base(l.slot), self.ring_size, l.key) }
    }

    /// Owner side: whether the sender has closed the lease of `slot`.
    pub fn is_closed(&self, slot: usize) -> bool {
        self.slot(slot).state.load(Ordering::Acquire) == CLOSED
    }

    /// Owner side: frees a closed slot whose reader has been dropped.
    pub fn free(&self, slot: usize) {
        let _ = self.slot(slot).state.compare_exchange(CLOSED, FREE, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Wakes the owner if it sleeps.
    pub fn wake_owner(&self) {
        self.ctl().wake_sleeper();
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; producers and consumers hold an Arc, so none
        // outlive it.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Header as FrameHeader, Kind};

    #[test]
    fn leases_carry_frames_and_are_reused_without_stale_records() {
        let own = Arc::new(Inbox::create(7, 3, 4096).unwrap());
        let pid = std::process::id() as i32;
        let fd = own.raw_fd().unwrap();
        assert!(Inbox::attach(pid, fd, 7, 4).is_err(), "wrong owner must be refused");
        let theirs = Arc::new(Inbox::attach(pid, fd, 7, 3).unwrap());
        let mut known = Vec::new();
        for round in 0..3u64 {
            let g = own.generation();
            let (slot, mut prod) = theirs.claim(9, 1).unwrap();
            assert_ne!(own.generation(), g);
            let leases = own.new_leases(&known);
            assert_eq!(leases.len(), 1);
            assert_eq!((leases[0].job, leases[0].rank, leases[0].slot), (9, 1, slot));
            let mut cons = own.reader(&leases[0]);
            known.push(slot);
            for i in 0..10u64 {
                let h = FrameHeader { kind: Kind::Eager, ctx: round, src: 0, tag: i as i32, len: 8, id: i, aux: 0 };
                assert!(prod.try_push_with(&h, 8, |b| b.copy_from_slice(&i.to_le_bytes())));
            }
            theirs.close(slot);
            assert!(own.is_closed(slot));
            for i in 0..10u64 {
                let h = cons.next_frame().unwrap();
                assert_eq!((h.ctx, h.id), (round, i));
                assert_eq!(cons.payload(), i.to_le_bytes());
                cons.consume();
            }
            // Nothing of this lease may show through in the next one.
            assert!(cons.next_frame().is_none());
            drop(cons);
            own.free(slot);
            known.retain(|&s| s != slot);
        }
        // A lease that ended before its owner looked still delivers its frames.
        let (slot, mut prod) = theirs.claim(9, 2).unwrap();
        let h = FrameHeader { kind: Kind::Eager, ctx: 5, src: 0, tag: 0, len: 0, id: 77, aux: 0 };
        assert!(prod.try_push_with(&h, 0, |_| {}));
        theirs.close(slot);
        let leases = own.new_leases(&known);
        assert_eq!(leases.len(), 1);
        let mut cons = own.reader(&leases[0]);
        assert_eq!(cons.next_frame().unwrap().id, 77);
        cons.consume();
        drop(cons);
        own.free(slot);
        let all: Vec<_> = (0..SLOTS).map(|_| theirs.claim(1, 1).unwrap().0).collect();
        assert_eq!(all.len(), SLOTS);
        assert!(theirs.claim(1, 1).is_none());
    }
}
