//! Rust errors as Python exceptions, with the same messages as the CLI prints.
//!
//! Bad arguments, data, queries and model files (what the CLI answers with exit code 2) are
//! `ValueError`; file-system failures are `OSError`; numerical failures and uncertified fits
//! are `RuntimeError`; a spent inference budget is `privpred.BudgetExhausted`.

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

/// A core (calibration, accounting) error.
pub fn core(e: CoreError) -> PyErr {
    match e {
        CoreError::Numerical(_) => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A data-layer (dataset, preprocessing) error.
pub fn data(e: DataError) -> PyErr {
    match e {
        DataError::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A linear-model error: user errors (the CLI's exit code 2) are `ValueError`.
pub fn linear(e: LinearError) -> PyErr {
    match e {
        LinearError::Io { .. } => PyOSError::new_err(e.to_string()),
        LinearError::Core(c) => core(c),
        LinearError::Data(d) => data(d),
        _ if e.is_user_error() => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// A bad argument, worded as the crates word theirs: `invalid NAME = VALUE: EXPECTED`.
pub fn invalid(name: &str, value: impl std::fmt::Display, expected: &str) -> PyErr {
    PyValueError::new_err(format!("invalid {name} = {value}: {expected}"))
}
