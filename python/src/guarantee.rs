//! The guarantee as JSON — the object `privpred calibrate --json` prints — and the names of
//! methods, calibration modes, relations and accountants as the CLI spells them.
//!
//! `calibration_json` is the CLI's own builder (`privpred_core::guarantee_json::to_json`);
//! `python/tests/test_accounting.py` still compares the two outputs on every method.

use crate::errors::invalid;
use privpred_core::{Accountant, Calibration, CalibrationMode, Method, Neighbours};
use pyo3::PyResult;

/// The `--json` object of a calibration (as `privpred calibrate --json`): the same builder,
/// [`privpred_core::guarantee_json::to_json`].
pub fn calibration_json(c: &Calibration) -> serde_json::Value {
    privpred_core::guarantee_json::to_json(c)
}

/// A private method by its CLI name (`subsample-and-aggregate` is accepted as an alias).
pub fn method(s: &str) -> PyResult<Method> {
    let alias = if s == "subsample-and-aggregate" {
        "subsample-aggregate"
    } else {
        s
    };
    Method::ALL
        .into_iter()
        .find(|m| m.name() == alias)
        .ok_or_else(|| {
            invalid(
                "method",
                s,
                "expected model-sensitivity, loss-perturbation, dp-sgd, prediction-sensitivity or subsample-aggregate",
            )
        })
}

/// A calibration mode by name.
pub fn mode(s: &str) -> PyResult<CalibrationMode> {
    [
        CalibrationMode::Paper,
        CalibrationMode::Corrected,
        CalibrationMode::Tight,
    ]
    .into_iter()
    .find(|m| m.name() == s)
    .ok_or_else(|| invalid("calibration", s, "expected paper, corrected or tight"))
}

/// A neighbouring relation by name.
pub fn neighbours(s: &str) -> PyResult<Neighbours> {
    Neighbours::ALL
        .into_iter()
        .find(|m| m.name() == s)
        .ok_or_else(|| invalid("neighbours", s, "expected replace-one or add-remove"))
}

/// An accountant by name.
pub fn accountant(s: &str) -> PyResult<Accountant> {
    [
        Accountant::Rdp,
        Accountant::RdpClassic,
        Accountant::Pld,
        Accountant::Best,
    ]
    .into_iter()
    .find(|a| a.name() == s)
    .ok_or_else(|| invalid("accountant", s, "expected rdp, rdp-classic, pld or best"))
}
