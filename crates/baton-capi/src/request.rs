//! Completion: `Wait`/`Test` and their `all`/`any`/`some` forms, persistent `Start`, `Cancel`,
//! `Request_free`, generalized requests (`Grequest_start`/`complete`), and what a status tells (`Get_count`, `Get_elements`, ...): the
//! implementations behind the entry points `abi/bindings.tsv` generates, which check the
//! arguments first.
//!
//! Here a request handle is resolved ([`Resolved`]: what the device waits for, and the persistent
//! request it belongs to) with the tables lock, released before the device waits; the waiting
//! itself is the device's ([`baton_core::device::request`]). Once a request completes, its
//! handle becomes `MPI_REQUEST_NULL`, or a persistent one inactive.

use crate::handles::{self, Kind};
use crate::state::{Lib, PersistentEntry};
use crate::validate::{Call, CountOut, Dt, Out, Requests, StatusOut, Statuses};
use crate::MPI_Status;
use baton_abi::consts as c;
use baton_core::datatype::Layout;
use baton_core::device::check_status;
use baton_core::device::{Awaited, Callbacks, Completion, Generalized, NoSuchRequest, Persistent};
use baton_core::engine::ReqId;
use baton_core::engine::Status;
use baton_core::error::{HandleKind, MpiError, Result};
use std::ffi::c_int;
use std::ffi::c_void;
use std::sync::Arc;

/// The engine slot that no request gets: it names [`SENT`].
const SENT_SLOT: u32 = (1 << 20) - 1;

/// The handle of every nonblocking send that was complete when it started (an eager message
/// that went straight into the ring). It stands for no engine request, so such a send costs no
/// slot to create nor to complete; the standard does not ask for distinct handles, and waiting
/// on it gives the empty status and `MPI_REQUEST_NULL` like any completed send.
pub const SENT: usize = handles::encode(Kind::Request, SENT_SLOT, 0);

/// The handle of engine request `id`: its slot and generation, so that no table stands between
/// `MPI_Isend` and `MPI_Wait`.
pub fn handle_of(id: ReqId) -> usize {
    if id.idx >= SENT_SLOT {
        // A million requests in flight at once: beyond what a handle can name.
        crate::errors::fatal(&MpiError::new(c::MPI_ERR_INTERN, "more than 2^20 requests are active at once"));
    }
    handles::encode(Kind::Request, id.idx, id.gen)
}

fn invalid(call: &str, h: usize) -> MpiError {
    MpiError::invalid_handle(call, "request", HandleKind::Request, h)
}

/// A request handle resolved: what the device waits for, and the handle of the persistent request
/// whose round it is, if any (made inactive, not null, on completion).
#[derive(Clone, Copy)]
struct Resolved {
    awaited: Awaited,
    persistent: Option<usize>,
}

fn resolve(l: &Lib, call: &str, h: usize) -> Result<Resolved> {
    let plain = |awaited| Ok(Resolved { awaited, persistent: None });
    if h == c::MPI_REQUEST_NULL {
        return plain(Awaited::Inactive);
    }
    if h == SENT {
        return plain(Awaited::Done);
    }
    if let Some((idx, gen)) = handles::decode(Kind::Request, h) {
        return plain(Awaited::Request(ReqId { idx, gen }));
    }
    match l.t().persistent.get(h) {
        Some(PersistentEntry { active: Some(id), .. }) => {
            Ok(Resolved { awaited: Awaited::Request(*id), persistent: Some(h) })
        }
        Some(PersistentEntry { active: None, .. }) => plain(Awaited::Inactive),
        None => Err(invalid(call, h)),
    }
}

/// Every handle of an array resolved.
struct ResolvedAll {
    /// What the device waits for, by index.
    awaited: Vec<Awaited>,
    /// (index, handle) of the rounds of persistent requests: usually none, so no allocation.
    persistent: Vec<(usize, usize)>,
}

