//! How a schema's row becomes a vector of norm at most 1 ([`RowMap`]), whatever the data.
//!
//! Each feature column first gives its *column entries* v_j: a numeric value x (clipped into
//! [min, max] where so declared) becomes z = (2x − min − max)/(max − min) ∈ [−1, 1]
//! ([`Range::Centered`]) or u = (x − min)/(max − min) ∈ [0, 1] ([`Range::Unit`]); a categorical
//! value becomes its one-hot vector. Every column's entries have squared norm at most 1
//! (z² ≤ 1, u² ≤ 1, a one-hot vector has one entry of 1). Let m be the number of feature
//! columns and m′ = m + 1 with a bias coordinate ([`RowMap::bias`]), m′ = m without.
//!
//! - Without `sphere`: every entry is multiplied by 1/√m′, and with `bias` a last coordinate
//!   1/√m′ is appended. ‖x‖² ≤ m · (1/m′) + [bias] · (1/m′) = m′/m′ = 1.
//! - With `sphere`: the concatenated entries v (squared norm n² ≤ m) are multiplied by
//!   √(m/m′) / ((1 + 10⁻⁹)·n) when n > 0 (the row scaled to the sphere of radius √(m/m′); the
//!   factor 1 + 10⁻⁹ covers the rounding of n's computation, whose relative error is below
//!   10⁻¹⁰ for up to a million features) and left at 0 when n = 0; with `bias` the coordinate
//!   1/√m′ is appended. ‖x‖² ≤ m/m′ + [bias]/m′ = 1.
//!
//! The entries are then rounded toward zero to f32, which never increases a magnitude, so the
//! bound holds for the stored row. Each row is mapped from its own cells and the schema's
//! public declarations only: no statistic of other rows enters, so the map is the same
//! function on neighbouring data sets and the methods' calibrations, which assume ‖x‖ ≤ 1,
//! apply unchanged.

use serde::{Deserialize, Serialize};

/// How a numeric value is placed within its declared bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Range {
    /// z = (2x − min − max)/(max − min) ∈ [−1, 1]: the middle of the bounds is 0.
    Centered,
    /// u = (x − min)/(max − min) ∈ [0, 1]: the lower bound is 0.
    #[default]
    Unit,
}

/// A schema's map of a row into the unit ball (see the module documentation for the proof
/// that ‖x‖ ≤ 1). Written in a schema as `"map": {"range": "unit", "sphere": true, "bias":
/// false}`; every field may be left out (its default below).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowMap {
    /// Where a numeric value lies: [`Range::Unit`] (the default) or [`Range::Centered`].
    #[serde(default)]
    pub range: Range,
    /// Whether the row's column entries are scaled to a sphere (default true): every row then
    /// spends the whole norm budget, whatever part of its bounds its values use.
    #[serde(default = "yes")]
    pub sphere: bool,
    /// Whether a constant coordinate is appended (default false), which gives the linear
    /// model an intercept.
    #[serde(default)]
    pub bias: bool,
}

fn yes() -> bool {
    true
}

impl Default for RowMap {
    /// The default map: per-column [0, 1], scaled to the unit sphere, no bias coordinate
    /// (chosen by measurement on public tables, docs/tables.md).
    fn default() -> Self {
        RowMap {
            range: Range::Unit,
            sphere: true,
            bias: false,
        }
    }
}

/// The share of the norm budget a safety factor leaves to the rounding of ‖v‖ (see the
/// module documentation).
const SPHERE_MARGIN: f64 = 1.0 + 1e-9;

impl RowMap {
    /// The extra coordinates the map adds to the column entries (1 with a bias).
    pub fn extra_dims(&self) -> usize {
        usize::from(self.bias)
    }

    /// A numeric value's column entry, `x` already within `[lo, hi]`.
    pub(crate) fn numeric(&self, x: f64, lo: f64, hi: f64) -> f64 {
        match self.range {
            Range::Centered => ((2.0 * x - lo - hi) / (hi - lo)).clamp(-1.0, 1.0),
            Range::Unit => ((x - lo) / (hi - lo)).clamp(0.0, 1.0),
        }
    }

