//! Library errors: each carries a one-line cause and a hint, and maps to an exit code.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// Bad input from the user: a flag, a file, a command line. Exit 2.
    #[error("{cause}\n  hint: {hint}")]
    Input { cause: String, hint: String },
    /// A check (gate, validate) failed. Exit 1.
    #[error("{0}")]
    CheckFailed(String),
    /// The measured command failed: its own status is passed through.
    #[error("{cause}")]
    Child { cause: String, status: i32 },
    /// The environment refuses what we need (no PMU, paranoid, ptrace scope). Exit 2.
    #[error("{cause}\n  hint: {hint}")]
    Unavailable { cause: String, hint: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn input(cause: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::Input {
            cause: cause.into(),
            hint: hint.into(),
        }
    }
    pub fn unavailable(cause: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::Unavailable {
            cause: cause.into(),
            hint: hint.into(),
        }
    }
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::CheckFailed(_) => 1,
            Error::Child { status, .. } => *status,
            _ => 2,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