fn resolve_all(l: &Lib, call: &str, hs: &[usize]) -> Result<ResolvedAll> {
    // Sized once: collecting through `Result` grows the list by doubling.
    let mut all = ResolvedAll { awaited: Vec::with_capacity(hs.len()), persistent: Vec::new() };
    for (i, &h) in hs.iter().enumerate() {
        let r = resolve(l, call, h)?;
        all.awaited.push(r.awaited);
        if let Some(p) = r.persistent {
            all.persistent.push((i, p));
        }
    }
    Ok(all)
}

impl ResolvedAll {
    /// [`completed`] for entry `i`, whose handle is `hs[i]`.
    fn completed(&self, l: &Lib, hs: &mut [usize], i: usize, done: &mut Completion) -> usize {
        let persistent = self.persistent.iter().find(|&&(j, _)| j == i).map(|&(_, p)| p);
        completed(l, &mut hs[i], Resolved { awaited: self.awaited[i], persistent }, done)
    }
}

/// After request `r` (handle `*h`) completed: a persistent request becomes inactive, another
/// active one `MPI_REQUEST_NULL`; a generalized one gets its status from `query_fn` and is
/// freed. Returns the communicator whose error handler applies.
fn completed(l: &Lib, h: &mut usize, r: Resolved, done: &mut Completion) -> usize {
    match r.persistent {
        Some(p) => {
            let g = {
                let mut t = l.t();
                let g = match t.persistent.get_mut(p) {
                    Some(PersistentEntry { op: Persistent::Generalized(g), .. }) => Some(g.clone()),
                    Some(e) => {
                        e.active = None;
                        None
                    }
                    None => None,
                };
                if g.is_some() {
                    t.persistent.remove(p);
                }
                g
            };
            // The callbacks run with no lock held: they may call MPI.
            if let Some(g) = g {
                *h = c::MPI_REQUEST_NULL;
                done.status = g.query();
                let rc = g.free();
                if done.status.error == 0 {
                    done.status.error = rc;
                }
            }
        }
        None if r.awaited.active() => *h = c::MPI_REQUEST_NULL,
        None => {}
    }
    if done.comm == 0 {
        c::MPI_COMM_WORLD
    } else {
        done.comm
    }
}

/// The error of a completion call that named request `hs[i]`, which is no request.
fn no_such<'a>(call: &'a str, hs: &'a [usize]) -> impl FnOnce(NoSuchRequest) -> MpiError + 'a {
    move |NoSuchRequest(i)| invalid(call, hs[i])
}

/// `MPI_Wait` (`flag` None) and `MPI_Test`.
fn wait_one(
    cx: Call,
    l: &Lib,
    request: Out<usize>,
    flag: Option<Out<c_int>>,
    status: StatusOut,
    comm_out: &mut usize,
) -> Result<()> {
    let mut h = request.get();
    let r = resolve(l, cx.name, h)?;
    let got = match flag {
        None => l.mpi.wait_one(r.awaited).map(Some),
        Some(_) => l.mpi.test_one(r.awaited),
    };
    let got = got.map_err(|_| invalid(cx.name, h))?;
    if let Some(flag) = flag {
        flag.put(got.is_some() as c_int);
    }
    let Some(mut done) = got else { return Ok(()) };
    *comm_out = completed(l, &mut h, r, &mut done);
    request.put(h);
    status.put(&done.status, false);
    check_status(cx.name, &done.status)
}

pub(crate) fn wait(cx: Call, l: &Lib, request: Out<usize>, status: StatusOut, comm_out: &mut usize) -> Result<()> {
    wait_one(cx, l, request, None, status, comm_out)
}

pub(crate) fn test(
    cx: Call,
    l: &Lib,
    request: Out<usize>,
    flag: Out<c_int>,
    status: StatusOut,
    comm_out: &mut usize,
) -> Result<()> {
    wait_one(cx, l, request, Some(flag), status, comm_out)
}

/// `MPI_ERR_IN_STATUS` when a completed request failed; its communicator's handler applies.
fn in_status<'a>(cx: Call, results: impl Iterator<Item = (&'a Completion, usize)>, comm_out: &mut usize) -> Result<()> {
    for (done, comm) in results {
        if done.status.error != 0 {
            *comm_out = comm;
            return Err(MpiError::new(
                c::MPI_ERR_IN_STATUS,
                format!("{}: at least one request failed; see the MPI_ERROR field of its status", cx.name),
            ));
        }
    }
    Ok(())
}

