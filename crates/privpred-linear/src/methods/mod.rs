//! The five private-prediction methods for linear models (docs/guarantees.md#neighbouring-relations, §3), one module each behind
//! one trait, [`PrivateMethod`]:
//!
//! | module | method | shared across repetitions | one draw |
//! |---|---|---|---|
//! | [`model_sensitivity`] | output perturbation | θ*(λ) (certified, erratum 4.8) | θ* + noise |
//! | [`loss_perturbation`] | objective perturbation | warm start / K-FAC preconditioner | one perturbed fit |
//! | [`dp_sgd`] | DP-SGD | nothing | one private SGD run |
//! | [`prediction_sensitivity`] | noisy logits | θ*(λ), its logits on the queries | noise per answer |
//! | [`subsample_aggregate`] | teachers' votes | T teachers, their votes on the queries | selection per answer |
//!
//! A method is used in three steps: **calibrate** for (N, C) ([`PrivateMethod::calibrate`]),
//! **fit what can be shared** by every noise draw ([`PrivateMethod::fit_shared`]), then
//! **release** a predictor ([`PrivateMethod::release`], what `privpred train` writes) or
//! **draw** one repetition's labels on a query set ([`PrivateMethod::draw`], what
//! cross-validation and the study score). [`SharedFit`] dispatches a [`Method`] to its module;
//! [`train_private`] is calibrate → fit → release; [`cv`] selects λ and DP-SGD's clip through
//! the same steps ([`shared`] holds the dispatch). The helpers the methods share live in
//! [`config`] ([`MethodConfig`]), [`teachers`] ([`Teachers`], [`VoteMatrix`]) and
//! [`predictor`] ([`PrivatePredictor`]).
//!
//! # Exact shortcuts for studies
//! Sharing work across repetitions **does not change the distribution of any single
//! repetition** — the shortcuts are exact, not approximations:
//! - model sensitivity and prediction sensitivity add noise to a deterministic function of the
//!   data (the non-private minimiser θ*, and its logits on the queries): computing θ* once and
//!   drawing fresh noise per repetition ([`perturb_model`], [`prediction_sensitivity_labels`])
//!   samples exactly the mechanism's output distribution each time;
//! - subsample-and-aggregate's answers depend on the data only through the vote counts of the
//!   T teachers: for a fixed partition the T × n votes ([`Teachers::vote_matrix`]) are computed
//!   once and every (ε, B) only changes β in the exponential mechanism
//!   ([`VoteMatrix::private_labels`]); the partition is redrawn when the study redraws it;
//! - loss perturbation minimises a strictly convex objective, whose unique minimiser does not
//!   depend on the starting point: warm-starting from the non-private solution
//!   ([`loss_perturbation_fit`]) only saves iterations (to the same gradient tolerance), and so
//!   does a preconditioner shared by every noise draw ([`LossPerturbationPreconditioner`]).
//!
//! # Who draws the noise
//! The mechanism a calibration names is the one that samples: model sensitivity, prediction
//! sensitivity and subsample-and-aggregate draw through [`privpred_core::Mechanism::perturb`]
//! and [`privpred_core::Mechanism::select`] on `calibration.mechanism` (same draws from the
//! same generator as the old `Noise` samplers; `scripts/equality_check.sh`). Loss perturbation
//! and DP-SGD read their noise in one small private function each (`noise_of`).

pub mod config;
pub mod cv;
pub mod dp_sgd;
pub mod loss_perturbation;
pub mod model_sensitivity;
pub mod non_private;
pub mod prediction_sensitivity;
pub mod predictor;
pub mod private_split;
pub mod shared;
pub mod subsample_aggregate;
pub mod teachers;
#[cfg(test)]
mod tests;

pub use config::{MethodConfig, SeedPolicy, teacher_lbfgs_options};
pub use cv::{
    CV_DRAWS_DEFAULT, CV_DRAWS_MAX, check_cv_draws, cv_clip, cv_clip_draws, cv_lambda,
    cv_lambda_draws,
};
pub use dp_sgd::DpSgd;
pub use loss_perturbation::{
    LossPerturbation, LossPerturbationPreconditioner, LpShared, LpStart, loss_perturbation_fit,
    loss_perturbation_fit_certified, loss_perturbation_fit_preconditioned,
    loss_perturbation_fit_report, loss_perturbation_fit_selection, loss_perturbation_rho_eff,
};
pub use model_sensitivity::{ModelFit, ModelSensitivity, perturb_model};
pub use prediction_sensitivity::{PredictionSensitivity, prediction_sensitivity_labels};
pub use predictor::{Diagnostics, MethodParams, PredictorKind, PrivatePredictor, check_query};
pub use private_split::{Knob, SplitSelection, check_private_split, private_split_select};
#[cfg(test)]
pub(crate) use shared::shared_fits_built;
pub use shared::{SharedFit, calibrate};
pub use subsample_aggregate::SubsampleAggregate;
pub use teachers::{Teachers, VoteMatrix, train_teachers};

/// One answer to a query (defined once, in `privpred-core`).
pub use privpred_core::Answer;

use crate::error::Result;
use crate::model::LinearModel;
use crate::precond::DataMoment;
use crate::shim;
use crate::train::check_classes;
use privpred_core::{Calibration, Method};
use privpred_data::{Dataset, UnitBallDataset};
use rand::Rng;
use std::sync::Arc;
use std::time::Instant;

/// Why a fit is made: to be released (certified where the calibration assumed a gradient-norm
/// bound, erratum 4.8), or only to score a hyper-parameter on a hold-out (never released: the
/// f64 certification pass is skipped, its effect on the model being far below the noise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The fit is released (or stands for a released one in a study's repetition).
    Release,
    /// Hyper-parameter selection only.
    Selection,
}

