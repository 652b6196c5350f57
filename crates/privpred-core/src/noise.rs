//! Noise samplers and random-number generators.
//!
//! Every sampler takes `&mut R` with `R: Rng + ?Sized`, so experiments pass a seeded
//! generator ([`seeded_rng`]) and releases pass the OS-seeded cryptographic one
//! ([`release_rng`]). There is no global or ambient generator here.

use crate::error::{CoreError, Result};
use crate::types::Noise;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, Gamma, StandardNormal};

/// The generator type of this crate: ChaCha20 (a cryptographic stream cipher).
pub type PrivRng = ChaCha20Rng;

/// The release-path generator: ChaCha20 seeded from the operating system's entropy source.
/// Exposes no seed. Errors (never panics) if the OS has no entropy to give.
pub fn release_rng() -> Result<PrivRng> {
    ChaCha20Rng::try_from_rng(&mut rand::rngs::SysRng).map_err(|e| {
        CoreError::Numerical(format!("the operating system's entropy source failed: {e}"))
    })
}

/// An experiment generator: ChaCha20 from a recorded 64-bit seed (deterministic).
pub fn seeded_rng(seed: u64) -> PrivRng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn check_scale(name: &'static str, v: f64) -> Result<()> {
    if !(v.is_finite() && v > 0.0) {
        return Err(CoreError::invalid(name, v, "must be a finite number > 0"));
    }
    Ok(())
}

/// A uniformly distributed direction on the unit sphere in R^dim (normalised Gaussian).
pub fn sample_unit_direction<R: Rng + ?Sized>(rng: &mut R, dim: usize) -> Vec<f64> {
    loop {
        let v: Vec<f64> = (0..dim).map(|_| StandardNormal.sample(rng)).collect();
        let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if n > 0.0 && n.is_finite() {
            return v.into_iter().map(|x| x / n).collect();
        }
    }
}

/// One draw of the ℓ2-Laplace distribution in R^dim, density ∝ exp(−β‖b‖₂): a uniform
/// direction times a radius r ~ Gamma(shape = dim, rate = β). (In polar coordinates the
/// density of r is ∝ r^{dim−1} e^{−βr}.)
pub fn sample_l2_laplace<R: Rng + ?Sized>(rng: &mut R, dim: usize, beta: f64) -> Result<Vec<f64>> {
    check_scale("beta", beta)?;
    if dim == 0 {
        return Err(CoreError::invalid("dimension", dim, "must be >= 1"));
    }
    let r = sample_l2_laplace_radius(rng, dim, beta)?;
    let mut v = sample_unit_direction(rng, dim);
    for x in &mut v {
        *x *= r;
    }
    Ok(v)
}

/// The radius of an ℓ2-Laplace draw: Gamma(shape = dim, rate = β).
pub fn sample_l2_laplace_radius<R: Rng + ?Sized>(
    rng: &mut R,
    dim: usize,
    beta: f64,
) -> Result<f64> {
    check_scale("beta", beta)?;
    if dim == 0 {
        return Err(CoreError::invalid("dimension", dim, "must be >= 1"));
    }
    let g = Gamma::new(dim as f64, 1.0 / beta)
        .map_err(|e| CoreError::Numerical(format!("gamma: {e}")))?;
    Ok(g.sample(rng))
}

/// One draw of the isotropic Gaussian N(0, σ²I) in R^dim.
pub fn sample_gaussian<R: Rng + ?Sized>(rng: &mut R, dim: usize, sigma: f64) -> Result<Vec<f64>> {
    check_scale("sigma", sigma)?;
    Ok((0..dim)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            sigma * z
        })
        .collect())
}

/// Log-probabilities of the exponential mechanism P(y) ∝ exp(β·score_y), by log-sum-exp
/// (stable for any β·score).
pub fn exponential_mechanism_log_probabilities<T: Copy + Into<f64>>(
    scores: &[T],
    beta: f64,
) -> Result<Vec<f64>> {
    if !(beta.is_finite() && beta >= 0.0) {
        return Err(CoreError::invalid(
            "beta",
            beta,
            "must be a finite number >= 0",
        ));
    }
    if scores.is_empty() {
        return Err(CoreError::invalid(
            "scores",
            "[]",
            "must hold at least one class",
        ));
    }
    let logits: Vec<f64> = scores.iter().map(|&s| beta * s.into()).collect();
    if logits.iter().any(|l| !l.is_finite()) {
        return Err(CoreError::invalid("scores", "non-finite", "must be finite"));
    }
    let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = m + logits.iter().map(|l| (l - m).exp()).sum::<f64>().ln();
    Ok(logits.into_iter().map(|l| l - lse).collect())
}

