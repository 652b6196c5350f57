//! DP-SGD for the linear model (docs/guarantees.md#calibrations, errata 4.2 and 4.3 fixed; the algorithm is
//! [`crate::dpsgd`]): noise multiplier σ from the core's accountant for the sampled Gaussian
//! mechanism (Abadi et al. 2016; Mironov et al. 2019), clip ν given or cross-validated
//! ([`super::cv_clip`]).
//!
//! Nothing is shared across repetitions: each draw is one private SGD run.

use super::{Diagnostics, Draw, Fit, MethodParams, PredictorKind, PrivateMethod, PrivatePredictor};
use super::{Reuse, Scores};
use crate::dpsgd::{self, DpSgdStats};
use crate::error::{LinearError, Result};
use crate::kernel::Design;
use crate::model::LinearModel;
use crate::train;
use privpred_core::{Calibration, Method};
use privpred_data::Dataset;
use rand::Rng;

/// The method's module (see [`PrivateMethod`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct DpSgd;

/// The noise multiplier σ (noise std σ·ν per step; the one read of its calibration's noise).
pub(crate) fn noise_of(calibration: &Calibration) -> Result<f64> {
    calibration.mechanism.gaussian_sigma().ok_or_else(|| {
        LinearError::Numerical("DP-SGD calibration without a noise multiplier".into())
    })
}

/// One private SGD run with the configuration's clip (0.1 when unset: [`super::MethodConfig::check`]
/// refuses that before a release).
fn run<R: Rng + ?Sized>(fit: &Fit<'_>, rng: &mut R) -> Result<(LinearModel, DpSgdStats, f64)> {
    let cfg = fit.cfg;
    let clip = cfg.dp_sgd.clip.unwrap_or(0.1);
    let sigma = noise_of(fit.calibration)?;
    let t = fit.train;
    // the dataset's shared padded copy (Design::new would copy N × D floats per run)
    let design = Design::of(t);
    let (model, stats) = if fit.calibration.assumptions.loss == privpred_core::Loss::Logistic {
        // one sigmoid output: w ∈ R^D, per-example gradient norm ≤ ‖x‖
        dpsgd::train_dpsgd_binary(t, &cfg.dp_sgd, clip, sigma, rng)?
    } else {
        dpsgd::train_dpsgd(&design, &cfg.dp_sgd, clip, sigma, rng)?
    };
    Ok((model, stats, clip))
}

impl PrivateMethod for DpSgd {
    type Shared = ();
    const METHOD: Method = Method::DpSgd;

    fn fit_shared<R: Rng + ?Sized>(&self, _: &Fit<'_>, _: &Reuse, _: &mut R) -> Result<()> {
        Ok(())
    }

    fn release<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        _: &(),
        rng: &mut R,
    ) -> Result<PrivatePredictor> {
        let (model, stats, clip) = run(fit, rng)?;
        Ok(PrivatePredictor {
            calibration: fit.calibration.clone(),
            seed_policy: fit.cfg.seed_policy,
            params: MethodParams::DpSgd {
                clip,
                steps: stats.steps,
            },
            kind: PredictorKind::Released { model },
            diagnostics: Diagnostics {
                optimization: None,
                dp_sgd: Some(stats),
            },
        })
    }

    fn draw<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        _: &(),
        _: &Scores,
        queries: &Dataset,
        rng: &mut R,
    ) -> Result<Draw> {
        Draw::timed(
            || run(fit, rng),
            |(m, _, _)| train::predict_all(&m, queries),
        )
    }
}
