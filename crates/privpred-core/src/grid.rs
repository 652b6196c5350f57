//! Released real vectors on a power-of-two grid with exact discrete Gaussian noise: the
//! Gaussian releases of privpred (noisy logits and output perturbation with δ > 0) drawn
//! without floating-point arithmetic between the random bits and the released value.
//!
//! **The release.** For a vector v ∈ Rᵈ with ℓ2 sensitivity Δ, a noise scale σ and a rounding
//! allowance r > 0:
//!
//! 1. the grid step is g = 2ᵏ, the largest power of two with g·√d ≤ r ([`grid_log2`]);
//! 2. each coordinate is rounded to the nearest multiple of g, n_i = round(v_i / g) (exact:
//!    dividing a double by a power of two and rounding to an integer are exact operations);
//! 3. n_i + Z_i is released as (n_i + Z_i)·g, with Z_i independent discrete Gaussians
//!    N_Z(0, (σ/g)²) ([`crate::exact::discrete_gaussian`], exact integer arithmetic from
//!    uniform bits; (σ/g)² is an exact rational because σ is a double and g a power of two).
//!
//! The conversion of the integer n_i + Z_i back to a double is a fixed function of the
//! integer (post-processing), so it costs no privacy; every released value is a grid point
//! whatever the input, which is what defeats the attack on the low-order bits.
//!
//! **Sensitivity with rounding.** |v_i − g·n_i| ≤ g/2 in each coordinate, so for neighbours v,
//! v′: ‖n − n′‖₂·g ≤ ‖v − v′‖₂ + 2·(g/2)·√d ≤ Δ + r. The integer query n has ℓ2 sensitivity
//! (Δ + r)/g in grid units.
//!
//! **Privacy.** For an integer shift μ ∈ Zᵈ and Y with independent N_Z(0, s²) coordinates,
//! the Rényi divergence of order α > 1 is at most α‖μ‖²/(2s²) (Canonne, Kamath & Steinke,
//! "The Discrete Gaussian for Differential Privacy", NeurIPS 2020: one coordinate in their
//! Section 2, independent coordinates in Section 4, where the divergences of product
//! distributions add). The one-coordinate bound in brief: with Z = Σ_{k∈Z} exp(−k²/(2s²)),
//! α(y − μ)² + (1 − α)y² = (y − αμ)² + α(1 − α)μ², so
//! Σ_y P_μ(y)^α P_0(y)^{1−α} = exp(α(α − 1)μ²/(2s²))·Σ_y exp(−(y − αμ)²/(2s²))/Z, and the
//! last sum is at most Z (a Gaussian summed over a shifted lattice is largest unshifted,
//! by the Poisson summation formula). The release is therefore ρ-zCDP with
//! ρ = (Δ + r)²/(2σ²) (shift ‖μ‖ ≤ (Δ + r)/g, s = σ/g: the grid cancels), B releases are
//! Bρ-zCDP (Bun & Steinke 2016, Lemma 2.3), and (ε, δ) follows from
//! [`crate::composition::zcdp_to_epsilon`] (Canonne, Kamath & Steinke 2020, Corollary 13).
//! [`discrete_gaussian_sigma`] solves this for σ; the calibration records σ and r.

use crate::composition::zcdp_rho_for;
use crate::error::{CoreError, Result, check_scale};
use crate::exact::{Rational, discrete_gaussian};
use num_traits::ToPrimitive;
use rand::Rng;

/// The rounding allowance as a fraction of the sensitivity: r = Δ/1024, so the rounding adds
/// 0.1 % to the sensitivity (and to σ).
pub const ROUNDING_FRACTION: f64 = 1.0 / 1024.0;

/// Largest |round(v/g)| released (the integers stay exact in i128 with room for the noise).
const MAX_GRID_UNITS: f64 = 1.0e30;

/// The rounding allowance r = Δ·[`ROUNDING_FRACTION`] for an ℓ2 sensitivity Δ.
pub fn rounding_allowance(sensitivity: f64) -> f64 {
    sensitivity * ROUNDING_FRACTION
}

/// 2^k exactly, for |k| ≤ 1000.
pub(crate) fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k as i64) as u64) << 52)
}