/// `MPI_Waitall` (`flag` None) and `MPI_Testall`.
fn wait_all(
    cx: Call,
    l: &Lib,
    hs: &mut [usize],
    flag: Option<Out<c_int>>,
    statuses: Statuses,
    comm_out: &mut usize,
) -> Result<()> {
    let rs = resolve_all(l, cx.name, hs)?;
    let mut results = match flag {
        None => l.mpi.wait_all(&rs.awaited).map_err(no_such(cx.name, hs))?,
        Some(flag) => {
            let got = l.mpi.test_all(&rs.awaited).map_err(no_such(cx.name, hs))?;
            flag.put(got.is_some() as c_int);
            match got {
                Some(r) => r,
                None => return Ok(()),
            }
        }
    };
    let mut comms = Vec::with_capacity(results.len());
    for (i, done) in results.iter_mut().enumerate() {
        comms.push(rs.completed(l, hs, i, done));
        statuses.put(i, &done.status);
    }
    in_status(cx, results.iter().zip(comms), comm_out)
}

pub(crate) fn waitall(cx: Call, l: &Lib, reqs: Requests, statuses: Statuses, at: &mut usize) -> Result<()> {
    wait_all(cx, l, reqs.handles, None, statuses, at)
}

pub(crate) fn testall(cx: Call, l: &Lib, reqs: Requests, flag: Out<c_int>, st: Statuses, at: &mut usize) -> Result<()> {
    wait_all(cx, l, reqs.handles, Some(flag), st, at)
}

/// `MPI_Waitany` (`flag` None) and `MPI_Testany`.
fn wait_any(
    cx: Call,
    l: &Lib,
    hs: &mut [usize],
    index: Out<c_int>,
    flag: Option<Out<c_int>>,
    status: StatusOut,
    comm_out: &mut usize,
) -> Result<()> {
    let rs = resolve_all(l, cx.name, hs)?;
    let none_active = !rs.awaited.iter().any(|a| a.active());
    let got = if none_active {
        None
    } else if flag.is_none() {
        l.mpi.wait_any(&rs.awaited).map_err(no_such(cx.name, hs))?
    } else {
        l.mpi.test_any(&rs.awaited).map_err(no_such(cx.name, hs))?
    };
    if let Some(flag) = flag {
        // With no active request, the call is complete too.
        flag.put((none_active || got.is_some()) as c_int);
    }
    index.put(got.as_ref().map_or(c::MPI_UNDEFINED, |&(i, _)| i as c_int));
    let done = got.map(|(i, mut done)| {
        *comm_out = rs.completed(l, hs, i, &mut done);
        done
    });
    any_status(cx.name, status, done.as_ref().map(|d| &d.status), none_active, false)
}

/// The status a `…any` call gives back: the completed request's (an error recorded in it fails
/// the call), or the empty one when no request is active (`empty_error`: its `MPI_ERROR` field
/// written too).
fn any_status(
    call: &str,
    status: StatusOut,
    done: Option<&Status>,
    none_active: bool,
    empty_error: bool,
) -> Result<()> {
    match done {
        Some(s) => {
            status.put(s, false);
            check_status(call, s)
        }
        None => {
            if none_active {
                status.put(&crate::empty_status(), empty_error);
            }
            Ok(())
        }
    }
}

pub(crate) fn waitany(
    cx: Call,
    l: &Lib,
    reqs: Requests,
    indx: Out<c_int>,
    st: StatusOut,
    at: &mut usize,
) -> Result<()> {
    wait_any(cx, l, reqs.handles, indx, None, st, at)
}

/// `MPI_Testany`: `flag` set when a request completed or none is active.
pub(crate) fn testany(
    cx: Call,
    l: &Lib,
    reqs: Requests,
    indx: Out<c_int>,
    flag: Out<c_int>,
    status: StatusOut,
    comm_out: &mut usize,
) -> Result<()> {
    wait_any(cx, l, reqs.handles, indx, Some(flag), status, comm_out)
}

