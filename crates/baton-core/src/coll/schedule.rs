//! The schedule engine: one collective operation as rounds of messages and local steps.
//!
//! An algorithm (see [`super::algo`]) describes a collective as a [`Schedule`]: a list of
//! rounds, each a set of sends and receives on the communicator's collective context followed
//! by local copies and reductions that may only start once those messages are complete. The
//! same schedule serves the three forms of every collective: a blocking call runs it to the
//! end ([`Schedule::run`]); a nonblocking call hands it to the runtime, which advances it from
//! every MPI call that makes progress ([`crate::runtime::Mpi::start_coll`]); a persistent
//! request keeps it and starts it again ([`Schedule::restart`]).
//!
//! Data is named by [`Loc`]: a window of packed bytes in one of the schedule's [`Region`]s,
//! which are the application's buffers (with their datatypes) or scratch memory of the
//! schedule's own. How a message is cut never depends on a datatype's layout, only on byte
//! counts, so ranks using different type maps with the same signature still agree on it.

use crate::comm::Comm;
use crate::datatype::Layout;
use crate::engine::{Engine, ReqId, SendData, Sender, Sink, Status};
use crate::error::{MpiError, Result};
use crate::op::Reducer;
use crate::progress::{EngineAccess, Progress};
use crate::shm_coll::ShmKind;
use baton_abi::consts as c;
use baton_transport::mem::{Scratch, UserBuf};
use std::borrow::Cow;
use std::sync::Arc;

/// Memory a schedule reads or writes.
pub enum Region {
    /// The application's elements of `layout` found at `base_off` within `span`; a contiguous
    /// layout's bytes are used in place.
    User { span: UserBuf, base_off: isize, layout: Arc<Layout> },
    /// The schedule's own memory for intermediate data.
    Scratch(Arc<Scratch>),
}

impl Region {
    fn contig(&self) -> Option<&UserBuf> {
        match self {
            Region::User { span, layout, base_off: 0 } if layout.is_contiguous() => Some(span),
            _ => None,
        }
    }
}

/// A window `[off, off+len)` of the packed bytes of region `region`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub region: u32,
    pub off: usize,
    pub len: usize,
}

impl Loc {
    /// The sub-window `[off, off+len)` of this one.
    pub fn at(self, off: usize, len: usize) -> Loc {
        debug_assert!(off + len <= self.len);
        Loc { region: self.region, off: self.off + off, len }
    }

    /// The one window `locs` make up when they lie end to end in one region.
    pub fn joined(locs: &[Loc]) -> Option<Loc> {
        let first = *locs.first()?;
        let adjacent = locs.windows(2).all(|w| w[0].region == w[1].region && w[0].off + w[0].len == w[1].off);
        adjacent.then(|| Loc { len: locs.iter().map(|l| l.len).sum(), ..first })
    }
}

/// `remote`: on an intercommunicator, `peer` is a rank of the remote group and the message
/// goes on the intercommunicator's context; otherwise (the default) `peer` is a rank of the
/// local group, reached through the intercommunicator's private local communicator, so that
/// the intracommunicator algorithms build the local phases unchanged.
#[derive(Debug)]
enum Xfer {
    /// One message made of these windows, in order.
    Send { peer: i32, locs: Vec<Loc>, remote: bool },
    /// One message spread over these windows, in order; its size must be their total.
    Recv { peer: i32, locs: Vec<Loc>, remote: bool },
}

#[derive(Debug)]
enum Local {
    Copy {
        from: Loc,
        to: Loc,
    },
    /// `to = from ∘ to` when `from_lower` (from holds lower ranks' data), else `to = to ∘ from`.
    Reduce {
        from: Loc,
        to: Loc,
        from_lower: bool,
    },
}

/// A shared-memory collective step (see [`super::shm`]).
#[derive(Debug, Clone, Copy)]
struct ShmStep {
    kind: ShmKind,
    src: Option<Loc>,
    dst: Option<Loc>,
    len: usize,
}

#[derive(Default, Debug)]
struct Round {
    xfers: Vec<Xfer>,
    locals: Vec<Local>,
    shm: Option<ShmStep>,
}

struct Inflight {
    id: ReqId,
    peer: i32,
    /// For receives: the bytes expected, and the windows to spread an owned buffer over.
    expect: Option<usize>,
    spread: Option<Vec<Loc>>,
}

