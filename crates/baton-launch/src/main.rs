//! `mpiexec` (also installed as `mpirun`): Baton's single-host launcher.
//!
//! [`cli`] parses the command line; [`spawn_ranks`] forks the ranks (own
//! process group, parent-death signal, inherited job memfd); [`output`]
//! forwards their output; a [`baton_pmi::server::PmiServer`] answers their
//! bootstrap requests. Everything that can happen — a rank exiting, a PMI
//! event, a signal to mpiexec, output reaching EOF — becomes an [`Event`] on
//! one channel consumed by [`Job::run`], which decides the job's fate.

mod cli;
mod output;
mod sys;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use baton_pmi::auth::Secret;
use baton_pmi::env_names as ev;
use baton_pmi::server::{PmiServer, ServerConfig, ServerEvent};

const VERSION_LINE: &str = "Baton mpiexec 0.1.0";
/// How long ranks get between SIGTERM (or a forwarded signal) and SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// How long to keep forwarding output of a failed job after all ranks died.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Everything the job's main loop reacts to.
enum Event {
    Pmi(ServerEvent),
    /// A child was reaped: pid and raw wait status.
    Exited(i32, i32),
    Signal(i32),
    OutputDone,
}

fn main() {
    let args: Vec<String> = match std::env::args_os().skip(1).map(OsString::into_string).collect() {
        Ok(a) => a,
        Err(bad) => {
            eprintln!("mpiexec: argument {bad:?} is not valid UTF-8");
            std::process::exit(2);
        }
    };
    let env_timeout = std::env::var("MPIEXEC_TIMEOUT").ok();
    let host = sys::hostname();
    let is_local = |h: &str| sys::is_local_host(h, &host);
    let opts = match cli::parse(&args, env_timeout.as_deref(), &is_local) {
        Ok(cli::Command::Run(o)) => o,
        Ok(cli::Command::Help) => {
            println!("{}", cli::USAGE);
            return;
        }
        Ok(cli::Command::Version) => {
            println!("{VERSION_LINE}");
            return;
        }
        Err(e) => {
            eprintln!("mpiexec: {}", e.msg);
            std::process::exit(e.status);
        }
    };
    let status = match launch(&opts, host) {
        Ok(s) => s,
        Err((msg, status)) => {
            eprintln!("mpiexec: {msg}");
            status
        }
    };
    std::process::exit(status);
}

/// Per-rank bookkeeping.
struct Rank {
    pid: i32,
    connected: bool,
    finalized: bool,
    exited: bool,
}

fn launch(opts: &cli::Options, host: String) -> Result<i32, (String, i32)> {
    let size: u32 = opts.segments.iter().map(|s| s.nprocs).sum();
    let job_id = sys::random_job_id().map_err(|e| (e, 1))?;
    let secret = Secret::generate().map_err(|e| (e.to_string(), 1))?;
    for seg in &opts.segments {
        if let Some(dir) = seg.wdir.as_ref().or(opts.gwdir.as_ref()) {
            if !dir.is_dir() {
                return Err((format!("cannot use working directory '{}': not a directory", dir.display()), 2));
            }
        }
    }

    let (tx, rx) = mpsc::channel::<Event>();
    // Signals are caught from here on; the children reset them before exec.
    sys::install_signal_forwarder(tx.clone()).map_err(|e| (format!("cannot set up signal handling: {e}"), 1))?;

    let pmi_tx = tx.clone();
    let server = PmiServer::start(ServerConfig::whole_job(size, job_id, secret.clone()), move |e| {
        let _ = pmi_tx.send(Event::Pmi(e));
    })
    .map_err(|e| (format!("cannot open the bootstrap socket: {e}"), 1))?;
    let memfd =
        sys::create_job_memfd(job_id).map_err(|e| (format!("cannot create the job's shared-memory fd: {e}"), 1))?;

    let base_env = JobEnv {
        addr: server.addr().to_string(),
        job_id,
        size,
        secret_hex: secret.to_hex(),
        shm_fd: memfd.as_raw_fd(),
    };
    let spawned = spawn_ranks(opts, &base_env, &memfd);
    let (ranks, sources, stdin_pipe, spawn_error) = spawned;

    // Reaping starts only now: std reaps a child whose exec failed itself,
    // and a concurrent waitpid(-1) could steal that status.
    sys::start_reaper(tx.clone());
    if !sources.is_empty() {
        let out_tx = tx.clone();
        thread::Builder::new()
            .name("output".into())
            .spawn(move || {
                output::forward(sources);
                let _ = out_tx.send(Event::OutputDone);
            })
            .map_err(|e| (format!("cannot start the output thread: {e}"), 1))?;
    } else {
        let _ = tx.send(Event::OutputDone);
    }
    if let Some(pipe) = stdin_pipe {
        let _ = thread::Builder::new().name("stdin".into()).spawn(move || output::forward_stdin(pipe));
    }
    drop(tx);

    let mut job = Job {
        by_pid: ranks.iter().enumerate().map(|(r, rk)| (rk.pid, r)).collect(),
        ranks,
        host,
        failure: None,
        late_status: None,
        kill_at: None,
        signals_seen: 0,
        timeout: opts.timeout,
        output_done: false,
        drain_until: None,
    };
    if let Some((msg, status)) = spawn_error {
        job.fail(status, &msg);
    }
    // The memfd stays open in mpiexec until exit, so ranks started later
    // (spawn) could still receive it; dropping it is harmless either way.
    let status = job.run(&rx);
    drop(memfd);
    Ok(status)
}

