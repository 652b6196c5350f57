//! # privpred-audit
//!
//! Empirical privacy auditing: for each method, a worst-case pair of neighbouring datasets,
//! the mechanism run many times on each with the product's own calibration and samplers, the
//! optimal distinguishing test, and a Clopper–Pearson lower bound on ε beside the claimed ε
//! (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021). A sound calibration can never be
//! caught (the bound is ≤ the true ε with the stated confidence); a miscalibration by a factor
//! two (SPEC errata 4.1, 4.2) is caught when the pair and setting make the factor visible.
//!
//! - [`stats`]: Clopper–Pearson bounds and the ε lower bound of a threshold test.
//! - [`mechanisms`]: worst-case pairs and faithful simulations ([`mechanisms::Mechanism`]).
//! - [`audit`]: one call from an [`AuditRequest`] to an [`AuditReport`].
//! - [`floating_point`]: the reachability attack on the samplers' exact bits, and their timing.

pub mod e2e;
pub mod error;
pub mod floating_point;
pub mod mechanisms;
pub mod product;
pub mod selection;
pub mod stats;

pub use error::{AuditError, Result};

use mechanisms::{Batching, CanaryGradient, ExponentialVotes, Mechanism, ShiftedNoise};
use privpred_core::{
    Budget, Calibration, CalibrationMode, Mechanism as CoreMechanism, Method, Neighbours, Noise,
    Privacy, Scores, VectorNoise,
};
use serde::{Deserialize, Serialize};

/// The problem the audited guarantee is about (sizes and hyper-parameters that enter the
/// calibration). Defaults: MNIST-like linear model (N = 60000, D = 784, C = 10, λ = 1e-4),
/// T = 256 teachers, and a small DP-SGD schedule (N = 1000, b = 100, 2 epochs) so that
/// every trial simulates all of its steps quickly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditSetting {
    /// Training-set size N (model/prediction sensitivity, loss perturbation).
    pub n: usize,
    /// L2 regularisation λ.
    pub lambda: f64,
    /// Number of classes C.
    pub classes: usize,
    /// Input dimension D (model sensitivity releases D·C parameters).
    pub features: usize,
    /// Teachers T (subsample-and-aggregate).
    pub teachers: usize,
    /// DP-SGD training-set size.
    pub dpsgd_n: usize,
    /// DP-SGD batch size b (q = b/N).
    pub batch_size: usize,
    /// DP-SGD epochs.
    pub epochs: f64,
    /// DP-SGD parameter tensors clipped separately in `paper` mode (the reference code's
    /// per-layer clipping, docs/guarantees.md#errata (erratum 4.2)); `corrected`/`tight` clip jointly.
    pub tensors: usize,
    /// DP-SGD simulation: audit on a replace-one pair even when the audited claim is for
    /// add/remove neighbours (a claim for replace-one is always audited on its replace-one
    /// pair).
    pub replace_one: bool,
    /// The neighbouring relation of the audited claim (docs/guarantees.md#neighbouring-relations): the product is calibrated for
    /// it and the worst-case pair is that relation's.
    #[serde(default)]
    pub neighbours: Neighbours,
    /// Loss perturbation: audit the noise term of the proof alone, against its share of the
    /// claim ([`audited_epsilon`]), on the pair that moves b by the relation's full sensitivity (2K for
    /// replace-one, K for add/remove), instead of the end-to-end training audit.
    #[serde(default)]
    pub noise_term: bool,
    /// Training-set size of the end-to-end loss-perturbation audit (small: one training
    /// per trial). The end-to-end DP-SGD audit uses `dpsgd_n`.
    pub e2e_n: usize,
}

impl Default for AuditSetting {
    fn default() -> Self {
        AuditSetting {
            n: 60_000,
            lambda: privpred_core::defaults::LINEAR_LAMBDA,
            classes: 10,
            features: 784,
            teachers: privpred_core::defaults::LINEAR_TEACHERS,
            dpsgd_n: 1000,
            batch_size: 100,
            epochs: 2.0,
            tensors: 2,
            replace_one: false,
            neighbours: Neighbours::ReplaceOne,
            noise_term: false,
            e2e_n: 100,
        }
    }
}

