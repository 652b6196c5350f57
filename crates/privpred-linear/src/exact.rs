//! The f64 pass of the certification (docs/guarantees.md#errata (erratum 4.8)): the loss and gradient of the logistic
//! objective with every product, softmax and sum in f64, over the nonzero features only, and
//! the a-priori bound on its rounding error.
//!
//! Layout: [`SparseRows`] holds the nonzeros of the design (CSR, values as stored in f32 and
//! widened exactly), built once per training set and shared by every fit on it. With AVX2+FMA
//! (runtime detection, like the f32 kernel) the classes are processed as 4-lane f64 vectors:
//! θ is copied once per pass into a class-padded layout (stride C rounded up to 4), each row's
//! logits accumulate in two independent chains (even and odd nonzeros, so the FMA latency does
//! not serialise the row), and the gradient update is one FMA per 4 classes per nonzero. The
//! portable path (`rows_portable`) is the reference the vector path is tested against
//! (`vector_pass_matches_portable`, 1e-13).
//!
//! Both paths satisfy the rounding model of [`crate::train::Objective::f64_gradient_error_bound`]:
//! a dot product of n terms in any summation order, with or without fused multiply-adds, is off
//! by at most n·u·Σ|terms| to first order (Higham 2002, §3.1), and the exp/normalisation and
//! block sums are the same operations in both.

use crate::kernel::Design;

/// The nonzeros of one training set ([`SparseRows`]), built on first use and then shared by
/// every loss-perturbation preconditioner on that set (one per (λ, ρ_eff)): at N = 10⁶ one
/// [`SparseRows`] of MNIST-1M is ≈ 1.2 GB, and building one per preconditioner held ten of
/// them for the ten λ of a cross-validation (the study's fig4 outgrew a 24 GB machine). The
/// caller keeps one cell per training set and hands it to each preconditioner it builds on
/// that set ([`crate::methods::Reuse::nonzeros`]).
#[derive(Debug, Default)]
pub struct NonzerosCell(std::sync::OnceLock<std::sync::Arc<SparseRows>>);

impl NonzerosCell {
    /// The nonzeros of `design`, built on the first call. An error if the cell already holds
    /// the nonzeros of another design — of another shape, or of the same shape with any
    /// feature different (a cell handed to preconditioners of two training sets: a bug of the
    /// caller; the certificate's f64 pass and rounding bound read these rows, so they are
    /// checked against `design` entry by entry on every call, never trusted by shape: one
    /// read of the design. A loss-perturbation preconditioner calls it once and keeps the
    /// checked rows for its later fits).
    pub fn get_or_build(&self, design: &Design<'_>) -> crate::Result<std::sync::Arc<SparseRows>> {
        let mut built = false;
        let sp = self
            .0
            .get_or_init(|| {
                built = true;
                std::sync::Arc::new(SparseRows::new(design))
            })
            .clone();
        if sp.rows() != design.n || sp.cols() != design.d {
            return Err(crate::LinearError::Dimension(format!(
                "shared nonzeros of a {} × {} design used for a {} × {} one",
                sp.rows(),
                sp.cols(),
                design.n,
                design.d
            )));
        }
        if !built && let Some(i) = sp.first_mismatch(design) {
            return Err(crate::LinearError::Dimension(format!(
                "shared nonzeros used for another {} × {} design (row {i} differs): one cell per training set",
                design.n, design.d
            )));
        }
        Ok(sp)
    }
}

/// Rows per block of the f64 pass (the unit of parallel work; the rounding bound's block size).
pub(crate) const F64_BLOCK: usize = 1024;

/// The nonzero features of every row (CSR, values as stored in f32), built once per training
/// set: the f64 passes then skip zeros without branching (MNIST is ~80 % zeros). Also holds
/// the per-feature sums of the data-only factors of the a-priori rounding bound
/// (`SparseRows::rounding_bound`).
#[derive(Debug, Clone)]
pub struct SparseRows {
    ptr: Vec<usize>,
    idx: Vec<u32>,
    val: Vec<f32>,
    /// Sⱼ = Σᵢ |xᵢⱼ| (f64).
    col_abs: Vec<f64>,
    /// Tⱼ = Σᵢ |xᵢⱼ|·nᵢ·‖xᵢ‖₂ (nᵢ = nonzeros of row i; f64).
    col_weighted: Vec<f64>,
}

