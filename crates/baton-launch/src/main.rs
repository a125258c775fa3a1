//! `mpiexec` (also installed as `mpirun`): Baton's launcher.
//!
//! [`cli`] parses the command line and [`hosts`] places the ranks. A job on
//! this host alone is run directly: [`spawn`] forks the ranks (own process
//! group, parent-death signal, inherited memfd), [`output`] forwards their
//! output, and a [`baton_pmi::server::PmiServer`] answers their bootstrap
//! requests. A job on several hosts is run through per-host proxies (the
//! same binary, `mpiexec --proxy`, see [`proxy`]) that [`root`] starts in a
//! tree and talks to over [`link`]s. Either way everything that can happen
//! — a rank exiting, a PMI or tree event, a signal to mpiexec, output
//! reaching EOF — becomes an [`Event`] on one channel consumed by
//! [`Job::run`], which decides the job's fate. `MPI_Comm_spawn` starts
//! further jobs, driven by the same loop: forked here in a single-host job
//! ([`comm_spawn`]), through the proxies in a multi-host one
//! ([`tree_spawn`]). The same loop also serves a process started without
//! mpiexec that wants to spawn (`mpiexec --singleton-server`, see
//! [`singleton`]).

/// `eprintln!` as one write (see `sys::say_line`).
macro_rules! say {
    ($($t:tt)*) => { $crate::sys::say_line(&format!($($t)*)) };
}

mod binding;
mod children;
mod cli;
mod comm_spawn;
mod hosts;
mod link;
mod output;
mod proxy;
mod proxy_spawn;
mod ranks;
mod root;
mod singleton;
mod spawned;
mod sys;
mod tree_spawn;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use baton_pmi::auth::Secret;
use baton_pmi::reject::RejectLog;
use baton_pmi::server::{PmiServer, ServerConfig, ServerEvent};

const VERSION_LINE: &str = "Baton mpiexec 0.1.0";
/// How long ranks get between SIGTERM (or a forwarded signal) and SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// How long to keep forwarding output of a failed job after all ranks died.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// What [`RejectLog`]'s count lines call the connections mpiexec refuses.
const REJECTED: &str = "unauthenticated connections";
/// Exit status when a host could not be started or was lost.
const HOST_FAILURE_STATUS: i32 = 255;

/// Which job of this mpiexec something belongs to: 0 is the job of the
/// command line, 1, 2, ... those started by `MPI_Comm_spawn`, in order.
pub type JobNo = u32;

/// Everything the job's main loop (or a proxy's) reacts to.
pub enum Event {
    Pmi(JobNo, ServerEvent),
    /// A child was reaped: pid and raw wait status.
    Exited(i32, i32),
    Signal(i32),
    /// That job's output pipes have all reached end of file.
    OutputDone(JobNo),
    Link(link::LinkEvent),
    /// A chunk of mpiexec's stdin for rank 0 on another host; empty: EOF.
    Stdin(Vec<u8>),
    /// The singleton process served by `--singleton-server` has ended.
    SingletonGone,
}

fn main() {
    let args: Vec<String> = match std::env::args_os().skip(1).map(OsString::into_string).collect() {
        Ok(a) => a,
        Err(bad) => {
            say!("mpiexec: argument {bad:?} is not valid UTF-8");
            std::process::exit(2);
        }
    };
    match args.first().map(String::as_str) {
        Some("--proxy") => std::process::exit(proxy::main(&args[1..])),
        Some("--singleton-server") => std::process::exit(singleton::main(&args[1..])),
        _ => {}
    }
    let opts = match cli::parse(&args, baton_settings::MPIEXEC_TIMEOUT.value().map(Duration::from_secs)) {
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
            say!("mpiexec: {}", e.msg);
            std::process::exit(e.status);
        }
    };
    // Every setting mpiexec reads is checked before anything starts (the proxies and the
    // singleton server read none).
    let settings = baton_settings::check(baton_settings::Reader::Launcher);
    for w in &settings.warnings {
        say!("mpiexec: {}", w.message);
    }
    if let Some(e) = settings.error() {
        say!("mpiexec: {e}");
        std::process::exit(2);
    }
    let status = match plan_and_launch(&opts) {
        Ok(s) => s,
        Err((msg, status)) => {
            say!("mpiexec: {msg}");
            status
        }
    };
    std::process::exit(status);
}