/// One audit.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRequest {
    /// The method.
    pub method: Method,
    /// The calibration mode whose claim is audited.
    pub calibration: CalibrationMode,
    /// The claimed (ε, δ).
    pub privacy: Privacy,
    /// The inference budget B (private-prediction methods; ignored for private training).
    pub budget: u64,
    /// Trials per dataset (half choose the test, half bound ε).
    pub trials: usize,
    /// Seed of the trials.
    pub seed: u64,
    /// Confidence of the bound (e.g. 0.95).
    pub confidence: f64,
    /// Sizes and hyper-parameters.
    pub setting: AuditSetting,
    /// DP-SGD: train the product's DP-SGD on D and D′ every trial (final model released)
    /// instead of simulating the released noisy gradients. Loss perturbation is always
    /// audited end to end.
    pub end_to_end: bool,
}

/// The outcome of an audit (`privpred audit --json` prints the first seven fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// The method.
    pub method: Method,
    /// The calibration mode audited.
    pub calibration: CalibrationMode,
    /// The claimed ε.
    pub claimed_epsilon: f64,
    /// The δ (subtracted in the bound).
    pub delta: f64,
    /// The empirical lower bound on ε at `confidence`.
    pub empirical_epsilon_lower: f64,
    /// Confidence of the bound.
    pub confidence: f64,
    /// Trials per dataset.
    pub trials: usize,
    /// The plug-in estimate of the test's ε (no confidence).
    pub empirical_epsilon_point: f64,
    /// Whether the bound exceeds the claim: the guarantee is refuted at `confidence`.
    pub exceeds_claim: bool,
    /// The budget B the claim covers (None for private training).
    pub budget: Option<u64>,
    /// The calibrated noise that was audited.
    pub noise: Noise,
    /// Whether the calibration itself says it is a valid guarantee (docs/guarantees.md#errata).
    pub valid_guarantee: bool,
    /// The neighbouring pair and simulation, in words.
    pub pair: String,
    /// The neighbouring relation of the audited claim.
    #[serde(default)]
    pub neighbours: Neighbours,
    /// The test and its counts.
    pub test: stats::EpsilonLowerBound,
}

fn check(req: &AuditRequest) -> Result<()> {
    stats::check_confidence(req.confidence)?;
    if req.trials < 8 {
        return Err(AuditError::invalid("trials", req.trials, "must be >= 8"));
    }
    if req.budget == 0 {
        return Err(AuditError::invalid(
            "budget",
            req.budget,
            "must be an integer >= 1",
        ));
    }
    let s = &req.setting;
    if s.n == 0 || s.dpsgd_n == 0 {
        return Err(AuditError::invalid("n", s.n.min(s.dpsgd_n), "must be >= 1"));
    }
    if !(s.lambda.is_finite() && s.lambda > 0.0) {
        return Err(AuditError::invalid(
            "lambda",
            s.lambda,
            "must be a finite number > 0",
        ));
    }
    if s.classes < 2 {
        return Err(AuditError::invalid("classes", s.classes, "must be >= 2"));
    }
    if s.features == 0 {
        return Err(AuditError::invalid("features", s.features, "must be >= 1"));
    }
    if s.teachers < 2 {
        return Err(AuditError::invalid("teachers", s.teachers, "must be >= 2"));
    }
    if s.batch_size == 0 || s.batch_size > s.dpsgd_n {
        return Err(AuditError::invalid(
            "batch-size",
            s.batch_size,
            format!("must be in 1..={}", s.dpsgd_n),
        ));
    }
    if !(s.epochs.is_finite() && s.epochs > 0.0) {
        return Err(AuditError::invalid(
            "epochs",
            s.epochs,
            "must be a finite number > 0",
        ));
    }
    if s.e2e_n < 4 {
        return Err(AuditError::invalid("e2e-n", s.e2e_n, "must be >= 4"));
    }
    if s.tensors == 0 {
        return Err(AuditError::invalid("tensors", s.tensors, "must be >= 1"));
    }
    Ok(())
}

