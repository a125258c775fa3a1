//! Hardware atomics on application or shared memory, and a lock that lives in one word of it.
//!
//! One-sided accumulates of a single element (`MPI_Fetch_and_op`, `MPI_Compare_and_swap`, an
//! `MPI_Accumulate` of one integer) run as atomic instructions on the target's memory when a
//! window lives in memory the origin maps ([`crate::region`]). The methods on
//! [`UserBuf`] here work on the naturally aligned element of 1, 2, 4 or 8 bytes at an offset,
//! with values in native byte order carried zero-extended in a `u64`. They answer `None` (and
//! touch nothing) when the element is out of bounds or misaligned, and the caller then falls back
//! to a lock, the only way to make such an element atomic.
//!
//! [`ShmLock`] is a reader-writer lock in one 8-byte word of shared memory (the window locks of
//! `MPI_Win_lock`); used in exclusive mode only, it is a mutex. It offers only `try_` forms:
//! whoever waits keeps making MPI progress between tries, which a lock cannot do for it.
//!
//! Every operation is sequentially consistent, except the lock's, which acquire on locking and
//! release on unlocking. Like [`UserBuf::write`], the updating methods need a span vouched for
//! writes; an element accessed atomically by one process or thread must not be accessed
//! non-atomically by another meanwhile (MPI calls such accesses conflicting).

use crate::mem::UserBuf;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::SeqCst};

/// An atomic integer type of 1, 2, 4 or 8 bytes, seen through `u64` values (truncated on the
/// way in, zero-extended on the way out).
trait Word {
    const BYTES: usize;
    fn get(&self) -> u64;
    fn set(&self, v: u64);
    fn replace(&self, v: u64) -> u64;
    fn add(&self, v: u64) -> u64;
    fn cas_weak(&self, cur: u64, new: u64) -> Result<u64, u64>;
}

macro_rules! word {
    ($atomic:ty, $int:ty) => {
        impl Word for $atomic {
            const BYTES: usize = std::mem::size_of::<$int>();
            fn get(&self) -> u64 {
                <$atomic>::load(self, SeqCst) as u64
            }
            fn set(&self, v: u64) {
                <$atomic>::store(self, v as $int, SeqCst)
            }
            fn replace(&self, v: u64) -> u64 {
                <$atomic>::swap(self, v as $int, SeqCst) as u64
            }
            fn add(&self, v: u64) -> u64 {
                <$atomic>::fetch_add(self, v as $int, SeqCst) as u64
            }
            fn cas_weak(&self, cur: u64, new: u64) -> Result<u64, u64> {
                <$atomic>::compare_exchange_weak(self, cur as $int, new as $int, SeqCst, SeqCst)
                    .map(|v| v as u64)
                    .map_err(|v| v as u64)
            }
        }
    };
}
word!(AtomicU8, u8);
word!(AtomicU16, u16);
word!(AtomicU32, u32);
word!(AtomicU64, u64);

/// Runs `$body` with `$cell` bound to the element of `$width` bytes at `$off` of `$buf`, as the
/// matching atomic type; `None` for another width or an element `cell` refuses.
macro_rules! on_element {
    ($buf:expr, $off:expr, $width:expr, |$cell:ident| $body:expr) => {
        match $width {
            1 => $buf.cell::<AtomicU8>($off).map(|$cell| $body),
            2 => $buf.cell::<AtomicU16>($off).map(|$cell| $body),
            4 => $buf.cell::<AtomicU32>($off).map(|$cell| $body),
            8 => $buf.cell::<AtomicU64>($off).map(|$cell| $body),
            _ => None,
        }
    };
}

impl UserBuf {
    /// The element of type `A` at `off`, if it lies inside the span and is naturally aligned.
    fn cell<A: Word>(&self, off: usize) -> Option<&A> {
        let inside = off.checked_add(A::BYTES).is_some_and(|end| end <= self.len());
        let at = self.addr().wrapping_add(off);
        if !inside || !at.is_multiple_of(A::BYTES) {
            return None;
        }
        // SAFETY: `[at, at + BYTES)` lies in a span the constructor's caller vouched for (valid
        // for the span's lifetime, which the borrow of `self` does not outlive in any use the
        // contract allows); it is aligned to `BYTES`, the size and alignment of `A`, an atomic
        // integer with the in-memory representation of a plain integer, so any bytes there are
        // a valid `A`, and other processes mapping them access them atomically too.
        Some(unsafe { &*(at as *const A) })
    }

    /// The 8-byte word at `off` as an atomic, for [`ShmLock`] and other protocols on shared
    /// memory; `None` if it is out of bounds or not 8-byte aligned.
    pub fn atomic_u64(&self, off: usize) -> Option<&AtomicU64> {
        self.cell::<AtomicU64>(off)
    }

