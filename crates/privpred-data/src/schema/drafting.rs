//! Drafting a schema from the table itself. [`draft`] reads the bounds and lists without
//! noise (not private: [`super::DRAFT_WARNING`]); [`PrivateDraft`] chooses them with
//! differentially private mechanisms ([`privpred_core::summary`]) and records how, and at what
//! cost, in the schema's `"drafted"` ([`Drafted`]).
//!
//! # The private draft
//! **Public by declaration:** the header (the first row names the columns unless the caller
//! says there is none; no row is taken for a header by a guess), the label column and each
//! column's type (the columns named `categorical` or `ignore`; every other one is numeric).
//! Deciding a column's type from its cells would read the data; taken from the caller it
//! costs nothing, and a cell of a numeric column that is not a number counts in neither of
//! its bounds' ranks (`train` refuses such a row, naming the cell).
//!
//! **Budget (basic composition, replace-one, N public):** the m charged columns (each numeric
//! and categorical column and the label; `ignore` columns are not read) get ε/m each. A numeric
//! column spends ε/(2m) on each bound; a categorical column and the label spend (ε/m, δ/k),
//! k = the number of categorical columns plus one. The draft is (ε, δ)-DP in all.
//!
//! - **Numeric:** the bounds are the q and 1 − q quantiles (target rank round(q·N) ≥ 1 from
//!   each end), selected over the public grid ([`privpred_core::summary::bound_grid`]), with
//!   `"out_of_bounds": "clip"`: a row outside the bounds is clipped, never refused. A lower
//!   bound above the upper one is swapped; equal bounds are widened to the next candidate
//!   (post-processing).
//! - **Categorical:** the values kept by stability-based selection (threshold
//!   [`privpred_core::summary::key_threshold`]) in a data-independent order (by number when
//!   every kept value is a number, else by text), with `"unknown": "other"`: a value not kept
//!   falls into the other slot. A column that keeps no value becomes `ignore`.
//! - **Label:** the classes kept the same way. A row whose class is not kept is refused by
//!   `train` (its label is not a declared class); write the class into the schema when its
//!   existence is public knowledge. Fewer than two kept classes is an error (the cost is spent).
//!
//! A cell is counted by its value: a number as its shortest form (`1.0` and `1` are one
//! value), any other cell as its trimmed text; empty cells are not counted.

