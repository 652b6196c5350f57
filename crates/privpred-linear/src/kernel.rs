//! The fused softmax-cross-entropy kernel: one pass over row blocks computes the logits, the
//! softmax, the loss and the gradient accumulation while the block is in cache.
//!
//! Layout: features are f32, row-major, each row padded with zeros to a multiple of 8 (one
//! AVX2 register); parameters are handed to the kernel class-major (`C × D_pad`, f32) and the
//! gradient comes back class-major in f64. Products and the per-block gradient accumulation
//! are f32 (FMA); the softmax, the loss and the accumulation across blocks are f64, which keeps
//! the gradient accurate to ~1e-7 (far below the 1e-4 stopping tolerance).
//!
//! Register tiling (AVX2+FMA, 8 rows per group): the forward keeps 2 rows × ≤ 5 classes of
//! accumulators in registers (7 loads per 10 FMAs instead of 11 per 10), the softmax runs
//! across the 8 rows in f64 lanes with a vectorised `exp` (a few ulp), and the gradient
//! update keeps ≤ 5 classes × 16 columns in registers across the 8 rows (0.95 memory operations
//! per FMA instead of 1.5). The portable one-row path is kept as the reference it is tested
//! against (`tiled_pass_matches_portable`).
//!
//! Measured against a GEMM formulation (`X·W` then `Xᵀ·G` with the `gemm`/`faer` crates, which
//! reach 30–60 GFLOP/s on these C = 10 shapes): the fused pass reads X once per evaluation and
//! avoids materialising the N × C matrices; see `benches/linear_bench.rs` for the numbers.
//!
//! Parallelism: rayon over blocks of rows for large N; sequential for small N (teachers'
//! shards), where callers parallelise across models instead.

use privpred_data::UnitBallDataset;
use rayon::prelude::*;
use std::borrow::Cow;

thread_local! {
    static SEQUENTIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every kernel pass started on this thread sequential (no rayon). For callers
/// that parallelise across models (repetitions, λ values) and want each fit on one core with a
/// fixed summation order: unlike `ThreadPool::install` from inside another pool, it never
/// blocks the calling worker, so the outer parallel loop keeps every core busy.
pub fn sequential<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SEQUENTIAL.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SEQUENTIAL.with(|s| s.replace(true)));
    f()
}

pub(crate) fn parallel_allowed() -> bool {
    !SEQUENTIAL.with(|s| s.get())
}

/// Whether the AVX2+FMA paths run on this CPU (runtime detection, cached); also used by the
/// f64 certification pass ([`crate::exact`]).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_fma_available() -> bool {
    simd::available()
}

/// Rows per block: the unit of parallel work and of f32 → f64 gradient flushing.
const BLOCK: usize = 1024;
/// Below this many rows the kernel runs on the calling thread.
const PAR_MIN_ROWS: usize = 8192;

/// Rounds `d` up to a multiple of 8 (the padded row stride).
pub fn padded_dim(d: usize) -> usize {
    d.div_ceil(8) * 8
}

/// Training data laid out for the kernel: padded f32 rows and labels.
#[derive(Debug, Clone)]
pub struct Design<'a> {
    /// Padded row-major features, `n × dp`.
    pub x: Cow<'a, [f32]>,
    /// Labels in `0..c`.
    pub y: Cow<'a, [u32]>,
    /// Rows.
    pub n: usize,
    /// Feature dimension.
    pub d: usize,
    /// Padded feature dimension (multiple of 8).
    pub dp: usize,
    /// Classes.
    pub c: usize,
}

