//! mpiexec's side of a multi-host job: the root of the proxy tree.
//!
//! [`launch`] starts one proxy per host that has ranks: hosts naming this
//! machine directly, the others through the remote shell, at most
//! `BATON_LAUNCH_FANOUT` of those itself; each of its children starts its
//! share of the rest (see [`crate::hosts::split_subtree`]). mpiexec runs no
//! rank itself. [`Tree`] is the state of mpiexec's direct children; the
//! shared [`crate::Job`] state machine drives the job and calls into the
//! `tree_*` methods here for everything that concerns proxies: launch
//! specs, fences (combined from the children, answered down the tree),
//! signals, rank 0's stdin, and lost or failed hosts.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use baton_pmi::auth::Secret;
use baton_pmi::tree::{LaunchSpec, SegmentSpec, TreeMsg};
use baton_pmi::wire::{self, KeyValue};

use crate::hosts::{self, rank_ranges};
use crate::link::{self, Link, LinkEvent};
use crate::{cli, output, proxy, sys, Event, Job, Plan, Rank, HOST_FAILURE_STATUS};

/// Default for `BATON_LAUNCH_FANOUT`: how many remote proxies one process
/// starts itself.
pub const DEFAULT_FANOUT: usize = 32;
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
}

/// mpiexec's view of its direct children.
pub struct Tree {
    heartbeat: Duration,
    children: Vec<ChildProxy>,
    by_node: HashMap<u32, usize>,
    /// Every node's subtree (the hosts below it).
    subtree: HashMap<u32, Vec<u32>>,
    /// Ranks of each node.
    ranks_on: Vec<Vec<u32>>,
    template: LaunchSpec,
    fence_epoch: u64,
    fence_arrived: usize,
    fence_kvs: Vec<KeyValue>,
    /// Direct child whose subtree holds rank 0, and rank 0's node.
    stdin_route: Option<(usize, u32)>,
    stdin_queue: Vec<Vec<u8>>,
    /// For the readers of links set up later.
    tx: mpsc::Sender<Event>,
}

/// The remote shell: `--rsh`, `$BATON_RSH`, or ssh.
fn rsh_words(opts: &cli::Options) -> Vec<String> {
    let cmd = opts.rsh.clone().or_else(|| std::env::var("BATON_RSH").ok().filter(|s| !s.trim().is_empty()));
    cmd.unwrap_or_else(|| "ssh".into()).split_whitespace().map(str::to_owned).collect()
}

fn fanout_from_env() -> Result<usize, String> {
    match std::env::var("BATON_LAUNCH_FANOUT") {
        Err(_) => Ok(DEFAULT_FANOUT),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=256).contains(&n) => Ok(n),
            _ => Err(format!("BATON_LAUNCH_FANOUT={v:?} is not a number between 1 and 256")),
        },
    }
}

/// Records every node's subtree, recursively, as the proxies will split it.
fn record_subtrees(nodes: &[u32], fanout: usize, out: &mut HashMap<u32, Vec<u32>>) {
    for (child, sub) in hosts::split_subtree(nodes, fanout) {
        record_subtrees(&sub, fanout, out);
        out.insert(child, sub);
    }
}

