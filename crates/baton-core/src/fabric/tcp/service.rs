//! The service thread, one per process: it accepts connections, starts an answering thread
//! for each (`handshake::answer`), and rings the process's doorbell when the process sleeps and
//! one of its receiving sockets becomes readable ([`super::TcpNet::arm`]).
//!
//! [`Shared`] is what the service thread and the answering threads share with the process: the
//! secrets it trusts ([`Key`]), the processes that may connect, each lane's state, and the
//! connections accepted but not yet taken by the process. Each table has a lock of its own,
//! held only for a lookup or an update, never across I/O.

use super::connect::Link;
use super::handshake;
use crate::engine::ProcIdx;
use baton_pmi::auth::Secret;
use baton_transport::stream::{EventFd, Poller};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Handshakes running at once; further connections are closed unanswered.
const MAX_HANDSHAKES: usize = 64;

const TOK_LISTEN: u64 = 1;
const TOK_CTL: u64 = 2;
const TOK_DATA: u64 = 3;

/// A secret this process accepts, and the jobs whose processes may prove it.
pub(super) struct Key {
    pub(super) id: [u8; 8],
    pub(super) secret: Secret,
    pub(super) jobs: Vec<u64>,
}

impl Key {
    pub(super) fn new(secret: &Secret, job: u64) -> Key {
        Key { id: secret.key_id(), secret: secret.clone(), jobs: vec![job] }
    }
}

/// What the service thread and the answering threads share with the process.
pub(super) struct Shared {
    pub(super) job: u64,
    /// Rank of this process in its job (what it names itself as).
    pub(super) rank: u32,
    /// Connections per peer (`TcpConfig::lanes`).
    pub(super) lanes: usize,
    pub(super) keys: Mutex<Vec<Key>>,
    /// Process table index of every process that may connect, by (job, rank).
    pub(super) index: Mutex<HashMap<(u64, u32), ProcIdx>>,
    /// "rank R on host H", for messages.
    pub(super) whoami: String,
    /// Per process, per lane (`p * lanes + lane`).
    pub(super) links: Mutex<Vec<Link>>,
    /// Accepted connections: (process, lane, socket).
    pub(super) incoming: Mutex<Vec<(ProcIdx, usize, TcpStream)>>,
    pub(super) has_incoming: AtomicBool,
    handshakes: AtomicUsize,
    /// Rings this process's doorbell if one of its threads sleeps.
    pub(super) wake: Box<dyn Fn() + Send + Sync>,
    /// The service thread's epoll set: listener, control eventfd and `data` (one-shot).
    watch: Poller,
    /// Every receiving socket; readable when any of them is.
    pub(super) data: Poller,
    ctl: EventFd,
    stop: AtomicBool,
}

/// Who the process is, as the service needs to know.
pub(super) struct Me {
    pub(super) job: u64,
    pub(super) rank: u32,
    pub(super) lanes: usize,
    /// Processes in the job (the lanes' table starts with them).
    pub(super) nprocs: usize,
    pub(super) secret: Secret,
    pub(super) whoami: String,
}

/// Listens on `ip` and starts the service thread; returns what it shares and the address.
pub(super) fn start(me: Me, ip: IpAddr, wake: Box<dyn Fn() + Send + Sync>) -> io::Result<(Arc<Shared>, SocketAddr)> {
    let listener = TcpListener::bind((ip, 0))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let watch = Poller::new()?;
    let data = Poller::new()?;
    let ctl = EventFd::new()?;
    watch.add(listener.as_raw_fd(), TOK_LISTEN)?;
    watch.add(ctl.raw_fd(), TOK_CTL)?;
    watch.add_oneshot(data.as_fd().as_raw_fd(), TOK_DATA)?;
    let sh = Arc::new(Shared {
        job: me.job,
        rank: me.rank,
        lanes: me.lanes,
        keys: Mutex::new(vec![Key::new(&me.secret, me.job)]),
        index: Mutex::new(HashMap::new()),
        whoami: me.whoami,
        links: Mutex::new(vec![Link::Down; me.nprocs * me.lanes]),
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
    Ok((sh, addr))
}

impl Shared {
    /// Arms the watch on the receiving sockets: the next readable one rings the doorbell.
    pub(super) fn arm(&self) {
        let _ = self.watch.rearm(self.data.as_fd().as_raw_fd(), TOK_DATA);
    }

    /// Ends the service thread.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.ctl.signal();
    }
}

/// Accepts connections and wakes the process.
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
                                handshake::answer(&sh2, s, peer);
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