    /// Atomically reads the `width`-byte element at `off`.
    pub fn atomic_load(&self, off: usize, width: usize) -> Option<u64> {
        on_element!(self, off, width, |c| c.get())
    }

    /// Atomically stores the low `width` bytes of `v` at `off`; false (nothing stored) where
    /// [`atomic_load`](Self::atomic_load) would answer `None`.
    pub fn atomic_store(&self, off: usize, width: usize, v: u64) -> bool {
        on_element!(self, off, width, |c| c.set(v)).is_some()
    }

    /// Atomically replaces the element at `off` with the low `width` bytes of `v`; the old value
    /// (`MPI_REPLACE` as a single instruction).
    pub fn atomic_swap(&self, off: usize, width: usize, v: u64) -> Option<u64> {
        on_element!(self, off, width, |c| c.replace(v))
    }

    /// Atomically adds `v` (wrapping at `width` bytes) to the element at `off`; the old value.
    /// A single instruction, where [`atomic_fetch_update`](Self::atomic_fetch_update) would retry
    /// under contention (`MPI_SUM` on integers).
    pub fn atomic_fetch_add(&self, off: usize, width: usize, v: u64) -> Option<u64> {
        on_element!(self, off, width, |c| c.add(v))
    }

    /// Atomically replaces the element at `off`, of value `old`, with the low `width` bytes of
    /// `f(old)`, retrying while other writers intervene (`f` may run several times, each time on
    /// the newest value). When `f` answers `None` nothing is stored: the call is then an atomic
    /// read, as for a compare-and-swap whose comparison fails. Returns the value replaced (or
    /// read).
    pub fn atomic_fetch_update(&self, off: usize, width: usize, f: impl FnMut(u64) -> Option<u64>) -> Option<u64> {
        on_element!(self, off, width, |c| fetch_update(c, f))
    }
}

fn fetch_update<A: Word>(cell: &A, mut f: impl FnMut(u64) -> Option<u64>) -> u64 {
    let mut cur = cell.get();
    loop {
        let Some(new) = f(cur) else { return cur };
        match cell.cas_weak(cur, new) {
            Ok(old) => return old,
            Err(now) => cur = now,
        }
    }
}

/// The lock's word: bit 63 marks a holder in exclusive mode, bit 62 a waiter for exclusive
/// mode, the bits below count holders in shared mode.
const EXCLUSIVE: u64 = 1 << 63;
const WRITER_WAITING: u64 = 1 << 62;

/// A reader-writer lock in one 8-byte word of (shared) memory; the word is 0 when unlocked, so
/// fresh shared memory holds an unlocked lock.
///
/// An exclusive locker that fails raises the writer-waiting bit, and from then on shared
/// lockers fail, so the holders in shared mode drain and a stream of new ones cannot starve it.
/// Releasing exclusive mode clears the whole word, the waiting bit included: shared lockers get
/// their turn between two exclusive holders, and a writer still waiting raises the bit again on
/// its next try. Hence the contract: **whoever got `false` from
/// [`try_lock_exclusive`](Self::try_lock_exclusive) keeps trying until it succeeds** (as
/// `MPI_Win_lock` does), or shared lockers would wait for an exclusive holder that never comes.
/// Exclusive lockers are not ordered among themselves.
#[derive(Clone, Copy)]
pub struct ShmLock<'a> {
    word: &'a AtomicU64,
}

