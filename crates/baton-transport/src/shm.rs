//! The job's shared-memory segment: one lock-free ring per ordered pair of processes, and one
//! doorbell per process.
//!
//! The segment lives in a memfd that the launcher creates and every rank inherits, so it has no
//! name in `/dev/shm` and vanishes with the last process that maps it, crashes included.
//!
//! ## Rings
//! Each ring has one producer and one consumer. Records start on 64-byte boundaries and begin with
//! a *stamp*, stored last with release ordering: a keyed hash of the record's absolute position
//! (the key is random per segment). The consumer polls the stamp at its own position, so a small
//! message costs one cache line (stamp, header and up to 8 bytes of payload share a line) and the
//! producer touches no other line. A stale stamp from an earlier lap encodes another position, and
//! stale payload bytes match the expected stamp only by a 2^-64 chance, since they cannot know the
//! key. The consumer publishes how far it has read (`tail`) for the producer's free-space check;
//! the producer reads it only when its cached copy says the ring is full.

use crate::frame::{Header, Kind};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const MAGIC: u64 = u64::from_le_bytes(*b"BATONSM1");
const PAGE: usize = 4096;
const CTL_BYTES: usize = 128;
pub(crate) const RING_CTL_BYTES: usize = 128;
/// Bytes of a record before its payload, when the payload shares the stamp's line.
pub const RECORD_HEADER: usize = 56;
const ALIGN: usize = 64;
/// Largest payload that shares the stamp's cache line; a longer one starts on the next line.
const INLINE_PAYLOAD: usize = ALIGN - RECORD_HEADER;

/// Where a payload of `plen` bytes starts in its record.
///
/// A payload of more than [`INLINE_PAYLOAD`] bytes starts on the line after the header, so the
/// producer touches the line the consumer polls only once, with the header and stamp at the end:
/// writing part of the payload there first lets the polling consumer take the line back before
/// the stamp's store, and the line crosses between the cores twice (docs/PERFORMANCE.md, shared
/// memory).
#[inline]
fn payload_offset(plen: usize) -> usize {
    if plen <= INLINE_PAYLOAD {
        RECORD_HEADER
    } else {
        ALIGN
    }
}

/// The payload length of a record whose header says `rec_len` (offset plus payload): lengths up
/// to one line have inline payloads, longer ones start at the next line; the two ranges do not
/// overlap.
#[inline]
fn payload_len(rec_len: usize) -> usize {
    if rec_len <= ALIGN {
        rec_len.saturating_sub(RECORD_HEADER)
    } else {
        rec_len - ALIGN
    }
}

/// Per-process control block: a doorbell others ring after posting to one of its rings.
#[repr(C, align(128))]
pub struct ProcCtl {
    /// Futex word, bumped by every wake-up.
    pub bell: AtomicU32,
    /// Threads of this process sleeping (or about to) on `bell`.
    pub sleepers: AtomicU32,
    /// Keeps `waiting` off the line every sender reads.
    _line: [u32; 14],
    /// Threads of this process inside a blocking MPI wait, kept where progress threads run:
    /// one that borrows a computing core leaves a copy to a peer that waits for it.
    pub waiting: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<ProcCtl>() <= CTL_BYTES);

/// A control block of the process's own (no shared segment).
impl Default for ProcCtl {
    fn default() -> ProcCtl {
        ProcCtl { bell: AtomicU32::new(0), sleepers: AtomicU32::new(0), _line: [0; 14], waiting: AtomicU32::new(0) }
    }
}

impl ProcCtl {
    /// Wakes a thread sleeping on this doorbell, if there is one. Whoever calls it has just
    /// published what the sleeper waits for with a SeqCst store; the sleeper counts itself in
    /// `sleepers` (SeqCst) before its last look, so either it sees the publication or this sees
    /// the sleeper.
    #[inline]
    pub fn wake_sleeper(&self) {
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            self.bell.fetch_add(1, Ordering::SeqCst);
            crate::wait::futex_wake(&self.bell);
        }
    }
}

#[repr(C)]
struct SegHeader {
    magic: AtomicU64,
    nprocs: u64,
    ring_size: u64,
    stamp_key: u64,
}

