//! The MPI process: bootstrap, the process table, the engine behind one lock, and waiting.
//!
//! Important types:
//! - [`Mpi`]: everything one MPI process holds after `MPI_Init`. Its [`State`] (engine, fabric,
//!   ring consumers) sits behind a single mutex, so every thread may call MPI at any time
//!   (`MPI_THREAD_MULTIPLE`); callers never hold it while running application callbacks.
//! - [`WaitPolicy`]: how a blocking call waits. It polls for a while, then sleeps on this
//!   process's doorbell (a futex word in the shared segment) which senders ring when they see a
//!   sleeper. With more ranks than cores it polls briefly and yields the core, so a token passed
//!   around 8 ranks on 2 cores costs about a context switch per hop, not a scheduler time slice.

use crate::coll::schedule::{Port, Schedule};
use crate::comm::{hash_words, Comm};
use crate::engine::{Engine, Net, ProcIdx, ReqId, SendData, Sender, Sink, Status};
use crate::error::{MpiError, Result};
use crate::fabric::tcp::{self as tcpnet, Deliver, Identity, TcpConfig, TcpNet};
use crate::fabric::{Fabric, FabricConfig};
use crate::group::Group;
use baton_abi::consts as c;
use baton_pmi::auth::Secret;
use baton_pmi::PmiClient;
use baton_transport::inbox::Inbox;
use baton_transport::shm::{Consumer, ProcCtl, Segment};
use baton_transport::stream::Rx;
use baton_transport::wait::{futex_wait, futex_wait_any, futex_wake};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A process of the job (or, later, of a connected job).
#[derive(Clone, Debug)]
pub struct Proc {
    pub job: u64,
    pub rank: u32,
    pub pid: i32,
    /// The host (node) it runs on: `BATON_NODE` from the launcher, else the host name.
    pub host: String,
}

pub struct State {
    pub engine: Engine,
    pub fabric: Fabric,
    consumers: Vec<(ProcIdx, Consumer)>,
    /// Receiving halves of TCP connections.
    tcp_rx: Vec<TcpIn>,
    /// Of which on lane 0 (not bulk lanes).
    tcp_lane0: usize,
    /// Descriptors epoll reported readable in this pass (kept, so polling does not allocate).
    tcp_ready: Vec<u64>,
    /// Whether every socket of `tcp_rx` is in the TCP watched set: always with more than
    /// [`TCP_POLL_EACH_MAX`] of them, else only while a thread may sleep ([`State::arm_tcp`]).
    tcp_watched: bool,
    /// This process's inbox, once it has met other jobs (beside the fabric, so that reading it
    /// borrows neither the other).
    inbox: Option<Arc<Inbox>>,
    /// Readers of the rings other jobs' processes leased in our inbox: (sender, slot, reader).
    inbox_cons: Vec<(ProcIdx, usize, Consumer)>,
    /// The inbox generation last seen (a change means a lease started or closed).
    inbox_gen: u64,
}

/// How long a probe of a process of another job on another machine may try to connect before
/// that process counts as gone.
const PROBE_LIMIT: Duration = Duration::from_secs(2);

/// A TCP connection's receiving half, as the progress loop reads it.
struct TcpIn {
    from: ProcIdx,
    rx: Rx,
    /// The peer was disconnected since: the connection's end is expected, whatever the same
    /// process does next.
    retired: bool,
    /// A bulk lane ([`crate::fabric::tcp`]): data arrives on it only after this process asked
    /// for some, so a pass reads it only while a receive waits for streamed data (an empty
    /// read on every pass cost an 8 B ping-pong 0.3 of its 4.4 µs across hosts), while the sockets are
    /// watched (a thread may sleep, and epoll reports what it holds, its end included), or
    /// once retired, until its end (else its descriptor would outlive the disconnect).
    bulk: bool,
}

/// Puts every socket of `rx` in the TCP watched set (`on`) or takes them out, unless `watched`
/// says they are there already (or not); then records it.
fn set_watched(t: &TcpNet, rx: &[TcpIn], watched: &mut bool, on: bool) {
    if *watched != on {
        for c in rx {
            if on {
                t.watch(&c.rx)
            } else {
                t.unwatch(&c.rx)
            }
        }
        *watched = on;
    }
}

/// With more TCP connections than this (bulk lanes not counted), a progress pass asks epoll
/// which ones have data instead of trying each.
const TCP_POLL_EACH_MAX: usize = 4;

impl State {
    /// Moves every frame that has arrived into the engine and pushes what waits to go out.
    /// Returns whether anything happened.
    pub fn progress(&mut self) -> bool {
        let mut did = false;
        if self.fabric.tcp.is_some() {
            did |= self.progress_tcp();
        }
        let State { engine, fabric, consumers, .. } = self;
        engine.progress(fabric);
        for (from, cons) in consumers.iter_mut() {
            // A bounded batch per peer keeps one busy sender from starving the others.
            for _ in 0..64 {
                let Some(h) = cons.next_frame() else { break };
                engine.on_frame(fabric, *from, &h, cons.payload());
                cons.consume();
                did = true;
            }
        }
        while let Some((h, data)) = fabric.loopback.pop_front() {
            let me = fabric.me();
            engine.on_frame(fabric, me, &h, &data);
            did = true;
        }
        if self.inbox.is_some() {
            did |= self.progress_inbox();
        }
        did
    }

    /// Adopts new leases of our inbox, reads every leased ring and frees closed ones.
    fn progress_inbox(&mut self) -> bool {
        let State { engine, fabric, inbox: Some(ib), inbox_cons, inbox_gen, .. } = self else { return false };
        let g = ib.generation();
        if g != *inbox_gen {
            let known: Vec<usize> = inbox_cons.iter().map(|(_, s, _)| *s).collect();
            let mut all_known = true;
            for l in ib.new_leases(&known) {
                match fabric.foreign_ids.get(&(l.job, l.rank)) {
                    Some(&p) => inbox_cons.push((p, l.slot, ib.reader(&l))),
                    // A sender this process has not learnt of yet: look again next pass.
                    None => all_known = false,
                }
            }
            if all_known {
                *inbox_gen = g;
            }
        }
        let mut did = false;
        let mut i = 0;
        while i < inbox_cons.len() {
            let (from, slot, cons) = &mut inbox_cons[i];
            for _ in 0..64 {
                let Some(h) = cons.next_frame() else { break };
                engine.on_frame(fabric, *from, &h, cons.payload());
                cons.consume();
                did = true;
            }
            // Closed after its last frame: once that is read, the slot goes back to the pool.
            // The closed flag first: frames published before it are then surely visible.
            if ib.is_closed(*slot) && !cons.ready() {
                let slot = *slot;
                inbox_cons.swap_remove(i);
                ib.free(slot);
                continue;
            }
            i += 1;
        }
        did
    }

