//! Futex waits and wakes on a 32-bit word, private or in shared memory.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, at most `timeout`. Spurious returns are allowed.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts =
        libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: `word` is a valid, aligned 32-bit atomic for the duration of the call; a shared
    // (non-private) futex so that other processes mapping the same page can wake us.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts, 0, 0);
    }
}

/// Wakes every sleeper on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: as above; FUTEX_WAKE only reads the address as a key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, 0, 0, 0);
    }
}
