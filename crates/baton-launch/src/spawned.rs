//! Jobs started by `MPI_Comm_spawn`, as the launcher keeps them: the checks every request must
//! pass wherever its processes go ([`check_request`], [`parse_env`]), the record of a running
//! spawned job ([`SpawnedJob`]) and, for a job placed through the proxies, where it stands on
//! its hosts ([`TreeJob`]). `comm_spawn.rs` starts jobs on this host, `tree_spawn.rs` through
//! the proxy tree; both build on this module.

use std::collections::BTreeSet;
use std::time::Instant;

use baton_pmi::server::PmiServer;
use baton_pmi::SpawnCmd;

use crate::children::Fence;
use crate::Rank;

/// Most processes one spawn request may start.
pub const MAX_SPAWN_PROCS: u64 = 4096;

/// What every spawn request must satisfy, wherever its processes go: some processes, not too
/// many, and a parent port that can travel as a C string.
pub fn check_request(cmds: &[SpawnCmd], parent_port: &str) -> Result<(), String> {
    let total: u64 = cmds.iter().map(|c| u64::from(c.maxprocs)).sum();
    if total == 0 {
        return Err("cannot spawn: no process was asked for (maxprocs 0)".into());
    }
    if total > MAX_SPAWN_PROCS {
        return Err(format!("cannot spawn {total} processes: at most {MAX_SPAWN_PROCS} per spawn request"));
    }
    if parent_port.contains('\0') {
        return Err("cannot spawn: the parent port name contains a NUL byte".into());
    }
    Ok(())
}

/// A job started by `MPI_Comm_spawn`, until all its processes have exited
/// and its output is drained.
pub struct SpawnedJob {
    pub ranks: Vec<Rank>,
    /// Dropped as soon as every rank has exited.
    pub server: Option<PmiServer>,
    /// This job alone is being ended (its first failure was reported).
    pub failed: bool,
    pub kill_at: Option<Instant>,
    pub output_done: bool,
    pub drain_until: Option<Instant>,
    /// Jobs run through the proxies: where the job stands on its hosts.
    pub tree: Option<TreeJob>,
}

/// `env` info: newline-separated `NAME=VALUE` pairs.
pub fn parse_env(value: &str) -> Result<Vec<(String, String)>, String> {
    let mut env = Vec::new();
    for line in value.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.trim().is_empty() {
            continue;
        }
        match line.split_once('=') {
            Some((name, val)) if !name.is_empty() && !name.contains('\0') && !val.contains('\0') => {
                env.push((name.into(), val.into()));
            }
            _ => return Err(format!("info env line '{line}' is not NAME=VALUE")),
        }
    }
    Ok(env)
}

/// Where a spawned job stands on its hosts.
pub struct TreeJob {
    pub(crate) job_id: u64,
    pub(crate) size: u32,
    /// Until every host has answered `JobStarted`.
    pub(crate) starting: Option<Starting>,
    /// Hosts whose share has not said `JobDone` yet.
    pub(crate) running: BTreeSet<u32>,
    pub(crate) fence: Fence,
}

/// A spawn request waiting for its hosts.
pub(crate) struct Starting {
    /// The proxy that relayed the request, and its number for it.
    pub(crate) origin: u32,
    pub(crate) id: u64,
    pub(crate) waiting: BTreeSet<u32>,
    /// Hosts whose share runs.
    pub(crate) started: usize,
    /// The first failure reported.
    pub(crate) error: Option<String>,
}
