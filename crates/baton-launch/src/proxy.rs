//! The per-host proxy: `mpiexec --proxy --node N --parent ADDR[,ADDR...]`.
//!
//! Started by mpiexec (or by a parent proxy) on each host of a multi-host
//! job, through the remote shell or directly for this machine. It reads
//! the job's launcher secret from the first line of its stdin (never from
//! the command line, which `ps` shows), connects back to its parent,
//! authenticates, says which node it serves and receives a
//! [`LaunchSpec`]. Then it starts the proxies of its own subtree, forks
//! this host's ranks exactly as single-host mpiexec does (own process
//! group, parent-death signal, one memfd per host), serves their bootstrap
//! requests with a delegated-fence [`PmiServer`], relays their output and
//! exits up the tree, and obeys signals coming down. It also starts this
//! host's share of jobs spawned later ([`crate::proxy_spawn`]). [`Proxy`] is
//! that state. When nothing runs in its subtree any more it says `Done`
//! and exits once its parent closes the link; it kills its ranks and exits
//! as soon as its parent is gone otherwise.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use baton_pmi::auth::Secret;
use baton_pmi::reject::RejectLog;
use baton_pmi::server::{PmiServer, ServerConfig, ServerEvent};
use baton_pmi::tree::{LaunchSpec, TreeMsg};
use baton_pmi::wire::{self, KeyValue};

use crate::children::{describe_status, start_proxy, ChildProxy, State, PROXY_START_TIMEOUT};
use crate::hosts::{self, rank_ranges};
use crate::link::{self, Link, LinkEvent};
use crate::{output, ranks, sys, Event, JobNo, HOST_FAILURE_STATUS};

/// Label of the key the ranks get, derived from the launcher secret.
pub const RANK_KEY_LABEL: &str = "ranks";
/// How long a proxy waits for its launch description.
const LAUNCH_WAIT: Duration = Duration::from_secs(30);

/// Entry point of `mpiexec --proxy ...`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let mut node = None;
    let mut parent = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--node" => node = it.next().and_then(|v| v.parse::<u32>().ok()),
            "--parent" => parent = it.next().map(|v| link::parse_addrs(v)),
            _ => {
                say!("mpiexec --proxy: unknown argument '{a}' (this mode is for mpiexec's own use)");
                return 2;
            }
        }
    }
    let (Some(node), Some(parent)) = (node, parent) else {
        say!("mpiexec --proxy: needs --node N and --parent ADDR[,ADDR...] (this mode is for mpiexec's own use)");
        return 2;
    };
    let parent = match parent {
        Ok(p) => p,
        Err(e) => {
            say!("mpiexec --proxy: --parent: {e}");
            return 2;
        }
    };
    let secret = match sys::read_secret(LAUNCH_WAIT, "launcher secret") {
        Ok(s) => s,
        Err(e) => {
            say!("mpiexec --proxy (node {node}): {e}");
            return 2;
        }
    };
    match run(node, &parent, secret) {
        Ok(status) => status,
        Err(e) => {
            say!("mpiexec (proxy for node {node} on {}): {e}", sys::hostname());
            1
        }
    }
}

/// A rank of this host.
pub(crate) struct LocalRank {
    pub rank: u32,
    pub pid: i32,
    pub connected: bool,
    pub finalized: bool,
    pub exited: bool,
}

/// This host's share of one job, and that job's fence in this subtree.
pub(crate) struct Part {
    /// `None` where no rank of the job runs, and (spawned jobs) once every
    /// local rank has exited.
    pub server: Option<PmiServer>,
    pub ranks: Vec<LocalRank>,
    /// Whether ranks of the job were placed on this host.
    pub local: bool,
    /// The direct children whose subtrees run ranks of the job.
    pub fence_children: Vec<u32>,
    pub fence_epoch: u64,
    pub fence_local: bool,
    pub fence_arrived: usize,
    pub fence_kvs: Vec<KeyValue>,
    pub output_done: bool,
    /// Spawned jobs: the hosts below whose share has not reported its end
    /// (`JobDone`, or `JobStarted` with an error) yet.
    pub below: BTreeSet<u32>,
    /// Spawned jobs: `JobDone` was sent for the local share.
    pub reported: bool,
    /// mpiexec is ending the job: a rank killed while it authenticates
    /// looks like an intruder, and is not reported as one.
    pub ending: bool,
}

