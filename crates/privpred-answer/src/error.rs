//! The answering path's error type.

/// Errors of the answering path: opening a model's budget, its ledger, its spend mark.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// A configuration value (a flag, a ledger spec, a model file, a spend mark) is invalid,
    /// or the model may not answer: bad user input.
    #[error("invalid {what}: {message}")]
    Config {
        /// Which argument or file.
        what: String,
        /// What is wrong and what is valid.
        message: String,
    },
    /// The ledger could not be opened, read or written (nothing is answered: fail closed).
    #[error("ledger error: {0}")]
    Ledger(String),
    /// The model file was refused by the release loader (unsigned, seeded, edited, …).
    #[error(transparent)]
    Release(#[from] privpred_release::ReleaseError),
    /// An I/O error (a spend mark, a backup file).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl AnswerError {
    /// A configuration error naming the argument or file.
    pub fn config(what: impl Into<String>, message: impl Into<String>) -> Self {
        AnswerError::Config {
            what: what.into(),
            message: message.into(),
        }
    }

    /// Whether this is a configuration error (bad user input: exit code 2 at the CLI).
    pub fn is_config(&self) -> bool {
        match self {
            AnswerError::Config { .. } => true,
            AnswerError::Release(e) => e.is_user_error(),
            _ => false,
        }
    }
}

impl From<rusqlite::Error> for AnswerError {
    fn from(e: rusqlite::Error) -> Self {
        AnswerError::Ledger(format!("sqlite: {e}"))
    }
}

impl From<tokio_postgres::Error> for AnswerError {
    fn from(e: tokio_postgres::Error) -> Self {
        // `Display` of a tokio-postgres error hides the server's message: include the source.
        let detail = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => match std::error::Error::source(&e) {
                Some(s) => format!("{e}: {s}"),
                None => e.to_string(),
            },
        };
        AnswerError::Ledger(format!("postgres: {detail}"))
    }
}

/// Result alias of the answering path.
pub type Result<T> = std::result::Result<T, AnswerError>;