use super::{Column, ColumnType, OutOfBounds, RowMap, SCHEMA_VERSION, Schema, Unknown};
use super::{MAX_SCHEMA_COLUMNS, invalid, show_list};
use crate::error::{DataError, Result};
use privpred_core::summary::{
    Side, bound_grid, keep_keys, key_threshold, private_bound, quantile_target,
};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Drafts a schema from a table's rows (the header's names when there is one, else
/// `column_0`, …): a column whose every cell is a number is numeric with the data's own
/// minimum and maximum as bounds (clipped outside); any other column is categorical with the
/// values it holds; the label is `label` (a name) or the last column, with its values as
/// classes. The bounds and categories are read from the data: see [`super::DRAFT_WARNING`].
pub fn draft(
    rows: &[Vec<String>],
    header: Option<&[String]>,
    label: Option<&str>,
) -> Result<Schema> {
    let width = header
        .map(<[String]>::len)
        .or_else(|| rows.first().map(Vec::len))
        .unwrap_or(0);
    if rows.is_empty() || width < 2 {
        return Err(invalid(
            format!("{} rows of {width} columns", rows.len()),
            "at least one data row and two columns (features and a label)",
        ));
    }
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != width) {
        return Err(invalid(
            format!("data row {} with {} columns", i + 1, r.len()),
            format!("{width} columns in every row"),
        ));
    }
    let names: Vec<String> = match header {
        Some(h) => h.iter().map(|s| s.trim().to_string()).collect(),
        None => (0..width).map(|i| format!("column_{i}")).collect(),
    };
    let li = match label {
        None => width - 1,
        Some(l) => names.iter().position(|n| n == l).ok_or_else(|| {
            invalid(
                format!("label `{l}`"),
                format!("one of the columns ({})", show_list(&names)),
            )
        })?,
    };
    let mut columns = Vec::with_capacity(width);
    for (j, name) in names.into_iter().enumerate() {
        let cells: Vec<&str> = rows.iter().map(|r| r[j].trim()).collect();
        let nums: Option<Vec<f64>> = cells
            .iter()
            .map(|c| c.parse::<f64>().ok().filter(|v| v.is_finite()))
            .collect();
        let mut col = Column {
            name,
            kind: ColumnType::Categorical,
            min: None,
            max: None,
            out_of_bounds: None,
            categories: None,
            unknown: None,
            classes: None,
        };
        let distinct = || {
            let mut v: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
            match &nums {
                Some(n) => {
                    let mut p: Vec<(f64, String)> = n.iter().copied().zip(v).collect();
                    p.sort_by(|a, b| a.0.total_cmp(&b.0));
                    p.dedup_by(|a, b| a.0 == b.0);
                    p.into_iter().map(|(_, s)| s).collect()
                }
                None => {
                    v.sort();
                    v.dedup();
                    v
                }
            }
        };
        if j == li {
            col.kind = ColumnType::Label;
            col.classes = Some(distinct());
        } else if let Some(n) = &nums {
            let lo = n.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = n.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            col.kind = ColumnType::Numeric;
            col.min = Some(lo);
            col.max = Some(if hi > lo { hi } else { lo + 1.0 });
            col.out_of_bounds = Some(OutOfBounds::Clip);
        } else {
            col.categories = Some(distinct());
            col.unknown = Some(Unknown::Error);
        }
        columns.push(col);
    }
    let s = Schema {
        privpred_schema: SCHEMA_VERSION,
        header: header.is_some(),
        columns,
        map: RowMap::default(),
        drafted: None,
    };
    s.validate()?;
    Ok(s)
}

/// The neighbouring relation of a private draft.
pub const DRAFT_RELATION: &str = "replace-one";

/// How a private draft chose a schema's bounds and lists, and what that cost: recorded in
/// the schema as `"drafted"` (checked when the schema is read; it does not change how rows are
/// mapped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drafted {
    /// The mechanisms, in words.
    pub mechanism: String,
    /// The draft's total ε (basic composition over the columns).
    pub epsilon: f64,
    /// The draft's total δ.
    pub delta: f64,
    /// The neighbouring relation ([`DRAFT_RELATION`]).
    pub relation: String,
    /// How the columns' costs add up (`basic`).
    pub composition: String,
    /// The quantiles of the numeric bounds: q and 1 − q.
    pub quantiles: [f64; 2],
    /// Each charged column's mechanism and cost.
    pub columns: Vec<DraftedColumn>,
    /// The experiment seed (`--seed`): a seeded draft's noise can be regenerated from it, so
    /// it is not a release. Absent for a draft from the OS-seeded generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The privacy odometer key the draft was charged to (`--odometer-key`): `train --schema`
    /// with `--odometer` charges the fit to the same key unless `--odometer-key` names another,
    /// so that the draft and the fits add up against one limit. Absent for a draft without an
    /// odometer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub odometer_key: Option<String>,
}

