//! DP-SGD for the linear model (docs/guarantees.md#calibrations, errata 4.2 and 4.3 fixed).
//!
//! Each step draws every example independently with probability q = b/N (Poisson sampling,
//! implemented exactly by geometric gap skipping), computes each selected example's gradient
//! g = x (p − y)ᵀ, clips it **jointly over all D·C parameters** to norm ν using the closed
//! form ‖g‖_F = ‖x‖₂·‖p − y‖₂ (a rank-one matrix), sums, adds N(0, σ²ν² I) to all D·C
//! coordinates, divides by the expected batch size b and takes an SGD step (heavy-ball
//! momentum, learning rate divided by 10 three times at equal intervals, as the reference's
//! `StepLR`). σ (the noise multiplier) comes from the core's accountant for the sampled
//! Gaussian mechanism with q and the number of steps. Training uses no L2 term (docs/study.md).
//! Momentum and the learning-rate schedule are post-processing of the noisy gradients.

use crate::error::{LinearError, Result};
use crate::kernel::{Design, KernelParams, clipped_grad_sum, padded_dim};
use crate::model::LinearModel;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

/// DP-SGD hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DpSgdConfig {
    /// Expected batch size b (q = b/N).
    pub batch_size: usize,
    /// Epochs (steps = ⌈epochs·N/b⌉).
    pub epochs: f64,
    /// Initial learning rate.
    pub learning_rate: f64,
    /// Heavy-ball momentum in [0, 1).
    pub momentum: f64,
    /// Clip norm ν (`None` = cross-validate over [`CLIP_GRID`]).
    pub clip: Option<f64>,
    /// Under add/remove neighbours: the public training-set size N̂ the caller declares, used
    /// in place of the exact N (private under that relation) for the sampling rate
    /// q = b/N̂ and the steps ⌈epochs·N̂/b⌉, so that neither depends on the data. The
    /// accountant's guarantee holds for Poisson sampling at rate q whatever the exact N;
    /// only the expected batch, qN, differs from b when N ≠ N̂.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_n: Option<usize>,
}

impl Default for DpSgdConfig {
    fn default() -> Self {
        DpSgdConfig {
            batch_size: privpred_core::defaults::LINEAR_DPSGD_BATCH_SIZE,
            epochs: privpred_core::defaults::LINEAR_DPSGD_EPOCHS,
            learning_rate: privpred_core::defaults::LINEAR_DPSGD_LEARNING_RATE,
            momentum: privpred_core::defaults::LINEAR_DPSGD_MOMENTUM,
            clip: None,
            public_n: None,
        }
    }
}

/// The clip grid of docs/study.md.
pub const CLIP_GRID: [f64; 10] = [5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1, 2e-1, 5e-1];

/// Most epochs a linear DP-SGD run takes. Far beyond any useful schedule (the default is 20),
/// and it keeps q·√steps = √(epochs·q) ≤ 100, so that for every ε ≥ 0.01 a noise multiplier
/// in the range the calibration searches (≤ 1e6) exists.
pub const MAX_EPOCHS: f64 = 10_000.0;

impl DpSgdConfig {
    /// Validates the hyper-parameters against the training-set size.
    pub fn check(&self, n: usize) -> Result<()> {
        let n = self.public_n.unwrap_or(n);
        if self.batch_size == 0 || self.batch_size > n {
            return Err(LinearError::invalid(
                "batch-size",
                self.batch_size,
                format!("must be in 1..={n} (the training-set size)"),
            ));
        }
        if !(self.epochs.is_finite() && self.epochs > 0.0 && self.epochs <= MAX_EPOCHS) {
            return Err(LinearError::invalid(
                "epochs",
                self.epochs,
                format!("must be a number in (0, {MAX_EPOCHS}] (passes over the training set)"),
            ));
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return Err(LinearError::invalid(
                "learning-rate",
                self.learning_rate,
                "must be a finite number > 0",
            ));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(LinearError::invalid(
                "momentum",
                self.momentum,
                "must be in [0, 1)",
            ));
        }
        if let Some(c) = self.clip
            && !(c.is_finite() && c > 0.0)
        {
            return Err(LinearError::invalid(
                "clip",
                c,
                "must be a finite number > 0",
            ));
        }
        Ok(())
    }

