//! The single error type of the crate.

use std::fmt;

/// What went wrong, coarsely, so callers (and tests) can react without
/// parsing messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiErrorKind {
    /// The `BATON_*` environment is incomplete or malformed.
    Environment,
    /// A socket operation failed or the peer went away.
    Io,
    /// The peer could not prove knowledge of the job secret.
    Auth,
    /// A frame or message violated the protocol.
    Protocol,
    /// The launcher answered with an explicit error.
    Launcher,
    /// The caller used the API incorrectly (bad rank, call after finalize...).
    Usage,
}

/// Error returned by every fallible operation of this crate; its `Display`
/// is a complete human sentence fragment suitable for an error message.
#[derive(Debug, Clone)]
pub struct PmiError {
    kind: PmiErrorKind,
    msg: String,
}

impl PmiError {
    pub fn new(kind: PmiErrorKind, msg: impl Into<String>) -> PmiError {
        PmiError { kind, msg: msg.into() }
    }

    pub fn kind(&self) -> PmiErrorKind {
        self.kind
    }

    /// The message without the "bootstrap: " prefix of `Display`; for a
    /// [`PmiErrorKind::Launcher`] error, the launcher's words verbatim.
    pub fn message(&self) -> &str {
        &self.msg
    }

    pub(crate) fn io(context: &str, err: std::io::Error) -> PmiError {
        PmiError::new(PmiErrorKind::Io, format!("{context}: {err}"))
    }

    pub(crate) fn protocol(msg: impl Into<String>) -> PmiError {
        PmiError::new(PmiErrorKind::Protocol, msg)
    }
}

impl fmt::Display for PmiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bootstrap: {}", self.msg)
    }
}

impl std::error::Error for PmiError {}
