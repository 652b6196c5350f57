//! Calibration of every method in the three modes (docs/guarantees.md#calibrations–5): how much noise a method needs
//! for (ε, δ) and an inference budget B. The entry point is [`calibrate`]; each method also
//! has its own function whose doc comment states the theorem it implements.

use crate::composition::{
    advanced_per_answer_epsilon, advanced_per_answer_epsilon_paper, zcdp_rho_for,
};
use crate::delta_prime::{paper_delta_prime_grid, sigma_advanced_paper};
use crate::dpsgd::{Accountant, DpSgdSchedule, dpsgd_epsilon, noise_multiplier_neighbours};
use crate::error::{CoreError, Result};
use crate::gaussian::sigma_ag;
use crate::grid::discrete_gaussian_sigma;
use crate::guarantee::{Calibration, Guarantee};
use crate::lattice::lattice_laplace_beta;
use crate::mechanism::{Mechanism, Scores, VectorNoise};
use crate::privacy::{Budget, Privacy};
use crate::types::{Assumptions, CalibrationMode, Loss, Method, Neighbours};
use serde::{Deserialize, Serialize};
use std::num::NonZeroU64;

mod objective;
pub use objective::{loss_perturbation, objective_noise_epsilon};

/// Everything a calibration needs. The constants K and L follow from the model's loss
/// ([`Loss`]: K = √2 and L = 1/2 for softmax cross-entropy, docs/guarantees.md#the-setting; K = 1 and L = 1/4 for
/// the logistic loss of a two-class model); they are recorded in the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRequest {
    /// Which method.
    pub method: Method,
    /// Which analysis.
    pub mode: CalibrationMode,
    /// Target (ε, δ).
    pub privacy: Privacy,
    /// Inference budget (recorded as unlimited for private-training methods).
    pub budget: Budget,
    /// Training-set size N (model/prediction sensitivity, DP-SGD; loss perturbation's floor).
    pub n: Option<usize>,
    /// L2 regularisation λ (model/prediction sensitivity; loss perturbation's floor).
    pub lambda: Option<f64>,
    /// Number of classes C (loss perturbation's ρ).
    pub classes: usize,
    /// DP-SGD only: batch size and epochs.
    pub dp_sgd: Option<DpSgdSchedule>,
    /// The neighbouring relation the guarantee is for (docs/guarantees.md#neighbouring-relations; `replace-one` by default and
    /// when absent from a serialised request).
    #[serde(default)]
    pub neighbours: Neighbours,
    /// The model's output layer and loss (softmax by default and when absent from a
    /// serialised request, and not written when softmax; logistic needs `classes` = 2).
    #[serde(default, skip_serializing_if = "Loss::is_softmax")]
    pub loss: Loss,
}

impl CalibrationRequest {
    /// A request with C = 10, no N/λ, and B = 1 (∞ for private-training methods).
    pub fn new(method: Method, mode: CalibrationMode, privacy: Privacy) -> Self {
        CalibrationRequest {
            method,
            mode,
            privacy,
            budget: if method.is_private_training() {
                Budget::Unlimited
            } else {
                Budget::ONE
            },
            n: None,
            lambda: None,
            classes: 10,
            dp_sgd: None,
            neighbours: Neighbours::ReplaceOne,
            loss: Loss::Softmax,
        }
    }

    /// The assumptions this request rests on (K and L of its loss, C, N, λ).
    pub fn assumptions(&self) -> Assumptions {
        Assumptions {
            k: self.loss.k(),
            l: self.loss.l(),
            classes: self.classes,
            n: self.n,
            lambda: self.lambda,
            loss: self.loss,
        }
    }
}

fn check_constants(a: &Assumptions) -> Result<()> {
    if !(a.k.is_finite() && a.k > 0.0) {
        return Err(CoreError::invalid("K", a.k, "must be a finite number > 0"));
    }
    if !(a.l.is_finite() && a.l > 0.0) {
        return Err(CoreError::invalid("L", a.l, "must be a finite number > 0"));
    }
    if a.classes < 2 {
        return Err(CoreError::invalid(
            "classes",
            a.classes,
            "must be an integer >= 2",
        ));
    }
    if a.loss == Loss::Logistic && a.classes != 2 {
        return Err(CoreError::invalid(
            "classes",
            a.classes,
            "must be 2 for the logistic (one-output) model; use the softmax model for more classes",
        ));
    }
    Ok(())
}

