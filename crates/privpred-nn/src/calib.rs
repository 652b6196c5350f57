//! Calibrations for the two deep-model methods, delegated to `privpred_core` (docs/guarantees.md#calibrations–5):
//! DP-SGD's noise multiplier from the accountant of the sampled Gaussian mechanism, and
//! subsample-and-aggregate's β for the exponential mechanism.

use crate::error::Result;
use privpred_core::{
    Budget, Calibration, CalibrationMode, CalibrationRequest, DpSgdSchedule, Method, Neighbours,
    Privacy, SelectionMethod, calibrate,
};
use serde::{Deserialize, Serialize};

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

/// The public training parameters a ResNet's guarantee rests on, recorded in its artifact
/// ([`crate::artifact::ModelHeader::training`]): the guarantee is re-derived from them on
/// every load ([`rederive`]), with the same functions training calibrates with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicTraining {
    /// The training-set size N (public under replace-one neighbours, the only relation a
    /// ResNet is trained under).
    pub n: usize,
    /// DP-SGD: the expected batch size b and the epochs (q = b/N, steps = ⌈epochs·N/b⌉).
    pub dp_sgd: Option<DpSgdSchedule>,
    /// Subsample-and-aggregate: the number of teachers T (disjoint slices of ⌊N/T⌋).
    pub teachers: Option<usize>,
}

/// Whether a ResNet can be trained under `neighbours`: only replace-one. Its DP-SGD schedule
/// (q = b/N and the steps) and its teachers' partition are set from the exact N, which
/// add-remove neighbours make private.
pub fn check_neighbours(neighbours: Neighbours) -> std::result::Result<(), String> {
    match neighbours {
        Neighbours::ReplaceOne => Ok(()),
        Neighbours::AddRemove => Err(
            "add-remove neighbours: a ResNet's DP-SGD schedule (q = b/N, its steps) and its teachers' partition are set from the exact N, which that relation makes private; a ResNet's guarantee is for replace-one neighbours".into(),
        ),
    }
}

/// What a ResNet's guarantee is asked for, beside its training parameters: the mode,
/// (ε, δ), the inference budget B (teachers), the neighbouring relation and the classes C.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuaranteeRequest {
    /// Which analysis calibrates the noise.
    pub mode: CalibrationMode,
    /// Target (ε, δ).
    pub privacy: Privacy,
    /// Inference budget B (subsample-and-aggregate; ignored for DP-SGD).
    pub budget: u64,
    /// The neighbouring relation (only replace-one, [`check_neighbours`]).
    pub neighbours: Neighbours,
    /// Classes C.
    pub classes: usize,
}

/// The one rule of a ResNet's guarantee, used when it is trained ([`guarantee`]) and when
/// it is loaded ([`expected_guarantee`]): [`dpsgd_neighbours`] for DP-SGD (N, b, epochs),
/// [`subsample_aggregate_neighbours`] for teachers (2 ≤ T ≤ N), without a selection record.
fn calibrate_resnet(
    method: Method,
    req: &GuaranteeRequest,
    training: &PublicTraining,
) -> std::result::Result<Calibration, String> {
    check_neighbours(req.neighbours).map_err(|e| format!("guarantee: {e}"))?;
    let no_calibration =
        |e: crate::NnError| format!("guarantee: its public parameters have no calibration ({e})");
    match method {
        Method::DpSgd => {
            let s = training.dp_sgd.ok_or(
                "training.dp_sgd: a DP-SGD network must record its schedule (batch size and epochs)",
            )?;
            if training.teachers.is_some() {
                return Err("training.teachers: a DP-SGD network has no teachers".into());
            }
            dpsgd_neighbours(
                req.mode,
                req.privacy,
                training.n,
                s.batch_size,
                s.epochs,
                req.classes,
                req.neighbours,
            )
            .map_err(no_calibration)
        }
        Method::SubsampleAggregate => {
            let t = training.teachers.ok_or(
                "training.teachers: a teacher ensemble must record its number of teachers",
            )?;
            if !(2..=training.n).contains(&t) {
                return Err(format!(
                    "training.teachers: T = {t} for N = {} (need 2 ≤ T ≤ N)",
                    training.n
                ));
            }
            if training.dp_sgd.is_some() {
                return Err("training.dp_sgd: a teacher ensemble has no DP-SGD schedule".into());
            }
            subsample_aggregate_neighbours(
                req.mode,
                req.privacy,
                req.budget,
                req.classes,
                req.neighbours,
            )
            .map_err(no_calibration)
        }
        other => Err(format!("guarantee: {other} is not a ResNet method")),
    }
}

