//! The point-to-point engine: matching and protocols, with no I/O of its own.
//!
//! Like `quinn-proto`, the engine is a state machine: callers post operations and feed it
//! incoming frames; it answers with frames, pushed through the small [`Net`] interface at once,
//! and with copies between processes, recorded as [`Action`]s in its outbox and carried out by
//! the progress pass ([`Engine::run_actions`]), never inside a frame's handling. It names no
//! transport. Tests drive two engines over an in-memory `Net` and check ordering, wildcards,
//! truncation, cancellation, the outbox and every protocol without processes.
//!
//! Important types:
//! - [`Engine`]: posted-receive and unexpected-message queues, the request slab, and per-peer
//!   queues of frames that did not fit in the transport yet (kept in order, so a full ring never
//!   lets a later message overtake an earlier one).
//! - [`Request`]: one operation's progress and its final [`Status`].
//! - [`Action`]: an entry of the outbox (copy a matched rendezvous message, help with a
//!   cooperative copy).
//! - [`Sink`] / [`SendData`]: where received bytes go and where sent bytes come from.
//!
//! Protocols: a message up to the eager limit travels whole (`Eager`, or `EagerSync` for
//! synchronous sends, acknowledged on match). Larger ones send `Rts`; the receiver, once matched,
//! reads the sender's buffer directly (`Fin` completes the send) or, when it cannot, answers
//! `Cts` and the sender streams `Data` frames. The elements of a non-contiguous datatype
//! ([`SendData::Typed`]) are never packed whole: each frame packs its own window as it leaves, and
//! their `Rts` offers no address, so they always stream (pipelined: the receiver unpacks one
//! frame while the sender packs the next).
//!
//! A large contiguous message may be copied by both sides (`baton_transport::coop`): the
//! receiver reads its first chunk, then invites the sender with `Help` to write chunks into the
//! receive buffer while it reads others, both taking chunks from a counter the two share; the
//! receiver completes once every chunk is in place and answers `Fin` as usual.
//!
//! A large receive posted before its message offers its buffer to its only possible sender
//! ([`offer`]: `Offer`, answered by `RtsPut`), which then writes the message through the same
//! shared counter while it waits, so that a receiver that computes does not hold it up.
//! [`Engine::needs_progress`] says whether anything under way moves only if this process acts
//! (what a progress thread watches for).

use baton_abi::consts as c;
use baton_transport::frame::{Header, Kind};
use baton_transport::mem::UserBuf;
use std::collections::VecDeque;

mod actions;
mod buffers;
mod coop;
mod net;
pub mod offer;

pub use actions::Action;
use buffers::read_into_sink;
pub use buffers::{SendData, Sink, Status};
pub use net::{Net, Sender};

/// Index of a process in the runtime's process table.
pub type ProcIdx = u32;

pub const ANY_SOURCE: i32 = c::MPI_ANY_SOURCE;
pub const ANY_TAG: i32 = c::MPI_ANY_TAG;

/// Largest message of sparse elements sent eagerly (in one frame, packed whole).
const TYPED_EAGER_MAX: usize = 2048;

/// Frames of a streamed message of sparse elements of `n` bytes: eight or more, so gathering
/// and scattering overlap, of at least 1 KiB, so a frame's overhead stays small beside its copy.
fn typed_chunk(n: usize) -> usize {
    (n / 8).max(1024)
}

/// Chunk size of a cooperative copy of `n` bytes: large enough that a chunk's system call and
/// page pinning stay small beside its copy, small enough that the helper joins in early and
/// the last chunk does not keep the other side waiting long.
fn coop_chunk(n: usize) -> usize {
    (n / 16).clamp(64 * 1024, 1024 * 1024)
}

enum Proto {
    /// Finished or nothing left to do.
    Idle,
    /// Eager frame not yet pushed (waiting in the peer's queue).
    SendQueued { data: SendData, sync: bool },
    /// EagerSync pushed; waiting for `SyncAck`.
    SendWaitAck,
    /// `Rts` pushed; waiting for `Fin` or `Cts`.
    /// `watched`: counted in [`Engine::rdv_sends`] (the receiver cannot read the data itself).
    SendRdv { data: SendData, watched: bool },
    /// Streaming `Data` frames to receive request `rreq`: `off` payload bytes are gone, of
    /// which the last `at` belong to a frame the transport took only part of (a byte stream;
    /// it gets the rest of that frame next, see [`Net::send_data`]). `stage` holds the packed
    /// window that starts at `staged` of a `Typed` send over a transport that cannot be filled
    /// in place.
    SendStream { data: SendData, rreq: u64, off: usize, at: usize, stage: Vec<u8>, staged: usize },
    /// Posted receive waiting for a match.
    RecvPosted { sink: Sink },
    /// Matched a rendezvous and waiting for `Data` frames.
    RecvStream { sink: Sink, got: u64, total: u64 },
    /// Matched a rendezvous of `n` bytes to be copied by both sides, after the copy from the
    /// same sender in progress (in [`Engine::coop_wait`]).
    RecvCoopWait { buf: UserBuf, h: Header, n: usize },
    /// Matched a rendezvous copied by both sides; waiting for the chunks the sender took.
    RecvCoop { buf: UserBuf, coop: Coop },
}

