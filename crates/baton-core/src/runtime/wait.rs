//! Waiting: spin for an adaptive budget, then sleep on the doorbell ([`WaitPolicy`], [`Mpi::block`]).

use super::poll::*;
use super::{now_nanos, Mpi};
use crate::engine::{ReqId, Status};
use baton_transport::shm::{ProcCtl, Segment};
use baton_transport::wait::{futex_wait, futex_wait_any};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone)]
pub(super) enum Bell {
    Shm(Arc<Segment>, usize),
    Local(Arc<ProcCtl>),
}

impl Bell {
    pub(super) fn ctl(&self) -> &ProcCtl {
        match self {
            Bell::Shm(seg, slot) => seg.ctl(*slot),
            Bell::Local(c) => c,
        }
    }

    /// Wakes a thread of this process sleeping on the doorbell, if there is one.
    pub(super) fn ring_if_sleeping(&self) {
        self.ctl().wake_sleeper();
    }
}

/// How blocking calls wait: poll for an adaptive budget, then sleep on the doorbell.
///
/// The budget starts at `BATON_SPIN_US` (default 200 µs, which must stay above the cost of a
/// sleeping wake-up) and follows the waits actually seen: a wait that ended only after sleeping
/// raises it to twice that wait's length (so a stream of large messages that arrive further apart
/// than the floor is caught while polling), up to `BATON_SPIN_MAX_US` (default 5 ms);
/// waits far shorter than the budget let it decay back. With more ranks than cores, polls
/// `sched_yield` between checks, which hands the core to a rank with work at about the cost of
/// a context switch instead of a sleeping wake-up.
#[derive(Debug)]
pub struct WaitPolicy {
    pub(super) budget_ns: AtomicU64,
    pub(super) min_ns: u64,
    pub(super) max_ns: u64,
    pub yield_between_polls: bool,
    /// Polls between two yields when oversubscribed.
    pub yield_every: u64,
    /// The CPU this process returns to while it waits, when oversubscribed (`BATON_PLACE`).
    pub(super) home: Option<Home>,
}

/// How oversubscribed processes are spread over the CPUs they may use (`BATON_PLACE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Leave placement to the kernel.
    Off,
    /// Process `i` of the machine on CPU `i mod cpus`: neighbours in rank order on different
    /// CPUs, so that two ranks talking while the others sleep each keep a CPU.
    Cyclic,
    /// Consecutive processes share a CPU: a neighbour in rank order is usually a context switch
    /// away rather than a cross-CPU wake-up.
    Block,
}

impl Placement {
    pub fn from_env() -> Placement {
        // A bad value is a warning of `Mpi::init` (a hint is not worth failing over) and reads
        // as the default.
        match baton_settings::PLACE.get() {
            "off" => Placement::Off,
            "block" => Placement::Block,
            _ => Placement::Cyclic,
        }
    }

    /// The CPU of process `index` of `count` on this machine, among the allowed `cpus`.
    pub fn cpu_for(self, index: usize, count: usize, cpus: &[usize]) -> Option<usize> {
        if cpus.len() < 2 || count == 0 {
            return None;
        }
        let i = index.min(count - 1);
        match self {
            Placement::Off => None,
            Placement::Cyclic => Some(cpus[i % cpus.len()]),
            Placement::Block => Some(cpus[i * cpus.len() / count]),
        }
    }
}

/// Where a process waits when the machine is oversubscribed. Yield-polling ranks are only as
/// fast as the kernel's choice of which rank runs next, and that choice is worst when one CPU
/// holds more pollers than another: the kernel's balancer counts a polling rank as load like any
/// other and evens the CPUs out only slowly (docs/PERFORMANCE.md, oversubscription). So a
/// waiting thread moves itself back to its home CPU when it finds itself elsewhere; its mask is
/// not narrowed, so the kernel stays free to move it while the application computes.
#[derive(Debug)]
pub(super) struct Home {
    pub(super) cpu: usize,
    /// The CPUs the process was allowed, restored after each move.
    pub(super) allowed: Vec<usize>,
    /// Only the thread that initialized MPI goes home: other threads of the process would pile
    /// onto the same CPU.
    pub(super) thread: std::thread::ThreadId,
    /// Set once the application has changed the thread's mask itself.
    pub(super) user_placed: AtomicBool,
}

