//! Private summaries of a table's columns, for drafting its schema without public knowledge:
//! a numeric column's bounds by quantiles selected over a public grid, a categorical column's
//! values by a thresholded histogram. Both are stated under the replace-one relation (the
//! table's row count N is public; a neighbouring table differs in one row's cells).
//!
//! # Bounds: the exponential mechanism over a public grid
//! The candidates ([`bound_grid`]) are 0 and ±m·10^k for the round mantissas
//! m ∈ {1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8} and k ∈ [−10, 15]: 521 values fixed in advance,
//! from ±10⁻¹⁰ to ±8·10¹⁵, each a round number already (the selected bound is printed as it
//! is; no further rounding reads the data). With t ≥ 1 the target rank (q·N rounded, public)
//! and n the number of numeric cells, the score of candidate g_i as a *lower* bound is
//!
//! u_i = min(t − A(g_i), A(g_{i+1}) − t),  A(c) = #{x < c},  A(g_K) := n,
//!
//! with A(g_0) := 0 (the grid's ends stand for everything beyond them: a value past the
//! chosen end is clipped to it),
//! the depth of t inside the grid cell [A(g_i), A(g_{i+1})] (negative outside it): the best
//! candidate has about t values below it and the t-th value in its cell. As an *upper* bound,
//! u_i = min(t − B(g_i), B(g_{i−1}) − t) with B(c) = #{x > c}, B(g_{−1}) := n and
//! B(g_{K−1}) := 0. Replacing one
//! row changes every A(c), B(c) and n by at most 1, so every score by at most 1 (sensitivity
//! Δ = 1; the scores are integers, exact in `f64`). The candidate is drawn exactly from
//! P(i) ∝ exp(ε·u_i/2) by [`crate::exact::exponential_mechanism`]: ε-DP (McSherry & Talwar
//! 2007, Theorem 6; Dwork & Roth 2014, Theorem 3.10). Where the data leave a run of
//! candidates with the same count (beyond the data, or at a value many rows share), only the
//! candidate whose cell holds the t-th value scores above −t, so a bound settles next to
//! the data, not anywhere in the run. A table needs about ε·t/2 ≥ ln 521 + 3 ≈ 9 for a bound
//! near its quantile; with less, the bound is mostly noise (wide or narrow), never a privacy
//! failure.
//!
//! # Values: stability-based key selection
//! Each observed value v with count c_v (every count ≥ 1) is kept when c_v + Z_v ≥ T, with
//! Z_v drawn exactly from the discrete Laplace distribution of scale s = 2/ε
//! ([`crate::exact::discrete_laplace`]) and T = 1 + ⌈s·ln(2/δ)⌉ ([`key_threshold`]); only the
//! kept values are released (not their counts), in an order that does not depend on the data.
//! **(ε, δ)-DP under replace-one** (the argument of Korolova et al. 2009 and Wilson et al.
//! 2020 for one value per row): replacing one row's value a by b moves the counts of a and b by
//! one each (a factor e^{1/s} each, e^{2/s} = e^ε together) when both are observed in both
//! tables; a value observed in only one of them has count 1 there and is kept with
//! probability P(Z ≥ T − 1) = r^{T−1}/(1 + r) ≤ e^{−(T−1)/s} ≤ δ/2 (r = e^{−1/s}), and at most
//! two values (a and b) are in that case, so every event's probability grows by at most e^ε
//! and δ. With δ = 0 no threshold suffices: a value held by one row would be released with
//! positive probability from one table and never from its neighbour.

use crate::error::{CoreError, Result};
use crate::exact::{Rational, discrete_laplace, exponential_mechanism};
use num_bigint::BigInt;
use rand::Rng;

/// The round mantissas of the bound grid (one decade).
pub const GRID_MANTISSAS: [&str; 10] = ["1", "1.2", "1.5", "2", "2.5", "3", "4", "5", "6", "8"];

/// The decades of the bound grid: ±m·10^k for k in this range.
pub const GRID_DECADES: std::ops::RangeInclusive<i32> = -10..=15;

/// The public candidate bounds, ascending: 0 and ±m·10^k ([`GRID_MANTISSAS`],
/// [`GRID_DECADES`]), each the double nearest to its decimal form.
pub fn bound_grid() -> Vec<f64> {
    let positive: Vec<f64> = GRID_DECADES
        .flat_map(|k| {
            GRID_MANTISSAS
                .iter()
                .map(move |m| format!("{m}e{k}").parse::<f64>().unwrap_or(f64::NAN))
        })
        .collect();
    let mut g: Vec<f64> = positive.iter().rev().map(|v| -v).collect();
    g.push(0.0);
    g.extend(positive);
    g
}

/// Which end of a column a bound closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The lower bound: about t values lie below it.
    Lower,
    /// The upper bound: about t values lie above it.
    Upper,
}

