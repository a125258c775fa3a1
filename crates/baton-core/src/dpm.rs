//! Dynamic processes: ports, `MPI_Comm_accept`/`connect`, spawn, join, disconnect.
//!
//! Important types:
//! - [`DpmState`] (kept by the runtime, [`crate::runtime::DpmState`]): what one process holds:
//!   its open ports and how many intercommunicators use each process of another job.
//! - [`PortName`]: a port as text, `baton-port:ADDR:SECRET`. The address is a TCP listener of the
//!   process that opened the port; the secret (32 random bytes, hex) is what a connecting root
//!   must prove, so knowing the address alone gets a stranger nothing.
//!
//! Accept and connect are collective over each side's communicator and driven by its root.
//! Every member first makes sure it listens for TCP connections of other jobs
//! ([`Mpi::ensure_tcp`]) and the root gathers the members' descriptions (job, rank, pid, host,
//! address). The connecting root dials the port, both roots prove the port secret
//! (`baton_pmi::auth::PORT`), the connecting root sends its group and the accepting root answers
//! with its own group, a fresh context id and a fresh secret for the two jobs' connections.
//! Each root broadcasts the outcome; every member enters the remote processes into its
//! process table ([`Mpi::add_remote`]) and builds the intercommunicator. Connections between
//! members open on first use like any TCP connection, proving the two jobs' secret; a member
//! dialled before it has learnt of the caller waits briefly for that (see `fabric::tcp`).
//!
//! Spawn is accept on a private port: the root opens one, asks the launcher to start the
//! children with the port in `BATON_PARENT_PORT`, and the children's `MPI_Init` connects to it.

use crate::comm::Comm;
use crate::engine::ProcIdx;
use crate::error::{MpiError, Result};
use crate::group::Group;
use crate::runtime::{port_err, Mpi, OpenPort};
pub use crate::runtime::{DpmState, PortName, LAUNCHER};
use baton_abi::consts as c;
use baton_pmi::auth::{client_handshake_for, server_handshake_for, Secret, PORT};
use baton_pmi::wire::{read_frame, write_frame};
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// First bytes of the connecting root's request, after authentication.
const HELLO: &[u8; 8] = b"BTCONN01";
/// How long one step of a root-to-root exchange may take once both sides are in it.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

// ----- a small codec for the roots' messages and the broadcasts -----

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

pub(crate) struct Reader<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub(crate) fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
    /// A list of strings; the count is bounded by the bytes present.
    pub(crate) fn strings(&mut self) -> Option<Vec<String>> {
        let n = self.u32()? as usize;
        if n > self.b.len() / 4 + 1 {
            return None;
        }
        (0..n).map(|_| self.string()).collect()
    }
}

pub(crate) fn put_strings(out: &mut Vec<u8>, v: &[String]) {
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for s in v {
        put_bytes(out, s.as_bytes());
    }
}

/// What a root broadcasts to its members: the new intercommunicator's context, the two jobs'
/// secret and the remote processes, or the error it met.
type Outcome = Result<(u64, Secret, Vec<String>)>;

fn encode_outcome(o: &Outcome) -> Vec<u8> {
    let mut out = Vec::new();
    match o {
        Ok((ctx, secret, descs)) => {
            out.push(0);
            out.extend_from_slice(&ctx.to_le_bytes());
            out.extend_from_slice(&secret.0);
            put_strings(&mut out, descs);
        }
        Err(e) => {
            out.push(1);
            out.extend_from_slice(&(e.class as u32).to_le_bytes());
            put_bytes(&mut out, e.msg.as_bytes());
        }
    }
    out
}

/// Reads [`encode_outcome`]'s bytes, which came from `who`.
fn decode_outcome(call: &str, who: &str, b: &[u8]) -> Outcome {
    let bad = || MpiError::new(c::MPI_ERR_INTERN, format!("{call}: malformed message from {who}"));
    let mut r = Reader { b, at: 1 };
    match b.first() {
        Some(0) => {
            let ctx = r.u64().ok_or_else(bad)?;
            let secret = Secret(r.take(32).ok_or_else(bad)?.try_into().map_err(|_| bad())?);
            Ok((ctx, secret, r.strings().ok_or_else(bad)?))
        }
        Some(1) => {
            let class = r.u32().ok_or_else(bad)? as i32;
            let msg = r.string().ok_or_else(bad)?;
            Err(MpiError::new(class, msg))
        }
        _ => Err(bad()),
    }
}

