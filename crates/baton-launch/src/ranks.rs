//! Starting the ranks of one host as child processes, shared by single-host mpiexec and the
//! per-host proxy: [`RankSpec`] says what one rank runs, [`HostEnv`] what
//! all ranks of the host share, and [`start`] starts them in order (own
//! process group, parent-death signal, the host's memfd inherited, stdio
//! piped back for forwarding).

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};

use baton_settings::protocol as proto;

use crate::binding::{self, BindTo, Binding, Topology};
use crate::{output, sys};

/// One rank to start.
pub struct RankSpec {
    pub rank: u32,
    pub appnum: u32,
    pub local_rank: u32,
    /// Searched in `PATH` unless it contains a `/`.
    pub program: OsString,
    /// `argv[0]` and the name in error messages, when `program` is a path
    /// mpiexec resolved itself (spawned jobs): the command as the user wrote it.
    pub arg0: Option<String>,
    pub args: Vec<String>,
    /// Variables set on top of the base environment, later ones winning.
    pub env: Vec<(OsString, OsString)>,
    pub wdir: Option<PathBuf>,
}

/// What every rank of this host shares.
pub struct HostEnv {
    /// Start from an empty environment plus `base_env` (a proxy: the
    /// ranks get mpiexec's environment, not the remote shell's).
    pub clear_env: bool,
    pub base_env: Vec<(OsString, OsString)>,
    pub pmi_addr: String,
    pub secret_hex: String,
    pub job_id: u64,
    pub size: u32,
    pub universe_size: u32,
    pub local_size: u32,
    pub node: String,
    pub tag_output: bool,
    /// Rank 0 (if it is here) reads a pipe instead of /dev/null.
    pub stdin_for_rank0: bool,
    /// Appended to error messages, e.g. " on host h2".
    pub where_: String,
    /// `BATON_PARENT_PORT`, for the ranks of a spawned job.
    pub parent_port: Option<String>,
    /// CPU binding of the ranks, by their `local_rank`.
    pub binding: Binding,
}

/// The ranks started so far and what to forward.
pub struct Spawned {
    /// `(rank, pid)` in start order.
    pub pids: Vec<(u32, i32)>,
    pub sources: Vec<output::Source>,
    pub stdin: Option<ChildStdin>,
    /// The rank that could not be started, the message and exit status.
    pub error: Option<(u32, String, i32)>,
    /// `--report-bindings`: one line per rank started, for stderr.
    pub reports: Vec<String>,
}

/// Starts `specs` in order and stops at the first rank that cannot start.
pub fn start(specs: &[RankSpec], host: &HostEnv, memfd: &OwnedFd) -> Spawned {
    let mut out = Spawned { pids: Vec::new(), sources: Vec::new(), stdin: None, error: None, reports: Vec::new() };
    let bound = host.binding.to != BindTo::None;
    let topology = if bound { Topology::detect() } else { Topology::from_cpus(&[]) };
    let unbound = if host.binding.report || bound { baton_transport::sys::allowed_cpus() } else { Vec::new() };
    let host_cpus = unbound.len().max(1);
    let parent = std::process::id() as i32;
    let memfd = memfd.as_raw_fd();
    // Spawned jobs are started while the reaper runs.
    let _gate = sys::spawn_lock();
    for spec in specs {
        if let Some(dir) = &spec.wdir {
            if !dir.is_dir() {
                let msg = format!("cannot use working directory '{}'{}: not a directory", dir.display(), host.where_);
                out.error = Some((spec.rank, msg, 2));
                return out;
            }
        }
        let mut cmd = Command::new(&spec.program);
        if let Some(name) = &spec.arg0 {
            cmd.arg0(name);
        }
        cmd.args(&spec.args);
        if host.clear_env {
            cmd.env_clear();
        }
        for (k, v) in host.base_env.iter().chain(spec.env.iter()) {
            cmd.env(k, v);
        }
        cmd.env(proto::PMI_ADDR.name, &host.pmi_addr)
            .env(proto::JOB_ID.name, host.job_id.to_string())
            .env(proto::RANK.name, spec.rank.to_string())
            .env(proto::SIZE.name, host.size.to_string())
            .env(proto::APPNUM.name, spec.appnum.to_string())
            .env(proto::UNIVERSE_SIZE.name, host.universe_size.to_string())
            .env(proto::PMI_SECRET.name, &host.secret_hex)
            .env(proto::SHM_FD.name, memfd.to_string())
            .env(proto::LOCAL_RANK.name, spec.local_rank.to_string())
            .env(proto::LOCAL_SIZE.name, host.local_size.to_string())
            .env(proto::NODE.name, &host.node);
        if bound {
            // The rank's own mask will hold only its share; its wait policy needs the whole.
            cmd.env(proto::HOST_CPUS.name, host_cpus.to_string());
        } else {
            cmd.env_remove(proto::HOST_CPUS.name);
        }
        match &host.parent_port {
            Some(port) => cmd.env(proto::PARENT_PORT.name, port),
            // Inherited from an enclosing job, it would make a rank of the
            // first job believe it had been spawned.
            None => cmd.env_remove(proto::PARENT_PORT.name),
        };
        if let Some(dir) = &spec.wdir {
            cmd.current_dir(dir);
        }
        let piped_stdin = spec.rank == 0 && host.stdin_for_rank0;
        cmd.stdin(if piped_stdin { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.process_group(0);
        let placed = topology.cpus_for(spec.local_rank, &host.binding);
        let mask = placed.as_ref().map(|p| sys::cpu_set(&p.cpus));
        // SAFETY: the closure only makes async-signal-safe system calls
        // (sigaction, prctl, getppid, fcntl, sched_setaffinity) and allocates nothing.
        unsafe {
            cmd.pre_exec(move || sys::child_setup(parent, Some(memfd), mask.as_ref()));
        }
        match cmd.spawn() {
            Ok(mut child) => {
                if let Some(o) = child.stdout.take() {
                    out.sources.push(output::Source::new(OwnedFd::from(o), spec.rank, false, host.tag_output));
                }
                if let Some(e) = child.stderr.take() {
                    out.sources.push(output::Source::new(OwnedFd::from(e), spec.rank, true, host.tag_output));
                }
                if let Some(i) = child.stdin.take() {
                    out.stdin = Some(i);
                }
                out.pids.push((spec.rank, child.id() as i32));
                if host.binding.report {
                    let pid = child.id() as i32;
                    out.reports.push(binding::report_line(spec.rank, pid, &host.node, placed.as_ref(), &unbound));
                }
                // `child` is dropped without waiting; the reaper owns it.
            }
            Err(e) => {
                let status = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
                let name = spec.arg0.clone().unwrap_or_else(|| spec.program.to_string_lossy().into_owned());
                let msg = format!("cannot run '{name}'{}: {}", host.where_, sys::describe_io_error(&e));
                out.error = Some((spec.rank, msg, status));
                return out;
            }
        }
    }
    out
}
