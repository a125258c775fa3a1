//! Completion entries of the [`Device`]: `Wait` and `Test` in their single, `all`, `any` and
//! `some` forms, `Request_get_status` and its `all`/`any`/`some` forms, `Cancel`, `Request_free`.
//!
//! Important types:
//! - [`Awaited`]: one request as the C boundary resolved its handle: an engine request, one that
//!   was complete from the start and holds nothing (a send that left at once), or a null or
//!   inactive persistent one.
//! - [`Completion`]: a completed request's status and the communicator handle whose error
//!   handler applies to it.
//! - [`NoSuchRequest`]: an id that names no request (a stale or forged handle), by its position
//!   in the list given.
//!
//! A completion call finds what is complete and takes it (releasing the engine requests) under
//! one engine lock; the scans that decide it ([`scan_all`], [`scan_any`], [`scan_some`]) only
//! read the engine, and are tested on their own.

use super::Device;
use crate::engine::{Engine, ReqId, Status};
use baton_abi::consts as c;

/// A request of a completion call, as the C boundary resolved it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaited {
    /// A null request, or a persistent one between rounds: complete, but not active
    /// (`MPI_Waitany` and `MPI_Waitsome` pass over it).
    Inactive,
    /// Active and complete from the start, with no engine request behind it.
    Done,
    /// An engine request.
    Request(ReqId),
}

impl Awaited {
    /// Whether the request is active: what `MPI_Waitany` and `MPI_Waitsome` report.
    #[inline]
    pub fn active(self) -> bool {
        !matches!(self, Awaited::Inactive)
    }

    /// Complete (true), still open (false), or None when the id names no request.
    #[inline]
    fn complete_in(self, engine: &Engine) -> Option<bool> {
        match self {
            Awaited::Request(id) => engine.get(id).map(|r| r.complete),
            _ => Some(true),
        }
    }
}

/// A completed request's status and the application's communicator handle recorded with it
/// (0 when none: the caller's default applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub status: Status,
    pub comm: usize,
}

/// The request at this position of the list given names no request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoSuchRequest(pub usize);

/// The status of a request with nothing to report: source `MPI_ANY_SOURCE`, tag `MPI_ANY_TAG`,
/// no bytes, no error.
pub const EMPTY: Status =
    Status { source: c::MPI_ANY_SOURCE, tag: c::MPI_ANY_TAG, error: 0, bytes: 0, cancelled: false };

/// Whether every request of `reqs` is complete. Those before `*first_open` were found complete
/// by an earlier scan and stay so (only their owner releases them), so each scan starts at the
/// first that was not, and waiting on n requests costs O(n) checks in all, not per poll.
pub fn scan_all(engine: &Engine, reqs: &[Awaited], first_open: &mut usize) -> Result<bool, NoSuchRequest> {
    while let Some(&a) = reqs.get(*first_open) {
        match a.complete_in(engine) {
            Some(true) => *first_open += 1,
            Some(false) => return Ok(false),
            None => return Err(NoSuchRequest(*first_open)),
        }
    }
    Ok(true)
}

/// The first active request of `reqs` that is complete, if any.
pub fn scan_any(engine: &Engine, reqs: &[Awaited]) -> Result<Option<usize>, NoSuchRequest> {
    let mut found = None;
    for (i, &a) in reqs.iter().enumerate() {
        match a.complete_in(engine) {
            None => return Err(NoSuchRequest(i)),
            Some(true) if found.is_none() && a.active() => found = Some(i),
            _ => {}
        }
    }
    Ok(found)
}

/// Every active request of `reqs` that is complete, in order.
pub fn scan_some(engine: &Engine, reqs: &[Awaited]) -> Result<Vec<usize>, NoSuchRequest> {
    let mut found = Vec::new();
    for (i, &a) in reqs.iter().enumerate() {
        match a.complete_in(engine) {
            None => return Err(NoSuchRequest(i)),
            Some(true) if a.active() => found.push(i),
            _ => {}
        }
    }
    Ok(found)
}

/// Takes the result of `a`, known to be complete, releasing its engine request.
fn take(engine: &mut Engine, a: Awaited) -> Completion {
    let (status, comm) = match a {
        Awaited::Request(id) => engine.take_status(id).unwrap_or((EMPTY, 0)),
        _ => (EMPTY, 0),
    };
    Completion { status, comm }
}

impl Device {
    /// `MPI_Wait`: waits for `a` and takes its result.
    pub fn wait_one(&self, a: Awaited) -> Result<Completion, NoSuchRequest> {
        let Awaited::Request(id) = a else { return Ok(Completion { status: EMPTY, comm: 0 }) };
        self.block(|st| match st.engine.get(id) {
            None => Some(Err(NoSuchRequest(0))),
            Some(q) if q.complete => Some(Ok(take(&mut st.engine, a))),
            Some(_) => None,
        })
    }

