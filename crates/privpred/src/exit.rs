//! Error → exit-code mapping. Exit code 2: usage errors and bad user input (invalid
//! arguments, malformed data files, models that do not fit the query); 3: a run stopped at
//! its time limit with a checkpoint, resumable ([`STOPPED_RESUMABLE`]); 1: everything else.

/// The exit code of `reproduce fig7 --nn-time-limit-s` when training reached its time limit
/// and stopped at an epoch boundary with its checkpoint kept: not a failure; the same command
/// with `--resume` continues from the checkpoint.
pub const STOPPED_RESUMABLE: i32 = 3;

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
        if let Some(privpred_study::StudyError::Stopped { .. }) =
            cause.downcast_ref::<privpred_study::StudyError>()
        {
            return STOPPED_RESUMABLE;
        }
        if cause.downcast_ref::<UsageError>().is_some()
            || cause.downcast_ref::<privpred_core::CoreError>().is_some()
            || cause.downcast_ref::<privpred_data::DataError>().is_some()
        {
            return 2;
        }
    }
    1
}

/// The one line printed for an error: each cause of the chain once. A cause whose text is
/// already part of what is printed (an I/O error that its wrapper quotes, a path named by
/// both) is left out, so nothing appears twice.
pub fn render(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if out.is_empty() {
            out = text;
        } else if text.contains(&out) {
            // the cause repeats and extends everything so far: print it instead
            out = text;
        } else {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::IsADirectory);
        let text = io.to_string();
        let e = anyhow::Error::new(privpred_data::DataError::Io {
            path: "/tmp".into(),
            source: io,
        })
        .context("loading dataset x");
        let r = render(&e);
        assert_eq!(r.matches(&text).count(), 1, "{r}");
        assert!(r.starts_with("loading dataset x: /tmp: "), "{r}");
    }
}
