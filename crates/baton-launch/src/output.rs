//! Forwarding of the ranks' stdout/stderr (and rank 0's stdin).
//!
//! A single thread polls every rank's output pipes ([`Source`]) and writes
//! only whole lines to mpiexec's own stdout/stderr, so lines from different
//! ranks never interleave. A partial line is held back until its newline
//! arrives, unless it sits unfinished for [`PARTIAL_FLUSH_AFTER`] (a prompt)
//! or grows beyond [`MAX_HELD`], in which case it is written as is.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

const PARTIAL_FLUSH_AFTER: Duration = Duration::from_millis(100);
const MAX_HELD: usize = 1 << 20;
const READ_CHUNK: usize = 64 << 10;

/// Bytes of output a proxy may have sent towards mpiexec that mpiexec has not
/// yet written out. Enough to keep the stream going while acknowledgements
/// travel; little enough that a stalled reader of mpiexec's stdout costs
/// memory per host, not per byte the ranks print.
pub const OUTPUT_WINDOW: u64 = 4 << 20;
/// Largest piece of output per message, well below the frame limit.
pub const OUTPUT_PIECE: usize = 1 << 20;
/// mpiexec acknowledges a host's output once this much is written, not
/// every message (an acknowledgement per message cost a fifth of the rate).
/// What it holds back plus one piece must fit the window, or a proxy could
/// wait for bytes that are never acknowledged.
pub const OUTPUT_ACK_EVERY: u64 = 1 << 20;
const _: () = assert!(OUTPUT_ACK_EVERY + OUTPUT_PIECE as u64 <= OUTPUT_WINDOW);

/// A proxy's output in flight: taken when a piece goes up, given back when
/// mpiexec acknowledges it (`TreeMsg::OutputAck`). The output thread waits
/// here, stops draining the ranks' pipes, and so the ranks' writes block:
/// the back-pressure of a local pipe, carried across the tree.
#[derive(Default)]
pub struct OutputWindow {
    in_flight: Mutex<u64>,
    freed: Condvar,
}

impl OutputWindow {
    /// Waits until `n` more bytes fit (a piece larger than the window goes
    /// when nothing else is in flight). Returns false, without taking, once
    /// `gone()` says the acknowledgements will never come.
    pub fn take(&self, n: u64, gone: impl Fn() -> bool) -> bool {
        let mut f = self.in_flight.lock().unwrap();
        while *f > 0 && *f + n > OUTPUT_WINDOW {
            if gone() {
                return false;
            }
            // Timed, so that a lost link (which gives nothing back) is noticed.
            f = self.freed.wait_timeout(f, Duration::from_millis(100)).unwrap().0;
        }
        *f += n;
        true
    }

    pub fn give(&self, n: u64) {
        let mut f = self.in_flight.lock().unwrap();
        *f = f.saturating_sub(n);
        self.freed.notify_all();
    }
}

/// One output pipe of one rank.
pub struct Source {
    fd: std::fs::File,
    prefix: Vec<u8>,
    is_stderr: bool,
    held: Vec<u8>,
    held_since: Option<Instant>,
    /// Whether the next byte written starts a line (and so needs the prefix).
    at_line_start: bool,
}

impl Source {
    pub fn new(fd: OwnedFd, rank: u32, is_stderr: bool, tag: bool) -> Source {
        Source {
            fd: std::fs::File::from(fd),
            prefix: if tag { format!("[{rank}] ").into_bytes() } else { Vec::new() },
            is_stderr,
            held: Vec::new(),
            held_since: None,
            at_line_start: true,
        }
    }

    /// Moves complete lines (or everything, when `all`) from `held` into
    /// `out`, prefixing each line start.
    fn drain_into(&mut self, out: &mut Vec<u8>, all: bool) {
        let end = if all {
            self.held.len()
        } else {
            match self.held.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => return,
            }
        };
        for piece in self.held[..end].split_inclusive(|&b| b == b'\n') {
            if self.at_line_start {
                out.extend_from_slice(&self.prefix);
            }
            out.extend_from_slice(piece);
            self.at_line_start = piece.ends_with(b"\n");
        }
        self.held.drain(..end);
        self.held_since = if self.held.is_empty() { None } else { Some(Instant::now()) };
    }
}