    /// Number of steps ⌈epochs·N/b⌉ (N̂ = [`DpSgdConfig::public_n`] when declared).
    pub fn steps(&self, n: usize) -> u64 {
        let n = self.public_n.unwrap_or(n);
        (self.epochs * n as f64 / self.batch_size as f64).ceil() as u64
    }
}

/// Statistics of one DP-SGD run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DpSgdStats {
    /// Steps taken.
    pub steps: u64,
    /// Examples processed (Σ batch sizes).
    pub examples: u64,
    /// Fraction of per-example gradients that were clipped.
    pub clipped_fraction: f64,
}

/// The inputs every DP-SGD trainer accepts: the hyper-parameters for N examples
/// ([`DpSgdConfig::check`]), the clip ν finite and > 0, the noise multiplier σ finite and >= 0.
fn check_run(cfg: &DpSgdConfig, n: usize, clip: f64, noise_multiplier: f64) -> Result<()> {
    cfg.check(n)?;
    if !(clip.is_finite() && clip > 0.0) {
        return Err(LinearError::invalid(
            "clip",
            clip,
            "must be a finite number > 0",
        ));
    }
    if !(noise_multiplier.is_finite() && noise_multiplier >= 0.0) {
        return Err(LinearError::invalid(
            "noise-multiplier",
            noise_multiplier,
            "must be a finite number >= 0",
        ));
    }
    Ok(())
}

/// Poisson sampling of one step's batch: every example independently with probability q = b/N,
/// implemented exactly by geometric gap skipping (P(gap = k) = (1 − q)^k q; q = 1 takes all).
struct PoissonSampler {
    n: usize,
    q: f64,
    ln1q: f64,
}

impl PoissonSampler {
    /// Rate q = b/N̂ over the `n` rows, N̂ = `rate_n` (the declared public size under
    /// add/remove, else `n`).
    fn new(n: usize, rate_n: usize, batch_size: usize) -> Self {
        let q = (batch_size as f64 / rate_n as f64).min(1.0);
        PoissonSampler {
            n,
            q,
            ln1q: (1.0 - q).ln(),
        }
    }

    /// Clears `batch` and fills it with this step's examples, in increasing order.
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R, batch: &mut Vec<usize>) {
        batch.clear();
        let gap = |rng: &mut R| {
            if self.q >= 1.0 {
                0
            } else {
                geometric(rng, self.ln1q)
            }
        };
        let mut i = gap(rng);
        while i < self.n {
            batch.push(i);
            i += 1 + gap(rng);
        }
    }
}

/// The learning rate of `step` of `steps`: the initial rate divided by 10 three times at equal
/// intervals (the reference's `StepLR`).
fn step_lr(learning_rate: f64, step: u64, steps: u64) -> f64 {
    learning_rate * 0.1f64.powi(((4 * step) / steps.max(1)).min(3) as i32)
}

/// Where the noised coordinates of the parameter vector lie: `blocks` runs of `len`
/// coordinates, `stride` apart (the softmax's class-major padded rows; one run for the binary
/// model). The noise is drawn block by block, coordinate by coordinate, in that order.
#[derive(Debug, Clone, Copy)]
struct Layout {
    blocks: usize,
    stride: usize,
    len: usize,
}

impl Layout {
    /// `blocks` runs of `len` coordinates, `stride` apart.
    fn runs(blocks: usize, stride: usize, len: usize) -> Self {
        Layout {
            blocks,
            stride,
            len,
        }
    }
}

