//! The I/O half of connection set-up: [`dial`] and [`answer`] carry out, on a blocking socket,
//! the steps of the machines in `connect.rs`, and decide nothing themselves. `answer` runs on
//! a thread of its own per connection (the service thread starts it), so that a silent or
//! hostile client stalls nobody; `dial` runs in the process's thread that first sends to the
//! peer.

use super::connect::{Answer, AnswerStep, Dial, DialStep, Done, Io, Link, MAX_MESSAGE};
use super::service::Shared;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use baton_pmi::reject::RejectLog;

/// Connections this process refused, counted per source address so that a stranger knocking
/// again and again adds a line only at 10, 100, 1000... knocks.
static REJECTED: Mutex<RejectLog> = Mutex::new(RejectLog::new());

/// Opens one authenticated connection to `addr` as `m` says: `Ok(None)` when the peer's own
/// connection wins instead (it is on its way to this process's service thread).
pub(super) fn dial(addr: SocketAddr, mut m: Dial) -> Result<Option<TcpStream>, String> {
    let mut sock: Option<TcpStream> = None;
    let mut buf = [0u8; MAX_MESSAGE];
    let mut step = m.start(Instant::now());
    loop {
        step = match step {
            DialStep::Connect { within } => {
                let r = TcpStream::connect_timeout(&addr, within).and_then(|s| {
                    s.set_nodelay(true)?;
                    sock = Some(s);
                    Ok(())
                });
                m.connected(r, Instant::now())
            }
            DialStep::Wait(d) => {
                std::thread::sleep(d);
                m.waited(Instant::now())
            }
            DialStep::Io(io) => {
                let Some(s) = sock.as_mut() else { return Err("the connection set-up went out of order".into()) };
                let done = carry(s, &io, &mut buf);
                m.io_done(done, Instant::now())
            }
            DialStep::Adopt => {
                let s = sock.take().ok_or("the connection set-up went out of order")?;
                s.set_read_timeout(None).and_then(|()| s.set_write_timeout(None)).map_err(|e| e.to_string())?;
                return Ok(Some(s));
            }
            DialStep::Yield => return Ok(None),
            DialStep::Fail(why) => return Err(why),
        };
    }
}

/// The server side of one connection from `peer`: carries out what an [`Answer`] says, looking
/// up what it asks in the tables `sh` shares with the process, and hands an accepted
/// connection to the process. A refusal is logged.
pub(super) fn answer(sh: &Shared, mut s: TcpStream, peer: SocketAddr) {
    if s.set_nonblocking(false).is_err() {
        return;
    }
    let mut m = Answer::new((sh.job, sh.rank), sh.lanes);
    let mut buf = [0u8; MAX_MESSAGE];
    let mut step = m.start();
    loop {
        step = match step {
            AnswerStep::Io(io) => {
                let done = carry(&mut s, &io, &mut buf);
                m.io_done(done, Instant::now())
            }
            AnswerStep::Wait(d) => {
                std::thread::sleep(d);
                m.waited()
            }
            AnswerStep::FindKey(id) => {
                let keys = sh.keys.lock().unwrap_or_else(|e| e.into_inner());
                let found = keys.iter().find(|k| k.id == id).map(|k| k.secret.clone());
                drop(keys);
                m.key(found, Instant::now())
            }
            AnswerStep::FindProc { who, secret } => {
                let admitted = {
                    let keys = sh.keys.lock().unwrap_or_else(|e| e.into_inner());
                    keys.iter().any(|k| k.secret == secret && k.jobs.contains(&who.0))
                };
                let found = admitted.then(|| sh.index.lock().unwrap_or_else(|e| e.into_inner()).get(&who).copied());
                m.process(found.flatten(), Instant::now())
            }
            AnswerStep::Claim { from, lane } => {
                let mut links = sh.links.lock().unwrap_or_else(|e| e.into_inner());
                let slot = from as usize * sh.lanes + lane;
                if links.len() <= slot {
                    links.resize(slot + 1, Link::Down);
                }
                m.claim(&mut links[slot])
            }
            AnswerStep::Adopt { from, lane } => {
                let _ = s.set_read_timeout(None);
                let _ = s.set_write_timeout(None);
                sh.incoming.lock().unwrap_or_else(|e| e.into_inner()).push((from, lane, s));
                sh.has_incoming.store(true, Ordering::Release);
                (sh.wake)();
                return;
            }
            AnswerStep::Close { why } => {
                if let Some(why) = why {
                    let first = || format!("rejected a connection from {peer}: {why}");
                    let line = REJECTED.lock().unwrap_or_else(|e| e.into_inner()).note(peer, "connections", first);
                    if let Some(line) = line {
                        eprintln!("baton: {} {line}", sh.whoami);
                    }
                }
                return;
            }
        };
    }
}

/// Carries out one I/O step on a blocking socket. A read takes at most what the step asks for.
fn carry<'b>(s: &mut TcpStream, io: &Io, buf: &'b mut [u8; MAX_MESSAGE]) -> Done<'b> {
    let failed = |e: io::Error| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Done::TimedOut,
        _ => Done::Failed(e),
    };
    match io {
        Io::Send { bytes, within } => match s.set_write_timeout(Some(*within)).and_then(|()| s.write_all(bytes)) {
            Ok(()) => Done::Sent,
            Err(e) => failed(e),
        },
        Io::Recv { want, within } => {
            if let Err(e) = s.set_read_timeout(Some(*within)) {
                return failed(e);
            }
            let want = (*want).clamp(1, MAX_MESSAGE);
            loop {
                match s.read(&mut buf[..want]) {
                    Ok(0) => return Done::Closed,
                    Ok(n) => return Done::Received(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return failed(e),
                }
            }
        }
    }
}