pub fn launch(opts: &cli::Options, plan: Plan) -> Result<i32, (String, i32)> {
    let size = plan.placement.len() as u32;
    let job_id = sys::random_job_id().map_err(|e| (e, 1))?;
    let secret = Secret::generate().map_err(|e| (e.to_string(), 1))?;
    let heartbeat = link::heartbeat_timeout_from_env().map_err(|e| (e, 2))?;
    let fanout = fanout_from_env().map_err(|e| (e, 2))?;
    let iface = opts.iface.clone().or_else(|| std::env::var("BATON_LAUNCH_IF").ok().filter(|s| !s.is_empty()));
    let rsh = rsh_words(opts);
    let exe = std::env::current_exe().map_err(|e| (format!("cannot find mpiexec's own path: {e}"), 1))?;
    let exe = exe.to_str().ok_or_else(|| ("mpiexec's own path is not UTF-8".to_owned(), 1))?.to_owned();
    let cwd = std::env::current_dir().map_err(|e| (format!("cannot read the current directory: {e}"), 1))?;

    let mut ranks_on = vec![Vec::new(); plan.names.len()];
    for (rank, &node) in plan.placement.iter().enumerate() {
        ranks_on[node].push(rank as u32);
    }
    let used: Vec<u32> = (0..plan.names.len() as u32).filter(|&n| !ranks_on[n as usize].is_empty()).collect();
    let (local, remote): (Vec<u32>, Vec<u32>) = used.iter().partition(|&&n| plan.local[n as usize]);

    // Direct children: every local host, then the top of the remote tree.
    let mut direct: Vec<(u32, Vec<u32>)> = local.iter().map(|&n| (n, Vec::new())).collect();
    direct.extend(hosts::split_subtree(&remote, fanout));
    let mut subtree = HashMap::new();
    for &n in &local {
        subtree.insert(n, Vec::new());
    }
    record_subtrees(&remote, fanout, &mut subtree);

    let (tx, rx) = mpsc::channel::<Event>();
    sys::install_signal_forwarder(tx.clone()).map_err(|e| (format!("cannot set up signal handling: {e}"), 1))?;
    // Loopback suffices while every proxy runs here.
    let bind_ip = if remote.is_empty() { "127.0.0.1" } else { "0.0.0.0" };
    let listener = TcpListener::bind((bind_ip, 0)).map_err(|e| (format!("cannot open the launcher port: {e}"), 1))?;
    let port = listener.local_addr().map_err(|e| (format!("cannot open the launcher port: {e}"), 1))?.port();
    let loopback = vec![SocketAddr::from(([127, 0, 0, 1], port))];
    let advertised = if remote.is_empty() {
        loopback.clone()
    } else {
        link::advertised_addrs(iface.as_deref(), port).map_err(|e| {
            (format!("cannot choose the addresses proxies reach mpiexec at (-iface, BATON_LAUNCH_IF): {e}"), 2)
        })?
    };
    link::start_listener(listener, secret.clone(), tx.clone())
        .map_err(|e| (format!("cannot start the launcher's accept thread: {e}"), 1))?;

    let forward_stdin = sys::may_read_stdin();
    let segments = opts
        .segments
        .iter()
        .map(|seg| SegmentSpec {
            nprocs: seg.nprocs,
            program: seg.program.clone(),
            args: seg.args.clone(),
            env: seg.env.clone(),
            wdir: crate::segment_wdir(opts, seg).unwrap_or_else(|| cwd.clone()).as_os_str().as_bytes().to_vec(),
        })
        .collect();
    let base_env = std::env::vars_os().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect();
    let template = LaunchSpec {
        job_id,
        size,
        universe_size: plan.universe_size,
        heartbeat_ms: heartbeat.as_millis().min(u128::from(u32::MAX)) as u32,
        fanout: fanout as u32,
        tag_output: opts.tag_output,
        forward_stdin,
        iface: iface.clone().unwrap_or_default(),
        rsh: rsh.clone(),
        proxy_path: exe.clone(),
        nodes: Vec::new(),
        ranks: Vec::new(),
        segments,
        genv: opts.genv.clone(),
        base_env,
    };

    let node0 = plan.placement.first().copied().unwrap_or(0) as u32;
    let stdin_route = direct.iter().position(|(n, sub)| *n == node0 || sub.contains(&node0)).map(|i| (i, node0));
    let mut tree = Tree {
        heartbeat,
        children: Vec::new(),
        by_node: HashMap::new(),
        subtree,
        ranks_on: ranks_on.clone(),
        template,
        fence_epoch: 0,
        fence_arrived: 0,
        fence_kvs: Vec::new(),
        stdin_route,
        stdin_queue: Vec::new(),
        tx: tx.clone(),
    };

    // Start the children before the reaper: std reaps a child whose exec
    // failed itself, and a concurrent waitpid(-1) could steal that status.
    let mut start_error: Option<String> = None;
    for (node, sub) in direct {
        let is_local = plan.local[node as usize];
        let addrs = if is_local { &loopback } else { &advertised };
        let started = proxy::start_proxy(&rsh, &plan.names[node as usize], is_local, &exe, node, addrs, &secret);
        let pid = match started {
            Ok(pid) => Some(pid),
            Err(msg) => {
                start_error.get_or_insert(msg);
                None
            }
        };
        tree.by_node.insert(node, tree.children.len());
        let state = if pid.is_some() { State::Starting } else { State::Gone };
        tree.children.push(ChildProxy { node, subtree: sub, pid, link: None, state, started: Instant::now() });
        if start_error.is_some() {
            break;
        }
    }
    sys::start_reaper(tx.clone());
    if forward_stdin && tree.stdin_route.is_some() {
        let stdin_tx = tx.clone();
        let _ = thread::Builder::new().name("stdin".into()).spawn(move || {
            output::read_stdin(|chunk| stdin_tx.send(Event::Stdin(chunk.to_vec())).is_ok());
            let _ = stdin_tx.send(Event::Stdin(Vec::new()));
        });
    }
    drop(tx);

    let ranks: Vec<Rank> = plan
        .placement
        .iter()
        .map(|&node| Rank { pid: 0, node, connected: false, finalized: false, exited: false })
        .collect();
    let mut job = Job::new(ranks, plan.names.clone(), opts.timeout, Some(tree));
    if let Some(msg) = start_error {
        // Nothing has connected yet and every proxy started so far is
        // killed (tree_failed), so no rank will run anywhere.
        for r in &mut job.ranks {
            r.exited = true;
        }
        job.fail(HOST_FAILURE_STATUS, &msg);
    }
    let status = job.run(&rx);
    // Exits already reaped must not be mistaken for live process groups.
    while let Ok(ev) = rx.try_recv() {
        if let Event::Exited(pid, status) = ev {
            job.tree_process_exited(pid, status);
        }
    }
    // A remote shell still running has nothing left to do.
    if let Some(tree) = &job.tree {
        for c in &tree.children {
            if let Some(pid) = c.pid {
                sys::kill_group(pid, libc::SIGKILL);
            }
        }
    }
    Ok(status)
}

