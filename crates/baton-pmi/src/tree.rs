//! Messages between `mpiexec` and its per-host proxies (multi-host jobs).
//!
//! mpiexec and the proxies form a tree of authenticated TCP connections
//! (the same HMAC handshake as [`crate::auth`], with the job's launcher
//! secret). Every connection carries frames of [`crate::wire`]; the payload
//! is a [`TreeMsg`], encoded in the same style as [`crate::wire::Msg`] and
//! decoded just as strictly: lengths and counts are checked against the
//! bytes present before anything is allocated, booleans must be 0 or 1,
//! strings UTF-8, and trailing bytes are an error.
//!
//! [`LaunchSpec`] is what a proxy needs to start its share of the job; it
//! travels in [`TreeMsg::Launch`], never on a command line. Jobs started
//! later by `MPI_Comm_spawn` travel as [`JobSpec`]s in [`TreeMsg::JobLaunch`];
//! messages about a job's ranks carry its number (`job`: 0 for the job of
//! the command line, then 1, 2, ... as mpiexec numbers the spawned ones).

use crate::error::PmiError;
use crate::wire::{
    get_kvs, get_spawn_cmds, put_bytes, put_kvs, put_list, put_spawn_cmds, put_u32, Cursor, KeyValue, SpawnCmd,
};

const TAG_PROXY_HELLO: u8 = 0x41;
const TAG_LAUNCH: u8 = 0x42;
const TAG_PING: u8 = 0x43;
const TAG_FENCE_UP: u8 = 0x44;
const TAG_FENCE_DOWN: u8 = 0x45;
const TAG_SIGNAL: u8 = 0x46;
const TAG_STDIN: u8 = 0x47;
const TAG_OUTPUT: u8 = 0x48;
const TAG_RANK_EXITED: u8 = 0x49;
const TAG_SPAWN_FAILED: u8 = 0x4a;
const TAG_ABORT: u8 = 0x4b;
const TAG_LOG: u8 = 0x4c;
const TAG_NODE_FAILED: u8 = 0x4d;
const TAG_DONE: u8 = 0x4e;
const TAG_SPAWN_REQUEST: u8 = 0x4f;
const TAG_SPAWN_REPLY: u8 = 0x50;
const TAG_JOB_LAUNCH: u8 = 0x51;
const TAG_JOB_STARTED: u8 = 0x52;
const TAG_JOB_DONE: u8 = 0x53;
const TAG_OUTPUT_ACK: u8 = 0x54;

/// One MPMD segment as a proxy needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSpec {
    pub nprocs: u32,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Working directory of the segment's ranks (mpiexec's own by default).
    pub wdir: Vec<u8>,
}

/// Everything a proxy learns from its parent before it starts anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchSpec {
    pub job_id: u64,
    pub size: u32,
    pub universe_size: u32,
    pub heartbeat_ms: u32,
    pub fanout: u32,
    pub tag_output: bool,
    /// Whether rank 0's stdin is fed from mpiexec (else /dev/null).
    pub forward_stdin: bool,
    /// `--bind-to`: `none`, `core` or `socket`; each host binds its ranks itself.
    pub bind_to: String,
    /// Cores per rank when bound (`-c`).
    pub cpus_per_rank: u32,
    /// `--report-bindings`: each host logs one line per rank.
    pub report_bindings: bool,
    /// Interface whose addresses a proxy offers its children (empty: all).
    pub iface: String,
    /// Remote shell command and its leading arguments.
    pub rsh: Vec<String>,
    /// Absolute path of the `mpiexec` binary on the other hosts.
    pub proxy_path: String,
    /// `(node, host name)`: the receiving proxy first, then its subtree.
    pub nodes: Vec<(u32, String)>,
    /// `(rank, node)` for every rank placed in that subtree.
    pub ranks: Vec<(u32, u32)>,
    pub segments: Vec<SegmentSpec>,
    pub genv: Vec<(String, String)>,
    /// mpiexec's environment, as raw bytes (it need not be UTF-8).
    pub base_env: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One command of a spawned job, checked by mpiexec as far as that can be