impl<'a> ShmLock<'a> {
    pub fn new(word: &'a AtomicU64) -> ShmLock<'a> {
        ShmLock { word }
    }

    /// Takes the lock in shared mode, unless it is held or awaited in exclusive mode.
    pub fn try_lock_shared(&self) -> bool {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let mut s = self.word.load(Relaxed);
        loop {
            if s & (EXCLUSIVE | WRITER_WAITING) != 0 {
                return false;
            }
            // A CAS rather than an add: a reader must never touch the word while a writer holds
            // or awaits it, or its passing count could hide the moment the readers drained.
            match self.word.compare_exchange_weak(s, s + 1, Acquire, Relaxed) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Takes the lock in exclusive mode if nobody holds it; otherwise announces this waiter
    /// (see the type's contract) and fails.
    pub fn try_lock_exclusive(&self) -> bool {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let mut s = self.word.load(Relaxed);
        loop {
            let next = if s & !WRITER_WAITING == 0 { EXCLUSIVE } else { s | WRITER_WAITING };
            if next == s {
                return false;
            }
            match self.word.compare_exchange_weak(s, next, Acquire, Relaxed) {
                Ok(_) => return next == EXCLUSIVE,
                Err(now) => s = now,
            }
        }
    }

    /// Releases one hold in shared mode.
    pub fn unlock_shared(&self) {
        let was = self.word.fetch_sub(1, std::sync::atomic::Ordering::Release);
        debug_assert!(was & !(EXCLUSIVE | WRITER_WAITING) != 0, "unlock_shared of a lock not held shared");
    }

    /// Releases exclusive mode, clearing the waiting bit (see the type's doc). While a writer
    /// holds the lock nobody else changes the word except to raise that bit, so a plain store
    /// suffices.
    pub fn unlock_exclusive(&self) {
        debug_assert!(self.word.load(std::sync::atomic::Ordering::Relaxed) & EXCLUSIVE != 0);
        self.word.store(0, std::sync::atomic::Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    /// A span over `mem`, which outlives every use in these tests and is accessed only through
    /// the span meanwhile.
    fn span(mem: &mut [u64]) -> UserBuf {
        // SAFETY: see above.
        unsafe { UserBuf::new(mem.as_mut_ptr() as usize, std::mem::size_of_val(mem)) }
    }

    #[test]
    fn elements_in_native_order_zero_extended() {
        let mut mem = [0u64; 2];
        let b = span(&mut mem);
        b.write(0, &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        assert_eq!(b.atomic_load(0, 8), Some(u64::from_ne_bytes([0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])));
        assert_eq!(b.atomic_load(4, 4), Some(u32::from_ne_bytes([0x55, 0x66, 0x77, 0x88]) as u64));
        assert_eq!(b.atomic_load(2, 2), Some(u16::from_ne_bytes([0x33, 0x44]) as u64));
        assert_eq!(b.atomic_load(7, 1), Some(0x88));
        assert!(b.atomic_store(8, 2, 0xabcd_1234));
        assert_eq!(b.read(8, 2), 0x1234u16.to_ne_bytes(), "the low bytes of the value");
        assert_eq!(b.read(10, 6), [0; 6], "and no more");
        assert_eq!(b.atomic_swap(8, 2, 7), Some(0x1234));
        assert_eq!(b.atomic_fetch_add(8, 2, 0xffff), Some(7), "adds wrap at the width");
        assert_eq!(b.atomic_load(8, 2), Some(6));
        // Compare-and-swap as an update: the comparison fails, nothing is stored.
        assert_eq!(b.atomic_fetch_update(8, 2, |old| (old == 5).then_some(9)), Some(6));
        assert_eq!(b.atomic_load(8, 2), Some(6));
        assert_eq!(b.atomic_fetch_update(8, 2, |old| (old == 6).then_some(9)), Some(6));
        let mut wide = [0u8; 8];
        wide[..2].copy_from_slice(&9u16.to_ne_bytes());
        assert_eq!(b.atomic_load(8, 8), Some(u64::from_ne_bytes(wide)));
    }

    #[test]
    fn misaligned_or_outside_elements_are_refused() {
        let mut mem = [0u64; 2];
        let b = span(&mut mem);
        for (off, width) in [(1, 2), (2, 4), (4, 8), (16, 1), (15, 2), (12, 8), (usize::MAX, 1), (0, 3), (0, 16)] {
            assert_eq!(b.atomic_load(off, width), None, "off {off} width {width}");
            assert!(!b.atomic_store(off, width, u64::MAX));
            assert_eq!(b.atomic_fetch_update(off, width, |_| panic!("must not run")), None);
            assert_eq!(b.atomic_fetch_add(off, width, 1), None);
        }
        assert_eq!(mem, [0, 0], "nothing stored");
        let b = span(&mut mem).sub(1, 15);
        assert!(b.atomic_u64(7).is_some() && b.atomic_u64(0).is_none() && b.atomic_u64(15).is_none());
    }

    /// Threads hammer one counter of each width through the update loop and the single
    /// instructions; no increment may be lost.
    #[test]
    fn concurrent_updates_lose_nothing() {
        const THREADS: u64 = 4;
        const EACH: u64 = 20_000;
        let mut mem = [0u64; 4];
        let b = span(&mut mem);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for i in 0..EACH {
                        b.atomic_fetch_update(0, 8, |v| Some(v + 1)).unwrap();
                        b.atomic_fetch_update(8, 4, |v| Some(v + 2)).unwrap();
                        b.atomic_fetch_update(14, 2, |v| Some(v + 1)).unwrap();
                        b.atomic_fetch_add(16, 8, 3).unwrap();
                        b.atomic_fetch_update(31, 1, |v| Some(v + 1)).unwrap();
                        if i % 64 == t {
                            // Reads in between stay reads.
                            b.atomic_fetch_update(0, 8, |_| None).unwrap();
                        }
                    }
                });
            }
        });
        let n = THREADS * EACH;
        assert_eq!(b.atomic_load(0, 8), Some(n));
        assert_eq!(b.atomic_load(8, 4), Some(2 * n));
        assert_eq!(b.atomic_load(14, 2), Some(n % 65536));
        assert_eq!(b.atomic_load(16, 8), Some(3 * n));
        assert_eq!(b.atomic_load(31, 1), Some(n % 256));
    }

    #[test]
    fn a_waiting_writer_holds_off_new_readers() {
        let word = AtomicU64::new(0);
        let l = ShmLock::new(&word);
        assert!(l.try_lock_shared());
        assert!(l.try_lock_shared());
        assert!(!l.try_lock_exclusive(), "readers hold it");
        assert!(!l.try_lock_shared(), "a writer waits: new readers must wait too");
        l.unlock_shared();
        assert!(!l.try_lock_exclusive());
        l.unlock_shared();
        assert!(l.try_lock_exclusive());
        assert!(!l.try_lock_exclusive() && !l.try_lock_shared());
        l.unlock_exclusive();
        assert_eq!(word.load(Relaxed), 0, "releasing exclusive mode leaves the word unlocked");
        assert!(l.try_lock_shared(), "readers get their turn after a writer");
        l.unlock_shared();
        assert!(l.try_lock_exclusive());
        l.unlock_exclusive();
    }

    /// Threads take one lock in both modes at random; a writer must find no reader and no other
    /// writer inside, a reader no writer, and every writer's increment of a counter updated with
    /// separate load and store (lost without mutual exclusion) must count.
    #[test]
    fn concurrent_lockers_exclude_each_other() {
        const THREADS: usize = 4;
        const EACH: usize = 5_000;
        let mut mem = [0u64; 1];
        let b = span(&mut mem);
        let (readers, writers, counter) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        let exclusive_total = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (readers, writers, counter) = (&readers, &writers, &counter);
                    s.spawn(move || {
                        let l = ShmLock::new(b.atomic_u64(0).unwrap());
                        let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
                        let mut mine = 0;
                        for _ in 0..EACH {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            if rng.is_multiple_of(4) {
                                while !l.try_lock_exclusive() {
                                    std::thread::yield_now();
                                }
                                assert_eq!(writers.fetch_add(1, Relaxed), 0);
                                assert_eq!(readers.load(Relaxed), 0);
                                let c = counter.load(Relaxed);
                                // Stay inside long enough for the others to try (2 cores may
                                // run all of them).
                                std::thread::yield_now();
                                assert_eq!(readers.load(Relaxed), 0);
                                counter.store(c + 1, Relaxed);
                                writers.fetch_sub(1, Relaxed);
                                l.unlock_exclusive();
                                mine += 1;
                            } else {
                                while !l.try_lock_shared() {
                                    std::thread::yield_now();
                                }
                                readers.fetch_add(1, Relaxed);
                                assert_eq!(writers.load(Relaxed), 0);
                                std::thread::yield_now();
                                assert_eq!(writers.load(Relaxed), 0);
                                readers.fetch_sub(1, Relaxed);
                                l.unlock_shared();
                            }
                        }
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        assert!(exclusive_total > 0);
        assert_eq!(counter.load(Relaxed), exclusive_total);
        assert_eq!(mem[0], 0, "every hold released");
    }

    /// A reader that renews its hold hand over hand (a new hold before dropping the old one,
    /// so the shared count never drops to zero by itself) cannot keep a writer out.
    #[test]
    fn renewing_readers_do_not_starve_a_writer() {
        use std::sync::atomic::AtomicBool;
        let word = AtomicU64::new(0);
        let (holding, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        let writer_got_in = std::thread::scope(|s| {
            s.spawn(|| {
                let l = ShmLock::new(&word);
                let mut held = false;
                while !stop.load(Relaxed) {
                    let renewed = l.try_lock_shared();
                    if held {
                        l.unlock_shared();
                    }
                    held = renewed;
                    holding.fetch_or(renewed, Relaxed);
                    std::thread::yield_now();
                }
                if held {
                    l.unlock_shared();
                }
            });
            while !holding.load(Relaxed) {
                std::thread::yield_now();
            }
            let l = ShmLock::new(&word);
            let start = std::time::Instant::now();
            let mut got = false;
            while !got && start.elapsed() < std::time::Duration::from_secs(10) {
                got = l.try_lock_exclusive();
                std::thread::yield_now();
            }
            if got {
                l.unlock_exclusive();
            }
            // Stopped before asserting: the scope joins the reader even when a test fails.
            stop.store(true, Relaxed);
            got
        });
        assert!(writer_got_in, "a renewing reader starved the writer");
        assert_eq!(word.load(Relaxed), 0);
    }
}
