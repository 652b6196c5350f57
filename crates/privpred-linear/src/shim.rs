//! Thin adapters over `privpred_core`'s calibration (the solver's residual accounted for).

pub use privpred_core::calibrate::CalibrationRequest;

/// The calibration every fit of this crate uses: the core's, with the solver's residual
/// accounted for (docs/guarantees.md#errata (erratum 4.8), `privpred_core::certify::calibrate_certified`).
pub fn calibrate(
    req: &CalibrationRequest,
) -> privpred_core::error::Result<privpred_core::Calibration> {
    privpred_core::certify::calibrate_certified(req)
}
pub use privpred_core::dpsgd::DpSgdSchedule;
