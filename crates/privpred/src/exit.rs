//! Error → exit-code mapping. Exit code 2: usage errors and bad user input (invalid
//! arguments, malformed data files, models that do not fit the query); 1: everything else.

/// A usage error or bad user input: exit code 2. Command modules wrap user-facing
/// validation failures of other crates with [`usage`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Wraps any displayable error as a usage error (exit code 2).
#[allow(dead_code)]
pub fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(UsageError(e.to_string()))
}

/// The exit code for an error chain.
pub fn code(e: &anyhow::Error) -> i32 {
    for cause in e.chain() {
        if cause.downcast_ref::<UsageError>().is_some()
            || cause.downcast_ref::<privpred_core::CoreError>().is_some()
            || cause.downcast_ref::<privpred_data::DataError>().is_some()
        {
            return 2;
        }
    }
    1
}
