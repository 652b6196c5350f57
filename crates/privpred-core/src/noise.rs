//! Noise samplers and random-number generators.
//!
//! Every sampler takes `&mut R` with `R: Rng + ?Sized`, so experiments pass a seeded
//! generator ([`seeded_rng`]) and releases pass the OS-seeded cryptographic one
//! ([`release_rng`]). There is no global or ambient generator here.

use crate::error::{CoreError, Result, check_scale};
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

/// One draw of the exponential mechanism: index y with probability ∝ exp(β·score_y), drawn
/// exactly ([`crate::exact::exponential_mechanism`]: the scores and β are read as the exact
/// rationals they are, and no floating-point operation lies between the random bits and the
/// index), so every class keeps exactly its probability however large β·gap is.
pub fn sample_exponential_mechanism<R: Rng + ?Sized, T: Copy + Into<f64>>(
    rng: &mut R,
    scores: &[T],
    beta: f64,
) -> Result<usize> {
    crate::exact::exponential_mechanism(rng, scores, beta)
}

/// One draw of the exponential mechanism (alias of [`sample_exponential_mechanism`]):
/// index y with probability ∝ exp(β·score_y), drawn exactly. Scores may be `f64`, `f32` or
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

impl Noise {
    /// Draws one noise vector of dimension `dim` (ℓ2-Laplace or Gaussian). The exponential
    /// mechanism is not additive noise: use [`sample_exponential_mechanism`].
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R, dim: usize) -> Result<Vec<f64>> {
        match *self {
            Noise::L2Laplace { beta } => sample_l2_laplace(rng, dim, beta),
            Noise::Gaussian { sigma } => sample_gaussian(rng, dim, sigma),
            Noise::DiscreteL2Laplace { .. } => Err(CoreError::Unsupported(
                "the l2-Laplace on a grid is a release of the rounded value, not a noise vector: use add_to".into(),
            )),
            Noise::DiscreteGaussian { .. } => Err(CoreError::Unsupported(
                "the discrete Gaussian on a grid is a release of the rounded value, not a noise vector: use add_to".into(),
            )),
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
        if let Noise::DiscreteGaussian { sigma, rounding } = *self {
            return crate::grid::release_discrete_gaussian(rng, values, sigma, rounding);
        }
        if let Noise::DiscreteL2Laplace { beta, rounding } = *self {
            return crate::lattice::release_lattice_laplace(rng, values, beta, rounding);
        }
        let n = self.sample(rng, values.len())?;
        for (v, e) in values.iter_mut().zip(n) {
            *v += e;
        }
        Ok(())
    }

    /// Adds one noise draw to `values` (f32) in place.
    pub fn add_to_f32<R: Rng + ?Sized>(&self, rng: &mut R, values: &mut [f32]) -> Result<()> {
        if let Noise::DiscreteGaussian { .. } | Noise::DiscreteL2Laplace { .. } = *self {
            let mut wide: Vec<f64> = values.iter().map(|&v| v as f64).collect();
            self.add_to(rng, &mut wide)?;
            for (v, w) in values.iter_mut().zip(wide) {
                *v = w as f32;
            }
            return Ok(());
        }
        let n = self.sample(rng, values.len())?;
        for (v, e) in values.iter_mut().zip(n) {
            *v = (*v as f64 + e) as f32;
        }
        Ok(())
    }

    /// The distribution's name as printed (`l2-laplace`, `gaussian`, `discrete-gaussian`,
    /// `discrete-l2-laplace`, `exponential`, `permute-and-flip`).
    pub fn distribution_name(&self) -> &'static str {
        match self {
            Noise::L2Laplace { .. } => "l2-laplace",
            Noise::Gaussian { .. } => "gaussian",
            Noise::DiscreteGaussian { .. } => "discrete-gaussian",
            Noise::DiscreteL2Laplace { .. } => "discrete-l2-laplace",
            Noise::Exponential { .. } => "exponential",
            Noise::PermuteAndFlip { .. } => "permute-and-flip",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_stats::{chi2, chi2_crit};

    /// The exponential mechanism's draws match its distribution, here with one class at
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
        // power: the distribution at 1.25·β (noise 20 % too small) is rejected
        let wrong: Vec<f64> = exponential_mechanism_log_probabilities(&scores, 1.25 * beta)
            .unwrap()
            .iter()
            .map(|l| l.exp())
            .collect();
        let xw = chi2(&c, &wrong, n);
        assert!(
            xw > chi2_crit(3.0),
            "a 1.25× larger β was not detected: χ² = {xw}"
        );
    }
}
