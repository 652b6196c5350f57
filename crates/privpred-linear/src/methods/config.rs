//! A method's configuration ([`MethodConfig`]: λ, teachers, DP-SGD's schedule and clip, solver
//! options, the seed policy and the neighbouring relation) and its calibration request.

use crate::dpsgd::DpSgdConfig;
use crate::error::{LinearError, Result};
use crate::lbfgs::LbfgsOptions;
use crate::shim::{CalibrationRequest, DpSgdSchedule};
use crate::train::check_lambda;
use privpred_core::{Budget, CalibrationMode, Loss, Method, Privacy};
use serde::{Deserialize, Serialize};

/// How the randomness of a predictor was seeded (recorded with the guarantee; one type for
/// every model family).
pub use privpred_core::SeedPolicy;

/// Everything needed to train one private predictor.
///
/// The fields are private to this crate: outside it a configuration is built by the checked
/// params ([`crate::TrainParams`], whose [`privpred_core::ParamGuard::check`] validates every
/// value and whose defaults are [`MethodConfig::new`]'s, from [`privpred_core::defaults`]) or
/// by [`MethodConfig::new`] itself (the defaults, all valid), changed through
/// [`crate::TrainParams::from`] and read through the accessors below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodConfig {
    /// Which method.
    pub(crate) method: Method,
    /// Which calibration analysis.
    pub(crate) mode: CalibrationMode,
    /// Target (ε, δ).
    pub(crate) privacy: Privacy,
    /// Inference budget B (forced to unlimited for private-training methods).
    pub(crate) budget: Budget,
    /// L2 strength λ > 0 for model sensitivity, loss perturbation (a floor on ρ/N) and
    /// prediction sensitivity. Ignored by DP-SGD (no L2, docs/study.md).
    pub(crate) lambda: f64,
    /// Subsample-and-aggregate: number of teachers T (docs/study.md: 256 for linear/MNIST).
    pub(crate) teachers: usize,
    /// Subsample-and-aggregate: the teachers' λ (the paper trains them without L2: 0).
    pub(crate) teacher_lambda: f64,
    /// DP-SGD hyper-parameters (`clip` must be set: cross-validation is done by the caller,
    /// see [`super::cv_clip`]).
    pub(crate) dp_sgd: DpSgdConfig,
    /// Solver options for the full-data fits.
    pub(crate) lbfgs: LbfgsOptions,
    /// Solver options for the teachers (capped; see [`teacher_lbfgs_options`]).
    pub(crate) teacher_lbfgs: LbfgsOptions,
    /// Recorded seed policy.
    pub(crate) seed_policy: SeedPolicy,
    /// The neighbouring relation of the guarantee (docs/guarantees.md#neighbouring-relations; replace-one by default and when
    /// absent from a serialised configuration).
    #[serde(default)]
    pub(crate) neighbours: privpred_core::Neighbours,
    /// How λ (or DP-SGD's clip) was chosen, recorded in the guarantee with its cost
    /// ([`privpred_core::tuning`]; a public value by default).
    #[serde(default)]
    pub(crate) selection: privpred_core::SelectionMethod,
    /// The model's output layer: softmax (C columns) or, for two classes, one sigmoid output
    /// ([`crate::binary`]); softmax when absent from a serialised configuration (and not
    /// written when softmax).
    #[serde(default, skip_serializing_if = "Loss::is_softmax")]
    pub(crate) loss: Loss,
    /// Under add/remove neighbours: the public training-set size N̂ the caller declares. The
    /// calibration uses it in place of the exact N, which that relation makes private
    /// (DP-SGD's q = b/N̂ and steps, loss perturbation's floor N̂λ on ρ_eff and its
    /// certificate), and it is what the guarantee records as N; required under add/remove,
    /// refused under replace-one (where N is public).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) public_n: Option<usize>,
}

/// The teachers' solver options. With λ = 0 (the paper's choice) a teacher's ⌊N/T⌋ examples
/// are usually linearly separable and the objective has no minimiser: the loss decreases
/// forever as ‖θ‖ grows. Like the reference (PyTorch L-BFGS: `tolerance_grad = 1e-4` on
/// max |gᵢ|, `tolerance_change = 1e-9`, 100 × 20 iterations) we stop at the gradient tolerance
/// (reached as the loss saturates), a change in value below 1e-9, or 2,000 iterations,
/// whichever comes first. Any stopping rule is fine for privacy: the teachers are arbitrary
/// functions of their disjoint shards.
pub fn teacher_lbfgs_options() -> LbfgsOptions {
    LbfgsOptions {
        max_iter: 2000,
        f_tol: 1e-9,
        ..LbfgsOptions::default()
    }
}

impl MethodConfig {
    /// A configuration with the defaults of docs/study.md (λ = 1e-4 until cross-validated,
    /// T = 256, teachers without L2, DP-SGD defaults with ν = 0.1, experiment seed 0).
    pub fn new(method: Method, mode: CalibrationMode, privacy: Privacy, budget: Budget) -> Self {
        MethodConfig {
            method,
            mode,
            privacy,
            budget: if method.is_private_training() {
                Budget::Unlimited
            } else {
                budget
            },
            lambda: privpred_core::defaults::LINEAR_LAMBDA,
            teachers: privpred_core::defaults::LINEAR_TEACHERS,
            teacher_lambda: privpred_core::defaults::LINEAR_TEACHER_LAMBDA,
            dp_sgd: DpSgdConfig {
                clip: Some(privpred_core::defaults::LINEAR_DPSGD_CLIP),
                ..DpSgdConfig::default()
            },
            lbfgs: LbfgsOptions::default(),
            teacher_lbfgs: teacher_lbfgs_options(),
            seed_policy: SeedPolicy::Seeded {
                seed: privpred_core::defaults::SEED,
            },
            neighbours: privpred_core::Neighbours::ReplaceOne,
            selection: privpred_core::SelectionMethod::Public,
            loss: Loss::Softmax,
            public_n: None,
        }
    }

