//! Deterministic tests of the point-to-point engine: two or three `Engine`s joined by an
//! in-memory fake `Net` (per-pair FIFO rings with a capacity, a configurable eager limit and
//! frame size, and single-copy reads that either work or are refused). No processes, no threads.

use baton_abi::consts as c;
use baton_core::datatype::{predefined, Layout};
use baton_core::engine::{
    DirectEnd, Engine, Net, ProcIdx, ReqId, Request, SendData, Sender, Sink, Status, ANY_SOURCE, ANY_TAG,
};
use baton_transport::coop::CoopSlot;
use baton_transport::frame::{Header, Kind};
use baton_transport::mem::UserBuf;
use std::collections::VecDeque;
use std::sync::Arc;

const TRUNCATE: i32 = 15;
const GUARD: u8 = 0xEE;

// ---------------------------------------------------------------------------------------------
// The fake network
// ---------------------------------------------------------------------------------------------

/// One frame in a ring: header and payload.
type Frame = (Header, Vec<u8>);

/// A data frame partly sent over a byte stream: (from, to, lane), header, payload so far, payload
/// length.
type Unfinished = ((ProcIdx, ProcIdx, u8), Header, Vec<u8>, usize);

/// Everything between the engines: rings, settings, and a record of what crossed.
struct Wire {
    /// Frames one ring holds (per ordered pair of processes).
    cap: usize,
    eager: usize,
    max_frame: usize,
    /// Single-copy reads allowed (else the engine must stream with Cts/Data).
    read_ok: bool,
    /// Ordered pairs (from, to) whose ring refuses every frame for now.
    blocked: Vec<(ProcIdx, ProcIdx)>,
    /// `rings[from][to]`.
    rings: Vec<Vec<VecDeque<Frame>>>,
    /// "Remote memory" a peer may read: (owner, address, length).
    exposed: Vec<(ProcIdx, usize, usize)>,
    /// Reads done: (reader, owner, address, length).
    reads: Vec<(ProcIdx, ProcIdx, u64, usize)>,
    /// Frames pushed: (from, to, header, payload length).
    log: Vec<(ProcIdx, ProcIdx, Header, usize)>,
    /// Pushes refused for lack of room.
    refused: usize,
    /// Byte-stream mode (like TCP): a data frame may leave in pieces of at most this many payload
    /// bytes, over `lanes` connections; a lane carrying an unfinished frame takes nothing else.
    piece: Option<usize>,
    lanes: usize,
    /// Unfinished data frames.
    mid: Vec<Unfinished>,
    /// Deliver complete data frames through `data_window` (as a socket reader does) instead of
    /// `on_frame`.
    place_direct: bool,
    /// Frames may be filled in place (`try_send_with`), as shared-memory rings are.
    in_place: bool,
    /// Frames filled in place.
    filled: usize,
    /// Cooperative copies: the smallest message copied so (usize::MAX: none), one slot per
    /// ordered pair, receive buffers the sender may write (owner, address, length), and writes
    /// done (writer, owner, address, length).
    coop_min: usize,
    coop_slots: Vec<Vec<CoopSlot>>,
    writable: Vec<(ProcIdx, usize, usize)>,
    writes: Vec<(ProcIdx, ProcIdx, u64, usize)>,
    /// A stand-in for the sender's help, run at the receiver's first read of a cooperative copy
    /// (which the engine does before anything else): takes this many chunks from the slot and
    /// writes them, and then takes one more and reports it failed if `helper_fails`.
    helper_chunks: usize,
    helper_fails: bool,
    /// Reads allowed before every further one is refused (None: no limit).
    reads_left: Option<usize>,
}

impl Wire {
    fn new(n: usize) -> Wire {
        Wire {
            cap: usize::MAX,
            eager: 64,
            max_frame: 128,
            read_ok: true,
            blocked: Vec::new(),
            rings: (0..n).map(|_| (0..n).map(|_| VecDeque::new()).collect()).collect(),
            exposed: Vec::new(),
            reads: Vec::new(),
            log: Vec::new(),
            refused: 0,
            piece: None,
            lanes: 1,
            mid: Vec::new(),
            place_direct: false,
            in_place: false,
            filled: 0,
            coop_min: usize::MAX,
            coop_slots: (0..n).map(|_| (0..n).map(|_| CoopSlot::default()).collect()).collect(),
            writable: Vec::new(),
            writes: Vec::new(),
            helper_chunks: 0,
            helper_fails: false,
            reads_left: None,
        }
    }

    /// Plays the sender's part of the cooperative copy whose invitation sits in the ring from
    /// `receiver` to `sender` (see `helper_chunks`).
    fn act_as_helper(&mut self, sender: ProcIdx, receiver: ProcIdx) {
        let Some((h, _)) = self.rings[receiver as usize][sender as usize].iter().find(|f| f.0.kind == Kind::Help)
        else {
            return;
        };
        let (seq, chunk, n, dst) = (h.ctx as u32, h.tag as usize, h.len as usize, h.aux as usize);
        let chunks = n.div_ceil(chunk) as u32;
        let slot = &self.coop_slots[sender as usize][receiver as usize];
        let helps = std::mem::take(&mut self.helper_chunks);
        for _ in 0..helps {
            let Some(c) = slot.claim(seq, chunks) else { return };
            let off = c as usize * chunk;
            let len = chunk.min(n - off);
            // The test wrote the pattern the sender sends: the helper writes it too.
            let (_, base, _) = *self.exposed.iter().find(|e| e.0 == sender).expect("sender buffer");
            // SAFETY: `base` is the sender's exposed buffer and `dst` the receiver's writable
            // one, both test-owned and alive; ranges checked by the claims' bounds (n fits both).
            unsafe { std::ptr::copy_nonoverlapping((base + off) as *const u8, (dst + off) as *mut u8, len) };
            slot.helped_one(seq);
        }
        if std::mem::take(&mut self.helper_fails) {
            if let Some(c) = slot.claim(seq, chunks) {
                slot.help_failed(seq, c);
            }
        }
    }

    fn lane_busy(&self, from: ProcIdx, to: ProcIdx, lane: u8) -> bool {
        self.mid.iter().any(|m| m.0 == (from, to, lane))
    }

    fn queued(&self) -> usize {
        self.rings.iter().flatten().map(|q| q.len()).sum()
    }

    /// A copy of `n` bytes at `addr` in `owner`, if reads are allowed. Panics when the engine
    /// asks for memory the owner never exposed (a wrong address or an over-long read).
    fn remote_bytes(&mut self, reader: ProcIdx, owner: ProcIdx, addr: u64, n: usize) -> Option<Vec<u8>> {
        if !self.read_ok || self.reads_left == Some(0) {
            return None;
        }
        if let Some(k) = &mut self.reads_left {
            *k -= 1;
        }
        let a = addr as usize;
        let ok = self.exposed.iter().any(|&(o, base, len)| o == owner && a >= base && a + n <= base + len);
        assert!(ok, "engine read {n} bytes at {a:#x} of process {owner}, outside any exposed buffer");
        self.reads.push((reader, owner, addr, n));
        if n == 0 {
            return Some(Vec::new());
        }
        // SAFETY: `[a, a+n)` lies within a buffer the test exposed for process `owner`; the test
        // keeps that buffer alive and unmodified until the send that exposed it completes, and
        // the engine only reads it while the send is active.
        Some(unsafe { std::slice::from_raw_parts(a as *const u8, n) }.to_vec())
    }
}

/// One engine's view of the wire.
struct Port<'a> {
    w: &'a mut Wire,
    me: ProcIdx,
}

impl Net for Port<'_> {
    fn try_send(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        let me = self.me;
        let len = payload.len();
        let ring_len = self.w.rings[me as usize][to as usize].len();
        if ring_len >= self.w.cap || self.w.blocked.contains(&(me, to)) || self.w.lane_busy(me, to, 0) {
            self.w.refused += 1;
            return false;
        }
        assert!(len <= self.w.max_frame || h.kind != Kind::Data, "Data frame of {len} > max frame");
        let v = payload.to_vec();
        self.w.log.push((me, to, *h, len));
        self.w.rings[me as usize][to as usize].push_back((*h, v));
        true
    }

    fn send_start(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> Option<(u8, usize)> {
        let Some(piece) = self.w.piece else {
            return self.try_send(to, h, payload).then_some((0, payload.len()));
        };
        let me = self.me;
        if self.w.rings[me as usize][to as usize].len() >= self.w.cap || self.w.blocked.contains(&(me, to)) {
            return None;
        }
        assert!(payload.len() <= self.w.max_frame, "Data frame of {} > max frame", payload.len());
        let lane = (0..self.w.lanes as u8).find(|&l| !self.w.lane_busy(me, to, l))?;
        let n = piece.min(payload.len());
        self.w.mid.push(((me, to, lane), *h, payload[..n].to_vec(), payload.len()));
        self.w.finish_piece(me, to, lane);
        Some((lane, n))
    }

    fn send_continue(&mut self, to: ProcIdx, lane: u8, rest: &[u8]) -> usize {
        let me = self.me;
        let piece = self.w.piece.expect("continue only in byte-stream mode");
        let m = self.w.mid.iter_mut().find(|m| m.0 == (me, to, lane)).expect("continue of an unstarted frame");
        assert_eq!(rest.len(), m.3 - m.2.len(), "continued with other than the frame's remaining payload");
        let n = piece.min(rest.len());
        m.2.extend_from_slice(&rest[..n]);
        self.w.finish_piece(me, to, lane);
        n
    }

    fn try_send_with(&mut self, to: ProcIdx, h: &Header, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        assert!(self.w.in_place, "try_send_with on a wire that does not fill in place");
        let me = self.me;
        if self.w.rings[me as usize][to as usize].len() >= self.w.cap
            || self.w.blocked.contains(&(me, to))
            || self.w.lane_busy(me, to, 0)
        {
            self.w.refused += 1;
            return false;
        }
        // Stale bytes, as in a ring record: the engine must write every one.
        let mut v = vec![0xCD; len];
        fill(&mut v);
        self.w.filled += 1;
        assert!(self.try_send(to, h, &v));
        true
    }

    fn fills_in_place(&self, _to: ProcIdx) -> bool {
        self.w.in_place
    }

    fn max_frame(&self, _to: ProcIdx) -> usize {
        self.w.max_frame
    }

    fn eager_limit(&self, _to: ProcIdx, _sender: Sender) -> usize {
        self.w.eager
    }

    fn read_remote(&mut self, from: ProcIdx, addr: u64, dst: &UserBuf) -> bool {
        if self.w.helper_chunks > 0 || self.w.helper_fails {
            self.w.act_as_helper(from, self.me);
        }
        match self.w.remote_bytes(self.me, from, addr, dst.len()) {
            Some(bytes) => {
                assert_eq!(dst.write(0, &bytes), bytes.len());
                true
            }
            None => false,
        }
    }

    fn read_remote_into(&mut self, from: ProcIdx, addr: u64, dst: &mut [u8]) -> bool {
        match self.w.remote_bytes(self.me, from, addr, dst.len()) {
            Some(bytes) => {
                dst.copy_from_slice(&bytes);
                true
            }
            None => false,
        }
    }

    fn write_remote(&mut self, to: ProcIdx, addr: u64, src: &[u8]) -> bool {
        if !self.w.read_ok {
            return false;
        }
        let a = addr as usize;
        let ok = self.w.writable.iter().any(|&(o, base, len)| o == to && a >= base && a + src.len() <= base + len);
        assert!(ok, "engine wrote {} bytes at {a:#x} of process {to}, outside any receive buffer", src.len());
        self.w.writes.push((self.me, to, addr, src.len()));
        // SAFETY: inside a receive buffer the test registered as writable, alive and not
        // otherwise touched until the receive completes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), a as *mut u8, src.len()) };
        true
    }

    fn coop_slot(&mut self, peer: ProcIdx, sending: bool) -> Option<&CoopSlot> {
        let (from, to) = if sending { (self.me, peer) } else { (peer, self.me) };
        Some(&self.w.coop_slots[from as usize][to as usize])
    }

    fn coop_min(&self) -> usize {
        self.w.coop_min
    }
}

