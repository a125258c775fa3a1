//! `MPI_Comm_spawn` in a job run through proxies: mpiexec's side.
//!
//! A rank's request reaches its host's proxy, which relays it up the tree
//! as [`TreeMsg::SpawnRequest`]. mpiexec checks what can be checked
//! anywhere (counts, info keys, the hosts named), places the processes on
//! the job's hosts (free slots first, see [`hosts::place_free`]) and sends
//! each direct child whose subtree gets processes a [`JobSpec`] with them;
//! every proxy on the way keeps its share and passes the rest on. A host of
//! the host list that had no rank of the first job first gets a proxy, as a
//! direct child of mpiexec. Each proxy with processes looks up the working
//! directory and the program on its host, starts them under a bootstrap
//! server of its own (delegated fences, like the first job's) and answers
//! [`TreeMsg::JobStarted`]. Once every host has answered, the requesting
//! rank gets its answer through its proxy ([`TreeMsg::SpawnReply`]): the
//! new job, or the first error reported, after the parts that did start
//! have been killed. From then on the job is a [`SpawnedJob`] like any
//! other: a failure ends it alone, its ranks' exits arrive as `RankExited`,
//! and each host says `JobDone` once its share has exited and its output is
//! flushed.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use baton_pmi::tree::{JobSpec, SegmentSpec, SpawnSegment, TreeMsg};
use baton_pmi::wire::{self, KeyValue};
use baton_pmi::SpawnCmd;

use crate::children::{Fence, State};
use crate::hosts::{self, Mapping};
use crate::spawned::{check_request, parse_env, SpawnedJob, Starting, TreeJob};
use crate::{sys, Job, JobNo, Rank};

/// One command, checked as far as mpiexec can.
struct Planned {
    seg: SpawnSegment,
    /// The hosts the `host` info allows, in host-list order; `None`: all.
    hosts: Option<Vec<u32>>,
    mapping: Mapping,
}

/// The job's hosts, as the `host` info may name them.
struct HostNames<'a> {
    names: &'a [String],
    /// Whether each host is this machine.
    local: &'a [bool],
    /// Whether a name denotes this machine (`localhost`, its host name, an
    /// address of it).
    is_this_machine: &'a dyn Fn(&str) -> bool,
}

impl HostNames<'_> {
    /// The host a `host` info name means: one of the list by name
    /// (case-insensitive); else by first label (`n1` for `n1.cluster`:
    /// programs often pass what `MPI_Get_processor_name` gives); else, for
    /// a name of this machine, the first host of the list on this machine.
    fn find(&self, h: &str) -> Option<u32> {
        let label = |s: &str| {
            let is_addr = s.parse::<IpAddr>().is_ok() || s.starts_with('[');
            (!is_addr).then(|| s.split('.').next().unwrap_or_default().to_ascii_lowercase())
        };
        let exact = || self.names.iter().position(|n| n.eq_ignore_ascii_case(h));
        let short = || {
            let want = label(h)?;
            self.names.iter().position(|n| label(n).as_ref() == Some(&want))
        };
        let here = || (self.is_this_machine)(h).then(|| self.local.iter().position(|&l| l)).flatten();
        exact().or_else(short).or_else(here).map(|i| i as u32)
    }
}

/// `cannot spawn 'PROG' (command 2 of 3)`, the start of every message
/// about one command.
fn which(cmds: &[SpawnCmd], i: usize) -> String {
    let n = if cmds.len() > 1 { format!(" (command {} of {})", i + 1, cmds.len()) } else { String::new() };
    format!("cannot spawn '{}'{n}", cmds[i].program)
}

/// Checks every command of a request; nothing starts unless all pass.
fn plan(
    cmds: &[SpawnCmd],
    parent_port: &str,
    names: &HostNames,
    cwd: &Path,
    genv: &[(String, String)],
) -> Result<Vec<Planned>, String> {
    check_request(cmds, parent_port)?;
    let mut out = Vec::with_capacity(cmds.len());
    for (i, cmd) in cmds.iter().enumerate() {
        let planned = plan_one(cmd, names, cwd, genv).map_err(|why| format!("{}: {why}", which(cmds, i)))?;
        out.push(planned);
    }
    Ok(out)
}