/// done anywhere; the working directory and the program are looked up on
/// the hosts that run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnSegment {
    /// The command: its program as the user wrote it (a path relative to `wdir`, or a name to
    /// search), its environment (`-genv`/`-x` and the `env` info, later entries winning) and
    /// its absolute working directory.
    pub segment: SegmentSpec,
    /// The `path` info: directories searched before `PATH`.
    pub path: Option<String>,
}

/// A job started by `MPI_Comm_spawn`, as the proxies of its hosts (and
/// those in between) need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// mpiexec's number for the job (never 0).
    pub job: u32,
    pub job_id: u64,
    pub size: u32,
    /// `BATON_PARENT_PORT` of its processes.
    pub parent_port: String,
    pub cmds: Vec<SpawnSegment>,
    /// `(rank, node)` for every rank placed in the receiver's subtree.
    pub ranks: Vec<(u32, u32)>,
}

/// The messages of the launcher tree. "Up" messages travel towards
/// mpiexec, "down" messages away from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeMsg {
    /// Up, first frame after authentication: which host's proxy this is.
    ProxyHello { node: u32 },
    /// Down, answer to `ProxyHello`.
    Launch(Box<LaunchSpec>),
    /// Both ways, to prove the peer is alive when nothing else flows.
    Ping,
    /// Up: every rank of job `job` in the sender's subtree entered fence
    /// `epoch`; their puts.
    FenceUp { job: u32, epoch: u64, kvs: Vec<KeyValue> },
    /// Down: fence `epoch` of job `job` is complete; all its puts for it.
    FenceDown { job: u32, epoch: u64, kvs: Vec<KeyValue> },
    /// Down: send `sig` to the ranks still running (to every rank's process
    /// group, to catch leftovers, with `all`) of job `job`, or of every job.
    Signal { job: Option<u32>, sig: i32, all: bool },
    /// Down, routed to `node`: bytes for rank 0's stdin; empty means EOF.
    Stdin { node: u32, data: Vec<u8> },
    /// Up from the proxy of `node`: whole lines of rank output, already
    /// tagged when `-l` is on. A proxy keeps at most a window of these bytes
    /// unacknowledged, so a slow reader of mpiexec's output stops the ranks
    /// that write rather than filling mpiexec's memory.
    Output { node: u32, stderr: bool, data: Vec<u8> },
    /// Up: a rank of job `job` ended; `status` is the raw wait status.
    RankExited { job: u32, rank: u32, pid: i32, status: i32, connected: bool, finalized: bool },
    /// Up: `rank` could not be started, nor the ranks in `not_started`.
    SpawnFailed { rank: u32, status: i32, msg: String, not_started: Vec<u32> },
    /// Up: a rank of job `job` called abort.
    Abort { job: u32, rank: u32, code: i32, msg: String },
    /// Up: a line for mpiexec's stderr (already says which host).
    Log { msg: String },
    /// Up: the proxy of `node` could not start or was lost; its whole
    /// subtree is gone.
    NodeFailed { node: u32, status: i32, msg: String },
    /// Up: nothing runs in the sender's subtree any more (all ranks of
    /// every job reaped, output flushed) after the `launches` `JobLaunch`es
    /// it has been sent; a `Done` overtaken by a later launch is stale. The
    /// proxy exits when its parent then closes the link.
    Done { launches: u32 },
    /// Up from the proxy of `node`: a rank of its job `job` called
    /// `MPI_Comm_spawn`; the proxy's own request number `id` comes back in
    /// the `SpawnReply`.
    SpawnRequest { node: u32, id: u64, job: u32, cmds: Vec<SpawnCmd>, parent_port: String },
    /// Down, routed to `node`: the answer to its request `id`.
    SpawnReply { node: u32, id: u64, result: Result<(u64, u32), String> },
    /// Down: start a spawned job's ranks in the receiver's subtree.
    JobLaunch(Box<JobSpec>),
    /// Up from the proxy of `node`: its part of job `job` runs, or could
    /// not be started (nothing of it is left there then).
    JobStarted { job: u32, node: u32, error: Option<String> },
    /// Up from the proxy of `node`: its ranks of job `job` have all exited
    /// and their output is flushed.
    JobDone { job: u32, node: u32 },
    /// Down, routed to `node`: mpiexec has written `bytes` more bytes of its
    /// output.
    OutputAck { node: u32, bytes: u64 },
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