/// The stamp a record at absolute position `pos` carries (never 0, the value of fresh memory).
#[inline]
fn stamp_for(key: u64, pos: u64) -> u64 {
    let mut z = pos ^ key;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

pub(crate) fn random_key() -> u64 {
    let mut k = [0u8; 8];
    // SAFETY: getrandom fills the 8-byte buffer we own.
    let n = unsafe { libc::getrandom(k.as_mut_ptr() as *mut libc::c_void, 8, 0) };
    if n != 8 {
        // No entropy source: a time-derived key still differs per job.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        return (t as u64) ^ ((std::process::id() as u64) << 32);
    }
    u64::from_ne_bytes(k)
}

#[repr(C)]
struct RecHdr {
    stamp: u64,
    rec_len: u32,
    kind: u8,
    _pad: [u8; 3],
    ctx: u64,
    src: i32,
    tag: i32,
    len: u64,
    id: u64,
    aux: u64,
}

const _: () = assert!(std::mem::size_of::<RecHdr>() == RECORD_HEADER);

/// A mapping of the job's segment.
pub struct Segment {
    base: *mut u8,
    bytes: usize,
    nprocs: usize,
    ring_size: usize,
}

// SAFETY: the mapping is shared memory accessed only through atomics and the single-producer /
// single-consumer discipline of the rings; the pointer itself may move between threads.
unsafe impl Send for Segment {}
// SAFETY: as above; shared access goes through atomics.
unsafe impl Sync for Segment {}

/// Bytes of one process's buffer for shared-memory collectives, per parity.
pub const COLL_DATA: usize = 16 * 1024;
/// Bytes of a collective's data that travel in the same cache line as its sequence number.
pub const COLL_INLINE: usize = 56;
/// Post lines per process and area, used in turn by successive collectives: with data that
/// fits a post line, a process may run this many minus one collectives ahead of the slowest
/// reader (a bcast root in a loop, the contributors of a reduce).
pub const COLL_POSTS: usize = 64;
const _: () = assert!(COLL_POSTS.is_power_of_two());
/// Per process: [`COLL_POSTS`] "post" lines (a sequence number and up to 56 bytes of data),
/// 128 bytes apart, then two data buffers.
const COLL_SLOT_BYTES: usize = 128 * COLL_POSTS + 2 * COLL_DATA;
/// Collective areas per process: area 0 serves `MPI_COMM_WORLD`, the others communicators
/// created later, one each while it lives (see `baton_core::coll::shm`). Untouched areas cost
/// no memory: the segment is a memfd.
pub const COLL_AREAS: usize = 8;

fn rings_end(nprocs: usize, ring_size: usize) -> usize {
    PAGE + nprocs * CTL_BYTES + nprocs * nprocs * (RING_CTL_BYTES + ring_size)
}

fn segment_bytes(nprocs: usize, ring_size: usize) -> usize {
    rings_end(nprocs, ring_size) + nprocs * COLL_AREAS * COLL_SLOT_BYTES
}

pub(crate) fn map(fd: RawFd, bytes: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping of `bytes` of the memfd; failure is checked.
    let p =
        unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as *mut u8)
}