/// `MPI_Waitsome` (`blocking`) and `MPI_Testsome`.
pub(crate) fn wait_some<const BLOCKING: bool>(
    cx: Call,
    l: &Lib,
    reqs: Requests,
    outcount: Out<c_int>,
    array_of_indices: &mut [c_int],
    array_of_statuses: Statuses,
    comm_out: &mut usize,
) -> Result<()> {
    let hs = reqs.handles;
    let rs = resolve_all(l, cx.name, hs)?;
    if !rs.awaited.iter().any(|a| a.active()) {
        outcount.put(c::MPI_UNDEFINED);
        return Ok(());
    }
    let got = if BLOCKING { l.mpi.wait_some(&rs.awaited) } else { l.mpi.test_some(&rs.awaited) };
    let mut got = got.map_err(no_such(cx.name, hs))?;
    let mut comms = Vec::with_capacity(got.len());
    for (k, (i, done)) in got.iter_mut().enumerate() {
        comms.push(rs.completed(l, hs, *i, done));
        array_of_indices[k] = *i as c_int;
        array_of_statuses.put(k, &done.status);
    }
    outcount.put(got.len() as c_int);
    in_status(cx, got.iter().map(|(_, d)| d).zip(comms), comm_out)
}

pub(crate) fn get_status(cx: Call, l: &Lib, request: usize, flag: Out<c_int>, status: StatusOut) -> Result<()> {
    let r = resolve(l, cx.name, request)?;
    let mut s = l.mpi.request_status(r.awaited).map_err(|_| invalid(cx.name, request))?;
    if let (Some(s), Some(g)) = (s.as_mut(), r.persistent.and_then(|p| generalized(l, p))) {
        *s = g.query();
    }
    flag.put(s.is_some() as c_int);
    if let Some(s) = s {
        status.put(&s, false);
    }
    Ok(())
}

/// The results of the requests of `hs` that are complete, without taking them (the
/// `MPI_Request_get_status_*` calls), and whether each is active.
fn peek_all(cx: Call, l: &Lib, hs: &[usize]) -> Result<(Vec<Option<Completion>>, Vec<bool>)> {
    let rs = resolve_all(l, cx.name, hs)?;
    let mut got = l.mpi.request_statuses(&rs.awaited).map_err(no_such(cx.name, hs))?;
    for &(i, p) in &rs.persistent {
        if let (Some(done), Some(g)) = (got[i].as_mut(), generalized(l, p)) {
            done.status = g.query();
        }
    }
    Ok((got, rs.awaited.iter().map(|a| a.active()).collect()))
}

/// The communicator whose error handler applies to completed request `done`.
fn comm_of(done: &Completion) -> usize {
    if done.comm == 0 {
        c::MPI_COMM_WORLD
    } else {
        done.comm
    }
}

/// `MPI_Request_get_status_all`: `flag` set when every active request is complete; then each
/// status is written (the empty one for null and inactive requests). Nothing is freed.
pub(crate) fn get_status_all(
    cx: Call,
    l: &Lib,
    _count: usize,
    array_of_requests: &[usize],
    flag: Out<c_int>,
    statuses: Statuses,
    comm_out: &mut usize,
) -> Result<()> {
    let (got, _) = peek_all(cx, l, array_of_requests)?;
    let all = got.iter().all(Option::is_some);
    flag.put(all as c_int);
    if !all {
        return Ok(());
    }
    let done: Vec<Completion> = got.into_iter().flatten().collect();
    for (i, d) in done.iter().enumerate() {
        statuses.put(i, &d.status);
    }
    in_status(cx, done.iter().map(|d| (d, comm_of(d))), comm_out)
}