impl Tree {
    /// A node and every node below it.
    fn nodes_of(&self, node: u32) -> Vec<u32> {
        let mut v = vec![node];
        v.extend(self.subtree.get(&node).into_iter().flatten().copied());
        v
    }

    pub fn signal_all(&self, sig: i32, all: bool) {
        let payload = TreeMsg::Signal { sig, all }.encode();
        for c in &self.children {
            if let (State::Up, Some(l)) = (c.state, &c.link) {
                l.send_payload(&payload);
            }
        }
    }

    /// The earliest start deadline of a proxy not connected yet.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.children.iter().filter(|c| c.state == State::Starting).map(|c| c.started + PROXY_START_TIMEOUT).min()
    }

    /// Sends queued stdin once rank 0's route is up; drops it when that
    /// route is gone.
    fn flush_stdin(&mut self) {
        let Some((idx, node)) = self.stdin_route else { return };
        match (self.children.get(idx).map(|c| c.state), self.children.get(idx).and_then(|c| c.link.clone())) {
            (Some(State::Up), Some(l)) => {
                for data in std::mem::take(&mut self.stdin_queue) {
                    l.send(&TreeMsg::Stdin { node, data });
                }
            }
            (Some(State::Starting), _) => {}
            _ => self.stdin_queue.clear(),
        }
    }

    fn spec_for(&self, child: &ChildProxy, names: &[String]) -> LaunchSpec {
        let nodes = self.nodes_of(child.node);
        let mut spec = self.template.clone();
        spec.nodes = nodes.iter().map(|&n| (n, names[n as usize].clone())).collect();
        spec.ranks = nodes.iter().flat_map(|&n| self.ranks_on[n as usize].iter().map(move |&r| (r, n))).collect();
        spec
    }
}

impl Job {
    fn tree(&mut self) -> &mut Tree {
        self.tree.as_mut().expect("tree mode")
    }

    /// Output is done when no direct child is left.
    fn tree_update_open(&mut self) {
        let Some(t) = &self.tree else { return };
        if t.children.iter().all(|c| c.state == State::Gone) {
            self.output_done = true;
        }
    }

    /// The ranks of `node`'s subtree that have not exited.
    fn live_ranks_below(&self, node: u32) -> Vec<u32> {
        let Some(t) = &self.tree else { return Vec::new() };
        t.nodes_of(node)
            .iter()
            .flat_map(|&n| t.ranks_on[n as usize].iter().copied())
            .filter(|&r| !self.ranks[r as usize].exited)
            .collect()
    }

