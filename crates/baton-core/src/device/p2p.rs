//! Point-to-point entries of the [`Device`]: sends in every mode, receives, `Sendrecv`, probes
//! and matched receives, persistent operations, and the express entries that the C boundary's
//! fast paths call.
//!
//! Important types:
//! - [`Envelope`]: where an operation goes or comes from: the communicator, the peer's rank (in
//!   the remote group of an intercommunicator), the tag, and the application's handle of the
//!   communicator, recorded with the request for its error handler.
//! - [`Matched`]: a message that `MPI_Mprobe` took out of matching, for `MPI_Mrecv`.
//!
//! Arguments arrive checked: ranks in range, valid tags, buffers decoded. `MPI_PROC_NULL` is
//! handled here: a send to it completes at once, a receive from it too, with the status the
//! standard gives (source `MPI_PROC_NULL`, tag `MPI_ANY_TAG`, no bytes).
//!
//! The express entries ([`Device::send_eager_now`], [`Device::recv_now`],
//! [`Device::post_recv`]) are one engine step each under one lock, inlined into the caller: the
//! C boundary has already found the peer, the context id and a contiguous buffer without a lock.

use super::request::EMPTY;
use super::{Buffer, Device, Persistent, SendMode};
use crate::comm::Comm;
use crate::engine::{DirectEnd, ProcIdx, ReqId, SendData, Sender, Sink, Status, Unexpected, PROGRESS_RECV_MIN};
use crate::error::{MpiError, Result};
use crate::runtime::State;
use baton_abi::consts as c;
use baton_transport::mem::UserBuf;

/// Where a point-to-point operation goes (a send) or comes from (a receive).
#[derive(Clone, Copy)]
pub struct Envelope<'a> {
    pub comm: &'a Comm,
    /// A rank of `comm` (of its remote group for an intercommunicator), `MPI_PROC_NULL`, or
    /// for a receive `MPI_ANY_SOURCE`.
    pub peer: i32,
    pub tag: i32,
    /// The application's handle of `comm`: its error handler applies when the request
    /// completes with an error.
    pub handle: usize,
}

/// A message `MPI_Mprobe` or `MPI_Improbe` matched, which only `MPI_Mrecv` or `MPI_Imrecv` may
/// receive.
pub enum Matched {
    /// The message from `MPI_PROC_NULL` (`MPI_MESSAGE_NO_PROC`).
    NoProc,
    Message(Unexpected),
}

impl Matched {
    /// What `MPI_Mprobe` reports of the message.
    pub fn status(&self) -> Status {
        match self {
            Matched::NoProc => proc_null_status(),
            Matched::Message(m) => Status { source: m.h.src, tag: m.h.tag, error: 0, bytes: m.h.len, cancelled: false },
        }
    }
}

/// The status of a receive from `MPI_PROC_NULL`.
pub fn proc_null_status() -> Status {
    Status { source: c::MPI_PROC_NULL, tag: c::MPI_ANY_TAG, error: 0, bytes: 0, cancelled: false }
}

/// Turns a completed receive's status into the call's result.
pub fn check_status(call: &str, s: &Status) -> Result<()> {
    if s.error == c::MPI_ERR_TRUNCATE {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!(
                "{call}: message from rank {} (tag {}) is longer than the receive buffer ({} bytes received)",
                s.source, s.tag, s.bytes
            ),
        ));
    }
    if s.error == c::MPI_ERR_PROC_ABORTED {
        return Err(MpiError::new(
            c::MPI_ERR_PROC_ABORTED,
            format!("{call}: a process of another job this operation needed is gone (it crashed or ended without MPI_Comm_disconnect)"),
        ));
    }
    if s.error != 0 {
        // A failure with no message of its own (a generalized request's callback returned it).
        return Err(MpiError::new(s.error, format!("{call}: the request completed with error code {}", s.error)));
    }
    Ok(())
}

/// Posts a receive of `span` on the express path, recording `handle` for the error handler
/// (should it end in truncation).
#[inline]
fn post_contig(st: &mut State, handle: usize, ctx: u64, src: i32, tag: i32, span: UserBuf) -> ReqId {
    let State { engine, fabric, .. } = st;
    let id = engine.recv(fabric, ctx, src, tag, Sink::Contig(span));
    if let Some(r) = engine.get_mut(id) {
        r.comm = handle;
    }
    id
}

