//! Completion: `Wait`/`Test` and their `all`/`any`/`some` forms, persistent `Start`, `Cancel`,
//! `Request_free`, and what a status tells (`Get_count`, `Get_elements`, ...).
//!
//! A request handle is resolved to engine request ids with the tables lock, released before
//! blocking, so waiting threads never hold it.

use crate::errors::{guard, guard_at};
use crate::handles::{self, Kind};
use crate::p2p::{check_status, dtype, start_persistent};
use crate::state::{lib, Lib, PersistentReq};
use crate::{empty_status, put_status, MPI_Status};
use baton_abi::consts as c;
use baton_core::engine::{ReqId, Status};
use baton_core::error::{MpiError, Result};
use baton_core::runtime::State;
use std::ffi::c_int;

/// What a request handle stands for.
#[derive(Clone, Copy)]
enum Res {
    Null,
    /// A persistent request between rounds.
    Inactive,
    /// An engine request; `persistent` is the handle of the persistent request it belongs to.
    Engine {
        id: ReqId,
        persistent: Option<usize>,
    },
    /// [`SENT`]: a send that was complete when it started.
    Sent,
}

impl Res {
    /// An active request (one that `Waitany`/`Waitsome` report), as opposed to a null or an
    /// inactive persistent one.
    fn live(&self) -> bool {
        matches!(self, Res::Engine { .. } | Res::Sent)
    }
}

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
    MpiError::new(c::MPI_ERR_REQUEST, format!("{call}: request {h:#x} is not a valid request handle"))
}

fn resolve(l: &Lib, call: &str, h: usize) -> Result<Res> {
    if h == c::MPI_REQUEST_NULL {
        return Ok(Res::Null);
    }
    if h == SENT {
        return Ok(Res::Sent);
    }
    if let Some((idx, gen)) = handles::decode(Kind::Request, h) {
        return Ok(Res::Engine { id: ReqId { idx, gen }, persistent: None });
    }
    let t = l.t();
    match t.persistent.get(h) {
        Some(PersistentReq { active: Some(id), .. }) => Ok(Res::Engine { id: *id, persistent: Some(h) }),
        Some(PersistentReq { active: None, .. }) => Ok(Res::Inactive),
        None => Err(invalid(call, h)),
    }
}

/// Every handle of an array resolved (sized once: collecting through `Result` grows the list
/// by doubling, four reallocations for a window of 64).
fn resolve_all(l: &Lib, call: &str, hs: &[usize]) -> Result<Vec<Res>> {
    let mut rs = Vec::with_capacity(hs.len());
    for &h in hs {
        rs.push(resolve(l, call, h)?);
    }
    Ok(rs)
}

/// Whether `r` is complete: None when its engine request does not exist (a stale or garbage
/// handle that happened to decode).
fn done(st: &State, r: &Res) -> Option<bool> {
    match r {
        Res::Engine { id, .. } => st.engine.get(*id).map(|q| q.complete),
        _ => Some(true),
    }
}

/// Waits until every request in `rs` is complete (or, with `any`, one of the live ones) and
/// returns the indices that are; an invalid one fails the call.
fn block_on(l: &Lib, call: &str, hs: &[usize], rs: &[Res], any: bool) -> Result<Vec<usize>> {
    // For `all`: the requests before `first_open` were complete at an earlier poll, and a
    // complete request stays so until we release it; each poll starts from the first one that
    // was not, so a window of n requests costs O(n) checks in all, not O(n) per poll.
    let mut first_open = 0;
    let found = l.mpi.block(|st| {
        if !any {
            while first_open < rs.len() && done(st, &rs[first_open]) == Some(true) {
                first_open += 1;
            }
            // The common poll finds an incomplete request: leave before allocating anything.
            if rs[first_open..].iter().any(|r| done(st, r) == Some(false)) {
                return None;
            }
        }
        // Sized once: grown by pushes it cost six reallocations per window of 64.
        let mut ready = Vec::with_capacity(if any { 1 } else { rs.len() });
        for (i, r) in rs.iter().enumerate() {
            match done(st, r) {
                None => return Some(Err(i)),
                Some(true) if !any || r.live() => ready.push(i),
                _ => {}
            }
        }
        let enough = if any { !ready.is_empty() } else { ready.len() == rs.len() };
        enough.then_some(Ok(ready))
    });
    found.map_err(|i| invalid(call, hs[i]))
}