/// k of the grid step g = 2^k: the largest k with 2^k·√dim ≤ `rounding` (so the rounding of
/// `dim` coordinates moves a vector by at most `rounding` in ℓ2 norm). The comparison is made
/// exactly, as 4^k·dim ≤ r² in rationals.
pub fn grid_log2(rounding: f64, dim: usize) -> Result<i32> {
    check_scale("rounding allowance", rounding)?;
    let d = dim.max(1);
    let fits = |k: i32| -> Result<bool> {
        // 4^k·d ≤ r², exactly
        let r2 = {
            let r = Rational::from_f64(rounding)?;
            (r.numer() * r.numer(), r.denom() * r.denom())
        };
        let (num, den) = r2;
        let lhs_num = num_bigint::BigUint::from(d as u64);
        Ok(if k >= 0 {
            (lhs_num << (2 * k as u64)) * &den <= num
        } else {
            lhs_num * &den <= num << (2 * (-k) as u64)
        })
    };
    let guess = (rounding / (d as f64).sqrt()).log2().floor() as i32;
    let mut k = guess.clamp(-1000, 1000);
    while !fits(k)? {
        k -= 1;
        if k < -1000 {
            return Err(CoreError::invalid(
                "rounding allowance",
                rounding,
                "is too small for a grid step of at least 2^-1000",
            ));
        }
    }
    while k < 1000 && fits(k + 1)? {
        k += 1;
    }
    Ok(k)
}

/// The σ of B discrete Gaussian releases on the grid that together are (ε, δ)-DP, for a
/// query of ℓ2 sensitivity Δ = `sensitivity` and the rounding allowance r = Δ/1024 (module
/// docs): σ = (Δ + r)·√(B/(2ρ*)) with ρ* the largest ρ whose zCDP implies (ε, δ)
/// ([`zcdp_rho_for`]). Returns (σ, r).
pub fn discrete_gaussian_sigma(
    epsilon: f64,
    delta: f64,
    budget: u64,
    sensitivity: f64,
) -> Result<(f64, f64)> {
    check_scale("sensitivity", sensitivity)?;
    if budget == 0 {
        return Err(CoreError::invalid("budget", 0, "must be an integer >= 1"));
    }
    let rho = zcdp_rho_for(epsilon, delta)?;
    if rho.is_nan() || rho <= 0.0 {
        return Err(CoreError::invalid(
            "epsilon",
            epsilon,
            "is too small for a discrete Gaussian release at this delta",
        ));
    }
    let r = rounding_allowance(sensitivity);
    // rounded up by one part in 1e12: σ only ever errs on the side of more noise
    let sigma = (sensitivity + r) * (budget as f64 / (2.0 * rho)).sqrt() * (1.0 + 1e-12);
    Ok((sigma, r))
}

/// The zCDP ρ of B releases with noise σ and rounding allowance r at sensitivity Δ:
/// B·(Δ + r)²/(2σ²) (module docs).
pub fn discrete_gaussian_rho(sigma: f64, rounding: f64, sensitivity: f64, budget: u64) -> f64 {
    budget as f64 * (sensitivity + rounding).powi(2) / (2.0 * sigma * sigma)
}

/// round(v_i / 2^k) for each coordinate, exactly (dividing a double by a power of two and
/// rounding to an integer are exact); errors on a non-finite value or one too large for the
/// grid.
pub(crate) fn grid_units(values: &[f64], k: i32) -> Result<Vec<i128>> {
    let inv_g = pow2(-k);
    let mut units = Vec::with_capacity(values.len());
    for (i, &v) in values.iter().enumerate() {
        if !v.is_finite() {
            return Err(CoreError::invalid(
                "released value",
                v,
                format!("coordinate {i} must be finite"),
            ));
        }
        // exact: v·2^-k is a double times a power of two (no rounding unless it underflows,
        // and an underflowing value rounds to 0 either way), and round() is exact
        let n = (v * inv_g).round();
        if n.abs() > MAX_GRID_UNITS {
            return Err(CoreError::invalid(
                "released value",
                v,
                format!(
                    "coordinate {i} is too large for the release grid (|v| <= {:e})",
                    MAX_GRID_UNITS * pow2(k)
                ),
            ));
        }
        units.push(n as i128);
    }
    Ok(units)
}