fn plan_one(cmd: &SpawnCmd, names: &HostNames, cwd: &Path, genv: &[(String, String)]) -> Result<Planned, String> {
    if cmd.program.is_empty() {
        return Err("the program name is empty".into());
    }
    if cmd.program.contains('\0') || cmd.args.iter().any(|a| a.contains('\0')) {
        return Err("the program name or an argument contains a NUL byte".into());
    }
    let mut env = genv.to_vec();
    let (mut wdir, mut path, mut hosts, mut mapping) = (None, None, None, Mapping::Block);
    for (key, value) in &cmd.info {
        match key.as_str() {
            "wdir" => wdir = Some(value.as_str()),
            "path" => path = Some(value.clone()),
            "host" => hosts = Some(parse_hosts(value, names)?),
            "env" => env.extend(parse_env(value)?),
            "map_by" => mapping = parse_map_by(value)?,
            // "soft": a spawn starts all processes or none anyway. Anything
            // else may be ignored, as the standard allows.
            _ => {}
        }
    }
    let wdir = match wdir {
        Some(w) if !w.is_empty() => cwd.join(w),
        _ => cwd.to_path_buf(),
    };
    let segment = SegmentSpec {
        nprocs: cmd.maxprocs,
        program: cmd.program.clone(),
        args: cmd.args.clone(),
        env,
        wdir: wdir.as_os_str().as_bytes().to_vec(),
    };
    let seg = SpawnSegment { segment, path };
    Ok(Planned { seg, hosts, mapping })
}

/// The `host` info: hosts of the job's list, comma-separated.
fn parse_hosts(value: &str, hosts: &HostNames) -> Result<Vec<u32>, String> {
    let mut nodes = BTreeSet::new();
    for h in value.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        match hosts.find(h) {
            Some(i) => nodes.insert(i),
            None => {
                let names = hosts.names;
                let mut list = names.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
                if names.len() > 8 {
                    list.push_str(", ...");
                }
                return Err(format!("info host '{h}' is not one of the job's hosts ({list})"));
            }
        };
    }
    if nodes.is_empty() {
        return Err("info host names no host".into());
    }
    Ok(nodes.into_iter().collect())
}

fn parse_map_by(value: &str) -> Result<Mapping, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "slot" | "block" => Ok(Mapping::Block),
        "node" | "cyclic" => Ok(Mapping::Cyclic),
        _ => Err(format!("info map_by '{value}' is not one of block, slot, cyclic, node")),
    }
}

