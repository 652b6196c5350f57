//! The non-private baseline (docs/study.md: "non-private" in every figure and in `privpred train
//! non-private`): L2-regularised multinomial logistic regression θ*(λ), released as is.
//!
//! # Why it is not a [`super::PrivateMethod`]
//! The trait's contract is a guarantee: `calibrate` for (n, classes) returns a
//! [`privpred_core::Calibration`] (a [`privpred_core::Guarantee`] and the
//! [`privpred_core::Mechanism`] that delivers it), `release` draws from that mechanism and the
//! result is a [`super::PrivatePredictor`], whose calibration is recorded in every artifact,
//! result row and `GET /v1/model`. The baseline promises nothing: it has no
//! [`privpred_core::Method`] variant, no calibration and no mechanism, and its answers are
//! deterministic. Giving it the trait would need a placeholder calibration, the kind of
//! patched-in record the typed guarantee exists to rule out. So it keeps the trait's shape as plain functions —
//! [`fit`] (the trait's shared fit and release at once: there is no draw), [`predict`],
//! [`score`] (the trait's `score`: logits on the queries) and [`select_lambda`] (the
//! counterpart of [`super::cv_lambda`], one evaluation per λ since there is no noise to
//! average) — and is stored as `StoredModel::NonPrivate` (a bare [`LinearModel`], no
//! calibration) by [`crate::artifact`].
//!
//! Where it is used: the CLI's `train non-private` and `evaluate`, the study's non-private
//! accuracy (its cached θ*(λ), which is also model and prediction sensitivity's shared fit,
//! [`super::ModelFit`]) and the Python estimators. These functions are the ones the rest of
//! the crate already used ([`crate::train`]): the same fits, bit for bit.

use crate::error::Result;
use crate::lbfgs::LbfgsOptions;
use crate::model::LinearModel;
use crate::train::{self, CvResult, FitReport};
use privpred_data::{Dataset, UnitBallDataset};

/// θ*(λ) on unit-ball data to the gradient tolerance of `opts` (λ ≥ 0; the non-private
/// model needs no λ > 0, having no sensitivity to bound).
pub fn fit(train: &UnitBallDataset, lambda: f64, opts: &LbfgsOptions) -> Result<FitReport> {
    train::fit_logistic(train, lambda, None, opts)
}

/// Arg-max predictions of `model` on every row of `queries`.
pub fn predict(model: &LinearModel, queries: &Dataset) -> Result<Vec<u32>> {
    train::predict_all(model, queries)
}

/// The logits (row-major `n × c`) of `model` on every row of `queries`.
pub fn score(model: &LinearModel, queries: &Dataset) -> Result<Vec<f64>> {
    train::logits_all(model, queries)
}

/// λ of best hold-out accuracy over `grid` (trained on `train`, warm-started from large λ to
/// small; ties to the first value of `grid`). The privacy cost of the selection is ignored,
/// as in the paper (docs/guarantees.md#the-setting) — here there is no privacy to account.
pub fn select_lambda(
    train: &UnitBallDataset,
    holdout: &Dataset,
    grid: &[f64],
    opts: &LbfgsOptions,
) -> Result<CvResult> {
    train::cv_lambda_nonprivate(train, holdout, grid, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::tests::toy;

    /// The baseline is the plain fit: the same θ, predictions and logits as `crate::train`.
    #[test]
    fn the_baseline_is_the_plain_fit() {
        let ds = toy(200, 4, 3, 5);
        let opts = LbfgsOptions::default();
        let a = fit(&ds, 1e-2, &opts).unwrap();
        let b = train::fit_logistic(&ds, 1e-2, None, &opts).unwrap();
        assert_eq!(a.model, b.model);
        let q = ds.inner();
        assert_eq!(
            predict(&a.model, q).unwrap(),
            train::predict_all(&b.model, q).unwrap()
        );
        let logits = score(&a.model, q).unwrap();
        assert_eq!(logits.len(), q.n * q.classes);
        let cv = select_lambda(&ds, q, &[1e-1, 1e-3], &opts).unwrap();
        assert!([1e-1, 1e-3].contains(&cv.best));
    }
}
