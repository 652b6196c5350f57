//! # privpred-core
//!
//! The privacy mathematics of private prediction (van der Maaten & Hannun, NeurIPS 2020),
//! with no I/O: the guarantee types, noise calibration for every method in the three
//! calibration modes (`paper`, `corrected`, `tight`), accounting (composition, RDP, PLD) and
//! noise samplers.

pub mod answer;
pub mod calibrate;
pub mod certify;
pub mod composition;
pub mod defaults;
mod delta_prime;
pub mod dpsgd;
pub mod error;
pub mod exact;
pub mod gaussian;
pub mod grid;
pub mod guarantee;
pub mod guarantee_json;
pub mod lattice;
pub mod mechanism;
pub mod noise;
pub mod params;
pub mod pld;
pub mod privacy;
pub mod public_rule;
pub mod rdp;
pub mod rederive;
pub mod select;
pub mod summary;
#[cfg(test)]
mod test_stats;
pub mod tuning;
pub mod types;
pub mod validate;

pub use answer::Answer;
pub use calibrate::{CalibrationRequest, calibrate, check_relation};
pub use dpsgd::{Accountant, DpSgdSchedule, SampledSteps};
pub use gaussian::sigma_ag;
pub use noise::{PrivRng, release_rng, seeded_rng};
pub use params::ParamGuard;

pub use error::CoreError;
pub use guarantee::{Calibration, CertifiedFit, Guarantee, Validity};
pub use mechanism::{Mechanism, Scores, VectorNoise};
pub use privacy::{Budget, Delta, Epsilon, MAX_BUDGET, Privacy};
pub use tuning::{Selection, SelectionMethod};
pub use types::*;