impl Wire {
    /// Moves a data frame whose payload is complete into its ring.
    fn finish_piece(&mut self, from: ProcIdx, to: ProcIdx, lane: u8) {
        let at = self.mid.iter().position(|m| m.0 == (from, to, lane)).unwrap();
        if self.mid[at].2.len() == self.mid[at].3 {
            let (_, h, v, len) = self.mid.swap_remove(at);
            self.log.push((from, to, h, len));
            self.rings[from as usize][to as usize].push_back((h, v));
        }
    }
}

/// Engines plus the wire between them.
struct Sim {
    eng: Vec<Engine>,
    w: Wire,
}

impl Sim {
    fn new(n: usize) -> Sim {
        Sim { eng: (0..n).map(|_| Engine::new()).collect(), w: Wire::new(n) }
    }

    fn with<R>(&mut self, i: ProcIdx, f: impl FnOnce(&mut Engine, &mut dyn Net) -> R) -> R {
        let mut port = Port { w: &mut self.w, me: i };
        f(&mut self.eng[i as usize], &mut port)
    }

    /// Sends `data` (the application's buffer, exposed for remote reads) from `i` as rank `i`.
    fn send(&mut self, i: ProcIdx, to: ProcIdx, ctx: u64, tag: i32, data: &[u8], sync: bool) -> ReqId {
        self.w.exposed.push((i, data.as_ptr() as usize, data.len()));
        // SAFETY: `data` belongs to the test, which keeps it alive and unmodified until the send
        // completes (every test pumps to completion before dropping its buffers).
        let buf = unsafe { UserBuf::new(data.as_ptr() as usize, data.len()) };
        self.with(i, |e, n| e.send(n, to, ctx, i as i32, tag, SendData::User(buf), sync, Sender::GoesOn))
    }

    /// Sends a packed copy owned by the request.
    fn send_packed(&mut self, i: ProcIdx, to: ProcIdx, ctx: u64, tag: i32, data: Vec<u8>) -> ReqId {
        // The heap block does not move when the Vec moves into the request.
        self.w.exposed.push((i, data.as_ptr() as usize, data.len()));
        self.with(i, |e, n| e.send(n, to, ctx, i as i32, tag, SendData::Packed(data), false, Sender::GoesOn))
    }

    fn recv(&mut self, i: ProcIdx, ctx: u64, src: i32, tag: i32, sink: Sink) -> ReqId {
        self.with(i, |e, n| e.recv(n, ctx, src, tag, sink))
    }

    fn get(&self, i: ProcIdx, id: ReqId) -> &Request {
        self.eng[i as usize].get(id).expect("request not found")
    }

    fn done(&self, i: ProcIdx, id: ReqId) -> bool {
        self.get(i, id).complete
    }

    /// One round: every engine progresses, then at most one frame per ring is delivered.
    /// Returns whether anything moved.
    fn step(&mut self) -> bool {
        let before = self.w.log.len();
        for i in 0..self.eng.len() {
            self.with(i as ProcIdx, |e, net| e.progress(net));
        }
        let moved = self.w.log.len() != before;
        self.deliver() || moved
    }

    /// Delivers at most one frame per ring, without calling `progress`: room appears in the
    /// rings while the engines still hold queued frames. Returns whether anything was delivered.
    fn deliver(&mut self) -> bool {
        let n = self.eng.len();
        // Take the frames first, so that answers pushed during delivery wait for the next round.
        let mut batch = Vec::new();
        for from in 0..n {
            for to in 0..n {
                if let Some(f) = self.w.rings[from][to].pop_front() {
                    batch.push((from as ProcIdx, to as ProcIdx, f));
                }
            }
        }
        let delivered = !batch.is_empty();
        for (from, to, (h, p)) in batch {
            let direct = self.w.place_direct && h.kind == Kind::Data;
            self.with(to, |e, net| {
                // As a socket reader does: straight into the receive buffer, in two reads.
                let placed = direct
                    && e.data_window(&h, p.len(), 0, |dst| {
                        let k = dst.len() / 2;
                        dst[..k].copy_from_slice(&p[..k]);
                    })
                    .is_some();
                if placed {
                    let k = p.len() / 2;
                    e.data_placed(&h, k);
                    e.data_window(&h, p.len(), k, |dst| dst.copy_from_slice(&p[k..])).expect("window stays");
                    e.data_placed(&h, p.len() - k);
                } else {
                    e.on_frame(net, from, &h, &p)
                }
            });
        }
        delivered
    }

    /// Steps until nothing moves (all delivered, or the rest stuck behind blocked rings).
    fn pump(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the simulation did not settle");
    }

    fn kinds(&self, from: ProcIdx, to: ProcIdx) -> Vec<Kind> {
        self.w.log.iter().filter(|l| l.0 == from && l.1 == to).map(|l| l.2.kind).collect()
    }

    fn count(&self, kind: Kind) -> usize {
        self.w.log.iter().filter(|l| l.2.kind == kind).count()
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------------

/// Recognizable bytes, different per `seed`.
fn pat(seed: usize, n: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 7 + seed * 13 + i / 251) % 251) as u8).collect()
}

/// A contiguous sink over the first `cap` bytes of `buf` (the rest are guard bytes).
fn contig(buf: &mut [u8], cap: usize) -> Sink {
    assert!(cap <= buf.len());
    // SAFETY: `buf` is a test-owned buffer that outlives the receive and is not touched by the
    // test until the receive completes (or is cancelled).
    Sink::Contig(unsafe { UserBuf::new(buf.as_mut_ptr() as usize, cap) })
}

fn guarded(cap: usize) -> Vec<u8> {
    vec![GUARD; cap + 32]
}

fn assert_guard(buf: &[u8], from: usize) {
    assert!(buf[from..].iter().all(|&b| b == GUARD), "bytes past the receive span were written");
}

fn status(src: i32, tag: i32, bytes: u64, error: i32) -> Status {
    Status { source: src, tag, error, bytes, cancelled: false }
}

/// Wire settings: eager limit 64, frames of 128 bytes, ring capacity and read policy as given.
fn sim(n: usize, cap: usize, read_ok: bool) -> Sim {
    let mut s = Sim::new(n);
    s.w.cap = cap;
    s.w.read_ok = read_ok;
    s
}

// ---------------------------------------------------------------------------------------------
// Basics
// ---------------------------------------------------------------------------------------------

#[test]
fn eager_message_posted_before_and_unexpected_before() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 40);
    let mut a = guarded(64);
    let r = s.recv(1, 3, 0, 9, contig(&mut a, 64));
    assert!(s.eng[1].is_posted_recv(r));
    let sd = s.send(0, 1, 3, 9, &msg, false);
    // A standard eager send completes as soon as its frame is pushed.
    assert!(s.done(0, sd));
    assert!(!s.done(1, r));
    s.pump();
    assert!(s.done(1, r));
    assert!(!s.eng[1].is_posted_recv(r));
    assert_eq!(s.get(1, r).status, status(0, 9, 40, 0));
    assert_eq!(&a[..40], &msg[..]);
    assert_guard(&a, 40);
    assert!(s.eng[1].completed_any);

    // Unexpected first: the message waits, a later receive takes it at once.
    let msg2 = pat(2, 17);
    let sd2 = s.send(0, 1, 3, 9, &msg2, false);
    s.pump();
    assert!(s.done(0, sd2));
    assert_eq!(s.eng[1].unexpected_len(), 1);
    let mut b = guarded(64);
    let r2 = s.recv(1, 3, 0, 9, contig(&mut b, 64));
    assert!(s.done(1, r2), "a receive matching an unexpected eager message completes at once");
    assert_eq!(s.eng[1].unexpected_len(), 0);
    assert_eq!(s.get(1, r2).status, status(0, 9, 17, 0));
    assert_eq!(&b[..17], &msg2[..]);
    assert_guard(&b, 17);
    assert_eq!(s.kinds(0, 1), vec![Kind::Eager, Kind::Eager]);
    assert!(s.kinds(1, 0).is_empty());
}

#[test]
fn zero_byte_messages() {
    for read_ok in [true, false] {
        let mut s = sim(2, 1, read_ok);
        let mut a = guarded(0);
        let r = s.recv(1, 1, 0, 0, contig(&mut a, 0));
        let sd = s.send(0, 1, 1, 0, &[], true);
        s.pump();
        assert!(s.done(0, sd) && s.done(1, r));
        assert_eq!(s.get(1, r).status, status(0, 0, 0, 0));
        assert_guard(&a, 0);
    }
}

#[test]
fn eager_limit_is_capped_by_the_frame_size() {
    let mut s = sim(2, usize::MAX, true);
    s.w.eager = 1000;
    s.w.max_frame = 64;
    let msg = pat(3, 100);
    let mut a = guarded(100);
    let r = s.recv(1, 1, 0, 0, contig(&mut a, 100));
    let sd = s.send(0, 1, 1, 0, &msg, false);
    s.pump();
    assert_eq!(s.kinds(0, 1), vec![Kind::Rts], "100 bytes exceed the 64-byte frame: rendezvous");
    assert!(s.done(0, sd) && s.done(1, r));
    assert_eq!(&a[..100], &msg[..]);
    // Exactly the eager limit still goes eagerly.
    s.w.max_frame = 1 << 20;
    let msg2 = pat(4, 1000);
    let mut b = guarded(1000);
    let r2 = s.recv(1, 1, 0, 0, contig(&mut b, 1000));
    s.send(0, 1, 1, 0, &msg2, false);
    s.pump();
    assert_eq!(s.kinds(0, 1).last(), Some(&Kind::Eager));
    assert!(s.done(1, r2));
    assert_eq!(&b[..1000], &msg2[..]);
}

