//! # privpred-linear
