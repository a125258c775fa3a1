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
//! travels in [`TreeMsg::Launch`], never on a command line.

use crate::error::PmiError;
use crate::wire::{len_u32, put_bytes, put_u32, Cursor, KeyValue};

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
    /// Up: every rank of the sender's subtree entered fence `epoch`; their puts.
    FenceUp { epoch: u64, kvs: Vec<KeyValue> },
    /// Down: fence `epoch` is complete; all puts of the job for it.
    FenceDown { epoch: u64, kvs: Vec<KeyValue> },
    /// Down: send `sig` to the ranks still running (to every rank's process
    /// group, to catch leftovers, with `all`).
    Signal { sig: i32, all: bool },
    /// Down, routed to `node`: bytes for rank 0's stdin; empty means EOF.
    Stdin { node: u32, data: Vec<u8> },
    /// Up: whole lines of rank output, already tagged when `-l` is on.
    Output { stderr: bool, data: Vec<u8> },
    /// Up: a rank ended; `status` is the raw wait status.
    RankExited { rank: u32, pid: i32, status: i32, connected: bool, finalized: bool },
    /// Up: `rank` could not be started, nor the ranks in `not_started`.
    SpawnFailed { rank: u32, status: i32, msg: String, not_started: Vec<u32> },
    /// Up: a rank called abort.
    Abort { rank: u32, code: i32, msg: String },
    /// Up: a line for mpiexec's stderr (already says which host).
    Log { msg: String },
    /// Up: the proxy of `node` could not start or was lost; its whole
    /// subtree is gone.
    NodeFailed { node: u32, status: i32, msg: String },
    /// Up: the sender's subtree has finished (all ranks reaped, output
    /// flushed); the proxy exits after sending it.
    Done,
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

fn put_kvs(out: &mut Vec<u8>, kvs: &[KeyValue]) {
    put_u32(out, len_u32(kvs.len()));
    for kv in kvs {
        put_u32(out, kv.rank);
        put_str(out, &kv.key);
        put_bytes(out, &kv.value);
    }
}

fn put_pairs(out: &mut Vec<u8>, pairs: &[(String, String)]) {
    put_u32(out, len_u32(pairs.len()));
    for (k, v) in pairs {
        put_str(out, k);
        put_str(out, v);
    }
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

fn get_kvs(r: &mut Cursor) -> Result<Vec<KeyValue>, PmiError> {
    let n = r.count(12)?;
    let mut kvs = Vec::with_capacity(n);
    for _ in 0..n {
        let rank = r.u32()?;
        let key = r.string()?;
        let value = r.bytes()?.to_vec();
        kvs.push(KeyValue { rank, key, value });
    }
    Ok(kvs)
}

fn get_pairs(r: &mut Cursor) -> Result<Vec<(String, String)>, PmiError> {
    let n = r.count(8)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push((r.string()?, r.string()?));
    }
    Ok(v)
}

fn get_strings(r: &mut Cursor) -> Result<Vec<String>, PmiError> {
    let n = r.count(4)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(r.string()?);
    }
    Ok(v)
}

