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
/// `noise` is a [`Noise`] or a [`privpred_core::VectorNoise`]. Left for loss perturbation's
/// module (issue #17: its draws are to go through `Mechanism::perturb` like the other
/// methods'); every other release draws through the calibration's `Mechanism`.
pub fn add_noise<R: Rng + ?Sized, N: Into<Noise> + Copy>(
    noise: &N,
    rng: &mut R,
    v: &mut [f64],
) -> Result<()> {
    Ok((*noise).into().add_to(rng, v)?)
}
