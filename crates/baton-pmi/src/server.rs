//! The launcher side: [`PmiServer`] accepts rank connections, authenticates
//! them, runs the fence collective and reports [`ServerEvent`]s (connect,
//! finalize, abort, rejected peers) to the launcher through a callback.
//!
//! One thread per connection keeps the code simple; a rank's thread blocks
//! in the fence on a shared [`FenceState`] until the last rank arrives, which
//! encodes the answer once and wakes everybody. That makes a fence exactly
//! one request and one answer per rank.
//!
//! A server may serve only some ranks of the job (one host's, in a
//! multi-host job, see [`ServerConfig::local_ranks`]) and leave the fence's
//! completion to someone else: with [`ServerConfig::delegate_fence`] the
//! last local arrival produces [`ServerEvent::FenceReady`] with the local
//! puts, and the ranks wait until [`PmiServer::complete_fence`] brings the
//! whole job's key-values for that epoch.
//!
//! A spawn request is handed to the launcher as [`ServerEvent::Spawn`]; the
//! requesting rank's thread then waits for [`PmiServer::answer`]. Each rank
//! has its own answer slot, so several ranks may spawn at once.
//!
//! Dropping the [`PmiServer`] stops accepting connections and releases the
//! listening socket; the threads of connections still open end when their
//! peers close them. A launcher that starts a job per spawn request relies
//! on this to keep its threads and descriptors bounded.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use crate::auth::{server_handshake, Secret};
use crate::error::{PmiError, PmiErrorKind};
use crate::wire::{self, KeyValue, Msg, SpawnCmd};

/// A silent or slow peer gets this long to finish authenticating.
const AUTH_TIMEOUT: Duration = Duration::from_secs(5);

/// What the launcher needs to know about the job.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub size: u32,
    pub job_id: u64,
    pub secret: Secret,
    /// The ranks that connect to this server; `None` means all of them.
    pub local_ranks: Option<Vec<u32>>,
    /// The fence completes only through [`PmiServer::complete_fence`].
    pub delegate_fence: bool,
}

impl ServerConfig {
    /// A server for every rank of the job that completes fences itself.
    pub fn whole_job(size: u32, job_id: u64, secret: Secret) -> ServerConfig {
        ServerConfig { size, job_id, secret, local_ranks: None, delegate_fence: false }
    }
}

/// Things that happened on the bootstrap socket. Each is delivered before
/// the rank receives the corresponding acknowledgement, so the launcher sees
/// `Finalized` before it can see that rank's exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// The rank authenticated and introduced itself (it called `MPI_Init`).
    Connected { rank: u32 },
    /// The rank called `finalize`.
    Finalized { rank: u32 },
    /// The rank asked to end the job.
    Abort { rank: u32, code: i32, msg: String },
    /// A connection failed authentication and was closed.
    Rejected { peer: SocketAddr, reason: String },
    /// An authenticated connection broke the protocol and was closed.
    ProtocolError { peer: SocketAddr, reason: String },
    /// Delegated fences only: every local rank entered fence `epoch`; these
    /// are their puts. Answer with [`PmiServer::complete_fence`].
    FenceReady { epoch: u64, kvs: Vec<KeyValue> },
    /// The rank asks for a new job running `cmds` (`MPI_Comm_spawn`). It
    /// waits until [`PmiServer::answer`] is called for it.
    Spawn { rank: u32, cmds: Vec<SpawnCmd>, parent_port: String },
    /// The connection of a rank that had introduced itself is closed, by
    /// the rank or after a protocol error; always the rank's last event.
    /// A launcher that cannot reap a rank (one it did not start) learns
    /// from this that the rank is gone or has let go of the job.
    Disconnected { rank: u32 },
}

/// What [`PmiServer::answer`] gives a spawning rank: the new job's id and
/// size, or why it was refused.
pub type SpawnAnswer = Result<(u64, u32), String>;

/// Where a rank stands with its spawn request.
enum SpawnSlot {
    Idle,
    Waiting,
    Answered(SpawnAnswer),
}

type Callback = dyn Fn(ServerEvent) + Send + Sync;

struct FenceState {
    epoch: u64,
    arrived: u32,
    kvs: Vec<KeyValue>,
    /// Encoded `FenceDone` of the most recently completed epoch.
    answer: Arc<Vec<u8>>,
}

