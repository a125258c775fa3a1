//! `MPI_Comm_spawn` in a single-host job: each spawn request starts a new
//! job of its own. (Jobs run through proxies start theirs through the
//! tree, see [`crate::tree_spawn`]; what happens once a spawned job runs is
//! shared, and is here.)
//!
//! A rank's request arrives as [`ServerEvent::Spawn`] on its job's
//! bootstrap server. mpiexec checks every command first (info keys, working
//! directory, program found and executable) and starts nothing unless all
//! of them pass; then the new job gets a fresh job id, the secret of the
//! first job (the jobs of one mpiexec trust each other: their ranks connect
//! to each other), a bootstrap server and a memfd of its own, and its
//! processes are forked like the first job's. The answer to the requesting
//! rank is sent only after every process has been started.
//!
//! Spawned jobs are driven by the same event loop as the first job
//! ([`crate::Job`]), with their events tagged by [`JobNo`]. A spawned job's
//! failure ends that job only; the first job's failure, MPI_Abort anywhere,
//! a signal to mpiexec or the timeout end all of them. A spawned job that is
//! over is forgotten: its server is dropped (closing its socket and accept
//! thread), its output thread has ended, and mpiexec gave its memfd away
//! when the processes had been started, so nothing accumulates over many
//! spawns.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::thread;
use std::time::Instant;

use baton_pmi::auth::Secret;
use baton_pmi::server::{PmiServer, ServerConfig, ServerEvent};
use baton_pmi::SpawnCmd;

use crate::spawned::{check_request, parse_env, SpawnedJob};
use crate::{judge_exit, output, ranks, sys, Event, Job, JobNo, Rank, Verdict, DRAIN_GRACE, KILL_GRACE};

/// The search path `execvp` uses when `PATH` is unset.
pub const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// What starting a spawned job takes, fixed when the first job starts.
pub struct Spawner {
    /// Clones of it go to each spawned job's server and output thread.
    tx: Sender<Event>,
    /// The first job's server: where its ranks' requests are answered.
    server: PmiServer,
    secret: Secret,
    inherited: Inherited,
    hostname: String,
    last_no: JobNo,
}

/// What every spawned job takes from the first.
pub struct Inherited {
    /// `-genv` and `-x` (not `-env`).
    pub genv: Vec<(String, String)>,
    pub universe_size: u32,
    /// `BATON_NODE` of every job.
    pub node: String,
    /// `-l`.
    pub tag_output: bool,
}

/// One command, checked and ready to start.
struct Planned {
    path: PathBuf,
    /// The program as the user wrote it: argv[0] and the name in messages.
    arg0: String,
    args: Vec<String>,
    maxprocs: u32,
    wdir: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl Spawner {
    pub fn new(tx: Sender<Event>, server: PmiServer, secret: Secret, inherited: Inherited) -> Spawner {
        Spawner { tx, server, secret, inherited, hostname: sys::hostname(), last_no: 0 }
    }

    /// Checks every command; nothing is started unless all pass.
    fn plan(&self, cmds: &[SpawnCmd], parent_port: &str) -> Result<Vec<Planned>, String> {
        check_request(cmds, parent_port)?;
        let cwd = std::env::current_dir().map_err(|e| format!("cannot spawn: cannot read mpiexec's directory: {e}"))?;
        let mut out = Vec::with_capacity(cmds.len());
        for (i, cmd) in cmds.iter().enumerate() {
            let planned = self.plan_one(cmd, &cwd).map_err(|why| {
                let which =
                    if cmds.len() > 1 { format!(" (command {} of {})", i + 1, cmds.len()) } else { String::new() };
                format!("cannot spawn '{}'{which}: {why}", cmd.program)
            })?;
            out.push(planned);
        }
        Ok(out)
    }

    fn plan_one(&self, cmd: &SpawnCmd, cwd: &Path) -> Result<Planned, String> {
        if cmd.program.is_empty() {
            return Err("the program name is empty".into());
        }
        if cmd.program.contains('\0') || cmd.args.iter().any(|a| a.contains('\0')) {
            return Err("the program name or an argument contains a NUL byte".into());
        }
        let mut env: Vec<(OsString, OsString)> =
            self.inherited.genv.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect();
        let mut wdir = None;
        let mut search = None;
        for (key, value) in &cmd.info {
            match key.as_str() {
                "wdir" => wdir = Some(value.as_str()),
                "path" => search = Some(value.as_str()),
                "host" => self.check_host(value)?,
                "env" => env.extend(parse_env(value)?.into_iter().map(|(k, v)| (k.into(), v.into()))),
                // "soft": a spawn starts all processes or none anyway.
                // "map_by": one host, so every mapping is the same.
                // Anything else may be ignored, as the standard allows.
                _ => {}
            }
        }
        let wdir = match wdir {
            Some(w) if !w.is_empty() => cwd.join(w),
            _ => cwd.to_path_buf(),
        };
        if !wdir.is_dir() {
            return Err(format!("working directory '{}' is not a directory", wdir.display()));
        }
        let env_path = env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone());
        let env_path = env_path.or_else(|| std::env::var_os("PATH")).unwrap_or_else(|| DEFAULT_PATH.into());
        let path = resolve_program(&cmd.program, &wdir, search, &env_path)?;
        Ok(Planned { path, arg0: cmd.program.clone(), args: cmd.args.clone(), maxprocs: cmd.maxprocs, wdir, env })
    }

