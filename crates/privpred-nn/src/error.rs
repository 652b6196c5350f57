//! The one error type of this crate.

/// Errors of the neural-network layer. Every variant names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum NnError {
    /// A user-supplied argument is outside its valid range.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidArgument {
        /// The argument's name as the user knows it.
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// The valid range, in words.
        expected: String,
    },
    /// Shapes of inputs, parameters or data do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A data file is malformed.
    #[error("{path}: {msg}")]
    Format {
        /// The file concerned.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// Training diverged (non-finite loss or parameters).
    #[error("training diverged: {0}")]
    Diverged(String),
    /// The compute engine failed at run time (e.g. libtorch out of device memory, a CUDA
    /// driver error): not the user's input.
    #[error("gradient engine failed: {0}")]
    Engine(String),
    /// A resumable training run reached its deadline; its checkpoint continues it.
    #[error("stopped: {0}")]
    Stopped(String),
    /// An error from the privacy core.
    #[error(transparent)]
    Core(#[from] privpred_core::CoreError),
    /// An error from the data layer.
    #[error(transparent)]
    Data(#[from] privpred_data::DataError),
}

impl NnError {
    /// Convenience constructor for [`NnError::InvalidArgument`].
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        NnError::InvalidArgument {
            name,
            value: value.to_string(),
            expected: expected.into(),
        }
    }
    /// Wraps an I/O error with its path.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        NnError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
    /// A format error for a file.
    pub fn format(path: impl AsRef<std::path::Path>, msg: impl Into<String>) -> Self {
        NnError::Format {
            path: path.as_ref().display().to_string(),
            msg: msg.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, NnError>;