impl Segment {
    /// Sizes the (empty) memfd for `nprocs` processes and maps it. Called by one process only,
    /// before the others [`attach`](Segment::attach).
    pub fn create(fd: RawFd, nprocs: usize, ring_size: usize) -> io::Result<Segment> {
        assert!(ring_size.is_power_of_two() && ring_size >= 4096);
        let bytes = segment_bytes(nprocs, ring_size);
        // SAFETY: plain syscall on a descriptor we were handed.
        if unsafe { libc::ftruncate(fd, bytes as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let base = map(fd, bytes)?;
        let seg = Segment { base, bytes, nprocs, ring_size };
        let h = seg.header();
        // SAFETY: we are the only process touching the header before the others attach (they
        // attach after a bootstrap fence); fields are plain integers.
        unsafe {
            let hp = base as *mut SegHeader;
            (*hp).nprocs = nprocs as u64;
            (*hp).ring_size = ring_size as u64;
            (*hp).stamp_key = random_key();
        }
        h.magic.store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// A segment of this process alone, for `nprocs` participants that are its threads: what
    /// tests of the shared-memory protocols use in place of processes. The memfd is closed once
    /// mapped; the mapping keeps the memory.
    pub fn private(nprocs: usize, ring_size: usize) -> io::Result<Segment> {
        // SAFETY: plain syscall with a static name; failure is checked.
        let fd = unsafe { libc::memfd_create(c"baton-private".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let seg = Segment::create(fd, nprocs, ring_size);
        close_fd(fd);
        seg
    }

    /// Maps a segment another process created.
    pub fn attach(fd: RawFd) -> io::Result<Segment> {
        // SAFETY: fstat into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to `st`.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes = st.st_size as usize;
        if bytes < PAGE {
            return Err(io::Error::other("shared segment was not initialised"));
        }
        let base = map(fd, bytes)?;
        // SAFETY: the header lies in the first page, which exists.
        let h = unsafe { &*(base as *const SegHeader) };
        let (nprocs, ring_size) = (h.nprocs as usize, h.ring_size as usize);
        let seg = Segment { base, bytes, nprocs, ring_size };
        if h.magic.load(Ordering::Acquire) != MAGIC || segment_bytes(nprocs, ring_size) != bytes {
            return Err(io::Error::other("shared segment has an unexpected layout"));
        }
        Ok(seg)
    }

    fn header(&self) -> &SegHeader {
        // SAFETY: the first page holds the header.
        unsafe { &*(self.base as *const SegHeader) }
    }

    pub fn nprocs(&self) -> usize {
        self.nprocs
    }

    pub fn ring_size(&self) -> usize {
        self.ring_size
    }

    fn stamp_key(&self) -> u64 {
        self.header().stamp_key
    }

    /// The control block of process `p`.
    pub fn ctl(&self, p: usize) -> &ProcCtl {
        assert!(p < self.nprocs);
        // SAFETY: in bounds of the mapping, 128-byte aligned (page + k*128).
        unsafe { &*(self.base.add(PAGE + p * CTL_BYTES) as *const ProcCtl) }
    }

    /// Wakes process `p` if it sleeps on its doorbell (after publishing something it waits for).
    pub fn wake(&self, p: usize) {
        self.ctl(p).wake_sleeper();
    }

    /// The cooperative-copy slot for rendezvous messages from process `from` to process `to`:
    /// the second cache line of their ring's control block (the first holds the ring's `tail`).
    pub fn coop_slot(&self, from: usize, to: usize) -> &crate::coop::CoopSlot {
        const _: () = assert!(64 + std::mem::size_of::<crate::coop::CoopSlot>() <= RING_CTL_BYTES);
        // SAFETY: inside the ring's control block, which only the ring's `tail` (first 8 bytes)
        // otherwise uses; 64-aligned (ring bases are 64-aligned); zeroed memory is a valid slot.
        unsafe { &*(self.ring_base(from, to).add(64) as *const crate::coop::CoopSlot) }
    }

    /// Process `p`'s slot in collective area `area`.
    pub fn coll_slot(&self, p: usize, area: usize) -> CollSlot<'_> {
        assert!(p < self.nprocs && area < COLL_AREAS);
        let off = rings_end(self.nprocs, self.ring_size) + (p * COLL_AREAS + area) * COLL_SLOT_BYTES;
        debug_assert!(off + COLL_SLOT_BYTES <= self.bytes);
        // SAFETY: in bounds by the layout; the words are 128-byte aligned (the ring area ends on
        // a 64-byte multiple of 128-byte blocks plus ring sizes that are powers of two >= 4096).
        CollSlot { base: unsafe { self.base.add(off) }, _seg: std::marker::PhantomData }
    }

    fn ring_base(&self, from: usize, to: usize) -> *mut u8 {
        assert!(from < self.nprocs && to < self.nprocs);
        let idx = from * self.nprocs + to;
        let off = PAGE + self.nprocs * CTL_BYTES + idx * (RING_CTL_BYTES + self.ring_size);
        debug_assert!(off + RING_CTL_BYTES + self.ring_size <= self.bytes);
        // SAFETY: in bounds (checked above in debug, by construction of the layout always).
        unsafe { self.base.add(off) }
    }
}

/// One process's part of the collective area: [`COLL_POSTS`] post lines used in turn by
/// successive collectives (each holds the sequence number of the last collective of its turn
/// this process arrived at, and up to [`COLL_INLINE`] bytes of its data in the same cache line,
/// so a reader gets both in one transfer), and two data buffers for larger contributions, used
/// by alternate collectives (parity 0 and 1).
///
/// The protocol (in `baton-core`'s shared-memory collectives) makes access race-free: only
/// the owner writes its post lines and buffers, data only before publishing the sequence number
/// (release), and only once every reader has moved past the collective that last used that
/// parity; readers read only after seeing the sequence number (acquire).
pub struct CollSlot<'a> {
    /// The slot's first byte (128-byte aligned): the post lines, 128 bytes apart, then the
    /// data buffers. Addresses are computed when used: the slot is looked up on every check.
    base: *mut u8,
    _seg: std::marker::PhantomData<&'a Segment>,
}

impl<'a> CollSlot<'a> {
    /// The sequence number of post line `line` (modulo [`COLL_POSTS`]): the last collective of
    /// its turn this process arrived at.
    pub fn post(&self, line: usize) -> &'a AtomicU64 {
        // SAFETY: the word starts a 128-byte block of this slot, so it is in bounds and aligned.
        unsafe { &*(self.base.add(128 * (line % COLL_POSTS)) as *const AtomicU64) }
    }

    fn inline_ptr(&self, line: usize) -> *mut u8 {
        // SAFETY: the 56 bytes after the sequence word of a post line are in bounds of the slot.
        unsafe { self.base.add(128 * (line % COLL_POSTS) + 8) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: the data buffers follow the post lines, inside the slot.
        unsafe { self.base.add(128 * COLL_POSTS) }
    }

    /// Writes `src` (clamped to [`COLL_INLINE`] bytes) into post line `line` (modulo [`COLL_POSTS`]).
    pub fn write_inline(&self, line: usize, src: &[u8]) {
        let n = src.len().min(COLL_INLINE);
        // SAFETY: the 56 bytes after the sequence word belong to this line; the protocol keeps
        // readers away while the owner writes them.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.inline_ptr(line), n) };
    }

    /// The first `n` (clamped) data bytes of post line `line` (modulo [`COLL_POSTS`]).
    pub fn read_inline(&self, line: usize, n: usize) -> &'a [u8] {
        // SAFETY: in bounds of the line; the protocol keeps the owner from writing it meanwhile.
        unsafe { std::slice::from_raw_parts(self.inline_ptr(line), n.min(COLL_INLINE)) }
    }

    /// Writes `src` at `off` of buffer `parity` (clamped to the buffer).
    pub fn write(&self, parity: usize, off: usize, src: &[u8]) {
        let off = off.min(COLL_DATA);
        let n = src.len().min(COLL_DATA - off);
        // SAFETY: in bounds of this slot's buffer `parity & 1`; the protocol above keeps other
        // processes from reading it meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.data().add((parity & 1) * COLL_DATA + off), n) };
    }

    /// The bytes `[off, off+n)` of buffer `parity` (clamped).
    pub fn read(&self, parity: usize, off: usize, n: usize) -> &'a [u8] {
        let off = off.min(COLL_DATA);
        let n = n.min(COLL_DATA - off);
        // SAFETY: in bounds; the protocol above keeps the owner from writing it meanwhile.
        unsafe { std::slice::from_raw_parts(self.data().add((parity & 1) * COLL_DATA + off), n) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; rings hold an Arc so none outlive it.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.bytes) };
    }
}