/// Every member's description (or the error it met), gathered at every member; `Err` if any
/// member failed, so that all give up together.
fn gather_descs(mpi: &Mpi, call: &str, comm: &Comm) -> Result<Vec<String>> {
    let mine = match mpi.describe_self() {
        Ok(d) => format!("+{d}"),
        Err(e) => format!("!{}", e.msg),
    };
    let all = mpi.allgather(comm, mine.into_bytes());
    let mut out = Vec::with_capacity(all.len());
    for (r, b) in all.into_iter().enumerate() {
        let s = String::from_utf8_lossy(&b).into_owned();
        match s.strip_prefix('+') {
            Some(d) => out.push(d.to_string()),
            None => {
                return Err(MpiError::new(
                    c::MPI_ERR_OTHER,
                    format!("{call}: rank {r} cannot take part: {}", s.trim_start_matches('!')),
                ))
            }
        }
    }
    Ok(out)
}

/// The members' part after the root's exchange: learn the outcome, enter the remote processes
/// and build the intercommunicator.
fn finish(mpi: &Mpi, call: &str, comm: &Comm, root: i32, outcome: Option<Outcome>) -> Result<Comm> {
    let outcome = match outcome {
        Some(o) => {
            mpi.bcast_internal(comm, root, encode_outcome(&o));
            o
        }
        None => decode_outcome(call, "the root", &mpi.bcast_internal(comm, root, Vec::new())),
    };
    let (ctx, secret, descs) = outcome?;
    let remote = mpi.add_remote(&descs, &secret).map_err(|e| MpiError::new(e.class, format!("{call}: {}", e.msg)))?;
    mpi.dpm.use_procs(&remote);
    let remote = Arc::new(Group::new(remote));
    mpi.dpm.comms.lock().unwrap_or_else(|e| e.into_inner()).push((ctx & !1, remote.clone()));
    Ok(Comm::new_inter(ctx, comm.group.clone(), comm.rank, remote))
}

/// The communicator of spawn, accept and connect must be an intracommunicator holding `root`.
pub fn check_root(call: &str, root: i32, comm: &Comm) -> Result<()> {
    if comm.is_inter() {
        return Err(MpiError::not_intracomm(call, "comm"));
    }
    if !(0..comm.size()).contains(&root) {
        return Err(MpiError::root_out_of_range(call, root, comm.size(), "a communicator"));
    }
    Ok(())
}

/// `MPI_Comm_accept`; `port` matters at the root only. `deadline` bounds the wait for a
/// connecting root (spawn uses it; the standard call waits for ever).
pub fn accept(mpi: &Mpi, port: Option<&str>, root: i32, comm: &Comm, deadline: Option<Instant>) -> Result<Comm> {
    let call = "MPI_Comm_accept";
    check_root(call, root, comm)?;
    let descs = gather_descs(mpi, call, comm);
    let outcome = (comm.rank == root).then(|| {
        let descs = descs?;
        let port = mpi.dpm.port(call, port.unwrap_or(""))?;
        accept_root(mpi, call, &port, &descs, deadline)
    });
    finish(mpi, call, comm, root, outcome)
}

fn accept_root(mpi: &Mpi, call: &str, port: &OpenPort, descs: &[String], deadline: Option<Instant>) -> Outcome {
    loop {
        match port.listener.accept() {
            Ok((s, peer)) => match serve_connect(s, port, descs) {
                Ok(o) => return Ok(o),
                // A stranger or a client that gave up must not end the accept.
                Err(e) => eprintln!("baton: {call} on rank {} refused a connection from {peer}: {e}", mpi.world_rank()),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {
                if deadline.is_some_and(|d| Instant::now() > d) {
                    return Err(MpiError::new(c::MPI_ERR_SPAWN, format!("{call}: nobody connected in time")));
                }
                // Keep this process's communication moving while waiting, then wait on the
                // listener briefly, so a connection is taken at once.
                mpi.poll();
                baton_transport::sys::wait_readable(port.listener.as_raw_fd(), 1);
            }
            Err(e) => return Err(port_err(call, format!("accepting on the port failed: {e}"))),
        }
    }
}

/// The accepting root's half of the exchange on one connection.
fn serve_connect(mut s: TcpStream, port: &OpenPort, descs: &[String]) -> io::Result<(u64, Secret, Vec<String>)> {
    s.set_nonblocking(false)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(STEP_TIMEOUT))?;
    s.set_write_timeout(Some(STEP_TIMEOUT))?;
    let other = |e: baton_pmi::PmiError| io::Error::other(e.to_string());
    server_handshake_for(&mut s, &port.secret, &PORT).map_err(other)?;
    let hello = read_frame(&mut s).map_err(other)?.ok_or_else(|| io::Error::other("closed before its request"))?;
    let mut r = Reader { b: &hello, at: 0 };
    if r.take(8) != Some(&HELLO[..]) {
        return Err(io::Error::other("not a connect request"));
    }
    let remote = r.strings().filter(|v| !v.is_empty()).ok_or_else(|| io::Error::other("malformed connect request"))?;
    let secret = Secret::generate().map_err(other)?;
    // The context id comes from the same fresh randomness: two jobs that never shared a
    // communicator cannot derive one from a common parent.
    let ctx = u64::from_le_bytes(secret.derive("context id").0[..8].try_into().expect("8 bytes")) & !1;
    write_frame(&mut s, &encode_outcome(&Ok((ctx, secret.clone(), descs.to_vec())))).map_err(other)?;
    Ok((ctx, secret, remote))
}

