//! Datatype handles kept valid past `MPI_Type_free` while an operation in flight still gives
//! them to application code: a user reduction's function receives the datatype handle of the
//! nonblocking or persistent collective it serves, which may run (again, at each `MPI_Start`)
//! after the application freed the type. The standard lets such operations complete normally,
//! so the handle must keep naming the same type until they are gone.
//!
//! A [`Hold`] is a claim on one handle. `MPI_Type_free` of a held handle only marks it freed
//! (the application may not use it again, but the operations holding it still see it); the
//! handle goes at the first datatype call after the last claim is dropped. Dropping a claim
//! takes no lock: claims are dropped deep inside collectives, under locks that must never wait
//! for the handle tables.

use crate::state::Lib;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A claim on a user-defined datatype handle (see the module doc).
#[derive(Clone)]
pub(crate) struct Hold {
    _claim: Arc<()>,
}

struct Claimed {
    /// Counts the claims: one reference here, one per [`Hold`].
    token: Arc<()>,
    /// `MPI_Type_free` was called while claims were alive.
    freed: bool,
}

fn claimed() -> &'static Mutex<HashMap<usize, Claimed>> {
    static C: OnceLock<Mutex<HashMap<usize, Claimed>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// A claim on user-defined datatype `h` (which the caller found live).
pub(crate) fn hold(h: usize) -> Hold {
    let mut c = claimed().lock().unwrap_or_else(|e| e.into_inner());
    let e = c.entry(h).or_insert_with(|| Claimed { token: Arc::new(()), freed: false });
    Hold { _claim: e.token.clone() }
}

/// Removes the handles that were freed while claimed and are claimed no more.
pub(crate) fn sweep(l: &Lib) {
    let mut c = claimed().lock().unwrap_or_else(|e| e.into_inner());
    if c.is_empty() {
        return;
    }
    let gone: Vec<usize> =
        c.iter().filter(|(_, e)| e.freed && Arc::strong_count(&e.token) == 1).map(|(&h, _)| h).collect();
    if gone.is_empty() {
        return;
    }
    let mut t = l.t();
    for h in gone {
        c.remove(&h);
        t.datatypes.remove(h);
    }
}

/// What `MPI_Type_free` does with handle `h`.
pub(crate) enum Release {
    /// Nothing holds it: remove it now.
    Remove,
    /// Claimed: it stays until the claims are gone.
    Kept,
    /// Already freed by the application (still claimed): freeing it again is an error.
    AlreadyFreed,
}

/// Marks `h` freed when claims on it are alive.
pub(crate) fn release(h: usize) -> Release {
    let mut c = claimed().lock().unwrap_or_else(|e| e.into_inner());
    match c.get_mut(&h) {
        None => Release::Remove,
        Some(e) if e.freed => Release::AlreadyFreed,
        Some(e) if Arc::strong_count(&e.token) > 1 => {
            e.freed = true;
            Release::Kept
        }
        Some(_) => {
            c.remove(&h);
            Release::Remove
        }
    }
}