impl Device {
    // ----- express entries -----

    /// Sends `bytes` to process `to` as rank `rank` of context `ctx` at once, without a request,
    /// if the message goes eagerly and nothing is queued ahead of it; false (having done
    /// nothing) otherwise, and the caller takes the generic path.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn send_eager_now(&self, to: ProcIdx, ctx: u64, rank: i32, tag: i32, bytes: &[u8], sender: Sender) -> bool {
        let mut st = self.lock();
        let State { engine, fabric, .. } = &mut *st;
        engine.send_now(fabric, to, ctx, rank, tag, bytes, sender)
    }

    /// A blocking receive into `span` (contiguous): through the engine's direct slot, which
    /// costs no request, unless another thread's receive holds it.
    #[inline]
    pub fn recv_now(&self, handle: usize, ctx: u64, src: i32, tag: i32, span: UserBuf) -> Status {
        let request = {
            let mut st = self.lock();
            let State { engine, fabric, .. } = &mut *st;
            if engine.recv_direct(fabric, ctx, src, tag, span) {
                None
            } else {
                Some(post_contig(&mut st, handle, ctx, src, tag, span))
            }
        };
        match request {
            None => match self.block(|st| st.engine.take_direct()) {
                DirectEnd::Done(s) => s,
                DirectEnd::Request(id) => self.wait_pending(id).0,
            },
            Some(id) => self.wait_pending(id).0,
        }
    }

    /// Posts a receive into `span` (contiguous) and returns its request.
    #[inline]
    pub fn post_recv(&self, handle: usize, ctx: u64, src: i32, tag: i32, span: UserBuf) -> ReqId {
        post_contig(&mut self.lock(), handle, ctx, src, tag, span)
    }

    // ----- sends -----

    /// Starts a send of `data` in `mode` (`call` names it in errors) and returns its request.
    pub fn start_send(&self, call: &str, to: Envelope, data: &Buffer, mode: SendMode) -> Result<ReqId> {
        let id = match mode {
            SendMode::Buffered => self.send_buffered(call, to, data, false)?,
            _ => self.send_inner(to, data, mode, false),
        };
        Ok(id.expect("a nonblocking send keeps its request"))
    }

    /// A blocking send: started, then waited for. An eager message that left at once is done
    /// under the same lock, the common case for small messages.
    pub fn send(&self, call: &str, to: Envelope, data: &Buffer, mode: SendMode) -> Result<()> {
        let id = match mode {
            SendMode::Buffered => self.send_buffered(call, to, data, true)?,
            _ => self.send_inner(to, data, mode, true),
        };
        if let Some(id) = id {
            self.wait(id);
        }
        Ok(())
    }

    /// Starts a send in the standard, synchronous or ready mode. Returns its request, or None
    /// when `blocking` and the send is complete already (then released under the same lock).
    fn send_inner(&self, to: Envelope, data: &Buffer, mode: SendMode, blocking: bool) -> Option<ReqId> {
        if to.peer == c::MPI_PROC_NULL {
            return (!blocking).then(|| self.finished_request(proc_null_status()));
        }
        let (comm, dest) = (to.comm, to.comm.proc_of(to.peer));
        let data = data.send_data();
        let mut st = self.lock();
        let State { engine, fabric, .. } = &mut *st;
        let sender = if blocking { Sender::Waits } else { Sender::GoesOn };
        if matches!(mode, SendMode::Standard | SendMode::Ready) {
            if let SendData::User(b) = &data {
                if engine.send_now(fabric, dest, comm.ctx, comm.rank, to.tag, b.read(0, b.len()), sender) {
                    // Gone already: a blocking send is done, a nonblocking one gets a request
                    // that is complete from the start.
                    return (!blocking).then(|| engine.completed(EMPTY));
                }
            }
        }
        let id = engine.send(fabric, dest, comm.ctx, comm.rank, to.tag, data, mode == SendMode::Sync, sender);
        if let Some(r) = engine.get_mut(id) {
            r.comm = to.handle;
        }
        if blocking && engine.get(id).is_some_and(|r| r.complete) {
            engine.release(id);
            return None;
        }
        Some(id)
    }

    /// Starts a buffered send: the bytes are copied, so the application may reuse its buffer at
    /// once, and the send holds space of the attached buffer until it completes. The
    /// application's request (None when `blocking`) is complete from the start.
    fn send_buffered(&self, call: &str, to: Envelope, data: &Buffer, blocking: bool) -> Result<Option<ReqId>> {
        if to.peer == c::MPI_PROC_NULL {
            return Ok((!blocking).then(|| self.finished_request(proc_null_status())));
        }
        let (comm, dest) = (to.comm, to.comm.proc_of(to.peer));
        let data = SendData::Packed(data.send_data().to_vec());
        let need = data.len() + c::MPI_BSEND_OVERHEAD as usize;
        let mut buffers = self.bsend();
        let b = buffers.for_send(comm.ctx);
        let mut st = self.lock();
        let used = b.in_use(&mut st.engine);
        b.check_room(call, need, used)?;
        let State { engine, fabric, .. } = &mut *st;
        let id = engine.send(fabric, dest, comm.ctx, comm.rank, to.tag, data, false, Sender::GoesOn);
        b.hold(id, need);
        Ok((!blocking).then(|| engine.completed(EMPTY)))
    }

    // ----- receives -----

    /// Posts a receive into `buf` and returns its request.
    pub fn start_recv(&self, from: Envelope, buf: &Buffer) -> ReqId {
        if from.peer == c::MPI_PROC_NULL {
            return self.finished_request(proc_null_status());
        }
        let sink = buf.sink();
        let mut st = self.lock();
        let State { engine, fabric, .. } = &mut *st;
        let id = engine.recv(fabric, from.comm.ctx, from.peer, from.tag, sink);
        if let Some(r) = engine.get_mut(id) {
            r.comm = from.handle;
        }
        if from.peer >= 0 && buf.contiguous().is_some_and(|b| b.len() >= PROGRESS_RECV_MIN) {
            engine.offer(fabric, id, from.comm.proc_of(from.peer));
        }
        id
    }

    /// A blocking receive into `buf`: its status (see [`check_status`] for the call's result).
    pub fn recv(&self, from: Envelope, buf: &Buffer) -> Status {
        if from.peer == c::MPI_PROC_NULL {
            return proc_null_status();
        }
        let id = self.start_recv(from, buf);
        self.wait_pending(id).0
    }

    /// `MPI_Sendrecv`: sends `data` and receives into `buf`, both in flight together.
    pub fn sendrecv(&self, to: Envelope, data: &Buffer, from: Envelope, buf: &Buffer) -> Status {
        let r = self.start_recv(from, buf);
        if let Some(s) = self.send_inner(to, data, SendMode::Standard, false) {
            self.wait(s);
        }
        self.wait(r).0
    }

    /// `MPI_Sendrecv_replace`: sends what `buf` holds and receives into it. The outgoing bytes
    /// are copied first, since the same buffer receives.
    pub fn sendrecv_replace(&self, to: Envelope, from: Envelope, buf: &Buffer) -> Status {
        let data = SendData::Packed(buf.send_data().to_vec());
        let r = self.start_recv(from, buf);
        if to.peer != c::MPI_PROC_NULL {
            let s = {
                let mut st = self.lock();
                let State { engine, fabric, .. } = &mut *st;
                let (comm, dest) = (to.comm, to.comm.proc_of(to.peer));
                engine.send(fabric, dest, comm.ctx, comm.rank, to.tag, data, false, Sender::Waits)
            };
            self.wait(s);
        }
        self.wait(r).0
    }

    /// `MPI_Isendrecv` and `MPI_Isendrecv_replace`: the outgoing bytes are copied first, into
    /// memory the send owns, then the receive into `buf` is posted; the returned request is the
    /// receive's. Once the receive completes the application may reuse both buffers (the send
    /// no longer reads them), which is what the standard's completion means, so the send goes
    /// on detached and is dropped when it is done. Copying first is also what lets the replace
    /// form receive into the buffer it sends from.
    pub fn start_sendrecv(&self, to: Envelope, data: &Buffer, from: Envelope, buf: &Buffer) -> ReqId {
        let out = (to.peer != c::MPI_PROC_NULL).then(|| SendData::Packed(data.send_data().to_vec()));
        let r = self.start_recv(from, buf);
        if let Some(out) = out {
            let mut st = self.lock();
            let State { engine, fabric, .. } = &mut *st;
            let (comm, dest) = (to.comm, to.comm.proc_of(to.peer));
            let s = engine.send(fabric, dest, comm.ctx, comm.rank, to.tag, out, false, Sender::GoesOn);
            engine.release(s);
        }
        r
    }

    // ----- probes and matched receives -----

    /// `MPI_Probe`: waits for a message matching (`src`, `tag`) on `comm` and reports it.
    pub fn probe(&self, comm: &Comm, src: i32, tag: i32) -> Status {
        if src == c::MPI_PROC_NULL {
            return proc_null_status();
        }
        self.block(|st| st.engine.probe(comm.ctx, src, tag))
    }

    /// `MPI_Iprobe`: one progress pass, then a matching message's status if there is one.
    pub fn iprobe(&self, comm: &Comm, src: i32, tag: i32) -> Option<Status> {
        if src == c::MPI_PROC_NULL {
            return Some(proc_null_status());
        }
        self.poll();
        self.lock().engine.probe(comm.ctx, src, tag)
    }

    /// `MPI_Mprobe`: waits for a matching message and takes it out of matching.
    pub fn mprobe(&self, comm: &Comm, src: i32, tag: i32) -> Matched {
        if src == c::MPI_PROC_NULL {
            return Matched::NoProc;
        }
        Matched::Message(self.block(|st| st.engine.mprobe(comm.ctx, src, tag)))
    }

    /// `MPI_Improbe`: one progress pass, then a matching message taken out of matching, if any.
    pub fn improbe(&self, comm: &Comm, src: i32, tag: i32) -> Option<Matched> {
        if src == c::MPI_PROC_NULL {
            return Some(Matched::NoProc);
        }
        self.poll();
        self.lock().engine.mprobe(comm.ctx, src, tag).map(Matched::Message)
    }

    /// `MPI_Imrecv`: starts receiving matched message `m` into `buf`.
    pub fn imrecv(&self, m: Matched, buf: &Buffer) -> ReqId {
        match m {
            Matched::NoProc => self.finished_request(proc_null_status()),
            Matched::Message(m) => {
                let sink = buf.sink();
                let mut st = self.lock();
                let State { engine, fabric, .. } = &mut *st;
                engine.mrecv(fabric, m, sink)
            }
        }
    }

    /// `MPI_Mrecv`: receives matched message `m` into `buf`.
    pub fn mrecv(&self, m: Matched, buf: &Buffer) -> Status {
        match m {
            Matched::NoProc => proc_null_status(),
            m => {
                let id = self.imrecv(m, buf);
                self.wait(id).0
            }
        }
    }

    // ----- persistent requests -----

    /// `MPI_Start`: starts one round of persistent operation `p`, whose communicator's
    /// application handle is `handle`; returns the round's request.
    pub fn start(&self, p: &Persistent, handle: usize) -> Result<ReqId> {
        match p {
            Persistent::Send { comm, data, dest, tag, mode } => {
                self.start_send("MPI_Start", Envelope { comm, peer: *dest, tag: *tag, handle }, data, *mode)
            }
            Persistent::Recv { comm, buf, src, tag } => {
                Ok(self.start_recv(Envelope { comm, peer: *src, tag: *tag, handle }, buf))
            }
            Persistent::Coll(sched) => {
                sched.lock().unwrap_or_else(|e| e.into_inner()).restart();
                Ok(self.start_coll(sched.clone(), handle))
            }
            Persistent::Generalized(_) => {
                Err(MpiError::new(c::MPI_ERR_REQUEST, "MPI_Start: a generalized request is not persistent"))
            }
        }
    }
}
