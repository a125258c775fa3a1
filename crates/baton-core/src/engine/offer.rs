//! A receive posted before its message was sent: the sender may write it (`Kind::Offer`).
//!
//! Rendezvous has the receiver copy (a single `process_vm_readv` once it matched the `Rts`).
//! That suits a receiver that waits and a sender that computes, but not the reverse: a
//! receiver that computes reads nothing until its next MPI call, while the sender idles in
//! `MPI_Wait`. So a receiver that posts a large contiguous receive for one sender's next
//! message, where nothing it has posted before could take that message, *offers* its buffer
//! (`Kind::Offer`): the address, and the number of that sender's messages it has read so far.
//! The sender takes the offer only for its very next message to that process (its own count
//! of messages pushed must equal the offer's, and nothing may wait in its queue), and only
//! for a contiguous rendezvous message that the offered receive would match and that fits; it
//! then sends `RtsPut` instead of `Rts`, and writes chunks of the message into the buffer
//! whenever it makes progress while waiting (`progress_puts`), from the same counter
//! of the pair's cooperative-copy slot that the receiver reads chunks from once it matches the
//! `RtsPut`. Whoever comes first copies; the receiver completes when its chunks and the
//! sender's cover the message, and answers `Fin` as always.
//!
//! Safety of the protocol: the offered receive is the first posted that could match a message
//! from that sender, and the sender's next message, which is the `RtsPut`, matches it. A
//! receive that is cancelled first closes the slot's counter (only while no chunk is taken),
//! so the sender then writes nothing, and its `RtsPut`, matched elsewhere, is an `Rts`. Any
//! other message from that sender voids the offer at both ends.

use super::*;

/// An offer this process made as the receiver.
pub(super) struct OfferOut {
    pub(super) from: ProcIdx,
    pub(super) req: ReqId,
    pub(super) seq: u32,
}

/// An offer a receiver made to this process.
#[derive(Clone, Copy)]
pub(super) struct OfferIn {
    ctx: u64,
    src: i32,
    tag: i32,
    cap: usize,
    addr: u64,
    /// The receiver's count of this process's messages read when it offered.
    seen: u64,
    seq: u32,
}

/// A send writing chunks into an offered buffer.
#[derive(Clone, Copy)]
pub(super) struct Put {
    req: ReqId,
    to: ProcIdx,
    seq: u32,
    chunk: usize,
    chunks: u32,
    addr: u64,
    n: usize,
}

impl Engine {
    /// Offers receive `id`'s buffer to process `from`, its only possible sender, if the
    /// conditions in the module docs hold; otherwise does nothing (the receive goes on as
    /// posted).
    pub fn offer(&mut self, net: &mut dyn Net, id: ReqId, from: ProcIdx) {
        let Some(pos) = self.posted.iter().position(|p| p.req == id) else { return };
        let (ctx, src, tag) = (self.posted[pos].ctx, self.posted[pos].src, self.posted[pos].tag);
        if src == ANY_SOURCE
            || self.posted.iter().take(pos).any(|q| q.ctx == ctx && (q.src == ANY_SOURCE || q.src == src))
            || self.offers_out.iter().any(|o| o.from == from)
        {
            return;
        }
        let Some(Request { proto: Proto::RecvPosted { sink: Sink::Contig(buf) }, .. }) = self.get(id) else { return };
        let buf = *buf;
        if buf.len() < PROGRESS_RECV_MIN || !net.reads_sender(from) || net.coop_slot(from, false).is_none() {
            return;
        }
        // The pair's slot serves one transfer at a time: none from this sender under way.
        let busy = |r: &ReqId| self.get(*r).is_some_and(|r| r.to == from);
        if self.coop.iter().any(busy)
            || self.coop_wait.iter().any(busy)
            || self.actions.iter().any(|a| matches!(a, Action::Copy { from: f, .. } if *f == from))
            || self.has_queue(from)
        {
            return;
        }
        self.coop_seq = self.coop_seq.wrapping_add(1).max(1);
        let seq = self.coop_seq;
        if let Some(slot) = net.coop_slot(from, false) {
            slot.begin(seq, 0);
        }
        let seen = self.seen_from.get(from as usize).copied().unwrap_or(0);
        let mut payload = [0u8; 16];
        payload[..8].copy_from_slice(&seen.to_le_bytes());
        payload[8..12].copy_from_slice(&seq.to_le_bytes());
        let h =
            Header { kind: Kind::Offer, ctx, src, tag, len: buf.len() as u64, id: id.wire(), aux: buf.addr() as u64 };
        // Worth it only now: a queued offer would follow messages it does not know of.
        if net.try_send(from, &h, &payload) {
            self.offers_out.push(OfferOut { from, req: id, seq });
        }
    }

    /// An offer arrived from receiver `from` (replacing any earlier one: that one is void).
    pub(super) fn on_offer(&mut self, from: ProcIdx, h: &Header, payload: &[u8]) {
        let (Some(seen), Some(seq)) = (payload.get(..8), payload.get(8..12)) else { return };
        let i = from as usize;
        if self.offers_in.len() <= i {
            self.offers_in.resize(i + 1, None);
        }
        self.offers_in[i] = Some(OfferIn {
            ctx: h.ctx,
            src: h.src,
            tag: h.tag,
            cap: h.len as usize,
            addr: h.aux,
            seen: u64::from_le_bytes(seen.try_into().expect("8 bytes")),
            seq: u32::from_le_bytes(seq.try_into().expect("4 bytes")),
        });
    }