/// One column of [`Drafted`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraftedColumn {
    /// The column's name.
    pub name: String,
    /// `quantiles` (numeric bounds) or `thresholded-histogram` (categories, classes).
    pub mechanism: String,
    /// The column's ε.
    pub epsilon: f64,
    /// The column's δ.
    pub delta: f64,
    /// Histograms: the threshold T a value's noisy count must reach to be kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
    /// What the draft did beyond the column's type (a column that kept no value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Drafted {
    /// Checks the record: the relation, finite costs ε ≥ 0 and δ ∈ [0, 1), quantiles
    /// 0 < q < 1/2 with 1 − q, and column costs that add up to at most the totals.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String, expected: &str| Err(invalid(what, expected));
        if self.relation != DRAFT_RELATION {
            return bad(
                format!("drafted.relation `{}`", self.relation),
                "`replace-one`",
            );
        }
        let cost_ok = |e: f64, d: f64| e.is_finite() && e >= 0.0 && (0.0..1.0).contains(&d);
        if !cost_ok(self.epsilon, self.delta) {
            return bad(
                format!(
                    "drafted cost epsilon = {}, delta = {}",
                    self.epsilon, self.delta
                ),
                "a finite epsilon >= 0 and delta in [0, 1)",
            );
        }
        let [q, p] = self.quantiles;
        if !(q > 0.0 && q < 0.5 && (1.0 - q - p).abs() < 1e-12) {
            return bad(
                format!("drafted.quantiles [{q}, {p}]"),
                "[q, 1 - q] with 0 < q < 0.5",
            );
        }
        let (mut e, mut d) = (0.0, 0.0);
        for c in &self.columns {
            if !cost_ok(c.epsilon, c.delta) {
                return bad(
                    format!("drafted cost of column `{}`", c.name),
                    "a finite epsilon >= 0 and delta in [0, 1)",
                );
            }
            e += c.epsilon;
            d += c.delta;
        }
        let slack = 1.0 + 1e-9;
        if e > self.epsilon * slack || d > self.delta * slack {
            return bad(
                format!("drafted columns costing epsilon = {e}, delta = {d} in all"),
                "at most the recorded total",
            );
        }
        Ok(())
    }
}

/// A private draft's parameters: the cost (ε, δ), the quantile q of the numeric bounds, and
/// the caller's declarations (label, categorical and ignored columns); see the module
/// documentation.
#[derive(Debug, Clone)]
pub struct PrivateDraft {
    /// The draft's total ε > 0.
    pub epsilon: f64,
    /// The draft's total δ ∈ (0, 1): required (the lists need δ > 0).
    pub delta: Option<f64>,
    /// The numeric bounds' quantile q ∈ (0, 0.5): bounds at q and 1 − q.
    pub quantile: f64,
    /// The label column's name (default: the last column).
    pub label: Option<String>,
    /// The categorical columns' names.
    pub categorical: Vec<String>,
    /// The ignored columns' names (not read).
    pub ignore: Vec<String>,
    /// An experiment seed, recorded in the schema (not a release).
    pub seed: Option<u64>,
}

/// The default quantile of a private draft's numeric bounds (1 % and 99 %).
pub const DEFAULT_DRAFT_QUANTILE: f64 = 0.01;

/// A checked private draft, ready to run: every check that can refuse it is made by
/// [`PrivateDraft::plan`], before any cost is charged.
#[derive(Debug, Clone)]
pub struct DraftPlan {
    names: Vec<String>,
    kinds: Vec<ColumnType>,
    header: bool,
    epsilon: f64,
    delta: f64,
    quantile: f64,
    seed: Option<u64>,
}

/// Reconciles the header a reader detected with the caller's declaration: with `header`, the
/// first row names the columns (taken from the rows when the reader did not see a header);
/// without, every row is data (a detected header goes back in front of the rows).
pub fn declare_header(
    detected: Option<Vec<String>>,
    mut rows: Vec<Vec<String>>,
    header: bool,
) -> (Option<Vec<String>>, Vec<Vec<String>>) {
    match (detected, header) {
        (Some(h), true) => (Some(h), rows),
        (Some(h), false) => {
            rows.insert(0, h);
            (None, rows)
        }
        (None, true) if !rows.is_empty() => {
            let h = rows.remove(0);
            (Some(h), rows)
        }
        (None, _) => (None, rows),
    }
}

/// A sampler's error as the data crate's: its parameter errors as invalid arguments.
fn core_err(e: privpred_core::CoreError) -> DataError {
    match e {
        privpred_core::CoreError::InvalidArgument {
            name,
            value,
            expected,
        } => DataError::InvalidArgument {
            name,
            value,
            expected,
        },
        other => DataError::Invariant(other.to_string()),
    }
}

fn arg(name: &'static str, value: impl std::fmt::Display, expected: String) -> DataError {
    DataError::InvalidArgument {
        name,
        value: value.to_string(),
        expected,
    }
}

