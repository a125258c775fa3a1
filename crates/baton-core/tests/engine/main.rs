//! Deterministic tests of the point-to-point engine: two or three `Engine`s joined by an
//! in-memory fake `Net` (per-pair FIFO rings with a capacity, a configurable eager limit and
//! frame size, and single-copy reads that either work or are refused). No processes, no threads.
//!
//! The parts: [`sim`] (the fake network, the engines around it and buffer helpers); the tests in
//! [`actions`] (the outbox of copies between processes), [`matching`] (eager messages, ordering, wildcards, contexts, truncation, cancel, synchronous
//! sends), [`rendezvous`] (remote reads, streamed data, byte-stream pieces, probe and mprobe,
//! owned sinks, request slots), [`typed`] (typed sinks and typed sends packed frame by frame),
//! [`direct`] (the blocking receive without a request) and [`coop`] (cooperative copies).

#[path = "../common/mod.rs"]
mod common;

mod actions;
mod coop;
mod direct;
mod matching;
mod offer;
mod rendezvous;
mod sim;
mod typed;

const TRUNCATE: i32 = 15;
