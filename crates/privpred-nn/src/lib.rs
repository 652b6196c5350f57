//! # privpred-nn
