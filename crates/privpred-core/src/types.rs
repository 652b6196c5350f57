//! Guarantee types: methods, calibration modes, (ε, δ), budgets, noise distributions.

use crate::error::{CoreError, Result};
use serde::{Deserialize, Serialize};

/// The five private-prediction methods of the study (SPEC §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Output perturbation: noise on θ after training.
    ModelSensitivity,
    /// Objective perturbation: noise in the training objective.
    LossPerturbation,
    /// DP-SGD: noise on clipped per-example gradients.
    DpSgd,
    /// Noise on each answer's logits.
    PredictionSensitivity,
    /// Exponential mechanism over T teachers' votes.
    #[cfg_attr(feature = "clap", value(alias = "subsample-and-aggregate"))]
    SubsampleAggregate,
}

impl Method {
    /// All five methods, in the paper's order.
    pub const ALL: [Method; 5] = [
        Method::ModelSensitivity,
        Method::LossPerturbation,
        Method::DpSgd,
        Method::PredictionSensitivity,
        Method::SubsampleAggregate,
    ];

    /// The kebab-case name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Method::ModelSensitivity => "model-sensitivity",
            Method::LossPerturbation => "loss-perturbation",
            Method::DpSgd => "dp-sgd",
            Method::PredictionSensitivity => "prediction-sensitivity",
            Method::SubsampleAggregate => "subsample-aggregate",
        }
    }

    /// Private-training methods release a private model: their inference budget is ∞.
    pub fn is_private_training(self) -> bool {
        matches!(
            self,
            Method::ModelSensitivity | Method::LossPerturbation | Method::DpSgd
        )
    }

    /// Whether the method has a δ = 0 variant (DP-SGD needs δ > 0).
    pub fn supports_pure_dp(self) -> bool {
        !matches!(self, Method::DpSgd)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Calibration mode (SPEC §3): which analysis sets the noise.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum CalibrationMode {
    /// The paper's formulas and reference code exactly; not always a valid guarantee (SPEC §4).
    Paper,
    /// The paper's analysis with the errata of SPEC §4 fixed (default).
    #[default]
    Corrected,
    /// Modern accounting with the same (ε, δ) guarantee and less noise (SPEC §5).
    Tight,
}

impl CalibrationMode {
    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            CalibrationMode::Paper => "paper",
            CalibrationMode::Corrected => "corrected",
            CalibrationMode::Tight => "tight",
        }
    }
}

impl std::fmt::Display for CalibrationMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The neighbouring relation a guarantee is stated for (SPEC §1). Every guarantee names its
/// relation: an add/remove ε-DP mechanism is in general only 2ε-DP under replace-one (group
/// privacy), so results under different relations are not comparable.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Neighbours {
    /// D and D′ have the same size and differ in one example (SPEC §1's default).
    #[default]
    ReplaceOne,
    /// D′ = D ∪ {z} or D′ = D ∖ {z} (one example added or removed).
    AddRemove,
}

impl Neighbours {
    /// Both relations.
    pub const ALL: [Neighbours; 2] = [Neighbours::ReplaceOne, Neighbours::AddRemove];

    /// The kebab-case name used on the command line, in results and in artifacts.
    pub fn name(self) -> &'static str {
        match self {
            Neighbours::ReplaceOne => "replace-one",
            Neighbours::AddRemove => "add-remove",
        }
    }

    /// The relation a guarantee recorded before privpred named relations actually holds for
    /// (artifacts written before this field existed): loss perturbation was calibrated with
    /// the appendix's add/remove β = ε/(2K) (erratum 4.7) and DP-SGD with the add/remove
    /// accountants; model sensitivity, prediction sensitivity and subsample-and-aggregate were
    /// analysed for replace-one.
    pub fn legacy(method: Method) -> Neighbours {
        match method {
            Method::LossPerturbation | Method::DpSgd => Neighbours::AddRemove,
            _ => Neighbours::ReplaceOne,
        }
    }

    /// The note attached to a legacy calibration relabelled by [`Neighbours::legacy`].
    pub fn legacy_note(method: Method) -> String {
        format!(
            "legacy artifact (written before guarantees named their neighbouring relation): labelled {} neighbours, the relation its {method} calibration holds for",
            Neighbours::legacy(method)
        )
    }

    /// Relabels a calibration deserialised from a record without a `neighbours` key
    /// (`has_key = false`) with [`Neighbours::legacy`], adding [`Neighbours::legacy_note`].
    pub fn relabel_legacy(c: &mut Calibration, has_key: bool) {
        if !has_key {
            c.neighbours = Neighbours::legacy(c.method);
            c.notes.push(Neighbours::legacy_note(c.method));
        }
    }

    /// Parses a kebab-case name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "replace-one" => Some(Neighbours::ReplaceOne),
            "add-remove" => Some(Neighbours::AddRemove),
            _ => None,
        }
    }
}