/// One draw of the exponential mechanism over counts: index y with probability
/// ∝ exp(β·score_y). Uses the Gumbel-max trick (argmax of β·score_y + Gumbel noise), which
/// never exponentiates β·score and so is stable for any magnitude.
pub fn sample_exponential_mechanism<R: Rng + ?Sized, T: Copy + Into<f64>>(
    rng: &mut R,
    scores: &[T],
    beta: f64,
) -> Result<usize> {
    if !(beta.is_finite() && beta >= 0.0) {
        return Err(CoreError::invalid(
            "beta",
            beta,
            "must be a finite number >= 0",
        ));
    }
    if scores.is_empty() {
        return Err(CoreError::invalid(
            "scores",
            "[]",
            "must hold at least one class",
        ));
    }
    let mut best = 0;
    let mut best_v = f64::NEG_INFINITY;
    for (i, &s) in scores.iter().enumerate() {
        let l = beta * s.into();
        if !l.is_finite() {
            return Err(CoreError::invalid("scores", "non-finite", "must be finite"));
        }
        // Gumbel(0, 1) = −ln(E), E ~ Exp(1) drawn with full precision at both ends
        // (see `exp1_full`): a class keeps a nonzero probability up to β·gap ≈ 750.
        let g = -exp1_full(rng).ln();
        let v = l + g;
        if v > best_v {
            best_v = v;
            best = i;
        }
    }
    Ok(best)
}

/// One draw of the exponential mechanism (alias of [`sample_exponential_mechanism`]):
/// index y with probability ∝ exp(β·score_y), by Gumbel-max. Scores may be `f64`, `f32` or
/// integer vote counts (`u32`, `u16`, `u8`).
pub fn exponential_mechanism<R: Rng + ?Sized, T: Copy + Into<f64>>(
    rng: &mut R,
    scores: &[T],
    beta: f64,
) -> Result<usize> {
    sample_exponential_mechanism(rng, scores, beta)
}

/// Adds one draw of `noise` (ℓ2-Laplace or Gaussian, dimension = `values.len()`) to
/// `values` in place. The exponential mechanism is not additive: it errors.
pub fn add_noise<R: Rng + ?Sized>(noise: &Noise, rng: &mut R, values: &mut [f64]) -> Result<()> {
    noise.add_to(rng, values)
}

/// [`add_noise`] for `f32` values (noise drawn in f64, added, rounded once).
pub fn add_noise_f32<R: Rng + ?Sized>(
    noise: &Noise,
    rng: &mut R,
    values: &mut [f32],
) -> Result<()> {
    noise.add_to_f32(rng, values)
}

/// A uniform draw in (0, 1] that reaches every binade down to 2⁻¹⁰⁷⁴: the exponent is
/// geometric (the count of leading zero bits of an unbounded random bit string, 64 bits per
/// word), the 52-bit mantissa uniform — each f64 in (0, 1) is drawn with probability
/// proportional to its spacing, unlike k·2⁻⁵³ (53-bit uniforms), whose smallest nonzero value is
/// 2⁻⁵³. Below 2⁻¹⁰⁷⁴ (probability 2⁻¹⁰⁷⁴) it returns the smallest subnormal.
pub fn uniform_full_precision<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let mut exp: i32 = -1; // the value lies in [2^exp, 2^(exp+1))
    loop {
        let w = rng.next_u64();
        if w == 0 {
            exp -= 64;
            if exp < -1074 {
                return f64::from_bits(1);
            }
            continue;
        }
        exp -= w.leading_zeros() as i32;
        break;
    }
    if exp < -1074 {
        return f64::from_bits(1);
    }
    let mant = (rng.next_u64() >> 12) as f64 / (1u64 << 52) as f64; // [0, 1)
    // 2^exp·(1 + mant): exact for normal exponents, rounded for subnormal ones
    let v = (1.0 + mant) * 2f64.powi(exp.max(-1022)) * 2f64.powi((exp + 1022).min(0));
    if v > 0.0 { v } else { f64::from_bits(1) }
}

