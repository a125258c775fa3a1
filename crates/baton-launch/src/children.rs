//! The proxies a process of the launch tree started below it (mpiexec at the root, or a proxy
//! inside the tree): starting one ([`start_proxy`]), tracking it ([`ChildProxy`] and its
//! [`State`]), and combining the fences of the jobs their subtrees run ([`Fence`]). Both the
//! root (`root.rs`) and the proxies (`proxy.rs`) build on this; neither depends on the other.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_pmi::auth::Secret;
use baton_pmi::tree::TreeMsg;
use baton_pmi::wire::{self, KeyValue};

use crate::link::Link;
use crate::{sys, JobNo, HOST_FAILURE_STATUS};

/// A started proxy must have connected back by then.
pub const PROXY_START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Process started, proxy not connected yet.
    Starting,
    Up,
    /// Sent `Done`; its link closing is expected.
    Done,
    Gone,
}

/// A proxy this process started.
pub struct ChildProxy {
    pub node: u32,
    pub subtree: Vec<u32>,
    pub pid: Option<i32>,
    pub link: Option<Arc<Link>>,
    pub state: State,
    pub started: Instant,
    /// `JobLaunch`es sent (or queued) to it: its `Done` counts them, so a
    /// `Done` sent before the latest launch arrived is recognised as stale.
    pub launches: u32,
    /// Encoded messages for it, sent once it has connected and had its
    /// `Launch`.
    pub queued: Vec<Vec<u8>>,
}

impl ChildProxy {
    pub fn new(node: u32, subtree: Vec<u32>, pid: Option<i32>) -> ChildProxy {
        let state = if pid.is_some() { State::Starting } else { State::Gone };
        ChildProxy { node, subtree, pid, link: None, state, started: Instant::now(), launches: 0, queued: Vec::new() }
    }

    pub fn covers(&self, node: u32) -> bool {
        self.node == node || self.subtree.contains(&node)
    }

    /// Sends now, or after the `Launch` if it has not connected yet; false
    /// if it is gone.
    pub fn send_or_queue(&mut self, payload: Vec<u8>) -> bool {
        match (self.state, &self.link) {
            (State::Up | State::Done, Some(l)) => l.send_payload(&payload),
            (State::Starting, _) => {
                self.queued.push(payload);
                true
            }
            _ => false,
        }
    }
}

/// One job's fence as seen by one process of the tree: the direct
/// children whose subtrees run ranks of the job each send one `FenceUp`
/// per epoch.
pub struct Fence {
    pub epoch: u64,
    pub arrived: usize,
    pub kvs: Vec<KeyValue>,
    /// Indexes of those children in the owner's child list.
    pub members: Vec<usize>,
}

impl Fence {
    pub fn new(members: Vec<usize>) -> Fence {
        Fence { epoch: 0, arrived: 0, kvs: Vec::new(), members }
    }

    /// One member's `FenceUp`: the encoded `FenceDown` once all are in, or
    /// the exit status and reason why the job cannot go on.
    pub fn arrive(
        &mut self,
        job: JobNo,
        epoch: u64,
        kvs: Vec<KeyValue>,
        host: &str,
    ) -> Result<Option<Vec<u8>>, (i32, String)> {
        if epoch != self.epoch {
            let msg = format!("host {host} entered fence {epoch}, expected fence {}", self.epoch);
            return Err((HOST_FAILURE_STATUS, msg));
        }
        self.arrived += 1;
        self.kvs.extend(kvs);
        if self.arrived < self.members.len() {
            return Ok(None);
        }
        let payload = TreeMsg::FenceDown { job, epoch, kvs: std::mem::take(&mut self.kvs) }.encode();
        if payload.len() > wire::MAX_FRAME_LEN {
            let msg = format!(
                "the key-values put before fence {epoch} total {} bytes, more than the {} a fence can carry",
                payload.len(),
                wire::MAX_FRAME_LEN
            );
            return Err((1, msg));
        }
        self.arrived = 0;
        self.epoch += 1;
        Ok(Some(payload))
    }

    /// Sends a completed fence's `FenceDown` to the members.
    pub fn complete(&self, children: &[ChildProxy], payload: &[u8]) {
        for c in self.members.iter().filter_map(|&m| children.get(m)) {
            if let (State::Up | State::Done, Some(l)) = (c.state, &c.link) {
                l.send_payload(payload);
            }
        }
    }
}

/// "exited with status 1" / "was killed by signal 9 (Killed)".
pub fn describe_status(status: i32) -> String {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        format!("was killed by signal {sig} ({})", sys::signal_name(sig))
    } else {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Starts the proxy of `node` (on `host`, through `rsh` unless `local`)
/// and hands it the secret on its stdin. Returns the pid of the process
/// started here (the remote shell, or the proxy itself).
pub fn start_proxy(
    rsh: &[String],
    host: &str,
    local: bool,
    exe: &str,
    node: u32,
    parent: &[SocketAddr],
    secret: &Secret,
) -> Result<i32, String> {
    let addrs = parent.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let node_s = node.to_string();
    let mut cmd;
    if local {
        cmd = Command::new(exe);
        cmd.args(["--proxy", "--node", &node_s, "--parent", &addrs]);
    } else {
        let (prog, lead) = rsh.split_first().ok_or("empty remote shell command")?;
        // ssh hands the remote shell one string; quote what could break it.
        let remote = format!("exec {} --proxy --node {node_s} --parent {}", shell_quote(exe), shell_quote(&addrs));
        cmd = Command::new(prog);
        cmd.args(lead).arg(host).arg(remote);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::inherit());
    // Terminal signals go to mpiexec alone, which decides what to forward.
    cmd.process_group(0);
    let parent_pid = std::process::id() as i32;
    // SAFETY: child_setup only makes async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || sys::child_setup(parent_pid, None, None));
    }
    let what = if local {
        format!("cannot start the proxy for host {host} ('{exe}')")
    } else {
        format!("cannot run the remote shell '{}' for host {host}", rsh.join(" "))
    };
    let mut child = cmd.spawn().map_err(|e| format!("{what}: {}", sys::describe_io_error(&e)))?;
    let pid = child.id() as i32;
    if let Some(mut stdin) = child.stdin.take() {
        // A remote shell that dies at once is reported through its exit.
        let _ = stdin.write_all(format!("{}\n", secret.to_hex()).as_bytes());
    }
    // `child` is dropped without waiting; the reaper owns it.
    Ok(pid)
}
