//! The fake network ([`Wire`], seen by each engine through a [`Link`]): per-pair FIFO rings with
//! a capacity, an eager limit and frame size, single-copy reads and writes that work or are
//! refused, byte-stream pieces over lanes, and a stand-in for a cooperative copy's helper. [`Sim`]
//! holds the engines and the wire and steps them; the buffer helpers make guarded receive
//! buffers and recognizable messages.

use crate::common::{read_into, read_into_slice, rings, Link, Rings, GUARD};
use baton_core::engine::{Engine, Net, ProcIdx, ReqId, Request, SendData, Sender, Sink, Status};
use baton_transport::coop::CoopSlot;
use baton_transport::frame::{Header, Kind};
use baton_transport::mem::UserBuf;

/// A data frame partly sent over a byte stream: (from, to, receive request, offset), its lane,
/// payload so far, payload length.
type Unfinished = ((ProcIdx, ProcIdx, u64, u64), u8, Vec<u8>, usize);

/// A byte stream's behaviour (TCP's): a data frame may leave in pieces of at most `piece`
/// payload bytes, over `lanes` connections; a lane carrying an unfinished frame (in `mid`) takes
/// nothing else. With `place_direct`, complete data frames arrive through `data_window` (as a
/// socket reader delivers them) instead of `on_frame`.
pub struct ByteStream {
    pub piece: usize,
    pub lanes: usize,
    pub place_direct: bool,
    pub mid: Vec<Unfinished>,
}

impl ByteStream {
    pub fn new(piece: usize, lanes: usize, place_direct: bool) -> Option<ByteStream> {
        Some(ByteStream { piece, lanes, place_direct, mid: Vec::new() })
    }
}

/// Everything between the engines: rings, settings, and a record of what crossed.
pub struct Wire {
    /// Frames one ring holds (per ordered pair of processes).
    pub cap: usize,
    pub eager: usize,
    pub max_frame: usize,
    /// Single-copy reads allowed (else the engine must stream with Cts/Data).
    pub read_ok: bool,
    /// Ordered pairs (from, to) whose ring refuses every frame for now.
    pub blocked: Vec<(ProcIdx, ProcIdx)>,
    /// `rings[from][to]`.
    pub rings: Rings,
    /// "Remote memory" a peer may read: (owner, address, length).
    pub exposed: Vec<(ProcIdx, usize, usize)>,
    /// Reads done: (reader, owner, address, length).
    pub reads: Vec<(ProcIdx, ProcIdx, u64, usize)>,
    /// Frames pushed: (from, to, header, payload length).
    pub log: Vec<(ProcIdx, ProcIdx, Header, usize)>,
    /// Pushes refused for lack of room.
    pub refused: usize,
    /// Byte-stream mode (like TCP), else whole frames (like rings).
    pub stream: Option<ByteStream>,
    /// Frames may be filled in place (`try_send_with`), as shared-memory rings are.
    pub in_place: bool,
    /// Frames filled in place.
    pub filled: usize,
    /// Cooperative copies: the smallest message copied so (usize::MAX: none), one slot per
    /// ordered pair, receive buffers the sender may write (owner, address, length), and writes
    /// done (writer, owner, address, length).
    pub coop_min: usize,
    pub coop_slots: Vec<Vec<CoopSlot>>,
    pub writable: Vec<(ProcIdx, usize, usize)>,
    pub writes: Vec<(ProcIdx, ProcIdx, u64, usize)>,
    /// A stand-in for the sender's help, run at the receiver's first read of a cooperative copy
    /// (which the engine does before anything else): takes this many chunks from the slot and
    /// writes them, and then takes one more and reports it failed if `helper_fails`.
    pub helper_chunks: usize,
    pub helper_fails: bool,
    /// Reads allowed before every further one is refused (None: no limit).
    pub reads_left: Option<usize>,
    /// Receivers read senders' memory themselves (`Net::reads_sender`): receives may offer.
    pub offers: bool,
}