impl WaitPolicy {
    /// A policy whose budget starts at `min` and adapts between `min` and `max`; `oversubscribed`
    /// makes waits yield every `yield_every` polls. No home CPU.
    pub fn new(min: Duration, max: Duration, oversubscribed: bool, yield_every: u64) -> WaitPolicy {
        let (min_ns, max_ns) = (min.as_nanos() as u64, max.as_nanos().max(min.as_nanos()) as u64);
        WaitPolicy {
            budget_ns: AtomicU64::new(min_ns),
            min_ns,
            max_ns,
            yield_between_polls: oversubscribed,
            yield_every: yield_every.max(1),
            home: None,
        }
    }

    /// `local_ranks` processes share this machine; this one is `local_index` of them.
    pub(super) fn choose(local_ranks: usize, local_index: usize) -> WaitPolicy {
        let cores = available_cores();
        let oversubscribed = local_ranks > cores;
        let home = if oversubscribed {
            let allowed = baton_transport::sys::allowed_cpus();
            Placement::from_env().cpu_for(local_index, local_ranks, &allowed).map(|cpu| Home {
                cpu,
                allowed,
                thread: std::thread::current().id(),
                user_placed: AtomicBool::new(false),
            })
        } else {
            None
        };
        // The floor must exceed a sleeping wake-up, or a peer that slept once makes the other
        // sleep too, and every message pays a wake-up (docs/PERFORMANCE.md, oversubscription).
        let min_us = baton_settings::SPIN_US.get();
        let max_us = baton_settings::SPIN_MAX_US.get().max(min_us);
        WaitPolicy {
            budget_ns: AtomicU64::new(min_us * 1000),
            min_ns: min_us * 1000,
            max_ns: max_us * 1000,
            yield_between_polls: oversubscribed,
            yield_every: baton_settings::YIELD_EVERY.get(),
            home,
        }
    }

    /// Moves the calling thread to its home CPU if it has one and is elsewhere: a `getcpu`
    /// (a few nanoseconds) when it is home, two `sched_setaffinity` calls when not.
    pub fn go_home(&self) {
        if let Some(h) = &self.home {
            if baton_transport::sys::current_cpu() != Some(h.cpu)
                && !h.user_placed.load(Ordering::Relaxed)
                && std::thread::current().id() == h.thread
            {
                // A mask changed since MPI_Init is the application's own placement: restoring
                // ours would undo it, so homing stops for good.
                if baton_transport::sys::allowed_cpus() != h.allowed {
                    h.user_placed.store(true, Ordering::Relaxed);
                    return;
                }
                baton_transport::sys::place_on_cpu(h.cpu, &h.allowed);
            }
        }
    }

    pub fn budget(&self) -> Duration {
        Duration::from_nanos(self.budget_ns.load(Ordering::Relaxed))
    }

    /// Learns from a finished wait of `waited` that did (or did not) need to sleep.
    pub fn learn(&self, waited: Duration, slept: bool) {
        let w = waited.as_nanos().min(u64::MAX as u128) as u64;
        let b = self.budget_ns.load(Ordering::Relaxed);
        let nb = if slept {
            (w.saturating_mul(2)).clamp(b, self.max_ns)
        } else if w < b / 16 {
            (b - b / 64).max(self.min_ns)
        } else {
            b
        };
        if nb != b {
            self.budget_ns.store(nb, Ordering::Relaxed);
        }
    }
}

/// One blocking call's wait as plain data: after each poll that found nothing, whether to poll
/// again (and how to pause first) or to sleep on the doorbell. Kept apart from the clock, the
/// doorbell and the CPU so that the policy is tested alone.
#[derive(Debug)]
pub struct Waiting {
    polls: u64,
    /// When the wait reached 64 polls: the clock is read only from then on, every 64 polls, so
    /// short waits never read it.
    started: Option<Instant>,
    budget: Duration,
    oversubscribed: bool,
    yield_every: u64,
    /// Whether the wait slept at least once (what [`WaitPolicy::learn`] learns from).
    pub slept: bool,
}

/// What a waiting thread does after a poll that found nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Poll again, after returning to the home CPU (`go_home`) and pausing as `pause` says.
    Poll { go_home: bool, pause: Pause },
    /// The budget is spent: sleep on the doorbell.
    Sleep,
}

/// The pause between two polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// None: with a core of its own a thread polls back to back, since a `pause` instruction
    /// can last longer than a poll and would delay every message that arrives meanwhile.
    None,
    /// A spin-loop hint (oversubscribed, between two yields).
    Spin,
    /// Give the core to another runnable rank (oversubscribed).
    Yield,
}

