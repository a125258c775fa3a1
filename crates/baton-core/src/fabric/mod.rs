//! The engine's view of the transports: endpoints per process, opened on first use.
//!
//! A process is reached through the loopback queue (itself), a shared-memory ring (another
//! process of the job on this host, or a leased ring of its inbox for a process of another job
//! on this machine, see `baton_transport::inbox`) or TCP ([`tcp`]: another host, or any peer under
//! `BATON_TRANSPORTS=tcp`). The fabric chooses per peer, applies that transport's eager
//! threshold and knows whether single-copy reads of that peer work (detected at the first
//! attempt).

pub mod tcp;

use crate::engine::{Net, ProcIdx, Sender};
use baton_transport::cma;
use baton_transport::coop::CoopSlot;
use baton_transport::frame::Header;
use baton_transport::inbox::Inbox;
use baton_transport::mem::UserBuf;
use baton_transport::shm::{Consumer, Producer, Segment};
use std::collections::VecDeque;
use std::sync::Arc;
use tcp::TcpNet;

/// Settings read once from the environment (documented in the README).
#[derive(Clone, Copy, Debug)]
pub struct FabricConfig {
    /// `BATON_SHM_EAGER_MAX`: largest message sent eagerly through the rings (by default
    /// 16 KiB).
    pub eager_max: usize,
    /// The same for a sender that waits ([`Sender::Waits`]) to a process whose memory the
    /// receiver may read (by default 8 KiB; `BATON_SHM_EAGER_MAX` when set).
    pub eager_max_waiting: usize,
    /// `BATON_SHM_RING_SIZE`: bytes of each per-pair ring (a power of two); by default
    /// [`FabricConfig::ring_size_for`] of the host's rank count, for the job segment, and
    /// 128 KiB for inboxes.
    pub ring_size: usize,
    /// Whether `BATON_SHM_RING_SIZE` was set.
    pub ring_size_set: bool,
    /// `BATON_CMA`: allow single-copy reads (`process_vm_readv`).
    pub cma: bool,
    /// `BATON_COOP_MIN`: smallest rendezvous message whose copy the sender shares
    /// (`baton_transport::coop`); `off` never.
    pub coop_min: usize,
}

impl FabricConfig {
    pub fn from_env() -> FabricConfig {
        let ring_size_set = baton_settings::SHM_RING_SIZE.value().is_some();
        let ring_size = baton_settings::SHM_RING_SIZE.value().unwrap_or(128 * 1024).next_power_of_two().max(8192);
        // Above 8 KiB a single-copy rendezvous beats the eager path's two copies when the
        // sender waits (16 KiB ping-pong: 2.35 against 3.25 µs); a sender that goes on keeps
        // eager copies overlapping (16 KiB `bw` 1.15 against 1.99 µs per message, a 4-rank
        // allreduce of 64 KiB 0.75 of the time). Without single copies, rendezvous is a ring copy
        // plus a handshake, and eager wins either way.
        let eager_max = baton_settings::SHM_EAGER_MAX.value().unwrap_or(16 * 1024);
        let eager_max_waiting = baton_settings::SHM_EAGER_MAX.value().unwrap_or(8 * 1024);
        let cma = baton_settings::CMA.get();
        // `off` reads as usize::MAX: no message is that large.
        let coop_min = baton_settings::COOP_MIN.get();
        FabricConfig { eager_max, eager_max_waiting, ring_size, ring_size_set, cma, coop_min }
    }

    /// Largest message sent eagerly through a ring by `sender` to a process whose memory the
    /// receiver may (`cma_ok`) or may not read.
    #[inline]
    pub fn shm_eager_limit(&self, cma_ok: bool, sender: Sender) -> usize {
        if cma_ok && sender == Sender::Waits {
            self.eager_max_waiting
        } else {
            self.eager_max
        }
    }

    /// The default ring of a job segment shared by `local` processes: 32 MiB of rings in all,
    /// between 128 KiB and 1 MiB each. Large rings matter to messages streamed through them
    /// (non-contiguous data): a sender packing into lines the receiver has just read pays a
    /// cross-core transfer for each, which a ring four times the frame size keeps it doing.
    /// Measured, 1 MiB arrays of 15-byte structs with 2 ranks: 150–180 µs one way with 128 KiB
    /// rings, 100–115 µs with 512 KiB, 60–62 µs with 1 MiB (contiguous: 70 µs).
    pub fn ring_size_for(&self, local: usize) -> usize {
        if self.ring_size_set {
            return self.ring_size;
        }
        let share = ((32usize << 20) / local.max(1).pow(2)).max(1);
        (1usize << share.ilog2()).clamp(128 << 10, 1 << 20)
    }
}