impl SparseRows {
    /// The nonzeros of `design` (its first `d` columns).
    pub fn new(design: &Design<'_>) -> Self {
        let d = design.d;
        // count (vectorised), then fill without branches: every feature is written at the
        // cursor, which only advances past nonzeros (one slot of slack per row)
        let nnz: usize = (0..design.n)
            .map(|i| design.row(i)[..d].iter().filter(|v| **v != 0.0).count())
            .sum();
        let mut ptr = Vec::with_capacity(design.n + 1);
        let mut idx = vec![0u32; nnz + d + 1];
        let mut val = vec![0f32; nnz + d + 1];
        let mut col_abs = vec![0f64; d];
        let mut col_weighted = vec![0f64; d];
        let mut at = 0usize;
        ptr.push(0);
        for i in 0..design.n {
            let start = at;
            let row = &design.row(i)[..d];
            for (j, &x) in row.iter().enumerate() {
                idx[at] = j as u32;
                val[at] = x;
                at += (x != 0.0) as usize;
            }
            ptr.push(at);
            let ni = (at - start) as f64;
            let norm = row
                .iter()
                .map(|&x| (x as f64) * (x as f64))
                .sum::<f64>()
                .sqrt();
            for (&j, &x) in idx[start..at].iter().zip(&val[start..at]) {
                let a = (x as f64).abs();
                col_abs[j as usize] += a;
                col_weighted[j as usize] += a * ni * norm;
            }
        }
        idx.truncate(at);
        val.truncate(at);
        SparseRows {
            ptr,
            idx,
            val,
            col_abs,
            col_weighted,
        }
    }

    /// The first row of `design` (its first `d` columns) whose nonzeros are not exactly these
    /// rows' (same features, same f32 values, bit for bit), or `None` when every row matches.
    /// Parallel over blocks of rows unless the caller runs kernels sequentially.
    pub fn first_mismatch(&self, design: &Design<'_>) -> Option<usize> {
        use rayon::prelude::*;
        let d = design.d;
        if self.rows() != design.n || self.cols() != d {
            return Some(0);
        }
        let block = |b: usize| -> Option<usize> {
            (b * F64_BLOCK..((b + 1) * F64_BLOCK).min(design.n)).find(|&i| {
                let (idx, val) = self.row(i);
                let row = &design.row(i)[..d];
                let mut k = 0usize;
                for (j, &x) in row.iter().enumerate() {
                    // `new` stores exactly the x != 0.0 (±0 skipped, NaN kept)
                    if x != 0.0 {
                        if k >= idx.len() || idx[k] as usize != j || val[k].to_bits() != x.to_bits()
                        {
                            return true;
                        }
                        k += 1;
                    }
                }
                k != idx.len()
            })
        };
        let blocks = design.n.div_ceil(F64_BLOCK);
        if crate::kernel::parallel_allowed() {
            (0..blocks).into_par_iter().find_map_first(block)
        } else {
            (0..blocks).find_map(block)
        }
    }

