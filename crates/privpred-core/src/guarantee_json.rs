//! The guarantee of a calibration as the JSON object that `privpred calibrate --json` prints
//! and the Python package's `guarantee_` returns: one builder, so the two cannot drift apart.

use crate::{Calibration, Noise};
use serde_json::json;

/// The `--json` object of a calibration: method, calibration mode, relation, (ε, δ), budget,
/// noise and mechanism, validity, assumptions, notes, and the DP-SGD fields where present.
pub fn to_json(c: &Calibration) -> serde_json::Value {
    let noise = match c.noise {
        Noise::L2Laplace { beta } => json!({"distribution": "l2-laplace", "beta": beta}),
        Noise::Gaussian { sigma } => json!({"distribution": "gaussian", "sigma": sigma}),
        Noise::Exponential { beta } => json!({"distribution": "exponential", "beta": beta}),
        Noise::PermuteAndFlip { beta } => {
            json!({"distribution": "permute-and-flip", "beta": beta})
        }
    };
    let mut v = json!({
        "method": c.method.name(),
        "calibration": c.calibration.name(),
        "neighbours": c.neighbours.name(),
        "epsilon": c.privacy.epsilon,
        "delta": c.privacy.delta,
        "budget": c.budget.get(),
        "budget_unlimited": c.budget.get().is_none(),
        "noise": noise,
        "mechanism": crate::noise::mechanism_name(c.method, &c.noise),
        "valid_guarantee": c.valid_guarantee,
        "assumptions": {
            "K": c.assumptions.k,
            "L": c.assumptions.l,
            "classes": c.assumptions.classes,
            "n": c.assumptions.n,
            "lambda": c.assumptions.lambda,
        },
        "notes": c.notes,
    });
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    if let Some(r) = c.rho {
        o.insert("rho".into(), json!(r));
    }
    if let Some(s) = c.noise_multiplier {
        o.insert("noise_multiplier".into(), json!(s));
    }
    if let Some(e) = c.epsilon_spent {
        o.insert("epsilon_spent".into(), json!(e));
    }
    if let Some(q) = c.sampling_rate {
        o.insert("sampling_rate".into(), json!(q));
    }
    if let Some(k) = c.steps {
        o.insert("steps".into(), json!(k));
    }
    v
}