fn round_up(n: usize) -> usize {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

/// One ring as either end sees it: the word the consumer publishes its tail in, the data area
/// after the ring's control bytes, and the stamp key of the segment.
struct Ring {
    /// Keeps the mapping that holds the ring (and a producer's `ctl`) alive.
    _keep: Arc<dyn Send + Sync>,
    tail_pub: *const AtomicU64,
    data: *mut u8,
    size: usize,
    key: u64,
}

impl Ring {
    /// The ring at `base` (control bytes, then `size` bytes of data).
    ///
    /// # Safety
    /// `base` must point into a shared mapping that `keep` keeps alive, laid out as above.
    unsafe fn at(keep: Arc<dyn Send + Sync>, base: *mut u8, size: usize, key: u64) -> Ring {
        Ring {
            _keep: keep,
            tail_pub: base as *const AtomicU64,
            // SAFETY: the data area follows the ring's control bytes (caller's contract).
            data: unsafe { base.add(RING_CTL_BYTES) },
            size,
            key,
        }
    }

    /// The record at ring position `pos`.
    #[inline]
    fn rec(&self, pos: u64) -> *mut RecHdr {
        // SAFETY: offset reduced modulo the ring size, 64-aligned by construction.
        unsafe { self.data.add(pos as usize & (self.size - 1)) as *mut RecHdr }
    }

    /// The stamp of the record at `pos`: its first word.
    #[inline]
    fn stamp(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: every record position is 8-aligned and inside the ring.
        unsafe { &*(self.rec(pos) as *const AtomicU64) }
    }

    /// The consumer's published tail.
    #[inline]
    fn tail_word(&self) -> &AtomicU64 {
        // SAFETY: `tail_pub` points into the live mapping.
        unsafe { &*self.tail_pub }
    }
}

/// The sending end of the ring from this process to one peer.
pub struct Producer {
    ring: Ring,
    /// The peer's doorbell.
    ctl: *const ProcCtl,
    head: u64,
    tail_cache: u64,
}

// SAFETY: used under the runtime's lock; the pointers target the shared mapping kept alive by `seg`.
unsafe impl Send for Producer {}

/// The receiving end of the ring from one peer to this process.
pub struct Consumer {
    ring: Ring,
    tail: u64,
    /// Length of the record at `tail` once `next_frame` returned it.
    cur: usize,
    /// The stamp the record at `tail` will carry: computed once per record, not once per poll.
    want: u64,
}

// SAFETY: as for Producer.
unsafe impl Send for Consumer {}

/// Backs `len` bytes at `p` with pages now. A producer does this for its ring when the
/// endpoint opens, so that the first pass of messages through the ring does not take a page
/// fault every 4 KiB, which a short run of small messages would pay in latency
/// (docs/PERFORMANCE.md, shared memory). The consumer only maps pages that exist then;
/// populating its side too would commit every ring of the host at `MPI_Init`, used or not.
/// Best effort: kernels before 5.14 refuse, and pages fault as before.
fn populate(p: *mut u8, len: usize) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    let start = (p as usize).next_multiple_of(PAGE);
    let end = (p as usize + len) / PAGE * PAGE;
    if end > start {
        // SAFETY: the range lies inside a live shared mapping of this process; populating it
        // changes no byte.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, MADV_POPULATE_WRITE) };
    }
}