fn need_n(a: &Assumptions, method: Method) -> Result<usize> {
    match a.n {
        None => Err(CoreError::invalid(
            "n",
            "missing",
            format!("{method} needs the training-set size N >= 1"),
        )),
        Some(0) => Err(CoreError::invalid("n", 0, "must be an integer >= 1")),
        Some(n) => Ok(n),
    }
}

fn need_lambda(a: &Assumptions, method: Method) -> Result<f64> {
    match a.lambda {
        None => Err(CoreError::invalid(
            "lambda",
            "missing",
            format!("{method} needs the L2 regularisation lambda > 0"),
        )),
        Some(l) => crate::params::lambda(l),
    }
}

fn need_budget(b: Budget, method: Method) -> Result<NonZeroU64> {
    match b {
        Budget::Finite(b) => Ok(b),
        Budget::Unlimited => Err(CoreError::invalid(
            "budget",
            "unlimited",
            format!("{method} is private prediction: it needs a finite budget B >= 1"),
        )),
    }
}

/// The error for a method that privpred has no analysis for under add/remove neighbours.
/// Model sensitivity, prediction sensitivity and subsample-and-aggregate are analysed for
/// replace-one (docs/guarantees.md#neighbouring-relations): their noise scale depends on the training-set size N (2K/(Nλ)) or
/// on a partition into ⌊N/T⌋ slices, both of which an added or removed example changes, so
/// the replace-one numbers are not reused and no add/remove bound is claimed.
fn no_add_remove_analysis(method: Method) -> CoreError {
    let why = match method {
        Method::SubsampleAggregate => {
            "the teachers' partition into floor(N/T) slices depends on N, so adding or removing one example can change several teachers"
        }
        _ => {
            "its sensitivity 2K/(N*lambda) and the (1/N)-normalised objective depend on the training-set size N, which adding or removing an example changes"
        }
    };
    CoreError::Unsupported(format!(
        "{method} has no analysis under add-remove neighbours in privpred ({why}); use --neighbours replace-one (the default)"
    ))
}

/// Whether privpred has an analysis of `method` under `neighbours`: an error naming the
/// reason where it has none (model sensitivity, prediction sensitivity and
/// subsample-and-aggregate under add-remove), so callers can refuse before any work.
pub fn check_relation(method: Method, neighbours: Neighbours) -> Result<()> {
    if neighbours == Neighbours::AddRemove
        && matches!(
            method,
            Method::ModelSensitivity | Method::PredictionSensitivity | Method::SubsampleAggregate
        )
    {
        return Err(no_add_remove_analysis(method));
    }
    Ok(())
}

pub(crate) fn base(req: &CalibrationRequest, budget: Budget, mechanism: Mechanism) -> Calibration {
    let mut c = Calibration::new(
        Guarantee::valid(req.privacy, budget, req.neighbours, req.mode),
        mechanism,
        req.assumptions(),
    );
    if req.loss == Loss::Logistic {
        c.notes.push(
            "two-class logistic (sigmoid) model: one output column, K = 1, L = 1/4 (Chaudhuri, Monteleoni & Sarwate 2011, Section 3.4)".into(),
        );
    }
    c
}

/// Calibrates `req.method` in `req.mode` for `req.privacy` and `req.budget` (docs/guarantees.md#calibrations–5).
/// Errors (never NaN, never a panic) for arguments out of range, δ > 0 asked of a δ = 0-only
/// rule, or DP-SGD with δ = 0.
pub fn calibrate(req: &CalibrationRequest) -> Result<Calibration> {
    // (ε, δ) and the budget are valid by construction (`Privacy`, `Budget`).
    check_constants(&req.assumptions())?;
    check_relation(req.method, req.neighbours)?;
    let c = match req.method {
        Method::ModelSensitivity => model_sensitivity(req),
        Method::LossPerturbation => loss_perturbation(req),
        Method::DpSgd => dp_sgd(req),
        Method::PredictionSensitivity => prediction_sensitivity(req),
        Method::SubsampleAggregate => subsample_aggregate(req),
    }?;
    // Final guard: no NaN/∞/non-positive parameter ever leaves this function.
    let v = c.mechanism.scale();
    if !(v.is_normal() && v > 0.0 && (1.0 / v).is_normal()) {
        return Err(CoreError::Numerical(format!(
            "calibration produced a noise parameter {v:e} outside the usable range (it must be a positive normal number whose reciprocal is also one, about 2.2e-308 to 4.5e307)"
        )));
    }
    Ok(c)
}

