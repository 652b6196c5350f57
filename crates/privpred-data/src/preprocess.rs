//! Preprocessing as explicit, recorded steps that end inside the unit ball (docs/guarantees.md#the-setting).
//!
//! Order: pixel scaling → class subset (first C′ classes) → subsample N (seeded) → PCA to D
//! (fitted on the selected training rows, centred) → unit-ball rule → optional bias feature.
//! Every output row satisfies ‖x‖₂ ≤ 1 computed in f64: the unit-ball rules leave a relative
//! margin of 1e-6 and every row is re-checked (and nudged inward) after rounding to f32.
//!
//! Two forms: the borrowed [`FittedPreprocessing::apply_train`] / [`FittedPreprocessing::apply`]
//! write a new output beside the input, block by block (no intermediate copy); the owned
//! [`FittedPreprocessing::apply_train_owned`] / [`FittedPreprocessing::apply_owned`] consume
//! the raw split and never hold two copies of it — the class subset and subsample compact
//! rows in place, scaling, the unit-ball rule and the bias work in place, and PCA writes only
//! its smaller projected output. Both run the same per-row arithmetic with the same block
//! boundaries, so they agree bit for bit.
//!
//! Data-dependent steps — PCA and the `max-norm` rule — are statistics of the private
//! training set whose privacy cost is *not* accounted (as in the paper); they are listed by
//! [`FittedPreprocessing::data_dependent`] so results can say so.

use crate::dataset::{Dataset, UnitBallDataset, gather_rows_in_place};
use crate::error::{DataError, Result};
use crate::{linalg, split};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

mod transform;

/// Rows per block of the projection (PCA goes through one GEMM per block).
const BLOCK: usize = 256;

/// Relative safety margin of the unit-ball rules.
pub const MARGIN: f64 = 1e-6;

/// The bias value of [`Preprocessing::default`], `f32(√½)` rounded down (used once `bias` is
/// set without [`Preprocessing::with_bias`]).
pub const BIAS_VALUE: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// The bias value `compare` and the study use unless told otherwise: 0, no bias feature.
/// Chosen by measurement on the training hold-out, never the test set
/// (`cargo run --release -p privpred-study --example holdout -- bias`, MNIST and
/// Fashion-MNIST, every method at ε ∈ {0.1, 1, 10}, v ∈ {0, 0.05, 0.1, 0.2, √½}; tables and
/// rule in docs/study.md, "Choosing the bias value"): 0 has the best mean rank over the 24
/// (dataset, method, ε) cells (2.46; 0.05: 2.50, 0.1: 2.65, 0.2: 2.94, √½: 4.46) and a mean
/// loss of 0.30 points against each cell's best value; √½ loses 4.2 points on average (up to
/// 18 for model sensitivity at ε = 1), because it shrinks the pixel part to norm √½ while the
/// noise is set for the whole row. `privpred train` and the library's
/// [`Preprocessing::default`] have no bias feature either.
pub const BIAS_DEFAULT: f64 = 0.0;

/// The valid range of a bias value, as error messages state it.
pub const BIAS_RANGE: &str =
    "a number in [0, 1): the bias feature's value v, rows [x·√(1 − v²), v]; 0 = no bias feature";

fn sqrt_half_bias() -> f64 {
    std::f64::consts::FRAC_1_SQRT_2
}

/// Checks a bias value: finite, 0 ≤ v < 1 (0 = no bias feature). Any such v keeps
/// ‖[x·√(1 − v²), v]‖ ≤ 1; v = 1 would leave no room for the features.
pub fn check_bias(v: f64) -> Result<f64> {
    if v.is_finite() && (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(DataError::InvalidArgument {
            name: "bias",
            value: v.to_string(),
            expected: BIAS_RANGE.into(),
        })
    }
}

