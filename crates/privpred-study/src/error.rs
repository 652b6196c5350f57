//! The error type of the study crate.

use std::path::PathBuf;

/// Errors of sweeps, result files, merging and plotting.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// A user-supplied argument is out of range or malformed.
    #[error("invalid {name} `{value}`: {expected}")]
    InvalidArgument {
        /// The argument's name as the user wrote it (`--shard`, `figure`, ...).
        name: &'static str,
        /// The value given.
        value: String,
        /// What would have been valid.
        expected: String,
    },
    /// A results directory is inconsistent with the requested run (different seed, figures...).
    #[error("{path}: {message}")]
    Incompatible {
        /// The directory or file.
        path: PathBuf,
        /// What does not match.
        message: String,
    },
    /// A results file could not be parsed.
    #[error("{path}, line {line}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Plot rendering failed.
    #[error("plot {path}: {message}")]
    Plot {
        /// The output file.
        path: PathBuf,
        /// The backend's message.
        message: String,
    },
    /// A figure needs a feature this build lacks (fig7a/b need `--features nn`).
    #[error("{0}")]
    Unsupported(String),
    /// The computation of a unit failed (training, calibration or data loading).
    #[error("{context}: {message}")]
    Compute {
        /// The unit or group being computed.
        context: String,
        /// The underlying error, rendered.
        message: String,
    },
    /// A training run reached its time limit (`reproduce --nn-time-limit-s`) and stopped at an
    /// epoch boundary, keeping its checkpoint: the same command with `--resume` continues it
    /// from there. The finished units are already in the results.
    #[error("{context}: {message} (stopped, resumable: run the same command with --resume)")]
    Stopped {
        /// The unit or group whose training stopped.
        context: String,
        /// Where it stopped and the checkpoint, rendered.
        message: String,
    },
    /// A computation shared by several units refused the user's input (a corrupt data file,
    /// a value out of range): the underlying error, rendered; a usage error like the one it
    /// renders.
    #[error("{0}")]
    BadInput(String),
    /// A privacy calibration was rejected.
    #[error(transparent)]
    Core(#[from] privpred_core::CoreError),
    /// Loading or preprocessing data failed.
    #[error(transparent)]
    Data(#[from] privpred_data::DataError),
    /// Training or prediction with a linear model failed.
    #[error(transparent)]
    Linear(#[from] privpred_linear::LinearError),
}

impl StudyError {
    /// Builds an [`StudyError::InvalidArgument`].
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        StudyError::InvalidArgument {
            name,
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    /// Builds an [`StudyError::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StudyError::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether the error is the user's (bad argument or incompatible directory): exit code 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            StudyError::InvalidArgument { .. }
                | StudyError::Incompatible { .. }
                | StudyError::Unsupported(_)
                | StudyError::BadInput(_)
                | StudyError::Core(_)
                | StudyError::Data(_)
        ) || matches!(self, StudyError::Linear(e) if e.is_user_error())
    }
}

/// Result alias of the study crate.
pub type Result<T> = std::result::Result<T, StudyError>;
