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
//! signals, rank 0's stdin, and lost or failed hosts. Jobs started by
//! `MPI_Comm_spawn` go through the same tree ([`crate::tree_spawn`]); a host
//! of the host list that had no rank of the first job gets its proxy (a
//! direct child of mpiexec) when a spawned job is first placed there.

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use baton_pmi::auth::Secret;
use baton_pmi::tree::{LaunchSpec, SegmentSpec, TreeMsg};

use crate::children::{describe_status, start_proxy, ChildProxy, Fence, State, PROXY_START_TIMEOUT};
use crate::hosts::{self, rank_ranges};
use crate::link::{self, Link, LinkEvent};
use crate::{cli, output, sys, Event, Job, JobNo, Plan, Rank, HOST_FAILURE_STATUS};

/// mpiexec's view of its direct children.
pub struct Tree {
    heartbeat: Duration,
    pub(crate) children: Vec<ChildProxy>,
    pub(crate) by_node: HashMap<u32, usize>,
    /// Every node's subtree (the hosts below it).
    subtree: HashMap<u32, Vec<u32>>,
    /// Ranks of the first job on each node.
    ranks_on: Vec<Vec<u32>>,
    pub(crate) template: LaunchSpec,
    /// The first job's fence.
    fence: Fence,
    /// Direct child whose subtree holds rank 0, and rank 0's node.
    stdin_route: Option<(usize, u32)>,
    stdin_queue: Vec<Vec<u8>>,
    /// For the readers of links set up later.
    tx: mpsc::Sender<Event>,
    /// What starting another proxy takes: the launcher secret, the
    /// addresses it connects back to (loopback for this machine's hosts),
    /// whether each host is this machine.
    secret: Secret,
    loopback: Vec<SocketAddr>,
    advertised: Vec<SocketAddr>,
    pub(crate) local: Vec<bool>,
    /// Slots of each host, for placing spawned jobs.
    pub(crate) slots: Vec<u32>,
    /// Hosts whose proxy was lost or could not be started: nothing more is
    /// placed there.
    pub(crate) lost: HashSet<u32>,
    /// The last spawned job's number.
    pub(crate) last_no: JobNo,
    /// mpiexec's directory: relative `wdir` info is relative to it.
    pub(crate) cwd: PathBuf,
    /// Output written per host and not yet acknowledged to its proxy.
    output_unacked: HashMap<u32, u64>,
    /// This mpiexec's path, which proxies on this machine run.
    own_exe: String,
}

/// The remote shell: `--rsh`, `$BATON_RSH`, or ssh.
fn rsh_words(opts: &cli::Options) -> Vec<String> {
    let cmd = opts.rsh.clone().unwrap_or_else(|| baton_settings::RSH.get());
    cmd.split_whitespace().map(str::to_owned).collect()
}