// ---------------------------------------------------------------------------------------------
// Ordering
// ---------------------------------------------------------------------------------------------

/// Sizes around the eager limit (64) and the frame size (128), zero included.
fn mixed_size(k: usize) -> usize {
    [10, 300, 64, 65, 0, 129, 1, 1000, 127, 256][k % 10]
}

fn run_non_overtaking(read_ok: bool, cap: usize, posted_before: usize) {
    const N: usize = 40;
    let mut s = sim(2, cap, read_ok);
    let msgs: Vec<Vec<u8>> = (0..N).map(|k| pat(k, mixed_size(k))).collect();
    let mut bufs: Vec<Vec<u8>> = (0..N).map(|_| guarded(1000)).collect();
    let mut recvs = Vec::new();
    for b in bufs.iter_mut().take(posted_before) {
        recvs.push(s.recv(1, 5, 0, 7, contig(b, 1000)));
    }
    let mut sends = Vec::new();
    for (k, m) in msgs.iter().enumerate() {
        sends.push(s.send(0, 1, 5, 7, m, false));
        if k % 3 == 2 {
            // Room appears in the ring while earlier frames still wait in the engine's queue:
            // the next send must queue behind them, not jump ahead into the ring.
            s.deliver();
        }
    }
    if cap < N {
        assert!(s.eng[0].has_outgoing(), "a full ring must leave frames in the engine's queue");
        assert!(s.w.refused > 0);
    }
    // Let some traffic through before the remaining receives are posted.
    for _ in 0..3 {
        s.step();
    }
    for b in bufs.iter_mut().skip(posted_before) {
        recvs.push(s.recv(1, 5, 0, 7, contig(b, 1000)));
    }
    s.pump();
    assert!(!s.eng[0].has_outgoing() && !s.eng[1].has_outgoing());
    assert_eq!(s.w.queued(), 0);
    assert_eq!(s.eng[1].unexpected_len(), 0);
    for k in 0..N {
        let r = s.get(1, recvs[k]);
        assert!(r.complete, "receive {k} incomplete (read_ok {read_ok}, cap {cap}, posted {posted_before})");
        assert_eq!(r.status, status(0, 7, msgs[k].len() as u64, 0), "receive {k}");
        assert_eq!(&bufs[k][..msgs[k].len()], &msgs[k][..], "receive {k} got another message's bytes");
        assert!(bufs[k][msgs[k].len()..].iter().all(|&b| b == GUARD));
        assert!(s.done(0, sends[k]), "send {k}");
    }
    // The wire carried the matching frames in send order.
    let order: Vec<u64> =
        s.w.log.iter().filter(|l| l.0 == 0 && matches!(l.2.kind, Kind::Eager | Kind::Rts)).map(|l| l.2.len).collect();
    assert_eq!(order, msgs.iter().map(|m| m.len() as u64).collect::<Vec<_>>());
    if !read_ok {
        assert!(s.count(Kind::Cts) > 0 && s.count(Kind::Data) > 0);
        assert_eq!(s.count(Kind::Fin), 0);
    } else {
        assert_eq!(s.count(Kind::Cts), 0);
    }
}

#[test]
fn non_overtaking_mixed_eager_and_rendezvous() {
    for read_ok in [true, false] {
        for cap in [1, 2, 3, 7, usize::MAX] {
            for posted_before in [0, 13, 40] {
                run_non_overtaking(read_ok, cap, posted_before);
            }
        }
    }
}

#[test]
fn blocked_ring_keeps_order_and_control_frames_queue_too() {
    let mut s = sim(2, usize::MAX, true);
    s.w.blocked = vec![(0, 1)];
    let big = pat(1, 500);
    let small = pat(2, 8);
    let s1 = s.send(0, 1, 1, 4, &big, false);
    let s2 = s.send(0, 1, 1, 4, &small, false);
    assert!(s.w.log.is_empty() && s.eng[0].has_outgoing());
    assert!(!s.done(0, s2), "an eager send queued behind a full ring is not complete yet");
    s.pump();
    assert!(s.w.log.is_empty() && s.eng[0].has_outgoing());
    // The ring frees up but only one frame fits at a time; the small message must not overtake.
    s.w.blocked.clear();
    s.w.cap = 1;
    let mut a = guarded(500);
    let mut b = guarded(500);
    let r1 = s.recv(1, 1, 0, ANY_TAG, contig(&mut a, 500));
    let r2 = s.recv(1, 1, ANY_SOURCE, 4, contig(&mut b, 500));
    // The receiver's Fin has to wait in its own queue while the ring back is blocked.
    s.w.blocked = vec![(1, 0)];
    s.pump();
    assert_eq!(s.kinds(0, 1), vec![Kind::Rts, Kind::Eager]);
    assert!(s.done(1, r1) && s.done(1, r2));
    assert_eq!(s.get(1, r1).status.bytes, 500);
    assert_eq!(&a[..500], &big[..]);
    assert_eq!(&b[..8], &small[..]);
    assert!(s.done(0, s2));
    assert!(!s.done(0, s1), "the Fin is stuck behind the blocked ring");
    assert!(s.eng[1].has_outgoing());
    s.w.blocked.clear();
    s.pump();
    assert!(s.done(0, s1));
    assert!(!s.eng[1].has_outgoing());
}

#[test]
fn posted_receives_match_in_post_order_and_unexpected_in_arrival_order() {
    let mut s = sim(2, usize::MAX, true);
    // Posted first: the earliest posted matching receive wins, even if a later one is exact.
    let mut a = guarded(8);
    let mut b = guarded(8);
    let ra = s.recv(1, 1, ANY_SOURCE, ANY_TAG, contig(&mut a, 8));
    let rb = s.recv(1, 1, 0, 5, contig(&mut b, 8));
    let m1 = pat(1, 8);
    s.send(0, 1, 1, 5, &m1, false);
    s.pump();
    assert!(s.done(1, ra) && !s.done(1, rb));
    assert_eq!(&a[..8], &m1[..]);
    let m2 = pat(2, 8);
    s.send(0, 1, 1, 5, &m2, false);
    s.pump();
    assert!(s.done(1, rb));
    assert_eq!(&b[..8], &m2[..]);

    // Unexpected first: a wildcard receive takes the earliest arrival.
    let m3 = pat(3, 4);
    let m4 = pat(4, 4);
    s.send(0, 1, 1, 30, &m3, false);
    s.send(0, 1, 1, 20, &m4, false);
    s.pump();
    assert_eq!(s.eng[1].unexpected_len(), 2);
    let mut c = guarded(8);
    let rc = s.recv(1, 1, ANY_SOURCE, ANY_TAG, contig(&mut c, 8));
    assert_eq!(s.get(1, rc).status, status(0, 30, 4, 0));
    assert_eq!(&c[..4], &m3[..]);
    // A specific tag skips over non-matching earlier arrivals.
    s.send(0, 1, 1, 40, &m3, false);
    s.pump();
    let mut d = guarded(8);
    let rd = s.recv(1, 1, 0, 40, contig(&mut d, 8));
    assert_eq!(s.get(1, rd).status, status(0, 40, 4, 0));
    assert_eq!(s.eng[1].unexpected_len(), 1);
    let mut e = guarded(8);
    let re = s.recv(1, 1, 0, 20, contig(&mut e, 8));
    assert_eq!(s.get(1, re).status, status(0, 20, 4, 0));
    assert_eq!(&e[..4], &m4[..]);
    assert_eq!(s.eng[1].unexpected_len(), 0);
}

// ---------------------------------------------------------------------------------------------
// Wildcards and contexts
// ---------------------------------------------------------------------------------------------

#[test]
fn any_source_and_any_tag_report_the_actual_envelope() {
    for read_ok in [true, false] {
        let mut s = sim(3, 2, read_ok);
        let m0 = pat(10, 30); // eager from 0
        let m1 = pat(11, 700); // rendezvous from 1
        let mut a = guarded(1000);
        let mut b = guarded(1000);
        let mut c = guarded(1000);
        let ra = s.recv(2, 9, ANY_SOURCE, 11, contig(&mut a, 1000));
        let rb = s.recv(2, 9, 1, ANY_TAG, contig(&mut b, 1000));
        let rc = s.recv(2, 9, ANY_SOURCE, ANY_TAG, contig(&mut c, 1000));
        let s0 = s.send(0, 2, 9, 11, &m0, false);
        let s1 = s.send(1, 2, 9, 22, &m1, false);
        s.pump();
        assert!(s.done(0, s0) && s.done(1, s1));
        assert_eq!(s.get(2, ra).status, status(0, 11, 30, 0));
        assert_eq!(&a[..30], &m0[..]);
        assert_eq!(s.get(2, rb).status, status(1, 22, 700, 0));
        assert_eq!(&b[..700], &m1[..]);
        assert!(!s.done(2, rc));
        // The last wildcard takes whatever comes next, from anyone.
        let m2 = pat(12, 5);
        let s2 = s.send(1, 2, 9, 99, &m2, false);
        s.pump();
        assert!(s.done(1, s2));
        assert_eq!(s.get(2, rc).status, status(1, 99, 5, 0));
        assert_eq!(&c[..5], &m2[..]);
        assert_guard(&c, 5);
    }
}

#[test]
fn any_source_across_unexpected_senders() {
    let mut s = sim(3, usize::MAX, true);
    let m0 = pat(1, 10);
    let m1 = pat(2, 200);
    let s1 = s.send(1, 2, 4, 3, &m1, false);
    s.pump();
    let s0 = s.send(0, 2, 4, 3, &m0, false);
    s.pump();
    assert_eq!(s.eng[2].unexpected_len(), 2);
    let mut a = guarded(200);
    let mut b = guarded(200);
    let ra = s.recv(2, 4, ANY_SOURCE, 3, contig(&mut a, 200));
    let rb = s.recv(2, 4, ANY_SOURCE, 3, contig(&mut b, 200));
    s.pump();
    assert_eq!(s.get(2, ra).status, status(1, 3, 200, 0), "the earlier arrival (from 1) first");
    assert_eq!(s.get(2, rb).status, status(0, 3, 10, 0));
    assert_eq!(&a[..200], &m1[..]);
    assert_eq!(&b[..10], &m0[..]);
    assert!(s.done(0, s0) && s.done(1, s1));
}

