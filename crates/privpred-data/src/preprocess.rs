//! Preprocessing as explicit, recorded steps that end inside the unit ball (SPEC §2).
//!
//! Order: pixel scaling → class subset (first C′ classes) → subsample N (seeded) → PCA to D
//! (fitted on the selected training rows, centred) → unit-ball rule → optional bias feature.
//! Every output row satisfies ‖x‖₂ ≤ 1 computed in f64: the unit-ball rules leave a relative
//! margin of 1e-6 and every row is re-checked (and nudged inward) after rounding to f32.
//!
//! Data-dependent steps — PCA and the `max-norm` rule — are statistics of the private
//! training set whose privacy cost is *not* accounted (as in the paper); they are listed by
//! [`FittedPreprocessing::data_dependent`] so results can say so.

use crate::dataset::{Dataset, UnitBallDataset};
use crate::error::{DataError, Result};
use crate::{linalg, split};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Relative safety margin of the unit-ball rules.
pub const MARGIN: f64 = 1e-6;

/// The value of the bias feature, `f32(√½)` rounded down; non-bias features are scaled by
/// the same factor so that ‖[x·√½, √½]‖² ≤ ½‖x‖² + ½ ≤ 1.
pub const BIAS_VALUE: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// How each example is mapped into the unit ball.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case", tag = "rule")]
pub enum UnitBall {
    /// Scale each example to unit norm, x / ‖x‖ (data-independent; the default).
    #[default]
    Normalize,
    /// Divide by a fixed radius R and clip to norm ≤ 1 (data-independent).
    Clip {
        /// The radius R > 0.
        radius: f64,
    },
    /// Divide by the training set's maximum norm (the reference code's rule): a statistic of
    /// the private data, offered only as a labelled reproduction option (SPEC §2, §4.5).
    /// Queries above that norm are clipped.
    MaxNorm,
}

impl std::str::FromStr for UnitBall {
    type Err = DataError;
    /// `normalize`, `clip:R`, `max-norm`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || DataError::InvalidArgument {
            name: "unit-ball rule",
            value: s.to_string(),
            expected: "normalize, clip:R (R > 0, finite) or max-norm".into(),
        };
        match s {
            "normalize" | "norm" => Ok(UnitBall::Normalize),
            "max-norm" | "maxnorm" => Ok(UnitBall::MaxNorm),
            _ => {
                let r = s.strip_prefix("clip:").ok_or_else(bad)?;
                let radius: f64 = r.parse().map_err(|_| bad())?;
                if !(radius.is_finite() && radius > 0.0) {
                    return Err(bad());
                }
                Ok(UnitBall::Clip { radius })
            }
        }
    }
}

impl std::fmt::Display for UnitBall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnitBall::Normalize => f.write_str("normalize"),
            UnitBall::Clip { radius } => write!(f, "clip:{radius}"),
            UnitBall::MaxNorm => f.write_str("max-norm"),
        }
    }
}

/// Parses a scale such as `1/255`, `0.5` or `1`.
pub fn parse_scale(s: &str) -> Result<f64> {
    let bad = || DataError::InvalidArgument {
        name: "scale",
        value: s.into(),
        expected: "a positive finite number or a/b".into(),
    };
    let v = match s.split_once('/') {
        Some((a, b)) => {
            a.trim().parse::<f64>().map_err(|_| bad())?
                / b.trim().parse::<f64>().map_err(|_| bad())?
        }
        None => s.trim().parse::<f64>().map_err(|_| bad())?,
    };
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(bad())
    }
}

/// A preprocessing recipe (serde-serialisable). `Default`: scale 1/255, per-example
/// normalisation to norm ≤ 1, nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preprocessing {
    /// Multiply every raw feature by this (pixels: 1/255).
    pub scale: f64,
    /// Keep only the first C′ classes (labels 0..C′).
    pub classes: Option<usize>,
    /// Keep a seeded random subset of N training rows (after the class subset).
    pub subsample: Option<usize>,
    /// Project onto the top-D principal components of the (selected) training rows.
    pub pca: Option<usize>,
    /// Append a constant bias feature inside the unit ball.
    pub bias: bool,
    /// The unit-ball rule.
    pub unit_ball: UnitBall,
}

impl Default for Preprocessing {
    fn default() -> Self {
        Preprocessing {
            scale: 1.0 / 255.0,
            classes: None,
            subsample: None,
            pca: None,
            bias: false,
            unit_ball: UnitBall::Normalize,
        }
    }
}

/// A fitted PCA basis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcaBasis {
    /// Mean of the scaled training rows (length = input dim).
    pub mean: Vec<f32>,
    /// Components as rows, `k × input_dim`, row-major, orthonormal.
    pub components: Vec<f32>,
    /// The top-k eigenvalues (variances along the components).
    pub explained_variance: Vec<f64>,
    /// Total variance (trace of the covariance).
    pub total_variance: f64,
}