impl<'a> Design<'a> {
    /// Builds a design from row-major features (`n × d`) and labels; borrows when `d` is
    /// already a multiple of 8 (e.g. MNIST's 784), copies with zero padding otherwise.
    pub fn new(features: &'a [f32], labels: &'a [u32], d: usize, c: usize) -> Self {
        let n = labels.len();
        debug_assert_eq!(features.len(), n * d);
        let dp = padded_dim(d);
        let x = if dp == d {
            Cow::Borrowed(features)
        } else {
            let mut v = vec![0f32; n * dp];
            for (dst, src) in v.chunks_exact_mut(dp).zip(features.chunks_exact(d)) {
                dst[..d].copy_from_slice(src);
            }
            Cow::Owned(v)
        };
        Design {
            x,
            y: Cow::Borrowed(labels),
            n,
            d,
            dp,
            c,
        }
    }

    /// The design of a unit-ball training set, borrowing its padded features
    /// ([`UnitBallDataset::padded_features`]): the padded copy is made once per dataset and
    /// shared by every fit on it, where [`Design::new`] copies on every call when `d` is not a
    /// multiple of 8 (e.g. 785 with the bias feature). The same rows, so the same results.
    pub fn of(ds: &'a UnitBallDataset) -> Self {
        let dp = padded_dim(ds.d);
        let x = ds
            .padded_features(dp)
            .expect("padded_dim(d) >= d, so the padded features exist");
        Design {
            x,
            y: Cow::Borrowed(&ds.labels),
            n: ds.n,
            d: ds.d,
            dp,
            c: ds.classes,
        }
    }

    /// A design over a subset of rows (copied), e.g. a teacher's shard.
    pub fn select(&self, rows: &[usize]) -> Design<'static> {
        let mut x = Vec::with_capacity(rows.len() * self.dp);
        let mut y = Vec::with_capacity(rows.len());
        for &i in rows {
            x.extend_from_slice(&self.x[i * self.dp..(i + 1) * self.dp]);
            y.push(self.y[i]);
        }
        Design {
            x: Cow::Owned(x),
            y: Cow::Owned(y),
            n: rows.len(),
            d: self.d,
            dp: self.dp,
            c: self.c,
        }
    }

    /// Padded row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.dp..(i + 1) * self.dp]
    }
}

/// Parameters converted for the kernel: class-major f32, `cp × dp` with zero padding.
#[derive(Debug, Clone)]
pub struct KernelParams {
    /// Class-major weights.
    pub w: Vec<f32>,
    /// Padded class count used by the forward kernel.
    pub cp: usize,
    /// Padded dimension.
    pub dp: usize,
    /// Real classes.
    pub c: usize,
}

impl KernelParams {
    /// Converts row-major `d × c` f64 parameters.
    pub fn from_theta(theta: &[f64], d: usize, c: usize) -> Self {
        let dp = padded_dim(d);
        let cp = padded_classes(c);
        let mut w = vec![0f32; cp * dp];
        for j in 0..d {
            for k in 0..c {
                w[k * dp + j] = theta[j * c + k] as f32;
            }
        }
        KernelParams { w, cp, dp, c }
    }
}

impl KernelParams {
    /// From class-major f64 weights `c × dp` (padding columns zero).
    pub fn from_class_major(w: &[f64], c: usize, dp: usize) -> Self {
        let mut p = KernelParams {
            w: vec![0f32; padded_classes(c) * dp],
            cp: padded_classes(c),
            dp,
            c,
        };
        p.set_class_major(w);
        p
    }

    /// Overwrites the weights from class-major f64 `c × dp` (no allocation; padded classes
    /// stay zero).
    pub fn set_class_major(&mut self, w: &[f64]) {
        for (a, b) in self.w.iter_mut().zip(w.iter()) {
            *a = *b as f32;
        }
    }
}

/// Classes padded to the forward kernel's register tile (4, 8, 10 or 12), or `c` beyond 12.
pub(crate) fn padded_classes(c: usize) -> usize {
    match c {
        0..=4 => 4,
        5..=8 => 8,
        9..=10 => 10,
        11..=12 => 12,
        _ => c,
    }
}