impl Producer {
    pub fn new(seg: &Arc<Segment>, me: usize, peer: usize) -> Producer {
        let base = seg.ring_base(me, peer);
        populate(base, RING_CTL_BYTES + seg.ring_size);
        // SAFETY: the ring and the peer's control block lie in `seg`'s mapping, kept alive.
        unsafe { Producer::raw(seg.clone(), base, seg.ring_size, seg.ctl(peer), seg.stamp_key()) }
    }

    /// A producer on the ring at `base` (control bytes, then `size` bytes of data) whose
    /// consumer sleeps on `ctl`, with stamp key `key`.
    ///
    /// # Safety
    /// `base` and `ctl` must point into a shared mapping that `keep` keeps alive, laid out as
    /// above, with a single producer.
    pub unsafe fn raw(keep: Arc<dyn Send + Sync>, base: *mut u8, size: usize, ctl: &ProcCtl, key: u64) -> Producer {
        // SAFETY: the caller's contract.
        Producer { ring: unsafe { Ring::at(keep, base, size, key) }, ctl, head: 0, tail_cache: 0 }
    }

    /// Bytes of the ring this producer writes.
    #[inline]
    pub fn ring_size(&self) -> usize {
        self.ring.size
    }

    /// Largest payload that can ever be pushed in one record.
    pub fn max_payload(&self) -> usize {
        self.ring.size / 2 - 2 * ALIGN
    }

    #[inline]
    fn free_for(&mut self, need: u64) -> bool {
        if self.head + need - self.tail_cache <= self.ring.size as u64 {
            return true;
        }
        self.tail_cache = self.ring.tail_word().load(Ordering::Acquire);
        self.head + need - self.tail_cache <= self.ring.size as u64
    }

    /// Appends a frame whose payload (`payload_len` bytes) `fill` writes in place.
    /// Returns false, writing nothing, when the ring lacks space now.
    #[inline]
    pub fn try_push_with(&mut self, h: &Header, payload_len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        assert!(payload_len <= self.max_payload(), "frame larger than a ring slot");
        let rec_len = payload_offset(payload_len) + payload_len;
        let len = round_up(rec_len) as u64;
        let size = self.ring.size;
        let off = self.head as usize & (size - 1);
        let pad = if off + len as usize > size { (size - off) as u64 } else { 0 };
        if !self.free_for(pad + len) {
            return false;
        }
        if pad > 0 {
            self.write_record(pad, Kind::Pad, &Header::control(Kind::Pad, 0, 0), 0, |_| {});
        }
        self.write_record(len, h.kind, h, payload_len, fill);
        true
    }

