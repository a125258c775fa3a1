//! Forwarding of the ranks' stdout/stderr (and rank 0's stdin).
//!
//! A single thread polls every rank's output pipes ([`Source`]) and writes
//! only whole lines to mpiexec's own stdout/stderr, so lines from different
//! ranks never interleave. A partial line is held back until its newline
//! arrives, unless it sits unfinished for [`PARTIAL_FLUSH_AFTER`] (a prompt)
//! or grows beyond [`MAX_HELD`], in which case it is written as is.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

const PARTIAL_FLUSH_AFTER: Duration = Duration::from_millis(100);
const MAX_HELD: usize = 1 << 20;
const READ_CHUNK: usize = 64 << 10;

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