/// The note of a discrete Gaussian release (`crate::grid`).
const DISCRETE_GAUSSIAN_NOTE: &str = "discrete Gaussian on a power-of-two grid (exact sampler): sigma = (Delta + r)*sqrt(B/(2 rho*)), r = Delta/1024 the grid rounding, rho* the largest zCDP rho giving (eps, delta) (Canonne, Kamath & Steinke 2020)";

/// The note of a lattice ℓ2-Laplace release (`crate::lattice`).
const LATTICE_LAPLACE_NOTE: &str = "l2-Laplace on a power-of-two grid (exact lattice sampler): beta = eps/(B*(Delta + r)), r = Delta/1024 the grid rounding; pure eps-DP by the triangle inequality on the lattice (the l1 product law of the same budget above 16 coordinates)";

/// Model sensitivity (output perturbation), docs/guarantees.md#calibrations.
///
/// Theorem (paper, appendix Thm "model sensitivity", via Chaudhuri et al. 2011 Lemma 7): for
/// λ-strongly convex regularised ERM with a K-Lipschitz loss on the unit ball, the minimiser
/// has L2 (Frobenius) sensitivity Δ = 2K/(Nλ). δ = 0: θ + ℓ2-Laplace with β = ε/Δ =
/// Nλε/(2K) is ε-DP (the density ratio is ≤ e^{βΔ}). δ > 0, `corrected` and `tight`: θ
/// rounded to a power-of-two grid plus exact discrete Gaussian noise ([`crate::grid`]), ½((Δ +
/// r)/σ)²-zCDP for the rounding allowance r = Δ/1024 (Canonne, Kamath & Steinke 2020, the
/// multivariate discrete Gaussian), σ solved so that the zCDP conversion gives (ε, δ). `paper`
/// keeps the published continuous Gaussian σ = Δ·σ_AG(ε, δ) (Balle & Wang 2018, Thm 8). One
/// release, B = ∞; `tight` equals `corrected`. Neighbours:
/// replace-one (Δ compares two datasets of the same size N); add-remove is refused
/// ([`check_relation`]). Two-class logistic model ([`Loss::Logistic`]): K = 1, so
/// Δ = 2/(Nλ) on w ∈ R^D and β = Nλε/2, Chaudhuri, Monteleoni & Sarwate (2011), Corollary 8
/// (output perturbation for logistic regression).
pub fn model_sensitivity(req: &CalibrationRequest) -> Result<Calibration> {
    let a = &req.assumptions();
    let n = need_n(a, req.method)?;
    let lambda = need_lambda(a, req.method)?;
    let sens = 2.0 * a.k / (n as f64 * lambda);
    let p = req.privacy;
    let noise = if p.is_pure() {
        VectorNoise::L2Laplace {
            beta: p.epsilon() / sens,
        }
    } else if req.mode == CalibrationMode::Paper {
        VectorNoise::Gaussian {
            sigma: sens * sigma_ag(p.epsilon(), p.delta())?,
        }
    } else {
        let (sigma, rounding) = discrete_gaussian_sigma(p.epsilon(), p.delta(), 1, sens)?;
        VectorNoise::DiscreteGaussian { sigma, rounding }
    };
    let mut c = base(
        req,
        Budget::Unlimited,
        Mechanism::OutputPerturbation { noise },
    );
    c.notes
        .push(format!("sensitivity 2K/(N*lambda) = {sens:.6e}"));
    c.notes.push(if p.is_pure() {
        "l2-Laplace on theta, beta = N*lambda*eps/(2K)".into()
    } else if req.mode == CalibrationMode::Paper {
        "Gaussian on theta, sigma = (2K/(N*lambda))*sigma_AG(eps, delta) (Balle & Wang 2018, Thm 8)"
            .into()
    } else {
        DISCRETE_GAUSSIAN_NOTE.into()
    });
    if req.mode == CalibrationMode::Tight {
        c.notes
            .push("tight = corrected for a single release".into());
    }
    Ok(c)
}

