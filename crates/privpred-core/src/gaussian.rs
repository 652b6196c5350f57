//! The Gaussian mechanism: the analytic calibration of Balle & Wang (2018), the classical
//! bound, Gaussian differential privacy (GDP), and a log-domain standard normal CDF.
//!
//! Everything here is pure arithmetic (no I/O). Every solve rounds toward *more* noise: a
//! returned σ always satisfies the exact (ε, δ) condition it was solved for.

use crate::error::{CoreError, Result};

const LN_2: f64 = std::f64::consts::LN_2;
/// ½·ln(2π).
const HALF_LN_2PI: f64 = 0.918_938_533_204_672_7;

/// ln Φ(x), the logarithm of the standard normal CDF, accurate in both tails.
///
/// For x ≥ −20 it uses `libm::erfc` (relative error ≤ 1.3e-13); below, the asymptotic
/// expansion Φ(x) = φ(x)/|x| · Σ (−1)^k (2k−1)!!/x^{2k}, which at |x| ≥ 20 is accurate to
/// machine precision with a dozen terms. Never returns NaN for finite or infinite x.
pub fn log_ndtr(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    if x > 5.0 {
        // Φ(x) = 1 − Φ(−x), Φ(−x) tiny: ln(1 − t) = ln_1p(−t).
        let t = 0.5 * libm::erfc(x / std::f64::consts::SQRT_2);
        return (-t).ln_1p();
    }
    if x >= -20.0 {
        return (0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)).ln();
    }
    // Asymptotic series for the far lower tail.
    let x2 = x * x;
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..16 {
        term *= -((2 * k - 1) as f64) / x2;
        sum += term;
        if term.abs() < 1e-17 {
            break;
        }
    }
    -0.5 * x2 - HALF_LN_2PI - (-x).ln() + sum.ln()
}

/// Φ(x), the standard normal CDF (computed through [`log_ndtr`] in the lower tail).
pub fn ndtr(x: f64) -> f64 {
    if x > 0.0 {
        1.0 - 0.5 * libm::erfc(x / std::f64::consts::SQRT_2)
    } else {
        log_ndtr(x).exp()
    }
}

/// ln erfc(x), accurate for large x (through `ln erfc(x) = ln 2 + ln Φ(−√2·x)`).
pub fn log_erfc(x: f64) -> f64 {
    LN_2 + log_ndtr(-std::f64::consts::SQRT_2 * x)
}

/// ln(e^a − e^b) for a ≥ b (−∞ when equal).
fn log_sub_exp(a: f64, b: f64) -> f64 {
    if b == f64::NEG_INFINITY {
        return a;
    }
    if b >= a {
        return f64::NEG_INFINITY;
    }
    a + (-(b - a).exp()).ln_1p()
}

/// The exact δ of the Gaussian mechanism with L2-sensitivity 1 and standard deviation `sigma`
/// at privacy loss `epsilon` (Balle & Wang 2018, Theorem 8):
/// δ(σ) = Φ(1/(2σ) − εσ) − e^ε·Φ(−1/(2σ) − εσ), computed in the log domain.
///
/// Equivalently, the δ(ε) curve of μ-GDP with μ = 1/σ (Dong, Roth & Su 2019, Cor. 2.13).
pub fn gaussian_delta(sigma: f64, epsilon: f64) -> f64 {
    if sigma <= 0.0 {
        return 1.0;
    }
    if !sigma.is_finite() {
        return 0.0;
    }
    let a = 0.5 / sigma - epsilon * sigma;
    let b = -0.5 / sigma - epsilon * sigma;
    let la = log_ndtr(a);
    let lb = epsilon + log_ndtr(b);
    let l = log_sub_exp(la, lb);
    if l == f64::NEG_INFINITY {
        0.0
    } else {
        l.exp().clamp(0.0, 1.0)
    }
}

/// ln δ(σ) of [`gaussian_delta`] (−∞ where δ rounds to 0).
fn log_gaussian_delta(sigma: f64, epsilon: f64) -> f64 {
    let a = 0.5 / sigma - epsilon * sigma;
    let b = -0.5 / sigma - epsilon * sigma;
    log_sub_exp(log_ndtr(a), epsilon + log_ndtr(b))
}

fn check_eps(epsilon: f64) -> Result<()> {
    crate::privacy::Epsilon::new(epsilon).map(|_| ())
}

