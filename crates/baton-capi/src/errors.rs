//! Error codes, error handlers and the error-reporting functions.
//!
//! Internally every failure is an `MpiError` (class + sentence). Returning it to C allocates an
//! error *code* that remembers the sentence, so `MPI_Error_string` can say exactly what went
//! wrong while `MPI_Error_class` still yields the standard class: a code is `(slot+1) << 14 |
//! class`, slot in a ring of recent messages. Classes and codes added by the application are
//! small numbers above the predefined classes, tracked in `MPI_LASTUSEDCODE`.

use crate::state::{self, lib_any};
use crate::{cstr_out, MPI_Status};
use baton_abi::consts as c;
use baton_core::error::{class_text, MpiError, Result};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

const RING: usize = 1024;
const SLOT_SHIFT: u32 = 14;

struct Codes {
    ring: Vec<String>,
    next: usize,
    /// Application-added codes (classes map to themselves).
    user_class_of: HashMap<c_int, c_int>,
    user_strings: HashMap<c_int, String>,
    last_used: c_int,
}

static CODES: Mutex<Option<Codes>> = Mutex::new(None);

fn codes<R>(f: impl FnOnce(&mut Codes) -> R) -> R {
    let mut g = CODES.lock().unwrap_or_else(|e| e.into_inner());
    let c = g.get_or_insert_with(|| Codes {
        ring: vec![String::new(); RING],
        next: 0,
        user_class_of: HashMap::new(),
        user_strings: HashMap::new(),
        last_used: c::MPI_ERR_ABI,
    });
    f(c)
}

pub fn last_used_code() -> c_int {
    codes(|c| c.last_used)
}

fn class_name(class: c_int) -> &'static str {
    baton_abi::consts::ERROR_CLASS_NAMES.iter().find(|(v, _)| *v == class).map(|(_, n)| *n).unwrap_or("MPI_ERR_UNKNOWN")
}

/// A code carrying `e`'s message.
pub fn code_for(e: &MpiError) -> c_int {
    codes(|cs| {
        let slot = cs.next % RING;
        cs.next += 1;
        cs.ring[slot] = e.msg.clone();
        (((slot + 1) << SLOT_SHIFT) as c_int) | e.class
    })
}

pub fn class_of(code: c_int) -> Option<c_int> {
    if (0..=c::MPI_ERR_ABI).contains(&code) {
        return Some(code);
    }
    if code > 0 && (code >> SLOT_SHIFT) > 0 && (code >> SLOT_SHIFT) as usize <= RING {
        return Some(code & ((1 << SLOT_SHIFT) - 1));
    }
    codes(|cs| cs.user_class_of.get(&code).copied())
}

pub fn string_of(code: c_int) -> Option<String> {
    if let Some(s) = codes(|cs| cs.user_strings.get(&code).cloned()) {
        return Some(s);
    }
    if (0..=c::MPI_ERR_ABI).contains(&code) {
        return Some(format!("{}: {}", class_name(code), class_text(code)));
    }
    let class = class_of(code)?;
    if code >> SLOT_SHIFT > 0 {
        let slot = ((code >> SLOT_SHIFT) - 1) as usize;
        let msg = codes(|cs| cs.ring[slot].clone());
        let cls = if class <= c::MPI_ERR_ABI { class_name(class).to_string() } else { format!("error class {class}") };
        return Some(format!("{msg} ({cls})"));
    }
    Some(format!("error class {class}"))
}

type CommErrFn = unsafe extern "C" fn(*mut usize, *mut c_int, ...);

/// Reports `e` through the error handler of communicator handle `comm` and returns the code the
/// call should return (if the handler returns at all).
pub fn raise(comm: usize, e: MpiError) -> c_int {
    let code = code_for(&e);
    raise_code(comm, code, e)
}

/// Runs `comm`'s error handler for an existing error code.
pub fn raise_code(comm: usize, code: c_int, e: MpiError) -> c_int {
    let Some(l) = lib_any().filter(|_| state::phase() == 1) else {
        // No library to consult (before init, after finalize): the default handler is fatal.
        fatal(&e);
    };
    let (eh, comm) = {
        let t = l.t();
        let obj = match comm {
            c::MPI_COMM_WORLD => Some(t.world.clone()),
            c::MPI_COMM_SELF => Some(t.self_comm.clone()),
            h => t.comms.get(h).cloned(),
        };
        // Errors with no valid communicator go to MPI_COMM_WORLD's handler, as most
        // applications that set MPI_ERRORS_RETURN on the world expect.
        let (obj, comm) = match obj {
            Some(o) => (o, comm),
            None => (t.world.clone(), c::MPI_COMM_WORLD),
        };
        (obj.errhandler.load(Ordering::SeqCst), comm)
    };
    match eh {
        c::MPI_ERRORS_RETURN => code,
        c::MPI_ERRORS_ARE_FATAL | c::MPI_ERRORS_ABORT => fatal(&e),
        h => {
            let func = l.t().errhandlers.get(h).map(|u| u.func);
            match func {
                Some(f) if f != 0 => {
                    // SAFETY: the application registered this pointer as an
                    // MPI_Comm_errhandler_function through MPI_Comm_create_errhandler.
                    let f: CommErrFn = unsafe { std::mem::transmute::<usize, CommErrFn>(f) };
                    let mut ch = comm;
                    let mut cd = code;
                    // SAFETY: calling the application's handler with valid pointers to locals.
                    unsafe { f(&mut ch, &mut cd) };
                    code
                }
                _ => fatal(&e),
            }
        }
    }
}