impl PrivateDraft {
    /// Checks the parameters and the declarations against the table's shape (its header and
    /// row count, nothing else of the rows): bad input is refused here, before the draft's
    /// cost is charged. Errors name the parameter and its valid range.
    pub fn plan(&self, header: Option<&[String]>, rows: &[Vec<String>]) -> Result<DraftPlan> {
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(arg(
                "--epsilon",
                self.epsilon,
                "must be a finite number > 0".into(),
            ));
        }
        let delta = self.delta.ok_or_else(|| arg("--delta", "(none)", "required with --epsilon: the category lists and the label's classes are released by a thresholded histogram, which is (epsilon, delta)-DP only with delta > 0 (e.g. --delta 1e-6, below 1/N)".into()))?;
        if !(delta > 0.0 && delta < 1.0) {
            return Err(arg("--delta", delta, "must be in (0, 1)".into()));
        }
        if !(self.quantile > 0.0 && self.quantile < 0.5) {
            return Err(arg(
                "--quantile",
                self.quantile,
                "must be in (0, 0.5): the bounds are the q and 1 - q quantiles".into(),
            ));
        }
        let width = header
            .map(<[String]>::len)
            .or_else(|| rows.first().map(Vec::len))
            .unwrap_or(0);
        if rows.is_empty() || !(2..=MAX_SCHEMA_COLUMNS).contains(&width) {
            return Err(invalid(
                format!("{} rows of {width} columns", rows.len()),
                format!(
                    "at least one data row and 2..={MAX_SCHEMA_COLUMNS} columns (features and a label)"
                ),
            ));
        }
        if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != width) {
            return Err(invalid(
                format!("data row {} with {} columns", i + 1, r.len()),
                format!("{width} columns in every row"),
            ));
        }
        let names = header_names(header, width)?;
        let kinds = self.kinds(&names)?;
        let plan = DraftPlan {
            names,
            kinds,
            header: header.is_some(),
            epsilon: self.epsilon,
            delta,
            quantile: self.quantile,
            seed: self.seed,
        };
        // the thresholds are computable (a tiny ε per column is refused here, not after the charge)
        let (e, d) = plan.list_cost();
        key_threshold(e, d).map_err(|_| {
            arg(
                "--epsilon",
                self.epsilon,
                format!(
                    "too small for {} charged columns: each column's threshold (2m/epsilon)·ln(2k/delta) must stay below 10^18",
                    plan.charged()
                ),
            )
        })?;
        Ok(plan)
    }

    /// Each column's declared type: the label, the named categorical and ignored columns,
    /// numeric for the others.
    fn kinds(&self, names: &[String]) -> Result<Vec<ColumnType>> {
        let find = |n: &str, flag: &'static str| {
            names.iter().position(|c| c == n.trim()).ok_or_else(|| {
                arg(
                    flag,
                    n,
                    format!("a column of the table ({})", show_list(names)),
                )
            })
        };
        let li = match &self.label {
            None => names.len() - 1,
            Some(l) => find(l, "--label")?,
        };
        let mut kinds = vec![ColumnType::Numeric; names.len()];
        kinds[li] = ColumnType::Label;
        for (list, kind, flag) in [
            (&self.categorical, ColumnType::Categorical, "--categorical"),
            (&self.ignore, ColumnType::Ignore, "--ignore"),
        ] {
            for n in list {
                let j = find(n, flag)?;
                if kinds[j] != ColumnType::Numeric {
                    return Err(arg(
                        flag,
                        n,
                        format!(
                            "a column that is not the label and is named once in --categorical and --ignore (`{}` is already {:?})",
                            names[j], kinds[j]
                        )
                        .to_lowercase(),
                    ));
                }
                kinds[j] = kind;
            }
        }
        if !kinds
            .iter()
            .any(|k| matches!(k, ColumnType::Numeric | ColumnType::Categorical))
        {
            return Err(arg(
                "--ignore",
                show_list(&self.ignore),
                "at least one numeric or categorical column left besides the label".into(),
            ));
        }
        Ok(kinds)
    }
}