fn check_delta_open(delta: f64) -> Result<()> {
    if !(delta.is_finite() && delta > 0.0 && delta < 1.0) {
        return Err(CoreError::invalid(
            "delta",
            delta,
            "must be in (0, 1) for the Gaussian mechanism",
        ));
    }
    Ok(())
}

fn check_sensitivity(sensitivity: f64) -> Result<()> {
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(CoreError::invalid(
            "sensitivity",
            sensitivity,
            "must be a finite number > 0",
        ));
    }
    Ok(())
}

/// σ_AG(ε, δ): the smallest standard deviation of the Gaussian mechanism with L2-sensitivity
/// 1 that is (ε, δ)-DP, by the exact condition of Balle & Wang (2018, Theorem 8 — the
/// "analytic Gaussian mechanism"):
/// Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ) ≤ δ.
///
/// Solved by bisection on ln σ against ln δ(σ) to ≤ 1e-12 relative width, returning the
/// upper end of the bracket (the condition holds at the returned σ). Accurate to ≤ 1e-9
/// relative for ε ∈ [1e-3, 50], δ ∈ [1e-15, 0.5]; errors (never NaN) for ε ≤ 0 or δ ∉ (0, 1).
pub fn sigma_ag(epsilon: f64, delta: f64) -> Result<f64> {
    check_eps(epsilon)?;
    check_delta_open(delta)?;
    let target = delta.ln();
    // δ(σ) decreases from 1 (σ→0) to 0 (σ→∞). Bracket in ln σ.
    let mut lo = 0.0_f64; // ln σ
    let mut hi = 0.0_f64;
    let f = |ls: f64| log_gaussian_delta(ls.exp(), epsilon);
    if f(0.0) > target {
        hi = 1.0;
        while f(hi) > target {
            lo = hi;
            hi *= 2.0;
            if hi > 700.0 {
                return Err(CoreError::Numerical(format!(
                    "sigma_ag({epsilon}, {delta}): no upper bracket"
                )));
            }
        }
    } else {
        lo = -1.0;
        while f(lo) <= target {
            hi = lo;
            lo *= 2.0;
            if lo < -700.0 {
                return Err(CoreError::Numerical(format!(
                    "sigma_ag({epsilon}, {delta}): no lower bracket"
                )));
            }
        }
    }
    // Invariant: f(lo) > target ≥ f(hi).
    for _ in 0..200 {
        if hi - lo <= 1e-13 {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if f(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi.exp())
}

/// σ of the analytic Gaussian mechanism for an arbitrary L2-sensitivity Δ: Δ·σ_AG(ε, δ)
/// (Balle & Wang 2018, Theorem 8; the condition scales with σ/Δ).
pub fn analytic_gaussian_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> Result<f64> {
    check_sensitivity(sensitivity)?;
    Ok(sensitivity * sigma_ag(epsilon, delta)?)
}

/// The classical Gaussian mechanism: σ = Δ·√(2 ln(1.25/δ))/ε, valid only for ε ∈ (0, 1]
/// (Dwork & Roth 2014, Theorem A.1). Errors for ε > 1.
pub fn classical_gaussian_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> Result<f64> {
    check_eps(epsilon)?;
    if epsilon > 1.0 {
        return Err(CoreError::invalid(
            "epsilon",
            epsilon,
            "must be in (0, 1] for the classical Gaussian mechanism (use the analytic one)",
        ));
    }
    check_delta_open(delta)?;
    check_sensitivity(sensitivity)?;
    Ok(sensitivity * (2.0 * (1.25 / delta).ln()).sqrt() / epsilon)
}

/// δ(ε) of μ-GDP (Dong, Roth & Su 2019, Corollary 2.13):
/// δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
pub fn gdp_delta(mu: f64, epsilon: f64) -> f64 {
    if mu <= 0.0 {
        return 0.0;
    }
    gaussian_delta(1.0 / mu, epsilon)
}

/// The largest μ such that μ-GDP implies (ε, δ)-DP: μ = 1/σ_AG(ε, δ) (rounded down).
pub fn gdp_mu(epsilon: f64, delta: f64) -> Result<f64> {
    Ok(1.0 / sigma_ag(epsilon, delta)?)
}

/// The smallest ε such that μ-GDP implies (ε, δ)-DP (bisection, rounded up).
pub fn gdp_epsilon(mu: f64, delta: f64) -> Result<f64> {
    if !(mu.is_finite() && mu > 0.0) {
        return Err(CoreError::invalid("mu", mu, "must be a finite number > 0"));
    }
    check_delta_open(delta)?;
    if gdp_delta(mu, 0.0) <= delta {
        return Ok(0.0);
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while gdp_delta(mu, hi) > delta {
        lo = hi;
        hi *= 2.0;
        if hi > 1e6 {
            return Err(CoreError::Numerical("gdp_epsilon: no bracket".into()));
        }
    }
    for _ in 0..200 {
        if hi - lo <= 1e-12 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if gdp_delta(mu, mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi)
}

/// Exact composition of B Gaussian mechanisms with sensitivity Δ and standard deviation σ:
/// √B·Δ/σ-GDP (Dong, Roth & Su 2019, Corollary 3.3). Returns μ.
pub fn gdp_compose(sigma: f64, sensitivity: f64, budget: u64) -> f64 {
    (budget as f64).sqrt() * sensitivity / sigma
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_sigma_ag_balle_wang() {
        // Reference: Balle & Wang's analytic Gaussian mechanism (their public Python
        // implementation `calibrateAnalyticGaussianMechanism(1.0, 1e-5, 1.0)`), the value
        // quoted in the issue: 3.730631634815942.
        let s = sigma_ag(1.0, 1e-5).unwrap();
        assert!((s / 3.730631634815942 - 1.0).abs() < 1e-9, "{s}");
    }

    #[test]
    fn log_ndtr_matches_erfc_and_asymptotics() {
        for &x in &[-30.0, -20.0, -19.99, -10.0, -1.0, 0.0, 1.0, 6.0] {
            let v = log_ndtr(x);
            assert!(v.is_finite());
        }
        // Continuity at the switch point.
        let a = log_ndtr(-20.0 - 1e-9);
        let b = (0.5 * libm::erfc(20.0 / std::f64::consts::SQRT_2)).ln();
        assert!((a - b).abs() < 1e-10 * b.abs());
        // Φ(−40): ln = −804.608442013754 (mpmath: log(ncdf(-40))).
        assert!((log_ndtr(-40.0) - (-804.6084420137538)).abs() < 1e-9);
        assert!((log_ndtr(0.0) + LN_2).abs() < 1e-15);
    }

    #[test]
    fn condition_holds_at_returned_sigma_over_range() {
        for &eps in &[1e-3, 1e-2, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0] {
            for &delta in &[1e-15, 1e-12, 1e-10, 1e-8, 1e-5, 1e-3, 0.1, 0.5] {
                let s = sigma_ag(eps, delta).unwrap();
                assert!(s.is_finite() && s > 0.0, "eps={eps} delta={delta} s={s}");
                let d = gaussian_delta(s, eps);
                assert!(
                    d <= delta * (1.0 + 1e-9),
                    "eps={eps} delta={delta} s={s} d={d}"
                );
                // And 1e-9 less noise would violate it (tightness).
                let d2 = gaussian_delta(s * (1.0 - 1e-9), eps);
                assert!(
                    d2 > delta * (1.0 - 1e-6),
                    "eps={eps} delta={delta} s={s} d2={d2}"
                );
            }
        }
    }

    #[test]
    fn classical_bound_only_for_small_epsilon() {
        assert!(classical_gaussian_sigma(1.5, 1e-5, 1.0).is_err());
        let c = classical_gaussian_sigma(1.0, 1e-5, 1.0).unwrap();
        assert!(c > sigma_ag(1.0, 1e-5).unwrap());
    }

    #[test]
    fn bad_inputs_error_not_nan() {
        assert!(sigma_ag(0.0, 1e-5).is_err());
        assert!(sigma_ag(f64::NAN, 1e-5).is_err());
        assert!(sigma_ag(1.0, 0.0).is_err());
        assert!(sigma_ag(1.0, 1.0).is_err());
        assert!(sigma_ag(1.0, f64::NAN).is_err());
    }

    #[test]
    fn gdp_roundtrip() {
        let mu = gdp_mu(1.0, 1e-5).unwrap();
        let eps = gdp_epsilon(mu, 1e-5).unwrap();
        assert!((eps - 1.0).abs() < 1e-8, "{eps}");
    }
}
