//! Deterministic tests of every collective algorithm, without processes or threads: one
//! `Engine` per rank, an in-memory network between them, one `Comm` per rank over a shared
//! group, and a driver that advances every rank's schedules in turn, delivering frames, until
//! all complete (or reports a deadlock: which ranks, which round, which messages).
//!
//! Results are checked against values computed here from rank and index alone, whole buffers
//! at a time, so stray writes show up as well as wrong values. Three wire settings cover the
//! protocols: everything eager; a small eager limit with single-copy reads (`Rts`, read,
//! `Fin`); and a small eager limit with reads refused, small frames and short rings (`Rts`,
//! `Cts`, `Data` frames, and sends queued behind full rings). Buffers are the schedule-owned
//! kind (`Region::Scratch`), contiguous application memory, strided application memory
//! (packed and unpacked on the way), or a mix of the three across ranks. Consecutive cases
//! take the combinations of wire and memory in turn, and the largest size of each case runs
//! on every wire, so every algorithm meets every protocol. The driver's choices (rank order,
//! delivery bursts) come from a seed printed with each case, so any failure replays exactly.

use baton_core::coll::algo::{self, Algo, Coll};
use baton_core::coll::schedule::{Loc, Region, Schedule};
use baton_core::coll::Reducer;
use baton_core::comm::Comm;
use baton_core::datatype::Layout;
use baton_core::engine::{Engine, Net, ProcIdx, Sender};
use baton_core::group::Group;
use baton_core::progress::EngineAccess;
use baton_transport::frame::{Header, Kind};
use baton_transport::mem::{Scratch, UserBuf};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;

/// Communicator sizes every algorithm runs on: all small ones, powers of two and their
/// neighbours (folding, partial last rows of the mesh).
const NS: [usize; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17];
/// Bytes application memory holds where no data belongs (gaps of strided buffers).
const GUARD: u8 = 0xEE;
const CTX: u64 = 0x0c0f_fee0_0000_0000;
/// "A few KiB": bytes of a block or buffer, elements of a reduction, elements per rank of a
/// reduce-scatter.
const BIG_BYTES: usize = 3001;
const BIG_ELEMS: usize = 320;
const BIG_BLOCK: usize = 100;

// ---------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------

/// Wire settings, one per protocol family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    /// Every message travels whole in one frame.
    Eager,
    /// Messages above 64 bytes go by rendezvous and the receiver reads the sender's memory.
    Read,
    /// Messages above 64 bytes go by rendezvous, reads are refused: the sender streams `Data`
    /// frames of 100 bytes (not a multiple of any element) through rings of 4 frames.
    Stream,
}

const PROTOS: [Proto; 3] = [Proto::Eager, Proto::Read, Proto::Stream];

type Frame = (Header, Vec<u8>);

/// A rendezvous buffer the sender advertised with `Rts` and the receiver has not answered yet.
struct Exposed {
    owner: ProcIdx,
    id: u64,
    addr: u64,
    len: u64,
}

struct Wire {
    eager: usize,
    max_frame: usize,
    read_ok: bool,
    /// Frames one ring holds (per ordered pair of processes).
    cap: usize,
    /// `rings[from][to]`.
    rings: Vec<Vec<VecDeque<Frame>>>,
    exposed: Vec<Exposed>,
    /// Frames pushed, by kind.
    kinds: [u64; 8],
    pushed: u64,
    delivered: u64,
    /// Pushes refused for lack of ring space.
    refused: u64,
}

