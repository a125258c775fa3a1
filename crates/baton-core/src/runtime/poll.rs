//! One progress pass over every transport: shared-memory rings, the inbox other jobs' processes
//! write to, TCP connections and the loopback queue, all feeding the engine ([`State`]).

use crate::engine::{Engine, ProcIdx};
use crate::fabric::tcp::{Deliver, TcpNet};
use crate::fabric::Fabric;
use crate::progress::Service;
use baton_transport::inbox::Inbox;
use baton_transport::shm::Consumer;
use baton_transport::stream::Rx;
use std::sync::Arc;

pub struct State {
    pub engine: Engine,
    pub fabric: Fabric,
    pub(super) consumers: Vec<(ProcIdx, Consumer)>,
    /// Receiving halves of TCP connections.
    pub(super) tcp_rx: Vec<TcpIn>,
    /// Of which on lane 0 (not bulk lanes).
    pub(super) tcp_lane0: usize,
    /// Descriptors epoll reported readable in this pass (kept, so polling does not allocate).
    pub(super) tcp_ready: Vec<u64>,
    /// Whether every socket of `tcp_rx` is in the TCP watched set: always with more than
    /// [`TCP_POLL_EACH_MAX`] of them, else only while a thread may sleep ([`State::arm_tcp`]).
    pub(super) tcp_watched: bool,
    /// This process's inbox, once it has met other jobs (beside the fabric, so that reading it
    /// borrows neither the other).
    pub(super) inbox: Option<Arc<Inbox>>,
    /// Readers of the rings other jobs' processes leased in our inbox: (sender, slot, reader).
    pub(super) inbox_cons: Vec<(ProcIdx, usize, Consumer)>,
    /// The inbox generation last seen (a change means a lease started or closed).
    pub(super) inbox_gen: u64,
    /// What this process serves for others at every pass (see [`Service`]).
    pub(super) services: Vec<Arc<dyn Service>>,
}

/// A TCP connection's receiving half, as the progress loop reads it.
pub(super) struct TcpIn {
    pub(super) from: ProcIdx,
    pub(super) rx: Rx,
    /// The peer was disconnected since: the connection's end is expected, whatever the same
    /// process does next.
    pub(super) retired: bool,
    /// A bulk lane ([`crate::fabric::tcp`]): data arrives on it only after this process asked
    /// for some, so a pass reads it only while a receive waits for streamed data (an empty
    /// read on every pass is a system call that small messages across hosts would pay; see
    /// docs/PERFORMANCE.md, TCP), while the sockets are watched (a thread may sleep, and epoll
    /// reports what it holds, its end included), or once retired, until its end (else its
    /// descriptor would outlive the disconnect).
    pub(super) bulk: bool,
}

/// Puts every socket of `rx` in the TCP watched set (`on`) or takes them out, unless `watched`
/// says they are there already (or not); then records it.
pub(super) fn set_watched(t: &TcpNet, rx: &[TcpIn], watched: &mut bool, on: bool) {
    if *watched != on {
        for c in rx {
            if on {
                t.watch(&c.rx)
            } else {
                t.unwatch(&c.rx)
            }
        }
        *watched = on;
    }
}

/// With more TCP connections than this (bulk lanes not counted), a progress pass asks epoll
/// which ones have data instead of trying each.
pub(super) const TCP_POLL_EACH_MAX: usize = 4;

impl State {
    /// Moves every frame that has arrived into the engine and pushes what waits to go out.
    /// Returns whether anything happened.
    pub fn progress(&mut self) -> bool {
        let mut did = false;
        if self.fabric.tcp.is_some() {
            did |= self.progress_tcp();
        }
        let State { engine, fabric, consumers, .. } = self;
        engine.progress(fabric);
        for (from, cons) in consumers.iter_mut() {
            // A bounded batch per peer keeps one busy sender from starving the others.
            for _ in 0..64 {
                let Some(h) = cons.next_frame() else { break };
                engine.on_frame(fabric, *from, &h, cons.payload());
                cons.consume();
                did = true;
            }
        }
        while let Some((h, data)) = fabric.loopback.pop_front() {
            let me = fabric.me();
            engine.on_frame(fabric, me, &h, &data);
            did = true;
        }
        if self.inbox.is_some() {
            did |= self.progress_inbox();
        }
        // The copies that the frames read above asked for (a matched rendezvous, a sender's
        // help), now that every ring of this pass is read.
        if self.engine.has_actions() {
            let State { engine, fabric, .. } = self;
            engine.run_actions(fabric);
            did = true;
        }
        if !self.services.is_empty() {
            let State { engine, fabric, services, .. } = self;
            for s in services.iter() {
                s.serve(engine, fabric);
            }
        }
        did
    }

