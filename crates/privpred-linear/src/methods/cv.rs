//! Hyper-parameter selection on a hold-out through the methods' shared fits and draws
//! (docs/study.md; the privacy cost of the selection is ignored, as in the paper): λ for model
//! sensitivity, loss perturbation and prediction sensitivity ([`cv_lambda_draws`]), DP-SGD's
//! clip ν ([`cv_clip_draws`]), each by the mean hold-out accuracy of several private draws.

use super::{Fit, MethodConfig, Purpose, Reuse, SharedFit, calibrate, train_private};
use crate::error::{LinearError, Result};
use crate::model::LinearModel;
use crate::train;
use privpred_core::Method;
use privpred_data::{Dataset, UnitBallDataset};
use rand::Rng;
use std::sync::Arc;

/// Cross-validates λ over `grid` on `holdout` with one private draw per value
/// ([`cv_lambda_draws`] with one draw; kept for callers that want the single-draw rule).
pub fn cv_lambda<R: Rng + ?Sized>(
    cfg: &MethodConfig,
    train: &UnitBallDataset,
    holdout: &Dataset,
    grid: &[f64],
    rng: &mut R,
) -> Result<train::CvResult> {
    cv_lambda_draws(cfg, train, holdout, grid, 1, rng)
}

/// The default number of private draws averaged per cross-validated λ: 5. Chosen by measurement on the training hold-out (`cargo run --release -p privpred-study
/// --example holdout -- cv`, MNIST and Fashion-MNIST; tables in docs/study.md, "Choosing the
/// number of draws"): the mean loss of the picked λ against the best one falls from 0.86
/// points (k = 1) to 0.32 (k = 5) for model sensitivity and from 0.71 to 0.33 for loss
/// perturbation; doubling to k = 10 gains less than 0.2 points more for every method, at
/// twice the selection cost (loss perturbation refits per draw).
pub const CV_DRAWS_DEFAULT: usize = 5;

/// The largest accepted number of private draws per cross-validated value.
pub const CV_DRAWS_MAX: usize = 1000;

/// Checks a number of cross-validation draws: 1 ≤ k ≤ [`CV_DRAWS_MAX`].
pub fn check_cv_draws(k: usize) -> Result<usize> {
    if (1..=CV_DRAWS_MAX).contains(&k) {
        Ok(k)
    } else {
        Err(LinearError::invalid(
            "cv draws",
            k,
            "an integer in 1..=1000 (private draws averaged per cross-validated value)",
        ))
    }
}

/// Cross-validates λ for `cfg.method` (model sensitivity, loss perturbation, prediction
/// sensitivity): trains the private predictor on `train` for each λ of `grid` and scores it by
/// the **mean hold-out accuracy of `draws` independent mechanism draws** (docs/study.md; the privacy
/// cost of the selection is ignored, as in the paper). One draw per λ picks nearly at random
/// among neighbouring λ where the mechanism's accuracy varies by several points from draw to
/// draw; the mean of k draws has 1/√k of that spread.
///
/// Cost: the non-private fit per λ is shared by its draws, so model and prediction
/// sensitivity pay k noise draws and hold-out predictions per λ; loss perturbation pays one
/// warm-started fit per draw (k fits per λ).
pub fn cv_lambda_draws<R: Rng + ?Sized>(
    cfg: &MethodConfig,
    train: &UnitBallDataset,
    holdout: &Dataset,
    grid: &[f64],
    draws: usize,
    rng: &mut R,
) -> Result<train::CvResult> {
    match cfg.method {
        Method::ModelSensitivity | Method::PredictionSensitivity | Method::LossPerturbation => {}
        m => {
            return Err(LinearError::invalid(
                "method",
                m,
                "λ cross-validation applies to model sensitivity, loss perturbation and prediction sensitivity",
            ));
        }
    }
    let draws = check_cv_draws(draws)?;
    // θ*(λ) warm-started from the previous λ's (the grid's fits form a chain)
    let mut nonpriv: Option<Arc<LinearModel>> = None;
    train::select_best(grid, |l| {
        let mut c = cfg.clone();
        c.lambda = l;
        let calibration = calibrate(&c, train.n, train.classes)?;
        let theta = Arc::new(if cfg.loss == privpred_core::Loss::Logistic {
            crate::binary::fit_binary(train, l, &cfg.lbfgs)?.model
        } else {
            train::fit_logistic(train, l, nonpriv.as_deref(), &cfg.lbfgs)?.model
        });
        nonpriv = Some(theta.clone());
        let fit = Fit {
            cfg: &c,
            train,
            calibration: &calibration,
            purpose: Purpose::Selection,
        };
        let reuse = Reuse {
            nonprivate: Some(theta),
            ..Reuse::default()
        };
        let shared = SharedFit::fit(&fit, &reuse, rng)?;
        let scores = shared.score(holdout)?;
        let mut total = 0.0;
        for _ in 0..draws {
            let labels = shared.draw(&fit, &scores, holdout, rng)?.labels;
            total += train::accuracy_of(&labels, &holdout.labels);
        }
        Ok(total / draws as f64)
    })
}

/// Cross-validates DP-SGD's clip ν over `grid` on `holdout` with one private run per value
/// ([`cv_clip_draws`] with one draw; kept for callers that want the single-run rule).
pub fn cv_clip<R: Rng + ?Sized>(
    cfg: &MethodConfig,
    train: &UnitBallDataset,
    holdout: &Dataset,
    grid: &[f64],
    rng: &mut R,
) -> Result<train::CvResult> {
    cv_clip_draws(cfg, train, holdout, grid, 1, rng)
}

/// Cross-validates DP-SGD's clip ν over `grid` on `holdout` by the **mean hold-out accuracy
/// of `draws` independent private runs** per value (docs/study.md; the rule of
/// [`cv_lambda_draws`] applied to ν; the privacy cost of the selection is ignored, as in the
/// paper). The runs of one value are drawn one after the other from `rng`. Cost: `draws`
/// DP-SGD trainings per value (nothing is shared between DP-SGD runs).
pub fn cv_clip_draws<R: Rng + ?Sized>(
    cfg: &MethodConfig,
    train: &UnitBallDataset,
    holdout: &Dataset,
    grid: &[f64],
    draws: usize,
    rng: &mut R,
) -> Result<train::CvResult> {
    let draws = check_cv_draws(draws)?;
    train::select_best(grid, |nu| {
        let mut c = cfg.clone();
        c.method = Method::DpSgd;
        c.dp_sgd.clip = Some(nu);
        let mut total = 0.0;
        for _ in 0..draws {
            let p = train_private(&c, train, rng)?;
            total += p.accuracy(holdout, rng)?;
        }
        Ok(total / draws as f64)
    })
}
