//! What the server serves: the [`ServedModel`] trait, and a test-fixture implementation.
//!
//! The server never sees weights: it hands raw query rows to the model's
//! [`ServedModel::preprocess`] (the training-time preprocessing recorded with the model) and
//! the preprocessed rows to [`ServedModel::answer`], which adds the method's per-answer noise.

use crate::error::{Result, ServeError};
use privpred_core::{Assumptions, Budget, Calibration, CalibrationMode, Method, Noise, Privacy};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One released answer (defined once, in `privpred-core`).
pub use privpred_core::Answer;

/// Public description of a served model (no weights).
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    /// Identity of the model, the key of its budget in the ledger: the ledger id written into
    /// a trained artifact (the CLI refuses a budgeted artifact without one); for the test
    /// fixture, the hex SHA-256 of its file.
    pub model_id: String,
    /// The privacy method.
    pub method: Method,
    /// The guarantee: method, calibration mode, (ε, δ), budget B, noise, assumptions.
    pub guarantee: Calibration,
    /// The inference budget: `Finite(B)` answers for private-prediction methods,
    /// `Unlimited` for private-training methods (the released model is itself private).
    pub budget: Budget,
    /// Dimension of one raw query row (before preprocessing; for a model with a schema, the
    /// table's columns without the label).
    pub input_dim: usize,
    /// Number of classes C.
    pub classes: usize,
    /// Whether answers include noisy scores.
    pub releases_scores: bool,
    /// The preprocessing steps applied to each query (as at training time).
    pub preprocessing: Vec<String>,
    /// True for the built-in test fixture (not a trained model).
    pub test_fixture: bool,
    /// Why the model file is not covered by a trusted signature (opened with
    /// `--allow-unsigned`): every answer then says so. `None` when it is covered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_covered: Option<String>,
}

/// The warning a model whose guarantee is not valid carries on every answer and in the
/// start-up notes (`None` when the guarantee holds). Validity is the loaded calibration's,
/// which the artifact loaders re-derive from the artifact's public parameters.
pub fn invalid_guarantee_warning(guarantee: &Calibration) -> Option<String> {
    if guarantee.is_valid() {
        return None;
    }
    Some(format!(
        "the guarantee is NOT valid: this {} model does not deliver ε = {}, δ = {} ({})",
        guarantee.mode(),
        guarantee.epsilon(),
        guarantee.delta(),
        guarantee.guarantee.validity.reasons().join("; ")
    ))
}

impl ModelInfo {
    /// [`invalid_guarantee_warning`] of a trained model; `None` for the test fixture, which
    /// is announced as such at start-up and in `GET /v1/model` instead.
    pub fn invalid_guarantee_warning(&self) -> Option<String> {
        if self.test_fixture {
            None
        } else {
            invalid_guarantee_warning(&self.guarantee)
        }
    }
}

/// A model the server can answer with.
///
/// Implementations must be deterministic in [`preprocess`](ServedModel::preprocess) (the
/// answer store is keyed by a hash of its output) and draw all answer noise from the RNG
/// passed to [`answer`](ServedModel::answer) (the server passes an OS-seeded ChaCha20).
pub trait ServedModel: Send + Sync + 'static {
    /// The public description.
    fn info(&self) -> &ModelInfo;
    /// Maps one raw query row to the model's input space exactly as at training time.
    /// The row has already been checked to have `info().input_dim` finite entries.
    /// An `Err` is a message for the client (HTTP 422), nothing is spent.
    fn preprocess(&self, raw: &[f32]) -> std::result::Result<Vec<f32>, String>;
    /// Whether query rows are a table's cells (numbers and category names, mapped by the
    /// schema recorded with the model) instead of numbers. Default: numbers.
    fn takes_cells(&self) -> bool {
        false
    }
    /// Maps one raw row of a table's cells (for a model that [`takes_cells`](Self::takes_cells)):
    /// the schema checks its width, numbers and categories. An `Err` is a message for the
    /// client (HTTP 422), nothing is spent.
    fn preprocess_cells(&self, raw: &[String]) -> std::result::Result<Vec<f32>, String> {
        let _ = raw;
        Err("this model takes rows of numbers".into())
    }
    /// The columns of a query row, in order, for a model that
    /// [`takes_cells`](Self::takes_cells): each column's name and type as its schema declares
    /// them (public declarations, never a statistic of the data; the label is not part of a
    /// query row). `None` (the default) for a model of numbers.
    fn columns(&self) -> Option<Vec<QueryColumn>> {
        None
    }
    /// The bytes one raw query row may take in a JSON request body, for the default body limit
    /// (`max_batch` rows of this size, plus 64 KiB). Default: 32 per number of
    /// `info().input_dim`; a table's model allows for its longest declared category.
    fn row_bytes(&self) -> usize {
        self.info().input_dim.saturating_mul(32)
    }
    /// Answers preprocessed rows, one [`Answer`] per row, with fresh noise per answer.
    fn answer(&self, rows: &[Vec<f32>], rng: &mut ChaCha20Rng) -> Result<Vec<Answer>>;
}

