//! Composition of differentially private mechanisms: basic, advanced (Dwork & Rothblum 2016,
//! Theorem 1.1) with its inversions, and zero-concentrated DP (zCDP) with its conversion to
//! (ε, δ). Gaussian (GDP) composition lives in [`crate::gaussian`].
//!
//! All inversions round toward the private side: per-answer ε₀ down, ρ down, ε up.

use crate::error::{CoreError, Result};
use crate::privacy::Epsilon;

/// Basic composition (Dwork et al. 2006): k mechanisms that are each (ε₀, δ₀)-DP are
/// (kε₀, kδ₀)-DP.
pub fn basic(epsilon0: f64, delta0: f64, k: u64) -> (f64, f64) {
    (k as f64 * epsilon0, k as f64 * delta0)
}

/// The ε of k-fold composition of ε₀-DP mechanisms, by Dwork & Rothblum (2016, Theorem 1.1):
/// ε = √(2k ln(1/δ′))·ε₀ + k·ε₀(e^{ε₀} − 1)/2, holding with failure probability δ′
/// (on top of k·δ₀ if the mechanisms are (ε₀, δ₀)-DP).
pub fn advanced_epsilon(epsilon0: f64, k: u64, delta_prime: f64) -> f64 {
    let k = k as f64;
    (2.0 * k * (1.0 / delta_prime).ln()).sqrt() * epsilon0 + k * epsilon0 * epsilon0.exp_m1() / 2.0
}

/// The paper's closed-form per-answer ε₀ (appendix, proof of Theorem 9):
/// ε₀ = √(2/k)(√(ln(1/δ′) + ε) − √(ln(1/δ′))), from replacing e^{ε₀} − 1 by ε₀.
/// docs/guarantees.md#errata (erratum 4.6): this ε₀ is slightly too large — composing it exceeds ε by about kε₀³/4.
/// Kept for `paper` mode only.
pub fn advanced_per_answer_epsilon_paper(epsilon: f64, k: u64, delta_prime: f64) -> f64 {
    let l = (1.0 / delta_prime).ln();
    (2.0 / k as f64).sqrt() * ((l + epsilon).sqrt() - l.sqrt())
}

