//! Error codes, error handlers and the error-reporting functions.
//!
//! Internally every failure is an `MpiError` (class + sentence). Returning it to C allocates an
//! error *code* that remembers the sentence, so `MPI_Error_string` can say exactly what went
//! wrong while `MPI_Error_class` still yields the standard class. The code space:
//!
//! | codes | what |
//! | --- | --- |
//! | `0..=MPI_ERR_ABI` | the predefined classes |
//! | `MPI_ERR_LASTCODE+1 ..` | classes and codes added by the application, in order; `MPI_LASTUSEDCODE` is the last |
//! | `MSG_BASE + (slot << 6 \| class)` | a predefined class with a message, slot in a ring of recent messages |
//!
//! An error whose class is the application's (a callback returned one of its codes) is returned
//! as that very code.

use crate::state::{self, lib_any, Lib};
use crate::validate::{Call, Out, StrOut};
use crate::MPI_Status;
use baton_abi::consts as c;
use baton_core::error::{class_text, MpiError, Result};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

const RING: usize = 1024;
/// Message codes start far above the application's codes, so neither range can reach the other.
const MSG_BASE: c_int = 1 << 24;
const CLASS_BITS: u32 = 6;
const CLASS_MASK: c_int = (1 << CLASS_BITS) - 1;

struct Codes {
    ring: Vec<String>,
    next: usize,
    /// Application-added codes and classes (a class maps to itself).
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
        last_used: c::MPI_ERR_LASTCODE,
    });
    f(c)
}

/// The value of the `MPI_LASTUSEDCODE` attribute: the last code or class the application added
/// (`MPI_ERR_LASTCODE` before any).
pub fn last_used_code() -> c_int {
    codes(|c| c.last_used)
}

fn class_name(class: c_int) -> &'static str {
    baton_abi::consts::ERROR_CLASS_NAMES.iter().find(|(v, _)| *v == class).map(|(_, n)| *n).unwrap_or("MPI_ERR_UNKNOWN")
}

fn is_predefined(code: c_int) -> bool {
    (0..=c::MPI_ERR_ABI).contains(&code)
}

/// The ring slot of a message code, if `code` is one.
fn slot_of(code: c_int) -> Option<usize> {
    let off = code.checked_sub(MSG_BASE).filter(|&o| o >= 0)?;
    let slot = (off >> CLASS_BITS) as usize;
    (slot < RING && is_predefined(off & CLASS_MASK)).then_some(slot)
}

/// Whether `code` is a code or class the application added (and has not removed).
pub fn is_user_code(code: c_int) -> bool {
    code > c::MPI_ERR_LASTCODE && code < MSG_BASE && codes(|cs| cs.user_class_of.contains_key(&code))
}

/// A code carrying `e`'s message (the application's own code when `e.class` is one).
pub fn code_for(e: &MpiError) -> c_int {
    codes(|cs| {
        if cs.user_class_of.contains_key(&e.class) || !is_predefined(e.class) {
            return e.class;
        }
        let slot = cs.next % RING;
        cs.next += 1;
        cs.ring[slot] = e.msg.clone();
        MSG_BASE + ((slot as c_int) << CLASS_BITS | e.class)
    })
}

pub fn class_of(code: c_int) -> Option<c_int> {
    if is_predefined(code) {
        return Some(code);
    }
    if slot_of(code).is_some() {
        return Some((code - MSG_BASE) & CLASS_MASK);
    }
    codes(|cs| cs.user_class_of.get(&code).copied())
}