    /// Number of features per row (the design's `d`).
    pub fn cols(&self) -> usize {
        self.col_abs.len()
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Number of stored nonzeros.
    pub fn nonzeros(&self) -> usize {
        self.idx.len()
    }

    pub(crate) fn row(&self, i: usize) -> (&[u32], &[f32]) {
        let r = self.ptr[i]..self.ptr[i + 1];
        (&self.idx[r.clone()], &self.val[r])
    }

    /// An a-priori bound (O(D·C), no pass over the data) on the data part of the rounding
    /// error that [`crate::train::Objective::gradient_error_bound_sparse`] bounds with one
    /// pass: that bound's row term is Eᵢ = 2nᵢu·maxₖAᵢₖ + (C + 8)u + s with
    /// Aᵢₖ = Σⱼ|xᵢⱼθⱼₖ| ≤ ‖xᵢ‖₂·‖θ·ₖ‖₂ (Cauchy–Schwarz), so
    /// (1/N)Σᵢ|xᵢⱼ|Eᵢ ≤ (1/N)(2u·maxₖ‖θ·ₖ‖₂·Tⱼ + ((C + 8)u + s)·Sⱼ), with Sⱼ, Tⱼ the per-feature
    /// sums built once with the rows. Returns the ℓ2 norm over j of that right-hand side, × (1 +
    /// 1e-9) for the rounding of Sⱼ, Tⱼ and of this sum themselves (relative ≤ (N + D)u).
    pub(crate) fn rounding_bound(&self, theta: &[f64], c: usize) -> f64 {
        let u = f64::EPSILON / 2.0;
        let n = self.rows();
        let d = self.col_abs.len();
        let nblocks = n.div_ceil(F64_BLOCK);
        let sum_term = 2.0 * (F64_BLOCK + nblocks + 1) as f64 * u;
        let mut col_sq = vec![0f64; c];
        for row in theta.chunks_exact(c).take(d) {
            for (s, t) in col_sq.iter_mut().zip(row) {
                *s += t * t;
            }
        }
        let theta_col = col_sq.iter().fold(0f64, |m, &v| m.max(v)).sqrt();
        let nf = n.max(1) as f64;
        let per_row = (c + 8) as f64 * u + sum_term;
        let sq: f64 = self
            .col_abs
            .iter()
            .zip(&self.col_weighted)
            .map(|(s, t)| ((2.0 * u * theta_col * t + per_row * s) / nf).powi(2))
            .sum();
        sq.sqrt() * (1.0 + 1e-9)
    }
}

/// Adds Σᵢ xᵢ ⊗ (softmax(θᵀxᵢ) − onehot(yᵢ)) over `rows` into `acc` (row-major `d × c`) and
/// returns Σᵢ ℓᵢ: the vector path when AVX2+FMA is available and C ≤ 16, the portable one
/// otherwise. `padded` is θ in the vector path's layout ([`pad_theta`]), when available.
pub(crate) fn rows_pass(
    sp: &SparseRows,
    labels: &[u32],
    c: usize,
    theta: &[f64],
    padded: Option<&[f64]>,
    rows: std::ops::Range<usize>,
    acc: &mut [f64],
) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if let Some(tp) = padded
        && vector::available()
    {
        let cp = padded_classes(c);
        let d = acc.len() / c;
        let mut accp = vec![0f64; d * cp];
        // SAFETY: AVX2+FMA detected; the layouts are checked inside.
        let loss = unsafe {
            match cp / 4 {
                1 => vector::rows::<1>(sp, labels, c, tp, rows, &mut accp),
                2 => vector::rows::<2>(sp, labels, c, tp, rows, &mut accp),
                3 => vector::rows::<3>(sp, labels, c, tp, rows, &mut accp),
                _ => vector::rows::<4>(sp, labels, c, tp, rows, &mut accp),
            }
        };
        for (a, p) in acc.chunks_exact_mut(c).zip(accp.chunks_exact(cp)) {
            a.iter_mut().zip(p).for_each(|(x, y)| *x += y);
        }
        return loss;
    }
    let _ = padded;
    rows_portable(sp, labels, c, theta, rows, acc)
}

