//! Validation of a stored guarantee: every field of a [`Calibration`] range-checked against
//! what its method allows. Model artifacts run this on load so that a file whose metadata was
//! edited or corrupted into a guarantee no calibration produces (ε ≤ 0, δ ≥ 1, a zero or
//! negative noise scale, a budget of 0, the wrong noise for the method, …) is refused instead
//! of being served with a guarantee it does not have.
//!
//! This checks ranges and consistency, not the calibration arithmetic: an edit that stays in
//! range (ε = 1 → 2) is caught by the artifact's checksum, not here. New fields of
//! [`Calibration`] (or of the artifacts' headers) get their check added to [`check_calibration`]
//! next to the others.

use crate::error::{CoreError, Result};
use crate::guarantee::Calibration;
use crate::mechanism::{Mechanism, Scores};
use crate::privacy::Budget;
use crate::types::{CalibrationMode, Noise};

/// The largest number of classes a stored guarantee may name (the data layer's limit is the
/// same, `privpred_data::limits::MAX_CLASSES`).
pub const MAX_CLASSES: usize = 1_000;

fn positive(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(CoreError::invalid(name, v, "must be a finite number > 0"))
    }
}

fn non_negative(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(CoreError::invalid(name, v, "must be a finite number >= 0"))
    }
}

/// Checks a stored guarantee: δ > 0 for DP-SGD ((ε, δ) themselves are valid by construction,
/// [`crate::Privacy`]); the budget finite for private-prediction methods (B ≥ 1 by
/// construction, [`Budget`]) and unlimited for private-training ones; the mechanism one the
/// method releases (output or objective perturbation, noisy logits with ℓ2-Laplace or
/// Gaussian noise, DP-SGD's Gaussian, a selection over the votes for subsample-and-aggregate,
/// and over the logits for prediction sensitivity in `tight` with δ = 0 only) with a finite
/// scale > 0; the assumptions' constants finite > 0, 2 ≤ classes ≤ [`MAX_CLASSES`], N ≥ 1 and
/// λ finite ≥ 0 where given; and the mechanism's statistics (ρ, σ multiplier, ε spent,
/// sampling rate q ∈ (0, 1], steps ≥ 1) in range.
pub fn check_calibration(cal: &Calibration) -> Result<()> {
    let m = cal.method();
    if !m.supports_pure_dp() && cal.guarantee.privacy.is_pure() {
        return Err(CoreError::invalid("delta", 0.0, format!("{m} needs δ > 0")));
    }
    match (m.is_private_training(), cal.guarantee.budget) {
        (true, Budget::Unlimited) | (false, Budget::Finite(_)) => {}
        (true, b) => {
            return Err(CoreError::invalid(
                "budget",
                b.to_string(),
                format!("{m} releases a private model: its budget is unlimited"),
            ));
        }
        (false, b) => {
            return Err(CoreError::invalid(
                "budget",
                b.to_string(),
                format!("{m} needs a finite inference budget B >= 1"),
            ));
        }
    }
    check_mechanism(cal)?;
    let a = &cal.assumptions;
    positive("assumption k", a.k)?;
    positive("assumption l", a.l)?;
    if !(2..=MAX_CLASSES).contains(&a.classes) {
        return Err(CoreError::invalid(
            "classes",
            a.classes,
            format!("must be in 2..={MAX_CLASSES}"),
        ));
    }
    if a.n == Some(0) {
        return Err(CoreError::invalid("n", 0, "must be an integer >= 1"));
    }
    if let Some(l) = a.lambda {
        non_negative("lambda", l)?;
    }
    let x = cal.mechanism.record_extras();
    if let Some(r) = x.rho {
        positive("rho", r)?;
    }
    if let Some(s) = x.noise_multiplier {
        positive("noise multiplier", s)?;
    }
    if let Some(e) = x.epsilon_spent {
        non_negative("epsilon spent", e)?;
    }
    if let Some(q) = x.sampling_rate
        && !(q.is_finite() && q > 0.0 && q <= 1.0)
    {
        return Err(CoreError::invalid("sampling rate", q, "must be in (0, 1]"));
    }
    if x.steps == Some(0) {
        return Err(CoreError::invalid("steps", 0, "must be an integer >= 1"));
    }
    Ok(())
}