/// DP-SGD, docs/guarantees.md#calibrations and §5.
///
/// Theorem: T steps of the Poisson-subsampled Gaussian mechanism (rate q, noise multiplier σ,
/// per-example clipping to ν jointly over all parameters) are (ε, δ)-DP with ε from the RDP
/// accountant (Mironov, Talwar & Zhang 2019; Abadi et al. 2016). `paper`: the classic RDP
/// conversion (TF-Privacy as used by the reference code); `corrected`: the smaller of the
/// classic and improved conversions (Balle et al. 2020; Canonne, Kamath & Steinke 2020);
/// `tight`: the smaller of RDP and a pessimistic PLD accountant (Koskela et al. 2020;
/// Doroshenko et al. 2022). These accountants bound add/remove neighbours.
///
/// Under replace-one neighbours (docs/guarantees.md#neighbouring-relations, the default) `corrected` and `tight` use the PLD
/// accountant of the replace-one dominating pair (1−q)N(0,σ²) + qN(1,σ²) vs
/// (1−q)N(0,σ²) + qN(−1,σ²) ([`crate::pld::pld_epsilon_neighbours`], whose doc comment proves
/// the domination via Balle, Barthe & Gaboardi 2018 Thm 2 and Zhu, Dong & Wang 2022 Thm 10);
/// `paper` keeps the published add/remove RDP accountant and is labelled
/// `valid_guarantee: false`. σ is the smallest to 1e-4 with ε(σ) ≤ target. Needs δ > 0.
pub fn dp_sgd(req: &CalibrationRequest) -> Result<Calibration> {
    let p = req.privacy;
    if p.is_pure() {
        return Err(CoreError::invalid(
            "delta",
            0,
            "DP-SGD needs delta in (0, 1)",
        ));
    }
    let sched = req.dp_sgd.ok_or_else(|| {
        CoreError::invalid(
            "batch-size",
            "missing",
            "DP-SGD needs --n, --batch-size and --epochs (q = b/N, steps = ceil(epochs*N/b))",
        )
    })?;
    let n = need_n(&req.assumptions(), req.method)?;
    let s = sched.steps(n)?;
    // Accountant per mode and relation. add-remove: as the paper (RDP). replace-one: the PLD
    // accountant of the replace-one dominating pair (crate::pld::pld_epsilon_neighbours, whose
    // doc comment proves the domination) for `corrected` and `tight`; `paper` keeps the
    // published add/remove RDP accountant and is labelled invalid.
    let replace_one = req.neighbours == Neighbours::ReplaceOne;
    let (acc, acc_relation) = match (req.mode, replace_one) {
        (CalibrationMode::Paper, _) => (Accountant::RdpClassic, Neighbours::AddRemove),
        (CalibrationMode::Corrected, false) => (Accountant::Rdp, Neighbours::AddRemove),
        (CalibrationMode::Tight, false) => (Accountant::Best, Neighbours::AddRemove),
        (_, true) => (Accountant::Pld, Neighbours::ReplaceOne),
    };
    let (sigma, spent) =
        noise_multiplier_neighbours(p.epsilon(), p.delta(), &s, acc, acc_relation)?;
    let mech = Mechanism::DpSgd {
        noise_multiplier: sigma,
        sampling_rate: Some(s.sampling_rate),
        steps: Some(s.steps),
        epsilon_spent: Some(spent),
    };
    let mut c = base(req, Budget::Unlimited, mech);
    c.notes.push(format!(
        "noise multiplier sigma = {sigma:.4}: gradient noise std = sigma * clip norm; accountant {} ({} neighbours) gives epsilon {spent:.4} after {} steps at q = {:.6}",
        acc.name(),
        acc_relation,
        s.steps,
        s.sampling_rate
    ));
    if replace_one && req.mode == CalibrationMode::Paper {
        // The paper's accountant (RDP, classic conversion) bounds add/remove neighbours only.
        c.invalidate(format!(
            "paper mode under replace-one: the published RDP accountant bounds add/remove neighbours; for replace-one it only gives ({:.4}, {:.1e}) by group privacy: not a valid ({}, {})-guarantee for replace-one",
            2.0 * p.epsilon(),
            (1.0 + p.epsilon().exp()) * p.delta(),
            p.epsilon(),
            p.delta()
        ));
    } else if replace_one {
        c.notes.push(
            "replace-one neighbours: PLD accountant of the dominating pair (1-q)N(0,s^2)+qN(1,s^2) vs (1-q)N(0,s^2)+qN(-1,s^2) (one example's clipped gradient replaced by another's)".into(),
        );
    } else {
        c.notes.push(
            "add-remove neighbours: the sampled-Gaussian accountants of Abadi et al. 2016 and Mironov, Talwar & Zhang 2019".into(),
        );
    }
    if req.mode == CalibrationMode::Paper {
        c.notes.push(
            "the accounting assumes Poisson sampling and joint clipping; the reference's per-layer clipping and shuffled batches (errata 4.2, 4.3) do not deliver it"
                .into(),
        );
    }
    if req.mode == CalibrationMode::Tight && !replace_one {
        // Report both for transparency.
        if let Ok(r) = dpsgd_epsilon(&s, sigma, p.delta(), Accountant::Rdp) {
            c.notes.push(format!("RDP epsilon at this sigma: {r:.4}"));
        }
    }
    Ok(c)
}

