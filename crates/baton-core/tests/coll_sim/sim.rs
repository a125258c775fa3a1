//! The in-memory network between the ranks' engines ([`Wire`], seen by each process through a
//! [`Link`]) in one of three protocol settings ([`Proto`]), and the driver ([`Sim`]) that advances
//! every rank's schedules and delivers frames in an order drawn from a seed.

use crate::buffers::mix;
use crate::common::{read_into, read_into_slice, rings, Frame, Link, Rings};
use crate::CTX;
use baton_core::coll::schedule::Schedule;
use baton_core::comm::Comm;
use baton_core::engine::{Engine, Net, ProcIdx, Sender};
use baton_core::group::Group;
use baton_core::progress::EngineAccess;
use baton_transport::frame::{Header, Kind};
use baton_transport::mem::UserBuf;
use std::cell::RefCell;
use std::sync::Arc;

/// Wire settings, one per protocol family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// Every message travels whole in one frame.
    Eager,
    /// Messages above 64 bytes go by rendezvous and the receiver reads the sender's memory.
    Read,
    /// Messages above 64 bytes go by rendezvous, reads are refused: the sender streams `Data`
    /// frames of 100 bytes (not a multiple of any element) through rings of 4 frames.
    Stream,
}

pub const PROTOS: [Proto; 3] = [Proto::Eager, Proto::Read, Proto::Stream];

/// A rendezvous buffer the sender advertised with `Rts` and the receiver has not answered yet.
struct Exposed {
    owner: ProcIdx,
    id: u64,
    addr: u64,
    len: u64,
}

pub struct Wire {
    eager: usize,
    max_frame: usize,
    read_ok: bool,
    /// Frames one ring holds (per ordered pair of processes).
    cap: usize,
    /// `rings[from][to]`.
    rings: Rings,
    exposed: Vec<Exposed>,
    /// Frames pushed, by kind.
    kinds: [u64; 8],
    pushed: u64,
    delivered: u64,
    /// Pushes refused for lack of ring space.
    pub refused: u64,
}

impl Wire {
    pub fn new(n: usize, proto: Proto) -> Wire {
        let (eager, max_frame, read_ok, cap) = match proto {
            Proto::Eager => (1 << 24, 1 << 24, true, usize::MAX),
            Proto::Read => (64, 1 << 16, true, usize::MAX),
            Proto::Stream => (64, 100, false, 4),
        };
        Wire {
            eager,
            max_frame,
            read_ok,
            cap,
            rings: rings(n),
            exposed: Vec::new(),
            kinds: [0; 8],
            pushed: 0,
            delivered: 0,
            refused: 0,
        }
    }

    /// The `n` bytes at `addr` of process `owner`, which must lie in a buffer it advertised and
    /// has not seen answered.
    fn remote(&self, owner: ProcIdx, addr: u64, n: usize) -> Option<&[u8]> {
        if !self.read_ok {
            return None;
        }
        if n == 0 {
            return Some(&[]);
        }
        let ok = self.exposed.iter().any(|e| e.owner == owner && addr >= e.addr && addr + n as u64 <= e.addr + e.len);
        assert!(ok, "read of {n} bytes at {addr:#x} of process {owner}, outside any advertised rendezvous buffer");
        // SAFETY: `[addr, addr+n)` lies in a buffer that `owner` advertised with `Rts` for a send
        // that has not been answered (`Fin` or `Cts` remove the entry): that send request holds
        // the memory (an `Arc<Scratch>`, a packed `Vec`, or a test buffer alive until every
        // schedule completes) and its schedule does not touch it before the send completes. The
        // simulation is single-threaded and the reader's destination is another rank's memory.
        Some(unsafe { std::slice::from_raw_parts(addr as usize as *const u8, n) })
    }
}