/// `MPI_Request_get_status_any`: the first active request that is complete, if any (`flag`
/// also set, with index `MPI_UNDEFINED` and the empty status, when none is active). Nothing is
/// freed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn get_status_any(
    cx: Call,
    l: &Lib,
    _count: usize,
    array_of_requests: &[usize],
    indx: Out<c_int>,
    flag: Out<c_int>,
    status: StatusOut,
    comm_out: &mut usize,
) -> Result<()> {
    let (got, active) = peek_all(cx, l, array_of_requests)?;
    let found = got.iter().zip(&active).position(|(g, &a)| a && g.is_some());
    let none_active = !active.iter().any(|&a| a);
    flag.put((none_active || found.is_some()) as c_int);
    indx.put(found.map_or(c::MPI_UNDEFINED, |i| i as c_int));
    let done = found.and_then(|i| got[i]);
    if let Some(d) = &done {
        *comm_out = comm_of(d);
    }
    // With none active: the empty status, its MPI_ERROR field included (as MPI 4.1 lists it).
    any_status(cx.name, status, done.as_ref().map(|d| &d.status), none_active, true)
}

/// `MPI_Request_get_status_some`: every active request that is complete (`outcount`
/// `MPI_UNDEFINED` when none is active). Nothing is freed.
pub(crate) fn get_status_some(
    cx: Call,
    l: &Lib,
    _incount: usize,
    array_of_requests: &[usize],
    outcount: Out<c_int>,
    array_of_indices: &mut [c_int],
    array_of_statuses: Statuses,
    comm_out: &mut usize,
) -> Result<()> {
    let (got, active) = peek_all(cx, l, array_of_requests)?;
    if !active.iter().any(|&a| a) {
        outcount.put(c::MPI_UNDEFINED);
        return Ok(());
    }
    let done: Vec<(usize, Completion)> =
        got.into_iter().zip(active).enumerate().filter_map(|(i, (g, a))| g.filter(|_| a).map(|d| (i, d))).collect();
    for (k, (i, d)) in done.iter().enumerate() {
        array_of_indices[k] = *i as c_int;
        array_of_statuses.put(k, &d.status);
    }
    outcount.put(done.len() as c_int);
    in_status(cx, done.iter().map(|(_, d)| (d, comm_of(d))), comm_out)
}

pub(crate) fn free(cx: Call, l: &Lib, request: Out<usize>) -> Result<()> {
    let h = request.get();
    if h == c::MPI_REQUEST_NULL {
        return Err(MpiError::invalid_handle(cx.name, "request", HandleKind::Request, h));
    }
    if h == SENT {
        // A send that was complete at its start: nothing to free.
    } else if let Some((idx, gen)) = handles::decode(Kind::Request, h) {
        if !l.mpi.free_request(ReqId { idx, gen }) {
            return Err(invalid(cx.name, h));
        }
    } else {
        if let Some(g) = generalized(l, h) {
            free_generalized(l, h, &g);
            request.put(c::MPI_REQUEST_NULL);
            return Ok(());
        }
        let p = l.t().persistent.remove(h).ok_or_else(|| invalid(cx.name, h))?;
        if let Some(id) = p.active {
            // The round in progress goes on and is dropped when it completes.
            l.mpi.free_request(id);
        }
    }
    request.put(c::MPI_REQUEST_NULL);
    Ok(())
}

pub(crate) fn cancel(cx: Call, l: &Lib, request: Out<usize>) -> Result<()> {
    let h = request.get();
    if h == c::MPI_REQUEST_NULL {
        return Err(MpiError::new(c::MPI_ERR_REQUEST, format!("{}: request is MPI_REQUEST_NULL", cx.name)));
    }
    if let Some(g) = generalized(l, h) {
        return match g.cancel() {
            0 => Ok(()),
            rc => Err(MpiError::new(rc, format!("{}: the request's cancel_fn returned error {rc}", cx.name))),
        };
    }
    if let Awaited::Request(id) = resolve(l, cx.name, h)?.awaited {
        if !l.mpi.cancel(id) {
            return Err(invalid(cx.name, h));
        }
    }
    Ok(())
}

// ----- generalized requests -----

/// The generalized request of table handle `h`, if it is one.
fn generalized(l: &Lib, h: usize) -> Option<Arc<Generalized>> {
    match l.t().persistent.get(h) {
        Some(PersistentEntry { op: Persistent::Generalized(g), .. }) => Some(g.clone()),
        _ => None,
    }
}