/// One column of a table model's query row (`GET /v1/model`'s `columns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueryColumn {
    /// The column's name, as the schema declares it.
    pub name: String,
    /// `numeric`, `categorical` or `ignore` (read and dropped).
    #[serde(rename = "type")]
    pub kind: String,
}

/// The marker key that identifies a test-fixture model file.
pub const FIXTURE_MARKER: &str = "privpred_test_fixture";

/// TEST FIXTURE — not a trained model. A linear model with synthetic weights, used by the
/// service's tests and load benchmark so that they do not depend on training. It behaves like
/// the real methods at serving time: per-example scaling into the unit ball, θᵀx, and per
/// answer Gaussian noise of std `sigma` on the logits (prediction sensitivity) or an argmax
/// over noisy votes without scores (subsample-and-aggregate); private-training methods add no
/// answer-time noise. Its file is JSON with `"privpred_test_fixture": true`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FixtureSpec {
    /// Must be true.
    pub privpred_test_fixture: bool,
    /// The method the fixture pretends to be.
    pub method: Method,
    /// Inference budget B (ignored for private-training methods, which are unlimited).
    pub budget: u64,
    /// ε of the stated guarantee.
    pub epsilon: f64,
    /// δ of the stated guarantee.
    pub delta: f64,
    /// Raw input dimension D.
    pub input_dim: usize,
    /// Classes C.
    pub classes: usize,
    /// Answer noise std on the logits.
    pub sigma: f64,
    /// Seed of the synthetic weights.
    pub seed: u64,
    /// Free text to make fixtures with equal parameters distinct (distinct ledger budgets).
    #[serde(default)]
    pub tag: String,
}

impl FixtureSpec {
    /// A fixture spec with the given method, budget and shape (ε = 1, δ = 1e-5, σ = 0.5).
    pub fn new(method: Method, budget: u64, input_dim: usize, classes: usize) -> Self {
        FixtureSpec {
            privpred_test_fixture: true,
            method,
            budget,
            epsilon: 1.0,
            delta: 1e-5,
            input_dim,
            classes,
            sigma: 0.5,
            seed: 7,
            tag: String::new(),
        }
    }

    /// The JSON text of the fixture file.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("fixture spec serialises")
    }
}

/// TEST FIXTURE model (see [`FixtureSpec`]).
#[derive(Debug)]
pub struct FixtureModel {
    info: ModelInfo,
    theta: Vec<f64>,
    sigma: f64,
    classes: usize,
}

impl FixtureModel {
    /// Whether a model file's bytes are a test fixture.
    pub fn is_fixture(bytes: &[u8]) -> bool {
        bytes.first() == Some(&b'{')
            && serde_json::from_slice::<serde_json::Value>(bytes)
                .ok()
                .and_then(|v| v.get(FIXTURE_MARKER).and_then(|m| m.as_bool()))
                == Some(true)
    }