fn emit(is_stderr: bool, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    // Write errors (a closed terminal, `| head`) are ignored on purpose: the
    // pipes must keep being drained so ranks never block on output.
    if is_stderr {
        let mut e = io::stderr().lock();
        let _ = e.write_all(bytes).and_then(|()| e.flush());
    } else {
        let mut o = io::stdout().lock();
        let _ = o.write_all(bytes).and_then(|()| o.flush());
    }
}

/// Writes to mpiexec's own stdout or stderr.
pub fn emit_local(is_stderr: bool, bytes: &[u8]) {
    emit(is_stderr, bytes)
}

/// Forwards until every source reached end of file, handing whole lines
/// (prefixed when tagging) to `sink(is_stderr, bytes)`: [`emit_local`] in
/// mpiexec, a message to the parent in a proxy.
pub fn forward(mut sources: Vec<Source>, mut sink: impl FnMut(bool, &[u8])) {
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut out = Vec::new();
    while !sources.is_empty() {
        let mut pfds: Vec<libc::pollfd> =
            sources.iter().map(|s| libc::pollfd { fd: s.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
        let timeout_ms = if sources.iter().any(|s| s.held_since.is_some()) {
            (PARTIAL_FLUSH_AFTER.as_millis() / 2) as libc::c_int
        } else {
            -1
        };
        // SAFETY: pfds is a valid, initialized array of pfds.len() entries
        // that lives across the call.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
        let mut closed = Vec::new();
        for (i, pfd) in pfds.iter().enumerate() {
            if n <= 0 || pfd.revents == 0 {
                continue;
            }
            let src = &mut sources[i];
            match src.fd.read(&mut chunk) {
                Ok(0) => closed.push(i),
                Ok(k) => {
                    if src.held.is_empty() {
                        src.held_since = Some(Instant::now());
                    }
                    src.held.extend_from_slice(&chunk[..k]);
                    out.clear();
                    let overflow = src.held.len() > MAX_HELD;
                    src.drain_into(&mut out, overflow);
                    if !out.is_empty() {
                        sink(src.is_stderr, &out);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => closed.push(i),
            }
        }
        let now = Instant::now();
        for (i, src) in sources.iter_mut().enumerate() {
            let stale = src.held_since.is_some_and(|t| now.duration_since(t) >= PARTIAL_FLUSH_AFTER);
            if stale || closed.contains(&i) {
                out.clear();
                src.drain_into(&mut out, true);
                if !out.is_empty() {
                    sink(src.is_stderr, &out);
                }
            }
        }
        for i in closed.into_iter().rev() {
            sources.swap_remove(i);
        }
    }
}

/// Copies mpiexec's stdin to rank 0 until either side closes.
pub fn forward_stdin(mut to: impl Write) {
    read_stdin(|chunk| to.write_all(chunk).is_ok());
}

/// Reads mpiexec's stdin in chunks until EOF or until `each` returns false.
pub fn read_stdin(mut each: impl FnMut(&[u8]) -> bool) {
    let mut stdin = io::stdin().lock();
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if !each(&buf[..n]) {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn window_holds_the_writer_until_acknowledged() {
        let w = Arc::new(OutputWindow::default());
        assert!(w.take(OUTPUT_WINDOW - 10, || false));
        let sent = Arc::new(AtomicU64::new(0));
        let (w2, sent2) = (Arc::clone(&w), Arc::clone(&sent));
        let writer = std::thread::spawn(move || {
            assert!(w2.take(100, || false));
            sent2.store(100, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(sent.load(Ordering::SeqCst), 0, "went past a full window");
        w.give(OUTPUT_WINDOW - 10);
        writer.join().unwrap();
        assert_eq!(sent.load(Ordering::SeqCst), 100);
        // A piece bigger than the window goes alone.
        w.give(100);
        assert!(w.take(3 * OUTPUT_WINDOW, || false));
        // A lost link ends the wait without taking.
        let gone = AtomicBool::new(false);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                gone.store(true, Ordering::SeqCst);
            });
            assert!(!w.take(1, || gone.load(Ordering::SeqCst)));
        });
        assert!(t0.elapsed() < Duration::from_secs(2));
    }
}