fn put_pairs(out: &mut Vec<u8>, pairs: &[(String, String)]) {
    put_list(out, pairs, |out, (k, v)| {
        put_str(out, k);
        put_str(out, v);
    });
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    put_bool(out, s.is_some());
    if let Some(s) = s {
        put_str(out, s);
    }
}

fn put_strings(out: &mut Vec<u8>, v: &[String]) {
    put_list(out, v, |out, s| put_str(out, s));
}

fn get_opt_str(r: &mut Cursor) -> Result<Option<String>, PmiError> {
    Ok(if get_bool(r)? { Some(r.string()?) } else { None })
}

fn put_pairs_u32(out: &mut Vec<u8>, pairs: &[(u32, u32)]) {
    put_list(out, pairs, |out, &(a, b)| {
        put_u32(out, a);
        put_u32(out, b);
    });
}

fn get_pairs_u32(r: &mut Cursor) -> Result<Vec<(u32, u32)>, PmiError> {
    r.list(8, |r| Ok((r.u32()?, r.u32()?)))
}

fn get_bool(r: &mut Cursor) -> Result<bool, PmiError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(PmiError::protocol(format!("invalid boolean byte {b}"))),
    }
}

fn get_i32(r: &mut Cursor) -> Result<i32, PmiError> {
    Ok(r.u32()? as i32)
}

fn get_pairs(r: &mut Cursor) -> Result<Vec<(String, String)>, PmiError> {
    r.list(8, |r| Ok((r.string()?, r.string()?)))
}

fn get_strings(r: &mut Cursor) -> Result<Vec<String>, PmiError> {
    r.list(4, Cursor::string)
}

fn get_u32s(r: &mut Cursor) -> Result<Vec<u32>, PmiError> {
    r.list(4, Cursor::u32)
}

impl LaunchSpec {
    fn encode_into(&self, out: &mut Vec<u8>) {
        put_u64(out, self.job_id);
        put_u32(out, self.size);
        put_u32(out, self.universe_size);
        put_u32(out, self.heartbeat_ms);
        put_u32(out, self.fanout);
        put_bool(out, self.tag_output);
        put_bool(out, self.forward_stdin);
        put_str(out, &self.bind_to);
        put_u32(out, self.cpus_per_rank);
        put_bool(out, self.report_bindings);
        put_str(out, &self.iface);
        put_strings(out, &self.rsh);
        put_str(out, &self.proxy_path);
        put_list(out, &self.nodes, |out, (node, name)| {
            put_u32(out, *node);
            put_str(out, name);
        });
        put_pairs_u32(out, &self.ranks);
        put_list(out, &self.segments, |out, s| s.encode_into(out));
        put_pairs(out, &self.genv);
        put_list(out, &self.base_env, |out, (k, v)| {
            put_bytes(out, k);
            put_bytes(out, v);
        });
    }

    fn decode_from(r: &mut Cursor) -> Result<LaunchSpec, PmiError> {
        let job_id = r.u64()?;
        let size = r.u32()?;
        let universe_size = r.u32()?;
        let heartbeat_ms = r.u32()?;
        let fanout = r.u32()?;
        let tag_output = get_bool(r)?;
        let forward_stdin = get_bool(r)?;
        let bind_to = r.string()?;
        let cpus_per_rank = r.u32()?;
        let report_bindings = get_bool(r)?;
        let iface = r.string()?;
        let rsh = get_strings(r)?;
        let proxy_path = r.string()?;
        let nodes = r.list(8, |r| Ok((r.u32()?, r.string()?)))?;
        let ranks = get_pairs_u32(r)?;
        let segments = r.list(20, SegmentSpec::decode_from)?;
        let genv = get_pairs(r)?;
        let base_env = r.list(8, |r| Ok((r.bytes()?.to_vec(), r.bytes()?.to_vec())))?;
        Ok(LaunchSpec {
            job_id,
            size,
            universe_size,
            heartbeat_ms,
            fanout,
            tag_output,
            forward_stdin,
            bind_to,
            cpus_per_rank,
            report_bindings,
            iface,
            rsh,
            proxy_path,
            nodes,
            ranks,
            segments,
            genv,
            base_env,
        })
    }
}

