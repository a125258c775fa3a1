//! Errors inside Baton: an MPI error class plus a sentence naming the call, the argument and why.

use baton_abi::consts as c;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiError {
    pub class: i32,
    pub msg: String,
}

impl MpiError {
    pub fn new(class: i32, msg: impl Into<String>) -> MpiError {
        MpiError { class, msg: msg.into() }
    }
}

/// The kinds of MPI handles, for the messages about bad ones: each has its error class, its
/// null handle and the noun a message uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleKind {
    Comm,
    Group,
    Datatype,
    Op,
    Info,
    Errhandler,
    Request,
    Message,
    Win,
}

impl HandleKind {
    pub fn class(self) -> i32 {
        match self {
            HandleKind::Comm => c::MPI_ERR_COMM,
            HandleKind::Group => c::MPI_ERR_GROUP,
            HandleKind::Datatype => c::MPI_ERR_TYPE,
            HandleKind::Op => c::MPI_ERR_OP,
            HandleKind::Info => c::MPI_ERR_INFO,
            HandleKind::Errhandler => c::MPI_ERR_ERRHANDLER,
            HandleKind::Request | HandleKind::Message => c::MPI_ERR_REQUEST,
            HandleKind::Win => c::MPI_ERR_WIN,
        }
    }

    /// The null handle of this kind and its name.
    pub fn null(self) -> (usize, &'static str) {
        match self {
            HandleKind::Comm => (c::MPI_COMM_NULL, "MPI_COMM_NULL"),
            HandleKind::Group => (c::MPI_GROUP_NULL, "MPI_GROUP_NULL"),
            HandleKind::Datatype => (c::MPI_DATATYPE_NULL, "MPI_DATATYPE_NULL"),
            HandleKind::Op => (c::MPI_OP_NULL, "MPI_OP_NULL"),
            HandleKind::Info => (c::MPI_INFO_NULL, "MPI_INFO_NULL"),
            HandleKind::Errhandler => (c::MPI_ERRHANDLER_NULL, "MPI_ERRHANDLER_NULL"),
            HandleKind::Request => (c::MPI_REQUEST_NULL, "MPI_REQUEST_NULL"),
            HandleKind::Message => (c::MPI_MESSAGE_NULL, "MPI_MESSAGE_NULL"),
            HandleKind::Win => (c::MPI_WIN_NULL, "MPI_WIN_NULL"),
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            HandleKind::Comm => "communicator",
            HandleKind::Group => "group",
            HandleKind::Datatype => "datatype",
            HandleKind::Op => "operation",
            HandleKind::Info => "info",
            HandleKind::Errhandler => "error handler",
            HandleKind::Request => "request",
            HandleKind::Message => "message",
            HandleKind::Win => "window",
        }
    }
}

/// The catalogue of recurring messages. Each names the call, the argument and the reason, so
/// that the C boundary and core word the same failure the same way.
impl MpiError {
    /// A count that must not be negative (`MPI_ERR_COUNT`).
    pub fn negative_count(call: &str, arg: &str, n: i64) -> MpiError {
        MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {arg} {n} is negative"))
    }

    /// Any other argument that must not be negative (`MPI_ERR_ARG`).
    pub fn negative(call: &str, arg: &str, n: i64) -> MpiError {
        MpiError::new(c::MPI_ERR_ARG, format!("{call}: {arg} {n} is negative"))
    }

    /// `n` elements of `of` (a type name, "8-byte elements"...) take more bytes than an address
    /// space holds.
    pub fn count_overflow(call: &str, arg: &str, n: impl fmt::Display, of: impl fmt::Display) -> MpiError {
        MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {arg} {n} of {of} overflows"))
    }

    /// A result that the `int` form of a call cannot return; its large-count twin can.
    pub fn does_not_fit(call: &str, arg: &str, v: i64) -> MpiError {
        MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {arg} {v} does not fit in an int; use {call}_c"))
    }

