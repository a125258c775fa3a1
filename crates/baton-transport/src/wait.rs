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

/// Sleeps until any of `words` differs from its expected value (or is woken), at most
/// `timeout`. Uses `futex_waitv` (Linux 5.16); on older kernels sleeps on the first word for at
/// most a millisecond, so the others are still noticed soon.
pub fn futex_wait_any(words: &[(&AtomicU32, u32)], timeout: Duration) {
    #[repr(C)]
    struct WaitV {
        val: u64,
        uaddr: u64,
        flags: u32,
        reserved: u32,
    }
    const FUTEX_32: u32 = 2;
    const SYS_FUTEX_WAITV: libc::c_long = 449;
    if words.len() == 1 || !cfg!(target_arch = "x86_64") && !cfg!(target_arch = "aarch64") {
        futex_wait(words[0].0, words[0].1, timeout);
        return;
    }
    let v: Vec<WaitV> = words
        .iter()
        .map(|(w, e)| WaitV { val: *e as u64, uaddr: w.as_ptr() as u64, flags: FUTEX_32, reserved: 0 })
        .collect();
    // SAFETY: clock_gettime into a zeroed timespec we own.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let end = Duration::new(now.tv_sec as u64, now.tv_nsec as u32) + timeout;
    let ts = libc::timespec { tv_sec: end.as_secs() as libc::time_t, tv_nsec: end.subsec_nanos() as libc::c_long };
    // SAFETY: `v` holds valid, aligned 32-bit futex words (shared: no private flag) for the
    // duration of the call; the timeout is absolute on CLOCK_MONOTONIC as the call requires.
    let r = unsafe { libc::syscall(SYS_FUTEX_WAITV, v.as_ptr(), v.len() as u32, 0u32, &ts, libc::CLOCK_MONOTONIC) };
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        futex_wait(words[0].0, words[0].1, timeout.min(Duration::from_millis(1)));
    }
}
