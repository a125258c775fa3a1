//! The device layer: what the C boundary calls. Each MPI operation has one entry here that
//! takes decoded, checked arguments (communicators, [`Buffer`]s, ranks, tags, reducers) and
//! does the rest: point-to-point through the engine, collectives by choosing an algorithm,
//! taking the shared-memory fast path or running a schedule, persistent requests, buffered
//! sends. `baton-capi` only decodes handles, checks arguments, calls one entry and maps the
//! result to an error code; it takes no lock and sees no engine internals.
//!
//! Important types:
//! - [`Device`]: the process's device state; dereferences to the runtime ([`Mpi`]) for what
//!   the layers above need of it (the world, the process table).
//! - [`Buffer`]: an application buffer as the C boundary decoded it (the only step that needs
//!   `unsafe`: turning an address into a span).
//! - [`Form`] and [`Started`]: how a collective was called (blocking, `MPI_I…`, `…_init`) and
//!   what the caller gets back.
//! - [`Persistent`]: a persistent request's operation, started again by every `MPI_Start`
//!   ([`Device::start`]).
//! - [`Envelope`] ([`p2p`]): where a point-to-point operation goes; [`Awaited`] and
//!   [`Completion`] ([`request`]): what the completion calls wait for and give back; [`Bsend`]
//!   ([`bsend`]): the buffered-send accounting.
//!
//! The entries by concern: [`p2p`] (sends, receives, probes, persistent starts, the express
//! entries of the C boundary's fast paths), [`request`] (waits and tests, cancel, free),
//! [`bsend`] (attach, detach, flush), [`grequest`] (generalized requests).

pub mod bsend;
pub mod grequest;
pub mod p2p;
pub mod request;
pub mod rma;

pub use bsend::{Bsend, Buffers, Detached};
pub use grequest::{Callbacks, Generalized};
pub use p2p::{check_status, proc_null_status, Envelope, Matched};
pub use request::{Awaited, Completion, NoSuchRequest};

pub mod coll;

use crate::coll::schedule::{Loc, Region, Schedule};
use crate::comm::Comm;
use crate::datatype::Layout;
use crate::engine::{ReqId, SendData, Sink};
use crate::runtime::Mpi;
use baton_transport::mem::UserBuf;
use std::sync::{Arc, Mutex};

/// One MPI process's device state: the runtime and what the device entries keep beside it.
pub struct Device {
    mpi: Mpi,
    /// The buffers attached for buffered sends, and the buffered sends in flight.
    bsend: Mutex<Buffers>,
}

impl Device {
    pub fn new(mpi: Mpi) -> Device {
        Device { mpi, bsend: Mutex::new(Buffers::default()) }
    }

    /// The runtime underneath.
    pub fn runtime(&self) -> &Mpi {
        &self.mpi
    }
}

impl std::ops::Deref for Device {
    type Target = Mpi;
    fn deref(&self) -> &Mpi {
        &self.mpi
    }
}

/// An application buffer: `count` elements of `layout`, whose bytes all lie in `span`, the
/// first element's origin `base_off` bytes into it. The C boundary builds it from an address
/// (the one `unsafe` step, with the standard's promise that the memory stays valid and
/// untouched for the operation's life); everything after is bounds-checked.
#[derive(Clone)]
pub struct Buffer {
    pub span: UserBuf,
    pub base_off: isize,
    pub layout: LayoutRef,
    pub count: usize,
}

/// A buffer's datatype layout. A predefined type's lives as long as the library and is
/// borrowed, so the blocking fast paths touch no reference count; a derived type's is held, so
/// that `MPI_Type_free` during the operation cannot take it away.
#[derive(Clone)]
pub enum LayoutRef {
    Predefined(&'static Arc<Layout>),
    Held(Arc<Layout>),
}

impl LayoutRef {
    /// A counted reference, for what outlives the call (a schedule, a message in flight).
    #[inline]
    pub fn to_arc(&self) -> Arc<Layout> {
        match self {
            LayoutRef::Predefined(a) => Arc::clone(a),
            LayoutRef::Held(a) => Arc::clone(a),
        }
    }
}

impl std::ops::Deref for LayoutRef {
    type Target = Layout;
    #[inline]
    fn deref(&self) -> &Layout {
        match self {
            LayoutRef::Predefined(a) => a,
            LayoutRef::Held(a) => a,
        }
    }
}

impl From<Arc<Layout>> for LayoutRef {
    fn from(a: Arc<Layout>) -> LayoutRef {
        LayoutRef::Held(a)
    }
}

impl Buffer {
    /// The packed bytes the buffer holds (its type signature's size).
    #[inline]
    pub fn bytes(&self) -> usize {
        self.count * self.layout.size
    }