/// The mechanism is a selection over the logits only in `tight` with δ = 0, and its noise
/// parameter is finite > 0. (It is always `cal.method()`'s: the method is derived from it.)
fn check_mechanism(cal: &Calibration) -> Result<()> {
    let m = cal.method();
    let mech = &cal.mechanism;
    let label_only_logits = matches!(
        mech,
        Mechanism::Exponential {
            over: Scores::Logits,
            ..
        } | Mechanism::PermuteAndFlip {
            over: Scores::Logits,
            ..
        }
    );
    let tight_pure =
        cal.guarantee.mode == CalibrationMode::Tight && cal.guarantee.privacy.is_pure();
    if label_only_logits && !tight_pure {
        return Err(CoreError::invalid(
            "noise",
            mech.noise().to_string(),
            format!("not the noise {m}'s calibration uses"),
        ));
    }
    match mech.noise() {
        Noise::Gaussian { sigma } => positive("noise sigma", sigma),
        Noise::DiscreteGaussian { sigma, rounding } => {
            positive("noise sigma", sigma)?;
            positive("noise rounding", rounding)
        }
        Noise::DiscreteL2Laplace { beta, rounding } => {
            positive("noise beta", beta)?;
            positive("noise rounding", rounding)
        }
        Noise::L2Laplace { beta }
        | Noise::Exponential { beta }
        | Noise::PermuteAndFlip { beta } => positive("noise beta", beta),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CalibrationRequest, Method, Privacy, VectorNoise, calibrate};

    fn req(method: Method, delta: f64, budget: Budget) -> CalibrationRequest {
        let mut r = CalibrationRequest::new(
            method,
            CalibrationMode::Corrected,
            Privacy::new(1.0, delta).unwrap(),
        );
        r.budget = budget;
        r.n = Some(1000);
        r.lambda = Some(1e-2);
        r
    }

    #[test]
    fn calibrations_pass_and_edited_fields_are_refused() {
        for (m, delta, b) in [
            (Method::ModelSensitivity, 0.0, Budget::Unlimited),
            (Method::ModelSensitivity, 1e-5, Budget::Unlimited),
            (Method::LossPerturbation, 0.0, Budget::Unlimited),
            (
                Method::PredictionSensitivity,
                0.0,
                Budget::finite(10).unwrap(),
            ),
            (
                Method::PredictionSensitivity,
                1e-5,
                Budget::finite(10).unwrap(),
            ),
            (Method::SubsampleAggregate, 0.0, Budget::finite(10).unwrap()),
        ] {
            for mode in [CalibrationMode::Corrected, CalibrationMode::Tight] {
                let mut r = req(m, delta, b);
                r.mode = mode;
                let c = calibrate(&r).unwrap();
                check_calibration(&c).unwrap_or_else(|e| panic!("{m}: {e}"));
                let bad = |f: &dyn Fn(&mut Calibration)| {
                    let mut x = c.clone();
                    f(&mut x);
                    check_calibration(&x).is_err()
                };
                // (ε, δ) out of range cannot be built, nor read from a record
                let mut v = serde_json::to_value(&c).unwrap();
                for (key, bad) in [("epsilon", -1.0), ("epsilon", 0.0), ("delta", 2.0)] {
                    v["privacy"][key] = serde_json::json!(bad);
                    assert!(
                        serde_json::from_value::<Calibration>(v.clone()).is_err(),
                        "{m}"
                    );
                    v["privacy"] = serde_json::to_value(c.privacy()).unwrap();
                }
                assert!(bad(&|x| x.assumptions.classes = 0), "{m}");
                assert!(bad(&|x| x.assumptions.n = Some(0)), "{m}");
                assert!(
                    bad(&|x| x.mechanism = match x.mechanism {
                        Mechanism::OutputPerturbation { .. } => Mechanism::OutputPerturbation {
                            noise: VectorNoise::L2Laplace { beta: -1.0 },
                        },
                        Mechanism::ObjectivePerturbation { rho, .. } => {
                            Mechanism::ObjectivePerturbation {
                                noise: VectorNoise::Gaussian { sigma: 0.0 },
                                rho,
                            }
                        }
                        Mechanism::NoisyLogits { .. } => Mechanism::NoisyLogits {
                            noise: VectorNoise::Gaussian { sigma: 0.0 },
                        },
                        Mechanism::Exponential { over, .. } => Mechanism::Exponential {
                            beta: f64::NAN,
                            over,
                        },
                        Mechanism::PermuteAndFlip { over, .. } =>
                            Mechanism::PermuteAndFlip { beta: -1.0, over },
                        d @ Mechanism::DpSgd { .. } => d.scaled(f64::NAN),
                    }),
                    "{m}"
                );
                // another method's mechanism over this method's budget (the method follows the
                // mechanism: the two cannot disagree)
                let other = if m.is_private_training() {
                    Mechanism::Exponential {
                        beta: 1.0,
                        over: Scores::Votes,
                    }
                } else {
                    Mechanism::DpSgd {
                        noise_multiplier: 1.0,
                        sampling_rate: None,
                        steps: None,
                        epsilon_spent: None,
                    }
                };
                let mut x = c.clone();
                x.mechanism = other;
                assert_eq!(x.method(), other.method(), "{m}");
                assert!(check_calibration(&x).is_err(), "{m}");
                // another method's name in a record: refused on read, or by the check
                let mut v = serde_json::to_value(&c).unwrap();
                v["method"] = serde_json::to_value(other.method()).unwrap();
                assert!(
                    serde_json::from_value::<Calibration>(v)
                        .map_or(true, |x| check_calibration(&x).is_err()),
                    "{m}"
                );
                assert!(
                    bad(&|x| x.guarantee.budget = match x.guarantee.budget {
                        Budget::Finite(_) => Budget::Unlimited,
                        Budget::Unlimited => Budget::finite(5).unwrap(),
                    }),
                    "{m}"
                );
                // a zero budget cannot be built, nor read from a record
                if let Budget::Finite(_) = c.budget() {
                    let mut v = serde_json::to_value(&c).unwrap();
                    v["budget"] = serde_json::json!({"finite": 0});
                    assert!(serde_json::from_value::<Calibration>(v).is_err(), "{m}");
                }
                if c.mechanism.is_selection() && m == Method::PredictionSensitivity {
                    // a selection over the logits is a tight, δ = 0 calibration only
                    assert!(
                        bad(&|x| x.guarantee.mode = CalibrationMode::Corrected),
                        "{m}"
                    );
                }
            }
        }
    }
}
