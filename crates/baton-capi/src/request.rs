//! Completion: `Wait`/`Test` and their `all`/`any`/`some` forms, persistent `Start`, `Cancel`,
//! `Request_free`, and what a status tells (`Get_count`, `Get_elements`, ...).
//!
//! A request handle is resolved to engine request ids with the tables lock, released before
//! blocking, so waiting threads never hold it.

use crate::errors::{guard, guard_at};
use crate::p2p::{check_status, dtype, start_persistent};
use crate::state::{lib, Lib, ReqObj};
use crate::{empty_status, put_status, MPI_Status};
use baton_abi::consts as c;
use baton_core::engine::{ReqId, Status};
use baton_core::error::{MpiError, Result};
use baton_core::runtime::State;
use std::ffi::c_int;

#[derive(Clone, Copy)]
enum Res {
    Null,
    Inactive,
    Engine { id: ReqId, comm: usize },
    Done { status: Status, comm: usize },
}

fn resolve(l: &Lib, call: &str, h: usize) -> Result<Res> {
    if h == c::MPI_REQUEST_NULL {
        return Ok(Res::Null);
    }
    let t = l.t();
    match t.requests.get(h) {
        Some(ReqObj::Active { id, comm, .. }) => Ok(Res::Engine { id: *id, comm: *comm }),
        Some(ReqObj::Persistent { active: Some(id), comm, .. }) => Ok(Res::Engine { id: *id, comm: *comm }),
        Some(ReqObj::Persistent { active: None, .. }) => Ok(Res::Inactive),
        Some(ReqObj::Done { status, comm }) => Ok(Res::Done { status: *status, comm: *comm }),
        None => Err(MpiError::new(c::MPI_ERR_REQUEST, format!("{call}: request {h:#x} is not a valid request handle"))),
    }
}

fn done(st: &State, r: &Res) -> bool {
    match r {
        Res::Engine { id, .. } => st.engine.get(*id).is_none_or(|q| q.complete),
        _ => true,
    }
}

/// Completes request `*hp`, which is known to be done: its status, and the handle freed (or a
/// persistent one made inactive).
fn finish(l: &Lib, hp: &mut usize, r: Res) -> (Status, usize) {
    match r {
        Res::Null | Res::Inactive => (empty_status(), c::MPI_COMM_WORLD),
        Res::Done { status, comm } => {
            l.t().requests.remove(*hp);
            *hp = c::MPI_REQUEST_NULL;
            (status, comm)
        }
        Res::Engine { id, comm } => {
            let mut t = l.t();
            let status = {
                let mut st = l.mpi.lock();
                let s = st.engine.get(id).map(|q| q.status).unwrap_or_else(empty_status);
                st.engine.release(id);
                s
            };
            match t.requests.get_mut(*hp) {
                Some(ReqObj::Persistent { active, .. }) => *active = None,
                _ => {
                    t.requests.remove(*hp);
                    *hp = c::MPI_REQUEST_NULL;
                }
            }
            (status, comm)
        }
    }
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
        let l = lib("MPI_Wait")?;
        crate::nonnull_mut("MPI_Wait", "request", request)?;
        // SAFETY: checked non-null.
        let hp = unsafe { &mut *request };
        let r = resolve(l, "MPI_Wait", *hp)?;
        l.mpi.block(|st| done(st, &r).then_some(()));
        let (s, cm) = finish(l, hp, r);
        *comm = cm;
        // SAFETY: ignore (null) or caller-owned status.
        unsafe { put_status(status, &s, false) };
        check_status("MPI_Wait", &s)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Test(request: *mut usize, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    guard_at(|comm_out| {
        let l = lib("MPI_Test")?;
        crate::nonnull_mut("MPI_Test", "request", request)?;
        crate::nonnull_mut("MPI_Test", "flag", flag)?;
        // SAFETY: checked non-null.
        let hp = unsafe { &mut *request };
        let r = resolve(l, "MPI_Test", *hp)?;
        l.mpi.poll();
        let ready = done(&l.mpi.lock(), &r);
        // SAFETY: checked non-null.
        unsafe { *flag = ready as c_int };
        if ready {
            let (s, comm) = finish(l, hp, r);
            // SAFETY: ignore or caller-owned status.
            unsafe { put_status(status, &s, false) };
            *comm_out = comm;
            check_status("MPI_Test", &s)?;
        }
        Ok(())
    })
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
        let rs = hs.iter().map(|&h| resolve(l, call, h)).collect::<Result<Vec<_>>>()?;
        if blocking {
            l.mpi.block(|st| rs.iter().all(|r| done(st, r)).then_some(()));
        } else {
            crate::nonnull_mut(call, "flag", flag)?;
            l.mpi.poll();
            let all = {
                let st = l.mpi.lock();
                rs.iter().all(|r| done(&st, r))
            };
            // SAFETY: checked non-null.
            unsafe { *flag = all as c_int };
            if !all {
                return Ok(());
            }
        }
        let mut failed = None;
        for (i, r) in rs.into_iter().enumerate() {
            let (s, comm) = finish(l, &mut hs[i], r);
            // SAFETY: ignore or an array with an entry per request.
            unsafe { put_status(status_at(statuses, i), &s, true) };
            if s.error != 0 && failed.is_none() {
                failed = Some(comm);
            }
        }
        in_status(call, failed, comm_out)
    })
}