/// The column names: the header's (non-empty, distinct, not numbers: a first row of numbers
/// is data, not a header) or `column_0`, ….
fn header_names(header: Option<&[String]>, width: usize) -> Result<Vec<String>> {
    let Some(h) = header else {
        return Ok((0..width).map(|i| format!("column_{i}")).collect());
    };
    let names: Vec<String> = h.iter().map(|s| s.trim().to_string()).collect();
    let mut seen = std::collections::HashSet::new();
    for n in &names {
        if n.is_empty() || n.parse::<f64>().is_ok() || !seen.insert(n.as_str()) {
            return Err(arg(
                "header",
                format!("`{n}`"),
                "distinct non-empty column names that are not numbers in the first row (its cells are printed as the names); if the first row is data, give --no-header".into(),
            ));
        }
    }
    Ok(names)
}

impl DraftPlan {
    /// m: the charged columns (numeric, categorical and the label).
    fn charged(&self) -> usize {
        self.kinds
            .iter()
            .filter(|k| **k != ColumnType::Ignore)
            .count()
    }

    /// The (ε, δ) of each categorical column's and the label's histogram (a numeric column
    /// spends the same ε, half on each bound): ε/m and δ/k, rounded down when inexact.
    fn list_cost(&self) -> (f64, f64) {
        let lists = self
            .kinds
            .iter()
            .filter(|k| matches!(k, ColumnType::Categorical | ColumnType::Label))
            .count();
        (
            share(self.epsilon, self.charged()),
            share(self.delta, lists),
        )
    }

    /// The draft's total cost (ε, δ) under replace-one.
    pub fn cost(&self) -> (f64, f64) {
        (self.epsilon, self.delta)
    }

    /// The budget split in words.
    pub fn describe(&self) -> String {
        let (e, d) = self.list_cost();
        format!(
            "epsilon = {}, delta = {} under replace-one, split by basic composition over {} columns: epsilon = {} each (a numeric column's two bounds {} each), delta = {} per category list",
            self.epsilon,
            self.delta,
            self.charged(),
            e,
            e / 2.0,
            d
        )
    }

    /// Runs the draft on the rows `plan` checked, with `rng` (the OS-seeded generator for a
    /// release). The bounds, lists and classes are the mechanisms' outputs only.
    pub fn draft<R: Rng + ?Sized>(&self, rows: &[Vec<String>], rng: &mut R) -> Result<Schema> {
        let (list_eps, list_delta) = self.list_cost();
        let grid = bound_grid();
        let target = quantile_target(rows.len(), self.quantile);
        let mut columns = Vec::with_capacity(self.names.len());
        let mut record = Vec::new();
        for (j, (name, &kind)) in self.names.iter().zip(&self.kinds).enumerate() {
            let cells = rows.iter().map(|r| r[j].trim());
            let mut col = Column {
                name: name.clone(),
                kind,
                min: None,
                max: None,
                out_of_bounds: None,
                categories: None,
                unknown: None,
                classes: None,
            };
            let mut entry = DraftedColumn {
                name: name.clone(),
                mechanism: "thresholded-histogram".into(),
                epsilon: list_eps,
                delta: list_delta,
                threshold: None,
                note: None,
            };
            match kind {
                ColumnType::Ignore => {
                    columns.push(col);
                    continue;
                }
                ColumnType::Numeric => {
                    let mut x: Vec<f64> = cells
                        .filter_map(|c| c.parse::<f64>().ok().filter(|v| v.is_finite()))
                        .collect();
                    x.sort_by(f64::total_cmp);
                    let half = list_eps / 2.0;
                    let lo = private_bound(rng, &x, &grid, target, Side::Lower, half)
                        .map_err(core_err)?;
                    let hi = private_bound(rng, &x, &grid, target, Side::Upper, half)
                        .map_err(core_err)?;
                    let (lo, hi) = widen(lo.min(hi), lo.max(hi), grid.len());
                    col.min = Some(grid[lo]);
                    col.max = Some(grid[hi]);
                    col.out_of_bounds = Some(OutOfBounds::Clip);
                    entry.mechanism = "quantiles".into();
                    entry.delta = 0.0;
                }
                ColumnType::Categorical | ColumnType::Label => {
                    let kept = private_values(rng, cells, list_eps, list_delta)?;
                    entry.threshold = Some(key_threshold(list_eps, list_delta).map_err(core_err)?);
                    if kind == ColumnType::Label {
                        if kept.len() < 2 {
                            return Err(too_few_classes(name, kept.len(), &entry, self.epsilon));
                        }
                        col.classes = Some(kept);
                    } else if kept.is_empty() {
                        col.kind = ColumnType::Ignore;
                        entry.note =
                            Some("no value passed the threshold: the column is ignored".into());
                    } else {
                        col.categories = Some(kept);
                        col.unknown = Some(Unknown::Other);
                    }
                }
            }
            columns.push(col);
            record.push(entry);
        }
        let s = Schema {
            privpred_schema: SCHEMA_VERSION,
            header: self.header,
            columns,
            map: RowMap::default(),
            drafted: Some(Drafted {
                mechanism: "privpred data schema --epsilon: numeric bounds by the exponential mechanism over a public grid of round numbers, category lists and classes by stability-based selection (discrete Laplace counts above a threshold)".into(),
                epsilon: self.epsilon,
                delta: self.delta,
                relation: DRAFT_RELATION.into(),
                composition: "basic".into(),
                quantiles: [self.quantile, 1.0 - self.quantile],
                columns: record,
                seed: self.seed,
                odometer_key: None,
            }),
        };
        s.validate()?;
        Ok(s)
    }
}