/// [`rows_pass`] for several θ at once (multiple right-hand sides): each row's nonzeros are
/// read once from memory for every problem, and each problem's loss and `accs[q]` are
/// computed by exactly the operations of a [`rows_pass`] call of its own (the same kernel per
/// row, in the same order), so the results are bit-identical to `thetas.len()` separate
/// passes (tested: `multi_pass_is_bit_identical`). `padded[q]` is `pad_theta(thetas[q])`.
pub(crate) fn rows_pass_multi(
    sp: &SparseRows,
    labels: &[u32],
    c: usize,
    thetas: &[&[f64]],
    padded: &[Option<Vec<f64>>],
    rows: std::ops::Range<usize>,
    accs: &mut [Vec<f64>],
) -> Vec<f64> {
    assert!(thetas.len() == padded.len() && thetas.len() == accs.len());
    #[cfg(target_arch = "x86_64")]
    if padded.iter().all(|p| p.is_some()) && vector::available() {
        let cp = padded_classes(c);
        let d = accs.first().map_or(0, |a| a.len() / c);
        let mut accp = vec![vec![0f64; d * cp]; thetas.len()];
        let mut loss = vec![0f64; thetas.len()];
        for i in rows {
            for ((tp, ap), lq) in padded.iter().zip(accp.iter_mut()).zip(loss.iter_mut()) {
                let tp = tp.as_deref().unwrap_or(&[]);
                // SAFETY: AVX2+FMA detected; the layouts are checked inside.
                *lq += unsafe {
                    match cp / 4 {
                        1 => vector::rows::<1>(sp, labels, c, tp, i..i + 1, ap),
                        2 => vector::rows::<2>(sp, labels, c, tp, i..i + 1, ap),
                        3 => vector::rows::<3>(sp, labels, c, tp, i..i + 1, ap),
                        _ => vector::rows::<4>(sp, labels, c, tp, i..i + 1, ap),
                    }
                };
            }
        }
        for (acc, ap) in accs.iter_mut().zip(&accp) {
            for (a, p) in acc.chunks_exact_mut(c).zip(ap.chunks_exact(cp)) {
                a.iter_mut().zip(p).for_each(|(x, y)| *x += y);
            }
        }
        return loss;
    }
    thetas
        .iter()
        .zip(accs.iter_mut())
        .map(|(t, acc)| rows_portable(sp, labels, c, t, rows.clone(), acc))
        .collect()
}

/// C rounded up to the vector width (4 f64 lanes).
fn padded_classes(c: usize) -> usize {
    c.div_ceil(4) * 4
}

/// θ (row-major `d × c`) in the vector path's class-padded layout, or `None` when the vector
/// path does not apply (no AVX2+FMA, or C > 16).
pub(crate) fn pad_theta(theta: &[f64], c: usize) -> Option<Vec<f64>> {
    #[cfg(target_arch = "x86_64")]
    if c <= 16 && vector::available() {
        let cp = padded_classes(c);
        let mut out = vec![0f64; theta.len() / c * cp];
        for (o, t) in out.chunks_exact_mut(cp).zip(theta.chunks_exact(c)) {
            o[..c].copy_from_slice(t);
        }
        return Some(out);
    }
    let _ = (theta, c);
    None
}

/// The portable f64 pass (the reference of the vector path): per row, the logits as one
/// recursive sum over the nonzeros, the max-shifted softmax with one `exp` per class, and the
/// gradient update.
pub(crate) fn rows_portable(
    sp: &SparseRows,
    labels: &[u32],
    c: usize,
    theta: &[f64],
    rows: std::ops::Range<usize>,
    acc: &mut [f64],
) -> f64 {
    let mut l = vec![0f64; c];
    let mut loss = 0.0;
    for i in rows {
        let (ix, xv) = sp.row(i);
        l.iter_mut().for_each(|v| *v = 0.0);
        for (&j, &xj) in ix.iter().zip(xv) {
            let (j, xj) = (j as usize, xj as f64);
            for (lk, tk) in l.iter_mut().zip(&theta[j * c..(j + 1) * c]) {
                *lk += xj * tk;
            }
        }
        loss += softmax_residual(&mut l, labels[i] as usize);
        for (&j, &xj) in ix.iter().zip(xv) {
            let (j, xj) = (j as usize, xj as f64);
            for (a, rk) in acc[j * c..(j + 1) * c].iter_mut().zip(&l) {
                *a += xj * rk;
            }
        }
    }
    loss
}

