//! # privpred-linear
//!
//! Multinomial logistic regression θ ∈ R^{D×C} on unit-ball data (docs/guarantees.md#the-setting) and the five
//! private-prediction methods of van der Maaten & Hannun (NeurIPS 2020) for linear models:
//! model sensitivity, loss perturbation, DP-SGD, prediction sensitivity and
//! subsample-and-aggregate (docs/guarantees.md#calibrations), each calibrated by `privpred-core`.
//!
//! - [`kernel`]: the fused logits/softmax/gradient pass (AVX2+FMA when available, rayon over
//!   row blocks for large N).
//! - [`lbfgs`]: full-batch L-BFGS with a strong-Wolfe line search and an optional
//!   preconditioner as its initial inverse Hessian.
//! - [`precond`]: the Kronecker-factored (K-FAC-style) preconditioner of the logistic objective.
//! - [`train`]: [`train::fit_logistic`], accuracy, λ cross-validation.
//! - [`methods`]: [`methods::train_private`] → [`methods::PrivatePredictor`], plus the exact
//!   study shortcuts.
//! - [`dpsgd`]: DP-SGD with Poisson sampling and joint per-example clipping.
//! - [`binary`]: two-class problems as one sigmoid output (K = 1, L = 1/4).
//! - [`artifact`]: safetensors files with the guarantee and preprocessing in the header.
//! - [`rederive`]: a loaded guarantee recalibrated from its public parameters and compared.

pub mod artifact;
pub mod binary;
pub mod dpsgd;
pub mod error;
pub mod exact;
pub mod kernel;
pub mod lbfgs;
pub mod methods;
pub mod model;
pub mod params;
pub mod precond;
pub mod rederive;
pub mod settings;
mod shim;
pub mod train;

pub use error::{LinearError, Result};
pub use lbfgs::{
    GradNorm, LbfgsOptions, LbfgsReport, PrecondScaling, Preconditioned, Preconditioner,
    Termination,
};
pub use methods::{Answer, MethodConfig, PrivatePredictor, SeedPolicy, check_query, train_private};
pub use model::LinearModel;
pub use params::{LbfgsParams, TrainParams};
pub use train::{FitReport, fit_logistic};
