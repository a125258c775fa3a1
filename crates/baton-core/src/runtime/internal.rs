//! The library's own messages on a communicator's collective context: the few collectives that
//! communicator creation, dynamic processes and finalize need, written directly over the engine.

use super::poll::*;
use super::Mpi;
use crate::comm::Comm;
use crate::engine::{ProcIdx, ReqId, SendData, Sender, Sink};

impl Mpi {
    // ----- the library's own messages (collective context) -----

    /// Sends `data` on the collective context of `comm` (the runtime's own traffic).
    pub fn isend_internal(&self, comm: &Comm, dest: i32, tag: i32, data: Vec<u8>) -> ReqId {
        self.isend_ctx(comm.proc_of(dest), comm.coll_ctx(), comm.rank, tag, data)
    }

    /// Sends `data` to process `to` on context `ctx`, as rank `src` of it.
    pub fn isend_ctx(&self, to: ProcIdx, ctx: u64, src: i32, tag: i32, data: Vec<u8>) -> ReqId {
        let mut st = self.lock();
        let State { engine, fabric, .. } = &mut *st;
        engine.send(fabric, to, ctx, src, tag, SendData::Packed(data), false, Sender::GoesOn)
    }

    /// Receives a message of unknown length from `src` on the collective context.
    pub fn recv_internal(&self, comm: &Comm, src: i32, tag: i32) -> Vec<u8> {
        self.recv_ctx(comm.coll_ctx(), src, tag)
    }

    /// Receives a message of unknown length from rank `src` on context `ctx`.
    pub fn recv_ctx(&self, ctx: u64, src: i32, tag: i32) -> Vec<u8> {
        let len = self.block(|st| st.engine.probe(ctx, src, tag).map(|s| s.bytes as usize));
        let id = {
            let mut st = self.lock();
            let State { engine, fabric, .. } = &mut *st;
            engine.recv(fabric, ctx, src, tag, Sink::Owned(vec![0; len]))
        };
        self.wait(id).1.unwrap_or_default()
    }

    pub fn barrier(&self, comm: &Comm) {
        let n = comm.size();
        let r = comm.rank;
        let mut k = 1;
        while k < n {
            let s = self.isend_internal(comm, (r + k) % n, TAG_BARRIER, Vec::new());
            self.recv_internal(comm, (r - k + n) % n, TAG_BARRIER);
            self.wait(s);
            k *= 2;
        }
    }

    /// Every member's bytes, in rank order (ring algorithm: n-1 steps, one message each).
    pub fn allgather(&self, comm: &Comm, mine: Vec<u8>) -> Vec<Vec<u8>> {
        let n = comm.size();
        let r = comm.rank;
        let mut all = vec![Vec::new(); n as usize];
        all[r as usize] = mine;
        for step in 0..n - 1 {
            let send_idx = ((r - step) % n + n) % n;
            let recv_idx = ((r - step - 1) % n + n) % n;
            let s = self.isend_internal(comm, (r + 1) % n, TAG_ALLGATHER, all[send_idx as usize].clone());
            all[recv_idx as usize] = self.recv_internal(comm, (r - 1 + n) % n, TAG_ALLGATHER);
            self.wait(s);
        }
        all
    }

    /// `data` of rank `root` at every member (binomial tree; the others pass anything).
    pub fn bcast_internal(&self, comm: &Comm, root: i32, data: Vec<u8>) -> Vec<u8> {
        let n = comm.size();
        let vr = (comm.rank - root).rem_euclid(n);
        let real = |v: i32| (v + root) % n;
        let mut data = data;
        let mut mask = 1;
        while mask < n {
            if vr & mask != 0 {
                data = self.recv_internal(comm, real(vr - mask), TAG_BCAST);
                break;
            }
            mask <<= 1;
        }
        let mut sends = Vec::new();
        mask >>= 1;
        while mask > 0 {
            if vr + mask < n {
                sends.push(self.isend_internal(comm, real(vr + mask), TAG_BCAST, data.clone()));
            }
            mask >>= 1;
        }
        for s in sends {
            self.wait(s);
        }
        data
    }

    /// On an intercommunicator: `data` of the local leader (local rank 0) goes to the remote
    /// leader, and every member receives what the remote leader sent.
    pub fn leader_swap(&self, inter: &Comm, data: Vec<u8>) -> Vec<u8> {
        let local = inter.local.as_ref().expect("an intercommunicator");
        let theirs = if inter.rank == 0 {
            let s = self.isend_internal(inter, 0, TAG_SWAP, data);
            let got = self.recv_internal(inter, 0, TAG_SWAP);
            self.wait(s);
            got
        } else {
            Vec::new()
        };
        self.bcast_internal(local, 0, theirs)
    }
}

pub const TAG_BARRIER: i32 = 1;
pub const TAG_ALLGATHER: i32 = 2;
pub const TAG_BCAST: i32 = 3;
pub const TAG_SWAP: i32 = 4;
