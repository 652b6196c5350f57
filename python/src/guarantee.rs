//! The guarantee as JSON — the object `privpred calibrate --json` prints — and the names of
//! methods, calibration modes, relations and accountants as the CLI spells them.
//!
//! `calibration_json` is field for field the CLI's `privpred::cmd::calibrate::to_json` (which
//! lives in the binary crate, out of reach of this library); `python/tests/test_accounting.py`
//! compares the two on every method so they cannot drift apart silently.

use crate::errors::invalid;
use privpred_core::{Accountant, Calibration, CalibrationMode, Method, Neighbours, Noise};
use pyo3::PyResult;
use serde_json::json;

/// The `--json` object of a calibration (as `privpred calibrate --json`).
pub fn calibration_json(c: &Calibration) -> serde_json::Value {
    let noise = match c.noise {
        Noise::L2Laplace { beta } => json!({"distribution": "l2-laplace", "beta": beta}),
        Noise::Gaussian { sigma } => json!({"distribution": "gaussian", "sigma": sigma}),
        Noise::Exponential { beta } => json!({"distribution": "exponential", "beta": beta}),
    };
    let mut v = json!({
        "method": c.method.name(),
        "calibration": c.calibration.name(),
        "neighbours": c.neighbours.name(),
        "epsilon": c.privacy.epsilon,
        "delta": c.privacy.delta,
        "budget": c.budget.get(),
        "budget_unlimited": c.budget.get().is_none(),
        "noise": noise,
        "valid_guarantee": c.valid_guarantee,
        "assumptions": {
            "K": c.assumptions.k,
            "L": c.assumptions.l,
            "classes": c.assumptions.classes,
            "n": c.assumptions.n,
            "lambda": c.assumptions.lambda,
        },
        "notes": c.notes,
    });
    if let Some(o) = v.as_object_mut() {
        if let Some(r) = c.rho {
            o.insert("rho".into(), json!(r));
        }
        if let Some(s) = c.noise_multiplier {
            o.insert("noise_multiplier".into(), json!(s));
        }
        if let Some(e) = c.epsilon_spent {
            o.insert("epsilon_spent".into(), json!(e));
        }
        if let Some(q) = c.sampling_rate {
            o.insert("sampling_rate".into(), json!(q));
        }
        if let Some(k) = c.steps {
            o.insert("steps".into(), json!(k));
        }
    }
    v
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
