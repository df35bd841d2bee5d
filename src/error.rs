//! Library errors: each carries a one-line cause and a hint, and maps to an exit code.

use thiserror::Error;

/// Everything the library can fail with: a cause in one line, a hint where the user can act,
/// and the process exit code it maps to ([`Error::exit_code`]).
#[derive(Debug, Error)]
pub enum Error {
    /// Bad input from the user: a flag, a file, a command line. Exit 2.
    #[error("{cause}\n  hint: {hint}")]
    Input {
        /// What is wrong, in one line.
        cause: String,
        /// What to do about it.
        hint: String,
    },
    /// A check (gate, validate) failed. Exit 1.
    #[error("{0}")]
    CheckFailed(String),
    /// The measured command failed: its own status is passed through.
    #[error("{cause}")]
    Child {
        /// How the command ended.
        cause: String,
        /// The exit status to pass on.
        status: i32,
    },
    /// The environment refuses what we need (no PMU, paranoid, ptrace scope). Exit 2.
    #[error("{cause}\n  hint: {hint}")]
    Unavailable {
        /// What is missing or refused, in one line.
        cause: String,
        /// How to get it (a sysctl, a capability, another backend).
        hint: String,
    },
    /// A file or system call failed. Exit 2.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and to which path.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// An [`Error::Input`].
    pub fn input(cause: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::Input {
            cause: cause.into(),
            hint: hint.into(),
        }
    }
    /// An [`Error::Unavailable`].
    pub fn unavailable(cause: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::Unavailable {
            cause: cause.into(),
            hint: hint.into(),
        }
    }
    /// An [`Error::Io`]: `context` says what was being done ("reading report.json").
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
    /// The process exit code: 1 for a failed check, the child's status for a failed child,
    /// 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::CheckFailed(_) => 1,
            Error::Child { status, .. } => *status,
            _ => 2,
        }
    }
}

/// The library's result type, [`Error`](enum@Error) by default.
pub type Result<T, E = Error> = std::result::Result<T, E>;
