//! Reduction operations: predefined ops and (later) user-defined ones, turned into the
//! [`Reducer`] the collectives apply.

use crate::p2p::dtype;
use baton_abi::consts as c;
use baton_core::coll::Reducer;
use baton_core::error::{MpiError, Result};
use baton_core::op::{self, Op};
use std::sync::Arc;

/// The reducer for op handle `oph` applied to datatype handle `dt`, checked (`MPI_ERR_OP` when
/// the op is not defined for the type).
pub(crate) fn reducer(call: &str, oph: usize, dt: usize) -> Result<Reducer> {
    if oph == c::MPI_OP_NULL {
        return Err(MpiError::new(c::MPI_ERR_OP, format!("{call}: op is MPI_OP_NULL")));
    }
    let lay = dtype(call, dt)?.clone();
    let o = Op::from_handle(oph)
        .ok_or_else(|| MpiError::new(c::MPI_ERR_OP, format!("{call}: op {oph:#x} is not a valid operation handle")))?;
    op::check(call, o, dt, lay.name)?;
    Ok(Reducer { commutative: true, unit: lay.size.max(1), f: Arc::new(move |i, io| op::apply(o, dt, i, io)) })
}