/// Parses and checks a bias value (`0`, `0.1`, `0.7071`, …; see [`check_bias`]).
pub fn parse_bias(s: &str) -> Result<f64> {
    let v = s.trim().parse::<f64>().unwrap_or(f64::NAN);
    check_bias(v).map_err(|_| DataError::InvalidArgument {
        name: "bias",
        value: s.to_string(),
        expected: BIAS_RANGE.into(),
    })
}

/// The stored bias feature for a value v: the largest f32 ≤ v (so the row's norm bound
/// computed from it never exceeds the one for v). `f32(√½)` is already below √½, so
/// [`BIAS_VALUE`] is reproduced exactly.
fn bias_f32(v: f64) -> f32 {
    let f = v as f32;
    if f as f64 > v { f.next_down() } else { f }
}

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
    /// the private data, offered only as a labelled reproduction option (docs/guarantees.md#the-setting, §4.5).
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
    /// Append a constant bias feature inside the unit ball, of value [`Self::bias_value`].
    pub bias: bool,
    /// The bias feature's value v ∈ [0, 1) when `bias` is set (0 = no bias feature): rows
    /// become [x·√(1 − v²), v] (docs/guarantees.md#the-setting). Set both with
    /// [`Self::with_bias`].
    pub bias_value: f64,
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
            bias_value: sqrt_half_bias(),
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
    /// The top-k eigenvalues (variances along the components); empty when not recorded
    /// ([`FittedPreprocessing::for_release`]): they are statistics of the data it was fitted
    /// on and are not needed to map queries.
    #[serde(default)]
    pub explained_variance: Vec<f64>,
    /// Total variance (trace of the covariance); 0 when not recorded.
    #[serde(default)]
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
    /// The schema the training table was read through: queries arrive as the table's raw
    /// cells and are mapped by it before the steps above ([`Self::encode_query`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<crate::schema::Schema>,
}

impl Preprocessing {
    /// The default recipe for a dataset: for a table read through a schema (rows already in
    /// the unit ball by its public bounds), no scaling and the `clip:1` rule, which leaves
    /// such rows as they are; for image data, [`Preprocessing::default`] (pixels × 1/255,
    /// normalised). A table read without a schema is refused with how to write one.
    pub fn for_data(ds: &Dataset) -> Result<Preprocessing> {
        if ds.provenance.needs_schema {
            return Err(DataError::InvalidArgument {
                name: "schema",
                value: format!("none for {}", ds.provenance.name),
                expected: crate::schema::NEEDS_SCHEMA.into(),
            });
        }
        Ok(if ds.provenance.schema.is_some() {
            Preprocessing {
                scale: 1.0,
                unit_ball: UnitBall::Clip { radius: 1.0 },
                ..Preprocessing::default()
            }
        } else {
            Preprocessing::default()
        })
    }

    /// The recipe with bias value `v` (0 = no bias feature; not checked here, [`Self::fit`]
    /// and [`FittedPreprocessing::validate`] refuse values outside [0, 1)).
    pub fn with_bias(mut self, v: f64) -> Self {
        self.bias = v != 0.0;
        self.bias_value = v;
        self
    }

    /// The bias value in effect: [`Self::bias_value`] when `bias` is set, else 0.
    pub fn bias(&self) -> f64 {
        if self.bias { self.bias_value } else { 0.0 }
    }

    /// The bias feature appended to every row, if any (see [`bias_f32`]).
    fn bias_feature(&self) -> Option<f32> {
        (self.bias && self.bias_value > 0.0).then(|| bias_f32(self.bias_value))
    }