fn in_status(call: &str, failed: Option<usize>, comm_out: &mut usize) -> Result<()> {
    match failed {
        None => Ok(()),
        Some(comm) => {
            *comm_out = comm;
            Err(MpiError::new(
                c::MPI_ERR_IN_STATUS,
                format!("{call}: at least one request failed; see the MPI_ERROR field of its status"),
            ))
        }
    }
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
        let rs = hs.iter().map(|&h| resolve(l, call, h)).collect::<Result<Vec<_>>>()?;
        let live = |r: &Res| matches!(r, Res::Engine { .. } | Res::Done { .. });
        if !rs.iter().any(live) {
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
        let pick = |st: &mut State| rs.iter().position(|r| live(r) && done(st, r));
        let found = if blocking {
            Some(l.mpi.block(pick))
        } else {
            l.mpi.poll();
            pick(&mut l.mpi.lock())
        };
        if !blocking {
            // SAFETY: checked non-null.
            unsafe { *flag = found.is_some() as c_int };
        }
        let Some(i) = found else {
            // SAFETY: checked non-null.
            unsafe { *index = c::MPI_UNDEFINED };
            return Ok(());
        };
        let (s, comm) = finish(l, &mut hs[i], rs[i]);
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
        let rs = hs.iter().map(|&h| resolve(l, call, h)).collect::<Result<Vec<_>>>()?;
        let live = |r: &Res| matches!(r, Res::Engine { .. } | Res::Done { .. });
        if !rs.iter().any(live) {
            // SAFETY: checked non-null.
            unsafe { *outcount = c::MPI_UNDEFINED };
            return Ok(());
        }
        let ready = |st: &mut State| {
            let v: Vec<usize> = (0..rs.len()).filter(|&i| live(&rs[i]) && done(st, &rs[i])).collect();
            (!v.is_empty()).then_some(v)
        };
        let got = if blocking {
            l.mpi.block(ready)
        } else {
            l.mpi.poll();
            ready(&mut l.mpi.lock()).unwrap_or_default()
        };
        if !got.is_empty() {
            crate::nonnull_mut(call, "array_of_indices", indices)?;
        }
        let mut failed = None;
        for (k, &i) in got.iter().enumerate() {
            let (s, comm) = finish(l, &mut hs[i], rs[i]);
            // SAFETY: arrays sized for `n` entries by the caller.
            unsafe {
                *indices.add(k) = i as c_int;
                put_status(status_at(statuses, k), &s, true);
            }
            if s.error != 0 && failed.is_none() {
                failed = Some(comm);
            }
        }
        // SAFETY: checked non-null.
        unsafe { *outcount = got.len() as c_int };
        in_status(call, failed, comm_out)
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
        let l = lib("MPI_Request_get_status")?;
        crate::nonnull_mut("MPI_Request_get_status", "flag", flag)?;
        let r = resolve(l, "MPI_Request_get_status", request)?;
        l.mpi.poll();
        let s = {
            let st = l.mpi.lock();
            match r {
                Res::Engine { id, .. } => st.engine.get(id).filter(|q| q.complete).map(|q| q.status),
                Res::Done { status, .. } => Some(status),
                _ => Some(empty_status()),
            }
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
        let l = lib("MPI_Request_free")?;
        crate::nonnull_mut("MPI_Request_free", "request", request)?;
        // SAFETY: checked non-null.
        let h = unsafe { *request };
        if h == c::MPI_REQUEST_NULL {
            return Err(MpiError::new(c::MPI_ERR_REQUEST, "MPI_Request_free: request is MPI_REQUEST_NULL"));
        }
        let obj = l.t().requests.remove(h).ok_or_else(|| {
            MpiError::new(c::MPI_ERR_REQUEST, format!("MPI_Request_free: request {h:#x} is not a valid request handle"))
        })?;
        let id = match obj {
            ReqObj::Active { id, .. } => Some(id),
            ReqObj::Persistent { active, .. } => active,
            ReqObj::Done { .. } => None,
        };
        if let Some(id) = id {
            // An active operation goes on and is dropped when it completes.
            l.mpi.lock().engine.release(id);
        }
        // SAFETY: checked non-null.
        unsafe { *request = c::MPI_REQUEST_NULL };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cancel(request: *mut usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let l = lib("MPI_Cancel")?;
        crate::nonnull_mut("MPI_Cancel", "request", request)?;
        // SAFETY: checked non-null.
        let h = unsafe { *request };
        if let Res::Engine { id, .. } = resolve(l, "MPI_Cancel", h)? {
            // Receives not yet matched are cancelled; sends always complete normally (the
            // standard deprecates cancelling them), so Test_cancelled reports false for them.
            l.mpi.lock().engine.cancel_recv(id);
        }
        Ok(())
    })
}

fn start_one(l: &Lib, h: usize) -> Result<()> {
    let op = match l.t().requests.get(h) {
        Some(ReqObj::Persistent { op, active: None, .. }) => op.clone(),
        Some(ReqObj::Persistent { .. }) => {
            return Err(MpiError::new(c::MPI_ERR_REQUEST, format!("MPI_Start: request {h:#x} is already active")))
        }
        _ => {
            return Err(MpiError::new(
                c::MPI_ERR_REQUEST,
                format!("MPI_Start: request {h:#x} is not a persistent request"),
            ))
        }
    };
    let id = start_persistent(l, &op)?;
    if let Some(ReqObj::Persistent { active, .. }) = l.t().requests.get_mut(h) {
        *active = Some(id);
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
