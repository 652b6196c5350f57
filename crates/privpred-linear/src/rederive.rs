//! The guarantee of a loaded predictor is re-derived, not trusted. An artifact's checksum is
//! public, so anyone can edit a field and recompute it; what makes a stored guarantee
//! believable is that the calibration code that trained the model, run again on the
//! artifact's public parameters (method, mode, neighbouring relation, ε, δ, B, N, λ, C,
//! DP-SGD's sampling rate and steps, how λ or the clip was selected), gives exactly the
//! stored noise, mechanism, certificate bound, selection cost and validity. [`check_rederived`]
//! does that through `shim::calibrate`, the
//! function every fit of this crate calibrates with (the core's
//! `privpred_core::certify::calibrate_certified`: each method's theorem is cited on its
//! calibration function in `privpred_core::calibrate`), and refuses any difference, naming
//! the field.

use crate::methods::{MethodParams, PrivatePredictor};
use crate::shim;
use privpred_core::rederive::{close, describe_params, refuse_difference};

pub use privpred_core::rederive::request_of;

/// Recomputes the calibration of `p`'s stored public parameters and refuses any difference
/// in noise, mechanism, certificate, selection or validity (the error names the field, with
/// the stored and the re-derived value), and any disagreement between the predictor's own
/// parameters (λ, the certificate's bound γ, DP-SGD's steps) and its guarantee.
pub fn check_rederived(p: &PrivatePredictor) -> Result<(), String> {
    let cal = &p.calibration;
    let req = request_of(cal)?;
    let mut expected = shim::calibrate(&req)
        .map_err(|e| format!("guarantee: its public parameters have no calibration ({e})"))?;
    // the selection's cost and its effect on validity are re-derived from its method
    if let Some(s) = cal.selection {
        expected = expected.with_selection(s.method).map_err(|e| {
            format!(
                "guarantee: `selection` {} has no analysis here ({e})",
                s.method
            )
        })?;
    }
    refuse_difference(cal, &expected, &describe_params(cal))?;
    check_params(p)
}

