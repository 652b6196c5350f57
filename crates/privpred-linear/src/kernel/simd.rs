//! The AVX2+FMA register-tiled paths of the fused kernel (x86-64 only): the 2-row × ≤ 5-class
//! forward tiles, the 8-row f64-lane softmax with a vectorised `exp`, and the ≤ 5-class × 16-column
//! gradient tiles (see the parent module's documentation).

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

/// Rows per group of the tiled pass.
pub const GR: usize = 8;
/// Largest padded class count the tiled pass handles.
pub const MAX_CP: usize = 12;

/// `exp(x)` for 4 f64 lanes, `x ≤ 0` (inputs below −708 give ≈ 0): Cody–Waite range
/// reduction to |r| ≤ ln2/2 and the degree-13 Taylor polynomial (truncation < 1e-17), 2ⁿ
/// through the exponent bits; relative error a few ulp.
#[target_feature(enable = "avx2,fma")]
fn exp4d(x: __m256d) -> __m256d {
    let x = _mm256_max_pd(x, _mm256_set1_pd(-708.0));
    let n = _mm256_round_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_pd(
        x,
        _mm256_set1_pd(std::f64::consts::LOG2_E),
    ));
    // ln 2 split in a high part with trailing zero bits and the rest (Cody–Waite).
    let r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.931_471_803_691_238e-1), x);
    let r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.908_214_929_270_587_7e-10), r);
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
    let mut q = _mm256_set1_pd(INV_FACT[13]);
    for &c in INV_FACT[..13].iter().rev() {
        q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(c));
    }
    // n (an integer-valued double in [−1022, 0]) → i64 via the 1.5·2⁵² trick, then 2ⁿ.
    let magic = _mm256_set1_pd(6_755_399_441_055_744.0);
    let ni = _mm256_sub_epi64(
        _mm256_castpd_si256(_mm256_add_pd(n, magic)),
        _mm256_castpd_si256(magic),
    );
    let pow2 = _mm256_slli_epi64::<52>(_mm256_add_epi64(ni, _mm256_set1_epi64x(1023)));
    _mm256_mul_pd(q, _mm256_castsi256_pd(pow2))
}

/// [`exp4d`] for tests.
///
/// # Safety
/// AVX2+FMA available.
#[cfg(test)]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn exp4d_pub(x: __m256d) -> __m256d {
    exp4d(x)
}

/// Forward tile: logits of 2 rows × `KT` classes starting at class `k0`, written to
/// `out[k][r0 + r]` (class-major).
///
/// # Safety
/// AVX2+FMA; `x0`, `x1` point to `dp` floats; `w` to the class-major weights with at least
/// `(k0 + KT) · dp` floats; `dp` is a multiple of 8.
#[target_feature(enable = "avx2,fma")]
unsafe fn fwd_tile<const KT: usize>(
    x0: *const f32,
    x1: *const f32,
    w: *const f32,
    dp: usize,
    k0: usize,
    out: &mut [[f32; GR]; MAX_CP],
    r0: usize,
) {
    let mut a0 = [_mm256_setzero_ps(); KT];
    let mut a1 = [_mm256_setzero_ps(); KT];
    let mut j = 0;
    while j < dp {
        // SAFETY: j + 8 ≤ dp; the caller guarantees the extents.
        unsafe {
            let v0 = _mm256_loadu_ps(x0.add(j));
            let v1 = _mm256_loadu_ps(x1.add(j));
            for k in 0..KT {
                let wv = _mm256_loadu_ps(w.add((k0 + k) * dp + j));
                a0[k] = _mm256_fmadd_ps(v0, wv, a0[k]);
                a1[k] = _mm256_fmadd_ps(v1, wv, a1[k]);
            }
        }
        j += 8;
    }
    for k in 0..KT {
        // SAFETY: AVX2 enabled on this function.
        unsafe {
            out[k0 + k][r0] = hsum(a0[k]);
            out[k0 + k][r0 + 1] = hsum(a1[k]);
        }
    }
}