    /// Adopts new connections, then reads every TCP connection that has data.
    fn progress_tcp(&mut self) -> bool {
        let State { engine, fabric, tcp_rx, tcp_lane0: lane0, tcp_ready: ready, tcp_watched: watched, .. } = self;
        let Some(t) = fabric.tcp.as_mut() else { return false };
        t.flush_unsent();
        t.adopt_incoming();
        let new = t.take_new_rx();
        if !new.is_empty() {
            if *watched {
                new.iter().for_each(|n| t.watch(&n.rx));
            }
            *lane0 += new.iter().filter(|n| !n.bulk).count();
            tcp_rx.extend(new.into_iter().map(|n| TcpIn { from: n.from, rx: n.rx, retired: false, bulk: n.bulk }));
        }
        // Many connections: one epoll call says which have data, instead of a read on each.
        let select = *lane0 > TCP_POLL_EACH_MAX;
        if select {
            set_watched(t, tcp_rx, watched, true);
        }
        let mut did = false;
        if select {
            t.ready_fds(ready);
        }
        let skip_bulk = !*watched && !engine.awaits_stream();
        let mut i = 0;
        while i < tcp_rx.len() {
            let TcpIn { from, rx, retired, bulk } = &mut tcp_rx[i];
            let (from, retired, bulk) = (*from, *retired, *bulk);
            let idle_bulk = bulk && skip_bulk && !retired;
            if !rx.has_buffered_frame() && ((select && !ready.contains(&(rx.raw_fd() as u64))) || idle_bulk) {
                i += 1;
                continue;
            }
            let r = rx.receive(&mut Deliver { engine, net: fabric, from });
            match r {
                Ok(got) if got.closed => {
                    // The peer is gone (after finalize, or it died: the launcher reports that;
                    // a process of another job that still had our address never disconnected).
                    if let Some(t) = fabric.tcp.as_mut() {
                        t.drop_rx(rx);
                        if t.end_is_loss(from) && !retired {
                            let who = t.describe(from);
                            t.peer_failed(from, format!("{who} closed its connection"));
                        }
                    }
                    tcp_rx.swap_remove(i);
                    *lane0 -= !bulk as usize;
                    continue;
                }
                Ok(got) => did |= got.delivered > 0,
                Err(e) => {
                    if let Some(t) = fabric.tcp.as_mut() {
                        let who = t.describe(from);
                        t.drop_rx(rx);
                        if !retired && (t.end_is_loss(from) || !t.is_foreign(from)) {
                            t.peer_failed(from, format!("the connection to {who} failed: {e}"));
                        }
                    }
                    tcp_rx.swap_remove(i);
                    *lane0 -= !bulk as usize;
                    continue;
                }
            }
            i += 1;
        }
        did
    }

    /// Before a thread sleeps: puts every receiving socket in the watched set and arms the
    /// watcher, so that data on any of them rings the doorbell. False without TCP.
    fn arm_tcp(&mut self) -> bool {
        let Some(t) = self.fabric.tcp.as_ref() else { return false };
        set_watched(t, &self.tcp_rx, &mut self.tcp_watched, true);
        t.arm();
        true
    }

    /// After sleeping, when no thread sleeps any more (the caller checks, under the lock that
    /// [`arm_tcp`](Self::arm_tcp) takes too): a few sockets leave the watched set again.
    fn unwatch_tcp(&mut self) {
        let Some(t) = self.fabric.tcp.as_ref() else { return };
        if self.tcp_lane0 <= TCP_POLL_EACH_MAX {
            set_watched(t, &self.tcp_rx, &mut self.tcp_watched, false);
        }
    }

    fn frames_waiting(&self) -> bool {
        self.consumers.iter().any(|(_, c)| c.ready())
            || self.inbox_cons.iter().any(|(_, _, c)| c.ready())
            || self.inbox.as_ref().is_some_and(|ib| ib.generation() != self.inbox_gen)
            || !self.fabric.loopback.is_empty()
            || self.tcp_rx.iter().any(|c| c.rx.has_buffered_frame())
    }

    /// A transport failure that must end the job.
    fn fatal(&self) -> Option<String> {
        self.fabric.tcp.as_ref().and_then(|t| t.fatal.clone())
    }
}

#[derive(Clone)]
enum Bell {
    Shm(Arc<Segment>, usize),
    Local(Arc<ProcCtl>),
}

impl Bell {
    fn ctl(&self) -> &ProcCtl {
        match self {
            Bell::Shm(seg, slot) => seg.ctl(*slot),
            Bell::Local(c) => c,
        }
    }

    /// Wakes a thread of this process sleeping on the doorbell, if there is one.
    fn ring_if_sleeping(&self) {
        let ctl = self.ctl();
        if ctl.sleepers.load(Ordering::SeqCst) != 0 {
            ctl.bell.fetch_add(1, Ordering::SeqCst);
            futex_wake(&ctl.bell);
        }
    }
}

/// How blocking calls wait: poll for an adaptive budget, then sleep on the doorbell.
///
/// The budget starts at `BATON_SPIN_US` (default 200 µs, above a sleeping wake-up) and follows the waits actually seen: a wait that ended only after sleeping
/// raises it to twice that wait's length (so a stream of 1 MiB messages, each a few hundred
/// microseconds apart, is caught while polling), up to `BATON_SPIN_MAX_US` (default 5 ms);
/// waits far shorter than the budget let it decay back. With more ranks than cores, polls
/// `sched_yield` between checks, which hands the core to a rank with work at about the cost of
/// a context switch instead of a sleeping wake-up.
#[derive(Debug)]
pub struct WaitPolicy {
    budget_ns: AtomicU64,
    min_ns: u64,
    max_ns: u64,
    pub yield_between_polls: bool,
    /// Polls between two yields when oversubscribed.
    pub yield_every: u64,
    /// The CPU this process returns to while it waits, when oversubscribed (`BATON_PLACE`).
    home: Option<Home>,
}

/// How oversubscribed processes are spread over the CPUs they may use (`BATON_PLACE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Leave placement to the kernel.
    Off,
    /// Process `i` of the machine on CPU `i mod cpus`: neighbours in rank order on different
    /// CPUs, so that two ranks talking while the others sleep each keep a CPU.
    Cyclic,
    /// Consecutive processes share a CPU: a neighbour in rank order is usually a context switch
    /// away rather than a cross-CPU wake-up.
    Block,
}

impl Placement {
    pub fn from_env() -> Placement {
        match std::env::var("BATON_PLACE").as_deref().map(str::trim) {
            Ok("off" | "none" | "0") => Placement::Off,
            Ok("block") => Placement::Block,
            Ok("cyclic" | "") | Err(_) => Placement::Cyclic,
            Ok(other) => {
                // A placement is a hint, not worth failing MPI_Init over; but say so.
                eprintln!("baton: MPI_Init: BATON_PLACE={other:?} is not one of cyclic, block, off; using cyclic");
                Placement::Cyclic
            }
        }
    }

    /// The CPU of process `index` of `count` on this machine, among the allowed `cpus`.
    pub fn cpu_for(self, index: usize, count: usize, cpus: &[usize]) -> Option<usize> {
        if cpus.len() < 2 || count == 0 {
            return None;
        }
        let i = index.min(count - 1);
        match self {
            Placement::Off => None,
            Placement::Cyclic => Some(cpus[i % cpus.len()]),
            Placement::Block => Some(cpus[i * cpus.len() / count]),
        }
    }
}

/// Where a process waits when the machine is oversubscribed. Yield-polling ranks are only as
/// fast as the kernel's choice of which rank runs next, and that choice is worst when one CPU
/// holds more pollers than another: the kernel's balancer counts a polling rank as load like any
/// other and took 100 ms or more to even them out here (docs/PERFORMANCE.md). So a
/// waiting thread moves itself back to its home CPU when it finds itself elsewhere; its mask is
/// not narrowed, so the kernel stays free to move it while the application computes.
#[derive(Debug)]
struct Home {
    cpu: usize,
    /// The CPUs the process was allowed, restored after each move.
    allowed: Vec<usize>,
    /// Only the thread that initialized MPI goes home: other threads of the process would pile
    /// onto the same CPU.
    thread: std::thread::ThreadId,
    /// Set once the application has changed the thread's mask itself.
    user_placed: AtomicBool,
}

impl WaitPolicy {
    /// `local_ranks` processes share this machine; this one is `local_index` of them.
    fn choose(local_ranks: usize, local_index: usize) -> WaitPolicy {
        let cores = available_cores();
        let oversubscribed = local_ranks > cores;
        let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        let home = if oversubscribed {
            let allowed = baton_transport::sys::allowed_cpus();
            Placement::from_env().cpu_for(local_index, local_ranks, &allowed).map(|cpu| Home {
                cpu,
                allowed,
                thread: std::thread::current().id(),
                user_placed: AtomicBool::new(false),
            })
        } else {
            None
        };
        // The floor must exceed a sleeping wake-up (tens of microseconds here), or a peer that
        // slept once makes the other sleep too, and every message pays a wake-up.
        let min_us = env("BATON_SPIN_US").unwrap_or(200);
        let max_us = env("BATON_SPIN_MAX_US").unwrap_or(5000).max(min_us);
        WaitPolicy {
            budget_ns: AtomicU64::new(min_us * 1000),
            min_ns: min_us * 1000,
            max_ns: max_us * 1000,
            yield_between_polls: oversubscribed,
            yield_every: env("BATON_YIELD_EVERY").unwrap_or(1).max(1),
            home,
        }
    }