#[test]
fn contexts_never_cross() {
    for size in [16, 600] {
        let mut s = sim(2, usize::MAX, true);
        let on_a = pat(1, size);
        let on_b = pat(2, size);
        let mut rb_buf = guarded(size);
        // A wildcard receive on context B does not take a message on context A.
        let rb = s.recv(1, 200, ANY_SOURCE, ANY_TAG, contig(&mut rb_buf, size));
        let sa = s.send(0, 1, 100, 1, &on_a, false);
        s.pump();
        assert!(!s.done(1, rb));
        assert_eq!(s.eng[1].unexpected_len(), 1);
        assert!(rb_buf.iter().all(|&b| b == GUARD));
        assert!(s.eng[1].probe(200, ANY_SOURCE, ANY_TAG).is_none());
        assert!(s.eng[1].probe(100, ANY_SOURCE, ANY_TAG).is_some());
        // Context B's own message matches it.
        let sb = s.send(0, 1, 200, 1, &on_b, false);
        s.pump();
        assert!(s.done(1, rb));
        assert_eq!(&rb_buf[..size], &on_b[..]);
        assert_eq!(s.eng[1].unexpected_len(), 1);
        // And the context A message is still there for a context A receive.
        let mut ra_buf = guarded(size);
        let ra = s.recv(1, 100, 0, 1, contig(&mut ra_buf, size));
        s.pump();
        assert!(s.done(1, ra) && s.done(0, sa) && s.done(0, sb));
        assert_eq!(&ra_buf[..size], &on_a[..]);
        assert_eq!(s.eng[1].unexpected_len(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Truncation
// ---------------------------------------------------------------------------------------------

fn run_truncation(size: usize, cap: usize, read_ok: bool, posted_first: bool) {
    let mut s = sim(2, 2, read_ok);
    let msg = pat(5, size);
    let mut buf = guarded(cap);
    let mut r = None;
    if posted_first {
        r = Some(s.recv(1, 1, 0, 2, contig(&mut buf, cap)));
    }
    let sd = s.send(0, 1, 1, 2, &msg, false);
    s.pump();
    let r = r.unwrap_or_else(|| s.recv(1, 1, 0, 2, contig(&mut buf, cap)));
    s.pump();
    let what = format!("size {size} cap {cap} read {read_ok} posted {posted_first}");
    assert!(s.done(0, sd), "{what}: send");
    assert!(s.done(1, r), "{what}: recv");
    assert_eq!(s.get(1, r).status, status(0, 2, cap as u64, TRUNCATE), "{what}");
    assert_eq!(&buf[..cap], &msg[..cap], "{what}");
    assert_guard(&buf, cap);
    for &(_, _, _, n) in &s.w.reads {
        assert!(n <= cap, "{what}: read {n} bytes into a {cap}-byte buffer");
    }
}

#[test]
fn truncation_eager() {
    for posted_first in [true, false] {
        run_truncation(60, 10, true, posted_first);
        run_truncation(60, 0, true, posted_first);
        run_truncation(64, 63, false, posted_first);
    }
}

#[test]
fn truncation_rendezvous_with_read() {
    for posted_first in [true, false] {
        for (size, cap) in [(1000, 300), (65, 64), (500, 0), (129, 128)] {
            run_truncation(size, cap, true, posted_first);
        }
    }
}

#[test]
fn truncation_rendezvous_streamed() {
    for posted_first in [true, false] {
        for (size, cap) in [(1000, 300), (65, 64), (500, 0), (1000, 129), (1000, 128), (257, 1)] {
            run_truncation(size, cap, false, posted_first);
        }
    }
}

#[test]
fn exact_fit_is_not_truncation() {
    for read_ok in [true, false] {
        for size in [64, 65, 256] {
            let mut s = sim(2, usize::MAX, read_ok);
            let msg = pat(6, size);
            let mut buf = guarded(size);
            let r = s.recv(1, 1, 0, 0, contig(&mut buf, size));
            s.send(0, 1, 1, 0, &msg, false);
            s.pump();
            assert_eq!(s.get(1, r).status, status(0, 0, size as u64, 0));
            assert_eq!(&buf[..size], &msg[..]);
            assert_guard(&buf, size);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cancel
// ---------------------------------------------------------------------------------------------

#[test]
fn cancel_posted_receive() {
    let mut s = sim(2, usize::MAX, true);
    let mut buf = guarded(16);
    let r = s.recv(1, 1, 0, 5, contig(&mut buf, 16));
    assert!(s.eng[1].cancel_recv(r));
    let req = s.get(1, r);
    assert!(req.complete && req.status.cancelled);
    assert_eq!(req.status.bytes, 0);
    assert!(!s.eng[1].is_posted_recv(r));
    assert!(!s.eng[1].cancel_recv(r), "a second cancel does nothing");
    // A later message is not delivered to the cancelled receive.
    let msg = pat(1, 16);
    s.send(0, 1, 1, 5, &msg, false);
    s.pump();
    assert_eq!(s.eng[1].unexpected_len(), 1);
    assert!(buf.iter().all(|&b| b == GUARD));
    assert!(s.get(1, r).status.cancelled);
    // Cancelling an Owned receive hands the buffer back.
    let ro = s.recv(1, 1, 0, 6, Sink::Owned(vec![7u8; 3]));
    assert!(s.eng[1].cancel_recv(ro));
    assert!(s.get(1, ro).status.cancelled);
    assert_eq!(s.get(1, ro).owned.as_deref(), Some(&[7u8, 7, 7][..]));
}

#[test]
fn cancel_after_match_fails() {
    // Matched and complete (eager).
    let mut s = sim(2, usize::MAX, false);
    let mut buf = guarded(600);
    let r = s.recv(1, 1, 0, 5, contig(&mut buf, 600));
    let msg = pat(1, 16);
    s.send(0, 1, 1, 5, &msg, false);
    s.pump();
    assert!(s.done(1, r));
    assert!(!s.eng[1].cancel_recv(r));
    assert!(!s.get(1, r).status.cancelled);
    assert_eq!(s.get(1, r).status, status(0, 5, 16, 0));

    // Matched a rendezvous, still streaming (reads refused): too late to cancel.
    let mut buf2 = guarded(600);
    let big = pat(2, 600);
    let sd = s.send(0, 1, 1, 5, &big, false);
    s.step(); // Rts delivered: unexpected
    assert_eq!(s.eng[1].unexpected_len(), 1);
    let r2 = s.recv(1, 1, 0, 5, contig(&mut buf2, 600));
    assert!(!s.done(1, r2), "matched an Rts, waiting for Data");
    assert!(!s.eng[1].is_posted_recv(r2));
    assert!(!s.eng[1].cancel_recv(r2));
    s.pump();
    assert!(s.done(1, r2) && s.done(0, sd));
    assert!(!s.get(1, r2).status.cancelled);
    assert_eq!(&buf2[..600], &big[..]);
}

// ---------------------------------------------------------------------------------------------
// Synchronous sends
// ---------------------------------------------------------------------------------------------

#[test]
fn synchronous_send_waits_for_the_match() {
    for size in [0, 20, 64, 65, 900] {
        for read_ok in [true, false] {
            let mut s = sim(2, 3, read_ok);
            let msg = pat(1, size);
            let sd = s.send(0, 1, 1, 8, &msg, true);
            s.pump();
            assert!(!s.done(0, sd), "size {size}: a synchronous send completed before any match");
            assert_eq!(s.eng[1].unexpected_len(), 1);
            // Other traffic does not complete it either.
            let other = pat(2, 4);
            let mut ob = guarded(4);
            let ro = s.recv(1, 1, 0, 9, contig(&mut ob, 4));
            s.send(0, 1, 1, 9, &other, false);
            s.pump();
            assert!(s.done(1, ro) && !s.done(0, sd));
            let mut buf = guarded(size);
            let r = s.recv(1, 1, 0, 8, contig(&mut buf, size));
            s.pump();
            assert!(s.done(1, r) && s.done(0, sd), "size {size} read {read_ok}");
            assert_eq!(s.get(1, r).status, status(0, 8, size as u64, 0));
            assert_eq!(&buf[..size], &msg[..]);
            let k = s.kinds(1, 0);
            if size <= 64 {
                assert_eq!(k, vec![Kind::SyncAck]);
            } else if read_ok {
                assert_eq!(k, vec![Kind::Fin]);
            } else {
                assert_eq!(k, vec![Kind::Cts]);
            }
        }
    }
}

#[test]
fn synchronous_send_to_a_posted_receive() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 30);
    let mut buf = guarded(30);
    let r = s.recv(1, 1, 0, 8, contig(&mut buf, 30));
    let sd = s.send(0, 1, 1, 8, &msg, true);
    assert!(!s.done(0, sd));
    s.step(); // EagerSync delivered, SyncAck pushed
    assert!(s.done(1, r) && !s.done(0, sd));
    s.pump();
    assert!(s.done(0, sd));
    assert_eq!(s.kinds(0, 1), vec![Kind::EagerSync]);
    assert_eq!(s.kinds(1, 0), vec![Kind::SyncAck]);
    assert_eq!(&buf[..30], &msg[..]);
}

// ---------------------------------------------------------------------------------------------
// Rendezvous
// ---------------------------------------------------------------------------------------------

#[test]
fn rendezvous_with_remote_read() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 1000);
    let sd = s.send(0, 1, 1, 2, &msg, false);
    s.pump();
    assert!(!s.done(0, sd), "the receiver has not matched yet");
    assert!(s.w.reads.is_empty());
    let mut buf = guarded(1000);
    let r = s.recv(1, 1, 0, 2, contig(&mut buf, 1000));
    assert!(s.done(1, r), "the read happens at match time");
    assert_eq!(s.w.reads, vec![(1, 0, msg.as_ptr() as u64, 1000)]);
    assert!(!s.done(0, sd), "the send waits for Fin");
    s.pump();
    assert!(s.done(0, sd));
    assert_eq!(s.kinds(0, 1), vec![Kind::Rts]);
    assert_eq!(s.kinds(1, 0), vec![Kind::Fin]);
    assert_eq!(s.get(1, r).status, status(0, 2, 1000, 0));
    assert_eq!(&buf[..1000], &msg[..]);
    assert_guard(&buf, 1000);
    // The Rts told the size and the sender's address.
    let rts = s.w.log[0].2;
    assert_eq!((rts.len, rts.aux), (1000, msg.as_ptr() as u64));
}

#[test]
fn rendezvous_streamed_when_reads_are_refused() {
    for size in [65, 128, 129, 255, 1000, 1023, 4097] {
        for cap in [1, 2, usize::MAX] {
            for posted_first in [true, false] {
                let mut s = sim(2, cap, false);
                let msg = pat(size, size);
                let mut buf = guarded(size);
                let mut r = None;
                if posted_first {
                    r = Some(s.recv(1, 1, 0, 2, contig(&mut buf, size)));
                }
                let sd = s.send(0, 1, 1, 2, &msg, false);
                s.pump();
                let r = r.unwrap_or_else(|| s.recv(1, 1, 0, 2, contig(&mut buf, size)));
                s.pump();
                let what = format!("size {size} cap {cap} posted {posted_first}");
                assert!(s.done(0, sd) && s.done(1, r), "{what}");
                assert_eq!(s.get(1, r).status, status(0, 2, size as u64, 0), "{what}");
                assert_eq!(&buf[..size], &msg[..], "{what}");
                assert_guard(&buf, size);
                assert_eq!(s.kinds(1, 0), vec![Kind::Cts], "{what}");
                let data: Vec<_> = s.w.log.iter().filter(|l| l.2.kind == Kind::Data).collect();
                assert_eq!(data.len(), size.div_ceil(128), "{what}");
                let mut off = 0;
                for d in data {
                    assert_eq!(d.2.aux as usize, off, "{what}: Data offsets in order");
                    assert_eq!(d.2.id, r.wire(), "{what}: Data addressed to the receive request");
                    assert!(d.3 <= 128 && d.3 > 0);
                    off += d.3;
                }
                assert_eq!(off, size);
                assert!(s.w.reads.is_empty());
            }
        }
    }
}

/// A receive waits for streamed data from its `Cts` until the last byte lands, and no longer
/// when its sender fails first: TCP reads its bulk lanes only while one does.
#[test]
fn a_receive_awaits_streamed_data_from_its_cts_to_its_end() {
    for fail in [false, true] {
        let mut s = sim(2, 1, false);
        let msg = pat(4, 1000);
        let mut buf = guarded(1000);
        let r = s.recv(1, 1, 0, 2, contig(&mut buf, 1000));
        assert!(!s.eng[1].awaits_stream());
        let sd = s.send(0, 1, 1, 2, &msg, false);
        // Until the Cts has been sent: the Rts reaches the receiver, which answers.
        while s.kinds(1, 0).is_empty() {
            assert!(!s.eng[1].awaits_stream());
            assert!(s.step(), "stuck before the Cts");
        }
        assert!(s.eng[1].awaits_stream() && !s.done(1, r), "fail {fail}");
        if fail {
            assert!(s.eng[1].fail_peer(0, |_, _| false, 77));
            assert_eq!(s.get(1, r).status.error, 77);
        } else {
            s.pump();
            assert!(s.done(0, sd) && s.done(1, r));
            assert_eq!(&buf[..1000], &msg[..]);
        }
        assert!(!s.eng[1].awaits_stream(), "fail {fail}");
    }
}

/// A byte-stream transport (TCP): data frames leave in pieces, over several lanes, while
/// eager and synchronous messages keep their order on lane 0; data is placed directly.
#[test]
fn byte_stream_pieces_lanes_and_direct_placement() {
    for piece in [1, 7, 50] {
        for lanes in [1, 2, 3] {
            for direct in [false, true] {
                let what = format!("piece {piece} lanes {lanes} direct {direct}");
                let mut s = sim(2, 4, false);
                s.w.piece = Some(piece);
                s.w.lanes = lanes;
                s.w.place_direct = direct;
                s.w.max_frame = 64;
                s.w.eager = 16;
                let sizes = [300, 5, 1000, 0, 17, 64, 129];
                let msgs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(k, &n)| pat(k + 1, n)).collect();
                let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&n| guarded(n)).collect();
                let mut recvs = Vec::new();
                for (k, b) in bufs.iter_mut().enumerate() {
                    let cap = sizes[k];
                    recvs.push(s.recv(1, 1, 0, 3, contig(b, cap)));
                }
                let sends: Vec<ReqId> =
                    msgs.iter().enumerate().map(|(k, m)| s.send(0, 1, 1, 3, m, k % 3 == 1)).collect();
                s.pump();
                for k in 0..sizes.len() {
                    assert!(s.done(0, sends[k]), "{what}: send {k}");
                    assert_eq!(s.get(1, recvs[k]).status, status(0, 3, sizes[k] as u64, 0), "{what}: recv {k}");
                    assert_eq!(&bufs[k][..sizes[k]], &msgs[k][..], "{what}: data {k}");
                    assert_guard(&bufs[k], sizes[k]);
                }
                assert!(s.w.mid.is_empty(), "{what}: a frame left unfinished");
            }
        }
    }
}

#[test]
fn several_streams_at_once() {
    let mut s = sim(3, 2, false);
    s.w.max_frame = 50;
    s.w.eager = 10;
    let m: Vec<Vec<u8>> = (0..6).map(|k| pat(k, 333 + k * 17)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..6).map(|_| guarded(500)).collect();
    let mut recvs = Vec::new();
    for (k, b) in bufs.iter_mut().enumerate() {
        recvs.push(s.recv(2, 1, (k % 2) as i32, 0, contig(b, 500)));
    }
    let sends: Vec<(ProcIdx, ReqId)> = m
        .iter()
        .enumerate()
        .map(|(k, x)| ((k % 2) as ProcIdx, s.send((k % 2) as ProcIdx, 2, 1, 0, x, false)))
        .collect();
    s.pump();
    for k in 0..6 {
        assert!(s.done(sends[k].0, sends[k].1));
        assert_eq!(s.get(2, recvs[k]).status, status((k % 2) as i32, 0, m[k].len() as u64, 0));
        assert_eq!(&bufs[k][..m[k].len()], &m[k][..]);
        assert_guard(&bufs[k], m[k].len());
    }
}

#[test]
fn packed_send_data() {
    for read_ok in [true, false] {
        let mut s = sim(2, usize::MAX, read_ok);
        let msg = pat(9, 777);
        let mut buf = guarded(777);
        let r = s.recv(1, 1, 0, 0, contig(&mut buf, 777));
        let sd = s.send_packed(0, 1, 1, 0, msg.clone());
        s.pump();
        assert!(s.done(0, sd) && s.done(1, r));
        assert_eq!(&buf[..777], &msg[..]);
    }
}

// ---------------------------------------------------------------------------------------------
// Probe, mprobe, owned sinks
// ---------------------------------------------------------------------------------------------

#[test]
fn probe_reports_without_receiving() {
    for size in [12, 800] {
        let mut s = sim(2, usize::MAX, true);
        assert!(s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).is_none());
        let msg = pat(1, size);
        let sd = s.send(0, 1, 1, 44, &msg, false);
        s.pump();
        let st = s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).expect("probe");
        assert_eq!(st, status(0, 44, size as u64, 0));
        assert_eq!(s.eng[1].probe(1, 0, 44), Some(st));
        assert!(s.eng[1].probe(1, 0, 45).is_none());
        assert!(s.eng[1].probe(1, 1, 44).is_none());
        assert!(s.eng[1].probe(2, 0, 44).is_none());
        assert_eq!(s.eng[1].unexpected_len(), 1, "probe leaves the message queued");
        let mut buf = guarded(size);
        let r = s.recv(1, 1, 0, 44, contig(&mut buf, size));
        s.pump();
        assert!(s.done(1, r) && s.done(0, sd));
        assert_eq!(&buf[..size], &msg[..]);
        assert!(s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).is_none());
    }
}

