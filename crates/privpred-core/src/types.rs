//! The vocabulary of guarantees: methods, calibration modes, neighbouring relations, noise
//! distributions and the constants a calibration rests on. The validated (ε, δ) and budget
//! are in [`crate::privacy`], the guarantee and its mechanism in [`crate::guarantee`] and
//! [`crate::mechanism`].

use serde::{Deserialize, Serialize};

/// The five private-prediction methods of the study (docs/guarantees.md#neighbouring-relations).
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

/// Calibration mode (docs/guarantees.md#calibrations): which analysis sets the noise.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum CalibrationMode {
    /// The paper's formulas and reference code exactly; not always a valid guarantee (docs/guarantees.md#errata).
    Paper,
    /// The paper's analysis with its errata fixed (default; docs/guarantees.md#errata).
    #[default]
    Corrected,
    /// Modern accounting with the same (ε, δ) guarantee and less noise (docs/guarantees.md#calibrations).
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

/// The neighbouring relation a guarantee is stated for (docs/guarantees.md#neighbouring-relations). Every guarantee names its
/// relation: an add/remove ε-DP mechanism is in general only 2ε-DP under replace-one (group
/// privacy), so results under different relations are not comparable.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Neighbours {
    /// D and D′ have the same size and differ in one example (the default).
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
    /// The value rounded to a power-of-two grid plus exact discrete Gaussian noise of scale σ
    /// per coordinate ([`crate::grid`]): every released value is a grid point.
    DiscreteGaussian {
        /// Scale σ (in the value's units).
        sigma: f64,
        /// The ℓ2 rounding allowance r: the grid step g is the largest power of two with
        /// g·√d ≤ r, and the calibration's sensitivity includes r.
        rounding: f64,
    },
    /// The value rounded to a power-of-two grid plus exact ℓ2-Laplace noise on the integer
    /// lattice, P(z) ∝ exp(−β·g·‖z‖₂) in grid units g ([`crate::lattice`]; above
    /// [`crate::lattice::LATTICE_L2_MAX_DIM`] coordinates the ℓ1 product law of the same
    /// budget): every released value is a grid point.
    DiscreteL2Laplace {
        /// Rate β (in the value's units: the release is β·(Δ + r)-DP for sensitivity Δ).
        beta: f64,
        /// The ℓ2 rounding allowance r: the grid step g is the largest power of two with
        /// g·√d ≤ r, and the calibration's sensitivity includes r.
        rounding: f64,
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

/// The noise in words and its parameter, as the commands print it: `ℓ2-Laplace, β = 12.5`,
/// `Gaussian, σ = 0.8`, `exponential mechanism, β = 2`, `permute-and-flip, β = 2`. The
/// parameter is shown to 12 significant digits (so 2.9999999999999996 reads as 3); JSON and
/// artifacts keep the exact value.
impl std::fmt::Display for Noise {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, symbol, v) = match *self {
            Noise::L2Laplace { beta } => ("ℓ2-Laplace", "β", beta),
            Noise::Gaussian { sigma } => ("Gaussian", "σ", sigma),
            Noise::DiscreteGaussian { sigma, .. } => ("discrete Gaussian on a grid", "σ", sigma),
            Noise::DiscreteL2Laplace { beta, .. } => ("ℓ2-Laplace on a grid", "β", beta),
            Noise::Exponential { beta } => ("exponential mechanism", "β", beta),
            Noise::PermuteAndFlip { beta } => ("permute-and-flip", "β", beta),
        };
        let shown: f64 = format!("{v:.11e}").parse().unwrap_or(v);
        write!(f, "{name}, {symbol} = {shown}")
    }
}

/// The output layer of a linear model and its loss: which constants a calibration uses.
///
/// - `softmax`: θ ∈ R^{D×C}, softmax cross-entropy. The gradient of ℓ with respect to the
///   logits is p − e_y, of norm ≤ √2, so ‖∇_θ ℓ‖_F ≤ √2‖x‖: K = √2; the Hessian with respect
///   to the logits, diag(p) − ppᵀ, has eigenvalues ≤ 1/2 and rank ≤ C: L = 1/2, C output
///   columns (docs/guarantees.md#the-setting).
/// - `logistic` (two classes only): one output column w ∈ R^D, score s = wᵀx, class 1 when
///   s > 0, loss ℓ = ln(1 + e^{−y s}) with y = ±1. |∂ℓ/∂s| = σ(−ys) < 1, so
///   ‖∇_w ℓ‖ ≤ ‖x‖: K = 1; ∂²ℓ/∂s² = σ(s)(1 − σ(s)) ≤ 1/4 and the Hessian σ(s)(1 − σ(s))xxᵀ
///   has rank 1: L = 1/4, one output column. These are the constants of Chaudhuri, Monteleoni
///   & Sarwate (2011), Section 3.4 (logistic regression: |ℓ′| ≤ 1, |ℓ″| ≤ c = 1/4).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Loss {
    /// C output columns, softmax cross-entropy (K = √2, L = 1/2).
    #[default]
    Softmax,
    /// One output column for two classes, logistic (sigmoid) loss (K = 1, L = 1/4).
    Logistic,
}