/// `MPI_Comm_connect`; `port` matters at the root only.
pub fn connect(mpi: &Mpi, port: Option<&str>, root: i32, comm: &Comm) -> Result<Comm> {
    let call = "MPI_Comm_connect";
    check_root(call, root, comm)?;
    let descs = gather_descs(mpi, call, comm);
    let outcome = (comm.rank == root).then(|| {
        let descs = descs?;
        let name = port.unwrap_or("");
        let p = PortName::parse(name).ok_or_else(|| port_err(call, format!("'{name}' is not a port name")))?;
        connect_root(&p, &descs).map_err(|e| port_err(call, format!("cannot connect to port at {}: {e}", p.addr)))
    });
    finish(mpi, call, comm, root, outcome)
}

fn connect_root(p: &PortName, descs: &[String]) -> io::Result<(u64, Secret, Vec<String>)> {
    let mut s = TcpStream::connect_timeout(&p.addr, STEP_TIMEOUT)?;
    s.set_nodelay(true)?;
    let other = |e: baton_pmi::PmiError| io::Error::other(e.to_string());
    // The accepting side answers only once its root calls MPI_Comm_accept: wait for that.
    client_handshake_for(&mut s, &p.secret, &PORT).map_err(other)?;
    s.set_read_timeout(Some(STEP_TIMEOUT))?;
    s.set_write_timeout(Some(STEP_TIMEOUT))?;
    let mut hello = HELLO.to_vec();
    put_strings(&mut hello, descs);
    write_frame(&mut s, &hello).map_err(other)?;
    let answer =
        read_frame(&mut s).map_err(other)?.ok_or_else(|| io::Error::other("the port closed the connection"))?;
    match decode_outcome("MPI_Comm_connect", "the port", &answer) {
        Ok((_, _, remote)) if remote.is_empty() => Err(io::Error::other("the port answered with no processes")),
        Ok(o) => Ok(o),
        Err(e) => Err(io::Error::other(e.msg)),
    }
}

/// `MPI_Comm_disconnect`: waits until both groups reach it (so nothing is in flight), then
/// ends the connections to processes of other jobs that nothing connects this process to any
/// more: no other intercommunicator from accept/connect/spawn/join, and none of `kept` (the
/// processes of the application's other communicators, e.g. one merged from this one).
pub fn disconnect(mpi: &Mpi, comm: &Comm, kept: &[ProcIdx]) {
    let free = |ps: Vec<ProcIdx>| -> Vec<ProcIdx> {
        let uses = mpi.dpm.uses.lock().unwrap_or_else(|e| e.into_inner());
        ps.into_iter().filter(|p| !kept.contains(p) && !uses.contains_key(p)).collect()
    };
    match &comm.local {
        Some(local) => {
            // Both groups must arrive: unless the other side is gone.
            let gone = {
                let lost = mpi.dpm.lost.lock().unwrap_or_else(|e| e.into_inner());
                comm.peers().procs.iter().any(|p| lost.contains(p))
            };
            // No longer in use from here on: the other side may finish first and close.
            mpi.dpm.comms.lock().unwrap_or_else(|e| e.into_inner()).retain(|(c, _)| *c != comm.ctx);
            let idle = free(mpi.dpm.unuse_procs(&comm.peers().procs));
            mpi.expect_close(&idle);
            mpi.barrier(local);
            if !gone {
                mpi.leader_swap(comm, Vec::new());
            }
            mpi.release_remote(&idle);
        }
        None => {
            // An intracommunicator spanning jobs (merged from an intercommunicator): its
            // processes of other jobs that nothing else holds go with it.
            let me = mpi.proc_id(mpi.me).0;
            let others: Vec<ProcIdx> = comm.group.procs.iter().copied().filter(|&p| mpi.proc_id(p).0 != me).collect();
            let idle = free(others);
            mpi.expect_close(&idle);
            mpi.barrier(comm);
            mpi.release_remote(&idle);
        }
    }
}

