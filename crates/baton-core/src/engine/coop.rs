//! Cooperative copies of large contiguous messages (`baton_transport::coop`): the receiver reads
//! chunks while the sender, invited by `Help`, writes others into the receive buffer.

use super::*;

impl Coop {
    /// Transfer `seq` of `n` bytes from address `addr` of send request `sreq`, in chunks of
    /// `chunk`; this side has copied the first `done` of them.
    pub(super) fn new(seq: u32, n: usize, chunk: usize, addr: u64, sreq: u64, done: u32) -> Coop {
        Coop {
            seq,
            chunks: n.div_ceil(chunk) as u32,
            mine: done,
            chunk,
            addr,
            sreq,
            n,
            expect: done,
            run: 1,
            joined: false,
            helped_seen: 0,
            idle_looks: 0,
            left: false,
        }
    }
}

impl Engine {
    /// Starts the cooperative copy of receive `id` (in state `RecvCoopWait`), or, when the
    /// first read is refused, falls back to [`rendezvous`](Self::rendezvous). Returns whether
    /// the copy goes on (the pair's slot is in use) rather than having ended already.
    pub(super) fn start_coop(&mut self, net: &mut dyn Net, id: ReqId) -> bool {
        let Some(r) = self.get(id) else { return false };
        let Proto::RecvCoopWait { buf, h, n } = r.proto else { return false };
        let from = r.to;
        let chunk = coop_chunk(n);
        // The first chunk proves that single-copy reads work before the sender is invited.
        if !net.read_remote(from, h.aux, &buf.sub(0, chunk.min(n))) {
            self.rendezvous(net, id, from, &h, Sink::Contig(buf), n);
            return false;
        }
        self.coop_seq = self.coop_seq.wrapping_add(1).max(1);
        let coop = Coop::new(self.coop_seq, n, chunk, h.aux, h.id, 1);
        if coop.chunks > 1 {
            if let Some(slot) = net.coop_slot(from, false) {
                slot.begin(coop.seq, 1);
            }
            let invite = Header {
                kind: Kind::Help,
                ctx: coop.seq as u64,
                src: 0,
                tag: chunk as i32,
                len: n as u64,
                id: h.id,
                aux: buf.addr() as u64,
            };
            self.send_control(net, from, invite);
        }
        self.get_mut(id).unwrap().proto = Proto::RecvCoop { buf, coop };
        if self.coop_copy(net, id) {
            return false;
        }
        self.coop.push(id);
        true
    }

    /// Copies every chunk of receive `id`'s cooperative copy still free, and completes it if
    /// the sender has written the rest; else leaves it in [`Engine::coop`] for `progress`.
    fn coop_copy(&mut self, net: &mut dyn Net, id: ReqId) -> bool {
        let Some(r) = self.get_mut(id) else { return true };
        let Proto::RecvCoop { buf, mut coop } = r.proto else { return true };
        let from = r.to;
        // A read refused midway (the sender's memory gone) fails the receive, once every chunk
        // is settled: the sender may still be writing one.
        let mut ok = true;
        while !self.leave_to_sender(net, from, &mut coop) {
            let want = if coop.joined { 1 } else { coop.run };
            let Some(slot) = net.coop_slot(from, false) else { break };
            let (c, k) = match slot.claim_run(coop.seq, coop.chunks, want) {
                Some((c, k)) => {
                    coop.joined |= c != coop.expect;
                    coop.expect = c + k;
                    coop.run = coop.run.saturating_mul(2);
                    (c, k)
                }
                // A chunk the sender took and could not write is this side's to copy too.
                None => match slot.take_failed(coop.seq) {
                    Some(c) => (c, 1),
                    None => break,
                },
            };
            let off = c as usize * coop.chunk;
            let len = (k as usize * coop.chunk).min(coop.n - off);
            ok &= net.read_remote(from, coop.addr + off as u64, &buf.sub(off, len));
            coop.mine += k;
        }
        let helped = net.coop_slot(from, false).map_or(0, |s| s.helped(coop.seq));
        let r = self.get_mut(id).unwrap();
        if !ok {
            r.status.error = c::MPI_ERR_OTHER;
        }
        if coop.mine + helped < coop.chunks {
            r.proto = Proto::RecvCoop { buf, coop };
            return false;
        }
        r.proto = Proto::RecvPosted { sink: Sink::Contig(buf) };
        self.send_control(net, from, Header::control(Kind::Fin, coop.sreq, 0));
        self.finish(id);
        true
    }

