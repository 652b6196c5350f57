//! The serve crate's error type.

/// Errors of the prediction service.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A configuration value (CLI flag, ledger spec, tokens file, model file) is invalid.
    #[error("invalid {what}: {message}")]
    Config {
        /// Which argument or file.
        what: String,
        /// What is wrong and what is valid.
        message: String,
    },
    /// The answering path refused or failed (the ledger could not be opened, read or
    /// written: the service fails closed; or a ledger or spend mark is invalid).
    #[error(transparent)]
    Answer(#[from] privpred_answer::AnswerError),
    /// The model refused an input or failed to answer.
    #[error("model error: {0}")]
    Model(String),
    /// An I/O error (binding the listener, reading a file).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl ServeError {
    /// A configuration error naming the argument or file.
    pub fn config(what: impl Into<String>, message: impl Into<String>) -> Self {
        ServeError::Config {
            what: what.into(),
            message: message.into(),
        }
    }

    /// Whether this is a configuration error (bad user input: exit code 2 at the CLI).
    pub fn is_config(&self) -> bool {
        match self {
            ServeError::Config { .. } => true,
            ServeError::Answer(e) => e.is_config(),
            _ => false,
        }
    }
}

/// Result alias of the serve crate.
pub type Result<T> = std::result::Result<T, ServeError>;