    /// Takes the offer of process `to` for a rendezvous send of `len` contiguous bytes on
    /// `ctx` as `src` with `tag`, if it holds for this message (see the module docs).
    pub(super) fn take_offer(&mut self, to: ProcIdx, ctx: u64, src: i32, tag: i32, len: usize) -> Option<OfferIn> {
        let o = self.offers_in.get_mut(to as usize)?.take()?;
        let sent = self.sent_to.get(to as usize).copied().unwrap_or(0);
        let fits = o.ctx == ctx && o.src == src && (o.tag == ANY_TAG || o.tag == tag) && len <= o.cap && len > 0;
        (fits && sent == o.seen && !self.has_queue(to)).then_some(o)
    }

    /// Send `id` of `n` bytes took offer `o` of process `to`: it writes chunks from now on.
    pub(super) fn start_put(&mut self, id: ReqId, to: ProcIdx, o: OfferIn, n: usize) {
        let chunk = coop_chunk(o.cap);
        let chunks = n.div_ceil(chunk) as u32;
        self.puts.push(Put { req: id, to, seq: o.seq, chunk, chunks, addr: o.addr, n });
    }

    /// A matchable frame from `from` arrived (before it is matched): counts it, and decides
    /// what an `RtsPut` is. Returns the frame to match: an `RtsPut` for the offered receive
    /// as it came, anything else as it is, and an `RtsPut` whose offer is gone (the receive
    /// was cancelled) as the plain `Rts` it then is.
    #[inline]
    pub(super) fn count_seen(&mut self, from: ProcIdx, h: &Header) -> Header {
        let i = from as usize;
        if self.seen_from.len() <= i {
            self.seen_from.resize(i + 1, 0);
        }
        self.seen_from[i] += 1;
        if self.offers_out.is_empty() && h.kind != Kind::RtsPut {
            return *h;
        }
        let offered = self.offers_out.iter().position(|o| o.from == from);
        match (h.kind, offered) {
            (Kind::RtsPut, Some(_)) => *h,
            (Kind::RtsPut, None) => Header { kind: Kind::Rts, ..*h },
            // The sender sent something else first: it will never take the offer.
            (_, Some(k)) => {
                self.offers_out.swap_remove(k);
                *h
            }
            (_, None) => *h,
        }
    }

    /// Receive `id` matched `RtsPut` `h` from `from`. If it is the offered receive, it joins
    /// the transfer the sender may already be writing and returns true; otherwise (which the
    /// protocol rules out) the offer is dropped and the frame is handled as an `Rts`.
    pub(super) fn join_put(&mut self, id: ReqId, from: ProcIdx, h: &Header) -> bool {
        let Some(k) = self.offers_out.iter().position(|o| o.from == from) else { return false };
        let o = self.offers_out.swap_remove(k);
        if o.req != id {
            return false;
        }
        let Some(r) = self.get_mut(id) else { return false };
        let Proto::RecvPosted { sink: Sink::Contig(buf) } = r.proto else { return false };
        let n = (h.len as usize).min(buf.len());
        let chunk = coop_chunk(buf.len());
        r.to = from;
        r.status.source = h.src;
        r.status.tag = h.tag;
        r.status.bytes = n as u64;
        let coop = Coop::new(o.seq, n, chunk, h.aux, h.id, 0);
        r.proto = Proto::RecvCoop { buf, coop };
        self.coop.push(id);
        true
    }

    /// Receive `id`, offered, is being cancelled: true if the offer could be withdrawn (the
    /// sender has taken no chunk, and now cannot), false if the transfer has begun.
    pub(super) fn withdraw_offer(&mut self, net: &mut dyn Net, id: ReqId) -> bool {
        let Some(k) = self.offers_out.iter().position(|o| o.req == id) else { return true };
        let o = &self.offers_out[k];
        let closed = net.coop_slot(o.from, false).is_none_or(|s| s.close_untouched(o.seq));
        if closed {
            self.offers_out.swap_remove(k);
        }
        closed
    }

    /// The sender's side: writes every chunk of every taken offer nobody has taken yet. Runs
    /// in passes of a thread that waits (not on a borrowed core: a sender that computes
    /// leaves the copy to the receiver).
    #[inline(never)]
    pub(super) fn progress_puts(&mut self, net: &mut dyn Net) {
        let puts = std::mem::take(&mut self.puts);
        for p in &puts {
            let Some(Request { proto: Proto::SendRdv { data, .. }, .. }) = self.get(p.req) else { continue };
            let Some(src) = data.contig() else { continue };
            let mut wrote = false;
            while let Some(c) = net.coop_slot(p.to, true).and_then(|s| s.claim(p.seq, p.chunks)) {
                let off = c as usize * p.chunk;
                let len = p.chunk.min(p.n - off);
                let ok = net.write_remote(p.to, p.addr + off as u64, &src[off..off + len]);
                let Some(slot) = net.coop_slot(p.to, true) else { break };
                if !ok {
                    slot.help_failed(p.seq, c);
                    break;
                }
                slot.helped_one(p.seq);
                wrote = true;
            }
            // A receiver asleep in a wait finishes once it sees the counters; one that
            // computes finishes in its next call (see `help`).
            if wrote && net.peer_waits(p.to) {
                net.wake_peer(p.to);
            }
        }
    }

    /// Counts a matchable frame pushed to `to` (what an offer's count is compared with).
    #[inline]
    pub(super) fn count_sent(&mut self, to: ProcIdx) {
        match self.sent_to.get_mut(to as usize) {
            Some(c) => *c += 1,
            None => {
                self.sent_to.resize(to as usize + 1, 0);
                self.sent_to[to as usize] = 1;
            }
        }
    }

    /// Process `p` is gone: its offers, both ways, and writes into its memory end.
    pub(super) fn drop_offers(&mut self, p: ProcIdx) {
        self.offers_out.retain(|o| o.from != p);
        if let Some(o) = self.offers_in.get_mut(p as usize) {
            *o = None;
        }
        self.puts.retain(|x| x.to != p);
    }
}