/// Backward tile: `g[k0+k][j0..j0+8·JT] += Σ_r resid[k0+k][r] · x_r[j0..]` over the 8 rows.
///
/// # Safety
/// AVX2+FMA; every `xs[r]` points to `dp` floats; `g` holds `(k0 + KT) · dp` floats;
/// `j0 + 8·JT ≤ dp`.
#[target_feature(enable = "avx2,fma")]
unsafe fn bwd_tile<const KT: usize, const JT: usize>(
    xs: &[*const f32; GR],
    resid: &[[f32; GR]; MAX_CP],
    g: *mut f32,
    dp: usize,
    k0: usize,
    j0: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); JT]; KT];
    // SAFETY: all offsets are inside the extents the caller guarantees.
    unsafe {
        for k in 0..KT {
            for t in 0..JT {
                acc[k][t] = _mm256_loadu_ps(g.add((k0 + k) * dp + j0 + 8 * t));
            }
        }
        for r in 0..GR {
            let mut xv = [_mm256_setzero_ps(); JT];
            for t in 0..JT {
                xv[t] = _mm256_loadu_ps(xs[r].add(j0 + 8 * t));
            }
            for k in 0..KT {
                let b = _mm256_set1_ps(resid[k0 + k][r]);
                for t in 0..JT {
                    acc[k][t] = _mm256_fmadd_ps(xv[t], b, acc[k][t]);
                }
            }
        }
        for k in 0..KT {
            for t in 0..JT {
                _mm256_storeu_ps(g.add((k0 + k) * dp + j0 + 8 * t), acc[k][t]);
            }
        }
    }
}

/// Class tiles of at most 5: (start, width).
fn class_tiles(cp: usize) -> impl Iterator<Item = (usize, usize)> {
    let tiles = cp.div_ceil(5);
    let base = cp / tiles;
    let extra = cp % tiles;
    (0..tiles).scan(0usize, move |k0, t| {
        let w = base + usize::from(t < extra);
        let s = *k0;
        *k0 += w;
        Some((s, w))
    })
}

/// One group of `g ≤ GR` rows starting at `i` of `design`: see [`group_rows`].
///
/// # Safety
/// AVX2+FMA; `p.cp ≤ MAX_CP`; rows `i..i+g` exist in `design`; `g32` holds `p.c · p.dp`
/// floats.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn group_pass(
    design: &super::Design<'_>,
    p: &super::KernelParams,
    i: usize,
    g: usize,
    g32: &mut [f32],
) -> f64 {
    let dp = p.dp;
    assert!((1..=GR).contains(&g) && design.x.len() >= (i + g) * dp);
    let xs: [&[f32]; GR] = std::array::from_fn(|r| design.row(i + r.min(g - 1)));
    let mut y = [0u32; GR];
    y[..g].copy_from_slice(&design.y[i..i + g]);
    // SAFETY: forwarded from the caller.
    unsafe { group_rows(&xs, &y, g, p, g32, None).0 }
}