struct Shared {
    cfg: ServerConfig,
    /// `is_local[rank]`: whether that rank connects here.
    is_local: Vec<bool>,
    local_count: u32,
    on_event: Box<Callback>,
    connected: Mutex<Vec<bool>>,
    fence: Mutex<FenceState>,
    fence_done: Condvar,
    /// Indexed by rank.
    spawns: Mutex<Vec<SpawnSlot>>,
    spawn_answered: Condvar,
    /// Set when the server is dropped: the accept loop ends.
    closing: AtomicBool,
}

/// The listening bootstrap server of one job. It runs on background threads
/// until it is dropped.
pub struct PmiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    listener: Arc<TcpListener>,
}

impl PmiServer {
    /// Binds `127.0.0.1:0` and starts accepting connections.
    pub fn start(cfg: ServerConfig, on_event: impl Fn(ServerEvent) + Send + Sync + 'static) -> io::Result<PmiServer> {
        let listener = Arc::new(TcpListener::bind(("127.0.0.1", 0))?);
        let addr = listener.local_addr()?;
        let mut is_local = vec![cfg.local_ranks.is_none(); cfg.size as usize];
        for &r in cfg.local_ranks.iter().flatten() {
            match is_local.get_mut(r as usize) {
                Some(slot) => *slot = true,
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("local rank {r} is outside the job of size {}", cfg.size),
                    ))
                }
            }
        }
        let local_count = is_local.iter().filter(|&&l| l).count() as u32;
        let shared = Arc::new(Shared {
            connected: Mutex::new(vec![false; cfg.size as usize]),
            spawns: Mutex::new((0..cfg.size).map(|_| SpawnSlot::Idle).collect()),
            is_local,
            local_count,
            cfg,
            on_event: Box::new(on_event),
            fence: Mutex::new(FenceState { epoch: 0, arrived: 0, kvs: Vec::new(), answer: Arc::new(Vec::new()) }),
            fence_done: Condvar::new(),
            spawn_answered: Condvar::new(),
            closing: AtomicBool::new(false),
        });
        let (for_accept, accepting) = (Arc::clone(&shared), Arc::clone(&listener));
        thread::Builder::new().name("pmi-accept".into()).spawn(move || accept_loop(&accepting, &for_accept))?;
        Ok(PmiServer { addr, shared, listener })
    }

    /// Answers `rank`'s pending spawn request: `Ok((job_id, size))` becomes
    /// `SpawnDone`, `Err(msg)` an `Error` with `msg`. Returns false (and
    /// does nothing) when that rank is not waiting for an answer.
    pub fn answer(&self, rank: u32, result: SpawnAnswer) -> bool {
        let mut slots = self.shared.spawns.lock().unwrap();
        match slots.get_mut(rank as usize) {
            Some(slot @ SpawnSlot::Waiting) => {
                *slot = SpawnSlot::Answered(result);
                self.shared.spawn_answered.notify_all();
                true
            }
            _ => false,
        }
    }

    /// Ends fence `epoch` (delegated mode) with the job's key-values: every
    /// local rank waiting in it receives them. Ignored for any other epoch.
    pub fn complete_fence(&self, epoch: u64, kvs: Vec<KeyValue>) {
        let answer = Arc::new(Msg::FenceDone { kvs }.encode());
        let mut st = self.shared.fence.lock().unwrap();
        if st.epoch == epoch && st.arrived == self.shared.local_count {
            st.answer = answer;
            st.arrived = 0;
            st.epoch += 1;
            self.shared.fence_done.notify_all();
        }
    }

    /// The address to put in `BATON_PMI_ADDR`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for PmiServer {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        // SAFETY: the descriptor belongs to self.listener, which is alive.
        // On Linux, shutting down a listening socket wakes a blocked
        // accept() with an error; the accept thread then sees `closing`.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RD) };
        // Nobody is left to answer a rank still waiting on a spawn.
        let mut slots = self.shared.spawns.lock().unwrap();
        for slot in slots.iter_mut() {
            if matches!(slot, SpawnSlot::Waiting) {
                *slot = SpawnSlot::Answered(Err("the launcher stopped serving this job".into()));
            }
        }
        self.shared.spawn_answered.notify_all();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let conn = listener.accept();
        if shared.closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok((stream, _)) = conn else { continue };
        let shared = Arc::clone(shared);
        let spawned = thread::Builder::new().name("pmi-conn".into()).spawn(move || serve(stream, &shared));
        if spawned.is_err() {
            // Out of threads: the connection is dropped and the rank's
            // bootstrap fails with a clear I/O error on its side.
            continue;
        }
    }
}