/// Result of one pass: summed (not averaged) loss and class-major gradient sums.
struct Acc {
    loss: f64,
    g64: Vec<f64>,
    g32: Vec<f32>,
}

impl Acc {
    fn new(c: usize, dp: usize) -> Self {
        Acc {
            loss: 0.0,
            g64: vec![0.0; c * dp],
            g32: vec![0.0; c * dp],
        }
    }
    fn flush(&mut self) {
        for (a, b) in self.g64.iter_mut().zip(self.g32.iter_mut()) {
            *a += *b as f64;
            *b = 0.0;
        }
    }
}

/// Sum over rows of the softmax cross-entropy and its gradient with respect to the
/// (class-major, padded) parameters. Returns `(Σ loss, Σ gradient)`; the gradient is
/// `c × dp` class-major. `parallel` allows rayon for large `n`.
pub fn loss_grad_sums(design: &Design<'_>, p: &KernelParams, parallel: bool) -> (f64, Vec<f64>) {
    sums_with(design, p, parallel, block_pass)
}

/// [`loss_grad_sums`] through the portable one-row-at-a-time path (f64 softmax): the
/// reference the tiled kernel is tested and benchmarked against.
pub fn loss_grad_sums_portable(
    design: &Design<'_>,
    p: &KernelParams,
    parallel: bool,
) -> (f64, Vec<f64>) {
    sums_with(design, p, parallel, block_pass_portable)
}

type BlockFn = fn(&Design<'_>, &KernelParams, usize, usize, &mut [f32]) -> f64;

fn sums_with(
    design: &Design<'_>,
    p: &KernelParams,
    parallel: bool,
    block_pass: BlockFn,
) -> (f64, Vec<f64>) {
    let n = design.n;
    let nblocks = n.div_ceil(BLOCK);
    let run_block = |acc: &mut Acc, b: usize| {
        let r0 = b * BLOCK;
        let r1 = (r0 + BLOCK).min(n);
        acc.loss += block_pass(design, p, r0, r1, &mut acc.g32);
        acc.flush();
    };
    let acc = if parallel
        && parallel_allowed()
        && n >= PAR_MIN_ROWS
        && rayon::current_num_threads() > 1
    {
        (0..nblocks)
            .into_par_iter()
            .fold(
                || Acc::new(p.c, p.dp),
                |mut acc, b| {
                    run_block(&mut acc, b);
                    acc
                },
            )
            .reduce(
                || Acc::new(p.c, p.dp),
                |mut a, b| {
                    a.loss += b.loss;
                    for (x, y) in a.g64.iter_mut().zip(b.g64.iter()) {
                        *x += *y;
                    }
                    a
                },
            )
    } else {
        let mut acc = Acc::new(p.c, p.dp);
        for b in 0..nblocks {
            run_block(&mut acc, b);
        }
        acc
    };
    (acc.loss, acc.g64)
}

/// One block of rows: forward, softmax, loss, and `g32 += Σ x (p − y)ᵀ` (class-major).
/// Uses the register-tiled AVX2 path ([`simd::group_pass`], 8 rows at a time) when the CPU
/// has AVX2+FMA and `cp ≤ 12`, the portable path otherwise.
fn block_pass(design: &Design<'_>, p: &KernelParams, r0: usize, r1: usize, g32: &mut [f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if simd::available() && p.cp <= simd::MAX_CP {
            let mut loss = 0.0;
            let mut i = r0;
            while i < r1 {
                let g = (r1 - i).min(simd::GR);
                // SAFETY: AVX2+FMA detected; rows i..i+g exist; shapes follow `p` and `design`.
                loss += unsafe { simd::group_pass(design, p, i, g, g32) };
                i += g;
            }
            return loss;
        }
    }
    block_pass_portable(design, p, r0, r1, g32)
}

