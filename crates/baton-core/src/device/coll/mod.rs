//! Collectives at the device layer: one entry per MPI collective (`Device::bcast`,
//! `Device::allreduce`, ...), each taking the decoded arguments and doing the rest, in this
//! order:
//!
//! 1. the checks that need the communicator: roots, the `MPI_IN_PLACE` rules, block sizes that
//!    must agree, and which arguments are significant at this process ([`Arg`]);
//! 2. for a blocking barrier, bcast, reduce, allreduce, allgather or alltoall, the
//!    communicator's shared-memory area ([`Mpi::attach_shm`](crate::runtime::Mpi::attach_shm),
//!    once per communicator; every member calls it at the same point, and a call whose
//!    arguments fail the checks has no effect, that exchange included);
//! 3. the algorithm, from [`algo::choose`], the one place that decides (and that fails the call
//!    when a forced algorithm cannot serve it and `BATON_COLL_FALLBACK=error`), through
//!    [`choose`], which keeps persistent collectives off the shared-memory area;
//! 4. a blocking call whose algorithm is shared memory, on contiguous data, runs that protocol
//!    directly ([`ShmColl::run_blocking`]): building a schedule would cost more than the
//!    collective itself. Anything else becomes a [`Schedule`], run in the call's [`Form`].
//!
//! Files by family: `rooted` (bcast, gather, scatter and their `v` forms), `reduce` (reduce,
//! allreduce, the scans, reduce-scatter), `all` (barrier, allgather, alltoall and their `v` and
//! `w` forms), `neighbor` (the neighbourhood collectives).
//!
//! Important types: [`Call`] (where and how a collective was called), [`Arg`] and [`Lazy`]
//! (arguments significant at some processes only), [`Neighborhood`] (a process's neighbours in
//! a topology).

mod all;
mod neighbor;
mod reduce;
mod rooted;

pub use neighbor::Neighborhood;

use super::{Buffer, Device, Form, Persistent, Started};
use crate::coll::algo::{self, Algo, Coll, Shape};
use crate::coll::inter::Root;
use crate::coll::schedule::{Loc, Schedule};
use crate::comm::Comm;
use crate::err;
use crate::error::{MpiError, Result};
use crate::shm_coll::{ShmColl, ShmKind};
use baton_abi::consts as c;
use std::sync::{Arc, Mutex};

/// Where and how a collective was called.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub comm: &'a Arc<Comm>,
    /// The application's handle of `comm`: a nonblocking call's request keeps it, so that its
    /// errors go to that communicator's handler.
    pub handle: usize,
    pub form: Form,
    /// Whether the process runs at `MPI_THREAD_MULTIPLE`, which keeps communicators other than
    /// the world off shared-memory areas (see `Mpi::attach_shm`).
    pub thread_multiple: bool,
}

/// An argument as the C boundary decoded it, or why it could not (a bad datatype, a negative
/// count), for an argument significant at most processes: an entry reports the error only
/// where the argument is significant (an intercommunicator's root gives no data to gather).
pub type Arg<T> = Result<T>;

/// An argument significant at a few processes only (a gather's receive buffer: at its root),
/// which the C boundary decodes when the entry asks: elsewhere it may be anything (`NULL`,
/// `MPI_DATATYPE_NULL`), and decoding it would cost time and an error message for nothing.
pub trait Lazy<T>: FnOnce() -> Result<T> {}

impl<T, F: FnOnce() -> Result<T>> Lazy<T> for F {}

/// Per-rank blocks of a buffer argument.
enum Blocks {
    /// Equal blocks end to end in one buffer, whose count covers them all (the regular forms).
    Even(Buffer),
    /// A buffer per rank (the `v` and `w` forms).
    Each(Vec<Buffer>),
}

impl Blocks {
    /// The blocks as windows of `s`: `n` of them for [`Blocks::Even`].
    fn locs(&self, s: &mut Schedule, n: usize) -> Vec<Loc> {
        match self {
            Blocks::Even(b) => blocks(b.region(s), n, even(b, n)),
            Blocks::Each(v) => v.iter().map(|b| b.region(s)).collect(),
        }
    }
}

/// Bytes of each of `n` equal blocks of `b` (none when `n` is 0).
#[inline]
fn even(b: &Buffer, n: usize) -> usize {
    b.bytes() / n.max(1)
}

/// `n` consecutive blocks of `b` bytes of a window.
fn blocks(whole: Loc, n: usize, b: usize) -> Vec<Loc> {
    (0..n).map(|i| whole.at(i * b, b)).collect()
}

/// The algorithm for a call of `coll` ([`algo::choose`]), except that a persistent collective
/// never runs through the shared-memory area: its requests match by their initialization and
/// the processes may start them in different orders, while the area orders its steps by start
/// (see [`Schedule::untagged`]). It runs what [`algo::choose`] picks without an area, over
/// messages whose tag it drew at initialization, whatever `BATON_COLL_<NAME>` forces (the area
/// cannot serve the form at all, so this is no fallback to report).
#[inline]
fn choose(at: &Call, coll: Coll, call: &str, sh: Shape) -> Result<Algo> {
    let a = algo::choose(coll, call, sh)?;
    Ok(if a == Algo::Shm && at.form == Form::Persistent { algo::auto(coll, &Shape { shm: false, ..sh }) } else { a })
}