fn serve(mut stream: TcpStream, shared: &Shared) {
    let peer = stream.peer_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(AUTH_TIMEOUT));
    if let Err(e) = server_handshake(&mut stream, &shared.cfg.secret) {
        (shared.on_event)(ServerEvent::Rejected { peer, reason: e.to_string() });
        return;
    }
    let _ = stream.set_read_timeout(None);
    let mut rank = None;
    match session(&mut stream, shared, &mut rank) {
        // A rank that dies mid-conversation shows up as an I/O error; its
        // exit status (or Disconnected) tells the launcher all worth reporting.
        Err(e) if e.kind() != PmiErrorKind::Io => {
            (shared.on_event)(ServerEvent::ProtocolError { peer, reason: e.to_string() });
            let _ = wire::send(&mut stream, &Msg::Error { msg: e.to_string() });
        }
        _ => {}
    }
    if let Some(rank) = rank {
        // Closed first, so that the event is true when it is read.
        drop(stream);
        (shared.on_event)(ServerEvent::Disconnected { rank });
    }
}

/// Serves one authenticated connection until the peer closes it. `who` is
/// set once the peer has been accepted as a rank.
fn session(stream: &mut TcpStream, shared: &Shared, who: &mut Option<u32>) -> Result<(), PmiError> {
    let rank = match wire::read_frame(stream)? {
        None => return Ok(()),
        Some(p) => match Msg::decode(&p)? {
            Msg::Hello { rank, job_id } => {
                if job_id != shared.cfg.job_id {
                    return Err(PmiError::protocol(format!(
                        "hello for job {job_id:#x}, this is job {:#x}",
                        shared.cfg.job_id
                    )));
                }
                if rank >= shared.cfg.size {
                    return Err(PmiError::protocol(format!(
                        "rank {rank} is outside the job of size {}",
                        shared.cfg.size
                    )));
                }
                if !shared.is_local[rank as usize] {
                    return Err(PmiError::protocol(format!("rank {rank} does not run on this host")));
                }
                let mut connected = shared.connected.lock().unwrap();
                if std::mem::replace(&mut connected[rank as usize], true) {
                    return Err(PmiError::protocol(format!("rank {rank} is already connected")));
                }
                rank
            }
            other => return Err(PmiError::protocol(format!("expected hello, got {other:?}"))),
        },
    };
    *who = Some(rank);
    (shared.on_event)(ServerEvent::Connected { rank });
    wire::send(stream, &Msg::Welcome { size: shared.cfg.size })?;
    let mut finalized = false;
    while let Some(payload) = wire::read_frame(stream)? {
        match Msg::decode(&payload)? {
            Msg::Fence { puts } if !finalized => {
                let answer = fence(shared, rank, puts);
                wire::write_frame(stream, &answer)?;
            }
            Msg::Abort { code, msg } => {
                (shared.on_event)(ServerEvent::Abort { rank, code, msg });
                wire::send(stream, &Msg::AbortAck)?;
            }
            Msg::Spawn { cmds, parent_port } if !finalized => {
                let reply = match spawn(shared, rank, cmds, parent_port) {
                    Ok((job_id, size)) => Msg::SpawnDone { job_id, size },
                    Err(msg) => Msg::Error { msg },
                };
                wire::send(stream, &reply)?;
            }
            Msg::Finalize if !finalized => {
                finalized = true;
                (shared.on_event)(ServerEvent::Finalized { rank });
                wire::send(stream, &Msg::FinalizeAck)?;
            }
            other => return Err(PmiError::protocol(format!("unexpected request from rank {rank}: {other:?}"))),
        }
    }
    Ok(())
}

/// Hands the request to the launcher and blocks until it answers.
fn spawn(shared: &Shared, rank: u32, cmds: Vec<SpawnCmd>, parent_port: String) -> SpawnAnswer {
    // Waiting is recorded before the launcher can see the event, so an
    // answer that comes at once is not lost.
    shared.spawns.lock().unwrap()[rank as usize] = SpawnSlot::Waiting;
    if shared.closing.load(Ordering::SeqCst) {
        shared.spawns.lock().unwrap()[rank as usize] = SpawnSlot::Idle;
        return Err("the launcher stopped serving this job".into());
    }
    (shared.on_event)(ServerEvent::Spawn { rank, cmds, parent_port });
    let mut slots = shared.spawns.lock().unwrap();
    loop {
        match std::mem::replace(&mut slots[rank as usize], SpawnSlot::Idle) {
            SpawnSlot::Answered(result) => return result,
            pending => {
                slots[rank as usize] = pending;
                slots = shared.spawn_answered.wait(slots).unwrap();
            }
        }
    }
}

