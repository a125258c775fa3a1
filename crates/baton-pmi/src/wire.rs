//! Frame codec for the bootstrap connection.
//!
//! After authentication (see [`crate::auth`]) both directions carry frames:
//! a little-endian `u32` payload length followed by the payload. The payload
//! starts with a one-byte tag that selects a [`Msg`] variant; the fields
//! follow in order, integers little-endian, strings and byte strings as a
//! `u32` length plus the bytes.
//!
//! Nothing read from the wire is trusted: the frame length is capped at
//! [`MAX_FRAME_LEN`] before anything is allocated, every inner length is
//! checked against the bytes actually present, element counts are bounded by
//! the remaining bytes, strings must be UTF-8, and trailing garbage is an
//! error. A decoding error is reported to the caller, which closes only that
//! connection.

use std::io::{self, Read, Write};

use crate::error::PmiError;

/// Largest accepted frame payload (16 MiB). A fence answer carries all the
/// key-values of one epoch for the whole job, so this bounds that total.
pub const MAX_FRAME_LEN: usize = 16 << 20;
/// Largest key accepted by `put`.
pub const MAX_KEY_LEN: usize = 1024;
/// Largest value accepted by `put`.
pub const MAX_VALUE_LEN: usize = 1 << 20;

const TAG_HELLO: u8 = 1;
const TAG_WELCOME: u8 = 2;
const TAG_FENCE: u8 = 3;
const TAG_FENCE_DONE: u8 = 4;
const TAG_ABORT: u8 = 5;
const TAG_ABORT_ACK: u8 = 6;
const TAG_FINALIZE: u8 = 7;
const TAG_FINALIZE_ACK: u8 = 8;
const TAG_ERROR: u8 = 9;
const TAG_SPAWN: u8 = 10;
const TAG_SPAWN_DONE: u8 = 11;

/// Most commands one spawn request may carry, and most arguments or info
/// entries one command may carry. The frame limit bounds the bytes anyway;
/// these keep a hostile request from making the decoder build millions of
/// empty strings.
pub const MAX_SPAWN_ITEMS: usize = 1 << 16;

/// A key-value published by one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub rank: u32,
    pub key: String,
    pub value: Vec<u8>,
}

/// One command of a spawn request (one entry of `MPI_Comm_spawn_multiple`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnCmd {
    /// As the user wrote it: a path (containing `/`) or a name to search.
    pub program: String,
    /// Arguments after the program name (argv[1..]).
    pub args: Vec<String>,
    pub maxprocs: u32,
    /// The command's `MPI_Info`, as key/value pairs in the caller's order.
    pub info: Vec<(String, String)>,
}

/// Every message of the protocol. Client-to-launcher messages are `Hello`,
/// `Fence`, `Abort`, `Finalize` and `Spawn`; the others are the launcher's
/// answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// First message of a client: who it claims to be.
    Hello {
        rank: u32,
        job_id: u64,
    },
    /// Launcher accepted the `Hello`.
    Welcome {
        size: u32,
    },
    /// Enter the fence, carrying the puts made since the previous fence.
    Fence {
        puts: Vec<(String, Vec<u8>)>,
    },
    /// Every rank entered the fence; all puts of this epoch, from all ranks.
    FenceDone {
        kvs: Vec<KeyValue>,
    },
    /// End the whole job with `code`, printing `msg`.
    Abort {
        code: i32,
        msg: String,
    },
    AbortAck,
    /// This rank finalized cleanly.
    Finalize,
    FinalizeAck,
    /// The launcher refused the request.
    Error {
        msg: String,
    },
    /// Start a new job running `cmds`; its ranks are told `parent_port`.
    Spawn {
        cmds: Vec<SpawnCmd>,
        parent_port: String,
    },
    /// The spawned job has been started: its id and number of ranks.
    SpawnDone {
        job_id: u64,
        size: u32,
    },
}

