//! Collectives: algorithms that build schedules, and the schedule engine that runs them.
//!
//! Important types:
//! - [`schedule::Schedule`]: one collective call as rounds of messages and local steps; run
//!   to completion by blocking calls, in the background by nonblocking ones, again and again by
//!   persistent ones.
//! - [`algo`]: the algorithms, each a function that fills a schedule, and [`algo::Algo`], the
//!   choice among them (by size and process count, or forced by `BATON_COLL_<NAME>`).
//! - [`shm::ShmColl`]: barrier, bcast, reduce and allreduce through the shared segment.
//! - [`Reducer`]: how a reduction combines two packed vectors (a predefined op's kernel or a
//!   user function behind the C boundary).

use std::sync::Arc;

pub mod algo;
pub mod inter;
pub mod schedule;
pub mod shm;

/// `f(input, inout)`: see [`Reducer`].
pub type ReduceFn = dyn Fn(&[u8], &mut [u8]) + Send + Sync;

/// The combining function of a reduction: `f(input, inout)` sets `inout = input ∘ inout` over
/// packed elements of the reduction's datatype. `input` always holds the contributions of the
/// lower ranks, so a non-commutative operation is applied in rank order.
#[derive(Clone)]
pub struct Reducer {
    pub commutative: bool,
    /// Bytes of one element of the datatype: a reduction may be split only at multiples of it.
    pub unit: usize,
    pub f: Arc<ReduceFn>,
}

impl Reducer {
    pub fn apply(&self, input: &[u8], inout: &mut [u8]) {
        (self.f)(input, inout)
    }
}
