//! One-sided entries: windows and the operations on them, with the origin's buffers packed here
//! (the window's protocol, [`crate::rma`], sees only packed bytes and receive sinks).

use super::{Buffer, Device};
use crate::comm::Comm;
use crate::engine::ReqId;
use crate::error::Result;
use crate::op::Op;
use crate::rma::origin::{done, Target};
use crate::rma::{Spec, Window};
use baton_abi::consts as c;
use std::sync::Arc;

fn packed(b: &Buffer) -> Vec<u8> {
    let mut v = Vec::with_capacity(b.bytes());
    b.layout.pack_from(&b.span, b.base_off, b.count, &mut v);
    v
}

/// Runs `f` on `b`'s packed bytes: the buffer itself when contiguous, else a packed copy.
fn with_packed<R>(b: &Buffer, f: impl FnOnce(&[u8]) -> R) -> R {
    match b.contiguous() {
        Some(span) => f(span.read(0, span.len())),
        None => f(&packed(b)),
    }
}

impl Device {
    /// `MPI_Win_fence`: the window's operations complete, then its members meet in the
    /// communicator's barrier (through shared memory where the members share an area).
    pub fn win_fence(&self, call: &str, win: &Window, assert: i32, thread_multiple: bool) -> Result<()> {
        win.fence_begin(self, call, assert)?;
        let at = super::coll::Call {
            comm: &win.comm,
            handle: c::MPI_COMM_NULL,
            form: super::Form::Blocking,
            thread_multiple,
        };
        self.barrier(at)?;
        win.fence_end(assert);
        Ok(())
    }

    /// `MPI_Win_create`, `MPI_Win_allocate`, `MPI_Win_create_dynamic` (collective over `comm`).
    pub fn win_create(&self, call: &str, comm: &Comm, spec: Spec) -> Result<Arc<Window>> {
        Window::create(self, call, comm, spec)
    }

    /// `MPI_Put` and `MPI_Rput` (`request`: the request, complete at once, since the data is
    /// packed and the origin buffer free when this returns).
    pub fn put(&self, call: &str, win: &Window, origin: &Buffer, t: Target, request: bool) -> Result<Option<ReqId>> {
        if t.rank != c::MPI_PROC_NULL {
            with_packed(origin, |data| win.put(self, call, t, data))?;
        }
        Ok(request.then(|| done(self)))
    }

    /// `MPI_Get` and `MPI_Rget`.
    pub fn get(&self, call: &str, win: &Window, origin: &Buffer, t: Target, request: bool) -> Result<Option<ReqId>> {
        if t.rank == c::MPI_PROC_NULL {
            return Ok(request.then(|| done(self)));
        }
        win.get(self, call, t, origin.sink(), request)
    }

    /// `MPI_Accumulate` and `MPI_Raccumulate`.
    #[allow(clippy::too_many_arguments)]
    pub fn accumulate(
        &self,
        call: &str,
        win: &Window,
        origin: &Buffer,
        t: Target,
        op: Op,
        basic: usize,
        request: bool,
    ) -> Result<Option<ReqId>> {
        if t.rank != c::MPI_PROC_NULL {
            with_packed(origin, |data| win.accumulate(self, call, t, op, basic, data))?;
        }
        Ok(request.then(|| done(self)))
    }

    /// `MPI_Get_accumulate`, `MPI_Rget_accumulate`, `MPI_Fetch_and_op`.
    #[allow(clippy::too_many_arguments)]
    pub fn get_accumulate(
        &self,
        call: &str,
        win: &Window,
        origin: &Buffer,
        result: &Buffer,
        t: Target,
        op: Op,
        basic: usize,
        request: bool,
    ) -> Result<Option<ReqId>> {
        if t.rank == c::MPI_PROC_NULL {
            return Ok(request.then(|| done(self)));
        }
        if op == Op::NoOp {
            return win.get_accumulate(self, call, t, op, basic, &[], result.sink(), request);
        }
        with_packed(origin, |data| win.get_accumulate(self, call, t, op, basic, data, result.sink(), request))
    }

    /// `MPI_Compare_and_swap`.
    pub fn compare_and_swap(
        &self,
        call: &str,
        win: &Window,
        origin: &Buffer,
        compare: &Buffer,
        result: &Buffer,
        t: Target,
    ) -> Result<()> {
        if t.rank == c::MPI_PROC_NULL {
            return Ok(());
        }
        let mut data = packed(origin);
        data.extend_from_slice(&packed(compare));
        win.compare_and_swap(self, call, t, &data, result.sink())
    }
}
