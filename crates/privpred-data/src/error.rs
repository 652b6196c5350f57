//! The one error type of this crate.

use std::path::PathBuf;

/// Errors of the data layer; each names the file (where there is one) and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file's contents are malformed.
    #[error("{path}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file's SHA-256 does not match the reference: the file is not used.
    #[error(
        "{path}: checksum mismatch (SHA-256 {actual}, expected {expected}); the file is not used — delete it and run `privpred data fetch`"
    )]
    Checksum {
        /// The file.
        path: PathBuf,
        /// Expected SHA-256 (hex).
        expected: String,
        /// Actual SHA-256 (hex).
        actual: String,
    },
    /// A user argument is invalid.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidArgument {
        /// Argument name.
        name: &'static str,
        /// The value given.
        value: String,
        /// The valid range in words.
        expected: String,
    },
    /// The data violates an invariant (e.g. a row outside the unit ball).
    #[error("{0}")]
    Invariant(String),
    /// The dataset could not be found or obtained.
    #[error("{0}")]
    NotFound(String),
}

impl DataError {
    /// The message without the file name in front (for a caller that names the file itself,
    /// so that the path is printed once).
    pub fn reason(&self) -> String {
        let text = self.to_string();
        match self {
            DataError::Io { source, .. } => source.to_string(),
            DataError::Format { reason, .. } => reason.clone(),
            DataError::Checksum { path, .. } => text
                .strip_prefix(&format!("{}: ", path.display()))
                .map(str::to_string)
                .unwrap_or(text),
            _ => text,
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, DataError>;