/// Register-tiled forward (2 rows × ≤ 5 classes), softmax across the 8 rows in f64 lanes
/// (vectorised `exp`), optional per-example clipping of the gradient `x (p − y)ᵀ` to norm
/// `ν` (its norm is ‖x‖·‖p − y‖ for the linear model; `clip = (‖x_r‖ per row, ν)`), and
/// register-tiled accumulation `g32 += Σ_r x_r (p_r − y_r)ᵀ·scale_r` (≤ 5 classes × 16
/// columns). Slots past `g` must repeat a real row; their residuals are zeroed. Returns the
/// summed loss and the number of clipped rows.
///
/// # Safety
/// AVX2+FMA; `p.cp ≤ MAX_CP`; every `xs[r]` has `p.dp` floats; `g32` holds `p.c · p.dp`
/// floats.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn group_rows(
    rows: &[&[f32]; GR],
    y: &[u32; GR],
    g: usize,
    p: &super::KernelParams,
    g32: &mut [f32],
    clip: Option<(&[f64; GR], f64)>,
) -> (f64, u64) {
    let (dp, c, cp) = (p.dp, p.c, p.cp);
    assert!((1..=GR).contains(&g) && cp <= MAX_CP && dp.is_multiple_of(8));
    assert!(rows.iter().all(|r| r.len() >= dp));
    assert!(g32.len() >= c * dp && p.w.len() >= cp * dp);
    assert!(y[..g].iter().all(|&v| (v as usize) < c));
    let xs: [*const f32; GR] = std::array::from_fn(|r| rows[r].as_ptr());
    let mut clipped = 0u64;
    let mut logits = [[0f32; GR]; MAX_CP];
    let w = p.w.as_ptr();
    for (k0, kt) in class_tiles(cp) {
        for r0 in (0..GR).step_by(2) {
            // SAFETY: extents asserted above.
            unsafe {
                match kt {
                    1 => fwd_tile::<1>(xs[r0], xs[r0 + 1], w, dp, k0, &mut logits, r0),
                    2 => fwd_tile::<2>(xs[r0], xs[r0 + 1], w, dp, k0, &mut logits, r0),
                    3 => fwd_tile::<3>(xs[r0], xs[r0 + 1], w, dp, k0, &mut logits, r0),
                    4 => fwd_tile::<4>(xs[r0], xs[r0 + 1], w, dp, k0, &mut logits, r0),
                    _ => fwd_tile::<5>(xs[r0], xs[r0 + 1], w, dp, k0, &mut logits, r0),
                }
            }
        }
    }
    // Softmax over the c real classes in f64, one lane per row, two halves of 4 rows.
    let mut resid = [[0f32; GR]; MAX_CP];
    let mut s_arr = [0f64; GR];
    let mut m_arr = [0f64; GR];
    // SAFETY: AVX2 enabled; arrays have GR = 8 lanes, halves of 4.
    unsafe {
        for h in 0..2 {
            let o = 4 * h;
            let ld = |k: usize| _mm256_cvtps_pd(_mm_loadu_ps(logits[k][o..].as_ptr()));
            let mut m = ld(0);
            for k in 1..c {
                m = _mm256_max_pd(m, ld(k));
            }
            let mut e = [_mm256_setzero_pd(); MAX_CP];
            let mut sum = _mm256_setzero_pd();
            for k in 0..c {
                e[k] = exp4d(_mm256_sub_pd(ld(k), m));
                sum = _mm256_add_pd(sum, e[k]);
            }
            let inv = _mm256_div_pd(_mm256_set1_pd(1.0), sum);
            let yv = _mm256_cvtepi32_epi64(_mm_loadu_si128(y[o..].as_ptr() as *const __m128i));
            let live = _mm256_castsi256_pd(_mm256_cmpgt_epi64(
                _mm256_set1_epi64x(g as i64),
                _mm256_setr_epi64x(o as i64, o as i64 + 1, o as i64 + 2, o as i64 + 3),
            ));
            let one = _mm256_set1_pd(1.0);
            let mut rn2 = _mm256_setzero_pd();
            for k in 0..c {
                let hot = _mm256_castsi256_pd(_mm256_cmpeq_epi64(yv, _mm256_set1_epi64x(k as i64)));
                let r = _mm256_sub_pd(_mm256_mul_pd(e[k], inv), _mm256_and_pd(hot, one));
                e[k] = _mm256_and_pd(r, live);
                rn2 = _mm256_fmadd_pd(e[k], e[k], rn2);
            }
            if let Some((xn, nu)) = clip {
                // ‖x_r (p_r − y_r)ᵀ‖_F = ‖x_r‖·‖p_r − y_r‖; scale = min(1, ν/norm)
                let gn = _mm256_mul_pd(_mm256_loadu_pd(xn[o..].as_ptr()), _mm256_sqrt_pd(rn2));
                let nuv = _mm256_set1_pd(nu);
                let over = _mm256_cmp_pd::<_CMP_GT_OQ>(gn, nuv);
                clipped += (_mm256_movemask_pd(over) as u32).count_ones() as u64;
                let scale = _mm256_blendv_pd(one, _mm256_div_pd(nuv, gn), over);
                for ek in e.iter_mut().take(c) {
                    *ek = _mm256_mul_pd(*ek, scale);
                }
            }
            for k in 0..c {
                _mm_storeu_ps(resid[k][o..].as_mut_ptr(), _mm256_cvtpd_ps(e[k]));
            }
            _mm256_storeu_pd(s_arr[o..].as_mut_ptr(), sum);
            _mm256_storeu_pd(m_arr[o..].as_mut_ptr(), m);
        }
    }
    // SAFETY: AVX2 enabled; same extents as the forward.
    unsafe {
        // SAFETY: same extents as the forward.
        let gp = g32.as_mut_ptr();
        for (k0, kt) in class_tiles(c) {
            let mut j0 = 0;
            while j0 + 16 <= dp {
                match kt {
                    1 => bwd_tile::<1, 2>(&xs, &resid, gp, dp, k0, j0),
                    2 => bwd_tile::<2, 2>(&xs, &resid, gp, dp, k0, j0),
                    3 => bwd_tile::<3, 2>(&xs, &resid, gp, dp, k0, j0),
                    4 => bwd_tile::<4, 2>(&xs, &resid, gp, dp, k0, j0),
                    _ => bwd_tile::<5, 2>(&xs, &resid, gp, dp, k0, j0),
                }
                j0 += 16;
            }
            if j0 < dp {
                match kt {
                    1 => bwd_tile::<1, 1>(&xs, &resid, gp, dp, k0, j0),
                    2 => bwd_tile::<2, 1>(&xs, &resid, gp, dp, k0, j0),
                    3 => bwd_tile::<3, 1>(&xs, &resid, gp, dp, k0, j0),
                    4 => bwd_tile::<4, 1>(&xs, &resid, gp, dp, k0, j0),
                    _ => bwd_tile::<5, 1>(&xs, &resid, gp, dp, k0, j0),
                }
            }
        }
    }
    let mut loss = 0.0;
    for r in 0..g {
        loss += s_arr[r].ln() + m_arr[r] - logits[y[r] as usize][r] as f64;
    }
    (loss, clipped)
}