/// The loop every DP-SGD trainer shares: for each of [`DpSgdConfig::steps`] steps, a Poisson
/// batch, the trainer's clipped-gradient sum `clipped_sum(w, batch, gsum)` (it overwrites
/// `gsum` and returns how many gradients it clipped), N(0, σ²ν²) noise on each noised
/// coordinate, division by the expected batch size b and a heavy-ball momentum step at the
/// scheduled learning rate. Returns the parameters (zero off the noised coordinates) and the
/// run's statistics, or an error when they are not finite.
fn noisy_sgd<R: Rng + ?Sized>(
    n: usize,
    layout: Layout,
    cfg: &DpSgdConfig,
    (clip, noise_multiplier): (f64, f64),
    rng: &mut R,
    mut clipped_sum: impl FnMut(&[f64], &[usize], &mut [f64]) -> u64,
) -> Result<(Vec<f64>, DpSgdStats)> {
    let sampler = PoissonSampler::new(n, cfg.public_n.unwrap_or(n), cfg.batch_size);
    let steps = cfg.steps(n);
    let size = layout.blocks * layout.stride;
    let (mut w, mut vel, mut gsum) = (vec![0f64; size], vec![0f64; size], vec![0f64; size]);
    let std = noise_multiplier * clip;
    let inv_b = 1.0 / cfg.batch_size as f64;
    let (mut examples, mut clipped) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(2 * cfg.batch_size);
    for step in 0..steps {
        let lr = step_lr(cfg.learning_rate, step, steps);
        sampler.sample(rng, &mut batch);
        clipped += clipped_sum(&w, &batch, &mut gsum);
        examples += batch.len() as u64;
        for k in 0..layout.blocks {
            for idx in k * layout.stride..k * layout.stride + layout.len {
                let z: f64 = StandardNormal.sample(rng);
                let g = (gsum[idx] + std * z) * inv_b;
                vel[idx] = cfg.momentum * vel[idx] + g;
                w[idx] -= lr * vel[idx];
            }
        }
    }
    if w.iter().any(|v| !v.is_finite()) {
        return Err(LinearError::Numerical(
            "DP-SGD diverged (non-finite parameters); lower the learning rate".into(),
        ));
    }
    let stats = DpSgdStats {
        steps,
        examples,
        clipped_fraction: if examples > 0 {
            clipped as f64 / examples as f64
        } else {
            0.0
        },
    };
    Ok((w, stats))
}

/// ‖xᵢ‖₂ of every row, in f64.
fn row_norms<'a>(rows: impl Iterator<Item = &'a [f32]>) -> Vec<f64> {
    rows.map(|x| {
        x.iter()
            .map(|&v| (v as f64) * (v as f64))
            .sum::<f64>()
            .sqrt()
    })
    .collect()
}

/// Trains the linear model with DP-SGD. `noise_multiplier` is σ (noise std σ·ν); `clip` is ν.
pub fn train_dpsgd<R: Rng + ?Sized>(
    design: &Design<'_>,
    cfg: &DpSgdConfig,
    clip: f64,
    noise_multiplier: f64,
    rng: &mut R,
) -> Result<(LinearModel, DpSgdStats)> {
    check_run(cfg, design.n, clip, noise_multiplier)?;
    let (n, d, c) = (design.n, design.d, design.c);
    let dp = padded_dim(d);
    let norms = row_norms((0..n).map(|i| design.row(i)));
    // class-major parameters (f64 master, an f32 copy per step for the kernel), padding at 0;
    // per-step sums in f32 (a batch is a few hundred terms of norm ≤ ν)
    let mut kp = KernelParams::from_class_major(&vec![0f64; c * dp], c, dp);
    let mut sum32 = vec![0f32; c * dp];
    let (w, stats) = noisy_sgd(
        n,
        Layout::runs(c, dp, d),
        cfg,
        (clip, noise_multiplier),
        rng,
        |w, batch, gsum| {
            kp.set_class_major(w);
            sum32.iter_mut().for_each(|v| *v = 0.0);
            let clipped = clipped_grad_sum(design, &kp, batch, &norms, clip, &mut sum32);
            gsum.iter_mut()
                .zip(&sum32)
                .for_each(|(g, &s)| *g = s as f64);
            clipped
        },
    )?;
    let mut theta = vec![0.0; d * c];
    for j in 0..d {
        for k in 0..c {
            theta[j * c + k] = w[k * dp + j];
        }
    }
    Ok((LinearModel { d, c, theta }, stats))
}

/// The coefficient a of one example's gradient a·x of the binary loss ln(1 + e^{−y s})
/// (y = ±1 from the label 0/1, s = wᵀx): a = −y σ(−y s), so |a| ≤ 1 and the gradient's norm
/// is |a|·‖x‖ ≤ ‖x‖ (the two-class softmax's is √2·|p₁ − y₁|·‖x‖).
pub fn binary_gradient_coefficient(s: f64, label: u32) -> f64 {
    let y = if label == 1 { 1.0 } else { -1.0 };
    -y / (1.0 + (y * s).exp())
}

