//! Generalized requests (`MPI_Grequest_start`, `MPI_Grequest_complete`): operations the
//! application carries out itself and reports to MPI, waited for and tested like any other
//! request.
//!
//! Important types:
//! - [`Generalized`]: one generalized request: the engine request the completion calls wait on
//!   (an external one, completed by `MPI_Grequest_complete`), the application's callbacks, and
//!   which of the two ends of its life (completion, `MPI_Request_free`) came first.
//! - [`Callbacks`]: the application's `query_fn`, `free_fn` and `cancel_fn`, which the C
//!   boundary supplies (core calls no foreign code itself).
//!
//! The callbacks are never called with a lock of the library held: they may call MPI.

use super::Device;
use crate::engine::{ReqId, Status};
use std::sync::Mutex;

/// The application's callbacks of a generalized request; each returns an MPI error code.
pub trait Callbacks: Send + Sync {
    /// `query_fn`: fills `status` (which starts empty) once the request is complete.
    fn query(&self, status: &mut Status) -> i32;
    /// `free_fn`: the request is gone; its resources may go.
    fn free(&self) -> i32;
    /// `cancel_fn`: `MPI_Cancel` was called; `complete` says whether `MPI_Grequest_complete` was.
    fn cancel(&self, complete: bool) -> i32;
}

/// One generalized request (see the module doc).
pub struct Generalized {
    pub id: ReqId,
    callbacks: Box<dyn Callbacks>,
    /// (completed, freed): `MPI_Grequest_complete` called, `MPI_Request_free` called. Whichever
    /// comes second of a free before completion calls `free_fn`.
    ends: Mutex<(bool, bool)>,
}

impl Generalized {
    /// `query_fn`'s status of the completed request, its error code in `error`.
    pub fn query(&self) -> Status {
        let mut s = super::request::EMPTY;
        let rc = self.callbacks.query(&mut s);
        s.error = rc;
        s
    }

    /// `free_fn`'s error code.
    pub fn free(&self) -> i32 {
        self.callbacks.free()
    }

    /// `cancel_fn`'s error code.
    pub fn cancel(&self) -> i32 {
        let complete = self.ends.lock().unwrap_or_else(|e| e.into_inner()).0;
        self.callbacks.cancel(complete)
    }

    /// Records `MPI_Request_free` of the request; true when it was complete already (then the
    /// caller calls `free_fn`; otherwise `MPI_Grequest_complete` will).
    pub fn mark_freed(&self) -> bool {
        let mut e = self.ends.lock().unwrap_or_else(|e| e.into_inner());
        e.1 = true;
        e.0
    }
}

impl Device {
    /// `MPI_Grequest_start`: a generalized request with `callbacks`, active and not complete.
    pub fn start_generalized(&self, callbacks: Box<dyn Callbacks>) -> Generalized {
        let id = self.lock().engine.external(0);
        Generalized { id, callbacks, ends: Mutex::new((false, false)) }
    }

    /// `MPI_Grequest_complete`: completes `g`'s engine request, waking any thread waiting for
    /// it. Returns whether the request was freed already (then the caller calls `free_fn`);
    /// None when it was completed before.
    pub fn complete_generalized(&self, g: &Generalized) -> Option<bool> {
        let freed = {
            let mut e = g.ends.lock().unwrap_or_else(|e| e.into_inner());
            if e.0 {
                return None;
            }
            e.0 = true;
            e.1
        };
        self.lock().engine.complete(g.id, super::request::EMPTY);
        self.wake_sleepers();
        Some(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Arc;

    #[derive(Default)]
    struct Log {
        freed: AtomicI32,
        cancelled: AtomicI32,
    }

    struct Hooks(Arc<Log>);

    impl Callbacks for Hooks {
        fn query(&self, status: &mut Status) -> i32 {
            status.tag = 42;
            status.bytes = 8;
            0
        }
        fn free(&self) -> i32 {
            self.0.freed.fetch_add(1, Ordering::SeqCst);
            0
        }
        fn cancel(&self, complete: bool) -> i32 {
            self.0.cancelled.store(if complete { 2 } else { 1 }, Ordering::SeqCst);
            0
        }
    }

    /// Completion from another thread wakes a waiter; the status is query_fn's; freeing before
    /// completion is recorded for the completer (a singleton process).
    #[test]
    fn completed_by_another_thread() {
        let dev = Arc::new(Device::new(crate::runtime::Mpi::init().expect("a singleton")));
        let log = Arc::new(Log::default());
        let g = Arc::new(dev.start_generalized(Box::new(Hooks(log.clone()))));
        assert_eq!(dev.request_status(super::super::Awaited::Request(g.id)), Ok(None));
        g.cancel();
        assert_eq!(log.cancelled.load(Ordering::SeqCst), 1, "cancel_fn told: not complete");
        let t = {
            let (dev, g) = (dev.clone(), g.clone());
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(30));
                dev.complete_generalized(&g)
            })
        };
        let done = dev.wait_one(super::super::Awaited::Request(g.id)).unwrap();
        assert_eq!(t.join().unwrap(), Some(false));
        assert_eq!(done.status, super::super::request::EMPTY);
        let s = g.query();
        assert_eq!((s.tag, s.bytes, s.error), (42, 8, 0));
        assert_eq!(dev.complete_generalized(&g), None, "completed twice");
        g.cancel();
        assert_eq!(log.cancelled.load(Ordering::SeqCst), 2, "cancel_fn told: complete");
        assert!(g.mark_freed());
    }
}
