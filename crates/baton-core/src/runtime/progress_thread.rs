//! The progress thread ([`ProgressThread`]): transfers that move on while the application
//! computes outside MPI (`BATON_PROGRESS`).
//!
//! It costs nothing while nothing needs it. It sleeps on this process's doorbell, but counts
//! itself among the doorbell's sleepers (so that peers ring it for every frame they send here)
//! only while *registered*: while a transfer is under way that moves only if this process acts
//! ([`Mpi::needs_progress`]: a receive a rendezvous may match, a rendezvous send, data to
//! stream, a nonblocking collective, a one-sided window served by request) and no application
//! thread is inside a blocking wait, which makes progress itself. Small messages therefore pay
//! nothing: an eager send is complete once written and registers nothing, and a blocking call
//! takes the registration back on entry.
//!
//! The application registers it when it leaves the engine with such work left
//! ([`Locked`]'s drop, a few loads), then looks at the rings once more under the lock: a frame
//! that arrived before the registration was not rung for. TCP connections ring the same
//! doorbell through the service thread while the thread is registered (the sockets are
//! watched then).
//!
//! Where the host has no core to spare, the thread runs on a core the application may be
//! computing on: its passes set [`crate::engine::Engine::borrowed_core`], which leaves large
//! copies to the peer (a waiting sender writes the chunks of a cooperative copy itself) for as
//! long as the peer makes headway.

use super::poll::State;
use super::Mpi;
use baton_transport::wait::{futex_wait, futex_wake};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// How long an unregistered thread sleeps between looks at the stop flag (it is woken at once
/// by a registration that finds frames waiting, and by finalize).
const IDLE: Duration = Duration::from_secs(1);
/// How long it sleeps while a transfer needs it but no doorbell will announce the next step
/// (a socket to drain, a cooperative copy whose helper it watches).
const NAP: Duration = Duration::from_micros(50);

/// The per-process progress thread's shared state (the thread itself runs [`Mpi::serve`]).
pub struct ProgressThread {
    /// Counted in the doorbell's sleepers: peers ring it for every frame they send here.
    registered: AtomicBool,
    /// Application threads inside [`Mpi::block`]: while one is there, it makes progress.
    blocking: AtomicUsize,
    stop: AtomicBool,
    /// No core to spare: passes run with [`crate::engine::Engine::borrowed_core`].
    borrowed_core: bool,
    handle: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What `BATON_PROGRESS` asks for on a host where `local_ranks` share `cores`, for a process
/// allowed `own_cpus` of them: a process bound to one CPU (`mpiexec --bind-to core`) has no
/// spare core for the thread, however many the host has.
pub(super) fn choose(setting: &str, local_ranks: usize, cores: usize, own_cpus: usize) -> Option<ProgressThread> {
    let spare = local_ranks < cores && own_cpus >= 2;
    let on = match setting {
        "thread" => true,
        "off" => false,
        _ => spare,
    };
    on.then(|| ProgressThread {
        registered: AtomicBool::new(false),
        blocking: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        borrowed_core: !spare,
        handle: Mutex::new(None),
    })
}

/// The engine under the lock. Dropping it registers the progress thread when the caller leaves
/// work that needs it (see the module docs).
pub(crate) struct Locked<'a> {
    guard: MutexGuard<'a, State>,
    mpi: &'a Mpi,
}

impl<'a> Locked<'a> {
    pub(super) fn new(guard: MutexGuard<'a, State>, mpi: &'a Mpi) -> Locked<'a> {
        Locked { guard, mpi }
    }
}

impl Deref for Locked<'_> {
    type Target = State;
    #[inline]
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(p) = &self.mpi.progress {
            if !p.registered.load(Ordering::Relaxed) && p.blocking.load(Ordering::Relaxed) == 0 {
                self.mpi.register_if_needed(p, &mut self.guard);
            }
        }
    }
}

impl Mpi {
    /// Whether something under way moves only if this process acts (see the module docs).
    pub(super) fn needs_progress(&self, st: &State) -> bool {
        st.engine.needs_progress()
            || self.active_colls.load(Ordering::Relaxed) != 0
            || st.fabric.tcp.as_ref().is_some_and(|t| t.has_unsent())
            || st.services.iter().any(|s| s.needs_progress())
    }

    #[inline(never)]
    fn register_if_needed(&self, p: &ProgressThread, st: &mut State) {
        if !self.needs_progress(st) || p.stop.load(Ordering::Relaxed) {
            return;
        }
        let ctl = self.bell.ctl();
        p.registered.store(true, Ordering::SeqCst);
        ctl.sleepers.fetch_add(1, Ordering::SeqCst);
        // A frame that arrived before the registration was not rung for, and work already
        // at hand (a copy that matching decided on, data to stream) will not be.
        if st.frames_waiting() || st.engine.has_outgoing() || st.fabric.tcp.as_ref().is_some_and(|t| t.has_unsent()) {
            ctl.bell.fetch_add(1, Ordering::SeqCst);
            futex_wake(&ctl.bell);
        }
        st.arm_tcp();
    }

    /// Registers the progress thread if what the caller just started needs it (work started
    /// outside the engine's lock: a nonblocking collective).
    pub(super) fn hand_to_progress_thread(&self) {
        if self.progress.is_some() {
            drop(self.lock());
        }
    }