/// Where the ranks go, decided before anything starts.
pub struct Plan {
    /// Host names; index = node number.
    pub names: Vec<String>,
    /// Node of each rank.
    pub placement: Vec<usize>,
    /// Slots of each host.
    pub slots: Vec<u32>,
    pub universe_size: u32,
    /// Whether each host is this machine (started without the remote shell).
    pub local: Vec<bool>,
}

fn plan_and_launch(opts: &cli::Options) -> Result<i32, (String, i32)> {
    let size: u32 = opts.segments.iter().map(|s| s.nprocs).sum();
    let host = sys::hostname();
    if opts.hosts.is_empty() {
        // The slots mpiexec knows of are this host's CPUs (those it may run on).
        let cpus = baton_transport::sys::allowed_cpus().len().max(1) as u32;
        return launch_single(opts, host, cpus.max(size));
    }
    let slots = hosts::slots(&opts.hosts, opts.ppn);
    let total_slots: u64 = slots.iter().map(|&s| u64::from(s)).sum();
    // An oversubscribed job still has room for itself.
    let universe_size = total_slots.max(u64::from(size)).min(u64::from(u32::MAX)) as u32;
    let placement = hosts::place(size, &slots, opts.mapping);
    let addrs: Vec<_> = sys::host_addrs();
    let local: Vec<bool> = opts.hosts.iter().map(|h| sys::is_local_host(&h.name, &host, &addrs)).collect();
    let names: Vec<String> = opts.hosts.iter().map(|h| h.name.clone()).collect();
    let first = placement.first().copied().unwrap_or(0);
    if local[first] && placement.iter().all(|&n| n == first) {
        // Everything on this machine: no proxy, no remote shell, no delay.
        return launch_single(opts, names[first].clone(), universe_size);
    }
    root::launch(opts, Plan { names, placement, slots, universe_size, local })
}

/// Per-rank bookkeeping.
struct Rank {
    pid: i32,
    node: usize,
    connected: bool,
    finalized: bool,
    exited: bool,
}

/// The working directory of a segment's ranks, if one was asked for.
fn segment_wdir(opts: &cli::Options, seg: &cli::Segment) -> Option<PathBuf> {
    seg.wdir.clone().or_else(|| opts.gwdir.clone())
}