/// Calibrates the audited method exactly as the product does.
pub fn calibration_for(req: &AuditRequest) -> Result<Calibration> {
    let s = &req.setting;
    let budget = if req.method.is_private_training() {
        Budget::Unlimited
    } else {
        Budget::finite(req.budget)?
    };
    let (n, lambda, dp_sgd) = match req.method {
        Method::DpSgd => (
            Some(s.dpsgd_n),
            None,
            Some(privpred_core::dpsgd::DpSgdSchedule {
                batch_size: s.batch_size,
                epochs: s.epochs,
            }),
        ),
        Method::SubsampleAggregate => (None, None, None),
        _ => (Some(s.n), Some(s.lambda), None),
    };
    let creq = privpred_core::calibrate::CalibrationRequest {
        method: req.method,
        mode: req.calibration,
        privacy: req.privacy,
        budget,
        n,
        lambda,
        classes: s.classes,
        dp_sgd,
        neighbours: s.neighbours,
        loss: privpred_core::Loss::Softmax,
    };
    Ok(privpred_core::calibrate::calibrate(&creq)?)
}

/// A mechanism to audit, boxed, with the description of its worst-case pair.
type AuditedPair = (Box<dyn Mechanism>, String);

/// The worst-case pair and simulation for `req` under `cal`, boxed, with its description:
/// dispatches on the method and the mechanism its calibration releases to one builder per
/// mechanism family (teacher votes, label-only selection over logits, an additive release,
/// DP-SGD's steps, loss perturbation's noise term).
pub fn mechanism_for(req: &AuditRequest, cal: &Calibration) -> Result<AuditedPair> {
    match (req.method, cal.mechanism) {
        (
            Method::SubsampleAggregate,
            CoreMechanism::Exponential {
                beta,
                over: Scores::Votes,
            },
        ) => exponential_votes_pair(req, beta),
        (
            Method::SubsampleAggregate,
            CoreMechanism::PermuteAndFlip {
                beta,
                over: Scores::Votes,
            },
        ) => permute_and_flip_votes_pair(req, cal.noise(), beta),
        (
            Method::PredictionSensitivity,
            CoreMechanism::Exponential {
                beta,
                over: Scores::Logits,
            }
            | CoreMechanism::PermuteAndFlip {
                beta,
                over: Scores::Logits,
            },
        ) => logits_selection_pair(req, cal, beta),
        (
            Method::ModelSensitivity,
            CoreMechanism::OutputPerturbation { noise: additive },
        )
        | (
            Method::PredictionSensitivity,
            CoreMechanism::NoisyLogits { noise: additive },
        ) => additive_release_pair(req, cal, additive),
        (
            Method::DpSgd,
            CoreMechanism::DpSgd {
                noise_multiplier: sigma,
                ..
            },
        ) => dp_sgd_canary_pair(req, cal, sigma),
        (Method::LossPerturbation, CoreMechanism::ObjectivePerturbation { noise: additive, .. })
            if req.setting.noise_term =>
        {
            loss_noise_term_pair(req, cal, additive)
        }
        (Method::LossPerturbation, _) => Err(AuditError::Unsupported(
            "loss perturbation is audited end to end, or its noise term alone with --noise-term (see e2e::EndToEnd)".into(),
        )),
        (m, noise) => Err(AuditError::Run(format!(
            "calibration of {m} returned an unexpected mechanism ({})",
            noise.noise()
        ))),
    }
}

/// Subsample-and-aggregate with the exponential mechanism over teacher votes: the worst-case
/// vote split, D′ moving one teacher's vote to the rare class.
fn exponential_votes_pair(req: &AuditRequest, beta: f64) -> Result<AuditedPair> {
    let s = &req.setting;
    let m = ExponentialVotes::worst_case(
        beta,
        s.classes,
        s.teachers,
        req.budget,
        req.trials,
        req.privacy.delta(),
        req.confidence,
    )?;
    let desc = format!(
        "T = {} teachers, votes {}:{} on the dominant:rare class; D′ moves one teacher's vote to the rare class; {} answers to the same query, exponential mechanism β = {beta:.6}; statistic #rare − #dominant",
        s.teachers, m.votes[0], m.votes[1], req.budget
    );
    Ok((Box::new(m), desc))
}