/// The binary model's clipped-gradient sum over `batch` at w: Σᵢ min(1, ν/‖gᵢ‖)·gᵢ with
/// gᵢ = aᵢ·xᵢ ([`binary_gradient_coefficient`]), ‖gᵢ‖ = |aᵢ|·`norms[i]`, written to `gsum`
/// (overwritten) in f64. Returns how many gradients were clipped.
fn binary_clipped_sum(
    ds: &privpred_data::UnitBallDataset,
    norms: &[f64],
    clip: f64,
    (w, batch): (&[f64], &[usize]),
    gsum: &mut [f64],
) -> u64 {
    gsum.iter_mut().for_each(|v| *v = 0.0);
    let mut clipped = 0;
    for &i in batch {
        let x = ds.row(i);
        let s: f64 = x.iter().zip(w).map(|(&a, b)| a as f64 * b).sum();
        let a = binary_gradient_coefficient(s, ds.labels[i]);
        let norm = a.abs() * norms[i];
        let a = if norm > clip {
            clipped += 1;
            a * clip / norm
        } else {
            a
        };
        gsum.iter_mut()
            .zip(x)
            .for_each(|(g, &xi)| *g += a * xi as f64);
    }
    clipped
}

/// DP-SGD for the binary (one sigmoid output) model ([`crate::binary`]): the algorithm of
/// [`train_dpsgd`] with parameters w ∈ R^D, each selected example's gradient a·x
/// ([`binary_gradient_coefficient`], norm ≤ ‖x‖) clipped to ν, summed, and N(0, σ²ν² I_D)
/// added to the D coordinates. The sensitivity of each step's sum is ν, as for the softmax, so
/// σ comes from the same accountant. Returns the binary layout [0, w].
pub fn train_dpsgd_binary<R: Rng + ?Sized>(
    ds: &privpred_data::UnitBallDataset,
    cfg: &DpSgdConfig,
    clip: f64,
    noise_multiplier: f64,
    rng: &mut R,
) -> Result<(LinearModel, DpSgdStats)> {
    check_run(cfg, ds.n, clip, noise_multiplier)?;
    if ds.classes != 2 {
        return Err(LinearError::invalid(
            "classes",
            ds.classes,
            "must be 2 for the binary (sigmoid) model; use the softmax model for more classes",
        ));
    }
    let (n, d) = (ds.n, ds.d);
    let norms = row_norms((0..n).map(|i| ds.row(i)));
    let (w, stats) = noisy_sgd(
        n,
        Layout::runs(1, d, d),
        cfg,
        (clip, noise_multiplier),
        rng,
        |w, batch, gsum| binary_clipped_sum(ds, &norms, clip, (w, batch), gsum),
    )?;
    let theta = w.iter().flat_map(|&v| [0.0, v]).collect();
    Ok((LinearModel { d, c: 2, theta }, stats))
}