    /// Appends the mapped row to `out`: the column entries `v` of `m` feature columns (each
    /// column's entries of squared norm ≤ 1) scaled as the module documentation states, then
    /// the bias coordinate when declared, every value rounded toward zero to f32.
    pub(crate) fn finish(&self, m: usize, v: &[f64], out: &mut Vec<f32>) {
        let m = m.max(1) as f64;
        let mp = m + self.extra_dims() as f64;
        let s = if self.sphere {
            let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            if n > 0.0 {
                (m / mp).sqrt() / (SPHERE_MARGIN * n)
            } else {
                0.0
            }
        } else {
            1.0 / mp.sqrt()
        };
        out.extend(v.iter().map(|&x| super::toward_zero(x * s)));
        if self.bias {
            out.push(super::toward_zero(1.0 / mp.sqrt()));
        }
    }

    /// The map in words, for the recorded preprocessing steps.
    pub fn describe(&self, m: usize) -> String {
        let mp = m + self.extra_dims();
        let range = match self.range {
            Range::Centered => "to [-1, 1]",
            Range::Unit => "to [0, 1]",
        };
        let scale = if self.sphere && mp == m {
            "each row scaled to the unit sphere".to_string()
        } else if self.sphere {
            format!("each row scaled to norm √({m}/{mp})")
        } else {
            format!("every entry times 1/√{mp}")
        };
        let bias = if self.bias {
            format!(", a bias coordinate 1/√{mp}")
        } else {
            String::new()
        };
        format!("numeric columns from their public bounds {range}, {scale}{bias}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn norm(v: &[f32]) -> f64 {
        v.iter()
            .map(|&x| (x as f64) * (x as f64))
            .sum::<f64>()
            .sqrt()
    }

    fn maps() -> Vec<RowMap> {
        let mut out = Vec::new();
        for range in [Range::Centered, Range::Unit] {
            for sphere in [false, true] {
                for bias in [false, true] {
                    out.push(RowMap {
                        range,
                        sphere,
                        bias,
                    });
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Every map keeps every row in the unit ball: numeric values anywhere within their
        /// bounds (at the bounds included, bounds of any width and sign) and one-hot columns.
        #[test]
        fn every_map_keeps_every_row_in_the_unit_ball(
            cols in prop::collection::vec(
                (-1e300f64..1e300, 1e-300f64..1e300, 0u8..4, 0usize..5),
                1..60,
            )
        ) {
            for map in maps() {
                let mut v = Vec::new();
                for &(lo, width, at, k) in &cols {
                    let hi = if (lo + width).is_finite() && lo + width > lo { lo + width } else { lo.next_up() };
                    if k > 0 {
                        // a one-hot column of k slots
                        let start = v.len();
                        v.resize(start + k, 0.0);
                        v[start + (at as usize % k)] = 1.0;
                        continue;
                    }
                    let x = match at { 0 => lo, 1 => hi, 2 => lo + (hi - lo) / 3.0, _ => hi - (hi - lo) * 1e-12 };
                    v.push(map.numeric(x.clamp(lo, hi), lo, hi));
                }
                let mut out = Vec::new();
                map.finish(cols.len(), &v, &mut out);
                prop_assert_eq!(out.len(), v.len() + map.extra_dims());
                prop_assert!(norm(&out) <= 1.0, "{:?}: norm {}", map, norm(&out));
            }
        }
    }

    #[test]
    fn corners_reach_the_bound_and_never_pass_it() {
        // every numeric value at the bound farthest from 0: the row's norm is 1 (to f32)
        for map in maps() {
            for m in [1usize, 2, 3, 7, 30, 1000] {
                let v: Vec<f64> = (0..m).map(|_| map.numeric(10.0, 0.0, 10.0)).collect();
                let mut out = Vec::new();
                map.finish(m, &v, &mut out);
                let n = norm(&out);
                assert!(n <= 1.0 && n > 1.0 - 1e-6, "{map:?} m = {m}: {n}");
            }
        }
        // all values at the lower bound under the unit range: only the bias is left
        let map = RowMap {
            bias: true,
            ..RowMap::default()
        };
        let mut out = Vec::new();
        map.finish(3, &[0.0, 0.0, 0.0], &mut out);
        assert_eq!(out[..3], [0.0, 0.0, 0.0]);
        assert_eq!(out[3], super::super::toward_zero(0.5));
    }
}
