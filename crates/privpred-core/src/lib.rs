//! # privpred-core
//!
//! The privacy mathematics of private prediction (van der Maaten & Hannun, NeurIPS 2020),
//! with no I/O: the guarantee types, noise calibration for every method in the three
//! calibration modes (`paper`, `corrected`, `tight`), accounting (composition, RDP, PLD) and
//! noise samplers.

pub mod error;
pub mod types;

pub use error::CoreError;
pub use types::*;