impl Job {
    /// Starts what a request relayed by the proxy of `origin` (its number
    /// `id`) from a rank of job `from` asks for; the answer comes when the
    /// hosts have started it. An error is the answer to send at once.
    pub(crate) fn tree_spawn_request(
        &mut self,
        origin: u32,
        id: u64,
        from: JobNo,
        cmds: &[SpawnCmd],
        parent_port: &str,
    ) -> Result<(), String> {
        let ending = self.failure.is_some() || (from != 0 && !matches!(self.spawned.get(&from), Some(j) if !j.failed));
        if ending {
            return Err("cannot spawn: the job of the calling process is being ended".into());
        }
        let t = self.tree.as_ref().expect("tree mode");
        let is_this_machine = |h: &str| {
            let addrs: Vec<IpAddr> = sys::host_addrs();
            sys::is_local_host(h, &sys::hostname(), &addrs)
        };
        let hosts = HostNames { names: &self.names, local: &t.local, is_this_machine: &is_this_machine };
        let planned = plan(cmds, parent_port, &hosts, &t.cwd, &t.template.genv)?;
        let placement = self.tree_place(cmds, &planned)?;
        let job_id = sys::random_job_id().map_err(|e| format!("cannot spawn: {e}"))?;
        let size = placement.len() as u32;
        let all_ranks: Vec<(u32, u32)> = placement.iter().enumerate().map(|(r, &n)| (r as u32, n)).collect();
        let cmds: Vec<SpawnSegment> = planned.into_iter().map(|p| p.seg).collect();
        let whole = JobSpec { job: 0, job_id, size, parent_port: parent_port.into(), cmds, ranks: all_ranks };
        // Checked before anything starts: a frame over the limit would break a link.
        if TreeMsg::JobLaunch(Box::new(whole.clone())).encode().len() > wire::MAX_FRAME_LEN {
            return Err("cannot spawn: the request is too large to pass on to the hosts".into());
        }

        let nodes: BTreeSet<u32> = placement.iter().copied().collect();
        for &n in &nodes {
            let name = self.names[n as usize].clone();
            self.tree().ensure_proxy(n, &name).map_err(|e| format!("cannot spawn: {e}"))?;
        }
        let t = self.tree();
        t.last_no += 1;
        let no = t.last_no;
        let mut members = Vec::new();
        for (idx, c) in t.children.iter_mut().enumerate() {
            let ranks: Vec<(u32, u32)> = whole.ranks.iter().copied().filter(|&(_, n)| c.covers(n)).collect();
            if ranks.is_empty() {
                continue;
            }
            let spec = JobSpec { job: no, ranks, ..whole.clone() };
            c.launches += 1;
            if c.state == State::Done {
                c.state = State::Up;
            }
            // A child whose link breaks now is reported lost, failing the start.
            c.send_or_queue(TreeMsg::JobLaunch(Box::new(spec)).encode());
            members.push(idx);
        }
        let ranks = placement
            .iter()
            .map(|&n| Rank { pid: 0, node: n as usize, connected: false, finalized: false, exited: false })
            .collect();
        let starting = Starting { origin, id, waiting: nodes.clone(), started: 0, error: None };
        let tree = TreeJob { job_id, size, starting: Some(starting), running: nodes, fence: Fence::new(members) };
        let job = SpawnedJob {
            ranks,
            server: None,
            failed: false,
            kill_at: None,
            output_done: false,
            drain_until: None,
            tree: Some(tree),
        };
        self.spawned.insert(no, job);
        Ok(())
    }

    /// The node of each process of the request: free slots (not taken by
    /// processes still running, of any job) first, then oversubscribed.
    fn tree_place(&self, cmds: &[SpawnCmd], planned: &[Planned]) -> Result<Vec<u32>, String> {
        let t = self.tree.as_ref().expect("tree mode");
        let mut used = vec![0u32; self.names.len()];
        let spawned = self.spawned.values().flat_map(|j| j.ranks.iter());
        for r in self.ranks.iter().chain(spawned).filter(|r| !r.exited) {
            used[r.node] += 1;
        }
        let mut out = Vec::new();
        for (i, p) in planned.iter().enumerate() {
            let candidates: Vec<u32> = match &p.hosts {
                Some(hosts) => {
                    if let Some(&gone) = hosts.iter().find(|n| t.lost.contains(n)) {
                        let name = &self.names[gone as usize];
                        return Err(format!(
                            "{}: host {name} is no longer part of the job (its proxy is gone)",
                            which(cmds, i)
                        ));
                    }
                    hosts.clone()
                }
                None => (0..self.names.len() as u32).filter(|n| !t.lost.contains(n)).collect(),
            };
            if candidates.is_empty() {
                return Err(format!("{}: every host of the job has been lost", which(cmds, i)));
            }
            let slots: Vec<u32> = candidates.iter().map(|&n| t.slots[n as usize]).collect();
            let taken: Vec<u32> = candidates.iter().map(|&n| used[n as usize]).collect();
            for k in hosts::place_free(p.seg.segment.nprocs, &slots, &taken, p.mapping) {
                let node = candidates[k];
                used[node as usize] += 1;
                out.push(node);
            }
        }
        Ok(out)
    }