/// Releases `values` in place on the grid of `rounding` with exact discrete Gaussian noise of
/// scale σ (module docs). Errors on a non-finite value, a value too large for the grid, or a
/// σ not positive.
pub fn release_discrete_gaussian<R: Rng + ?Sized>(
    rng: &mut R,
    values: &mut [f64],
    sigma: f64,
    rounding: f64,
) -> Result<()> {
    check_scale("noise sigma", sigma)?;
    if values.is_empty() {
        return Ok(());
    }
    let k = grid_log2(rounding, values.len())?;
    // (σ/g)² exactly: σ/g is σ's dyadic value times 2^-k
    let s = Rational::from_f64(sigma)?;
    let (num, den) = if k >= 0 {
        (s.numer().clone(), s.denom() << (k as u64))
    } else {
        (s.numer() << ((-k) as u64), s.denom().clone())
    };
    let s2 = Rational::new(&num * &num, &den * &den)?;
    let units = grid_units(values, k)?;
    let g = pow2(k);
    for (v, n) in values.iter_mut().zip(units) {
        let z = discrete_gaussian(rng, &s2)?;
        let z = z
            .to_i128()
            .ok_or_else(|| CoreError::Numerical("discrete Gaussian draw out of range".into()))?;
        // post-processing of the exact integer: its nearest double, times the exact step
        *v = (n + z) as f64 * g;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::composition::zcdp_to_epsilon;
    use crate::noise::seeded_rng;

    #[test]
    fn grid_step_is_the_largest_power_of_two_within_the_allowance() {
        for &(r, d) in &[(1.0, 1usize), (1.0, 4), (0.3, 10), (1e-3, 7850), (5e-7, 3)] {
            let k = grid_log2(r, d).unwrap();
            let g = pow2(k);
            assert!(g * (d as f64).sqrt() <= r, "2^{k}·√{d} > {r}");
            assert!(
                2.0 * g * (d as f64).sqrt() > r * (1.0 - 1e-15),
                "2^{k} not largest"
            );
        }
        // exact at a square: r = 2, d = 4 → g = 1 exactly (1·2 ≤ 2)
        assert_eq!(grid_log2(2.0, 4).unwrap(), 0);
        assert!(grid_log2(0.0, 1).is_err());
        assert!(grid_log2(f64::NAN, 1).is_err());
    }

    /// Golden values from an independent computation (Python 3 with scipy: ρ* by bisection on
    /// ε(ρ) = min over α of αρ + (ln(1/δ) − ln α)/(α−1) + ln(1 − 1/α), then
    /// σ = Δ(1 + 1/1024)·√(B/(2ρ*))): (ε, δ, B) = (1, 1e-5, 1) → 4.04908, (1, 1e-5, 100) →
    /// 40.4908, (10, 1e-5, 100) → 5.30115, each for Δ = 1.
    #[test]
    fn sigma_matches_independent_golden_values() {
        for &(eps, delta, b, want) in &[
            (1.0, 1e-5, 1u64, 4.04908),
            (1.0, 1e-5, 100, 40.4908),
            (10.0, 1e-5, 100, 5.30115),
        ] {
            let (s, r) = discrete_gaussian_sigma(eps, delta, b, 1.0).unwrap();
            assert!(
                (s - want).abs() < 1e-4 * want,
                "σ({eps}, {delta}, {b}) = {s}, want {want}"
            );
            assert_eq!(r, 1.0 / 1024.0);
        }
    }

    /// The calibrated σ meets (ε, δ) and 1 % less noise does not: the test fails if the noise
    /// were too small.
    #[test]
    fn sigma_is_enough_and_not_more_than_needed() {
        for &(eps, delta, b, sens) in &[
            (1.0, 1e-5, 1u64, 0.02),
            (0.1, 1e-6, 100, 3.0),
            (10.0, 1e-3, 7, 1.0),
        ] {
            let (s, r) = discrete_gaussian_sigma(eps, delta, b, sens).unwrap();
            let rho = discrete_gaussian_rho(s, r, sens, b);
            assert!(zcdp_to_epsilon(rho, delta).unwrap() <= eps * (1.0 + 1e-9));
            let rho_less = discrete_gaussian_rho(0.99 * s, r, sens, b);
            assert!(
                zcdp_to_epsilon(rho_less, delta).unwrap() > eps,
                "0.99σ still meets ε"
            );
            // the rounding is in the sensitivity: without it the same σ would claim less ρ
            assert!(discrete_gaussian_rho(s, 0.0, sens, b) < rho);
        }
    }

    /// Every released value is a grid point, and the rounded centre is within g/2 of the input.
    #[test]
    fn releases_are_grid_points() {
        let mut rng = seeded_rng(5);
        let base = [0.0, 1e-3, -2.5, std::f64::consts::PI, 1e-300, -7.0e4];
        let (sigma, r) = (0.7, 1e-3);
        let k = grid_log2(r, base.len()).unwrap();
        let g = pow2(k);
        for _ in 0..200 {
            let mut v = base;
            release_discrete_gaussian(&mut rng, &mut v, sigma, r).unwrap();
            for x in v {
                assert_eq!((x / g).fract(), 0.0, "{x} is not a multiple of 2^{k}");
            }
        }
        let mut bad = [f64::NAN];
        assert!(release_discrete_gaussian(&mut rng, &mut bad, sigma, r).is_err());
        let mut huge = [1e300];
        assert!(release_discrete_gaussian(&mut rng, &mut huge, sigma, r).is_err());
        let mut ok = [1.0];
        assert!(release_discrete_gaussian(&mut rng, &mut ok, 0.0, r).is_err());
    }

    /// The noise in grid units is the discrete Gaussian N_Z(0, (σ/g)²): chi-square of the
    /// released offsets against the exact probabilities at α ≈ 1e-9 (seeded), and a 10 %
    /// smaller σ is rejected (the test fails if the noise were too small).
    #[test]
    fn noise_is_the_discrete_gaussian_of_sigma() {
        // r chosen so that g = 1 for one coordinate: offsets are integers
        let (sigma, r) = (2.5, 1.0);
        assert_eq!(grid_log2(r, 1).unwrap(), 0);
        let mut rng = seeded_rng(17);
        let n = 200_000u64;
        let lim = 9i64; // bins −9..=9, tails pooled
        let mut counts = vec![0u64; (2 * lim + 3) as usize];
        for _ in 0..n {
            let mut v = [0.25]; // rounds to 0
            release_discrete_gaussian(&mut rng, &mut v, sigma, r).unwrap();
            let z = v[0] as i64;
            let bin = if z < -lim {
                0
            } else if z > lim {
                (2 * lim + 2) as usize
            } else {
                (z + lim + 1) as usize
            };
            counts[bin] += 1;
        }
        let probs = |s: f64| -> Vec<f64> {
            let w = |k: i64| (-(k * k) as f64 / (2.0 * s * s)).exp();
            let z: f64 = (-200..=200).map(w).sum();
            let mut p = vec![0.0; (2 * lim + 3) as usize];
            for k in -200..=200i64 {
                let bin = if k < -lim {
                    0
                } else if k > lim {
                    (2 * lim + 2) as usize
                } else {
                    (k + lim + 1) as usize
                };
                p[bin] += w(k) / z;
            }
            p
        };
        let chi2 = |p: &[f64]| -> f64 {
            counts
                .iter()
                .zip(p)
                .map(|(&c, &q)| {
                    let e = q * n as f64;
                    (c as f64 - e).powi(2) / e
                })
                .sum()
        };
        let df = (counts.len() - 1) as f64;
        let a = 2.0 / (9.0 * df);
        let crit = df * (1.0 - a + 6.0 * a.sqrt()).powi(3);
        let x = chi2(&probs(sigma));
        assert!(x < crit, "χ² = {x} ≥ {crit}: {counts:?}");
        let xw = chi2(&probs(0.9 * sigma));
        assert!(xw > crit, "a 10 % smaller σ was not rejected: χ² = {xw}");
    }
}
