//! # privpred-study
//!
//! The empirical study of "The Trade-Offs of Private Prediction" (van der Maaten & Hannun,
//! NeurIPS 2020) as a reproducible, resumable and shardable sweep:
//!
//! - [`figures`]: the figures of docs/study.md as data (dataset, x-axis grid and scale, fixed
//!   parameters, methods);
//! - [`units`]: units of work (figure, calibration, method, setting, repetition) with stable
//!   ids, per-unit seeds derived from (seed, unit id), and `--shard k/n`;
//! - [`results`]: tidy rows (JSON Lines and CSV) appended and flushed as units finish, resumed
//!   after interruptions, finalised in a canonical order;
//! - [`sweep`]: the driver over a [`sweep::Runner`], finalisation and `merge` of shards;
//! - [`summary`], [`plot`], [`table1`]: mean ± std tables, PNG/SVG plots, the trend table;
//! - [`progress`]: structured progress events to a progress bar or log lines;
//! - [`report`]: one self-contained HTML file (inline SVG plots, tables, guarantees,
//!   provenance) for `compare` and `reproduce`.
//!
//! Data-dependent steps that the paper ignores in its privacy analysis (cross-validation of λ
//! and ν on a hold-out, PCA fitted on training data) are recorded in every result row, and
//! every row states how its λ or ν was selected and what that cost ([`selection`]).

pub mod compare;
pub mod error;
#[cfg(feature = "nn")]
pub mod fig7;
pub mod figures;
pub mod holdout;
pub mod linear;
pub mod params;
pub mod plot;
pub mod progress;
pub mod report;
pub mod results;
pub mod selection;
pub mod summary;
pub mod sweep;
pub mod table1;
pub mod units;

pub use error::{Result, StudyError};
pub use figures::{Figure, FigureId, Setting};
pub use sweep::{Runner, SweepConfig};