/// Values common to every rank's environment.
struct JobEnv {
    addr: String,
    job_id: u64,
    size: u32,
    secret_hex: String,
    shm_fd: i32,
}

type Spawned = (Vec<Rank>, Vec<output::Source>, Option<std::process::ChildStdin>, Option<(String, i32)>);

/// Starts every rank in order; stops at the first one that cannot start and
/// reports it (the caller then ends the job).
fn spawn_ranks(opts: &cli::Options, env: &JobEnv, memfd: &OwnedFd) -> Spawned {
    let mut ranks = Vec::new();
    let mut sources = Vec::new();
    let mut stdin_pipe = None;
    let forward_stdin = sys::may_read_stdin();
    let parent = std::process::id() as i32;
    let memfd = memfd.as_raw_fd();
    let mut rank: u32 = 0;
    for (appnum, seg) in opts.segments.iter().enumerate() {
        for _ in 0..seg.nprocs {
            let mut cmd = Command::new(&seg.program);
            cmd.args(&seg.args);
            for (k, v) in opts.genv.iter().chain(seg.env.iter()) {
                cmd.env(k, v);
            }
            cmd.env(ev::ADDR, &env.addr)
                .env(ev::JOB_ID, env.job_id.to_string())
                .env(ev::RANK, rank.to_string())
                .env(ev::SIZE, env.size.to_string())
                .env(ev::APPNUM, appnum.to_string())
                .env(ev::UNIVERSE_SIZE, env.size.to_string())
                .env(ev::SECRET, &env.secret_hex)
                .env(ev::SHM_FD, env.shm_fd.to_string())
                .env(ev::LOCAL_RANK, rank.to_string())
                .env(ev::LOCAL_SIZE, env.size.to_string());
            if let Some(dir) = seg.wdir.as_ref().or(opts.gwdir.as_ref()) {
                cmd.current_dir(dir);
            }
            cmd.stdin(if rank == 0 && forward_stdin { Stdio::piped() } else { Stdio::null() });
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.process_group(0);
            // SAFETY: the closure only makes async-signal-safe system calls
            // (sigaction, prctl, getppid, fcntl) and allocates nothing.
            unsafe {
                cmd.pre_exec(move || sys::child_setup(parent, memfd));
            }
            match cmd.spawn() {
                Ok(mut child) => {
                    if let Some(out) = child.stdout.take() {
                        sources.push(output::Source::new(OwnedFd::from(out), rank, false, opts.tag_output));
                    }
                    if let Some(err) = child.stderr.take() {
                        sources.push(output::Source::new(OwnedFd::from(err), rank, true, opts.tag_output));
                    }
                    if let Some(inp) = child.stdin.take() {
                        stdin_pipe = Some(inp);
                    }
                    ranks.push(Rank { pid: child.id() as i32, connected: false, finalized: false, exited: false });
                    // `child` is dropped without waiting; the reaper owns it.
                }
                Err(e) => {
                    let status = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
                    let msg = format!("cannot run '{}': {}", seg.program, sys::describe_io_error(&e));
                    return (ranks, sources, stdin_pipe, Some((msg, status)));
                }
            }
            rank += 1;
        }
    }
    (ranks, sources, stdin_pipe, None)
}

/// The job's state machine, driven by [`Event`]s.
struct Job {
    ranks: Vec<Rank>,
    by_pid: HashMap<i32, usize>,
    host: String,
    /// Exit status decided by the first failure; set once.
    failure: Option<i32>,
    /// Non-zero status of a rank that exited after finalizing.
    late_status: Option<i32>,
    /// When the remaining ranks get SIGKILL.
    kill_at: Option<Instant>,
    signals_seen: u32,
    timeout: Option<Duration>,
    output_done: bool,
    drain_until: Option<Instant>,
}