    /// Parses a fixture file's bytes; the model id is the SHA-256 of the bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let spec: FixtureSpec = serde_json::from_slice(bytes)
            .map_err(|e| ServeError::config("test fixture model", e.to_string()))?;
        if !spec.privpred_test_fixture {
            return Err(ServeError::config(
                "test fixture model",
                "privpred_test_fixture must be true",
            ));
        }
        if spec.input_dim == 0 || spec.classes < 2 {
            return Err(ServeError::config(
                "test fixture model",
                "need input_dim >= 1 and classes >= 2",
            ));
        }
        if !(spec.sigma.is_finite() && spec.sigma >= 0.0) {
            return Err(ServeError::config(
                "test fixture model",
                "sigma must be finite and >= 0",
            ));
        }
        if spec.sigma == 0.0 && !spec.method.is_private_training() {
            return Err(ServeError::config(
                "test fixture model",
                format!(
                    "sigma = 0 gives {} answers no noise, so its stated guarantee would be false; sigma must be > 0",
                    spec.method
                ),
            ));
        }
        let privacy = Privacy::new(spec.epsilon, spec.delta)
            .map_err(|e| ServeError::config("test fixture model", e.to_string()))?;
        let budget = if spec.method.is_private_training() {
            Budget::Unlimited
        } else {
            Budget::finite(spec.budget)
                .map_err(|e| ServeError::config("test fixture model", e.to_string()))?
        };
        let mut rng = ChaCha20Rng::seed_from_u64(spec.seed);
        let theta: Vec<f64> = (0..spec.input_dim * spec.classes)
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut rng);
                z
            })
            .collect();
        let noise = match spec.method {
            Method::SubsampleAggregate => Noise::Exponential {
                beta: 1.0 / spec.sigma.max(1e-12),
            },
            _ => Noise::Gaussian { sigma: spec.sigma },
        };
        // Built through serde so that optional fields added to `Calibration` later default to None.
        let guarantee: Calibration = serde_json::from_value(serde_json::json!({
            "method": spec.method,
            "calibration": CalibrationMode::Corrected,
            "privacy": privacy,
            "budget": budget,
            "neighbours": privpred_core::Neighbours::ReplaceOne,
            "noise": noise,
            "assumptions": Assumptions { classes: spec.classes, ..Assumptions::default() },
            "valid_guarantee": false,
            "notes": ["TEST FIXTURE: synthetic weights, not a trained private model"],
        }))
        .map_err(|e| ServeError::Model(format!("building the fixture's guarantee: {e}")))?;
        let info = ModelInfo {
            model_id: hex(&Sha256::digest(bytes)),
            method: spec.method,
            guarantee,
            budget,
            input_dim: spec.input_dim,
            classes: spec.classes,
            releases_scores: spec.method != Method::SubsampleAggregate,
            not_covered: None,
            preprocessing: vec!["scale into the unit ball: x / max(1, ‖x‖₂)".into()],
            test_fixture: true,
        };
        Ok(FixtureModel {
            info,
            theta,
            sigma: spec.sigma,
            classes: spec.classes,
        })
    }
}

impl ServedModel for FixtureModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn preprocess(&self, raw: &[f32]) -> std::result::Result<Vec<f32>, String> {
        let norm = raw
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            .sqrt();
        let s = if norm > 1.0 { 1.0 / norm } else { 1.0 };
        Ok(raw.iter().map(|&v| (f64::from(v) * s) as f32).collect())
    }

    fn answer(&self, rows: &[Vec<f32>], rng: &mut ChaCha20Rng) -> Result<Vec<Answer>> {
        let c = self.classes;
        let private_training = self.info.method.is_private_training();
        rows.iter()
            .map(|x| {
                if x.len() * c != self.theta.len() {
                    return Err(ServeError::Model(format!(
                        "row has {} features, model expects {}",
                        x.len(),
                        self.theta.len() / c
                    )));
                }
                let mut logits = vec![0.0f64; c];
                for (xi, row) in x.iter().zip(self.theta.chunks_exact(c)) {
                    let xi = f64::from(*xi);
                    for (l, w) in logits.iter_mut().zip(row) {
                        *l += xi * w;
                    }
                }
                if !private_training {
                    for l in logits.iter_mut() {
                        let z: f64 = StandardNormal.sample(rng);
                        *l += self.sigma * z;
                    }
                }
                let label = argmax(&logits) as u32;
                let scores = self.info.releases_scores.then_some(logits);
                Ok(Answer { label, scores })
            })
            .collect()
    }
}

fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Hex SHA-256 of bytes: the model id of a model file.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