/// Runs the whole job on this host. `node` becomes `BATON_NODE`.
fn launch_single(opts: &cli::Options, node: String, universe_size: u32) -> Result<i32, (String, i32)> {
    let size: u32 = opts.segments.iter().map(|s| s.nprocs).sum();
    let job_id = sys::random_job_id().map_err(|e| (e, 1))?;
    let secret = Secret::generate().map_err(|e| (e.to_string(), 1))?;
    for seg in &opts.segments {
        if let Some(dir) = segment_wdir(opts, seg) {
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
        let _ = pmi_tx.send(Event::Pmi(0, e));
    })
    .map_err(|e| (format!("cannot open the bootstrap socket: {e}"), 1))?;
    let memfd =
        sys::create_job_memfd(job_id).map_err(|e| (format!("cannot create the job's shared-memory fd: {e}"), 1))?;

    let mut specs = Vec::with_capacity(size as usize);
    for (appnum, seg) in opts.segments.iter().enumerate() {
        for _ in 0..seg.nprocs {
            let rank = specs.len() as u32;
            let env = opts.genv.iter().chain(seg.env.iter()).map(|(k, v)| (k.into(), v.into())).collect();
            specs.push(ranks::RankSpec {
                rank,
                appnum: appnum as u32,
                local_rank: rank,
                program: seg.program.clone().into(),
                arg0: None,
                args: seg.args.clone(),
                env,
                wdir: segment_wdir(opts, seg),
            });
        }
    }
    let host_env = ranks::HostEnv {
        clear_env: false,
        base_env: Vec::new(),
        pmi_addr: server.addr().to_string(),
        secret_hex: secret.to_hex(),
        job_id,
        size,
        universe_size,
        local_size: size,
        node: node.clone(),
        tag_output: opts.tag_output,
        stdin_for_rank0: sys::may_read_stdin(),
        where_: String::new(),
        parent_port: None,
        binding: opts.binding,
    };
    let spawned = ranks::start(&specs, &host_env, &memfd);
    for line in &spawned.reports {
        say!("mpiexec: {line}");
    }

    // Reaping starts only now: std reaps a child whose exec failed itself,
    // and a concurrent waitpid(-1) could steal that status.
    sys::start_reaper(tx.clone());
    let sources = spawned.sources;
    if !sources.is_empty() {
        let out_tx = tx.clone();
        thread::Builder::new()
            .name("output".into())
            .spawn(move || {
                output::forward(sources, output::emit_local);
                let _ = out_tx.send(Event::OutputDone(0));
            })
            .map_err(|e| (format!("cannot start the output thread: {e}"), 1))?;
    } else {
        let _ = tx.send(Event::OutputDone(0));
    }
    if let Some(pipe) = spawned.stdin {
        let _ = thread::Builder::new().name("stdin".into()).spawn(move || output::forward_stdin(pipe));
    }
    let spawner = comm_spawn::Spawner::new(
        tx,
        server,
        secret,
        comm_spawn::Inherited {
            genv: opts.genv.clone(),
            universe_size,
            node: node.clone(),
            tag_output: opts.tag_output,
        },
    );

    let ranks: Vec<Rank> = spawned
        .pids
        .iter()
        .map(|&(_, pid)| Rank { pid, node: 0, connected: false, finalized: false, exited: false })
        .collect();
    let mut job = Job::new(ranks, vec![node], opts.timeout, None);
    job.spawner = Some(spawner);
    if let Some((_, msg, status)) = spawned.error {
        job.fail(status, &msg);
    }
    // The ranks hold the memfd now; mpiexec's copy would only pin the
    // memory of a job that has ended.
    drop(memfd);
    Ok(job.run(&rx))
}

/// The job's state machine, driven by [`Event`]s. With `tree` the ranks
/// live on proxies and every action goes through [`root::Tree`].
struct Job {
    ranks: Vec<Rank>,
    by_pid: HashMap<i32, usize>,
    /// Host names; `Rank::node` indexes them.
    names: Vec<String>,
    tree: Option<root::Tree>,
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
    /// Single-host jobs: what starting a spawned job takes; `None` in a
    /// job run through proxies (see [`root::Tree`]).
    spawner: Option<comm_spawn::Spawner>,
    /// Jobs started by `MPI_Comm_spawn` that are not over yet.
    spawned: BTreeMap<JobNo, spawned::SpawnedJob>,
    /// A spawned rank's pid: its job and index.
    spawned_pids: HashMap<i32, (JobNo, usize)>,
    /// `--singleton-server`: the first job's only rank, which mpiexec did
    /// not start.
    singleton: Option<singleton::Singleton>,
    /// Refused connections to mpiexec's ports, logged sparingly.
    rejected: RejectLog,
}

/// What a rank's exit means for its job.
enum Verdict {
    /// Nothing to report.
    Fine,
    /// A non-zero exit after finalize: reported, the rest carries on.
    Late(i32, String),
    /// The job ends with this status, for this reason.
    Fail(i32, String),
}

/// Records in `ranks` a rank's connecting or finalizing, the bootstrap
/// events every job's ranks go through; that rank, or `None` for any other
/// event (or a rank out of range).
fn record_progress<'a>(ranks: &'a mut [Rank], ev: &ServerEvent) -> Option<&'a mut Rank> {
    let (rank, finalized) = match *ev {
        ServerEvent::Connected { rank } => (rank, false),
        ServerEvent::Finalized { rank } => (rank, true),
        _ => return None,
    };
    let r = ranks.get_mut(rank as usize)?;
    if finalized {
        r.finalized = true;
    } else {
        r.connected = true;
    }
    Some(r)
}