    /// Moves the calling thread to its home CPU if it has one and is elsewhere: a `getcpu`
    /// (a few nanoseconds) when it is home, two `sched_setaffinity` calls when not.
    pub fn go_home(&self) {
        if let Some(h) = &self.home {
            if baton_transport::sys::current_cpu() != Some(h.cpu)
                && !h.user_placed.load(Ordering::Relaxed)
                && std::thread::current().id() == h.thread
            {
                // A mask changed since MPI_Init is the application's own placement: restoring
                // ours would undo it, so homing stops for good.
                if baton_transport::sys::allowed_cpus() != h.allowed {
                    h.user_placed.store(true, Ordering::Relaxed);
                    return;
                }
                baton_transport::sys::place_on_cpu(h.cpu, &h.allowed);
            }
        }
    }

    pub fn budget(&self) -> Duration {
        Duration::from_nanos(self.budget_ns.load(Ordering::Relaxed))
    }

    /// Learns from a finished wait of `waited` that did (or did not) need to sleep.
    fn learn(&self, waited: Duration, slept: bool) {
        let w = waited.as_nanos().min(u64::MAX as u128) as u64;
        let b = self.budget_ns.load(Ordering::Relaxed);
        let nb = if slept {
            (w.saturating_mul(2)).clamp(b, self.max_ns)
        } else if w < b / 16 {
            (b - b / 64).max(self.min_ns)
        } else {
            b
        };
        if nb != b {
            self.budget_ns.store(nb, Ordering::Relaxed);
        }
    }
}

pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

pub struct Mpi {
    state: Mutex<State>,
    bell: Bell,
    pub policy: WaitPolicy,
    /// Every process this one knows: its job's, by rank, then those of connected jobs.
    procs: std::sync::RwLock<ProcTable>,
    pub me: ProcIdx,
    pub job_id: u64,
    pub appnum: i32,
    pub universe_size: i32,
    pub world: Arc<Comm>,
    pub self_comm: Arc<Comm>,
    pub host: String,
    pmi: Mutex<Option<PmiClient>>,
    finalized: AtomicBool,
    /// Nonblocking and persistent collectives in flight, advanced by every progressing call.
    colls: Mutex<Vec<ActiveColl>>,
    active_colls: AtomicUsize,
    /// Calls of `MPI_Intercomm_create_from_groups` so far, per (tag, groups).
    from_groups: Mutex<std::collections::HashMap<u64, u64>>,
    /// This job's secret: what processes of this job prove to each other.
    secret: Secret,
    /// The machine this process runs on (see [`proc_value`]).
    machine: Option<String>,
    /// Ports, connections to other jobs and the parent (see [`crate::dpm`]).
    pub dpm: crate::dpm::DpmState,
    /// The port of the job that spawned this one (`BATON_PARENT_PORT`).
    pub parent_port: Option<String>,
    /// This process's inbox (also in `State`), for sleeping on its doorbell without the lock.
    inbox: std::sync::OnceLock<Arc<Inbox>>,
    /// When `poll` last looked for vanished processes of other jobs (ns since the epoch).
    lost_checked: AtomicU64,
    /// A singleton that started `mpiexec --singleton-server` for its spawns.
    own_launcher: AtomicBool,
    /// Per shared-memory collective area: whether a communicator of this process uses it, and
    /// the last sequence number used in it (see [`crate::coll::shm`]).
    coll_areas: Mutex<[(bool, u64); crate::coll::shm::COLL_AREAS]>,
}

/// The process table: entries never move, so a [`ProcIdx`] stays valid for the process's life.
#[derive(Default)]
pub struct ProcTable {
    pub list: Vec<Proc>,
    by_id: std::collections::HashMap<(u64, u32), ProcIdx>,
}

impl ProcTable {
    fn push(&mut self, p: Proc) -> ProcIdx {
        let i = self.list.len() as ProcIdx;
        self.by_id.insert((p.job, p.rank), i);
        self.list.push(p);
        i
    }

    /// Enters `p` in a released entry from `free` if there is one, else at the end.
    fn insert(&mut self, p: Proc, free: &mut Vec<ProcIdx>) -> ProcIdx {
        match free.pop() {
            Some(i) => {
                self.by_id.insert((p.job, p.rank), i);
                self.list[i as usize] = p;
                i
            }
            None => self.push(p),
        }
    }
}

/// A collective schedule in flight and the request the application waits on.
struct ActiveColl {
    sched: Arc<Mutex<Schedule>>,
    req: ReqId,
}

fn pmi_err(e: baton_pmi::PmiError) -> MpiError {
    MpiError::new(c::MPI_ERR_INTERN, format!("MPI_Init: bootstrap failed: {e}"))
}

/// Which transports `BATON_TRANSPORTS` allows: (shm, tcp); default both.
fn transports_allowed() -> Result<(bool, bool)> {
    let list = std::env::var("BATON_TRANSPORTS").unwrap_or_default();
    if list.trim().is_empty() {
        return Ok((true, true));
    }
    let (mut shm, mut tcp) = (false, false);
    for t in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match t {
            "shm" => shm = true,
            "tcp" => tcp = true,
            "self" => {}
            other => {
                return Err(MpiError::new(
                    c::MPI_ERR_OTHER,
                    format!(
                        "MPI_Init: BATON_TRANSPORTS names '{other}', which this build does not have (available: self, shm, tcp)"
                    ),
                ))
            }
        }
    }
    Ok((shm, tcp))
}

fn env_num(k: &str) -> Option<u32> {
    std::env::var(k).ok().and_then(|v| v.trim().parse().ok())
}

/// What each process publishes about itself: `pid node local_rank tcp_addr machine` (`-` for
/// none). The machine (kernel boot id) tells which processes share cores even when they are on
/// different nodes, e.g. test hosts made of network namespaces.
pub(crate) fn proc_value(pid: i32, node: &str, local_rank: u32, tcp: Option<std::net::SocketAddr>) -> String {
    let addr = tcp.map_or_else(|| "-".to_string(), |a| a.to_string());
    let machine = baton_transport::sys::machine_id().unwrap_or_else(|| "-".to_string());
    format!("{pid} {node} {local_rank} {addr} {machine}")
}

/// One process as [`proc_value`] describes it.
pub(crate) struct ProcInfo {
    pub pid: i32,
    pub node: String,
    pub local_rank: Option<u32>,
    pub addr: Option<std::net::SocketAddr>,
    pub machine: Option<String>,
    /// Its inbox descriptor (processes of other jobs only).
    pub inbox: Option<i32>,
}

/// Parses [`proc_value`]; anything malformed reads as "unknown", which start-up then reports.
pub(crate) fn parse_proc_value(v: &str) -> ProcInfo {
    let mut it = v.split(' ');
    ProcInfo {
        pid: it.next().and_then(|s| s.parse().ok()).unwrap_or(0),
        node: it.next().unwrap_or("?").to_string(),
        local_rank: it.next().and_then(|s| s.parse().ok()),
        addr: it.next().and_then(|s| s.parse().ok()),
        machine: it.next().filter(|s| *s != "-").map(str::to_string),
        inbox: it.next().and_then(|s| s.parse().ok()),
    }
}

