//! # privpred-serve
