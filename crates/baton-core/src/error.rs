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