fn sched(at: &Call, call: &'static str) -> Schedule {
    Schedule::new(at.comm.clone(), call)
}

/// The schedule of a call whose algorithm is `a`: one through the shared-memory area sends no
/// message and takes no tag (see [`Schedule::untagged`]).
fn sched_for(at: &Call, call: &'static str, a: Algo) -> Schedule {
    match (a, at.comm.shm.get()) {
        (Algo::Shm, Some(_)) => Schedule::untagged(at.comm.clone(), call),
        _ => sched(at, call),
    }
}

#[inline]
fn check_root(call: &str, comm: &Comm, root: i32) -> Result<()> {
    let n = comm.size();
    if !(0..n).contains(&root) {
        return Err(err!(MPI_ERR_ROOT, "{call}: root {root} is out of range for a communicator of size {n}"));
    }
    Ok(())
}

/// What a rooted collective's `root` makes of this process on intercommunicator `comm`.
#[inline]
fn inter_root(call: &str, comm: &Comm, root: i32) -> Result<Root> {
    let n = comm.peer_size();
    match root {
        c::MPI_ROOT => Ok(Root::Me),
        c::MPI_PROC_NULL => Ok(Root::Idle),
        r if (0..n).contains(&r) => Ok(Root::Remote(r)),
        r => Err(err!(
            MPI_ERR_ROOT,
            "{call}: root {r} on an intercommunicator is neither MPI_ROOT, MPI_PROC_NULL nor a rank of the remote group (size {n})"
        )),
    }
}

/// The standard has no `MPI_IN_PLACE` on intercommunicators.
#[inline]
fn no_in_place(call: &str, comm: &Comm, what: &str, in_place: bool) -> Result<()> {
    if comm.is_inter() && in_place {
        return Err(err!(
            MPI_ERR_BUFFER,
            "{call}: MPI_IN_PLACE is not allowed on an intercommunicator ({what} buffer)"
        ));
    }
    Ok(())
}

fn in_place_at_root(call: &str) -> MpiError {
    err!(MPI_ERR_BUFFER, "{call}: MPI_IN_PLACE is only valid at the root")
}

#[inline]
fn same_size(call: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(err!(
            MPI_ERR_TRUNCATE,
            "{call}: the send buffer holds {got} bytes where the receive block holds {want} (type signatures differ)"
        ));
    }
    Ok(())
}

/// The prefix reductions have no meaning across two groups.
#[inline]
fn require_intra(call: &str, comm: &Comm) -> Result<()> {
    if comm.is_inter() {
        return Err(err!(MPI_ERR_COMM, "{call}: comm is an intercommunicator; this call needs an intracommunicator"));
    }
    Ok(())
}

/// The communicator's area when a blocking call's algorithm is shared memory (a communicator of
/// one process, which every algorithm serves, has none).
#[inline]
fn direct<'c>(at: &Call<'c>, a: Algo) -> Option<&'c ShmColl> {
    if a != Algo::Shm || at.form != Form::Blocking {
        return None;
    }
    at.comm.shm.get().map(|sh| &**sh)
}

impl Device {
    /// Gives a blocking call's communicator its shared-memory area, if it can have one.
    #[inline]
    fn attach(&self, at: &Call) {
        if at.form == Form::Blocking {
            self.attach_shm(at.comm, at.thread_multiple);
        }
    }

    /// Runs schedule `s` in the call's form: to the end, in the background behind a new
    /// request, or kept for `MPI_Start`.
    fn in_form(&self, at: &Call, mut s: Schedule) -> Result<Started> {
        if at.form != Form::Blocking {
            s.nonblocking();
        }
        Ok(match at.form {
            Form::Blocking => {
                s.run(self.runtime())?;
                Started::Done
            }
            Form::Nonblocking => Started::Request(self.start_coll(Arc::new(Mutex::new(s)), at.handle)),
            Form::Persistent => Started::Persistent(Persistent::Coll(Arc::new(Mutex::new(s)))),
        })
    }

    /// A blocking shared-memory collective without a schedule: publishes `data`, waits for what
    /// this process needs, lets `read` take it, and finishes.
    #[inline]
    fn shm_direct(
        &self,
        sh: &ShmColl,
        kind: ShmKind,
        data: Option<&[u8]>,
        read: impl FnOnce(&ShmColl, u64),
    ) -> Started {
        let seq = sh.run_blocking(self.runtime(), kind, data);
        read(sh, seq);
        sh.finish(seq);
        Started::Done
    }

    /// Allgather or alltoall through the area, from contiguous `send` to contiguous `recv`
    /// (`n` blocks of `b` bytes).
    fn blocks_direct(&self, sh: &ShmColl, kind: ShmKind, send: &Buffer, recv: &Buffer) -> Option<Started> {
        let (src, dst) = (send.contiguous()?, recv.contiguous()?);
        let n = sh.size();
        let b = even(recv, n);
        let sent = sh.published(kind, b);
        Some(self.shm_direct(sh, kind, Some(src.read(0, sent)), |sh, seq| {
            for r in 0..n {
                dst.write(r * b, sh.block(kind, r, seq, b));
            }
        }))
    }
}
