//! `libmpi_abi.so.1`: the MPI 5.0 standard ABI on top of `baton-core`.
//!
//! This crate is the C boundary: it turns handles into objects ([`handles`], [`state`]), checks
//! every argument the standard lets it check ([`validate`]), turns `MpiError`s into error codes
//! and runs error handlers ([`errors`]). Each family of functions has a module. The build script
//! adds the `MPI_` entry points (which forward to `PMPI_`, for profiling tools), the `PMPI_`
//! entry points of the families annotated in `abi/bindings.tsv` (argument checks, then one call
//! into the family's module), and a stub raising `MPI_ERR_UNSUPPORTED_OPERATION` for every
//! function not implemented here yet.
#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

use baton_abi::consts as c;
use baton_core::engine::Status;
#[allow(unused_imports)]
use std::ffi::{c_char, c_int, c_void};

pub mod attr;
pub mod coll;
pub mod comm;
pub mod datatype;
pub mod dpm;
pub mod errors;
pub mod group;
pub mod handles;
pub mod info;
pub mod init;
pub mod misc;
pub mod neighbor;
pub mod ops;
pub mod p2p;
pub mod request;
pub mod rma;
pub mod state;
pub mod topo;
pub mod validate;
pub mod win;

pub use attr::*;
pub use coll::*;
pub use comm::*;
pub use dpm::*;
pub use errors::*;
pub use init::*;
pub use misc::*;
pub use neighbor::*;
pub use p2p::*;
pub use request::*;
pub use win::*;

/// `MPI_Status` of the standard ABI: three public fields and five internal ints. Baton keeps
/// the received byte count (64 bits, byte-copied because the ints are only 4-aligned) in
/// internal[0..2] and the cancelled flag in internal[2].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MPI_Status {
    pub MPI_SOURCE: c_int,
    pub MPI_TAG: c_int,
    pub MPI_ERROR: c_int,
    pub MPI_internal: [c_int; 5],
}

impl MPI_Status {
    pub fn bytes(&self) -> u64 {
        let lo = self.MPI_internal[0] as u32 as u64;
        let hi = self.MPI_internal[1] as u32 as u64;
        lo | (hi << 32)
    }
    pub fn set_bytes(&mut self, n: u64) {
        self.MPI_internal[0] = n as u32 as c_int;
        self.MPI_internal[1] = (n >> 32) as u32 as c_int;
    }
    pub fn cancelled(&self) -> bool {
        self.MPI_internal[2] != 0
    }
}

/// Writes `s` to an out-status unless it is `MPI_STATUS_IGNORE`. The MPI_ERROR field is only
/// written by the multiple-completion calls, as the standard says.
pub unsafe fn put_status(out: *mut MPI_Status, s: &Status, with_error: bool) {
    if out.is_null() {
        return;
    }
    // SAFETY: non-null status supplied by the caller.
    let o = unsafe { &mut *out };
    o.MPI_SOURCE = s.source;
    o.MPI_TAG = s.tag;
    if with_error {
        o.MPI_ERROR = s.error;
    }
    o.set_bytes(s.bytes);
    o.MPI_internal[2] = s.cancelled as c_int;
}

/// The status of an empty/inactive request: source MPI_ANY_SOURCE, tag MPI_ANY_TAG, 0 bytes.
pub fn empty_status() -> Status {
    Status { source: c::MPI_ANY_SOURCE, tag: c::MPI_ANY_TAG, error: 0, bytes: 0, cancelled: false }
}

/// The checks most hand-written entry points use, under their old names.
pub use validate::{cstr_in, cstr_out, nonnull, nonnull_mut};

/// Number of functions still answered by the generated "not implemented" stub.
pub const STUB_COUNT: &str = env!("BATON_STUB_COUNT");

include!(concat!(env!("OUT_DIR"), "/entry_points.rs"));

/// The `PMPI_` entry points generated from `abi/bindings.tsv`: argument checks
/// ([`validate`]), then the family's implementation.
mod generated {
    #[allow(unused_imports)]
    use super::{c, MPI_Status};
    #[allow(unused_imports)]
    use std::ffi::{c_char, c_int, c_void};
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
pub use generated::*;
