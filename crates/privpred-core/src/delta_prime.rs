//! Prediction sensitivity's advanced-composition branch (docs/guarantees.md#calibrations, erratum 4.6): σ″(δ′) and
//! its minimisation over the split δ′ of δ, in the paper's grid or optimised.

use crate::composition::{advanced_per_answer_epsilon, advanced_per_answer_epsilon_paper};
use crate::gaussian::sigma_ag;

/// Paper's grid for δ′: `torch.linspace(0, δ, 1000)[1:-1]` (998 interior points).
pub(crate) fn paper_delta_prime_grid(delta: f64) -> impl Iterator<Item = f64> {
    (1..999).map(move |i| delta * i as f64 / 999.0)
}

/// σ″(δ′)/Δ of prediction sensitivity's advanced-composition branch, or ∞ where invalid.
pub(crate) fn sigma_advanced(eps: f64, delta: f64, b: u64, dp: f64, paper: bool) -> f64 {
    let e0 = if paper {
        advanced_per_answer_epsilon_paper(eps, b, dp)
    } else {
        match advanced_per_answer_epsilon(eps, b, dp) {
            Ok(e) => e,
            Err(_) => return f64::INFINITY,
        }
    };
    let d0 = (delta - dp) / b as f64;
    if !(e0 > 0.0 && d0 > 0.0) {
        return f64::INFINITY;
    }
    sigma_ag(e0, d0).unwrap_or(f64::INFINITY)
}

/// Minimises σ″(δ′) over δ′ ∈ (0, δ): a scan over ln δ′ and a golden-section refinement.
/// Every δ′ gives a valid guarantee, so an approximate minimiser is still sound.
pub(crate) fn optimise_delta_prime(eps: f64, delta: f64, b: u64) -> (f64, f64) {
    let f = |t: f64| sigma_advanced(eps, delta, b, delta * t.exp(), false);
    // t = ln(δ′/δ) ∈ [−40, −1e-9].
    let n = 80;
    let (tmin, tmax) = (-40.0_f64, -1e-9_f64);
    let mut best = (f64::INFINITY, tmax);
    for i in 0..=n {
        let t = tmin + (tmax - tmin) * i as f64 / n as f64;
        let v = f(t);
        if v < best.0 {
            best = (v, t);
        }
    }
    let step = (tmax - tmin) / n as f64;
    let (mut lo, mut hi) = ((best.1 - step).max(tmin), (best.1 + step).min(tmax));
    let g = 0.5 * (5f64.sqrt() - 1.0);
    for _ in 0..60 {
        let c = hi - g * (hi - lo);
        let d = lo + g * (hi - lo);
        if f(c) < f(d) {
            hi = d;
        } else {
            lo = c;
        }
    }
    let t = 0.5 * (lo + hi);
    let v = f(t);
    if v < best.0 {
        (v, delta * t.exp())
    } else {
        (best.0, delta * best.1.exp())
    }
}
