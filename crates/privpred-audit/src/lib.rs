//! # privpred-audit
