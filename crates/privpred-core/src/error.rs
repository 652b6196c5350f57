//! The one error type of this crate.

/// Errors of the privacy core. Every variant names what is wrong and the valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoreError {
    /// A user-supplied argument is outside its valid range.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidArgument {
        /// The argument's name as the user knows it (e.g. `--epsilon`).
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// The valid range, in words.
        expected: String,
    },
    /// The combination of arguments is not supported (e.g. δ > 0 for a δ = 0-only rule).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A numerical procedure failed to reach its tolerance.
    #[error("numerical failure: {0}")]
    Numerical(String),
}

impl CoreError {
    /// Convenience constructor for [`CoreError::InvalidArgument`].
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        CoreError::InvalidArgument {
            name,
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, CoreError>;