/// A collective operation: rounds of messages and local steps, and where a run of it stands.
pub struct Schedule {
    pub comm: Arc<Comm>,
    /// The communicator's name for error messages is the caller's business; this names the call.
    call: &'static str,
    /// Drawn when the schedule is submitted as nonblocking or persistent
    /// ([`Schedule::nonblocking`]), else when a blocking run starts ([`Schedule::progress`]).
    tag: Option<i32>,
    regions: Vec<Region>,
    rounds: Vec<Round>,
    reducer: Option<Reducer>,
    next: usize,
    started: bool,
    inflight: Vec<Inflight>,
    error: Option<MpiError>,
    /// The shared-memory step in progress: its number and whether its data is published.
    shm_seq: u64,
    shm_phase: u8,
}

impl Schedule {
    /// An empty schedule for one collective call on `comm`. Every member must build its
    /// schedules for `comm` in the same order (MPI's rule for collectives), which makes the
    /// tag drawn for it (when it starts, or by [`Schedule::nonblocking`]) the same on all of them.
    pub fn new(comm: Arc<Comm>, call: &'static str) -> Schedule {
        Schedule::with_tag(comm, call, None)
    }

    /// A schedule that sends no messages (a collective through the shared-memory area): it
    /// draws no tag, as the blocking calls that run that protocol directly do not, so that the
    /// members taking either way agree on the tags of later collectives.
    pub fn untagged(comm: Arc<Comm>, call: &'static str) -> Schedule {
        Schedule::with_tag(comm, call, Some(-1))
    }

    fn with_tag(comm: Arc<Comm>, call: &'static str, tag: Option<i32>) -> Schedule {
        Schedule {
            comm,
            call,
            tag,
            regions: Vec::new(),
            rounds: {
                let mut v = Vec::with_capacity(4);
                v.push(Round::default());
                v
            },
            reducer: None,
            next: 0,
            started: false,
            inflight: Vec::new(),
            error: None,
            shm_seq: 0,
            shm_phase: 0,
        }
    }

    /// Marks the schedule as a nonblocking or persistent collective: its tag comes from that
    /// sequence of the communicator, not the blocking one. Called before it first runs.
    /// An untagged schedule stays untagged.
    pub fn nonblocking(&mut self) {
        if self.tag.is_none() {
            self.tag = Some(self.comm.next_nb_coll_tag());
        }
    }