    /// Child `idx` is gone; unless it had finished, its subtree's ranks are
    /// lost and the job fails with `why`.
    fn child_gone(&mut self, idx: usize, why: impl FnOnce(&Job, &[u32]) -> String) {
        let (node, state) = {
            let c = &mut self.tree().children[idx];
            let before = c.state;
            c.state = State::Gone;
            if let Some(l) = &c.link {
                l.close();
            }
            (c.node, before)
        };
        if state != State::Done && state != State::Gone {
            let lost = self.live_ranks_below(node);
            for &r in &lost {
                self.ranks[r as usize].exited = true;
            }
            if !lost.is_empty() {
                let msg = why(self, &lost);
                self.fail(HOST_FAILURE_STATUS, &msg);
            }
        }
        self.tree_update_open();
    }

    pub(crate) fn tree_process_exited(&mut self, pid: i32, status: i32) {
        let Some(t) = &self.tree else { return };
        let Some(idx) = t.children.iter().position(|c| c.pid == Some(pid)) else { return };
        self.tree().children[idx].pid = None;
        if self.tree().children[idx].state != State::Starting {
            return;
        }
        let node = self.tree().children[idx].node;
        let how = describe_status(status);
        let local = self.tree().template.rsh.first().cloned().unwrap_or_default();
        let name = self.names[node as usize].clone();
        self.child_gone(idx, |_, _| {
            format!("cannot start the proxy on host {name}: its start command (remote shell '{local}') {how} before the proxy connected")
        });
    }

    pub(crate) fn tree_tick(&mut self) {
        let now = Instant::now();
        let late: Vec<usize> = self
            .tree()
            .children
            .iter()
            .enumerate()
            .filter(|(_, c)| c.state == State::Starting && now >= c.started + PROXY_START_TIMEOUT)
            .map(|(i, _)| i)
            .collect();
        for idx in late {
            let (node, pid) = (self.tree().children[idx].node, self.tree().children[idx].pid);
            if let Some(pid) = pid {
                sys::kill_group(pid, libc::SIGKILL);
            }
            let name = self.names[node as usize].clone();
            self.child_gone(idx, |_, _| {
                format!(
                    "cannot start the proxy on host {name}: it did not connect back within {} s",
                    PROXY_START_TIMEOUT.as_secs()
                )
            });
        }
    }

    /// The job is failing: proxies not connected yet will not be needed.
    pub(crate) fn tree_failed(&mut self) {
        let starting: Vec<usize> = self
            .tree()
            .children
            .iter()
            .enumerate()
            .filter(|(_, c)| c.state == State::Starting)
            .map(|(i, _)| i)
            .collect();
        for idx in starting {
            if let Some(pid) = self.tree().children[idx].pid {
                sys::kill_group(pid, libc::SIGKILL);
            }
            let node = self.tree().children[idx].node;
            for r in self.live_ranks_below(node) {
                self.ranks[r as usize].exited = true;
            }
            self.tree().children[idx].state = State::Gone;
        }
        self.tree_update_open();
    }

    pub(crate) fn tree_stdin(&mut self, data: Vec<u8>) {
        let Some(t) = self.tree.as_mut() else { return };
        t.stdin_queue.push(data);
        t.flush_stdin();
    }

    pub(crate) fn tree_link_event(&mut self, ev: LinkEvent) {
        if self.tree.is_none() {
            return;
        }
        match ev {
            LinkEvent::Up { node, stream } => self.child_up(node, stream),
            LinkEvent::Rejected { peer, reason } => {
                say!("mpiexec: rejected an unauthenticated connection to the launcher port from {peer}: {reason}");
            }
            LinkEvent::Closed { node, reason } => {
                let Some(&idx) = self.tree().by_node.get(&node) else { return };
                let name = self.names[node as usize].clone();
                self.child_gone(idx, |job, lost| {
                    let own: Vec<u32> =
                        lost.iter().copied().filter(|&r| job.ranks[r as usize].node == node as usize).collect();
                    let behind = lost.len() - own.len();
                    let mut msg = format!("lost contact with host {name} ({})", rank_ranges(lost));
                    if behind > 0 && !own.is_empty() {
                        msg = format!(
                            "lost contact with host {name} ({}; {behind} more on the hosts it started)",
                            rank_ranges(&own)
                        );
                    }
                    format!("{msg}: {reason}")
                });
            }
            LinkEvent::Msg { node, msg } => self.child_msg(node, msg),
            LinkEvent::FromParent(_) | LinkEvent::ParentClosed(_) => {}
        }
    }

