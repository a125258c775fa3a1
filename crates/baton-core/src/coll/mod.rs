//! Collectives: algorithms that build schedules, and the schedule engine that runs them.
//!
//! Important types:
//! - [`schedule::Schedule`]: one collective call as rounds of messages and local steps; run
//!   to completion by blocking calls, in the background by nonblocking ones, again and again by
//!   persistent ones.
//! - [`algo`]: the algorithms, each a function that fills a schedule, and [`algo::Algo`], the
//!   choice among them (by size and process count, or forced by `BATON_COLL_<NAME>`).
//! - The shared-memory collectives ([`crate::shm_coll`]) are steps a schedule may contain.
//! - [`Reducer`] (from [`crate::op`]): how a reduction combines two packed vectors.

pub mod algo;
pub mod inter;
pub mod schedule;

pub use crate::op::{ReduceFn, Reducer};
