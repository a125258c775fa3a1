//! Start-up: the bootstrap exchange with the launcher, the fabric and the predefined communicators.

use super::peers::*;
use super::poll::*;
use super::procs::*;
use super::wait::*;
use super::{now_nanos, Mpi};
use crate::comm::{hash_words, Comm};
use crate::engine::{Engine, ProcIdx};
use crate::error::{MpiError, Result};
use crate::fabric::tcp::{self as tcpnet, Identity, TcpConfig, TcpNet};
use crate::fabric::{Fabric, FabricConfig};
use crate::group::Group;
use baton_abi::consts as c;
use baton_pmi::auth::Secret;
use baton_pmi::PmiClient;
use baton_settings::protocol;
use baton_transport::shm::{ProcCtl, Segment};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(super) fn pmi_err(e: baton_pmi::PmiError) -> MpiError {
    MpiError::new(c::MPI_ERR_INTERN, format!("MPI_Init: bootstrap failed: {e}"))
}

/// Which transports `BATON_TRANSPORTS` allows: (shm, tcp); default both. (`Mpi::init` has
/// refused names the build does not have.)
pub(crate) fn transports_allowed() -> Result<(bool, bool)> {
    let list = baton_settings::TRANSPORTS.get();
    let has = |t: &str| list.split(',').any(|w| w == t);
    Ok((has("shm"), has("tcp")))
}

pub(super) fn env_num(k: &str) -> Option<u32> {
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
        // Every setting is read and checked before any is used: a bad value fails here, named.
        let settings = baton_settings::check(baton_settings::Reader::Library);
        if let Some(e) = settings.error() {
            return Err(MpiError::new(c::MPI_ERR_OTHER, format!("MPI_Init: {e}")));
        }
        let pmi = PmiClient::from_env().map_err(pmi_err)?;
        let host = std::env::var(protocol::NODE.name)
            .ok()
            .filter(|s| !s.is_empty() && !s.contains(' '))
            .unwrap_or_else(baton_transport::sys::hostname);
        let pid = std::process::id() as i32;
        let (rank, size, job_id, appnum, universe) = match &pmi {
            Some(p) => (p.rank(), p.size(), p.job_id(), p.appnum() as i32, p.universe_size() as i32),
            None => (0, 1, hash_words(&[pid as u64, now_nanos()]) | 1, 0, 1),
        };
        // This host's share of the job (the launcher numbers each host's ranks from 0).
        let local_size = env_num(protocol::LOCAL_SIZE.name).filter(|&n| n >= 1 && n <= size).unwrap_or(size);
        let local_rank = env_num(protocol::LOCAL_RANK.name).filter(|&r| r < local_size).unwrap_or(rank);
        if local_rank == 0 {
            // Once per host: every rank read the same environment.
            for w in &settings.warnings {
                eprintln!("baton: MPI_Init: {}", w.message);
            }
        }
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
        let parent_port = std::env::var(protocol::PARENT_PORT.name).ok().filter(|p| !p.is_empty());
        std::env::remove_var(protocol::PARENT_PORT.name);
        let mut mpi = Mpi::assemble(s, wired, appnum, universe)?;
        mpi.parent_port = parent_port;
        mpi.policy.go_home();
        Ok(mpi)
    }

    /// The bootstrap exchange: start listening for TCP if other hosts (or `BATON_TRANSPORTS`)
    /// need it, publish how to reach this process, size or map this host's segment, and learn
    /// every other process.
    pub(super) fn wire_up(mut p: PmiClient, s: &Setup) -> Result<Wired> {
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
    pub(super) fn assemble(s: Setup, w: Wired, appnum: i32, universe: i32) -> Result<Mpi> {
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
            None => Bell::Local(Arc::new(ProcCtl::default())),
        };
        let _ = s.bell.set(bell.clone());
        let world_group = Arc::new(Group::new((0..size).collect()));
        let world =
            Arc::new(Comm::new(hash_words(&[job_id, u64::from_le_bytes(*b"world\0\0\0")]), world_group, rank as i32));
        if let Some(sg) = &seg {
            if local == size as usize && local_size == size {
                let sh = crate::shm_coll::ShmColl::new(sg.clone(), (0..size as usize).collect(), rank as usize, 0, 1);
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
                services: Vec::new(),
            }),
            bell,
            policy: WaitPolicy::choose(sharing, my_index),
            progress: super::progress_thread::choose(
                baton_settings::PROGRESS.get(),
                sharing,
                super::available_cores(),
                baton_transport::sys::allowed_cpus().len(),
            ),
            app_sleepers: AtomicUsize::new(0),
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
            dpm: DpmState::default(),
            parent_port: None,
            inbox: std::sync::OnceLock::new(),
            lost_checked: AtomicU64::new(0),
            own_launcher: AtomicBool::new(false),
            // Area 0 is the world's (whether or not it has one: simpler than renumbering).
            coll_areas: Mutex::new(std::array::from_fn(|a| (a == 0, 0))),
        })
    }

    /// A singleton (started without mpiexec) gets a launcher of its own on its first spawn:
    /// `mpiexec --singleton-server` adopts it as rank 0 of its job.
    pub fn ensure_launcher(&self) -> Result<()> {
        let mut g = self.pmi.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_some() {
            return Ok(());
        }
        let path = launcher_path();
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
}

/// What `init` knows before the bootstrap exchange.
pub(super) struct Setup {
    pub(super) rank: u32,
    pub(super) size: u32,
    pub(super) job_id: u64,
    /// This process's host (node) name.
    pub(super) host: String,
    pub(super) pid: i32,
    pub(super) local_rank: u32,
    pub(super) local_size: u32,
    pub(super) cfg: FabricConfig,
    /// The doorbell, once chosen; the TCP service thread rings it.
    pub(super) bell: Arc<std::sync::OnceLock<Bell>>,
}

/// What the bootstrap exchange gave.
pub(super) struct Wired {
    pub(super) pmi: Option<PmiClient>,
    pub(super) secret: Secret,
    pub(super) procs: Vec<Proc>,
    /// Per process: its slot in its host's segment.
    pub(super) slots: Vec<Option<u32>>,
    /// Per process: where it listens for TCP connections.
    pub(super) addrs: Vec<Option<std::net::SocketAddr>>,
    /// Per process: the machine it runs on (see [`proc_value`]).
    pub(super) machines: Vec<Option<String>>,
    pub(super) seg: Option<Arc<Segment>>,
    pub(super) tcp: Option<TcpNet>,
}

/// Where `mpiexec` is, for a singleton that spawns: `BATON_MPIEXEC`, else what the C library
/// found next to itself (`../bin/mpiexec`), else `mpiexec` in `PATH`.
pub static LAUNCHER: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

pub(super) fn launcher_path() -> std::path::PathBuf {
    baton_settings::MPIEXEC.value().or_else(|| LAUNCHER.get().cloned()).unwrap_or_else(|| "mpiexec".into())
}
