//! Completion: `Wait`/`Test` and their `all`/`any`/`some` forms, persistent `Start`, `Cancel`,
//! `Request_free`, and what a status tells (`Get_count`, `Get_elements`, ...).
//!
//! Here a request handle is resolved ([`Resolved`]: what the device waits for, and the persistent
//! request it belongs to) with the tables lock, released before the device waits; the waiting
//! itself is the device's ([`baton_core::device::request`]). Once a request completes, its
//! handle becomes `MPI_REQUEST_NULL`, or a persistent one inactive.

use crate::errors::{guard, guard_at};
use crate::handles::{self, Kind};
use crate::state::{lib, Lib, PersistentEntry};
use crate::twins::CountOut;
use crate::{put_status, MPI_Status};
use baton_abi::consts as c;
use baton_core::datatype::Layout;
use baton_core::device::check_status;
use baton_core::device::{Awaited, Completion, NoSuchRequest};
use baton_core::engine::ReqId;
use baton_core::error::{MpiError, Result};
use std::ffi::c_int;

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
    fn completed(&self, l: &Lib, hs: &mut [usize], i: usize, done: &Completion) -> usize {
        let persistent = self.persistent.iter().find(|&&(j, _)| j == i).map(|&(_, p)| p);
        completed(l, &mut hs[i], Resolved { awaited: self.awaited[i], persistent }, done)
    }
}

