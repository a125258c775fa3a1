//! `mpiexec --singleton-server JOB_ID PID`: serves an MPI process that was
//! started without mpiexec (a *singleton*) once it wants to spawn.
//!
//! The MPI library starts this mode on the singleton's first
//! `MPI_Comm_spawn`. The singleton becomes the only rank of job `JOB_ID`
//! (mpiexec's first job, of size 1): mpiexec serves that job's bootstrap
//! requests, so spawn, finalize and abort work exactly as in a single-host
//! run, and the jobs it spawns are run as for a rank mpiexec had started.
//!
//! What the library relies on:
//! * the job secret, 64 hex digits and a newline, arrives on stdin (never
//!   on the command line, which `ps` shows); stdin is not read further;
//! * the bootstrap address, `127.0.0.1:PORT` and a newline, is written to
//!   descriptor 3 in one write, and descriptor 3 is closed;
//! * stdout and stderr are the singleton's own, so spawned jobs' output
//!   appears where the singleton's does;
//! * every other inherited descriptor is closed at once, so that nothing
//!   the singleton left inheritable is held here or passed to spawned jobs.
//!
//! The singleton is not mpiexec's child, so it is neither reaped nor ever
//! signalled: its rank has pid 0, which [`sys::kill_group`] skips. It is
//! gone when its process ends (seen through a pidfd) or its bootstrap
//! connection closes. After `MPI_Finalize` it needs nothing more, whether
//! it still runs or not: mpiexec exits 0 once the spawned jobs are over,
//! so the library may wait for mpiexec in `MPI_Finalize`. Gone without
//! finalizing is a crash: the spawned jobs are ended like a failed job
//! (SIGTERM, SIGKILL after the grace) and mpiexec exits 1. Any other
//! failure (`MPI_Abort` anywhere, a signal to mpiexec) ends the spawned
//! jobs and mpiexec exits without waiting for the singleton, which must
//! end by itself (`PmiClient::request_abort` does not wait to be killed);
//! only after the singleton's own abort does mpiexec wait for it a little,
//! so that the acknowledgement surely reaches it.

use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use baton_pmi::server::{PmiServer, ServerConfig};
use baton_settings::protocol as proto;

use crate::{comm_spawn, sys, Event, Job, Rank, KILL_GRACE};

/// Where the library reads the bootstrap address.
const ADDR_FD: RawFd = 3;
/// The library writes the secret right after starting us.
const SECRET_WAIT: Duration = Duration::from_secs(10);
/// Exit status when the singleton is gone without finalizing.
const LOST_STATUS: i32 = 1;
/// How long a closed connection waits for the process's end: a dying
/// process's socket closes just before the pidfd reports the exit, and
/// "ended" is the better explanation then.
const CLOSE_VERDICT_WAIT: Duration = Duration::from_millis(200);

/// The external rank 0.
pub struct Singleton {
    pid: i32,
    /// Its connection closed before `MPI_Finalize`: when to say so if the
    /// process has not ended by then.
    verdict_at: Option<Instant>,
    /// It called `MPI_Abort`: until when mpiexec waits for it to go.
    abort_wait: Option<Instant>,
}

impl Singleton {
    /// When the event loop must look at the singleton again.
    pub fn deadline(&self) -> Option<Instant> {
        self.verdict_at.into_iter().chain(self.abort_wait).min()
    }
}

const USAGE: &str = "usage: mpiexec --singleton-server JOB_ID PID (for the MPI library's own use)";

/// Entry point of `mpiexec --singleton-server ...`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    // First, before anything here opens a descriptor of its own.
    sys::close_fds_from(ADDR_FD as u32 + 1);
    match serve(args) {
        Ok(status) => status,
        Err((msg, status)) => {
            say!("mpiexec --singleton-server: {msg}");
            status
        }
    }
}

