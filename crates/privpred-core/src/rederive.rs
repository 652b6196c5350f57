//! Comparing a stored guarantee with the one its public parameters give. An artifact's
//! checksum is public, so a stored calibration is believable only when the calibration code
//! that trained the model, run again on the record's public parameters, gives exactly the
//! stored noise, mechanism, selection cost and validity. The families' loaders build the
//! expected calibration with their own training rule (linear models through
//! `privpred_core::certify::calibrate_certified`, ResNets through `privpred-nn`'s `calib`)
//! and compare it here, field by field ([`refuse_difference`]).

use crate::calibrate::CalibrationRequest;
use crate::dpsgd::DpSgdSchedule;
use crate::guarantee::Calibration;
use crate::types::Method;
use serde_json::Value;

/// Relative tolerance of a numeric comparison: the stored numbers went through JSON, whose
/// parser may round the last bit; any edit that matters is many orders larger.
pub const REL_TOL: f64 = 1e-12;

/// Keys of a calibration record that are not recomputed: human-readable notes.
const NOT_DERIVED: &[&str] = &["notes"];

/// Whether two recorded numbers are equal up to [`REL_TOL`].
pub fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= REL_TOL * a.abs().max(b.abs())
}

/// The calibration request of a stored guarantee: the public parameters it states. DP-SGD's
/// schedule is read back from the stored sampling rate q = b/N and steps (b = q·N, epochs =
/// (steps − ½)·b/N, so that ⌈epochs·N/b⌉ = steps exactly).
pub fn request_of(cal: &Calibration) -> Result<CalibrationRequest, String> {
    let a = &cal.assumptions;
    let method = cal.method();
    let dp_sgd = if method == Method::DpSgd {
        let x = cal.mechanism.record_extras();
        let (q, steps, n) = match (x.sampling_rate, x.steps, a.n) {
            (Some(q), Some(s), Some(n)) => (q, s, n),
            _ => {
                return Err(
                    "guarantee: `sampling_rate`, `steps` and `n` are needed to re-derive DP-SGD's noise".into(),
                );
            }
        };
        let b = (q * n as f64).round();
        if !(b >= 1.0 && b <= n as f64) || ((b / n as f64) - q).abs() > REL_TOL * q {
            return Err(format!(
                "guarantee: `sampling_rate` {q} is not b/N for a batch size b and N = {n}"
            ));
        }
        Some(DpSgdSchedule {
            batch_size: b as usize,
            // half a step below `steps`: ⌈epochs·N/b⌉ is then exactly `steps` whatever the
            // rounding of steps·b/N·N/b (which can land just above an integer, e.g. b = 21,
            // N = 480, and add a step)
            epochs: (steps as f64 - 0.5) * b / n as f64,
        })
    } else {
        None
    };
    Ok(CalibrationRequest {
        method,
        mode: cal.mode(),
        privacy: cal.privacy(),
        budget: cal.budget(),
        n: a.n,
        lambda: a.lambda,
        classes: a.classes,
        dp_sgd,
        neighbours: cal.neighbours(),
        loss: a.loss,
    })
}

/// The first path at which `stored` and `expected` differ (numbers up to [`REL_TOL`]).
pub fn first_difference(stored: &Value, expected: &Value, path: &str) -> Option<String> {
    match (stored, expected) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64()?, b.as_f64()?);
            (!close(a, b)).then(|| path.to_string())
        }
        (Value::Object(a), Value::Object(b)) => {
            // the noise and the validity first: the fields an edit is meant to change
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            let first = ["noise", "valid_guarantee", "distribution"];
            keys.sort_by_key(|k| (!first.contains(&k.as_str()), *k));
            keys.dedup();
            keys.into_iter()
                .filter(|k| !(path.is_empty() && NOT_DERIVED.contains(&k.as_str())))
                .find_map(|k| {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    let (x, y) = (
                        a.get(k).unwrap_or(&Value::Null),
                        b.get(k).unwrap_or(&Value::Null),
                    );
                    first_difference(x, y, &p)
                })
        }
        (a, b) => (a != b).then(|| path.to_string()),
    }
}

/// The value at the dotted `path` of `v`, as JSON text (`null` when absent).
pub fn value_at(v: &Value, path: &str) -> String {
    let mut cur = v;
    for k in path.split('.') {
        cur = cur.get(k).unwrap_or(&Value::Null);
    }
    cur.to_string()
}

/// The serialised record of a calibration.
pub fn record(c: &Calibration) -> Result<Value, String> {
    serde_json::to_value(c).map_err(|e| e.to_string())
}

/// Refuses `stored` unless it equals `expected` (every field but the notes; numbers up to
/// [`REL_TOL`]): the error names the first field that differs, its stored and its
/// re-derived value, and `params` (the public parameters the expected calibration was
/// computed from, as the caller words them).
pub fn refuse_difference(
    stored: &Calibration,
    expected: &Calibration,
    params: &str,
) -> Result<(), String> {
    let (s, e) = (record(stored)?, record(expected)?);
    match first_difference(&s, &e, "") {
        None => Ok(()),
        Some(field) => Err(format!(
            "guarantee: `{field}` is {} but calibrating the artifact's public parameters ({params}) gives {}: the artifact was edited (or written by a build whose calibration differs); refusing it",
            value_at(&s, &field),
            value_at(&e, &field),
        )),
    }
}

/// The public parameters of `c` as a refusal names them: method, mode, ε, δ, B, N, λ and
/// the neighbouring relation.
pub fn describe_params(c: &Calibration) -> String {
    format!(
        "{} {}, ε = {}, δ = {}, B = {}, N = {}, λ = {}, {} neighbours",
        c.method(),
        c.mode(),
        c.epsilon(),
        c.delta(),
        c.budget().get().map_or("∞".into(), |b| b.to_string()),
        c.assumptions.n.map_or("-".into(), |n| n.to_string()),
        c.assumptions.lambda.map_or("-".into(), |l| l.to_string()),
        c.neighbours(),
    )
}
