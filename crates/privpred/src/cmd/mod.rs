//! One module per subcommand: each defines its `Args` and `run`.
pub mod calibrate;
pub mod account;
pub mod data;
pub mod train;
pub mod evaluate;
pub mod predict;
pub mod reproduce;
pub mod compare;
pub mod merge;
pub mod serve;
pub mod audit;
