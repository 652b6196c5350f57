//! The one error type of this crate.

use std::path::PathBuf;

/// Errors of the linear-model crate. Every variant names what is wrong and, where it applies,
/// the valid range.
#[derive(Debug, thiserror::Error)]
pub enum LinearError {
    /// A user-supplied argument is outside its valid range.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidArgument {
        /// The argument's name as the user knows it (e.g. `--lambda`).
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// The valid range, in words.
        expected: String,
    },
    /// A query or dataset has the wrong shape for the model.
    #[error("dimension mismatch: {0}")]
    Dimension(String),
    /// A query or parameter contains NaN or an infinity.
    #[error("non-finite value: {0}")]
    NonFinite(String),
    /// A query lies outside the unit ball that the guarantee assumes.
    #[error("unit-ball invariant violated: {0}")]
    UnitBall(String),
    /// A model file is corrupt, from an incompatible version, or not a privpred model.
    #[error("{path}: {reason}")]
    Artifact {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A numerical procedure failed (e.g. the optimiser produced a non-finite value).
    #[error("numerical failure: {0}")]
    Numerical(String),
    /// A fit did not reach the certified gradient-norm bound its guarantee assumes
    /// (docs/guarantees.md, erratum 4.8): it is refused, never released.
    #[error("fit not certified: {0}")]
    NotCertified(String),
    /// The privacy core rejected the calibration request.
    #[error(transparent)]
    Core(#[from] privpred_core::CoreError),
    /// The data layer rejected the data.
    #[error(transparent)]
    Data(#[from] privpred_data::DataError),
}

impl LinearError {
    /// Convenience constructor for [`LinearError::InvalidArgument`].
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        LinearError::InvalidArgument {
            name,
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    /// Whether the error is caused by bad user input (arguments, queries, model files, data),
    /// as opposed to an internal or I/O failure: the CLI maps these to exit code 2.
    /// A missing file, a directory given for a file or an unreadable path is the user's (the
    /// path they named); other I/O failures (a full disk, a broken pipe) are internal.
    pub fn is_user_error(&self) -> bool {
        match self {
            LinearError::Io { source, .. } => is_bad_path(source),
            LinearError::Numerical(_) | LinearError::NotCertified(_) => false,
            _ => true,
        }
    }
}

/// Whether an I/O error is caused by the path given (missing, a directory, not permitted).
pub fn is_bad_path(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        NotFound | IsADirectory | NotADirectory | PermissionDenied | InvalidFilename
    )
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, LinearError>;