impl Mpi {
    pub fn init() -> Result<Mpi> {
        let pmi = PmiClient::from_env().map_err(pmi_err)?;
        let host = std::env::var("BATON_NODE")
            .ok()
            .filter(|s| !s.is_empty() && !s.contains(' '))
            .unwrap_or_else(baton_transport::sys::hostname);
        let pid = std::process::id() as i32;
        let (rank, size, job_id, appnum, universe) = match &pmi {
            Some(p) => (p.rank(), p.size(), p.job_id(), p.appnum() as i32, p.universe_size() as i32),
            None => (0, 1, hash_words(&[pid as u64, now_nanos()]) | 1, 0, 1),
        };
        // This host's share of the job (the launcher numbers each host's ranks from 0).
        let local_size = env_num("BATON_LOCAL_SIZE").filter(|&n| n >= 1 && n <= size).unwrap_or(size);
        let local_rank = env_num("BATON_LOCAL_RANK").filter(|&r| r < local_size).unwrap_or(rank);
        let mut cfg = FabricConfig::from_env();
        // Every process of the host derives the same size: the segment's rings must agree.
        cfg.ring_size = cfg.ring_size_for(local_size as usize);
        let s = Setup {
            rank,
            size,
            job_id,
            host,
            pid,
            local_rank,
            local_size,
            cfg,
            bell: Arc::new(std::sync::OnceLock::new()),
        };
        let wired = match pmi {
            Some(p) => Mpi::wire_up(p, &s)?,
            None => Wired {
                secret: Secret::generate().map_err(|e| MpiError::new(c::MPI_ERR_INTERN, format!("MPI_Init: {e}")))?,
                pmi: None,
                procs: vec![Proc { job: job_id, rank, pid, host: s.host.clone() }],
                slots: vec![Some(0)],
                addrs: vec![None],
                machines: vec![None],
                seg: None,
                tcp: None,
            },
        };
        // Read once and removed, so that nothing this process starts inherits the port.
        let parent_port = std::env::var("BATON_PARENT_PORT").ok().filter(|p| !p.is_empty());
        std::env::remove_var("BATON_PARENT_PORT");
        let mut mpi = Mpi::assemble(s, wired, appnum, universe)?;
        mpi.parent_port = parent_port;
        mpi.policy.go_home();
        Ok(mpi)
    }

    /// The bootstrap exchange: start listening for TCP if other hosts (or `BATON_TRANSPORTS`)
    /// need it, publish how to reach this process, size or map this host's segment, and learn
    /// every other process.
    fn wire_up(mut p: PmiClient, s: &Setup) -> Result<Wired> {
        let (shm_allowed, tcp_allowed) = transports_allowed()?;
        let (rank, size) = (s.rank, s.size);
        let mut tcp = None;
        let mut my_addr = None;
        if tcp_allowed && size > 1 && (!shm_allowed || s.local_size < size) {
            let tcfg = TcpConfig::from_env();
            let ip = tcpnet::choose_addr(&tcfg, s.local_size == size)
                .map_err(|e| MpiError::new(c::MPI_ERR_OTHER, format!("MPI_Init: {e}")))?;
            // The service thread rings whichever doorbell this process ends up sleeping on.
            let bell = s.bell.clone();
            let wake = Box::new(move || {
                if let Some(b) = bell.get() {
                    b.ring_if_sleeping();
                }
            });
            let id = Identity {
                me: rank,
                job: s.job_id,
                nprocs: size as usize,
                secret: p.secret().clone(),
                whoami: format!("rank {rank} on host {}", s.host),
            };
            let (net, addr) = TcpNet::start(id, tcfg, ip, wake).map_err(|e| {
                MpiError::new(c::MPI_ERR_OTHER, format!("MPI_Init: cannot listen for TCP connections on {ip}: {e}"))
            })?;
            my_addr = Some(addr);
            tcp = Some(net);
        }
        p.put("proc", proc_value(s.pid, &s.host, s.local_rank, my_addr).as_bytes()).map_err(pmi_err)?;
        let fd = p.shm_fd().filter(|_| shm_allowed && s.local_size > 1);
        let mut seg = None;
        if let (0, Some(fd)) = (s.local_rank, fd) {
            seg = Some(Segment::create(fd, s.local_size as usize, s.cfg.ring_size).map_err(|e| {
                MpiError::new(c::MPI_ERR_INTERN, format!("MPI_Init: cannot size the shared segment: {e}"))
            })?);
        }
        p.fence().map_err(pmi_err)?;
        if let Some(fd) = fd {
            if seg.is_none() {
                seg = Some(Segment::attach(fd).map_err(|e| {
                    MpiError::new(c::MPI_ERR_INTERN, format!("MPI_Init: cannot map the shared segment: {e}"))
                })?);
            }
            // Our inherited copy is no longer needed: the mapping keeps the memory alive.
            baton_transport::shm::close_fd(fd);
        }
        let mut w = Wired {
            secret: p.secret().clone(),
            pmi: None,
            procs: Vec::with_capacity(size as usize),
            slots: Vec::with_capacity(size as usize),
            addrs: Vec::with_capacity(size as usize),
            machines: Vec::with_capacity(size as usize),
            seg: seg.map(Arc::new),
            tcp,
        };
        for r in 0..size {
            let v = p.get(r, "proc").map_err(pmi_err)?.unwrap_or_default();
            let info = parse_proc_value(&String::from_utf8_lossy(&v));
            w.slots.push(info.local_rank);
            w.addrs.push(info.addr);
            w.machines.push(info.machine);
            w.procs.push(Proc { job: s.job_id, rank: r, pid: info.pid, host: info.node });
        }
        w.pmi = Some(p);
        Ok(w)
    }