pub fn string_of(code: c_int) -> Option<String> {
    if is_predefined(code) {
        return Some(format!("{}: {}", class_name(code), class_text(code)));
    }
    if let Some(slot) = slot_of(code) {
        let class = (code - MSG_BASE) & CLASS_MASK;
        let msg = codes(|cs| cs.ring[slot].clone());
        return Some(format!("{msg} ({})", class_name(class)));
    }
    // The application's codes and classes say what it set, or nothing (MPI 4.1 section 9.5).
    codes(|cs| cs.user_class_of.contains_key(&code).then(|| cs.user_strings.get(&code).cloned().unwrap_or_default()))
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

/// Reports `e` through the error handler of window handle `win` (MPI_COMM_WORLD's when `win`
/// is not a window) and returns the code the call should return.
pub fn raise_win(win: usize, e: MpiError) -> c_int {
    // The message names the window when the application named it (`MPI_Win_set_name`).
    let named =
        lib_any().and_then(|l| l.t().wins.get(win).map(|w| w.name.lock().unwrap_or_else(|p| p.into_inner()).clone()));
    let e = match named {
        Some(n) if !n.is_empty() && !is_user_code(e.class) => {
            MpiError::new(e.class, format!("{} (window \"{n}\")", e.msg))
        }
        _ => e,
    };
    let code = code_for(&e);
    raise_win_code(win, code, e)
}

/// Runs `win`'s error handler for an existing error code.
pub fn raise_win_code(win: usize, code: c_int, e: MpiError) -> c_int {
    let Some(l) = lib_any().filter(|_| state::phase() == 1) else { fatal(&e) };
    let Some(obj) = l.t().wins.get(win).cloned() else { return raise_code(c::MPI_COMM_WORLD, code, e) };
    match obj.errhandler.load(Ordering::SeqCst) {
        c::MPI_ERRORS_RETURN => code,
        c::MPI_ERRORS_ARE_FATAL | c::MPI_ERRORS_ABORT => fatal(&e),
        h => match l.t().errhandlers.get(h).map(|u| u.func) {
            Some(f) if f != 0 => {
                // SAFETY: the application registered this pointer as an
                // MPI_Win_errhandler_function through MPI_Win_create_errhandler.
                let f: CommErrFn = unsafe { std::mem::transmute::<usize, CommErrFn>(f) };
                let (mut wh, mut cd) = (win, code);
                // SAFETY: calling the application's handler with valid pointers to locals.
                unsafe { f(&mut wh, &mut cd) };
                code
            }
            _ => fatal(&e),
        },
    }
}

/// Runs an MPI call's body; failures go through window `win`'s error handler.
pub fn guard_win(win: usize, f: impl FnOnce() -> Result<()>) -> c_int {
    match f() {
        Ok(()) => c::MPI_SUCCESS,
        Err(e) => raise_win(win, e),
    }
}

/// The fatal handlers: one clear line, then the whole job ends.
pub fn fatal(e: &MpiError) -> ! {
    // Before MPI_Init completes, the launcher's environment still says who we are.
    let (rank, host) = lib_any().map(|l| (l.mpi.world_rank(), l.mpi.host.clone())).unwrap_or_else(|| {
        let r = std::env::var(baton_settings::protocol::RANK.name).ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        (r, baton_transport::sys::hostname())
    });
    // What mpiexec shows: the call, the reason and why the job ends, not "MPI_Abort".
    let why = format!("{} [{}] (errors are fatal)", e.msg, class_name(e.class));
    match lib_any() {
        Some(l) => l.mpi.abort(e.class.max(1), &why),
        None => {
            eprintln!("Baton: fatal error on rank {rank} ({host}): {why}");
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

fn not_a_code(call: &str, code: c_int) -> MpiError {
    MpiError::new(c::MPI_ERR_ARG, format!("{call}: {code} is not a valid error code"))
}

pub(crate) fn error_string(cx: Call, errorcode: c_int, string: StrOut, resultlen: Out<c_int>) -> Result<()> {
    let text = string_of(errorcode).ok_or_else(|| not_a_code(cx.name, errorcode))?;
    string.write(&text, Some(&resultlen));
    Ok(())
}

pub(crate) fn error_class(cx: Call, errorcode: c_int, errorclass: Out<c_int>) -> Result<()> {
    errorclass.put(class_of(errorcode).ok_or_else(|| not_a_code(cx.name, errorcode))?);
    Ok(())
}

/// A new code (or class, when `class` is None) of the application's: the next number above
/// every one handed out so far (removed ones are not reused, so a stale value never names a new
/// code).
fn add(call: &str, class: Option<c_int>) -> Result<c_int> {
    codes(|cs| {
        if cs.last_used >= MSG_BASE - 1 {
            return Err(MpiError::new(c::MPI_ERR_OTHER, format!("{call}: no error codes are left")));
        }
        cs.last_used += 1;
        let v = cs.last_used;
        cs.user_class_of.insert(v, class.unwrap_or(v));
        Ok(v)
    })
}

fn is_user_class(cs: &Codes, v: c_int) -> bool {
    cs.user_class_of.get(&v) == Some(&v)
}

fn not_added(call: &str, what: &str, v: c_int) -> MpiError {
    MpiError::new(c::MPI_ERR_ARG, format!("{call}: {v} is not {what} added by the application"))
}

pub(crate) fn add_error_class(cx: Call, _l: &Lib, errorclass: Out<c_int>) -> Result<()> {
    errorclass.put(add(cx.name, None)?);
    Ok(())
}

pub(crate) fn add_error_code(cx: Call, _l: &Lib, errorclass: c_int, errorcode: Out<c_int>) -> Result<()> {
    let valid = is_predefined(errorclass) || codes(|cs| is_user_class(cs, errorclass));
    if !valid {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{}: {errorclass} is not an error class", cx.name)));
    }
    errorcode.put(add(cx.name, Some(errorclass))?);
    Ok(())
}

pub(crate) fn add_error_string(cx: Call, _l: &Lib, errorcode: c_int, string: String) -> Result<()> {
    if string.len() >= c::MPI_MAX_ERROR_STRING as usize {
        return Err(MpiError::new(c::MPI_ERR_ARG, format!("{}: string longer than MPI_MAX_ERROR_STRING", cx.name)));
    }
    codes(|cs| {
        if !cs.user_class_of.contains_key(&errorcode) {
            return Err(not_added(cx.name, "a code or class", errorcode));
        }
        cs.user_strings.insert(errorcode, string);
        Ok(())
    })
}

pub(crate) fn remove_error_class(cx: Call, _l: &Lib, errorclass: c_int) -> Result<()> {
    codes(|cs| {
        if !is_user_class(cs, errorclass) {
            return Err(not_added(cx.name, "an error class", errorclass));
        }
        let codes_left = cs.user_class_of.iter().filter(|&(&k, &v)| v == errorclass && k != errorclass).count();
        if codes_left > 0 {
            return Err(MpiError::new(
                c::MPI_ERR_ARG,
                format!("{}: error class {errorclass} still has {codes_left} error codes (remove them first)", cx.name),
            ));
        }
        remove_user(cs, cx.name, "error class", errorclass)
    })
}

pub(crate) fn remove_error_code(cx: Call, _l: &Lib, errorcode: c_int) -> Result<()> {
    codes(|cs| {
        match cs.user_class_of.get(&errorcode) {
            Some(&class) if class != errorcode => {}
            _ => return Err(not_added(cx.name, "an error code", errorcode)),
        }
        remove_user(cs, cx.name, "error code", errorcode)
    })
}

pub(crate) fn remove_error_string(cx: Call, _l: &Lib, errorcode: c_int) -> Result<()> {
    codes(|cs| {
        if !cs.user_class_of.contains_key(&errorcode) {
            return Err(not_added(cx.name, "a code or class", errorcode));
        }
        if cs.user_strings.remove(&errorcode).is_none() {
            return Err(MpiError::new(
                c::MPI_ERR_ARG,
                format!("{}: {errorcode} has no error string (none was added, or it was removed)", cx.name),
            ));
        }
        Ok(())
    })
}

/// Removes a user class or code (`what` says which) that the caller has checked may go.
/// The standard makes removing one whose string is still set erroneous; saying so keeps a
/// program from losing a message it still relies on.
fn remove_user(cs: &mut Codes, call: &str, what: &str, value: c_int) -> Result<()> {
    if cs.user_strings.contains_key(&value) {
        return Err(MpiError::new(
            c::MPI_ERR_ARG,
            format!("{call}: {what} {value} still has its error string (remove it first with MPI_Remove_error_string)"),
        ));
    }
    cs.user_class_of.remove(&value);
    Ok(())
}

pub(crate) fn status_get_error(_cx: Call, status: Out<MPI_Status>, error: Out<c_int>) -> Result<()> {
    error.put(status.get().MPI_ERROR);
    Ok(())
}