/// The largest per-answer ε₀ whose k-fold composition by Dwork & Rothblum (2016, Theorem
/// 1.1) is ≤ ε, i.e. the exact solve of √(2k ln(1/δ′))ε₀ + kε₀(e^{ε₀} − 1)/2 = ε
/// (docs/guarantees.md#errata (erratum 4.6), `corrected`). The left side is increasing in ε₀; bisection to 1e-12 relative,
/// returning the lower end (less ε₀ ⇒ more noise).
pub fn advanced_per_answer_epsilon(epsilon: f64, k: u64, delta_prime: f64) -> Result<f64> {
    Epsilon::new(epsilon)?;
    if k == 0 {
        return Err(CoreError::invalid("budget", k, "must be an integer >= 1"));
    }
    if !(delta_prime > 0.0 && delta_prime < 1.0) {
        return Err(CoreError::invalid(
            "delta'",
            delta_prime,
            "must be in (0, 1)",
        ));
    }
    // The closed form solves a smaller left-hand side, so it is an upper bracket.
    let mut hi = advanced_per_answer_epsilon_paper(epsilon, k, delta_prime).max(1e-300);
    while advanced_epsilon(hi, k, delta_prime) <= epsilon {
        hi *= 2.0;
        if !hi.is_finite() {
            return Err(CoreError::Numerical(
                "advanced composition: no bracket".into(),
            ));
        }
    }
    let mut lo = 0.0;
    for _ in 0..400 {
        if hi - lo <= 1e-12 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if advanced_epsilon(mid, k, delta_prime) <= epsilon {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Classic conversion of ρ-zCDP to (ε, δ)-DP (Bun & Steinke 2016, Proposition 1.3):
/// ε = ρ + 2√(ρ ln(1/δ)).
pub fn zcdp_to_epsilon_classic(rho: f64, delta: f64) -> f64 {
    rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt()
}

/// The (ε, δ) conversion of an RDP curve at one order α > 1 (Canonne, Kamath & Steinke 2020,
/// Proposition 12; Balle et al. 2020, Theorem 21):
/// ε = τ + ln(1/δ)/(α−1) + ln(1 − 1/α) − ln(α)/(α−1).
pub fn rdp_order_to_epsilon_improved(alpha: f64, tau: f64, delta: f64) -> f64 {
    tau + ((1.0 / delta).ln() - alpha.ln()) / (alpha - 1.0) + (-1.0 / alpha).ln_1p()
}

/// Conversion of ρ-zCDP to (ε, δ)-DP with the conversion of Canonne, Kamath & Steinke (2020,
/// Corollary 13): ε = inf_{α>1} αρ + (ln(1/δ) − ln α)/(α−1) + ln(1 − 1/α), taken no larger
/// than the classic bound. Any α gives a valid ε, so an approximate minimiser is still sound.
pub fn zcdp_to_epsilon(rho: f64, delta: f64) -> Result<f64> {
    if !(rho.is_finite() && rho >= 0.0) {
        return Err(CoreError::invalid(
            "rho",
            rho,
            "must be a finite number >= 0",
        ));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(CoreError::invalid("delta", delta, "must be in (0, 1)"));
    }
    if rho == 0.0 {
        return Ok(0.0);
    }
    let f = |a: f64| rdp_order_to_epsilon_improved(a, a * rho, delta);
    // Coarse scan over ln(α − 1), then golden-section refinement around the best point.
    let mut best_t = 0.0;
    let mut best = f64::INFINITY;
    let n = 400;
    let (tmin, tmax) = (-12.0_f64, 12.0_f64);
    for i in 0..=n {
        let t = tmin + (tmax - tmin) * i as f64 / n as f64;
        let v = f(1.0 + t.exp());
        if v < best {
            best = v;
            best_t = t;
        }
    }
    let step = (tmax - tmin) / n as f64;
    let (mut a, mut b) = (best_t - step, best_t + step);
    let g = 0.5 * (5f64.sqrt() - 1.0);
    for _ in 0..80 {
        let c = b - g * (b - a);
        let d = a + g * (b - a);
        if f(1.0 + c.exp()) < f(1.0 + d.exp()) {
            b = d;
        } else {
            a = c;
        }
    }
    let refined = f(1.0 + (0.5 * (a + b)).exp());
    let eps = best.min(refined).min(zcdp_to_epsilon_classic(rho, delta));
    Ok(eps.max(0.0))
}

/// The largest ρ such that ρ-zCDP implies (ε, δ)-DP under [`zcdp_to_epsilon`]
/// (bisection on ρ, rounded down).
pub fn zcdp_rho_for(epsilon: f64, delta: f64) -> Result<f64> {
    Epsilon::new(epsilon)?;
    let mut lo = 0.0;
    let mut hi = epsilon; // ε(ρ) ≥ ρ, so ρ = ε is always too much
    while zcdp_to_epsilon(hi, delta)? <= epsilon {
        hi *= 2.0;
    }
    for _ in 0..200 {
        if hi - lo <= 1e-13 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if zcdp_to_epsilon(mid, delta)? <= epsilon {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// zCDP of the exponential mechanism P(y) ∝ exp(β·score_y) with utility sensitivity 1:
/// it is 2β-bounded-range (Durfee & Rogers 2019), hence β²/2-zCDP (Cesar & Rogers 2021,
/// Lemma 3.2); B answers are Bβ²/2-zCDP (Bun & Steinke 2016, Lemma 2.3). Returns ρ.
pub fn exponential_mechanism_zcdp(beta: f64, budget: u64) -> f64 {
    budget as f64 * beta * beta / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_inversion_never_exceeds_target_but_paper_does() {
        // docs/guarantees.md#errata (erratum 4.6): the paper's closed form overshoots ε; the exact solve does not.
        for &(eps, b, dp) in &[
            (1.0, 100u64, 1e-5),
            (10.0, 10, 1e-5),
            (5.0, 2, 1e-6),
            (1.0, 1000, 1e-10),
        ] {
            let exact = advanced_per_answer_epsilon(eps, b, dp).unwrap();
            assert!(advanced_epsilon(exact, b, dp) <= eps);
            assert!((advanced_epsilon(exact, b, dp) - eps).abs() < 1e-9 * eps);
            let paper = advanced_per_answer_epsilon_paper(eps, b, dp);
            assert!(paper > exact);
            assert!(
                advanced_epsilon(paper, b, dp) > eps,
                "paper closed form should overshoot"
            );
        }
    }

    #[test]
    fn zcdp_conversion_beats_classic_and_inverts() {
        for &rho in &[1e-4, 0.01, 0.1, 1.0, 10.0] {
            let e = zcdp_to_epsilon(rho, 1e-5).unwrap();
            assert!(e <= zcdp_to_epsilon_classic(rho, 1e-5));
        }
        let rho = zcdp_rho_for(1.0, 1e-5).unwrap();
        assert!(zcdp_to_epsilon(rho, 1e-5).unwrap() <= 1.0);
        assert!(zcdp_to_epsilon(rho * (1.0 + 1e-9), 1e-5).unwrap() > 1.0 - 1e-9);
    }
}
