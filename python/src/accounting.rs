//! `calibrate` (as `privpred calibrate --json`) and the DP-SGD accountants (as
//! `privpred account dp-sgd`), over `privpred_core`.

use crate::errors::{core, invalid};
use crate::guarantee::{self, calibration_json};
use privpred_core::calibrate::{CalibrationRequest, calibrate as core_calibrate};
use privpred_core::dpsgd::{dpsgd_epsilon_neighbours, noise_multiplier_neighbours};
use privpred_core::{Budget, DpSgdSchedule, Privacy, SampledSteps};
use pyo3::prelude::*;

/// The calibration of `method` for (ε, δ) and budget B, as the JSON text of
/// `privpred calibrate --json` (the same request, the same core function).
#[pyfunction]
#[pyo3(signature = (method, epsilon, delta=0.0, budget=None, n=None, lam=None, classes=10, batch_size=None, epochs=None, calibration="corrected", neighbours="replace-one"))]
#[allow(clippy::too_many_arguments)]
pub fn calibrate(
    method: &str,
    epsilon: f64,
    delta: f64,
    budget: Option<u64>,
    n: Option<usize>,
    lam: Option<f64>,
    classes: usize,
    batch_size: Option<usize>,
    epochs: Option<f64>,
    calibration: &str,
    neighbours: &str,
) -> PyResult<String> {
    let m = guarantee::method(method)?;
    let privacy = Privacy::new(epsilon, delta).map_err(core)?;
    let mut req = CalibrationRequest::new(m, guarantee::mode(calibration)?, privacy);
    if let Some(b) = budget {
        req.budget = Budget::finite(b).map_err(core)?;
    }
    if m.is_private_training() {
        req.budget = Budget::Unlimited;
    }
    req.n = n;
    req.lambda = lam;
    req.classes = classes;
    req.neighbours = guarantee::neighbours(neighbours)?;
    if m == privpred_core::Method::DpSgd {
        match (batch_size, epochs) {
            (Some(b), Some(e)) => {
                req.dp_sgd = Some(DpSgdSchedule {
                    batch_size: b,
                    epochs: e,
                })
            }
            (None, _) => {
                return Err(invalid(
                    "batch_size",
                    "none",
                    "dp-sgd needs batch_size b >= 1 (and n, epochs)",
                ));
            }
            (_, None) => {
                return Err(invalid(
                    "epochs",
                    "none",
                    "dp-sgd needs epochs > 0 (and n, batch_size)",
                ));
            }
        }
    }
    let c = core_calibrate(&req).map_err(core)?;
    Ok(calibration_json(&c).to_string())
}

/// ε of DP-SGD (Poisson sampling rate q, noise multiplier σ, `steps` steps) at δ.
#[pyfunction]
#[pyo3(signature = (sample_rate, noise_multiplier, steps, delta, accountant="rdp", neighbours="add-remove"))]
pub fn epsilon_dp_sgd(
    py: Python<'_>,
    sample_rate: f64,
    noise_multiplier: f64,
    steps: u64,
    delta: f64,
    accountant: &str,
    neighbours: &str,
) -> PyResult<f64> {
    let acc = guarantee::accountant(accountant)?;
    let rel = guarantee::neighbours(neighbours)?;
    let schedule = SampledSteps::new(sample_rate, steps).map_err(core)?;
    py.detach(|| dpsgd_epsilon_neighbours(&schedule, noise_multiplier, delta, acc, rel))
        .map_err(core)
}

/// The smallest noise multiplier σ (to 1e-4, rounded up) with ε(σ) ≤ target; returns
/// (σ, ε(σ)).
#[pyfunction]
#[pyo3(signature = (target_epsilon, target_delta, sample_rate, steps, accountant="rdp", neighbours="add-remove"))]
pub fn noise_multiplier(
    py: Python<'_>,
    target_epsilon: f64,
    target_delta: f64,
    sample_rate: f64,
    steps: u64,
    accountant: &str,
    neighbours: &str,
) -> PyResult<(f64, f64)> {
    let acc = guarantee::accountant(accountant)?;
    let rel = guarantee::neighbours(neighbours)?;
    let schedule = SampledSteps::new(sample_rate, steps).map_err(core)?;
    py.detach(|| noise_multiplier_neighbours(target_epsilon, target_delta, &schedule, acc, rel))
        .map_err(core)
}