/// Marks rank `idx` of `ranks` exited with raw wait `status` and judges it;
/// `None` if it had already been seen to exit. `names` are the host names.
fn judge_exit(ranks: &mut [Rank], idx: usize, status: i32, names: &[String]) -> Option<Verdict> {
    let r = ranks.get_mut(idx)?;
    if r.exited {
        return None;
    }
    r.exited = true;
    let r = &ranks[idx];
    let who = format!("rank {idx} (pid {} on {})", r.pid, names[r.node]);
    let verdict = if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        Verdict::Fail(128 + sig, format!("{who} was killed by signal {sig} ({})", sys::signal_name(sig)))
    } else if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        if code != 0 {
            if r.finalized {
                Verdict::Late(code, format!("{who} exited with status {code} after MPI_Finalize"))
            } else if r.connected {
                Verdict::Fail(code, format!("{who} exited with status {code} before MPI_Finalize"))
            } else {
                Verdict::Fail(code, format!("{who} exited with status {code}"))
            }
        } else if r.connected && !r.finalized && ranks.iter().any(|r| !r.exited) {
            Verdict::Fail(1, format!("{who} exited without calling MPI_Finalize"))
        } else {
            Verdict::Fine
        }
    } else {
        Verdict::Fine
    };
    Some(verdict)
}

impl Job {
    fn new(ranks: Vec<Rank>, names: Vec<String>, timeout: Option<Duration>, tree: Option<root::Tree>) -> Job {
        Job {
            by_pid: ranks.iter().enumerate().filter(|(_, r)| r.pid > 0).map(|(i, r)| (r.pid, i)).collect(),
            ranks,
            names,
            tree,
            failure: None,
            late_status: None,
            kill_at: None,
            signals_seen: 0,
            timeout,
            output_done: false,
            drain_until: None,
            spawner: None,
            spawned: BTreeMap::new(),
            spawned_pids: HashMap::new(),
            singleton: None,
            rejected: RejectLog::new(),
        }
    }