    /// Adopts new leases of our inbox, reads every leased ring and frees closed ones.
    pub(super) fn progress_inbox(&mut self) -> bool {
        let State { engine, fabric, inbox: Some(ib), inbox_cons, inbox_gen, .. } = self else { return false };
        let g = ib.generation();
        if g != *inbox_gen {
            let known: Vec<usize> = inbox_cons.iter().map(|(_, s, _)| *s).collect();
            let mut all_known = true;
            for l in ib.new_leases(&known) {
                match fabric.foreign_ids.get(&(l.job, l.rank)) {
                    Some(&p) => inbox_cons.push((p, l.slot, ib.reader(&l))),
                    // A sender this process has not learnt of yet: look again next pass.
                    None => all_known = false,
                }
            }
            if all_known {
                *inbox_gen = g;
            }
        }
        let mut did = false;
        let mut i = 0;
        while i < inbox_cons.len() {
            let (from, slot, cons) = &mut inbox_cons[i];
            for _ in 0..64 {
                let Some(h) = cons.next_frame() else { break };
                engine.on_frame(fabric, *from, &h, cons.payload());
                cons.consume();
                did = true;
            }
            // Closed after its last frame: once that is read, the slot goes back to the pool.
            // The closed flag first: frames published before it are then surely visible.
            if ib.is_closed(*slot) && !cons.ready() {
                let slot = *slot;
                inbox_cons.swap_remove(i);
                ib.free(slot);
                continue;
            }
            i += 1;
        }
        did
    }

    /// Adopts new connections, then reads every TCP connection that has data.
    pub(super) fn progress_tcp(&mut self) -> bool {
        let State { engine, fabric, tcp_rx, tcp_lane0: lane0, tcp_ready: ready, tcp_watched: watched, .. } = self;
        let Some(t) = fabric.tcp.as_mut() else { return false };
        t.flush_unsent();
        t.adopt_incoming();
        let new = t.take_new_rx();
        if !new.is_empty() {
            if *watched {
                new.iter().for_each(|n| t.watch(&n.rx));
            }
            *lane0 += new.iter().filter(|n| !n.bulk).count();
            tcp_rx.extend(new.into_iter().map(|n| TcpIn { from: n.from, rx: n.rx, retired: false, bulk: n.bulk }));
        }
        // Many connections: one epoll call says which have data, instead of a read on each.
        let select = *lane0 > TCP_POLL_EACH_MAX;
        if select {
            set_watched(t, tcp_rx, watched, true);
        }
        let mut did = false;
        if select {
            t.ready_fds(ready);
        }
        let skip_bulk = !*watched && !engine.awaits_stream();
        let mut i = 0;
        while i < tcp_rx.len() {
            let TcpIn { from, rx, retired, bulk } = &mut tcp_rx[i];
            let (from, retired, bulk) = (*from, *retired, *bulk);
            let idle_bulk = bulk && skip_bulk && !retired;
            if !rx.has_buffered_frame() && ((select && !ready.contains(&(rx.raw_fd() as u64))) || idle_bulk) {
                i += 1;
                continue;
            }
            let r = rx.receive(&mut Deliver { engine, net: fabric, from });
            match r {
                Ok(got) if got.closed => {
                    // The peer is gone (after finalize, or it died: the launcher reports that;
                    // a process of another job that still had our address never disconnected).
                    if let Some(t) = fabric.tcp.as_mut() {
                        t.drop_rx(rx);
                        if t.end_is_loss(from) && !retired {
                            let who = t.describe(from);
                            t.peer_failed(from, format!("{who} closed its connection"));
                        }
                    }
                    tcp_rx.swap_remove(i);
                    *lane0 -= !bulk as usize;
                    continue;
                }
                Ok(got) => did |= got.delivered > 0,
                Err(e) => {
                    if let Some(t) = fabric.tcp.as_mut() {
                        let who = t.describe(from);
                        t.drop_rx(rx);
                        if !retired && (t.end_is_loss(from) || !t.is_foreign(from)) {
                            t.peer_failed(from, format!("the connection to {who} failed: {e}"));
                        }
                    }
                    tcp_rx.swap_remove(i);
                    *lane0 -= !bulk as usize;
                    continue;
                }
            }
            i += 1;
        }
        did
    }

    /// Before a thread sleeps: puts every receiving socket in the watched set and arms the
    /// watcher, so that data on any of them rings the doorbell. False without TCP.
    pub(super) fn arm_tcp(&mut self) -> bool {
        let Some(t) = self.fabric.tcp.as_ref() else { return false };
        set_watched(t, &self.tcp_rx, &mut self.tcp_watched, true);
        t.arm();
        true
    }

    /// After sleeping, when no thread sleeps any more (the caller checks, under the lock that
    /// [`arm_tcp`](Self::arm_tcp) takes too): a few sockets leave the watched set again.
    pub(super) fn unwatch_tcp(&mut self) {
        let Some(t) = self.fabric.tcp.as_ref() else { return };
        if self.tcp_lane0 <= TCP_POLL_EACH_MAX {
            set_watched(t, &self.tcp_rx, &mut self.tcp_watched, false);
        }
    }

    pub(super) fn frames_waiting(&self) -> bool {
        self.consumers.iter().any(|(_, c)| c.ready())
            || self.inbox_cons.iter().any(|(_, _, c)| c.ready())
            || self.inbox.as_ref().is_some_and(|ib| ib.generation() != self.inbox_gen)
            || !self.fabric.loopback.is_empty()
            || self.tcp_rx.iter().any(|c| c.rx.has_buffered_frame())
    }

    /// A transport failure that must end the job.
    pub(super) fn fatal(&self) -> Option<String> {
        self.fabric.tcp.as_ref().and_then(|t| t.fatal.clone())
    }
}