/// A cooperative copy in progress at the receiver.
#[derive(Clone, Copy)]
struct Coop {
    seq: u32,
    chunks: u32,
    /// Chunks this side copied.
    mine: u32,
    chunk: usize,
    /// The sender's buffer and its send request.
    addr: u64,
    sreq: u64,
    /// Bytes to copy.
    n: usize,
    /// The chunk this side's next claim returns unless the sender took some meanwhile, and how
    /// many chunks it claims at once: one per read once the sender has joined; until then runs
    /// that double, so that a receiver left alone copies a message in a few reads, not one per
    /// chunk (each read is a system call that pins its pages).
    expect: u32,
    run: u32,
    joined: bool,
    /// On a borrowed core ([`Engine::borrowed_core`]): the sender's finished chunks at the last
    /// look, and how many looks in a row found it idle.
    helped_seen: u32,
    idle_looks: u8,
    /// The last look left the chunks to the sender (see [`Engine::needs_polling`]).
    left: bool,
}

pub struct Request {
    pub complete: bool,
    pub status: Status,
    /// Freed by the application while active: drop on completion.
    pub detached: bool,
    /// Opaque to the engine: the application's communicator handle, whose error handler
    /// applies when this request completes with an error.
    pub comm: usize,
    /// The received bytes of an `Sink::Owned` receive, once complete.
    pub owned: Option<Vec<u8>>,
    proto: Proto,
    to: ProcIdx,
    gen: u32,
    /// Whether the slot holds a request; a free slot keeps its generation for the next one.
    live: bool,
}

/// A request id as carried on the wire and in handles: slot index and generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReqId {
    pub idx: u32,
    pub gen: u32,
}

impl ReqId {
    pub fn wire(self) -> u64 {
        ((self.gen as u64) << 32) | self.idx as u64
    }
    pub fn from_wire(v: u64) -> ReqId {
        ReqId { idx: v as u32, gen: (v >> 32) as u32 }
    }
}

struct Posted {
    req: ReqId,
    ctx: u64,
    src: i32,
    tag: i32,
    /// Counted in [`Engine::posted_large`].
    large: bool,
}

/// Receives of at least this many bytes may be matched by a rendezvous, whose transfer moves
/// only while this process acts: they count in [`Engine::needs_progress`].
pub const PROGRESS_RECV_MIN: usize = 16 * 1024;

/// A message that arrived before its receive (or was taken by `Mprobe`).
pub struct Unexpected {
    pub from: ProcIdx,
    pub h: Header,
    pub data: Vec<u8>,
}

enum Pending {
    /// A control frame (no payload).
    Control(Header),
    /// The eager or Rts frame of a send request.
    Send(ReqId, Header),
}

#[derive(Default)]
pub struct Engine {
    /// Request slots, reused in place: allocation and release write a few fields instead of
    /// moving a whole request in and dropping it out.
    slots: Vec<Request>,
    free: VecDeque<u32>,
    posted: VecDeque<Posted>,
    unexpected: VecDeque<Unexpected>,
    pending: Vec<VecDeque<Pending>>,
    /// Frames in `pending`, all peers together (lets a progress pass skip the scan).
    queued: usize,
    /// Requests streaming data (served round-robin by `progress`).
    streaming: Vec<ReqId>,
    /// Receives that asked for streamed data (`Cts`) and are still waiting for some of it.
    streams_in: usize,
    /// Set when something completed since the caller last cleared it.
    pub completed_any: bool,
    /// Where single-copy reads for a non-contiguous receive land before they are unpacked.
    bounce: Vec<u8>,
    /// The one blocking receive waited for without a request (see [`Engine::recv_direct`]).
    direct: Direct,
    /// Receives waiting for chunks of a cooperative copy, and the last transfer number used.
    coop: Vec<ReqId>,
    coop_seq: u32,
    /// Receives whose cooperative copy waits for the one in progress from the same sender.
    coop_wait: VecDeque<ReqId>,
    /// The outbox: copies between processes that matching decided on, carried out after the
    /// frame that asked for them ([`Engine::run_actions`]). Reused: no allocation per message.
    actions: Vec<Action>,
    /// Rendezvous sends still waiting for the receiver (`Cts`, `Fin`).
    rdv_sends: usize,
    /// Posted receives of at least [`PROGRESS_RECV_MIN`] bytes.
    posted_large: usize,
    /// Matchable frames (`Eager`, `EagerSync`, `Rts`, `RtsPut`) pushed to each process and read
    /// from each process, by index: what an offer holds for ([`offer`]).
    sent_to: Vec<u64>,
    seen_from: Vec<u64>,
    /// Offers this process made as a receiver, one per sender at most.
    offers_out: Vec<offer::OfferOut>,
    /// The offer each receiver made to this process, if any.
    offers_in: Vec<Option<offer::OfferIn>>,
    /// Sends that took an offer and write chunks of their message.
    puts: Vec<offer::Put>,
    /// Set while the progress thread runs a pass on a core the application may be computing
    /// on (no core to spare): copies are then left to the other side, which is probably
    /// waiting for them in MPI, as long as it makes headway (see the cooperative copies).
    pub borrowed_core: bool,
}