fn get_u32s(r: &mut Cursor) -> Result<Vec<u32>, PmiError> {
    let n = r.count(4)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(r.u32()?);
    }
    Ok(v)
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
        put_str(out, &self.iface);
        put_u32(out, len_u32(self.rsh.len()));
        for a in &self.rsh {
            put_str(out, a);
        }
        put_str(out, &self.proxy_path);
        put_u32(out, len_u32(self.nodes.len()));
        for (node, name) in &self.nodes {
            put_u32(out, *node);
            put_str(out, name);
        }
        put_u32(out, len_u32(self.ranks.len()));
        for (rank, node) in &self.ranks {
            put_u32(out, *rank);
            put_u32(out, *node);
        }
        put_u32(out, len_u32(self.segments.len()));
        for s in &self.segments {
            put_u32(out, s.nprocs);
            put_str(out, &s.program);
            put_u32(out, len_u32(s.args.len()));
            for a in &s.args {
                put_str(out, a);
            }
            put_pairs(out, &s.env);
            put_bytes(out, &s.wdir);
        }
        put_pairs(out, &self.genv);
        put_u32(out, len_u32(self.base_env.len()));
        for (k, v) in &self.base_env {
            put_bytes(out, k);
            put_bytes(out, v);
        }
    }

    fn decode_from(r: &mut Cursor) -> Result<LaunchSpec, PmiError> {
        let job_id = r.u64()?;
        let size = r.u32()?;
        let universe_size = r.u32()?;
        let heartbeat_ms = r.u32()?;
        let fanout = r.u32()?;
        let tag_output = get_bool(r)?;
        let forward_stdin = get_bool(r)?;
        let iface = r.string()?;
        let rsh = get_strings(r)?;
        let proxy_path = r.string()?;
        let n = r.count(8)?;
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            nodes.push((r.u32()?, r.string()?));
        }
        let n = r.count(8)?;
        let mut ranks = Vec::with_capacity(n);
        for _ in 0..n {
            ranks.push((r.u32()?, r.u32()?));
        }
        let n = r.count(20)?;
        let mut segments = Vec::with_capacity(n);
        for _ in 0..n {
            segments.push(SegmentSpec {
                nprocs: r.u32()?,
                program: r.string()?,
                args: get_strings(r)?,
                env: get_pairs(r)?,
                wdir: r.bytes()?.to_vec(),
            });
        }
        let genv = get_pairs(r)?;
        let n = r.count(8)?;
        let mut base_env = Vec::with_capacity(n);
        for _ in 0..n {
            base_env.push((r.bytes()?.to_vec(), r.bytes()?.to_vec()));
        }
        Ok(LaunchSpec {
            job_id,
            size,
            universe_size,
            heartbeat_ms,
            fanout,
            tag_output,
            forward_stdin,
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
            TreeMsg::FenceUp { epoch, kvs } => {
                out.push(TAG_FENCE_UP);
                put_u64(&mut out, *epoch);
                put_kvs(&mut out, kvs);
            }
            TreeMsg::FenceDown { epoch, kvs } => {
                out.push(TAG_FENCE_DOWN);
                put_u64(&mut out, *epoch);
                put_kvs(&mut out, kvs);
            }
            TreeMsg::Signal { sig, all } => {
                out.push(TAG_SIGNAL);
                put_u32(&mut out, *sig as u32);
                put_bool(&mut out, *all);
            }
            TreeMsg::Stdin { node, data } => {
                out.push(TAG_STDIN);
                put_u32(&mut out, *node);
                put_bytes(&mut out, data);
            }
            TreeMsg::Output { stderr, data } => {
                out.push(TAG_OUTPUT);
                put_bool(&mut out, *stderr);
                put_bytes(&mut out, data);
            }
            TreeMsg::RankExited { rank, pid, status, connected, finalized } => {
                out.push(TAG_RANK_EXITED);
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
                put_u32(&mut out, len_u32(not_started.len()));
                for r in not_started {
                    put_u32(&mut out, *r);
                }
            }
            TreeMsg::Abort { rank, code, msg } => {
                out.push(TAG_ABORT);
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
            TreeMsg::Done => out.push(TAG_DONE),
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
            TAG_FENCE_UP => TreeMsg::FenceUp { epoch: r.u64()?, kvs: get_kvs(&mut r)? },
            TAG_FENCE_DOWN => TreeMsg::FenceDown { epoch: r.u64()?, kvs: get_kvs(&mut r)? },
            TAG_SIGNAL => TreeMsg::Signal { sig: get_i32(&mut r)?, all: get_bool(&mut r)? },
            TAG_STDIN => TreeMsg::Stdin { node: r.u32()?, data: r.bytes()?.to_vec() },
            TAG_OUTPUT => TreeMsg::Output { stderr: get_bool(&mut r)?, data: r.bytes()?.to_vec() },
            TAG_RANK_EXITED => TreeMsg::RankExited {
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
            TAG_ABORT => TreeMsg::Abort { rank: r.u32()?, code: get_i32(&mut r)?, msg: r.string()? },
            TAG_LOG => TreeMsg::Log { msg: r.string()? },
            TAG_NODE_FAILED => TreeMsg::NodeFailed { node: r.u32()?, status: get_i32(&mut r)?, msg: r.string()? },
            TAG_DONE => TreeMsg::Done,
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

    fn all() -> Vec<TreeMsg> {
        let kvs = vec![KeyValue { rank: 3, key: "k".into(), value: vec![1, 2] }];
        vec![
            TreeMsg::ProxyHello { node: 3 },
            TreeMsg::Launch(Box::new(spec())),
            TreeMsg::Ping,
            TreeMsg::FenceUp { epoch: 2, kvs: kvs.clone() },
            TreeMsg::FenceDown { epoch: 2, kvs },
            TreeMsg::FenceDown { epoch: 9, kvs: vec![] },
            TreeMsg::Signal { sig: 15, all: true },
            TreeMsg::Stdin { node: 1, data: b"abc".to_vec() },
            TreeMsg::Stdin { node: 1, data: vec![] },
            TreeMsg::Output { stderr: true, data: b"[1] x\n".to_vec() },
            TreeMsg::RankExited { rank: 4, pid: 1234, status: 9, connected: true, finalized: false },
            TreeMsg::SpawnFailed { rank: 2, status: 127, msg: "no".into(), not_started: vec![3, 4] },
            TreeMsg::Abort { rank: 1, code: -2, msg: "bye".into() },
            TreeMsg::Log { msg: "hello".into() },
            TreeMsg::NodeFailed { node: 2, status: 255, msg: "gone".into() },
            TreeMsg::Done,
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
        assert!(TreeMsg::decode(&[TAG_SIGNAL, 15, 0, 0, 0, 2]).is_err(), "boolean 2");
        // A count of 4 billion key-values with nothing behind it.
        let mut p = vec![TAG_FENCE_UP];
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
    }
}