    /// Validates the recipe against a training set and fits it (subsample, PCA, max-norm).
    pub fn fit(&self, train: &Dataset, seed: u64) -> Result<FittedPreprocessing> {
        if self.bias {
            check_bias(self.bias_value)?;
        }
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
            schema: train.provenance.schema.clone(),
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
            // Block by block: never a projected copy of the whole training set.
            let k = fitted.projected_dim();
            let fp = &fitted;
            let m = idx
                .par_chunks(BLOCK)
                .map_init(
                    || (Vec::new(), Vec::new()),
                    |(y, z), rows| {
                        fp.project_block(rows.len(), |r| train.row(rows[r]), y, z);
                        z.chunks_exact(k).map(norm64).fold(0.0, f64::max)
                    },
                )
                .reduce(|| 0.0, f64::max);
            fitted.max_norm = Some(if m > 0.0 { m } else { 1.0 });
        }
        Ok(fitted)
    }
}

/// The error of [`FittedPreprocessing::validate`]: `name` is `value`, expected `expected`.
fn invalid(name: &'static str, value: String, expected: String) -> Result<()> {
    Err(DataError::InvalidArgument {
        name,
        value,
        expected,
    })
}

fn norm64(r: &[f32]) -> f64 {
    r.iter()
        .map(|&v| (v as f64) * (v as f64))
        .sum::<f64>()
        .sqrt()
}

impl FittedPreprocessing {
    /// Checks a fitted preprocessing read from a file (a model artifact) before it is used:
    /// the recipe's ranges (scale finite > 0, 2 ≤ classes ≤ the input's classes ≤
    /// [`crate::limits::MAX_CLASSES`], subsample ≥ 1, 1 ≤ PCA dimension ≤ input dimension, clip
    /// radius finite > 0) and the fitted state matching it (a PCA basis exactly when the
    /// recipe has PCA, with a mean of the input dimension, `k × input_dim` finite components
    /// and `k` variances; a finite positive maximum norm exactly for `max-norm`). A crafted
    /// basis of the wrong size would otherwise index out of bounds when queries are mapped.
    pub fn validate(&self) -> Result<()> {
        if let Some(s) = &self.schema {
            s.validate()?;
            if s.feature_dim() != self.input_dim {
                return invalid(
                    "schema",
                    format!("{} encoded features", s.feature_dim()),
                    format!("the input dimension {}", self.input_dim),
                );
            }
        }
        self.validate_recipe()?;
        self.validate_max_norm()?;
        self.validate_pca()
    }

    /// The recipe's ranges against the input's dimension and classes: scale, classes,
    /// subsample, bias value and clip radius.
    fn validate_recipe(&self) -> Result<()> {
        let r = &self.recipe;
        // features are f32 and scaled in f32: the scale must be a finite f32 > 0 too (1e308
        // would turn every feature into inf or NaN)
        let s32 = r.scale as f32;
        if !(r.scale.is_finite() && r.scale > 0.0 && s32.is_finite() && s32 >= f32::MIN_POSITIVE) {
            return invalid(
                "scale",
                if r.scale.to_string().len() > 20 {
                    format!("{:e}", r.scale)
                } else {
                    r.scale.to_string()
                },
                format!(
                    "a positive number representable in f32 ({:e}..={:e})",
                    f32::MIN_POSITIVE,
                    f32::MAX
                ),
            );
        }
        if self.input_dim == 0 {
            return invalid("input dimension", "0".into(), "at least 1".into());
        }
        if self.train_rows == 0 {
            // a preprocessing is fitted on a training set, and a classifier on ≥ 2 rows
            return invalid("train_rows", "0".into(), "at least 1".into());
        }
        if !(2..=crate::limits::MAX_CLASSES).contains(&self.input_classes) {
            return invalid(
                "input classes",
                self.input_classes.to_string(),
                format!("2..={}", crate::limits::MAX_CLASSES),
            );
        }
        if let Some(c) = r.classes
            && !(2..=self.input_classes).contains(&c)
        {
            return invalid(
                "classes",
                c.to_string(),
                format!("2..={} (the input's classes)", self.input_classes),
            );
        }
        if r.subsample == Some(0) {
            return invalid("subsample", "0".into(), "at least 1".into());
        }
        if r.bias {
            check_bias(r.bias_value)?;
        }
        if let UnitBall::Clip { radius } = r.unit_ball
            && !(radius.is_finite() && radius > 0.0)
        {
            return invalid(
                "clip radius",
                radius.to_string(),
                "a positive finite number".into(),
            );
        }
        Ok(())
    }