/// total/parts, rounded down where the division is inexact: `parts` shares add up to at most
/// `total` exactly (the sign of c·parts − total is that of its fused, once-rounded value).
fn share(total: f64, parts: usize) -> f64 {
    let p = parts as f64;
    let c = total / p;
    if c.mul_add(p, -total) > 0.0 {
        c.next_down()
    } else {
        c
    }
}

/// Grid indices lo ≤ hi made distinct: hi moves to the next candidate (lo to the previous one
/// at the grid's top).
fn widen(lo: usize, hi: usize, len: usize) -> (usize, usize) {
    match (lo == hi, hi + 1 < len) {
        (false, _) => (lo, hi),
        (true, true) => (lo, hi + 1),
        (true, false) => (lo - 1, hi),
    }
}

fn too_few_classes(name: &str, kept: usize, entry: &DraftedColumn, epsilon: f64) -> DataError {
    arg(
        "--epsilon",
        epsilon,
        format!(
            "too small for the label `{name}`: {kept} class(es) passed the threshold of {} rows (noisy count) and a schema needs 2; the draft's cost is spent. Raise --epsilon or --delta, or write the classes into the schema by hand",
            entry.threshold.unwrap_or(0)
        ),
    )
}

/// A cell as the value it is counted as: a number's shortest form, else its trimmed text;
/// `None` for an empty cell.
fn value_key(cell: &str) -> Option<String> {
    if cell.is_empty() {
        return None;
    }
    Some(match cell.parse::<f64>() {
        Ok(v) if v.is_finite() => {
            if v == 0.0 {
                "0".into()
            } else {
                v.to_string()
            }
        }
        _ => cell.to_string(),
    })
}