    /// Takes the registration back (the engine's lock held).
    fn unregister(&self, p: &ProgressThread, st: &mut State) {
        if p.registered.swap(false, Ordering::SeqCst) {
            let ctl = self.bell.ctl();
            ctl.sleepers.fetch_sub(1, Ordering::SeqCst);
            if ctl.sleepers.load(Ordering::SeqCst) == 0 {
                st.unwatch_tcp();
            }
        }
    }

    /// An application thread starts a blocking wait: it makes progress itself from now on.
    pub(super) fn enter_block(&self) {
        if let Some(p) = &self.progress {
            p.blocking.fetch_add(1, Ordering::SeqCst);
            self.bell.ctl().waiting.fetch_add(1, Ordering::Relaxed);
            if p.registered.load(Ordering::SeqCst) {
                let mut st = self.lock_plain();
                self.unregister(p, &mut st);
            }
        }
    }

    /// The blocking wait ends (the lock held): the thread takes over what is left.
    pub(super) fn leave_block(&self, st: &mut State) {
        if let Some(p) = &self.progress {
            self.bell.ctl().waiting.fetch_sub(1, Ordering::Relaxed);
            if p.blocking.fetch_sub(1, Ordering::SeqCst) == 1 && !p.registered.load(Ordering::Relaxed) {
                self.register_if_needed(p, st);
            }
        }
    }

    /// Starts the progress thread if this process has one (`BATON_PROGRESS`). The runtime must
    /// live as long as the process (the C boundary keeps it in a static).
    pub fn start_progress_thread(&'static self) {
        let Some(p) = &self.progress else { return };
        let spawned = std::thread::Builder::new().name("baton-progress".into()).spawn(move || self.serve());
        match spawned {
            Ok(h) => *p.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(h),
            // Without it, progress happens inside MPI calls, as with `off`.
            Err(e) => eprintln!("baton: rank {}: no progress thread: {e}", self.world.rank),
        }
    }

    /// Ends the progress thread (at finalize) and takes its registration back.
    pub(super) fn stop_progress_thread(&self) {
        let Some(p) = &self.progress else { return };
        p.stop.store(true, Ordering::SeqCst);
        let ctl = self.bell.ctl();
        ctl.bell.fetch_add(1, Ordering::SeqCst);
        futex_wake(&ctl.bell);
        if let Some(h) = p.handle.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        let mut st = self.lock_plain();
        self.unregister(p, &mut st);
    }

    /// The progress thread's loop.
    fn serve(&self) {
        let p = self.progress.as_ref().expect("started only with a progress thread");
        let ctl = self.bell.ctl();
        loop {
            // Read before the last look: a frame that arrives after the pass changes it, and
            // the sleep below then returns at once.
            let seq = ctl.bell.load(Ordering::SeqCst);
            if p.stop.load(Ordering::SeqCst) {
                return;
            }
            let mut nap = IDLE;
            if p.registered.load(Ordering::SeqCst) && p.blocking.load(Ordering::SeqCst) == 0 {
                self.progress_colls();
                let mut st = self.lock_plain();
                if p.registered.load(Ordering::SeqCst) && p.blocking.load(Ordering::SeqCst) == 0 {
                    st.engine.borrowed_core = p.borrowed_core;
                    self.progress_locked(&mut st);
                    st.engine.borrowed_core = false;
                    self.check_fatal(&st);
                    if !self.needs_progress(&st) {
                        self.unregister(p, &mut st);
                    } else if st.frames_waiting() {
                        nap = Duration::ZERO;
                    } else {
                        let polled =
                            st.engine.needs_polling() || st.fabric.tcp.as_ref().is_some_and(|t| t.has_unsent());
                        if polled {
                            nap = NAP;
                        }
                        st.arm_tcp();
                    }
                }
                drop(st);
                // A round that the pass completed lets a collective go on.
                self.progress_colls();
            }
            if !nap.is_zero() {
                futex_wait(&ctl.bell, seq, nap);
            }
        }
    }
}

impl Mpi {
    /// The engine under the lock, without the registration check (the progress thread's own
    /// passes, the registration's bookkeeping, and [`Mpi::lock`] underneath).
    pub(super) fn lock_plain(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::choose;

    #[test]
    fn auto_starts_a_thread_only_where_a_core_is_spare() {
        assert!(choose("auto", 1, 2, 2).is_some_and(|p| !p.borrowed_core));
        assert!(choose("auto", 2, 16, 16).is_some());
        assert!(choose("auto", 2, 2, 2).is_none());
        assert!(choose("auto", 8, 2, 2).is_none());
        // Bound to one CPU of many: the thread would share it with the application.
        assert!(choose("auto", 2, 16, 1).is_none());
    }

    #[test]
    fn thread_and_off_are_obeyed_and_a_forced_thread_knows_it_borrows_a_core() {
        assert!(choose("thread", 2, 2, 2).is_some_and(|p| p.borrowed_core));
        assert!(choose("thread", 1, 16, 16).is_some_and(|p| !p.borrowed_core));
        assert!(choose("thread", 2, 16, 1).is_some_and(|p| p.borrowed_core));
        assert!(choose("off", 1, 16, 16).is_none());
    }
}