/// Non-blocking twin of [`block_on`]: one progress pass, then what is complete.
fn poll_on(l: &Lib, call: &str, hs: &[usize], rs: &[Res]) -> Result<Vec<usize>> {
    l.mpi.poll();
    let st = l.mpi.lock();
    let mut ready = Vec::new();
    for (i, r) in rs.iter().enumerate() {
        match done(&st, r) {
            None => return Err(invalid(call, hs[i])),
            Some(true) => ready.push(i),
            Some(false) => {}
        }
    }
    Ok(ready)
}

/// Completes the requests at `idx` (all known to be done): their statuses and error-handler
/// communicators, with handles freed (persistent ones made inactive).
fn finish(l: &Lib, hs: &mut [usize], rs: &[Res], idx: &[usize]) -> Vec<(Status, usize)> {
    let mut out = Vec::with_capacity(idx.len());
    let mut persistent = Vec::new();
    {
        let mut st = l.mpi.lock();
        for &i in idx {
            match rs[i] {
                Res::Null | Res::Inactive => out.push((empty_status(), c::MPI_COMM_WORLD)),
                Res::Sent => {
                    out.push((empty_status(), c::MPI_COMM_WORLD));
                    hs[i] = c::MPI_REQUEST_NULL;
                }
                Res::Engine { id, persistent: p } => {
                    let (s, comm) = st.engine.take_status(id).unwrap_or((empty_status(), 0));
                    out.push((s, if comm == 0 { c::MPI_COMM_WORLD } else { comm }));
                    match p {
                        Some(h) => persistent.push(h),
                        None => hs[i] = c::MPI_REQUEST_NULL,
                    }
                }
            }
        }
    }
    if !persistent.is_empty() {
        let mut t = l.t();
        for h in persistent {
            if let Some(p) = t.persistent.get_mut(h) {
                p.active = None;
            }
        }
    }
    out
}

unsafe fn req_array<'a>(call: &str, n: c_int, reqs: *mut usize) -> Result<&'a mut [usize]> {
    if n < 0 {
        return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: count {n} is negative")));
    }
    if n == 0 {
        return Ok(&mut []);
    }
    crate::nonnull_mut(call, "array_of_requests", reqs)?;
    // SAFETY: the caller passes `n` request handles.
    Ok(unsafe { std::slice::from_raw_parts_mut(reqs, n as usize) })
}