/// The values of a column kept by stability-based selection, in a data-independent order:
/// by number when every kept value is one, else by text.
fn private_values<'a, R: Rng + ?Sized>(
    rng: &mut R,
    cells: impl Iterator<Item = &'a str>,
    epsilon: f64,
    delta: f64,
) -> Result<Vec<String>> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for k in cells.filter_map(value_key) {
        *counts.entry(k).or_default() += 1;
    }
    let values: Vec<u64> = counts.values().copied().collect();
    let keep = keep_keys(rng, &values, epsilon, delta).map_err(core_err)?;
    let mut kept: Vec<String> = counts
        .into_keys()
        .zip(keep)
        .filter_map(|(k, keep)| keep.then_some(k))
        .collect();
    let nums: Option<Vec<f64>> = kept.iter().map(|k| k.parse::<f64>().ok()).collect();
    if let Some(nums) = nums {
        let mut pairs: Vec<(f64, String)> = nums.into_iter().zip(kept).collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        kept = pairs.into_iter().map(|(_, k)| k).collect();
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use privpred_core::noise::seeded_rng;

    fn opts(epsilon: f64) -> PrivateDraft {
        PrivateDraft {
            epsilon,
            delta: Some(1e-6),
            quantile: DEFAULT_DRAFT_QUANTILE,
            label: None,
            categorical: vec!["colour".into()],
            ignore: vec![],
            seed: None,
        }
    }

    fn header() -> Vec<String> {
        ["age", "colour", "y"].map(String::from).to_vec()
    }

    /// 4000 rows: age 1..=100 (40 each), three frequent colours and one held by a single row,
    /// two frequent classes and one single-row class.
    fn rows() -> Vec<Vec<String>> {
        (0..4000)
            .map(|i| {
                let colour = match i {
                    0 => "violet",
                    _ => ["red", "green", "blue"][i % 3],
                };
                let y = if i == 1 {
                    "maybe"
                } else {
                    ["no", "yes"][i % 2]
                };
                vec![(1 + i % 100).to_string(), colour.into(), y.into()]
            })
            .collect()
    }

    #[test]
    fn a_private_draft_finds_bounds_lists_and_classes_on_easy_data() {
        let (h, rows) = (header(), rows());
        let plan = opts(200.0).plan(Some(&h), &rows).unwrap();
        assert_eq!(plan.cost(), (200.0, 1e-6));
        let s = plan.draft(&rows, &mut seeded_rng(5)).unwrap();
        let age = &s.columns[0];
        // 1 % of 4000 rows from each end: the 40 ones lie in the cell of 1 (below 1.2) and
        // below 2, both as deep; the 40 hundreds above 99, in the cell of 100
        assert!(matches!(age.min, Some(1.0 | 2.0)), "{:?}", age.min);
        assert_eq!(age.max, Some(100.0));
        assert_eq!(age.out_of_bounds, Some(OutOfBounds::Clip));
        let colours = s.columns[1].categories.as_deref().unwrap();
        assert_eq!(colours, ["blue", "green", "red"]);
        assert_eq!(s.columns[1].unknown, Some(Unknown::Other));
        assert_eq!(s.classes(), ["no", "yes"]);
        let d = s.drafted.as_ref().unwrap();
        assert_eq!(
            (d.epsilon, d.delta, d.relation.as_str()),
            (200.0, 1e-6, "replace-one")
        );
        let e: f64 = d.columns.iter().map(|c| c.epsilon).sum();
        assert!((e - 200.0).abs() < 1e-9, "{e}");
        // every row maps (the rare colour into the other slot, ages clipped) except the
        // single-row class, which train refuses
        for r in &rows[2..] {
            s.encode_row(r).unwrap();
        }
        assert!(s.encode_row(&rows[0]).is_ok());
        assert!(s.encode_row(&rows[1]).unwrap_err().contains("maybe"));
        // the schema, with its record, reads back
        let json = serde_json::to_string(&s).unwrap();
        let back = Schema::from_json(&json, std::path::Path::new("d.json")).unwrap();
        assert_eq!(back, s);
        let bad = json.replace("replace-one", "add-remove");
        assert!(Schema::from_json(&bad, std::path::Path::new("d.json")).is_err());
        let bad = json.replace(r#""composition""#, r#""extra":1,"composition""#);
        assert!(Schema::from_json(&bad, std::path::Path::new("d.json")).is_err());
    }

    #[test]
    fn bad_parameters_and_declarations_are_refused_before_any_draw() {
        let (h, rows) = (header(), rows());
        let refused = |o: PrivateDraft, h: Option<&[String]>, want: &str| {
            let e = o.plan(h, &rows).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        };
        refused(opts(0.0), Some(&h), "--epsilon = 0");
        refused(opts(f64::NAN), Some(&h), "--epsilon");
        refused(
            PrivateDraft {
                delta: None,
                ..opts(1.0)
            },
            Some(&h),
            "delta > 0",
        );
        refused(
            PrivateDraft {
                delta: Some(1.0),
                ..opts(1.0)
            },
            Some(&h),
            "(0, 1)",
        );
        refused(
            PrivateDraft {
                quantile: 0.5,
                ..opts(1.0)
            },
            Some(&h),
            "--quantile",
        );
        refused(
            PrivateDraft {
                categorical: vec!["nope".into()],
                ..opts(1.0)
            },
            Some(&h),
            "--categorical = nope",
        );
        refused(
            PrivateDraft {
                ignore: vec!["y".into()],
                ..opts(1.0)
            },
            Some(&h),
            "not the label",
        );
        refused(
            PrivateDraft {
                ignore: vec!["age".into(), "colour".into()],
                categorical: vec![],
                ..opts(1.0)
            },
            Some(&h),
            "at least one numeric or categorical",
        );
        refused(
            PrivateDraft {
                label: Some("z".into()),
                ..opts(1.0)
            },
            Some(&h),
            "--label = z",
        );
        let numbers: Vec<String> = ["1", "red", "no"].map(String::from).to_vec();
        refused(opts(1.0), Some(&numbers), "--no-header");
        refused(opts(1e-300), Some(&h), "too small");
        // without a header the columns are column_0, …
        let o = PrivateDraft {
            categorical: vec!["column_1".into()],
            ..opts(1.0)
        };
        assert!(o.plan(None, &rows).is_ok());
    }

    #[test]
    fn too_few_rows_for_the_budget_give_an_error_naming_the_threshold() {
        let (h, rows) = (header(), rows());
        let e = opts(0.01)
            .plan(Some(&h), &rows[..50])
            .unwrap()
            .draft(&rows[..50], &mut seeded_rng(6))
            .unwrap_err()
            .to_string();
        assert!(e.contains("label `y`") && e.contains("threshold"), "{e}");
    }

    #[test]
    fn odd_cells_neither_panic_nor_reach_the_schema_unprivatised() {
        let odd = [
            "", "inf", "-inf", "NaN", "1e400", "-0", "0.0", "1e-320", "x", " 7 ",
        ];
        let rows: Vec<Vec<String>> = (0..3000)
            .map(|i| {
                let c = odd[i % odd.len()].to_string();
                vec![c.clone(), c, ["a", "b"][i % 2].into()]
            })
            .collect();
        let h: Vec<String> = ["n", "c", "y"].map(String::from).to_vec();
        let o = PrivateDraft {
            categorical: vec!["c".into()],
            ..opts(50.0)
        };
        let s = o
            .plan(Some(&h), &rows)
            .unwrap()
            .draft(&rows, &mut seeded_rng(8))
            .unwrap();
        let (lo, hi) = (s.columns[0].min.unwrap(), s.columns[0].max.unwrap());
        assert!(lo < hi && bound_grid().contains(&lo) && bound_grid().contains(&hi));
        // `-0` and `0.0` are one value, `1e400` is text (not a finite number); no empty value
        let cats = s.columns[1].categories.as_deref().unwrap();
        assert!(
            cats.contains(&"0".to_string()) && !cats.contains(&String::new()),
            "{cats:?}"
        );
        assert!(!cats.contains(&"0.0".to_string()) && cats.contains(&"7".to_string()));
        for r in rows
            .iter()
            .filter(|r| r[0].trim().parse::<f64>().is_ok_and(f64::is_finite))
        {
            s.encode_row(r).unwrap();
        }
    }

    #[test]
    fn the_shares_never_add_up_past_the_total() {
        for total in [1.0, 0.1, 3.0, 7.7, 1e-6, 20.0] {
            for parts in 1..200usize {
                let c = share(total, parts);
                assert!(c > 0.0 && c <= total / parts as f64);
                // exactly: c·parts ≤ total
                assert!(c.mul_add(parts as f64, -total) <= 0.0, "{total} {parts}");
            }
        }
        assert_eq!(share(4.0, 4), 1.0);
    }

    #[test]
    fn the_header_is_what_the_caller_declares() {
        let r = |c: &str| vec![c.to_string()];
        let (h, rows) = declare_header(None, vec![r("a"), r("1")], true);
        assert_eq!((h, rows.len()), (Some(r("a")), 1));
        let (h, rows) = declare_header(Some(r("a")), vec![r("1")], false);
        assert_eq!((h, rows.len()), (None, 2));
    }
}