    fn child_up(&mut self, node: u32, stream: TcpStream) {
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let t = self.tree.as_ref().expect("tree mode");
        let idx = match t.by_node.get(&node) {
            Some(&i) if t.children[i].state == State::Starting => i,
            _ => {
                // Stale or duplicate: it authenticated, so it is one of
                // ours, but nothing waits for it.
                if self.failure.is_none() {
                    say!("mpiexec: closed an unexpected proxy connection for node {node} from {peer}");
                }
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
        };
        let hb = self.tree().heartbeat;
        let name = self.names[node as usize].clone();
        let started = stream.try_clone().and_then(|reader| {
            let link = Link::new(stream, hb)?;
            Ok((reader, link))
        });
        let (reader, link) = match started {
            Ok(v) => v,
            Err(e) => {
                self.child_gone(idx, |_, _| format!("cannot set up the connection to host {name}: {e}"));
                return;
            }
        };
        let spec = {
            let t = self.tree.as_ref().expect("tree mode");
            t.spec_for(&t.children[idx], &self.names)
        };
        // A failed send shuts the link down; its reader then reports it.
        link.send(&TreeMsg::Launch(Box::new(spec)));
        let tx = self.tree().tx.clone();
        if let Err(e) = link::start(&reader, &link, Some(node), hb, tx) {
            link.close();
            self.child_gone(idx, |_, _| format!("cannot start the threads for host {name}: {e}"));
            return;
        }
        let c = &mut self.tree().children[idx];
        c.link = Some(link);
        c.state = State::Up;
        // Rank 0's stdin may have arrived before its host was up.
        self.tree().flush_stdin();
    }

    fn child_msg(&mut self, node: u32, msg: TreeMsg) {
        let Some(&idx) = self.tree().by_node.get(&node) else { return };
        match msg {
            TreeMsg::Output { stderr, data } => output::emit_local(stderr, &data),
            TreeMsg::RankExited { rank, pid, status, connected, finalized } => {
                if let Some(r) = self.ranks.get_mut(rank as usize) {
                    r.pid = pid;
                    r.connected = connected;
                    r.finalized = finalized;
                    self.rank_exited(rank as usize, status);
                }
            }
            TreeMsg::SpawnFailed { rank, status, msg, not_started } => {
                for r in not_started.iter().chain([&rank]) {
                    if let Some(rk) = self.ranks.get_mut(*r as usize) {
                        rk.exited = true;
                    }
                }
                self.fail(status, &msg);
            }
            TreeMsg::Abort { rank, code, msg } => self.abort("", rank, code, &msg),
            TreeMsg::Log { msg } => say!("mpiexec: {msg}"),
            TreeMsg::NodeFailed { node: lost, status, msg } => {
                let t = self.tree.as_ref().expect("tree mode");
                let ranks: Vec<u32> =
                    t.nodes_of(lost).iter().flat_map(|&n| t.ranks_on[n as usize].iter().copied()).collect();
                for r in ranks {
                    self.ranks[r as usize].exited = true;
                }
                self.fail(status, &msg);
            }
            TreeMsg::FenceUp { epoch, kvs } => {
                let expected = self.tree().fence_epoch;
                if epoch != expected {
                    let name = self.names[node as usize].clone();
                    self.fail(
                        HOST_FAILURE_STATUS,
                        &format!("host {name} entered fence {epoch}, expected fence {expected}"),
                    );
                    return;
                }
                let t = self.tree();
                t.fence_arrived += 1;
                t.fence_kvs.extend(kvs);
                if t.fence_arrived == t.children.len() {
                    let payload = TreeMsg::FenceDown { epoch, kvs: std::mem::take(&mut t.fence_kvs) }.encode();
                    if payload.len() > wire::MAX_FRAME_LEN {
                        let msg = format!(
                            "the key-values put before fence {epoch} total {} bytes, more than the {} a fence can carry",
                            payload.len(),
                            wire::MAX_FRAME_LEN
                        );
                        self.fail(1, &msg);
                        return;
                    }
                    let t = self.tree();
                    t.fence_arrived = 0;
                    t.fence_epoch += 1;
                    for c in &t.children {
                        if let (State::Up, Some(l)) = (c.state, &c.link) {
                            l.send_payload(&payload);
                        }
                    }
                }
            }
            TreeMsg::Done => {
                let c = &mut self.tree().children[idx];
                c.state = State::Done;
                if let Some(l) = &c.link {
                    // Our close is the proxy's cue to exit.
                    l.close();
                }
            }
            other => {
                let name = self.names[node as usize].clone();
                say!("mpiexec: ignored an unexpected message from the proxy on host {name}: {other:?}");
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
