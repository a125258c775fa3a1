//! A proxy's side of `MPI_Comm_spawn`: relaying its ranks' requests up the
//! tree and the answers back to them, and starting this host's share of a
//! spawned job when a [`JobSpec`] comes down.
//!
//! The proxy passes the spec on to the children whose subtrees have ranks
//! of the job (queued for a child still connecting), then looks up each of
//! its own commands' working directory and program on this host, and
//! starts its ranks under a bootstrap server of their own (delegated
//! fences, as for the first job; the same rank key as every job of this
//! mpiexec) with a memfd of their own. It answers `JobStarted` either way:
//! a share that cannot start leaves nothing behind, and mpiexec decides
//! what happens to the rest of the job. Once the local ranks have exited
//! and their output is flushed it says `JobDone`; it forgets the job once
//! the hosts below have said so too.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use baton_pmi::server::{PmiServer, ServerConfig};
use baton_pmi::tree::{JobSpec, TreeMsg};
use baton_pmi::wire;
use baton_pmi::SpawnCmd;

use crate::children::State;
use crate::comm_spawn::{resolve_program, DEFAULT_PATH};
use crate::proxy::{forward_output, LocalRank, Part, Proxy};
use crate::{ranks, sys, Event, JobNo};

/// A share of a spawned job that runs.
struct Share {
    server: PmiServer,
    /// `(rank, pid)` of each local rank.
    pids: Vec<(u32, i32)>,
    /// Whether an output thread will report `OutputDone`.
    output_pending: bool,
}

/// The command index of `rank` in a job of `nprocs` per command.
fn command_of(nprocs: impl Iterator<Item = u32>, rank: u32) -> Option<usize> {
    let mut first = 0u64;
    for (i, n) in nprocs.enumerate() {
        first += u64::from(n);
        if u64::from(rank) < first {
            return Some(i);
        }
    }
    None
}

impl Proxy {
    /// Rank `rank` of job `no` asks for a new job: mpiexec decides.
    pub(crate) fn relay_spawn(&mut self, no: JobNo, rank: u32, cmds: Vec<SpawnCmd>, parent_port: String) {
        let id = self.next_request;
        self.next_request += 1;
        let msg = TreeMsg::SpawnRequest { node: self.me, id, job: no, cmds, parent_port };
        let payload = msg.encode();
        if payload.len() > wire::MAX_FRAME_LEN {
            // Sending it would break the link to mpiexec.
            if let Some(server) = self.parts.get(&no).and_then(|p| p.server.as_ref()) {
                server.answer(rank, Err("cannot spawn: the request is too large to pass on to mpiexec".into()));
            }
            return;
        }
        self.requests.insert(id, (no, rank));
        self.parent.send_payload(&payload);
    }

    /// mpiexec's answer to request `id` of the proxy of `node`.
    pub(crate) fn spawn_reply(&mut self, node: u32, id: u64, result: Result<(u64, u32), String>) {
        if node != self.me {
            if let Some(l) = self.children.iter().find(|c| c.covers(node)).and_then(|c| c.link.as_ref()) {
                l.send(&TreeMsg::SpawnReply { node, id, result });
            }
            return;
        }
        let Some((no, rank)) = self.requests.remove(&id) else { return };
        // No server: the rank's share is over, and nobody waits any more.
        if let Some(server) = self.parts.get(&no).and_then(|p| p.server.as_ref()) {
            server.answer(rank, result);
        }
    }