/// The fatal handlers: one clear line, then the whole job ends.
pub fn fatal(e: &MpiError) -> ! {
    // Before MPI_Init completes, the launcher's environment still says who we are.
    let (rank, host) = lib_any().map(|l| (l.mpi.world_rank(), l.mpi.host.clone())).unwrap_or_else(|| {
        let r = std::env::var(baton_settings::protocol::RANK.name).ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        (r, baton_transport::sys::hostname())
    });
    let msg = format!("Baton: fatal error on rank {rank} ({host}): {} [{}]", e.msg, class_name(e.class));
    match lib_any() {
        Some(l) => l.mpi.abort(e.class.max(1), &msg),
        None => {
            eprintln!("{msg}");
            std::process::exit(e.class.clamp(1, 255));
        }
    }
}

/// Runs an MPI call's body; failures go through `comm`'s error handler.
pub fn guard(comm: usize, f: impl FnOnce() -> Result<()>) -> c_int {
    match f() {
        Ok(()) => c::MPI_SUCCESS,
        Err(e) => raise(comm, e),
    }
}

/// Like [`guard`], for calls whose failures belong to a communicator found while running
/// (a completed request's): the body stores that handle in its argument.
pub fn guard_at(f: impl FnOnce(&mut usize) -> Result<()>) -> c_int {
    let mut comm = c::MPI_COMM_WORLD;
    match f(&mut comm) {
        Ok(()) => c::MPI_SUCCESS,
        Err(e) => raise(comm, e),
    }
}

/// The body of every function Baton does not implement yet.
pub fn unsupported(name: &str, comm: usize) -> c_int {
    raise(
        comm,
        MpiError::new(c::MPI_ERR_UNSUPPORTED_OPERATION, format!("{name}: not implemented in this version of Baton")),
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Error_string(code: c_int, s: *mut c_char, len: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let text = string_of(code).ok_or_else(|| {
            MpiError::new(c::MPI_ERR_ARG, format!("MPI_Error_string: {code} is not a valid error code"))
        })?;
        crate::nonnull("MPI_Error_string", "string", s)?;
        // SAFETY: the caller provides MPI_MAX_ERROR_STRING bytes at `s` and an int at `len`.
        unsafe { cstr_out(&text, s, c::MPI_MAX_ERROR_STRING as usize, len) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let cl = class_of(code).ok_or_else(|| {
            MpiError::new(c::MPI_ERR_ARG, format!("MPI_Error_class: {code} is not a valid error code"))
        })?;
        crate::nonnull("MPI_Error_class", "errorclass", class)?;
        // SAFETY: non-null out pointer supplied by the caller.
        unsafe { *class = cl };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_class(class: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        state::lib("MPI_Add_error_class")?;
        crate::nonnull("MPI_Add_error_class", "errorclass", class)?;
        let v = codes(|cs| {
            cs.last_used += 1;
            let v = cs.last_used;
            cs.user_class_of.insert(v, v);
            v
        });
        // SAFETY: non-null out pointer.
        unsafe { *class = v };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_code(class: c_int, code: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        state::lib("MPI_Add_error_code")?;
        crate::nonnull("MPI_Add_error_code", "errorcode", code)?;
        let valid = (0..=c::MPI_ERR_ABI).contains(&class) || codes(|cs| cs.user_class_of.get(&class) == Some(&class));
        if !valid {
            return Err(MpiError::new(c::MPI_ERR_ARG, format!("MPI_Add_error_code: {class} is not an error class")));
        }
        let v = codes(|cs| {
            cs.last_used += 1;
            cs.user_class_of.insert(cs.last_used, class);
            cs.last_used
        });
        // SAFETY: non-null out pointer.
        unsafe { *code = v };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_string(code: c_int, s: *const c_char) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        state::lib("MPI_Add_error_string")?;
        crate::nonnull("MPI_Add_error_string", "string", s)?;
        // SAFETY: non-null NUL-terminated string from the caller.
        let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
        if text.len() >= c::MPI_MAX_ERROR_STRING as usize {
            return Err(MpiError::new(c::MPI_ERR_ARG, "MPI_Add_error_string: string longer than MPI_MAX_ERROR_STRING"));
        }
        let ok = codes(|cs| {
            if cs.user_class_of.contains_key(&code) {
                cs.user_strings.insert(code, text);
                true
            } else {
                false
            }
        });
        if !ok {
            return Err(MpiError::new(
                c::MPI_ERR_ARG,
                format!("MPI_Add_error_string: {code} is not a code or class added by the application"),
            ));
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_get_error(status: *const MPI_Status, err: *mut c_int) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        crate::nonnull("MPI_Status_get_error", "status", status)?;
        crate::nonnull("MPI_Status_get_error", "error", err)?;
        // SAFETY: both pointers checked non-null; caller-owned.
        unsafe { *err = (*status).MPI_ERROR };
        Ok(())
    })
}