/// A fitted preprocessing: the recipe plus everything learned from the training split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FittedPreprocessing {
    /// The recipe.
    pub recipe: Preprocessing,
    /// The seed of the subsample.
    pub seed: u64,
    /// Raw feature dimension expected.
    pub input_dim: usize,
    /// Classes of the training data it was fitted on.
    pub input_classes: usize,
    /// Rows of the training data it was fitted on (checked by `apply_train`).
    pub train_rows: usize,
    /// The PCA basis, if any.
    pub pca: Option<PcaBasis>,
    /// The training set's maximum norm before the unit-ball step (`max-norm` only).
    pub max_norm: Option<f64>,
}

impl Preprocessing {
    /// Validates the recipe against a training set and fits it (subsample, PCA, max-norm).
    pub fn fit(&self, train: &Dataset, seed: u64) -> Result<FittedPreprocessing> {
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(DataError::InvalidArgument {
                name: "scale",
                value: self.scale.to_string(),
                expected: "a positive finite number".into(),
            });
        }
        if let Some(c) = self.classes
            && !(2..=train.classes).contains(&c)
        {
            return Err(DataError::InvalidArgument {
                name: "classes",
                value: c.to_string(),
                expected: format!("2..={} (the dataset's classes)", train.classes),
            });
        }
        if let Some(k) = self.pca
            && !(1..=train.d).contains(&k)
        {
            return Err(DataError::InvalidArgument {
                name: "pca",
                value: k.to_string(),
                expected: format!("1..={} (the input dimension)", train.d),
            });
        }
        if let UnitBall::Clip { radius } = self.unit_ball
            && !(radius.is_finite() && radius > 0.0)
        {
            return Err(DataError::InvalidArgument {
                name: "clip radius",
                value: radius.to_string(),
                expected: "a positive finite number".into(),
            });
        }
        let mut fitted = FittedPreprocessing {
            recipe: self.clone(),
            seed,
            input_dim: train.d,
            input_classes: train.classes,
            train_rows: train.n,
            pca: None,
            max_norm: None,
        };
        let idx = fitted.train_indices(train)?;
        if let Some(k) = self.pca {
            let (mean, cov) = linalg::mean_cov(&train.features, train.d, &idx, self.scale as f32);
            if cov.iter().any(|v| !v.is_finite()) {
                return Err(DataError::Invariant(format!(
                    "{}: feature values too large for PCA (the covariance overflows); lower the scale",
                    train.provenance.name
                )));
            }
            let total_variance = (0..train.d).map(|i| cov[i * train.d + i]).sum();
            let (vals, vecs) = linalg::sym_eigen(&cov, train.d);
            fitted.pca = Some(PcaBasis {
                mean: mean.iter().map(|&m| m as f32).collect(),
                components: vecs[..k * train.d].iter().map(|&v| v as f32).collect(),
                explained_variance: vals[..k].to_vec(),
                total_variance,
            });
        }
        if self.unit_ball == UnitBall::MaxNorm {
            let z = fitted.project(train, &idx);
            let k = fitted.projected_dim();
            let m = z.par_chunks(k).map(norm64).reduce(|| 0.0, f64::max);
            fitted.max_norm = Some(if m > 0.0 { m } else { 1.0 });
        }
        Ok(fitted)
    }
}

fn norm64(r: &[f32]) -> f64 {
    r.iter()
        .map(|&v| (v as f64) * (v as f64))
        .sum::<f64>()
        .sqrt()
}

/// Multiplies `z` by `s` (in f64), then nudges it inward until ‖z‖ ≤ `limit` in f64.
fn scale_into(z: &mut [f32], s: f64, limit: f64) {
    for v in z.iter_mut() {
        *v = (*v as f64 * s) as f32;
    }
    for _ in 0..64 {
        let n = norm64(z);
        if n <= limit {
            return;
        }
        let t = limit * (1.0 - MARGIN) / n;
        for v in z.iter_mut() {
            *v = (*v as f64 * t) as f32;
        }
    }
    z.fill(0.0); // unreachable in practice; zero is always inside the ball
}

impl FittedPreprocessing {
    /// Raw input dimension.
    pub fn input_dim(&self) -> usize {
        self.input_dim
    }

    /// Dimension after PCA (before the bias).
    fn projected_dim(&self) -> usize {
        self.recipe.pca.unwrap_or(self.input_dim)
    }

    /// Output dimension (including the bias feature).
    pub fn output_dim(&self) -> usize {
        self.projected_dim() + usize::from(self.recipe.bias)
    }

    /// Number of classes of the output.
    pub fn classes(&self) -> usize {
        self.recipe.classes.unwrap_or(self.input_classes)
    }

