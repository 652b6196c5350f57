//! The sparse per-step pass of linear DP-SGD: the same clipped gradient sum as the dense
//! register-tiled kernel ([`crate::kernel::clipped_grad_sum`] on its AVX2 path), **bit for
//! bit**, visiting only the nonzero features of each row (MNIST: 19 % of them).
//!
//! Why the result is identical: every f32 sum of the dense kernel is a chain of fused
//! multiply-adds `acc ← x·w + acc` in a fixed order (the forward: per class and per lane
//! `j mod 8`, j ascending, then the same horizontal reduction tree; the backward: per
//! parameter, the batch's rows in order). A term with x = 0 adds ±0 to the chain, which leaves
//! a finite accumulator unchanged (an accumulator started at +0 never becomes −0). So skipping
//! the zero features while keeping each chain's order gives the same floats, **provided the
//! weights and residuals are finite**: [`weights_bounded`] checks |w| ≤ 1e30 before each step
//! (then every logit is finite, |logit| ≤ 1e30·dp), and the caller falls back to the dense
//! kernel otherwise. The softmax, the closed-form per-example norm ‖x‖·‖p − y‖ and the
//! clipping scale are the dense kernel's f64 operations on the same values, one row at a time
//! (IEEE operations give the same result in a scalar as in a vector lane; `exp` is the same
//! Cody–Waite polynomial). The test `sparse_pass_equals_the_dense_kernel_bit_for_bit` checks
//! it against the dense kernel on real-looking sparse data, clipped and unclipped rows.
//!
//! Layout: the weights are copied feature-major with 16 class slots per feature (`wt[j·16 + k]`),
//! the gradient sum is accumulated feature-major (`gt`), so one nonzero feature costs two
//! 8-wide FMAs in the forward and two in the backward; the nonzeros of a row are stored by lane
//! (`j mod 8`, then j) so that each of the forward's eight per-lane chains is one run.

use crate::kernel::Design;

/// Class slots per feature in the feature-major copies (classes ≤ 12 use the dense kernel's
/// AVX2 path, whose results this pass reproduces).
pub(crate) const SLOTS: usize = 16;

/// Largest class count this pass handles (the dense kernel's register-tiled bound).
pub(crate) const MAX_CLASSES: usize = 12;

/// Use the sparse pass when at most this fraction of the padded features is nonzero.
const MAX_DENSITY: f64 = 0.4;

/// The nonzero features of every row, with each row's Euclidean norm (the dense computation's
/// f64 sum, in column order). Row `i`'s entries are `start[i]..start[i + 1]`, 8·L of them:
/// entry `8t + l` is the t-th nonzero of lane `l = j mod 8` (j ascending), lanes shorter than
/// the row's longest padded with (j = l, x = 0), an exact no-op in every FMA chain.
pub(crate) struct SparseRows {
    start: Vec<usize>,
    /// (j, x) pairs; every j < `dp` (by construction).
    ent: Vec<(u32, f32)>,
    dp: usize,
    /// ‖x_i‖₂ in f64.
    pub norms: Vec<f64>,
}

