//! Deterministic tests of every collective algorithm, without processes or threads: one
//! `Engine` per rank, an in-memory network between them, one `Comm` per rank over a shared
//! group, and a driver that advances every rank's schedules in turn, delivering frames, until
//! all complete (or reports a deadlock: which ranks, which round, which messages).
//!
//! Results are checked against values computed here from rank and index alone, whole buffers
//! at a time, so stray writes show up as well as wrong values. Three wire settings cover the
//! protocols: everything eager; a small eager limit with single-copy reads (`Rts`, read,
//! `Fin`); and a small eager limit with reads refused, small frames and short rings (`Rts`,
//! `Cts`, `Data` frames, and sends queued behind full rings). Buffers are the schedule-owned
//! kind (`Region::Scratch`), contiguous application memory, strided application memory
//! (packed and unpacked on the way), or a mix of the three across ranks. Consecutive cases
//! take the combinations of wire and memory in turn, and the largest size of each case runs
//! on every wire, so every algorithm meets every protocol. The driver's choices (rank order,
//! delivery bursts) come from a seed printed with each case, so any failure replays exactly.
//!
//! The parts: [`sim`] (the network and the driver), [`buffers`] (test buffers and their
//! contents), [`ops`] (the reductions and their expected results), [`matrix`] (which cases
//! run on which wire and memory); the tests in [`rooted`] (bcast, reduce, gather, scatter),
//! [`symmetric`] (barrier, allreduce, allgather, alltoall, reduce-scatter, scan) and
//! [`schedules`] (the schedule engine and the driver themselves).

#[path = "../common/mod.rs"]
mod common;

mod buffers;
mod matrix;
mod ops;
mod rooted;
mod schedules;
mod sim;
mod symmetric;

/// Communicator sizes every algorithm runs on: all small ones, powers of two and their
/// neighbours (folding, partial last rows of the mesh).
const NS: [usize; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17];
const CTX: u64 = 0x0c0f_fee0_0000_0000;
/// "A few KiB": bytes of a block or buffer, elements of a reduction, elements per rank of a
/// reduce-scatter.
const BIG_BYTES: usize = 3001;
const BIG_ELEMS: usize = 320;
const BIG_BLOCK: usize = 100;