    #[inline]
    fn write_record(&mut self, len: u64, kind: Kind, h: &Header, plen: usize, fill: impl FnOnce(&mut [u8])) {
        let pos = self.head;
        let r = self.ring.rec(pos);
        let off = payload_offset(plen);
        // SAFETY: [pos, pos+len) is free space (checked by the caller) inside the ring; the
        // consumer does not read it until the stamp below is published.
        unsafe {
            // Payload before header: see `payload_offset`.
            let payload = std::slice::from_raw_parts_mut((r as *mut u8).add(off), plen);
            fill(payload);
            (*r).rec_len = (off + plen) as u32;
            (*r).kind = kind as u8;
            (*r).ctx = h.ctx;
            (*r).src = h.src;
            (*r).tag = h.tag;
            (*r).len = h.len;
            (*r).id = h.id;
            (*r).aux = h.aux;
        }
        // SeqCst (not just Release): with the sleeper's SeqCst increment of `sleepers` and our
        // SeqCst load of it in `ring_doorbell`, either we see the sleeper or it sees this stamp.
        self.ring.stamp(pos).store(stamp_for(self.ring.key, pos), Ordering::SeqCst);
        self.head = pos + len;
    }

    /// Wakes the peer if it sleeps. Call after pushing.
    #[inline]
    pub fn ring_doorbell(&self) {
        // No fence needed: the stamp store and this load are both SeqCst (see write_record).
        // SAFETY: `ctl` lies in the mapping `_keep` keeps alive.
        unsafe { &*self.ctl }.wake_sleeper();
    }
}

impl Consumer {
    pub fn new(seg: &Arc<Segment>, peer: usize, me: usize) -> Consumer {
        let base = seg.ring_base(peer, me);
        // SAFETY: the ring lies in `seg`'s mapping, kept alive.
        unsafe { Consumer::raw(seg.clone(), base, seg.ring_size, seg.stamp_key()) }
    }

    /// A consumer of the ring at `base` (see [`Producer::raw`]), reading from position 0.
    ///
    /// # Safety
    /// As for [`Producer::raw`], with a single consumer.
    pub unsafe fn raw(keep: Arc<dyn Send + Sync>, base: *mut u8, size: usize, key: u64) -> Consumer {
        // SAFETY: the caller's contract.
        Consumer { ring: unsafe { Ring::at(keep, base, size, key) }, tail: 0, cur: 0, want: stamp_for(key, 0) }
    }

    #[inline]
    fn published(&self) -> bool {
        let stamp = self.ring.stamp(self.tail);
        // SeqCst pairs with the producer's SeqCst stamp store in the sleep protocol; on x86 and
        // AArch64 it costs the same as Acquire.
        stamp.load(Ordering::SeqCst) == self.want
    }

    /// True when a record is waiting (does not consume it).
    #[inline]
    pub fn ready(&self) -> bool {
        self.published()
    }

    /// The header of the next frame, skipping padding; call [`consume`](Self::consume) when done
    /// with it and its [`payload`](Self::payload).
    #[inline]
    pub fn next_frame(&mut self) -> Option<Header> {
        // The empty case is what every idle poll sees: keep it to one load and compare inline.
        if !self.published() {
            return None;
        }
        self.read_frame()
    }

    #[inline(never)]
    fn read_frame(&mut self) -> Option<Header> {
        loop {
            if !self.published() {
                return None;
            }
            let r = self.ring.rec(self.tail);
            // SAFETY: the stamp (acquire) published every field below.
            let (rec_len, kind) = unsafe { ((*r).rec_len as usize, (*r).kind) };
            let kind = Kind::from_u8(kind).unwrap_or(Kind::Pad);
            if kind == Kind::Pad {
                let skip = if rec_len == RECORD_HEADER {
                    self.ring.size - (self.tail as usize & (self.ring.size - 1))
                } else {
                    round_up(rec_len)
                };
                self.tail += skip as u64;
                self.publish();
                continue;
            }
            self.cur = rec_len;
            // SAFETY: as above.
            return Some(unsafe {
                Header { kind, ctx: (*r).ctx, src: (*r).src, tag: (*r).tag, len: (*r).len, id: (*r).id, aux: (*r).aux }
            });
        }
    }

    /// Payload of the frame last returned by `next_frame`.
    pub fn payload(&self) -> &[u8] {
        let n = payload_len(self.cur).min(self.ring.size / 2);
        // SAFETY: the producer does not reuse this record before `consume` publishes the tail;
        // offset and length stay inside the record (`max_payload`).
        unsafe { std::slice::from_raw_parts((self.ring.rec(self.tail) as *const u8).add(payload_offset(n)), n) }
    }

