//! The constructor call recorded with a derived type: [`Envelope`] and its [`TypeArg`]s, what
//! `MPI_Type_get_envelope` and `MPI_Type_get_contents` give back.

use super::Layout;
use std::sync::Arc;

/// One datatype argument of a constructor, as `MPI_Type_get_contents` gives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeArg {
    /// The handle when the argument is a predefined type; 0 for a derived type (the contents
    /// call then makes a new handle for `layout`).
    pub predefined: usize,
    pub layout: Arc<Layout>,
    pub committed: bool,
}

/// The constructor call that made a derived type (`MPI_Type_get_envelope/get_contents`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub combiner: i32,
    pub ints: Vec<i32>,
    pub addrs: Vec<isize>,
    /// Large counts: every count and displacement argument of a `_c` constructor.
    pub counts: Vec<i64>,
    pub types: Vec<TypeArg>,
    /// For the `MPI_COMBINER_F90_*` combiners, the predefined type this one stands for (what
    /// predefined reduction operations combine, since such a type has no datatype arguments);
    /// 0 for the other combiners.
    pub base: usize,
}

impl Layout {
    /// This layout recording `env` as the call that made it.
    pub fn with_envelope(mut self, env: Envelope) -> Layout {
        self.envelope = Some(Arc::new(env));
        self
    }
}
