//! The error type of opening, verifying and writing artifacts and keys.

use std::path::{Path, PathBuf};

/// What went wrong; every variant but [`ReleaseError::Random`] and a write's
/// [`ReleaseError::Io`] is the user's (a file or key that is not what it must be).
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A key file is missing, malformed or of the wrong kind.
    #[error("{}: {reason}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file is not a valid privpred model artifact of this format.
    #[error("{}: {reason}", path.display())]
    Format {
        /// The artifact.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file is valid but not covered: unsigned, signed by a key that is not trusted, or
    /// sealed with a key that is not given.
    #[error("{}: {reason}", path.display())]
    Refused {
        /// The artifact.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// The operating system's random source failed.
    #[error("the operating system's random source failed: {0}")]
    Random(String),
    /// The payload (a linear model) is invalid.
    #[error(transparent)]
    Linear(#[from] privpred_linear::LinearError),
    /// The payload (a ResNet model) is invalid.
    #[cfg(feature = "nn")]
    #[error(transparent)]
    Nn(#[from] privpred_nn::NnError),
}

impl ReleaseError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ReleaseError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub(crate) fn format(path: &Path, reason: impl Into<String>) -> Self {
        ReleaseError::Format {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
    pub(crate) fn refused(path: &Path, reason: impl Into<String>) -> Self {
        ReleaseError::Refused {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
    /// Whether the error is the user's (a bad file, key or argument: exit code 2) rather
    /// than the machine's (an I/O failure while writing, the random source).
    pub fn is_user_error(&self) -> bool {
        match self {
            ReleaseError::Random(_) => false,
            ReleaseError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::AlreadyExists
                    | std::io::ErrorKind::InvalidData
                    | std::io::ErrorKind::IsADirectory
                    | std::io::ErrorKind::NotADirectory
            ),
            ReleaseError::Linear(e) => e.is_user_error(),
            #[cfg(feature = "nn")]
            ReleaseError::Nn(e) => !matches!(
                e,
                privpred_nn::NnError::Diverged(_)
                    | privpred_nn::NnError::Engine(_)
                    | privpred_nn::NnError::Stopped(_)
            ),
            _ => true,
        }
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, ReleaseError>;