impl Msg {
    /// Serializes the message into a frame payload (without length prefix).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Msg::Hello { rank, job_id } => {
                out.push(TAG_HELLO);
                put_u32(&mut out, *rank);
                out.extend_from_slice(&job_id.to_le_bytes());
            }
            Msg::Welcome { size } => {
                out.push(TAG_WELCOME);
                put_u32(&mut out, *size);
            }
            Msg::Fence { puts } => {
                out.push(TAG_FENCE);
                put_list(&mut out, puts, |out, (k, v)| {
                    put_bytes(out, k.as_bytes());
                    put_bytes(out, v);
                });
            }
            Msg::FenceDone { kvs } => {
                out.push(TAG_FENCE_DONE);
                put_kvs(&mut out, kvs);
            }
            Msg::Abort { code, msg } => {
                out.push(TAG_ABORT);
                out.extend_from_slice(&code.to_le_bytes());
                put_bytes(&mut out, msg.as_bytes());
            }
            Msg::AbortAck => out.push(TAG_ABORT_ACK),
            Msg::Finalize => out.push(TAG_FINALIZE),
            Msg::FinalizeAck => out.push(TAG_FINALIZE_ACK),
            Msg::Error { msg } => {
                out.push(TAG_ERROR);
                put_bytes(&mut out, msg.as_bytes());
            }
            Msg::Spawn { cmds, parent_port } => {
                out.push(TAG_SPAWN);
                put_spawn_cmds(&mut out, cmds);
                put_bytes(&mut out, parent_port.as_bytes());
            }
            Msg::SpawnDone { job_id, size } => {
                out.push(TAG_SPAWN_DONE);
                out.extend_from_slice(&job_id.to_le_bytes());
                put_u32(&mut out, *size);
            }
        }
        out
    }

    /// Parses a frame payload; any inconsistency is a protocol error.
    pub fn decode(payload: &[u8]) -> Result<Msg, PmiError> {
        let mut r = Cursor { buf: payload };
        let msg = match r.u8()? {
            TAG_HELLO => Msg::Hello { rank: r.u32()?, job_id: r.u64()? },
            TAG_WELCOME => Msg::Welcome { size: r.u32()? },
            // Each entry needs at least 8 bytes, so a count that cannot
            // fit in the remaining payload is rejected before allocating.
            TAG_FENCE => Msg::Fence { puts: r.list(8, |r| Ok((r.string()?, r.bytes()?.to_vec())))? },
            TAG_FENCE_DONE => Msg::FenceDone { kvs: get_kvs(&mut r)? },
            TAG_ABORT => Msg::Abort { code: r.u32()? as i32, msg: r.string()? },
            TAG_ABORT_ACK => Msg::AbortAck,
            TAG_FINALIZE => Msg::Finalize,
            TAG_FINALIZE_ACK => Msg::FinalizeAck,
            TAG_ERROR => Msg::Error { msg: r.string()? },
            TAG_SPAWN => Msg::Spawn { cmds: get_spawn_cmds(&mut r)?, parent_port: r.string()? },
            TAG_SPAWN_DONE => Msg::SpawnDone { job_id: r.u64()?, size: r.u32()? },
            tag => return Err(PmiError::protocol(format!("unknown message tag {tag}"))),
        };
        r.finish()?;
        Ok(msg)
    }
}

// Lengths are bounded by MAX_FRAME_LEN long before they could overflow u32;
// saturating keeps an oversized message detectable by write_frame.
pub(crate) fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, len_u32(b.len()));
    out.extend_from_slice(b);
}

/// A count, then each item as `put` writes it ([`Cursor::list`] reads it back).
pub(crate) fn put_list<T>(out: &mut Vec<u8>, items: &[T], mut put: impl FnMut(&mut Vec<u8>, &T)) {
    put_u32(out, len_u32(items.len()));
    for item in items {
        put(out, item);
    }
}