impl SparseRows {
    /// The sparse rows of `design`, or `None` when the pass does not apply (no AVX2+FMA, more
    /// than [`MAX_CLASSES`] classes, or denser than [`MAX_DENSITY`]).
    pub(crate) fn of(design: &Design<'_>) -> Option<SparseRows> {
        if !simd_available() || design.c > MAX_CLASSES || design.c == 0 {
            return None;
        }
        let (n, dp) = (design.n, design.dp);
        let limit = (MAX_DENSITY * (n * dp) as f64) as usize;
        let mut s = SparseRows {
            start: Vec::with_capacity(n + 1),
            ent: Vec::new(),
            dp,
            norms: Vec::with_capacity(n),
        };
        let mut lanes: [Vec<(u32, f32)>; 8] = Default::default();
        for i in 0..n {
            let row = design.row(i);
            s.start.push(s.ent.len());
            for (l, lane) in lanes.iter_mut().enumerate() {
                lane.clear();
                for j in (l..dp).step_by(8) {
                    if row[j] != 0.0 {
                        lane.push((j as u32, row[j]));
                    }
                }
            }
            let len = lanes.iter().map(Vec::len).max().unwrap_or(0);
            for t in 0..len {
                for (l, lane) in lanes.iter().enumerate() {
                    s.ent.push(lane.get(t).copied().unwrap_or((l as u32, 0.0)));
                }
            }
            if s.ent.len() > limit {
                return None;
            }
            // the dense code's sum over all columns in order (train_dpsgd's ‖x‖)
            s.norms.push(
                row.iter()
                    .map(|&v| (v as f64) * (v as f64))
                    .sum::<f64>()
                    .sqrt(),
            );
        }
        s.start.push(s.ent.len());
        Some(s)
    }
}

/// Whether every weight is finite with |w| ≤ 1e30 (the condition under which the sparse pass
/// equals the dense kernel; see the module documentation).
pub(crate) fn weights_bounded(w: &[f64]) -> bool {
    w.iter().all(|v| v.abs() <= 1e30)
}

/// Per-training workspace: the feature-major weights and gradient sum.
pub(crate) struct Workspace {
    wt: Vec<f32>,
    gt: Vec<f32>,
    c: usize,
    d: usize,
    dp: usize,
}

impl Workspace {
    pub(crate) fn new(c: usize, d: usize, dp: usize) -> Self {
        Workspace {
            wt: vec![0f32; dp * SLOTS],
            gt: vec![0f32; dp * SLOTS],
            c,
            d,
            dp,
        }
    }

    /// Copies the class-major f64 weights `w[k·dp + j]` as f32 (the dense kernel's cast).
    pub(crate) fn set_weights(&mut self, w: &[f64]) {
        for k in 0..self.c {
            for j in 0..self.dp {
                self.wt[j * SLOTS + k] = w[k * self.dp + j] as f32;
            }
        }
    }

    /// Writes the gradient sum class-major into `g32[k·dp + j]` (j < d).
    pub(crate) fn gradient_into(&self, g32: &mut [f32]) {
        for k in 0..self.c {
            for j in 0..self.d {
                g32[k * self.dp + j] = self.gt[j * SLOTS + k];
            }
        }
    }
}

/// `g` ← Σ over `batch` of the clipped per-example gradients (into the workspace; read it
/// with [`Workspace::gradient_into`]); returns the number of clipped rows. The same floats as
/// [`crate::kernel::clipped_grad_sum`] when [`weights_bounded`] holds.
pub(crate) fn clipped_grad_sum(
    rows: &SparseRows,
    labels: &[u32],
    ws: &mut Workspace,
    batch: &[usize],
    clip: f64,
) -> u64 {
    ws.gt.iter_mut().for_each(|v| *v = 0.0);
    let c = ws.c;
    let mut clipped = 0;
    let mut resid = [0f32; SLOTS];
    assert!(ws.wt.len() >= rows.dp * SLOTS && ws.gt.len() >= rows.dp * SLOTS);
    for (p, &i) in batch.iter().enumerate() {
        // rows are drawn at random: fetch the entries of the row after next meanwhile
        if let Some(&next) = batch.get(p + 2) {
            prefetch(&rows.ent[rows.start[next]..rows.start[next + 1]]);
        }
        // SAFETY: AVX2+FMA were detected when `rows` was built (`SparseRows::of`); every
        // index is < dp, and wt/gt hold dp·SLOTS floats.
        let logits = unsafe { simd::forward(rows, i, &ws.wt) };
        let y = labels[i] as usize;
        // SAFETY: as above.
        let over = unsafe { simd::residual(&logits[..c], y, rows.norms[i], clip, &mut resid) };
        clipped += u64::from(over);
        // SAFETY: as above.
        unsafe { simd::backward(rows, i, &resid, &mut ws.gt) };
    }
    clipped
}