    /// Which method.
    pub fn method(&self) -> Method {
        self.method
    }
    /// Which calibration analysis.
    pub fn mode(&self) -> CalibrationMode {
        self.mode
    }
    /// Target (ε, δ).
    pub fn privacy(&self) -> Privacy {
        self.privacy
    }
    /// Inference budget B (unlimited for private-training methods).
    pub fn budget(&self) -> Budget {
        self.budget
    }
    /// L2 strength λ (model sensitivity, loss perturbation, prediction sensitivity).
    pub fn lambda(&self) -> f64 {
        self.lambda
    }
    /// Subsample-and-aggregate: number of teachers T.
    pub fn teachers(&self) -> usize {
        self.teachers
    }
    /// Subsample-and-aggregate: the teachers' λ.
    pub fn teacher_lambda(&self) -> f64 {
        self.teacher_lambda
    }
    /// DP-SGD hyper-parameters (`clip` `None` until cross-validated).
    pub fn dp_sgd(&self) -> &DpSgdConfig {
        &self.dp_sgd
    }
    /// Solver options for the full-data fits.
    pub fn lbfgs(&self) -> &LbfgsOptions {
        &self.lbfgs
    }
    /// Solver options for the teachers.
    pub fn teacher_lbfgs(&self) -> &LbfgsOptions {
        &self.teacher_lbfgs
    }
    /// Recorded seed policy.
    pub fn seed_policy(&self) -> SeedPolicy {
        self.seed_policy
    }
    /// The neighbouring relation of the guarantee.
    pub fn neighbours(&self) -> privpred_core::Neighbours {
        self.neighbours
    }
    /// The model's output layer and loss (softmax, or one sigmoid output for two classes).
    pub fn loss(&self) -> Loss {
        self.loss
    }

    /// The declared public training-set size N̂ (add/remove neighbours).
    pub fn public_n(&self) -> Option<usize> {
        self.public_n
    }

    /// How λ (or DP-SGD's clip) was chosen.
    pub fn selection(&self) -> privpred_core::SelectionMethod {
        self.selection
    }

    /// The calibration request for training on `n` examples with `classes` classes.
    pub fn request(&self, n: usize, classes: usize) -> CalibrationRequest {
        let (lambda, dp_sgd) = match self.method {
            Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation => {
                (Some(self.lambda), None)
            }
            Method::DpSgd => (
                None,
                Some(DpSgdSchedule {
                    batch_size: self.dp_sgd.batch_size,
                    epochs: self.dp_sgd.epochs,
                }),
            ),
            Method::SubsampleAggregate => (None, None),
        };
        CalibrationRequest {
            method: self.method,
            mode: self.mode,
            privacy: self.privacy,
            budget: if self.method.is_private_training() {
                Budget::Unlimited
            } else {
                self.budget
            },
            n: Some(self.public_n.unwrap_or(n)),
            lambda,
            classes,
            dp_sgd,
            neighbours: self.neighbours,
            loss: self.loss,
        }
    }

    /// Validates the configuration against the training data's size.
    pub fn check(&self, n: usize) -> Result<()> {
        match (self.neighbours, self.public_n) {
            (privpred_core::Neighbours::AddRemove, None) => {
                return Err(LinearError::invalid(
                    "public-n",
                    "missing",
                    "under add-remove neighbours the exact training-set size N is private (D and D with one row added differ in it): declare a public size N-hat >= 1 for the calibration (the exact N is then neither used nor released)",
                ));
            }
            (privpred_core::Neighbours::AddRemove, Some(0)) => {
                return Err(LinearError::invalid(
                    "public-n",
                    0,
                    "must be an integer >= 1",
                ));
            }
            (privpred_core::Neighbours::ReplaceOne, Some(p)) => {
                return Err(LinearError::invalid(
                    "public-n",
                    p,
                    "applies to add-remove neighbours only (under replace-one N itself is public)",
                ));
            }
            _ => {}
        }
        if self.loss == Loss::Logistic
            && !matches!(
                self.method,
                Method::ModelSensitivity
                    | Method::PredictionSensitivity
                    | Method::LossPerturbation
                    | Method::DpSgd
            )
        {
            return Err(LinearError::invalid(
                "binary",
                self.method,
                "the binary (sigmoid) model is trained by model-sensitivity, prediction-sensitivity, loss-perturbation and dp-sgd; use the softmax model for this method",
            ));
        }
        match self.method {
            Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation => {
                check_lambda(self.lambda, true)?
            }
            Method::SubsampleAggregate => {
                check_lambda(self.teacher_lambda, false)?;
                if self.teachers == 0 || self.teachers > n {
                    return Err(LinearError::invalid(
                        "teachers",
                        self.teachers,
                        format!("must be in 1..={n} (each teacher needs ≥ 1 example)"),
                    ));
                }
            }
            Method::DpSgd => {
                self.dp_sgd.check(n)?;
                if self.dp_sgd.clip.is_none() {
                    return Err(LinearError::invalid(
                        "clip",
                        "none",
                        "DP-SGD needs a clip ν (cross-validate with cv_clip first)",
                    ));
                }
            }
        }
        if !self.method.is_private_training() && self.budget.get().is_none() {
            return Err(LinearError::invalid(
                "budget",
                "unlimited",
                format!("{} needs a finite inference budget B >= 1", self.method),
            ));
        }
        Ok(())
    }
}
