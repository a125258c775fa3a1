//! The sending side of [`TcpNet`]: whole frames on lane 0, streamed data round robin on the
//! bulk lanes, bursts of small frames coalesced ([`TcpNet::try_send_more`]), and the progress
//! pass that pushes on what the kernel did not take ([`TcpNet::flush_unsent`]).
//!
//! This is the per-frame path: no lock, no call through a trait object, and no allocation but
//! the amortized growth of the unsent queues; connecting (`open`, `lanes.rs`) happens once per
//! peer.

use super::TcpNet;
use crate::engine::ProcIdx;
use baton_transport::frame::Header;
use baton_transport::stream::Tx;
use std::time::{Duration, Instant};

/// Queued frames ([`TcpNet::try_send_more`]) leave once they reach this many bytes, without
/// waiting for the next progress pass.
pub(super) const COALESCE_BATCH: usize = 64 * 1024;
/// A frame joins a burst ([`TcpNet::try_send_more`]) when the previous one to its peer was
/// sent less than this long before: a loop of `MPI_Isend`s calls again almost at once, and a
/// sender that computes between its sends has each leave at once.
pub(super) const COALESCE_GAP: Duration = Duration::from_micros(5);

impl TcpNet {
    /// Pushes on the frames the kernel took only part of and those queued in a burst
    /// ([`try_send_more`](Self::try_send_more)), and starts a new progress pass; returns
    /// whether any is still unsent. Costs nothing while there are none.
    pub fn flush_unsent(&mut self) -> bool {
        self.pass += 1;
        let mut i = 0;
        while i < self.unsent.len() {
            let (p, lane) = self.unsent[i];
            let r = match self.tx.get_mut(p as usize).and_then(|l| l.get_mut(lane)).and_then(Option::as_mut) {
                Some(tx) => tx.flush(),
                None => Ok(true),
            };
            match r {
                Ok(false) => i += 1,
                Ok(true) => {
                    self.unsent.swap_remove(i);
                }
                Err(e) => {
                    self.unsent.swap_remove(i);
                    self.peer_failed(p, format!("lost the connection to {}: {e}", self.who(p)));
                }
            }
        }
        !self.unsent.is_empty()
    }

    /// Writes what earlier frames left behind; true when some connection is still busy.
    pub fn flush(&mut self) -> bool {
        // Every tail a connection holds is listed in `unsent` (only `send_frame` and `start_data`
        // leave one); what else keeps a connection busy is a streamed frame's rest.
        let unsent = self.flush_unsent();
        unsent || self.tx.iter().flatten().flatten().any(Tx::busy)
    }

    #[inline]
    pub(super) fn lanes_up(&self, p: ProcIdx) -> bool {
        let l = &self.tx[p as usize];
        l.len() == self.cfg.lanes() && l.iter().all(Option::is_some)
    }

    /// The sending half of lane `lane` to `to`, connecting every lane first if need be; `None`
    /// if `to` is lost or cannot be reached.
    pub(super) fn lane(&mut self, to: ProcIdx, lane: usize) -> Option<&mut Tx> {
        if self.is_lost(to) {
            return None;
        }
        if !self.lanes_up(to) && !self.open(to) {
            return None;
        }
        self.tx[to as usize][lane].as_mut()
    }

    #[inline]
    pub fn try_send(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        self.send_frame(to, h, payload, false)
    }

    /// Sends an eager frame of a sender that goes on (`MPI_Isend`), which may send more at
    /// once. A frame (up to `BATON_TCP_COALESCE` bytes) that follows another one to the same
    /// peer within `COALESCE_GAP` and with no progress pass between them is queued; the queue
    /// leaves in one `sendmsg` at the next pass (any MPI call that waits, tests or probes),
    /// with the next frame that is not queued, or on reaching `COALESCE_BATCH` bytes.
    ///
    /// A system call per small frame is what small messages cost over TCP: it carries the
    /// frame through the whole stack, and across a veth pair or loopback through the
    /// receiver's too, so a burst that leaves in one call costs a fraction of its frames sent
    /// one by one (docs/PERFORMANCE.md, TCP). What this delays: the frames queued in a burst
    /// whose sender then computes without calling MPI leave when it next calls MPI (which is
    /// all that MPI promises); the first frame of every burst leaves at once.
    pub fn try_send_more(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        let queue = self.cfg.coalesce > 0
            && payload.len() <= self.cfg.coalesce
            && self.peers.get(to as usize).is_some_and(|p| {
                p.wrote_in == self.pass && p.wrote_at.is_some_and(|t| t.elapsed() < self.coalesce_gap)
            });
        let sent = self.send_frame(to, h, payload, queue);
        if sent && self.cfg.coalesce > 0 {
            if let Some(p) = self.peers.get_mut(to as usize) {
                p.wrote_in = self.pass;
                p.wrote_at = Some(Instant::now());
            }
        }
        sent
    }