impl Loss {
    /// The default loss of `method` (`None`: the non-private reference) on `classes` classes:
    /// the sigmoid (one output) for two classes with the methods that train it (model
    /// sensitivity, prediction sensitivity, loss perturbation, DP-SGD), the softmax otherwise
    /// (subsample-and-aggregate's teachers and the non-private reference train the softmax).
    pub fn default_for(method: Option<crate::Method>, classes: usize) -> Loss {
        use crate::Method;
        match method {
            Some(
                Method::ModelSensitivity
                | Method::PredictionSensitivity
                | Method::LossPerturbation
                | Method::DpSgd,
            ) if classes == 2 => Loss::Logistic,
            _ => Loss::Softmax,
        }
    }

    /// The kebab-case name used in results, artifacts and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Loss::Softmax => "softmax",
            Loss::Logistic => "logistic",
        }
    }

    /// Lipschitz constant K of ℓ in θ on the unit ball (√2 softmax, 1 logistic).
    pub fn k(self) -> f64 {
        match self {
            Loss::Softmax => std::f64::consts::SQRT_2,
            Loss::Logistic => 1.0,
        }
    }

    /// Bound L on the eigenvalues of ℓ's Hessian on the unit ball (1/2 softmax, 1/4 logistic).
    pub fn l(self) -> f64 {
        match self {
            Loss::Softmax => 0.5,
            Loss::Logistic => 0.25,
        }
    }

    /// Number of output columns (the rank bound of one example's Hessian): C for softmax, 1
    /// for logistic.
    pub fn outputs(self, classes: usize) -> usize {
        match self {
            Loss::Softmax => classes,
            Loss::Logistic => 1,
        }
    }

    /// Whether this is the softmax (the default, not written in serialised records).
    pub fn is_softmax(&self) -> bool {
        *self == Loss::Softmax
    }

    /// Parses a kebab-case name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "softmax" => Some(Loss::Softmax),
            "logistic" => Some(Loss::Logistic),
            _ => None,
        }
    }
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The constants and sizes a calibration rests on (docs/guarantees.md#the-setting).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Assumptions {
    /// Lipschitz constant of the loss (√2 for softmax cross-entropy on the unit ball, 1 for
    /// the logistic loss of a two-class model).
    pub k: f64,
    /// Bound on the Hessian's eigenvalues (1/2 softmax, 1/4 logistic).
    pub l: f64,
    /// Number of classes C.
    pub classes: usize,
    /// Training-set size N (None where it does not enter).
    pub n: Option<usize>,
    /// L2-regularisation λ (None where it does not enter).
    pub lambda: Option<f64>,
    /// The model's output layer and loss (softmax when absent from a serialised record; only
    /// the logistic loss is written, so softmax records read and rewrite as before).
    #[serde(default, skip_serializing_if = "Loss::is_softmax")]
    pub loss: Loss,
}

impl Assumptions {
    /// The number of output columns the noise and the Hessian's rank bound live in.
    pub fn outputs(&self) -> usize {
        self.loss.outputs(self.classes)
    }
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            k: std::f64::consts::SQRT_2,
            l: 0.5,
            classes: 10,
            n: None,
            lambda: None,
            loss: Loss::Softmax,
        }
    }
}

/// How the randomness of a private model was seeded (recorded with its guarantee, typed in
/// every artifact family): a release needs the OS-seeded generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum SeedPolicy {
    /// Experiment: a recorded seed (reproducible; its noise can be regenerated from the
    /// seed and subtracted, so not for deployment).
    Seeded {
        /// The seed.
        seed: u64,
    },
    /// Release: an OS-seeded cryptographic generator; no seed exists to record.
    OsRandom,
}