#[test]
fn mprobe_then_mrecv() {
    for read_ok in [true, false] {
        for size in [12, 800] {
            let mut s = sim(2, 2, read_ok);
            let first = pat(1, size);
            let second = pat(2, size);
            let s1 = s.send(0, 1, 1, 3, &first, false);
            let s2 = s.send(0, 1, 1, 3, &second, false);
            s.pump();
            assert!(s.eng[1].mprobe(1, 0, 4).is_none());
            let msg = s.eng[1].mprobe(1, ANY_SOURCE, 3).expect("mprobe");
            assert_eq!((msg.from, msg.h.src, msg.h.tag, msg.h.len), (0, 0, 3, size as u64));
            assert_eq!(s.eng[1].unexpected_len(), 1);
            // A normal receive cannot take the mprobed message: it gets the second one.
            let mut b2 = guarded(size);
            let r2 = s.recv(1, 1, 0, 3, contig(&mut b2, size));
            s.pump();
            assert!(s.done(1, r2));
            assert_eq!(&b2[..size], &second[..]);
            // Nor does a wildcard receive posted now.
            let mut bw = guarded(size);
            let rw = s.recv(1, 1, ANY_SOURCE, ANY_TAG, contig(&mut bw, size));
            s.pump();
            assert!(!s.done(1, rw));
            assert!(s.eng[1].probe(1, ANY_SOURCE, ANY_TAG).is_none());
            let mut b1 = guarded(size);
            let r1 = s.with(1, |e, n| e.mrecv(n, msg, contig(&mut b1, size)));
            s.pump();
            assert!(s.done(1, r1) && s.done(0, s1) && s.done(0, s2));
            assert_eq!(s.get(1, r1).status, status(0, 3, size as u64, 0));
            assert_eq!(&b1[..size], &first[..]);
            assert!(!s.done(1, rw));
            assert!(s.eng[1].cancel_recv(rw));
            assert!(bw.iter().all(|&b| b == GUARD));
        }
    }
}

#[test]
fn owned_sink_gives_the_data_back() {
    for read_ok in [true, false] {
        for (size, cap) in [(0, 0), (40, 40), (40, 100), (900, 900), (900, 129)] {
            let mut s = sim(2, 2, read_ok);
            let msg = pat(3, size);
            let r = s.recv(1, 1, 0, 0, Sink::Owned(vec![0xAB; cap]));
            assert!(s.get(1, r).owned.is_none());
            let sd = s.send(0, 1, 1, 0, &msg, false);
            s.pump();
            assert!(s.done(0, sd) && s.done(1, r));
            let req = s.get(1, r);
            let n = size.min(cap);
            let err = if size > cap { TRUNCATE } else { 0 };
            assert_eq!(req.status, status(0, 0, n as u64, err));
            let owned = req.owned.as_ref().expect("owned data");
            assert_eq!(owned.len(), cap);
            assert_eq!(&owned[..n], &msg[..n]);
            assert!(owned[n..].iter().all(|&b| b == 0xAB));
        }
    }
}

#[test]
fn owned_sink_on_an_unexpected_and_an_mprobed_message() {
    for read_ok in [true, false] {
        let mut s = sim(2, usize::MAX, read_ok);
        let a = pat(1, 300);
        let b = pat(2, 20);
        s.send(0, 1, 1, 0, &a, false);
        s.send(0, 1, 1, 1, &b, false);
        s.pump();
        let m = s.eng[1].mprobe(1, 0, 0).unwrap();
        let ra = s.with(1, |e, n| e.mrecv(n, m, Sink::Owned(vec![0; 300])));
        let rb = s.recv(1, 1, 0, 1, Sink::Owned(vec![0; 20]));
        s.pump();
        assert_eq!(s.get(1, ra).owned.as_deref(), Some(&a[..]));
        assert_eq!(s.get(1, rb).owned.as_deref(), Some(&b[..]));
    }
}

// ---------------------------------------------------------------------------------------------
// Request slots
// ---------------------------------------------------------------------------------------------