impl SegmentSpec {
    fn encode_into(&self, out: &mut Vec<u8>) {
        put_u32(out, self.nprocs);
        put_str(out, &self.program);
        put_strings(out, &self.args);
        put_pairs(out, &self.env);
        put_bytes(out, &self.wdir);
    }

    fn decode_from(r: &mut Cursor) -> Result<SegmentSpec, PmiError> {
        Ok(SegmentSpec {
            nprocs: r.u32()?,
            program: r.string()?,
            args: get_strings(r)?,
            env: get_pairs(r)?,
            wdir: r.bytes()?.to_vec(),
        })
    }
}

impl JobSpec {
    fn encode_into(&self, out: &mut Vec<u8>) {
        put_u32(out, self.job);
        put_u64(out, self.job_id);
        put_u32(out, self.size);
        put_str(out, &self.parent_port);
        put_list(out, &self.cmds, |out, c| {
            c.segment.encode_into(out);
            put_opt_str(out, c.path.as_deref());
        });
        put_pairs_u32(out, &self.ranks);
    }

    fn decode_from(r: &mut Cursor) -> Result<JobSpec, PmiError> {
        let job = r.u32()?;
        let job_id = r.u64()?;
        let size = r.u32()?;
        let parent_port = r.string()?;
        // nprocs, four lengths or counts, and the option flag.
        let cmds = r.list(21, |r| Ok(SpawnSegment { segment: SegmentSpec::decode_from(r)?, path: get_opt_str(r)? }))?;
        let ranks = get_pairs_u32(r)?;
        Ok(JobSpec { job, job_id, size, parent_port, cmds, ranks })
    }
}

