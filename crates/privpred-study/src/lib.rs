//! # privpred-study