/// The predictor's parameters agree with its guarantee: λ, the certificate's γ, DP-SGD's
/// steps, and a binary (logistic) guarantee's model has the binary layout (two columns,
/// column 0 zero: [`crate::binary`]), whose noise is calibrated for one output column.
fn check_params(p: &PrivatePredictor) -> Result<(), String> {
    let cal = &p.calibration;
    if cal.assumptions.loss == privpred_core::Loss::Logistic {
        let ok = match &p.kind {
            crate::methods::PredictorKind::Released { model }
            | crate::methods::PredictorKind::NoisyLogits { model } => {
                crate::binary::is_binary_layout(model)
            }
            crate::methods::PredictorKind::Teachers { .. } => false,
        };
        if !ok {
            return Err(
                "assumptions.loss: the guarantee is for the binary (logistic) model, whose noise covers one output column, but the model is not a two-class model with column 0 zero; refusing it".into(),
            );
        }
    }
    match p.params {
        MethodParams::Regularised {
            lambda,
            certificate,
        } => {
            if cal.assumptions.lambda.is_none_or(|l| !close(l, lambda)) {
                return Err(format!(
                    "lambda: the model was trained with λ = {lambda} but its guarantee assumes {}",
                    shown(cal.assumptions.lambda)
                ));
            }
            let stated = cal.certified.map(|c| c.gradient_norm_bound);
            let met = certificate.map(|c| c.gradient_norm_bound);
            let same = match (stated, met) {
                (Some(a), Some(b)) => close(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same {
                return Err(format!(
                    "optimization.gradient_norm_bound: the certificate states {}, the guarantee assumes {}",
                    shown(met),
                    shown(stated)
                ));
            }
        }
        MethodParams::DpSgd { steps, .. } => {
            let stated = cal.mechanism.record_extras().steps;
            if stated != Some(steps) {
                return Err(format!(
                    "dp_sgd.steps: the model took {steps} steps, its guarantee accounts for {}",
                    shown(stated)
                ));
            }
        }
        MethodParams::Teachers { .. } => {}
    }
    Ok(())
}

/// An optional recorded value as printed in a refusal: the value, or `none`.
pub(crate) fn shown<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::{MethodConfig, SeedPolicy, train_private};
    use crate::train::tests::toy;
    use privpred_core::{Budget, CalibrationMode, Privacy};
    use privpred_core::{Calibration, Method};
    use rand::SeedableRng;
    use serde_json::Value;

    fn trained(method: Method, mode: CalibrationMode, delta: f64) -> PrivatePredictor {
        let ds = toy(200, 4, 3, 7);
        let mut cfg = MethodConfig::new(
            method,
            mode,
            Privacy::new(1.0, delta).unwrap(),
            Budget::finite(10).unwrap(),
        );
        cfg.lambda = 1e-2;
        cfg.teachers = 4;
        cfg.dp_sgd.epochs = 1.0;
        cfg.dp_sgd.batch_size = 20;
        cfg.seed_policy = SeedPolicy::OsRandom;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        train_private(&cfg, &ds, &mut rng).unwrap()
    }

    /// Edits the stored calibration record of `p` and reads it back.
    fn edited(p: &PrivatePredictor, f: impl Fn(&mut Value)) -> PrivatePredictor {
        let mut v = serde_json::to_value(&p.calibration).unwrap();
        f(&mut v);
        let mut q = p.clone();
        q.calibration = serde_json::from_value(v).unwrap();
        q
    }

    fn refused(p: &PrivatePredictor, needle: &str) {
        let what = format!(
            "{} {}: {needle}",
            p.calibration.method(),
            p.calibration.mode()
        );
        let e = check_rederived(p).expect_err(&what);
        assert!(e.contains(needle), "{needle}: {e}");
    }

    #[test]
    fn trained_guarantees_rederive_and_every_tampering_is_refused() {
        use CalibrationMode::{Corrected, Paper, Tight};
        for (m, delta) in [
            (Method::ModelSensitivity, 0.0),
            (Method::ModelSensitivity, 1e-5),
            (Method::LossPerturbation, 0.0),
            (Method::DpSgd, 1e-5),
            (Method::PredictionSensitivity, 0.0),
            (Method::PredictionSensitivity, 1e-5),
            (Method::SubsampleAggregate, 0.0),
        ] {
            for mode in [Corrected, Tight, Paper] {
                let p = trained(m, mode, delta);
                check_rederived(&p).unwrap_or_else(|e| panic!("{m} {mode}: {e}"));
                let scale = match p.calibration.noise() {
                    privpred_core::Noise::Gaussian { .. }
                    | privpred_core::Noise::DiscreteGaussian { .. } => "sigma",
                    _ => "beta",
                };
                // the grid's rounding allowance is part of the sensitivity: a larger one
                // (a coarser grid) with the same σ is refused
                if let privpred_core::Noise::DiscreteGaussian { rounding, .. }
                | privpred_core::Noise::DiscreteL2Laplace { rounding, .. } =
                    p.calibration.noise()
                {
                    refused(
                        &edited(&p, |v| v["noise"]["rounding"] = (rounding * 64.0).into()),
                        "`noise",
                    );
                }
                // β (or σ) = 1e300: no noise under the stated ε
                // (DP-SGD's record reads σ from `noise_multiplier`)
                refused(
                    &edited(&p, |v| {
                        v["noise"][scale] = 1e300.into();
                        if m == Method::DpSgd {
                            v["noise_multiplier"] = 1e300.into();
                        }
                    }),
                    "`noise",
                );
                // ε changed with the old noise
                refused(
                    &edited(&p, |v| v["privacy"]["epsilon"] = 0.001.into()),
                    "guarantee",
                );
                // B × 100 (private prediction), N = 1e9
                if !m.is_private_training() {
                    refused(
                        &edited(&p, |v| v["budget"]["finite"] = 1000.into()),
                        "guarantee",
                    );
                }
                // (N enters neither the votes' nor paper loss perturbation's noise, and
                // DP-SGD's accounting depends on N only through the stored q and steps)
                let n_free = matches!(m, Method::SubsampleAggregate | Method::DpSgd)
                    || (m == Method::LossPerturbation && mode == Paper);
                if !n_free {
                    refused(
                        &edited(&p, |v| v["assumptions"]["n"] = 1_000_000_000u64.into()),
                        "guarantee",
                    );
                }
                // validity flipped either way
                let flipped = edited(&p, |v| {
                    let b = v["valid_guarantee"].as_bool().unwrap();
                    v["valid_guarantee"] = (!b).into();
                });
                if mode == Paper && m != Method::SubsampleAggregate {
                    assert!(!p.calibration.is_valid(), "{m}");
                    assert!(
                        flipped.calibration.is_valid(),
                        "{m}: a paper guarantee marked valid"
                    );
                }
                if flipped.calibration.is_valid() != p.calibration.is_valid() {
                    refused(&flipped, "`valid_guarantee`");
                }
            }
        }
    }

    #[test]
    fn the_selection_record_is_rederived_and_an_edit_is_refused() {
        use privpred_core::SelectionMethod;
        for sel in [
            SelectionMethod::Public,
            SelectionMethod::PublicRule,
            SelectionMethod::PrivateSplit,
            SelectionMethod::NonPrivateHoldout,
        ] {
            let mut p = trained(Method::ModelSensitivity, CalibrationMode::Corrected, 0.0);
            p.calibration = p.calibration.clone().with_selection(sel).unwrap();
            check_rederived(&p).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(
                p.calibration.is_valid(),
                sel != SelectionMethod::NonPrivateHoldout
            );
            // a selection's cost edited
            refused(
                &edited(&p, |v| v["selection"]["epsilon"] = 0.5.into()),
                "selection",
            );
            // a non-private selection relabelled as free, the validity left as it was
            if sel == SelectionMethod::NonPrivateHoldout {
                let q = edited(&p, |v| {
                    v["selection"]["method"] = "public".into();
                    v["selection"]["epsilon"] = 0.0.into();
                    v["selection"]["delta"] = 0.0.into();
                    v["selection"]["composition"] = "none".into();
                });
                refused(&q, "`valid_guarantee`");
                // and marked valid with its record kept
                refused(
                    &edited(&p, |v| v["valid_guarantee"] = true.into()),
                    "`valid_guarantee`",
                );
            }
        }
    }

    #[test]
    fn a_mechanism_the_calibration_does_not_use_is_refused() {
        // Gaussian noise on a pure-ε prediction-sensitivity model
        let p = trained(
            Method::PredictionSensitivity,
            CalibrationMode::Corrected,
            0.0,
        );
        let g = edited(&p, |v| {
            v["noise"] = serde_json::json!({"distribution": "gaussian", "sigma": 1.0})
        });
        refused(&g, "`noise");
        // permute-and-flip over the votes in corrected mode
        let p = trained(Method::SubsampleAggregate, CalibrationMode::Corrected, 0.0);
        let mut v = serde_json::to_value(&p.calibration).unwrap();
        v["noise"]["distribution"] = "permute-and-flip".into();
        if let Ok(c) = serde_json::from_value::<Calibration>(v) {
            let mut q = p.clone();
            q.calibration = c;
            refused(&q, "`noise");
        }
        // the model's λ differs from the one its guarantee assumes
        let p = trained(Method::ModelSensitivity, CalibrationMode::Corrected, 0.0);
        let mut q = p.clone();
        if let MethodParams::Regularised { lambda, .. } = &mut q.params {
            *lambda = 10.0;
        }
        refused(&q, "lambda");
    }
}
