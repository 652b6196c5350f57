//! # privpred-data
//!
//! Readers, dataset discovery and fetching, and the preprocessing that keeps every example
//! inside the unit ball (SPEC §2).
//!
//! ```no_run
//! use privpred_data::{DatasetSpec, LoadOptions, load, preprocess::Preprocessing};
//! let splits = load(&DatasetSpec::parse("mnist")?, &LoadOptions::default())?;
//! let fitted = Preprocessing { pca: Some(50), ..Default::default() }.fit(&splits.train, 0)?;
//! let train = fitted.apply_train(&splits.train)?; // every row has norm ≤ 1
//! let test = fitted.apply(&splits.test)?;
//! # Ok::<(), privpred_data::DataError>(())
//! ```

pub mod cifar;
pub mod csvfile;
pub mod dataset;
pub mod error;
pub mod fetch;
pub mod fsutil;
pub mod idx;
pub mod images;
pub mod known;
pub mod linalg;
pub mod load;
pub mod mnist1m;
pub mod preprocess;
pub mod spec;
pub mod split;
pub mod zip;

pub use dataset::{Dataset, Provenance, UnitBallDataset};
pub use error::{DataError, Result};
pub use load::{LoadOptions, Splits, load};
pub use preprocess::{FittedPreprocessing, Preprocessing, UnitBall};
pub use spec::DatasetSpec;
