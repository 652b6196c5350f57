//! The one error type of this crate.

/// Errors of the auditor. Every variant names what is wrong and the valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AuditError {
    /// A user-supplied argument is outside its valid range.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidArgument {
        /// The argument's name as the user knows it (e.g. `--trials`).
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// The valid range, in words.
        expected: String,
    },
    /// The combination of arguments cannot be audited (e.g. δ = 0 for DP-SGD).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Calibration of the audited mechanism failed.
    #[error("calibration failed: {0}")]
    Calibration(#[from] privpred_core::CoreError),
    /// A simulated or end-to-end run failed.
    #[error("audited run failed: {0}")]
    Run(String),
}

impl AuditError {
    /// Convenience constructor for [`AuditError::InvalidArgument`].
    pub fn invalid(
        name: &'static str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        AuditError::InvalidArgument {
            name,
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, AuditError>;
