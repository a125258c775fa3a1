//! Derived datatypes at the C boundary, by role:
//! - [`ctor`]: the constructors, `MPI_Type_commit`, `MPI_Type_free`, the Fortran 90 kinds and
//!   the lookups of predefined types;
//! - [`query`]: size, extents, envelope and contents;
//! - [`pack`]: packing, native and `external32`;
//! - [`names`]: names and attributes;
//! - [`hold`]: handles kept valid past `MPI_Type_free` for the user reductions in flight.
//!
//! The entry points are generated (`abi/bindings.tsv`): each family's `int` and `_c` (and `_x`)
//! forms check their arguments through `crate::validate` and call one function here, written
//! over 64-bit counts. The forms differ only in how a constructor's arguments are recorded for
//! `MPI_Type_get_contents` (the `_c` forms record counts and displacements as large counts).

pub mod ctor;
pub mod hold;
pub mod names;
pub mod pack;
pub mod query;

use crate::validate::Dt;
use baton_core::datatype::TypeArg;

/// A datatype argument of a constructor, recorded for `MPI_Type_get_contents`.
fn type_arg(dt: &Dt) -> TypeArg {
    TypeArg { predefined: if dt.is_predefined() { dt.handle } else { 0 }, layout: dt.arc(), committed: dt.committed() }
}