    /// The steps as recorded strings, in order.
    pub fn steps(&self) -> Vec<String> {
        let r = &self.recipe;
        let mut s = vec![format!("scale:{}", fmt_scale(r.scale))];
        if let Some(c) = r.classes {
            s.push(format!("classes:0..{c}"));
        }
        if let Some(n) = r.subsample {
            s.push(format!("subsample:{n} (seed {})", self.seed));
        }
        if let (Some(k), Some(p)) = (r.pca, &self.pca) {
            let kept: f64 = p.explained_variance.iter().sum();
            s.push(format!(
                "pca:{}->{} (centred, fitted on the training split, {:.1}% variance; privacy cost not accounted)",
                self.input_dim,
                k,
                100.0 * kept / p.total_variance.max(f64::MIN_POSITIVE)
            ));
        }
        s.push(match r.unit_ball {
            UnitBall::Normalize => "unit-ball:normalize (x/‖x‖, data-independent)".into(),
            UnitBall::Clip { radius } => format!("unit-ball:clip:{radius} (x/R clipped to ‖x‖ ≤ 1, data-independent)"),
            UnitBall::MaxNorm => format!(
                "unit-ball:max-norm (divide by the training maximum norm {:.6}; DATA-DEPENDENT, reproduction only)",
                self.max_norm.unwrap_or(f64::NAN)
            ),
        });
        if r.bias {
            s.push("bias:[x·√½, √½] (inside the unit ball)".into());
        }
        s
    }

    /// The data-dependent steps whose privacy cost is not accounted (empty when none).
    pub fn data_dependent(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.recipe.pca.is_some() {
            v.push("PCA fitted on the private training data; its privacy cost is not accounted (as in the paper, SPEC §2)".into());
        }
        if self.recipe.unit_ball == UnitBall::MaxNorm {
            v.push("max-norm normalisation divides by a statistic of the private training data (reproduction option, SPEC §2/§4.5)".into());
        }
        v
    }

    /// The training rows kept (class subset, then the seeded subsample), in output order.
    pub fn train_indices(&self, train: &Dataset) -> Result<Vec<usize>> {
        let mut idx: Vec<usize> = match self.recipe.classes {
            Some(c) => (0..train.n)
                .filter(|&i| (train.labels[i] as usize) < c)
                .collect(),
            None => (0..train.n).collect(),
        };
        if idx.is_empty() {
            return Err(DataError::Invariant(format!(
                "{}: no training rows left after the class subset",
                train.provenance.name
            )));
        }
        if let Some(n) = self.recipe.subsample {
            if n == 0 || n > idx.len() {
                return Err(DataError::InvalidArgument {
                    name: "subsample",
                    value: n.to_string(),
                    expected: format!("1..={} (training rows after the class subset)", idx.len()),
                });
            }
            let p = split::permutation(idx.len(), self.seed);
            idx = p[..n].iter().map(|&j| idx[j]).collect();
        }
        Ok(idx)
    }

    /// Scale (+ PCA) of the rows `idx`: `idx.len() × projected_dim` values.
    fn project(&self, ds: &Dataset, idx: &[usize]) -> Vec<f32> {
        let d = self.input_dim;
        let scale = self.recipe.scale as f32;
        match &self.pca {
            None => {
                let mut out = vec![0f32; idx.len() * d];
                out.par_chunks_mut(d)
                    .zip(idx.par_iter())
                    .for_each(|(o, &i)| {
                        for (y, &x) in o.iter_mut().zip(ds.row(i)) {
                            *y = x * scale;
                        }
                    });
                out
            }
            Some(p) => {
                let k = p.components.len() / d;
                const CH: usize = 256;
                let mut out = vec![0f32; idx.len() * k];
                out.par_chunks_mut(CH * k)
                    .zip(idx.par_chunks(CH))
                    .for_each(|(o, rows)| {
                        let mut y = vec![0f32; rows.len() * d];
                        for (r, &i) in rows.iter().enumerate() {
                            for ((yy, &x), &m) in
                                y[r * d..(r + 1) * d].iter_mut().zip(ds.row(i)).zip(&p.mean)
                            {
                                *yy = x * scale - m;
                            }
                        }
                        // o (rows×k) = y (rows×d) · componentsᵀ (d×k): rhs(j, c) = comp[c*d + j].
                        linalg::gemm_f32(o, rows.len(), k, d, &y, d, 1, &p.components, 1, d);
                    });
                out
            }
        }
    }