fn serve(args: &[String]) -> Result<i32, (String, i32)> {
    let [job_id, pid] = args else { return Err((USAGE.into(), 2)) };
    let job_id: u64 = job_id.parse().map_err(|_| (format!("JOB_ID '{job_id}' is not a decimal number"), 2))?;
    let pid: i32 = match pid.parse() {
        Ok(p) if p > 0 => p,
        _ => return Err((format!("PID '{pid}' is not a process id"), 2)),
    };
    // Read before anything else can fail, so that the library's write
    // does not meet a closed pipe.
    let secret = sys::read_secret(SECRET_WAIT, "job secret").map_err(|e| (e, 2))?;
    let addr_pipe = take_addr_fd()?;
    let universe_size = universe_size()?;

    let (tx, rx) = mpsc::channel::<Event>();
    sys::watch_process(pid, tx.clone()).map_err(|e| match e.raw_os_error() {
        Some(libc::ESRCH) => (format!("there is no process {pid}"), 2),
        _ => (format!("cannot watch process {pid}: {}", sys::describe_io_error(&e)), 1),
    })?;
    sys::install_signal_forwarder(tx.clone()).map_err(|e| (format!("cannot set up signal handling: {e}"), 1))?;
    let pmi_tx = tx.clone();
    let server = PmiServer::start(ServerConfig::whole_job(1, job_id, secret.clone()), move |e| {
        let _ = pmi_tx.send(Event::Pmi(0, e));
    })
    .map_err(|e| (format!("cannot open the bootstrap socket: {e}"), 1))?;
    // One write, so the library can never read half a line.
    let line = format!("{}\n", server.addr());
    (&addr_pipe)
        .write_all(line.as_bytes())
        .map_err(|e| (format!("cannot write the address to descriptor {ADDR_FD}: {e}"), 1))?;
    // Closed before any spawn, so no spawned process inherits it.
    drop(addr_pipe);

    sys::start_reaper(tx.clone());
    // The singleton's output is its own business; job 0 has none to drain.
    let _ = tx.send(Event::OutputDone(0));
    let node = sys::hostname();
    let inherited = comm_spawn::Inherited { genv: Vec::new(), universe_size, node: node.clone(), tag_output: false };
    let spawner = comm_spawn::Spawner::new(tx, server, secret, inherited);
    let rank = Rank { pid: 0, node: 0, connected: false, finalized: false, exited: false };
    let mut job = Job::new(vec![rank], vec![node], None, None);
    job.spawner = Some(spawner);
    job.singleton = Some(Singleton { pid, verdict_at: None, abort_wait: None });
    Ok(job.run(&rx))
}

/// Descriptor 3, checked to be open for writing.
fn take_addr_fd() -> Result<File, (String, i32)> {
    // SAFETY: F_GETFL on a plain integer; a closed descriptor yields EBADF.
    let flags = unsafe { libc::fcntl(ADDR_FD, libc::F_GETFL) };
    if flags < 0 {
        return Err((
            format!("descriptor {ADDR_FD} is not open: the MPI library passes a pipe there for the address; {USAGE}"),
            2,
        ));
    }
    if flags & libc::O_ACCMODE == libc::O_RDONLY {
        return Err((format!("descriptor {ADDR_FD} is not open for writing"), 2));
    }
    // SAFETY: the descriptor is open (checked above), was handed to us for
    // this one use, and nothing else in this process owns it.
    Ok(unsafe { File::from_raw_fd(ADDR_FD) })
}

/// `BATON_UNIVERSE_SIZE` if the singleton has it, else 1.
fn universe_size() -> Result<u32, (String, i32)> {
    let Some(v) = std::env::var_os(proto::UNIVERSE_SIZE.name) else { return Ok(1) };
    match v.to_str().and_then(|s| s.trim().parse::<u32>().ok()) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err((format!("{}={v:?} is not a positive number", proto::UNIVERSE_SIZE.name), 2)),
    }
}

impl Job {
    /// Whether the first job no longer holds mpiexec back.
    pub(crate) fn first_job_over(&self) -> bool {
        if self.ranks.iter().all(|r| r.exited) {
            return true;
        }
        // A failure ends what mpiexec started; a singleton is not its to end
        // or to wait for, except briefly after its own MPI_Abort.
        self.singleton.as_ref().is_some_and(|s| self.failure.is_some() && s.abort_wait.is_none())
    }

    /// The singleton called MPI_Abort: it ends by itself once it has the
    /// acknowledgement, which mpiexec's exit must not overtake.
    pub(crate) fn singleton_aborts(&mut self) {
        if let Some(s) = &mut self.singleton {
            s.abort_wait.get_or_insert(Instant::now() + KILL_GRACE);
        }
    }

    /// The singleton's process ended, or (`disconnected`) its bootstrap
    /// connection closed. Ignored outside singleton mode (a rank mpiexec
    /// started is judged by its exit status) and once the singleton has
    /// finalized.
    pub(crate) fn singleton_gone(&mut self, disconnected: bool) {
        let Some(s) = &mut self.singleton else { return };
        if self.ranks[0].exited {
            return;
        }
        if self.failure.is_some() {
            // Expected while everything ends; the cause is reported already.
            self.ranks[0].exited = true;
            s.abort_wait = None;
            s.verdict_at = None;
        } else if disconnected {
            s.verdict_at.get_or_insert(Instant::now() + CLOSE_VERDICT_WAIT);
        } else {
            self.singleton_lost("ended");
        }
    }

    pub(crate) fn singleton_tick(&mut self, now: Instant) {
        let Some(s) = &mut self.singleton else { return };
        if s.abort_wait.is_some_and(|t| now >= t) {
            s.abort_wait = None;
        }
        if s.verdict_at.is_some_and(|t| now >= t) {
            s.verdict_at = None;
            // The connection closed a while ago and the process still runs.
            if !self.ranks[0].exited {
                self.singleton_lost("closed its bootstrap connection");
            }
        }
    }

    fn singleton_lost(&mut self, how: &str) {
        let Some(s) = &mut self.singleton else { return };
        s.verdict_at = None;
        self.ranks[0].exited = true;
        let msg = format!("the singleton process {} {how} without MPI_Finalize; ending the jobs it spawned", s.pid);
        self.fail(LOST_STATUS, &msg);
    }
}
