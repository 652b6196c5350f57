//! The guarantee of a calibration as the JSON object that `privpred calibrate --json` prints
//! and the Python package's `guarantee_` returns: one builder, so the two cannot drift apart.

use crate::{Calibration, Noise};
use serde_json::json;

/// The `--json` object of a calibration: method, calibration mode, relation, (ε, δ), budget,
/// noise and mechanism, validity, assumptions, notes, and the DP-SGD fields and the
/// hyper-parameter selection (`selection: {method, epsilon, delta, composition}`) where present.
pub fn to_json(c: &Calibration) -> serde_json::Value {
    let noise = match c.noise() {
        Noise::L2Laplace { beta } => json!({"distribution": "l2-laplace", "beta": beta}),
        Noise::Gaussian { sigma } => json!({"distribution": "gaussian", "sigma": sigma}),
        Noise::DiscreteGaussian { sigma, rounding } => {
            json!({"distribution": "discrete-gaussian", "sigma": sigma, "rounding": rounding})
        }
        Noise::DiscreteL2Laplace { beta, rounding } => {
            json!({"distribution": "discrete-l2-laplace", "beta": beta, "rounding": rounding})
        }
        Noise::Exponential { beta } => json!({"distribution": "exponential", "beta": beta}),
        Noise::PermuteAndFlip { beta } => {
            json!({"distribution": "permute-and-flip", "beta": beta})
        }
    };
    let mut v = json!({
        "method": c.method().name(),
        "calibration": c.mode().name(),
        "neighbours": c.neighbours().name(),
        "epsilon": c.epsilon(),
        "delta": c.delta(),
        "budget": c.budget().get(),
        "budget_unlimited": c.budget().get().is_none(),
        "noise": noise,
        "mechanism": c.mechanism.name(),
        "valid_guarantee": c.is_valid(),
        "assumptions": {
            "K": c.assumptions.k,
            "L": c.assumptions.l,
            "classes": c.assumptions.classes,
            "n": c.assumptions.n,
            "lambda": c.assumptions.lambda,
            "loss": c.assumptions.loss.name(),
        },
        "notes": c.notes,
    });
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    let x = c.mechanism.record_extras();
    if let Some(r) = x.rho {
        o.insert("rho".into(), json!(r));
    }
    if let Some(s) = x.noise_multiplier {
        o.insert("noise_multiplier".into(), json!(s));
    }
    if let Some(e) = x.epsilon_spent {
        o.insert("epsilon_spent".into(), json!(e));
    }
    if let Some(q) = x.sampling_rate {
        o.insert("sampling_rate".into(), json!(q));
    }
    if let Some(k) = x.steps {
        o.insert("steps".into(), json!(k));
    }
    if let Some(s) = c.selection {
        o.insert("selection".into(), json!(s));
    }
    v
}