    /// `MPI_Test`: one progress pass, then `a`'s result if it is complete.
    pub fn test_one(&self, a: Awaited) -> Result<Option<Completion>, NoSuchRequest> {
        self.test_all(std::slice::from_ref(&a)).map(|got| got.map(|mut v| v.swap_remove(0)))
    }

    /// `MPI_Waitall`: waits for every request of `reqs` and takes their results, in order.
    pub fn wait_all(&self, reqs: &[Awaited]) -> Result<Vec<Completion>, NoSuchRequest> {
        let mut first_open = 0;
        self.block(|st| match scan_all(&st.engine, reqs, &mut first_open) {
            Ok(true) => Some(Ok(reqs.iter().map(|&a| take(&mut st.engine, a)).collect())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        })
    }

    /// `MPI_Testall`: one progress pass, then every result if all of `reqs` are complete.
    pub fn test_all(&self, reqs: &[Awaited]) -> Result<Option<Vec<Completion>>, NoSuchRequest> {
        self.poll();
        let mut st = self.lock();
        let all = scan_all(&st.engine, reqs, &mut 0)?;
        Ok(all.then(|| reqs.iter().map(|&a| take(&mut st.engine, a)).collect()))
    }

    /// `MPI_Waitany`: waits until an active request of `reqs` is complete and takes its result.
    /// None when none is active.
    pub fn wait_any(&self, reqs: &[Awaited]) -> Result<Option<(usize, Completion)>, NoSuchRequest> {
        if !reqs.iter().any(|a| a.active()) {
            return Ok(None);
        }
        self.block(|st| match scan_any(&st.engine, reqs) {
            Ok(Some(i)) => Some(Ok(Some((i, take(&mut st.engine, reqs[i]))))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
    }

    /// `MPI_Testany`: one progress pass, then the result of an active request of `reqs` that is
    /// complete, if any.
    pub fn test_any(&self, reqs: &[Awaited]) -> Result<Option<(usize, Completion)>, NoSuchRequest> {
        self.poll();
        let mut st = self.lock();
        Ok(scan_any(&st.engine, reqs)?.map(|i| (i, take(&mut st.engine, reqs[i]))))
    }

    /// `MPI_Waitsome`: waits until an active request of `reqs` is complete, then takes the
    /// results of all those that are. Empty when none is active.
    pub fn wait_some(&self, reqs: &[Awaited]) -> Result<Vec<(usize, Completion)>, NoSuchRequest> {
        if !reqs.iter().any(|a| a.active()) {
            return Ok(Vec::new());
        }
        self.block(|st| match scan_some(&st.engine, reqs) {
            Ok(got) if got.is_empty() => None,
            Ok(got) => Some(Ok(got.into_iter().map(|i| (i, take(&mut st.engine, reqs[i]))).collect())),
            Err(e) => Some(Err(e)),
        })
    }

    /// `MPI_Testsome`: one progress pass, then the results of the active requests of `reqs`
    /// that are complete.
    pub fn test_some(&self, reqs: &[Awaited]) -> Result<Vec<(usize, Completion)>, NoSuchRequest> {
        self.poll();
        let mut st = self.lock();
        let got = scan_some(&st.engine, reqs)?;
        Ok(got.into_iter().map(|i| (i, take(&mut st.engine, reqs[i]))).collect())
    }

    /// `MPI_Request_get_status`: one progress pass, then `a`'s status if it is complete, without
    /// taking it.
    pub fn request_status(&self, a: Awaited) -> Result<Option<Status>, NoSuchRequest> {
        self.poll();
        let Awaited::Request(id) = a else { return Ok(Some(EMPTY)) };
        let st = self.lock();
        let q = st.engine.get(id).ok_or(NoSuchRequest(0))?;
        Ok(q.complete.then_some(q.status))
    }

    /// `MPI_Request_get_status_all`, `_any` and `_some`: one progress pass, then the result of
    /// every request of `reqs` that is complete (None for those still open), without taking
    /// any. A request that is not active has the empty status.
    pub fn request_statuses(&self, reqs: &[Awaited]) -> Result<Vec<Option<Completion>>, NoSuchRequest> {
        self.poll();
        let st = self.lock();
        let peek = |(i, &a): (usize, &Awaited)| match a {
            Awaited::Request(id) => {
                let q = st.engine.get(id).ok_or(NoSuchRequest(i))?;
                Ok(q.complete.then_some(Completion { status: q.status, comm: q.comm }))
            }
            _ => Ok(Some(Completion { status: EMPTY, comm: 0 })),
        };
        reqs.iter().enumerate().map(peek).collect()
    }

    /// `MPI_Request_free` of engine request `id`: an active operation goes on and is dropped
    /// when it completes. False when `id` names no request.
    pub fn free_request(&self, id: ReqId) -> bool {
        let mut st = self.lock();
        let known = st.engine.get(id).is_some();
        st.engine.release(id);
        known
    }

    /// `MPI_Cancel` of engine request `id`: a receive not matched yet is cancelled; a send
    /// completes normally (the standard deprecates cancelling sends, and `MPI_Test_cancelled`
    /// then reports false). False when `id` names no request.
    pub fn cancel(&self, id: ReqId) -> bool {
        let mut st = self.lock();
        if st.engine.get(id).is_none() {
            return false;
        }
        let crate::runtime::State { engine, fabric, .. } = &mut *st;
        engine.cancel_recv(fabric, id);
        true
    }

    /// A request that is complete from the start with `status` (`MPI_Comm_idup`, operations
    /// with `MPI_PROC_NULL`).
    pub fn finished_request(&self, status: Status) -> ReqId {
        self.lock().engine.completed(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine holding `n` open requests (completed by the test with `engine.complete`).
    fn open(n: usize) -> (Engine, Vec<ReqId>) {
        let mut engine = Engine::new();
        let ids = (0..n).map(|_| engine.external(0)).collect();
        (engine, ids)
    }

    fn done(engine: &mut Engine, id: ReqId, tag: i32) {
        engine.complete(id, Status { tag, ..EMPTY });
    }

    /// A request id no request has: a slot never handed out.
    const STALE: ReqId = ReqId { idx: 1000, gen: 0 };

    #[test]
    fn all_resumes_at_the_first_open_request() {
        let (mut engine, ids) = open(3);
        let reqs: Vec<Awaited> = ids.iter().map(|&id| Awaited::Request(id)).collect();
        let mut first_open = 0;
        assert_eq!(scan_all(&engine, &reqs, &mut first_open), Ok(false));
        assert_eq!(first_open, 0);
        done(&mut engine, ids[0], 1);
        done(&mut engine, ids[2], 3);
        assert_eq!(scan_all(&engine, &reqs, &mut first_open), Ok(false));
        assert_eq!(first_open, 1, "stops at the first open one");
        done(&mut engine, ids[1], 2);
        assert_eq!(scan_all(&engine, &reqs, &mut first_open), Ok(true));
        assert_eq!(first_open, 3);
    }

    #[test]
    fn all_counts_inactive_and_done_entries_as_complete() {
        let (mut engine, ids) = open(1);
        let reqs = [Awaited::Inactive, Awaited::Done, Awaited::Request(ids[0])];
        assert_eq!(scan_all(&engine, &reqs, &mut 0), Ok(false));
        done(&mut engine, ids[0], 0);
        assert_eq!(scan_all(&engine, &reqs, &mut 0), Ok(true));
        assert_eq!(scan_all(&engine, &[], &mut 0), Ok(true));
    }

    #[test]
    fn a_stale_id_is_reported_by_its_position() {
        let (mut engine, ids) = open(1);
        done(&mut engine, ids[0], 0);
        let reqs = [Awaited::Request(ids[0]), Awaited::Done, Awaited::Request(STALE)];
        assert_eq!(scan_all(&engine, &reqs, &mut 0), Err(NoSuchRequest(2)));
        assert_eq!(scan_any(&engine, &reqs), Err(NoSuchRequest(2)));
        assert_eq!(scan_some(&engine, &reqs), Err(NoSuchRequest(2)));
        // A released request's id is stale too (its slot's generation moved on).
        engine.release(ids[0]);
        assert_eq!(scan_any(&engine, &reqs[..1]), Err(NoSuchRequest(0)));
    }

    #[test]
    fn any_and_some_pass_over_inactive_requests() {
        let (mut engine, ids) = open(3);
        let reqs = [
            Awaited::Inactive,
            Awaited::Request(ids[0]),
            Awaited::Request(ids[1]),
            Awaited::Inactive,
            Awaited::Request(ids[2]),
        ];
        assert_eq!(scan_any(&engine, &reqs), Ok(None));
        assert_eq!(scan_some(&engine, &reqs), Ok(vec![]));
        done(&mut engine, ids[2], 0);
        assert_eq!(scan_any(&engine, &reqs), Ok(Some(4)));
        done(&mut engine, ids[1], 0);
        assert_eq!(scan_any(&engine, &reqs), Ok(Some(2)), "the first complete one");
        assert_eq!(scan_some(&engine, &reqs), Ok(vec![2, 4]));
        // A send that was complete from the start is active, and complete.
        assert_eq!(scan_any(&engine, &[Awaited::Inactive, Awaited::Done]), Ok(Some(1)));
    }

    #[test]
    fn taking_a_result_releases_its_request() {
        let (mut engine, ids) = open(1);
        engine.get_mut(ids[0]).unwrap().comm = 0x44;
        done(&mut engine, ids[0], 7);
        let got = take(&mut engine, Awaited::Request(ids[0]));
        assert_eq!(got, Completion { status: Status { tag: 7, ..EMPTY }, comm: 0x44 });
        assert!(engine.get(ids[0]).is_none());
        assert_eq!(take(&mut engine, Awaited::Done), Completion { status: EMPTY, comm: 0 });
    }
}