/// Prediction sensitivity (noise on each answer's logits), docs/guarantees.md#calibrations and §5.
///
/// Theorem (paper, appendix Thms "prediction sensitivity" and "Gaussian prediction
/// sensitivity"): each answer θᵀx has L2 sensitivity Δ = 2K/(Nλ) (Lemma "sensitivity bound",
/// ‖x‖ ≤ 1). δ = 0, `corrected`: each answer's logits rounded to a power-of-two grid plus
/// exact ℓ2-Laplace noise on the lattice ([`crate::lattice`]) at β = ε/(B(Δ + r)), r = Δ/1024
/// the rounding: the lattice law's normalising constant does not depend on its centre, so the
/// triangle inequality gives (ε/B)-DP per answer, ε-DP over B answers (basic composition);
/// `paper` keeps the published f64 ℓ2-Laplace with β = Nλε/(2KB). δ > 0, `corrected` and `tight`: each answer's logits rounded to a
/// power-of-two grid plus exact discrete Gaussian noise ([`crate::grid`]); one answer is
/// ½((Δ + r)/σ)²-zCDP (r = Δ/1024, the rounding; Canonne, Kamath & Steinke 2020), B answers
/// B times that (Bun & Steinke 2016, Lemma 2.3), and σ is solved so that the zCDP conversion
/// gives (ε, δ). `paper`: the published continuous Gaussian, σ = min(σ′, σ″) with σ′ =
/// Δ·σ_AG(ε/B, δ/B) (basic composition) and σ″ = min_{δ′} Δ·σ_AG(ε*, (δ−δ′)/B), ε* the
/// per-answer ε of Dwork & Rothblum (2016, Thm 1.1) by the closed form over the reference's
/// 998-point grid (docs/guarantees.md#errata (erratum 4.6): not a valid guarantee when σ″ is
/// chosen). `tight` with δ = 0
/// releases the label only, by a selection over the logits
/// ([`prediction_sensitivity_selection`]). Neighbours: replace-one; add-remove is refused
/// ([`check_relation`]). Two-class logistic model ([`Loss::Logistic`]): each answer is one
/// score s = wᵀx with sensitivity Δ = 2K/(Nλ) = 2/(Nλ) (K = 1; Chaudhuri, Monteleoni &
/// Sarwate 2011, Corollary 8 bounds ‖w − w′‖ ≤ 2/(Nλ), and |s − s′| ≤ ‖w − w′‖‖x‖); the
/// noise is drawn in R^1 and the label is 1 when the noisy score is > 0.
pub fn prediction_sensitivity(req: &CalibrationRequest) -> Result<Calibration> {
    let a = &req.assumptions();
    let nz = need_budget(req.budget, req.method)?;
    let b = nz.get();
    let n = need_n(a, req.method)?;
    let lambda = need_lambda(a, req.method)?;
    let sens = 2.0 * a.k / (n as f64 * lambda);
    let p = req.privacy;
    let (eps, delta) = (p.epsilon(), p.delta());
    let bf = b as f64;
    if p.is_pure() && req.mode == CalibrationMode::Tight {
        return Ok(prediction_sensitivity_selection(req, nz, sens));
    }
    if p.is_pure() && req.mode == CalibrationMode::Paper {
        let noise = VectorNoise::L2Laplace {
            beta: eps / (sens * bf),
        };
        let mut c = base(req, Budget::Finite(nz), Mechanism::NoisyLogits { noise });
        c.notes
            .push("l2-Laplace on logits, beta = N*lambda*eps/(2KB) (basic composition)".into());
        return Ok(c);
    }
    if p.is_pure() {
        let (beta, rounding) = lattice_laplace_beta(eps, b, sens)?;
        let noise = VectorNoise::DiscreteL2Laplace { beta, rounding };
        let mut c = base(req, Budget::Finite(nz), Mechanism::NoisyLogits { noise });
        c.notes.push(LATTICE_LAPLACE_NOTE.into());
        return Ok(c);
    }
    if req.mode != CalibrationMode::Paper {
        let (sigma, rounding) = discrete_gaussian_sigma(eps, delta, b, sens)?;
        let noise = VectorNoise::DiscreteGaussian { sigma, rounding };
        let mut c = base(req, Budget::Finite(nz), Mechanism::NoisyLogits { noise });
        c.notes.push(DISCRETE_GAUSSIAN_NOTE.into());
        return Ok(c);
    }
    let sigma_basic = sigma_ag(eps / bf, delta / bf)?;
    // `paper` only (the other modes returned above): the published calibration
    let adv = paper_delta_prime_grid(delta)
        .map(|dp| sigma_advanced_paper(eps, delta, b, dp))
        .fold(f64::INFINITY, f64::min);
    let (sigma, valid, note) = if adv < sigma_basic {
        (
            adv,
            false,
            "advanced composition with the paper's closed-form eps* over a 998-point delta' grid (erratum 4.6: composed epsilon slightly exceeds the target)",
        )
    } else {
        (
            sigma_basic,
            true,
            "basic composition: sigma' = Delta*sigma_AG(eps/B, delta/B)",
        )
    };
    let noise = VectorNoise::Gaussian {
        sigma: sens * sigma,
    };
    let mut c = base(req, Budget::Finite(nz), Mechanism::NoisyLogits { noise });
    c.notes.push(note.into());
    if !valid {
        c.invalidate("paper mode: not a valid (eps, delta) guarantee (erratum 4.6, docs/guarantees.md#errata)");
    }
    Ok(c)
}

