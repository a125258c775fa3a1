//! TCP endpoints: how processes on different hosts find, authenticate and keep each other.
//!
//! Important types:
//! - [`TcpConfig`]: the `BATON_TCP_*` settings.
//! - [`TcpNet`]: this process's side. It listens on one address (published through the
//!   bootstrap key-value space), opens connections on first use, and holds their sending
//!   halves; the receiving halves go to the runtime ([`TcpNet::take_new_rx`]), which reads them
//!   in its progress loop. Each peer gets *lanes*: lane 0 carries every frame but the streamed
//!   data of large messages, which goes on `BATON_TCP_STRIPES` bulk lanes (1 by default, 0: on
//!   lane 0 too). Matching only ever looks at lane 0, so messages stay in order, and a bulk lane
//!   can run a congestion control that suits bulk transfers ([`Congestion`]).
//! - The service thread (`service`): accepts connections and runs each handshake on a thread
//!   of its own (a silent or hostile client cannot stall the job), and wakes the process when it
//!   sleeps and a socket becomes readable ([`TcpNet::arm`]).
//!
//! A connection starts with a secret challenge-response (`baton_pmi::auth::TRANSPORT`; the
//! secret never crosses the wire), then the client names itself (job, rank in its job, lane)
//! and the server answers with a verdict. A process trusts its own job's secret and, for each
//! job it connected to (`MPI_Comm_accept`/`connect`, spawn), the secret the two jobs agreed on
//! ([`TcpNet::trust`]); the client names which one it proves, and the job it claims must be one
//! that secret admits. When two processes connect to each other at once, the connection
//! opened by the lower (job, rank) wins: the other one is told to use it (`USE_MINE`) and waits
//! for it, so each pair ends with exactly one connection per lane and nothing was sent on the
//! loser.

use crate::engine::{Engine, Net, ProcIdx};
use baton_pmi::auth::{client_handshake_keyed, server_handshake_keyed, Secret, TRANSPORT};
use baton_transport::frame::Header;
use baton_transport::stream::{self as tcp, EventFd, FrameSink, Poller, Rx, Tx};
use baton_transport::sys::{interface_addrs, routable, IfAddr};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Settings read once from the environment (documented in the README).
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// `BATON_TCP_EAGER_MAX`: largest message sent eagerly.
    pub eager_max: usize,
    /// `BATON_TCP_CHUNK`: payload of one streamed data frame.
    pub chunk: usize,
    /// `BATON_TCP_STRIPES`: bulk lanes per peer, which carry the streamed data of large
    /// messages (round robin); 0: that data goes on lane 0 with everything else.
    pub stripes: usize,
    /// `BATON_TCP_IF`: interfaces, subnets or addresses to listen on, in order of preference.
    pub iface: Option<String>,
    /// `BATON_TCP_CONNECT_TIMEOUT` (seconds): how long opening a connection may take.
    pub connect_timeout: Duration,
    /// `BATON_TCP_CONGESTION`: the congestion control lane 0 runs.
    pub congestion: Congestion,
    /// `BATON_TCP_BULK_CONGESTION`: the congestion control the bulk lanes run.
    pub bulk_congestion: Congestion,
    /// `BATON_TCP_COALESCE`: largest eager message of a burst that may wait for the next
    /// progress pass to leave with the others (0: each leaves at once).
    pub coalesce: usize,
}

/// Which congestion control algorithm a connection runs (`BATON_TCP_CONGESTION` for lane 0,
/// `BATON_TCP_BULK_CONGESTION` for the bulk lanes).
///
/// Neither kind of algorithm suits all of an MPI job's traffic, hence the two kinds of lane.
/// A pacing algorithm (BBR, this project's machines' default) spaces a connection's packets at
/// the rate it has measured, and a connection that carries bursts between idle gaps is
/// measured low: across a veth pair, a 256 KiB – 4 MiB ping-pong took 2–3.5 times as long
/// under BBR as under cubic, and flipped between a fast and a slow mode from run to run (every
/// program, MPICH and Open MPI too). Cubic and reno do not pace, but they grow the congestion
/// window only while a connection fills it, and the kernel sends at most half the window in
/// one go when nothing is in flight: a connection that has carried only small messages keeps
/// a window of ~20 segments, so each 12–48 KiB message leaves in two parts, the second after
/// the receiver's acknowledgement of the first (2.5 times BBR's ping-pong time, raw TCP too;
/// seen with the kernel's `tcp_probe` tracepoint). BBR sets its window from its model, ~180
/// segments there. So lane 0, which carries the small and mid-size messages, keeps the
/// system's choice, and the bulk lanes, whose transfers fill any window, run `unpaced`
/// (docs/PERFORMANCE.md, TCP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Congestion {
    /// `system` (lane 0's default): whatever the system gives each connection.
    System,
    /// `unpaced` (the bulk lanes' default): a connection whose algorithm paces (`bbr...`)
    /// switches to cubic, or to reno where cubic is not allowed; any other choice stays.
    Unpaced,
    /// A name: that algorithm (a warning, once, when the kernel refuses it).
    Named(String),
}

impl Congestion {
    fn from_setting(v: Option<&str>, default: Congestion) -> Congestion {
        match v.map(str::trim) {
            None | Some("") => default,
            Some("system") => Congestion::System,
            Some("unpaced") => Congestion::Unpaced,
            Some(name) => Congestion::Named(name.to_string()),
        }
    }

    /// The algorithms to try, in order, for a connection that runs `current`.
    pub fn candidates(&self, current: &str) -> Vec<&str> {
        match self {
            Congestion::Unpaced if current.starts_with("bbr") => vec!["cubic", "reno"],
            Congestion::Named(name) if name != current => vec![name.as_str()],
            _ => Vec::new(),
        }
    }
}

impl TcpConfig {
    pub fn from_env() -> TcpConfig {
        let size = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| super::parse_size(&v)).unwrap_or(d);
        let secs = std::env::var("BATON_TCP_CONNECT_TIMEOUT").ok().and_then(|v| v.trim().parse::<f64>().ok());
        TcpConfig {
            eager_max: size("BATON_TCP_EAGER_MAX", 128 * 1024),
            chunk: size("BATON_TCP_CHUNK", 512 * 1024).clamp(4096, 1 << 20),
            stripes: size("BATON_TCP_STRIPES", 1).min(16),
            iface: std::env::var("BATON_TCP_IF").ok().filter(|s| !s.trim().is_empty()),
            connect_timeout: Duration::from_secs_f64(secs.filter(|s| *s > 0.0).unwrap_or(30.0)),
            congestion: Congestion::from_setting(
                std::env::var("BATON_TCP_CONGESTION").ok().as_deref(),
                Congestion::System,
            ),
            bulk_congestion: Congestion::from_setting(
                std::env::var("BATON_TCP_BULK_CONGESTION").ok().as_deref(),
                Congestion::Unpaced,
            ),
            coalesce: size("BATON_TCP_COALESCE", 16 * 1024),
        }
    }

    /// Connections per peer: lane 0 and the bulk lanes.
    pub fn lanes(&self) -> usize {
        1 + self.stripes
    }

    /// The lanes streamed data goes on: the first, and how many.
    fn bulk_lanes(&self) -> (usize, usize) {
        if self.stripes == 0 {
            (0, 1)
        } else {
            (1, self.stripes)
        }
    }

    /// The longest payload a peer with the same settings sends in one frame.
    pub fn max_payload(&self) -> usize {
        self.eager_max.max(self.chunk)
    }
}