impl Waiting {
    pub fn new(policy: &WaitPolicy) -> Waiting {
        Waiting {
            polls: 0,
            started: None,
            budget: policy.budget(),
            oversubscribed: policy.yield_between_polls,
            yield_every: policy.yield_every,
            slept: false,
        }
    }

    /// Decides what follows a poll that found nothing; `now` is called only on every 64th poll.
    pub fn after_idle_poll(&mut self, now: impl FnOnce() -> Instant) -> Next {
        self.polls += 1;
        let within_budget = !self.polls.is_multiple_of(64) || {
            let t = now();
            t.saturating_duration_since(*self.started.get_or_insert(t)) < self.budget
        };
        if !within_budget {
            return Next::Sleep;
        }
        if !self.oversubscribed {
            return Next::Poll { go_home: false, pause: Pause::None };
        }
        // The kernel may have moved this rank while it computed or polled.
        let go_home = self.polls % 16 == 1;
        let pause = if self.polls.is_multiple_of(self.yield_every) { Pause::Yield } else { Pause::Spin };
        Next::Poll { go_home, pause }
    }

    /// How long the wait has lasted, as far as it measured (zero for a wait of under 64 polls).
    pub fn waited(&self) -> Duration {
        self.started.map(|s| s.elapsed()).unwrap_or_default()
    }
}

/// The CPUs this host's ranks share: the whole that mpiexec bound them within when it bound them
/// (each rank's own mask then holds only its share), else this process's mask.
pub fn available_cores() -> usize {
    let bound = std::env::var(baton_settings::protocol::HOST_CPUS.name).ok().and_then(|v| v.trim().parse().ok());
    match bound {
        Some(n) if n >= 1 => n,
        _ => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    }
}

impl Mpi {
    /// Runs one progress pass and wakes local sleepers if a request completed.
    pub(super) fn progress_locked(&self, st: &mut State) {
        st.engine.completed_any = false;
        st.progress();
        if st.engine.completed_any {
            self.wake_sleepers();
        }
    }

    /// Other threads of this process may sleep on the doorbell waiting for what just completed.
    pub(crate) fn wake_sleepers(&self) {
        if self.app_sleepers.load(Ordering::SeqCst) != 0 {
            self.bell.ring_if_sleeping();
        }
    }

    /// Ends the job over a transport failure (a peer's connection broke or never came up).
    pub(super) fn check_fatal(&self, st: &State) {
        if let Some(msg) = st.fatal() {
            self.abort(1, &format!("baton: {msg}"));
        }
    }

    /// Makes progress once (for `MPI_Test*`, `MPI_Iprobe`).
    pub fn poll(&self) {
        self.progress_colls();
        let idle = {
            let mut st = self.lock();
            self.progress_locked(&mut st);
            // An application that only tests never sleeps: look for vanished processes of
            // other jobs now and then (a clock read per poll, only while connected to any).
            if self.dpm.connected() {
                let now = now_nanos();
                if now.wrapping_sub(self.lost_checked.load(Ordering::Relaxed)) > 20_000_000 {
                    self.lost_checked.store(now, Ordering::Relaxed);
                    if self.check_lost(&mut st) {
                        self.wake_sleepers();
                    }
                }
            }
            !st.engine.completed_any
        };
        // With more ranks than cores, an application polling with MPI_Test would otherwise keep
        // the core from the ranks it waits for (seconds per collective at 8 ranks on 2 cores).
        if idle && self.policy.yield_between_polls {
            std::thread::yield_now();
        }
    }