    /// The second half of start-up: the fabric and the predefined communicators.
    fn assemble(s: Setup, w: Wired, appnum: i32, universe: i32) -> Result<Mpi> {
        let Setup { rank, size, job_id, host, local_rank, local_size, cfg, .. } = s;
        let Wired { pmi, procs, slots, addrs, machines, seg, mut tcp, secret } = w;
        if seg.is_some() && cfg.cma {
            baton_transport::cma::allow_peers();
        }
        let me = rank as ProcIdx;
        let mut fabric = Fabric::new(me, cfg, seg.clone());
        let mut local = 0;
        // Processes competing for this machine's cores (more than cores: yield while waiting).
        let mine = &machines[me as usize];
        let same_machine: Vec<bool> =
            procs.iter().zip(&machines).map(|(p, m)| if mine.is_some() { m == mine } else { p.host == host }).collect();
        let sharing = same_machine.iter().filter(|&&b| b).count();
        let my_index = same_machine[..me as usize].iter().filter(|&&b| b).count();
        for (i, p) in procs.iter().enumerate() {
            let same_host = p.host == host;
            local += same_host as usize;
            let slot = if seg.is_some() && same_host { slots[i].map(|s| s as usize) } else { None };
            fabric.add_proc(i as ProcIdx, p.pid, slot);
            let by_tcp = addrs[i].is_some() && tcp.is_some();
            if i as ProcIdx != me && slot.is_none() && !by_tcp {
                let why = if same_host {
                    "shared memory is disabled or unavailable"
                } else {
                    "it runs on another host and TCP is disabled"
                };
                return Err(MpiError::new(
                    c::MPI_ERR_OTHER,
                    format!("MPI_Init: no transport reaches rank {i} on host {} ({why}; see BATON_TRANSPORTS)", p.host),
                ));
            }
            if let Some(t) = tcp.as_mut() {
                t.set_peer(i as ProcIdx, addrs[i], &p.host);
            }
        }
        fabric.tcp = tcp;
        let consumers = fabric.consumers();
        let bell = match &seg {
            Some(sg) => Bell::Shm(sg.clone(), local_rank as usize),
            None => Bell::Local(Arc::new(ProcCtl { bell: AtomicU32::new(0), sleepers: AtomicU32::new(0) })),
        };
        let _ = s.bell.set(bell.clone());
        let world_group = Arc::new(Group::new((0..size).collect()));
        let world =
            Arc::new(Comm::new(hash_words(&[job_id, u64::from_le_bytes(*b"world\0\0\0")]), world_group, rank as i32));
        if let Some(sg) = &seg {
            if local == size as usize && local_size == size {
                let sh = crate::coll::shm::ShmColl::new(sg.clone(), (0..size as usize).collect(), rank as usize, 0, 1);
                let _ = world.shm.set(Arc::new(sh));
            }
        }
        let self_comm = Arc::new(Comm::new(
            hash_words(&[job_id, rank as u64, u64::from_le_bytes(*b"self\0\0\0\0")]),
            Arc::new(Group::new(vec![me])),
            0,
        ));
        let machine = machines[me as usize].clone().or_else(baton_transport::sys::machine_id);
        let mut table = ProcTable::default();
        for p in procs {
            table.push(p);
        }
        Ok(Mpi {
            state: Mutex::new(State {
                engine: Engine::new(),
                fabric,
                consumers,
                tcp_rx: Vec::new(),
                tcp_lane0: 0,
                tcp_ready: Vec::new(),
                tcp_watched: false,
                inbox: None,
                inbox_cons: Vec::new(),
                inbox_gen: 0,
            }),
            bell,
            policy: WaitPolicy::choose(sharing, my_index),
            procs: std::sync::RwLock::new(table),
            me,
            job_id,
            appnum,
            universe_size: universe.max(size as i32),
            world,
            self_comm,
            host,
            pmi: Mutex::new(pmi),
            finalized: AtomicBool::new(false),
            colls: Mutex::new(Vec::new()),
            active_colls: AtomicUsize::new(0),
            from_groups: Mutex::new(std::collections::HashMap::new()),
            secret,
            machine,
            dpm: crate::dpm::DpmState::default(),
            parent_port: None,
            inbox: std::sync::OnceLock::new(),
            lost_checked: AtomicU64::new(0),
            own_launcher: AtomicBool::new(false),
            // Area 0 is the world's (whether or not it has one: simpler than renumbering).
            coll_areas: Mutex::new(std::array::from_fn(|a| (a == 0, 0))),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one progress pass and wakes local sleepers if a request completed.
    fn progress_locked(&self, st: &mut State) {
        st.engine.completed_any = false;
        st.progress();
        if st.engine.completed_any {
            self.wake_sleepers();
        }
    }

    /// Other threads of this process may sleep on the doorbell waiting for what just completed.
    fn wake_sleepers(&self) {
        self.bell.ring_if_sleeping();
    }

    /// Ends the job over a transport failure (a peer's connection broke or never came up).
    fn check_fatal(&self, st: &State) {
        if let Some(msg) = st.fatal() {
            self.abort(1, &format!("baton: {msg}"));
        }
    }

    /// Makes progress once (for `MPI_Test*`, `MPI_Iprobe`).
    pub fn poll(&self) {
        self.progress_colls();
        let idle = {
            let mut st = self.lock();
            self.progress_locked(&mut st);
            // An application that only tests never sleeps: look for vanished processes of
            // other jobs now and then (a clock read per poll, only while connected to any).
            if self.dpm.connected() {
                let now = now_nanos();
                if now.wrapping_sub(self.lost_checked.load(Ordering::Relaxed)) > 20_000_000 {
                    self.lost_checked.store(now, Ordering::Relaxed);
                    if self.check_lost(&mut st) {
                        self.wake_sleepers();
                    }
                }
            }
            !st.engine.completed_any
        };
        // With more ranks than cores, an application polling with MPI_Test would otherwise keep
        // the core from the ranks it waits for (seconds per collective at 8 ranks on 2 cores).
        if idle && self.policy.yield_between_polls {
            std::thread::yield_now();
        }
    }

    // ----- nonblocking collectives -----

    /// Starts a collective schedule in the background; the returned request completes with
    /// it. `comm` is the application's communicator handle (for its error handler).
    pub fn start_coll(&self, sched: Arc<Mutex<Schedule>>, comm: usize) -> ReqId {
        let req = self.lock().engine.external(comm);
        let done = {
            let mut s = sched.lock().unwrap_or_else(|e| e.into_inner());
            // The first round goes out now, so communication overlaps what the caller does next.
            s.progress(self).then(|| s.status())
        };
        match done {
            Some(status) => self.lock().engine.complete(req, status),
            None => {
                let mut list = self.colls.lock().unwrap_or_else(|e| e.into_inner());
                list.push(ActiveColl { sched, req });
                self.active_colls.store(list.len(), Ordering::Release);
            }
        }
        req
    }

    /// Advances every collective in flight. Runs outside the engine lock, because reductions
    /// may call the application's functions; a thread that finds another already doing this
    /// (or a reduction calling back into MPI) simply goes on.
    #[inline]
    fn progress_colls(&self) {
        if self.active_colls.load(Ordering::Acquire) != 0 {
            self.progress_colls_now();
        }
    }

    #[inline(never)]
    fn progress_colls_now(&self) {
        let Ok(mut list) = self.colls.try_lock() else { return };
        let mut finished = false;
        list.retain(|a| {
            let Ok(mut s) = a.sched.try_lock() else { return true };
            if !s.progress(self) {
                return true;
            }
            let status = s.status();
            drop(s);
            self.lock().engine.complete(a.req, status);
            finished = true;
            false
        });
        self.active_colls.store(list.len(), Ordering::Release);
        drop(list);
        if finished {
            self.wake_sleepers();
        }
    }

    /// Blocks until `f` returns a value, progressing all communication meanwhile.
    pub fn block<T>(&self, mut f: impl FnMut(&mut State) -> Option<T>) -> T {
        let budget = self.policy.budget();
        let mut slept = false;
        let mut polls: u64 = 0;
        // The clock starts only once a wait lasts 64 polls: short waits never read it.
        let mut start: Option<Instant> = None;
        loop {
            self.progress_colls();
            {
                let mut st = self.lock();
                self.progress_locked(&mut st);
                if let Some(v) = f(&mut st) {
                    drop(st);
                    self.policy.learn(start.map(|s| s.elapsed()).unwrap_or_default(), slept);
                    return v;
                }
            }
            polls += 1;
            if !polls.is_multiple_of(64) || start.get_or_insert_with(Instant::now).elapsed() < budget {
                if self.policy.yield_between_polls {
                    // The kernel may have moved this rank while it computed or polled.
                    if polls % 16 == 1 {
                        self.policy.go_home();
                    }
                    if polls.is_multiple_of(self.policy.yield_every) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                // With a core of its own, no pause between polls: on this EPYC a `pause` lasts
                // longer than a poll, and the frame's wait for the next poll showed as 3 % of the
                // 8-byte ping-pong (16 interleaved rounds, docs/PERFORMANCE.md).
                continue;
            }
            let ctl = self.bell.ctl();
            ctl.sleepers.fetch_add(1, Ordering::SeqCst);
            let seq = ctl.bell.load(Ordering::SeqCst);
            // Processes of other jobs ring our inbox's doorbell instead.
            let inbox = self.inbox.get();
            let seq2 = inbox.map(|ib| {
                ib.ctl().sleepers.fetch_add(1, Ordering::SeqCst);
                ib.ctl().bell.load(Ordering::SeqCst)
            });
            let unsleep = || {
                ctl.sleepers.fetch_sub(1, Ordering::SeqCst);
                if let Some(ib) = inbox {
                    ib.ctl().sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            };
            // A collective in flight may be able to move on with what has already arrived.
            self.progress_colls();
            let mut tcp_armed = false;
            let ready = {
                let mut st = self.lock();
                self.progress_locked(&mut st);
                if let Some(v) = f(&mut st) {
                    unsleep();
                    drop(st);
                    self.policy.learn(start.map(|s| s.elapsed()).unwrap_or_default(), slept);
                    return v;
                }
                self.check_fatal(&st);
                if self.check_lost(&mut st) {
                    unsleep();
                    continue;
                }
                // Frames queued for a full ring or socket, or being streamed, need polling, not
                // a doorbell.
                let ready = st.frames_waiting() || st.engine.has_outgoing() || st.fabric.busy();
                if !ready {
                    tcp_armed = st.arm_tcp();
                }
                ready
            };
            if ready {
                unsleep();
                std::thread::yield_now();
                continue;
            }
            match (inbox, seq2) {
                (Some(ib), Some(s2)) => {
                    futex_wait_any(&[(&ctl.bell, seq), (&ib.ctl().bell, s2)], Duration::from_millis(100))
                }
                _ => futex_wait(&ctl.bell, seq, Duration::from_millis(100)),
            }
            unsleep();
            slept = true;
            // A wake-up places the sleeper next to the CPU that woke it.
            self.policy.go_home();
            if tcp_armed {
                let mut st = self.lock();
                if ctl.sleepers.load(Ordering::SeqCst) == 0 {
                    st.unwatch_tcp();
                }
            }
        }
    }

    /// Waits for a request that has probably not completed yet (a receive just posted): the
    /// first pass of the wait loop both makes progress and checks it.
    pub fn wait_pending(&self, id: ReqId) -> (Status, Option<Vec<u8>>) {
        self.block(|st| take_completed(st, id))
    }

    /// Waits for request `id` and releases it, returning its status.
    pub fn wait(&self, id: ReqId) -> (Status, Option<Vec<u8>>) {
        // Eager sends are usually complete on return: no progress pass needed.
        if let Some(out) = take_completed(&mut self.lock(), id) {
            return out;
        }
        self.wait_pending(id)
    }

    // ----- the library's own messages (collective context) -----

    /// Sends `data` on the collective context of `comm` (the runtime's own traffic).
    pub fn isend_internal(&self, comm: &Comm, dest: i32, tag: i32, data: Vec<u8>) -> ReqId {
        self.isend_ctx(comm.proc_of(dest), comm.coll_ctx(), comm.rank, tag, data)
    }

    /// Sends `data` to process `to` on context `ctx`, as rank `src` of it.
    pub fn isend_ctx(&self, to: ProcIdx, ctx: u64, src: i32, tag: i32, data: Vec<u8>) -> ReqId {
        let mut st = self.lock();
        let State { engine, fabric, .. } = &mut *st;
        engine.send(fabric, to, ctx, src, tag, SendData::Packed(data), false, Sender::GoesOn)
    }

    /// Receives a message of unknown length from `src` on the collective context.
    pub fn recv_internal(&self, comm: &Comm, src: i32, tag: i32) -> Vec<u8> {
        self.recv_ctx(comm.coll_ctx(), src, tag)
    }

    /// Receives a message of unknown length from rank `src` on context `ctx`.
    pub fn recv_ctx(&self, ctx: u64, src: i32, tag: i32) -> Vec<u8> {
        let len = self.block(|st| st.engine.probe(ctx, src, tag).map(|s| s.bytes as usize));
        let id = {
            let mut st = self.lock();
            let State { engine, fabric, .. } = &mut *st;
            engine.recv(fabric, ctx, src, tag, Sink::Owned(vec![0; len]))
        };
        self.wait(id).1.unwrap_or_default()
    }

    /// Gives intracommunicator `comm` a shared-memory collective area if all its members can
    /// share one (see [`crate::coll::shm`]): once per communicator, at its first blocking
    /// barrier, bcast, reduce, allreduce, allgather or alltoall, which every member calls at
    /// the same point. Nothing happens for a communicator that does not consist of this job's
    /// processes on one segment (the same at every member), or when no area is free at every
    /// member. A process with
    /// `multiple` (MPI_THREAD_MULTIPLE, which members may differ in) offers no free area but
    /// takes part in the exchange all the same: two of its threads could otherwise agree on
    /// the same area for two communicators at once.
    #[inline]
    pub fn attach_shm(&self, comm: &Comm, multiple: bool) {
        // Every later collective pays only this load.
        if !comm.shm_checked.load(Ordering::Acquire) && !comm.shm_checked.swap(true, Ordering::AcqRel) {
            self.attach_shm_now(comm, multiple);
        }
    }

    #[inline(never)]
    fn attach_shm_now(&self, comm: &Comm, multiple: bool) {
        if comm.shm.get().is_some() {
            return;
        }
        let Some(world) = self.world.shm.get() else { return };
        let n = self.world.size();
        if comm.is_inter() || comm.size() < 2 || comm.group.procs.iter().any(|&p| p as i32 >= n) {
            return;
        }
        const AREAS: usize = crate::coll::shm::COLL_AREAS;
        let mine: Vec<u8> = {
            let areas = self.coll_areas.lock().unwrap_or_else(|e| e.into_inner());
            let free = if multiple {
                0
            } else {
                areas.iter().enumerate().filter(|(_, a)| !a.0).fold(0u64, |m, (i, _)| m | 1 << i)
            };
            std::iter::once(free).chain(areas.iter().map(|a| a.1)).flat_map(u64::to_le_bytes).collect()
        };
        let word =
            |b: &[u8], i: usize| b.get(8 * i..8 * i + 8).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap()));
        let all = self.allgather(comm, mine);
        let free = all.iter().fold(u64::MAX, |m, b| m & word(b, 0));
        let Some(area) = (1..AREAS).find(|&a| free & 1 << a != 0) else { return };
        let first = all.iter().map(|b| word(b, 1 + area)).max().unwrap_or(0) + 1;
        self.coll_areas.lock().unwrap_or_else(|e| e.into_inner())[area] = (true, first - 1);
        // Single-host jobs only (the world has an area): segment slot = world rank = process.
        let slots = comm.group.procs.iter().map(|&p| p as usize).collect();
        let sh = crate::coll::shm::ShmColl::new(world.segment().clone(), slots, comm.rank as usize, area, first);
        let _ = comm.shm.set(Arc::new(sh));
    }

    /// Gives `comm`'s area back (from `MPI_Comm_free`, collective): once every member says it
    /// is done with all collectives there; otherwise the area stays taken for good.
    pub fn detach_shm(&self, comm: &Comm) {
        let Some(sh) = comm.shm.get() else { return };
        if sh.area() == 0 {
            return;
        }
        let pending = !sh.idle()
            || self.colls.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| {
                let s = c.sched.lock().unwrap_or_else(|e| e.into_inner());
                std::ptr::eq(&*s.comm, comm)
            });
        let all = self.allgather(comm, vec![pending as u8]);
        if all.iter().all(|b| b.first() == Some(&0)) {
            self.coll_areas.lock().unwrap_or_else(|e| e.into_inner())[sh.area()] = (false, sh.last_seq());
        }
    }

    pub fn barrier(&self, comm: &Comm) {
        let n = comm.size();
        let r = comm.rank;
        let mut k = 1;
        while k < n {
            let s = self.isend_internal(comm, (r + k) % n, TAG_BARRIER, Vec::new());
            self.recv_internal(comm, (r - k + n) % n, TAG_BARRIER);
            self.wait(s);
            k *= 2;
        }
    }

    /// Every member's bytes, in rank order (ring algorithm: n-1 steps, one message each).
    pub fn allgather(&self, comm: &Comm, mine: Vec<u8>) -> Vec<Vec<u8>> {
        let n = comm.size();
        let r = comm.rank;
        let mut all = vec![Vec::new(); n as usize];
        all[r as usize] = mine;
        for step in 0..n - 1 {
            let send_idx = ((r - step) % n + n) % n;
            let recv_idx = ((r - step - 1) % n + n) % n;
            let s = self.isend_internal(comm, (r + 1) % n, TAG_ALLGATHER, all[send_idx as usize].clone());
            all[recv_idx as usize] = self.recv_internal(comm, (r - 1 + n) % n, TAG_ALLGATHER);
            self.wait(s);
        }
        all
    }

    /// `data` of rank `root` at every member (binomial tree; the others pass anything).
    pub fn bcast_internal(&self, comm: &Comm, root: i32, data: Vec<u8>) -> Vec<u8> {
        let n = comm.size();
        let vr = (comm.rank - root).rem_euclid(n);
        let real = |v: i32| (v + root) % n;
        let mut data = data;
        let mut mask = 1;
        while mask < n {
            if vr & mask != 0 {
                data = self.recv_internal(comm, real(vr - mask), TAG_BCAST);
                break;
            }
            mask <<= 1;
        }
        let mut sends = Vec::new();
        mask >>= 1;
        while mask > 0 {
            if vr + mask < n {
                sends.push(self.isend_internal(comm, real(vr + mask), TAG_BCAST, data.clone()));
            }
            mask >>= 1;
        }
        for s in sends {
            self.wait(s);
        }
        data
    }

    /// On an intercommunicator: `data` of the local leader (local rank 0) goes to the remote
    /// leader, and every member receives what the remote leader sent.
    pub fn leader_swap(&self, inter: &Comm, data: Vec<u8>) -> Vec<u8> {
        let local = inter.local.as_ref().expect("an intercommunicator");
        let theirs = if inter.rank == 0 {
            let s = self.isend_internal(inter, 0, TAG_SWAP, data);
            let got = self.recv_internal(inter, 0, TAG_SWAP);
            self.wait(s);
            got
        } else {
            Vec::new()
        };
        self.bcast_internal(local, 0, theirs)
    }

    /// A process's identity across jobs: (job id, rank in its job).
    pub fn proc_id(&self, p: ProcIdx) -> (u64, u32) {
        let t = self.procs.read().unwrap_or_else(|e| e.into_inner());
        let q = &t.list[p as usize];
        (q.job, q.rank)
    }

    /// The host (node) process `p` runs on.
    pub fn proc_host(&self, p: ProcIdx) -> String {
        let t = self.procs.read().unwrap_or_else(|e| e.into_inner());
        t.list[p as usize].host.clone()
    }

    /// The process table entry of the process `(job, rank)`, if this process knows it.
    pub fn proc_index(&self, job: u64, rank: u32) -> Option<ProcIdx> {
        self.procs.read().unwrap_or_else(|e| e.into_inner()).by_id.get(&(job, rank)).copied()
    }

    // ----- processes of other jobs -----

    /// Makes this process reachable by processes of other jobs: an inbox for those on this
    /// machine, and a TCP listener (a job on one host starts without one).
    pub fn ensure_tcp(&self) -> Result<std::net::SocketAddr> {
        let mut st = self.lock();
        if st.inbox.is_none() && transports_allowed().is_ok_and(|(shm, _)| shm) {
            // Processes of other jobs on this machine send through rings leased here; without
            // an inbox (creation failed) they use TCP.
            let cfg = FabricConfig::from_env();
            if let Ok(ib) = Inbox::create(self.job_id, self.me, cfg.ring_size) {
                let ib = Arc::new(ib);
                st.inbox = Some(ib.clone());
                st.fabric.me_id = (self.job_id, self.me);
                let _ = self.inbox.set(ib);
                if cfg.cma {
                    baton_transport::cma::allow_peers();
                }
            }
        }
        if let Some(a) = st.fabric.tcp.as_ref().and_then(TcpNet::listen_addr) {
            return Ok(a);
        }
        let tcfg = TcpConfig::from_env();
        let err =
            |e: String| MpiError::new(c::MPI_ERR_OTHER, format!("cannot listen for connections of other jobs: {e}"));
        // The other job may be on another host: a routable address unless BATON_TCP_IF says.
        let ip = tcpnet::choose_addr(&tcfg, false).map_err(err)?;
        let bell = self.bell.clone();
        let wake = Box::new(move || bell.ring_if_sleeping());
        let nprocs = self.procs.read().unwrap_or_else(|e| e.into_inner()).list.len();
        let id = Identity {
            me: self.me,
            job: self.job_id,
            nprocs,
            secret: self.secret.clone(),
            whoami: format!("rank {} on host {}", self.me, self.host),
        };
        let (net, addr) = TcpNet::start(id, tcfg, ip, wake).map_err(|e| err(format!("{ip}: {e}")))?;
        st.fabric.tcp = Some(net);
        Ok(addr)
    }

    /// How processes of another job reach this one: `job rank` then [`proc_value`].
    pub fn describe_self(&self) -> Result<String> {
        let addr = self.ensure_tcp()?;
        let machine = self.machine.clone().unwrap_or_else(|| "-".into());
        let pid = std::process::id();
        let inbox = self.inbox.get().and_then(|ib| ib.raw_fd()).map_or_else(|| "-".to_string(), |fd| fd.to_string());
        Ok(format!("{} {} {pid} {} - {addr} {machine} {inbox}", self.job_id, self.me, self.host))
    }

    /// Enters the processes described by [`Mpi::describe_self`] into the process table
    /// (those not known yet), reached over TCP with `secret`, and trusts `secret` for their
    /// jobs. Returns their indices, in order.
    pub fn add_remote(&self, descs: &[String], secret: &Secret) -> Result<Vec<ProcIdx>> {
        let bad = |d: &str| MpiError::new(c::MPI_ERR_INTERN, format!("malformed process description '{d}'"));
        let mut out = Vec::with_capacity(descs.len());
        let mut st = self.lock();
        let mut t = self.procs.write().unwrap_or_else(|e| e.into_inner());
        for d in descs {
            let (job, rest) = d.split_once(' ').ok_or_else(|| bad(d))?;
            let (rank, rest) = rest.split_once(' ').ok_or_else(|| bad(d))?;
            let job: u64 = job.parse().map_err(|_| bad(d))?;
            let rank: u32 = rank.parse().map_err(|_| bad(d))?;
            let known = t.by_id.get(&(job, rank)).copied();
            if let (Some(p), true) = (known, job == self.job_id) {
                out.push(p);
                continue;
            }
            let info = parse_proc_value(rest);
            let Some(addr) = info.addr else { return Err(bad(d)) };
            let proc = Proc { job, rank, pid: info.pid, host: info.node.clone() };
            if let Some(p) = known {
                // Met again: whatever was concluded about it last time no longer holds.
                self.dpm.lost.lock().unwrap_or_else(|e| e.into_inner()).retain(|&q| q != p);
            }
            let p = match known {
                Some(p) => p,
                None => t.insert(proc, &mut self.dpm.free.lock().unwrap_or_else(|e| e.into_inner())),
            };
            out.push(p);
            // Same machine (and its inbox is reachable): shared memory; else TCP.
            let near = info.machine.is_some() && info.machine == self.machine;
            st.fabric.add_foreign(p, (job, rank), info.pid, near, info.inbox);
            let tcp = st.fabric.tcp.as_mut().ok_or_else(|| bad(d))?;
            tcp.add_peer(p, (job, rank), Some(addr), &info.node, Some(secret.clone()));
            tcp.trust(secret, job);
        }
        Ok(out)
    }

    /// Processes `ps` are being disconnected: the end of their connections is expected from now
    /// on (the other side may finish first and close).
    pub fn expect_close(&self, ps: &[ProcIdx]) {
        let mut st = self.lock();
        if let Some(t) = st.fabric.tcp.as_mut() {
            for &p in ps {
                t.expect_close(p);
            }
        }
    }

    /// Ends this process's connections to processes `ps` of other jobs (after
    /// `MPI_Comm_disconnect`): everything queued goes out first.
    pub fn release_remote(&self, ps: &[ProcIdx]) {
        self.block(|st| (!st.engine.has_outgoing() && !st.fabric.busy()).then_some(()));
        let ids: Vec<(ProcIdx, (u64, u32))> = ps.iter().map(|&p| (p, self.proc_id(p))).collect();
        let mut st = self.lock();
        for (p, id) in ids {
            if id.0 == self.job_id {
                continue;
            }
            st.fabric.release(p);
            let mut tcp_used = false;
            for c in st.tcp_rx.iter_mut().filter(|c| c.from == p) {
                tcp_used = true;
                c.retired = true;
            }
            if let Some(t) = st.fabric.tcp.as_mut() {
                tcp_used |= t.was_connected(p);
                t.forget(p, id);
            }
            // Its table entry serves the next process of another job, so that a thousand spawns
            // do not grow the tables; unless a TCP connection to it is still closing, whose end
            // would then be taken for the new process's.
            if !tcp_used {
                let mut t = self.procs.write().unwrap_or_else(|e| e.into_inner());
                t.by_id.remove(&id);
                st.fabric.foreign_ids.remove(&id);
                self.dpm.lost.lock().unwrap_or_else(|e| e.into_inner()).retain(|&q| q != p);
                self.dpm.free.lock().unwrap_or_else(|e| e.into_inner()).push(p);
            }
        }
        // A job none of whose processes is in use any more loses our trust (and its secret).
        let in_use: Vec<u64> = self.dpm.in_use().into_iter().map(|p| self.proc_id(p).0).collect();
        if let Some(t) = st.fabric.tcp.as_ref() {
            let mut jobs: Vec<u64> = ps.iter().map(|&p| self.proc_id(p).0).collect();
            jobs.sort_unstable();
            jobs.dedup();
            for j in jobs.into_iter().filter(|j| !in_use.contains(j)) {
                t.untrust_job(j);
            }
        }
    }

    /// Before sleeping: finds processes of other jobs that are gone (a broken connection, or a
    /// process on this machine that no longer exists) and fails what waits for them. Returns
    /// whether some request failed.
    fn check_lost(&self, st: &mut State) -> bool {
        if !self.dpm.connected() {
            return false;
        }
        let in_use = self.dpm.in_use();
        if in_use.is_empty() {
            return false;
        }
        // A process on another machine has no pid we can check: connect to it once, so that its
        // end is seen on the connection (a refusal says it is already gone).
        for &p in &in_use {
            if !st.fabric.is_near_foreign(p) {
                if let Some(t) = st.fabric.tcp.as_mut() {
                    if t.is_foreign(p) && t.end_is_loss(p) {
                        t.probe(p, PROBE_LIMIT);
                    }
                }
            }
        }
        let mut lost = self.dpm.lost.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = st.fabric.tcp.as_ref() {
            for (p, _) in &t.lost {
                if !lost.contains(p) {
                    lost.push(*p);
                }
            }
        }
        for p in in_use {
            if !lost.contains(&p) && st.fabric.is_near_foreign(p) {
                let pid = st.fabric.pid(p);
                if pid > 0 && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    lost.push(p);
                }
            }
        }
        let mut failed = false;
        for &p in lost.iter() {
            st.fabric.mark_dead(p);
            failed |= st.engine.fail_peer(p, |ctx, src| self.dpm.may_need(p, ctx, src), c::MPI_ERR_PROC_ABORTED);
        }
        failed
    }

    /// A singleton (started without mpiexec) gets a launcher of its own on its first spawn:
    /// `mpiexec --singleton-server` adopts it as rank 0 of its job.
    pub fn ensure_launcher(&self) -> Result<()> {
        let mut g = self.pmi.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_some() {
            return Ok(());
        }
        let path = crate::dpm::launcher_path();
        let err = |why: String| {
            MpiError::new(
                c::MPI_ERR_SPAWN,
                format!(
                    "MPI_Comm_spawn: this process runs without mpiexec, and starting {} failed: {why} (set BATON_MPIEXEC)",
                    path.display()
                ),
            )
        };
        let (child, addr) =
            baton_pmi::start_singleton_server(&path, self.job_id, &self.secret).map_err(|e| err(e.to_string()))?;
        // It exits by itself once this process has ended, and its children with it.
        drop(child);
        let p = PmiClient::connect(&addr, &self.secret, 0, self.job_id).map_err(|e| err(e.to_string()))?;
        *g = Some(p);
        self.own_launcher.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The bootstrap connection, for calls that ask the launcher (spawn).
    pub fn with_pmi<R>(&self, f: impl FnOnce(Option<&mut PmiClient>) -> R) -> R {
        let mut g = self.pmi.lock().unwrap_or_else(|e| e.into_inner());
        f(g.as_mut())
    }

    /// The next context id for an intercommunicator created from groups alone
    /// (`MPI_Intercomm_create_from_groups`): every member counts its calls per `key`, so all
    /// derive the same id without a message.
    pub fn derive_ctx_from_groups(&self, key: u64) -> u64 {
        let mut m = self.from_groups.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(key).or_insert(0);
        *n += 1;
        hash_words(&[key, *n, 0x6667_726f_7570]) & !1
    }

    // ----- job control -----

    pub fn finalize(&self) {
        if self.finalized.swap(true, Ordering::SeqCst) {
            return;
        }
        self.barrier(&self.world);
        // Everything queued must reach its ring or socket before the process may exit.
        self.block(|st| (!st.engine.has_outgoing() && !st.fabric.busy()).then_some(()));
        if let Some(t) = self.lock().fabric.tcp.as_ref() {
            t.shutdown();
        }
        if let Some(p) = self.pmi.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let _ = p.finalize();
        }
    }

    pub fn is_finalized(&self) -> bool {
        self.finalized.load(Ordering::SeqCst)
    }

    /// Ends the whole job. Never returns.
    pub fn abort(&self, code: i32, msg: &str) -> ! {
        if let Ok(mut g) = self.pmi.try_lock() {
            if let Some(p) = g.as_mut() {
                // A singleton's own launcher never kills it: it only ends what it spawned.
                let _ = if self.own_launcher.load(Ordering::SeqCst) {
                    p.request_abort(code, msg)
                } else {
                    p.abort(code, msg)
                };
            }
        }
        eprintln!("{msg}");
        std::process::exit(if code == 0 { 1 } else { code & 0xff });
    }

    /// The world rank of this process.
    pub fn world_rank(&self) -> i32 {
        self.world.rank
    }
}

/// Collective schedules post and collect their messages through this process's engine, one
/// lock per round.
impl Port for Mpi {
    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine, &mut dyn Net) -> R) -> R {
        let mut st = self.lock();
        let State { engine, fabric, .. } = &mut *st;
        f(engine, fabric)
    }
}