/// Subsample-and-aggregate with permute-and-flip over teacher votes: a gap of 2 on D, a tie
/// on D′.
fn permute_and_flip_votes_pair(req: &AuditRequest, noise: Noise, beta: f64) -> Result<AuditedPair> {
    let s = &req.setting;
    let m = selection::Selection::votes_pair(noise, s.classes, s.teachers, req.budget)?;
    let desc = format!(
        "T = {} teachers, votes {}:{} on the leading:runner-up class (a gap of 2, a tie on D′); D′ moves one teacher's vote to the runner-up; {} answers to the same query, permute-and-flip β = {beta:.6}; statistic: exact log-likelihood ratio",
        s.teachers, m.scores[0], m.scores[1], req.budget
    );
    Ok((Box::new(m), desc))
}

/// Prediction sensitivity with a label-only selection (exponential or permute-and-flip) over
/// the logits: the replaced example moves the logits by the largest range the sensitivity
/// allows.
fn logits_selection_pair(req: &AuditRequest, cal: &Calibration, beta: f64) -> Result<AuditedPair> {
    let s = &req.setting;
    let noise = cal.noise();
    let shift = sensitivity_shift(req, cal);
    let m = selection::Selection::logits_pair(
        noise,
        s.classes,
        shift,
        req.budget,
        req.trials,
        req.privacy.delta(),
        req.confidence,
    )?;
    let desc = format!(
        "the replaced example moves the logits of a unit-norm query by (Δ/√2, −Δ/√2, 0, …), Δ = 2K/(Nλ) = {shift:.6e} (the largest range the sensitivity allows); margin {:.3e} between the two classes on D; {} label-only answers, {} β = {:.6e}; statistic: exact log-likelihood ratio",
        m.scores[1] - m.scores[0],
        req.budget,
        noise.distribution_name(),
        beta
    );
    Ok((Box::new(m), desc))
}

/// The largest move of θ (or of a unit-norm query's logits) one replaced example causes:
/// the replace-one sensitivity 2K/(Nλ) of the regularised minimiser (Chaudhuri et al. 2011,
/// Corollary 8), which the logit-selection and additive-release pairs shift by.
fn sensitivity_shift(req: &AuditRequest, cal: &Calibration) -> f64 {
    2.0 * cal.assumptions.k / (req.setting.n as f64 * req.setting.lambda)
}

/// Model sensitivity's perturbed θ or prediction sensitivity's noisy logits: an additive
/// release shifted by the full sensitivity 2K/(Nλ).
fn additive_release_pair(
    req: &AuditRequest,
    cal: &Calibration,
    additive: VectorNoise,
) -> Result<AuditedPair> {
    let s = &req.setting;
    let shift = sensitivity_shift(req, cal);
    let (dim, answers, what) = if req.method == Method::ModelSensitivity {
        (s.features * s.classes, 1, "θ ∈ R^{D·C}")
    } else {
        (
            s.classes,
            req.budget,
            "the logits ∈ R^C of one unit-norm query",
        )
    };
    let m = ShiftedNoise::new(additive.into(), dim, shift, answers)?;
    let desc = format!(
        "replaced example at the unit sphere with the largest gradient moves {what} by the full sensitivity 2K/(Nλ) = {shift:.6e}; {answers} release(s) with fresh noise; statistic: exact log-likelihood ratio"
    );
    Ok((Box::new(m), desc))
}