/// The selection mechanism `tight` uses for prediction sensitivity with δ = 0, where only the
/// label is released (docs/guarantees.md#calibrations): see [`prediction_sensitivity_selection`]. Chosen by measurement
/// (docs/study.md, "Label-only prediction sensitivity"): at every (ε, B) of the study it was at
/// least as accurate as the exponential mechanism over the logits and as ℓ2-Laplace noise on
/// the whole logit vector.
pub const LOGIT_SELECTION: LogitSelection = LogitSelection::PermuteAndFlip;

/// A selection mechanism over the logits (prediction sensitivity, label-only `tight`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitSelection {
    /// P(y) ∝ exp(β·logit_y) (McSherry & Talwar 2007).
    Exponential,
    /// Permute-and-flip (McKenna & Sheldon 2020).
    PermuteAndFlip,
}

/// β of a selection over the logits that is (ε/B)-DP per answer: β = ε/(B·√2·Δ) with
/// Δ = `sensitivity` the logits' ℓ2 sensitivity (2K/(Nλ), or the certified Δ + 2γ/λ).
///
/// Proof. A replaced example moves θ by at most Δ in Frobenius norm (the bound of the current
/// noisy-logits calibration, paper appendix Lemma "sensitivity bound"), so the logits of a
/// query ‖x‖ ≤ 1 move by d = (θ′ − θ)ᵀx with ‖d‖₂ ≤ ‖θ′ − θ‖_F·‖x‖ ≤ Δ, and the range of
/// the change is max_y d_y − min_y d_y ≤ √2·‖d‖₂ ≤ √2·Δ (two coordinates of opposite sign
/// carry it all). Both selection mechanisms are invariant to adding a constant to every
/// score, so after subtracting (max d + min d)/2 the neighbour's logits are within √2Δ/2 of
/// ours in every coordinate: per-score sensitivity Δ∞ = Δ/√2 (`crate::select`, "shift
/// invariance"). The exponential mechanism (McSherry & Talwar 2007, Thm 6) and
/// permute-and-flip (McKenna & Sheldon 2020, Thm 1) are ε₀-DP at β = ε₀/(2Δ∞) = ε₀/(√2Δ),
/// and B answers at ε₀ = ε/B are ε-DP by basic composition. The score change is not
/// monotonic (it has both signs), so the factor 2 stays.
pub fn logit_selection_beta(epsilon: f64, budget: u64, sensitivity: f64) -> f64 {
    epsilon / (budget as f64 * std::f64::consts::SQRT_2 * sensitivity)
}

/// β of a selection over the two scores (0, s) of a two-class logistic model that is
/// (ε/B)-DP per answer: β = ε/(B·Δ), Δ = `sensitivity` of s = wᵀx.
///
/// Proof. As in [`logit_selection_beta`], with the scores (0, wᵀx): a replaced example moves
/// w by at most Δ, so the change of the scores is d = (0, (w′ − w)ᵀx), whose range is
/// |(w′ − w)ᵀx| ≤ Δ (not √2Δ: only one score moves). After the shift by (max d + min d)/2 the
/// per-score sensitivity is Δ∞ = Δ/2, and the exponential mechanism (McSherry & Talwar 2007,
/// Thm 6) and permute-and-flip (McKenna & Sheldon 2020, Thm 1) are ε₀-DP at
/// β = ε₀/(2Δ∞) = ε₀/Δ; basic composition over B answers at ε₀ = ε/B.
pub fn logit_selection_beta_binary(epsilon: f64, budget: u64, sensitivity: f64) -> f64 {
    epsilon / (budget as f64 * sensitivity)
}