/// The dense kernel's softmax residual of one row, clipped: `resid[k] = f32((p_k − y_k)·s)`
/// with s = min(1, ν/(‖x‖·‖p − y‖)) in the dense kernel's f64 operation order. Returns whether
/// the row was clipped. Inlined into [`simd::residual`] (FMA enabled).
#[inline(always)]
fn residual(logits: &[f32], y: usize, xnorm: f64, clip: f64, resid: &mut [f32; SLOTS]) -> bool {
    let c = logits.len();
    // the dense kernel's max_pd(m, l): m when m > l, else l
    let mut m = logits[0] as f64;
    for &l in &logits[1..] {
        let l = l as f64;
        m = if m > l { m } else { l };
    }
    let mut e = [0f64; MAX_CLASSES];
    let mut sum = 0.0;
    for k in 0..c {
        e[k] = exp_nonpositive(logits[k] as f64 - m);
        sum += e[k];
    }
    let inv = 1.0 / sum;
    let mut rn2 = 0.0f64;
    for (k, ek) in e.iter_mut().enumerate().take(c) {
        *ek = *ek * inv - if k == y { 1.0 } else { 0.0 };
        rn2 = ek.mul_add(*ek, rn2);
    }
    let gn = xnorm * rn2.sqrt();
    let over = gn > clip;
    let scale = if over { clip / gn } else { 1.0 };
    for k in 0..c {
        resid[k] = (e[k] * scale) as f32;
    }
    over
}

/// The dense kernel's `exp` for x ≤ 0 (Cody–Waite reduction, degree-13 Taylor polynomial,
/// 2ⁿ through the exponent bits), as scalar operations.
#[inline(always)]
fn exp_nonpositive(x: f64) -> f64 {
    const INV_FACT: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362880.0,
        1.0 / 3628800.0,
        1.0 / 39916800.0,
        1.0 / 479001600.0,
        1.0 / 6227020800.0,
    ];
    // max_pd(x, −708) returns −708 when x is NaN; logits here are finite
    let x = if x > -708.0 { x } else { -708.0 };
    let n = (x * std::f64::consts::LOG2_E).round_ties_even();
    let r = (-n).mul_add(6.931_471_803_691_238e-1, x);
    let r = (-n).mul_add(1.908_214_929_270_587_7e-10, r);
    let mut q = INV_FACT[13];
    for &c in INV_FACT[..13].iter().rev() {
        q = q.mul_add(r, c);
    }
    let pow2 = f64::from_bits(((n as i64 + 1023) as u64) << 52);
    q * pow2
}