    /// Maps one projected row into the unit ball and appends the bias: writes `output_dim`.
    fn finish_row(&self, z: &[f32], out: &mut [f32]) {
        let k = z.len();
        out[..k].copy_from_slice(z);
        let n = norm64(z);
        let s = match self.recipe.unit_ball {
            UnitBall::Normalize => {
                if n > 0.0 {
                    (1.0 - MARGIN) / n
                } else {
                    1.0
                }
            }
            UnitBall::Clip { radius } => (1.0 - MARGIN) / radius.max(n),
            UnitBall::MaxNorm => (1.0 - MARGIN) / self.max_norm.unwrap_or(1.0).max(n),
        };
        if self.recipe.bias {
            let b = BIAS_VALUE as f64;
            let limit = (1.0 - b * b).sqrt() * (1.0 - MARGIN);
            scale_into(&mut out[..k], s * BIAS_VALUE as f64, limit);
            out[k] = BIAS_VALUE;
            // Final check of the whole row, bias included (nudges the features only).
            for _ in 0..64 {
                if norm64(&out[..=k]) <= 1.0 {
                    break;
                }
                for v in out[..k].iter_mut() {
                    *v *= 1.0 - 1e-5;
                }
            }
        } else {
            scale_into(&mut out[..k], s, 1.0);
        }
    }

    fn transform(&self, ds: &Dataset, idx: &[usize]) -> Result<UnitBallDataset> {
        if ds.d != self.input_dim {
            return Err(DataError::InvalidArgument {
                name: "input dimension",
                value: ds.d.to_string(),
                expected: format!(
                    "{} (the dimension the preprocessing was fitted on)",
                    self.input_dim
                ),
            });
        }
        if idx.is_empty() {
            return Err(DataError::Invariant(format!(
                "{}: no rows left after preprocessing (class subset)",
                ds.provenance.name
            )));
        }
        let z = self.project(ds, idx);
        let k = self.projected_dim();
        let od = self.output_dim();
        let mut out = vec![0f32; idx.len() * od];
        out.par_chunks_mut(od)
            .zip(z.par_chunks(k))
            .for_each(|(o, zr)| self.finish_row(zr, o));
        let labels: Vec<u32> = idx.iter().map(|&i| ds.labels[i]).collect();
        let mut prov = ds.provenance.clone();
        prov.steps.extend(self.steps());
        prov.feature_shape = vec![od];
        if self.recipe.classes.is_some() {
            prov.class_names.truncate(self.classes());
        }
        let classes = if self.recipe.classes.is_some() {
            self.classes()
        } else {
            ds.classes
        };
        UnitBallDataset::new(Dataset::new(od, classes, out, labels, prov)?)
    }

    /// Preprocesses the training split it was fitted on (class subset and subsample
    /// included).
    pub fn apply_train(&self, train: &Dataset) -> Result<UnitBallDataset> {
        if train.n != self.train_rows {
            return Err(DataError::InvalidArgument {
                name: "training rows",
                value: train.n.to_string(),
                expected: format!(
                    "{} (the training set the preprocessing was fitted on)",
                    self.train_rows
                ),
            });
        }
        let idx = self.train_indices(train)?;
        self.transform(train, &idx)
    }

    /// Preprocesses another split (test, queries): class subset, no subsample.
    pub fn apply(&self, ds: &Dataset) -> Result<UnitBallDataset> {
        let idx: Vec<usize> = match self.recipe.classes {
            Some(c) => (0..ds.n).filter(|&i| (ds.labels[i] as usize) < c).collect(),
            None => (0..ds.n).collect(),
        };
        self.transform(ds, &idx)
    }

    /// Preprocesses one raw query row (length `input_dim`, finite values).
    pub fn apply_row(&self, x: &[f32]) -> Result<Vec<f32>> {
        if x.len() != self.input_dim {
            return Err(DataError::InvalidArgument {
                name: "query length",
                value: x.len().to_string(),
                expected: format!("{} raw features", self.input_dim),
            });
        }
        if let Some(j) = x.iter().position(|v| !v.is_finite()) {
            return Err(DataError::InvalidArgument {
                name: "query",
                value: format!("non-finite value at feature {j}"),
                expected: "finite numbers".into(),
            });
        }
        let scale = self.recipe.scale as f32;
        let z: Vec<f32> = match &self.pca {
            None => x.iter().map(|&v| v * scale).collect(),
            Some(p) => {
                let d = self.input_dim;
                let y: Vec<f32> = x
                    .iter()
                    .zip(&p.mean)
                    .map(|(&v, &m)| v * scale - m)
                    .collect();
                let k = p.components.len() / d;
                let mut z = vec![0f32; k];
                linalg::gemm_f32(&mut z, 1, k, d, &y, d, 1, &p.components, 1, d);
                z
            }
        };
        let mut out = vec![0f32; self.output_dim()];
        self.finish_row(&z, &mut out);
        Ok(out)
    }
}

fn fmt_scale(s: f64) -> String {
    let inv = 1.0 / s;
    if (inv - inv.round()).abs() < 1e-9 && inv.round() > 1.0 {
        format!("1/{}", inv.round())
    } else {
        format!("{s}")
    }
}