/// Prediction sensitivity in `tight` with δ = 0 when only the label is released: a selection
/// over the logits ([`LOGIT_SELECTION`]) at β = ε/(B·√2·Δ) ([`logit_selection_beta`], whose
/// doc comment is the proof), instead of ℓ2-Laplace noise on the whole logit vector; for the
/// two-class logistic model over the scores (0, s) at β = ε/(B·Δ)
/// ([`logit_selection_beta_binary`]).
pub fn prediction_sensitivity_selection(
    req: &CalibrationRequest,
    b: NonZeroU64,
    sens: f64,
) -> Calibration {
    let binary = req.loss == Loss::Logistic;
    let beta = if binary {
        logit_selection_beta_binary(req.privacy.epsilon(), b.get(), sens)
    } else {
        logit_selection_beta(req.privacy.epsilon(), b.get(), sens)
    };
    let over = Scores::Logits;
    let (mech, what) = match LOGIT_SELECTION {
        LogitSelection::Exponential => (
            Mechanism::Exponential { beta, over },
            "exponential mechanism over the logits, P(y) ~ exp(beta*logit_y) (McSherry & Talwar 2007)",
        ),
        LogitSelection::PermuteAndFlip => (
            Mechanism::PermuteAndFlip { beta, over },
            "permute-and-flip over the logits (McKenna & Sheldon 2020, Thm 1)",
        ),
    };
    let mut c = base(req, Budget::Finite(b), mech);
    c.notes.push(format!(
        "mechanism: {what}; label only, the logits are not released"
    ));
    c.notes.push(if binary {
        format!(
            "beta = eps/(B*Delta) with Delta = 2K/(N*lambda) = {sens:.6e}: over the scores (0, s) of the logistic model only s moves, by at most Delta, so the shift-invariant selection is (eps/B)-DP per answer; basic composition over B"
        )
    } else {
        format!(
            "beta = eps/(B*sqrt(2)*Delta) with Delta = 2K/(N*lambda) = {sens:.6e}: the logits move by at most Delta in l2, their change has range <= sqrt(2)*Delta, so the shift-invariant selection is (eps/B)-DP per answer; basic composition over B"
        )
    });
    c
}

