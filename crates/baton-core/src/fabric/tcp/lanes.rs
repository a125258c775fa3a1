//! Opening the lanes to a peer: [`TcpNet::open`] dials every lane not connected yet (through
//! `connect::Dial`, carried out by `handshake::dial`) and adopts the connections the peer
//! opened instead ([`TcpNet::adopt_incoming`]); each new connection gets its lane's congestion
//! control and is split into the sending half, kept here, and the receiving half, handed to
//! the runtime.

use super::connect::{start_dial, Dial, Link};
use super::{handshake, Congestion, NewRx, TcpNet};
use crate::engine::ProcIdx;
use baton_transport::stream;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl TcpNet {
    /// Takes connections that peers opened to us (the answering threads leave them here).
    pub fn adopt_incoming(&mut self) {
        if !self.sh.has_incoming.swap(false, Ordering::AcqRel) {
            return;
        }
        let list = std::mem::take(&mut *self.sh.incoming.lock().unwrap_or_else(|e| e.into_inner()));
        for (p, lane, s) in list {
            self.install(p, lane, s);
        }
    }

    fn install(&mut self, p: ProcIdx, lane: usize, s: TcpStream) {
        self.choose_congestion(&s, lane);
        match stream::split(s, self.cfg.max_payload()) {
            Ok((tx, rx)) => {
                let lanes = &mut self.tx[p as usize];
                if lanes.len() < self.cfg.lanes() {
                    lanes.resize_with(self.cfg.lanes(), || None);
                }
                lanes[lane] = Some(tx);
                self.new_rx.push(NewRx { from: p, rx, bulk: lane > 0 });
            }
            Err(e) => self.fail(format!("cannot set up the connection to {}: {e}", self.who(p))),
        }
    }

    /// Applies `BATON_TCP_CONGESTION` (lane 0) or `BATON_TCP_BULK_CONGESTION` to a new
    /// connection. Only an algorithm the user named and the kernel refused is worth a word;
    /// `unpaced` falls back quietly.
    fn choose_congestion(&mut self, s: &TcpStream, lane: usize) {
        let want = if lane == 0 { &self.cfg.congestion } else { &self.cfg.bulk_congestion };
        if *want == Congestion::System {
            // Nothing to change, so no getsockopt either.
            return;
        }
        let Ok(current) = stream::congestion(s) else { return };
        let mut refused = None;
        for name in want.candidates(&current) {
            match stream::set_congestion(s, name) {
                Ok(()) => return,
                Err(e) => refused = Some(format!("{name} ({e})")),
            }
        }
        if let (Congestion::Named(_), Some(why), false) = (want, refused, self.warned_congestion) {
            self.warned_congestion = true;
            let var = if lane == 0 { "BATON_TCP_CONGESTION" } else { "BATON_TCP_BULK_CONGESTION" };
            eprintln!("baton: {}: {var}: the kernel refused {why}; connections keep {current}", self.sh.whoami);
        }
    }

    /// Makes sure a connection to `p` (of another job, on another machine) exists, so that its
    /// end would be seen: a process that vanished without ever being connected to is found by
    /// the refusal, within `limit`. Returns whether `p` is reachable.
    pub fn probe(&mut self, p: ProcIdx, limit: Duration) -> bool {
        if self.is_lost(p) {
            return false;
        }
        if self.lanes_up(p) {
            return true;
        }
        let keep = self.cfg.connect_timeout;
        self.cfg.connect_timeout = limit;
        let ok = self.open(p);
        self.cfg.connect_timeout = keep;
        ok
    }

    /// Whether a connection to `p` was ever opened (by either side).
    pub fn was_connected(&self, p: ProcIdx) -> bool {
        let links = self.sh.links.lock().unwrap_or_else(|e| e.into_inner());
        let s = self.cfg.lanes();
        links.iter().skip(p as usize * s).take(s).any(|l| *l != Link::Down)
            || self.tx.get(p as usize).is_some_and(|l| l.iter().any(Option::is_some))
    }

    /// Connects every lane to `p` that is not connected yet. Blocks (this is the first message
    /// to `p`); false if it failed (then `fatal` says why).
    pub(super) fn open(&mut self, p: ProcIdx) -> bool {
        if self.fatal.is_some() {
            return false;
        }
        let Some(addr) = self.peers[p as usize].addr else {
            self.fail(format!("no transport reaches {} (it has no TCP address)", self.who(p)));
            return false;
        };
        let deadline = Instant::now() + self.cfg.connect_timeout;
        for lane in 0..self.cfg.lanes() {
            self.adopt_incoming();
            if self.tx[p as usize].get(lane).is_some_and(Option::is_some) {
                continue;
            }
            let slot = p as usize * self.cfg.lanes() + lane;
            let dial = start_dial(&mut self.sh.links.lock().unwrap_or_else(|e| e.into_inner())[slot]);
            if dial {
                let secret = self.peers[p as usize].dial_secret.clone().unwrap_or_else(|| self.secret.clone());
                let m = Dial::new((self.sh.job, self.sh.rank), lane as u32, secret, deadline);
                match handshake::dial(addr, m) {
                    Ok(Some(s)) => {
                        self.sh.links.lock().unwrap_or_else(|e| e.into_inner())[slot] = Link::Up;
                        self.install(p, lane, s);
                        continue;
                    }
                    // The peer's own connection wins; it is on its way to our answering threads.
                    Ok(None) => {}
                    Err(e) => {
                        self.sh.links.lock().unwrap_or_else(|e| e.into_inner())[slot] = Link::Down;
                        self.peer_failed(p, format!("cannot connect to {} at {addr}: {e}", self.who(p)));
                        return false;
                    }
                }
            }
            loop {
                self.adopt_incoming();
                if self.tx[p as usize].get(lane).is_some_and(Option::is_some) {
                    break;
                }
                if Instant::now() > deadline {
                    self.fail(format!("{} did not complete its connection to us", self.who(p)));
                    return false;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        true
    }
}