/// DP-SGD, white box: every noisy step released, a canary gradient at the clip norm in a
/// direction no other example touches; the paper's reference batching (shuffled, per-tensor
/// clipping) or the product's (Poisson, joint clipping).
fn dp_sgd_canary_pair(req: &AuditRequest, cal: &Calibration, sigma: f64) -> Result<AuditedPair> {
    let s = &req.setting;
    let n = s.dpsgd_n as f64;
    let b = s.batch_size as f64;
    let q = cal
        .mechanism
        .sampling_rate()
        .ok_or_else(|| AuditError::Run("dp-sgd calibration has no sampling rate".into()))?;
    let steps = cal
        .mechanism
        .steps()
        .ok_or_else(|| AuditError::Run("dp-sgd calibration has no step count".into()))?;
    let (sensitivity, batching, how) = if req.calibration == CalibrationMode::Paper {
        let spe = (n / b).ceil() as u64;
        let epochs = s.epochs.ceil() as u64;
        (
            (s.tensors as f64).sqrt(),
            Batching::Shuffled {
                steps_per_epoch: spe,
                epochs,
            },
            format!(
                "reference code: {} tensors clipped to ν each (canary norm √k·ν), shuffled fixed-size batches",
                s.tensors
            ),
        )
    } else {
        (
            1.0,
            Batching::Poisson { q, steps },
            "joint clipping (canary norm ν), Poisson sampling".to_string(),
        )
    };
    let replace_one = s.replace_one || s.neighbours == Neighbours::ReplaceOne;
    let m = CanaryGradient::new(sigma, sensitivity, batching)?.with_replace_one(replace_one);
    let pair = if replace_one {
        "replace-one: D holds an example whose clipped gradient is −ν·u, D′ the canary +ν·u (u a direction no other example touches)"
    } else {
        "D′ = D ∪ {canary} whose gradient sits at the clip norm in a direction no other example touches"
    };
    let desc = format!(
        "{pair}; every noisy step released (white box); {how}; noise multiplier σ = {sigma:.4}; statistic: exact log-likelihood ratio of all steps"
    );
    Ok((Box::new(m), desc))
}

/// Loss perturbation's noise term alone (`--noise-term`, erratum 4.7): the shift of the noise
/// that yields a released Θ under the relation's worst-case pair.
fn loss_noise_term_pair(
    req: &AuditRequest,
    cal: &Calibration,
    additive: VectorNoise,
) -> Result<AuditedPair> {
    let s = &req.setting;
    let k = cal.assumptions.k;
    // The proof's noise term (erratum 4.7): the released Θ determines the noise that
    // produced it, b(Θ) = −(Σ∇ℓ(Θ) + ρ_eff Θ); for a loss whose gradient term is a
    // constant vector of norm K at the unit sphere (a linear, K-Lipschitz, 0-smooth
    // loss: the Jacobian term is 0) the worst-case pair moves b by the relation's full
    // sensitivity along one direction: replace-one +K·u in D, −K·u in D′ (2K);
    // add/remove: the example is absent from D (K).
    let shift = match s.neighbours {
        Neighbours::ReplaceOne => 2.0 * k,
        Neighbours::AddRemove => k,
    };
    let dim = s.features * s.classes;
    let m = ShiftedNoise::new(additive.into(), dim, shift, 1)?;
    let desc = format!(
        "{}: the example's gradient term ∇ℓ⊗x is a constant K·u in D and {} in D′ (a linear K-Lipschitz loss at the unit sphere), so the noise b that yields a released Θ moves by {shift:.6} along u; b ∈ R^{{D·C = {dim}}}; audits the noise term of the proof against its share of the claim (ε less the Jacobian term's deterministic bound C·ln(1 + L/ρ) at δ = 0, ε/2 at δ > 0; the same for both relations); statistic: exact log-likelihood ratio",
        s.neighbours,
        if s.neighbours == Neighbours::ReplaceOne {
            "−K·u"
        } else {
            "absent"
        }
    );
    Ok((Box::new(m), desc))
}

/// The product's training configuration for an end-to-end audit of `req`, through the
/// checked params ([`privpred_linear::TrainParams`]): a value out of range is refused naming
/// it.
pub fn e2e_config(req: &AuditRequest) -> Result<privpred_linear::MethodConfig> {
    use privpred_core::ParamGuard;
    let s = &req.setting;
    privpred_linear::TrainParams::new(req.method, req.calibration, req.privacy, Budget::Unlimited)
        .lambda(s.lambda)
        .batch_size(s.batch_size)
        .epochs(s.epochs)
        .seed_policy(privpred_linear::SeedPolicy::Seeded { seed: req.seed })
        .neighbours(s.neighbours)
        // add/remove: D's size is the public N̂ both D and D′ are trained with
        .public_n((s.neighbours == Neighbours::AddRemove).then_some(
            if req.method == Method::DpSgd {
                s.dpsgd_n
            } else {
                s.e2e_n
            },
        ))
        .check()
        .map_err(|e| AuditError::Run(e.to_string()))
}

