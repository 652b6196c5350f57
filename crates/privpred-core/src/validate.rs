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
use crate::types::{Budget, Calibration, Method, Noise, Privacy};

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

/// Checks a stored guarantee: ε finite > 0 and δ ∈ [0, 1) (δ > 0 for DP-SGD); the budget
/// finite (B ≥ 1) for private-prediction methods and unlimited for private-training ones; the
/// noise distribution the method's calibration uses (ℓ2-Laplace or Gaussian for model,
/// loss and prediction sensitivity, Gaussian for DP-SGD, the exponential mechanism for
/// subsample-and-aggregate) with a finite scale > 0; the assumptions' constants finite > 0,
/// 2 ≤ classes ≤ [`MAX_CLASSES`], N ≥ 1 and λ finite ≥ 0 where given; and the optional
/// statistics (ρ, σ multiplier, ε spent, sampling rate q ∈ (0, 1], steps ≥ 1) in range.
pub fn check_calibration(cal: &Calibration) -> Result<()> {
    let m = cal.method;
    let p = cal.privacy;
    Privacy::new(p.epsilon, p.delta)?;
    if !m.supports_pure_dp() && p.delta == 0.0 {
        return Err(CoreError::invalid(
            "delta",
            p.delta,
            format!("{m} needs δ > 0"),
        ));
    }
    match (m.is_private_training(), cal.budget) {
        (true, Budget::Unlimited) => {}
        (false, Budget::Finite(b)) if b >= 1 => {}
        (true, b) => {
            return Err(CoreError::invalid(
                "budget",
                format!("{b:?}"),
                format!("{m} releases a private model: its budget is unlimited"),
            ));
        }
        (false, b) => {
            return Err(CoreError::invalid(
                "budget",
                format!("{b:?}"),
                format!("{m} needs a finite inference budget B >= 1"),
            ));
        }
    }
    match (m, cal.noise) {
        (
            Method::ModelSensitivity | Method::LossPerturbation | Method::PredictionSensitivity,
            Noise::L2Laplace { beta },
        ) => positive("noise beta", beta)?,
        (
            Method::ModelSensitivity
            | Method::LossPerturbation
            | Method::PredictionSensitivity
            | Method::DpSgd,
            Noise::Gaussian { sigma },
        ) => positive("noise sigma", sigma)?,
        (
            Method::SubsampleAggregate,
            Noise::Exponential { beta } | Noise::PermuteAndFlip { beta },
        ) => positive("noise beta", beta)?,
        // label-only selection over the logits: `tight` with δ = 0 only
        (
            Method::PredictionSensitivity,
            Noise::Exponential { beta } | Noise::PermuteAndFlip { beta },
        ) if cal.calibration == crate::CalibrationMode::Tight && cal.privacy.delta == 0.0 => {
            positive("noise beta", beta)?
        }
        (m, n) => {
            return Err(CoreError::invalid(
                "noise",
                format!("{n:?}"),
                format!("not the noise {m}'s calibration uses"),
            ));
        }
    }
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
    if let Some(r) = cal.rho {
        positive("rho", r)?;
    }
    if let Some(s) = cal.noise_multiplier {
        positive("noise multiplier", s)?;
    }
    if let Some(e) = cal.epsilon_spent {
        non_negative("epsilon spent", e)?;
    }
    if let Some(q) = cal.sampling_rate
        && !(q.is_finite() && q > 0.0 && q <= 1.0)
    {
        return Err(CoreError::invalid("sampling rate", q, "must be in (0, 1]"));
    }
    if cal.steps == Some(0) {
        return Err(CoreError::invalid("steps", 0, "must be an integer >= 1"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CalibrationMode, CalibrationRequest, calibrate};

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
            (Method::PredictionSensitivity, 0.0, Budget::Finite(10)),
            (Method::PredictionSensitivity, 1e-5, Budget::Finite(10)),
            (Method::SubsampleAggregate, 0.0, Budget::Finite(10)),
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
                assert!(bad(&|x| x.privacy.epsilon = -1.0), "{m}");
                assert!(bad(&|x| x.privacy.epsilon = 0.0), "{m}");
                assert!(bad(&|x| x.privacy.epsilon = f64::INFINITY), "{m}");
                assert!(bad(&|x| x.privacy.delta = 2.0), "{m}");
                assert!(bad(&|x| x.assumptions.classes = 0), "{m}");
                assert!(bad(&|x| x.assumptions.n = Some(0)), "{m}");
                assert!(
                    bad(&|x| x.noise = match x.noise {
                        Noise::L2Laplace { .. } => Noise::L2Laplace { beta: -1.0 },
                        Noise::Gaussian { .. } => Noise::Gaussian { sigma: 0.0 },
                        Noise::Exponential { .. } => Noise::Exponential { beta: f64::NAN },
                        Noise::PermuteAndFlip { .. } => Noise::PermuteAndFlip { beta: -1.0 },
                    }),
                    "{m}"
                );
                // another method's name over this method's noise and budget
                assert!(
                    bad(&|x| x.method = if m.is_private_training() {
                        Method::SubsampleAggregate
                    } else {
                        Method::DpSgd
                    }),
                    "{m}"
                );
                assert!(
                    bad(&|x| x.budget = match x.budget {
                        Budget::Finite(_) => Budget::Finite(0),
                        Budget::Unlimited => Budget::Finite(5),
                    }),
                    "{m}"
                );
                if c.noise.is_selection() && m == Method::PredictionSensitivity {
                    // a selection over the logits is a tight, δ = 0 calibration only
                    assert!(bad(&|x| x.calibration = CalibrationMode::Corrected), "{m}");
                }
            }
        }
    }
}