enum Endpoint {
    Unopened,
    Loopback,
    /// A ring of the job segment, or one leased in the peer's inbox (`lease`).
    Shm {
        prod: Producer,
        cma_ok: bool,
        lease: Option<(Arc<Inbox>, usize)>,
    },
    Tcp,
    /// A process of another job that is gone: what it is sent goes nowhere.
    Dead,
}

pub struct Fabric {
    me: ProcIdx,
    cfg: FabricConfig,
    seg: Option<Arc<Segment>>,
    /// Per process: its slot in the segment (None: not on this host's segment) and its pid.
    shm_slot: Vec<Option<usize>>,
    pids: Vec<i32>,
    eps: Vec<Endpoint>,
    /// Frames sent to ourselves, in order.
    pub loopback: VecDeque<(Header, Vec<u8>)>,
    /// Connections to other hosts, when this process listens for them.
    pub tcp: Option<TcpNet>,
    /// Per process of another job on this machine: its identity and inbox descriptor.
    inbox_of: Vec<Option<((u64, u32), i32)>>,
    /// Per process of another job: whether it runs on this machine (its pid means something).
    near: Vec<bool>,
    /// Processes of other jobs by (job, rank), for reading their leases in our inbox.
    pub foreign_ids: std::collections::HashMap<(u64, u32), ProcIdx>,
    /// (job, rank) of this process.
    pub me_id: (u64, u32),
}

impl Fabric {
    pub fn new(me: ProcIdx, cfg: FabricConfig, seg: Option<Arc<Segment>>) -> Fabric {
        Fabric {
            me,
            cfg,
            seg,
            shm_slot: Vec::new(),
            pids: Vec::new(),
            eps: Vec::new(),
            loopback: VecDeque::new(),
            tcp: None,
            inbox_of: Vec::new(),
            near: Vec::new(),
            foreign_ids: std::collections::HashMap::new(),
            me_id: (0, me),
        }
    }

    /// Records process `p` of another job: `inbox` is its inbox descriptor when it runs on
    /// this machine (then its frames go through a ring leased there).
    pub fn add_foreign(&mut self, p: ProcIdx, id: (u64, u32), pid: i32, near: bool, inbox: Option<i32>) {
        self.add_proc(p, pid, None);
        let i = p as usize;
        if self.inbox_of.len() <= i {
            self.inbox_of.resize(i + 1, None);
            self.near.resize(i + 1, false);
        }
        self.inbox_of[i] = inbox.filter(|_| near).map(|fd| (id, fd));
        self.near[i] = near;
        self.eps[i] = Endpoint::Unopened;
        self.foreign_ids.insert(id, p);
    }

    /// `p` (of another job) is gone: frames to it are dropped from now on.
    pub fn mark_dead(&mut self, p: ProcIdx) {
        if let Some(ep) = self.eps.get_mut(p as usize) {
            *ep = Endpoint::Dead;
        }
    }

    /// Whether `p` runs on this machine as a process of another job (its pid means something).
    pub fn is_near_foreign(&self, p: ProcIdx) -> bool {
        self.near.get(p as usize).copied().unwrap_or(false)
    }

    pub fn pid(&self, p: ProcIdx) -> i32 {
        self.pids.get(p as usize).copied().unwrap_or(0)
    }

    /// Ends the use of `p` (after `MPI_Comm_disconnect`): a leased ring is handed back once
    /// its owner has read it.
    pub fn release(&mut self, p: ProcIdx) {
        let i = p as usize;
        if let Some(Endpoint::Shm { lease: Some((ib, slot)), .. }) = self.eps.get(i) {
            ib.close(*slot);
        }
        if let Some(ep) = self.eps.get_mut(i) {
            *ep = Endpoint::Unopened;
        }
        if let Some(x) = self.inbox_of.get_mut(i) {
            *x = None;
        }
    }

