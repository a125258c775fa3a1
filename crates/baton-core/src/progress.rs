//! What the layers above the engine need of a running process, and nothing more: the engine
//! for a moment, and a way to wait. Collective schedules ([`crate::coll`]) and the
//! shared-memory collectives ([`crate::shm_coll`]) are written against these traits, so the
//! collective simulator (`tests/coll_sim`) and unit tests run them without processes, while
//! the runtime ([`crate::runtime::Mpi`]) implements them with its lock and its wait policy.
//!
//! - [`EngineAccess`]: exclusive use of an engine and the network it talks through, for one
//!   step (posting a round, collecting it).
//! - [`Progress`]: blocking until a condition holds, moving every message meanwhile. A
//!   schedule needs both; the shared-memory collectives need only this one.
//! - [`Service`]: work a process does for others whenever it makes progress (a one-sided
//!   window's target side, [`crate::rma`]), registered with the runtime.

use crate::engine::{Engine, Net};

/// Lends an engine and its network. The runtime lends its own under the engine lock; tests
/// lend simulated ones. Implementations are used through generics, so the runtime's path
/// compiles to a direct call.
pub trait EngineAccess {
    /// Runs `f` with exclusive use of the engine and its network. `f` must not block or call
    /// the application (a reduction may), since every other thread waits for it.
    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine, &mut dyn Net) -> R) -> R;
}

/// Waits while communication moves on.
pub trait Progress {
    /// Returns the first `Some` of `ready`, which is asked after each progress pass (under the
    /// engine's exclusive use, so it must be quick). How the wait spends its time between
    /// passes (spinning, yielding, sleeping) is the implementation's policy.
    fn block_until<T>(&self, ready: impl FnMut(&mut Engine) -> Option<T>) -> T;
}

/// Work this process does on others' behalf at every progress pass, under the engine's
/// exclusive use: reading the requests that arrived for it and answering them. A one-sided
/// window's target side is one ([`crate::rma`]). `serve` must not block or call the application.
pub trait Service: Send + Sync {
    fn serve(&self, engine: &mut Engine, net: &mut dyn Net);
    /// Whether requests may arrive that only this process can carry out (a progress thread
    /// then watches for them while the application computes).
    fn needs_progress(&self) -> bool {
        true
    }
}