    #[inline]
    fn send_frame(&mut self, to: ProcIdx, h: &Header, payload: &[u8], queue: bool) -> bool {
        // Lane 0 carries every frame but streamed data, which keeps messages in order.
        if self.is_lost(to) {
            // Gone with its job: what it was sent goes nowhere (the application is told).
            return true;
        }
        let Some(tx) = self.lane(to, 0) else { return false };
        if queue && tx.unsent_len() + payload.len() < COALESCE_BATCH {
            let listed = tx.has_out();
            if tx.append(h, payload) {
                if !listed {
                    self.unsent.push((to, 0));
                }
                return true;
            }
        }
        match tx.try_send(h, payload) {
            Ok(ok) => {
                if ok && tx.has_out() {
                    self.unsent.push((to, 0));
                }
                ok
            }
            Err(e) => {
                self.peer_failed(to, format!("lost the connection to {}: {e}", self.who(to)));
                false
            }
        }
    }

    /// Pushes streamed data frame `h` (payload `window`, of which `at` bytes left before) on a
    /// bulk lane; returns the payload bytes taken now. A frame the kernel took only part of
    /// keeps its lane, recorded in `streaming`, and continues there when the engine offers its
    /// rest: the frame's header and offset (`h.id`, `h.aux`) name it.
    pub fn send_data(&mut self, to: ProcIdx, h: &Header, window: &[u8], at: usize) -> usize {
        if self.is_lost(to) {
            self.streaming.retain(|m| m.0 != to);
            return window.len() - at;
        }
        let key = (to, h.id, h.aux);
        if let Some(i) = self.streaming.iter().position(|m| (m.0, m.1, m.2) == key) {
            let lane = self.streaming[i].3;
            let Some(tx) = self.tx[to as usize].get_mut(lane).and_then(Option::as_mut) else { return 0 };
            return match tx.continue_frame(&window[at..]) {
                Ok(n) => {
                    if at + n == window.len() {
                        self.streaming.swap_remove(i);
                    }
                    n
                }
                Err(e) => {
                    self.peer_failed(to, format!("lost the connection to {}: {e}", self.who(to)));
                    0
                }
            };
        }
        debug_assert_eq!(at, 0, "the rest of a frame no lane carries");
        match self.start_data(to, h, window) {
            Some((lane, took)) => {
                if took < window.len() {
                    self.streaming.push((to, h.id, h.aux, lane));
                }
                took
            }
            None => 0,
        }
    }

    /// Starts data frame `h` on the next bulk lane that takes it: that lane and the payload
    /// bytes taken, `None` if none took it.
    pub(super) fn start_data(&mut self, to: ProcIdx, h: &Header, window: &[u8]) -> Option<(usize, usize)> {
        let (first, n) = self.cfg.bulk_lanes();
        self.lane(to, 0)?;
        for i in 0..n {
            let k = (self.next_lane + i) % n;
            let lane = first + k;
            let tx = self.tx[to as usize][lane].as_mut()?;
            match tx.start_frame(h, window) {
                Ok(Some(took)) => {
                    if tx.has_out() {
                        self.unsent.push((to, lane));
                    }
                    self.next_lane = (k + 1) % n;
                    return Some((lane, took));
                }
                Ok(None) => {}
                Err(e) => {
                    self.peer_failed(to, format!("lost the connection to {}: {e}", self.who(to)));
                    return None;
                }
            }
        }
        None
    }
}