    /// Records how to reach process `p`.
    pub fn add_proc(&mut self, p: ProcIdx, pid: i32, shm_slot: Option<usize>) {
        let i = p as usize;
        if self.eps.len() <= i {
            self.eps.resize_with(i + 1, || Endpoint::Unopened);
            self.shm_slot.resize(i + 1, None);
            self.pids.resize(i + 1, 0);
        }
        self.pids[i] = pid;
        self.shm_slot[i] = shm_slot;
    }

    /// Receiving ends of the rings from every other process on this segment.
    pub fn consumers(&self) -> Vec<(ProcIdx, Consumer)> {
        let Some(seg) = &self.seg else { return Vec::new() };
        let Some(me) = self.shm_slot.get(self.me as usize).copied().flatten() else { return Vec::new() };
        (0..self.shm_slot.len())
            .filter_map(|p| {
                self.shm_slot[p].filter(|_| p as ProcIdx != self.me).map(|s| (p as ProcIdx, Consumer::new(seg, s, me)))
            })
            .collect()
    }

    pub fn me(&self) -> ProcIdx {
        self.me
    }

    pub fn segment(&self) -> Option<&Arc<Segment>> {
        self.seg.as_ref()
    }

    fn my_slot(&self) -> Option<usize> {
        self.shm_slot.get(self.me as usize).copied().flatten()
    }

    #[inline]
    fn endpoint(&mut self, to: ProcIdx) -> &mut Endpoint {
        let i = to as usize;
        if matches!(self.eps[i], Endpoint::Unopened) {
            self.open(to);
        }
        &mut self.eps[i]
    }

    /// Opens the endpoint to `to` on first use.
    #[cold]
    fn open(&mut self, to: ProcIdx) {
        let i = to as usize;
        self.eps[i] = if to == self.me {
            Endpoint::Loopback
        } else {
            match (&self.seg, self.my_slot(), self.shm_slot[i]) {
                (Some(seg), Some(me), Some(peer)) => {
                    Endpoint::Shm { prod: Producer::new(seg, me, peer), cma_ok: self.cfg.cma, lease: None }
                }
                _ if self.inbox_of.get(i).is_some_and(Option::is_some) => self.lease(to),
                // Whether TCP reaches it was checked at start-up; a failure to connect is
                // reported through `TcpNet::fatal`.
                _ => Endpoint::Tcp,
            }
        };
    }
}

/// Pushes a frame into a peer's ring and wakes the peer if it sleeps; false if the ring is full.
#[inline]
fn push_shm(prod: &mut Producer, h: &Header, payload: &[u8]) -> bool {
    let ok = prod.try_push_with(h, payload.len(), |b| b.copy_from_slice(payload));
    if ok {
        prod.ring_doorbell();
    }
    ok
}

impl Net for Fabric {
    fn try_send(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        match self.endpoint(to) {
            Endpoint::Loopback => {
                self.loopback.push_back((*h, payload.to_vec()));
                true
            }
            Endpoint::Shm { prod, .. } => push_shm(prod, h, payload),
            Endpoint::Tcp => self.tcp.as_mut().is_some_and(|t| t.try_send(to, h, payload)),
            Endpoint::Dead => true,
            Endpoint::Unopened => unreachable!(),
        }
    }

    #[inline]
    fn try_send_eager(&mut self, to: ProcIdx, h: &Header, payload: &[u8], sender: Sender) -> bool {
        // Shared memory pushes from this one match: going through `eager_limit`, `max_frame`
        // and `try_send` (three endpoint lookups) cost 55 instructions per send (callgrind).
        // A copy (a few words): the endpoint below borrows `self`.
        let cfg = self.cfg;
        match self.endpoint(to) {
            Endpoint::Shm { prod, cma_ok, .. } => {
                let limit = cfg.shm_eager_limit(*cma_ok, sender);
                payload.len() <= limit.min(prod.ring_size() / 4) && push_shm(prod, h, payload)
            }
            ep => {
                // A sender that goes on may send more at once: TCP may let this frame wait to
                // leave with the next ones.
                let more = sender == Sender::GoesOn && matches!(ep, Endpoint::Tcp);
                payload.len() <= self.eager_limit(to, sender).min(self.max_frame(to))
                    && match self.tcp.as_mut() {
                        Some(t) if more => t.try_send_more(to, h, payload),
                        _ => self.try_send(to, h, payload),
                    }
            }
        }
    }