impl Net for Link<'_, Wire> {
    fn try_send(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        let me = self.me;
        let len = payload.len();
        assert_ne!(me, to, "a schedule sent to itself");
        if self.w.rings[me as usize][to as usize].len() >= self.w.cap {
            self.w.refused += 1;
            return false;
        }
        assert!(len <= self.w.max_frame, "frame of {len} bytes above the frame limit {}", self.w.max_frame);
        match h.kind {
            Kind::Rts => self.w.exposed.push(Exposed { owner: me, id: h.id, addr: h.aux, len: h.len }),
            Kind::Fin | Kind::Cts => {
                let at = self.w.exposed.iter().position(|e| e.owner == to && e.id == h.id);
                let at = at.unwrap_or_else(|| panic!("{:?} from {me} answers no rendezvous of {to}", h.kind));
                self.w.exposed.swap_remove(at);
            }
            _ => {}
        }
        let v = payload.to_vec();
        self.w.kinds[h.kind as usize] += 1;
        self.w.pushed += 1;
        self.w.rings[me as usize][to as usize].push_back((*h, v));
        true
    }

    fn max_frame(&self, _to: ProcIdx) -> usize {
        self.w.max_frame
    }

    fn eager_limit(&self, _to: ProcIdx, _sender: Sender) -> usize {
        self.w.eager
    }

    fn read_remote(&mut self, from: ProcIdx, addr: u64, dst: &UserBuf) -> bool {
        read_into(self.w.remote(from, addr, dst.len()), dst)
    }

    fn read_remote_into(&mut self, from: ProcIdx, addr: u64, dst: &mut [u8]) -> bool {
        read_into_slice(self.w.remote(from, addr, dst.len()), dst)
    }
}

pub struct World {
    /// By process index.
    eng: Vec<Engine>,
    pub wire: Wire,
}

/// One rank's engine, lent to its schedules.
struct At<'a> {
    world: &'a RefCell<World>,
    me: ProcIdx,
}

impl EngineAccess for At<'_> {
    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine, &mut dyn Net) -> R) -> R {
        // A schedule that asked again while holding the engine would panic here (the runtime
        // would deadlock on its mutex instead).
        let mut w = self.world.borrow_mut();
        let World { eng, wire } = &mut *w;
        f(&mut eng[self.me as usize], &mut Link { w: wire, me: self.me })
    }
}

/// The driver's choices (rank order, delivery bursts) from a seed: [`mix`] of a counter, as
/// splitmix64 draws its sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// n ranks: engines, the wire, and each rank's communicator.
pub struct Sim {
    n: usize,
    pub world: RefCell<World>,
    comms: Vec<Arc<Comm>>,
    /// The process of each rank: reversed, so that a rank mistaken for a process shows.
    procs: Vec<ProcIdx>,
    rng: RefCell<Rng>,
}

impl Sim {
    pub fn new(n: usize, proto: Proto, seed: u64) -> Sim {
        let procs: Vec<ProcIdx> = (0..n).rev().map(|p| p as ProcIdx).collect();
        let group = Arc::new(Group::new(procs.clone()));
        let comms = (0..n).map(|r| Arc::new(Comm::new(CTX, group.clone(), r as i32))).collect();
        Sim {
            n,
            world: RefCell::new(World { eng: (0..n).map(|_| Engine::new()).collect(), wire: Wire::new(n, proto) }),
            comms,
            procs,
            rng: RefCell::new(Rng(mix(seed))),
        }
    }

    /// A schedule with its tag drawn now, as a nonblocking call's is: the simulation may run
    /// several at once and start them in any order, which blocking tags (drawn when a run
    /// starts) would not survive.
    pub fn sched(&self, rank: usize, call: &'static str) -> Schedule {
        let mut s = Schedule::new(self.comms[rank].clone(), call);
        s.nonblocking();
        s
    }

    /// Frames pushed so far of `kind`.
    pub fn count(&self, kind: Kind) -> u64 {
        self.world.borrow().wire.kinds[kind as usize]
    }

    /// One schedule of `call` per rank, rank r's filled in by `build(r, schedule)`.
    pub fn scheds(&self, call: &'static str, mut build: impl FnMut(usize, &mut Schedule)) -> Vec<Schedule> {
        (0..self.n)
            .map(|r| {
                let mut s = self.sched(r, call);
                build(r, &mut s);
                s
            })
            .collect()
    }

    /// Runs the schedules [`Sim::scheds`] builds and fails the case on any error a rank reports.
    pub fn run_ok(&self, label: &str, call: &'static str, build: impl FnMut(usize, &mut Schedule)) {
        check_no_error(label, &mut self.run(label, self.scheds(call, build)));
    }

    /// Runs one schedule per rank to completion.
    pub fn run(&self, label: &str, scheds: Vec<Schedule>) -> Vec<Schedule> {
        let mut jobs: Vec<Vec<Schedule>> = scheds.into_iter().map(|s| vec![s]).collect();
        self.run_all(label, &mut jobs, &vec![0; self.n]);
        jobs.into_iter().map(|mut v| v.pop().unwrap()).collect()
    }