unsafe fn status_at(statuses: *mut MPI_Status, i: usize) -> *mut MPI_Status {
    if statuses.is_null() {
        statuses
    } else {
        // SAFETY: the caller passes an array with an entry per request.
        unsafe { statuses.add(i) }
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Wait(request: *mut usize, status: *mut MPI_Status) -> c_int {
    guard_at(|comm| {
        let call = "MPI_Wait";
        let l = lib(call)?;
        crate::nonnull_mut(call, "request", request)?;
        // SAFETY: checked non-null.
        let hp = unsafe { &mut *request };
        let r = resolve(l, call, *hp)?;
        let (s, cm) = match r {
            Res::Engine { id, persistent } => {
                let got = l.mpi.block(|st| match st.engine.get_mut(id) {
                    None => Some(None),
                    Some(q) if q.complete => {
                        let out = (q.status, q.comm);
                        st.engine.release(id);
                        Some(Some(out))
                    }
                    Some(_) => None,
                });
                let (s, cm) = got.ok_or_else(|| invalid(call, *hp))?;
                match persistent {
                    Some(h) => {
                        if let Some(p) = l.t().persistent.get_mut(h) {
                            p.active = None;
                        }
                    }
                    None => *hp = c::MPI_REQUEST_NULL,
                }
                (s, if cm == 0 { c::MPI_COMM_WORLD } else { cm })
            }
            Res::Sent => {
                *hp = c::MPI_REQUEST_NULL;
                (empty_status(), c::MPI_COMM_WORLD)
            }
            Res::Null | Res::Inactive => (empty_status(), c::MPI_COMM_WORLD),
        };
        *comm = cm;
        // SAFETY: ignore (null) or caller-owned status.
        unsafe { put_status(status, &s, false) };
        check_status(call, &s)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Test(request: *mut usize, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    guard_at(|comm_out| {
        let call = "MPI_Test";
        let l = lib(call)?;
        crate::nonnull_mut(call, "request", request)?;
        crate::nonnull_mut(call, "flag", flag)?;
        // SAFETY: checked non-null.
        let hp = unsafe { &mut *request };
        let rs = [resolve(l, call, *hp)?];
        let ready = poll_on(l, call, std::slice::from_ref(hp), &rs)?;
        // SAFETY: checked non-null.
        unsafe { *flag = (!ready.is_empty()) as c_int };
        if !ready.is_empty() {
            let (s, comm) = finish(l, std::slice::from_mut(hp), &rs, &[0])[0];
            // SAFETY: ignore or caller-owned status.
            unsafe { put_status(status, &s, false) };
            *comm_out = comm;
            check_status(call, &s)?;
        }
        Ok(())
    })
}

fn in_status(call: &str, results: &[(Status, usize)], comm_out: &mut usize) -> Result<()> {
    match results.iter().find(|(s, _)| s.error != 0) {
        None => Ok(()),
        Some((_, comm)) => {
            *comm_out = *comm;
            Err(MpiError::new(
                c::MPI_ERR_IN_STATUS,
                format!("{call}: at least one request failed; see the MPI_ERROR field of its status"),
            ))
        }
    }
}

fn wait_all(
    call: &str,
    n: c_int,
    reqs: *mut usize,
    statuses: *mut MPI_Status,
    blocking: bool,
    flag: *mut c_int,
) -> c_int {
    guard_at(|comm_out| {
        let l = lib(call)?;
        // SAFETY: `n` handles at `reqs`, checked by req_array.
        let hs = unsafe { req_array(call, n, reqs)? };
        let rs = resolve_all(l, call, hs)?;
        let ready = if blocking {
            block_on(l, call, hs, &rs, false)?
        } else {
            crate::nonnull_mut(call, "flag", flag)?;
            let r = poll_on(l, call, hs, &rs)?;
            // SAFETY: checked non-null.
            unsafe { *flag = (r.len() == rs.len()) as c_int };
            if r.len() != rs.len() {
                return Ok(());
            }
            r
        };
        let results = finish(l, hs, &rs, &ready);
        for (i, (s, _)) in results.iter().enumerate() {
            // SAFETY: ignore or an array with an entry per request.
            unsafe { put_status(status_at(statuses, i), s, true) };
        }
        in_status(call, &results, comm_out)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Waitall(n: c_int, reqs: *mut usize, statuses: *mut MPI_Status) -> c_int {
    wait_all("MPI_Waitall", n, reqs, statuses, true, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Testall(
    n: c_int,
    reqs: *mut usize,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    wait_all("MPI_Testall", n, reqs, statuses, false, flag)
}

fn wait_any(
    call: &str,
    n: c_int,
    reqs: *mut usize,
    index: *mut c_int,
    status: *mut MPI_Status,
    blocking: bool,
    flag: *mut c_int,
) -> c_int {
    guard_at(|comm_out| {
        let l = lib(call)?;
        crate::nonnull_mut(call, "index", index)?;
        if !blocking {
            crate::nonnull_mut(call, "flag", flag)?;
        }
        // SAFETY: `n` handles at `reqs`.
        let hs = unsafe { req_array(call, n, reqs)? };
        let rs = resolve_all(l, call, hs)?;
        if !rs.iter().any(Res::live) {
            // SAFETY: checked non-null out pointers; status ignore or caller-owned.
            unsafe {
                *index = c::MPI_UNDEFINED;
                if !blocking {
                    *flag = 1;
                }
                put_status(status, &empty_status(), false);
            }
            return Ok(());
        }
        let ready: Vec<usize> = if blocking {
            block_on(l, call, hs, &rs, true)?
        } else {
            poll_on(l, call, hs, &rs)?.into_iter().filter(|&i| rs[i].live()).collect()
        };
        if !blocking {
            // SAFETY: checked non-null.
            unsafe { *flag = (!ready.is_empty()) as c_int };
        }
        let Some(&i) = ready.first() else {
            // SAFETY: checked non-null.
            unsafe { *index = c::MPI_UNDEFINED };
            return Ok(());
        };
        let (s, comm) = finish(l, hs, &rs, &[i])[0];
        // SAFETY: checked non-null; status ignore or caller-owned.
        unsafe {
            *index = i as c_int;
            put_status(status, &s, false);
        }
        *comm_out = comm;
        check_status(call, &s)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Waitany(n: c_int, reqs: *mut usize, index: *mut c_int, status: *mut MPI_Status) -> c_int {
    wait_any("MPI_Waitany", n, reqs, index, status, true, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Testany(
    n: c_int,
    reqs: *mut usize,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    wait_any("MPI_Testany", n, reqs, index, status, false, flag)
}

fn wait_some(
    call: &str,
    n: c_int,
    reqs: *mut usize,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    blocking: bool,
) -> c_int {
    guard_at(|comm_out| {
        let l = lib(call)?;
        crate::nonnull_mut(call, "outcount", outcount)?;
        // SAFETY: `n` handles at `reqs`.
        let hs = unsafe { req_array(call, n, reqs)? };
        let rs = resolve_all(l, call, hs)?;
        if !rs.iter().any(Res::live) {
            // SAFETY: checked non-null.
            unsafe { *outcount = c::MPI_UNDEFINED };
            return Ok(());
        }
        let got: Vec<usize> = if blocking {
            block_on(l, call, hs, &rs, true)?
        } else {
            poll_on(l, call, hs, &rs)?.into_iter().filter(|&i| rs[i].live()).collect()
        };
        if !got.is_empty() {
            crate::nonnull_mut(call, "array_of_indices", indices)?;
        }
        let results = finish(l, hs, &rs, &got);
        for (k, (&i, (s, _))) in got.iter().zip(results.iter()).enumerate() {
            // SAFETY: arrays sized for `n` entries by the caller.
            unsafe {
                *indices.add(k) = i as c_int;
                put_status(status_at(statuses, k), s, true);
            }
        }
        // SAFETY: checked non-null.
        unsafe { *outcount = got.len() as c_int };
        in_status(call, &results, comm_out)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Waitsome(
    n: c_int,
    reqs: *mut usize,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    wait_some("MPI_Waitsome", n, reqs, outcount, indices, statuses, true)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Testsome(
    n: c_int,
    reqs: *mut usize,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    wait_some("MPI_Testsome", n, reqs, outcount, indices, statuses, false)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Request_get_status(request: usize, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Request_get_status";
        let l = lib(call)?;
        crate::nonnull_mut(call, "flag", flag)?;
        let r = resolve(l, call, request)?;
        l.mpi.poll();
        let s = match r {
            Res::Engine { id, .. } => {
                let st = l.mpi.lock();
                let q = st.engine.get(id).ok_or_else(|| invalid(call, request))?;
                q.complete.then_some(q.status)
            }
            _ => Some(empty_status()),
        };
        // SAFETY: checked non-null; status ignore or caller-owned.
        unsafe {
            *flag = s.is_some() as c_int;
            if let Some(s) = s {
                put_status(status, &s, false);
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Request_free(request: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Request_free";
        let l = lib(call)?;
        crate::nonnull_mut(call, "request", request)?;
        // SAFETY: checked non-null.
        let h = unsafe { *request };
        match resolve(l, call, h)? {
            Res::Null => return Err(MpiError::new(c::MPI_ERR_REQUEST, format!("{call}: request is MPI_REQUEST_NULL"))),
            Res::Sent => {}
            Res::Engine { id, persistent: None } => {
                let mut st = l.mpi.lock();
                st.engine.get(id).ok_or_else(|| invalid(call, h))?;
                // An active operation goes on and is dropped when it completes.
                st.engine.release(id);
            }
            Res::Engine { persistent: Some(_), .. } | Res::Inactive => {
                let p = l.t().persistent.remove(h).ok_or_else(|| invalid(call, h))?;
                if let Some(id) = p.active {
                    l.mpi.lock().engine.release(id);
                }
            }
        }
        // SAFETY: checked non-null.
        unsafe { *request = c::MPI_REQUEST_NULL };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cancel(request: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Cancel";
        let l = lib(call)?;
        crate::nonnull_mut(call, "request", request)?;
        // SAFETY: checked non-null.
        let h = unsafe { *request };
        if let Res::Engine { id, .. } = resolve(l, call, h)? {
            let mut st = l.mpi.lock();
            st.engine.get(id).ok_or_else(|| invalid(call, h))?;
            // Receives not yet matched are cancelled; sends always complete normally (the
            // standard deprecates cancelling them), so Test_cancelled reports false for them.
            st.engine.cancel_recv(id);
        }
        Ok(())
    })
}

fn start_one(l: &Lib, h: usize) -> Result<()> {
    let (op, coll, comm) = match l.t().persistent.get(h) {
        Some(PersistentReq { op, coll, active: None, comm }) => (op.clone(), coll.clone(), *comm),
        Some(_) => {
            return Err(MpiError::new(c::MPI_ERR_REQUEST, format!("MPI_Start: request {h:#x} is already active")))
        }
        None => {
            return Err(MpiError::new(
                c::MPI_ERR_REQUEST,
                format!("MPI_Start: request {h:#x} is not a persistent request"),
            ))
        }
    };
    let id = match coll {
        Some(sched) => {
            sched.lock().unwrap_or_else(|e| e.into_inner()).restart();
            l.mpi.start_coll(sched, comm)
        }
        None => start_persistent(l, &op)?,
    };
    if let Some(p) = l.t().persistent.get_mut(h) {
        p.active = Some(id);
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Start(request: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let l = lib("MPI_Start")?;
        crate::nonnull_mut("MPI_Start", "request", request)?;
        // SAFETY: checked non-null.
        start_one(l, unsafe { *request })
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Startall(n: c_int, reqs: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let l = lib("MPI_Startall")?;
        // SAFETY: `n` handles at `reqs`.
        let hs = unsafe { req_array("MPI_Startall", n, reqs)? };
        for &h in hs.iter() {
            start_one(l, h)?;
        }
        Ok(())
    })
}

// ----- status queries -----

fn status_ref<'a>(call: &str, s: *const MPI_Status) -> Result<&'a MPI_Status> {
    crate::nonnull(call, "status", s)?;
    // SAFETY: non-null caller-owned status.
    Ok(unsafe { &*s })
}

fn get_count(call: &str, s: *const MPI_Status, dt: usize) -> Result<i64> {
    let s = status_ref(call, s)?;
    let lay = dtype(call, dt)?;
    let bytes = s.bytes();
    if lay.size == 0 {
        return Ok(if bytes == 0 { 0 } else { c::MPI_UNDEFINED as i64 });
    }
    Ok(if bytes % lay.size as u64 == 0 { (bytes / lay.size as u64) as i64 } else { c::MPI_UNDEFINED as i64 })
}

fn clamp_int(v: i64) -> c_int {
    if v > c_int::MAX as i64 {
        c::MPI_UNDEFINED
    } else {
        v as c_int
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_count(s: *mut MPI_Status, dt: usize, count: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        crate::nonnull_mut("MPI_Get_count", "count", count)?;
        let v = get_count("MPI_Get_count", s, dt)?;
        // SAFETY: checked non-null.
        unsafe { *count = clamp_int(v) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_count_c(s: *mut MPI_Status, dt: usize, count: *mut i64) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        crate::nonnull_mut("MPI_Get_count_c", "count", count)?;
        let v = get_count("MPI_Get_count_c", s, dt)?;
        // SAFETY: checked non-null.
        unsafe { *count = v };
        Ok(())
    })
}

fn get_elements(call: &str, s: *const MPI_Status, dt: usize) -> Result<i64> {
    let s = status_ref(call, s)?;
    let lay = dtype(call, dt)?;
    Ok(lay.elements_in(s.bytes()).map(|n| n as i64).unwrap_or(c::MPI_UNDEFINED as i64))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements(s: *mut MPI_Status, dt: usize, count: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        crate::nonnull_mut("MPI_Get_elements", "count", count)?;
        let v = get_elements("MPI_Get_elements", s, dt)?;
        // SAFETY: checked non-null.
        unsafe { *count = clamp_int(v) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements_c(s: *mut MPI_Status, dt: usize, count: *mut i64) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        crate::nonnull_mut("MPI_Get_elements_c", "count", count)?;
        let v = get_elements("MPI_Get_elements_c", s, dt)?;
        // SAFETY: checked non-null.
        unsafe { *count = v };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements_x(s: *mut MPI_Status, dt: usize, count: *mut i64) -> c_int {
    PMPI_Get_elements_c(s, dt, count)
}

fn set_elements(call: &str, s: *mut MPI_Status, dt: usize, n: i64) -> Result<()> {
    crate::nonnull_mut(call, "status", s)?;
    let lay = dtype(call, dt)?;
    if n < 0 {
        return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: count {n} is negative")));
    }
    // SAFETY: non-null caller-owned status.
    unsafe { (*s).set_bytes(lay.bytes_for_elements(n as u64)) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_elements(s: *mut MPI_Status, dt: usize, n: c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || set_elements("MPI_Status_set_elements", s, dt, n as i64))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_elements_c(s: *mut MPI_Status, dt: usize, n: i64) -> c_int {
    guard(c::MPI_COMM_WORLD, || set_elements("MPI_Status_set_elements_c", s, dt, n))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_elements_x(s: *mut MPI_Status, dt: usize, n: i64) -> c_int {
    guard(c::MPI_COMM_WORLD, || set_elements("MPI_Status_set_elements_x", s, dt, n))
}

macro_rules! status_field {
    ($get:ident, $set:ident, $field:ident, $gname:expr, $sname:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $get(s: *mut MPI_Status, v: *mut c_int) -> c_int {
            guard(c::MPI_COMM_WORLD, || {
                let st = status_ref($gname, s)?;
                crate::nonnull_mut($gname, "value", v)?;
                // SAFETY: checked non-null.
                unsafe { *v = st.$field };
                Ok(())
            })
        }
        #[no_mangle]
        pub unsafe extern "C" fn $set(s: *mut MPI_Status, v: c_int) -> c_int {
            guard(c::MPI_COMM_WORLD, || {
                crate::nonnull_mut($sname, "status", s)?;
                // SAFETY: checked non-null.
                unsafe { (*s).$field = v };
                Ok(())
            })
        }
    };
}

status_field!(
    PMPI_Status_get_source,
    PMPI_Status_set_source,
    MPI_SOURCE,
    "MPI_Status_get_source",
    "MPI_Status_set_source"
);
status_field!(PMPI_Status_get_tag, PMPI_Status_set_tag, MPI_TAG, "MPI_Status_get_tag", "MPI_Status_set_tag");

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_error(s: *mut MPI_Status, v: c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        crate::nonnull_mut("MPI_Status_set_error", "status", s)?;
        // SAFETY: checked non-null.
        unsafe { (*s).MPI_ERROR = v };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_cancelled(s: *mut MPI_Status, flag: c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        crate::nonnull_mut("MPI_Status_set_cancelled", "status", s)?;
        // SAFETY: checked non-null.
        unsafe { (*s).MPI_internal[2] = (flag != 0) as c_int };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Test_cancelled(s: *const MPI_Status, flag: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let st = status_ref("MPI_Test_cancelled", s)?;
        crate::nonnull_mut("MPI_Test_cancelled", "flag", flag)?;
        // SAFETY: checked non-null.
        unsafe { *flag = st.cancelled() as c_int };
        Ok(())
    })
}