    fn try_send_with(&mut self, to: ProcIdx, h: &Header, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        match self.endpoint(to) {
            Endpoint::Loopback => {
                let mut v = vec![0u8; len];
                fill(&mut v);
                self.loopback.push_back((*h, v));
                true
            }
            Endpoint::Shm { prod, .. } => {
                let ok = prod.try_push_with(h, len, fill);
                if ok {
                    prod.ring_doorbell();
                }
                ok
            }
            Endpoint::Tcp => {
                let mut v = vec![0u8; len];
                fill(&mut v);
                self.tcp.as_mut().is_some_and(|t| t.try_send(to, h, &v))
            }
            Endpoint::Dead => true,
            Endpoint::Unopened => unreachable!(),
        }
    }

    fn fills_in_place(&self, to: ProcIdx) -> bool {
        !self.on_tcp(to)
    }

    fn send_data(&mut self, to: ProcIdx, h: &Header, window: &[u8], at: usize) -> usize {
        match self.endpoint(to) {
            // A byte stream: the frame may leave in pieces, over a bulk lane the connection
            // chooses (`TcpNet::send_data`).
            Endpoint::Tcp => self.tcp.as_mut().map_or(0, |t| t.send_data(to, h, window, at)),
            Endpoint::Dead => window.len() - at,
            _ => {
                if at == 0 && self.try_send(to, h, window) {
                    window.len()
                } else {
                    0
                }
            }
        }
    }

    fn max_frame(&self, to: ProcIdx) -> usize {
        if to == self.me {
            usize::MAX
        } else if self.on_tcp(to) {
            self.tcp.as_ref().map_or(0, |t| t.config().chunk)
        } else {
            // A ring leased in another job's inbox may differ in size from the segment's.
            match self.eps.get(to as usize) {
                Some(Endpoint::Shm { prod, .. }) => prod.ring_size() / 4,
                _ => self.cfg.ring_size / 4,
            }
        }
    }

    fn eager_limit(&self, to: ProcIdx, sender: Sender) -> usize {
        if to == self.me {
            usize::MAX
        } else if self.on_tcp(to) {
            self.tcp.as_ref().map_or(0, |t| t.config().eager_max)
        } else {
            let cma_ok = match self.eps.get(to as usize) {
                Some(Endpoint::Shm { cma_ok, .. }) => *cma_ok,
                _ => self.cfg.cma,
            };
            self.cfg.shm_eager_limit(cma_ok, sender)
        }
    }

    fn read_remote(&mut self, from: ProcIdx, addr: u64, dst: &UserBuf) -> bool {
        let pid = self.pids[from as usize];
        self.read_with(from, |cma_pid| cma::read(cma_pid, addr as usize, dst).is_ok(), pid)
    }

    fn read_remote_into(&mut self, from: ProcIdx, addr: u64, dst: &mut [u8]) -> bool {
        let pid = self.pids[from as usize];
        self.read_with(from, |cma_pid| cma::read_into(cma_pid, addr as usize, dst).is_ok(), pid)
    }

    fn write_remote(&mut self, to: ProcIdx, addr: u64, src: &[u8]) -> bool {
        let pid = self.pids[to as usize];
        // Writing needs the same permission as reading (ptrace's attach check).
        self.read_with(to, |cma_pid| cma::write(cma_pid, addr as usize, src).is_ok(), pid)
    }

    fn wake_peer(&mut self, to: ProcIdx) {
        if let Endpoint::Shm { prod, .. } = self.endpoint(to) {
            prod.ring_doorbell();
        }
    }

    fn reads_sender(&self, peer: ProcIdx) -> bool {
        // A contiguous send offers its address; whether the receiver's reads work is known
        // here as this side's own (the same ptrace check applies both ways).
        matches!(self.eps.get(peer as usize), Some(Endpoint::Shm { cma_ok: true, lease: None, .. }))
    }

    fn peer_waits(&mut self, peer: ProcIdx) -> bool {
        let (Some(seg), Some(Some(slot))) = (self.seg.as_ref(), self.shm_slot.get(peer as usize)) else {
            return false;
        };
        seg.ctl(*slot).waiting.load(std::sync::atomic::Ordering::Relaxed) != 0
    }

