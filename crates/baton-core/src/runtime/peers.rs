//! Processes of other jobs (spawned, connected or joined): reaching them, entering them in the
//! process table, noticing when they are gone, and letting them go after a disconnect.

use super::bootstrap::*;
use super::poll::*;
use super::procs::*;
use super::Mpi;
use crate::engine::ProcIdx;
use crate::error::{MpiError, Result};
use crate::fabric::tcp::{self as tcpnet, choose_addr, Identity, TcpConfig, TcpNet};
use crate::fabric::FabricConfig;
use crate::group::Group;
use baton_abi::consts as c;
use baton_pmi::auth::Secret;
use baton_transport::inbox::Inbox;
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) const PREFIX: &str = "baton-port:";

#[derive(Default)]
pub struct DpmState {
    pub(super) ports: Mutex<HashMap<String, Arc<OpenPort>>>,
    /// Intercommunicators from accept/connect/spawn/join that include each process of another
    /// job; its connections end when the last of them is disconnected.
    pub(crate) uses: Mutex<HashMap<ProcIdx, usize>>,
    /// Context id and remote group of each intercommunicator to another job, to tell which
    /// receives a vanished process leaves hanging.
    pub(crate) comms: Mutex<Vec<(u64, Arc<Group>)>>,
    /// Processes of other jobs found gone (crashed, or ended without disconnecting).
    pub lost: Mutex<Vec<ProcIdx>>,
    /// Whether any process of another job is in use (skips the checks when none is).
    pub(super) any: std::sync::atomic::AtomicBool,
    /// Process table entries of released processes, for reuse.
    pub free: Mutex<Vec<ProcIdx>>,
}

pub(crate) struct OpenPort {
    pub(crate) listener: TcpListener,
    pub(crate) secret: Secret,
}

/// A parsed port name.
pub struct PortName {
    pub addr: SocketAddr,
    pub secret: Secret,
}

impl PortName {
    pub fn parse(s: &str) -> Option<PortName> {
        let rest = s.trim().strip_prefix(PREFIX)?;
        let (addr, hex) = rest.rsplit_once(':')?;
        Some(PortName { addr: addr.parse().ok()?, secret: Secret::from_hex(hex).ok()? })
    }

    pub fn format(&self) -> String {
        format!("{PREFIX}{}:{}", self.addr, self.secret.to_hex())
    }
}

pub(crate) fn port_err(call: &str, why: impl std::fmt::Display) -> MpiError {
    MpiError::new(c::MPI_ERR_PORT, format!("{call}: {why}"))
}

impl DpmState {
    /// `MPI_Open_port`: listens on an address other jobs can reach (`BATON_TCP_IF` chooses).
    pub fn open_port(&self) -> Result<String> {
        let call = "MPI_Open_port";
        let ip = choose_addr(&TcpConfig::from_env(), false)
            .map_err(|e| MpiError::new(c::MPI_ERR_OTHER, format!("{call}: {e}")))?;
        let listener = TcpListener::bind((ip, 0))
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|e| MpiError::new(c::MPI_ERR_OTHER, format!("{call}: cannot listen on {ip}: {e}")))?;
        let addr = listener.local_addr().map_err(|e| MpiError::new(c::MPI_ERR_OTHER, format!("{call}: {e}")))?;
        let secret = Secret::generate().map_err(|e| MpiError::new(c::MPI_ERR_OTHER, format!("{call}: {e}")))?;
        let name = PortName { addr, secret: secret.clone() }.format();
        self.ports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone(), Arc::new(OpenPort { listener, secret }));
        Ok(name)
    }

    /// `MPI_Close_port`: connections still waiting on it are refused.
    pub fn close_port(&self, name: &str) -> Result<()> {
        match self.ports.lock().unwrap_or_else(|e| e.into_inner()).remove(name.trim()) {
            Some(_) => Ok(()),
            None => Err(port_err("MPI_Close_port", format!("port '{name}' is not open in this process"))),
        }
    }

    pub(crate) fn port(&self, call: &str, name: &str) -> Result<Arc<OpenPort>> {
        let ports = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        ports.get(name.trim()).cloned().ok_or_else(|| {
            port_err(call, format!("port '{name}' was not opened by this process (MPI_Open_port at the root)"))
        })
    }

    /// Processes of other jobs in use by some intercommunicator.
    pub fn in_use(&self) -> Vec<ProcIdx> {
        self.uses.lock().unwrap_or_else(|e| e.into_inner()).keys().copied().collect()
    }

    /// Whether a receive on context `ctx` from rank `src` could only (or also) be satisfied
    /// by `p`.
    pub fn may_need(&self, p: ProcIdx, ctx: u64, src: i32) -> bool {
        let comms = self.comms.lock().unwrap_or_else(|e| e.into_inner());
        comms.iter().any(|(c, g)| {
            (ctx & !1) == *c
                && g.procs.contains(&p)
                && (src == c::MPI_ANY_SOURCE || g.procs.get(src as usize) == Some(&p))
        })
    }

    pub fn connected(&self) -> bool {
        self.any.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn use_procs(&self, ps: &[ProcIdx]) {
        let mut u = self.uses.lock().unwrap_or_else(|e| e.into_inner());
        for &p in ps {
            *u.entry(p).or_insert(0) += 1;
        }
        self.any.store(!u.is_empty(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Drops one use of each of `ps`; returns those no intercommunicator uses any more.
    pub(crate) fn unuse_procs(&self, ps: &[ProcIdx]) -> Vec<ProcIdx> {
        let mut u = self.uses.lock().unwrap_or_else(|e| e.into_inner());
        let mut idle = Vec::new();
        for p in ps {
            if let Some(n) = u.get_mut(p) {
                *n -= 1;
                if *n == 0 {
                    u.remove(p);
                    idle.push(*p);
                }
            }
        }
        self.any.store(!u.is_empty(), std::sync::atomic::Ordering::Relaxed);
        idle
    }
}

/// How long a probe of a process of another job on another machine may try to connect before
/// that process counts as gone.
pub(super) const PROBE_LIMIT: Duration = Duration::from_secs(2);

impl Mpi {
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

    /// Accepts connections that prove `secret` from processes of `jobs` (besides the secrets
    /// already trusted for them).
    pub fn trust_jobs(&self, secret: &Secret, jobs: &[u64]) {
        let st = self.lock();
        if let Some(t) = st.fabric.tcp.as_ref() {
            for &j in jobs {
                t.trust(secret, j);
            }
        }
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
    pub(super) fn check_lost(&self, st: &mut State) -> bool {
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
}
