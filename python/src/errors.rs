//! Rust errors as Python exceptions, with the same messages as the CLI prints.
//!
//! Bad arguments, data, queries and model files (what the CLI answers with exit code 2) are
//! `ValueError`; file-system failures are `OSError`; numerical failures and uncertified fits
//! are `RuntimeError`; a spent inference budget is `privpred.BudgetExhausted`. Where the
//! crates' messages name a command-line flag (`--accountant pld`), the Python message names
//! the Python parameter instead (`accountant="pld"`): see [`python_words`].

use privpred_core::CoreError;
use privpred_data::DataError;
use privpred_linear::LinearError;
use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError, PyValueError};

create_exception!(
    privpred,
    BudgetExhausted,
    PyException,
    "The inference budget B of a private-prediction model is spent: the guarantee covers no further answers."
);

/// The command-line words of the crates' messages and what a Python caller writes instead,
/// most specific first (a flag with its value before the flag alone).
const PYTHON_WORDS: &[(&str, &str)] = &[
    ("--accountant pld", "accountant=\"pld\""),
    ("--neighbours add-remove", "neighbours=\"add-remove\""),
    ("--neighbours replace-one", "neighbours=\"replace-one\""),
    ("--n, --batch-size and --epochs", "n, batch_size and epochs"),
    ("--init-ledger", "init_ledger=True"),
    ("--allow-invalid-guarantee", "allow_invalid_guarantee=True"),
    ("invalid sampling-rate", "invalid sample_rate"),
    ("--lambda VALUE", "lam=VALUE"),
    ("--clip VALUE", "clip=VALUE"),
    ("--loss softmax", "loss=\"softmax\""),
    ("--loss logistic", "loss=\"logistic\""),
    ("--lambda", "lam"),
    ("invalid --no-header = true", "invalid header = False"),
    ("--no-header", "header=False"),
    ("--delta 1e-6", "delta=1e-6"),
];

/// The crates' argument names (`invalid NAME = VALUE: …`) whose Python parameter is spelt
/// otherwise than NAME with `_` for `-`.
const PYTHON_NAMES: &[(&str, &str)] = &[("lambda", "lam"), ("cv draws", "cv_draws")];

/// `invalid NAME = …` with NAME as the Python parameter: [`PYTHON_NAMES`], or a kebab-case
/// NAME (`batch-size`) in snake case (`batch_size`).
fn python_names(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find("invalid ") {
        let (head, tail) = rest.split_at(i + "invalid ".len());
        out.push_str(head);
        rest = tail;
        let Some(eq) = rest.find(" =") else { continue };
        let name = &rest[..eq];
        if let Some((_, py)) = PYTHON_NAMES.iter().find(|(n, _)| *n == name) {
            out.push_str(py);
            rest = &rest[eq..];
        } else if !name.is_empty()
            && name.contains('-')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            out.push_str(&name.replace('-', "_"));
            rest = &rest[eq..];
        }
    }
    out.push_str(rest);
    out
}

/// A crate's message with the Python parameters named instead of the command-line flags:
/// the known phrases of [`PYTHON_WORDS`], then any other `--flag-name` as `flag_name`, then
/// the argument of `invalid NAME = VALUE` as its Python parameter ([`python_names`]).
pub fn python_words(msg: &str) -> String {
    let mut s = msg.to_string();
    for (cli, py) in PYTHON_WORDS {
        s = s.replace(cli, py);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find("--") {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        let word = &tail[2..];
        let starts_flag = head.is_empty() || head.ends_with([' ', '(', '`', '\'', '"']);
        let len = word
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(word.len());
        if starts_flag && word.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.push_str(&word[..len].replace('-', "_"));
            rest = &word[len..];
        } else {
            out.push_str("--");
            rest = word;
        }
    }
    out.push_str(rest);
    python_names(&out)
}

/// A core (calibration, accounting) error.
pub fn core(e: CoreError) -> PyErr {
    let msg = python_words(&e.to_string());
    match e {
        CoreError::Numerical(_) => PyRuntimeError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// A data-layer (dataset, preprocessing) error.
pub fn data(e: DataError) -> PyErr {
    let msg = python_words(&e.to_string());
    match e {
        DataError::Io { .. } => PyOSError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// A linear-model error: user errors (the CLI's exit code 2) are `ValueError`.
pub fn linear(e: LinearError) -> PyErr {
    match e {
        LinearError::Io { .. } => PyOSError::new_err(python_words(&e.to_string())),
        LinearError::Core(c) => core(c),
        LinearError::Data(d) => data(d),
        _ if e.is_user_error() => PyValueError::new_err(python_words(&e.to_string())),
        _ => PyRuntimeError::new_err(python_words(&e.to_string())),
    }
}

/// A model-file error: a file or key that is not what it must be is a `ValueError`, one that
/// cannot be read an `OSError`.
pub fn release(e: privpred_release::ReleaseError) -> PyErr {
    use privpred_release::ReleaseError;
    match e {
        ReleaseError::Linear(l) => linear(l),
        ReleaseError::Io { .. } => PyOSError::new_err(python_words(&e.to_string())),
        _ if e.is_user_error() => PyValueError::new_err(python_words(&e.to_string())),
        _ => PyRuntimeError::new_err(python_words(&e.to_string())),
    }
}

/// A bad argument, worded as the crates word theirs: `invalid NAME = VALUE: EXPECTED`
/// (NAME and the flags in EXPECTED as Python parameters).
pub fn invalid(name: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    PyValueError::new_err(python_words(&format!(
        "invalid {name} = {value}: {expected}"
    )))
}