/// A Geometric(q) number of failures before the first success: ⌊ln U / ln(1 − q)⌋.
fn geometric<R: Rng + ?Sized>(rng: &mut R, ln1q: f64) -> usize {
    let u: f64 = rng.random::<f64>();
    let u = if u <= 0.0 { f64::MIN_POSITIVE } else { u };
    let g = (u.ln() / ln1q).floor();
    if g.is_finite() && g < usize::MAX as f64 / 2.0 {
        g as usize
    } else {
        usize::MAX / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The binary per-example gradient a·x against central finite differences of
    /// ln(1 + e^{−y wᵀx}) in w, and its norm ≤ ‖x‖ (the bound the clip relies on).
    #[test]
    fn binary_gradient_matches_finite_differences() {
        let x = [0.3f64, -0.5, 0.7, 0.1];
        let xn = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        for (w, label) in [([0.2, -1.0, 3.0, 0.5], 1u32), ([-4.0, 2.0, 0.1, 1.0], 0)] {
            let y = if label == 1 { 1.0 } else { -1.0 };
            let f = |w: &[f64; 4]| {
                let s: f64 = w.iter().zip(&x).map(|(a, b)| a * b).sum();
                (1.0 + (-y * s).exp()).ln()
            };
            let s: f64 = w.iter().zip(&x).map(|(a, b)| a * b).sum();
            let a = binary_gradient_coefficient(s, label);
            for j in 0..4 {
                let h = 1e-6;
                let (mut p, mut m) = (w, w);
                p[j] += h;
                m[j] -= h;
                let fd = (f(&p) - f(&m)) / (2.0 * h);
                assert!((a * x[j] - fd).abs() < 1e-8, "{j}: {} vs {fd}", a * x[j]);
            }
            assert!(a.abs() * xn <= xn);
        }
    }

    #[test]
    fn geometric_gaps_give_poisson_rate() {
        // the number of selected examples per step is Binomial(N, q): check its mean
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let (n, q) = (10_000usize, 0.02);
        let sampler = PoissonSampler::new(n, n, 200);
        let trials = 400;
        let mut tot = 0usize;
        let mut batch = Vec::new();
        for _ in 0..trials {
            sampler.sample(&mut rng, &mut batch);
            assert!(batch.windows(2).all(|p| p[0] < p[1]) && batch.iter().all(|&i| i < n));
            tot += batch.len();
        }
        let mean = tot as f64 / trials as f64;
        let sd = (n as f64 * q * (1.0 - q) / trials as f64).sqrt();
        // |z| < 5 (two-sided α ≈ 6e-7)
        assert!((mean - n as f64 * q).abs() < 5.0 * sd, "mean batch {mean}");
    }

    /// Under add/remove the declared N̂ alone sets the steps, the batch-size range and the
    /// sampling rate q = b/N̂ (Binomial(N, b/N̂) rows per step over the exact N rows): D and
    /// D ∪ {z} run the same schedule at the same rate, as the accountant assumes.
    #[test]
    fn a_declared_public_n_sets_the_schedule_and_the_rate() {
        let cfg = DpSgdConfig {
            batch_size: 100,
            epochs: 2.0,
            public_n: Some(1000),
            ..DpSgdConfig::default()
        };
        assert_eq!(cfg.steps(999), 20);
        assert_eq!(cfg.steps(1001), 20);
        assert!(cfg.check(50).is_ok(), "b <= N-hat, whatever the exact N");
        let big = DpSgdConfig {
            batch_size: 1001,
            ..cfg
        };
        assert!(big.check(5000).is_err(), "b > N-hat");
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        let n = 4000usize;
        let q = 100.0 / 1000.0;
        let sampler = PoissonSampler::new(n, 1000, 100);
        let (trials, mut tot, mut batch) = (200, 0usize, Vec::new());
        for _ in 0..trials {
            sampler.sample(&mut rng, &mut batch);
            tot += batch.len();
        }
        let mean = tot as f64 / trials as f64;
        let sd = (n as f64 * q * (1.0 - q) / trials as f64).sqrt();
        // |z| < 5 (two-sided α ≈ 6e-7)
        assert!((mean - n as f64 * q).abs() < 5.0 * sd, "mean batch {mean}");
    }

    /// One full-batch step (q = 1, σ = 0, momentum 0, lr 1) from θ = 0 equals
    /// −(1/N) Σ min(1, ν/‖gᵢ‖) gᵢ with gᵢ = xᵢ(pᵢ − yᵢ)ᵀ computed independently in f64:
    /// checks the closed-form per-example norm, the joint clipping and the scaling.
    #[test]
    fn one_step_matches_joint_clipping_by_hand() {
        let ds = crate::train::tests::toy(50, 7, 3, 11);
        let design = Design::new(&ds.features, &ds.labels, ds.d, ds.classes);
        for clip in [1e-3, 0.05, 10.0] {
            let cfg = DpSgdConfig {
                batch_size: 50,
                epochs: 1.0,
                learning_rate: 1.0,
                momentum: 0.0,
                clip: Some(clip),
                public_n: None,
            };
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
            let (m, stats) = train_dpsgd(&design, &cfg, clip, 0.0, &mut rng).unwrap();
            assert_eq!((stats.steps, stats.examples), (1, 50));
            let (d, c) = (7, 3);
            let mut want = vec![0.0f64; d * c];
            for i in 0..50 {
                let x = ds.row(i);
                // θ = 0: p uniform
                let r: Vec<f64> = (0..c)
                    .map(|k| 1.0 / c as f64 - if k == ds.labels[i] as usize { 1.0 } else { 0.0 })
                    .collect();
                let mut g = vec![0.0; d * c];
                for j in 0..d {
                    for k in 0..c {
                        g[j * c + k] = x[j] as f64 * r[k];
                    }
                }
                let norm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
                let s = (clip / norm).min(1.0);
                for (w, gv) in want.iter_mut().zip(&g) {
                    *w -= s * gv / 50.0;
                }
            }
            for (a, b) in m.theta.iter().zip(&want) {
                assert!(
                    (a - b).abs() < 1e-6 * (1.0 + b.abs()),
                    "clip {clip}: {a} vs {b}"
                );
            }
            assert!(m.norm() <= clip * (1.0 + 1e-6));
        }
    }

    /// A two-class data set of the given rows (test helper).
    fn binary_set(d: usize, rows: &[Vec<f32>], labels: &[u32]) -> privpred_data::UnitBallDataset {
        let ds = privpred_data::Dataset::new(
            d,
            2,
            rows.concat(),
            labels.to_vec(),
            privpred_data::Provenance::default(),
        )
        .unwrap();
        privpred_data::UnitBallDataset::new(ds).unwrap()
    }

    /// The sigmoid DP-SGD's noise, checked on one released step: with q = 1 (b = N), one
    /// epoch, momentum 0 and learning rate 1 the trainer takes exactly one step from w = 0 and
    /// releases w = −(S + σν z)/b, where S = Σᵢ min(1, ν/‖gᵢ‖)·gᵢ is the clipped-gradient sum
    /// at w = 0 (gᵢ = −yᵢ xᵢ/2, computed here by hand) and z must be N(0, I_D). From 2000
    /// seeds (10 000 recovered coordinates z = −(b·w + S)/(σν)): each coordinate's mean is
    /// z-tested at |t| < 5.3 (two-sided 1.2e-7 each, 5.8e-7 for the five) and the variance by
    /// Wilson–Hilferty's normal approximation of Σz² ~ χ²(10 000) at |t| < 5.2 (2.0e-7): a
    /// correct trainer fails with probability < 1e-6. With the noise scaled by 0.9 (tried:
    /// `std = 0.9 * noise_multiplier * clip` in `noisy_sgd`) the variance statistic is about
    /// −14 and the test fails; a clip that lets more than ν through moves S and fails the
    /// means.
    #[test]
    fn binary_step_noise_is_sigma_nu_over_b() {
        use rand::SeedableRng;
        let (n, d, clip, sigma) = (20usize, 5usize, 0.3, 1.7);
        // rows r·e_{i mod D}: ‖g‖ = r/2 is 0.45 (clipped to ν = 0.3) or 0.1 (not clipped)
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let mut x = vec![0f32; d];
                x[i % d] = if i % 2 == 0 { 0.9 } else { 0.2 };
                x
            })
            .collect();
        let labels: Vec<u32> = (0..n).map(|i| u32::from(i % 3 == 0)).collect();
        let ds = binary_set(d, &rows, &labels);
        let mut sum = vec![0.0f64; d];
        for (x, &l) in rows.iter().zip(&labels) {
            let y = if l == 1 { 1.0 } else { -1.0 };
            let norm = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt() / 2.0;
            let scale = (clip / norm).min(1.0);
            for (s, &v) in sum.iter_mut().zip(x) {
                *s += scale * (-y / 2.0) * v as f64;
            }
        }
        let cfg = DpSgdConfig {
            batch_size: n,
            epochs: 1.0,
            learning_rate: 1.0,
            momentum: 0.0,
            clip: Some(clip),
            public_n: None,
        };
        let seeds = 2000u64;
        let (mut mean, mut sq) = (vec![0.0f64; d], 0.0f64);
        for seed in 0..seeds {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let (m, stats) = train_dpsgd_binary(&ds, &cfg, clip, sigma, &mut rng).unwrap();
            assert_eq!((stats.steps, stats.examples), (1, n as u64));
            for j in 0..d {
                assert_eq!(m.theta[2 * j], 0.0);
                let z = -(n as f64 * m.theta[2 * j + 1] + sum[j]) / (sigma * clip);
                mean[j] += z;
                sq += z * z;
            }
        }
        for (j, m) in mean.iter().enumerate() {
            let t = m / (seeds as f64).sqrt();
            assert!(t.abs() < 5.3, "coordinate {j}: mean of z has t = {t}");
        }
        let k = (seeds as usize * d) as f64;
        let v = 2.0 / (9.0 * k);
        let t = ((sq / k).cbrt() - (1.0 - v)) / v.sqrt();
        assert!(
            t.abs() < 5.2,
            "Σz²/K = {} (want 1): Wilson–Hilferty t = {t}",
            sq / k
        );
    }

    /// The clip bounds one example's influence on the sigmoid step's sum: for pairs of data
    /// sets differing in one row, at parameters w that put the changed example's gradient
    /// near its largest (|a| → 1, ‖g‖ → ‖x‖ = 1), the clipped sums differ by at most ν when
    /// the row is a null example (x = 0) in one set (add/remove) and by at most 2ν when both
    /// rows are real (replace-one), with equality when the clip binds. End to end, the
    /// noise-free step (σ = 0, q = 1, momentum 0, lr 1 from w = 0, where ‖g‖ = ‖x‖/2) moves
    /// by exactly min(ν, 1/2)/b for the null-to-canary pair, so a clip that let more through
    /// would fail.
    #[test]
    fn binary_clip_bounds_one_examples_influence() {
        use rand::SeedableRng;
        let (n, d) = (12usize, 4usize);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(17);
        let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
        let diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>();
        for trial in 0..200 {
            let mut rows: Vec<Vec<f32>> = (0..n)
                .map(|_| (0..d).map(|_| rng.random::<f32>() * 0.9 - 0.45).collect())
                .collect();
            let labels: Vec<u32> = (0..n).map(|_| rng.random::<u32>() % 2).collect();
            // the changed row: a unit canary along a random direction
            let dir: Vec<f64> = (0..d).map(|_| StandardNormal.sample(&mut rng)).collect();
            let canary: Vec<f32> = dir
                .iter()
                .map(|v| (0.999_999 * v / norm(&dir)) as f32)
                .collect();
            let xn = norm(&canary.iter().map(|&v| v as f64).collect::<Vec<_>>());
            let i = trial % n;
            // w = −c·y·x* with c large: the canary's margin y·s is very negative, |a| ≈ 1
            let y = if labels[i] == 1 { 1.0 } else { -1.0 };
            let w: Vec<f64> = canary.iter().map(|&v| -20.0 * y * v as f64).collect();
            let clip = [1e-3, 0.05, 0.5, 0.99, 10.0][trial % 5];
            let sum_of = |rows: &[Vec<f32>], labels: &[u32]| {
                let ds = binary_set(d, rows, labels);
                let norms = row_norms((0..n).map(|k| ds.row(k)));
                let mut g = vec![0.0; d];
                let batch: Vec<usize> = (0..n).collect();
                binary_clipped_sum(&ds, &norms, clip, (&w, &batch), &mut g);
                g
            };
            rows[i] = vec![0.0; d];
            let null = sum_of(&rows, &labels);
            rows[i] = canary.clone();
            let with = sum_of(&rows, &labels);
            let mut flipped = labels.clone();
            flipped[i] = 1 - labels[i];
            let other = sum_of(&rows, &flipped);
            // the canary's unclipped gradient norm σ(20‖x*‖²)·‖x*‖ ≈ 1
            let g_norm = xn / (1.0 + (-20.0 * xn * xn).exp());
            assert!(g_norm > 0.99999);
            let add = norm(&diff(&with, &null));
            assert!(
                add <= clip * (1.0 + 1e-12),
                "add/remove: {add} > ν = {clip}"
            );
            assert!(
                (add - clip.min(g_norm)).abs() < 1e-6,
                "add/remove: {add} vs {clip}"
            );
            let rep = norm(&diff(&with, &other));
            assert!(rep <= 2.0 * clip * (1.0 + 1e-12), "replace-one: {rep} > 2ν");
        }
        // end to end: one noise-free step on the null-to-canary pair
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|k| {
                (0..d)
                    .map(|j| ((k * d + j) % 7) as f32 * 0.1 - 0.3)
                    .collect()
            })
            .collect();
        let labels: Vec<u32> = (0..n).map(|k| (k % 2) as u32).collect();
        for clip in [1e-3, 0.05, 0.3, 0.5, 10.0] {
            let cfg = DpSgdConfig {
                batch_size: n,
                epochs: 1.0,
                learning_rate: 1.0,
                momentum: 0.0,
                clip: Some(clip),
                public_n: None,
            };
            let step = |rows: &[Vec<f32>]| {
                let ds = binary_set(d, rows, &labels);
                let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
                train_dpsgd_binary(&ds, &cfg, clip, 0.0, &mut rng)
                    .unwrap()
                    .0
                    .theta
            };
            let mut r = rows.clone();
            r[3] = vec![0.0; d];
            let a = step(&r);
            r[3] = vec![0.0, 0.0, 1.0, 0.0];
            let b = step(&r);
            let moved = norm(&diff(&a, &b));
            let want = clip.min(0.5) / n as f64;
            assert!(moved <= clip / n as f64 * (1.0 + 1e-12), "{moved} > ν/b");
            assert!(
                (moved - want).abs() < 1e-12,
                "clip {clip}: {moved} vs {want}"
            );
        }
    }
}