    pub fn consume(&mut self) {
        self.tail += round_up(self.cur) as u64;
        self.cur = 0;
        self.publish();
    }

    fn publish(&mut self) {
        self.want = stamp_for(self.ring.key, self.tail);
        self.ring.tail_word().store(self.tail, Ordering::Release);
    }
}

/// Closes a descriptor the process no longer needs (the segment's memfd after mapping it).
pub fn close_fd(fd: RawFd) {
    // SAFETY: closing a descriptor this process owns and no longer uses.
    unsafe { libc::close(fd) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memfd() -> RawFd {
        // SAFETY: plain syscall with a static name.
        unsafe { libc::memfd_create(c"baton-test".as_ptr(), libc::MFD_CLOEXEC) }
    }

    fn hdr(i: u64) -> Header {
        Header { kind: Kind::Eager, ctx: 7, src: 1, tag: i as i32, len: i, id: i, aux: 0 }
    }

    /// Both ends of the ring from process 0 to process 1 of a fresh two-process segment.
    fn ring_0_to_1() -> (Producer, Consumer) {
        let seg = Arc::new(Segment::create(memfd(), 2, 4096).unwrap());
        (Producer::new(&seg, 0, 1), Consumer::new(&seg, 0, 1))
    }

    #[test]
    fn frames_arrive_in_order_across_many_laps() {
        let fd = memfd();
        let seg = Arc::new(Segment::create(fd, 2, 4096).unwrap());
        let seg2 = Arc::new(Segment::attach(fd).unwrap());
        let mut p = Producer::new(&seg, 0, 1);
        let mut c = Consumer::new(&seg2, 0, 1);
        let mut expect = 0u64;
        for i in 0..20_000u64 {
            let n = (i * 37 % 700) as usize;
            let mut h = hdr(i);
            h.len = n as u64;
            while !p.try_push_with(&h, n, |b| b.fill(i as u8)) {
                let got = c.next_frame().expect("full ring must have a frame");
                assert_eq!(got.id, expect);
                assert!(c.payload().iter().all(|&x| x == expect as u8));
                assert_eq!(c.payload().len() as u64, got.len);
                c.consume();
                expect += 1;
            }
        }
        while let Some(got) = c.next_frame() {
            assert_eq!(got.id, expect);
            c.consume();
            expect += 1;
        }
        assert_eq!(expect, 20_000);
    }

    #[test]
    fn payloads_past_the_stamp_line_start_on_the_next_line() {
        let (mut p, mut c) = ring_0_to_1();
        let max = p.max_payload();
        for n in (0..=130).chain([max - 1, max]) {
            let h = hdr(n as u64);
            let pattern = |k: usize| (k * 7 + n) as u8;
            assert!(p.try_push_with(&h, n, |b| b.iter_mut().enumerate().for_each(|(k, x)| *x = pattern(k))));
            assert_eq!(c.next_frame().unwrap().id, n as u64);
            let got = c.payload();
            assert_eq!(got.len(), n, "payload of {n} bytes");
            assert!(got.iter().enumerate().all(|(k, &x)| x == pattern(k)), "payload of {n} bytes");
            let line_off = got.as_ptr() as usize % ALIGN;
            assert_eq!(line_off, if n <= INLINE_PAYLOAD { RECORD_HEADER } else { 0 }, "payload of {n} bytes");
            c.consume();
            assert!(c.next_frame().is_none());
        }
    }

    #[test]
    fn stale_payload_bytes_never_look_like_a_stamp() {
        // Payloads full of position-like values (what an unkeyed stamp would be) must not create
        // phantom records.
        let (mut p, mut c) = ring_0_to_1();
        for round in 0..200u64 {
            let n = 64 * (1 + round as usize % 5) - 8;
            let h = hdr(round);
            assert!(p.try_push_with(&h, n, |b| {
                for (k, w) in b.chunks_mut(8).enumerate() {
                    let v = (round * 4096 + k as u64 * 8 + 1).to_le_bytes();
                    w.copy_from_slice(&v[..w.len()]);
                }
            }));
            assert_eq!(c.next_frame().unwrap().id, round);
            c.consume();
            assert!(c.next_frame().is_none());
        }
    }
}