/// The portable block pass (f64 softmax, one row at a time); also the reference the tiled
/// path is tested against.
fn block_pass_portable(
    design: &Design<'_>,
    p: &KernelParams,
    r0: usize,
    r1: usize,
    g32: &mut [f32],
) -> f64 {
    let dp = p.dp;
    let c = p.c;
    let mut loss = 0.0;
    let mut logits = vec![0f32; p.cp];
    let mut e = vec![0f64; c];
    // residuals r = p − onehot(y) for a group of up to 4 rows: resid[class][row]
    let mut resid = vec![[0f32; 4]; c];
    let mut i = r0;
    while i < r1 {
        let g = (r1 - i).min(4);
        for k in 0..g {
            let row = design.row(i + k);
            forward_row_portable(row, &p.w, dp, p.cp, &mut logits);
            let (l, _) = softmax_residual(&logits[..c], design.y[i + k] as usize, &mut e);
            loss += l;
            for (rj, ej) in resid.iter_mut().zip(e.iter()) {
                rj[k] = *ej as f32;
            }
        }
        for r in 0..g {
            let x = design.row(i + r);
            for (k, rk) in resid.iter().enumerate() {
                let a = rk[r];
                let gk = &mut g32[k * dp..(k + 1) * dp];
                for (gv, xv) in gk.iter_mut().zip(x.iter()) {
                    *gv += a * *xv;
                }
            }
        }
        i += g;
    }
    loss
}

/// Softmax cross-entropy of one row in f64: writes the residual `p − onehot(y)` into `r`
/// (length C) and returns (loss, ‖r‖²).
fn softmax_residual(logits: &[f32], y: usize, r: &mut [f64]) -> (f64, f64) {
    let m = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let mut s = 0.0f64;
    for (rk, &lk) in r.iter_mut().zip(logits) {
        *rk = (lk as f64 - m).exp();
        s += *rk;
    }
    let inv = 1.0 / s;
    let mut rn = 0.0;
    for (k, rk) in r.iter_mut().enumerate() {
        *rk = *rk * inv - if k == y { 1.0 } else { 0.0 };
        rn += *rk * *rk;
    }
    (s.ln() + m - logits[y] as f64, rn)
}

/// DP-SGD's clipped gradient sum over a batch (errata 4.2–4.3, joint clipping): `g32 +=
/// Σ_{i ∈ batch} x_i (p_i − y_i)ᵀ · min(1, ν / (‖x_i‖·‖p_i − y_i‖))` (class-major; for the
/// linear model ‖x (p − y)ᵀ‖_F = ‖x‖·‖p − y‖ exactly). `xnorms[i]` is ‖x_i‖. Returns how many
/// examples were clipped. Uses the register-tiled path where available.
///
/// Each example is scaled to at most ν·(1 − 2⁻²⁰) ([`clip_target`]), not ν: its residual is
/// rounded to f32 after scaling (relative error ≤ 2⁻²⁴ per entry), so the term it adds has
/// norm ≤ ν·(1 − 2⁻²⁰)·(1 + 2⁻²⁴) < ν — the sensitivity the noise is calibrated for holds
/// in floating point, not only in exact arithmetic.
pub fn clipped_grad_sum(
    design: &Design<'_>,
    p: &KernelParams,
    batch: &[usize],
    xnorms: &[f64],
    clip: f64,
    g32: &mut [f32],
) -> u64 {
    let clip = clip_target(clip);
    #[cfg(target_arch = "x86_64")]
    {
        if simd::available() && p.cp <= simd::MAX_CP {
            let mut clipped = 0;
            for chunk in batch.chunks(simd::GR) {
                let g = chunk.len();
                let rows: [&[f32]; simd::GR] =
                    std::array::from_fn(|r| design.row(chunk[r.min(g - 1)]));
                let y: [u32; simd::GR] = std::array::from_fn(|r| design.y[chunk[r.min(g - 1)]]);
                let xn: [f64; simd::GR] = std::array::from_fn(|r| xnorms[chunk[r.min(g - 1)]]);
                // SAFETY: AVX2+FMA detected; rows come from `design` (dp floats each); labels
                // are < c by the design's construction; g32 holds c·dp floats.
                clipped += unsafe { simd::group_rows(&rows, &y, g, p, g32, Some((&xn, clip))).1 };
            }
            return clipped;
        }
    }
    clipped_grad_sum_portable_at(design, p, batch, xnorms, clip, g32)
}