/// Key-values of a fence (rank, key, value each).
pub(crate) fn put_kvs(out: &mut Vec<u8>, kvs: &[KeyValue]) {
    put_list(out, kvs, |out, kv| {
        put_u32(out, kv.rank);
        put_bytes(out, kv.key.as_bytes());
        put_bytes(out, &kv.value);
    });
}

pub(crate) fn get_kvs(r: &mut Cursor) -> Result<Vec<KeyValue>, PmiError> {
    r.list(12, |r| Ok(KeyValue { rank: r.u32()?, key: r.string()?, value: r.bytes()?.to_vec() }))
}

/// The commands of a spawn request (also relayed up the launcher tree).
pub(crate) fn put_spawn_cmds(out: &mut Vec<u8>, cmds: &[SpawnCmd]) {
    put_list(out, cmds, |out, c| {
        put_bytes(out, c.program.as_bytes());
        put_list(out, &c.args, |out, a| put_bytes(out, a.as_bytes()));
        put_u32(out, c.maxprocs);
        put_list(out, &c.info, |out, (k, v)| {
            put_bytes(out, k.as_bytes());
            put_bytes(out, v.as_bytes());
        });
    });
}

pub(crate) fn get_spawn_cmds(r: &mut Cursor) -> Result<Vec<SpawnCmd>, PmiError> {
    // A command is at least four u32 fields (program length, argument
    // count, maxprocs, info count).
    r.list_max(16, MAX_SPAWN_ITEMS, |r| {
        Ok(SpawnCmd {
            program: r.string()?,
            args: r.list_max(4, MAX_SPAWN_ITEMS, Cursor::string)?,
            maxprocs: r.u32()?,
            info: r.list_max(8, MAX_SPAWN_ITEMS, |r| Ok((r.string()?, r.string()?)))?,
        })
    })
}

pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf }
    }

    /// Rejects trailing bytes: a message must be consumed exactly.
    pub(crate) fn finish(&self) -> Result<(), PmiError> {
        if !self.buf.is_empty() {
            return Err(PmiError::protocol(format!("{} trailing bytes after message", self.buf.len())));
        }
        Ok(())
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], PmiError> {
        if n > self.buf.len() {
            return Err(PmiError::protocol(format!("truncated message: need {n} bytes, {} left", self.buf.len())));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, PmiError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, PmiError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, PmiError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A count of entries of at least `min_entry_len` bytes each, then that many entries as
    /// `entry` reads them. A count the rest of the message cannot hold is refused before
    /// anything is allocated.
    pub(crate) fn list<T>(
        &mut self,
        min_entry_len: usize,
        entry: impl FnMut(&mut Self) -> Result<T, PmiError>,
    ) -> Result<Vec<T>, PmiError> {
        self.list_max(min_entry_len, usize::MAX, entry)
    }

    /// [`Cursor::list`] of at most `max` entries.
    fn list_max<T>(
        &mut self,
        min_entry_len: usize,
        max: usize,
        mut entry: impl FnMut(&mut Self) -> Result<T, PmiError>,
    ) -> Result<Vec<T>, PmiError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_entry_len) > self.buf.len() {
            return Err(PmiError::protocol(format!("entry count {n} exceeds what the message can hold")));
        }
        if n > max {
            return Err(PmiError::protocol(format!("{n} entries exceed the limit of {max}")));
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(entry(self)?);
        }
        Ok(v)
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], PmiError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    pub(crate) fn string(&mut self) -> Result<String, PmiError> {
        let b = self.bytes()?;
        std::str::from_utf8(b).map(str::to_owned).map_err(|_| PmiError::protocol("string is not valid UTF-8"))
    }
}

/// Writes one frame. Refuses payloads the peer would reject anyway.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> Result<(), PmiError> {
    if payload.is_empty() || payload.len() > MAX_FRAME_LEN {
        return Err(PmiError::protocol(format!(
            "refusing to send a frame of {} bytes (limit {MAX_FRAME_LEN})",
            payload.len()
        )));
    }
    // One buffer so the frame normally leaves in a single segment.
    let mut buf = Vec::with_capacity(4 + payload.len());
    put_u32(&mut buf, payload.len() as u32);
    buf.extend_from_slice(payload);
    w.write_all(&buf).and_then(|()| w.flush()).map_err(|e| PmiError::io("sending to the bootstrap peer", e))
}

