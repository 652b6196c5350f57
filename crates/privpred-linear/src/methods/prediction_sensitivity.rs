//! Prediction sensitivity (noisy logits, docs/guarantees.md#calibrations): the non-private θ*(λ) is kept secret and
//! every answer adds one draw of the calibrated noise to the query's logits (sensitivity of
//! the logits 2/(Nλ) for unit-ball queries, docs/guarantees.md#calibrations) and returns the arg-max; in `tight` with
//! δ = 0 the answer is a label-only selection over the logits. Each answer spends the
//! inference budget B the calibration divides ε by.
//!
//! Shared across repetitions: θ*(λ) and its logits on the queries; each draw is fresh noise
//! per answer.

use super::model_sensitivity::{ModelFit, model_fit};
use super::{Draw, Fit, PredictorKind, PrivateMethod, PrivatePredictor};
use super::{Reuse, Scores};
use crate::binary;
use crate::error::Result;
use crate::model::{LinearModel, argmax};
use crate::train;
use privpred_core::{Answer, Calibration, Loss, Method};
use privpred_data::Dataset;
use rand::Rng;

/// The method's module (see [`PrivateMethod`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PredictionSensitivity;

/// Prediction sensitivity from (shared) non-private logits (row-major `n × c`): one noise
/// draw in R^C per answer (in R^1, on the score, for a binary calibration), then arg-max; or, where the calibration is a selection over the
/// logits (`tight`, δ = 0, label only), one draw of that selection per answer. Every draw is
/// made by the calibration's mechanism ([`privpred_core::Mechanism::perturb`] /
/// [`privpred_core::Mechanism::select`]).
pub fn prediction_sensitivity_labels<R: Rng + ?Sized>(
    logits: &[f64],
    c: usize,
    calibration: &Calibration,
    rng: &mut R,
) -> Result<Vec<u32>> {
    let mechanism = &calibration.mechanism;
    let mut out = Vec::with_capacity(logits.len() / c.max(1));
    if mechanism.is_selection() {
        for l in logits.chunks_exact(c) {
            out.push(mechanism.select(rng, l)? as u32);
        }
        return Ok(out);
    }
    let mut buf = vec![0.0; c];
    let binary = calibration.assumptions.loss == Loss::Logistic;
    for l in logits.chunks_exact(c) {
        buf.copy_from_slice(l);
        if binary {
            binary::perturb_score(&mut buf, calibration, rng)?;
        } else {
            mechanism.perturb(rng, &mut buf)?;
        }
        out.push(argmax(&buf) as u32);
    }
    Ok(out)
}

/// One answer to a validated query: the noisy logits and their arg-max, or (selection) the
/// label alone.
pub(crate) fn answer<R: Rng + ?Sized>(
    model: &LinearModel,
    calibration: &Calibration,
    x: &[f32],
    rng: &mut R,
) -> Result<Answer> {
    let mechanism = &calibration.mechanism;
    let mut l = model.logits(x);
    if mechanism.is_selection() {
        // label only: a selection over the logits (tight, δ = 0)
        return Ok(Answer {
            label: mechanism.select(rng, &l)? as u32,
            scores: None,
        });
    }
    if calibration.assumptions.loss == Loss::Logistic {
        binary::perturb_score(&mut l, calibration, rng)?;
    } else {
        mechanism.perturb(rng, &mut l)?;
    }
    Ok(Answer {
        label: argmax(&l) as u32,
        scores: Some(l),
    })
}

impl PrivateMethod for PredictionSensitivity {
    type Shared = ModelFit;
    const METHOD: Method = Method::PredictionSensitivity;

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
        _: &mut R,
    ) -> Result<PrivatePredictor> {
        Ok(PrivatePredictor::regularised(
            fit,
            shared.optimization,
            PredictorKind::NoisyLogits {
                model: (*shared.model).clone(),
            },
        ))
    }

    fn score(&self, shared: &ModelFit, queries: &Dataset) -> Result<Scores> {
        Ok(Scores::Logits(train::logits_all(&shared.model, queries)?))
    }

    fn draw<R: Rng + ?Sized>(
        &self,
        fit: &Fit<'_>,
        shared: &ModelFit,
        scores: &Scores,
        queries: &Dataset,
        rng: &mut R,
    ) -> Result<Draw> {
        let c = shared.model.c;
        Draw::timed(
            || Ok(()),
            |()| match scores {
                Scores::Logits(l) if l.len() == queries.n * c => {
                    prediction_sensitivity_labels(l, c, fit.calibration, rng)
                }
                _ => {
                    let l = train::logits_all(&shared.model, queries)?;
                    prediction_sensitivity_labels(&l, c, fit.calibration, rng)
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::cfg;
    use super::super::train_private;
    use super::*;
    use crate::train::tests::toy;
    use rand::SeedableRng;

    /// Prediction sensitivity (δ > 0, Gaussian): the released scores minus the true logits
    /// have per-coordinate variance σ² (chi-square bound at α ≈ 1e-6, seeded).
    #[test]
    fn prediction_sensitivity_noise_has_calibrated_variance() {
        let ds = toy(300, 5, 4, 2);
        let mut c = cfg(Method::PredictionSensitivity, 1.0, 1e-5, 10);
        c.lambda = 0.1;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(42);
        let p = train_private(&c, &ds, &mut rng).unwrap();
        let sigma = p.calibration.mechanism.gaussian_sigma().unwrap();
        let PredictorKind::NoisyLogits { model } = &p.kind else {
            panic!()
        };
        let x = ds.row(0);
        let truth = model.logits(x);
        let reps = 5000;
        let answers = p.predict(&vec![x; reps], &mut rng);
        let mut ss = 0.0;
        for a in &answers {
            for (s, t) in a.scores.as_ref().unwrap().iter().zip(&truth) {
                ss += ((s - t) / sigma).powi(2);
            }
        }
        // Σ z² ~ χ²(k), k = 20,000: mean k, sd √(2k); |z| < 5 ⇒ α ≈ 6e-7
        let k = (reps * 4) as f64;
        assert!(
            (ss - k).abs() < 5.0 * (2.0 * k).sqrt(),
            "Σz² = {ss}, k = {k}"
        );
    }
}