impl Part {
    pub fn new(local: bool, fence_children: Vec<u32>) -> Part {
        Part {
            server: None,
            ranks: Vec::new(),
            local,
            fence_children,
            fence_epoch: 0,
            fence_local: false,
            fence_arrived: 0,
            fence_kvs: Vec::new(),
            output_done: true,
            below: BTreeSet::new(),
            reported: false,
            ending: false,
        }
    }

    /// No local rank runs and their output is flushed.
    pub fn idle(&self) -> bool {
        self.output_done && self.ranks.iter().all(|r| r.exited)
    }
}

/// The proxy's state, driven by [`Event`]s like mpiexec's `Job`.
pub(crate) struct Proxy {
    pub me: u32,
    pub name: String,
    /// The first job, as this proxy's subtree sees it.
    pub spec: LaunchSpec,
    pub names: HashMap<u32, String>,
    pub secret: Secret,
    /// The key of every job's ranks (derived from the launcher secret).
    pub rank_secret: Secret,
    /// mpiexec's environment, the base of every rank's.
    pub base_env: Vec<(OsString, OsString)>,
    pub heartbeat: Duration,
    pub parent: Arc<Link>,
    /// Job 0 (the first job) and the spawned jobs this subtree has a share of.
    pub parts: BTreeMap<JobNo, Part>,
    pub by_pid: HashMap<i32, (JobNo, usize)>,
    pub children: Vec<ChildProxy>,
    pub by_node: HashMap<u32, usize>,
    pub stdin_tx: Option<mpsc::Sender<Vec<u8>>>,
    /// `JobLaunch`es received; `Done` carries the count.
    pub launches: u32,
    /// `Done` was sent and no launch came since.
    pub done_sent: bool,
    /// Spawn requests relayed up and not answered yet: our number for each,
    /// and the requesting rank's job and rank.
    pub requests: HashMap<u64, (JobNo, u32)>,
    pub next_request: u64,
    pub tx: mpsc::Sender<Event>,
    /// Output of this host's ranks sent up and not yet written by mpiexec.
    pub output_window: Arc<output::OutputWindow>,
    /// Refused connections to this host's ports, logged sparingly.
    pub rejected: RejectLog,
}

/// Variables that describe the login session on mpiexec's host rather than the
/// job: its display, ssh agent and connection, runtime directory, session bus.
/// Another host's values of these (those its remote shell set) are the right
/// ones there; `-genv` still sets any of them for every rank.
const SESSION_VARS: &[&str] = &[
    "DBUS_SESSION_BUS_ADDRESS",
    "DISPLAY",
    "HOSTNAME",
    "SSH_AUTH_SOCK",
    "SSH_CLIENT",
    "SSH_CONNECTION",
    "SSH_TTY",
    "WINDOWID",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "XDG_SESSION_CLASS",
    "XDG_SESSION_ID",
    "XDG_SESSION_TYPE",
];

/// The environment this host's ranks start from: mpiexec's, with this host's
/// own session variables (`own`: the proxy's environment) in place of
/// mpiexec's. On mpiexec's own host the two agree.
fn host_env(
    launcher: &[(Vec<u8>, Vec<u8>)],
    own: impl Iterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let session = |k: &[u8]| SESSION_VARS.iter().any(|v| v.as_bytes() == k);
    let mut env: Vec<(OsString, OsString)> = launcher
        .iter()
        .filter(|(k, _)| !session(k))
        .map(|(k, v)| (OsString::from_vec(k.clone()), OsString::from_vec(v.clone())))
        .collect();
    env.extend(own.filter(|(k, _)| session(k.as_bytes())));
    env
}