    fn coop_slot(&mut self, peer: ProcIdx, sending: bool) -> Option<&CoopSlot> {
        // Only rings of this job's segment have a slot (a ring leased in another job's inbox
        // does not). Whether single copies work is not asked here: a copy under way must keep
        // its slot when a read or write fails (and turns `cma_ok` off), so that the failure is
        // reported through it and the other side finishes the chunks instead of waiting.
        if !matches!(self.endpoint(peer), Endpoint::Shm { lease: None, .. }) {
            return None;
        }
        let (me, them) = (self.my_slot()?, self.shm_slot[peer as usize]?);
        let seg = self.seg.as_ref()?;
        Some(if sending { seg.coop_slot(me, them) } else { seg.coop_slot(them, me) })
    }

    fn coop_min(&self) -> usize {
        self.cfg.coop_min
    }
}

impl Fabric {
    /// Leases a ring in `to`'s inbox; TCP if that fails (another pid namespace, no slot free).
    fn lease(&mut self, to: ProcIdx) -> Endpoint {
        let i = to as usize;
        let Some(((job, rank), fd)) = self.inbox_of[i] else { return Endpoint::Tcp };
        let claimed = Inbox::attach(self.pids[i], fd, job, rank)
            .ok()
            .map(Arc::new)
            .and_then(|ib| ib.claim(self.me_id.0, self.me_id.1).map(|(slot, prod)| (ib, slot, prod)));
        match claimed {
            Some((ib, slot, prod)) => Endpoint::Shm { prod, cma_ok: self.cfg.cma, lease: Some((ib, slot)) },
            None => {
                self.inbox_of[i] = None;
                Endpoint::Tcp
            }
        }
    }

    /// Whether `to` is reached over TCP (decided by the process table, before any connection).
    fn on_tcp(&self, to: ProcIdx) -> bool {
        let i = to as usize;
        match self.eps.get(i) {
            Some(Endpoint::Tcp) => true,
            Some(Endpoint::Shm { .. }) | Some(Endpoint::Loopback) => false,
            _ => {
                self.inbox_of.get(i).is_none_or(Option::is_none)
                    && self.shm_slot.get(i).is_none_or(|s| s.is_none() || self.seg.is_none())
            }
        }
    }

    /// Frames accepted but not yet handed to the kernel (a socket was full).
    pub fn busy(&mut self) -> bool {
        self.tcp.as_mut().is_some_and(|t| t.flush())
    }

    fn read_with(&mut self, from: ProcIdx, read: impl FnOnce(i32) -> bool, pid: i32) -> bool {
        match self.endpoint(from) {
            Endpoint::Shm { cma_ok, .. } if *cma_ok => {
                if read(pid) {
                    true
                } else {
                    // Forbidden here (ptrace policy, seccomp): stream through the ring from now on.
                    *cma_ok = false;
                    false
                }
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(set: Option<usize>) -> FabricConfig {
        FabricConfig {
            eager_max: 16 * 1024,
            eager_max_waiting: 8 * 1024,
            ring_size: set.unwrap_or(128 * 1024),
            ring_size_set: set.is_some(),
            cma: true,
            coop_min: 256 * 1024,
        }
    }

    #[test]
    fn only_a_waiting_sender_with_single_copies_gets_the_lower_eager_limit() {
        let c = cfg(None);
        assert_eq!(c.shm_eager_limit(true, Sender::Waits), 8 * 1024);
        assert_eq!(c.shm_eager_limit(true, Sender::GoesOn), 16 * 1024);
        // Without single copies a rendezvous streams through the ring: eager wins either way.
        assert_eq!(c.shm_eager_limit(false, Sender::Waits), 16 * 1024);
        assert_eq!(c.shm_eager_limit(false, Sender::GoesOn), 16 * 1024);
    }

    #[test]
    fn rings_share_32_mib_between_128_kib_and_1_mib() {
        let c = cfg(None);
        let sizes: Vec<usize> = [1, 2, 4, 6, 8, 11, 16, 64].iter().map(|&n| c.ring_size_for(n)).collect();
        let k = 1024;
        assert_eq!(sizes, [1024 * k, 1024 * k, 1024 * k, 512 * k, 512 * k, 256 * k, 128 * k, 128 * k]);
        assert!(sizes.iter().all(|s| s.is_power_of_two()));
    }

    #[test]
    fn an_explicit_ring_size_wins() {
        assert_eq!(cfg(Some(8192)).ring_size_for(2), 8192);
        assert_eq!(cfg(Some(4 << 20)).ring_size_for(64), 4 << 20);
    }
}