impl Wire {
    pub fn new(n: usize) -> Wire {
        Wire {
            cap: usize::MAX,
            eager: 64,
            max_frame: 128,
            read_ok: true,
            blocked: Vec::new(),
            rings: rings(n),
            exposed: Vec::new(),
            reads: Vec::new(),
            log: Vec::new(),
            refused: 0,
            stream: None,
            in_place: false,
            filled: 0,
            coop_min: usize::MAX,
            coop_slots: (0..n).map(|_| (0..n).map(|_| CoopSlot::default()).collect()).collect(),
            writable: Vec::new(),
            writes: Vec::new(),
            helper_chunks: 0,
            helper_fails: false,
            reads_left: None,
            offers: false,
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
        self.stream.as_ref().is_some_and(|b| b.mid.iter().any(|m| (m.0 .0, m.0 .1, m.1) == (from, to, lane)))
    }

    pub fn queued(&self) -> usize {
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

impl Net for Link<'_, Wire> {
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

    fn send_data(&mut self, to: ProcIdx, h: &Header, window: &[u8], at: usize) -> usize {
        let me = self.me;
        let lanes = match &self.w.stream {
            Some(b) => b.lanes as u8,
            None => {
                assert_eq!(at, 0, "a frame left in part over a whole-frame wire");
                return if self.try_send(to, h, window) { window.len() } else { 0 };
            }
        };
        assert!(window.len() <= self.w.max_frame, "Data frame of {} > max frame", window.len());
        let key = (me, to, h.id, h.aux);
        let started = self.w.stream.as_ref().and_then(|b| b.mid.iter().find(|m| m.0 == key));
        match started {
            Some(m) => assert_eq!((m.2.len(), m.3), (at, window.len()), "continued with other than the frame's rest"),
            None => {
                assert_eq!(at, 0, "the rest of a frame that never started");
                if self.w.rings[me as usize][to as usize].len() >= self.w.cap || self.w.blocked.contains(&(me, to)) {
                    return 0;
                }
                let Some(lane) = (0..lanes).find(|&l| !self.w.lane_busy(me, to, l)) else { return 0 };
                self.w.stream.as_mut().unwrap().mid.push((key, lane, Vec::new(), window.len()));
            }
        }
        let b = self.w.stream.as_mut().unwrap();
        let m = b.mid.iter_mut().find(|m| m.0 == key).expect("recorded above");
        let n = b.piece.min(window.len() - at);
        m.2.extend_from_slice(&window[at..at + n]);
        self.w.finish_piece(key, *h);
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
        read_into(self.w.remote_bytes(self.me, from, addr, dst.len()).as_deref(), dst)
    }

    fn read_remote_into(&mut self, from: ProcIdx, addr: u64, dst: &mut [u8]) -> bool {
        read_into_slice(self.w.remote_bytes(self.me, from, addr, dst.len()).as_deref(), dst)
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

    fn reads_sender(&self, _peer: ProcIdx) -> bool {
        self.w.offers
    }
}

impl Wire {
    /// Moves data frame `h` (`key` in `mid`) into its ring once its payload is complete.
    fn finish_piece(&mut self, key: (ProcIdx, ProcIdx, u64, u64), h: Header) {
        let mid = &mut self.stream.as_mut().expect("byte-stream mode").mid;
        let at = mid.iter().position(|m| m.0 == key).unwrap();
        if mid[at].2.len() == mid[at].3 {
            let (_, _, v, len) = mid.swap_remove(at);
            let (from, to) = (key.0, key.1);
            self.log.push((from, to, h, len));
            self.rings[from as usize][to as usize].push_back((h, v));
        }
    }
}

/// Engines plus the wire between them.
pub struct Sim {
    pub eng: Vec<Engine>,
    pub w: Wire,
}

impl Sim {
    pub fn new(n: usize) -> Sim {
        Sim { eng: (0..n).map(|_| Engine::new()).collect(), w: Wire::new(n) }
    }

    pub fn with<R>(&mut self, i: ProcIdx, f: impl FnOnce(&mut Engine, &mut dyn Net) -> R) -> R {
        let mut port = Link { w: &mut self.w, me: i };
        f(&mut self.eng[i as usize], &mut port)
    }

    /// Sends `data` (the application's buffer, exposed for remote reads) from `i` as rank `i`.
    pub fn send(&mut self, i: ProcIdx, to: ProcIdx, ctx: u64, tag: i32, data: &[u8], sync: bool) -> ReqId {
        self.w.exposed.push((i, data.as_ptr() as usize, data.len()));
        // SAFETY: `data` belongs to the test, which keeps it alive and unmodified until the send
        // completes (every test pumps to completion before dropping its buffers).
        let buf = unsafe { UserBuf::new(data.as_ptr() as usize, data.len()) };
        self.with(i, |e, n| e.send(n, to, ctx, i as i32, tag, SendData::User(buf), sync, Sender::GoesOn))
    }

    /// Sends a packed copy owned by the request.
    pub fn send_packed(&mut self, i: ProcIdx, to: ProcIdx, ctx: u64, tag: i32, data: Vec<u8>) -> ReqId {
        // The heap block does not move when the Vec moves into the request.
        self.w.exposed.push((i, data.as_ptr() as usize, data.len()));
        self.with(i, |e, n| e.send(n, to, ctx, i as i32, tag, SendData::Packed(data), false, Sender::GoesOn))
    }

    pub fn recv(&mut self, i: ProcIdx, ctx: u64, src: i32, tag: i32, sink: Sink) -> ReqId {
        self.with(i, |e, n| e.recv(n, ctx, src, tag, sink))
    }

    /// Posts a receive at `i` into a new guarded buffer of `cap` bytes; returns the receive and
    /// the buffer (its bytes stay where they are when the Vec moves; the test leaves it alone
    /// until the receive completes).
    pub fn post(&mut self, i: ProcIdx, ctx: u64, src: i32, tag: i32, cap: usize) -> (ReqId, Vec<u8>) {
        let mut buf = guarded(cap);
        let r = self.recv(i, ctx, src, tag, contig(&mut buf, cap));
        (r, buf)
    }

    pub fn get(&self, i: ProcIdx, id: ReqId) -> &Request {
        self.eng[i as usize].get(id).expect("request not found")
    }

    pub fn done(&self, i: ProcIdx, id: ReqId) -> bool {
        self.get(i, id).complete
    }

    /// One round: every engine progresses, then at most one frame per ring is delivered.
    /// Returns whether anything moved.
    pub fn step(&mut self) -> bool {
        let before = self.w.log.len();
        for i in 0..self.eng.len() {
            self.with(i as ProcIdx, |e, net| e.progress(net));
        }
        let moved = self.w.log.len() != before;
        self.deliver() || moved
    }

    /// Delivers at most one frame per ring, without calling `progress`: room appears in the
    /// rings while the engines still hold queued frames. Returns whether anything was delivered.
    pub fn deliver(&mut self) -> bool {
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
            let direct = self.w.stream.as_ref().is_some_and(|b| b.place_direct) && h.kind == Kind::Data;
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
    pub fn pump(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the simulation did not settle");
    }

    /// Sends `msg` from process 0 to process 1 (context 1, tag 2) into the first `cap` bytes of
    /// `buf`: the receive posted before the send with `posted_first`, else once the simulation
    /// settled after the send. Pumps to the end; returns the send and the receive.
    pub fn exchange(&mut self, msg: &[u8], buf: &mut [u8], cap: usize, posted_first: bool) -> (ReqId, ReqId) {
        let mut r = None;
        if posted_first {
            r = Some(self.recv(1, 1, 0, 2, contig(buf, cap)));
        }
        let sd = self.send(0, 1, 1, 2, msg, false);
        self.pump();
        let r = r.unwrap_or_else(|| self.recv(1, 1, 0, 2, contig(buf, cap)));
        self.pump();
        (sd, r)
    }

    /// Checks receive `r` of process `i`: its status is `want`, `buf` starts with `msg` and its
    /// guard bytes after that are untouched. `what` names the case in failure messages.
    #[track_caller]
    pub fn assert_received(&self, i: ProcIdx, r: ReqId, want: Status, buf: &[u8], msg: &[u8], what: &str) {
        assert_eq!(self.get(i, r).status, want, "{what}");
        assert_eq!(&buf[..msg.len()], msg, "{what}");
        assert_guard(buf, msg.len());
    }

    pub fn kinds(&self, from: ProcIdx, to: ProcIdx) -> Vec<Kind> {
        self.w.log.iter().filter(|l| l.0 == from && l.1 == to).map(|l| l.2.kind).collect()
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.w.log.iter().filter(|l| l.2.kind == kind).count()
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------------

/// Recognizable bytes, different per `seed`.
pub fn pat(seed: usize, n: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 7 + seed * 13 + i / 251) % 251) as u8).collect()
}

/// A contiguous sink over the first `cap` bytes of `buf` (the rest are guard bytes).
pub fn contig(buf: &mut [u8], cap: usize) -> Sink {
    assert!(cap <= buf.len());
    // SAFETY: `buf` is a test-owned buffer that outlives the receive and is not touched by the
    // test until the receive completes (or is cancelled).
    Sink::Contig(unsafe { UserBuf::new(buf.as_mut_ptr() as usize, cap) })
}

pub fn guarded(cap: usize) -> Vec<u8> {
    vec![GUARD; cap + 32]
}

pub fn assert_guard(buf: &[u8], from: usize) {
    assert!(buf[from..].iter().all(|&b| b == GUARD), "bytes past the receive span were written");
}

pub fn status(src: i32, tag: i32, bytes: u64, error: i32) -> Status {
    Status { source: src, tag, error, bytes, cancelled: false }
}

/// Wire settings: eager limit 64, frames of 128 bytes, ring capacity and read policy as given.
pub fn sim(n: usize, cap: usize, read_ok: bool) -> Sim {
    let mut s = Sim::new(n);
    s.w.cap = cap;
    s.w.read_ok = read_ok;
    s
}