/// Reads one frame payload. `Ok(None)` means the peer closed the connection
/// cleanly at a frame boundary.
pub fn read_frame(r: &mut impl Read) -> Result<Option<Vec<u8>>, PmiError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(PmiError::protocol("connection closed inside a frame header")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(PmiError::io("reading from the bootstrap peer", e)),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME_LEN {
        return Err(PmiError::protocol(format!("frame length {len} is outside 1..={MAX_FRAME_LEN}")));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            PmiError::protocol("connection closed inside a frame")
        } else {
            PmiError::io("reading from the bootstrap peer", e)
        }
    })?;
    Ok(Some(payload))
}

/// Encodes and sends a message.
pub fn send(w: &mut impl Write, msg: &Msg) -> Result<(), PmiError> {
    write_frame(w, &msg.encode())
}

/// Receives and decodes a message; a closed connection is an error here.
pub fn recv(r: &mut impl Read) -> Result<Msg, PmiError> {
    match read_frame(r)? {
        Some(payload) => Msg::decode(&payload),
        None => Err(PmiError::new(crate::PmiErrorKind::Io, "the bootstrap peer closed the connection")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PmiErrorKind;

    fn all_messages() -> Vec<Msg> {
        vec![
            Msg::Hello { rank: 7, job_id: 0xdead_beef_1234_5678 },
            Msg::Welcome { size: 64 },
            Msg::Fence { puts: vec![] },
            Msg::Fence {
                puts: vec![
                    ("addr".into(), vec![1, 2, 3]),
                    ("empty".into(), vec![]),
                    ("ünïcode".into(), vec![0xff; 100]),
                ],
            },
            Msg::FenceDone {
                kvs: vec![
                    KeyValue { rank: 0, key: "a".into(), value: b"x".to_vec() },
                    KeyValue { rank: 3, key: "b".into(), value: vec![] },
                ],
            },
            Msg::Abort { code: -3, msg: "bad things".into() },
            Msg::AbortAck,
            Msg::Finalize,
            Msg::FinalizeAck,
            Msg::Error { msg: "nope".into() },
            Msg::Spawn { cmds: vec![], parent_port: String::new() },
            Msg::Spawn {
                cmds: vec![
                    SpawnCmd {
                        program: "./a.out".into(),
                        args: vec!["-x".into(), String::new(), "ü".into()],
                        maxprocs: 4,
                        info: vec![("wdir".into(), "/tmp".into()), ("env".into(), "A=1\nB=2".into())],
                    },
                    SpawnCmd { program: "b".into(), args: vec![], maxprocs: 0, info: vec![] },
                ],
                parent_port: "tcp:127.0.0.1:4242#tag".into(),
            },
            Msg::SpawnDone { job_id: u64::MAX >> 1, size: 3 },
        ]
    }

    #[test]
    fn round_trip_through_frames() {
        let mut wire = Vec::new();
        for m in all_messages() {
            send(&mut wire, &m).unwrap();
        }
        let mut r = &wire[..];
        for m in all_messages() {
            assert_eq!(recv(&mut r).unwrap(), m);
        }
        assert!(read_frame(&mut r).unwrap().is_none());
    }

    #[test]
    fn oversized_length_is_rejected_without_reading_on() {
        let mut wire = ((MAX_FRAME_LEN + 1) as u32).to_le_bytes().to_vec();
        wire.extend_from_slice(&[TAG_FINALIZE]);
        let err = read_frame(&mut &wire[..]).unwrap_err();
        assert_eq!(err.kind(), PmiErrorKind::Protocol);
        let wire = u32::MAX.to_le_bytes();
        assert!(read_frame(&mut &wire[..]).is_err());
        let wire = 0u32.to_le_bytes();
        assert!(read_frame(&mut &wire[..]).is_err());
    }

    #[test]
    fn sender_refuses_oversized_frames() {
        let big = vec![0u8; MAX_FRAME_LEN + 1];
        assert!(write_frame(&mut Vec::new(), &big).is_err());
    }

    #[test]
    fn truncated_frames_are_errors() {
        let mut wire = Vec::new();
        send(&mut wire, &Msg::Welcome { size: 3 }).unwrap();
        for cut in 1..wire.len() {
            assert!(read_frame(&mut &wire[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn malformed_payloads_are_rejected() {
        // Unknown tag.
        assert!(Msg::decode(&[200]).is_err());
        // Empty payload.
        assert!(Msg::decode(&[]).is_err());
        // Trailing garbage.
        let mut p = Msg::Finalize.encode();
        p.push(0);
        assert!(Msg::decode(&p).is_err());
        // Inner length pointing past the end.
        let mut p = vec![TAG_ERROR];
        p.extend_from_slice(&1000u32.to_le_bytes());
        p.extend_from_slice(b"short");
        assert!(Msg::decode(&p).is_err());
        // Huge element count with no data behind it must not allocate.
        let mut p = vec![TAG_FENCE_DONE];
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(Msg::decode(&p).is_err());
        // Invalid UTF-8 key.
        let mut p = vec![TAG_FENCE];
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&2u32.to_le_bytes());
        p.extend_from_slice(&[0xff, 0xfe]);
        p.extend_from_slice(&0u32.to_le_bytes());
        assert!(Msg::decode(&p).is_err());
        // Spawn: a command count the payload cannot hold.
        let mut p = vec![TAG_SPAWN];
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        p.extend_from_slice(&[0; 64]);
        assert!(Msg::decode(&p).is_err());
        // Spawn: an argument count lying about what follows.
        let mut p = vec![TAG_SPAWN];
        p.extend_from_slice(&1u32.to_le_bytes());
        put_bytes(&mut p, b"prog");
        p.extend_from_slice(&1000u32.to_le_bytes());
        p.extend_from_slice(&[0; 20]);
        assert!(Msg::decode(&p).is_err());
        // Spawn: an info key that is not UTF-8.
        let mut p = vec![TAG_SPAWN];
        p.extend_from_slice(&1u32.to_le_bytes());
        put_bytes(&mut p, b"prog");
        put_u32(&mut p, 0);
        put_u32(&mut p, 1);
        put_u32(&mut p, 1);
        put_bytes(&mut p, &[0xc3]);
        put_bytes(&mut p, b"v");
        put_bytes(&mut p, b"port");
        assert!(Msg::decode(&p).is_err());
        // Spawn: more empty arguments than the item limit, though they
        // would fit in a frame.
        let mut p = vec![TAG_SPAWN];
        p.extend_from_slice(&1u32.to_le_bytes());
        put_bytes(&mut p, b"prog");
        put_u32(&mut p, MAX_SPAWN_ITEMS as u32 + 1);
        p.resize(p.len() + 4 * (MAX_SPAWN_ITEMS + 1), 0);
        put_u32(&mut p, 1);
        put_u32(&mut p, 0);
        put_bytes(&mut p, b"port");
        let e = Msg::decode(&p).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
        // SpawnDone with a missing field, and with trailing bytes.
        let p = Msg::SpawnDone { job_id: 1, size: 2 }.encode();
        assert!(Msg::decode(&p[..p.len() - 1]).is_err());
        let mut q = p.clone();
        q.push(0);
        assert!(Msg::decode(&q).is_err());
        // Every strict prefix of every valid message is rejected.
        for m in all_messages() {
            let p = m.encode();
            for cut in 0..p.len() {
                assert!(Msg::decode(&p[..cut]).is_err(), "{m:?} cut at {cut}");
            }
        }
    }
}
