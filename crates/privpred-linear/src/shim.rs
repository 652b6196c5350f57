//! Thin adapters over `privpred_core`'s calibration and noise samplers.

use crate::error::Result;
use privpred_core::Noise;
use rand::Rng;

pub use privpred_core::calibrate::CalibrationRequest;

/// The calibration every fit of this crate uses: the core's, with the solver's residual
/// accounted for (SPEC erratum 4.8, `privpred_core::certify::calibrate_certified`).
pub fn calibrate(
    req: &CalibrationRequest,
) -> privpred_core::error::Result<privpred_core::Calibration> {
    privpred_core::certify::calibrate_certified(req)
}
pub use privpred_core::dpsgd::DpSgdSchedule;

/// Adds one draw of `noise` (ℓ2-Laplace or Gaussian, all coordinates jointly) to `v`.
/// `noise` is a [`Noise`] or a [`privpred_core::VectorNoise`].
pub fn add_noise<R: Rng + ?Sized, N: Into<Noise> + Copy>(
    noise: &N,
    rng: &mut R,
    v: &mut [f64],
) -> Result<()> {
    Ok((*noise).into().add_to(rng, v)?)
}

/// One draw of the exponential mechanism P(k) ∝ exp(β·scores_k).
pub fn exp_mech<R: Rng + ?Sized>(rng: &mut R, scores: &[u32], beta: f64) -> Result<usize> {
    Ok(privpred_core::noise::sample_exponential_mechanism(
        rng, scores, beta,
    )?)
}

/// One draw of the calibrated selection mechanism (exponential mechanism or permute-and-flip)
/// over `scores` (vote counts or logits).
pub fn select<R: Rng + ?Sized, T: Copy + Into<f64>>(
    noise: &Noise,
    rng: &mut R,
    scores: &[T],
) -> Result<usize> {
    Ok(noise.select(rng, scores)?)
}