/// Replaces the logits `l` by softmax(l) − onehot(y) and returns the loss log Σₖ e^{lₖ} − l_y
/// (max-shifted; one `exp` per class).
fn softmax_residual(l: &mut [f64], y: usize) -> f64 {
    let m = l.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
    let shifted_y = l[y] - m;
    let mut z = 0.0;
    for lk in l.iter_mut() {
        *lk = (*lk - m).exp();
        z += *lk;
    }
    for lk in l.iter_mut() {
        *lk /= z;
    }
    l[y] -= 1.0;
    z.ln() - shifted_y
}

#[cfg(target_arch = "x86_64")]
mod vector {
    use super::SparseRows;
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        crate::kernel::avx2_fma_available()
    }

    /// The f64 pass with the classes in `NV` 4-lane vectors (θ and `acc` class-padded to
    /// stride 4·NV, padding lanes of θ zero, so their residuals are 0 and `acc`'s padding lanes
    /// stay 0).
    ///
    /// # Safety
    /// AVX2+FMA available.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::needless_range_loop)] // register tiles read best as index loops
    pub unsafe fn rows<const NV: usize>(
        sp: &SparseRows,
        labels: &[u32],
        c: usize,
        tp: &[f64],
        rows: std::ops::Range<usize>,
        accp: &mut [f64],
    ) -> f64 {
        let cp = 4 * NV;
        assert!(c <= cp && tp.len() == accp.len() && tp.len().is_multiple_of(cp));
        // every stored index is < sp.cols() (SparseRows::new), so j < d for every nonzero
        assert!(sp.cols() <= tp.len() / cp);
        let mut loss = 0.0;
        let mut l = [0f64; 16];
        for i in rows {
            let (ix, xv) = sp.row(i);
            let mut a0 = [_mm256_setzero_pd(); NV];
            let mut a1 = [_mm256_setzero_pd(); NV];
            let tptr = tp.as_ptr();
            let pairs = ix.len() / 2;
            for t in 0..pairs {
                let (j0, j1) = (ix[2 * t] as usize, ix[2 * t + 1] as usize);
                // SAFETY: j < sp.cols() ≤ d (asserted above), so j·cp + 4v + 4 ≤ tp.len().
                unsafe {
                    let x0 = _mm256_set1_pd(xv[2 * t] as f64);
                    let x1 = _mm256_set1_pd(xv[2 * t + 1] as f64);
                    for v in 0..NV {
                        a0[v] =
                            _mm256_fmadd_pd(x0, _mm256_loadu_pd(tptr.add(j0 * cp + 4 * v)), a0[v]);
                        a1[v] =
                            _mm256_fmadd_pd(x1, _mm256_loadu_pd(tptr.add(j1 * cp + 4 * v)), a1[v]);
                    }
                }
            }
            if ix.len() % 2 == 1 {
                let j = ix[ix.len() - 1] as usize;
                // SAFETY: as above.
                unsafe {
                    let x = _mm256_set1_pd(xv[ix.len() - 1] as f64);
                    for v in 0..NV {
                        a0[v] =
                            _mm256_fmadd_pd(x, _mm256_loadu_pd(tptr.add(j * cp + 4 * v)), a0[v]);
                    }
                }
            }
            for v in 0..NV {
                // SAFETY: 4v + 4 ≤ 16.
                unsafe { _mm256_storeu_pd(l.as_mut_ptr().add(4 * v), _mm256_add_pd(a0[v], a1[v])) };
            }
            loss += super::softmax_residual(&mut l[..c], labels[i] as usize);
            // the padding lanes held zero logits: their residual is 0
            l[c..].iter_mut().for_each(|v| *v = 0.0);
            let mut r = [_mm256_setzero_pd(); NV];
            for v in 0..NV {
                // SAFETY: 4v + 4 ≤ 16.
                r[v] = unsafe { _mm256_loadu_pd(l.as_ptr().add(4 * v)) };
            }
            let aptr = accp.as_mut_ptr();
            for (&j, &x) in ix.iter().zip(xv) {
                let j = j as usize;
                // SAFETY: j < d, so j·cp + 4v + 4 ≤ accp.len().
                unsafe {
                    let xb = _mm256_set1_pd(x as f64);
                    for v in 0..NV {
                        let p = aptr.add(j * cp + 4 * v);
                        _mm256_storeu_pd(p, _mm256_fmadd_pd(xb, r[v], _mm256_loadu_pd(p)));
                    }
                }
            }
        }
        loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MNIST-like sparse rows (≈ 19 % nonzeros, unit ℓ2 norm, a constant bias feature).
    fn sparse_design(n: usize, d: usize, c: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        // row-major n × d, as `Design::new` reads it (it pads to a multiple of 8 itself)
        let mut f = vec![0f32; n * d];
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let row = &mut f[i * d..(i + 1) * d];
            for v in row.iter_mut().take(d - 1) {
                if rng.random::<f64>() < 0.19 {
                    *v = rng.random::<f32>();
                }
            }
            row[d - 1] = 0.5;
            let norm = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
            row.iter_mut().for_each(|v| *v = (*v as f64 / norm) as f32);
            y.push(rng.random_range(0..c as u32));
        }
        (f, y)
    }

    /// A shared nonzeros cell serves only the design it was built from: the same rows pass
    /// (in parallel and sequentially), and a design of the same shape with one feature changed,
    /// a zero made nonzero, or a nonzero made zero — in the first, a middle, or the last block
    /// of rows — is refused with the row named, so the certificate never reads another
    /// training set's rows.
    #[test]
    fn shared_nonzeros_refuse_another_design_of_the_same_shape() {
        let (n, d, c) = (2 * F64_BLOCK + 37, 27, 3);
        let (f, y) = sparse_design(n, d, c, 11);
        let design = Design::new(&f, &y, d, c);
        let cell = NonzerosCell::default();
        let sp = cell.get_or_build(&design).unwrap();
        assert_eq!(sp.first_mismatch(&design), None);
        assert_eq!(
            crate::kernel::sequential(|| sp.first_mismatch(&design)),
            None
        );
        assert!(cell.get_or_build(&Design::new(&f, &y, d, c)).is_ok());
        for row in [0, F64_BLOCK + 5, n - 1] {
            let nz = (0..d - 1).find(|&j| f[row * d + j] != 0.0).unwrap();
            let z = (0..d - 1).find(|&j| f[row * d + j] == 0.0).unwrap();
            let edits: [(usize, f32); 3] = [
                (nz, f32::from_bits(f[row * d + nz].to_bits() ^ 1)), // one ulp
                (z, 1e-3),
                (nz, 0.0),
            ];
            for (j, v) in edits {
                let mut g = f.clone();
                g[row * d + j] = v;
                let other = Design::new(&g, &y, d, c);
                assert_eq!(sp.first_mismatch(&other), Some(row));
                assert_eq!(
                    crate::kernel::sequential(|| sp.first_mismatch(&other)),
                    Some(row)
                );
                let err = cell.get_or_build(&other).unwrap_err().to_string();
                assert!(err.contains(&format!("row {row} differs")), "{err}");
            }
        }
        // −0.0 is a zero, as `SparseRows::new` reads it
        let mut g = f.clone();
        let z = (0..d - 1).find(|&j| f[j] == 0.0).unwrap();
        g[z] = -0.0;
        assert_eq!(sp.first_mismatch(&Design::new(&g, &y, d, c)), None);
    }

    /// The vector path computes the portable pass's loss and gradient (different summation
    /// order and fused multiply-adds: equal to rounding, 1e-13 relative), for every padded class
    /// count, odd and even row lengths, and empty rows.
    #[test]
    fn vector_pass_matches_portable() {
        use rand::{RngExt, SeedableRng};
        for (n, d, c, seed) in [
            (700, 31, 10, 1),
            (300, 9, 2, 2),
            (257, 17, 3, 3),
            (129, 40, 13, 4),
            (64, 8, 16, 5),
            (50, 6, 17, 6),
        ] {
            let (mut f, y) = sparse_design(n, d, c, seed);
            f[3 * d..4 * d].iter_mut().for_each(|v| *v = 0.0); // an empty row
            let design = Design::new(&f, &y, d, c);
            let sp = SparseRows::new(&design);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let theta: Vec<f64> = (0..d * c)
                .map(|_| (rng.random::<f64>() - 0.5) * 6.0)
                .collect();
            let tp = pad_theta(&theta, c);
            #[cfg(target_arch = "x86_64")]
            assert_eq!(tp.is_some(), c <= 16 && vector::available());
            let (mut a, mut b) = (vec![0f64; d * c], vec![0f64; d * c]);
            let (mut la, mut lb) = (0.0, 0.0);
            for blk in 0..n.div_ceil(F64_BLOCK.min(100)) {
                let rows = blk * 100..((blk + 1) * 100).min(n);
                la += rows_portable(&sp, &y, c, &theta, rows.clone(), &mut a);
                lb += rows_pass(&sp, &y, c, &theta, tp.as_deref(), rows, &mut b);
            }
            assert!(
                (la - lb).abs() <= 1e-13 * la.abs(),
                "C = {c}: loss {la} vs {lb}"
            );
            let scale = a.iter().fold(0f64, |m, v| m.max(v.abs()));
            for (i, (x, z)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - z).abs() <= 1e-13 * scale,
                    "C = {c}, coordinate {i}: {x} vs {z}"
                );
            }
        }
    }

    /// Speed of the vector path against the portable one on MNIST-shaped data (run with
    /// `--ignored --nocapture`); the minimum of interleaved runs, so that contention cancels.
    #[test]
    #[ignore]
    fn bench_vector_vs_portable() {
        use std::time::Instant;
        let (n, d, c) = (60_000, 785, 10);
        let (f, y) = sparse_design(n, d, c, 1);
        let mnist = std::env::var("PRIVPRED_BENCH_MNIST").is_ok().then(|| {
            use privpred_data::{load::LoadOptions, preprocess::Preprocessing, spec::DatasetSpec};
            let raw = privpred_data::load::load(
                &DatasetSpec::parse("mnist").unwrap(),
                &LoadOptions::default(),
            )
            .unwrap();
            let p = Preprocessing {
                bias: true,
                ..Preprocessing::default()
            };
            p.fit(&raw.train, 0)
                .unwrap()
                .apply_train(&raw.train)
                .unwrap()
        });
        let design = match &mnist {
            Some(m) => Design::new(&m.features, &m.labels, m.d, m.classes),
            None => Design::new(&f, &y, d, c),
        };
        let y = design.y.to_vec();
        let sp = SparseRows::new(&design);
        let theta: Vec<f64> = (0..d * c)
            .map(|i| ((i * 7919) % 13) as f64 * 0.1 - 0.6)
            .collect();
        let (mut best_p, mut best_v) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..7 {
            let mut acc = vec![0f64; d * c];
            let t = Instant::now();
            for b in 0..n.div_ceil(F64_BLOCK) {
                rows_portable(
                    &sp,
                    &y,
                    c,
                    &theta,
                    b * F64_BLOCK..((b + 1) * F64_BLOCK).min(n),
                    &mut acc,
                );
            }
            best_p = best_p.min(t.elapsed().as_secs_f64());
            let mut acc = vec![0f64; d * c];
            let t = Instant::now();
            let tp = pad_theta(&theta, c);
            for b in 0..n.div_ceil(F64_BLOCK) {
                rows_pass(
                    &sp,
                    &y,
                    c,
                    &theta,
                    tp.as_deref(),
                    b * F64_BLOCK..((b + 1) * F64_BLOCK).min(n),
                    &mut acc,
                );
            }
            best_v = best_v.min(t.elapsed().as_secs_f64());
        }
        println!(
            "f64 pass, {} nonzeros: portable {:.1} ms, vector {:.1} ms",
            sp.nonzeros(),
            best_p * 1e3,
            best_v * 1e3
        );
    }
}
