//! Shared-memory collective areas: which communicator uses which area of the job's segment.

use super::Mpi;
use crate::comm::Comm;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Mpi {
    /// Gives intracommunicator `comm` a shared-memory collective area if all its members can
    /// share one (see [`crate::coll::shm`]): once per communicator, at its first blocking
    /// barrier, bcast, reduce, allreduce, allgather or alltoall, which every member calls at
    /// the same point. Nothing happens for a communicator that does not consist of this job's
    /// processes on one segment (the same at every member), or when no area is free at every
    /// member. A process with
    /// `multiple` (MPI_THREAD_MULTIPLE, which members may differ in) offers no free area but
    /// takes part in the exchange all the same: two of its threads could otherwise agree on
    /// the same area for two communicators at once.
    #[inline]
    pub fn attach_shm(&self, comm: &Comm, multiple: bool) {
        // Every later collective pays only this load.
        if !comm.shm_checked.load(Ordering::Acquire) && !comm.shm_checked.swap(true, Ordering::AcqRel) {
            self.attach_shm_now(comm, multiple);
        }
    }

    #[inline(never)]
    pub(super) fn attach_shm_now(&self, comm: &Comm, multiple: bool) {
        if comm.shm.get().is_some() {
            return;
        }
        let Some(world) = self.world.shm.get() else { return };
        let n = self.world.size();
        if comm.is_inter() || comm.size() < 2 || comm.group.procs.iter().any(|&p| p as i32 >= n) {
            return;
        }
        const AREAS: usize = crate::shm_coll::COLL_AREAS;
        let mine: Vec<u8> = {
            let areas = self.coll_areas.lock().unwrap_or_else(|e| e.into_inner());
            let free = if multiple {
                0
            } else {
                areas.iter().enumerate().filter(|(_, a)| !a.0).fold(0u64, |m, (i, _)| m | 1 << i)
            };
            std::iter::once(free).chain(areas.iter().map(|a| a.1)).flat_map(u64::to_le_bytes).collect()
        };
        let word =
            |b: &[u8], i: usize| b.get(8 * i..8 * i + 8).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap()));
        let all = self.allgather(comm, mine);
        let free = all.iter().fold(u64::MAX, |m, b| m & word(b, 0));
        let Some(area) = (1..AREAS).find(|&a| free & 1 << a != 0) else { return };
        let first = all.iter().map(|b| word(b, 1 + area)).max().unwrap_or(0) + 1;
        self.coll_areas.lock().unwrap_or_else(|e| e.into_inner())[area] = (true, first - 1);
        // Single-host jobs only (the world has an area): segment slot = world rank = process.
        let slots = comm.group.procs.iter().map(|&p| p as usize).collect();
        let sh = crate::shm_coll::ShmColl::new(world.segment().clone(), slots, comm.rank as usize, area, first);
        let _ = comm.shm.set(Arc::new(sh));
    }

    /// Gives `comm`'s area back (from `MPI_Comm_free`, collective): once every member says it
    /// is done with all collectives there; otherwise the area stays taken for good.
    pub fn detach_shm(&self, comm: &Comm) {
        let Some(sh) = comm.shm.get() else { return };
        if sh.area() == 0 {
            return;
        }
        let pending = !sh.idle()
            || self.colls.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| {
                let s = c.sched.lock().unwrap_or_else(|e| e.into_inner());
                std::ptr::eq(&*s.comm, comm)
            });
        let all = self.allgather(comm, vec![pending as u8]);
        if all.iter().all(|b| b.first() == Some(&0)) {
            self.coll_areas.lock().unwrap_or_else(|e| e.into_inner())[sh.area()] = (false, sh.last_seq());
        }
    }
}