/// The norm DP-SGD scales each example's gradient to: ν·(1 − 2⁻²⁰), so that the f32 rounding
/// of the scaled residual cannot carry a term past ν (see [`clipped_grad_sum`]).
pub fn clip_target(clip: f64) -> f64 {
    clip * (1.0 - 2f64.powi(-20))
}

/// [`clipped_grad_sum`] one row at a time with an f64 softmax (the reference).
pub fn clipped_grad_sum_portable(
    design: &Design<'_>,
    p: &KernelParams,
    batch: &[usize],
    xnorms: &[f64],
    clip: f64,
    g32: &mut [f32],
) -> u64 {
    clipped_grad_sum_portable_at(design, p, batch, xnorms, clip_target(clip), g32)
}

/// [`clipped_grad_sum_portable`] scaling to exactly `clip` (the caller has applied
/// [`clip_target`]).
fn clipped_grad_sum_portable_at(
    design: &Design<'_>,
    p: &KernelParams,
    batch: &[usize],
    xnorms: &[f64],
    clip: f64,
    g32: &mut [f32],
) -> u64 {
    let (c, dp) = (p.c, p.dp);
    let mut logits = vec![0f32; p.cp];
    let mut r = vec![0f64; c];
    let mut clipped = 0;
    for &i in batch {
        let x = design.row(i);
        forward_row_portable(x, &p.w, dp, p.cp, &mut logits);
        let (_, rn) = softmax_residual(&logits[..c], design.y[i] as usize, &mut r);
        let gnorm = xnorms[i] * rn.sqrt();
        let scale = if gnorm > clip {
            clipped += 1;
            clip / gnorm
        } else {
            1.0
        };
        for k in 0..c {
            let a = (r[k] * scale) as f32;
            for (g, xv) in g32[k * dp..(k + 1) * dp].iter_mut().zip(x) {
                *g += a * *xv;
            }
        }
    }
    clipped
}

/// Logits of one padded row for the `cp` (padded) classes.
#[inline]
pub fn forward_row(x: &[f32], w: &[f32], dp: usize, cp: usize, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd::available() {
            // SAFETY: AVX2 and FMA were detected at run time; slices have the sizes asserted.
            unsafe {
                match cp {
                    4 => return simd::forward_row::<4>(x, w, dp, out),
                    8 => return simd::forward_row::<8>(x, w, dp, out),
                    10 => return simd::forward_row::<10>(x, w, dp, out),
                    12 => return simd::forward_row::<12>(x, w, dp, out),
                    _ => {}
                }
            }
        }
    }
    forward_row_portable(x, w, dp, cp, out)
}

fn forward_row_portable(x: &[f32], w: &[f32], dp: usize, cp: usize, out: &mut [f32]) {
    for (k, o) in out.iter_mut().enumerate().take(cp) {
        let wk = &w[k * dp..(k + 1) * dp];
        let mut acc = [0f32; 8];
        for (xc, wc) in x.chunks_exact(8).zip(wk.chunks_exact(8)) {
            for l in 0..8 {
                acc[l] += xc[l] * wc[l];
            }
        }
        *o = acc.iter().sum();
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)] // register tiles read best as index loops
mod simd;