/// After request `r` (handle `*h`) completed: a persistent request becomes inactive, another
/// active one `MPI_REQUEST_NULL`. Returns the communicator whose error handler applies.
fn completed(l: &Lib, h: &mut usize, r: Resolved, done: &Completion) -> usize {
    match r.persistent {
        Some(p) => {
            if let Some(e) = l.t().persistent.get_mut(p) {
                e.active = None;
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

/// `MPI_Wait` (`blocking`) and `MPI_Test`.
fn wait_one(call: &str, request: *mut usize, blocking: bool, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    guard_at(|comm_out| {
        let l = lib(call)?;
        crate::nonnull_mut(call, "request", request)?;
        if !blocking {
            crate::nonnull_mut(call, "flag", flag)?;
        }
        // SAFETY: checked non-null.
        let hp = unsafe { &mut *request };
        let r = resolve(l, call, *hp)?;
        let got = if blocking { l.mpi.wait_one(r.awaited).map(Some) } else { l.mpi.test_one(r.awaited) };
        let got = got.map_err(|_| invalid(call, *hp))?;
        if !blocking {
            // SAFETY: checked non-null.
            unsafe { *flag = got.is_some() as c_int };
        }
        let Some(done) = got else { return Ok(()) };
        *comm_out = completed(l, hp, r, &done);
        // SAFETY: ignore (null) or caller-owned status.
        unsafe { put_status(status, &done.status, false) };
        check_status(call, &done.status)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Wait(request: *mut usize, status: *mut MPI_Status) -> c_int {
    wait_one("MPI_Wait", request, true, std::ptr::null_mut(), status)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Test(request: *mut usize, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    wait_one("MPI_Test", request, false, flag, status)
}

fn in_status<'a>(
    call: &str,
    results: impl Iterator<Item = (&'a Completion, usize)>,
    comm_out: &mut usize,
) -> Result<()> {
    for (done, comm) in results {
        if done.status.error != 0 {
            *comm_out = comm;
            return Err(MpiError::new(
                c::MPI_ERR_IN_STATUS,
                format!("{call}: at least one request failed; see the MPI_ERROR field of its status"),
            ));
        }
    }
    Ok(())
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
        if !blocking {
            crate::nonnull_mut(call, "flag", flag)?;
        }
        // SAFETY: `n` handles at `reqs`, checked by req_array.
        let hs = unsafe { req_array(call, n, reqs)? };
        let rs = resolve_all(l, call, hs)?;
        let results = if blocking {
            l.mpi.wait_all(&rs.awaited).map_err(no_such(call, hs))?
        } else {
            let got = l.mpi.test_all(&rs.awaited).map_err(no_such(call, hs))?;
            // SAFETY: checked non-null.
            unsafe { *flag = got.is_some() as c_int };
            match got {
                Some(r) => r,
                None => return Ok(()),
            }
        };
        let mut comms = Vec::with_capacity(results.len());
        for (i, done) in results.iter().enumerate() {
            comms.push(rs.completed(l, hs, i, done));
            // SAFETY: ignore or an array with an entry per request.
            unsafe { put_status(status_at(statuses, i), &done.status, true) };
        }
        in_status(call, results.iter().zip(comms), comm_out)
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
        let none_active = !rs.awaited.iter().any(|a| a.active());
        let got = if none_active {
            None
        } else if blocking {
            l.mpi.wait_any(&rs.awaited).map_err(no_such(call, hs))?
        } else {
            l.mpi.test_any(&rs.awaited).map_err(no_such(call, hs))?
        };
        // SAFETY: checked non-null out pointers; status ignore or caller-owned.
        unsafe {
            if !blocking {
                // With no active request, the call is complete too.
                *flag = (none_active || got.is_some()) as c_int;
            }
            *index = got.as_ref().map_or(c::MPI_UNDEFINED, |&(i, _)| i as c_int);
        }
        match got {
            Some((i, done)) => {
                *comm_out = rs.completed(l, hs, i, &done);
                // SAFETY: ignore or caller-owned status.
                unsafe { put_status(status, &done.status, false) };
                check_status(call, &done.status)
            }
            None => {
                if none_active {
                    // SAFETY: ignore or caller-owned status.
                    unsafe { put_status(status, &crate::empty_status(), false) };
                }
                Ok(())
            }
        }
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
        if !rs.awaited.iter().any(|a| a.active()) {
            // SAFETY: checked non-null.
            unsafe { *outcount = c::MPI_UNDEFINED };
            return Ok(());
        }
        let got = if blocking { l.mpi.wait_some(&rs.awaited) } else { l.mpi.test_some(&rs.awaited) };
        let got = got.map_err(no_such(call, hs))?;
        if !got.is_empty() {
            crate::nonnull_mut(call, "array_of_indices", indices)?;
        }
        let mut comms = Vec::with_capacity(got.len());
        for (k, (i, done)) in got.iter().enumerate() {
            comms.push(rs.completed(l, hs, *i, done));
            // SAFETY: arrays sized for `n` entries by the caller.
            unsafe {
                *indices.add(k) = *i as c_int;
                put_status(status_at(statuses, k), &done.status, true);
            }
        }
        // SAFETY: checked non-null.
        unsafe { *outcount = got.len() as c_int };
        in_status(call, got.iter().map(|(_, d)| d).zip(comms), comm_out)
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
        let s = l.mpi.request_status(r.awaited).map_err(|_| invalid(call, request))?;
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

/// A call on the one request handle at `request` (checked non-null): `f` gets the library
/// and the handle.
fn on_request(call: &str, request: *mut usize, f: impl FnOnce(&Lib, usize) -> Result<()>) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let l = lib(call)?;
        crate::nonnull_mut(call, "request", request)?;
        // SAFETY: checked non-null.
        f(l, unsafe { *request })
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Request_free(request: *mut usize) -> c_int {
    let call = "MPI_Request_free";
    on_request(call, request, |l, h| {
        if h == c::MPI_REQUEST_NULL {
            return Err(MpiError::new(c::MPI_ERR_REQUEST, format!("{call}: request is MPI_REQUEST_NULL")));
        }
        if h == SENT {
            // A send that was complete at its start: nothing to free.
        } else if let Some((idx, gen)) = handles::decode(Kind::Request, h) {
            if !l.mpi.free_request(ReqId { idx, gen }) {
                return Err(invalid(call, h));
            }
        } else {
            let p = l.t().persistent.remove(h).ok_or_else(|| invalid(call, h))?;
            if let Some(id) = p.active {
                // The round in progress goes on and is dropped when it completes.
                l.mpi.free_request(id);
            }
        }
        // SAFETY: checked non-null.
        unsafe { *request = c::MPI_REQUEST_NULL };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cancel(request: *mut usize) -> c_int {
    let call = "MPI_Cancel";
    on_request(call, request, |l, h| {
        if let Awaited::Request(id) = resolve(l, call, h)?.awaited {
            if !l.mpi.cancel(id) {
                return Err(invalid(call, h));
            }
        }
        Ok(())
    })
}

fn start_one(l: &Lib, h: usize) -> Result<()> {
    // Copied out (a few reference counts): a collective's first round, which goes out now, may
    // run the application's reduction, which may call MPI.
    let (op, comm) = match l.t().persistent.get(h) {
        Some(e) if e.active.is_none() => (e.op.clone(), e.comm),
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
    let id = l.mpi.start(&op, comm)?;
    if let Some(p) = l.t().persistent.get_mut(h) {
        p.active = Some(id);
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Start(request: *mut usize) -> c_int {
    on_request("MPI_Start", request, start_one)
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

/// A count query of status `s` in datatype `dt` (`query`), written to `out`.
fn status_count(
    call: &str,
    s: *const MPI_Status,
    dt: usize,
    out: CountOut,
    query: fn(&MPI_Status, &Layout) -> i64,
) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        if out.is_null() {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("{call}: count is a null pointer")));
        }
        let (st, lay) = (status_ref(call, s)?, crate::validate::datatype_committed(call, "datatype", dt)?);
        let v = query(st, &lay);
        // SAFETY: checked non-null.
        unsafe { out.put(v) };
        Ok(())
    })
}

/// A count query in both widths (`$int`, `$big`), answered by `$query`; each names itself in
/// errors (`MPI_…` of its `PMPI_…` name).
macro_rules! count_queries {
    ($int:ident, $big:ident, $query:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $int(s: *mut MPI_Status, dt: usize, count: *mut c_int) -> c_int {
            status_count(&stringify!($int)[1..], s, dt, CountOut::Int(count), $query)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $big(s: *mut MPI_Status, dt: usize, count: *mut i64) -> c_int {
            status_count(&stringify!($big)[1..], s, dt, CountOut::Big(count), $query)
        }
    };
}

count_queries!(PMPI_Get_count, PMPI_Get_count_c, count_of);
count_queries!(PMPI_Get_elements, PMPI_Get_elements_c, elements_of);

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements_x(s: *mut MPI_Status, dt: usize, count: *mut i64) -> c_int {
    PMPI_Get_elements_c(s, dt, count)
}

fn set_elements(call: &str, s: *mut MPI_Status, dt: usize, n: i64) -> Result<()> {
    crate::nonnull_mut(call, "status", s)?;
    let lay = crate::validate::datatype_committed(call, "datatype", dt)?;
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