    /// A spawned job with ranks in this subtree.
    pub(crate) fn job_launch(&mut self, spec: JobSpec) {
        self.launches += 1;
        self.done_sent = false;
        let no = spec.job;
        if no == 0 || self.parts.contains_key(&no) {
            let msg = format!("host {}: ignored a second description of job {no}", self.name);
            self.parent.send(&TreeMsg::Log { msg });
            return;
        }
        let total: u64 = spec.cmds.iter().map(|c| u64::from(c.segment.nprocs)).sum();
        let me = self.me;
        let known = |n: u32| n == me || self.children.iter().any(|c| c.covers(n));
        if total != u64::from(spec.size) || spec.ranks.iter().any(|&(r, n)| r >= spec.size || !known(n)) {
            let nodes: BTreeSet<u32> = spec.ranks.iter().map(|&(_, n)| n).collect();
            let error = format!("cannot spawn: host {} received an inconsistent job description", self.name);
            for node in nodes {
                self.parent.send(&TreeMsg::JobStarted { job: no, node, error: Some(error.clone()) });
            }
            return;
        }

        let (mut fence_children, mut below, mut unreachable) = (Vec::new(), BTreeSet::new(), Vec::new());
        for c in &mut self.children {
            let ranks: Vec<(u32, u32)> = spec.ranks.iter().copied().filter(|&(_, n)| c.covers(n)).collect();
            if ranks.is_empty() {
                continue;
            }
            let nodes: Vec<u32> = ranks.iter().map(|&(_, n)| n).collect();
            let share = JobSpec { ranks, ..spec.clone() };
            c.launches += 1;
            if c.state == State::Done {
                c.state = State::Up;
            }
            if c.send_or_queue(TreeMsg::JobLaunch(Box::new(share)).encode()) {
                fence_children.push(c.node);
                below.extend(nodes);
            } else {
                unreachable.extend(nodes);
            }
        }
        unreachable.sort_unstable();
        unreachable.dedup();
        for node in unreachable {
            let error = format!("cannot spawn: host {} is no longer part of the job", self.host(node));
            self.parent.send(&TreeMsg::JobStarted { job: no, node, error: Some(error) });
        }

        let mut mine: Vec<u32> = spec.ranks.iter().filter(|&&(_, n)| n == me).map(|&(r, _)| r).collect();
        mine.sort_unstable();
        let mut part = Part::new(!mine.is_empty(), fence_children);
        part.below = below;
        if !mine.is_empty() {
            let error = match self.start_share(&spec, &mine) {
                Ok(share) => {
                    part.server = Some(share.server);
                    for (rank, pid) in share.pids {
                        self.by_pid.insert(pid, (no, part.ranks.len()));
                        part.ranks.push(LocalRank { rank, pid, connected: false, finalized: false, exited: false });
                    }
                    part.output_done = !share.output_pending;
                    None
                }
                Err(e) => {
                    // Nothing of it runs here; no JobDone will follow.
                    part.local = false;
                    Some(e)
                }
            };
            self.parent.send(&TreeMsg::JobStarted { job: no, node: me, error });
        }
        self.parts.insert(no, part);
        self.part_progress(no);
    }