    /// The proxy of `node` started its share of job `no`, or could not.
    pub(crate) fn tree_job_started(&mut self, no: JobNo, node: u32, error: Option<String>) {
        let Some(job) = self.spawned.get_mut(&no) else { return };
        let Some(tj) = job.tree.as_mut() else { return };
        let Some(st) = tj.starting.as_mut() else { return };
        if !st.waiting.remove(&node) {
            return;
        }
        match error {
            None => st.started += 1,
            Some(e) => {
                st.error.get_or_insert(e);
                tj.running.remove(&node);
                // Nothing of the job is left there.
                for r in job.ranks.iter_mut().filter(|r| r.node == node as usize) {
                    r.exited = true;
                }
            }
        }
        self.tree_job_progress(no);
    }

    /// The share of job `no` on `node` has exited and its output is flushed.
    pub(crate) fn tree_job_done(&mut self, no: JobNo, node: u32) {
        if let Some(tj) = self.spawned.get_mut(&no).and_then(|j| j.tree.as_mut()) {
            tj.running.remove(&node);
        }
        self.tree_job_progress(no);
    }

    /// Answers the request once every host has, and notes when every
    /// host's share is over.
    fn tree_job_progress(&mut self, no: JobNo) {
        let Some(job) = self.spawned.get_mut(&no) else { return };
        let Some(tj) = job.tree.as_mut() else { return };
        let mut reply = None;
        if tj.starting.as_ref().is_some_and(|s| s.waiting.is_empty()) {
            let st = tj.starting.take().expect("checked above");
            let result = match st.error {
                None => Ok((tj.job_id, tj.size)),
                Some(e) => {
                    // Its ranks' deaths are the consequence, not news.
                    job.failed = true;
                    let killed =
                        if st.started > 0 { " (the processes started on other hosts were killed)" } else { "" };
                    Err(format!("{e}{killed}"))
                }
            };
            reply = Some((st.origin, st.id, result));
        }
        if tj.starting.is_none() && tj.running.is_empty() {
            job.output_done = true;
        }
        if let Some((origin, id, result)) = reply {
            if result.is_err() {
                self.signal_spawned(no, libc::SIGKILL, true);
            }
            self.tree().route(origin, &TreeMsg::SpawnReply { node: origin, id, result });
        }
    }

    pub(crate) fn tree_spawned_rank_exited(
        &mut self,
        no: JobNo,
        rank: u32,
        pid: i32,
        status: i32,
        connected: bool,
        finalized: bool,
    ) {
        let Some(r) = self.spawned.get_mut(&no).and_then(|j| j.ranks.get_mut(rank as usize)) else { return };
        r.pid = pid;
        r.connected = connected;
        r.finalized = finalized;
        self.spawned_rank_exited(no, rank as usize, status);
    }

    /// A `FenceUp` of spawned job `no` from the direct child of `node`.
    pub(crate) fn tree_spawned_fence(&mut self, no: JobNo, node: u32, epoch: u64, kvs: Vec<KeyValue>) {
        let name = &self.names[node as usize];
        let (Some(tj), Some(t)) = (self.spawned.get_mut(&no).and_then(|j| j.tree.as_mut()), self.tree.as_ref()) else {
            return;
        };
        match tj.fence.arrive(no, epoch, kvs, name) {
            Ok(None) => {}
            Ok(Some(payload)) => tj.fence.complete(&t.children, &payload),
            Err((_, msg)) => self.fail_spawned(no, &msg),
        }
    }

