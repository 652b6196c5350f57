//! # privpred-data
//!
//! Readers, dataset discovery and fetching, and the preprocessing that keeps every example
//! inside the unit ball (SPEC §2).

pub mod dataset;
pub mod error;

pub use dataset::{Dataset, Provenance, UnitBallDataset};
pub use error::DataError;
