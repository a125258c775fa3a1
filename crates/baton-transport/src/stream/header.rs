//! The 48-byte frame header as it travels on a stream, and its checked decoder.
//!
//! [`encode`] writes a [`Header`] and the payload length; [`decode`] trusts nothing: kind,
//! reserved bytes and every length are checked before the receiver allocates or places anything
//! ([`FrameError`] says why a header was refused). Both are fuzzed through [`super::fuzz_rx`].

use crate::frame::{Header, Kind};

/// Bytes of a frame header on the wire.
pub const HEADER_LEN: usize = 48;

/// Why a header was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// No frame kind has this number (or it never travels over TCP).
    Kind(u8),
    /// Bytes reserved for later versions are not zero.
    Reserved,
    /// The payload is longer than this connection accepts.
    TooLong { plen: u64, max: usize },
    /// The payload length does not fit the kind (e.g. an eager frame whose payload is not the
    /// message, or a control frame with a payload).
    Length { kind: Kind, plen: u64, len: u64 },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Kind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::Reserved => write!(f, "reserved header bytes are not zero"),
            FrameError::TooLong { plen, max } => write!(f, "payload of {plen} bytes exceeds the limit of {max}"),
            FrameError::Length { kind, plen, len } => {
                write!(f, "{kind:?} frame with a payload of {plen} bytes for a message of {len}")
            }
        }
    }
}

/// The header of a frame with `plen` payload bytes, as it goes on the wire (little-endian).
///
/// Layout: kind (1), reserved (3), payload length (4), ctx (8), src (4), tag (4), len (8),
/// id (8), aux (8).
#[inline]
pub fn encode(h: &Header, plen: usize) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0] = h.kind as u8;
    b[4..8].copy_from_slice(&(plen as u32).to_le_bytes());
    b[8..16].copy_from_slice(&h.ctx.to_le_bytes());
    b[16..20].copy_from_slice(&h.src.to_le_bytes());
    b[20..24].copy_from_slice(&h.tag.to_le_bytes());
    b[24..32].copy_from_slice(&h.len.to_le_bytes());
    b[32..40].copy_from_slice(&h.id.to_le_bytes());
    b[40..48].copy_from_slice(&h.aux.to_le_bytes());
    b
}

/// Parses a header from the wire; returns it with the length of the payload that follows.
pub fn decode(b: &[u8; HEADER_LEN], max_payload: usize) -> Result<(Header, usize), FrameError> {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let i32_at = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let kind = match Kind::from_u8(b[0]) {
        Some(Kind::Pad) | None => return Err(FrameError::Kind(b[0])),
        Some(k) => k,
    };
    if b[1..4] != [0, 0, 0] {
        return Err(FrameError::Reserved);
    }
    let plen = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as u64;
    if plen > max_payload as u64 {
        return Err(FrameError::TooLong { plen, max: max_payload });
    }
    let h = Header {
        kind,
        ctx: u64_at(8),
        src: i32_at(16),
        tag: i32_at(20),
        len: u64_at(24),
        id: u64_at(32),
        aux: u64_at(40),
    };
    let fits = match kind {
        Kind::Eager | Kind::EagerSync => plen == h.len,
        Kind::Data => plen > 0,
        Kind::Offer => plen == 16,
        Kind::Rts | Kind::RtsPut | Kind::SyncAck | Kind::Fin | Kind::Cts | Kind::Help | Kind::Pad => plen == 0,
    };
    if !fits {
        return Err(FrameError::Length { kind, plen, len: h.len });
    }
    Ok((h, plen as usize))
}