    pub fn call(&self) -> &'static str {
        self.call
    }

    pub fn size(&self) -> i32 {
        self.comm.size()
    }

    pub fn rank(&self) -> i32 {
        self.comm.rank
    }

    pub fn set_reducer(&mut self, r: Reducer) {
        self.reducer = Some(r);
    }

    pub fn reducer(&self) -> Option<&Reducer> {
        self.reducer.as_ref()
    }

    /// Adds a region; the returned window covers `len` packed bytes of it from the start.
    pub fn region(&mut self, r: Region, len: usize) -> Loc {
        self.regions.push(r);
        Loc { region: (self.regions.len() - 1) as u32, off: 0, len }
    }

    /// `len` bytes of fresh scratch memory.
    pub fn scratch(&mut self, len: usize) -> Loc {
        self.region(Region::Scratch(Arc::new(Scratch::new(len))), len)
    }

    /// Whether `l` is application memory used in place (reductions straight into it are cheap).
    pub fn is_plain(&self, l: Loc) -> bool {
        self.regions[l.region as usize].contig().is_some()
            || matches!(self.regions[l.region as usize], Region::Scratch(_))
    }

    fn cur(&mut self) -> &mut Round {
        self.rounds.last_mut().unwrap()
    }

    /// Ends the current round: what follows starts once its messages and local steps are done.
    pub fn end_round(&mut self) {
        if !self.cur().xfers.is_empty() || !self.cur().locals.is_empty() || self.cur().shm.is_some() {
            self.rounds.push(Round::default());
        }
    }

    pub fn send(&mut self, peer: i32, l: Loc) {
        self.send_v(peer, vec![l]);
    }

    pub fn recv(&mut self, peer: i32, l: Loc) {
        self.recv_v(peer, vec![l]);
    }

    /// One message made of several windows.
    pub fn send_v(&mut self, peer: i32, locs: Vec<Loc>) {
        self.cur().xfers.push(Xfer::Send { peer, locs, remote: false });
    }

    /// One message spread over several windows.
    pub fn recv_v(&mut self, peer: i32, locs: Vec<Loc>) {
        self.cur().xfers.push(Xfer::Recv { peer, locs, remote: false });
    }

    /// On an intercommunicator: a message to rank `peer` of the remote group.
    pub fn send_remote(&mut self, peer: i32, l: Loc) {
        self.cur().xfers.push(Xfer::Send { peer, locs: vec![l], remote: true });
    }

    /// On an intercommunicator: a message from rank `peer` of the remote group.
    pub fn recv_remote(&mut self, peer: i32, l: Loc) {
        self.cur().xfers.push(Xfer::Recv { peer, locs: vec![l], remote: true });
    }

    /// Size of the remote group of an intercommunicator (of the group otherwise).
    pub fn remote_size(&self) -> i32 {
        self.comm.peer_size()
    }

    /// A shared-memory collective step (the communicator must have an area; see `shm`).
    pub fn shm(&mut self, kind: ShmKind, src: Option<Loc>, dst: Option<Loc>, len: usize) {
        self.end_round();
        self.cur().shm = Some(ShmStep { kind, src, dst, len });
        self.end_round();
    }

    /// A local copy, after this round's messages.
    pub fn copy(&mut self, from: Loc, to: Loc) {
        debug_assert_eq!(from.len, to.len);
        if from != to && from.len > 0 {
            self.cur().locals.push(Local::Copy { from, to });
        }
    }

    /// A local reduction, after this round's messages.
    pub fn reduce(&mut self, from: Loc, to: Loc, from_lower: bool) {
        debug_assert_eq!(from.len, to.len);
        if from.len > 0 {
            self.cur().locals.push(Local::Reduce { from, to, from_lower });
        }
    }

    // ----- data access -----

    fn bytes(&self, l: Loc) -> Cow<'_, [u8]> {
        match &self.regions[l.region as usize] {
            Region::Scratch(s) => Cow::Borrowed(s.read(l.off, l.len)),
            r @ Region::User { span, base_off, layout } => match r.contig() {
                Some(b) => Cow::Borrowed(b.read(l.off, l.len)),
                None => {
                    let mut v = Vec::with_capacity(l.len);
                    layout.pack_range(span, *base_off, l.off, l.len, &mut v);
                    Cow::Owned(v)
                }
            },
        }
    }

    fn write(&self, l: Loc, src: &[u8]) {
        match &self.regions[l.region as usize] {
            Region::Scratch(s) => {
                s.write(l.off, &src[..l.len.min(src.len())]);
            }
            r @ Region::User { span, base_off, layout } => match r.contig() {
                Some(b) => {
                    b.write(l.off, &src[..l.len.min(src.len())]);
                }
                None => layout.unpack_into(span, *base_off, l.off, &src[..l.len.min(src.len())]),
            },
        }
    }

    fn modify(&self, l: Loc, f: impl FnOnce(&mut [u8])) {
        match &self.regions[l.region as usize] {
            Region::Scratch(s) => s.modify(l.off, l.len, f),
            r => match r.contig() {
                Some(b) => b.modify(l.off, l.len, f),
                None => {
                    let mut v = self.bytes(l).into_owned();
                    f(&mut v);
                    self.write(l, &v);
                }
            },
        }
    }

    fn send_data(&self, locs: &[Loc]) -> SendData {
        if let [l] = locs {
            match &self.regions[l.region as usize] {
                Region::Scratch(s) => return SendData::Scratch(s.clone(), l.off, l.len),
                r => {
                    if let Some(b) = r.contig() {
                        return SendData::User(b.sub(l.off, l.len));
                    }
                }
            }
        }
        let mut v = Vec::with_capacity(locs.iter().map(|l| l.len).sum());
        for &l in locs {
            v.extend_from_slice(&self.bytes(l));
        }
        SendData::Packed(v)
    }

    /// Where a receive into `locs` goes, and whether an owned buffer must be spread afterwards.
    fn sink(&self, locs: &[Loc]) -> (Sink, bool) {
        // Adjacent windows of one region are one window: a local fact, so merging them here
        // never changes how many messages the peer sends.
        if let Some(first) = Loc::joined(locs) {
            let len = first.len;
            return match &self.regions[first.region as usize] {
                Region::Scratch(s) => (Sink::Scratch(s.clone(), first.off, len), false),
                r @ Region::User { span, base_off, layout } => match r.contig() {
                    Some(b) => (Sink::Contig(b.sub(first.off, len)), false),
                    None => (
                        Sink::Typed { span: *span, base_off: *base_off, layout: layout.clone(), start: first.off, len },
                        false,
                    ),
                },
            };
        }
        (Sink::Owned(vec![0; locs.iter().map(|l| l.len).sum()]), true)
    }

    fn run_local(&self, s: &Local) {
        match *s {
            Local::Copy { from, to } => {
                let b = self.bytes(from);
                self.write(to, &b);
            }
            Local::Reduce { from, to, from_lower } => {
                let r = self.reducer.as_ref().expect("a reduction step needs a reducer");
                let input = self.bytes(from);
                self.modify(to, |dst| {
                    if from_lower || r.commutative {
                        r.apply(&input, dst);
                    } else {
                        let mut t = input.into_owned();
                        r.apply(dst, &mut t);
                        dst.copy_from_slice(&t);
                    }
                });
            }
        }
    }

    // ----- running -----

    /// Rewinds a completed schedule so that it runs again (persistent collectives).
    pub fn restart(&mut self) {
        debug_assert!(self.inflight.is_empty());
        self.next = 0;
        self.started = false;
        self.error = None;
        self.shm_phase = 0;
    }

    fn post(&mut self, port: &impl EngineAccess) {
        let round = &self.rounds[self.next];
        // Receives first, so that messages arriving during the sends find them posted.
        let mut recvs = Vec::new();
        let mut sends = Vec::new();
        for x in &round.xfers {
            match x {
                Xfer::Recv { peer, locs, remote } => {
                    let (sink, spread) = self.sink(locs);
                    let expect = locs.iter().map(|l| l.len).sum();
                    recvs.push((*peer, *remote, sink, expect, spread.then(|| locs.clone())));
                }
                Xfer::Send { peer, locs, remote } => sends.push((*peer, *remote, self.send_data(locs))),
            }
        }
        let tag = self.tag.expect("a schedule has its tag once it runs");
        debug_assert!(tag >= 0 || round.xfers.is_empty(), "{}: an untagged schedule sends a message", self.call);
        let (comm, inflight) = (&self.comm, &mut self.inflight);
        let via = |remote: bool| match (&comm.local, remote) {
            (Some(local), false) => local,
            _ => comm,
        };
        port.with_engine(|engine, net| {
            for (peer, remote, sink, expect, spread) in recvs {
                let id = engine.recv(net, via(remote).coll_ctx(), peer, tag, sink);
                inflight.push(Inflight { id, peer, expect: Some(expect), spread });
            }
            for (peer, remote, data) in sends {
                let c = via(remote);
                let id = engine.send(net, c.proc_of(peer), c.coll_ctx(), c.rank, tag, data, false, Sender::GoesOn);
                inflight.push(Inflight { id, peer, expect: None, spread: None });
            }
        });
        self.started = true;
        if round.shm.is_some() {
            self.shm_seq = self.comm.shm.get().expect("a shared-memory step needs an area").next_seq();
            self.shm_phase = 1;
        }
    }

    /// Whether the shared-memory step in progress can move on.
    fn shm_ready(&self) -> bool {
        let Some(step) = self.rounds.get(self.next).and_then(|r| r.shm) else { return true };
        let Some(sh) = self.comm.shm.get() else { return true };
        match self.shm_phase {
            1 => sh.can_start(step.kind, self.shm_seq, sh.published(step.kind, step.len)),
            2 => sh.can_finish(step.kind, self.shm_seq),
            _ => true,
        }
    }

    /// Advances the shared-memory step; true once it is done.
    fn shm_poll(&mut self) -> bool {
        let step = self.rounds[self.next].shm.expect("a shared-memory step");
        let sh = self.comm.shm.get().expect("a shared-memory area").clone();
        let seq = self.shm_seq;
        if self.shm_phase == 1 {
            if !sh.can_start(step.kind, seq, sh.published(step.kind, step.len)) {
                return false;
            }
            let data = step.src.map(|l| self.bytes(l));
            sh.start(step.kind, seq, data.as_deref());
            self.shm_phase = 2;
        }
        if !sh.can_finish(step.kind, seq) {
            return false;
        }
        match step.kind {
            ShmKind::Barrier => {}
            ShmKind::Bcast { root } => {
                if root != self.rank() as usize {
                    self.write(step.dst.expect("bcast buffer"), sh.data(root, seq, step.len));
                }
            }
            ShmKind::Allgather | ShmKind::Alltoall => {
                let dst = step.dst.expect("allgather/alltoall buffer");
                for r in 0..self.size() as usize {
                    self.write(dst.at(r * step.len, step.len), sh.block(step.kind, r, seq, step.len));
                }
            }
            ShmKind::Reduce { root } if root != self.rank() as usize => {}
            ShmKind::Reduce { .. } | ShmKind::Allreduce => {
                let r = self.reducer.as_ref().expect("a reduction needs a reducer");
                self.modify(step.dst.expect("reduction result"), |acc| sh.combine(seq, r, acc));
            }
        }
        sh.finish(seq);
        self.shm_phase = 0;
        true
    }

    /// Whether the round in progress can move on: its messages are complete in `engine` and its
    /// shared-memory step is ready. Takes the engine rather than a [`EngineAccess`] because a blocking
    /// wait checks this under the engine lock it already holds.
    pub fn ready(&self, engine: &Engine) -> bool {
        inflight_complete(&self.inflight, engine) && self.shm_ready()
    }

    /// Collects the messages of the current round if all are complete.
    fn collect(&mut self, port: &impl EngineAccess) -> bool {
        // A round with a shared-memory step has no messages, so this never holds one back;
        // checked all the same, as `ready` does.
        if !self.shm_ready() {
            return false;
        }
        let inflight = &mut self.inflight;
        let done = port.with_engine(|engine, _| {
            if !inflight_complete(inflight, engine) {
                return None;
            }
            let mut done = Vec::with_capacity(inflight.len());
            for p in inflight.drain(..) {
                let (status, owned) = match engine.get_mut(p.id) {
                    Some(r) => (r.status, r.owned.take()),
                    None => (Status::default(), None),
                };
                engine.release(p.id);
                done.push((p, status, owned));
            }
            Some(done)
        });
        let Some(done) = done else { return false };
        for (p, status, owned) in done {
            let Some(expect) = p.expect else { continue };
            if status.error != 0 || status.bytes as usize != expect {
                let got = if status.error != 0 { "more".to_string() } else { status.bytes.to_string() };
                self.error.get_or_insert_with(|| {
                    MpiError::new(
                        c::MPI_ERR_TRUNCATE,
                        format!(
                            "{}: rank {} sent {got} bytes where {expect} were expected (type signatures differ between ranks)",
                            self.call, p.peer
                        ),
                    )
                });
            }
            if let (Some(locs), Some(buf)) = (p.spread, owned) {
                let mut at = 0;
                for l in locs {
                    let end = (at + l.len).min(buf.len());
                    self.write(l, &buf[at.min(end)..end]);
                    at += l.len;
                }
            }
        }
        true
    }

    /// Advances as far as possible without waiting; true once the schedule is complete.
    pub fn progress(&mut self, port: &impl EngineAccess) -> bool {
        // Drawn at the start of every run, whether or not this member has messages to send,
        // so that all members draw one tag per blocking call.
        if self.tag.is_none() {
            self.tag = Some(self.comm.next_coll_tag());
        }
        loop {
            if !self.inflight.is_empty() && !self.collect(port) {
                return false;
            }
            if self.shm_phase != 0 && !self.shm_poll() {
                return false;
            }
            if self.started {
                for s in &self.rounds[self.next].locals {
                    self.run_local(s);
                }
                self.next += 1;
                self.started = false;
            }
            if self.next >= self.rounds.len() {
                return true;
            }
            self.post(port);
        }
    }

    /// Runs the schedule to completion (blocking collectives).
    pub fn run(&mut self, mpi: &(impl Progress + EngineAccess)) -> Result<()> {
        while !self.progress(mpi) {
            mpi.block_until(|engine| self.ready(engine).then_some(()));
        }
        self.take_error()
    }

    /// The first error of the last run, if any.
    pub fn take_error(&mut self) -> Result<()> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The status a completed run reports through its request.
    pub fn status(&self) -> Status {
        Status {
            source: c::MPI_ANY_SOURCE,
            tag: c::MPI_ANY_TAG,
            error: self.error.as_ref().map_or(0, |e| e.class),
            bytes: 0,
            cancelled: false,
        }
    }

    /// Where a run stands, for diagnostics such as a deadlock report: the round in progress and
    /// its messages that `engine` has not completed (peers are ranks of the communicator).
    pub fn describe(&self, engine: &Engine) -> String {
        let waiting: Vec<String> = self
            .inflight
            .iter()
            .filter(|p| engine.get(p.id).is_some_and(|r| !r.complete))
            .map(|p| match p.expect {
                Some(n) => format!("a receive of {n} bytes from rank {}", p.peer),
                None => format!("a send to rank {}", p.peer),
            })
            .collect();
        let waiting = if waiting.is_empty() { "no message".to_string() } else { waiting.join(", ") };
        let posted = if self.started { "" } else { " (not posted)" };
        format!("{} round {} of {}{posted}, waiting for {waiting}", self.call, self.next, self.rounds.len())
    }

    /// Rounds in the schedule (for tests of the algorithms).
    pub fn rounds(&self) -> usize {
        self.rounds.iter().filter(|r| !r.xfers.is_empty() || !r.locals.is_empty() || r.shm.is_some()).count()
    }
}

fn inflight_complete(inflight: &[Inflight], engine: &Engine) -> bool {
    inflight.iter().all(|p| engine.get(p.id).is_none_or(|r| r.complete))
}