    /// On a borrowed core, whether to leave the chunks to the sender for now: while it waits
    /// in MPI (on a core of its own) and makes headway. A sender that computes too is not
    /// waited for: the two progress threads then share the copy.
    fn leave_to_sender(&mut self, net: &mut dyn Net, from: ProcIdx, coop: &mut Coop) -> bool {
        const PATIENCE: u8 = 2;
        coop.left = false;
        if !self.borrowed_core || !net.peer_waits(from) {
            return false;
        }
        let helped = net.coop_slot(from, false).map_or(0, |s| s.helped(coop.seq));
        if helped != coop.helped_seen {
            coop.helped_seen = helped;
            coop.idle_looks = 0;
        } else {
            coop.idle_looks = coop.idle_looks.saturating_add(1);
        }
        coop.left = coop.idle_looks <= PATIENCE;
        coop.left
    }

    /// The sender's side of a cooperative copy: writes chunks of send `h.id` into the
    /// receiver's buffer until none is left.
    pub(super) fn help(&mut self, net: &mut dyn Net, from: ProcIdx, h: &Header) {
        // A progress thread on a borrowed core leaves the copy to a receiver that waits for it
        // in MPI; and a core that copies a message of its own (both sides of an exchange
        // receive) would only add chunk overhead: the receiver is faster alone.
        if (self.borrowed_core && net.peer_waits(from)) || !self.coop.is_empty() {
            // This core copies a message of its own (both sides of an exchange receive): helping
            // would only add chunk overhead, the receiver copies faster alone.
            return;
        }
        let Some(r) = self.get(ReqId::from_wire(h.id)) else { return };
        let Proto::SendRdv { data, .. } = &r.proto else { return };
        let (Some(src), seq, chunk, n) = (data.contig(), h.ctx as u32, h.tag as usize, h.len as usize) else {
            return;
        };
        if chunk == 0 || n > src.len() {
            return;
        }
        let chunks = n.div_ceil(chunk) as u32;
        let mut wrote_any = false;
        while let Some(c) = net.coop_slot(from, true).and_then(|s| s.claim(seq, chunks)) {
            let off = c as usize * chunk;
            let len = chunk.min(n - off);
            let wrote = net.write_remote(from, h.aux + off as u64, &src[off..off + len]);
            let Some(slot) = net.coop_slot(from, true) else { return };
            if !wrote {
                slot.help_failed(seq, c);
                return;
            }
            slot.helped_one(seq);
            wrote_any = true;
        }
        // A receiver asleep in a wait finishes the receive once it sees the counters; one
        // that computes (its progress thread left the chunks to this side) finishes it in its
        // next call, and waking its thread would only take its core.
        if wrote_any && net.peer_waits(from) {
            net.wake_peer(from);
        }
    }

    #[inline(never)]
    pub(super) fn progress_coop(&mut self, net: &mut dyn Net) {
        let mut i = 0;
        while i < self.coop.len() {
            let id = self.coop[i];
            // Read first: a completed request may be released at once (freed by the application).
            let from = self.get(id).map(|r| r.to);
            if !self.coop_copy(net, id) {
                i += 1;
                continue;
            }
            self.coop.swap_remove(i);
            // The pair's slot is free: the next copy from the same sender may start.
            while let Some(k) = self.coop_wait.iter().position(|w| self.get(*w).map(|r| r.to) == from) {
                let next = self.coop_wait.remove(k).expect("found above");
                if self.start_coop(net, next) {
                    break;
                }
            }
        }
    }
}