/// A blocking receive into a contiguous buffer, waited for without a request slot: posting,
/// delivering and completing it write a few fields here instead of allocating, finishing and
/// releasing a request, which is most of a small message's cost at the receiver.
#[derive(Default)]
enum Direct {
    #[default]
    Idle,
    /// In the posted queue under [`DIRECT`], or about to be.
    Posted { buf: UserBuf, status: Status },
    /// Matched an eager message: complete.
    Done(Status),
    /// Matched a rendezvous, which needs a request for its protocol: wait for that one.
    Promoted(ReqId),
}

/// The posted-queue entry of the direct receive: no slot has this index.
const DIRECT: ReqId = ReqId { idx: u32::MAX, gen: 0 };

/// How a direct receive ended, from [`Engine::take_direct`].
pub enum DirectEnd {
    Done(Status),
    /// Became request `ReqId` (a rendezvous): wait for it as for any other.
    Request(ReqId),
}

/// Bytes of a single-copy read into [`Engine::bounce`]: small enough to stay in cache between
/// the read and the unpacking.
pub(super) const BOUNCE: usize = 64 * 1024;

fn matches(ctx: u64, src: i32, tag: i32, h: &Header) -> bool {
    ctx == h.ctx && (src == ANY_SOURCE || src == h.src) && (tag == ANY_TAG || tag == h.tag)
}

impl Engine {
    pub fn new() -> Engine {
        Engine::default()
    }