/// The address to listen on. `BATON_TCP_IF` decides when set; otherwise loopback when every
/// process of the job is on this host, else the first routable address (IPv4 first).
pub fn choose_addr(cfg: &TcpConfig, all_local: bool) -> Result<IpAddr, String> {
    let addrs: Vec<IfAddr> = interface_addrs().into_iter().filter(|a| a.up).collect();
    if let Some(list) = &cfg.iface {
        for spec in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(a) = addrs.iter().find(|a| a.matches(spec)) {
                return Ok(a.addr);
            }
        }
        let have: Vec<String> = addrs.iter().map(|a| format!("{} {}", a.name, a.addr)).collect();
        return Err(format!("BATON_TCP_IF={list} matches no interface of this host (it has: {})", have.join(", ")));
    }
    if all_local {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let pick = addrs
        .iter()
        .find(|a| a.addr.is_ipv4() && routable(&a.addr))
        .or_else(|| addrs.iter().find(|a| routable(&a.addr)));
    Ok(pick.map(|a| a.addr).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)))
}

/// Queued frames ([`TcpNet::try_send_more`]) leave once they reach this many bytes, without
/// waiting for the next progress pass.
const COALESCE_BATCH: usize = 64 * 1024;
/// A frame joins a burst ([`TcpNet::try_send_more`]) when the previous one to its peer was
/// sent less than this long before: a loop of `MPI_Isend`s calls again within a microsecond,
/// and a sender that computes between its sends has each leave at once.
const COALESCE_GAP: Duration = Duration::from_micros(5);

/// The server's verdict on a connection, after the client named itself.
const ACCEPT: u8 = 1;
const USE_MINE: u8 = 2;
const REFUSE: u8 = 3;
const IDENT_MAGIC: [u8; 4] = *b"BTID";
const IDENT_LEN: usize = 20;
/// How long an unauthenticated client may take to prove itself.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Handshakes running at once; further connections are closed unanswered.
const MAX_HANDSHAKES: usize = 64;
/// How long a handshake waits for the secret or the process it names to be registered: a
/// process of a job that just connected may dial before this side has learnt of it.
const LEARN_WAIT: Duration = Duration::from_secs(4);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Down,
    Connecting,
    Up,
}

/// A secret this process accepts, and the jobs whose processes may prove it.
struct Key {
    id: [u8; 8],
    secret: Secret,
    jobs: Vec<u64>,
}

/// What the service thread and the handshake threads share with the process.
struct Shared {
    job: u64,
    /// Rank of this process in its job (what it names itself as).
    rank: u32,
    /// Connections per peer ([`TcpConfig::lanes`]).
    lanes: usize,
    keys: Mutex<Vec<Key>>,
    /// Process table index of every process that may connect, by (job, rank).
    index: Mutex<HashMap<(u64, u32), ProcIdx>>,
    /// "rank R on host H", for messages.
    whoami: String,
    links: Mutex<Vec<Link>>,
    incoming: Mutex<Vec<(ProcIdx, usize, TcpStream)>>,
    has_incoming: AtomicBool,
    handshakes: AtomicUsize,
    /// Rings this process's doorbell if one of its threads sleeps.
    wake: Box<dyn Fn() + Send + Sync>,
    /// The service thread's epoll set: listener, control eventfd and `data` (one-shot).
    watch: Poller,
    /// Every receiving socket; readable when any of them is.
    data: Poller,
    ctl: EventFd,
    stop: AtomicBool,
}

const TOK_LISTEN: u64 = 1;
const TOK_CTL: u64 = 2;
const TOK_DATA: u64 = 3;

/// What this process knows of another one.
#[derive(Clone, Default)]
struct Peer {
    /// Where it listens (`None`: unknown, or forgotten after a disconnect).
    addr: Option<SocketAddr>,
    host: String,
    /// The secret to prove when dialling it (`None`: our job's).
    dial_secret: Option<Secret>,
    /// It belongs to another job: losing it does not end this job (the application hears of
    /// it); losing one of our own does.
    foreign: bool,
    /// Being disconnected, so the end of its connections is expected.
    closing: bool,
    /// The progress pass ([`TcpNet::pass`]) in which a frame last went to it on lane 0, and
    /// when that send call ended.
    wrote_in: u64,
    wrote_at: Option<Instant>,
}

/// This process's TCP side.
pub struct TcpNet {
    sh: Arc<Shared>,
    cfg: TcpConfig,
    /// Per process: how to reach it.
    peers: Vec<Peer>,
    /// Processes of other jobs whose connection broke, with why; frames to them are dropped.
    pub lost: Vec<(ProcIdx, String)>,
    secret: Secret,
    /// Per process, per lane: the sending half, once connected.
    tx: Vec<Vec<Option<Tx>>>,
    new_rx: Vec<NewRx>,
    /// Which of the bulk lanes (counted from the first) the next streamed frame tries first.
    next_lane: usize,
    /// (process, lane) of connections holding the rest of a frame the kernel took only part
    /// of, or frames queued in a burst. Every progress pass pushes them on
    /// ([`flush_unsent`](Self::flush_unsent)): a sender that only polls with `MPI_Test` would
    /// otherwise never finish the frame, and its peer would wait for it forever.
    unsent: Vec<(ProcIdx, usize)>,
    /// A failure that ends the job (the runtime aborts with it).
    pub fatal: Option<String>,
    listen: Option<SocketAddr>,
    /// A refused `BATON_TCP_CONGESTION` was reported.
    warned_congestion: bool,
    /// Counts progress passes (each starts with [`flush_unsent`](Self::flush_unsent)), so
    /// that a frame can tell whether another went to its peer since the last one.
    pass: u64,
    /// `COALESCE_GAP` (tests lengthen or shorten it).
    coalesce_gap: Duration,
}

/// A connection's receiving half, new to the runtime.
pub struct NewRx {
    pub from: ProcIdx,
    pub rx: Rx,
    /// A bulk lane: only streamed data arrives on it, after this process asked for it.
    pub bulk: bool,
}

/// Who this process is, as its connections need to know.
pub struct Identity {
    pub me: ProcIdx,
    pub job: u64,
    /// Processes in the job.
    pub nprocs: usize,
    pub secret: Secret,
    /// "rank R on host H", for messages.
    pub whoami: String,
}

