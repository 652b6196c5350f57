//! # privpred-data
//!
//! Readers, dataset discovery and fetching, and the preprocessing that keeps every example
//! inside the unit ball (docs/guarantees.md#the-setting).
//!
//! ```no_run
//! use privpred_data::{DatasetSpec, LoadOptions, load, preprocess::Preprocessing};
//! let splits = load(&DatasetSpec::parse("mnist")?, &LoadOptions::default())?;
//! let fitted = Preprocessing { pca: Some(50), ..Default::default() }.fit(&splits.train, 0)?;
//! // Every row has norm ≤ 1. The owned forms work in place (one copy of the features at a
//! // time); `apply_train(&splits.train)` / `apply(&splits.test)` borrow instead and give
//! // bit-identical results.
//! let train = fitted.apply_train_owned(splits.train)?;
//! let test = fitted.apply_owned(splits.test)?;
//! # Ok::<(), privpred_data::DataError>(())
//! ```
//!
//! Memory: the IDX reader converts bytes to f32 while streaming (the raw file is never held
//! beside the array) and allocates its output once; the owned preprocessing compacts,
//! scales, normalises and widens rows in place, and PCA accumulates its covariance one
//! panel of rows at a time. Loading and preprocessing the 1,000,000-row MNIST-1M substitute
//! peaks at about one f32 copy of its pixels (the `load_peak` example measures it).

pub mod artifact;
pub mod cifar;
pub mod csvfile;
pub mod dataset;
pub mod error;
pub mod fetch;
pub mod fsutil;
pub mod idx;
pub mod images;
pub mod known;
pub mod limits;
pub mod linalg;
pub mod load;
pub mod mnist1m;
pub mod pq;
pub mod preprocess;
pub mod read;
pub mod schema;
pub mod spec;
pub mod split;
pub mod table;
pub mod testdata;
pub mod zip;

pub use dataset::{Dataset, Provenance, UnitBallDataset};
pub use error::{DataError, Result};
pub use load::{LoadOptions, Splits, load};
pub use preprocess::{FittedPreprocessing, Preprocessing, UnitBall};
pub use schema::Schema;
pub use spec::DatasetSpec;