    /// Blocks until `f` returns a value, progressing all communication meanwhile.
    pub(crate) fn block<T>(&self, mut f: impl FnMut(&mut State) -> Option<T>) -> T {
        let mut w = Waiting::new(&self.policy);
        self.enter_block();
        loop {
            self.progress_colls();
            {
                let mut st = self.lock();
                self.progress_locked(&mut st);
                if let Some(v) = f(&mut st) {
                    self.leave_block(&mut st);
                    drop(st);
                    self.policy.learn(w.waited(), w.slept);
                    return v;
                }
            }
            match w.after_idle_poll(Instant::now) {
                Next::Poll { go_home, pause } => {
                    if go_home {
                        self.policy.go_home();
                    }
                    match pause {
                        Pause::Yield => std::thread::yield_now(),
                        Pause::Spin => std::hint::spin_loop(),
                        Pause::None => {}
                    }
                    continue;
                }
                Next::Sleep => {}
            }
            let ctl = self.bell.ctl();
            self.app_sleepers.fetch_add(1, Ordering::SeqCst);
            ctl.sleepers.fetch_add(1, Ordering::SeqCst);
            let seq = ctl.bell.load(Ordering::SeqCst);
            // Processes of other jobs ring our inbox's doorbell instead.
            let inbox = self.inbox.get();
            let seq2 = inbox.map(|ib| {
                ib.ctl().sleepers.fetch_add(1, Ordering::SeqCst);
                ib.ctl().bell.load(Ordering::SeqCst)
            });
            let unsleep = || {
                ctl.sleepers.fetch_sub(1, Ordering::SeqCst);
                self.app_sleepers.fetch_sub(1, Ordering::SeqCst);
                if let Some(ib) = inbox {
                    ib.ctl().sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            };
            // A collective in flight may be able to move on with what has already arrived.
            self.progress_colls();
            let mut tcp_armed = false;
            let ready = {
                let mut st = self.lock();
                self.progress_locked(&mut st);
                if let Some(v) = f(&mut st) {
                    unsleep();
                    self.leave_block(&mut st);
                    drop(st);
                    self.policy.learn(w.waited(), w.slept);
                    return v;
                }
                self.check_fatal(&st);
                if self.check_lost(&mut st) {
                    unsleep();
                    continue;
                }
                // Frames queued for a full ring or socket, or being streamed, need polling, not
                // a doorbell.
                let ready = st.frames_waiting() || st.engine.has_outgoing() || st.fabric.busy();
                if !ready {
                    tcp_armed = st.arm_tcp();
                }
                ready
            };
            if ready {
                unsleep();
                std::thread::yield_now();
                continue;
            }
            match (inbox, seq2) {
                (Some(ib), Some(s2)) => {
                    futex_wait_any(&[(&ctl.bell, seq), (&ib.ctl().bell, s2)], Duration::from_millis(100))
                }
                _ => futex_wait(&ctl.bell, seq, Duration::from_millis(100)),
            }
            unsleep();
            w.slept = true;
            // A wake-up places the sleeper next to the CPU that woke it.
            self.policy.go_home();
            if tcp_armed {
                let mut st = self.lock();
                if ctl.sleepers.load(Ordering::SeqCst) == 0 {
                    st.unwatch_tcp();
                }
            }
        }
    }

    /// Waits for a request that has probably not completed yet (a receive just posted): the
    /// first pass of the wait loop both makes progress and checks it.
    pub fn wait_pending(&self, id: ReqId) -> (Status, Option<Vec<u8>>) {
        self.block(|st| take_completed(st, id))
    }

    /// Waits for request `id` and releases it, returning its status.
    pub fn wait(&self, id: ReqId) -> (Status, Option<Vec<u8>>) {
        // Eager sends are usually complete on return: no progress pass needed.
        if let Some(out) = take_completed(&mut self.lock(), id) {
            return out;
        }
        self.wait_pending(id)
    }
}

/// The status (and owned data) of request `id` if it is complete, releasing it.
pub(super) fn take_completed(st: &mut State, id: ReqId) -> Option<(Status, Option<Vec<u8>>)> {
    let r = st.engine.get_mut(id)?;
    if !r.complete {
        return None;
    }
    let out = (r.status, r.owned.take());
    st.engine.release(id);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::Placement;
    use super::{Next, Pause, WaitPolicy, Waiting};
    use std::time::{Duration, Instant};

    fn policy(oversubscribed: bool) -> WaitPolicy {
        WaitPolicy::new(Duration::from_micros(200), Duration::from_millis(5), oversubscribed, 4)
    }

    #[test]
    fn short_waits_poll_back_to_back_and_never_read_the_clock() {
        let p = policy(false);
        let mut w = Waiting::new(&p);
        for _ in 0..63 {
            let next = w.after_idle_poll(|| panic!("the clock is read before the 64th poll"));
            assert_eq!(next, Next::Poll { go_home: false, pause: Pause::None });
        }
        assert_eq!(w.waited(), Duration::ZERO);
    }

    #[test]
    fn the_wait_sleeps_once_the_budget_is_spent() {
        let p = policy(false);
        let mut w = Waiting::new(&p);
        let t0 = Instant::now();
        let mut clock = t0;
        let mut reads = 0;
        let mut polls = 0;
        loop {
            polls += 1;
            let next = w.after_idle_poll(|| {
                reads += 1;
                clock
            });
            if next == Next::Sleep {
                break;
            }
            // Each poll takes a microsecond of the fake clock.
            clock += Duration::from_micros(1);
            assert!(polls < 10_000, "never slept");
        }
        // The clock starts at poll 64 and is read every 64 polls; the budget is 200 µs.
        assert_eq!(reads, polls / 64);
        assert!(clock - t0 >= Duration::from_micros(200 + 63), "slept after {:?}", clock - t0);
        assert!(clock - t0 < Duration::from_micros(200 + 63 + 64));
    }

    #[test]
    fn oversubscribed_waits_yield_and_go_home_on_their_cadence() {
        let p = policy(true);
        let mut w = Waiting::new(&p);
        let now = Instant::now();
        let steps: Vec<Next> = (0..32).map(|_| w.after_idle_poll(|| now)).collect();
        for (i, n) in steps.iter().enumerate() {
            let poll = i as u64 + 1;
            let want_pause = if poll.is_multiple_of(4) { Pause::Yield } else { Pause::Spin };
            assert_eq!(*n, Next::Poll { go_home: poll % 16 == 1, pause: want_pause }, "poll {poll}");
        }
    }

    #[test]
    fn the_budget_follows_waits_that_slept_and_decays_after_short_ones() {
        let p = policy(false);
        assert_eq!(p.budget(), Duration::from_micros(200));
        // A wait that ended only after sleeping raises the budget to twice its length...
        p.learn(Duration::from_micros(700), true);
        assert_eq!(p.budget(), Duration::from_micros(1400));
        // ...never lowers it, and never beyond the ceiling.
        p.learn(Duration::from_micros(100), true);
        assert_eq!(p.budget(), Duration::from_micros(1400));
        p.learn(Duration::from_secs(1), true);
        assert_eq!(p.budget(), Duration::from_millis(5));
        // A wait of the budget's order changes nothing; far shorter ones let it decay to the floor.
        p.learn(Duration::from_millis(1), false);
        assert_eq!(p.budget(), Duration::from_millis(5));
        for _ in 0..1000 {
            p.learn(Duration::from_micros(1), false);
        }
        assert_eq!(p.budget(), Duration::from_micros(200));
    }

    #[test]
    fn a_ceiling_below_the_floor_is_raised_to_it() {
        let p = WaitPolicy::new(Duration::from_micros(300), Duration::from_micros(100), false, 0);
        p.learn(Duration::from_millis(10), true);
        assert_eq!(p.budget(), Duration::from_micros(300));
        assert_eq!(p.yield_every, 1);
    }

    #[test]
    pub(super) fn cyclic_puts_rank_neighbours_on_different_cpus() {
        let cpus = [0, 1];
        let homes: Vec<_> = (0..8).map(|i| Placement::Cyclic.cpu_for(i, 8, &cpus).unwrap()).collect();
        assert_eq!(homes, [0, 1, 0, 1, 0, 1, 0, 1]);
        // Only the allowed CPUs are used, in the order given.
        let homes: Vec<_> = (0..5).map(|i| Placement::Cyclic.cpu_for(i, 5, &[2, 5, 7]).unwrap()).collect();
        assert_eq!(homes, [2, 5, 7, 2, 5]);
    }

    #[test]
    pub(super) fn block_fills_each_cpu_with_consecutive_ranks() {
        let homes: Vec<_> = (0..8).map(|i| Placement::Block.cpu_for(i, 8, &[0, 1]).unwrap()).collect();
        assert_eq!(homes, [0, 0, 0, 0, 1, 1, 1, 1]);
        // Uneven counts differ by at most one per CPU.
        let homes: Vec<_> = (0..5).map(|i| Placement::Block.cpu_for(i, 5, &[0, 1]).unwrap()).collect();
        assert_eq!(homes, [0, 0, 0, 1, 1]);
        // An index past the count (a stale or odd table) still lands on an allowed CPU.
        assert_eq!(Placement::Block.cpu_for(9, 5, &[0, 1]), Some(1));
    }

    #[test]
    pub(super) fn no_home_without_a_choice_to_make() {
        assert_eq!(Placement::Off.cpu_for(3, 8, &[0, 1]), None);
        assert_eq!(Placement::Cyclic.cpu_for(3, 8, &[4]), None);
        assert_eq!(Placement::Block.cpu_for(0, 0, &[0, 1]), None);
        assert_eq!(Placement::Cyclic.cpu_for(0, 4, &[]), None);
    }
}
