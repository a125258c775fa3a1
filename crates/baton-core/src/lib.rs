//! Baton's MPI core, written without `unsafe`.
//!
//! - [`engine`]: matching and protocols as a sans-IO state machine (unit-tested without processes).
//! - [`fabric`]: the engine's transports: loopback and shared-memory endpoints, opened on demand.
//! - [`runtime`]: one MPI process: bootstrap, process table, progress and waiting, internal
//!   collectives used by communicator creation and finalize.
//! - [`comm`], [`group`], [`datatype`]: the objects point-to-point communication needs;
//!   [`intercomm`]: building intercommunicators and what is made from them.
//! - [`topo`]: process topologies (grids, graphs, distributed graphs) as pure rank arithmetic.
//! - [`error`]: `MpiError`, an error class with a message naming call, argument and reason.
#![forbid(unsafe_code)]

pub mod coll;
pub mod comm;
pub mod datatype;
pub mod device;
pub mod dpm;
pub mod engine;
pub mod error;
pub mod fabric;
pub mod group;
pub mod intercomm;
pub mod names;
pub mod op;
pub mod progress;
pub mod rma;
pub mod runtime;
pub mod shm_coll;
pub mod topo;