impl std::fmt::Display for Neighbours {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A validated (ε, δ) pair: ε finite and > 0, δ in [0, 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Privacy {
    /// ε > 0.
    pub epsilon: f64,
    /// δ ∈ [0, 1).
    pub delta: f64,
}

impl Privacy {
    /// Validates ε ∈ (0, ∞) and δ ∈ [0, 1).
    pub fn new(epsilon: f64, delta: f64) -> Result<Self> {
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(CoreError::invalid(
                "epsilon",
                epsilon,
                "must be a finite number > 0",
            ));
        }
        if !(delta.is_finite() && (0.0..1.0).contains(&delta)) {
            return Err(CoreError::invalid("delta", delta, "must be in [0, 1)"));
        }
        Ok(Privacy { epsilon, delta })
    }

    /// Pure ε-DP (δ = 0).
    pub fn pure(epsilon: f64) -> Result<Self> {
        Self::new(epsilon, 0.0)
    }

    /// Whether δ = 0.
    pub fn is_pure(&self) -> bool {
        self.delta == 0.0
    }
}

/// The inference budget: the number of answers the guarantee covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Budget {
    /// B answers (B ≥ 1).
    Finite(u64),
    /// Private-training methods: the released model is private, any number of answers.
    Unlimited,
}

impl Budget {
    /// Validates B ≥ 1.
    pub fn finite(b: u64) -> Result<Self> {
        if b == 0 {
            return Err(CoreError::invalid("budget", b, "must be an integer >= 1"));
        }
        Ok(Budget::Finite(b))
    }

    /// B as a number (None for unlimited).
    pub fn get(&self) -> Option<u64> {
        match self {
            Budget::Finite(b) => Some(*b),
            Budget::Unlimited => None,
        }
    }
}

/// The distribution of the calibrated noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "distribution", rename_all = "kebab-case")]
pub enum Noise {
    /// Density ∝ exp(−β‖b‖₂) (uniform direction × Gamma(dim, rate β) radius).
    L2Laplace {
        /// Rate β.
        beta: f64,
    },
    /// Isotropic Gaussian with standard deviation σ per coordinate.
    Gaussian {
        /// Standard deviation σ.
        sigma: f64,
    },
    /// Exponential mechanism P(y) ∝ exp(β·votes_y) (subsample-and-aggregate), or over the
    /// logits, P(y) ∝ exp(β·logit_y) (prediction sensitivity, label-only `tight`).
    Exponential {
        /// Inverse temperature β.
        beta: f64,
    },
    /// Permute-and-flip (McKenna & Sheldon 2020): candidates in a random order, each returned
    /// with probability exp(β·(score_y − max score)); over the teachers' votes
    /// (subsample-and-aggregate) or the logits (prediction sensitivity). A selection: only
    /// the label is released. Serialised as `"distribution": "permute-and-flip"`; artifacts
    /// written before it existed never contain it and read as before.
    PermuteAndFlip {
        /// β of the coins exp(β·(score − max)).
        beta: f64,
    },
}

/// The constants and sizes a calibration rests on (SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Assumptions {
    /// Lipschitz constant of the loss (√2 for softmax cross-entropy on the unit ball).
    pub k: f64,
    /// Bound on the Hessian's eigenvalues (1/2).
    pub l: f64,
    /// Number of classes C.
    pub classes: usize,
    /// Training-set size N (None where it does not enter).
    pub n: Option<usize>,
    /// L2-regularisation λ (None where it does not enter).
    pub lambda: Option<f64>,
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            k: std::f64::consts::SQRT_2,
            l: 0.5,
            classes: 10,
            n: None,
            lambda: None,
        }
    }
}

/// The result of calibrating a method: a guarantee as a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Which method.
    pub method: Method,
    /// Which analysis set the noise.
    pub calibration: CalibrationMode,
    /// The target (ε, δ).
    pub privacy: Privacy,
    /// The budget B the guarantee covers.
    pub budget: Budget,
    /// The calibrated noise.
    pub noise: Noise,
    /// The neighbouring relation the guarantee is stated for. A calibration serialised before
    /// this field existed reads as `replace-one`; readers of legacy records must relabel them
    /// (see `privpred_linear::artifact`).
    #[serde(default)]
    pub neighbours: Neighbours,
    /// The constants used.
    pub assumptions: Assumptions,
    /// False where SPEC §4 says the paper's rule does not deliver the guarantee.
    pub valid_guarantee: bool,
    /// Human-readable notes (erratum references, theorem used).
    pub notes: Vec<String>,
    /// Loss perturbation: ρ = 2LC/ε (before the Nλ floor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rho: Option<f64>,
    /// DP-SGD: the noise multiplier σ (noise std = σ·ν).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_multiplier: Option<f64>,
    /// DP-SGD: the ε actually spent by the accountant at that multiplier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_spent: Option<f64>,
    /// DP-SGD: the Poisson sampling rate q = b/N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_rate: Option<f64>,
    /// DP-SGD: the number of noisy steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// Certified minimiser (erratum 4.8): the gradient-norm bound γ the released fit must
    /// meet and the sensitivity that includes it (`corrected`/`tight` model sensitivity,
    /// prediction sensitivity and loss perturbation; see [`crate::certify`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certified: Option<crate::certify::CertifiedFit>,
}
