//! The engine's outbox ([`Action`]): copies between processes that matching decides on but
//! does not make. A frame handler ([`Engine::on_frame`]) or a posted receive only records what
//! is to be copied; the copy runs after it, in [`Engine::run_actions`], which the progress pass
//! calls once its frames are read (and [`Engine::progress`] at the start of the next). So the
//! handling of a frame stays as short as matching it, whatever the message's size, and a burst
//! of frames is read before the first large copy starts.

use super::*;

/// One entry of the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Copy the rendezvous message (`h`, its `Rts` from process `from`) that receive `req`
    /// matched out of its sender's memory: one single-copy read, or a cooperative copy with the
    /// sender for a large contiguous one; where this process cannot read the sender's memory,
    /// ask the sender to stream it (`Cts`). Until then the receive keeps its posted state (it
    /// is out of the posted queue), so matching moves nothing but this entry.
    Copy { from: ProcIdx, req: ReqId, h: Header },
    /// Write the chunks of send `h.id` that process `from` (its receiver) invited this side to
    /// copy into the receive buffer (`Help`, see `baton_transport::coop`).
    Help { from: ProcIdx, h: Header },
}

impl Engine {
    /// The actions waiting in the outbox, oldest first (for tests and diagnostics).
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// Whether the outbox holds anything (one test, for the progress pass).
    #[inline]
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// Carries out every action in the outbox, in order, through `net`. Actions recorded
    /// meanwhile (none today: a copy only answers with frames) wait for the next call.
    #[inline(never)]
    pub fn run_actions(&mut self, net: &mut dyn Net) {
        let n = self.actions.len();
        for i in 0..n {
            match self.actions[i] {
                Action::Copy { from, req, h } => self.copy(net, from, req, &h),
                Action::Help { from, h } => self.help(net, from, &h),
            }
        }
        self.actions.drain(..n);
    }

    /// Copies rendezvous `h` from process `from`, which receive `id` matched.
    fn copy(&mut self, net: &mut dyn Net, from: ProcIdx, id: ReqId, h: &Header) {
        let Some(r) = self.get_mut(id) else { return };
        if !matches!(r.proto, Proto::RecvPosted { .. }) {
            return;
        }
        let Proto::RecvPosted { sink } = std::mem::replace(&mut r.proto, Proto::Idle) else { unreachable!() };
        let n = h.len.min(sink.capacity() as u64) as usize;
        if let Sink::Contig(buf) = sink {
            if n >= net.coop_min() && net.coop_slot(from, false).is_some() {
                r.proto = Proto::RecvCoopWait { buf, h: *h, n };
                if self.coop.iter().any(|c| self.get(*c).is_some_and(|r| r.to == from)) {
                    // The pair's slot serves one copy at a time: this one follows.
                    self.coop_wait.push_back(id);
                } else {
                    self.start_coop(net, id);
                }
                return;
            }
        }
        self.rendezvous(net, id, from, h, sink, n);
    }
}
