//! Calibrations for the two deep-model methods, delegated to `privpred_core` (docs/guarantees.md#calibrations–5):
//! DP-SGD's noise multiplier from the accountant of the sampled Gaussian mechanism, and
//! subsample-and-aggregate's β for the exponential mechanism.

use crate::error::Result;
use privpred_core::{
    Budget, Calibration, CalibrationMode, CalibrationRequest, DpSgdSchedule, Method, Neighbours,
    Privacy, calibrate,
};

/// DP-SGD with Poisson rate q = b/N over ⌈epochs·N/b⌉ steps (`privpred_core::calibrate::dp_sgd`:
/// RDP of the sampled Gaussian, Mironov, Talwar & Zhang 2019; `tight` adds a PLD accountant).
/// The result's `noise_multiplier` σ gives gradient-noise std σ·ν.
pub fn dpsgd(
    mode: CalibrationMode,
    privacy: Privacy,
    n: usize,
    batch_size: usize,
    epochs: f64,
    classes: usize,
) -> Result<Calibration> {
    dpsgd_neighbours(
        mode,
        privacy,
        n,
        batch_size,
        epochs,
        classes,
        Neighbours::ReplaceOne,
    )
}

/// [`dpsgd`] for the neighbouring relation `neighbours` (replace-one: the PLD accountant of
/// the replace-one dominating pair, `privpred_core::pld::pld_epsilon_neighbours`).
pub fn dpsgd_neighbours(
    mode: CalibrationMode,
    privacy: Privacy,
    n: usize,
    batch_size: usize,
    epochs: f64,
    classes: usize,
    neighbours: Neighbours,
) -> Result<Calibration> {
    let mut req = CalibrationRequest::new(Method::DpSgd, mode, privacy);
    req.neighbours = neighbours;
    req.n = Some(n);
    req.classes = classes;
    req.dp_sgd = Some(DpSgdSchedule { batch_size, epochs });
    let mut c = calibrate(&req)?;
    if mode == CalibrationMode::Paper {
        c.invalidate("paper mode trains with per-layer clipping and shuffled fixed-size batches (errata 4.2 and 4.3, docs/guarantees.md#errata): not a valid guarantee");
    }
    Ok(c)
}

/// Subsample-and-aggregate for B answers (`privpred_core::calibrate::subsample_aggregate`:
/// the exponential mechanism is 2β-DP per answer, McSherry & Talwar 2007). The result's noise
/// is `Mechanism::Exponential { beta, over: Scores::Votes }`.
pub fn subsample_aggregate(
    mode: CalibrationMode,
    privacy: Privacy,
    budget: u64,
    classes: usize,
) -> Result<Calibration> {
    subsample_aggregate_neighbours(mode, privacy, budget, classes, Neighbours::ReplaceOne)
}

/// [`subsample_aggregate`] for the neighbouring relation `neighbours` (an error under
/// add-remove: no analysis, see `privpred_core::check_relation`).
pub fn subsample_aggregate_neighbours(
    mode: CalibrationMode,
    privacy: Privacy,
    budget: u64,
    classes: usize,
    neighbours: Neighbours,
) -> Result<Calibration> {
    let mut req = CalibrationRequest::new(Method::SubsampleAggregate, mode, privacy);
    req.neighbours = neighbours;
    req.budget = Budget::finite(budget)?;
    req.classes = classes;
    Ok(calibrate(&req)?)
}

/// β of a subsample-and-aggregate calibration (the exponential mechanism's, or
/// permute-and-flip's in `tight` with δ = 0; `Calibration::mechanism` says which).
pub fn beta_of(c: &Calibration) -> Option<f64> {
    c.mechanism.selection_beta()
}
