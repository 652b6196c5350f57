//! Prediction sensitivity's advanced-composition branch in `paper` mode
//! (docs/guarantees.md#calibrations, erratum 4.6): σ″(δ′) over the paper's grid of δ′.

use crate::composition::advanced_per_answer_epsilon_paper;
use crate::gaussian::sigma_ag;

/// Paper's grid for δ′: `torch.linspace(0, δ, 1000)[1:-1]` (998 interior points).
pub(crate) fn paper_delta_prime_grid(delta: f64) -> impl Iterator<Item = f64> {
    (1..999).map(move |i| delta * i as f64 / 999.0)
}

/// σ″(δ′)/Δ of prediction sensitivity's advanced-composition branch with the paper's
/// closed-form per-answer ε, or ∞ where invalid.
pub(crate) fn sigma_advanced_paper(eps: f64, delta: f64, b: u64, dp: f64) -> f64 {
    let e0 = advanced_per_answer_epsilon_paper(eps, b, dp);
    let d0 = (delta - dp) / b as f64;
    if !(e0 > 0.0 && d0 > 0.0) {
        return f64::INFINITY;
    }
    sigma_ag(e0, d0).unwrap_or(f64::INFINITY)
}