    /// Checks and starts the ranks `mine` of `spec` on this host.
    fn start_share(&mut self, spec: &JobSpec, mine: &[u32]) -> Result<Share, String> {
        let no = spec.job;
        let appnums: Vec<usize> = mine
            .iter()
            .map(|&r| command_of(spec.cmds.iter().map(|c| c.segment.nprocs), r).expect("checked against the job size"))
            .collect();
        let base_path = self.base_env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone());
        let mut resolved: HashMap<usize, (PathBuf, PathBuf)> = HashMap::new();
        for &i in &appnums {
            if resolved.contains_key(&i) {
                continue;
            }
            let cmd = &spec.cmds[i];
            let which = if spec.cmds.len() > 1 {
                format!(" (command {} of {})", i + 1, spec.cmds.len())
            } else {
                String::new()
            };
            let fail =
                |why: String| format!("cannot spawn '{}'{which} on host {}: {why}", cmd.segment.program, self.name);
            let wdir = PathBuf::from(OsString::from_vec(cmd.segment.wdir.clone()));
            if !wdir.is_dir() {
                return Err(fail(format!("working directory '{}' is not a directory", wdir.display())));
            }
            let env_path = cmd.segment.env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| OsString::from(v));
            let env_path = env_path.or_else(|| base_path.clone()).unwrap_or_else(|| DEFAULT_PATH.into());
            let program = resolve_program(&cmd.segment.program, &wdir, cmd.path.as_deref(), &env_path).map_err(fail)?;
            resolved.insert(i, (program, wdir));
        }

        let name = self.name.clone();
        let pmi_tx = self.tx.clone();
        let cfg = ServerConfig {
            local_ranks: Some(mine.to_vec()),
            delegate_fence: true,
            ..ServerConfig::whole_job(spec.size, spec.job_id, self.rank_secret.clone())
        };
        let server = PmiServer::start(cfg, move |e| {
            let _ = pmi_tx.send(Event::Pmi(no, e));
        })
        .map_err(|e| format!("cannot spawn: cannot open a bootstrap socket on host {name}: {e}"))?;
        let memfd = sys::create_job_memfd(spec.job_id)
            .map_err(|e| format!("cannot spawn: cannot create the job's shared-memory fd on host {name}: {e}"))?;
        let specs: Vec<ranks::RankSpec> = mine
            .iter()
            .zip(&appnums)
            .enumerate()
            .map(|(local_rank, (&rank, &i))| {
                let (program, wdir) = &resolved[&i];
                let cmd = &spec.cmds[i];
                ranks::RankSpec {
                    rank,
                    appnum: i as u32,
                    local_rank: local_rank as u32,
                    program: program.clone().into_os_string(),
                    arg0: Some(cmd.segment.program.clone()),
                    args: cmd.segment.args.clone(),
                    env: cmd.segment.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                    wdir: Some(wdir.clone()),
                }
            })
            .collect();
        let host_env = ranks::HostEnv {
            clear_env: true,
            base_env: self.base_env.clone(),
            pmi_addr: server.addr().to_string(),
            secret_hex: self.rank_secret.to_hex(),
            job_id: spec.job_id,
            size: spec.size,
            universe_size: self.spec.universe_size,
            local_size: mine.len() as u32,
            node: name.clone(),
            tag_output: self.spec.tag_output,
            stdin_for_rank0: false,
            where_: format!(" on host {name}"),
            parent_port: Some(spec.parent_port.clone()),
            // Spawned processes are left to the kernel.
            binding: crate::binding::Binding::NONE,
        };
        // From the main thread, which lives as long as the proxy: the
        // parent-death signal follows the forking thread.
        let started = ranks::start(&specs, &host_env, &memfd);
        // The processes hold the memfd now.
        drop(memfd);
        let ranks::Spawned { pids, sources, error, .. } = started;
        // Their exits are reaped and ignored: the pids are not recorded.
        let kill_started = || pids.iter().for_each(|&(_, pid)| sys::kill_group(pid, libc::SIGKILL));
        if let Some((_, msg, _)) = error {
            kill_started();
            return Err(format!("cannot spawn: {msg}"));
        }
        let output_pending = !sources.is_empty();
        if output_pending {
            if let Err(e) = forward_output(sources, no, self) {
                kill_started();
                return Err(format!("cannot spawn: cannot start an output thread on host {name}: {e}"));
            }
        }
        Ok(Share { server, pids, output_pending })
    }

    /// The share of job `no` on `node` (below this host) is over.
    pub(crate) fn share_below_over(&mut self, no: JobNo, node: u32) {
        if let Some(p) = self.parts.get_mut(&no) {
            p.below.remove(&node);
        }
        self.part_progress(no);
    }

    /// Reports the end of the local share of a spawned job, and forgets the
    /// job when nothing of it is left in this subtree.
    pub(crate) fn part_progress(&mut self, no: JobNo) {
        if no == 0 {
            return;
        }
        let Some(p) = self.parts.get_mut(&no) else { return };
        if p.ranks.iter().all(|r| r.exited) {
            p.server = None;
        }
        if p.local && !p.reported && p.idle() {
            self.parent.send(&TreeMsg::JobDone { job: no, node: self.me });
            p.reported = true;
        }
        if (!p.local || p.reported) && p.below.is_empty() {
            self.parts.remove(&no);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::command_of;

    #[test]
    fn ranks_map_to_commands_in_order() {
        let n = [2u32, 0, 3];
        let got: Vec<Option<usize>> = (0..6).map(|r| command_of(n.iter().copied(), r)).collect();
        assert_eq!(got, [Some(0), Some(0), Some(2), Some(2), Some(2), None]);
    }
}
