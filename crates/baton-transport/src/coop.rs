//! Shared copying of a large rendezvous message.
//!
//! A single-copy transfer (`process_vm_readv`) is one core's copy, while the sender of a large
//! message usually sits in a wait for it with its own core idle. So the receiver splits the
//! message into chunks and invites the sender to write some of them into the receive buffer
//! (`process_vm_writev`) while it reads the others. Both sides take the next chunk from one
//! counter in shared memory, a [`CoopSlot`]: a sender busy elsewhere simply takes none and the
//! receiver copies everything, as before; two idle sides finish in about half the time.
//!
//! One slot per ordered pair of processes (in the control block of the pair's ring) serves one
//! transfer at a time; a transfer's sequence number, carried by every counter, keeps a late
//! helper of an earlier transfer from touching the current one.

use std::sync::atomic::{AtomicU64, Ordering};

/// The counters of a cooperative transfer, in memory both processes map.
#[repr(C, align(64))]
#[derive(Default)]
pub struct CoopSlot {
    /// (sequence << 32) | next chunk nobody has taken.
    claim: AtomicU64,
    /// (sequence << 32) | chunks the helper (the sender) finished.
    helped: AtomicU64,
    /// (sequence << 32) | (chunk the helper failed to write + 1), or 0. The helper stops at its
    /// first failure, so there is at most one.
    failed: AtomicU64,
}

fn word(seq: u32, low: u32) -> u64 {
    ((seq as u64) << 32) | low as u64
}

impl CoopSlot {
    /// Starts transfer `seq` with chunks from `first` on still to take (receiver side, before it
    /// invites the helper: the invitation's release publishes these stores).
    pub fn begin(&self, seq: u32, first: u32) {
        self.failed.store(0, Ordering::Relaxed);
        self.helped.store(word(seq, 0), Ordering::Relaxed);
        self.claim.store(word(seq, first), Ordering::Release);
    }

    /// Closes transfer `seq` if nobody has taken a chunk of it yet (an offered receive that is
    /// being cancelled); false if someone has.
    pub fn close_untouched(&self, seq: u32) -> bool {
        self.claim.compare_exchange(word(seq, 0), word(seq, u32::MAX), Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes the next chunk of transfer `seq` (of `chunks`), if any is left.
    pub fn claim(&self, seq: u32, chunks: u32) -> Option<u32> {
        self.claim_run(seq, chunks, 1).map(|(c, _)| c)
    }

    /// Takes up to `want` consecutive chunks of transfer `seq`: the first and how many.
    pub fn claim_run(&self, seq: u32, chunks: u32, want: u32) -> Option<(u32, u32)> {
        let mut w = self.claim.load(Ordering::Acquire);
        loop {
            let next = w as u32;
            if (w >> 32) as u32 != seq || next >= chunks {
                return None;
            }
            let k = want.clamp(1, chunks - next);
            match self.claim.compare_exchange_weak(w, w + k as u64, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some((next, k)),
                Err(now) => w = now,
            }
        }
    }

    /// The helper finished one chunk of transfer `seq` (its bytes are in place: release).
    pub fn helped_one(&self, seq: u32) {
        let mut w = self.helped.load(Ordering::Relaxed);
        while (w >> 32) as u32 == seq {
            match self.helped.compare_exchange_weak(w, w + 1, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }

    /// The helper could not write `chunk` of transfer `seq` and takes no more.
    pub fn help_failed(&self, seq: u32, chunk: u32) {
        self.failed.store(word(seq, chunk + 1), Ordering::Release);
    }

    /// Takes over the chunk of transfer `seq` the helper could not write, if there is one
    /// (receiver side; it is then this side's to copy).
    pub fn take_failed(&self, seq: u32) -> Option<u32> {
        let w = self.failed.load(Ordering::Acquire);
        if (w >> 32) as u32 != seq || w as u32 == 0 {
            return None;
        }
        self.failed.compare_exchange(w, 0, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| w as u32 - 1)
    }

    /// Chunks of transfer `seq` the helper finished (acquire: their bytes are visible).
    pub fn helped(&self, seq: u32) -> u32 {
        let w = self.helped.load(Ordering::Acquire);
        if (w >> 32) as u32 == seq {
            w as u32
        } else {
            0
        }
    }

    /// The chunk of transfer `seq` the helper took but could not write.
    pub fn failed(&self, seq: u32) -> Option<u32> {
        let w = self.failed.load(Ordering::Acquire);
        ((w >> 32) as u32 == seq && w as u32 != 0).then(|| w as u32 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_taken_once_and_stale_sequences_are_ignored() {
        let s = CoopSlot::default();
        s.begin(7, 1);
        assert_eq!(s.claim(7, 3), Some(1));
        assert_eq!(s.claim(6, 3), None, "an earlier transfer's helper takes nothing");
        assert_eq!(s.claim(7, 3), Some(2));
        assert_eq!(s.claim(7, 3), None);
        s.begin(7, 1);
        assert_eq!(s.claim_run(7, 5, 3), Some((1, 3)));
        assert_eq!(s.claim_run(7, 5, 3), Some((4, 1)), "a run stops at the last chunk");
        assert_eq!(s.claim_run(7, 5, 3), None);
        s.helped_one(6);
        assert_eq!(s.helped(7), 0);
        s.helped_one(7);
        assert_eq!(s.helped(7), 1);
        assert_eq!(s.failed(7), None);
        s.help_failed(7, 2);
        assert_eq!(s.failed(7), Some(2));
        assert_eq!(s.take_failed(6), None);
        assert_eq!(s.take_failed(7), Some(2));
        assert_eq!(s.take_failed(7), None, "a failed chunk is taken over once");
        s.help_failed(7, 2);
        s.begin(8, 0);
        assert_eq!((s.helped(8), s.failed(8)), (0, None), "a new transfer starts clean");
    }

    #[test]
    fn two_threads_share_the_chunks() {
        let s = std::sync::Arc::new(CoopSlot::default());
        s.begin(1, 0);
        let t = {
            let s = s.clone();
            std::thread::spawn(move || std::iter::from_fn(|| s.claim(1, 10_000)).collect::<Vec<_>>())
        };
        let mine: Vec<u32> = std::iter::from_fn(|| s.claim(1, 10_000)).collect();
        let mut all = t.join().unwrap();
        all.extend(mine);
        all.sort_unstable();
        assert_eq!(all, (0..10_000).collect::<Vec<_>>());
    }
}