/// The status (and owned data) of request `id` if it is complete, releasing it.
fn take_completed(st: &mut State, id: ReqId) -> Option<(Status, Option<Vec<u8>>)> {
    let r = st.engine.get_mut(id)?;
    if !r.complete {
        return None;
    }
    let out = (r.status, r.owned.take());
    st.engine.release(id);
    Some(out)
}

/// What `init` knows before the bootstrap exchange.
struct Setup {
    rank: u32,
    size: u32,
    job_id: u64,
    /// This process's host (node) name.
    host: String,
    pid: i32,
    local_rank: u32,
    local_size: u32,
    cfg: FabricConfig,
    /// The doorbell, once chosen; the TCP service thread rings it.
    bell: Arc<std::sync::OnceLock<Bell>>,
}

/// What the bootstrap exchange gave.
struct Wired {
    pmi: Option<PmiClient>,
    secret: Secret,
    procs: Vec<Proc>,
    /// Per process: its slot in its host's segment.
    slots: Vec<Option<u32>>,
    /// Per process: where it listens for TCP connections.
    addrs: Vec<Option<std::net::SocketAddr>>,
    /// Per process: the machine it runs on (see [`proc_value`]).
    machines: Vec<Option<String>>,
    seg: Option<Arc<Segment>>,
    tcp: Option<TcpNet>,
}