    /// A finite positive maximum norm exactly when the unit-ball rule is `max-norm`.
    fn validate_max_norm(&self) -> Result<()> {
        let r = &self.recipe;
        match (r.unit_ball, self.max_norm) {
            (UnitBall::MaxNorm, Some(m)) if m.is_finite() && m > 0.0 => {}
            (UnitBall::MaxNorm, m) => {
                return invalid(
                    "max-norm statistic",
                    m.map_or_else(|| "none".to_string(), |m| m.to_string()),
                    "a positive finite number for the max-norm rule".into(),
                );
            }
            (_, None) => {}
            (_, Some(m)) => {
                return invalid(
                    "max-norm statistic",
                    m.to_string(),
                    "absent unless the rule is max-norm".into(),
                );
            }
        }
        Ok(())
    }

    /// A PCA basis exactly when the recipe has PCA: 1 ≤ k ≤ the input dimension, a mean of
    /// the input dimension, `k × input_dim` components and `k` variances, all finite.
    fn validate_pca(&self) -> Result<()> {
        let r = &self.recipe;
        match (r.pca, &self.pca) {
            (None, None) => {}
            (Some(k), Some(p)) => {
                let d = self.input_dim;
                if !(1..=d).contains(&k) {
                    return invalid(
                        "pca",
                        k.to_string(),
                        format!("1..={d} (the input dimension)"),
                    );
                }
                if p.mean.len() != d
                    || Some(p.components.len()) != k.checked_mul(d)
                    || !(p.explained_variance.is_empty() || p.explained_variance.len() == k)
                {
                    return invalid(
                        "PCA basis",
                        format!(
                            "mean {}, components {}, variances {}",
                            p.mean.len(),
                            p.components.len(),
                            p.explained_variance.len()
                        ),
                        format!(
                            "mean {d}, components {k}×{d} = {}, variances {k} or none",
                            k * d
                        ),
                    );
                }
                if p.mean.iter().chain(&p.components).any(|v| !v.is_finite())
                    || p.explained_variance.iter().any(|v| !v.is_finite())
                    || !p.total_variance.is_finite()
                {
                    return invalid(
                        "PCA basis",
                        "non-finite values".into(),
                        "finite numbers".into(),
                    );
                }
                // variances are eigenvalues of a covariance matrix: never negative
                if let Some(v) = p
                    .explained_variance
                    .iter()
                    .chain(std::iter::once(&p.total_variance))
                    .find(|v| **v < 0.0)
                {
                    return invalid(
                        "PCA variance",
                        if v.to_string().len() > 20 {
                            format!("{v:e}")
                        } else {
                            v.to_string()
                        },
                        "a number >= 0 (a variance)".into(),
                    );
                }
            }
            (Some(k), None) => {
                return invalid(
                    "PCA basis",
                    "missing".into(),
                    format!("a fitted basis for pca:{k}"),
                );
            }
            (None, Some(_)) => {
                return invalid(
                    "PCA basis",
                    "present".into(),
                    "none: the recipe has no PCA step".into(),
                );
            }
        }
        Ok(())
    }

    /// Raw input dimension.
    pub fn input_dim(&self) -> usize {
        self.input_dim
    }

