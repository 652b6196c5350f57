//! In-memory datasets and the unit-ball invariant.

use crate::error::{DataError, Result};
use serde::{Deserialize, Serialize};

/// Where a dataset came from and what was done to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Dataset name (`mnist`, `csv:PATH`, ...).
    pub name: String,
    /// Where the bytes came from (path or package).
    pub source: String,
    /// SHA-256 of the raw data files (hex), combined where several.
    pub checksum: Option<String>,
    /// Whether the checksum matched a known reference.
    pub verified: bool,
    /// Preprocessing steps applied, in order, as recorded strings (e.g. `scale:1/255`).
    pub steps: Vec<String>,
    /// Free-form labels such as "substitute" or "CIFAR-10 (JPEG copy)".
    pub labels: Vec<String>,
    /// Shape of one example before flattening (e.g. `[28, 28]`, `[3, 32, 32]`); empty when
    /// unknown (then `[d]`).
    #[serde(default)]
    pub feature_shape: Vec<usize>,
    /// Class names where the source has them (label i = `class_names[i]`).
    #[serde(default)]
    pub class_names: Vec<String>,
}

/// A labelled dataset: `n` rows of `d` f32 features, row-major, labels in `0..classes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Number of examples.
    pub n: usize,
    /// Feature dimension.
    pub d: usize,
    /// Number of classes C.
    pub classes: usize,
    /// Row-major features, `n * d` values.
    pub features: Vec<f32>,
    /// Labels in `0..classes`.
    pub labels: Vec<u32>,
    /// Provenance.
    pub provenance: Provenance,
}

impl Dataset {
    /// Builds a dataset, checking shapes, finiteness and the label range.
    pub fn new(
        d: usize,
        classes: usize,
        features: Vec<f32>,
        labels: Vec<u32>,
        provenance: Provenance,
    ) -> Result<Self> {
        let n = labels.len();
        if n == 0 {
            return Err(DataError::Invariant(format!(
                "{}: empty dataset",
                provenance.name
            )));
        }
        if d == 0 || features.len() != n * d {
            return Err(DataError::Invariant(format!(
                "{}: {} feature values for {} rows of dimension {}",
                provenance.name,
                features.len(),
                n,
                d
            )));
        }
        if let Some(i) = features.iter().position(|v| !v.is_finite()) {
            return Err(DataError::Invariant(format!(
                "{}: non-finite feature at row {}, column {}",
                provenance.name,
                i / d,
                i % d
            )));
        }
        if let Some((i, y)) = labels
            .iter()
            .enumerate()
            .find(|(_, y)| **y as usize >= classes)
        {
            return Err(DataError::Invariant(format!(
                "{}: label {} at row {} outside the class range 0..{}",
                provenance.name, y, i, classes
            )));
        }
        Ok(Dataset {
            n,
            d,
            classes,
            features,
            labels,
            provenance,
        })
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.features[i * self.d..(i + 1) * self.d]
    }

    /// The shape of one example (`provenance.feature_shape`, or `[d]` when unknown).
    pub fn feature_shape(&self) -> Vec<usize> {
        if self.provenance.feature_shape.iter().product::<usize>() == self.d
            && !self.provenance.feature_shape.is_empty()
        {
            self.provenance.feature_shape.clone()
        } else {
            vec![self.d]
        }
    }

    /// Examples per class (`classes` entries).
    pub fn class_counts(&self) -> Vec<usize> {
        let mut c = vec![0usize; self.classes];
        for &y in &self.labels {
            if let Some(v) = c.get_mut(y as usize) {
                *v += 1;
            }
        }
        c
    }

    /// The rows at `idx` (in that order), same classes and provenance. Indices must be < `n`
    /// (out-of-range indices are skipped).
    pub fn subset(&self, idx: &[usize]) -> Dataset {
        let mut features = Vec::with_capacity(idx.len() * self.d);
        let mut labels = Vec::with_capacity(idx.len());
        for &i in idx.iter().filter(|&&i| i < self.n) {
            features.extend_from_slice(self.row(i));
            labels.push(self.labels[i]);
        }
        Dataset {
            n: labels.len(),
            d: self.d,
            classes: self.classes,
            features,
            labels,
            provenance: self.provenance.clone(),
        }
    }

    /// The largest L2 row norm (computed in f64).
    pub fn max_norm(&self) -> f64 {
        self.features
            .chunks_exact(self.d)
            .map(|r| {
                r.iter()
                    .map(|&v| (v as f64) * (v as f64))
                    .sum::<f64>()
                    .sqrt()
            })
            .fold(0.0, f64::max)
    }
}

/// A dataset whose every row satisfies ‖x‖₂ ≤ 1 (computed in f64): what the linear methods
/// accept. The only way to build one is [`UnitBallDataset::new`], which checks every row.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitBallDataset(Dataset);

impl UnitBallDataset {
    /// Checks the unit-ball invariant for every row.
    pub fn new(ds: Dataset) -> Result<Self> {
        for (i, r) in ds.features.chunks_exact(ds.d).enumerate() {
            let norm = r
                .iter()
                .map(|&v| (v as f64) * (v as f64))
                .sum::<f64>()
                .sqrt();
            if norm > 1.0 {
                return Err(DataError::Invariant(format!(
                    "{}: row {} has norm {:.6} > 1; the privacy guarantees need every example inside the unit ball (preprocess with a unit-ball mapping)",
                    ds.provenance.name, i, norm
                )));
            }
        }
        Ok(UnitBallDataset(ds))
    }

    /// The inner dataset.
    pub fn inner(&self) -> &Dataset {
        &self.0
    }

    /// The rows at `idx` (a subset of a unit-ball dataset stays in the unit ball).
    pub fn subset(&self, idx: &[usize]) -> UnitBallDataset {
        UnitBallDataset(self.0.subset(idx))
    }

    /// Consumes the wrapper.
    pub fn into_inner(self) -> Dataset {
        self.0
    }
}

impl std::ops::Deref for UnitBallDataset {
    type Target = Dataset;
    fn deref(&self) -> &Dataset {
        &self.0
    }
}
