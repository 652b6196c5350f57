//! The fused softmax-cross-entropy kernel: one pass over row blocks computes the logits, the
//! softmax, the loss and the gradient accumulation while the block is in cache.
//!
//! Layout: features are f32, row-major, each row padded with zeros to a multiple of 8 (one
//! AVX2 register); parameters are handed to the kernel class-major (`C × D_pad`, f32) and the
//! gradient comes back class-major in f64. Products and the per-block gradient accumulation
//! are f32 (FMA); the softmax, the loss and the accumulation across blocks are f64, which keeps
//! the gradient accurate to ~1e-7 (far below the 1e-4 stopping tolerance).
//!
//! Measured against a GEMM formulation (`X·W` then `Xᵀ·G` with the `gemm`/`faer` crates, which
//! reach 30–60 GFLOP/s on these C = 10 shapes): the fused pass reads X once per evaluation and
//! avoids materialising the N × C matrices; see `benches/linear_bench.rs` for the numbers.
//!
//! Parallelism: rayon over blocks of rows for large N; sequential for small N (teachers'
//! shards), where callers parallelise across models instead.

use rayon::prelude::*;
use std::borrow::Cow;

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
    let n = design.n;
    let nblocks = n.div_ceil(BLOCK);
    let run_block = |acc: &mut Acc, b: usize| {
        let r0 = b * BLOCK;
        let r1 = (r0 + BLOCK).min(n);
        acc.loss += block_pass(design, p, r0, r1, &mut acc.g32);
        acc.flush();
    };
    let acc = if parallel && n >= PAR_MIN_ROWS && rayon::current_num_threads() > 1 {
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
fn block_pass(design: &Design<'_>, p: &KernelParams, r0: usize, r1: usize, g32: &mut [f32]) -> f64 {
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
            forward_row(row, &p.w, dp, p.cp, &mut logits);
            let y = design.y[i + k] as usize;
            let m = logits[..c].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
            let mut s = 0.0f64;
            for (ej, &lj) in e.iter_mut().zip(logits.iter()) {
                *ej = (lj as f64 - m).exp();
                s += *ej;
            }
            loss += s.ln() + m - logits[y] as f64;
            let inv = 1.0 / s;
            for (j, (rj, ej)) in resid.iter_mut().zip(e.iter()).enumerate() {
                rj[k] = (ej * inv - if j == y { 1.0 } else { 0.0 }) as f32;
            }
        }
        backward_group(design, i, g, &resid, g32, dp);
        i += g;
    }
    loss
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

/// `g32[k] += Σ_r resid[k][r] · x_{i+r}` for `g ≤ 4` rows starting at `i`.
#[inline]
fn backward_group(
    design: &Design<'_>,
    i: usize,
    g: usize,
    resid: &[[f32; 4]],
    g32: &mut [f32],
    dp: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd::available() && g == 4 {
            // SAFETY: AVX2 and FMA were detected at run time; the four rows exist.
            unsafe {
                simd::backward4(
                    [
                        design.row(i),
                        design.row(i + 1),
                        design.row(i + 2),
                        design.row(i + 3),
                    ],
                    resid,
                    g32,
                    dp,
                );
            }
            return;
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
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    pub fn available() -> bool {
        static AVAIL: OnceLock<bool> = OnceLock::new();
        *AVAIL.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps(v, 1);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }

    /// # Safety
    /// AVX2+FMA available; `x.len() >= dp`, `w.len() >= CP*dp`, `out.len() >= CP`, `dp.is_multiple_of(8)`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn forward_row<const CP: usize>(x: &[f32], w: &[f32], dp: usize, out: &mut [f32]) {
        assert!(x.len() >= dp && w.len() >= CP * dp && out.len() >= CP && dp.is_multiple_of(8));
        let mut acc = [_mm256_setzero_ps(); CP];
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let mut j = 0;
        while j < dp {
            // SAFETY: j + 8 <= dp and the bounds asserted above.
            unsafe {
                let xv = _mm256_loadu_ps(xp.add(j));
                for (k, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(xv, _mm256_loadu_ps(wp.add(k * dp + j)), *a);
                }
            }
            j += 8;
        }
        for k in 0..CP {
            // SAFETY: AVX2 enabled on this function.
            out[k] = unsafe { hsum(acc[k]) };
        }
    }

    /// # Safety
    /// AVX2+FMA available; each row has `dp` values, `g32.len() == resid.len() * dp`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn backward4(rows: [&[f32]; 4], resid: &[[f32; 4]], g32: &mut [f32], dp: usize) {
        assert!(
            rows.iter().all(|r| r.len() >= dp)
                && g32.len() >= resid.len() * dp
                && dp.is_multiple_of(8)
        );
        let (x0, x1, x2, x3) = (
            rows[0].as_ptr(),
            rows[1].as_ptr(),
            rows[2].as_ptr(),
            rows[3].as_ptr(),
        );
        for (k, rk) in resid.iter().enumerate() {
            let b0 = _mm256_set1_ps(rk[0]);
            let b1 = _mm256_set1_ps(rk[1]);
            let b2 = _mm256_set1_ps(rk[2]);
            let b3 = _mm256_set1_ps(rk[3]);
            let gp = g32[k * dp..(k + 1) * dp].as_mut_ptr();
            let mut j = 0;
            while j < dp {
                // SAFETY: j + 8 <= dp; bounds asserted above.
                unsafe {
                    let mut g = _mm256_loadu_ps(gp.add(j));
                    g = _mm256_fmadd_ps(_mm256_loadu_ps(x0.add(j)), b0, g);
                    g = _mm256_fmadd_ps(_mm256_loadu_ps(x1.add(j)), b1, g);
                    g = _mm256_fmadd_ps(_mm256_loadu_ps(x2.add(j)), b2, g);
                    g = _mm256_fmadd_ps(_mm256_loadu_ps(x3.add(j)), b3, g);
                    _mm256_storeu_ps(gp.add(j), g);
                }
                j += 8;
            }
        }
    }
}

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
    if design.n >= PAR_MIN_ROWS {
        out.par_chunks_mut(c).enumerate().for_each(work);
    } else {
        out.chunks_mut(c).enumerate().for_each(work);
    }
    out
}