/// Hints the processor to load `ent` into the cache.
fn prefetch(ent: &[(u32, f32)]) {
    #[cfg(target_arch = "x86_64")]
    for line in ent.chunks(8) {
        // SAFETY: prefetching has no architectural effect; the pointer is in bounds.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr() as *const i8
            )
        };
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{SLOTS, SparseRows};
    use std::arch::x86_64::*;

    /// Logits of row `i` for the 16 class slots: per lane `l = j mod 8` and class, the FMA
    /// chain over the row's nonzeros of that lane (j ascending), then the dense kernel's
    /// horizontal reduction ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)). Four lanes' chains run
    /// interleaved (eight accumulators in registers).
    ///
    /// # Safety
    /// AVX2+FMA; `wt.len() ≥ rows.dp·SLOTS` (every stored j < dp by construction).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn forward(rows: &SparseRows, i: usize, wt: &[f32]) -> [f32; SLOTS] {
        let mut lanes = [[0f32; SLOTS]; 8];
        let wp = wt.as_ptr();
        let ent = &rows.ent[rows.start[i]..rows.start[i + 1]];
        for h in 0..2 {
            let mut lo = [_mm256_setzero_ps(); 4];
            let mut hi = [_mm256_setzero_ps(); 4];
            for ec in ent.chunks_exact(8) {
                for l in 0..4 {
                    let (j, x) = ec[4 * h + l];
                    let j = j as usize;
                    let x = _mm256_set1_ps(x);
                    // SAFETY: j < dp (construction) and wt holds dp·SLOTS floats.
                    unsafe {
                        lo[l] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wp.add(j * SLOTS)), lo[l]);
                        hi[l] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wp.add(j * SLOTS + 8)), hi[l]);
                    }
                }
            }
            for l in 0..4 {
                let out = &mut lanes[4 * h + l];
                // SAFETY: `out` holds 16 floats.
                unsafe {
                    _mm256_storeu_ps(out.as_mut_ptr(), lo[l]);
                    _mm256_storeu_ps(out.as_mut_ptr().add(8), hi[l]);
                }
            }
        }
        let v = &lanes;
        std::array::from_fn(|k| {
            ((v[0][k] + v[4][k]) + (v[2][k] + v[6][k]))
                + ((v[1][k] + v[5][k]) + (v[3][k] + v[7][k]))
        })
    }

    /// `gt[j·16 + k] ← x_j·resid_k + gt[j·16 + k]` (one FMA) for the entries of row `i`.
    ///
    /// # Safety
    /// AVX2+FMA; `gt.len() ≥ rows.dp·SLOTS` (every stored j < dp by construction).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn backward(
        rows: &SparseRows,
        i: usize,
        resid: &[f32; SLOTS],
        gt: &mut [f32],
    ) {
        // SAFETY: resid holds 16 floats.
        let (rlo, rhi) = unsafe {
            (
                _mm256_loadu_ps(resid.as_ptr()),
                _mm256_loadu_ps(resid.as_ptr().add(8)),
            )
        };
        let gp = gt.as_mut_ptr();
        for &(j, x) in &rows.ent[rows.start[i]..rows.start[i + 1]] {
            let j = j as usize;
            let x = _mm256_set1_ps(x);
            // SAFETY: j < dp (construction) and gt holds dp·SLOTS floats.
            unsafe {
                let p = gp.add(j * SLOTS);
                _mm256_storeu_ps(p, _mm256_fmadd_ps(x, rlo, _mm256_loadu_ps(p)));
                _mm256_storeu_ps(p.add(8), _mm256_fmadd_ps(x, rhi, _mm256_loadu_ps(p.add(8))));
            }
        }
    }

    /// [`super::residual`] compiled with FMA (its `mul_add`s become single instructions).
    ///
    /// # Safety
    /// AVX2+FMA available.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn residual(
        logits: &[f32],
        y: usize,
        xnorm: f64,
        clip: f64,
        resid: &mut [f32; SLOTS],
    ) -> bool {
        super::residual(logits, y, xnorm, clip, resid)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    use super::{SLOTS, SparseRows};
    pub(super) unsafe fn forward(_: &SparseRows, _: usize, _: &[f32]) -> [f32; SLOTS] {
        unreachable!("SparseRows::of returns None without AVX2")
    }
    pub(super) unsafe fn backward(_: &SparseRows, _: usize, _: &[f32; SLOTS], _: &mut [f32]) {
        unreachable!("SparseRows::of returns None without AVX2")
    }
    pub(super) unsafe fn residual(
        _: &[f32],
        _: usize,
        _: f64,
        _: f64,
        _: &mut [f32; SLOTS],
    ) -> bool {
        unreachable!("SparseRows::of returns None without AVX2")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{KernelParams, clipped_grad_sum as dense_sum, padded_dim};
    use rand::{RngExt, SeedableRng};

    /// Sparse rows like MNIST's (about 20 % nonzeros, some rows empty, a row of all ones),
    /// scaled into the unit ball, d not a multiple of 8.
    fn data(n: usize, d: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let mut f = vec![0f32; n * d];
        for (i, row) in f.chunks_exact_mut(d).enumerate() {
            for v in row.iter_mut() {
                if i == 3 || rng.random::<f64>() < 0.2 {
                    *v = rng.random::<f32>() - 0.3;
                }
            }
            if i == 5 {
                row.iter_mut().for_each(|v| *v = 0.0);
            }
            let norm = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
            if norm > 0.0 {
                row.iter_mut()
                    .for_each(|v| *v = (*v as f64 / norm * 0.99) as f32);
            }
        }
        let y = (0..n).map(|_| rng.random_range(0..10u32)).collect();
        (f, y)
    }

    /// The sparse pass gives the dense AVX2 kernel's gradient sums and clip counts bit for bit,
    /// at zero and random weights (clipped and unclipped rows, repeated rows in a batch, the
    /// empty row), for 10 and 3 classes. The reference is `kernel::clipped_grad_sum`.
    #[test]
    fn sparse_pass_equals_the_dense_kernel_bit_for_bit() {
        if !simd_available() {
            eprintln!("privpred-test-skip: no AVX2+FMA, the sparse pass is not used");
            return;
        }
        for (c, seed) in [(10, 1u64), (3, 2)] {
            let (n, d) = (200, 785);
            let (f, y) = data(n, d, seed);
            let y: Vec<u32> = y.iter().map(|v| v % c as u32).collect();
            let design = Design::new(&f, &y, d, c);
            let dp = padded_dim(d);
            let rows = SparseRows::of(&design).expect("sparse enough");
            let norms: Vec<f64> = (0..n)
                .map(|i| {
                    design
                        .row(i)
                        .iter()
                        .map(|&v| (v as f64) * (v as f64))
                        .sum::<f64>()
                        .sqrt()
                })
                .collect();
            assert_eq!(rows.norms, norms);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed + 10);
            let mut ws = Workspace::new(c, d, dp);
            for scale in [0.0, 0.3, 30.0] {
                let mut w = vec![0f64; c * dp];
                for k in 0..c {
                    for j in 0..d {
                        w[k * dp + j] = scale * (rng.random::<f64>() - 0.5);
                    }
                }
                let batch: Vec<usize> = (0..150)
                    .map(|_| rng.random_range(0..n))
                    .chain([3, 5, 3])
                    .collect();
                for clip in [1e-3, 0.1, 10.0] {
                    let kp = KernelParams::from_class_major(&w, c, dp);
                    let mut dense = vec![0f32; c * dp];
                    let kd = dense_sum(&design, &kp, &batch, &norms, clip, &mut dense);
                    ws.set_weights(&w);
                    let ks = clipped_grad_sum(&rows, &y, &mut ws, &batch, clip);
                    let mut sparse = vec![0f32; c * dp];
                    ws.gradient_into(&mut sparse);
                    assert_eq!(kd, ks, "c {c} scale {scale} clip {clip}: clip counts");
                    let db: Vec<u32> = dense.iter().map(|v| v.to_bits()).collect();
                    let sb: Vec<u32> = sparse.iter().map(|v| v.to_bits()).collect();
                    assert!(db == sb, "c {c} scale {scale} clip {clip}: sums differ");
                    if clip == 1e-3 {
                        assert!(ks > 0);
                    }
                }
            }
        }
    }

    /// Dense data (more than 40 % nonzeros) and more than 12 classes keep the dense kernel.
    #[test]
    fn dense_data_and_many_classes_use_the_dense_kernel() {
        let f = vec![0.1f32; 20 * 16];
        let y = vec![0u32; 20];
        assert!(SparseRows::of(&Design::new(&f, &y, 16, 3)).is_none());
        let (f, y) = data(20, 16, 3);
        assert!(SparseRows::of(&Design::new(&f, &y, 16, 13)).is_none());
        assert!(weights_bounded(&[1e30, -1e30]) && !weights_bounded(&[f64::NAN]));
        assert!(!weights_bounded(&[2e30]) && !weights_bounded(&[f64::INFINITY]));
    }
}