impl TcpNet {
    /// Listens on `ip` and starts the service thread. `wake` must ring the process's doorbell.
    pub fn start(
        id: Identity,
        cfg: TcpConfig,
        ip: IpAddr,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> io::Result<(TcpNet, SocketAddr)> {
        let Identity { me, job, nprocs, secret, whoami } = id;
        let key = Key { id: secret.key_id(), secret: secret.clone(), jobs: vec![job] };
        let listener = TcpListener::bind((ip, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let watch = Poller::new()?;
        let data = Poller::new()?;
        let ctl = EventFd::new()?;
        use std::os::fd::{AsFd, AsRawFd};
        watch.add(listener.as_raw_fd(), TOK_LISTEN)?;
        watch.add(ctl.raw_fd(), TOK_CTL)?;
        watch.add_oneshot(data.as_fd().as_raw_fd(), TOK_DATA)?;
        let sh = Arc::new(Shared {
            job,
            rank: me,
            lanes: cfg.lanes(),
            keys: Mutex::new(vec![key]),
            index: Mutex::new(HashMap::new()),
            whoami,
            links: Mutex::new(vec![Link::Down; nprocs * cfg.lanes()]),
            incoming: Mutex::new(Vec::new()),
            has_incoming: AtomicBool::new(false),
            handshakes: AtomicUsize::new(0),
            wake,
            watch,
            data,
            ctl,
            stop: AtomicBool::new(false),
        });
        let s2 = sh.clone();
        std::thread::Builder::new().name("baton-tcp".into()).spawn(move || service(s2, listener))?;
        let net = TcpNet {
            sh,
            cfg,
            peers: vec![Peer::default(); nprocs],
            lost: Vec::new(),
            secret,
            tx: (0..nprocs).map(|_| Vec::new()).collect(),
            new_rx: Vec::new(),
            next_lane: 0,
            unsent: Vec::new(),
            fatal: None,
            listen: Some(addr),
            warned_congestion: false,
            pass: 1,
            coalesce_gap: COALESCE_GAP,
        };
        Ok((net, addr))
    }

    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    /// Records where process `p` of this job listens (and its host, for messages).
    pub fn set_peer(&mut self, p: ProcIdx, addr: Option<SocketAddr>, host: &str) {
        self.add_peer(p, (self.sh.job, p), addr, host, None);
    }

    /// Records process `p`, rank `id.1` of job `id.0`, where it listens, and the secret to prove
    /// when dialling it (`None`: this job's). Grows the tables for processes of connected jobs.
    pub fn add_peer(
        &mut self,
        p: ProcIdx,
        id: (u64, u32),
        addr: Option<SocketAddr>,
        host: &str,
        secret: Option<Secret>,
    ) {
        let i = p as usize;
        if self.peers.len() <= i {
            self.peers.resize_with(i + 1, Peer::default);
            self.tx.resize_with(i + 1, Vec::new);
            let mut links = self.sh.links.lock().unwrap_or_else(|e| e.into_inner());
            links.resize((i + 1) * self.cfg.lanes(), Link::Down);
        }
        let peer = &mut self.peers[i];
        peer.addr = addr;
        peer.host = host.to_string();
        peer.foreign = id.0 != self.sh.job;
        peer.closing = false;
        if secret.is_some() {
            peer.dial_secret = secret;
        }
        self.lost.retain(|(q, _)| *q != p);
        self.sh.index.lock().unwrap_or_else(|e| e.into_inner()).insert(id, p);
    }

    /// Accepts connections from processes of `job` that prove `secret`.
    pub fn trust(&self, secret: &Secret, job: u64) {
        let mut keys = self.sh.keys.lock().unwrap_or_else(|e| e.into_inner());
        let id = secret.key_id();
        match keys.iter_mut().find(|k| k.id == id) {
            Some(k) if !k.jobs.contains(&job) => k.jobs.push(job),
            Some(_) => {}
            None => keys.push(Key { id, secret: secret.clone(), jobs: vec![job] }),
        }
    }

    /// Stops accepting processes of `job` (none of them is in use any more); secrets that admit
    /// no job then go.
    pub fn untrust_job(&self, job: u64) {
        if job == self.sh.job {
            return;
        }
        let mut keys = self.sh.keys.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys.iter_mut() {
            k.jobs.retain(|&j| j != job);
        }
        keys.retain(|k| !k.jobs.is_empty());
    }

    /// Ends the connections to `p` once both sides are done with them: this side will send
    /// nothing more (the peer reads to the end and closes its half), and `p` may not connect
    /// again under its old identity. What `p` still sends is read until it closes its side.
    pub fn forget(&mut self, p: ProcIdx, id: (u64, u32)) {
        let i = p as usize;
        if let Some(lanes) = self.tx.get_mut(i) {
            for tx in lanes.drain(..).flatten() {
                tx.shutdown_write();
            }
        }
        {
            let mut links = self.sh.links.lock().unwrap_or_else(|e| e.into_inner());
            for l in links.iter_mut().skip(i * self.cfg.lanes()).take(self.cfg.lanes()) {
                *l = Link::Down;
            }
        }
        if let Some(peer) = self.peers.get_mut(i) {
            peer.addr = None;
        }
        self.sh.index.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    /// The address this process listens on.
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        self.listen
    }

    pub fn reaches(&self, p: ProcIdx) -> bool {
        self.peers.get(p as usize).is_some_and(|q| q.addr.is_some())
    }

    fn who(&self, p: ProcIdx) -> String {
        let host = self.peers.get(p as usize).map_or("?", |q| q.host.as_str());
        format!("process {p} on host {host}")
    }

    /// The connection to `p` broke: fatal for a process of this job; for one of another job,
    /// remembered (the runtime reports it) and its frames dropped from now on.
    pub fn peer_failed(&mut self, p: ProcIdx, msg: String) {
        if self.is_foreign(p) {
            if let Some(lanes) = self.tx.get_mut(p as usize) {
                lanes.clear();
            }
            if !self.is_lost(p) {
                self.lost.push((p, msg));
            }
        } else {
            self.fail(msg);
        }
    }

    /// `p` is being disconnected: it may close its connections any moment now.
    pub fn expect_close(&mut self, p: ProcIdx) {
        if let Some(q) = self.peers.get_mut(p as usize) {
            q.closing = true;
        }
    }

    /// Whether the end of `p`'s connections would mean that it vanished.
    pub fn end_is_loss(&self, p: ProcIdx) -> bool {
        self.peers.get(p as usize).is_some_and(|q| q.foreign && !q.closing)
    }

    pub fn is_foreign(&self, p: ProcIdx) -> bool {
        self.peers.get(p as usize).is_some_and(|q| q.foreign)
    }

    pub fn is_lost(&self, p: ProcIdx) -> bool {
        self.lost.iter().any(|(q, _)| *q == p)
    }

    fn fail(&mut self, msg: String) {
        if self.fatal.is_none() {
            self.fatal = Some(format!("{}: {msg}", self.sh.whoami));
        }
    }

    /// Takes connections that peers opened to us (the handshake threads leave them here).
    pub fn adopt_incoming(&mut self) {
        if !self.sh.has_incoming.swap(false, Ordering::AcqRel) {
            return;
        }
        let list = std::mem::take(&mut *self.sh.incoming.lock().unwrap_or_else(|e| e.into_inner()));
        for (p, lane, s) in list {
            self.install(p, lane, s);
        }
    }

    fn install(&mut self, p: ProcIdx, lane: usize, s: TcpStream) {
        self.choose_congestion(&s, lane);
        match tcp::split(s, self.cfg.max_payload()) {
            Ok((tx, rx)) => {
                let lanes = &mut self.tx[p as usize];
                if lanes.len() < self.cfg.lanes() {
                    lanes.resize_with(self.cfg.lanes(), || None);
                }
                lanes[lane] = Some(tx);
                self.new_rx.push(NewRx { from: p, rx, bulk: lane > 0 });
            }
            Err(e) => self.fail(format!("cannot set up the connection to {}: {e}", self.who(p))),
        }
    }

    /// Applies `BATON_TCP_CONGESTION` (lane 0) or `BATON_TCP_BULK_CONGESTION` to a new
    /// connection. Only an algorithm the user named and the kernel refused is worth a word;
    /// `unpaced` falls back quietly.
    fn choose_congestion(&mut self, s: &TcpStream, lane: usize) {
        let want = if lane == 0 { &self.cfg.congestion } else { &self.cfg.bulk_congestion };
        if *want == Congestion::System {
            // Nothing to change, so no getsockopt either.
            return;
        }
        let Ok(current) = tcp::congestion(s) else { return };
        let mut refused = None;
        for name in want.candidates(&current) {
            match tcp::set_congestion(s, name) {
                Ok(()) => return,
                Err(e) => refused = Some(format!("{name} ({e})")),
            }
        }
        if let (Congestion::Named(_), Some(why), false) = (want, refused, self.warned_congestion) {
            self.warned_congestion = true;
            let var = if lane == 0 { "BATON_TCP_CONGESTION" } else { "BATON_TCP_BULK_CONGESTION" };
            eprintln!("baton: {}: {var}: the kernel refused {why}; connections keep {current}", self.sh.whoami);
        }
    }

    /// Receiving halves connected since the last call; the caller reads them, and puts them in
    /// the watched set ([`watch`](Self::watch)) when it needs epoll to see them.
    pub fn take_new_rx(&mut self) -> Vec<NewRx> {
        std::mem::take(&mut self.new_rx)
    }

    /// Adds a receiving half to the set that [`ready_fds`](Self::ready_fds) and the sleeping
    /// watcher look at. Level-triggered: a socket with unread bytes stays ready until read.
    ///
    /// A socket in the set costs every packet that reaches it an epoll wake-up in the sender's
    /// kernel path (on loopback and veth, the sender's own system call): 0.4 µs of a 7 µs
    /// one-way TCP ping-pong here. So few connections are watched only while a thread sleeps.
    pub fn watch(&self, rx: &Rx) {
        let _ = self.sh.data.add(rx.raw_fd(), rx.raw_fd() as u64);
    }

    /// Takes a receiving half out of the watched set.
    pub fn unwatch(&self, rx: &Rx) {
        let _ = self.sh.data.remove(rx.raw_fd());
    }

    /// The descriptors of receiving halves with unread bytes (tokens are descriptors).
    pub fn ready_fds(&self, out: &mut Vec<u64>) {
        let _ = self.sh.data.wait(0, out);
    }

    /// Forgets a receiving half that reached its end.
    pub fn drop_rx(&self, rx: &Rx) {
        self.unwatch(rx);
    }

    /// Makes sure a connection to `p` (of another job, on another machine) exists, so that its
    /// end would be seen: a process that vanished without ever being connected to is found by
    /// the refusal, within `limit`. Returns whether `p` is reachable.
    pub fn probe(&mut self, p: ProcIdx, limit: Duration) -> bool {
        if self.is_lost(p) {
            return false;
        }
        if self.lanes_up(p) {
            return true;
        }
        let keep = self.cfg.connect_timeout;
        self.cfg.connect_timeout = limit;
        let ok = self.open(p);
        self.cfg.connect_timeout = keep;
        ok
    }

    /// Whether a connection to `p` was ever opened (by either side).
    pub fn was_connected(&self, p: ProcIdx) -> bool {
        let links = self.sh.links.lock().unwrap_or_else(|e| e.into_inner());
        let s = self.cfg.lanes();
        links.iter().skip(p as usize * s).take(s).any(|l| *l != Link::Down)
            || self.tx.get(p as usize).is_some_and(|l| l.iter().any(Option::is_some))
    }

    fn lanes_up(&self, p: ProcIdx) -> bool {
        let l = &self.tx[p as usize];
        l.len() == self.cfg.lanes() && l.iter().all(Option::is_some)
    }

    /// Connects every lane to `p` that is not connected yet. Blocks (this is the first message
    /// to `p`); false if it failed (then `fatal` says why).
    fn open(&mut self, p: ProcIdx) -> bool {
        if self.fatal.is_some() {
            return false;
        }
        let Some(addr) = self.peers[p as usize].addr else {
            self.fail(format!("no transport reaches {} (it has no TCP address)", self.who(p)));
            return false;
        };
        let deadline = Instant::now() + self.cfg.connect_timeout;
        for lane in 0..self.cfg.lanes() {
            self.adopt_incoming();
            if self.tx[p as usize].get(lane).is_some_and(Option::is_some) {
                continue;
            }
            let slot = p as usize * self.cfg.lanes() + lane;
            let dial = {
                let mut links = self.sh.links.lock().unwrap_or_else(|e| e.into_inner());
                if links[slot] == Link::Up {
                    false
                } else {
                    links[slot] = Link::Connecting;
                    true
                }
            };
            if dial {
                match self.dial(p, addr, lane, deadline) {
                    Ok(Some(s)) => {
                        self.sh.links.lock().unwrap_or_else(|e| e.into_inner())[slot] = Link::Up;
                        self.install(p, lane, s);
                        continue;
                    }
                    // The peer's own connection wins; it is on its way to our handshake threads.
                    Ok(None) => {}
                    Err(e) => {
                        self.sh.links.lock().unwrap_or_else(|e| e.into_inner())[slot] = Link::Down;
                        self.peer_failed(p, format!("cannot connect to {} at {addr}: {e}", self.who(p)));
                        return false;
                    }
                }
            }
            loop {
                self.adopt_incoming();
                if self.tx[p as usize].get(lane).is_some_and(Option::is_some) {
                    break;
                }
                if Instant::now() > deadline {
                    self.fail(format!("{} did not complete its connection to us", self.who(p)));
                    return false;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        true
    }

    /// Opens one authenticated connection; `None` when the peer's connection wins instead.
    fn dial(&self, p: ProcIdx, addr: SocketAddr, lane: usize, deadline: Instant) -> io::Result<Option<TcpStream>> {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let mut s = connect_retrying(addr, deadline, left)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(left))?;
        s.set_write_timeout(Some(left))?;
        let secret = self.peers.get(p as usize).and_then(|q| q.dial_secret.as_ref()).unwrap_or(&self.secret);
        client_handshake_keyed(&mut s, secret, &TRANSPORT).map_err(|e| io::Error::other(e.to_string()))?;
        let mut id = [0u8; IDENT_LEN];
        id[..4].copy_from_slice(&IDENT_MAGIC);
        id[4..12].copy_from_slice(&self.sh.job.to_le_bytes());
        id[12..16].copy_from_slice(&self.sh.rank.to_le_bytes());
        id[16..20].copy_from_slice(&(lane as u32).to_le_bytes());
        s.write_all(&id)?;
        let mut verdict = [0u8; 1];
        s.read_exact(&mut verdict)?;
        match verdict[0] {
            ACCEPT => {
                s.set_read_timeout(None)?;
                s.set_write_timeout(None)?;
                Ok(Some(s))
            }
            USE_MINE => Ok(None),
            _ => Err(io::Error::other("the peer refused the connection (it does not know this process)")),
        }
    }

    /// Arms the watcher before this process sleeps: a readable socket rings the doorbell.
    pub fn arm(&self) {
        use std::os::fd::{AsFd, AsRawFd};
        let _ = self.sh.watch.rearm(self.sh.data.as_fd().as_raw_fd(), TOK_DATA);
    }

    /// Pushes on the frames the kernel took only part of and those queued in a burst
    /// ([`try_send_more`](Self::try_send_more)), and starts a new progress pass; returns
    /// whether any is still unsent. Costs nothing while there are none.
    pub fn flush_unsent(&mut self) -> bool {
        self.pass += 1;
        let mut i = 0;
        while i < self.unsent.len() {
            let (p, lane) = self.unsent[i];
            let r = match self.tx.get_mut(p as usize).and_then(|l| l.get_mut(lane)).and_then(Option::as_mut) {
                Some(tx) => tx.flush(),
                None => Ok(true),
            };
            match r {
                Ok(false) => i += 1,
                Ok(true) => {
                    self.unsent.swap_remove(i);
                }
                Err(e) => {
                    self.unsent.swap_remove(i);
                    self.peer_failed(p, format!("lost the connection to {}: {e}", self.who(p)));
                }
            }
        }
        !self.unsent.is_empty()
    }

    /// Writes what earlier frames left behind; true when some connection is still busy.
    pub fn flush(&mut self) -> bool {
        // Every tail a connection holds is listed in `unsent` (only `send_frame` and `send_start`
        // leave one); what else keeps a connection busy is a streamed frame's rest.
        let unsent = self.flush_unsent();
        unsent || self.tx.iter().flatten().flatten().any(Tx::busy)
    }

    fn lane(&mut self, to: ProcIdx, lane: usize) -> Option<&mut Tx> {
        if self.is_lost(to) {
            return None;
        }
        if !self.lanes_up(to) && !self.open(to) {
            return None;
        }
        self.tx[to as usize][lane].as_mut()
    }

    pub fn try_send(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        self.send_frame(to, h, payload, false)
    }

    /// Sends an eager frame of a sender that goes on (`MPI_Isend`), which may send more at
    /// once. A frame (up to `BATON_TCP_COALESCE` bytes) that follows another one to the same
    /// peer within `COALESCE_GAP` and with no progress pass between them is queued; the queue
    /// leaves in one `sendmsg` at the next pass (any MPI call that waits, tests or probes),
    /// with the next frame that is not queued, or on reaching `COALESCE_BATCH` bytes.
    ///
    /// A system call per small frame is what small messages cost over TCP: it carries the
    /// frame through the whole stack, and across a veth pair or loopback through the
    /// receiver's too (a window of 64 4 KiB messages: 5.9 µs a message one by one, 1.3
    /// coalesced; PERFORMANCE.md, TCP, session 16). What this delays: the frames queued in a
    /// burst whose sender then computes without calling MPI leave when it next calls MPI
    /// (which is all that MPI promises); the first frame of every burst leaves at once.
    pub fn try_send_more(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        let queue = self.cfg.coalesce > 0
            && payload.len() <= self.cfg.coalesce
            && self.peers.get(to as usize).is_some_and(|p| {
                p.wrote_in == self.pass && p.wrote_at.is_some_and(|t| t.elapsed() < self.coalesce_gap)
            });
        let sent = self.send_frame(to, h, payload, queue);
        if sent && self.cfg.coalesce > 0 {
            if let Some(p) = self.peers.get_mut(to as usize) {
                p.wrote_in = self.pass;
                p.wrote_at = Some(Instant::now());
            }
        }
        sent
    }

    fn send_frame(&mut self, to: ProcIdx, h: &Header, payload: &[u8], queue: bool) -> bool {
        // Lane 0 carries every frame but streamed data, which keeps messages in order.
        if self.is_lost(to) {
            // Gone with its job: what it was sent goes nowhere (the application is told).
            return true;
        }
        let Some(tx) = self.lane(to, 0) else { return false };
        if queue && tx.unsent_len() + payload.len() < COALESCE_BATCH {
            let listed = tx.has_out();
            if tx.append(h, payload) {
                if !listed {
                    self.unsent.push((to, 0));
                }
                return true;
            }
        }
        match tx.try_send(h, payload) {
            Ok(ok) => {
                if ok && tx.has_out() {
                    self.unsent.push((to, 0));
                }
                ok
            }
            Err(e) => {
                self.peer_failed(to, format!("lost the connection to {}: {e}", self.who(to)));
                false
            }
        }
    }

    pub fn send_start(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> Option<(u8, usize)> {
        if self.is_lost(to) {
            return Some((0, payload.len()));
        }
        let (first, n) = self.cfg.bulk_lanes();
        self.lane(to, 0)?;
        for i in 0..n {
            let k = (self.next_lane + i) % n;
            let lane = first + k;
            let tx = self.tx[to as usize][lane].as_mut()?;
            match tx.start_frame(h, payload) {
                Ok(Some(took)) => {
                    if tx.has_out() {
                        self.unsent.push((to, lane));
                    }
                    self.next_lane = (k + 1) % n;
                    return Some((lane as u8, took));
                }
                Ok(None) => {}
                Err(e) => {
                    self.peer_failed(to, format!("lost the connection to {}: {e}", self.who(to)));
                    return None;
                }
            }
        }
        None
    }

    pub fn send_continue(&mut self, to: ProcIdx, lane: u8, rest: &[u8]) -> usize {
        if self.is_lost(to) {
            return rest.len();
        }
        let Some(tx) = self.tx[to as usize].get_mut(lane as usize).and_then(Option::as_mut) else { return 0 };
        match tx.continue_frame(rest) {
            Ok(n) => n,
            Err(e) => {
                self.peer_failed(to, format!("lost the connection to {}: {e}", self.who(to)));
                0
            }
        }
    }

    /// Ends the service thread (at finalize); connections stay until the process exits.
    pub fn shutdown(&self) {
        self.sh.stop.store(true, Ordering::SeqCst);
        self.sh.ctl.signal();
    }

    /// Describes process `p`, for messages about a connection that failed.
    pub fn describe(&self, p: ProcIdx) -> String {
        self.who(p)
    }
}

/// `connect` with retries: a peer that has published its address is listening, but a
/// transient refusal (a full backlog) should not end the job.
fn connect_retrying(addr: SocketAddr, deadline: Instant, first: Duration) -> io::Result<TcpStream> {
    let mut wait = first;
    loop {
        match TcpStream::connect_timeout(&addr, wait) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() < deadline && e.kind() == io::ErrorKind::ConnectionRefused => {
                std::thread::sleep(Duration::from_millis(10));
                wait = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Accepts connections and wakes the process; one thread per process.
fn service(sh: Arc<Shared>, listener: TcpListener) {
    let mut tokens = Vec::new();
    while !sh.stop.load(Ordering::SeqCst) {
        if sh.watch.wait(-1, &mut tokens).is_err() {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        for &t in &tokens {
            match t {
                TOK_LISTEN => loop {
                    match listener.accept() {
                        Ok((s, peer)) => {
                            if sh.handshakes.fetch_add(1, Ordering::SeqCst) >= MAX_HANDSHAKES {
                                sh.handshakes.fetch_sub(1, Ordering::SeqCst);
                                continue;
                            }
                            let sh2 = sh.clone();
                            let spawned = std::thread::Builder::new().name("baton-tcp-auth".into()).spawn(move || {
                                handshake(&sh2, s, peer);
                                sh2.handshakes.fetch_sub(1, Ordering::SeqCst);
                            });
                            if spawned.is_err() {
                                sh.handshakes.fetch_sub(1, Ordering::SeqCst);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(_) => break,
                    }
                },
                TOK_DATA => (sh.wake)(),
                _ => sh.ctl.drain(),
            }
        }
    }
}

/// The server side of one connection: authenticate, learn who it is, decide.
fn handshake(sh: &Shared, mut s: TcpStream, peer: SocketAddr) {
    let reject = |why: &str| eprintln!("baton: {} rejected a connection from {peer}: {why}", sh.whoami);
    if s.set_nonblocking(false).is_err()
        || s.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).is_err()
        || s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)).is_err()
    {
        return;
    }
    let lookup = |k: &[u8; 8]| {
        learn(|| {
            let keys = sh.keys.lock().unwrap_or_else(|e| e.into_inner());
            keys.iter().find(|key| key.id == *k).map(|key| key.secret.clone())
        })
    };
    let secret = match server_handshake_keyed(&mut s, lookup, &TRANSPORT) {
        Ok(sec) => sec,
        Err(e) => {
            reject(&format!("authentication failed ({e})"));
            return;
        }
    };
    let mut id = [0u8; IDENT_LEN];
    if let Err(e) = s.read_exact(&mut id) {
        reject(&format!("no identification ({e})"));
        return;
    }
    let job = u64::from_le_bytes(id[4..12].try_into().expect("8 bytes"));
    let rank = u32::from_le_bytes(id[12..16].try_into().expect("4 bytes"));
    let lane = u32::from_le_bytes(id[16..20].try_into().expect("4 bytes")) as usize;
    let admitted = || {
        let keys = sh.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.iter().any(|k| k.secret == secret && k.jobs.contains(&job))
    };
    let from = if id[..4] == IDENT_MAGIC && lane < sh.lanes && (job, rank) != (sh.job, sh.rank) {
        learn(|| admitted().then(|| sh.index.lock().unwrap_or_else(|e| e.into_inner()).get(&(job, rank)).copied())?)
    } else {
        None
    };
    let Some(from) = from else {
        reject(&format!("bad identification (job {job:#x}, rank {rank}, lane {lane})"));
        let _ = s.write_all(&[REFUSE]);
        return;
    };
    let verdict = {
        let mut links = sh.links.lock().unwrap_or_else(|e| e.into_inner());
        let slot = from as usize * sh.lanes + lane;
        if links.len() <= slot {
            links.resize(slot + 1, Link::Down);
        }
        match links[slot] {
            Link::Up => USE_MINE,
            Link::Connecting if (sh.job, sh.rank) < (job, rank) => USE_MINE,
            _ => {
                links[slot] = Link::Up;
                ACCEPT
            }
        }
    };
    if s.write_all(&[verdict]).is_err() || verdict != ACCEPT {
        return;
    }
    let _ = s.set_read_timeout(None);
    let _ = s.set_write_timeout(None);
    sh.incoming.lock().unwrap_or_else(|e| e.into_inner()).push((from, lane, s));
    sh.has_incoming.store(true, Ordering::Release);
    (sh.wake)();
}

/// `f` until it gives an answer, for at most [`LEARN_WAIT`].
fn learn<T>(f: impl Fn() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + LEARN_WAIT;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Hands what a receiving half reads to the engine: whole frames through `on_frame`, and the
/// payload of streamed data straight into the receive buffer.
pub struct Deliver<'a> {
    pub engine: &'a mut Engine,
    pub net: &'a mut dyn Net,
    pub from: ProcIdx,
}

impl FrameSink for Deliver<'_> {
    fn frame(&mut self, h: &Header, payload: &[u8]) {
        self.engine.on_frame(self.net, self.from, h, payload);
    }

    fn place(
        &mut self,
        h: &Header,
        plen: usize,
        at: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        self.engine.data_window(h, plen, at, fill)
    }

    fn placed(&mut self, h: &Header, n: usize) {
        self.engine.data_placed(h, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_transport::frame::Kind;

    fn net(me: ProcIdx, secret: &Secret, stripes: usize) -> (TcpNet, SocketAddr) {
        net_eager(me, secret, stripes, 1024)
    }

    fn net_eager(me: ProcIdx, secret: &Secret, stripes: usize, eager_max: usize) -> (TcpNet, SocketAddr) {
        let cfg = TcpConfig {
            eager_max,
            chunk: 4096,
            stripes,
            iface: None,
            connect_timeout: Duration::from_secs(10),
            congestion: Congestion::System,
            bulk_congestion: Congestion::System,
            coalesce: 16 * 1024,
        };
        let id = Identity { me, job: 7, nprocs: 2, secret: secret.clone(), whoami: format!("test process {me}") };
        TcpNet::start(id, cfg, IpAddr::V4(Ipv4Addr::LOCALHOST), Box::new(|| {})).unwrap()
    }

    /// Processes 0 and 1 on loopback, each knowing the other's address, with `stripes` bulk
    /// lanes; `setup` adjusts both before anything connects.
    fn pair(eager_max: usize, stripes: usize, setup: impl Fn(&mut TcpNet)) -> (TcpNet, TcpNet) {
        let secret = Secret::generate().unwrap();
        let (mut a, addr_a) = net_eager(0, &secret, stripes, eager_max);
        let (mut b, addr_b) = net_eager(1, &secret, stripes, eager_max);
        for n in [&mut a, &mut b] {
            setup(n);
            n.set_peer(0, Some(addr_a), "ha");
            n.set_peer(1, Some(addr_b), "hb");
        }
        (a, b)
    }

    /// The receiving halves of the `n` connections `b` adopts first (waiting up to 10 s for
    /// them), lane 0's first.
    fn adopted_n(b: &mut TcpNet, n: usize) -> Vec<NewRx> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut rx = Vec::new();
        while rx.len() < n && Instant::now() < deadline {
            b.adopt_incoming();
            rx.extend(b.take_new_rx());
        }
        assert!(rx.len() >= n, "b adopted {} of {n} connections", rx.len());
        rx.sort_by_key(|r| r.bulk);
        rx
    }

    /// The receiving half of lane 0's connection, which `b` adopts.
    fn adopted(b: &mut TcpNet) -> Rx {
        adopted_n(b, 1).swap_remove(0).rx
    }

    struct Frames(Vec<Header>);
    impl FrameSink for Frames {
        fn frame(&mut self, h: &Header, _payload: &[u8]) {
            self.0.push(*h);
        }
        fn place(
            &mut self,
            _h: &Header,
            _plen: usize,
            _at: usize,
            _fill: &mut dyn FnMut(&mut [u8]) -> io::Result<usize>,
        ) -> Option<io::Result<usize>> {
            None
        }
        fn placed(&mut self, _h: &Header, _n: usize) {}
    }

    /// Both processes dial each other at the same moment, on every lane: each pair must end
    /// with exactly one working connection per lane, whichever dial won.
    #[test]
    fn simultaneous_connects_leave_one_connection_per_lane() {
        for round in 0..20 {
            let stripes = round % 3;
            let lanes = stripes + 1;
            let secret = Secret::generate().unwrap();
            let (mut a, addr_a) = net(0, &secret, stripes);
            let (mut b, addr_b) = net(1, &secret, stripes);
            for n in [&mut a, &mut b] {
                n.set_peer(0, Some(addr_a), "ha");
                n.set_peer(1, Some(addr_b), "hb");
            }
            let go = Arc::new(std::sync::Barrier::new(2));
            let (ga, gb) = (go.clone(), go);
            let ta = std::thread::spawn(move || {
                ga.wait();
                let ok = a.open(1);
                (a, ok)
            });
            let tb = std::thread::spawn(move || {
                gb.wait();
                let ok = b.open(0);
                (b, ok)
            });
            let (mut a, oka) = ta.join().unwrap();
            let (mut b, okb) = tb.join().unwrap();
            assert!(oka && okb, "round {round}: {:?} {:?}", a.fatal, b.fatal);
            // Connections the other side won may still be on their way to the adopting side.
            let deadline = Instant::now() + Duration::from_secs(5);
            let (mut rx_a, mut rx_b) = (Vec::new(), Vec::new());
            while (rx_a.len() < lanes || rx_b.len() < lanes) && Instant::now() < deadline {
                a.adopt_incoming();
                b.adopt_incoming();
                rx_a.extend(a.take_new_rx());
                rx_b.extend(b.take_new_rx());
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(20));
            a.adopt_incoming();
            b.adopt_incoming();
            rx_a.extend(a.take_new_rx());
            rx_b.extend(b.take_new_rx());
            assert_eq!((rx_a.len(), rx_b.len()), (lanes, lanes), "round {round}: one connection per lane");
            // Lane 0 carries frames both ways.
            let h = Header::control(Kind::Fin, round as u64, 0);
            assert!(a.try_send(1, &h, &[]) && b.try_send(0, &h, &[]));
            for rx in [&mut rx_a, &mut rx_b] {
                let mut got = Frames(Vec::new());
                let deadline = Instant::now() + Duration::from_secs(5);
                while got.0.is_empty() && Instant::now() < deadline {
                    for r in rx.iter_mut() {
                        r.rx.receive(&mut got).unwrap();
                    }
                }
                assert_eq!(got.0, vec![h], "round {round}");
            }
            a.shutdown();
            b.shutdown();
        }
    }

    /// The system's choice stays by default; `unpaced` replaces only a pacing algorithm, and
    /// prefers cubic; a name is used as given.
    #[test]
    fn the_congestion_setting_replaces_only_what_it_says() {
        let system = Congestion::from_setting(None, Congestion::System);
        assert_eq!(system, Congestion::from_setting(Some(" system "), Congestion::Unpaced));
        assert!(system.candidates("bbr").is_empty() && system.candidates("reno").is_empty());
        let unpaced = Congestion::from_setting(Some("unpaced"), Congestion::System);
        assert_eq!(unpaced, Congestion::from_setting(Some(""), Congestion::Unpaced));
        assert_eq!(unpaced.candidates("bbr"), ["cubic", "reno"]);
        assert_eq!(unpaced.candidates("bbr3"), ["cubic", "reno"]);
        assert!(unpaced.candidates("cubic").is_empty() && unpaced.candidates("dctcp").is_empty());
        let reno = Congestion::from_setting(Some("reno"), Congestion::System);
        assert_eq!(reno.candidates("bbr"), ["reno"]);
        assert_eq!(reno.candidates("cubic"), ["reno"]);
        assert!(reno.candidates("reno").is_empty());
    }

    /// Both ends of a connection run the algorithm `BATON_TCP_CONGESTION` names (reno: every
    /// Linux kernel has it and lets any process choose it).
    #[test]
    fn both_ends_of_a_connection_run_the_named_congestion_control() {
        let (mut a, mut b) = pair(1024, 0, |n| n.cfg.congestion = Congestion::Named("reno".into()));
        let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: 8, id: 0, aux: 0 };
        assert!(a.try_send(1, &h, &[1; 8]), "{:?}", a.fatal);
        let rx = adopted(&mut b);
        assert_eq!(tcp::congestion(&rx.raw_fd()).unwrap(), "reno", "accepting end");
        let dialled = a.lane(1, 0).expect("a's connection").raw_fd();
        assert_eq!(tcp::congestion(&dialled).unwrap(), "reno", "dialling end");
        assert!(!a.warned_congestion && !b.warned_congestion);
        a.shutdown();
        b.shutdown();
    }

    /// Streamed data goes round robin on the bulk lanes, everything else on lane 0; each lane
    /// runs its own congestion setting, at both ends. Without bulk lanes, data goes on lane 0.
    #[test]
    fn streamed_data_takes_the_bulk_lanes_which_run_their_own_congestion_control() {
        let system = tcp::congestion(&TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
        let (mut a, mut b) = pair(1024, 2, |n| n.cfg.bulk_congestion = Congestion::Named("reno".into()));
        let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: 8, id: 0, aux: 0 };
        assert!(a.try_send(1, &h, &[1; 8]), "{:?}", a.fatal);
        let rx = adopted_n(&mut b, 3);
        assert_eq!(rx.iter().map(|r| r.bulk).collect::<Vec<_>>(), [false, true, true]);
        for (i, r) in rx.iter().enumerate() {
            let want = if r.bulk { "reno" } else { system.as_str() };
            assert_eq!(tcp::congestion(&r.rx.raw_fd()).unwrap(), want, "accepting end, connection {i}");
        }
        for lane in 0..3 {
            let want = if lane > 0 { "reno" } else { system.as_str() };
            let fd = a.lane(1, lane).expect("a's connection").raw_fd();
            assert_eq!(tcp::congestion(&fd).unwrap(), want, "dialling end, lane {lane}");
        }
        let data = Header::control(Kind::Data, 5, 0);
        let lanes: Vec<u8> = (0..3).map(|_| a.send_start(1, &data, &[9; 100]).expect("started").0).collect();
        assert_eq!(lanes, [1, 2, 1]);
        a.shutdown();
        b.shutdown();

        let (mut a, b) = pair(1024, 0, |_| {});
        assert_eq!(a.send_start(1, &data, &[9; 100]).expect("started").0, 0);
        assert!(a.tx[1].len() == 1, "a bulk lane without BATON_TCP_STRIPES");
        a.shutdown();
        b.shutdown();
    }

    /// A connection's receiving half is out of the epoll set until it is watched (a socket in
    /// the set costs every packet an epoll wake-up), in it while watched, and out again after.
    #[test]
    fn receiving_sockets_are_in_the_epoll_set_only_while_watched() {
        let (mut a, mut b) = pair(1024, 0, |_| {});
        let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: 8, id: 0, aux: 0 };
        assert!(a.try_send(1, &h, &[1; 8]), "{:?}", a.fatal);
        let rx = adopted(&mut b);
        let fd = rx.raw_fd() as u64;
        let ready = |b: &TcpNet| {
            // The frame is on its way: wait for it to show while watched.
            let mut out = Vec::new();
            let until = Instant::now() + Duration::from_secs(2);
            loop {
                b.ready_fds(&mut out);
                if out.contains(&fd) || Instant::now() > until {
                    return out.contains(&fd);
                }
            }
        };
        let mut out = Vec::new();
        b.ready_fds(&mut out);
        assert!(!out.contains(&fd), "a new connection's socket is watched from the start");
        b.watch(&rx);
        assert!(ready(&b), "a watched socket with a frame in it is not reported readable");
        b.unwatch(&rx);
        b.ready_fds(&mut out);
        assert!(!out.contains(&fd), "an unwatched socket is still reported");
        a.shutdown();
        b.shutdown();
    }

    /// An eager frame larger than the socket takes at once is finished by the progress pass's
    /// `flush_unsent`, with nothing else sent after it (a sender that only polls).
    #[test]
    fn a_frame_the_kernel_took_in_part_is_finished_by_polling() {
        // Far beyond a loopback socket's send buffer.
        let payload = vec![7u8; 8 << 20];
        let (mut a, mut b) = pair(payload.len(), 0, |_| {});
        let h = Header { kind: Kind::Eager, ctx: 1, src: 0, tag: 2, len: payload.len() as u64, id: 0, aux: 0 };
        assert!(a.try_send(1, &h, &payload), "{:?}", a.fatal);
        assert!(a.flush_unsent(), "the kernel took all of 8 MiB at once");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut rx = adopted(&mut b);
        let mut got = Frames(Vec::new());
        while got.0.is_empty() && Instant::now() < deadline {
            a.flush_unsent();
            rx.receive(&mut got).unwrap();
        }
        assert_eq!(got.0, vec![h]);
        assert!(!a.flush_unsent());
        a.shutdown();
        b.shutdown();
    }

    /// Reads `rx` until `n` more frames have come (10 s at most), or, with `n` 0, for 50 ms.
    fn read_frames(rx: &mut Rx, n: usize) -> Vec<i32> {
        let mut got = Frames(Vec::new());
        let limit = if n == 0 { Duration::from_millis(50) } else { Duration::from_secs(10) };
        let deadline = Instant::now() + limit;
        while (n == 0 || got.0.len() < n) && Instant::now() < deadline {
            rx.receive(&mut got).unwrap();
        }
        got.0.iter().map(|h| h.tag).collect()
    }

    /// The frames of a sender that goes on form bursts: the first frame leaves at once, the
    /// ones that follow wait for the next progress pass, a frame that is not queued (too
    /// large, or from a sender that waits) or a full batch, and then leave in order.
    #[test]
    fn a_burst_of_small_frames_waits_for_the_next_pass_and_keeps_its_order() {
        let (mut a, mut b) = pair(64 * 1024, 0, |n| n.coalesce_gap = Duration::from_secs(3600));
        let h =
            |tag: i32, len: usize| Header { kind: Kind::Eager, ctx: 1, src: 0, tag, len: len as u64, id: 0, aux: 0 };
        let small = [5u8; 100];
        let large = vec![6u8; 20 * 1024];
        assert!(a.try_send_more(1, &h(0, 100), &small), "{:?}", a.fatal);
        let mut rx = adopted(&mut b);
        assert_eq!(read_frames(&mut rx, 1), [0], "the first frame of a burst waits");
        assert!(a.try_send_more(1, &h(1, 100), &small));
        assert!(a.try_send_more(1, &h(2, 100), &small));
        assert_eq!(read_frames(&mut rx, 0), [] as [i32; 0], "a queued frame left before the pass");
        assert!(!a.flush_unsent(), "the pass left frames behind");
        assert_eq!(read_frames(&mut rx, 2), [1, 2]);
        // A new pass: a new burst.
        assert!(a.try_send_more(1, &h(3, 100), &small));
        assert_eq!(read_frames(&mut rx, 1), [3]);
        assert!(a.try_send_more(1, &h(4, 100), &small));
        assert!(a.try_send_more(1, &h(5, large.len()), &large), "over BATON_TCP_COALESCE: sent at once");
        assert_eq!(read_frames(&mut rx, 2), [4, 5]);
        assert!(a.try_send_more(1, &h(6, 100), &small));
        assert!(a.try_send(1, &h(7, 100), &small), "a sender that waits");
        assert_eq!(read_frames(&mut rx, 2), [6, 7]);
        // A batch leaves once the next frame would fill it, that frame with it.
        assert!(!a.flush_unsent());
        let len = large.len() / 2;
        let (mut sent, mut queued) = (Vec::new(), 0);
        loop {
            let tag = 8 + sent.len() as i32;
            assert!(a.try_send_more(1, &h(tag, len), &large[..len]));
            sent.push(tag);
            if sent.len() > 1 {
                if queued + len >= COALESCE_BATCH {
                    break;
                }
                queued += baton_transport::stream::HEADER_LEN + len;
            }
        }
        assert_eq!(read_frames(&mut rx, sent.len()), sent, "a full batch waited for the pass");
        // A send that comes later than the gap after the previous one starts a burst.
        a.coalesce_gap = Duration::ZERO;
        assert!(a.try_send_more(1, &h(100, 100), &small));
        assert!(a.try_send_more(1, &h(101, 100), &small));
        assert_eq!(read_frames(&mut rx, 2), [100, 101]);
        // BATON_TCP_COALESCE=0: never queued.
        a.coalesce_gap = Duration::from_secs(3600);
        a.cfg.coalesce = 0;
        assert!(a.try_send_more(1, &h(102, 100), &small));
        assert!(a.try_send_more(1, &h(103, 0), &[]));
        assert_eq!(read_frames(&mut rx, 2), [102, 103]);
        a.shutdown();
        b.shutdown();
    }

    /// A process of another job that is gone (nothing listens at its address any more) is
    /// found lost by a probe within the limit; a live one is connected.
    #[test]
    fn probe_finds_a_vanished_process_and_connects_a_live_one() {
        let secret = Secret::generate().unwrap();
        let (mut a, _) = net(0, &secret, 1);
        let (b, addr_b) = net(1, &secret, 1);
        let gone = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        // Processes 2 and 3 "of another job": 3 no longer listens.
        let link = Secret::generate().unwrap();
        a.add_peer(2, (8, 0), Some(addr_b), "hb", Some(secret.clone()));
        a.add_peer(3, (8, 1), Some(gone), "hc", Some(link));
        // Process 2 is really `b` under another identity: teach `b` to accept it.
        b.sh.index.lock().unwrap().insert((7, 0), 0);
        let t0 = Instant::now();
        assert!(!a.probe(3, Duration::from_millis(500)));
        assert!(a.is_lost(3) && a.fatal.is_none(), "{:?}", a.fatal);
        assert!(t0.elapsed() < Duration::from_secs(3));
        assert!(a.probe(2, Duration::from_secs(5)), "{:?} {:?}", a.lost, a.fatal);
        assert!(a.was_connected(2));
        a.shutdown();
        b.shutdown();
    }
}