impl TreeMsg {
    /// Serializes the message into a frame payload (without length prefix).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            TreeMsg::ProxyHello { node } => {
                out.push(TAG_PROXY_HELLO);
                put_u32(&mut out, *node);
            }
            TreeMsg::Launch(spec) => {
                out.push(TAG_LAUNCH);
                spec.encode_into(&mut out);
            }
            TreeMsg::Ping => out.push(TAG_PING),
            TreeMsg::FenceUp { job, epoch, kvs } | TreeMsg::FenceDown { job, epoch, kvs } => {
                out.push(if matches!(self, TreeMsg::FenceUp { .. }) { TAG_FENCE_UP } else { TAG_FENCE_DOWN });
                put_u32(&mut out, *job);
                put_u64(&mut out, *epoch);
                put_kvs(&mut out, kvs);
            }
            TreeMsg::Signal { job, sig, all } => {
                out.push(TAG_SIGNAL);
                put_bool(&mut out, job.is_some());
                put_u32(&mut out, job.unwrap_or(0));
                put_u32(&mut out, *sig as u32);
                put_bool(&mut out, *all);
            }
            TreeMsg::Stdin { node, data } => {
                out.push(TAG_STDIN);
                put_u32(&mut out, *node);
                put_bytes(&mut out, data);
            }
            TreeMsg::Output { node, stderr, data } => {
                out.push(TAG_OUTPUT);
                put_u32(&mut out, *node);
                put_bool(&mut out, *stderr);
                put_bytes(&mut out, data);
            }
            TreeMsg::RankExited { job, rank, pid, status, connected, finalized } => {
                out.push(TAG_RANK_EXITED);
                put_u32(&mut out, *job);
                put_u32(&mut out, *rank);
                put_u32(&mut out, *pid as u32);
                put_u32(&mut out, *status as u32);
                put_bool(&mut out, *connected);
                put_bool(&mut out, *finalized);
            }
            TreeMsg::SpawnFailed { rank, status, msg, not_started } => {
                out.push(TAG_SPAWN_FAILED);
                put_u32(&mut out, *rank);
                put_u32(&mut out, *status as u32);
                put_str(&mut out, msg);
                put_list(&mut out, not_started, |out, &r| put_u32(out, r));
            }
            TreeMsg::Abort { job, rank, code, msg } => {
                out.push(TAG_ABORT);
                put_u32(&mut out, *job);
                put_u32(&mut out, *rank);
                put_u32(&mut out, *code as u32);
                put_str(&mut out, msg);
            }
            TreeMsg::Log { msg } => {
                out.push(TAG_LOG);
                put_str(&mut out, msg);
            }
            TreeMsg::NodeFailed { node, status, msg } => {
                out.push(TAG_NODE_FAILED);
                put_u32(&mut out, *node);
                put_u32(&mut out, *status as u32);
                put_str(&mut out, msg);
            }
            TreeMsg::Done { launches } => {
                out.push(TAG_DONE);
                put_u32(&mut out, *launches);
            }
            TreeMsg::SpawnRequest { node, id, job, cmds, parent_port } => {
                out.push(TAG_SPAWN_REQUEST);
                put_u32(&mut out, *node);
                put_u64(&mut out, *id);
                put_u32(&mut out, *job);
                put_spawn_cmds(&mut out, cmds);
                put_str(&mut out, parent_port);
            }
            TreeMsg::SpawnReply { node, id, result } => {
                out.push(TAG_SPAWN_REPLY);
                put_u32(&mut out, *node);
                put_u64(&mut out, *id);
                match result {
                    Ok((job_id, size)) => {
                        put_bool(&mut out, true);
                        put_u64(&mut out, *job_id);
                        put_u32(&mut out, *size);
                    }
                    Err(msg) => {
                        put_bool(&mut out, false);
                        put_str(&mut out, msg);
                    }
                }
            }
            TreeMsg::JobLaunch(spec) => {
                out.push(TAG_JOB_LAUNCH);
                spec.encode_into(&mut out);
            }
            TreeMsg::JobStarted { job, node, error } => {
                out.push(TAG_JOB_STARTED);
                put_u32(&mut out, *job);
                put_u32(&mut out, *node);
                put_opt_str(&mut out, error.as_deref());
            }
            TreeMsg::JobDone { job, node } => {
                out.push(TAG_JOB_DONE);
                put_u32(&mut out, *job);
                put_u32(&mut out, *node);
            }
            TreeMsg::OutputAck { node, bytes } => {
                out.push(TAG_OUTPUT_ACK);
                put_u32(&mut out, *node);
                put_u64(&mut out, *bytes);
            }
        }
        out
    }

    /// Parses a frame payload; any inconsistency is a protocol error.
    pub fn decode(payload: &[u8]) -> Result<TreeMsg, PmiError> {
        let mut r = Cursor::new(payload);
        let msg = match r.u8()? {
            TAG_PROXY_HELLO => TreeMsg::ProxyHello { node: r.u32()? },
            TAG_LAUNCH => TreeMsg::Launch(Box::new(LaunchSpec::decode_from(&mut r)?)),
            TAG_PING => TreeMsg::Ping,
            TAG_FENCE_UP => TreeMsg::FenceUp { job: r.u32()?, epoch: r.u64()?, kvs: get_kvs(&mut r)? },
            TAG_FENCE_DOWN => TreeMsg::FenceDown { job: r.u32()?, epoch: r.u64()?, kvs: get_kvs(&mut r)? },
            TAG_SIGNAL => {
                let some = get_bool(&mut r)?;
                let job = r.u32()?;
                TreeMsg::Signal { job: some.then_some(job), sig: get_i32(&mut r)?, all: get_bool(&mut r)? }
            }
            TAG_STDIN => TreeMsg::Stdin { node: r.u32()?, data: r.bytes()?.to_vec() },
            TAG_OUTPUT => TreeMsg::Output { node: r.u32()?, stderr: get_bool(&mut r)?, data: r.bytes()?.to_vec() },
            TAG_RANK_EXITED => TreeMsg::RankExited {
                job: r.u32()?,
                rank: r.u32()?,
                pid: get_i32(&mut r)?,
                status: get_i32(&mut r)?,
                connected: get_bool(&mut r)?,
                finalized: get_bool(&mut r)?,
            },
            TAG_SPAWN_FAILED => TreeMsg::SpawnFailed {
                rank: r.u32()?,
                status: get_i32(&mut r)?,
                msg: r.string()?,
                not_started: get_u32s(&mut r)?,
            },
            TAG_ABORT => TreeMsg::Abort { job: r.u32()?, rank: r.u32()?, code: get_i32(&mut r)?, msg: r.string()? },
            TAG_LOG => TreeMsg::Log { msg: r.string()? },
            TAG_NODE_FAILED => TreeMsg::NodeFailed { node: r.u32()?, status: get_i32(&mut r)?, msg: r.string()? },
            TAG_DONE => TreeMsg::Done { launches: r.u32()? },
            TAG_SPAWN_REQUEST => TreeMsg::SpawnRequest {
                node: r.u32()?,
                id: r.u64()?,
                job: r.u32()?,
                cmds: get_spawn_cmds(&mut r)?,
                parent_port: r.string()?,
            },
            TAG_SPAWN_REPLY => {
                let (node, id) = (r.u32()?, r.u64()?);
                let result = if get_bool(&mut r)? { Ok((r.u64()?, r.u32()?)) } else { Err(r.string()?) };
                TreeMsg::SpawnReply { node, id, result }
            }
            TAG_JOB_LAUNCH => TreeMsg::JobLaunch(Box::new(JobSpec::decode_from(&mut r)?)),
            TAG_JOB_STARTED => TreeMsg::JobStarted { job: r.u32()?, node: r.u32()?, error: get_opt_str(&mut r)? },
            TAG_JOB_DONE => TreeMsg::JobDone { job: r.u32()?, node: r.u32()? },
            TAG_OUTPUT_ACK => TreeMsg::OutputAck { node: r.u32()?, bytes: r.u64()? },
            tag => return Err(PmiError::protocol(format!("unknown launcher message tag {tag}"))),
        };
        r.finish()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{read_frame, write_frame};

    fn spec() -> LaunchSpec {
        LaunchSpec {
            job_id: 77,
            size: 6,
            universe_size: 8,
            heartbeat_ms: 5000,
            fanout: 2,
            tag_output: true,
            forward_stdin: false,
            bind_to: "core".into(),
            cpus_per_rank: 2,
            report_bindings: true,
            iface: "eth0".into(),
            rsh: vec!["ssh".into(), "-x".into()],
            proxy_path: "/opt/baton/bin/mpiexec".into(),
            nodes: vec![(1, "b".into()), (2, "c".into())],
            ranks: vec![(2, 1), (3, 1), (4, 2)],
            segments: vec![SegmentSpec {
                nprocs: 6,
                program: "prog".into(),
                args: vec!["-v".into(), "".into()],
                env: vec![("A".into(), "1".into())],
                wdir: b"/tmp".to_vec(),
            }],
            genv: vec![("G".into(), "x=y".into())],
            base_env: vec![(b"PATH".to_vec(), b"/bin".to_vec()), (b"RAW".to_vec(), vec![0xff, 0xfe])],
        }
    }

    fn job_spec() -> JobSpec {
        JobSpec {
            job: 3,
            job_id: 0xdead_beef,
            size: 3,
            parent_port: "baton-port:x".into(),
            cmds: vec![
                SpawnSegment {
                    segment: SegmentSpec {
                        nprocs: 2,
                        program: "./child".into(),
                        args: vec!["a".into()],
                        env: vec![("G".into(), "1".into())],
                        wdir: b"/tmp".to_vec(),
                    },
                    path: Some("bin:/opt".into()),
                },
                SpawnSegment {
                    segment: SegmentSpec {
                        nprocs: 1,
                        program: "other".into(),
                        args: vec![],
                        env: vec![],
                        wdir: vec![0xff],
                    },
                    path: None,
                },
            ],
            ranks: vec![(0, 1), (1, 2), (2, 1)],
        }
    }

    fn all() -> Vec<TreeMsg> {
        let kvs = vec![KeyValue { rank: 3, key: "k".into(), value: vec![1, 2] }];
        let cmds = vec![SpawnCmd {
            program: "prog".into(),
            args: vec!["x".into()],
            maxprocs: 4,
            info: vec![("host".into(), "a,b".into())],
        }];
        vec![
            TreeMsg::ProxyHello { node: 3 },
            TreeMsg::Launch(Box::new(spec())),
            TreeMsg::Ping,
            TreeMsg::FenceUp { job: 0, epoch: 2, kvs: kvs.clone() },
            TreeMsg::FenceDown { job: 5, epoch: 2, kvs },
            TreeMsg::FenceDown { job: 0, epoch: 9, kvs: vec![] },
            TreeMsg::Signal { job: None, sig: 15, all: true },
            TreeMsg::Signal { job: Some(2), sig: 9, all: false },
            TreeMsg::Stdin { node: 1, data: b"abc".to_vec() },
            TreeMsg::Stdin { node: 1, data: vec![] },
            TreeMsg::Output { node: 2, stderr: true, data: b"[1] x\n".to_vec() },
            TreeMsg::RankExited { job: 1, rank: 4, pid: 1234, status: 9, connected: true, finalized: false },
            TreeMsg::SpawnFailed { rank: 2, status: 127, msg: "no".into(), not_started: vec![3, 4] },
            TreeMsg::Abort { job: 0, rank: 1, code: -2, msg: "bye".into() },
            TreeMsg::Log { msg: "hello".into() },
            TreeMsg::NodeFailed { node: 2, status: 255, msg: "gone".into() },
            TreeMsg::Done { launches: 7 },
            TreeMsg::SpawnRequest { node: 2, id: 9, job: 1, cmds, parent_port: "p".into() },
            TreeMsg::SpawnReply { node: 2, id: 9, result: Ok((77, 4)) },
            TreeMsg::SpawnReply { node: 2, id: 10, result: Err("no room".into()) },
            TreeMsg::JobLaunch(Box::new(job_spec())),
            TreeMsg::JobStarted { job: 3, node: 1, error: None },
            TreeMsg::JobStarted { job: 3, node: 2, error: Some("cannot spawn".into()) },
            TreeMsg::JobDone { job: 3, node: 1 },
            TreeMsg::OutputAck { node: 2, bytes: 1 << 33 },
        ]
    }

    #[test]
    fn round_trip() {
        let mut wire = Vec::new();
        for m in all() {
            write_frame(&mut wire, &m.encode()).unwrap();
        }
        let mut r = &wire[..];
        for m in all() {
            let p = read_frame(&mut r).unwrap().unwrap();
            assert_eq!(TreeMsg::decode(&p).unwrap(), m);
        }
    }

    #[test]
    fn every_prefix_and_trailing_garbage_is_rejected() {
        for m in all() {
            let p = m.encode();
            for cut in 0..p.len() {
                assert!(TreeMsg::decode(&p[..cut]).is_err(), "{m:?} cut at {cut}");
            }
            let mut long = p.clone();
            long.push(0);
            assert!(TreeMsg::decode(&long).is_err(), "{m:?} with a trailing byte");
        }
    }

    #[test]
    fn hostile_counts_lengths_and_values() {
        assert!(TreeMsg::decode(&[0x7f]).is_err());
        assert!(TreeMsg::decode(&[TAG_SIGNAL, 0, 0, 0, 0, 0, 15, 0, 0, 0, 2]).is_err(), "boolean 2");
        assert!(TreeMsg::decode(&[TAG_SIGNAL, 2, 0, 0, 0, 0, 15, 0, 0, 0, 1]).is_err(), "option flag 2");
        // A count of 4 billion key-values with nothing behind it.
        let mut p = vec![TAG_FENCE_UP, 0, 0, 0, 0];
        p.extend_from_slice(&1u64.to_le_bytes());
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(TreeMsg::decode(&p).is_err());
        // An inner length larger than the payload.
        let mut p = vec![TAG_LOG];
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        p.extend_from_slice(b"xy");
        assert!(TreeMsg::decode(&p).is_err());
        // A launch spec whose environment count lies.
        let mut p = TreeMsg::Launch(Box::new(LaunchSpec { base_env: vec![], ..spec() })).encode();
        let n = p.len();
        p[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
        assert!(TreeMsg::decode(&p).is_err());
        // Non-UTF-8 program name.
        let mut s = spec();
        s.segments[0].program = "P".into();
        let mut p = TreeMsg::Launch(Box::new(s)).encode();
        let at = p.windows(5).position(|w| w == [1, 0, 0, 0, b'P']).unwrap() + 4;
        p[at] = 0xff;
        assert!(TreeMsg::decode(&p).is_err());
        // A spawned job whose rank list claims more entries than are there.
        let mut p = TreeMsg::JobLaunch(Box::new(JobSpec { ranks: vec![], ..job_spec() })).encode();
        let n = p.len();
        p[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
        assert!(TreeMsg::decode(&p).is_err());
        // A relayed spawn request with more commands than it could hold.
        let mut p = vec![TAG_SPAWN_REQUEST];
        p.extend_from_slice(&[0; 4 + 8 + 4]);
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(TreeMsg::decode(&p).is_err());
    }
}