/// Logits (f32 products, f64 result) of every row of `design` under `p`, row-major `n × c`.
pub fn all_logits(design: &Design<'_>, p: &KernelParams) -> Vec<f64> {
    let c = p.c;
    let mut out = vec![0f64; design.n * c];
    let work = |(i, o): (usize, &mut [f64])| {
        let mut l = vec![0f32; p.cp];
        forward_row(design.row(i), &p.w, p.dp, p.cp, &mut l);
        for k in 0..c {
            o[k] = l[k] as f64;
        }
    };
    if design.n >= PAR_MIN_ROWS && parallel_allowed() {
        out.par_chunks_mut(c).enumerate().for_each(work);
    } else {
        out.chunks_mut(c).enumerate().for_each(work);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng};

    /// [`Design::of`] lays out the same padded rows as [`Design::new`] (so every fit gives the
    /// same result), for dimensions that are and are not multiples of 8, and shares one copy
    /// across designs of the same dataset.
    #[test]
    fn design_of_a_unit_ball_dataset_equals_design_new_and_shares_its_copy() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        for d in [1, 7, 8, 9, 785] {
            let n = 13;
            let f: Vec<f32> = (0..n * d)
                .map(|_| rng.random::<f32>() / (d as f32).sqrt() / 2.0)
                .collect();
            let y: Vec<u32> = (0..n as u32).map(|i| i % 3).collect();
            let ds = UnitBallDataset::new(
                privpred_data::Dataset::new(d, 3, f, y, Default::default()).unwrap(),
            )
            .unwrap();
            let a = Design::new(&ds.features, &ds.labels, d, 3);
            let b = Design::of(&ds);
            assert_eq!((a.n, a.d, a.dp, a.c), (b.n, b.d, b.dp, b.c));
            assert_eq!(a.x, b.x, "d = {d}");
            assert_eq!(a.y, b.y);
            assert_eq!(
                Design::of(&ds).x.as_ptr(),
                b.x.as_ptr(),
                "d = {d}: copied again"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// The register-tiled AVX2 pass (8-row groups, f32 softmax lanes) agrees with the
        /// portable f64-softmax pass on loss and gradient, for every class count the tiles
        /// cover (2..=12) and beyond, dimensions that are and are not multiples of 16, and
        /// row counts that leave partial groups.
        #[test]
        fn tiled_pass_matches_portable(
            n in 1usize..70, d in 1usize..50, c in 2usize..15, seed in 0u64..10_000,
            scale in 0.1f64..8.0,
        ) {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let mut x = vec![0f32; n * d];
            for row in x.chunks_exact_mut(d) {
                let mut norm = 0.0f32;
                for v in row.iter_mut() {
                    *v = rng.random::<f32>() - 0.3;
                    norm += *v * *v;
                }
                let s = norm.sqrt().max(1.0);
                row.iter_mut().for_each(|v| *v /= s);
            }
            let y: Vec<u32> = (0..n).map(|_| rng.random_range(0..c as u32)).collect();
            let theta: Vec<f64> =
                (0..d * c).map(|_| (rng.random::<f64>() - 0.5) * scale).collect();
            let des = Design::new(&x, &y, d, c);
            let p = KernelParams::from_theta(&theta, d, c);
            let (l1, g1) = loss_grad_sums(&des, &p, false);
            let (l2, g2) = loss_grad_sums_portable(&des, &p, false);
            prop_assert!((l1 - l2).abs() <= 1e-5 * (1.0 + l2.abs()), "loss {l1} vs {l2}");
            let gmax = g2.iter().fold(0f64, |a, b| a.max(b.abs()));
            for (a, b) in g1.iter().zip(&g2) {
                prop_assert!((a - b).abs() <= 1e-5 * (1.0 + gmax), "grad {a} vs {b}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        /// DP-SGD's tiled clipped gradient sum equals the one-row reference: same clipped
        /// count, same sums; every per-example contribution, as the f32 sum holds it, has norm
        /// ≤ ν exactly (checked by summing a single-example batch), rounding included.
        #[test]
        fn clipped_sum_matches_portable_and_bounds_each_example(
            n in 1usize..40, d in 1usize..40, c in 2usize..13, seed in 0u64..10_000,
            clip in 0.001f64..2.0, scale in 0.1f64..5.0,
        ) {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let x: Vec<f32> = (0..n * d).map(|_| (rng.random::<f32>() - 0.5) * 0.4).collect();
            let y: Vec<u32> = (0..n).map(|_| rng.random_range(0..c as u32)).collect();
            let theta: Vec<f64> =
                (0..d * c).map(|_| (rng.random::<f64>() - 0.5) * scale).collect();
            let des = Design::new(&x, &y, d, c);
            let p = KernelParams::from_theta(&theta, d, c);
            let norms: Vec<f64> = (0..n)
                .map(|i| des.row(i).iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt())
                .collect();
            let batch: Vec<usize> = (0..n).filter(|_| rng.random::<f64>() < 0.7).collect();
            let mut g1 = vec![0f32; c * des.dp];
            let mut g2 = vec![0f32; c * des.dp];
            let k1 = clipped_grad_sum(&des, &p, &batch, &norms, clip, &mut g1);
            let k2 = clipped_grad_sum_portable(&des, &p, &batch, &norms, clip, &mut g2);
            prop_assert_eq!(k1, k2);
            for (a, b) in g1.iter().zip(&g2) {
                prop_assert!((a - b).abs() <= 1e-5 * (1.0 + clip * batch.len() as f64) as f32);
            }
            for &i in &batch {
                let mut gi = vec![0f32; c * des.dp];
                clipped_grad_sum(&des, &p, &[i], &norms, clip, &mut gi);
                let nrm = gi.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
                // exactly ≤ ν in floating point, not ν up to rounding (clip_target)
                prop_assert!(nrm <= clip, "example {i}: norm {nrm} > clip {clip}");
            }
        }
    }

    /// `sequential` makes a parallel-allowed pass take the sequential path (bit-identical to
    /// `parallel = false`) and restores the previous state, also when nested.
    #[test]
    fn sequential_is_scoped_and_takes_the_sequential_path() {
        let (n, d, c) = (PAR_MIN_ROWS + 1000, 16, 3);
        let x: Vec<f32> = (0..n * d).map(|i| ((i * 37) % 11) as f32 * 0.02).collect();
        let y: Vec<u32> = (0..n).map(|i| (i % c) as u32).collect();
        let des = Design::new(&x, &y, d, c);
        let theta: Vec<f64> = (0..d * c).map(|i| (i as f64 * 0.1).sin()).collect();
        let p = KernelParams::from_theta(&theta, d, c);
        let (l1, g1) = loss_grad_sums(&des, &p, false);
        let (l2, g2) = sequential(|| loss_grad_sums(&des, &p, true));
        assert_eq!(l1.to_bits(), l2.to_bits());
        assert!(g1.iter().zip(&g2).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert!(parallel_allowed());
        sequential(|| {
            sequential(|| ());
            assert!(!parallel_allowed());
        });
        assert!(parallel_allowed());
    }

    /// exp4d against std's f64 exp over the range the softmax uses (x ≤ 0): relative error
    /// ≤ 1e-14.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn exp4d_is_accurate() {
        if !simd::available() {
            return;
        }
        let mut x = -707.0f64;
        while x <= 0.0 {
            let v = [x, x * 1e-2, x * 1e-4, 0.0];
            let mut out = [0f64; 4];
            // SAFETY: AVX2 detected.
            unsafe {
                use std::arch::x86_64::*;
                _mm256_storeu_pd(
                    out.as_mut_ptr(),
                    simd::exp4d_pub(_mm256_loadu_pd(v.as_ptr())),
                );
            }
            for (o, i) in out.iter().zip(v.iter()) {
                let want = i.exp();
                assert!(
                    (o - want).abs() <= 1e-14 * want,
                    "exp({i}) = {o}, want {want}"
                );
            }
            x += 0.0137;
        }
    }
}