    /// The `host` info key may only name this host.
    fn check_host(&self, host: &str) -> Result<(), String> {
        let h = host.trim();
        if h.eq_ignore_ascii_case(&self.inherited.node) || sys::is_local_host(h, &self.hostname, &[]) {
            return Ok(());
        }
        let addrs: Vec<_> = sys::host_addrs();
        if sys::is_local_host(h, &self.hostname, &addrs) {
            return Ok(());
        }
        Err(format!(
            "info host '{h}' is not this host ('{}'); a job whose ranks all run on one host spawns on that host only",
            self.inherited.node
        ))
    }
}

/// The absolute path of `program`: relative to `wdir` when it contains a
/// `/`, else the first executable match in the `path` info directories,
/// then in `env_path`. Empty entries are skipped rather than meaning the
/// current directory.
pub fn resolve_program(
    program: &str,
    wdir: &Path,
    search: Option<&str>,
    env_path: &OsString,
) -> Result<PathBuf, String> {
    if program.contains('/') {
        let p = wdir.join(program);
        if sys::is_executable(&p) {
            return Ok(p);
        }
        return Err(if p.exists() {
            format!("'{}' is not an executable file", p.display())
        } else {
            format!("'{}' does not exist", p.display())
        });
    }
    let from_info = search.into_iter().flat_map(|s| s.split(':')).map(PathBuf::from);
    let from_env = std::env::split_paths(env_path);
    for dir in from_info.chain(from_env).filter(|d| !d.as_os_str().is_empty()) {
        let candidate = wdir.join(dir).join(program);
        if sys::is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(if search.is_some() {
        "no such executable in path info or PATH".into()
    } else {
        "no such executable in PATH".into()
    })
}

impl Job {
    /// Rank `rank` of job `from` asks for a new job; always answered.
    pub(crate) fn spawn_request(&mut self, from: JobNo, rank: u32, cmds: &[SpawnCmd], parent_port: &str) {
        let ending = self.failure.is_some() || self.spawned.get(&from).is_some_and(|j| j.failed);
        let result = if ending {
            Err("cannot spawn: the job of the calling process is being ended".into())
        } else {
            self.start_spawned(cmds, parent_port)
        };
        let server = match from {
            0 => self.spawner.as_ref().map(|s| &s.server),
            no => self.spawned.get(&no).and_then(|j| j.server.as_ref()),
        };
        // No server: the requester's job is over, and whoever asked is gone.
        if let Some(server) = server {
            server.answer(rank, result);
        }
    }

    /// Starts a job for `cmds`: all its processes, or none.
    fn start_spawned(&mut self, cmds: &[SpawnCmd], parent_port: &str) -> Result<(u64, u32), String> {
        let Some(sp) = self.spawner.as_mut() else {
            return Err("cannot spawn: this launcher cannot start jobs".into());
        };
        let planned = sp.plan(cmds, parent_port)?;
        let size = planned.iter().map(|p| p.maxprocs).sum::<u32>();
        let job_id = sys::random_job_id().map_err(|e| format!("cannot spawn: {e}"))?;
        // Taken even if the start fails: late events from the server of a
        // failed start must not be taken for the next job's.
        sp.last_no += 1;
        let no = sp.last_no;
        let tx = sp.tx.clone();
        let server = PmiServer::start(ServerConfig::whole_job(size, job_id, sp.secret.clone()), move |e| {
            let _ = tx.send(Event::Pmi(no, e));
        })
        .map_err(|e| format!("cannot spawn: cannot open a bootstrap socket: {e}"))?;
        let memfd = sys::create_job_memfd(job_id)
            .map_err(|e| format!("cannot spawn: cannot create the job's shared-memory fd: {e}"))?;
        let mut specs = Vec::with_capacity(size as usize);
        for (appnum, p) in planned.iter().enumerate() {
            for _ in 0..p.maxprocs {
                let rank = specs.len() as u32;
                specs.push(ranks::RankSpec {
                    rank,
                    appnum: appnum as u32,
                    local_rank: rank,
                    program: p.path.clone().into_os_string(),
                    arg0: Some(p.arg0.clone()),
                    args: p.args.clone(),
                    env: p.env.clone(),
                    wdir: Some(p.wdir.clone()),
                });
            }
        }
        let host_env = ranks::HostEnv {
            clear_env: false,
            base_env: Vec::new(),
            pmi_addr: server.addr().to_string(),
            secret_hex: sp.secret.to_hex(),
            job_id,
            size,
            universe_size: sp.inherited.universe_size,
            local_size: size,
            node: sp.inherited.node.clone(),
            tag_output: sp.inherited.tag_output,
            stdin_for_rank0: false,
            where_: String::new(),
            parent_port: Some(parent_port.to_owned()),
            // Spawned processes are left to the kernel.
            binding: crate::binding::Binding::NONE,
        };
        // Forked from the main thread, which lives as long as mpiexec: the
        // parent-death signal follows the forking thread, not the process.
        let started = ranks::start(&specs, &host_env, &memfd);
        // The processes hold the memfd now.
        drop(memfd);
        let kill_started = |pids: &[(u32, i32)]| {
            // Their exits are reaped and ignored: the pids are not recorded.
            for &(_, pid) in pids {
                sys::kill_group(pid, libc::SIGKILL);
            }
        };
        if let Some((_, msg, _)) = started.error {
            kill_started(&started.pids);
            return Err(format!("cannot spawn: {msg} (the job's other processes were killed)"));
        }
        let (sources, out_tx) = (started.sources, sp.tx.clone());
        let forwarding = thread::Builder::new().name("output".into()).spawn(move || {
            output::forward(sources, output::emit_local);
            let _ = out_tx.send(Event::OutputDone(no));
        });
        if let Err(e) = forwarding {
            kill_started(&started.pids);
            return Err(format!("cannot spawn: cannot start an output thread: {e}"));
        }
        let ranks: Vec<Rank> = started
            .pids
            .iter()
            .map(|&(_, pid)| Rank { pid, node: 0, connected: false, finalized: false, exited: false })
            .collect();
        for (i, r) in ranks.iter().enumerate() {
            self.spawned_pids.insert(r.pid, (no, i));
        }
        let job = SpawnedJob {
            ranks,
            server: Some(server),
            failed: false,
            kill_at: None,
            output_done: false,
            drain_until: None,
            tree: None,
        };
        self.spawned.insert(no, job);
        Ok((job_id, size))
    }

    /// An event of a spawned job's bootstrap server.
    pub(crate) fn spawned_pmi_event(&mut self, no: JobNo, ev: ServerEvent) {
        let Some(job) = self.spawned.get_mut(&no) else { return };
        if crate::record_progress(&mut job.ranks, &ev).is_some() {
            return;
        }
        match ev {
            ServerEvent::Abort { rank, code, msg } => self.abort(&format!("spawned job {no}: "), rank, code, &msg),
            ServerEvent::Spawn { rank, cmds, parent_port } => self.spawn_request(no, rank, &cmds, &parent_port),
            other => self.server_notice(other),
        }
    }

    /// A spawned rank ended: a failure ends its job only.
    pub(crate) fn spawned_rank_exited(&mut self, no: JobNo, idx: usize, status: i32) {
        let Some(job) = self.spawned.get_mut(&no) else { return };
        let Some(verdict) = judge_exit(&mut job.ranks, idx, status, &self.names) else { return };
        if self.failure.is_some() || job.failed {
            return;
        }
        match verdict {
            Verdict::Fine => {}
            // Only the first job decides mpiexec's exit status.
            Verdict::Late(_, msg) => say!("mpiexec: spawned job {no}: {msg}"),
            Verdict::Fail(_, msg) => self.fail_spawned(no, &msg),
        }
    }

    /// Ends spawned job `no` alone, saying why: SIGTERM now, SIGKILL after
    /// the grace period.
    pub(crate) fn fail_spawned(&mut self, no: JobNo, msg: &str) {
        let Some(job) = self.spawned.get_mut(&no) else { return };
        if self.failure.is_some() || job.failed {
            return;
        }
        say!("mpiexec: spawned job {no}: {msg}");
        job.failed = true;
        job.kill_at = Some(Instant::now() + KILL_GRACE);
        self.signal_spawned(no, libc::SIGTERM, false);
    }

    /// Sends `sig` to the process groups of spawned job `no`'s ranks still
    /// running (of all of them with `all`).
    pub(crate) fn signal_spawned(&self, no: JobNo, sig: i32, all: bool) {
        if let Some(tree) = &self.tree {
            tree.signal_job(no, sig, all);
            return;
        }
        let Some(job) = self.spawned.get(&no) else { return };
        for r in job.ranks.iter().filter(|r| all || !r.exited) {
            sys::kill_group(r.pid, sig);
        }
    }

    pub(crate) fn spawned_output_done(&mut self, no: JobNo) {
        if let Some(job) = self.spawned.get_mut(&no) {
            job.output_done = true;
        }
    }

    /// The earliest moment a spawned job needs attention.
    pub(crate) fn spawned_deadline(&self) -> Option<Instant> {
        self.spawned.values().flat_map(|j| [j.kill_at, j.drain_until]).flatten().min()
    }

    /// SIGKILL for spawned jobs whose grace period is over.
    pub(crate) fn spawned_tick(&mut self, now: Instant) {
        let mut due = Vec::new();
        for (&no, job) in &mut self.spawned {
            if job.kill_at.is_some_and(|t| now >= t) {
                job.kill_at = None;
                due.push(no);
            }
        }
        for no in due {
            self.signal_spawned(no, libc::SIGKILL, false);
        }
    }

    /// Releases the server of every spawned job whose processes have all
    /// exited, and forgets the job once its output is drained too.
    pub(crate) fn retire_spawned(&mut self) {
        let now = Instant::now();
        let mut over = Vec::new();
        let mut sweep = Vec::new();
        for (&no, job) in &mut self.spawned {
            if !job.ranks.iter().all(|r| r.exited) {
                continue;
            }
            job.server = None;
            job.kill_at = None;
            if (job.failed || self.failure.is_some()) && job.drain_until.is_none() {
                // What the killed ranks left in their groups goes too.
                sweep.push(no);
                job.drain_until = Some(now + DRAIN_GRACE);
            }
            if job.output_done || job.drain_until.is_some_and(|t| now >= t) {
                over.push(no);
            }
        }
        for no in sweep {
            self.signal_spawned(no, libc::SIGKILL, true);
        }
        // Their pids left `spawned_pids` as each rank exited.
        for no in over {
            self.spawned.remove(&no);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("baton-spawn-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("bin")).unwrap();
        d
    }

    fn make_file(p: &Path, mode: u32) {
        std::fs::write(p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn programs_resolve_against_wdir_path_info_then_path() {
        let d = scratch("resolve");
        make_file(&d.join("bin/tool"), 0o755);
        make_file(&d.join("bin/plain"), 0o644);
        make_file(&d.join("local"), 0o755);
        let no_path = OsString::from("/nonexistent-dir");
        assert_eq!(resolve_program("./local", &d, None, &no_path).unwrap(), d.join("./local"));
        assert_eq!(resolve_program("bin/tool", &d, None, &no_path).unwrap(), d.join("bin/tool"));
        // Relative path info is relative to the working directory.
        assert_eq!(resolve_program("tool", &d, Some("nowhere:bin"), &no_path).unwrap(), d.join("bin/tool"));
        let env_path = OsString::from(format!("::{}", d.join("bin").display()));
        assert_eq!(resolve_program("tool", Path::new("/"), None, &env_path).unwrap(), d.join("bin/tool"));
        // Not executable, missing, or only in the (skipped) empty entry.
        assert!(resolve_program("plain", &d, Some("bin"), &no_path).unwrap_err().contains("path info or PATH"));
        assert!(resolve_program("./bin/plain", &d, None, &no_path).unwrap_err().contains("not an executable"));
        assert!(resolve_program("./nope", &d, None, &no_path).unwrap_err().contains("does not exist"));
        assert_eq!(resolve_program("local", &d, None, &OsString::from(":")).unwrap_err(), "no such executable in PATH");
        // A directory is not a program.
        assert!(resolve_program("bin", &d, Some("."), &no_path).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn env_info_lines() {
        let env = parse_env("A=1\nB=x=y\r\n\n  \nEMPTY=").unwrap();
        let want: Vec<(String, String)> =
            [("A", "1"), ("B", "x=y"), ("EMPTY", "")].iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        assert_eq!(env, want);
        assert!(parse_env("NOEQUALS").unwrap_err().contains("NOEQUALS"));
        assert!(parse_env("=value").is_err());
    }
}