/// `MPI_Request_free` of generalized request `g` (handle `h`): `free_fn` runs now if it is
/// complete, else when `MPI_Grequest_complete` is called (the handle stays for that call).
fn free_generalized(l: &Lib, h: usize, g: &Generalized) {
    // The engine request is dropped when it completes, or now if it has.
    l.mpi.free_request(g.id);
    if g.mark_freed() {
        l.t().persistent.remove(h);
        g.free();
    }
}

/// The application's callbacks, called through the C ABI's function types. The pointers are
/// kept as addresses (MPI promises the functions and `extra_state` outlive the request).
struct CFns {
    query: usize,
    free: usize,
    cancel: usize,
    extra: usize,
}

type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

impl Callbacks for CFns {
    fn query(&self, status: &mut Status) -> i32 {
        if self.query == 0 {
            return c::MPI_SUCCESS;
        }
        let mut ms = MPI_Status::default();
        // SAFETY: `ms` is a local status, valid for the call.
        unsafe { crate::validate::StatusOut::new(&mut ms) }.put(status, false);
        // SAFETY: a non-null `query_fn` is the application's MPI_Grequest_query_function
        // (MPI_Grequest_start's contract), called with its extra_state and a status to fill.
        let rc = unsafe { std::mem::transmute::<usize, QueryFn>(self.query)(self.extra as *mut c_void, &mut ms) };
        *status =
            Status { source: ms.MPI_SOURCE, tag: ms.MPI_TAG, error: 0, bytes: ms.bytes(), cancelled: ms.cancelled() };
        rc
    }

    fn free(&self) -> i32 {
        if self.free == 0 {
            return c::MPI_SUCCESS;
        }
        // SAFETY: as in `query`, for the MPI_Grequest_free_function.
        unsafe { std::mem::transmute::<usize, FreeFn>(self.free)(self.extra as *mut c_void) }
    }

    fn cancel(&self, complete: bool) -> i32 {
        if self.cancel == 0 {
            return c::MPI_SUCCESS;
        }
        // SAFETY: as in `query`, for the MPI_Grequest_cancel_function.
        unsafe { std::mem::transmute::<usize, CancelFn>(self.cancel)(self.extra as *mut c_void, complete as c_int) }
    }
}

/// `MPI_Grequest_start`: an active generalized request, complete once the application calls
/// `MPI_Grequest_complete`. NULL callbacks are taken as doing nothing.
pub(crate) fn grequest_start(
    _cx: Call,
    l: &Lib,
    query_fn: *mut c_void,
    free_fn: *mut c_void,
    cancel_fn: *mut c_void,
    extra_state: *mut c_void,
    request: Out<usize>,
) -> Result<()> {
    let fns = CFns {
        query: query_fn as usize,
        free: free_fn as usize,
        cancel: cancel_fn as usize,
        extra: extra_state as usize,
    };
    let g = Arc::new(l.mpi.start_generalized(Box::new(fns)));
    let id = g.id;
    let h = l.t().persistent.insert(PersistentEntry { op: Persistent::Generalized(g), active: Some(id), comm: 0 });
    request.put(h);
    Ok(())
}

/// `MPI_Grequest_complete`: may come from any thread, and after `MPI_Request_free` (then
/// `free_fn` runs now).
pub(crate) fn grequest_complete(cx: Call, l: &Lib, request: usize) -> Result<()> {
    let g = generalized(l, request).ok_or_else(|| {
        MpiError::new(c::MPI_ERR_REQUEST, format!("{}: request {request:#x} is not a generalized request", cx.name))
    })?;
    match l.mpi.complete_generalized(&g) {
        None => {
            Err(MpiError::new(c::MPI_ERR_REQUEST, format!("{}: request {request:#x} is complete already", cx.name)))
        }
        Some(false) => Ok(()),
        Some(true) => {
            l.t().persistent.remove(request);
            match g.free() {
                0 => Ok(()),
                rc => Err(MpiError::new(rc, format!("{}: the request's free_fn returned error {rc}", cx.name))),
            }
        }
    }
}