/// An Exp(1) draw with full relative precision at both ends: E = −ln U with U uniform on
/// (0, 1). With probability ½ U is in (0, ½]: E = −ln(V/2) (large E, from a full-precision V);
/// otherwise U = 1 − V/2 and E = −ln_1p(−V/2) (small E, down to ~2⁻¹⁰⁷⁵, where 1 − V/2 itself
/// would round to 1). Used by the Gumbel-max sampler, whose reach is −ln(E_min) − (−ln(E_max))
/// ≈ 744 + 6.6: every class with β·gap below ≈ 750 keeps a nonzero probability (its exact
/// probability beyond that is below e⁻⁷⁵⁰ ≈ 10⁻³²⁶, under the smallest f64).
pub fn exp1_full<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let upper = rng.next_u64() >> 63 == 1;
    let v = uniform_full_precision(rng);
    if upper {
        let e = -(-v / 2.0).ln_1p();
        if e > 0.0 { e } else { f64::from_bits(1) }
    } else {
        -(v / 2.0).ln()
    }
}

impl Noise {
    /// Draws one noise vector of dimension `dim` (ℓ2-Laplace or Gaussian). The exponential
    /// mechanism is not additive noise: use [`sample_exponential_mechanism`].
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R, dim: usize) -> Result<Vec<f64>> {
        match *self {
            Noise::L2Laplace { beta } => sample_l2_laplace(rng, dim, beta),
            Noise::Gaussian { sigma } => sample_gaussian(rng, dim, sigma),
            Noise::Exponential { .. } => Err(CoreError::Unsupported(
                "the exponential mechanism is not additive noise".into(),
            )),
            Noise::PermuteAndFlip { .. } => Err(CoreError::Unsupported(
                "permute-and-flip is a selection, not additive noise".into(),
            )),
        }
    }

    /// Adds one noise draw to `values` in place (ℓ2-Laplace or Gaussian).
    pub fn add_to<R: Rng + ?Sized>(&self, rng: &mut R, values: &mut [f64]) -> Result<()> {
        let n = self.sample(rng, values.len())?;
        for (v, e) in values.iter_mut().zip(n) {
            *v += e;
        }
        Ok(())
    }

    /// Adds one noise draw to `values` (f32) in place.
    pub fn add_to_f32<R: Rng + ?Sized>(&self, rng: &mut R, values: &mut [f32]) -> Result<()> {
        let n = self.sample(rng, values.len())?;
        for (v, e) in values.iter_mut().zip(n) {
            *v = (*v as f64 + e) as f32;
        }
        Ok(())
    }

    /// The distribution's name as printed (`l2-laplace`, `gaussian`, `exponential`,
    /// `permute-and-flip`).
    pub fn distribution_name(&self) -> &'static str {
        match self {
            Noise::L2Laplace { .. } => "l2-laplace",
            Noise::Gaussian { .. } => "gaussian",
            Noise::Exponential { .. } => "exponential",
            Noise::PermuteAndFlip { .. } => "permute-and-flip",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A generator replaying given words (then zeros): drives the samplers to their extremes.
    struct Replay(VecDeque<u64>);

    impl rand::TryRng for Replay {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
            Ok(self.0.pop_front().unwrap_or(0) as u32)
        }
        fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
            Ok(self.0.pop_front().unwrap_or(0))
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<(), Self::Error> {
            dst.iter_mut().for_each(|b| *b = 0);
            Ok(())
        }
    }

    /// Chi-square critical value at α ≈ 1e-9 (z = 6.0, Wilson–Hilferty).
    fn chi2_crit(df: f64) -> f64 {
        let z = 6.0;
        let a = 2.0 / (9.0 * df);
        df * (1.0 - a + z * a.sqrt()).powi(3)
    }

    fn chi2(counts: &[u64], probs: &[f64], n: u64) -> f64 {
        counts
            .iter()
            .zip(probs)
            .map(|(&c, &p)| {
                let e = p * n as f64;
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    /// The fixed case: a class whose β·gap is far beyond the old sampler's reach (≈ 40 with
    /// 53-bit uniforms, where its probability was exactly 0) is still drawn when the random
    /// bits call for it. With 53-bit uniforms Gumbel values lie in [−3.6, 36.7], so class 1 at
    /// β·gap = 100 or 690 could never win; here E₀ ≈ 697 (g₀ ≈ −6.5) and E₁ ≈ 2⁻¹⁰⁰⁵
    /// (g₁ ≈ 696.6).
    #[test]
    fn exponential_mechanism_keeps_every_class_reachable() {
        let stream = |branch: u64| {
            let mut w = vec![branch];
            w.extend(std::iter::repeat_n(0u64, 15)); // exponent −1 − 960
            w.push(1u64 << 20); // 43 more leading zeros: V = 2^-1004
            w.push(0); // mantissa
            w
        };
        for gap in [100u32, 690] {
            let mut words = stream(0); // class 0: lower branch, E = −ln(V/2) ≈ 696.6
            words.extend(stream(u64::MAX)); // class 1: upper branch, E ≈ V/2
            let mut rng = Replay(words.into());
            let k = sample_exponential_mechanism(&mut rng, &[gap, 0], 1.0).unwrap();
            assert_eq!(k, 1, "β·gap = {gap}");
        }
        // the extremes of the Exp(1) draw itself
        let mut rng = Replay(stream(u64::MAX).into());
        let e = exp1_full(&mut rng);
        assert!(e > 0.0 && e < 1e-300, "{e}");
        let mut rng = Replay(stream(0).into());
        assert!((exp1_full(&mut rng) - 1005.0 * std::f64::consts::LN_2).abs() < 1e-9);
        // a stream of zeros (probability 0) still gives a finite positive draw
        let mut rng = Replay(VecDeque::new());
        let u = uniform_full_precision(&mut rng);
        assert!(u > 0.0);
    }

    /// The full-precision uniform's binades: P(V ∈ [2^-(k+1), 2^-k)) = 2^-(k+1) (k = 0..19, the
    /// rest pooled), and within [½, 1) it is uniform (10 bins); chi-square at α ≈ 1e-9, seeded.
    #[test]
    fn full_precision_uniform_is_uniform() {
        let mut rng = seeded_rng(11);
        let n = 400_000u64;
        let mut binade = [0u64; 21];
        let mut top = [0u64; 10];
        for _ in 0..n {
            let v = uniform_full_precision(&mut rng);
            assert!(v > 0.0 && v < 1.0);
            let k = (-v.log2()).floor() as usize;
            binade[k.min(20)] += 1;
            if v >= 0.5 {
                top[((v - 0.5) * 20.0) as usize] += 1;
            }
        }
        let mut p: Vec<f64> = (0..20).map(|k| 0.5f64.powi(k + 1)).collect();
        p.push(0.5f64.powi(20));
        let x = chi2(&binade, &p, n);
        assert!(x < chi2_crit(20.0), "binades: χ² = {x}, {binade:?}");
        let nt: u64 = top.iter().sum();
        let x = chi2(&top, &[0.1; 10], nt);
        assert!(x < chi2_crit(9.0), "top binade: χ² = {x}");
    }

    /// Exp(1) draws match the exponential CDF in 12 bins including both tails (below 1e-3 and
    /// above 8); chi-square at α ≈ 1e-9, seeded.
    #[test]
    fn exp1_full_is_exponential() {
        let mut rng = seeded_rng(12);
        let edges = [
            0.0,
            1e-3,
            0.05,
            0.2,
            0.5,
            0.8,
            1.0,
            1.5,
            2.0,
            3.0,
            5.0,
            8.0,
            f64::INFINITY,
        ];
        let cdf = |x: f64| {
            if x.is_infinite() {
                1.0
            } else {
                1.0 - (-x).exp()
            }
        };
        let p: Vec<f64> = edges.windows(2).map(|w| cdf(w[1]) - cdf(w[0])).collect();
        let n = 400_000u64;
        let mut c = vec![0u64; p.len()];
        for _ in 0..n {
            let e = exp1_full(&mut rng);
            let i = edges
                .windows(2)
                .position(|w| e >= w[0] && e < w[1])
                .unwrap();
            c[i] += 1;
        }
        let x = chi2(&c, &p, n);
        assert!(x < chi2_crit((p.len() - 1) as f64), "χ² = {x}, {c:?}");
    }

    /// Gumbel-max draws the exponential mechanism's distribution, here with one class at
    /// probability ≈ 5e-4 (β·gap = 7.5); chi-square at α ≈ 1e-9, seeded.
    #[test]
    fn exponential_mechanism_frequencies() {
        let mut rng = seeded_rng(13);
        let scores = [10u32, 9, 7, 0];
        let beta = 0.75;
        let lp = exponential_mechanism_log_probabilities(&scores, beta).unwrap();
        let p: Vec<f64> = lp.iter().map(|l| l.exp()).collect();
        let n = 300_000u64;
        let mut c = [0u64; 4];
        for _ in 0..n {
            c[sample_exponential_mechanism(&mut rng, &scores, beta).unwrap()] += 1;
        }
        // the last class has p ≈ 5e-4 (≈ 160 expected draws): enough for the χ² approximation
        let x = chi2(&c, &p, n);
        assert!(x < chi2_crit(3.0), "χ² = {x}, {c:?}, {p:?}");
        assert!(c[3] > 0, "the least likely class was never drawn: {c:?}");
    }
}