    fn alloc(&mut self, to: ProcIdx, proto: Proto) -> ReqId {
        let status = Status { source: c::MPI_ANY_SOURCE, tag: c::MPI_ANY_TAG, ..Default::default() };
        let idx = match self.free.pop_front() {
            Some(i) => i,
            None => {
                self.slots.push(Request {
                    complete: false,
                    status,
                    detached: false,
                    comm: 0,
                    owned: None,
                    proto: Proto::Idle,
                    to,
                    gen: 0,
                    live: false,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let r = &mut self.slots[idx as usize];
        // `owned` was taken or dropped at release, and `proto` left holding nothing to drop.
        r.complete = false;
        r.status = status;
        r.detached = false;
        r.comm = 0;
        r.proto = proto;
        r.to = to;
        r.live = true;
        ReqId { idx, gen: r.gen }
    }

    #[inline]
    pub fn get(&self, id: ReqId) -> Option<&Request> {
        self.slots.get(id.idx as usize).filter(|r| r.live && r.gen == id.gen)
    }

    #[inline]
    pub fn get_mut(&mut self, id: ReqId) -> Option<&mut Request> {
        self.slots.get_mut(id.idx as usize).filter(|r| r.live && r.gen == id.gen)
    }

    /// Largest slot index handed out so far plus one (handle encodings check their bounds).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The status and communicator of completed request `id`, which is then released (the
    /// completion calls' common case); None if there is no such request.
    #[inline]
    pub fn take_status(&mut self, id: ReqId) -> Option<(Status, usize)> {
        let r = self.get(id)?;
        let out = (r.status, r.comm);
        self.release(id);
        Some(out)
    }

    /// Releases a completed request's slot (or marks an active one to be dropped when done).
    #[inline]
    pub fn release(&mut self, id: ReqId) {
        let Some(r) = self.get_mut(id) else { return };
        if r.complete {
            r.live = false;
            // Generations wrap within the handle encoding; 7 bits are kept there.
            r.gen = (id.gen + 1) & 0x7f;
            // Only what holds memory is dropped now; a receive into the application's buffer
            // (the common case) has nothing to drop.
            if !matches!(r.proto, Proto::Idle | Proto::SendWaitAck | Proto::RecvPosted { sink: Sink::Contig(_) }) {
                r.proto = Proto::Idle;
            }
            r.owned = None;
            self.free.push_back(id.idx);
        } else {
            r.detached = true;
        }
    }

    /// A request that some other part of the library completes with [`Engine::complete`]
    /// (a nonblocking collective), so the application waits on it like on any other.
    pub fn external(&mut self, comm: usize) -> ReqId {
        let id = self.alloc(0, Proto::Idle);
        self.get_mut(id).unwrap().comm = comm;
        id
    }

    /// Completes a request made by [`Engine::external`].
    pub fn complete(&mut self, id: ReqId, status: Status) {
        if let Some(r) = self.get_mut(id) {
            r.status = status;
            self.finish(id);
        }
    }

    /// A request that is complete from the start (sends to `MPI_PROC_NULL`, and so on).
    pub fn completed(&mut self, status: Status) -> ReqId {
        let id = self.alloc(0, Proto::Idle);
        let r = self.get_mut(id).unwrap();
        r.complete = true;
        r.status = status;
        id
    }

    fn finish(&mut self, id: ReqId) {
        let Some(r) = self.get_mut(id) else { return };
        r.complete = true;
        // A receive into the application's buffer holds nothing to drop: leave its state as it
        // is (a completed request's protocol state is never read again).
        let plain = matches!(r.proto, Proto::RecvPosted { sink: Sink::Contig(_) } | Proto::SendWaitAck | Proto::Idle);
        let mut streamed = false;
        let mut rdv_done = false;
        if !plain {
            let proto = std::mem::replace(&mut r.proto, Proto::Idle);
            streamed = matches!(proto, Proto::RecvStream { .. });
            rdv_done = matches!(proto, Proto::SendRdv { watched: true, .. });
            if let Proto::RecvPosted { sink: Sink::Owned(v) } | Proto::RecvStream { sink: Sink::Owned(v), .. } = proto {
                r.owned = Some(v)
            }
        }
        let detached = r.detached;
        self.streams_in -= streamed as usize;
        self.rdv_sends -= rdv_done as usize;
        self.completed_any = true;
        if detached {
            self.release(id);
        }
    }

    fn queue(&mut self, to: ProcIdx) -> &mut VecDeque<Pending> {
        let i = to as usize;
        if self.pending.len() <= i {
            self.pending.resize_with(i + 1, VecDeque::new);
        }
        &mut self.pending[i]
    }

    fn has_queue(&self, to: ProcIdx) -> bool {
        self.pending.get(to as usize).is_some_and(|q| !q.is_empty())
    }

    fn send_control(&mut self, net: &mut dyn Net, to: ProcIdx, h: Header) {
        if self.has_queue(to) || !net.try_send(to, &h, &[]) {
            self.queue(to).push_back(Pending::Control(h));
            self.queued += 1;
        }
    }

    /// Starts a send of `data` on context `ctx` as rank `src` to process `to`.
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        net: &mut dyn Net,
        to: ProcIdx,
        ctx: u64,
        src: i32,
        tag: i32,
        data: SendData,
        sync: bool,
        sender: Sender,
    ) -> ReqId {
        let len = data.len();
        // Sparse elements past a few KiB stream even where they would go eagerly: in frames of
        // `typed_chunk`, the receiver unpacks one while the sender gathers the next, where one
        // eager frame has the two copies (both at cache-miss speed, for a matrix column) one
        // after the other. Dense ones (a struct array) gain less than the round trip costs, and
        // so does everything over a socket (a round trip of 10 µs, a system call per frame):
        // only transports packed in place, the shared-memory rings, take this path.
        let pipelined = data.is_sparse() && len > TYPED_EAGER_MAX && net.fills_in_place(to);
        let eager = len <= net.eager_limit(to, sender).min(net.max_frame(to)) && !pipelined;
        // A small message of a derived datatype that cannot be packed into the transport's
        // memory is packed here, once, rather than again at every refused attempt.
        let data = match data {
            SendData::Typed { .. } if eager && !net.fills_in_place(to) => SendData::Packed(data.to_vec()),
            d => d,
        };
        let kind = match (eager, sync) {
            (true, false) => Kind::Eager,
            (true, true) => Kind::EagerSync,
            (false, _) => Kind::Rts,
        };
        let id = self.alloc(to, Proto::Idle);
        let offer = match (eager, data.contig().is_some()) {
            (false, true) if !self.offers_in.is_empty() => self.take_offer(to, ctx, src, tag, len),
            _ => None,
        };
        let kind = if offer.is_some() { Kind::RtsPut } else { kind };
        let h = Header { kind, ctx, src, tag, len: len as u64, id: id.wire(), aux: data.addr() };
        // A receiver that reads the message out of this process's memory needs nothing more
        // from it (but the answer); any other waits for this side to stream.
        let watched = !eager && !net.reads_sender(to);
        let proto = if eager { Proto::SendQueued { data, sync } } else { Proto::SendRdv { data, watched } };
        self.rdv_sends += watched as usize;
        self.get_mut(id).unwrap().proto = proto;
        if let Some(o) = offer {
            self.start_put(id, to, o, len);
        }
        if self.has_queue(to) || !self.push_send(net, id, &h) {
            self.queue(to).push_back(Pending::Send(id, h));
            self.queued += 1;
        }
        id
    }

    /// Sends a small standard-mode message at once, without a request, when it is eager and
    /// nothing is queued ahead of it for `to`. Returns false (having done nothing) otherwise;
    /// the caller then uses [`send`](Self::send). Used by blocking sends.
    ///
    /// Generic over the transport so that a caller holding the concrete one gets the whole push
    /// inlined: on the 8-byte ping-pong the calls through `dyn Net` cost more than the push.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn send_now<N: Net + ?Sized>(
        &mut self,
        net: &mut N,
        to: ProcIdx,
        ctx: u64,
        src: i32,
        tag: i32,
        bytes: &[u8],
        sender: Sender,
    ) -> bool {
        if self.has_queue(to) {
            return false;
        }
        let h = Header { kind: Kind::Eager, ctx, src, tag, len: bytes.len() as u64, id: 0, aux: 0 };
        let sent = net.try_send_eager(to, &h, bytes, sender);
        if sent {
            self.count_sent(to);
        }
        sent
    }

    /// Tries to push the first frame of send `id`; on success moves it to its next state.
    fn push_send(&mut self, net: &mut dyn Net, id: ReqId, h: &Header) -> bool {
        let r = self.get_mut(id).unwrap();
        let to = r.to;
        match &r.proto {
            Proto::SendQueued { data, sync } => {
                let sync = *sync;
                let sent = match data.contig() {
                    Some(bytes) => net.try_send(to, h, bytes),
                    None => net.try_send_with(to, h, data.len(), &mut |dst| data.pack(0, dst)),
                };
                if !sent {
                    return false;
                }
                if sync {
                    r.proto = Proto::SendWaitAck;
                } else {
                    self.finish(id);
                }
                self.count_sent(to);
                true
            }
            Proto::SendRdv { .. } => {
                let sent = net.try_send(to, h, &[]);
                if sent {
                    self.count_sent(to);
                }
                sent
            }
            _ => true,
        }
    }

    /// Posts a receive; it may match an unexpected message at once.
    pub fn recv(&mut self, net: &mut dyn Net, ctx: u64, src: i32, tag: i32, sink: Sink) -> ReqId {
        let large = sink.capacity() >= PROGRESS_RECV_MIN;
        let id = self.alloc(0, Proto::RecvPosted { sink });
        if let Some(pos) = self.unexpected.iter().position(|u| matches(ctx, src, tag, &u.h)) {
            let u = self.unexpected.remove(pos).unwrap();
            self.deliver(net, id, u.from, &u.h, &u.data);
        } else {
            self.posted_large += large as usize;
            self.posted.push_back(Posted { req: id, ctx, src, tag, large });
        }
        id
    }

    /// Posts the direct receive (a blocking receive into `buf`, contiguous), unless one is
    /// already posted (another thread's), in which case it returns false having done nothing.
    /// Poll [`take_direct`](Self::take_direct) for its end. Matching order is that of
    /// [`recv`](Self::recv): the entry sits in the same posted queue.
    pub fn recv_direct(&mut self, net: &mut dyn Net, ctx: u64, src: i32, tag: i32, buf: UserBuf) -> bool {
        if !matches!(self.direct, Direct::Idle) {
            return false;
        }
        let status = Status { source: c::MPI_ANY_SOURCE, tag: c::MPI_ANY_TAG, ..Default::default() };
        self.direct = Direct::Posted { buf, status };
        match self.unexpected.iter().position(|u| matches(ctx, src, tag, &u.h)) {
            Some(pos) => {
                let u = self.unexpected.remove(pos).expect("found above");
                self.deliver_direct(net, u.from, &u.h, &u.data);
            }
            None => self.posted.push_back(Posted { req: DIRECT, ctx, src, tag, large: false }),
        }
        true
    }

    /// The end of the direct receive, once it has one (which frees the direct slot).
    #[inline]
    pub fn take_direct(&mut self) -> Option<DirectEnd> {
        match self.direct {
            Direct::Done(s) => {
                self.direct = Direct::Idle;
                Some(DirectEnd::Done(s))
            }
            Direct::Promoted(id) => {
                self.direct = Direct::Idle;
                Some(DirectEnd::Request(id))
            }
            _ => None,
        }
    }

    fn deliver_direct(&mut self, net: &mut dyn Net, from: ProcIdx, h: &Header, payload: &[u8]) {
        let Direct::Posted { buf, mut status } = self.direct else { return };
        if h.kind == Kind::Rts {
            let id = self.alloc(0, Proto::RecvPosted { sink: Sink::Contig(buf) });
            self.direct = Direct::Promoted(id);
            self.deliver(net, id, from, h, payload);
            return;
        }
        status.source = h.src;
        status.tag = h.tag;
        status.bytes = h.len.min(buf.len() as u64);
        if h.len > buf.len() as u64 {
            status.error = c::MPI_ERR_TRUNCATE;
        }
        buf.write(0, payload);
        if h.kind == Kind::EagerSync {
            self.send_control(net, from, Header::control(Kind::SyncAck, h.id, 0));
        }
        self.direct = Direct::Done(status);
        self.completed_any = true;
    }

    /// Receives a message taken earlier by [`mprobe`](Self::mprobe).
    pub fn mrecv(&mut self, net: &mut dyn Net, msg: Unexpected, sink: Sink) -> ReqId {
        let id = self.alloc(0, Proto::RecvPosted { sink });
        self.deliver(net, id, msg.from, &msg.h, &msg.data);
        id
    }

    /// Looks for a matching unexpected message without receiving it.
    pub fn probe(&self, ctx: u64, src: i32, tag: i32) -> Option<Status> {
        self.unexpected.iter().find(|u| matches(ctx, src, tag, &u.h)).map(|u| Status {
            source: u.h.src,
            tag: u.h.tag,
            error: 0,
            bytes: u.h.len,
            cancelled: false,
        })
    }

    /// Takes a matching unexpected message out of the queue so that only `mrecv` can receive it.
    pub fn mprobe(&mut self, ctx: u64, src: i32, tag: i32) -> Option<Unexpected> {
        let pos = self.unexpected.iter().position(|u| matches(ctx, src, tag, &u.h))?;
        self.unexpected.remove(pos)
    }

    /// Cancels a receive that has not matched yet; returns whether it was cancelled.
    pub fn cancel_recv(&mut self, net: &mut dyn Net, id: ReqId) -> bool {
        if let Some(pos) = self.posted.iter().position(|p| p.req == id) {
            if !self.offers_out.is_empty() && !self.withdraw_offer(net, id) {
                return false;
            }
            let p = self.posted.remove(pos).expect("found above");
            self.posted_large -= p.large as usize;
            let r = self.get_mut(id).unwrap();
            r.status.cancelled = true;
            r.status.bytes = 0;
            self.finish(id);
            return true;
        }
        false
    }

    pub fn is_posted_recv(&self, id: ReqId) -> bool {
        self.posted.iter().any(|p| p.req == id)
    }

    /// Handles one incoming frame from process `from`.
    pub fn on_frame(&mut self, net: &mut dyn Net, from: ProcIdx, h: &Header, payload: &[u8]) {
        match h.kind {
            Kind::Eager | Kind::EagerSync | Kind::Rts | Kind::RtsPut => {
                let h = &self.count_seen(from, h);
                let found = self.posted.iter().position(|p| matches(p.ctx, p.src, p.tag, h));
                match found {
                    Some(pos) => {
                        let p = if pos == 0 { self.posted.pop_front() } else { self.posted.remove(pos) };
                        let p = p.expect("found above");
                        self.posted_large -= p.large as usize;
                        if h.kind == Kind::RtsPut && (p.req == DIRECT || !self.join_put(p.req, from, h)) {
                            let rts = Header { kind: Kind::Rts, ..*h };
                            self.deliver_any(net, p.req, from, &rts, payload);
                        } else if h.kind != Kind::RtsPut {
                            self.deliver_any(net, p.req, from, h, payload);
                        }
                    }
                    None => {
                        let data =
                            if matches!(h.kind, Kind::Rts | Kind::RtsPut) { Vec::new() } else { payload.to_vec() };
                        // An `RtsPut` matched nothing: its offer was withdrawn, so it is an `Rts`.
                        let h = Header { kind: if h.kind == Kind::RtsPut { Kind::Rts } else { h.kind }, ..*h };
                        self.unexpected.push_back(Unexpected { from, h, data });
                    }
                }
            }
            Kind::SyncAck | Kind::Fin => self.finish(ReqId::from_wire(h.id)),
            Kind::Cts => {
                let id = ReqId::from_wire(h.id);
                if let Some(r) = self.get_mut(id) {
                    if let Proto::SendRdv { .. } = r.proto {
                        let Proto::SendRdv { data, watched } = std::mem::replace(&mut r.proto, Proto::Idle) else {
                            unreachable!()
                        };
                        r.proto = Proto::SendStream { data, rreq: h.aux, off: 0, at: 0, stage: Vec::new(), staged: 0 };
                        self.streaming.push(id);
                        self.rdv_sends -= watched as usize;
                    }
                }
            }
            Kind::Data => {
                let Some(r) = self.get_mut(ReqId::from_wire(h.id)) else { return };
                let Proto::RecvStream { sink, .. } = &mut r.proto else { return };
                sink.write(h.aux as usize, payload);
                self.data_placed(h, payload.len());
            }
            // The sender's share of a cooperative copy is a copy between processes too: it
            // leaves this call, like the receiver's reads.
            Kind::Help => self.actions.push(Action::Help { from, h: *h }),
            Kind::Offer => self.on_offer(from, h, payload),
            Kind::Pad => {}
        }
    }

    /// Lends the memory where the payload of data frame `h` goes, from payload byte `at` to the
    /// frame's end, to `fill` (a transport reading from a socket straight into the receive
    /// buffer); returns what `fill` returned, or `None` if the bytes have no such place (a
    /// non-contiguous datatype, a truncated receive, an unknown request): the transport then
    /// delivers the frame whole through [`on_frame`](Self::on_frame). Report the bytes written
    /// with [`data_placed`](Self::data_placed).
    pub fn data_window<R>(
        &mut self,
        h: &Header,
        plen: usize,
        at: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        let r = self.get_mut(ReqId::from_wire(h.id))?;
        let Proto::RecvStream { sink, .. } = &mut r.proto else { return None };
        let start = (h.aux as usize).checked_add(at)?;
        let end = (h.aux as usize).checked_add(plen)?;
        if at > plen || end > sink.capacity() {
            return None;
        }
        match sink {
            Sink::Contig(b) => Some(b.modify(start, end - start, fill)),
            Sink::Scratch(s, off, _) => Some(s.modify(*off + start, end - start, fill)),
            Sink::Owned(v) => Some(fill(&mut v[start..end])),
            Sink::Typed { .. } => None,
        }
    }

    /// Counts `n` payload bytes of data frame `h` as received (written through
    /// [`data_window`](Self::data_window) or by `on_frame`); the last byte completes the receive.
    pub fn data_placed(&mut self, h: &Header, n: usize) {
        let id = ReqId::from_wire(h.id);
        let Some(r) = self.get_mut(id) else { return };
        if let Proto::RecvStream { got, total, .. } = &mut r.proto {
            *got += n as u64;
            if *got >= *total {
                self.finish(id);
            }
        }
    }

    /// Delivers a matched message to posted entry `req`: the direct receive or a request.
    #[inline]
    fn deliver_any(&mut self, net: &mut dyn Net, req: ReqId, from: ProcIdx, h: &Header, payload: &[u8]) {
        if req == DIRECT {
            self.deliver_direct(net, from, h, payload);
        } else {
            self.deliver(net, req, from, h, payload);
        }
    }

    /// Delivers a matched message (eager data or a rendezvous request) to receive `id`.
    fn deliver(&mut self, net: &mut dyn Net, id: ReqId, from: ProcIdx, h: &Header, payload: &[u8]) {
        let r = self.get_mut(id).unwrap();
        let cap = match &r.proto {
            Proto::RecvPosted { sink } => sink.capacity() as u64,
            _ => return,
        };
        r.status.source = h.src;
        r.status.tag = h.tag;
        r.status.bytes = h.len.min(cap);
        if h.len > cap {
            r.status.error = c::MPI_ERR_TRUNCATE;
        }
        if matches!(h.kind, Kind::Eager | Kind::EagerSync) {
            // The common case: copy into the posted buffer in place.
            let mut in_place = false;
            if let Proto::RecvPosted { sink } = &mut r.proto {
                sink.write(0, payload);
                in_place = matches!(sink, Sink::Contig(_));
            }
            // A receive into the application's buffer has nothing to move out of its state, so
            // it completes here, without `finish`'s second lookup.
            let detached = in_place.then(|| {
                r.complete = true;
                r.detached
            });
            if h.kind == Kind::EagerSync {
                self.send_control(net, from, Header::control(Kind::SyncAck, h.id, 0));
            }
            match detached {
                Some(detached) => {
                    self.completed_any = true;
                    if detached {
                        self.release(id);
                    }
                }
                None => self.finish(id),
            }
            return;
        }
        // A rendezvous (eager frames returned above).
        if h.kind != Kind::Rts {
            return;
        }
        let n = h.len.min(cap) as usize;
        if n != 0 && h.aux != 0 {
            // A copy out of the sender's memory: recorded, not made. The receive keeps its
            // sink where it is until the copy runs.
            // The sender, should it vanish first (see `fail_peer`).
            r.to = from;
            self.actions.push(Action::Copy { from, req: id, h: *h });
            return;
        }
        // Nothing to copy (`Fin` at once), or nothing to copy from (a datatype's elements:
        // `Cts`, and the sender streams them).
        let Proto::RecvPosted { sink } = std::mem::replace(&mut r.proto, Proto::Idle) else {
            return;
        };
        self.rendezvous(net, id, from, h, sink, n);
    }

    /// Copies rendezvous `h` (`n` bytes for `sink`) for receive `id` with one read by this
    /// side, or, when it cannot read, asks the sender to stream it.
    fn rendezvous(&mut self, net: &mut dyn Net, id: ReqId, from: ProcIdx, h: &Header, mut sink: Sink, n: usize) {
        // No address: the sender's data is not contiguous and comes packed in `Data` frames.
        let ok = n == 0 || (h.aux != 0 && read_into_sink(net, from, h.aux, &mut sink, n, &mut self.bounce));
        if ok {
            self.get_mut(id).unwrap().proto = Proto::RecvPosted { sink };
            self.send_control(net, from, Header::control(Kind::Fin, h.id, 0));
            self.finish(id);
        } else {
            let r = self.get_mut(id).unwrap();
            r.proto = Proto::RecvStream { sink, got: 0, total: h.len };
            // The sender, should it vanish before the data arrives (see `fail_peer`).
            r.to = from;
            self.streams_in += 1;
            self.send_control(net, from, Header::control(Kind::Cts, h.id, id.wire()));
        }
    }

    /// Carries out the outbox, pushes queued frames and streamed data; call from every
    /// progress pass.
    #[inline]
    pub fn progress(&mut self, net: &mut dyn Net) {
        // Idle polls only pay for these tests.
        if !self.actions.is_empty() {
            self.run_actions(net);
        }
        if self.queued != 0 || !self.streaming.is_empty() {
            self.push_pending(net);
        }
        if !self.coop.is_empty() {
            self.progress_coop(net);
        }
        if !self.puts.is_empty() && !self.borrowed_core {
            self.progress_puts(net);
        }
    }

    #[inline(never)]
    fn push_pending(&mut self, net: &mut dyn Net) {
        for to in 0..self.pending.len() {
            while let Some(p) = self.pending[to].front() {
                let ok = match p {
                    Pending::Control(h) => {
                        let h = *h;
                        net.try_send(to as ProcIdx, &h, &[])
                    }
                    Pending::Send(id, h) => {
                        let (id, h) = (*id, *h);
                        self.push_send(net, id, &h)
                    }
                };
                if !ok {
                    break;
                }
                self.pending[to].pop_front();
                self.queued -= 1;
            }
        }
        if !self.streaming.is_empty() {
            let ids = std::mem::take(&mut self.streaming);
            for id in ids {
                if !self.stream(net, id) {
                    self.streaming.push(id);
                }
            }
        }
    }

    /// Streams as much of send `id` as fits; true when all of it has been pushed.
    fn stream(&mut self, net: &mut dyn Net, id: ReqId) -> bool {
        let Some(r) = self.get_mut(id) else { return true };
        let to = r.to;
        let Proto::SendStream { data, rreq, off, at, stage, staged } = &mut r.proto else { return true };
        let total = data.len();
        let in_place = data.contig().is_none() && net.fills_in_place(to);
        let mut chunk = net.max_frame(to).clamp(1, 1 << 20);
        if in_place && data.is_sparse() {
            chunk = chunk.min(typed_chunk(total));
        }
        while *off < total {
            // The frame under way starts `at` bytes back (where a byte stream took part of it).
            let start = *off - *at;
            let end = start + chunk.min(total - start);
            let h = Header::control(Kind::Data, *rreq, start as u64);
            if in_place {
                if !net.try_send_with(to, &h, end - start, &mut |dst| data.pack(start, dst)) {
                    return false;
                }
                *off = end;
                continue;
            }
            let window = match data.contig() {
                Some(bytes) => &bytes[start..end],
                None => {
                    // Packed once per window, kept while the transport refuses it or takes it
                    // in pieces.
                    if *staged != start || stage.len() != end - start {
                        stage.resize(end - start, 0);
                        data.pack(start, stage);
                        *staged = start;
                    }
                    &stage[..]
                }
            };
            let n = net.send_data(to, &h, window, *at);
            if n == 0 {
                return false;
            }
            *off += n;
            *at = if *off == end { 0 } else { *at + n };
        }
        self.finish(id);
        true
    }

    /// Process `p` is gone (its job ended or it crashed): completes with `error` every send to
    /// it, every receive of a message it was streaming, and every posted receive that
    /// `can_match(ctx, src)` says only it (or anyone) could satisfy; drops frames queued for it.
    /// Returns whether anything failed.
    pub fn fail_peer(&mut self, p: ProcIdx, can_match: impl Fn(u64, i32) -> bool, error: i32) -> bool {
        self.drop_offers(p);
        if let Some(q) = self.pending.get_mut(p as usize) {
            self.queued -= q.len();
            q.clear();
        }
        let mut failed = Vec::new();
        for (i, r) in self.slots.iter().enumerate() {
            if !r.live {
                continue;
            }
            let involved = matches!(
                r.proto,
                Proto::SendQueued { .. }
                    | Proto::SendWaitAck
                    | Proto::SendRdv { .. }
                    | Proto::SendStream { .. }
                    | Proto::RecvStream { .. }
                    | Proto::RecvCoop { .. }
                    | Proto::RecvCoopWait { .. }
            );
            if !r.complete && r.to == p && involved {
                failed.push(ReqId { idx: i as u32, gen: r.gen });
            }
        }
        // Receives whose copy waits in the outbox (still in their posted state).
        for a in &self.actions {
            if let Action::Copy { from, req, .. } = a {
                if *from == p {
                    failed.push(*req);
                }
            }
        }
        let mut direct_failed = false;
        let mut large_failed = 0;
        self.posted.retain(|x| {
            let hit = can_match(x.ctx, x.src);
            if hit {
                large_failed += x.large as usize;
                if x.req == DIRECT {
                    direct_failed = true;
                } else {
                    failed.push(x.req);
                }
            }
            !hit
        });
        self.posted_large -= large_failed;
        if direct_failed {
            if let Direct::Posted { mut status, .. } = self.direct {
                status.error = error;
                self.direct = Direct::Done(status);
                self.completed_any = true;
            }
        }
        self.streaming.retain(|id| !failed.contains(id));
        self.coop.retain(|id| !failed.contains(id));
        self.coop_wait.retain(|id| !failed.contains(id));
        self.actions.retain(|a| match a {
            Action::Copy { from, .. } | Action::Help { from, .. } => *from != p,
        });
        for &id in &failed {
            if let Some(r) = self.get_mut(id) {
                r.status.error = error;
                let proto = std::mem::replace(&mut r.proto, Proto::Idle);
                self.streams_in -= matches!(proto, Proto::RecvStream { .. }) as usize;
                self.rdv_sends -= matches!(proto, Proto::SendRdv { watched: true, .. }) as usize;
            }
            self.finish(id);
        }
        direct_failed || !failed.is_empty()
    }

    /// Whether some receive waits for streamed data: a transport whose connections carry only
    /// such data (TCP's bulk lanes) need not be read before.
    #[inline]
    pub fn awaits_stream(&self) -> bool {
        self.streams_in != 0
    }

    /// Frames queued behind a full ring, or data still to stream.
    pub fn has_outgoing(&self) -> bool {
        !self.streaming.is_empty() || self.queued > 0 || !self.coop.is_empty() || !self.actions.is_empty()
    }

    /// Whether something under way moves on only by polling, not at a doorbell: queued
    /// frames, data to stream, copies to make (a cooperative copy left to a sender that
    /// writes it does not count: the receive completes when the application next looks).
    pub fn needs_polling(&self) -> bool {
        !self.streaming.is_empty()
            || self.queued > 0
            || !self.actions.is_empty()
            || self.coop.iter().any(|id| match self.get(*id).map(|r| &r.proto) {
                Some(Proto::RecvCoop { coop, .. }) => !coop.left,
                _ => true,
            })
    }

    /// Whether a transfer is under way that moves only while this process acts: a receive that
    /// a rendezvous may match, a rendezvous send, data to stream, a copy to make, frames
    /// queued. Small messages need none of this (an eager send is complete once written), so
    /// a progress thread that watches only while this holds costs them nothing.
    #[inline]
    pub fn needs_progress(&self) -> bool {
        self.posted_large != 0
            || self.rdv_sends != 0
            || self.streams_in != 0
            || !self.coop_wait.is_empty()
            || self.has_outgoing()
    }

    /// Number of messages waiting unmatched (for tests and diagnostics).
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }
}