    fn run(&mut self, rx: &mpsc::Receiver<Event>) -> i32 {
        let timeout_at = self.timeout.map(|t| Instant::now() + t);
        loop {
            let all_exited = self.first_job_over() && self.spawned.is_empty();
            if all_exited && self.tree.is_some() {
                self.tree_wind_down();
            }
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
            let tree_deadline = self.tree.as_ref().and_then(root::Tree::next_deadline);
            let next = [
                self.kill_at,
                self.drain_until,
                timeout_at.filter(|_| self.failure.is_none()),
                tree_deadline,
                self.spawned_deadline(),
                self.singleton.as_ref().and_then(singleton::Singleton::deadline),
            ]
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
            self.retire_spawned();
        }
        for line in self.rejected.summary(REJECTED) {
            say!("mpiexec: {line}");
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
        if self.tree.is_some() {
            self.tree_tick();
        }
        self.spawned_tick(now);
        self.singleton_tick(now);
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Exited(pid, status) => {
                if self.tree.is_some() {
                    self.tree_process_exited(pid, status);
                } else if let Some(idx) = self.by_pid.remove(&pid) {
                    // Removed: spawned jobs may be given the pid again.
                    self.rank_exited(idx, status);
                } else if let Some((no, idx)) = self.spawned_pids.remove(&pid) {
                    self.spawned_rank_exited(no, idx, status);
                }
            }
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
                if self.tree.is_some() {
                    self.tree_failed();
                }
            }
            Event::OutputDone(0) => self.output_done = true,
            Event::OutputDone(no) => self.spawned_output_done(no),
            Event::Link(ev) => self.tree_link_event(ev),
            Event::Stdin(data) => self.tree_stdin(data),
            Event::SingletonGone => self.singleton_gone(false),
            Event::Pmi(0, ev) => self.pmi_event(ev),
            Event::Pmi(no, ev) => self.spawned_pmi_event(no, ev),
        }
    }

    /// An event of the first job's bootstrap server.
    fn pmi_event(&mut self, ev: ServerEvent) {
        if let Some(r) = record_progress(&mut self.ranks, &ev) {
            // A finalized singleton needs nothing more from mpiexec.
            r.exited |= r.finalized && self.singleton.is_some();
            return;
        }
        match ev {
            ServerEvent::Disconnected { .. } => self.singleton_gone(true),
            ServerEvent::Abort { rank, code, msg } => {
                self.singleton_aborts();
                self.abort("", rank, code, &msg);
            }
            ServerEvent::Spawn { rank, cmds, parent_port } => self.spawn_request(0, rank, &cmds, &parent_port),
            other => self.server_notice(other),
        }
    }

    /// Bootstrap events that read the same whichever job they come from.
    fn server_notice(&mut self, ev: ServerEvent) {
        match ev {
            // Ranks killed while authenticating look the same as intruders.
            ServerEvent::Rejected { peer, .. } if self.failure.is_none() => {
                let first = || format!("rejected an unauthenticated bootstrap connection from {peer}");
                if let Some(line) = self.rejected.note(peer, REJECTED, first) {
                    say!("mpiexec: {line}");
                }
            }
            // Once the job is failing, broken connections are expected.
            ServerEvent::ProtocolError { peer, reason } if self.failure.is_none() => {
                say!("mpiexec: closed a bootstrap connection from {peer}: {reason}");
            }
            // Only delegated servers (proxies) produce FenceReady; the rest
            // are handled by the callers.
            _ => {}
        }
    }

    /// MPI_Abort from any rank of any job ends everything, as does an error
    /// under `MPI_ERRORS_ARE_FATAL`: `msg` is the library's account of which
    /// (`MPI_Abort(MPI_COMM_WORLD, 7) was called`, `MPI_Send: dest 7 is out
    /// of range ... (errors are fatal)`). `prefix` names a spawned job. The exit status is the code as a shell sees a
    /// process's (`-1` gives 255, as with other MPIs), except that a
    /// non-zero code never becomes success.
    fn abort(&mut self, prefix: &str, rank: u32, code: i32, msg: &str) {
        let status = match code & 0xff {
            0 if code != 0 => 1,
            s => s,
        };
        self.fail(status, &format!("{prefix}rank {rank} aborted the job (code {code}): {msg}"));
    }

    /// Rank `idx` ended with raw wait `status`; decides whether that ends
    /// the job.
    fn rank_exited(&mut self, idx: usize, status: i32) {
        let Some(verdict) = judge_exit(&mut self.ranks, idx, status, &self.names) else { return };
        if self.failure.is_some() {
            return;
        }
        match verdict {
            Verdict::Fine => {}
            Verdict::Late(code, msg) => {
                say!("mpiexec: {msg}");
                self.late_status.get_or_insert(code);
            }
            Verdict::Fail(status, msg) => self.fail(status, &msg),
        }
    }

    /// Records the first failure, says why in one line, and starts ending
    /// the job: SIGTERM now, SIGKILL after the grace period.
    fn fail(&mut self, status: i32, msg: &str) {
        if self.failure.is_some() {
            return;
        }
        self.failure = Some(status);
        say!("mpiexec: {msg}");
        self.signal_all(libc::SIGTERM, false);
        self.kill_at = Some(Instant::now() + KILL_GRACE);
        if self.tree.is_some() {
            self.tree_failed();
        }
    }

    /// Sends `sig` to the process group of every rank still running (or of
    /// every rank, to catch their leftover descendants, with `all`), of
    /// every job.
    fn signal_all(&self, sig: i32, all: bool) {
        if let Some(tree) = &self.tree {
            tree.signal_all(sig, all);
            return;
        }
        let spawned = self.spawned.values().flat_map(|j| j.ranks.iter());
        for r in self.ranks.iter().chain(spawned).filter(|r| all || !r.exited) {
            sys::kill_group(r.pid, sig);
        }
    }
}