impl Wire {
    fn new(n: usize, proto: Proto) -> Wire {
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
            rings: (0..n).map(|_| (0..n).map(|_| VecDeque::new()).collect()).collect(),
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

/// One process's view of the wire.
struct Link<'a> {
    w: &'a mut Wire,
    me: ProcIdx,
}

impl Net for Link<'_> {
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
        match self.w.remote(from, addr, dst.len()) {
            Some(src) => {
                assert_eq!(dst.write(0, src), src.len());
                true
            }
            None => false,
        }
    }

    fn read_remote_into(&mut self, from: ProcIdx, addr: u64, dst: &mut [u8]) -> bool {
        match self.w.remote(from, addr, dst.len()) {
            Some(src) => {
                dst.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

struct World {
    /// By process index.
    eng: Vec<Engine>,
    wire: Wire,
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

/// xorshift64*: the driver's choices (rank order, delivery bursts) from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
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
struct Sim {
    n: usize,
    world: RefCell<World>,
    comms: Vec<Arc<Comm>>,
    /// The process of each rank: reversed, so that a rank mistaken for a process shows.
    procs: Vec<ProcIdx>,
    rng: RefCell<Rng>,
}

impl Sim {
    fn new(n: usize, proto: Proto, seed: u64) -> Sim {
        let procs: Vec<ProcIdx> = (0..n).rev().map(|p| p as ProcIdx).collect();
        let group = Arc::new(Group::new(procs.clone()));
        let comms = (0..n).map(|r| Arc::new(Comm::new(CTX, group.clone(), r as i32))).collect();
        Sim {
            n,
            world: RefCell::new(World { eng: (0..n).map(|_| Engine::new()).collect(), wire: Wire::new(n, proto) }),
            comms,
            procs,
            rng: RefCell::new(Rng(mix(seed) | 1)),
        }
    }

    fn sched(&self, rank: usize, call: &'static str) -> Schedule {
        Schedule::new(self.comms[rank].clone(), call)
    }

    /// Frames pushed so far of `kind`.
    fn count(&self, kind: Kind) -> u64 {
        self.world.borrow().wire.kinds[kind as usize]
    }

    /// Runs one schedule per rank to completion.
    fn run(&self, label: &str, scheds: Vec<Schedule>) -> Vec<Schedule> {
        let mut jobs: Vec<Vec<Schedule>> = scheds.into_iter().map(|s| vec![s]).collect();
        self.run_all(label, &mut jobs, &vec![0; self.n]);
        jobs.into_iter().map(|mut v| v.pop().unwrap()).collect()
    }

    /// Runs every rank's schedules, all in flight together, until all complete; rank r joins
    /// at pass `start[r]`. Each pass visits the ranks in a shuffled order; a rank advances its
    /// schedules (odd ranks in reverse order, all rotated by the rank), then its engine pushes
    /// what waits; then a burst of frames is delivered from every ring. Returns the pass in
    /// which each schedule completed. Panics on a deadlock: a pass in which nothing moved.
    fn run_all(&self, label: &str, jobs: &mut [Vec<Schedule>], start: &[usize]) -> Vec<Vec<usize>> {
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

// ---------------------------------------------------------------------------------------------
// Buffers and values
// ---------------------------------------------------------------------------------------------

/// splitmix64.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn word(a: usize, b: usize, i: usize) -> u64 {
    mix(((a as u64) << 44) ^ ((b as u64) << 24) ^ i as u64)
}

/// `len` bytes that only (a, b) produces.
fn pattern(a: usize, b: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (word(a, b, i) >> 29) as u8).collect()
}

/// What a buffer starts with where the collective writes: something no result equals.
fn junk(rank: usize, len: usize) -> Vec<u8> {
    pattern(900 + rank, 77, len)
}

/// How a test buffer is presented to the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mem {
    /// `Region::Scratch`.
    Scratch,
    /// `Region::User` with a contiguous layout: used in place (single-copy reads into it).
    User,
    /// `Region::User` with 6-byte elements (3 bytes, a gap of 2, 3 bytes) every 11 bytes:
    /// packed on sending, unpacked on receiving, reductions through copies.
    Strided,
    /// Each buffer the next of the three kinds in turn, so ranks exchanging a message see it
    /// in different layouts (the same signature, as MPI allows).
    Mixed,
}

const MEMS: [Mem; 4] = [Mem::Scratch, Mem::User, Mem::Strided, Mem::Mixed];

thread_local! {
    /// Buffers made with `Mem::Mixed` on this thread (counted from the case number).
    static MIXED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn strided_layout() -> Arc<Layout> {
    let byte = Layout::basic("byte", 1);
    Arc::new(Layout::resized(&Layout::vector(2, 3, 5, &byte).unwrap(), 0, 11))
}

/// The packed byte at offset `w` of an 11-byte strided element, if `w` holds data.
fn strided_index(w: usize) -> Option<usize> {
    match w {
        0..=2 => Some(w),
        5..=7 => Some(w - 2),
        _ => None,
    }
}

/// A test buffer of `len` packed bytes. Its memory is a `Scratch` of the test's own, so that
/// engines and schedules may hold raw spans of it while the test keeps it alive.
struct TBuf {
    mem: Mem,
    len: usize,
    store: Arc<Scratch>,
    span: UserBuf,
    layout: Arc<Layout>,
}

impl TBuf {
    fn new(mem: Mem, data: &[u8]) -> TBuf {
        let mem = match mem {
            Mem::Mixed => MEMS[MIXED.with(|c| c.replace(c.get() + 1)) % 3],
            m => m,
        };
        let len = data.len();
        let (bytes, layout) = match mem {
            Mem::Strided => (len.div_ceil(6) * 11, strided_layout()),
            _ => (len, Arc::new(Layout::basic("byte", 1))),
        };
        let store = Arc::new(Scratch::new(bytes));
        store.write(0, &vec![GUARD; bytes]);
        // SAFETY: the span covers exactly `store`'s allocation, which this value keeps alive;
        // every test drops the schedules using a buffer before the buffer, and reads or writes
        // it only between runs, when no message is in flight.
        let span = unsafe { UserBuf::new(store.addr(), bytes) };
        let b = TBuf { mem, len, store, span, layout };
        b.set(data);
        b
    }

    fn set(&self, data: &[u8]) {
        assert_eq!(data.len(), self.len);
        match self.mem {
            Mem::Strided => self.layout.unpack_into(&self.span, 0, 0, data),
            _ => {
                self.store.write(0, data);
            }
        }
    }

    /// The packed bytes; for strided memory also checks that nothing wrote into the gaps.
    fn get(&self) -> Vec<u8> {
        match self.mem {
            Mem::Strided => {
                let raw = self.store.read(0, self.store.len());
                for (p, &b) in raw.iter().enumerate() {
                    let data = strided_index(p % 11).map(|k| p / 11 * 6 + k).is_some_and(|k| k < self.len);
                    assert!(data || b == GUARD, "a gap byte of a strided buffer was written (offset {p})");
                }
                let mut v = Vec::new();
                self.layout.pack_range(&self.span, 0, 0, self.len, &mut v);
                v
            }
            _ => self.store.read(0, self.len).to_vec(),
        }
    }

    /// The whole buffer as a new region of `s`.
    fn region(&self, s: &mut Schedule) -> Loc {
        let r = match self.mem {
            Mem::Scratch => Region::Scratch(self.store.clone()),
            _ => Region::User { span: self.span, base_off: 0, layout: self.layout.clone() },
        };
        s.region(r, self.len)
    }

    /// `[off, off+len)` as a region of its own (like each block of a `v` collective).
    fn window(&self, s: &mut Schedule, off: usize, len: usize) -> Loc {
        self.region(s).at(off, len)
    }
}

/// Consecutive blocks of `b` bytes of one window.
fn blocks(whole: Loc, n: usize, b: usize) -> Vec<Loc> {
    (0..n).map(|i| whole.at(i * b, b)).collect()
}

/// n blocks of `b` bytes back to back: offsets and buffer length.
fn uniform(n: usize, b: usize) -> (Vec<usize>, usize) {
    ((0..n).map(|i| i * b).collect(), n * b)
}

/// A scattered placement of blocks of the given sizes in one buffer: in reverse rank order,
/// each followed by a gap of 0-2 bytes. Returns the offsets and the buffer length.
fn placement(sizes: &[usize]) -> (Vec<usize>, usize) {
    let mut offs = vec![0; sizes.len()];
    let mut at = 0;
    for i in (0..sizes.len()).rev() {
        offs[i] = at;
        at += sizes[i] + i % 3;
    }
    (offs, at)
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

/// The operations: wrapping addition of u64 (commutative) and composition of affine maps
/// x -> a·x + b on (a, b) pairs of u64 (not commutative, so a result shows the rank order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sum,
    Affine,
}

const OPS: [Op; 2] = [Op::Sum, Op::Affine];

fn u64s(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

fn put(out: &mut [u8], words: impl IntoIterator<Item = u64>) {
    for (c, w) in out.chunks_exact_mut(8).zip(words) {
        c.copy_from_slice(&w.to_le_bytes());
    }
}

/// `(a, b) ∘ (c, d)`: x -> a·(c·x + d) + b.
fn compose(x: (u64, u64), y: (u64, u64)) -> (u64, u64) {
    (x.0.wrapping_mul(y.0), x.0.wrapping_mul(y.1).wrapping_add(x.1))
}

impl Op {
    fn unit(self) -> usize {
        match self {
            Op::Sum => 8,
            Op::Affine => 16,
        }
    }

    fn commutative(self) -> bool {
        self == Op::Sum
    }

    fn reducer(self) -> Reducer {
        let unit = self.unit();
        let f: Arc<baton_core::coll::ReduceFn> = match self {
            Op::Sum => Arc::new(move |input: &[u8], inout: &mut [u8]| {
                assert_eq!(input.len(), inout.len(), "a reduction over windows of different lengths");
                assert_eq!(inout.len() % unit, 0, "a reduction split inside an element");
                let sum: Vec<u64> = u64s(input).zip(u64s(inout)).map(|(a, b)| a.wrapping_add(b)).collect();
                put(inout, sum);
            }),
            Op::Affine => Arc::new(move |input: &[u8], inout: &mut [u8]| {
                assert_eq!(input.len(), inout.len(), "a reduction over windows of different lengths");
                assert_eq!(inout.len() % unit, 0, "a reduction split inside an element");
                let x: Vec<u64> = u64s(input).collect();
                let y: Vec<u64> = u64s(inout).collect();
                let out = x.chunks_exact(2).zip(y.chunks_exact(2)).flat_map(|(x, y)| {
                    let (a, b) = compose((x[0], x[1]), (y[0], y[1]));
                    [a, b]
                });
                put(inout, out.collect::<Vec<_>>());
            }),
        };
        Reducer { commutative: self.commutative(), unit, f }
    }

    /// Element `i` of rank `r`'s contribution, as u64 words.
    fn elem(self, r: usize, i: usize) -> Vec<u64> {
        match self {
            Op::Sum => vec![word(r, 5, i)],
            // Odd multipliers keep products odd: no information is lost mod 2^64.
            Op::Affine => vec![word(r, 6, i) | 1, word(r, 7, i)],
        }
    }

    /// Rank `r`'s `count` elements, packed.
    fn input(self, r: usize, count: usize) -> Vec<u8> {
        let mut v = vec![0u8; count * self.unit()];
        put(&mut v, (0..count).flat_map(|i| self.elem(r, i)));
        v
    }

    /// Elements `[first, first+count)` combined over ranks `lo..hi` in rank order.
    fn combined(self, lo: usize, hi: usize, first: usize, count: usize) -> Vec<u8> {
        assert!(lo < hi);
        let mut v = vec![0u8; count * self.unit()];
        put(
            &mut v,
            (first..first + count).flat_map(|i| {
                (lo + 1..hi).fold(self.elem(lo, i), |acc, r| {
                    let y = self.elem(r, i);
                    match self {
                        Op::Sum => vec![acc[0].wrapping_add(y[0])],
                        Op::Affine => {
                            let (a, b) = compose((acc[0], acc[1]), (y[0], y[1]));
                            vec![a, b]
                        }
                    }
                })
            }),
        );
        v
    }
}

// ---------------------------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------------------------

fn algo_of(name: &str) -> Algo {
    match name {
        "dissemination" => Algo::Dissemination,
        "binomial" => Algo::Binomial,
        "scatter_allgather" => Algo::ScatterAllgather,
        "recursive_doubling" => Algo::RecursiveDoubling,
        "rabenseifner" => Algo::Rabenseifner,
        "ring" => Algo::Ring,
        "reduce_bcast" => Algo::ReduceBcast,
        "linear" => Algo::Linear,
        "bruck" => Algo::Bruck,
        "pairwise" => Algo::Pairwise,
        "mesh" => Algo::Mesh,
        "reduce_scatterv" => Algo::ReduceScatterv,
        "recursive_halving" => Algo::RecursiveHalving,
        other => panic!("algorithm {other} is not covered by these tests: add it"),
    }
}

/// Every algorithm of `coll` that runs on messages (shared memory needs a real segment).
fn algos(coll: Coll) -> Vec<(&'static str, Algo)> {
    coll.algos().iter().filter(|&&a| a != "shm").map(|&a| (a, algo_of(a))).collect()
}

fn pow2(n: usize) -> bool {
    n.is_power_of_two()
}

/// Counts (bytes or elements): none, one, odd, fewer than n, a few more than n, a few KiB.
fn counts(n: usize, big: usize) -> Vec<usize> {
    let mut v = vec![0, 1, 7, n.saturating_sub(1), n + 3, big];
    v.sort_unstable();
    v.dedup();
    v
}

/// Every root at small n, else the ends and the middle.
fn roots(n: usize) -> Vec<usize> {
    if n <= 5 {
        (0..n).collect()
    } else {
        vec![0, 1, n / 2, n - 1]
    }
}

/// The wire, memory kind and driver seed of one run of a case.
struct Variant {
    proto: Proto,
    mem: Mem,
    seed: u64,
}

/// Numbers the runs of one test and gives each a variant: consecutive runs take every
/// combination of wire and memory in turn.
struct Matrix {
    name: &'static str,
    k: usize,
}

impl Matrix {
    fn new(name: &'static str) -> Matrix {
        Matrix { name, k: 0 }
    }

    /// Runs case `what` once, or once per wire with `every_wire` (the largest sizes, where
    /// the protocols differ most).
    fn case(&mut self, every_wire: bool, what: std::fmt::Arguments, mut f: impl FnMut(&Variant, &str)) {
        for _ in 0..if every_wire { PROTOS.len() } else { 1 } {
            let k = self.k;
            self.k += 1;
            let v = Variant { proto: PROTOS[k % 3], mem: MEMS[(k / 3) % MEMS.len()], seed: k as u64 };
            // Mixed memory depends on the case alone, whichever thread runs it.
            MIXED.with(|c| c.set(k));
            let label = format!("{} {what} [{:?} wire, {:?} memory, seed {}]", self.name, v.proto, v.mem, v.seed);
            f(&v, &label);
        }
    }
}

fn check_no_error(label: &str, scheds: &mut [Schedule]) {
    for (r, s) in scheds.iter_mut().enumerate() {
        if let Err(e) = s.take_error() {
            panic!("{label}: rank {r} reported {}", e.msg);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn barrier_waits_for_the_last_arrival() {
    let mut m = Matrix::new("barrier");
    for n in NS {
        for (name, a) in algos(Coll::Barrier) {
            for stagger in [0, 3] {
                m.case(true, format_args!("{name} n={n} stagger={stagger}"), |v, label| {
                    let sim = Sim::new(n, v.proto, v.seed);
                    let mut jobs: Vec<Vec<Schedule>> = (0..n)
                        .map(|r| {
                            let mut s = sim.sched(r, "MPI_Barrier");
                            algo::barrier(&mut s, a);
                            vec![s]
                        })
                        .collect();
                    // Arrivals in a scrambled rank order.
                    let start: Vec<usize> = (0..n).map(|r| stagger * ((r * 7 + 3) % n)).collect();
                    let done = sim.run_all(label, &mut jobs, &start);
                    let last = *start.iter().max().unwrap();
                    for (r, d) in done.iter().enumerate() {
                        assert!(
                            d[0] >= last,
                            "{label}: rank {r} left at pass {} before the last arrival at {last}",
                            d[0]
                        );
                    }
                });
            }
        }
    }
}

#[test]
fn bcast_every_algorithm() {
    let mut m = Matrix::new("bcast");
    for n in NS {
        for (name, a) in algos(Coll::Bcast) {
            for len in counts(n, BIG_BYTES) {
                for root in roots(n) {
                    m.case(len == BIG_BYTES, format_args!("{name} n={n} bytes={len} root={root}"), |v, label| {
                        let sim = Sim::new(n, v.proto, v.seed);
                        let bufs: Vec<TBuf> = (0..n)
                            .map(|r| TBuf::new(v.mem, &if r == root { pattern(root, 1, len) } else { junk(r, len) }))
                            .collect();
                        let scheds = (0..n)
                            .map(|r| {
                                let mut s = sim.sched(r, "MPI_Bcast");
                                let l = bufs[r].region(&mut s);
                                algo::bcast(&mut s, a, root as i32, l);
                                s
                            })
                            .collect();
                        check_no_error(label, &mut sim.run(label, scheds));
                        for (r, b) in bufs.iter().enumerate() {
                            assert!(b.get() == pattern(root, 1, len), "{label}: rank {r} holds the wrong bytes");
                        }
                    });
                }
            }
        }
    }
}

#[test]
fn reduce_every_algorithm() {
    let mut m = Matrix::new("reduce");
    for n in NS {
        for (name, a) in algos(Coll::Reduce) {
            for op in OPS {
                for count in counts(n, BIG_ELEMS) {
                    for root in roots(n) {
                        for in_place in [false, true] {
                            let what =
                                format_args!("{name} {op:?} n={n} count={count} root={root} in_place={in_place}");
                            m.case(count == BIG_ELEMS, what, |v, label| {
                                let sim = Sim::new(n, v.proto, v.seed);
                                let len = count * op.unit();
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, count))).collect();
                                let init = if in_place { op.input(root, count) } else { junk(root, len) };
                                let dst = TBuf::new(v.mem, &init);
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Reduce");
                                        s.set_reducer(op.reducer());
                                        let d = (r == root).then(|| dst.region(&mut s));
                                        let sl = match d {
                                            Some(d) if in_place => d,
                                            _ => src[r].region(&mut s),
                                        };
                                        algo::reduce(&mut s, a, root as i32, sl, d);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                assert!(dst.get() == op.combined(0, n, 0, count), "{label}: wrong result at the root");
                                for (r, b) in src.iter().enumerate() {
                                    assert!(b.get() == op.input(r, count), "{label}: rank {r}'s input was modified");
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn allreduce_every_algorithm() {
    let mut m = Matrix::new("allreduce");
    for n in NS {
        for (name, a) in algos(Coll::Allreduce) {
            for op in OPS {
                for count in counts(n, BIG_ELEMS) {
                    // Rabenseifner and the ring cut the vector into n pieces combined in the order
                    // they meet: commutative operations on at least n elements only.
                    if matches!(a, Algo::Rabenseifner | Algo::Ring) && !(op.commutative() && count >= n) {
                        continue;
                    }
                    for in_place in [false, true] {
                        let what = format_args!("{name} {op:?} n={n} count={count} in_place={in_place}");
                        m.case(count == BIG_ELEMS, what, |v, label| {
                            let sim = Sim::new(n, v.proto, v.seed);
                            let len = count * op.unit();
                            let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, count))).collect();
                            let dst: Vec<TBuf> = (0..n)
                                .map(|r| TBuf::new(v.mem, &if in_place { op.input(r, count) } else { junk(r, len) }))
                                .collect();
                            let scheds = (0..n)
                                .map(|r| {
                                    let mut s = sim.sched(r, "MPI_Allreduce");
                                    s.set_reducer(op.reducer());
                                    let d = dst[r].region(&mut s);
                                    let sl = if in_place { d } else { src[r].region(&mut s) };
                                    algo::allreduce(&mut s, a, sl, d);
                                    s
                                })
                                .collect();
                            check_no_error(label, &mut sim.run(label, scheds));
                            let want = op.combined(0, n, 0, count);
                            for r in 0..n {
                                assert!(dst[r].get() == want, "{label}: wrong result at rank {r}");
                                assert!(src[r].get() == op.input(r, count), "{label}: rank {r}'s input was modified");
                            }
                        });
                    }
                }
            }
        }
    }
}

/// Gather (uniform blocks, every algorithm) and Gatherv (blocks of assorted sizes, scattered
/// in the root's buffer, each its own region; linear, the one algorithm for it).
#[test]
fn gather_every_algorithm() {
    let mut m = Matrix::new("gather");
    for n in NS {
        for (name, a) in algos(Coll::Gather) {
            for v_form in [false, true] {
                if v_form && a == Algo::Binomial {
                    continue;
                }
                let form = if v_form { "gatherv" } else { "gather" };
                for b in counts(n, BIG_BYTES) {
                    for root in roots(n) {
                        for in_place in [false, true] {
                            let what = format_args!("{form} {name} n={n} bytes={b} root={root} in_place={in_place}");
                            m.case(b == BIG_BYTES, what, |v, label| {
                                let sizes: Vec<usize> =
                                    (0..n).map(|i| if v_form { (i * 5 + b) % 11 } else { b }).collect();
                                let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                                let mine = |r: usize| pattern(r, 2, sizes[r]);
                                let mut init = junk(root, total);
                                if in_place {
                                    init[offs[root]..offs[root] + sizes[root]].copy_from_slice(&mine(root));
                                }
                                let mut want = init.clone();
                                for i in 0..n {
                                    want[offs[i]..offs[i] + sizes[i]].copy_from_slice(&mine(i));
                                }
                                let sim = Sim::new(n, v.proto, v.seed);
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &mine(r))).collect();
                                let dst = TBuf::new(v.mem, &init);
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Gather");
                                        let bl: Vec<Loc> = if r != root {
                                            Vec::new()
                                        } else if v_form {
                                            (0..n).map(|i| dst.window(&mut s, offs[i], sizes[i])).collect()
                                        } else {
                                            blocks(dst.region(&mut s), n, b)
                                        };
                                        let sl = (!(in_place && r == root)).then(|| src[r].region(&mut s));
                                        algo::gather(&mut s, a, root as i32, sl, &bl, sizes[r]);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                assert!(dst.get() == want, "{label}: wrong bytes at the root");
                                for (r, s) in src.iter().enumerate() {
                                    assert!(s.get() == mine(r), "{label}: rank {r}'s input was modified");
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Scatter (uniform, every algorithm) and Scatterv (assorted sizes, linear).
#[test]
fn scatter_every_algorithm() {
    let mut m = Matrix::new("scatter");
    for n in NS {
        for (name, a) in algos(Coll::Scatter) {
            for v_form in [false, true] {
                if v_form && a == Algo::Binomial {
                    continue;
                }
                let form = if v_form { "scatterv" } else { "scatter" };
                for b in counts(n, BIG_BYTES) {
                    for root in roots(n) {
                        for in_place in [false, true] {
                            let what = format_args!("{form} {name} n={n} bytes={b} root={root} in_place={in_place}");
                            m.case(b == BIG_BYTES, what, |v, label| {
                                let sizes: Vec<usize> =
                                    (0..n).map(|i| if v_form { (i * 7 + b) % 13 } else { b }).collect();
                                let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                                let theirs = |r: usize| pattern(r, 3, sizes[r]);
                                let mut whole = junk(root, total);
                                for i in 0..n {
                                    whole[offs[i]..offs[i] + sizes[i]].copy_from_slice(&theirs(i));
                                }
                                let sim = Sim::new(n, v.proto, v.seed);
                                let src = TBuf::new(v.mem, &whole);
                                let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &junk(r, sizes[r]))).collect();
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Scatter");
                                        let bl: Vec<Loc> = if r != root {
                                            Vec::new()
                                        } else if v_form {
                                            (0..n).map(|i| src.window(&mut s, offs[i], sizes[i])).collect()
                                        } else {
                                            blocks(src.region(&mut s), n, b)
                                        };
                                        let dl = (!(in_place && r == root)).then(|| dst[r].region(&mut s));
                                        algo::scatter(&mut s, a, root as i32, &bl, dl, sizes[r]);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                assert!(src.get() == whole, "{label}: the root's send buffer was modified");
                                for (r, d) in dst.iter().enumerate() {
                                    let want = if in_place && r == root { junk(r, sizes[r]) } else { theirs(r) };
                                    assert!(d.get() == want, "{label}: wrong bytes at rank {r}");
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Allgather (uniform blocks in one region, or each block a region of its own) and
/// Allgatherv (assorted sizes, scattered, each block its own region).
#[test]
fn allgather_every_algorithm() {
    let mut m = Matrix::new("allgather");
    for n in NS {
        for v_form in [false, true] {
            let (coll, form) = if v_form { (Coll::Allgatherv, "allgatherv") } else { (Coll::Allgather, "allgather") };
            for (name, a) in algos(coll) {
                if a == Algo::RecursiveDoubling && !pow2(n) {
                    continue;
                }
                for b in counts(n, BIG_BYTES) {
                    for in_place in [false, true] {
                        let what = format_args!("{form} {name} n={n} bytes={b} in_place={in_place}");
                        m.case(b == BIG_BYTES, what, |v, label| {
                            // Uniform blocks as separate regions half the time: a message spanning
                            // several blocks is then received whole and spread over them.
                            let split = v_form || v.seed % 2 == 0;
                            let sizes: Vec<usize> = (0..n).map(|i| if v_form { (i * 3 + b) % 10 } else { b }).collect();
                            let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                            let mine = |r: usize| pattern(r, 4, sizes[r]);
                            let sim = Sim::new(n, v.proto, v.seed);
                            let mut wants = Vec::new();
                            let dst: Vec<TBuf> = (0..n)
                                .map(|r| {
                                    let mut init = junk(r, total);
                                    if in_place {
                                        init[offs[r]..offs[r] + sizes[r]].copy_from_slice(&mine(r));
                                    }
                                    let mut want = init.clone();
                                    for i in 0..n {
                                        want[offs[i]..offs[i] + sizes[i]].copy_from_slice(&mine(i));
                                    }
                                    wants.push(want);
                                    TBuf::new(v.mem, &init)
                                })
                                .collect();
                            let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &mine(r))).collect();
                            let scheds = (0..n)
                                .map(|r| {
                                    let mut s = sim.sched(r, "MPI_Allgather");
                                    let bl: Vec<Loc> = if split {
                                        (0..n).map(|i| dst[r].window(&mut s, offs[i], sizes[i])).collect()
                                    } else {
                                        blocks(dst[r].region(&mut s), n, b)
                                    };
                                    let sl = (!in_place).then(|| src[r].region(&mut s));
                                    algo::allgather(&mut s, a, sl, &bl);
                                    s
                                })
                                .collect();
                            check_no_error(label, &mut sim.run(label, scheds));
                            for r in 0..n {
                                assert!(dst[r].get() == wants[r], "{label}: wrong bytes at rank {r}");
                                assert!(src[r].get() == mine(r), "{label}: rank {r}'s input was modified");
                            }
                        });
                    }
                }
            }
        }
    }
}

/// Alltoall (uniform, every algorithm) and Alltoallv (assorted sizes per pair, scattered, each
/// block its own region; symmetric sizes when in place, as `MPI_IN_PLACE` requires).
#[test]
fn alltoall_every_algorithm() {
    let mut m = Matrix::new("alltoall");
    for n in NS {
        for v_form in [false, true] {
            let (coll, form) = if v_form { (Coll::Alltoallv, "alltoallv") } else { (Coll::Alltoall, "alltoall") };
            for (name, a) in algos(coll) {
                for b in counts(n, BIG_BYTES) {
                    for in_place in [false, true] {
                        let what = format_args!("{form} {name} n={n} bytes={b} in_place={in_place}");
                        m.case(b == BIG_BYTES, what, |v, label| {
                            // size(i, j): the bytes rank i sends to rank j.
                            let size = |i: usize, j: usize| match (v_form, in_place) {
                                (false, _) => b,
                                (true, false) => (i * 3 + j * 5 + b) % 9,
                                (true, true) => (i + j + b) % 7,
                            };
                            let block = |i: usize, j: usize| pattern(i, 1000 + j, size(i, j));
                            let split = v_form || v.seed % 2 == 0;
                            // Rank r's send (or receive) side: sizes, offsets, buffer length.
                            let side = |r: usize, recv: bool| {
                                let sizes: Vec<usize> =
                                    (0..n).map(|j| if recv { size(j, r) } else { size(r, j) }).collect();
                                let (offs, total) = if v_form { placement(&sizes) } else { uniform(n, b) };
                                (sizes, offs, total)
                            };
                            let sim = Sim::new(n, v.proto, v.seed);
                            let (mut src, mut sent, mut dst, mut wants) =
                                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                            for r in 0..n {
                                let (ss, so, st) = side(r, false);
                                let mut whole = junk(r + 100, st);
                                for j in 0..n {
                                    whole[so[j]..so[j] + ss[j]].copy_from_slice(&block(r, j));
                                }
                                let (ds, dofs, dt) = side(r, true);
                                let init = if in_place { whole.clone() } else { junk(r, dt) };
                                let mut want = init.clone();
                                for i in 0..n {
                                    want[dofs[i]..dofs[i] + ds[i]].copy_from_slice(&block(i, r));
                                }
                                src.push(TBuf::new(v.mem, &whole));
                                sent.push(whole);
                                dst.push(TBuf::new(v.mem, &init));
                                wants.push(want);
                            }
                            let scheds = (0..n)
                                .map(|r| {
                                    let mut s = sim.sched(r, "MPI_Alltoall");
                                    let (ds, dofs, _) = side(r, true);
                                    let dl: Vec<Loc> = if split {
                                        (0..n).map(|i| dst[r].window(&mut s, dofs[i], ds[i])).collect()
                                    } else {
                                        blocks(dst[r].region(&mut s), n, b)
                                    };
                                    let sl: Option<Vec<Loc>> = (!in_place).then(|| {
                                        let (ss, so, _) = side(r, false);
                                        if split {
                                            (0..n).map(|j| src[r].window(&mut s, so[j], ss[j])).collect()
                                        } else {
                                            blocks(src[r].region(&mut s), n, b)
                                        }
                                    });
                                    algo::alltoall(&mut s, a, sl.as_deref(), &dl);
                                    s
                                })
                                .collect();
                            check_no_error(label, &mut sim.run(label, scheds));
                            for r in 0..n {
                                assert!(dst[r].get() == wants[r], "{label}: wrong bytes at rank {r}");
                                if !in_place {
                                    assert!(src[r].get() == sent[r], "{label}: rank {r}'s input was modified");
                                }
                            }
                        });
                    }
                }
            }
        }
    }
}

/// Reduce_scatter_block (equal counts) and Reduce_scatter (assorted counts, some zero); in
/// place as the C layer builds it: the whole vector and the result are two regions over the
/// same memory.
#[test]
fn reduce_scatter_every_algorithm() {
    let mut m = Matrix::new("reduce_scatter");
    for n in NS {
        for (name, a) in algos(Coll::ReduceScatter) {
            for op in OPS {
                match a {
                    Algo::RecursiveHalving if !(op.commutative() && pow2(n)) => continue,
                    Algo::Pairwise if !op.commutative() => continue,
                    _ => {}
                }
                for equal in [true, false] {
                    for c in counts(n, BIG_BLOCK) {
                        for in_place in [false, true] {
                            let what = format_args!("{name} {op:?} n={n} count={c} equal={equal} in_place={in_place}");
                            m.case(c == BIG_BLOCK, what, |v, label| {
                                let cnt: Vec<usize> = (0..n).map(|i| if equal { c } else { (i * 5 + c) % 6 }).collect();
                                let first: Vec<usize> = (0..n).map(|i| cnt[..i].iter().sum()).collect();
                                let total: usize = cnt.iter().sum();
                                let u = op.unit();
                                let sim = Sim::new(n, v.proto, v.seed);
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, total))).collect();
                                let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &junk(r, cnt[r] * u))).collect();
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Reduce_scatter");
                                        s.set_reducer(op.reducer());
                                        let whole = src[r].region(&mut s);
                                        let d = if in_place {
                                            src[r].window(&mut s, 0, cnt[r] * u)
                                        } else {
                                            dst[r].region(&mut s)
                                        };
                                        let bl: Vec<Loc> = (0..n).map(|i| whole.at(first[i] * u, cnt[i] * u)).collect();
                                        algo::reduce_scatter(&mut s, a, whole, &bl, d);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                for r in 0..n {
                                    let want = op.combined(0, n, first[r], cnt[r]);
                                    if in_place {
                                        let got = src[r].get();
                                        assert!(got[..cnt[r] * u] == want[..], "{label}: wrong result at rank {r}");
                                    } else {
                                        assert!(dst[r].get() == want, "{label}: wrong result at rank {r}");
                                        assert!(
                                            src[r].get() == op.input(r, total),
                                            "{label}: rank {r}'s input was modified"
                                        );
                                    }
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

/// Scan and Exscan (rank 0's exclusive result is undefined: its buffer must be left alone).
#[test]
fn scan_every_algorithm() {
    let mut m = Matrix::new("scan");
    for n in NS {
        for (name, a) in algos(Coll::Scan) {
            for op in OPS {
                for exclusive in [false, true] {
                    let form = if exclusive { "exclusive" } else { "inclusive" };
                    for count in counts(n, BIG_ELEMS) {
                        for in_place in [false, true] {
                            let what = format_args!("{form} {name} {op:?} n={n} count={count} in_place={in_place}");
                            m.case(count == BIG_ELEMS, what, |v, label| {
                                let sim = Sim::new(n, v.proto, v.seed);
                                let len = count * op.unit();
                                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &op.input(r, count))).collect();
                                let init = |r: usize| if in_place { op.input(r, count) } else { junk(r, len) };
                                let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &init(r))).collect();
                                let scheds = (0..n)
                                    .map(|r| {
                                        let mut s = sim.sched(r, "MPI_Scan");
                                        s.set_reducer(op.reducer());
                                        let d = dst[r].region(&mut s);
                                        let sl = if in_place { d } else { src[r].region(&mut s) };
                                        algo::scan(&mut s, a, sl, d, exclusive);
                                        s
                                    })
                                    .collect();
                                check_no_error(label, &mut sim.run(label, scheds));
                                for r in 0..n {
                                    let want = match (exclusive, r) {
                                        (true, 0) => init(0),
                                        (true, _) => op.combined(0, r, 0, count),
                                        (false, _) => op.combined(0, r + 1, 0, count),
                                    };
                                    assert!(dst[r].get() == want, "{label}: wrong result at rank {r}");
                                    assert!(
                                        src[r].get() == op.input(r, count),
                                        "{label}: rank {r}'s input was modified"
                                    );
                                }
                            });
                        }
                    }
                }
            }
        }
    }
}

/// The schedule engine itself: messages gathered from windows of several regions (with gaps
/// and empty ones) and spread over windows with gaps in one region, over adjacent windows
/// (taken as one), and over windows of two regions.
#[test]
fn messages_gather_and_spread_windows() {
    let mut m = Matrix::new("windows");
    for scale in [1, 20] {
        m.case(true, format_args!("scale={scale}"), |v, label| {
            let x = |k: usize| k * scale;
            let sim = Sim::new(2, v.proto, v.seed);
            let (pa, pb) = (pattern(0, 1, x(40)), pattern(0, 2, x(40)));
            let (a, b) = (TBuf::new(v.mem, &pa), TBuf::new(v.mem, &pb));
            let (mut wc, mut wd) = (junk(1, x(60)), junk(2, x(10)));
            let (c, d) = (TBuf::new(v.mem, &wc), TBuf::new(v.mem, &wd));
            // Per message: the windows sent, (buffer, offset, length) in a and b; the windows
            // received into, in c and d.
            let msgs = [
                (
                    vec![(0, 0, x(5)), (1, x(10), x(7)), (0, x(20), 0), (0, x(30), x(9))],
                    vec![(0, 0, x(4)), (0, x(10), x(6)), (0, x(30), x(8)), (0, x(50), x(3))],
                ),
                (vec![(0, x(5), x(3)), (0, x(8), x(4))], vec![(0, x(40), x(2)), (0, x(42), x(5))]),
                (vec![(1, 0, x(6))], vec![(1, x(2), x(3)), (0, x(20), x(3))]),
            ];
            let mut s0 = sim.sched(0, "MPI_Test");
            let mut s1 = sim.sched(1, "MPI_Test");
            let send_regions = [a.region(&mut s0), b.region(&mut s0)];
            let recv_regions = [c.region(&mut s1), d.region(&mut s1)];
            for (sent, recvd) in &msgs {
                s0.send_v(1, sent.iter().map(|&(r, off, len)| send_regions[r].at(off, len)).collect());
                s1.recv_v(0, recvd.iter().map(|&(r, off, len)| recv_regions[r].at(off, len)).collect());
                let bytes: Vec<u8> =
                    sent.iter().flat_map(|&(r, off, len)| [&pa, &pb][r][off..off + len].to_vec()).collect();
                let mut at = 0;
                for &(r, off, len) in recvd {
                    let w = if r == 0 { &mut wc } else { &mut wd };
                    w[off..off + len].copy_from_slice(&bytes[at..at + len]);
                    at += len;
                }
                assert_eq!(at, bytes.len());
            }
            check_no_error(label, &mut sim.run(label, vec![s0, s1]));
            assert!(c.get() == wc, "{label}: wrong bytes in the first receive region");
            assert!(d.get() == wd, "{label}: wrong bytes in the second receive region");
            assert!(a.get() == pa && b.get() == pb, "{label}: a send buffer was modified");
        });
    }
}

/// What one schedule of the concurrency test checks once everything has run.
type Check = Box<dyn Fn(&str)>;

/// Several collectives in flight at once on one communicator, all with messages of the same
/// sizes between the same peers, so only their tags keep them apart; each rank starts them in
/// the same order (MPI's rule) but advances them in its own order and joins at its own time.
#[test]
fn concurrent_schedules_do_not_cross_match() {
    let mut m = Matrix::new("concurrent");
    for n in [2, 3, 5, 8, 12, 17] {
        for count in [3, 40] {
            m.case(true, format_args!("n={n} count={count}"), |v, label| {
                let sim = Sim::new(n, v.proto, v.seed);
                // The checks own the buffers: declared first, dropped after the schedules.
                let mut checks: Vec<Check> = Vec::new();
                let mut jobs: Vec<Vec<Schedule>> = (0..n).map(|_| Vec::new()).collect();
                let len = count * 8;
                // Three allreduces with different inputs, two of them by the same algorithm.
                for (k, a) in
                    [Algo::RecursiveDoubling, Algo::ReduceBcast, Algo::RecursiveDoubling].into_iter().enumerate()
                {
                    let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &Op::Sum.input(r + 50 * k, count))).collect();
                    for (r, job) in jobs.iter_mut().enumerate() {
                        let mut s = sim.sched(r, "MPI_Allreduce");
                        s.set_reducer(Op::Sum.reducer());
                        let d = dst[r].region(&mut s);
                        algo::allreduce(&mut s, a, d, d);
                        job.push(s);
                    }
                    // Ranks 50·k.. stand for this allreduce's inputs.
                    let want = Op::Sum.combined(50 * k, 50 * k + n, 0, count);
                    checks.push(Box::new(move |label| {
                        for (r, d) in dst.iter().enumerate() {
                            assert!(d.get() == want, "{label}: allreduce {k} wrong at rank {r}");
                        }
                    }));
                }
                // Bcasts of the same length from two roots, and a ring allgather and a pairwise
                // alltoall with blocks of that length.
                for root in [0, n - 1] {
                    let bufs: Vec<TBuf> = (0..n)
                        .map(|r| TBuf::new(v.mem, &if r == root { pattern(root, 9, len) } else { junk(r, len) }))
                        .collect();
                    for (r, job) in jobs.iter_mut().enumerate() {
                        let mut s = sim.sched(r, "MPI_Bcast");
                        let l = bufs[r].region(&mut s);
                        algo::bcast(&mut s, Algo::Binomial, root as i32, l);
                        job.push(s);
                    }
                    checks.push(Box::new(move |label| {
                        for (r, b) in bufs.iter().enumerate() {
                            assert!(b.get() == pattern(root, 9, len), "{label}: bcast from {root} wrong at rank {r}");
                        }
                    }));
                }
                let gathered: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &junk(r, n * len))).collect();
                let exchanged: Vec<TBuf> = (0..n)
                    .map(|r| TBuf::new(v.mem, &(0..n).flat_map(|j| pattern(r, 2000 + j, len)).collect::<Vec<_>>()))
                    .collect();
                for r in 0..n {
                    let mut s = sim.sched(r, "MPI_Allgather");
                    let mine = TBuf::new(Mem::Scratch, &pattern(r, 8, len));
                    let sl = mine.region(&mut s);
                    let bl = blocks(gathered[r].region(&mut s), n, len);
                    algo::allgather(&mut s, Algo::Ring, Some(sl), &bl);
                    jobs[r].push(s);
                    let mut s = sim.sched(r, "MPI_Alltoall");
                    let bl = blocks(exchanged[r].region(&mut s), n, len);
                    algo::alltoall(&mut s, Algo::Pairwise, None, &bl);
                    jobs[r].push(s);
                }
                checks.push(Box::new(move |label| {
                    let all: Vec<u8> = (0..n).flat_map(|j| pattern(j, 8, len)).collect();
                    for r in 0..n {
                        assert!(gathered[r].get() == all, "{label}: allgather wrong at rank {r}");
                        let want: Vec<u8> = (0..n).flat_map(|i| pattern(i, 2000 + r, len)).collect();
                        assert!(exchanged[r].get() == want, "{label}: alltoall wrong at rank {r}");
                    }
                }));
                let start: Vec<usize> = (0..n).map(|r| (r * 5) % 7).collect();
                sim.run_all(label, &mut jobs, &start);
                for (r, job) in jobs.iter_mut().enumerate() {
                    for s in job.iter_mut() {
                        if let Err(e) = s.take_error() {
                            panic!("{label}: rank {r} reported {}", e.msg);
                        }
                    }
                }
                for c in &checks {
                    c(label);
                }
            });
        }
    }
}

/// A persistent collective: the same schedules run again after `restart` with new inputs.
#[test]
fn restarted_schedules_run_again() {
    let mut m = Matrix::new("restart");
    for n in [1, 3, 4, 7] {
        for (name, a) in algos(Coll::Allreduce) {
            let count = 2 * n + 1;
            m.case(true, format_args!("{name} n={n} count={count}"), |v, label| {
                let sim = Sim::new(n, v.proto, v.seed);
                let src: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &Op::Sum.input(r, count))).collect();
                let dst: Vec<TBuf> = (0..n).map(|r| TBuf::new(v.mem, &junk(r, count * 8))).collect();
                let mut scheds: Vec<Schedule> = (0..n)
                    .map(|r| {
                        let mut s = sim.sched(r, "MPI_Allreduce_init");
                        s.set_reducer(Op::Sum.reducer());
                        let (sl, d) = (src[r].region(&mut s), dst[r].region(&mut s));
                        algo::allreduce(&mut s, a, sl, d);
                        s
                    })
                    .collect();
                for round in 0..3 {
                    for (r, b) in src.iter().enumerate() {
                        b.set(&Op::Sum.input(r + 10 * round, count));
                    }
                    for s in &mut scheds {
                        s.restart();
                    }
                    scheds = sim.run(&format!("{label} start {round}"), scheds);
                    check_no_error(label, &mut scheds);
                    // Ranks 10·round.. stand for this start's inputs.
                    let want = Op::Sum.combined(10 * round, 10 * round + n, 0, count);
                    for (r, d) in dst.iter().enumerate() {
                        assert!(d.get() == want, "{label}: start {round} wrong at rank {r}");
                    }
                }
            });
        }
    }
}

/// A message longer or shorter than its receive (type signatures that differ between ranks)
/// is reported as a truncation naming the sender, on every wire; the run still ends.
#[test]
fn mismatched_sizes_are_reported() {
    let mut m = Matrix::new("mismatch");
    for (sent, expected) in [(16, 8), (8, 16), (300, 100), (100, 300)] {
        m.case(true, format_args!("sent={sent} expected={expected}"), |v, label| {
            let sim = Sim::new(2, v.proto, v.seed);
            let bufs = [TBuf::new(v.mem, &pattern(0, 1, sent)), TBuf::new(v.mem, &junk(1, expected))];
            let scheds = (0..2)
                .map(|r| {
                    let mut s = sim.sched(r, "MPI_Bcast");
                    let l = bufs[r].region(&mut s);
                    algo::bcast(&mut s, Algo::Binomial, 0, l);
                    s
                })
                .collect();
            let mut scheds = sim.run(label, scheds);
            assert!(scheds[0].take_error().is_ok(), "{label}: the sender saw an error");
            let e = scheds[1].take_error().expect_err("a truncation");
            assert_eq!(e.class, baton_abi::consts::MPI_ERR_TRUNCATE, "{label}");
            let got = if sent > expected { "more".to_string() } else { sent.to_string() };
            let want = format!("MPI_Bcast: rank 0 sent {got} bytes where {expected} were expected");
            assert!(e.msg.starts_with(&want), "{label}: message {:?}", e.msg);
            let n = sent.min(expected);
            assert!(bufs[1].get()[..n] == pattern(0, 1, sent)[..n], "{label}: the bytes that fit were lost");
        });
    }
}

/// The driver itself: a rendezvous nobody receives and a receive nobody sends to are reported
/// with the rank, the round and the messages.
#[test]
fn a_deadlock_is_reported() {
    let sim = Sim::new(3, Proto::Read, 1);
    let scheds = (0..3)
        .map(|r| {
            let mut s = sim.sched(r, "MPI_Test");
            if r == 2 {
                let t = s.scratch(200);
                s.send(0, t);
                let t = s.scratch(24);
                s.recv(1, t);
            }
            s
        })
        .collect();
    let Err(err) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run("stuck", scheds))) else {
        panic!("the driver missed a deadlock");
    };
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.starts_with("deadlock in stuck"), "{msg}");
    let want =
        "rank 2 (schedule 0): MPI_Test round 0 of 1, waiting for a receive of 24 bytes from rank 1, a send to rank 0";
    assert!(msg.contains(want), "{msg}");
    assert!(!msg.contains("rank 0 (") && !msg.contains("rank 1 ("), "{msg}");
}

/// Each wire setting exercises the protocol it stands for.
#[test]
fn every_protocol_is_exercised() {
    for proto in PROTOS {
        let n = 4;
        let sim = Sim::new(n, proto, 7);
        let bufs: Vec<TBuf> = (0..n)
            .map(|r| TBuf::new(Mem::User, &if r == 0 { pattern(0, 1, BIG_BYTES) } else { junk(r, BIG_BYTES) }))
            .collect();
        let scheds = (0..n)
            .map(|r| {
                let mut s = sim.sched(r, "MPI_Bcast");
                let l = bufs[r].region(&mut s);
                algo::bcast(&mut s, Algo::Binomial, 0, l);
                s
            })
            .collect();
        sim.run(&format!("{proto:?}"), scheds);
        for b in &bufs {
            assert!(b.get() == pattern(0, 1, BIG_BYTES));
        }
        let (rts, fin, cts, data) =
            (sim.count(Kind::Rts), sim.count(Kind::Fin), sim.count(Kind::Cts), sim.count(Kind::Data));
        let refused = sim.world.borrow().wire.refused;
        match proto {
            Proto::Eager => assert_eq!((rts, sim.count(Kind::Eager)), (0, 3)),
            Proto::Read => assert_eq!((rts, fin, cts, data), (3, 3, 0, 0)),
            Proto::Stream => {
                assert_eq!((rts, fin, cts), (3, 0, 3));
                assert_eq!(data, 3 * BIG_BYTES.div_ceil(100) as u64);
                assert!(refused > 0, "no frame ever waited for ring space");
            }
        }
    }
}
