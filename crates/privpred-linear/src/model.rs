//! The linear model φ(x; θ) = θᵀx with θ ∈ R^{D×C}.

use crate::error::{LinearError, Result};
use serde::{Deserialize, Serialize};

/// A linear classifier: `theta` is row-major `d × c` (f64), logits are θᵀx.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearModel {
    /// Input dimension D (a bias, when used, is a feature inside x).
    pub d: usize,
    /// Number of classes C.
    pub c: usize,
    /// Row-major `d × c` parameters.
    pub theta: Vec<f64>,
}

impl LinearModel {
    /// The all-zero model.
    pub fn zeros(d: usize, c: usize) -> Self {
        LinearModel {
            d,
            c,
            theta: vec![0.0; d * c],
        }
    }

    /// Builds a model, checking the parameter count and finiteness.
    pub fn new(d: usize, c: usize, theta: Vec<f64>) -> Result<Self> {
        if d == 0 || c < 2 || theta.len() != d * c {
            return Err(LinearError::Dimension(format!(
                "{} parameters for a {d} × {c} linear model (need d ≥ 1, c ≥ 2, d·c values)",
                theta.len()
            )));
        }
        if theta.iter().any(|v| !v.is_finite()) {
            return Err(LinearError::NonFinite(
                "model parameters contain NaN or infinity".into(),
            ));
        }
        Ok(LinearModel { d, c, theta })
    }

    /// Logits θᵀx (f64). `x.len()` must equal `d` (checked with a debug assertion; use
    /// [`crate::check_query`] on untrusted input).
    pub fn logits(&self, x: &[f32]) -> Vec<f64> {
        debug_assert_eq!(x.len(), self.d);
        let mut out = vec![0.0; self.c];
        for (xj, row) in x.iter().zip(self.theta.chunks_exact(self.c)) {
            let xj = *xj as f64;
            if xj != 0.0 {
                for (o, t) in out.iter_mut().zip(row) {
                    *o += xj * t;
                }
            }
        }
        out
    }

    /// The arg-max class of θᵀx (lowest index on ties).
    pub fn predict(&self, x: &[f32]) -> u32 {
        argmax(&self.logits(x)) as u32
    }

    /// Frobenius norm ‖θ‖.
    pub fn norm(&self) -> f64 {
        self.theta.iter().map(|v| v * v).sum::<f64>().sqrt()
    }
}

/// Index of the largest value (lowest index on ties; NaN never wins).
pub fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best
}