    pub fn null_pointer(call: &str, arg: &str) -> MpiError {
        MpiError::new(c::MPI_ERR_ARG, format!("{call}: {arg} is a null pointer"))
    }

    /// A NULL buffer that would be read or written (`MPI_ERR_BUFFER`).
    pub fn null_buffer(call: &str, arg: &str, count: usize, of: &str) -> MpiError {
        MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: {arg} is NULL but count is {count} of {of}"))
    }

    /// A handle that is the kind's null handle, or names no live object of the kind.
    pub fn invalid_handle(call: &str, arg: &str, kind: HandleKind, h: usize) -> MpiError {
        let (null, null_name) = kind.null();
        if h == null {
            return MpiError::new(kind.class(), format!("{call}: {arg} is {null_name}"));
        }
        MpiError::new(kind.class(), format!("{call}: {arg} {h:#x} is not a valid {} handle", kind.noun()))
    }

    /// A keyval that was never created for objects of kind `of` ("communicator", "datatype"), or
    /// was freed.
    pub fn invalid_keyval(call: &str, k: i32, of: &str) -> MpiError {
        MpiError::new(c::MPI_ERR_KEYVAL, format!("{call}: keyval {k} is not a valid {of} keyval"))
    }

    /// A user-defined datatype used for communication before `MPI_Type_commit`.
    pub fn not_committed(call: &str, arg: &str, h: usize) -> MpiError {
        MpiError::new(c::MPI_ERR_TYPE, format!("{call}: {arg} {h:#x} has not been committed (MPI_Type_commit)"))
    }

    /// A tag outside `0..=ub` (and not `MPI_ANY_TAG` where that is allowed).
    pub fn bad_tag(call: &str, arg: &str, tag: i32, ub: i32) -> MpiError {
        MpiError::new(c::MPI_ERR_TAG, format!("{call}: {arg} {tag} is invalid (valid tags are 0..={ub})"))
    }

    /// A rank outside a communicator: on an intercommunicator ranks name the remote group.
    pub fn rank_out_of_range(call: &str, arg: &str, r: i32, size: i32, inter: bool) -> MpiError {
        let of = if inter { "the remote group of an intercommunicator" } else { "a communicator" };
        MpiError::rank_out_of_range_of(call, arg, r, size, of)
    }

    /// A rank outside a named set of processes ("a group", "local_comm", "the graph").
    pub fn rank_out_of_range_of(call: &str, arg: &str, r: i32, size: i32, of: &str) -> MpiError {
        MpiError::new(c::MPI_ERR_RANK, format!("{call}: {arg} {r} is out of range for {of} of size {size}"))
    }

    /// A root outside the communicator `of` names.
    pub fn root_out_of_range(call: &str, root: i32, size: i32, of: &str) -> MpiError {
        MpiError::new(c::MPI_ERR_ROOT, format!("{call}: root {root} is out of range for {of} of size {size}"))
    }

    /// An intercommunicator where the call needs an intracommunicator.
    pub fn not_intracomm(call: &str, arg: &str) -> MpiError {
        MpiError::new(
            c::MPI_ERR_COMM,
            format!("{call}: {arg} is an intercommunicator; this call needs an intracommunicator"),
        )
    }

