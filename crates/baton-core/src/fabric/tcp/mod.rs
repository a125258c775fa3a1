//! TCP endpoints: how processes on different hosts find, authenticate and keep each other.
//!
//! Important types:
//! - [`TcpNet`] (this file): this process's side. It listens on one address (published
//!   through the bootstrap key-value space), opens connections on first use (`lanes.rs`), and
//!   holds their sending halves (`send.rs`, which also coalesces bursts of small frames); the
//!   receiving halves go to the runtime ([`TcpNet::take_new_rx`]), which reads them in its
//!   progress loop. Each peer gets *lanes*: lane 0 carries every frame but the streamed data of
//!   large messages, which goes on `BATON_TCP_STRIPES` bulk lanes (1 by default, 0: on lane 0
//!   too). Matching only ever looks at lane 0, so messages stay in order, and a bulk lane can
//!   run a congestion control that suits bulk transfers ([`Congestion`]).
//! - [`TcpConfig`] (`config.rs`): the `BATON_TCP_*` settings, and the choice of address.
//! - `connect.rs`: connection set-up as state machines without I/O, `Dial` and `Answer`
//!   (authentication, naming, verdict, the tie-break between two processes that dial each
//!   other at once); `handshake.rs` carries out their steps on sockets.
//! - `service.rs`: the service thread. It accepts connections and answers each on a thread of
//!   its own (a silent or hostile client cannot stall the job), and wakes the process when it
//!   sleeps and a socket becomes readable ([`TcpNet::arm`]).
//!
//! A process trusts its own job's secret and, for each job it connected to
//! (`MPI_Comm_accept`/`connect`, spawn), the secret the two jobs agreed on ([`TcpNet::trust`]);
//! a client names which one it proves, and the job it claims must be one that secret admits.
//! Invariants: each pair of processes ends with exactly one connection per lane, whichever
//! dialled; a dialled connection enters `tx` only after the answering process marked its lane
//! up and took it; a process of another job whose connection broke is `lost`, and what it is
//! sent goes nowhere.

mod config;
mod connect;
mod handshake;
mod lanes;
mod send;
mod service;

pub use config::{choose_addr, Congestion, TcpConfig};

// `TcpConfig::from_env` (config.rs) reads sizes with it.
use crate::engine::{Engine, Net, ProcIdx};
use baton_pmi::auth::Secret;
use baton_transport::frame::Header;
use baton_transport::stream::{Fill, FrameSink, Rx, Tx};
use connect::Link;
use service::{Key, Shared};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Streamed data frames the kernel took only part of: (process, receive request, offset of
    /// the frame in its message, lane). The rest follows on the same lane before anything else
    /// ([`send_data`](Self::send_data)).
    streaming: Vec<(ProcIdx, u64, u64, usize)>,
    /// A failure that ends the job (the runtime aborts with it).
    pub fatal: Option<String>,
    listen: Option<SocketAddr>,
    /// A refused `BATON_TCP_CONGESTION` was reported.
    warned_congestion: bool,
    /// Counts progress passes (each starts with [`flush_unsent`](Self::flush_unsent)), so
    /// that a frame can tell whether another went to its peer since the last one.
    pass: u64,
    /// `send::COALESCE_GAP` (tests lengthen or shorten it).
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
        let who = service::Me { job, rank: me, lanes: cfg.lanes(), nprocs, secret: secret.clone(), whoami };
        let (sh, addr) = service::start(who, ip, wake)?;
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
            streaming: Vec::new(),
            fatal: None,
            listen: Some(addr),
            warned_congestion: false,
            pass: 1,
            coalesce_gap: send::COALESCE_GAP,
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
            None => keys.push(Key::new(secret, job)),
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
        self.streaming.retain(|m| m.0 != p);
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
            self.streaming.retain(|m| m.0 != p);
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

    #[inline]
    pub fn is_lost(&self, p: ProcIdx) -> bool {
        self.lost.iter().any(|(q, _)| *q == p)
    }

    fn fail(&mut self, msg: String) {
        if self.fatal.is_none() {
            self.fatal = Some(format!("{}: {msg}", self.sh.whoami));
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
    /// kernel path (on loopback and veth, the sender's own system call), a noticeable part of
    /// a small message's time (docs/PERFORMANCE.md, TCP). So few connections are watched only
    /// while a thread sleeps.
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

    /// Arms the watcher before this process sleeps: a readable socket rings the doorbell.
    /// Whether bytes of a frame wait to be written (partial writes, a queued burst).
    #[inline]
    pub fn has_unsent(&self) -> bool {
        !self.unsent.is_empty()
    }

    pub fn arm(&self) {
        self.sh.arm();
    }

    /// Ends the service thread (at finalize); connections stay until the process exits.
    pub fn shutdown(&self) {
        self.sh.stop();
    }

    /// Describes process `p`, for messages about a connection that failed.
    pub fn describe(&self, p: ProcIdx) -> String {
        self.who(p)
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

    fn place(&mut self, h: &Header, plen: usize, at: usize, fill: &mut Fill<'_>) -> Option<io::Result<usize>> {
        self.engine.data_window(h, plen, at, fill)
    }

    fn placed(&mut self, h: &Header, n: usize) {
        self.engine.data_placed(h, n);
    }
}

#[cfg(test)]
mod tests;