impl Job {
    fn run(&mut self, rx: &mpsc::Receiver<Event>) -> i32 {
        let timeout_at = self.timeout.map(|t| Instant::now() + t);
        loop {
            let all_exited = self.ranks.iter().all(|r| r.exited);
            if all_exited {
                if self.failure.is_some() && self.drain_until.is_none() {
                    // Take out anything the ranks left behind in their groups.
                    self.signal_all(libc::SIGKILL, true);
                    self.kill_at = None;
                    self.drain_until = Some(Instant::now() + DRAIN_GRACE);
                }
                let drained = self.drain_until.is_some_and(|t| Instant::now() >= t);
                if self.output_done || drained {
                    break;
                }
            }
            let now = Instant::now();
            let next = [self.kill_at, self.drain_until, timeout_at.filter(|_| self.failure.is_none())]
                .into_iter()
                .flatten()
                .min();
            let event = match next {
                Some(t) => match rx.recv_timeout(t.saturating_duration_since(now)) {
                    Ok(e) => Some(e),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                },
                None => match rx.recv() {
                    Ok(e) => Some(e),
                    Err(_) => break,
                },
            };
            match event {
                Some(e) => self.handle(e),
                None => self.tick(timeout_at),
            }
        }
        self.failure.or(self.late_status).unwrap_or(0)
    }

    fn tick(&mut self, timeout_at: Option<Instant>) {
        let now = Instant::now();
        if self.kill_at.is_some_and(|t| now >= t) {
            self.kill_at = None;
            self.signal_all(libc::SIGKILL, true);
        }
        if self.failure.is_none() && timeout_at.is_some_and(|t| now >= t) {
            let secs = self.timeout.map_or(0, |t| t.as_secs());
            self.fail(124, &format!("job exceeded the timeout of {secs} s; killing all ranks"));
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Exited(pid, status) => self.rank_exited(pid, status),
            Event::Signal(sig) => {
                self.signals_seen += 1;
                if self.signals_seen > 1 {
                    // Second Ctrl-C: the user is not waiting any longer.
                    self.signal_all(libc::SIGKILL, true);
                    return;
                }
                self.signal_all(sig, false);
                if self.failure.is_none() {
                    self.failure = Some(128 + sig);
                }
                self.kill_at.get_or_insert(Instant::now() + KILL_GRACE);
            }
            Event::OutputDone => self.output_done = true,
            Event::Pmi(ServerEvent::Connected { rank }) => {
                if let Some(r) = self.ranks.get_mut(rank as usize) {
                    r.connected = true;
                }
            }
            Event::Pmi(ServerEvent::Finalized { rank }) => {
                if let Some(r) = self.ranks.get_mut(rank as usize) {
                    r.finalized = true;
                }
            }
            Event::Pmi(ServerEvent::Abort { rank, code, msg }) => {
                let status = if (0..=255).contains(&code) { code } else { 1 };
                self.fail(status, &format!("rank {rank} called MPI_Abort (code {code}): {msg}"));
            }
            Event::Pmi(ServerEvent::Rejected { peer, .. }) => {
                eprintln!("mpiexec: rejected an unauthenticated bootstrap connection from {peer}");
            }
            // Only delegated servers (proxies) produce it.
            Event::Pmi(ServerEvent::FenceReady { .. }) => {}
            Event::Pmi(ServerEvent::ProtocolError { peer, reason }) => {
                // Once the job is failing, broken connections are expected.
                if self.failure.is_none() {
                    eprintln!("mpiexec: closed a bootstrap connection from {peer}: {reason}");
                }
            }
        }
    }

    fn rank_exited(&mut self, pid: i32, status: i32) {
        let Some(&idx) = self.by_pid.get(&pid) else {
            return;
        };
        self.ranks[idx].exited = true;
        if self.failure.is_some() {
            return;
        }
        let r = &self.ranks[idx];
        let who = format!("rank {idx} (pid {pid} on {})", self.host);
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let msg = format!("{who} was killed by signal {sig} ({})", sys::signal_name(sig));
            self.fail(128 + sig, &msg);
        } else if libc::WIFEXITED(status) {
            let code = libc::WEXITSTATUS(status);
            if code != 0 {
                if r.finalized {
                    eprintln!("mpiexec: {who} exited with status {code} after MPI_Finalize");
                    self.late_status.get_or_insert(code);
                } else if r.connected {
                    self.fail(code, &format!("{who} exited with status {code} before MPI_Finalize"));
                } else {
                    self.fail(code, &format!("{who} exited with status {code}"));
                }
            } else if r.connected && !r.finalized && self.ranks.iter().any(|r| !r.exited) {
                self.fail(1, &format!("{who} exited without calling MPI_Finalize"));
            }
        }
    }

    /// Records the first failure, says why in one line, and starts ending
    /// the job: SIGTERM now, SIGKILL after the grace period.
    fn fail(&mut self, status: i32, msg: &str) {
        if self.failure.is_some() {
            return;
        }
        self.failure = Some(status);
        eprintln!("mpiexec: {msg}");
        self.signal_all(libc::SIGTERM, false);
        self.kill_at = Some(Instant::now() + KILL_GRACE);
    }

    /// Sends `sig` to the process group of every rank still running (or of
    /// every rank, to catch their leftover descendants, with `all`).
    fn signal_all(&self, sig: i32, all: bool) {
        for r in self.ranks.iter().filter(|r| all || !r.exited) {
            sys::kill_group(r.pid, sig);
        }
    }
}
