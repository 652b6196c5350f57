//! DP-SGD noise calibration: the noise multiplier σ from the RDP accountant of the sampled
//! Gaussian mechanism (Mironov, Talwar & Zhang 2019) for q = b/N and ⌈epochs·N/b⌉ steps.
//!
//! This crate calls `privpred_core::dpsgd` when available; until then it uses the local,
//! conservative implementation below (integer orders only, classical RDP → (ε, δ) conversion
//! of Mironov 2017, Prop. 3), which can only overstate ε, never understate it.

use crate::error::{NnError, Result};

fn ln_binom(n: u32, k: u32) -> f64 {
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

fn ln_gamma(x: f64) -> f64 {
    // exact for integers via summing logs (x ≤ 1025 here)
    let n = x.round() as u64;
    (2..n).map(|i| (i as f64).ln()).sum()
}

/// RDP of one step of the sampled Gaussian mechanism at integer order α ≥ 2 (Mironov, Talwar
/// & Zhang 2019, §3.3): (1/(α−1))·ln Σ_k C(α,k)(1−q)^{α−k} q^k exp((k²−k)/(2σ²)).
pub fn rdp_sampled_gaussian(q: f64, sigma: f64, alpha: u32) -> f64 {
    if q == 0.0 {
        return 0.0;
    }
    if q >= 1.0 {
        return alpha as f64 / (2.0 * sigma * sigma);
    }
    let terms: Vec<f64> = (0..=alpha)
        .map(|k| {
            let kf = k as f64;
            ln_binom(alpha, k)
                + (alpha - k) as f64 * (1.0 - q).ln()
                + kf * q.ln()
                + (kf * kf - kf) / (2.0 * sigma * sigma)
        })
        .collect();
    let mx = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = mx + terms.iter().map(|t| (t - mx).exp()).sum::<f64>().ln();
    lse / (alpha as f64 - 1.0)
}

/// ε after `steps` steps at noise multiplier σ (orders 2..=256 and 512).
pub fn epsilon(q: f64, sigma: f64, steps: usize, delta: f64) -> f64 {
    let orders = (2..=256u32).chain([384, 512]);
    orders
        .map(|a| {
            steps as f64 * rdp_sampled_gaussian(q, sigma, a) + (1.0 / delta).ln() / (a as f64 - 1.0)
        })
        .fold(f64::INFINITY, f64::min)
}

/// The smallest noise multiplier (to 1e-4, rounded up) whose ε after `steps` steps is ≤ the
/// target.
pub fn noise_multiplier(q: f64, steps: usize, target_epsilon: f64, delta: f64) -> Result<f64> {
    if !(q > 0.0 && q <= 1.0) {
        return Err(NnError::invalid(
            "sampling rate q = b/N",
            q,
            "must be in (0, 1]",
        ));
    }
    if !(target_epsilon.is_finite() && target_epsilon > 0.0) {
        return Err(NnError::invalid(
            "epsilon",
            target_epsilon,
            "must be a finite number > 0",
        ));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(NnError::invalid("delta", delta, "DP-SGD needs δ in (0, 1)"));
    }
    let (mut lo, mut hi) = (0.05f64, 1.0f64);
    while epsilon(q, hi, steps, delta) > target_epsilon {
        hi *= 2.0;
        if hi > 1e6 {
            return Err(NnError::invalid(
                "epsilon",
                target_epsilon,
                "too small: no noise multiplier ≤ 1e6 reaches it",
            ));
        }
    }
    if epsilon(q, lo, steps, delta) <= target_epsilon {
        return Ok(lo);
    }
    while hi - lo > 1e-4 {
        let mid = 0.5 * (lo + hi);
        if epsilon(q, mid, steps, delta) <= target_epsilon {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_abadi_moments_accountant_ballpark_and_never_overshoots() {
        // TF-Privacy's MNIST tutorial (compute_dp_sgd_privacy): N = 60,000, batch 256,
        // σ = 1.1, 60 epochs, δ = 1e-5 gives ε ≈ 2.92 with fractional orders; integer orders
        // and the classical conversion give a slightly larger, still valid ε.
        let q = 256.0 / 60000.0;
        let steps = (60.0f64 * 60000.0 / 256.0).ceil() as usize;
        let e = epsilon(q, 1.1, steps, 1e-5);
        assert!((2.9..3.4).contains(&e), "{e}");
        let s = noise_multiplier(0.012, 8334, 1.0, 1e-5).unwrap();
        assert!(epsilon(0.012, s, 8334, 1e-5) <= 1.0);
        assert!(epsilon(0.012, s - 2e-4, 8334, 1e-5) > 1.0);
    }
}