/// `MPI_Comm_join`: the two processes swap port names over `fd`; the lower name accepts.
pub fn join(mpi: &Mpi, fd: i32) -> Result<Comm> {
    let call = "MPI_Comm_join";
    let mine = mpi.dpm.open_port()?;
    let r = (|| {
        let io_err = |e: String| MpiError::new(c::MPI_ERR_OTHER, format!("{call}: on fd {fd}: {e}"));
        // The port names cross the application's socket; everything else goes through the port.
        let swapped = baton_transport::sys::with_borrowed_socket(fd, |sock| {
            write_frame(sock, mine.as_bytes())?;
            read_frame(sock)
        });
        let theirs =
            swapped.map_err(|e| io_err(e.to_string()))?.map_err(|e| io_err(e.to_string()))?.ok_or_else(|| {
                MpiError::new(c::MPI_ERR_OTHER, format!("{call}: the other process closed fd {fd} before answering"))
            })?;
        let theirs = String::from_utf8(theirs)
            .map_err(|_| MpiError::new(c::MPI_ERR_OTHER, format!("{call}: garbage on fd {fd}")))?;
        let me = &mpi.self_comm;
        match mine.as_str().cmp(theirs.as_str()) {
            std::cmp::Ordering::Less => accept(mpi, Some(&mine), 0, me, None),
            std::cmp::Ordering::Greater => connect(mpi, Some(&theirs), 0, me),
            std::cmp::Ordering::Equal => {
                Err(MpiError::new(c::MPI_ERR_OTHER, format!("{call}: fd {fd} leads back to this process")))
            }
        }
    })();
    let _ = mpi.dpm.close_port(&mine);
    r
}

/// One command of `MPI_Comm_spawn_multiple`.
pub use baton_pmi::SpawnCmd;

/// How long spawn waits for its children to connect (`BATON_SPAWN_TIMEOUT`, seconds).
fn spawn_timeout() -> Duration {
    baton_settings::SPAWN_TIMEOUT.get()
}

/// `MPI_Comm_spawn(_multiple)`: `cmds` matters at the root only (an error there, e.g. a bad
/// argument, goes to every member). Returns how many processes were asked for (what
/// `array_of_errcodes` holds) and the intercommunicator to the children, or the error (class
/// `MPI_ERR_SPAWN` when the launcher could not start them).
pub fn spawn(
    mpi: &Mpi,
    call: &str,
    cmds: Option<Result<Vec<SpawnCmd>>>,
    root: i32,
    comm: &Comm,
) -> (usize, Result<Comm>) {
    if let Err(e) = check_root(call, root, comm) {
        return (0, Err(e));
    }
    let mut asked = 0usize;
    let started: Option<Result<String>> = cmds.map(|cmds| {
        let cmds = cmds?;
        asked = cmds.iter().map(|c| c.maxprocs as usize).sum();
        let port = mpi.dpm.open_port()?;
        let r = mpi.ensure_launcher().and_then(|()| {
            mpi.with_pmi(|p| match p {
                Some(p) => p
                    .spawn(&cmds, &port)
                    .map_err(|e| MpiError::new(c::MPI_ERR_SPAWN, format!("{call}: {}", e.message()))),
                None => Err(MpiError::new(c::MPI_ERR_SPAWN, format!("{call}: no launcher"))),
            })
        });
        match r {
            Ok(_) => Ok(port),
            Err(e) => {
                let _ = mpi.dpm.close_port(&port);
                Err(e)
            }
        }
    });
    // Whether the launcher started them, and how many were asked for: every member must know
    // before accepting (or giving up).
    let mut msg = (asked as u32).to_le_bytes().to_vec();
    match &started {
        Some(Ok(_)) => msg.push(0),
        Some(Err(e)) => msg.extend(encode_outcome(&Err(e.clone()))),
        None => {}
    }
    let verdict = mpi.bcast_internal(comm, root, msg);
    let asked = verdict.get(..4).map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
    if verdict.get(4..) != Some(&[0][..]) {
        let e = match started {
            Some(Err(e)) => e,
            _ => decode_outcome(call, "the root", verdict.get(4..).unwrap_or(&[]))
                .err()
                .unwrap_or_else(|| MpiError::new(c::MPI_ERR_SPAWN, format!("{call}: the root failed"))),
        };
        return (asked, Err(e));
    }
    let port = started.and_then(|r| r.ok());
    let r = accept(mpi, port.as_deref(), root, comm, Some(Instant::now() + spawn_timeout()));
    if let Some(p) = &port {
        let _ = mpi.dpm.close_port(p);
    }
    (asked, r.map_err(|e| MpiError::new(e.class, e.msg.replace("MPI_Comm_accept", call))))
}

/// In a spawned process: connects to the parent's port (`BATON_PARENT_PORT`, read at start-up).
pub fn connect_parent(mpi: &Mpi, port: &str) -> Result<Comm> {
    connect(mpi, Some(port), 0, &mpi.world)
}