    /// `nodes` are lost: the ranks of job `no` still running there are
    /// marked exited and returned; a start waiting for them fails with
    /// `spawn_error` instead.
    pub(crate) fn spawned_lose_nodes(&mut self, no: JobNo, nodes: &[u32], spawn_error: &str) -> Vec<u32> {
        let Some(job) = self.spawned.get_mut(&no) else { return Vec::new() };
        let Some(tj) = job.tree.as_mut() else { return Vec::new() };
        let mut lost = Vec::new();
        for &n in nodes {
            let mut starting_here = false;
            if let Some(st) = tj.starting.as_mut() {
                if st.waiting.remove(&n) {
                    st.error.get_or_insert_with(|| spawn_error.to_owned());
                    starting_here = true;
                }
            }
            tj.running.remove(&n);
            for (i, r) in job.ranks.iter_mut().enumerate() {
                if r.node == n as usize && !r.exited {
                    r.exited = true;
                    if !starting_here {
                        lost.push(i as u32);
                    }
                }
            }
        }
        self.tree_job_progress(no);
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(info: &[(&str, &str)]) -> SpawnCmd {
        SpawnCmd {
            program: "prog".into(),
            args: vec![],
            maxprocs: 2,
            info: info.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        }
    }

    fn names() -> Vec<String> {
        ["a", "b", "Node-C"].iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn host_info_names() {
        let names: Vec<String> = ["10.0.0.1", "n1.cluster", "127.0.0.2", "n2"].iter().map(|s| (*s).into()).collect();
        let local = [false, false, true, false];
        let me = |h: &str| h == "login" || h == "localhost";
        let hosts = HostNames { names: &names, local: &local, is_this_machine: &me };
        assert_eq!(hosts.find("N1.Cluster"), Some(1));
        assert_eq!(hosts.find("n1"), Some(1), "first label");
        assert_eq!(hosts.find("n2.cluster"), Some(3), "first label the other way");
        assert_eq!(hosts.find("10.0.0.1"), Some(0));
        assert_eq!(hosts.find("10.0.0.2"), None, "addresses are not cut into labels");
        assert_eq!(hosts.find("login"), Some(2), "this machine: its first host in the list");
        assert_eq!(hosts.find("n3"), None);
        let none_local = [false; 4];
        let hosts = HostNames { names: &names, local: &none_local, is_this_machine: &me };
        assert_eq!(hosts.find("localhost"), None);
    }

    #[test]
    fn info_keys_are_checked_before_anything_starts() {
        let cwd = Path::new("/work");
        let genv = [("G".to_owned(), "1".to_owned())];
        let names = names();
        let nowhere = |_: &str| false;
        let hosts = HostNames { names: &names, local: &[false; 3], is_this_machine: &nowhere };
        let plan = |cmds: &[SpawnCmd], port: &str| plan(cmds, port, &hosts, cwd, &genv);
        let plan1 = |info: &[(&str, &str)]| plan(&[cmd(info)], "port");
        let p = plan1(&[("host", "node-c, a"), ("map_by", "Node"), ("wdir", "sub"), ("env", "X=2")]).unwrap();
        assert_eq!(p[0].hosts, Some(vec![0, 2]), "host-list order, names case-insensitive");
        assert_eq!(p[0].mapping, Mapping::Cyclic);
        assert_eq!(p[0].seg.segment.wdir, b"/work/sub");
        assert_eq!(p[0].seg.segment.env, [("G".to_owned(), "1".to_owned()), ("X".to_owned(), "2".to_owned())]);
        let p = plan1(&[("wdir", "/abs"), ("path", "bin"), ("soft", "1:2"), ("other", "x")]).unwrap();
        assert_eq!((p[0].hosts.clone(), p[0].mapping), (None, Mapping::Block));
        assert_eq!((p[0].seg.segment.wdir.as_slice(), p[0].seg.path.as_deref()), (&b"/abs"[..], Some("bin")));
        let e = plan1(&[("host", "a,elsewhere")]).err().unwrap();
        assert_eq!(e, "cannot spawn 'prog': info host 'elsewhere' is not one of the job's hosts (a, b, Node-C)");
        let e = plan(&[cmd(&[]), cmd(&[("map_by", "diagonal")])], "p").err().unwrap();
        assert_eq!(
            e,
            "cannot spawn 'prog' (command 2 of 2): info map_by 'diagonal' is not one of block, slot, cyclic, node"
        );
        assert!(plan1(&[("host", " , ")]).is_err());
        assert!(plan1(&[("env", "NOEQUALS")]).err().unwrap().ends_with("info env line 'NOEQUALS' is not NAME=VALUE"));
        let mut none = cmd(&[]);
        none.maxprocs = 0;
        assert!(plan(&[none], "p").is_err());
    }
}