/// Joins the fence and blocks until every rank has; returns the encoded
/// `FenceDone` shared by all ranks of this epoch.
fn fence(shared: &Shared, rank: u32, puts: Vec<(String, Vec<u8>)>) -> Arc<Vec<u8>> {
    let mut st = shared.fence.lock().unwrap();
    st.kvs.extend(puts.into_iter().map(|(key, value)| KeyValue { rank, key, value }));
    st.arrived += 1;
    let my_epoch = st.epoch;
    if st.arrived == shared.local_count {
        let kvs = std::mem::take(&mut st.kvs);
        if shared.cfg.delegate_fence {
            // The callback only queues an event; holding the lock keeps
            // complete_fence from overtaking it.
            (shared.on_event)(ServerEvent::FenceReady { epoch: my_epoch, kvs });
        } else {
            st.answer = Arc::new(Msg::FenceDone { kvs }.encode());
            st.arrived = 0;
            st.epoch += 1;
            shared.fence_done.notify_all();
        }
    }
    while st.epoch == my_epoch {
        st = shared.fence_done.wait(st).unwrap();
    }
    Arc::clone(&st.answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PmiClient;
    use std::io::Write;
    use std::sync::mpsc;

    fn start(size: u32) -> (PmiServer, Secret, mpsc::Receiver<ServerEvent>) {
        let secret = Secret::generate().unwrap();
        let (server, rx) = start_with(ServerConfig::whole_job(size, 42, secret.clone()));
        (server, secret, rx)
    }

    /// A server of `cfg` whose events arrive on the receiver.
    fn start_with(cfg: ServerConfig) -> (PmiServer, mpsc::Receiver<ServerEvent>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let server = PmiServer::start(cfg, move |ev| {
            let _ = tx.lock().unwrap().send(ev);
        })
        .unwrap();
        (server, rx)
    }

    /// A thread in which rank `rank` of job `job_id` connects to `addr` and runs `f`.
    fn client<T: Send + 'static>(
        addr: &str,
        secret: &Secret,
        rank: u32,
        job_id: u64,
        f: impl FnOnce(&mut PmiClient) -> T + Send + 'static,
    ) -> thread::JoinHandle<T> {
        let (addr, secret) = (addr.to_string(), secret.clone());
        thread::spawn(move || f(&mut PmiClient::connect(&addr, &secret, rank, job_id).unwrap()))
    }

    /// A server for `n` ranks of job 42, and a [`client`] thread per rank running `f(rank, client)`.
    fn every_rank<T: Send + 'static>(
        n: u32,
        f: impl Fn(u32, &mut PmiClient) -> T + Clone + Send + 'static,
    ) -> (PmiServer, mpsc::Receiver<ServerEvent>, Vec<thread::JoinHandle<T>>) {
        let (server, secret, rx) = start(n);
        let addr = server.addr().to_string();
        let threads = (0..n)
            .map(|rank| {
                let f = f.clone();
                client(&addr, &secret, rank, 42, move |c| f(rank, c))
            })
            .collect();
        (server, rx, threads)
    }

    #[test]
    fn fence_exchanges_all_puts_over_several_epochs() {
        let n = 4;
        let (_server, rx, threads) = every_rank(n, move |rank, c| {
            assert_eq!(c.size(), n);
            c.put("k", format!("v{rank}").as_bytes()).unwrap();
            assert_eq!(c.get(rank, "k").unwrap().unwrap(), format!("v{rank}").as_bytes());
            c.fence().unwrap();
            for r in 0..n {
                assert_eq!(c.get(r, "k").unwrap().unwrap(), format!("v{r}").as_bytes());
            }
            c.put("k2", &[rank as u8]).unwrap();
            c.fence().unwrap();
            for r in 0..n {
                assert_eq!(c.get(r, "k2").unwrap().unwrap(), vec![r as u8]);
                assert_eq!(c.get(r, "k").unwrap().unwrap(), format!("v{r}").as_bytes());
            }
            assert!(c.get(0, "missing").unwrap().is_none());
            assert_eq!(c.get(n, "k").unwrap_err().kind(), PmiErrorKind::Usage);
            c.finalize().unwrap();
            assert!(c.fence().is_err());
        });
        for t in threads {
            t.join().unwrap();
        }
        let events: Vec<_> = rx.try_iter().collect();
        for rank in 0..n {
            assert!(events.contains(&ServerEvent::Connected { rank }));
            assert!(events.contains(&ServerEvent::Finalized { rank }));
        }
    }

    #[test]
    fn a_closed_connection_is_the_ranks_last_event() {
        let (server, secret, rx) = start(3);
        let addr = server.addr().to_string();
        let next = || rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let mut c = PmiClient::connect(&addr, &secret, 0, 42).unwrap();
        c.finalize().unwrap();
        drop(c);
        assert_eq!(next(), ServerEvent::Connected { rank: 0 });
        assert_eq!(next(), ServerEvent::Finalized { rank: 0 });
        assert_eq!(next(), ServerEvent::Disconnected { rank: 0 });
        drop(PmiClient::connect(&addr, &secret, 1, 42).unwrap());
        assert_eq!(next(), ServerEvent::Connected { rank: 1 });
        assert_eq!(next(), ServerEvent::Disconnected { rank: 1 });
        // A protocol error after the hello closes the connection too.
        let mut raw = TcpStream::connect(&addr).unwrap();
        crate::auth::client_handshake(&mut raw, &secret).unwrap();
        wire::send(&mut raw, &Msg::Hello { rank: 2, job_id: 42 }).unwrap();
        wire::send(&mut raw, &Msg::FinalizeAck).unwrap();
        assert_eq!(next(), ServerEvent::Connected { rank: 2 });
        assert!(matches!(next(), ServerEvent::ProtocolError { .. }));
        assert_eq!(next(), ServerEvent::Disconnected { rank: 2 });
        // Nothing for a connection that never became a rank.
        drop(TcpStream::connect(&addr).unwrap());
        assert!(matches!(next(), ServerEvent::Rejected { .. }));
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn wrong_secret_and_garbage_are_rejected_and_reported() {
        let (server, _secret, rx) = start(1);
        let addr = server.addr().to_string();
        let wrong = Secret::generate().unwrap();
        let err = PmiClient::connect(&addr, &wrong, 0, 42).unwrap_err();
        assert_eq!(err.kind(), PmiErrorKind::Auth);
        assert!(matches!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), ServerEvent::Rejected { .. }));
        let mut raw = TcpStream::connect(&addr).unwrap();
        raw.write_all(&[0xff; 4096]).unwrap();
        assert!(matches!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), ServerEvent::Rejected { .. }));
    }

    #[test]
    fn bad_hello_is_refused() {
        let (server, secret, _rx) = start(2);
        let addr = server.addr().to_string();
        let e = PmiClient::connect(&addr, &secret, 5, 42).unwrap_err();
        assert_eq!(e.kind(), PmiErrorKind::Launcher);
        let e = PmiClient::connect(&addr, &secret, 0, 43).unwrap_err();
        assert_eq!(e.kind(), PmiErrorKind::Launcher);
        let _ok = PmiClient::connect(&addr, &secret, 1, 42).unwrap();
        let e = PmiClient::connect(&addr, &secret, 1, 42).unwrap_err();
        assert!(e.to_string().contains("already connected"), "{e}");
    }

    #[test]
    fn malformed_frame_closes_only_that_connection() {
        let (server, secret, rx) = start(2);
        let addr = server.addr().to_string();
        let good = client(&addr, &secret, 0, 42, |c| {
            c.put("k", b"v").unwrap();
            c.fence().unwrap();
            c.get(1, "k").unwrap()
        });
        // Authenticated, then a frame header claiming 4 GiB.
        let mut raw = TcpStream::connect(&addr).unwrap();
        crate::auth::client_handshake(&mut raw, &secret).unwrap();
        raw.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let ev = rx.iter().find(|e| !matches!(e, ServerEvent::Connected { .. })).unwrap();
        assert!(matches!(ev, ServerEvent::ProtocolError { .. }), "{ev:?}");
        // The job goes on: rank 1 connects normally and the fence completes.
        let mut c = PmiClient::connect(&addr, &secret, 1, 42).unwrap();
        c.put("k", b"w").unwrap();
        c.fence().unwrap();
        assert_eq!(c.get(0, "k").unwrap().unwrap(), b"v");
        assert_eq!(good.join().unwrap().unwrap(), b"w");
    }

    #[test]
    fn delegated_fence_waits_for_completion_and_only_local_ranks_connect() {
        let secret = Secret::generate().unwrap();
        let cfg = ServerConfig {
            local_ranks: Some(vec![1, 3]),
            delegate_fence: true,
            ..ServerConfig::whole_job(4, 9, secret.clone())
        };
        let (server, rx) = start_with(cfg);
        let addr = server.addr().to_string();
        let e = PmiClient::connect(&addr, &secret, 0, 9).unwrap_err();
        assert!(e.to_string().contains("does not run on this host"), "{e}");
        let threads: Vec<_> = [1u32, 3]
            .into_iter()
            .map(|rank| {
                client(&addr, &secret, rank, 9, move |c| {
                    c.put("k", &[rank as u8]).unwrap();
                    c.fence().unwrap();
                    (c.get(0, "k").unwrap(), c.get(2, "k").unwrap())
                })
            })
            .collect();
        let (epoch, mut kvs) = loop {
            match rx.recv_timeout(Duration::from_secs(5)).unwrap() {
                ServerEvent::FenceReady { epoch, kvs } => break (epoch, kvs),
                _ => continue,
            }
        };
        assert_eq!(epoch, 0);
        kvs.sort_by_key(|kv| kv.rank);
        assert_eq!(kvs.iter().map(|kv| kv.rank).collect::<Vec<_>>(), [1, 3]);
        // The other host's ranks' puts, as the tree would deliver them.
        kvs.push(KeyValue { rank: 0, key: "k".into(), value: vec![0] });
        kvs.push(KeyValue { rank: 2, key: "k".into(), value: vec![2] });
        server.complete_fence(7, vec![]); // wrong epoch: ignored
        server.complete_fence(0, kvs);
        for t in threads {
            assert_eq!(t.join().unwrap(), (Some(vec![0]), Some(vec![2])));
        }
    }

    fn cmd(program: &str, maxprocs: u32) -> SpawnCmd {
        SpawnCmd { program: program.into(), args: vec!["a".into()], maxprocs, info: vec![("wdir".into(), "/".into())] }
    }

    #[test]
    fn concurrent_spawns_each_get_their_own_answer() {
        let n = 3;
        let (server, rx, threads) = every_rank(n, |rank, c| {
            let r = c.spawn(&[cmd(&format!("prog{rank}"), rank + 1)], &format!("port{rank}"));
            // The connection stays usable after either answer.
            c.fence().unwrap();
            c.finalize().unwrap();
            r
        });
        let mut asked = Vec::new();
        while asked.len() < n as usize {
            if let ServerEvent::Spawn { rank, cmds, parent_port } = rx.recv_timeout(Duration::from_secs(5)).unwrap() {
                assert_eq!(cmds, vec![cmd(&format!("prog{rank}"), rank + 1)]);
                assert_eq!(parent_port, format!("port{rank}"));
                asked.push(rank);
            }
        }
        // Nobody is answered before the launcher decides, and answers in
        // any order reach the right rank.
        assert!(!server.answer(n, Ok((1, 1))), "rank outside the job");
        for &rank in asked.iter().rev() {
            let result =
                if rank == 1 { Err(format!("no room for rank {rank}")) } else { Ok((100 + u64::from(rank), rank)) };
            assert!(server.answer(rank, result));
            assert!(!server.answer(rank, Ok((0, 0))), "answered twice");
        }
        for (rank, t) in threads.into_iter().enumerate() {
            let got = t.join().unwrap();
            if rank == 1 {
                let e = got.unwrap_err();
                assert_eq!(e.kind(), PmiErrorKind::Launcher);
                assert_eq!(e.message(), "no room for rank 1");
            } else {
                assert_eq!(got.unwrap(), (100 + rank as u64, rank as u32));
            }
        }
    }

    #[test]
    fn dropping_the_server_answers_waiting_spawns_and_stops_accepting() {
        let (server, secret, rx) = start(2);
        let addr = server.addr().to_string();
        let waiter = client(&addr, &secret, 0, 42, |c| c.spawn(&[cmd("x", 1)], "p"));
        loop {
            if let ServerEvent::Spawn { .. } = rx.recv_timeout(Duration::from_secs(5)).unwrap() {
                break;
            }
        }
        drop(server);
        let e = waiter.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), PmiErrorKind::Launcher);
        assert!(e.message().contains("stopped serving"), "{e}");
        assert!(PmiClient::connect(&addr, &secret, 1, 42).is_err(), "still accepting after drop");
    }

    #[test]
    fn spawn_after_finalize_is_refused_locally() {
        let (server, secret, _rx) = start(1);
        let mut c = PmiClient::connect(&server.addr().to_string(), &secret, 0, 42).unwrap();
        c.finalize().unwrap();
        assert_eq!(c.spawn(&[cmd("x", 1)], "p").unwrap_err().kind(), PmiErrorKind::Usage);
    }
}
