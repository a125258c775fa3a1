//! One MPI process after `MPI_Init`: [`Mpi`], split by concern.
//!
//! - [`bootstrap`]: the exchange with the launcher at start-up, the fabric and the predefined
//!   communicators; the bootstrap connection later serves spawn.
//! - [`procs`]: the process table ([`ProcTable`]): every process this one knows, by
//!   [`ProcIdx`], entries never moving.
//! - [`poll`]: [`State`], the engine and every transport behind one mutex, and the progress
//!   pass that moves arrived frames into the engine. Every thread may call MPI at any time
//!   (`MPI_THREAD_MULTIPLE`); nobody holds the lock while running application callbacks.
//! - [`wait`]: how a blocking call waits ([`WaitPolicy`], [`Mpi::block`]): poll for an
//!   adaptive budget, then sleep on this process's doorbell; with more ranks than cores, yield
//!   between polls. The policy's decisions ([`wait::Waiting`]) are plain data, tested alone.
//! - [`inflight`]: nonblocking and persistent collectives in flight.
//! - [`progress_thread`]: the thread that moves transfers on while the application computes
//!   ([`ProgressThread`], `BATON_PROGRESS`).
//! - [`internal`]: the library's own small collectives (communicator creation, finalize).
//! - [`shm_areas`]: which communicator uses which shared-memory collective area.
//! - [`peers`]: processes of other jobs (spawn, accept/connect, join): reaching them, noticing
//!   when they are gone, letting them go.
//!
//! The layers above (collectives, the shared-memory collectives) see the runtime only through
//! [`crate::progress`]'s traits, which [`Mpi`] implements here.

mod bootstrap;
mod inflight;
mod internal;
mod peers;
mod poll;
mod procs;
mod progress_thread;
mod shm_areas;
mod wait;

pub(crate) use bootstrap::transports_allowed;
pub use bootstrap::LAUNCHER;
pub use internal::{TAG_ALLGATHER, TAG_BARRIER, TAG_BCAST, TAG_SWAP};
pub(crate) use peers::{port_err, OpenPort};
pub use peers::{DpmState, PortName};
pub use poll::State;
pub use procs::{Proc, ProcTable};
pub(crate) use progress_thread::Locked;
pub use progress_thread::ProgressThread;
pub use wait::{available_cores, Placement, WaitPolicy};

use crate::comm::{hash_words, Comm};
use crate::engine::{Engine, Net, ProcIdx};
use crate::progress::{EngineAccess, Progress};
use baton_pmi::auth::Secret;
use baton_pmi::PmiClient;
use baton_transport::inbox::Inbox;
use inflight::ActiveColl;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use wait::Bell;

/// Everything one MPI process holds after `MPI_Init`.
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
    pub dpm: DpmState,
    /// The port of the job that spawned this one (`BATON_PARENT_PORT`).
    pub parent_port: Option<String>,
    /// This process's inbox (also in `State`), for sleeping on its doorbell without the lock.
    inbox: std::sync::OnceLock<Arc<Inbox>>,
    /// When `poll` last looked for vanished processes of other jobs (ns since the epoch).
    lost_checked: AtomicU64,
    /// A singleton that started `mpiexec --singleton-server` for its spawns.
    own_launcher: AtomicBool,
    /// Per shared-memory collective area: whether a communicator of this process uses it, and
    /// the last sequence number used in it (see [`crate::shm_coll`]).
    coll_areas: Mutex<[(bool, u64); crate::shm_coll::COLL_AREAS]>,
    /// The progress thread, where `BATON_PROGRESS` gives this process one.
    progress: Option<ProgressThread>,
    /// Application threads asleep on the doorbell in [`Mpi::block`]: those a completion must
    /// wake (the progress thread counts among the doorbell's sleepers too, and needs no wake-up
    /// for what a pass completed).
    app_sleepers: AtomicUsize,
}

impl Mpi {
    /// The engine and transports, for one step; never held while blocking or calling the
    /// application. Only the core takes it: the layers above call the device's entries.
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_> {
        Locked::new(self.lock_plain(), self)
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
        self.stop_progress_thread();
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

    /// Serves `s` at every progress pass from now on (see [`crate::progress::Service`]).
    pub fn add_service(&self, s: Arc<dyn crate::progress::Service>) {
        self.lock().services.push(s);
    }

    /// Stops serving `s`.
    pub fn remove_service(&self, s: &Arc<dyn crate::progress::Service>) {
        self.lock().services.retain(|x| !Arc::ptr_eq(x, s));
    }
}

/// Collective schedules post and collect their messages through this process's engine, one
/// lock per round.
impl EngineAccess for Mpi {
    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine, &mut dyn Net) -> R) -> R {
        let mut st = self.lock();
        let State { engine, fabric, .. } = &mut *st;
        f(engine, fabric)
    }
}

impl Progress for Mpi {
    fn block_until<T>(&self, mut ready: impl FnMut(&mut Engine) -> Option<T>) -> T {
        self.block(|st| ready(&mut st.engine))
    }
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}
