//! The MPI 5.0 standard ABI, generated from the tables in `abi/`.
//!
//! - [`consts`]: every predefined constant as a Rust `const` (handles as `usize`, integer
//!   constants as `i32`), generated at build time.
//! - [`data`]: the parser for the tables, used by the header generator and by `baton-capi`'s
//!   build script to emit the 664 `MPI_` and `PMPI_` entry points.
//! - [`header`]: writes `mpi.h`.
//! - [`bindings`]: the `PMPI_` entry points of the families annotated in `abi/bindings.tsv`,
//!   generated for `baton-capi`'s build script.

pub mod bindings;
pub mod data;
pub mod header;

#[allow(non_upper_case_globals, clippy::unreadable_literal)]
pub mod consts {
    include!(concat!(env!("OUT_DIR"), "/consts.rs"));
}
