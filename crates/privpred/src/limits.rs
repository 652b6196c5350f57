//! Limits on the counts a command line may ask for. A count beyond its limit is a usage error
//! (exit 2) naming the flag, the value and the valid range, given before any work or
//! allocation. The limits are far above every setting of the study (100 repetitions, 256
//! teachers, 10⁵–10⁶ audit trials) and low enough that the largest allowed run ends.

use crate::exit::usage;

/// Most repetitions (`evaluate`, `compare`, `reproduce --repetitions`).
pub const MAX_REPETITIONS: u64 = 10_000;
/// Most audit trials per dataset (`audit --trials`; each trial's output is kept, 8 bytes).
pub const MAX_AUDIT_TRIALS: u64 = 100_000_000;
/// Most answers per audit trial (`audit --budget`).
pub const MAX_AUDIT_BUDGET: u64 = 1_000_000;
/// Most teachers T (`audit`, `compare`, `train --teachers`).
pub const MAX_TEACHERS: u64 = 100_000;
/// Most classes (`audit --classes`): the data layer's limit.
pub const MAX_CLASSES: u64 = privpred_data::limits::MAX_CLASSES as u64;
/// Most input features (`audit --features`).
pub const MAX_FEATURES: u64 = 100_000;
/// Most released parameters D·C of an audited model (`audit --features × --classes`).
pub const MAX_AUDIT_PARAMETERS: u64 = 1_000_000;
/// Most work of one audit: trials × answers per trial (B) × released values per answer
/// (D·C for model sensitivity, 1 otherwise). The default model-sensitivity audit
/// (10⁵ trials × 784 × 10) is 7.8 × 10⁸.
pub const MAX_AUDIT_WORK: u64 = 10_000_000_000;
/// Most training examples of the end-to-end audit (`audit --e2e-n`: a model is trained per
/// trial).
pub const MAX_AUDIT_E2E_N: u64 = 100_000;
/// Most training-set size an audit may name (`audit --n`, `--dpsgd-n`).
pub const MAX_AUDIT_N: u64 = 1_000_000_000;
/// Most DP-SGD steps ⌈epochs · N / b⌉ of an audit (`--epochs`, `--dpsgd-n`, `--batch-size`).
pub const MAX_AUDIT_STEPS: u64 = 1_000_000;
/// Most separately clipped parameter tensors (`audit --tensors`).
pub const MAX_AUDIT_TENSORS: u64 = 10_000;

/// Most bytes of a `predict --input` query file (a million rows of 784 pixels is about
/// 100 MB of CSV text); read no further than this, so `/dev/zero` is refused at once.
pub const MAX_QUERY_BYTES: u64 = 256 << 20;
/// Most query rows of one `predict` call (each row is one answer).
pub const MAX_QUERY_ROWS: u64 = 1_000_000;

/// `Ok` when `lo ≤ value ≤ hi`; otherwise a usage error naming `--flag`, the value, the range
/// and the limit's name.
pub fn count(flag: &str, value: u64, lo: u64, hi: u64, limit: &str) -> anyhow::Result<()> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(usage(format!(
            "invalid --{flag} = {value}: must be an integer in {lo}..={hi} (privpred::limits::{limit})"
        )))
    }
}
