//! The transforms of a fitted preprocessing: scale and PCA by row blocks, the unit-ball rule
//! and the bias feature, in the borrowed form (a new output beside the input) and the owned
//! form (in place, never two copies of the raw split). Both run the same per-row arithmetic
//! with the same block boundaries, so they agree bit for bit.

use super::*;

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
    /// Scale (+ PCA) of one block of `rows` rows, row `r` read by `src(r)`: writes
    /// `rows × projected_dim` values into `z` (resized), using `y` as scratch. Every path —
    /// borrowed, owned, max-norm — projects through this with the same [`BLOCK`] boundaries,
    /// so they agree bit for bit.
    pub(super) fn project_block<'a>(
        &self,
        rows: usize,
        src: impl Fn(usize) -> &'a [f32],
        y: &mut Vec<f32>,
        z: &mut Vec<f32>,
    ) {
        let d = self.input_dim;
        let scale = self.recipe.scale as f32;
        match &self.pca {
            None => {
                z.clear();
                for r in 0..rows {
                    z.extend(src(r).iter().map(|&x| x * scale));
                }
            }
            Some(p) => {
                let k = p.components.len() / d;
                y.clear();
                for r in 0..rows {
                    y.extend(src(r).iter().zip(&p.mean).map(|(&x, &m)| x * scale - m));
                }
                z.clear();
                z.resize(rows * k, 0.0);
                // z (rows×k) = y (rows×d) · componentsᵀ (d×k): rhs(j, c) = comp[c*d + j].
                linalg::gemm_f32(
                    z,
                    (rows, k, d),
                    linalg::Strided {
                        data: y,
                        rs: d,
                        cs: 1,
                    },
                    linalg::Strided {
                        data: &p.components,
                        rs: 1,
                        cs: d,
                    },
                );
            }
        }
    }

    /// Maps one projected row into the unit ball and appends the bias: writes `output_dim`.
    pub(super) fn finish_row(&self, z: &[f32], out: &mut [f32]) {
        out[..z.len()].copy_from_slice(z);
        self.finish_in_place(out);
    }

    /// [`Self::finish_row`] in place: `out` (length `output_dim`) holds the projected row in
    /// its first `projected_dim` entries.
    pub(super) fn finish_in_place(&self, out: &mut [f32]) {
        let k = self.projected_dim();
        let n = norm64(&out[..k]);
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
        if let Some(b32) = self.recipe.bias_feature() {
            let b = b32 as f64;
            let room = (1.0 - b * b).sqrt();
            scale_into(&mut out[..k], s * room, room * (1.0 - MARGIN));
            out[k] = b32;
            // Final check of the whole row, bias included (nudges the features only).
            for _ in 0..64 {
                if norm64(&out[..=k]) <= 1.0 {
                    return;
                }
                for v in out[..k].iter_mut() {
                    *v *= 1.0 - 1e-5;
                }
            }
            if norm64(&out[..=k]) > 1.0 {
                out[..k].fill(0.0); // unreachable in practice: b < 1 alone is inside the ball
            }
        } else {
            scale_into(&mut out[..k], s, 1.0);
        }
    }

    pub(super) fn check_input(&self, ds: &Dataset, idx: &[usize]) -> Result<()> {
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
        Ok(())
    }

    pub(super) fn check_train_rows(&self, train: &Dataset) -> Result<()> {
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
        Ok(())
    }

    /// The rows of another split kept by the class subset (all rows without one).
    pub(super) fn split_indices(&self, ds: &Dataset) -> Vec<usize> {
        match self.recipe.classes {
            Some(c) => (0..ds.n).filter(|&i| (ds.labels[i] as usize) < c).collect(),
            None => (0..ds.n).collect(),
        }
    }

    /// The preprocessed rows `idx` of `features` (rows of `input_dim` values) into a new
    /// `idx.len() × output_dim` buffer, block by block (no intermediate projected copy).
    pub(super) fn transform_rows(&self, features: &[f32], idx: &[usize]) -> Vec<f32> {
        let d = self.input_dim;
        let od = self.output_dim();
        let k = self.projected_dim();
        let mut out = vec![0f32; idx.len() * od];
        out.par_chunks_mut(BLOCK * od)
            .zip(idx.par_chunks(BLOCK))
            .for_each_init(
                || (Vec::new(), Vec::new()),
                |(y, z), (o, rows)| {
                    let row = |r: usize| &features[rows[r] * d..(rows[r] + 1) * d];
                    self.project_block(rows.len(), row, y, z);
                    for (orow, zr) in o.chunks_exact_mut(od).zip(z.chunks_exact(k)) {
                        self.finish_row(zr, orow);
                    }
                },
            );
        out
    }

    /// Wraps preprocessed rows: provenance steps, output shape, class count, checks.
    pub(super) fn finish_dataset(
        &self,
        features: Vec<f32>,
        labels: Vec<u32>,
        classes: usize,
        mut prov: crate::dataset::Provenance,
    ) -> Result<UnitBallDataset> {
        let od = self.output_dim();
        prov.steps.extend(self.steps());
        prov.feature_shape = vec![od];
        let classes = if self.recipe.classes.is_some() {
            prov.class_names.truncate(self.classes());
            self.classes()
        } else {
            classes
        };
        UnitBallDataset::new(Dataset::new(od, classes, features, labels, prov)?)
    }

    pub(super) fn transform(&self, ds: &Dataset, idx: &[usize]) -> Result<UnitBallDataset> {
        self.check_input(ds, idx)?;
        let out = self.transform_rows(&ds.features, idx);
        let labels: Vec<u32> = idx.iter().map(|&i| ds.labels[i]).collect();
        self.finish_dataset(out, labels, ds.classes, ds.provenance.clone())
    }

    /// The owned counterpart of [`Self::transform`]: consumes `ds` and never holds a second
    /// copy of its features. With PCA the (smaller) projected output is computed from the
    /// kept rows before the input is dropped; without PCA the kept rows are gathered in
    /// place ([`Dataset::into_subset`]'s kernel), mapped into the unit ball in place, and —
    /// with a bias — widened in place by one column.
    pub(super) fn transform_owned(&self, ds: Dataset, idx: &[usize]) -> Result<UnitBallDataset> {
        self.check_input(&ds, idx)?;
        let Dataset {
            d,
            classes,
            mut features,
            mut labels,
            provenance,
            ..
        } = ds;
        gather_rows_in_place(&mut labels, 1, idx);
        let m = idx.len();
        let out = if self.pca.is_some() {
            let out = self.transform_rows(&features, idx);
            drop(features);
            out
        } else {
            gather_rows_in_place(&mut features, d, idx);
            let scale = self.recipe.scale as f32;
            if let Some(b32) = self.recipe.bias_feature() {
                // Each row goes through a (d + 1)-wide scratch row, exactly as in
                // `transform_rows`; its d features come back in place; then one pass from
                // the last row down widens the rows (row j moves from j·d to j·(d+1) ≥ j·d,
                // never over a row still to be moved).
                features.par_chunks_mut(d).for_each_init(
                    || vec![0f32; d + 1],
                    |tmp, row| {
                        for (t, &x) in tmp.iter_mut().zip(row.iter()) {
                            *t = x * scale;
                        }
                        self.finish_in_place(tmp);
                        row.copy_from_slice(&tmp[..d]);
                    },
                );
                features.reserve_exact(m);
                features.resize(m * (d + 1), 0.0);
                for j in (0..m).rev() {
                    features.copy_within(j * d..(j + 1) * d, j * (d + 1));
                    features[j * (d + 1) + d] = b32;
                }
            } else {
                features.par_chunks_mut(d).for_each(|row| {
                    for v in row.iter_mut() {
                        *v *= scale;
                    }
                    self.finish_in_place(row);
                });
            }
            features
        };
        self.finish_dataset(out, labels, classes, provenance)
    }

    /// Preprocesses the training split it was fitted on (class subset and subsample
    /// included). Borrows the input, so it allocates the output beside it; a caller that
    /// has no further use for the raw split should use [`Self::apply_train_owned`].
    pub fn apply_train(&self, train: &Dataset) -> Result<UnitBallDataset> {
        self.check_train_rows(train)?;
        let idx = self.train_indices(train)?;
        self.transform(train, &idx)
    }

    /// [`Self::apply_train`] on an owned training split, bit-identical to it, without ever
    /// holding two copies of the features: class subset and subsample compact the rows in
    /// place, pixel scaling, the unit-ball rule and the bias work in place, and PCA writes
    /// only its smaller projected output before the raw rows are freed. Peak memory is one
    /// copy of the raw features plus `O(n)` indices (and the projected output with PCA).
    pub fn apply_train_owned(&self, train: Dataset) -> Result<UnitBallDataset> {
        self.check_train_rows(&train)?;
        let idx = self.train_indices(&train)?;
        self.transform_owned(train, &idx)
    }

    /// Preprocesses another split (test, queries): class subset, no subsample.
    pub fn apply(&self, ds: &Dataset) -> Result<UnitBallDataset> {
        let idx = self.split_indices(ds);
        self.transform(ds, &idx)
    }

    /// [`Self::apply`] on an owned split, bit-identical to it, in place like
    /// [`Self::apply_train_owned`].
    pub fn apply_owned(&self, ds: Dataset) -> Result<UnitBallDataset> {
        let idx = self.split_indices(&ds);
        self.transform_owned(ds, &idx)
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
        let (mut y, mut z) = (Vec::new(), Vec::new());
        self.project_block(1, |_| x, &mut y, &mut z);
        let mut out = vec![0f32; self.output_dim()];
        self.finish_row(&z, &mut out);
        Ok(out)
    }
}
