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
    /// The ledger could not be opened, read or written (the service fails closed).
    #[error("ledger error: {0}")]
    Ledger(String),
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
        matches!(self, ServeError::Config { .. })
    }
}

impl From<rusqlite::Error> for ServeError {
    fn from(e: rusqlite::Error) -> Self {
        ServeError::Ledger(format!("sqlite: {e}"))
    }
}

impl From<tokio_postgres::Error> for ServeError {
    fn from(e: tokio_postgres::Error) -> Self {
        // `Display` of a tokio-postgres error hides the server's message: include the source.
        let detail = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => match std::error::Error::source(&e) {
                Some(s) => format!("{e}: {s}"),
                None => e.to_string(),
            },
        };
        ServeError::Ledger(format!("postgres: {detail}"))
    }
}

/// Result alias of the serve crate.
pub type Result<T> = std::result::Result<T, ServeError>;