fn run(me: u32, parent_addrs: &[SocketAddr], secret: Secret) -> Result<i32, String> {
    let mut stream = link::connect_parent(parent_addrs, &secret, me)
        .map_err(|e| format!("cannot reach mpiexec at any of its addresses: {e}"))?;
    stream.set_read_timeout(Some(LAUNCH_WAIT)).map_err(|e| e.to_string())?;
    let spec = match wire::read_frame(&mut stream).map_err(|e| e.to_string())?.map(|p| TreeMsg::decode(&p)) {
        Some(Ok(TreeMsg::Launch(spec))) => *spec,
        Some(Ok(other)) => return Err(format!("expected the launch description, got {other:?}")),
        Some(Err(e)) => return Err(e.to_string()),
        // mpiexec gave up on the job before we were needed.
        None => return Ok(1),
    };
    check_spec(me, &spec)?;
    let name = spec.nodes[0].1.clone();
    let heartbeat = Duration::from_millis(u64::from(spec.heartbeat_ms.max(1000)));

    let (tx, rx) = mpsc::channel::<Event>();
    sys::install_signal_forwarder(tx.clone()).map_err(|e| format!("cannot set up signal handling: {e}"))?;
    let reader = stream.try_clone().map_err(|e| e.to_string())?;
    let parent = Link::new(stream, heartbeat).map_err(|e| e.to_string())?;
    link::start(&reader, &parent, None, heartbeat, tx.clone()).map_err(|e| e.to_string())?;

    let mut mine: Vec<u32> = spec.ranks.iter().filter(|(_, n)| *n == me).map(|(r, _)| *r).collect();
    mine.sort_unstable();
    let rank_secret = secret.derive(RANK_KEY_LABEL);
    let pmi_tx = tx.clone();
    let cfg = ServerConfig {
        local_ranks: Some(mine.clone()),
        delegate_fence: true,
        ..ServerConfig::whole_job(spec.size, spec.job_id, rank_secret.clone())
    };
    let server = PmiServer::start(cfg, move |e| {
        let _ = pmi_tx.send(Event::Pmi(0, e));
    })
    .map_err(|e| format!("cannot open the bootstrap socket: {e}"))?;
    let memfd =
        sys::create_job_memfd(spec.job_id).map_err(|e| format!("cannot create the host's shared-memory fd: {e}"))?;

    let names: HashMap<u32, String> = spec.nodes.iter().cloned().collect();
    let base_env = host_env(&spec.base_env, std::env::vars_os());
    let mut proxy = Proxy {
        me,
        name: name.clone(),
        names,
        secret,
        rank_secret: rank_secret.clone(),
        base_env,
        heartbeat,
        parent: Arc::clone(&parent),
        parts: BTreeMap::new(),
        by_pid: HashMap::new(),
        children: Vec::new(),
        by_node: HashMap::new(),
        stdin_tx: None,
        launches: 0,
        done_sent: false,
        requests: HashMap::new(),
        next_request: 0,
        tx: tx.clone(),
        output_window: Arc::default(),
        rejected: RejectLog::new(),
        spec,
    };

    // Children first: remote shells take longest to start.
    let below: Vec<u32> = proxy.spec.nodes[1..].iter().map(|(n, _)| *n).collect();
    let mut start_error = None;
    if !below.is_empty() {
        let listener =
            sys::listen_everywhere().map_err(|e| format!("cannot open a port for the proxies below: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let iface = Some(proxy.spec.iface.as_str()).filter(|s| !s.is_empty());
        let addrs = link::advertised_addrs(iface, port)?;
        link::start_listener(listener, proxy.secret.clone(), tx.clone()).map_err(|e| e.to_string())?;
        for (node, sub) in hosts::split_subtree(&below, proxy.spec.fanout as usize) {
            let host = proxy.names.get(&node).cloned().unwrap_or_default();
            let started =
                start_proxy(&proxy.spec.rsh, &host, false, &proxy.spec.proxy_path, node, &addrs, &proxy.secret);
            let pid = match started {
                Ok(pid) => Some(pid),
                Err(msg) => {
                    start_error.get_or_insert((node, msg));
                    None
                }
            };
            proxy.by_node.insert(node, proxy.children.len());
            proxy.children.push(ChildProxy::new(node, sub, pid));
        }
    }
    // Every host below has ranks of the first job.
    let mut first = Part::new(!mine.is_empty(), proxy.children.iter().map(|c| c.node).collect());

    let specs = rank_specs(&proxy.spec, &mine);
    let host_env = ranks::HostEnv {
        clear_env: true,
        base_env: proxy.base_env.clone(),
        pmi_addr: server.addr().to_string(),
        secret_hex: rank_secret.to_hex(),
        job_id: proxy.spec.job_id,
        size: proxy.spec.size,
        universe_size: proxy.spec.universe_size,
        local_size: mine.len() as u32,
        node: name.clone(),
        tag_output: proxy.spec.tag_output,
        stdin_for_rank0: proxy.spec.forward_stdin,
        where_: format!(" on host {name}"),
        parent_port: None,
        binding: crate::binding::Binding::of_spec(&proxy.spec),
    };
    let spawned = ranks::start(&specs, &host_env, &memfd);
    for msg in spawned.reports.iter().cloned() {
        parent.send(&TreeMsg::Log { msg });
    }
    sys::start_reaper(tx.clone());
    first.server = Some(server);
    for &(rank, pid) in &spawned.pids {
        proxy.by_pid.insert(pid, (0, first.ranks.len()));
        first.ranks.push(LocalRank { rank, pid, connected: false, finalized: false, exited: false });
    }
    if let Some((rank, msg, status)) = spawned.error {
        let not_started: Vec<u32> = mine.iter().copied().filter(|r| *r > rank).collect();
        parent.send(&TreeMsg::SpawnFailed { rank, status, msg, not_started });
    }
    let sources = spawned.sources;
    if !sources.is_empty() {
        first.output_done = false;
        forward_output(sources, 0, &proxy).map_err(|e| format!("cannot start the output thread: {e}"))?;
    }
    proxy.parts.insert(0, first);
    if let Some((node, msg)) = start_error {
        proxy.child_failed(node, HOST_FAILURE_STATUS, msg);
    }
    if let Some(mut pipe) = spawned.stdin {
        // A rank that does not read its stdin must not stall the proxy's
        // event loop, so a thread of its own writes the pipe.
        let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>();
        proxy.stdin_tx = Some(stdin_tx);
        let _ = thread::Builder::new().name("stdin".into()).spawn(move || {
            for chunk in stdin_rx {
                if chunk.is_empty() || pipe.write_all(&chunk).is_err() {
                    return;
                }
            }
        });
    }
    drop(memfd);
    let status = proxy.run(&rx);
    Ok(status)
}

/// Relays the output of job `job`'s local ranks up the tree in a thread of
/// its own, which reports `OutputDone(job)` at the end.
pub(crate) fn forward_output(sources: Vec<output::Source>, job: JobNo, proxy: &Proxy) -> std::io::Result<()> {
    let (out_tx, out_link, window, node) =
        (proxy.tx.clone(), Arc::clone(&proxy.parent), Arc::clone(&proxy.output_window), proxy.me);
    thread::Builder::new().name("output".into()).spawn(move || {
        output::forward(sources, |stderr, data| {
            // Frames are capped; a huge unbroken line goes in pieces.
            for piece in data.chunks(output::OUTPUT_PIECE) {
                // With the link lost nothing more can be shown; the pipes are still drained.
                if window.take(piece.len() as u64, || out_link.is_closed()) {
                    out_link.send(&TreeMsg::Output { node, stderr, data: piece.to_vec() });
                }
            }
        });
        let _ = out_tx.send(Event::OutputDone(job));
    })?;
    Ok(())
}

/// Rejects a launch description that contradicts itself, so nothing
/// later indexes out of bounds.
fn check_spec(me: u32, spec: &LaunchSpec) -> Result<(), String> {
    let bad = |what: &str| Err(format!("inconsistent launch description: {what}"));
    if spec.nodes.first().map(|(n, _)| *n) != Some(me) {
        return bad("it is not addressed to this node");
    }
    let total: u64 = spec.segments.iter().map(|s| u64::from(s.nprocs)).sum();
    if total != u64::from(spec.size) {
        return bad("segment sizes do not add up to the job size");
    }
    if spec.ranks.iter().any(|&(r, n)| r >= spec.size || !spec.nodes.iter().any(|(m, _)| *m == n)) {
        return bad("a rank is outside the job or placed on an unknown node");
    }
    if spec.fanout == 0 {
        return bad("fan-out 0");
    }
    Ok(())
}

/// What each local rank runs, in rank order.
fn rank_specs(spec: &LaunchSpec, mine: &[u32]) -> Vec<ranks::RankSpec> {
    let mut out = Vec::with_capacity(mine.len());
    for (local_rank, &rank) in mine.iter().enumerate() {
        let mut first = 0u32;
        let Some((appnum, seg)) = spec.segments.iter().enumerate().find(|(_, s)| {
            let hit = rank < first + s.nprocs;
            first += s.nprocs;
            hit
        }) else {
            continue;
        };
        let env = spec.genv.iter().chain(seg.env.iter()).map(|(k, v)| (k.into(), v.into())).collect();
        let wdir = (!seg.wdir.is_empty()).then(|| PathBuf::from(OsString::from_vec(seg.wdir.clone())));
        out.push(ranks::RankSpec {
            rank,
            appnum: appnum as u32,
            local_rank: local_rank as u32,
            program: seg.program.clone().into(),
            arg0: None,
            args: seg.args.clone(),
            env,
            wdir,
        });
    }
    out
}

impl Proxy {
    fn run(&mut self, rx: &mpsc::Receiver<Event>) -> i32 {
        loop {
            self.check_done();
            let deadline = self
                .children
                .iter()
                .filter(|c| c.state == State::Starting)
                .map(|c| c.started + PROXY_START_TIMEOUT)
                .min();
            let event = match deadline {
                Some(t) => match rx.recv_timeout(t.saturating_duration_since(Instant::now())) {
                    Ok(e) => Some(e),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return 1,
                },
                None => match rx.recv() {
                    Ok(e) => Some(e),
                    Err(_) => return 1,
                },
            };
            let Some(event) = event else {
                self.tick();
                continue;
            };
            if let Some(status) = self.handle(event) {
                return status;
            }
        }
    }

    fn tick(&mut self) {
        let now = Instant::now();
        let late: Vec<u32> = self
            .children
            .iter()
            .filter(|c| c.state == State::Starting && now >= c.started + PROXY_START_TIMEOUT)
            .map(|c| c.node)
            .collect();
        for node in late {
            let host = self.host(node);
            let msg = format!(
                "cannot start the proxy on host {host}: it did not connect back within {} s",
                PROXY_START_TIMEOUT.as_secs()
            );
            self.child_failed(node, HOST_FAILURE_STATUS, msg);
        }
    }

    pub fn host(&self, node: u32) -> String {
        self.names.get(&node).cloned().unwrap_or_else(|| format!("#{node}"))
    }

    /// Ranks of the first job placed on `node` and every node below it.
    fn ranks_below(&self, node: u32) -> Vec<u32> {
        let mut nodes = vec![node];
        if let Some(c) = self.by_node.get(&node).map(|&i| &self.children[i]) {
            nodes.extend(&c.subtree);
        }
        self.spec.ranks.iter().filter(|(_, n)| nodes.contains(n)).map(|(r, _)| *r).collect()
    }

    /// Child `node`'s subtree is gone: mpiexec decides what that means (a
    /// subtree where nothing ran any more only takes its hosts out of later
    /// spawns).
    fn child_failed(&mut self, node: u32, status: i32, msg: String) {
        let Some(&idx) = self.by_node.get(&node) else { return };
        let c = &mut self.children[idx];
        let was = c.state;
        c.state = State::Gone;
        c.queued.clear();
        if let Some(l) = &c.link {
            l.close();
        }
        if let Some(pid) = c.pid {
            sys::kill_group(pid, libc::SIGKILL);
        }
        let gone: Vec<u32> = std::iter::once(node).chain(c.subtree.iter().copied()).collect();
        if was != State::Gone {
            self.parent.send(&TreeMsg::NodeFailed { node, status, msg });
        }
        let jobs: Vec<JobNo> = self.parts.keys().copied().collect();
        for no in jobs {
            if let Some(p) = self.parts.get_mut(&no) {
                p.below.retain(|n| !gone.contains(n));
            }
            self.part_progress(no);
        }
    }

    /// Kills every local rank's process group (and the remote shells of
    /// children), for when the job is over without a parent to say so.
    fn kill_everything(&self) {
        for r in self.parts.values().flat_map(|p| p.ranks.iter()) {
            sys::kill_group(r.pid, libc::SIGKILL);
        }
        for c in &self.children {
            if let Some(pid) = c.pid {
                sys::kill_group(pid, libc::SIGKILL);
            }
            if let Some(l) = &c.link {
                l.close();
            }
        }
    }

    /// Says `Done` when nothing runs in this subtree any more.
    fn check_done(&mut self) {
        if self.done_sent {
            return;
        }
        let parts_idle = self.parts.values().all(Part::idle);
        let children_done = self.children.iter().all(|c| matches!(c.state, State::Done | State::Gone));
        if parts_idle && children_done {
            self.parent.send(&TreeMsg::Done { launches: self.launches });
            self.done_sent = true;
        }
    }

    /// Sends job `no`'s `FenceUp` once the local ranks (if any) and every
    /// child subtree with ranks of it have entered the fence.
    fn try_fence_up(&mut self, no: JobNo) {
        let Some(p) = self.parts.get_mut(&no) else { return };
        let involved = p.local || !p.fence_children.is_empty();
        if !involved || (p.local && !p.fence_local) || p.fence_arrived < p.fence_children.len() {
            return;
        }
        let kvs = std::mem::take(&mut p.fence_kvs);
        let payload = TreeMsg::FenceUp { job: no, epoch: p.fence_epoch, kvs }.encode();
        if payload.len() > wire::MAX_FRAME_LEN {
            // Sending it would only break the link; say what is wrong.
            let msg = format!(
                "the key-values put before fence {} by the ranks on and below host {} total {} bytes, \
                 more than the {} a fence can carry",
                p.fence_epoch,
                self.name,
                payload.len(),
                wire::MAX_FRAME_LEN
            );
            let rank = p.ranks.first().map_or(0, |r| r.rank);
            self.parent.send(&TreeMsg::Abort { job: no, rank, code: 1, msg });
            return;
        }
        self.parent.send_payload(&payload);
        p.fence_local = false;
        p.fence_arrived = 0;
        p.fence_epoch += 1;
    }

    /// Handles one event; `Some(status)` ends the proxy.
    fn handle(&mut self, event: Event) -> Option<i32> {
        match event {
            Event::Pmi(no, ev) => self.pmi_event(no, ev),
            Event::Exited(pid, status) => {
                // Removed: a later spawned process may get the pid again.
                if let Some((no, i)) = self.by_pid.remove(&pid) {
                    if let Some(r) = self.parts.get_mut(&no).and_then(|p| p.ranks.get_mut(i)) {
                        r.exited = true;
                        let (rank, connected, finalized) = (r.rank, r.connected, r.finalized);
                        self.parent.send(&TreeMsg::RankExited { job: no, rank, pid, status, connected, finalized });
                        self.part_progress(no);
                    }
                } else if let Some(i) = self.children.iter().position(|c| c.pid == Some(pid)) {
                    self.children[i].pid = None;
                    if self.children[i].state == State::Starting {
                        let node = self.children[i].node;
                        let rsh = self.spec.rsh.first().cloned().unwrap_or_default();
                        let msg = format!(
                            "cannot start the proxy on host {}: its start command (remote shell '{rsh}') {} before the proxy connected",
                            self.host(node),
                            describe_status(status)
                        );
                        self.child_failed(node, HOST_FAILURE_STATUS, msg);
                    }
                }
            }
            Event::Signal(sig) => {
                // Someone on this host wants the proxy gone: no orphans.
                say!(
                    "mpiexec (proxy on {}): received signal {sig} ({}); killing this host's ranks",
                    self.name,
                    sys::signal_name(sig)
                );
                self.kill_everything();
                return Some(128 + sig);
            }
            Event::OutputDone(no) => {
                if let Some(p) = self.parts.get_mut(&no) {
                    p.output_done = true;
                }
                self.part_progress(no);
            }
            Event::Stdin(_) | Event::SingletonGone => {}
            Event::Link(ev) => return self.link_event(ev),
        }
        None
    }

    fn pmi_event(&mut self, no: JobNo, ev: ServerEvent) {
        let Some(part) = self.parts.get_mut(&no) else { return };
        match ev {
            ServerEvent::Connected { rank } => {
                if let Some(r) = part.ranks.iter_mut().find(|r| r.rank == rank) {
                    r.connected = true;
                }
            }
            ServerEvent::Finalized { rank } => {
                if let Some(r) = part.ranks.iter_mut().find(|r| r.rank == rank) {
                    r.finalized = true;
                }
            }
            ServerEvent::Abort { rank, code, msg } => {
                self.parent.send(&TreeMsg::Abort { job: no, rank, code, msg });
            }
            ServerEvent::Rejected { peer, .. } if !part.ending => {
                let what = format!("unauthenticated connections on host {}", self.name);
                let name = &self.name;
                let first = || format!("rejected an unauthenticated bootstrap connection from {peer} on host {name}");
                if let Some(msg) = self.rejected.note(peer, &what, first) {
                    self.parent.send(&TreeMsg::Log { msg });
                }
            }
            ServerEvent::ProtocolError { peer, reason } if !part.ending => {
                let msg = format!("closed a bootstrap connection from {peer} on host {}: {reason}", self.name);
                self.parent.send(&TreeMsg::Log { msg });
            }
            ServerEvent::Rejected { .. } | ServerEvent::ProtocolError { .. } => {}
            ServerEvent::Spawn { rank, cmds, parent_port } => self.relay_spawn(no, rank, cmds, parent_port),
            // The rank's exit, reaped here, is what counts.
            ServerEvent::Disconnected { .. } => {}
            ServerEvent::FenceReady { epoch, kvs } => {
                if epoch != part.fence_epoch {
                    let msg =
                        format!("host {}: local fence {epoch} while fence {} is open", self.name, part.fence_epoch);
                    self.parent.send(&TreeMsg::Log { msg });
                }
                part.fence_local = true;
                part.fence_kvs.extend(kvs);
                self.try_fence_up(no);
            }
        }
    }

    fn link_event(&mut self, ev: LinkEvent) -> Option<i32> {
        match ev {
            LinkEvent::FromParent(msg) => return self.parent_msg(msg),
            LinkEvent::ParentClosed(reason) => {
                if self.done_sent {
                    return Some(0);
                }
                let live = self.parts.values().flat_map(|p| p.ranks.iter()).filter(|r| !r.exited).count();
                say!(
                    "mpiexec (proxy on {}): lost contact with its parent ({reason}); killing {live} rank(s) on this host",
                    self.name
                );
                self.kill_everything();
                return Some(HOST_FAILURE_STATUS);
            }
            LinkEvent::Up { node, stream } => self.child_up(node, stream),
            LinkEvent::Rejected { peer, reason } => {
                let what = format!("unauthenticated connections on host {}", self.name);
                let name = &self.name;
                let first = || {
                    format!(
                        "rejected an unauthenticated connection to the proxy port of host {name} from {peer}: {reason}"
                    )
                };
                if let Some(msg) = self.rejected.note(peer, &what, first) {
                    self.parent.send(&TreeMsg::Log { msg });
                }
            }
            LinkEvent::Closed { node, reason } => {
                let &idx = self.by_node.get(&node)?;
                if self.children[idx].state != State::Gone {
                    let ranks = self.ranks_below(node);
                    let what = if ranks.is_empty() { String::new() } else { format!(" ({})", rank_ranges(&ranks)) };
                    let msg = format!("lost contact with host {}{what}: {reason}", self.host(node));
                    self.child_failed(node, HOST_FAILURE_STATUS, msg);
                }
            }
            LinkEvent::Msg { node, msg } => self.child_msg(node, msg),
        }
        None
    }

    fn parent_msg(&mut self, msg: TreeMsg) -> Option<i32> {
        match msg {
            TreeMsg::FenceDown { job, epoch, kvs } => {
                let p = self.parts.get(&job)?;
                let msg = TreeMsg::FenceDown { job, epoch, kvs };
                let payload = msg.encode();
                for c in &self.children {
                    if let (true, Some(l)) = (p.fence_children.contains(&c.node), &c.link) {
                        l.send_payload(&payload);
                    }
                }
                if let (Some(server), TreeMsg::FenceDown { kvs, .. }) = (&p.server, msg) {
                    server.complete_fence(epoch, kvs);
                }
            }
            TreeMsg::Signal { job, sig, all } => {
                for (_, p) in self.parts.iter_mut().filter(|(no, _)| job.is_none() || job == Some(**no)) {
                    p.ending = true;
                    for r in p.ranks.iter().filter(|r| all || !r.exited) {
                        sys::kill_group(r.pid, sig);
                    }
                }
                self.to_children(&TreeMsg::Signal { job, sig, all }.encode());
                if job.is_none() {
                    // The job is ending: a proxy connecting later would start
                    // ranks that no signal reaches any more.
                    let starting: Vec<u32> =
                        self.children.iter().filter(|c| c.state == State::Starting).map(|c| c.node).collect();
                    for node in starting {
                        let msg = format!("the proxy on host {} was not started: the job is ending", self.host(node));
                        self.child_failed(node, 1, msg);
                    }
                }
            }
            TreeMsg::Stdin { node, data } => {
                if node == self.me {
                    if let Some(tx) = &self.stdin_tx {
                        let eof = data.is_empty();
                        let _ = tx.send(data);
                        if eof {
                            self.stdin_tx = None;
                        }
                    }
                } else if let Some(c) = self.children.iter().find(|c| c.covers(node)) {
                    if let Some(l) = &c.link {
                        l.send(&TreeMsg::Stdin { node, data });
                    }
                }
            }
            TreeMsg::SpawnReply { node, id, result } => self.spawn_reply(node, id, result),
            TreeMsg::JobLaunch(spec) => self.job_launch(*spec),
            TreeMsg::OutputAck { node, bytes } => {
                if node == self.me {
                    self.output_window.give(bytes);
                } else if let Some(l) = self.children.iter().find(|c| c.covers(node)).and_then(|c| c.link.as_ref()) {
                    l.send(&TreeMsg::OutputAck { node, bytes });
                }
            }
            other => {
                let msg = format!("host {}: ignored an unexpected message from its parent: {other:?}", self.name);
                self.parent.send(&TreeMsg::Log { msg });
            }
        }
        None
    }

    fn to_children(&self, payload: &[u8]) {
        for c in &self.children {
            if let (State::Up | State::Done, Some(l)) = (c.state, &c.link) {
                l.send_payload(payload);
            }
        }
    }

    fn child_up(&mut self, node: u32, stream: TcpStream) {
        let Some(&idx) = self.by_node.get(&node).filter(|&&i| self.children[i].state == State::Starting) else {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        };
        let mut spec = self.spec.clone();
        let c = &self.children[idx];
        let nodes: Vec<u32> = std::iter::once(node).chain(c.subtree.iter().copied()).collect();
        spec.nodes = nodes.iter().map(|&n| (n, self.host(n))).collect();
        spec.ranks = self.spec.ranks.iter().copied().filter(|(_, n)| nodes.contains(n)).collect();
        let hb = self.heartbeat;
        let queued = std::mem::take(&mut self.children[idx].queued);
        let set_up = stream.try_clone().and_then(|reader| {
            let l = Link::new(stream, hb)?;
            l.send(&TreeMsg::Launch(Box::new(spec)));
            for payload in &queued {
                l.send_payload(payload);
            }
            link::start(&reader, &l, Some(node), hb, self.tx.clone())?;
            Ok(l)
        });
        match set_up {
            Ok(l) => {
                let c = &mut self.children[idx];
                c.link = Some(l);
                c.state = State::Up;
            }
            Err(e) => {
                let msg = format!("cannot set up the connection to host {}: {e}", self.host(node));
                self.child_failed(node, HOST_FAILURE_STATUS, msg);
            }
        }
    }

    fn child_msg(&mut self, node: u32, msg: TreeMsg) {
        match msg {
            TreeMsg::FenceUp { job, epoch, kvs } => {
                let host = self.host(node);
                let Some(p) = self.parts.get_mut(&job) else { return };
                if epoch != p.fence_epoch {
                    let msg = format!(
                        "host {host} entered fence {epoch} while host {} is in fence {}",
                        self.name, p.fence_epoch
                    );
                    self.parent.send(&TreeMsg::Log { msg });
                }
                p.fence_arrived += 1;
                p.fence_kvs.extend(kvs);
                self.try_fence_up(job);
            }
            TreeMsg::Done { launches } => {
                if let Some(&idx) = self.by_node.get(&node) {
                    // Stale if a launch overtook it; the link stays open
                    // either way, since a later spawn may need that subtree.
                    let c = &mut self.children[idx];
                    if c.state == State::Up && c.launches == launches {
                        c.state = State::Done;
                    }
                }
            }
            TreeMsg::JobStarted { job, node: at, ref error } => {
                if error.is_some() {
                    self.share_below_over(job, at);
                }
                self.parent.send(&msg);
            }
            TreeMsg::JobDone { job, node: at } => {
                self.share_below_over(job, at);
                self.parent.send(&msg);
            }
            m @ (TreeMsg::Output { .. }
            | TreeMsg::RankExited { .. }
            | TreeMsg::SpawnFailed { .. }
            | TreeMsg::Abort { .. }
            | TreeMsg::Log { .. }
            | TreeMsg::NodeFailed { .. }
            | TreeMsg::SpawnRequest { .. }) => {
                self.parent.send(&m);
            }
            other => {
                let msg = format!(
                    "host {}: ignored an unexpected message from host {}: {other:?}",
                    self.name,
                    self.host(node)
                );
                self.parent.send(&TreeMsg::Log { msg });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_variables_are_the_hosts_own() {
        let b = |s: &str| s.as_bytes().to_vec();
        let o = |s: &str| OsString::from(s);
        let launcher = vec![(b("PATH"), b("/opt/x/bin")), (b("DISPLAY"), b(":0")), (b("SSH_AUTH_SOCK"), b("/tmp/a"))];
        let own = vec![(o("PATH"), o("/usr/bin")), (o("SSH_AUTH_SOCK"), o("/tmp/b")), (o("HOME"), o("/h"))];
        let env = host_env(&launcher, own.into_iter());
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.to_str().unwrap().to_owned());
        assert_eq!(get("PATH").as_deref(), Some("/opt/x/bin"), "the job's variables are mpiexec's");
        assert_eq!(get("DISPLAY"), None, "no display here");
        assert_eq!(get("SSH_AUTH_SOCK").as_deref(), Some("/tmp/b"));
        assert_eq!(get("HOME"), None, "only session variables come from the host");
        assert_eq!(env.len(), 2);
    }
}
