//! The grid syntax of `compare --epsilon/--budget`: comma-separated values and geometric
//! ranges `LO..HI:N`, parsed, rounded and bounded.

use super::*;

/// Most points a `--budget` or `--epsilon` grid may have.
pub const MAX_GRID_POINTS: usize = 200;

/// Most points a range `LO..HI:N` may expand to.
const MAX_RANGE_POINTS: usize = 100;

/// The syntax of `--budget` / `--epsilon`, for error messages and help.
pub const GRID_SYNTAX: &str = "a comma-separated list of values and ranges, a range being LO..HI:N (N points from LO to HI inclusive, geometrically spaced), e.g. `1,10,100,1000` or `1..1000:10` or `0.1..10:5,20`";

/// Parses a grid of budgets B: whole numbers in 1..=10^9, ranges rounded to whole answers;
/// sorted, duplicates removed.
pub fn parse_budgets(text: &str) -> Result<Vec<u64>> {
    let v = parse_grid(
        "--budget",
        text,
        1.0,
        1e9,
        "whole numbers of answers in 1..=1000000000",
    )?;
    let mut out: Vec<u64> = Vec::with_capacity(v.len());
    for (x, from_range) in v {
        if !from_range && x.fract() != 0.0 {
            return Err(StudyError::invalid(
                "--budget",
                fmt_num(x),
                "whole numbers of answers in 1..=1000000000",
            ));
        }
        out.push(x.round() as u64);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parses a grid of privacy losses ε: finite values in (0, 1000]; sorted, duplicates removed.
pub fn parse_epsilons(text: &str) -> Result<Vec<f64>> {
    let mut out: Vec<f64> = parse_grid(
        "--epsilon",
        text,
        f64::MIN_POSITIVE,
        1000.0,
        "ε in (0, 1000]",
    )?
    .into_iter()
    .map(|(x, from_range)| if from_range { round_sig(x, 4) } else { x })
    .collect();
    out.sort_by(f64::total_cmp);
    out.dedup();
    Ok(out)
}

/// Rounds to `digits` significant digits (range points such as 10^0.5 print legibly).
pub(super) fn round_sig(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let k = digits - 1 - x.abs().log10().floor() as i32;
    let f = 10f64.powi(k);
    (x * f).round() / f
}

/// The values of a grid, each flagged when it came from a range.
fn parse_grid(
    flag: &'static str,
    text: &str,
    lo_ok: f64,
    hi_ok: f64,
    what: &str,
) -> Result<Vec<(f64, bool)>> {
    let bad = |item: &str, why: String| StudyError::invalid(flag, item.to_string(), why);
    let num = |item: &str, t: &str| -> Result<f64> {
        let v: f64 = t.trim().parse().map_err(|_| {
            bad(
                item,
                format!("`{}` is not a number; expected {GRID_SYNTAX}", t.trim()),
            )
        })?;
        if !v.is_finite() || v < lo_ok || v > hi_ok {
            return Err(bad(item, format!("{what}; expected {GRID_SYNTAX}")));
        }
        Ok(v)
    };
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Err(bad(text, format!("at least one value: {GRID_SYNTAX}")));
    }
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(bad(text, format!("an empty item; expected {GRID_SYNTAX}")));
        }
        match item.split_once("..") {
            None => out.push((num(item, item)?, false)),
            Some((lo, rest)) => {
                let (hi, count) = rest.split_once(':').ok_or_else(|| {
                    bad(
                        item,
                        format!(
                            "a range needs its number of points, LO..HI:N; expected {GRID_SYNTAX}"
                        ),
                    )
                })?;
                let (lo, hi) = (num(item, lo)?, num(item, hi)?);
                let n: usize = count.trim().parse().map_err(|_| {
                    bad(
                        item,
                        format!(
                            "N = `{}` is not an integer in 2..={MAX_RANGE_POINTS}",
                            count.trim()
                        ),
                    )
                })?;
                if !(2..=MAX_RANGE_POINTS).contains(&n) {
                    return Err(bad(item, format!("N in 2..={MAX_RANGE_POINTS} points")));
                }
                if lo >= hi {
                    return Err(bad(item, "LO < HI in a range LO..HI:N".into()));
                }
                let (a, b) = (lo.ln(), hi.ln());
                for k in 0..n {
                    let x = if k == 0 {
                        lo
                    } else if k == n - 1 {
                        hi
                    } else {
                        (a + (b - a) * k as f64 / (n - 1) as f64).exp()
                    };
                    out.push((x, true));
                }
            }
        }
        if out.len() > MAX_GRID_POINTS {
            return Err(bad(text, format!("at most {MAX_GRID_POINTS} grid points")));
        }
    }
    Ok(out)
}
