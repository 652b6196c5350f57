//! One module per subcommand: each defines its `Args` and `run`.
pub mod account;
pub mod args;
pub mod audit;
pub mod calibrate;
pub mod compare;
pub mod data;
pub mod evaluate;
pub mod ledger;
pub mod merge;
pub mod nn_artifact;
pub mod predict;
pub mod reproduce;
pub mod serve;
pub mod shared;
pub mod train;
#[cfg(feature = "nn")]
pub mod train_nn;