#[test]
fn release_frees_the_slot_and_stale_ids_are_not_found() {
    let mut s = sim(2, usize::MAX, true);
    let msg = pat(1, 8);
    let mut buf = guarded(8);
    let r = s.recv(1, 1, 0, 0, contig(&mut buf, 8));
    s.send(0, 1, 1, 0, &msg, false);
    s.pump();
    assert!(s.done(1, r));
    s.eng[1].release(r);
    assert!(s.eng[1].get(r).is_none());
    assert!(s.eng[1].get_mut(r).is_none());
    s.eng[1].release(r); // releasing a stale id is harmless
    let again = s.eng[1].completed(Status::default());
    assert_eq!(again.idx, r.idx, "the freed slot is reused");
    assert_ne!(again.gen, r.gen);
    assert!(s.eng[1].get(r).is_none(), "the old generation must not find the new request");
    assert!(s.eng[1].get(again).unwrap().complete);
    assert_eq!(ReqId::from_wire(again.wire()), again);

    // A stale Fin (old generation) must not complete the send that now owns the slot.
    let m1 = pat(2, 8);
    let s1 = s.send(0, 1, 1, 0, &m1, false);
    assert!(s.done(0, s1));
    s.pump();
    s.eng[0].release(s1);
    let big = pat(3, 500);
    let s2 = s.send(0, 1, 1, 0, &big, false);
    assert_eq!(s2.idx, s1.idx);
    s.pump();
    assert!(!s.done(0, s2));
    let stale = Header::control(Kind::Fin, s1.wire(), 0);
    s.with(0, |e, n| e.on_frame(n, 1, &stale, &[]));
    assert!(!s.done(0, s2), "a Fin for an old generation completed the slot's new request");
    let stale_cts = Header::control(Kind::Cts, s1.wire(), 0);
    s.with(0, |e, n| e.on_frame(n, 1, &stale_cts, &[]));
    assert!(!s.eng[0].has_outgoing());
    s.eng[1].mprobe(1, 0, 0).expect("the first 8-byte message");
    let mut b2 = guarded(500);
    let r2 = s.recv(1, 1, 0, 0, contig(&mut b2, 500));
    s.pump();
    assert!(s.done(0, s2) && s.done(1, r2));
    assert_eq!(&b2[..500], &big[..]);
}

#[test]
fn release_of_active_requests_detaches_them() {
    for read_ok in [true, false] {
        let mut s = sim(2, 1, read_ok);
        // An active receive.
        let mut buf = guarded(600);
        let r = s.recv(1, 1, 0, 0, contig(&mut buf, 600));
        s.eng[1].release(r);
        let req = s.get(1, r);
        assert!(req.detached && !req.complete);
        assert!(s.eng[1].is_posted_recv(r), "a detached receive still matches");
        // An active rendezvous send.
        let big = pat(1, 600);
        let sd = s.send(0, 1, 1, 0, &big, false);
        s.eng[0].release(sd);
        assert!(s.get(0, sd).detached);
        s.pump();
        assert_eq!(&buf[..600], &big[..], "the detached receive still wrote its data");
        assert!(s.eng[1].get(r).is_none(), "completed detached receive dropped");
        assert!(s.eng[0].get(sd).is_none(), "completed detached send dropped");
        // Both slots are free again.
        let n1 = s.eng[1].completed(Status::default());
        let n0 = s.eng[0].completed(Status::default());
        assert_eq!((n1.idx, n0.idx), (r.idx, sd.idx));
        assert!(s.eng[1].get(r).is_none() && s.eng[0].get(sd).is_none());

        // A synchronous eager send detached while waiting for its SyncAck.
        let small = pat(2, 10);
        let ss = s.send(0, 1, 1, 0, &small, true);
        s.pump();
        s.eng[0].release(ss);
        assert!(s.eng[0].get(ss).is_some());
        let mut b2 = guarded(10);
        let r2 = s.recv(1, 1, 0, 0, contig(&mut b2, 10));
        s.pump();
        assert!(s.done(1, r2));
        assert!(s.eng[0].get(ss).is_none());
    }
}

// ---------------------------------------------------------------------------------------------
// Typed sinks
// ---------------------------------------------------------------------------------------------

/// Receives `msg` (packed MPI_DOUBLE_INT elements) into `count` elements at offset 8 of a
/// guarded buffer, and checks the data blocks, the padding and the bytes around the span.
fn run_double_int(msg_elems: usize, count: usize, eager: usize, max_frame: usize, read_ok: bool, posted_first: bool) {
    let lay = predefined(c::MPI_DOUBLE_INT).expect("MPI_DOUBLE_INT").clone();
    assert_eq!((lay.size, lay.extent), (12, 16));
    let mut s = sim(2, 2, read_ok);
    s.w.eager = eager;
    s.w.max_frame = max_frame;
    let msg = pat(7, 12 * msg_elems);
    let base = 8usize;
    let mut buf = vec![GUARD; base + 16 * count + 16];
    let make_sink = |buf: &mut Vec<u8>| {
        // SAFETY: `buf` is test-owned, outlives the receive and is untouched until it completes.
        let span = unsafe { UserBuf::new(buf.as_mut_ptr() as usize, buf.len() - 16) };
        Sink::Typed { span, base_off: base as isize, layout: lay.clone(), start: 0, len: lay.size * count }
    };
    let mut r = None;
    if posted_first {
        r = Some(s.recv(1, 1, 0, 0, make_sink(&mut buf)));
    }
    let sd = s.send(0, 1, 1, 0, &msg, false);
    s.pump();
    let r = r.unwrap_or_else(|| s.recv(1, 1, 0, 0, make_sink(&mut buf)));
    s.pump();
    let what = format!("elems {msg_elems} count {count} eager {eager} frame {max_frame} read {read_ok}");
    assert!(s.done(0, sd) && s.done(1, r), "{what}");
    let n = msg_elems.min(count);
    let err = if msg_elems > count { TRUNCATE } else { 0 };
    assert_eq!(s.get(1, r).status, status(0, 0, 12 * n as u64, err), "{what}");
    let mut expect = vec![GUARD; buf.len()];
    for e in 0..n {
        let at = base + 16 * e;
        expect[at..at + 12].copy_from_slice(&msg[12 * e..12 * e + 12]);
    }
    assert_eq!(buf, expect, "{what}");
}

#[test]
fn typed_double_int_sink() {
    for read_ok in [true, false] {
        for posted_first in [true, false] {
            // Eager.
            run_double_int(3, 3, 64, 128, read_ok, posted_first);
            // Rendezvous (read into a bounce buffer, or streamed in pieces that split elements).
            run_double_int(3, 3, 16, 128, read_ok, posted_first);
            run_double_int(7, 7, 16, 5, read_ok, posted_first);
            run_double_int(7, 7, 16, 13, read_ok, posted_first);
            // Truncated: the extra elements never land.
            run_double_int(3, 2, 64, 128, read_ok, posted_first);
            run_double_int(9, 4, 16, 7, read_ok, posted_first);
            // Fewer elements than room.
            run_double_int(2, 5, 16, 11, read_ok, posted_first);
        }
    }
}

#[test]
fn mprobed_synchronous_send_completes_on_mrecv() {
    for size in [10, 300] {
        let mut s = sim(2, usize::MAX, true);
        let msg = pat(1, size);
        let sd = s.send(0, 1, 1, 0, &msg, true);
        s.pump();
        let m = s.eng[1].mprobe(1, 0, 0).expect("mprobe");
        s.pump();
        assert!(!s.done(0, sd), "mprobe is not a match for a synchronous send");
        let mut buf = guarded(size);
        let r = s.with(1, |e, n| e.mrecv(n, m, contig(&mut buf, size)));
        s.pump();
        assert!(s.done(1, r) && s.done(0, sd));
        assert_eq!(&buf[..size], &msg[..]);
    }
}