/// `BATON_LAUNCH_FANOUT` (checked at start-up, see `main`).
fn fanout_from_env() -> Result<usize, String> {
    Ok(baton_settings::LAUNCH_FANOUT.get() as usize)
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
    let iface = opts.iface.clone().or_else(|| baton_settings::LAUNCH_IF.value());
    let rsh = rsh_words(opts);
    let exe = std::env::current_exe().map_err(|e| (format!("cannot find mpiexec's own path: {e}"), 1))?;
    let exe = exe.to_str().ok_or_else(|| ("mpiexec's own path is not UTF-8".to_owned(), 1))?.to_owned();
    // What other hosts run as their proxy; this machine's hosts fork this very mpiexec.
    let agent = opts.agent.clone().or_else(|| baton_settings::LAUNCH_AGENT.value()).unwrap_or_else(|| exe.clone());
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
    // Loopback suffices while every proxy, including those a spawned job
    // may need later, runs here.
    let all_local = plan.local.iter().all(|&l| l);
    let listener = if all_local { TcpListener::bind(("127.0.0.1", 0)) } else { sys::listen_everywhere() }
        .map_err(|e| (format!("cannot open the launcher port: {e}"), 1))?;
    let port = listener.local_addr().map_err(|e| (format!("cannot open the launcher port: {e}"), 1))?.port();
    let loopback = vec![SocketAddr::from(([127, 0, 0, 1], port))];
    let advertised = if all_local {
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
        bind_to: opts.binding.to.name().to_owned(),
        cpus_per_rank: opts.binding.cpus_per_rank,
        report_bindings: opts.binding.report,
        iface: iface.clone().unwrap_or_default(),
        rsh: rsh.clone(),
        proxy_path: agent,
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
        fence: Fence::new((0..direct.len()).collect()),
        stdin_route,
        stdin_queue: Vec::new(),
        tx: tx.clone(),
        secret: secret.clone(),
        loopback: loopback.clone(),
        advertised: advertised.clone(),
        local: plan.local.clone(),
        slots: plan.slots.clone(),
        lost: HashSet::new(),
        last_no: 0,
        cwd: cwd.clone(),
        output_unacked: HashMap::new(),
        own_exe: exe.clone(),
    };

    // Start the children before the reaper: std reaps a child whose exec
    // failed itself, and a concurrent waitpid(-1) could steal that status.
    let mut start_error: Option<String> = None;
    for (node, sub) in direct {
        let is_local = plan.local[node as usize];
        let (addrs, path) = if is_local { (&loopback, &exe) } else { (&advertised, &tree.template.proxy_path) };
        let started = start_proxy(&rsh, &plan.names[node as usize], is_local, path, node, addrs, &secret);
        let pid = match started {
            Ok(pid) => Some(pid),
            Err(msg) => {
                start_error.get_or_insert(msg);
                None
            }
        };
        tree.by_node.insert(node, tree.children.len());
        tree.children.push(ChildProxy::new(node, sub, pid));
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
    pub(crate) fn nodes_of(&self, node: u32) -> Vec<u32> {
        let mut v = vec![node];
        v.extend(self.subtree.get(&node).into_iter().flatten().copied());
        v
    }

    /// Signals every job (`job` None) or one.
    fn signal(&self, job: Option<JobNo>, sig: i32, all: bool) {
        let payload = TreeMsg::Signal { job, sig, all }.encode();
        for c in &self.children {
            if let (State::Up | State::Done, Some(l)) = (c.state, &c.link) {
                l.send_payload(&payload);
            }
        }
    }

    pub fn signal_all(&self, sig: i32, all: bool) {
        self.signal(None, sig, all);
    }

    pub fn signal_job(&self, job: JobNo, sig: i32, all: bool) {
        self.signal(Some(job), sig, all);
    }

    /// The direct child whose subtree holds `node`.
    pub(crate) fn child_for(&self, node: u32) -> Option<usize> {
        self.children.iter().position(|c| c.covers(node))
    }

    /// Sends `msg` towards `node`, through the direct child above it.
    pub(crate) fn route(&mut self, node: u32, msg: &TreeMsg) {
        if let Some(idx) = self.child_for(node) {
            self.children[idx].send_or_queue(msg.encode());
        }
    }

    /// Makes sure `node` has a proxy (starting one as a direct child for a
    /// host that had no rank of the first job); its child index.
    pub(crate) fn ensure_proxy(&mut self, node: u32, name: &str) -> Result<usize, String> {
        if let Some(idx) = self.child_for(node) {
            return match self.children[idx].state {
                State::Gone => Err(format!("host {name} is no longer part of the job (its proxy is gone)")),
                _ => Ok(idx),
            };
        }
        let is_local = self.local[node as usize];
        let addrs = if is_local { &self.loopback } else { &self.advertised };
        let exe = if is_local { &self.own_exe } else { &self.template.proxy_path };
        let rsh = &self.template.rsh;
        let pid = match start_proxy(rsh, name, is_local, exe, node, addrs, &self.secret) {
            Ok(pid) => pid,
            Err(e) => {
                self.lost.insert(node);
                return Err(e);
            }
        };
        let idx = self.children.len();
        self.by_node.insert(node, idx);
        self.subtree.insert(node, Vec::new());
        self.children.push(ChildProxy::new(node, Vec::new(), Some(pid)));
        Ok(idx)
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

/// Processes lost with a host: live ranks of the first job, and of each
/// spawned job.
#[derive(Default)]
pub(crate) struct Lost {
    pub first: Vec<u32>,
    pub spawned: Vec<(JobNo, Vec<u32>)>,
}

impl Lost {
    pub fn is_empty(&self) -> bool {
        self.first.is_empty() && self.spawned.is_empty()
    }
}

/// Why a direct child is gone.
enum Gone {
    /// A message complete in itself.
    Said(String),
    /// Its link ended for this reason; the message names what was lost.
    Lost(String),
}

impl Job {
    pub(crate) fn tree(&mut self) -> &mut Tree {
        self.tree.as_mut().expect("tree mode")
    }

    /// Output is done when no direct child is left.
    fn tree_update_open(&mut self) {
        let Some(t) = &self.tree else { return };
        if t.children.iter().all(|c| c.state == State::Gone) {
            self.output_done = true;
        }
    }

    /// Everything still running on `nodes` is lost: marked exited and
    /// returned. Spawned jobs still starting there fail to start with
    /// `spawn_error` instead.
    pub(crate) fn lose_nodes(&mut self, nodes: &[u32], spawn_error: &str) -> Lost {
        let mut lost = Lost::default();
        for (i, r) in self.ranks.iter_mut().enumerate() {
            if !r.exited && nodes.contains(&(r.node as u32)) {
                r.exited = true;
                lost.first.push(i as u32);
            }
        }
        let nos: Vec<JobNo> = self.spawned.keys().copied().collect();
        for no in nos {
            let ranks = self.spawned_lose_nodes(no, nodes, spawn_error);
            if !ranks.is_empty() {
                lost.spawned.push((no, ranks));
            }
        }
        if let Some(t) = self.tree.as_mut() {
            t.lost.extend(nodes.iter().copied());
        }
        lost
    }

    /// Child `idx` is gone, and with it its subtree; if anything still ran
    /// there, the job fails.
    fn child_gone(&mut self, idx: usize, why: Gone) {
        let node = {
            let c = &mut self.tree().children[idx];
            c.state = State::Gone;
            c.queued.clear();
            if let Some(l) = &c.link {
                l.close();
            }
            c.node
        };
        let nodes = self.tree.as_ref().expect("tree mode").nodes_of(node);
        let name = self.names[node as usize].clone();
        let spawn_error = match &why {
            Gone::Said(msg) => format!("cannot spawn: {msg}"),
            Gone::Lost(reason) => format!("cannot spawn: lost contact with host {name}: {reason}"),
        };
        let lost = self.lose_nodes(&nodes, &spawn_error);
        if !lost.is_empty() {
            let msg = match why {
                Gone::Said(msg) => msg,
                Gone::Lost(reason) => {
                    let own: Vec<u32> =
                        lost.first.iter().copied().filter(|&r| self.ranks[r as usize].node == node as usize).collect();
                    let behind = lost.first.len() - own.len();
                    let mut what = match (own.is_empty(), behind) {
                        (false, 1..) => format!("{}; {behind} more on the hosts it started", rank_ranges(&own)),
                        _ if lost.first.is_empty() => String::new(),
                        _ => rank_ranges(&lost.first),
                    };
                    for (no, ranks) in &lost.spawned {
                        let sep = if what.is_empty() { "" } else { "; " };
                        what = format!("{what}{sep}spawned job {no}: {}", rank_ranges(ranks));
                    }
                    format!("lost contact with host {name} ({what}): {reason}")
                }
            };
            self.fail(HOST_FAILURE_STATUS, &msg);
        }
        self.tree_update_open();
    }

    /// Everything is over: idle proxies are told to go by closing their
    /// links, and one still starting is not needed.
    pub(crate) fn tree_wind_down(&mut self) {
        let Some(t) = self.tree.as_mut() else { return };
        let mut late = Vec::new();
        for (i, c) in t.children.iter().enumerate() {
            match (c.state, &c.link) {
                (State::Done, Some(l)) if !l.is_closed() => l.close(),
                (State::Starting, _) => late.push(i),
                _ => {}
            }
        }
        for idx in late {
            if let Some(pid) = self.tree().children[idx].pid {
                sys::kill_group(pid, libc::SIGKILL);
            }
            self.tree().children[idx].state = State::Gone;
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
        self.child_gone(
            idx,
            Gone::Said(format!(
                "cannot start the proxy on host {name}: its start command (remote shell '{local}') {how} before the proxy connected"
            )),
        );
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
            let secs = PROXY_START_TIMEOUT.as_secs();
            self.child_gone(
                idx,
                Gone::Said(format!("cannot start the proxy on host {name}: it did not connect back within {secs} s")),
            );
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
            let nodes = self.tree().nodes_of(node);
            // Nothing ran there yet; the failure is already reported.
            self.lose_nodes(&nodes, "cannot spawn: the job is being ended");
            let c = &mut self.tree().children[idx];
            c.state = State::Gone;
            c.queued.clear();
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
                let first =
                    || format!("rejected an unauthenticated connection to the launcher port from {peer}: {reason}");
                if let Some(line) = self.rejected.note(peer, crate::REJECTED, first) {
                    say!("mpiexec: {line}");
                }
            }
            LinkEvent::Closed { node, reason } => {
                let Some(&idx) = self.tree().by_node.get(&node) else { return };
                if self.tree().children[idx].state != State::Gone {
                    self.child_gone(idx, Gone::Lost(reason));
                }
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
                self.child_gone(idx, Gone::Said(format!("cannot set up the connection to host {name}: {e}")));
                return;
            }
        };
        let spec = {
            let t = self.tree.as_ref().expect("tree mode");
            t.spec_for(&t.children[idx], &self.names)
        };
        // A failed send shuts the link down; its reader then reports it.
        link.send(&TreeMsg::Launch(Box::new(spec)));
        for payload in std::mem::take(&mut self.tree().children[idx].queued) {
            link.send_payload(&payload);
        }
        let tx = self.tree().tx.clone();
        if let Err(e) = link::start(&reader, &link, Some(node), hb, tx) {
            link.close();
            self.child_gone(idx, Gone::Said(format!("cannot start the threads for host {name}: {e}")));
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
            TreeMsg::Output { node: from, stderr, data } => {
                output::emit_local(stderr, &data);
                // Written (or dropped by a closed stdout): the sender may send as much again.
                let t = self.tree();
                let unacked = t.output_unacked.entry(from).or_default();
                *unacked += data.len() as u64;
                if *unacked >= output::OUTPUT_ACK_EVERY {
                    let bytes = std::mem::take(unacked);
                    if let Some(l) = &t.children[idx].link {
                        l.send(&TreeMsg::OutputAck { node: from, bytes });
                    }
                }
            }
            TreeMsg::RankExited { job: 0, rank, pid, status, connected, finalized } => {
                if let Some(r) = self.ranks.get_mut(rank as usize) {
                    r.pid = pid;
                    r.connected = connected;
                    r.finalized = finalized;
                    self.rank_exited(rank as usize, status);
                }
            }
            TreeMsg::RankExited { job, rank, pid, status, connected, finalized } => {
                self.tree_spawned_rank_exited(job, rank, pid, status, connected, finalized);
            }
            TreeMsg::SpawnFailed { rank, status, msg, not_started } => {
                for r in not_started.iter().chain([&rank]) {
                    if let Some(rk) = self.ranks.get_mut(*r as usize) {
                        rk.exited = true;
                    }
                }
                self.fail(status, &msg);
            }
            TreeMsg::Abort { job: 0, rank, code, msg } => self.abort("", rank, code, &msg),
            TreeMsg::Abort { job, rank, code, msg } => self.abort(&format!("spawned job {job}: "), rank, code, &msg),
            TreeMsg::Log { msg } => say!("mpiexec: {msg}"),
            TreeMsg::NodeFailed { node: gone, status, msg } => {
                let nodes = self.tree().nodes_of(gone);
                let lost = self.lose_nodes(&nodes, &format!("cannot spawn: {msg}"));
                // A host that had finished matters only to later spawns.
                if !lost.is_empty() {
                    self.fail(status, &msg);
                }
            }
            TreeMsg::FenceUp { job: 0, epoch, kvs } => {
                let name = self.names[node as usize].clone();
                match self.tree().fence.arrive(0, epoch, kvs, &name) {
                    Ok(None) => {}
                    Ok(Some(payload)) => {
                        let t = self.tree();
                        t.fence.complete(&t.children, &payload);
                    }
                    Err((status, msg)) => self.fail(status, &msg),
                }
            }
            TreeMsg::FenceUp { job, epoch, kvs } => self.tree_spawned_fence(job, node, epoch, kvs),
            TreeMsg::Done { launches } => {
                let c = &mut self.tree().children[idx];
                if c.state == State::Up && c.launches == launches {
                    c.state = State::Done;
                }
                if self.first_job_over() && self.spawned.is_empty() {
                    self.tree_wind_down();
                }
            }
            TreeMsg::SpawnRequest { node: from, id, job, cmds, parent_port } => {
                if let Err(msg) = self.tree_spawn_request(from, id, job, &cmds, &parent_port) {
                    self.tree().route(from, &TreeMsg::SpawnReply { node: from, id, result: Err(msg) });
                }
            }
            TreeMsg::JobStarted { job, node: at, error } => self.tree_job_started(job, at, error),
            TreeMsg::JobDone { job, node: at } => self.tree_job_done(job, at),
            other => {
                let name = self.names[node as usize].clone();
                say!("mpiexec: ignored an unexpected message from the proxy on host {name}: {other:?}");
            }
        }
    }
}
