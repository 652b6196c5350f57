//! The product's samplers, as the audit calls them: thin re-exports of
//! `privpred_core::noise`, so that every audited draw is the noise the product releases.
//!
//! These take the untyped [`Noise`] on purpose: the audit's simulations build their own
//! worst-case mechanisms (shifted noise on a chosen pair, selections over constructed scores)
//! that are deliberately independent of a method's [`privpred_core::Mechanism`], so that an
//! error in how a calibration names its mechanism cannot hide from the audit. The samplers
//! are the same functions `Mechanism::perturb` / `Mechanism::select` call.

use privpred_core::{CoreError, Noise};
use rand::Rng;

type CoreResult<T> = std::result::Result<T, CoreError>;

/// Adds one draw of `noise` (ℓ2-Laplace or Gaussian) to `values` in place
/// (`privpred_core::Noise::add_to`).
pub fn add_noise<R: Rng + ?Sized>(
    noise: &Noise,
    rng: &mut R,
    values: &mut [f64],
) -> CoreResult<()> {
    noise.add_to(rng, values)
}

/// One draw of the exponential mechanism: index y with probability ∝ exp(β·score_y)
/// (`privpred_core::noise::sample_exponential_mechanism`).
pub fn exponential_mechanism<R: Rng + ?Sized>(
    rng: &mut R,
    scores: &[f64],
    beta: f64,
) -> CoreResult<usize> {
    privpred_core::noise::sample_exponential_mechanism(rng, scores, beta)
}

/// One draw of a selection mechanism (exponential mechanism or permute-and-flip) over
/// `scores` (`privpred_core::Noise::select`, the product's release path).
pub fn select<R: Rng + ?Sized>(noise: &Noise, rng: &mut R, scores: &[f64]) -> CoreResult<usize> {
    noise.select(rng, scores)
}
