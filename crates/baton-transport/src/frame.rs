//! The frame header shared by every transport.
//!
//! A frame is a header plus an optional payload. Headers are plain integers so that a ring can
//! store them in place and a future TCP transport can encode them with the same field meanings.

/// What a frame asks of its receiver.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Padding at the end of a ring; never seen above the transport.
    Pad = 0,
    /// A whole message; `len` bytes of payload follow.
    Eager = 1,
    /// A whole message from a synchronous send: acknowledge with `SyncAck` once matched.
    EagerSync = 2,
    /// Rendezvous request: `len` bytes wait at address `aux` in the sender (`id` = send request).
    Rts = 3,
    /// The receiver matched an `EagerSync`; completes send request `id`.
    SyncAck = 4,
    /// The receiver copied the rendezvous data itself; completes send request `id`.
    Fin = 5,
    /// The receiver cannot read the sender's memory: send the data as `Data` frames for receive
    /// request `aux` (`id` = send request).
    Cts = 6,
    /// A piece of a rendezvous message for receive request `id`, at byte offset `aux`.
    Data = 7,
    /// The receiver of rendezvous `id` (a send request) invites its sender to share the copy
    /// (see [`crate::coop`]): transfer `ctx`, `len` bytes into the receive buffer at `aux`, in
    /// chunks of `tag` bytes.
    Help = 8,
    /// A receive of process `src`'s next message on `ctx` with `tag` (or any) is posted before
    /// it was sent (see `baton_core::engine::offer`): its sender may write straight into `len`
    /// bytes at `aux` (receive request `id`), through the pair's cooperative-copy slot. A
    /// 16-byte payload: the receiver's count of the sender's messages read so far (the offer
    /// holds only for the very next one) and the slot's transfer number.
    Offer = 9,
    /// An `Rts` whose sender took the receiver's `Offer`: it writes chunks into the offered
    /// buffer while the receiver reads others.
    RtsPut = 10,
}

impl Kind {
    pub fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            0 => Kind::Pad,
            1 => Kind::Eager,
            2 => Kind::EagerSync,
            3 => Kind::Rts,
            4 => Kind::SyncAck,
            5 => Kind::Fin,
            6 => Kind::Cts,
            7 => Kind::Data,
            8 => Kind::Help,
            9 => Kind::Offer,
            10 => Kind::RtsPut,
            _ => return None,
        })
    }
}

/// The fixed part of every frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    /// Context id of the communicator (matching key).
    pub ctx: u64,
    /// Sender's rank in that communicator.
    pub src: i32,
    pub tag: i32,
    /// Total message length in bytes.
    pub len: u64,
    /// A request id, meaning given by `kind`.
    pub id: u64,
    /// Kind-specific: remote address (Rts), receive request (Cts), offset (Data).
    pub aux: u64,
}

impl Header {
    pub fn control(kind: Kind, id: u64, aux: u64) -> Header {
        Header { kind, ctx: 0, src: 0, tag: 0, len: 0, id, aux }
    }
}