pub const TAG_BARRIER: i32 = 1;
pub const TAG_ALLGATHER: i32 = 2;
pub const TAG_BCAST: i32 = 3;
pub const TAG_SWAP: i32 = 4;

fn now_nanos() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::Placement;

    #[test]
    fn cyclic_puts_rank_neighbours_on_different_cpus() {
        let cpus = [0, 1];
        let homes: Vec<_> = (0..8).map(|i| Placement::Cyclic.cpu_for(i, 8, &cpus).unwrap()).collect();
        assert_eq!(homes, [0, 1, 0, 1, 0, 1, 0, 1]);
        // Only the allowed CPUs are used, in the order given.
        let homes: Vec<_> = (0..5).map(|i| Placement::Cyclic.cpu_for(i, 5, &[2, 5, 7]).unwrap()).collect();
        assert_eq!(homes, [2, 5, 7, 2, 5]);
    }

    #[test]
    fn block_fills_each_cpu_with_consecutive_ranks() {
        let homes: Vec<_> = (0..8).map(|i| Placement::Block.cpu_for(i, 8, &[0, 1]).unwrap()).collect();
        assert_eq!(homes, [0, 0, 0, 0, 1, 1, 1, 1]);
        // Uneven counts differ by at most one per CPU.
        let homes: Vec<_> = (0..5).map(|i| Placement::Block.cpu_for(i, 5, &[0, 1]).unwrap()).collect();
        assert_eq!(homes, [0, 0, 0, 1, 1]);
        // An index past the count (a stale or odd table) still lands on an allowed CPU.
        assert_eq!(Placement::Block.cpu_for(9, 5, &[0, 1]), Some(1));
    }

    #[test]
    fn no_home_without_a_choice_to_make() {
        assert_eq!(Placement::Off.cpu_for(3, 8, &[0, 1]), None);
        assert_eq!(Placement::Cyclic.cpu_for(3, 8, &[4]), None);
        assert_eq!(Placement::Block.cpu_for(0, 0, &[0, 1]), None);
        assert_eq!(Placement::Cyclic.cpu_for(0, 4, &[]), None);
    }
}
