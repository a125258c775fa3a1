//! Transports: the only crate besides the C boundary that holds `unsafe` code.
//!
//! The vocabulary follows UCX: a *memory domain* is where bytes live ([`mem::UserBuf`], a span of
//! the application's memory, and [`shm::Segment`], the job's shared mapping); an *interface* is a
//! way to move bytes ([`shm::Ring`] for queued frames, [`cma`] for single-copy reads of another
//! process's memory); an *endpoint* is one peer reached through an interface (owned by the
//! runtime in `baton-core`, which opens them on first use).
//!
//! - [`frame`]: the fixed frame header every transport carries.
//! - [`shm`]: the per-job segment: per-pair lock-free rings and per-process doorbells.
//! - [`cma`]: `process_vm_readv`, detected at run time; vectored forms for derived datatypes.
//! - [`region`]: [`region::Region`], a memfd mapping that peers on the host open through
//!   `/proc/<pid>/fd` (the memory of windows Baton allocates).
//! - [`atomic`]: hardware atomics on a [`mem::UserBuf`]'s elements, and [`atomic::ShmLock`], a
//!   reader-writer lock in one word of shared memory.
//! - [`stream`]: frames over byte streams (TCP) between hosts: split send / receive halves, a
//!   checked header codec, epoll.
//! - [`wait`]: futex-based sleeping, used after a spin phase.

pub mod atomic;
pub mod cma;
pub mod coop;
pub mod frame;
pub mod inbox;
pub mod mem;
pub mod region;
pub mod shm;
pub mod stream;
pub mod sys;
pub mod wait;