    /// The span itself when the elements are one contiguous run of bytes starting at it.
    #[inline]
    pub fn contiguous(&self) -> Option<UserBuf> {
        (self.base_off == 0 && self.layout.is_contiguous()).then(|| self.span.prefix(self.bytes()))
    }

    /// What a send takes from the buffer: the span when contiguous, else the elements, which the
    /// engine packs frame by frame.
    pub fn send_data(&self) -> SendData {
        let l = &*self.layout;
        if l.blocks.len() == 1 && l.extent == l.size as isize && l.blocks[0].0 == 0 && self.base_off == 0 {
            return SendData::User(self.span.prefix(self.bytes()));
        }
        SendData::Typed { span: self.span, base_off: self.base_off, layout: self.layout.to_arc(), len: self.bytes() }
    }

    /// Where a receive puts its bytes.
    pub fn sink(&self) -> Sink {
        match self.contiguous() {
            Some(span) => Sink::Contig(span),
            None => Sink::Typed {
                span: self.span,
                base_off: self.base_off,
                layout: self.layout.to_arc(),
                start: 0,
                len: self.bytes(),
            },
        }
    }

    /// The buffer as a region of schedule `s`.
    pub fn region(&self, s: &mut Schedule) -> Loc {
        s.region(Region::User { span: self.span, base_off: self.base_off, layout: self.layout.to_arc() }, self.bytes())
    }
}

/// Which form of a collective was called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Blocking,
    /// `MPI_I…`: returns a request.
    Nonblocking,
    /// `MPI_…_init`: returns a persistent request, started by `MPI_Start`.
    Persistent,
}

/// What a collective entry gives back, by [`Form`].
pub enum Started {
    /// A blocking call that finished.
    Done,
    /// A nonblocking call's request (complete when the collective is).
    Request(ReqId),
    /// A persistent call's operation, for the caller's request table.
    Persistent(Persistent),
}

/// A persistent request's operation, started again by each `MPI_Start`. Cloning it is cheap
/// (reference counts), so a caller may copy it out of a table before starting it.
#[derive(Clone)]
pub enum Persistent {
    /// `MPI_Send_init` and its modes.
    Send { comm: Arc<Comm>, data: Buffer, dest: i32, tag: i32, mode: SendMode },
    /// `MPI_Recv_init`.
    Recv { comm: Arc<Comm>, buf: Buffer, src: i32, tag: i32 },
    /// A persistent collective: its schedule, run again from the start each time.
    Coll(Arc<Mutex<Schedule>>),
    /// Not persistent: a generalized request, kept in the same table because its handle, too,
    /// must outlive the engine's completion (until `query_fn` and `free_fn` have run).
    Generalized(Arc<Generalized>),
}

/// The four send modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    Standard,
    Sync,
    Ready,
    Buffered,
}

impl SendMode {
    /// The MPI call of this mode, blocking or not (for messages).
    pub fn call(self, nonblocking: bool) -> &'static str {
        match (self, nonblocking) {
            (SendMode::Standard, false) => "MPI_Send",
            (SendMode::Sync, false) => "MPI_Ssend",
            (SendMode::Ready, false) => "MPI_Rsend",
            (SendMode::Buffered, false) => "MPI_Bsend",
            (SendMode::Standard, true) => "MPI_Isend",
            (SendMode::Sync, true) => "MPI_Issend",
            (SendMode::Ready, true) => "MPI_Irsend",
            (SendMode::Buffered, true) => "MPI_Ibsend",
        }
    }
}