/// What one fit of a method is made from: its configuration (λ, T, DP-SGD's schedule and clip,
/// solver options, seed policy), the training data, the calibration (from
/// [`PrivateMethod::calibrate`] on the same configuration and data) and the purpose.
#[derive(Debug, Clone, Copy)]
pub struct Fit<'a> {
    /// The method's configuration.
    pub cfg: &'a MethodConfig,
    /// The unit-ball training data.
    pub train: &'a UnitBallDataset,
    /// The calibration for `cfg` on `train`.
    pub calibration: &'a Calibration,
    /// Release or selection.
    pub purpose: Purpose,
}

/// What the caller already holds and a shared fit may reuse (exact: see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Reuse {
    /// The non-private minimiser θ*(λ) on the same training data with the configuration's
    /// solver (or a warm start for it): model and prediction sensitivity use it as their
    /// uncertified fit and start their certified fit from it; loss perturbation starts from
    /// it.
    pub nonprivate: Option<Arc<LinearModel>>,
    /// The training set's data moment: with `nonprivate`, loss perturbation builds its shared
    /// Kronecker-factored preconditioner ([`LossPerturbationPreconditioner`]).
    pub moment: Option<Arc<DataMoment>>,
    /// The training set's nonzeros cell ([`crate::exact::NonzerosCell`]): loss
    /// perturbation's preconditioners on the same training set share one [`SparseRows`]
    /// through it (without it each preconditioner builds its own).
    ///
    /// [`SparseRows`]: crate::exact::SparseRows
    pub nonzeros: Option<Arc<crate::exact::NonzerosCell>>,
}

/// The noise-independent part of answering a fixed query set, shared by every repetition:
/// prediction sensitivity's logits, subsample-and-aggregate's vote counts, nothing for the
/// methods that release a model.
#[derive(Debug, Clone, PartialEq)]
pub enum Scores {
    /// Nothing to share (the released model answers).
    None,
    /// Row-major `n × c` logits of the shared non-private model.
    Logits(Vec<f64>),
    /// The teachers' vote counts.
    Votes(VoteMatrix),
}

/// One repetition: a label per query, and where its time went.
#[derive(Debug, Clone, PartialEq)]
pub struct Draw {
    /// One label per query.
    pub labels: Vec<u32>,
    /// Seconds releasing (the training-time noise: a perturbed model, a private fit).
    pub release_seconds: f64,
    /// Seconds answering the queries.
    pub answer_seconds: f64,
}

impl Draw {
    /// Times `release`, then `answer` on its result.
    pub(crate) fn timed<T>(
        release: impl FnOnce() -> Result<T>,
        answer: impl FnOnce(T) -> Result<Vec<u32>>,
    ) -> Result<Draw> {
        let t = Instant::now();
        let released = release()?;
        let release_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let labels = answer(released)?;
        Ok(Draw {
            labels,
            release_seconds,
            answer_seconds: t.elapsed().as_secs_f64(),
        })
    }
}

/// A private-prediction method for linear models: calibrate, fit what every noise draw shares,
/// release a predictor or draw one repetition's labels. Implemented by one unit struct per
/// method module; [`SharedFit`] dispatches a [`Method`] to them.
pub trait PrivateMethod {
    /// What a fit shares across repetitions (θ*(λ), the teachers, a preconditioner).
    type Shared: Send + Sync;

    /// The method this module implements.
    const METHOD: Method;

    /// The calibration for training with `cfg` on `n` examples of `classes` classes: the
    /// core's (docs/guarantees.md#calibrations), with the solver's residual accounted for (erratum 4.8,
    /// `privpred_core::certify::calibrate_certified`), with the hyper-parameter selection's
    /// record ([`privpred_core::tuning`]).
    fn calibrate(&self, cfg: &MethodConfig, n: usize, classes: usize) -> Result<Calibration> {
        Ok(shim::calibrate(&cfg.request(n, classes))?.with_selection(cfg.selection)?)
    }

    /// The noise-independent part of the method on `fit.train` (may draw from `rng`: the
    /// teachers' partition).
    fn fit_shared<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        reuse: &Reuse,
        rng: &mut R,
    ) -> Result<Self::Shared>;

    /// One release: the predictor with its guarantee (draws the training-time noise).
    fn release<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &Self::Shared,
        rng: &mut R,
    ) -> Result<PrivatePredictor>;

    /// The noise-independent part of answering `queries` (default: nothing).
    fn score(&self, shared: &Self::Shared, queries: &Dataset) -> Result<Scores> {
        let _ = (shared, queries);
        Ok(Scores::None)
    }

    /// One repetition on `queries` (with their [`Self::score`]): exactly the labels of one
    /// [`Self::release`] answering every query once, drawn from the same `rng` stream.
    fn draw<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &Self::Shared,
        scores: &Scores,
        queries: &Dataset,
        rng: &mut R,
    ) -> Result<Draw>;
}

/// Trains a private predictor with `cfg` on unit-ball training data: calibrate, fit, release
/// (see [`PrivateMethod`]).
pub fn train_private<R: Rng + ?Sized>(
    cfg: &MethodConfig,
    train: &UnitBallDataset,
    rng: &mut R,
) -> Result<PrivatePredictor> {
    check_classes(train)?;
    cfg.check(train.n)?;
    let calibration = calibrate(cfg, train.n, train.classes)?;
    let fit = Fit {
        cfg,
        train,
        calibration: &calibration,
        purpose: Purpose::Release,
    };
    SharedFit::fit(&fit, &Reuse::default(), rng)?.release(&fit, rng)
}