/// Subsample-and-aggregate (exponential mechanism over T teachers' votes), docs/guarantees.md#calibrations, §4.1, §5.
///
/// Theorem (McSherry & Talwar 2007, Thm 6; docs/guarantees.md#errata (erratum 4.1)): P(y) ∝ exp(β·votes_y) with vote
/// sensitivity 1 is 2β-DP per answer (the normaliser moves too), not β as the paper states.
/// δ = 0: `corrected` β = ε/(2B) (basic composition); `paper` β = ε/B (flagged invalid).
/// δ > 0: per-answer ε₀ = max(ε/B, ε₀_adv) with ε₀_adv the per-answer ε of Dwork & Rothblum
/// (2016, Thm 1.1) at δ′ = δ; `corrected` solves it exactly and sets β = ε₀/2; `paper` keeps
/// the closed form and β = ε₀ (invalid). `tight` (δ > 0): the mechanism is 2β-bounded-range,
/// hence β²/2-zCDP (Durfee & Rogers 2019; Cesar & Rogers 2021), B answers Bβ²/2-zCDP, converted
/// with Canonne, Kamath & Steinke (2020); β = max(that, corrected β). `tight` with δ = 0:
/// permute-and-flip (McKenna & Sheldon 2020) over the votes at the same β = ε/(2B), which is
/// never worse than the exponential mechanism at the same ε (their Thm 2) — see
/// [`subsample_aggregate_permute_and_flip`]. Neighbours: replace-one (one example changes one
/// teacher's shard, hence at most one vote); add-remove is refused ([`check_relation`]).
pub fn subsample_aggregate(req: &CalibrationRequest) -> Result<Calibration> {
    let nz = need_budget(req.budget, req.method)?;
    let b = nz.get();
    let p = req.privacy;
    let (eps, delta) = (p.epsilon(), p.delta());
    let bf = b as f64;
    if p.is_pure() && req.mode == CalibrationMode::Tight {
        return Ok(subsample_aggregate_permute_and_flip(req, nz));
    }
    let (beta, valid, note): (f64, bool, String) = if p.is_pure() {
        match req.mode {
            CalibrationMode::Paper => (eps / bf, false, "paper: beta = eps/B (erratum 4.1: the mechanism is 2*beta-DP per answer)".into()),
            _ => (eps / (2.0 * bf), true, "beta = eps/(2B): the exponential mechanism is 2*beta-DP per answer (McSherry & Talwar 2007)".into()),
        }
    } else {
        match req.mode {
            CalibrationMode::Paper => {
                let e0 = (eps / bf).max(advanced_per_answer_epsilon_paper(eps, b, delta));
                (
                    e0,
                    false,
                    "paper: beta = max(eps/B, closed-form advanced eps0) (errata 4.1 and 4.6)"
                        .into(),
                )
            }
            CalibrationMode::Corrected => {
                let e0 = (eps / bf).max(advanced_per_answer_epsilon(eps, b, delta)?);
                (
                    e0 / 2.0,
                    true,
                    format!(
                        "beta = eps0/2 with eps0 = {e0:.6e} (max of basic and exact advanced composition)"
                    ),
                )
            }
            CalibrationMode::Tight => {
                let e0 = (eps / bf).max(advanced_per_answer_epsilon(eps, b, delta)?);
                let corrected = e0 / 2.0;
                let rho = zcdp_rho_for(eps, delta)?;
                let zb = (2.0 * rho / bf).sqrt();
                if zb >= corrected {
                    (
                        zb,
                        true,
                        format!(
                            "zCDP: B*beta^2/2 = {rho:.6e}-zCDP (bounded range, Cesar & Rogers 2021) converted by Canonne, Kamath & Steinke 2020"
                        ),
                    )
                } else {
                    (
                        corrected,
                        true,
                        "tight: zCDP gives no gain here; corrected beta used".into(),
                    )
                }
            }
        }
    };
    let over = Scores::Votes;
    let mut c = base(
        req,
        Budget::Finite(nz),
        Mechanism::Exponential { beta, over },
    );
    c.notes.push(note);
    if !valid {
        c.invalidate("paper mode: not a valid (eps, delta) guarantee (erratum 4.1, docs/guarantees.md#errata)");
    }
    Ok(c)
}

/// Subsample-and-aggregate in `tight` with δ = 0: permute-and-flip over the vote counts.
///
/// Sensitivity of the votes (replace-one, docs/guarantees.md#neighbouring-relations): the teachers train on disjoint slices of
/// a fixed partition, so replacing one training example changes one teacher's slice and at
/// most that teacher's vote: one count goes up by 1 and another down by 1. Each count, the
/// quality score q_y = votes_y, therefore has sensitivity Δ = max_y max_{D∼D′} |q_y(D) −
/// q_y(D′)| = 1 in McKenna & Sheldon's (2020) definition. Their Theorem 1: permute-and-flip
/// with coins exp(ε₀·(q_y − q*)/(2Δ)) is ε₀-DP, so β = ε₀/2 per answer and, with
/// ε₀ = ε/B, B answers are ε-DP by basic composition. The monotonic variant (coins
/// exp(ε₀·(q_y − q*)/Δ), their Section on monotonic quality functions) does not apply: one
/// count rises while another falls. The shift-invariance argument of `crate::select` gives
/// nothing more here (the change (+1, −1) has range 2 = 2Δ). The audit's pair (one vote moved
/// from the leader to a class one vote behind) realises the bound: P(that class) goes from
/// ½e^{−2β} to ½, a ratio of exactly e^{2β} = e^{ε₀}.
pub fn subsample_aggregate_permute_and_flip(
    req: &CalibrationRequest,
    b: NonZeroU64,
) -> Calibration {
    let beta = req.privacy.epsilon() / (2.0 * b.get() as f64);
    let over = Scores::Votes;
    let mut c = base(
        req,
        Budget::Finite(b),
        Mechanism::PermuteAndFlip { beta, over },
    );
    c.notes.push(
        "mechanism: permute-and-flip over the teachers' votes (McKenna & Sheldon 2020, Thm 1), never worse than the exponential mechanism at the same eps (their Thm 2)".into(),
    );
    c.notes.push(
        "beta = eps/(2B): replace-one changes one teacher's vote (one count +1, another -1), per-count sensitivity 1, not monotonic; basic composition over B".into(),
    );
    c
}