fn start_one(cx: Call, l: &Lib, h: usize) -> Result<()> {
    // Copied out (a few reference counts): a collective's first round, which goes out now, may
    // run the application's reduction, which may call MPI.
    let (op, comm) = match l.t().persistent.get(h) {
        Some(e) if e.active.is_none() => (e.op.clone(), e.comm),
        Some(_) => {
            return Err(MpiError::new(c::MPI_ERR_REQUEST, format!("{}: request {h:#x} is already active", cx.name)))
        }
        None => {
            return Err(MpiError::new(
                c::MPI_ERR_REQUEST,
                format!("{}: request {h:#x} is not a persistent request", cx.name),
            ))
        }
    };
    let id = l.mpi.start(&op, comm)?;
    if let Some(p) = l.t().persistent.get_mut(h) {
        p.active = Some(id);
    }
    Ok(())
}

pub(crate) fn start(cx: Call, l: &Lib, request: Out<usize>) -> Result<()> {
    start_one(cx, l, request.get())
}

pub(crate) fn startall(cx: Call, l: &Lib, _count: usize, array_of_requests: &[usize]) -> Result<()> {
    array_of_requests.iter().try_for_each(|&h| start_one(cx, l, h))
}

// ----- status queries -----

/// What `MPI_Get_count` reports: whole elements of `lay`, or `MPI_UNDEFINED`.
fn count_of(s: &MPI_Status, lay: &Layout) -> i64 {
    let bytes = s.bytes();
    if lay.size == 0 {
        return if bytes == 0 { 0 } else { c::MPI_UNDEFINED as i64 };
    }
    if bytes.is_multiple_of(lay.size as u64) {
        (bytes / lay.size as u64) as i64
    } else {
        c::MPI_UNDEFINED as i64
    }
}

/// What `MPI_Get_elements` reports: basic elements of `lay`, or `MPI_UNDEFINED`.
fn elements_of(s: &MPI_Status, lay: &Layout) -> i64 {
    lay.elements_in(s.bytes()).map(|n| n as i64).unwrap_or(c::MPI_UNDEFINED as i64)
}

/// `MPI_Get_count` (`ELEMENTS` false) and `MPI_Get_elements`.
pub(crate) fn get_count<const ELEMENTS: bool>(
    _cx: Call,
    status: Out<MPI_Status>,
    datatype: Dt,
    count: CountOut,
) -> Result<()> {
    let s = status.get();
    count.put_or_undefined(if ELEMENTS { elements_of(&s, &datatype) } else { count_of(&s, &datatype) });
    Ok(())
}

pub(crate) fn set_elements(_cx: Call, status: Out<MPI_Status>, datatype: Dt, count: usize) -> Result<()> {
    let mut s = status.get();
    s.set_bytes(datatype.bytes_for_elements(count as u64));
    status.put(s);
    Ok(())
}

/// `MPI_Status_get_source` (`TAG` false) and `MPI_Status_get_tag`.
pub(crate) fn status_get<const TAG: bool>(_cx: Call, status: Out<MPI_Status>, value: Out<c_int>) -> Result<()> {
    let s = status.get();
    value.put(if TAG { s.MPI_TAG } else { s.MPI_SOURCE });
    Ok(())
}

/// `MPI_Status_set_source`, `_tag`, `_error` and `_cancelled` (`FIELD`: 0, 1, 2, 3).
pub(crate) fn status_set<const FIELD: u8>(_cx: Call, status: Out<MPI_Status>, value: c_int) -> Result<()> {
    let mut s = status.get();
    match FIELD {
        0 => s.MPI_SOURCE = value,
        1 => s.MPI_TAG = value,
        2 => s.MPI_ERROR = value,
        _ => s.MPI_internal[2] = (value != 0) as c_int,
    }
    status.put(s);
    Ok(())
}

pub(crate) fn test_cancelled(_cx: Call, status: Out<MPI_Status>, flag: Out<c_int>) -> Result<()> {
    flag.put(status.get().cancelled() as c_int);
    Ok(())
}
