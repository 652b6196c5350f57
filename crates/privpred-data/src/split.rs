//! Deterministic seeded splits: the test hold-out of sources without a test split and the
//! 10 % validation hold-out of cross-validation (docs/study.md).

use crate::dataset::{Dataset, UnitBallDataset};
use crate::error::{DataError, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A seeded uniformly random permutation of `0..n` (Fisher–Yates with ChaCha20).
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = uniform_below(&mut rng, i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

/// An unbiased integer in `0..bound` (`bound ≥ 1`) by rejection (Lemire-style widening).
pub(crate) fn uniform_below(rng: &mut impl rand::Rng, bound: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX % bound);
    loop {
        let v = rng.next_u64();
        if v < zone {
            return v % bound;
        }
    }
}

/// `k = round(n · fraction)`: the hold-out size.
fn holdout_size(n: usize, fraction: f64) -> usize {
    (n as f64 * fraction).round() as usize
}

/// Splits `ds` into (train part, hold-out part) with `round(n · fraction)` hold-out rows
/// chosen uniformly at random, deterministic from `seed`; both parts keep a random order.
/// Errors if `fraction` is not in (0, 1) or either part would be empty.
pub fn try_holdout(ds: &Dataset, fraction: f64, seed: u64) -> Result<(Dataset, Dataset)> {
    if !(fraction > 0.0 && fraction < 1.0) {
        return Err(DataError::InvalidArgument {
            name: "hold-out fraction",
            value: fraction.to_string(),
            expected: "a number in (0, 1)".into(),
        });
    }
    let k = holdout_size(ds.n, fraction);
    if k == 0 || k >= ds.n {
        return Err(DataError::InvalidArgument {
            name: "hold-out fraction",
            value: fraction.to_string(),
            expected: format!("a fraction leaving both parts non-empty for {} rows", ds.n),
        });
    }
    let p = permutation(ds.n, seed);
    Ok((ds.subset(&p[k..]), ds.subset(&p[..k])))
}

/// Splits `ds` into (train part, hold-out part) deterministically from `seed`: the hold-out
/// has `round(n · fraction)` rows clamped to `1..=n-1` (so both parts are non-empty when
/// `n ≥ 2`; a non-finite fraction counts as 0). The 10 % cross-validation hold-out is
/// `holdout(ds, 0.1, seed)`.
pub fn holdout(ds: &Dataset, fraction: f64, seed: u64) -> (Dataset, Dataset) {
    let f = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let k = holdout_size(ds.n, f).clamp(1.min(ds.n), ds.n.saturating_sub(1).max(1.min(ds.n)));
    let p = permutation(ds.n, seed);
    (ds.subset(&p[k..]), ds.subset(&p[..k]))
}

/// [`holdout`] for a unit-ball dataset (subsets stay in the unit ball).
pub fn holdout_unit(
    ds: &UnitBallDataset,
    fraction: f64,
    seed: u64,
) -> (UnitBallDataset, UnitBallDataset) {
    let f = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let k = holdout_size(ds.n, f).clamp(1.min(ds.n), ds.n.saturating_sub(1).max(1.min(ds.n)));
    let p = permutation(ds.n, seed);
    (ds.subset(&p[k..]), ds.subset(&p[..k]))
}
