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
    /// The schema a table was read through (its rows are already inside the unit ball);
    /// recorded with the model so that queries are mapped the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<crate::schema::Schema>,
    /// A table read without a schema (plain numbers, no declared bounds): training on it is
    /// refused until a schema says how to map its rows ([`crate::Preprocessing::for_data`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_schema: bool,
    /// The class count C was read from the labels (the largest label + 1 of a `csv-pixels:`
    /// file or an `idx:` directory) instead of being declared: a statistic of the data, which
    /// a private method refuses to release ([`Dataset::require_declared_classes`]). Never
    /// written anywhere.
    #[serde(skip)]
    pub classes_from_labels: bool,
    /// This split and its sibling are a seeded hold-out of one training input (a single
    /// file or folder without a test split): the input is both together. Never written.
    #[serde(skip)]
    pub held_out: bool,
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
        if classes > crate::limits::MAX_CLASSES {
            return Err(DataError::Invariant(format!(
                "{}: {classes} classes, more than the limit of {} (privpred_data::limits::MAX_CLASSES)",
                provenance.name,
                crate::limits::MAX_CLASSES
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

    /// Refuses a class count read from the labels: C (the shape of θ, the model's output
    /// layer) is released with every private model, so it must be a public parameter — a
    /// named data set's published classes, a schema's label classes, an image folder's class
    /// folders, or the count the caller declares (`LoadOptions::classes`, `--classes`).
    /// Under replace-one, one row given a new largest label would otherwise change C.
    pub fn require_declared_classes(&self) -> Result<()> {
        if !self.provenance.classes_from_labels {
            return Ok(());
        }
        Err(DataError::InvalidArgument {
            name: "classes",
            value: "none".into(),
            expected: format!(
                "the number of classes C declared (--classes C, labels 0..C-1) for {}: read from the labels (here {}) it would depend on the private data and be released with the model",
                self.provenance.name, self.classes
            ),
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

    /// [`Dataset::subset`] without a second copy: consumes the dataset and moves the rows at
    /// `idx` (in that order) into place inside its own feature buffer, then releases the rest.
    /// Bit-identical to `subset(idx)`. The indices must be distinct and below `n`; a
    /// repeated or out-of-range index is an error (a row cannot be used twice in place).
    pub fn into_subset(mut self, idx: &[usize]) -> Result<Dataset> {
        let mut seen = vec![false; self.n];
        for &i in idx {
            match seen.get_mut(i) {
                Some(s) if !*s => *s = true,
                Some(_) => {
                    return Err(DataError::InvalidArgument {
                        name: "row index",
                        value: i.to_string(),
                        expected: "distinct row indices (an in-place subset uses each row once)"
                            .into(),
                    });
                }
                None => {
                    return Err(DataError::InvalidArgument {
                        name: "row index",
                        value: i.to_string(),
                        expected: format!("an index below the {} rows", self.n),
                    });
                }
            }
        }
        drop(seen);
        gather_rows_in_place(&mut self.features, self.d, idx);
        gather_rows_in_place(&mut self.labels, 1, idx);
        self.n = idx.len();
        Ok(self)
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

/// Rearranges `data` (rows of `width` elements) in place so that row `j` becomes the old row
/// `idx[j]`, truncates it to `idx.len()` rows and releases the spare capacity — the in-place
/// counterpart of gathering into a new buffer, moving each kept row at most twice and
/// allocating only `O(idx.len())` indices and one row. `idx` must hold distinct indices below
/// the row count (callers check or construct it so).
pub(crate) fn gather_rows_in_place<T: Copy>(data: &mut Vec<T>, width: usize, idx: &[usize]) {
    let m = idx.len();
    if idx.iter().enumerate().any(|(j, &i)| i != j) {
        // 1. Compact the kept rows in ascending source order: row q moves down from
        //    sorted[q] ≥ q, so forward copies never overwrite a row still to be moved.
        let mut sorted = idx.to_vec();
        sorted.sort_unstable();
        for (q, &i) in sorted.iter().enumerate() {
            if i != q {
                data.copy_within(i * width..(i + 1) * width, q * width);
            }
        }
        // 2. Position q now holds source row sorted[q]; output row j must take position
        //    rank(idx[j]). Apply that permutation by following its cycles.
        if sorted.as_slice() != idx {
            let src: Vec<usize> = idx
                .iter()
                .map(|i| match sorted.binary_search(i) {
                    Ok(q) | Err(q) => q,
                })
                .collect();
            drop(sorted);
            permute_rows(&mut data[..m * width], width, &src);
        }
    }
    data.truncate(m * width);
    data.shrink_to_fit();
}

/// In place: new row `j` = old row `src[j]`, where `src` is a permutation of `0..rows`.
fn permute_rows<T: Copy>(data: &mut [T], width: usize, src: &[usize]) {
    let mut done = vec![false; src.len()];
    let mut tmp: Vec<T> = Vec::with_capacity(width);
    for start in 0..src.len() {
        if done[start] {
            continue;
        }
        done[start] = true;
        if src[start] == start {
            continue;
        }
        tmp.clear();
        tmp.extend_from_slice(&data[start * width..(start + 1) * width]);
        let mut j = start;
        loop {
            let k = src[j];
            if k == start {
                data[j * width..(j + 1) * width].copy_from_slice(&tmp);
                break;
            }
            data.copy_within(k * width..(k + 1) * width, j * width);
            done[k] = true;
            j = k;
        }
    }
}

/// A dataset whose every row satisfies ‖x‖₂ ≤ 1 (computed in f64): what the linear methods
/// accept. The only way to build one is [`UnitBallDataset::new`], which checks every row.
///
/// It also keeps, built on first use, its features with every row zero-padded to a stride
/// ([`UnitBallDataset::padded_features`]): the linear kernels read rows padded to a multiple
/// of 8, and without the shared copy every fit copied the whole matrix (≈ 190 MB per
/// loss-perturbation fit on MNIST with the bias feature, d = 785).
#[derive(Debug, Clone, PartialEq)]
pub struct UnitBallDataset(Dataset, PaddedCache);

/// The padded copy of a [`UnitBallDataset`]'s features: `(stride, rows)`, built once, shared
/// by clones. Not part of the dataset's value: equal datasets compare equal with or without
/// it, and `Debug` shows only whether it is built.
#[derive(Clone, Default)]
struct PaddedCache(std::sync::OnceLock<(usize, std::sync::Arc<[f32]>)>);

impl PartialEq for PaddedCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for PaddedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.get() {
            Some((stride, _)) => write!(f, "PaddedCache(stride {stride})"),
            None => write!(f, "PaddedCache(empty)"),
        }
    }
}

/// `features` (`n × d`, row-major) with every row zero-padded to `stride ≥ d`.
fn pad_rows(features: &[f32], d: usize, stride: usize) -> Vec<f32> {
    let n = features.len().checked_div(d).unwrap_or(0);
    let mut v = vec![0f32; n * stride];
    for (dst, src) in v.chunks_exact_mut(stride).zip(features.chunks_exact(d)) {
        dst[..d].copy_from_slice(src);
    }
    v
}

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
        Ok(UnitBallDataset(ds, PaddedCache::default()))
    }

    /// The features with every row zero-padded to `stride` values (`n × stride`, row-major):
    /// the features themselves when `stride == d`; otherwise a copy built on the first call and
    /// kept (shared by clones) for the next calls with the same stride, so repeated fits on one
    /// training set share one copy. A call with another stride than the kept one gets a fresh
    /// copy. `None` when `stride < d`.
    pub fn padded_features(&self, stride: usize) -> Option<std::borrow::Cow<'_, [f32]>> {
        use std::borrow::Cow;
        let d = self.0.d;
        if stride < d {
            return None;
        }
        if stride == d {
            return Some(Cow::Borrowed(&self.0.features));
        }
        let (s, rows) = self
            .1
            .0
            .get_or_init(|| (stride, pad_rows(&self.0.features, d, stride).into()));
        Some(if *s == stride {
            Cow::Borrowed(&rows[..])
        } else {
            Cow::Owned(pad_rows(&self.0.features, d, stride))
        })
    }

    /// The inner dataset.
    pub fn inner(&self) -> &Dataset {
        &self.0
    }

    /// The rows at `idx` (a subset of a unit-ball dataset stays in the unit ball).
    pub fn subset(&self, idx: &[usize]) -> UnitBallDataset {
        UnitBallDataset(self.0.subset(idx), PaddedCache::default())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(d: usize, n: usize) -> UnitBallDataset {
        let f: Vec<f32> = (0..n * d).map(|i| (i % 7) as f32 * 0.01).collect();
        let y: Vec<u32> = (0..n as u32).map(|i| i % 2).collect();
        UnitBallDataset::new(Dataset::new(d, 2, f, y, Provenance::default()).unwrap()).unwrap()
    }

    /// The padded rows are the rows followed by zeros; the copy is built once and shared by
    /// later calls and by clones; stride d borrows the features; a smaller stride is refused;
    /// another stride gets its own (uncached) copy.
    #[test]
    fn padded_features_are_the_rows_zero_padded_and_built_once() {
        let (d, n) = (5, 4);
        let ds = unit(d, n);
        let p = ds.padded_features(8).unwrap();
        assert_eq!(p.len(), n * 8);
        for (i, row) in p.chunks_exact(8).enumerate() {
            assert_eq!(&row[..d], &ds.features[i * d..(i + 1) * d]);
            assert!(row[d..].iter().all(|&v| v == 0.0));
        }
        assert!(matches!(p, std::borrow::Cow::Borrowed(_)));
        let again = ds.padded_features(8).unwrap();
        assert_eq!(p.as_ptr(), again.as_ptr(), "second call rebuilt the copy");
        let clone = ds.clone();
        assert_eq!(clone.padded_features(8).unwrap().as_ptr(), p.as_ptr());
        assert_eq!(clone, ds);
        assert_eq!(
            ds.padded_features(d).unwrap().as_ptr(),
            ds.features.as_ptr()
        );
        assert!(ds.padded_features(d - 1).is_none());
        let other = ds.padded_features(16).unwrap();
        assert!(matches!(other, std::borrow::Cow::Owned(_)));
        assert_eq!(&other[..d], &ds.features[..d]);
        assert!(other[d..16].iter().all(|&v| v == 0.0));
        // a subset has its own (empty) cache
        let sub = ds.subset(&[1, 3]);
        assert_eq!(
            &sub.padded_features(8).unwrap()[..d],
            &ds.features[d..2 * d]
        );
    }
}