/// The public target rank of quantile `q` on `n` rows: q·n rounded, at least 1.
pub fn quantile_target(n: usize, q: f64) -> u64 {
    ((q * n as f64).round() as u64).max(1)
}

/// The scores u_i of the grid's candidates (see the module documentation) for the column's
/// numeric values `sorted` (ascending, finite) and target rank `target`; each changes by at
/// most 1 when one row is replaced.
pub fn bound_scores(sorted: &[f64], grid: &[f64], target: u64, side: Side) -> Vec<f64> {
    let n = sorted.len() as i64;
    let t = target as i64;
    let below = |c: f64| sorted.partition_point(|&x| x < c) as i64;
    let above = |c: f64| n - sorted.partition_point(|&x| x <= c) as i64;
    (0..grid.len())
        .map(|i| {
            let (inner, outer) = match side {
                Side::Lower => (
                    if i == 0 { 0 } else { below(grid[i]) },
                    grid.get(i + 1).map_or(n, |&c| below(c)),
                ),
                Side::Upper => (
                    if i + 1 == grid.len() {
                        0
                    } else {
                        above(grid[i])
                    },
                    if i == 0 { n } else { above(grid[i - 1]) },
                ),
            };
            (t - inner).min(outer - t) as f64
        })
        .collect()
}

/// One private bound: the index into `grid` drawn exactly from P(i) ∝ exp(ε·u_i/2)
/// ([`bound_scores`]); ε-DP under replace-one (module documentation).
pub fn private_bound<R: Rng + ?Sized>(
    rng: &mut R,
    sorted: &[f64],
    grid: &[f64],
    target: u64,
    side: Side,
    epsilon: f64,
) -> Result<usize> {
    check_epsilon(epsilon)?;
    let scores = bound_scores(sorted, grid, target, side);
    exponential_mechanism(rng, &scores, epsilon / 2.0)
}

fn check_epsilon(epsilon: f64) -> Result<()> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(())
    } else {
        Err(CoreError::invalid(
            "--epsilon",
            epsilon,
            "must be a finite number > 0",
        ))
    }
}

/// The threshold T = 1 + ⌈(2/ε)·ln(2/δ)⌉ of [`keep_keys`] (a hair above the exact value, so
/// that the rounding of the logarithm never lowers it), for ε > 0 and δ ∈ (0, 1).
pub fn key_threshold(epsilon: f64, delta: f64) -> Result<u64> {
    check_epsilon(epsilon)?;
    if !(delta.is_finite() && delta > 0.0 && delta < 1.0) {
        return Err(CoreError::invalid(
            "--delta",
            delta,
            "must be in (0, 1): a value held by one row is released with positive probability, which only δ > 0 covers",
        ));
    }
    let k = (2.0 / epsilon) * (2.0 / delta).ln() * (1.0 + 1e-12);
    if !(k.is_finite() && k < 1e18) {
        return Err(CoreError::invalid(
            "--epsilon",
            epsilon,
            "too small for a threshold (2/ε)·ln(2/δ) below 10^18",
        ));
    }
    Ok(1 + k.ceil() as u64)
}

/// The probability that a value of count `count` is kept: P(count + Z ≥ T) for Z discrete
/// Laplace of scale 2/ε (for tests and reports; never on a sampling path).
pub fn keep_probability(count: u64, epsilon: f64, threshold: u64) -> f64 {
    let r = (-epsilon / 2.0).exp();
    let need = threshold as f64 - count as f64; // Z ≥ need
    if need <= 0.0 {
        // 1 − P(Z ≤ need − 1) = 1 − P(Z ≥ 1 − need)
        1.0 - r.powf(1.0 - need) / (1.0 + r)
    } else {
        r.powf(need) / (1.0 + r)
    }
}

/// Which observed values to release: `keep[v]` when `counts[v]` + Z_v ≥ [`key_threshold`],
/// Z_v discrete Laplace of scale 2/ε drawn exactly; (ε, δ)-DP for the set of kept values
/// under replace-one when every count is ≥ 1 and each row holds one value (module
/// documentation).
pub fn keep_keys<R: Rng + ?Sized>(
    rng: &mut R,
    counts: &[u64],
    epsilon: f64,
    delta: f64,
) -> Result<Vec<bool>> {
    let threshold = BigInt::from(key_threshold(epsilon, delta)?);
    let e = Rational::from_f64(epsilon)?;
    // the scale 2/ε exactly: ε = a/b gives 2b/a
    let scale = Rational::new(e.denom() * 2u32, e.numer().clone())?;
    counts
        .iter()
        .map(|&c| Ok(BigInt::from(c) + discrete_laplace(rng, &scale)? >= threshold))
        .collect()
}

#[cfg(test)]
mod tests;
