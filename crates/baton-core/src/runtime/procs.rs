//! The process table: every process this one knows, by [`ProcIdx`].

use super::Mpi;
use crate::engine::ProcIdx;

/// A process of the job (or, later, of a connected job).
#[derive(Clone, Debug)]
pub struct Proc {
    pub job: u64,
    pub rank: u32,
    pub pid: i32,
    /// The host (node) it runs on: `BATON_NODE` from the launcher, else the host name.
    pub host: String,
}

/// The process table: entries never move, so a [`ProcIdx`] stays valid for the process's life.
#[derive(Default)]
pub struct ProcTable {
    pub list: Vec<Proc>,
    pub(super) by_id: std::collections::HashMap<(u64, u32), ProcIdx>,
}

impl ProcTable {
    pub(super) fn push(&mut self, p: Proc) -> ProcIdx {
        let i = self.list.len() as ProcIdx;
        self.by_id.insert((p.job, p.rank), i);
        self.list.push(p);
        i
    }

    /// Enters `p` in a released entry from `free` if there is one, else at the end.
    pub(super) fn insert(&mut self, p: Proc, free: &mut Vec<ProcIdx>) -> ProcIdx {
        match free.pop() {
            Some(i) => {
                self.by_id.insert((p.job, p.rank), i);
                self.list[i as usize] = p;
                i
            }
            None => self.push(p),
        }
    }
}

impl Mpi {
    /// A process's identity across jobs: (job id, rank in its job).
    pub fn proc_id(&self, p: ProcIdx) -> (u64, u32) {
        let t = self.procs.read().unwrap_or_else(|e| e.into_inner());
        let q = &t.list[p as usize];
        (q.job, q.rank)
    }

    /// The host (node) process `p` runs on.
    pub fn proc_host(&self, p: ProcIdx) -> String {
        let t = self.procs.read().unwrap_or_else(|e| e.into_inner());
        t.list[p as usize].host.clone()
    }

    /// The process table entry of the process `(job, rank)`, if this process knows it.
    pub fn proc_index(&self, job: u64, rank: u32) -> Option<ProcIdx> {
        self.procs.read().unwrap_or_else(|e| e.into_inner()).by_id.get(&(job, rank)).copied()
    }
}