    /// Runs every rank's schedules, all in flight together, until all complete; rank r joins
    /// at pass `start[r]`. Each pass visits the ranks in a shuffled order; a rank advances its
    /// schedules (odd ranks in reverse order, all rotated by the rank), then its engine pushes
    /// what waits; then a burst of frames is delivered from every ring. Returns the pass in
    /// which each schedule completed. Panics on a deadlock: a pass in which nothing moved.
    pub fn run_all(&self, label: &str, jobs: &mut [Vec<Schedule>], start: &[usize]) -> Vec<Vec<usize>> {
        let n = self.n;
        let mut finished: Vec<Vec<Option<usize>>> = jobs.iter().map(|j| vec![None; j.len()]).collect();
        let mut order: Vec<usize> = (0..n).collect();
        for pass in 0..1_000_000 {
            let before = {
                let w = self.world.borrow();
                (w.wire.pushed, w.wire.delivered)
            };
            let mut moved = false;
            self.rng.borrow_mut().shuffle(&mut order);
            for &r in &order {
                if pass < start[r] {
                    moved = true;
                    continue;
                }
                let port = At { world: &self.world, me: self.procs[r] };
                let k = jobs[r].len();
                for j in 0..k {
                    let i = if r % 2 == 1 { (k - 1 - j + r) % k } else { (j + r) % k };
                    if finished[r][i].is_none() && jobs[r][i].progress(&port) {
                        finished[r][i] = Some(pass);
                        moved = true;
                    }
                }
                let mut w = self.world.borrow_mut();
                let World { eng, wire } = &mut *w;
                eng[self.procs[r] as usize].progress(&mut Link { w: wire, me: self.procs[r] });
            }
            self.deliver();
            if finished.iter().flatten().all(|f| f.is_some()) {
                self.check_quiet(label);
                return finished.into_iter().map(|v| v.into_iter().map(|f| f.unwrap()).collect()).collect();
            }
            let after = {
                let w = self.world.borrow();
                (w.wire.pushed, w.wire.delivered)
            };
            if !moved && before == after {
                let w = self.world.borrow();
                let mut stuck = Vec::new();
                for r in 0..n {
                    for (i, s) in jobs[r].iter().enumerate() {
                        if finished[r][i].is_none() {
                            let e = &w.eng[self.procs[r] as usize];
                            stuck.push(format!("rank {r} (schedule {i}): {}", s.describe(e)));
                        }
                    }
                }
                panic!("deadlock in {label} at pass {pass}, nothing can move:\n  {}", stuck.join("\n  "));
            }
        }
        panic!("{label}: no end after a million passes");
    }

    /// Delivers a burst (1, 2 or all frames, drawn per pass) from every ring, rings in a
    /// shuffled order. Frames are taken first, so answers wait for the next pass.
    fn deliver(&self) {
        let mut rng = self.rng.borrow_mut();
        let burst = [1, 2, usize::MAX][rng.below(3)];
        let mut w = self.world.borrow_mut();
        let World { eng, wire } = &mut *w;
        let mut batch: Vec<(ProcIdx, ProcIdx, Vec<Frame>)> = Vec::new();
        for from in 0..self.n {
            for to in 0..self.n {
                let ring = &mut wire.rings[from][to];
                if !ring.is_empty() {
                    let k = burst.min(ring.len());
                    batch.push((from as ProcIdx, to as ProcIdx, ring.drain(..k).collect()));
                }
            }
        }
        rng.shuffle(&mut batch);
        for (from, to, frames) in batch {
            for (h, p) in frames {
                wire.delivered += 1;
                eng[to as usize].on_frame(&mut Link { w: wire, me: to }, from, &h, &p);
            }
        }
    }

    /// After a run: nothing left on the wire, unmatched, unanswered or queued.
    fn check_quiet(&self, label: &str) {
        let w = self.world.borrow();
        let left: usize = w.wire.rings.iter().flatten().map(|q| q.len()).sum();
        assert_eq!(left, 0, "{label}: {left} frames still on the wire after every schedule completed");
        assert!(w.wire.exposed.is_empty(), "{label}: a rendezvous was never answered");
        for (p, e) in w.eng.iter().enumerate() {
            assert_eq!(e.unexpected_len(), 0, "{label}: process {p} holds messages nobody received");
            assert!(!e.has_outgoing(), "{label}: process {p} still has frames to send");
        }
    }
}

/// Fails the case when a schedule reports an error.
pub fn check_no_error(label: &str, scheds: &mut [Schedule]) {
    for (r, s) in scheds.iter_mut().enumerate() {
        if let Err(e) = s.take_error() {
            panic!("{label}: rank {r} reported {}", e.msg);
        }
    }
}