    /// Maps one raw query row through the schema (the table's cells, with or without the
    /// label column; see [`crate::schema::Schema::encode_query`]) and then the steps. Without
    /// a schema the cells must be numbers, mapped by [`Self::apply_row`].
    pub fn encode_query<S: AsRef<str>>(&self, cells: &[S]) -> Result<Vec<f32>> {
        let bad = |reason: String| DataError::InvalidArgument {
            name: "query",
            value: reason,
            expected: "a row as the training table held it".into(),
        };
        let x = match &self.schema {
            Some(s) => s.encode_query(cells).map_err(bad)?,
            None => cells
                .iter()
                .enumerate()
                .map(|(j, c)| {
                    c.as_ref()
                        .trim()
                        .parse::<f32>()
                        .map_err(|_| bad(format!("`{}` at column {j} is not a number", c.as_ref())))
                })
                .collect::<Result<Vec<f32>>>()?,
        };
        self.apply_row(&x)
    }

    /// Dimension after PCA (before the bias).
    fn projected_dim(&self) -> usize {
        self.recipe.pca.unwrap_or(self.input_dim)
    }

    /// Output dimension (including the bias feature).
    pub fn output_dim(&self) -> usize {
        self.projected_dim() + usize::from(self.recipe.bias_feature().is_some())
    }

    /// Number of classes of the output.
    pub fn classes(&self) -> usize {
        self.recipe.classes.unwrap_or(self.input_classes)
    }

    /// The steps as recorded strings, in order.
    pub fn steps(&self) -> Vec<String> {
        let r = &self.recipe;
        let mut s = Vec::new();
        if let Some(schema) = &self.schema {
            s.push(schema.describe());
        }
        s.push(format!("scale:{}", fmt_scale(r.scale)));
        if let Some(c) = r.classes {
            s.push(format!("classes:0..{c}"));
        }
        if let Some(n) = r.subsample {
            s.push(format!("subsample:{n} (seeded random subset)"));
        }
        if let (Some(k), Some(p)) = (r.pca, &self.pca) {
            let variance = if p.explained_variance.is_empty() {
                String::new()
            } else {
                let kept: f64 = p.explained_variance.iter().sum();
                format!(
                    ", {:.1}% variance",
                    100.0 * kept / p.total_variance.max(f64::MIN_POSITIVE)
                )
            };
            s.push(format!(
                "pca:{}->{} (centred, fitted on the training split{variance}; privacy cost not accounted)",
                self.input_dim, k,
            ));
        }
        s.push(match r.unit_ball {
            UnitBall::Normalize => "unit-ball:normalize (x/‖x‖, data-independent)".into(),
            UnitBall::Clip { radius } => format!("unit-ball:clip:{radius} (x/R clipped to ‖x‖ ≤ 1, data-independent)"),
            // the statistic itself is not repeated in the text (`/v1/model` shows the steps)
            UnitBall::MaxNorm => "unit-ball:max-norm (divide by the training set's maximum norm; DATA-DEPENDENT, reproduction only)".into(),
        });
        if r.bias_feature().is_some() {
            s.push(format!(
                "bias:{} (rows [x·√(1 − v²), v] with v = {}, inside the unit ball)",
                r.bias_value, r.bias_value
            ));
        }
        s
    }

    /// This preprocessing without the statistics of the training data that mapping queries
    /// does not need: the subsample's seed (it tells which rows were used; set to 0) and the
    /// PCA's variances. What an artifact of a private model records (the PCA basis and the
    /// max-norm statistic, which queries do need, are refused for private training instead:
    /// see [`Self::private_statistics`]).
    pub fn for_release(&self) -> FittedPreprocessing {
        let mut p = self.clone();
        p.seed = 0;
        if let Some(b) = &mut p.pca {
            b.explained_variance = Vec::new();
            b.total_variance = 0.0;
        }
        p
    }

    /// The steps that map queries with a statistic of the training data itself (a PCA basis
    /// fitted on it, the max-norm scale), with why each may not be released with a private
    /// model and what to use instead; empty when none.
    pub fn private_statistics(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.recipe.pca.is_some() {
            v.push("a PCA basis fitted on the private training data (its components and mean are statistics of that data, released without noise); project the data yourself with a basis fitted on public data, or train without PCA".to_string());
        }
        if self.recipe.unit_ball == UnitBall::MaxNorm {
            v.push("the max-norm rule (it divides every query by the training set's largest norm, a statistic of the private data released without noise); use the data-independent `normalize` or `clip:R`".to_string());
        }
        v
    }

