//! Nonblocking and persistent collectives in flight, advanced by every call that makes progress.

use super::Mpi;
use crate::coll::schedule::Schedule;
use crate::engine::ReqId;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A collective schedule in flight and the request the application waits on.
pub(super) struct ActiveColl {
    pub(super) sched: Arc<Mutex<Schedule>>,
    pub(super) req: ReqId,
}

impl Mpi {
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
                drop(list);
                // The progress thread takes it over while the caller computes.
                self.hand_to_progress_thread();
            }
        }
        req
    }

    /// Advances every collective in flight. Runs outside the engine lock, because reductions
    /// may call the application's functions; a thread that finds another already doing this
    /// (or a reduction calling back into MPI) simply goes on.
    #[inline]
    pub(super) fn progress_colls(&self) {
        if self.active_colls.load(Ordering::Acquire) != 0 {
            self.progress_colls_now();
        }
    }

    #[inline(never)]
    pub(super) fn progress_colls_now(&self) {
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
}
