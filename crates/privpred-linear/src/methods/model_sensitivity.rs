//! Model sensitivity (output perturbation, docs/guarantees.md#calibrations): the L2-regularised minimiser θ*(λ),
//! certified to ‖∇J‖₂ ≤ γ where the calibration assumed it (erratum 4.8), plus one draw of the
//! calibrated noise over all D·C coordinates jointly. The noise is calibrated to the
//! sensitivity 2/(Nλ) of θ* (Chaudhuri et al. 2011, Theorem 6; docs/guarantees.md#calibrations).
//!
//! Shared across repetitions: θ*(λ) ([`ModelFit`], also prediction sensitivity's); each draw
//! adds fresh noise to it (exact: θ* is a deterministic function of the data).

use super::{Draw, Fit, PredictorKind, PrivateMethod, PrivatePredictor, Purpose};
use super::{Reuse, Scores};
use crate::binary;
use crate::error::Result;
use crate::model::LinearModel;
use crate::train::{self, Optimization};
use privpred_core::{Calibration, Loss, Method};
use privpred_data::Dataset;
use rand::Rng;
use std::sync::Arc;

/// The method's module (see [`PrivateMethod`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelSensitivity;

/// The non-private fit θ*(λ) that model and prediction sensitivity release a noisy version
/// of, with its certificate when it was certified (erratum 4.8).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFit {
    /// θ*(λ).
    pub model: Arc<LinearModel>,
    /// ‖∇J(θ̂)‖₂ and the bound γ the guarantee assumed (certified fits only).
    pub optimization: Option<Optimization>,
}

/// θ*(λ) for a release or a selection: a release whose calibration assumed a gradient-norm
/// bound γ is certified to it in f64 (started from `reuse.nonprivate` when given; refused if
/// the solver stops early); otherwise the fast fit (`reuse.nonprivate` itself when given).
pub(crate) fn model_fit(fit: &Fit<'_>, reuse: &Reuse) -> Result<ModelFit> {
    let (cfg, train) = (fit.cfg, fit.train);
    let gamma = fit.calibration.certified.map(|c| c.gradient_norm_bound);
    if cfg.loss == Loss::Logistic {
        // The binary minimiser (crate::binary); only a shared fit in the binary layout is
        // reused.
        let report = match (fit.purpose, gamma, &reuse.nonprivate) {
            (Purpose::Release, Some(g), _) => {
                binary::fit_binary_certified(train, cfg.lambda, &cfg.lbfgs, g)?
            }
            (_, _, Some(m)) if binary::is_binary_layout(m) => {
                return Ok(ModelFit {
                    model: m.clone(),
                    optimization: None,
                });
            }
            _ => binary::fit_binary(train, cfg.lambda, &cfg.lbfgs)?,
        };
        return Ok(ModelFit {
            model: Arc::new(report.model),
            optimization: report.optimization,
        });
    }
    let report = match (fit.purpose, gamma, &reuse.nonprivate) {
        (Purpose::Release, Some(g), warm) => {
            train::fit_logistic_certified(train, cfg.lambda, warm.as_deref(), &cfg.lbfgs, g)?
        }
        (_, _, Some(m)) => {
            return Ok(ModelFit {
                model: m.clone(),
                optimization: None,
            });
        }
        (_, _, None) => train::fit_logistic(train, cfg.lambda, None, &cfg.lbfgs)?,
    };
    Ok(ModelFit {
        model: Arc::new(report.model),
        optimization: report.optimization,
    })
}

/// Model sensitivity from a (shared) non-private fit: θ* + one draw of the calibrated noise
/// over all D·C coordinates jointly, drawn by the calibration's own mechanism (output
/// perturbation, [`privpred_core::Mechanism::perturb`]; any other mechanism is an error).
/// A binary calibration ([`Loss::Logistic`]) draws it over the D weights of the sigmoid
/// output only ([`binary::perturb_binary`]).
pub fn perturb_model<R: Rng + ?Sized>(
    base: &LinearModel,
    calibration: &Calibration,
    rng: &mut R,
) -> Result<LinearModel> {
    if calibration.assumptions.loss == Loss::Logistic {
        return binary::perturb_binary(base, calibration, rng);
    }
    let mut m = base.clone();
    calibration.mechanism.perturb(rng, &mut m.theta)?;
    Ok(m)
}

impl PrivateMethod for ModelSensitivity {
    type Shared = ModelFit;
    const METHOD: Method = Method::ModelSensitivity;

    fn fit_shared<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        reuse: &Reuse,
        _: &mut R,
    ) -> Result<ModelFit> {
        model_fit(fit, reuse)
    }

    fn release<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &ModelFit,
        rng: &mut R,
    ) -> Result<PrivatePredictor> {
        Ok(PrivatePredictor::regularised(
            fit,
            shared.optimization,
            PredictorKind::Released {
                model: perturb_model(&shared.model, fit.calibration, rng)?,
            },
        ))
    }

    fn draw<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &ModelFit,
        _: &Scores,
        queries: &Dataset,
        rng: &mut R,
    ) -> Result<Draw> {
        Draw::timed(
            || perturb_model(&shared.model, fit.calibration, rng),
            |m| train::predict_all(&m, queries),
        )
    }
}