    /// The data-dependent steps whose privacy cost is not accounted (empty when none).
    pub fn data_dependent(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.recipe.pca.is_some() {
            v.push("PCA fitted on the private training data; its privacy cost is not accounted (as in the paper)".into());
        }
        if self.recipe.unit_ball == UnitBall::MaxNorm {
            v.push("max-norm normalisation divides by a statistic of the private training data (reproduction option)".into());
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
}

fn fmt_scale(s: f64) -> String {
    let inv = 1.0 / s;
    if (inv - inv.round()).abs() < 1e-9 && inv.round() > 1.0 {
        format!("1/{}", inv.round())
    } else {
        format!("{s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Provenance;

    fn toy(n: usize, d: usize) -> Dataset {
        let features = (0..n * d).map(|i| ((i * 37 % 101) as f32) / 50.0).collect();
        let labels = (0..n).map(|i| (i % 2) as u32).collect();
        let prov = Provenance {
            name: "toy".into(),
            ..Default::default()
        };
        Dataset::new(d, 2, features, labels, prov).unwrap()
    }

    /// The released preprocessing keeps what maps queries (the PCA basis) and drops the
    /// training data's statistics it does not need (the subsample's seed, the PCA's
    /// variances); it still validates and maps every query exactly as before.
    #[test]
    fn the_released_preprocessing_drops_what_queries_do_not_need() {
        let ds = toy(40, 5);
        let recipe = Preprocessing {
            scale: 1.0,
            subsample: Some(30),
            pca: Some(3),
            ..Preprocessing::default()
        };
        let fitted = recipe.fit(&ds, 77).unwrap();
        let rel = fitted.for_release();
        assert_eq!(rel.seed, 0);
        let (a, b) = (fitted.pca.as_ref().unwrap(), rel.pca.as_ref().unwrap());
        assert!(b.explained_variance.is_empty() && b.total_variance == 0.0);
        assert_eq!((&a.mean, &a.components), (&b.mean, &b.components));
        rel.validate().unwrap();
        let back: FittedPreprocessing =
            serde_json::from_str(&serde_json::to_string(&rel).unwrap()).unwrap();
        assert_eq!(back, rel);
        let row = ds.row(3);
        assert_eq!(fitted.apply_row(row).unwrap(), rel.apply_row(row).unwrap());
        let steps = rel.steps().join(" ");
        assert!(
            !steps.contains("variance") && !steps.contains("77"),
            "{steps}"
        );
        // a PCA whose variance list is neither empty nor k long is still refused
        let mut bad = rel.clone();
        bad.pca.as_mut().unwrap().explained_variance = vec![1.0];
        assert!(bad.validate().is_err());
    }

    /// PCA and max-norm map queries with statistics of the training data: named (with what
    /// to use instead) so that private training can refuse them; the data-independent rules
    /// are not.
    #[test]
    fn private_statistics_name_pca_and_max_norm_only() {
        let ds = toy(20, 4);
        for (recipe, want) in [
            (Preprocessing::default(), 0),
            (
                Preprocessing {
                    unit_ball: UnitBall::Clip { radius: 2.0 },
                    ..Preprocessing::default()
                },
                0,
            ),
            (
                Preprocessing {
                    unit_ball: UnitBall::MaxNorm,
                    ..Preprocessing::default()
                },
                1,
            ),
            (
                Preprocessing {
                    pca: Some(2),
                    unit_ball: UnitBall::MaxNorm,
                    ..Preprocessing::default()
                },
                2,
            ),
        ] {
            let v = recipe.fit(&ds, 1).unwrap().private_statistics();
            assert_eq!(v.len(), want, "{v:?}");
        }
    }
}
