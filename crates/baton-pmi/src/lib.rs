//! Baton's bootstrap protocol ("PMI"): how MPI ranks started by `mpiexec`
//! find out who they are and exchange the addresses they need to wire up.
//!
//! * [`PmiClient`] — used by the MPI library inside each rank: reads the
//!   `BATON_*` environment, connects to the launcher, and offers
//!   put / fence / get, spawn, abort and finalize.
//! * [`server::PmiServer`] — used by `mpiexec`: accepts the ranks'
//!   connections and runs the fence collective, reporting
//!   [`server::ServerEvent`]s to the launcher.
//! * [`auth`] — the mutual HMAC-SHA256 challenge-response that every
//!   connection must pass before any frame is read; [`auth::Secret`] is the
//!   per-job key.
//! * [`wire`] — the length-prefixed frame codec and the [`wire::Msg`] set.
//! * [`reject`] — [`reject::RejectLog`], which keeps refused connections from flooding the log.
//! * [`tree`] — the messages between `mpiexec` and its per-host proxies
//!   ([`tree::TreeMsg`], [`tree::LaunchSpec`]) in multi-host jobs.
//! * [`start_singleton_server`] — starts `mpiexec --singleton-server` for a
//!   process that runs without a launcher and now needs one (to spawn).
//! * [`PmiError`] — the one error type.

pub mod auth;
mod client;
mod error;
pub mod reject;
pub mod server;
mod singleton;
pub mod tree;
pub mod wire;

pub use client::PmiClient;
pub use error::{PmiError, PmiErrorKind};
pub use singleton::start_singleton_server;
pub use wire::SpawnCmd;