    /// An intracommunicator where the call needs an intercommunicator.
    pub fn not_intercomm(call: &str, arg: &str) -> MpiError {
        MpiError::new(
            c::MPI_ERR_COMM,
            format!("{call}: {arg} is an intracommunicator; this call needs an intercommunicator"),
        )
    }
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

pub type Result<T> = std::result::Result<T, MpiError>;

/// Builds an `MpiError` with a formatted message: `err!(MPI_ERR_RANK, "{call}: dest {d} ...")`.
#[macro_export]
macro_rules! err {
    ($class:ident, $($arg:tt)*) => {
        $crate::error::MpiError::new(baton_abi::consts::$class, format!($($arg)*))
    };
}

/// The standard's short description of each predefined error class.
pub fn class_text(class: i32) -> &'static str {
    match class {
        c::MPI_SUCCESS => "no error",
        c::MPI_ERR_BUFFER => "invalid buffer pointer",
        c::MPI_ERR_COUNT => "invalid count argument",
        c::MPI_ERR_TYPE => "invalid datatype",
        c::MPI_ERR_TAG => "invalid tag",
        c::MPI_ERR_COMM => "invalid communicator",
        c::MPI_ERR_RANK => "invalid rank",
        c::MPI_ERR_REQUEST => "invalid request",
        c::MPI_ERR_ROOT => "invalid root",
        c::MPI_ERR_GROUP => "invalid group",
        c::MPI_ERR_OP => "invalid operation",
        c::MPI_ERR_TOPOLOGY => "invalid topology",
        c::MPI_ERR_DIMS => "invalid dimension argument",
        c::MPI_ERR_ARG => "invalid argument",
        c::MPI_ERR_UNKNOWN => "unknown error",
        c::MPI_ERR_TRUNCATE => "message truncated on receive",
        c::MPI_ERR_OTHER => "other error",
        c::MPI_ERR_INTERN => "internal error",
        c::MPI_ERR_PENDING => "pending request",
        c::MPI_ERR_IN_STATUS => "error code is in status",
        c::MPI_ERR_INFO_KEY => "invalid info key",
        c::MPI_ERR_INFO_NOKEY => "info key not defined",
        c::MPI_ERR_INFO_VALUE => "invalid info value",
        c::MPI_ERR_INFO => "invalid info object",
        c::MPI_ERR_KEYVAL => "invalid attribute key",
        c::MPI_ERR_NO_MEM => "out of memory",
        c::MPI_ERR_NAME => "invalid service name",
        c::MPI_ERR_PORT => "invalid port",
        c::MPI_ERR_SPAWN => "error spawning processes",
        c::MPI_ERR_UNSUPPORTED_OPERATION => "operation not supported",
        c::MPI_ERR_PROC_ABORTED => "a process aborted",
        c::MPI_ERR_VALUE_TOO_LARGE => "value too large",
        c::MPI_ERR_SESSION => "invalid session",
        c::MPI_ERR_ERRHANDLER => "invalid error handler",
        c::MPI_ERR_ABI => "ABI mismatch",
        c::MPI_ERR_WIN => "invalid window",
        c::MPI_ERR_FILE => "invalid file",
        c::MPI_ERR_SIZE => "invalid size",
        c::MPI_ERR_SERVICE => "invalid service",
        c::MPI_ERR_NOT_SAME => "arguments differ between processes",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_names_call_argument_and_reason() {
        let e = MpiError::invalid_handle("MPI_Send", "comm", HandleKind::Comm, c::MPI_COMM_NULL);
        assert_eq!((e.class, e.msg.as_str()), (c::MPI_ERR_COMM, "MPI_Send: comm is MPI_COMM_NULL"));
        let e = MpiError::invalid_handle("MPI_Type_commit", "datatype", HandleKind::Datatype, 0x1234);
        assert_eq!(e.msg, "MPI_Type_commit: datatype 0x1234 is not a valid datatype handle");
        let e = MpiError::rank_out_of_range("MPI_Send", "dest", 4, 2, true);
        assert_eq!(e.class, c::MPI_ERR_RANK);
        assert_eq!(e.msg, "MPI_Send: dest 4 is out of range for the remote group of an intercommunicator of size 2");
        let e = MpiError::root_out_of_range("MPI_Comm_spawn", 3, 2, "a communicator");
        assert_eq!(
            (e.class, e.msg.as_str()),
            (c::MPI_ERR_ROOT, "MPI_Comm_spawn: root 3 is out of range for a communicator of size 2")
        );
        assert_eq!(
            MpiError::does_not_fit("MPI_Pack_size", "size", 1 << 40).msg,
            "MPI_Pack_size: size 1099511627776 does not fit in an int; use MPI_Pack_size_c"
        );
    }
}