#[test]
fn send_to_self() {
    for read_ok in [true, false] {
        for size in [5, 64, 65, 1000] {
            let mut s = sim(1, 1, read_ok);
            let msg = pat(2, size);
            let sd = s.send(0, 0, 1, 3, &msg, true);
            s.pump();
            assert!(!s.done(0, sd));
            let mut buf = guarded(size);
            let r = s.recv(0, 1, 0, 3, contig(&mut buf, size));
            s.pump();
            assert!(s.done(0, sd) && s.done(0, r), "size {size} read {read_ok}");
            assert_eq!(s.get(0, r).status, status(0, 3, size as u64, 0));
            assert_eq!(&buf[..size], &msg[..]);
            assert_guard(&buf, size);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Typed sends: elements of a datatype packed frame by frame
// ---------------------------------------------------------------------------------------------

/// Layouts with short, odd and gapped blocks: (name, layout).
fn odd_layouts() -> Vec<(&'static str, Arc<Layout>)> {
    let short = predefined(c::MPI_SHORT).unwrap();
    let dbl = predefined(c::MPI_DOUBLE).unwrap();
    let chr = predefined(c::MPI_CHAR).unwrap();
    let int = predefined(c::MPI_INT).unwrap();
    let st = Layout::structure(&[1, 1, 2], &[0, 8, 20], &[chr, dbl, int]).unwrap();
    vec![
        ("double_int", predefined(c::MPI_DOUBLE_INT).unwrap().clone()),
        ("vector 3x3 shorts stride 7", Arc::new(Layout::vector(3, 3, 7, short).unwrap())),
        ("indexed 1,5,2 chars", Arc::new(Layout::indexed(&[1, 5, 2], &[9, 1, 12], chr).unwrap())),
        ("struct with gaps", Arc::new(st)),
        ("negative stride", Arc::new(Layout::hvector(4, 1, -12, int).unwrap())),
    ]
}

/// The packed bytes of `count` elements of `lay` at `base` in `mem`, block by block from the
/// type map (independent of the engine's runs).
fn ref_pack(lay: &Layout, mem: &[u8], base: isize, count: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for e in 0..count as isize {
        for &(off, len) in &lay.blocks {
            let at = (base + e * lay.extent + off) as usize;
            v.extend_from_slice(&mem[at..at + len]);
        }
    }
    v
}

/// The buffer a typed receive of `packed` should leave: `blank` with the blocks filled in.
fn ref_unpack(lay: &Layout, blank: &[u8], base: isize, packed: &[u8]) -> Vec<u8> {
    let mut out = blank.to_vec();
    let mut src = packed;
    let mut e = 0isize;
    while !src.is_empty() {
        for &(off, len) in &lay.blocks {
            let n = len.min(src.len());
            let at = (base + e * lay.extent + off) as usize;
            out[at..at + n].copy_from_slice(&src[..n]);
            src = &src[n..];
        }
        e += 1;
    }
    out
}

/// Where `count` elements of `lay` lie in a fresh buffer: (buffer length, base offset).
fn room(lay: &Layout, count: usize) -> (usize, isize) {
    let (lo, hi) = lay.span(count);
    ((hi - lo) as usize + 16, -lo + 8)
}

#[allow(clippy::too_many_arguments)]
fn run_typed(
    name: &str,
    lay: &Arc<Layout>,
    count: usize,
    eager: usize,
    max_frame: usize,
    read_ok: bool,
    in_place: bool,
    stream: Option<usize>,
    typed_recv: bool,
) {
    let mut s = sim(2, 2, read_ok);
    s.w.eager = eager;
    s.w.max_frame = max_frame;
    s.w.in_place = in_place;
    if let Some(p) = stream {
        s.w.piece = Some(p);
        s.w.lanes = 2;
        s.w.place_direct = true;
    }
    let (len, base) = room(lay, count);
    let mem = pat(3, len);
    let packed = ref_pack(lay, &mem, base, count);
    let total = packed.len();
    let what = format!(
        "{name} count {count} eager {eager} frame {max_frame} read {read_ok} in-place {in_place} \
         stream {stream:?} typed-recv {typed_recv}"
    );
    // SAFETY: `mem` outlives the send (pumped to completion below) and is not modified.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: total };
    let sd = s.with(0, |e, n| e.send(n, 1, 1, 0, 4, data, false, Sender::GoesOn));
    let mut rbuf = if typed_recv { vec![GUARD; len] } else { guarded(total) };
    let blank = rbuf.clone();
    // SAFETY: `rbuf` outlives the receive and is untouched until it completes.
    let rspan = unsafe { UserBuf::new(rbuf.as_mut_ptr() as usize, rbuf.len()) };
    let sink = if typed_recv {
        Sink::Typed { span: rspan, base_off: base, layout: lay.clone(), start: 0, len: total }
    } else {
        Sink::Contig(rspan.prefix(total))
    };
    let r = s.recv(1, 1, 0, 4, sink);
    s.pump();
    assert!(s.done(0, sd) && s.done(1, r), "{what}");
    assert_eq!(s.get(1, r).status, status(0, 4, total as u64, 0), "{what}");
    if typed_recv {
        assert_eq!(rbuf, ref_unpack(lay, &blank, base, &packed), "{what}");
    } else {
        assert_eq!(&rbuf[..total], &packed[..], "{what}");
        assert_guard(&rbuf, total);
    }
    // The sender's elements are never read remotely: the receiver cannot know where they lie.
    assert!(s.w.reads.iter().all(|r| r.1 != 0), "{what}: read the sender's memory");
    let rts: Vec<_> = s.w.log.iter().filter(|l| l.2.kind == Kind::Rts).collect();
    assert!(rts.iter().all(|l| l.2.aux == 0), "{what}: Rts offered an address");
    if total > eager.min(max_frame) {
        assert_eq!(rts.len(), 1, "{what}");
        let data: usize = s.w.log.iter().filter(|l| l.2.kind == Kind::Data).map(|l| l.3).sum();
        assert_eq!(data, total, "{what}: streamed bytes");
    }
    if !in_place {
        assert_eq!(s.w.filled, 0, "{what}");
    } else if total > 0 && stream.is_none() {
        assert!(s.w.filled > 0, "{what}: nothing was packed in place");
    }
}

#[test]
fn typed_send_data_packs_per_frame() {
    for (name, lay) in odd_layouts() {
        for count in [1, 3, 40] {
            for (eager, frame) in [(4096, 4096), (16, 5), (16, 13), (16, 64), (0, 7)] {
                for read_ok in [true, false] {
                    for in_place in [true, false] {
                        for typed_recv in [false, true] {
                            run_typed(name, &lay, count, eager, frame, read_ok, in_place, None, typed_recv);
                        }
                    }
                    for piece in [1, 3] {
                        run_typed(name, &lay, count, eager, frame, read_ok, false, Some(piece), true);
                    }
                }
            }
        }
    }
}

/// Kinds and payload lengths of the frames rank 0 sent in a run of `lay` x `count` with an
/// eager limit far above the message (the received bytes are checked by `run_typed`).
fn frames_of(lay: &Arc<Layout>, count: usize, in_place: bool) -> Vec<(Kind, usize)> {
    run_typed("frames", lay, count, 1 << 20, 1 << 20, false, in_place, None, true);
    let mut s = sim(2, 2, false);
    s.w.eager = 1 << 20;
    s.w.max_frame = 1 << 20;
    s.w.in_place = in_place;
    let (len, base) = room(lay, count);
    let mem = pat(5, len);
    let total = ref_pack(lay, &mem, base, count).len();
    // SAFETY: `mem` outlives the send (pumped to completion below) and is not modified.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: total };
    let sd = s.with(0, |e, n| e.send(n, 1, 1, 0, 4, data, false, Sender::GoesOn));
    let mut rbuf = vec![0u8; total];
    // SAFETY: `rbuf` outlives the receive and is untouched until it completes.
    let r = s.recv(1, 1, 0, 4, Sink::Contig(unsafe { UserBuf::new(rbuf.as_mut_ptr() as usize, total) }));
    s.pump();
    assert!(s.done(0, sd) && s.done(1, r));
    assert_eq!(rbuf, ref_pack(lay, &mem, base, count));
    s.w.log.iter().filter(|l| l.0 == 0 && l.2.kind != Kind::Fin).map(|l| (l.2.kind, l.3)).collect()
}

#[test]
fn sparse_elements_stream_in_pieces_dense_ones_go_eagerly() {
    let dbl = predefined(c::MPI_DOUBLE).unwrap();
    // A column of a 512 x 512 matrix of doubles: 4 KiB of data over 2 MiB.
    let column = Arc::new(Layout::vector(512, 1, 512, dbl).unwrap());
    let frames = frames_of(&column, 1, true);
    assert_eq!(frames[0].0, Kind::Rts, "{frames:?}");
    let data: Vec<usize> = frames.iter().filter(|f| f.0 == Kind::Data).map(|f| f.1).collect();
    assert!(data.len() >= 4, "gathered and scattered in one piece: {frames:?}");
    assert_eq!(data.iter().sum::<usize>(), 4096);
    // Over a transport that is not filled in place (a socket) the round trip costs more.
    assert_eq!(frames_of(&column, 1, false), [(Kind::Eager, 4096)]);
    // A small column still goes in one eager frame.
    let small = Arc::new(Layout::vector(64, 1, 512, dbl).unwrap());
    assert_eq!(frames_of(&small, 1, true), [(Kind::Eager, 512)]);
    // As does an array of structs of the same size: dense, nothing to overlap.
    let st = Arc::new(Layout::structure(&[1, 1], &[0, 8], &[dbl, dbl]).unwrap());
    assert_eq!(frames_of(&st, 256, true), [(Kind::Eager, 4096)]);
}

#[test]
fn typed_send_waits_for_ring_space_without_losing_its_window() {
    // A full ring refuses the in-place fill and the staged window; both are retried intact.
    let (_, lay) = odd_layouts().remove(1);
    for in_place in [true, false] {
        let mut s = sim(2, 1, false);
        s.w.eager = 8;
        s.w.max_frame = 11;
        s.w.in_place = in_place;
        let count = 9;
        let (len, base) = room(&lay, count);
        let mem = pat(5, len);
        let packed = ref_pack(&lay, &mem, base, count);
        // SAFETY: `mem` outlives the send and is not modified.
        let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
        let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: packed.len() };
        let sd = s.with(0, |e, n| e.send(n, 1, 1, 0, 0, data, false, Sender::GoesOn));
        let mut buf = guarded(packed.len());
        let r = s.recv(1, 1, 0, 0, contig(&mut buf, packed.len()));
        s.w.blocked.push((0, 1));
        for _ in 0..5 {
            s.step();
        }
        s.w.blocked.clear();
        s.pump();
        assert!(s.done(0, sd) && s.done(1, r));
        assert!(s.w.refused > 0);
        assert_eq!(&buf[..packed.len()], &packed[..]);
    }
}

#[test]
fn typed_send_data_forms() {
    for (name, lay) in odd_layouts() {
        typed_windows(name, &lay, 5);
        typed_windows(name, &lay, 1);
    }
}

/// Every window of the packed stream of `count` elements, packed by the engine's `SendData` and
/// unpacked through a typed sink, against the reference.
fn typed_windows(name: &str, lay: &Arc<Layout>, count: usize) {
    let (len, base) = room(lay, count);
    let mem = pat(9, len);
    let packed = ref_pack(lay, &mem, base, count);
    // SAFETY: `mem` outlives `data`.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: packed.len() };
    assert!(data.contig().is_none());
    assert_eq!(data.len(), packed.len());
    assert_eq!(data.to_vec(), packed);
    for start in 0..packed.len() {
        for n in 0..=(packed.len() - start).min(40) {
            let mut w = vec![0u8; n];
            data.pack(start, &mut w);
            assert_eq!(w, &packed[start..start + n], "{name}: window {start}+{n}");
            let blank = vec![GUARD; len];
            let mut out = blank.clone();
            // SAFETY: `out` outlives the sink.
            let ospan = unsafe { UserBuf::new(out.as_mut_ptr() as usize, out.len()) };
            let mut sink =
                Sink::Typed { span: ospan, base_off: base, layout: lay.clone(), start: 0, len: packed.len() };
            sink.write(start, &w);
            let mut whole = ref_unpack(lay, &blank, base, &packed);
            // Only the window's bytes land: compare against the reference within the window.
            let mut mask = vec![0u8; packed.len()];
            mask[start..start + n].fill(1);
            let sel = ref_unpack(lay, &vec![0u8; len], base, &mask);
            for (i, m) in sel.iter().enumerate() {
                if *m == 0 {
                    whole[i] = GUARD;
                }
            }
            assert_eq!(out, whole, "{name}: unpacked window {start}+{n}");
        }
    }
}

#[test]
fn typed_receive_of_a_large_message_read_in_pieces() {
    // More than one bounce buffer's worth: read and unpacked piece by piece.
    for read_ok in [true, false] {
        run_double_int(6000, 6000, 16, 4096, read_ok, true);
        run_double_int(6000, 5999, 16, 4096, read_ok, false);
    }
}

// ---------------------------------------------------------------------------------------------
// The direct receive (blocking MPI_Recv without a request)
// ---------------------------------------------------------------------------------------------

fn span(buf: &mut [u8], cap: usize) -> UserBuf {
    assert!(cap <= buf.len());
    // SAFETY: as in `contig`: a test-owned buffer, untouched until the receive ends.
    unsafe { UserBuf::new(buf.as_mut_ptr() as usize, cap) }
}

fn direct(s: &mut Sim, i: ProcIdx, ctx: u64, src: i32, tag: i32, buf: UserBuf) -> bool {
    s.with(i, |e, n| e.recv_direct(n, ctx, src, tag, buf))
}

fn direct_done(s: &mut Sim, i: ProcIdx) -> Option<Status> {
    match s.eng[i as usize].take_direct()? {
        DirectEnd::Done(st) => Some(st),
        DirectEnd::Request(_) => panic!("an eager message became a request"),
    }
}

#[test]
fn direct_receive_keeps_post_order_with_requests() {
    let mut s = sim(2, usize::MAX, true);
    let mut a = guarded(8);
    let mut b = guarded(8);
    let ra = s.recv(1, 1, 0, 5, contig(&mut a, 8));
    assert!(direct(&mut s, 1, 1, ANY_SOURCE, ANY_TAG, span(&mut b, 8)));
    // Only one direct receive at a time: a second caller must use a request.
    let mut spare = guarded(8);
    assert!(!direct(&mut s, 1, 1, 0, 5, span(&mut spare, 8)));
    let m1 = pat(1, 8);
    let m2 = pat(2, 6);
    s.send(0, 1, 1, 5, &m1, false);
    s.pump();
    assert!(s.done(1, ra), "the receive posted first takes the first message");
    assert!(s.eng[1].take_direct().is_none());
    s.send(0, 1, 1, 7, &m2, false);
    s.pump();
    assert_eq!(direct_done(&mut s, 1), Some(status(0, 7, 6, 0)));
    assert_eq!(&a[..8], &m1[..]);
    assert_eq!(&b[..6], &m2[..]);
    assert_guard(&b, 6);
    assert!(s.eng[1].take_direct().is_none(), "taking the end frees the slot");
    assert_guard(&spare, 0);

    // An unexpected message matches at post time; a later request sees the next one.
    let m3 = pat(3, 4);
    let m4 = pat(4, 4);
    s.send(0, 1, 1, 9, &m3, false);
    s.send(0, 1, 1, 9, &m4, false);
    s.pump();
    let mut c = guarded(8);
    assert!(direct(&mut s, 1, 1, 0, 9, span(&mut c, 8)));
    assert_eq!(direct_done(&mut s, 1), Some(status(0, 9, 4, 0)));
    assert_eq!(&c[..4], &m3[..]);
    let mut d = guarded(8);
    let rd = s.recv(1, 1, 0, 9, contig(&mut d, 8));
    assert!(s.done(1, rd));
    assert_eq!(&d[..4], &m4[..]);
}

#[test]
fn direct_receive_truncation_and_synchronous_send() {
    let mut s = sim(2, usize::MAX, true);
    let mut a = guarded(16);
    assert!(direct(&mut s, 1, 2, 0, 1, span(&mut a, 16)));
    let m = pat(5, 40);
    let sd = s.send(0, 1, 2, 1, &m, true);
    s.pump();
    assert_eq!(direct_done(&mut s, 1), Some(status(0, 1, 16, TRUNCATE)));
    assert_eq!(&a[..16], &m[..16]);
    assert_guard(&a, 16);
    assert!(s.done(0, sd), "the synchronous send completes once the direct receive matched it");
    assert_eq!(s.kinds(1, 0), vec![Kind::SyncAck]);
}

#[test]
fn direct_receive_of_a_rendezvous_becomes_a_request() {
    for read_ok in [true, false] {
        let mut s = sim(2, usize::MAX, read_ok);
        let m = pat(6, 1000);
        let mut a = guarded(1000);
        assert!(direct(&mut s, 1, 1, 0, 3, span(&mut a, 1000)));
        let sd = s.send(0, 1, 1, 3, &m, false);
        s.pump();
        let Some(DirectEnd::Request(id)) = s.eng[1].take_direct() else { panic!("no request") };
        assert!(s.done(1, id) && s.done(0, sd));
        assert_eq!(s.get(1, id).status, status(0, 3, 1000, 0));
        assert_eq!(&a[..1000], &m[..]);
        assert_guard(&a, 1000);
    }
}

#[test]
fn direct_receive_fails_with_its_peer() {
    let mut s = sim(2, usize::MAX, true);
    let mut a = guarded(8);
    assert!(direct(&mut s, 1, 1, 0, 3, span(&mut a, 8)));
    assert!(s.eng[1].fail_peer(0, |ctx, src| ctx == 1 && (src == 0 || src == ANY_SOURCE), 77));
    assert_eq!(direct_done(&mut s, 1).map(|st| st.error), Some(77));
    assert_guard(&a, 0);
}

// ---------------------------------------------------------------------------------------------
// Cooperative copies of large rendezvous messages
// ---------------------------------------------------------------------------------------------

/// A simulation where messages from 1000 bytes on are copied cooperatively; `n` bytes go from
/// process 0 to process 1 into a receive of `cap` bytes. Returns the simulation, the receive
/// buffer, the message and the two requests, pumped to the end.
fn coop_run(n: usize, cap: usize, helper_chunks: usize, helper_fails: bool) -> (Sim, Vec<u8>, Vec<u8>, ReqId, ReqId) {
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    s.w.helper_chunks = helper_chunks;
    s.w.helper_fails = helper_fails;
    let msg = pat(9, n);
    let mut a = guarded(cap);
    s.w.writable.push((1, a.as_ptr() as usize, cap));
    let r = s.recv(1, 1, 0, 4, contig(&mut a, cap));
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.pump();
    (s, a, msg, r, sd)
}

#[test]
fn cooperative_copy_by_the_receiver_alone() {
    // 300 000 bytes: chunks of 64 KiB, 5 of them.
    let (s, a, msg, r, sd) = coop_run(300_000, 300_000, 0, false);
    assert!(s.done(1, r) && s.done(0, sd));
    assert_eq!(s.get(1, r).status, status(0, 4, 300_000, 0));
    assert_eq!(&a[..300_000], &msg[..]);
    assert_guard(&a, 300_000);
    assert_eq!(s.count(Kind::Help), 1, "the sender is invited");
    assert_eq!(s.count(Kind::Fin), 1);
    // Alone, the receiver claims runs that double: chunk 0, then 1, then 2-3, then 4.
    assert_eq!(s.w.reads.len(), 4);
    assert_eq!(s.w.reads.iter().map(|r| r.3).collect::<Vec<_>>(), vec![65536, 65536, 131072, 300_000 - 4 * 65536]);
    assert!(s.w.writes.is_empty(), "the invitation came after every chunk was taken");
}

#[test]
fn cooperative_copy_shared_with_the_sender() {
    let (s, a, msg, r, sd) = coop_run(300_000, 300_000, 3, false);
    assert!(s.done(1, r) && s.done(0, sd));
    assert_eq!(s.get(1, r).status, status(0, 4, 300_000, 0));
    assert_eq!(&a[..300_000], &msg[..]);
    assert_guard(&a, 300_000);
    assert_eq!(s.w.reads.len(), 2, "the receiver copied the first chunk and one more");
}

#[test]
fn cooperative_copy_takes_over_a_chunk_the_sender_failed() {
    let (s, a, msg, r, _) = coop_run(300_000, 300_000, 1, true);
    assert!(s.done(1, r));
    assert_eq!(s.get(1, r).status.error, 0);
    assert_eq!(&a[..300_000], &msg[..]);
    // Chunks: the first read, one by the helper, one failed and read again here, two more.
    assert_eq!(s.w.reads.len(), 4);
}

#[test]
fn cooperative_copy_of_a_truncated_message() {
    let (s, a, msg, r, sd) = coop_run(300_000, 200_000, 1, false);
    assert!(s.done(1, r) && s.done(0, sd));
    assert_eq!(s.get(1, r).status, status(0, 4, 200_000, TRUNCATE));
    assert_eq!(&a[..200_000], &msg[..200_000]);
    assert_guard(&a, 200_000);
}

#[test]
fn the_sender_writes_the_chunks_it_takes() {
    // The sender's side alone: its send waits for the receiver (the Rts is not delivered) when
    // an invitation for a transfer begun on the slot arrives.
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    let msg = pat(3, 200_000);
    let mut a = guarded(200_000);
    // The sender writes through this address while the test does not touch `a`.
    let at = a.as_mut_ptr() as usize;
    s.w.writable.push((1, at, 200_000));
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.w.coop_slots[0][1].begin(42, 1);
    let invite = Header { kind: Kind::Help, ctx: 42, src: 0, tag: 65536, len: 200_000, id: sd.wire(), aux: at as u64 };
    s.with(0, |e, n| e.on_frame(n, 1, &invite, &[]));
    assert_eq!(s.w.coop_slots[0][1].helped(42), 3, "chunks 1 to 3 of 4");
    assert_eq!(s.w.writes.len(), 3);
    assert_eq!(&a[65536..200_000], &msg[65536..]);
    assert!(a[..65536].iter().all(|&b| b == GUARD), "chunk 0 stays the receiver's");
    // A stale invitation (another transfer number) writes nothing.
    let stale = Header { ctx: 41, ..invite };
    s.with(0, |e, n| e.on_frame(n, 1, &stale, &[]));
    assert_eq!(s.w.writes.len(), 3);
    assert!(!s.done(0, sd), "the send completes with the receiver's Fin only");

    // A write the kernel refuses is reported in the slot, and the sender takes no more.
    s.w.coop_slots[0][1].begin(43, 1);
    s.w.read_ok = false;
    let refused = Header { ctx: 43, ..invite };
    s.with(0, |e, n| e.on_frame(n, 1, &refused, &[]));
    assert_eq!(s.w.coop_slots[0][1].failed(43), Some(1));
    assert_eq!(s.w.coop_slots[0][1].claim(43, 4), Some(2), "chunks 2 and 3 are left to the receiver");
}

#[test]
fn cooperative_copies_from_one_sender_follow_each_other() {
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    let msgs: Vec<Vec<u8>> = (0..3).map(|k| pat(20 + k, 150_000)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..3).map(|_| guarded(150_000)).collect();
    let mut rs = Vec::new();
    for b in bufs.iter_mut() {
        s.w.writable.push((1, b.as_ptr() as usize, 150_000));
        rs.push(s.recv(1, 1, 0, 4, contig(b, 150_000)));
    }
    let sds: Vec<ReqId> = msgs.iter().map(|m| s.send(0, 1, 1, 4, m, false)).collect();
    s.pump();
    for k in 0..3 {
        assert!(s.done(1, rs[k]) && s.done(0, sds[k]));
        assert_eq!(&bufs[k][..150_000], &msgs[k][..]);
        assert_guard(&bufs[k], 150_000);
    }
    assert_eq!(s.count(Kind::Help), 3);
}

#[test]
fn cooperative_copy_with_a_read_refused_midway_fails_the_receive() {
    let mut s = sim(2, usize::MAX, true);
    s.w.coop_min = 1000;
    s.w.reads_left = Some(1);
    let msg = pat(9, 300_000);
    let mut a = guarded(300_000);
    s.w.writable.push((1, a.as_ptr() as usize, 300_000));
    let r = s.recv(1, 1, 0, 4, contig(&mut a, 300_000));
    let sd = s.send(0, 1, 1, 4, &msg, false);
    s.pump();
    assert!(s.done(1, r) && s.done(0, sd), "no side waits for chunks nobody copies");
    assert_eq!(s.get(1, r).status.error, c::MPI_ERR_OTHER);
}