/// Whether `req` is audited end to end.
pub fn is_end_to_end(req: &AuditRequest) -> bool {
    (req.method == Method::LossPerturbation && !req.setting.noise_term)
        || (req.method == Method::DpSgd && req.end_to_end)
}

/// The ε of the claim an audit checks: the whole ε, except for loss perturbation's noise-term
/// audit, which checks the noise term's share: what the Jacobian term's bound at the
/// calibration's recorded ρ leaves at δ = 0 (`corrected`, `tight`), ε/2 otherwise
/// ([`privpred_core::calibrate::objective_noise_epsilon`], computed from the request's
/// privacy, mode and the loss's constants, never from the noise being audited).
pub fn audited_epsilon(req: &AuditRequest, cal: &Calibration) -> f64 {
    match (req.method, req.setting.noise_term, cal.mechanism.rho()) {
        (Method::LossPerturbation, true, Some(rho)) => {
            privpred_core::calibrate::objective_noise_epsilon(
                req.calibration,
                req.privacy,
                cal.assumptions.outputs(),
                cal.assumptions.l,
                rho,
            )
        }
        (Method::LossPerturbation, true, None) => req.privacy.epsilon() / 2.0,
        _ => req.privacy.epsilon(),
    }
}

/// Runs one audit: calibrate as the product does, build the worst-case pair, run the trials,
/// apply the optimal test, bound ε.
pub fn audit(req: &AuditRequest) -> Result<AuditReport> {
    check(req)?;
    let (mech, pair, cal): (Box<dyn Mechanism>, String, Calibration) = if is_end_to_end(req) {
        let n = if req.method == Method::DpSgd {
            req.setting.dpsgd_n
        } else {
            req.setting.e2e_n
        };
        if req.method == Method::LossPerturbation
            && req.setting.neighbours != Neighbours::ReplaceOne
        {
            return Err(AuditError::Unsupported(
                "the end-to-end loss-perturbation audit's pair (one label changed) is a replace-one pair; for an add-remove claim audit the noise term with --noise-term".into(),
            ));
        }
        let e = e2e::EndToEnd::new(e2e_config(req)?, n, req.seed)?;
        let cal = e.calibration.clone();
        let pair = match req.method {
            Method::LossPerturbation => format!(
                "end to end (privpred-linear train_private, N = {n}, D = 4, C = 2, λ = {}): the unit-norm example x* = e₃ has label 0 in D and 1 in D′; statistic: exact log-likelihood ratio of the released θ via the noise b_X(θ) = −(Σ∇ℓ + ρ_eff θ) that produces it",
                req.setting.lambda
            ),
            _ => format!(
                "end to end (privpred-linear DP-SGD, N = {n}, b = {}, {} epochs, D = 4, C = 2): a null example (x = 0) in D is replaced by a canary x* = e₃ whose gradient stays at the clip norm in a direction no other example touches; only the final model is released; statistic: its projection on the canary direction",
                req.setting.batch_size, req.setting.epochs
            ),
        };
        (Box::new(e), pair, cal)
    } else {
        if req.end_to_end {
            return Err(AuditError::Unsupported(format!(
                "no end-to-end audit for {}",
                req.method
            )));
        }
        let cal = calibration_for(req)?;
        let (m, pair) = mechanism_for(req, &cal)?;
        (m, pair, cal)
    };
    let (on_d, on_dp) = mechanisms::run_trials(mech.as_ref(), req.trials, req.seed)?;
    let test = stats::epsilon_lower_bound(&on_d, &on_dp, req.privacy.delta(), req.confidence)?;
    let claimed = audited_epsilon(req, &cal);
    Ok(AuditReport {
        method: req.method,
        calibration: req.calibration,
        claimed_epsilon: claimed,
        delta: req.privacy.delta(),
        empirical_epsilon_lower: test.epsilon_lower,
        confidence: req.confidence,
        trials: req.trials,
        empirical_epsilon_point: test.epsilon_point,
        exceeds_claim: test.epsilon_lower > claimed,
        budget: cal.budget().get(),
        noise: cal.noise(),
        valid_guarantee: cal.is_valid(),
        pair,
        neighbours: cal.neighbours(),
        test,
    })
}