/// The guarantee a ResNet of `method` (DP-SGD or subsample-and-aggregate) is trained under:
/// the one rule (`calibrate_resnet`, shared with [`expected_guarantee`]) with its selection recorded as public (a ResNet's
/// clip and schedule are given, never selected).
pub fn guarantee(
    method: Method,
    req: &GuaranteeRequest,
    training: &PublicTraining,
) -> std::result::Result<Calibration, String> {
    calibrate_resnet(method, req, training)?
        .with_selection(SelectionMethod::Public)
        .map_err(|e| format!("guarantee: `selection`: {e}"))
}

/// The guarantee a stored ResNet record's public parameters give: its mode, (ε, δ), B,
/// relation and classes, and `training`'s N, schedule and T, through the rule training
/// calibrates with, with the stored selection re-derived (only `public` is a ResNet's
/// selection; a record without one gets none). `members`: the networks the artifact holds
/// (T for teachers).
pub fn expected_guarantee(
    method: Method,
    stored: &Calibration,
    training: &PublicTraining,
    members: usize,
) -> std::result::Result<Calibration, String> {
    if method == Method::SubsampleAggregate && training.teachers != Some(members) {
        return Err(format!(
            "training.teachers: T = {} but the artifact holds {members} teacher networks",
            training
                .teachers
                .map_or("none".to_string(), |t| t.to_string())
        ));
    }
    let req = GuaranteeRequest {
        mode: stored.mode(),
        privacy: stored.privacy(),
        budget: match method {
            Method::SubsampleAggregate => stored
                .budget()
                .get()
                .ok_or("guarantee: a teacher ensemble needs a finite budget B")?,
            _ => 1,
        },
        neighbours: stored.neighbours(),
        classes: stored.assumptions.classes,
    };
    let c = calibrate_resnet(method, &req, training)?;
    match stored.selection {
        None => Ok(c),
        Some(s) if s.method == SelectionMethod::Public => c
            .with_selection(SelectionMethod::Public)
            .map_err(|e| format!("guarantee: `selection`: {e}")),
        Some(s) => Err(format!(
            "guarantee: `selection` is {} but a ResNet's clip and schedule are public values (only `public` is a ResNet's selection)",
            s.method
        )),
    }
}

/// Re-derives the guarantee of a ResNet artifact from its public parameters
/// ([`expected_guarantee`]) and refuses any difference from the stored one (the error names
/// the field, its stored and its re-derived value): the stored noise, accounting and
/// validity are never trusted as written.
pub fn rederive(
    method: Method,
    stored: &Calibration,
    training: &PublicTraining,
    members: usize,
) -> std::result::Result<(), String> {
    let expected = expected_guarantee(method, stored, training, members)?;
    let mut params = privpred_core::rederive::describe_params(stored);
    params = match (training.dp_sgd, training.teachers) {
        (Some(s), _) => format!(
            "{params}, training N = {}, batch size {}, {} epochs",
            training.n, s.batch_size, s.epochs
        ),
        (None, Some(t)) => format!("{params}, training N = {}, T = {t}", training.n),
        (None, None) => params,
    };
    privpred_core::rederive::refuse_difference(stored, &expected, &params)
}
