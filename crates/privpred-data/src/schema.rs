//! A table's schema: the public facts about its columns that map each row into the unit ball
//! without reading any statistic of the data.
//!
//! A schema file is JSON:
//!
//! ```json
//! {
//!   "privpred_schema": 1,
//!   "header": true,
//!   "columns": [
//!     {"name": "age", "type": "numeric", "min": 0, "max": 120, "out_of_bounds": "clip"},
//!     {"name": "colour", "type": "categorical", "categories": ["red", "green"], "unknown": "other"},
//!     {"name": "id", "type": "ignore"},
//!     {"name": "outcome", "type": "label", "classes": ["no", "yes"]}
//!   ]
//! }
//! ```
//!
//! `columns` lists every column of the file in order; exactly one is the label, whose
//! `classes` list the values the file holds for it (class index = position in the list).
//! A numeric column declares public bounds `min < max` and what to do with a value outside
//! them: `clip` it to the nearest bound, or `refuse` the row (the default). A categorical
//! column declares its public list of categories; a value not in it is an error, or falls
//! into one extra "other" slot when `"unknown": "other"`. `ignore` columns are read and
//! dropped. With `"header": true` the file's first row must name the columns exactly.
//! A schema drafted privately (`privpred data schema FILE --epsilon E --delta D`) also holds
//! `"drafted"`, the record of how its bounds and lists were chosen and what that cost
//! ([`Drafted`]); it is checked when read and does not change how rows are mapped.
//!
//! # The map into the unit ball
//! `"map"` chooses how the feature columns' values become a vector of norm at most 1
//! ([`RowMap`], whose documentation proves the bound): a numeric value is placed within its
//! public bounds on [0, 1] (the default) or [−1, 1], a categorical value becomes its one-hot
//! vector (exactly one 1, over the categories and the "other" slot if declared), and the row
//! is scaled to the unit sphere (the default) or by 1/√m, with a bias coordinate or without
//! (the default). Nothing here depends on the data beyond the row being mapped: the schema's
//! bounds and categories are public by declaration ([`draft`] is the exception, and says so;
//! [`PrivateDraft`] chooses them by differentially private mechanisms).

use crate::error::{DataError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

mod columns;
mod drafting;
mod rowmap;
pub use columns::ColumnValues;
pub use drafting::{
    DEFAULT_DRAFT_QUANTILE, DRAFT_RELATION, DraftPlan, Drafted, DraftedColumn, PrivateDraft,
    declare_header, draft,
};
pub use rowmap::{Range, RowMap};

/// The format version a schema file declares in `privpred_schema`.
pub const SCHEMA_VERSION: u32 = 1;

/// Most columns a schema may declare.
pub const MAX_SCHEMA_COLUMNS: usize = 100_000;

/// Most features a schema may encode (numeric columns plus one-hot slots).
pub const MAX_SCHEMA_FEATURES: usize = 1_000_000;

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// A number with public bounds.
    Numeric,
    /// One of a public list of categories (one-hot).
    Categorical,
    /// The label.
    Label,
    /// Read and dropped.
    Ignore,
}

/// What happens to a numeric value outside its declared bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OutOfBounds {
    /// The row is refused with an error naming the row, the column and the bounds.
    #[default]
    Refuse,
    /// The value is clipped to the nearest bound.
    Clip,
}

/// What happens to a categorical value not in the declared list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Unknown {
    /// The row is refused.
    #[default]
    Error,
    /// The value falls into one extra "other" slot.
    Other,
}

/// One column of a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Column {
    /// The column's name (matched against the header when there is one).
    pub name: String,
    /// What the column holds.
    #[serde(rename = "type")]
    pub kind: ColumnType,
    /// Numeric: the public lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Numeric: the public upper bound (> min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Numeric: `clip` or `refuse` (default) a value outside the bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_bounds: Option<OutOfBounds>,
    /// Categorical: the public categories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<String>>,
    /// Categorical: `error` (default) or `other` for a value not in the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<Unknown>,
    /// Label: the classes, as the file writes them (class index = position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<String>>,
}

/// A table's schema (see the module documentation for the format and the map).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// Format version ([`SCHEMA_VERSION`]).
    pub privpred_schema: u32,
    /// Whether the file's first row is a header naming the columns.
    pub header: bool,
    /// Every column of the file, in order.
    pub columns: Vec<Column>,
    /// How a row is mapped into the unit ball ([`RowMap`]; its default when absent).
    #[serde(default)]
    pub map: RowMap,
    /// How a private draft chose the bounds and lists (`privpred data schema --epsilon`): its
    /// mechanisms and their cost, recorded for the data owner; absent from a schema written
    /// by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafted: Option<Drafted>,
}

fn invalid(value: String, expected: impl Into<String>) -> DataError {
    DataError::InvalidArgument {
        name: "schema",
        value,
        expected: expected.into(),
    }
}

/// Matches a cell against a list of public values: exactly, or as the same number
/// (`1` and `1.0`), so a label or category written by another tool still matches.
fn position_of(list: &[String], cell: &str) -> Option<usize> {
    if let Some(i) = list.iter().position(|c| c == cell) {
        return Some(i);
    }
    let v = cell.parse::<f64>().ok().filter(|v| v.is_finite())?;
    list.iter()
        .position(|c| c.trim().parse::<f64>().ok() == Some(v))
}

/// A short list of values for an error message (at most ten, then a count).
fn show_list(list: &[String]) -> String {
    let mut s: Vec<String> = list.iter().take(10).map(|c| format!("`{c}`")).collect();
    if list.len() > 10 {
        s.push(format!("… ({} in all)", list.len()));
    }
    s.join(", ")
}

impl Schema {
    /// Parses and checks a schema from JSON text; `path` names the source in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Schema> {
        let s: Schema = serde_json::from_str(text).map_err(|e| DataError::Format {
            path: path.to_path_buf(),
            reason: format!("not a privpred schema ({e}); see docs/tables.md for the format"),
        })?;
        s.validate().map_err(|e| DataError::Format {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(s)
    }

    /// Reads and checks a schema file.
    pub fn read(path: &Path) -> Result<Schema> {
        let meta = std::fs::metadata(path).map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if meta.len() > 64 << 20 {
            return Err(DataError::Format {
                path: path.to_path_buf(),
                reason: "larger than 64 MiB: not a schema file".into(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Schema::from_json(&text, path)
    }

    /// Checks the schema: the version, at most [`MAX_SCHEMA_COLUMNS`] columns with distinct
    /// non-empty names, exactly one label with 2..=[`crate::limits::MAX_CLASSES`] distinct
    /// classes, at least one feature column, finite bounds `min < max` with a finite width
    /// on every numeric column, a non-empty list of distinct categories on every categorical
    /// one, no field that does not belong to the column's type, and at most
    /// [`MAX_SCHEMA_FEATURES`] encoded features.
    pub fn validate(&self) -> Result<()> {
        if self.privpred_schema != SCHEMA_VERSION {
            return Err(invalid(
                format!("privpred_schema {}", self.privpred_schema),
                format!("version {SCHEMA_VERSION}"),
            ));
        }
        if self.columns.len() > MAX_SCHEMA_COLUMNS {
            return Err(invalid(
                format!("{} columns", self.columns.len()),
                format!("at most {MAX_SCHEMA_COLUMNS} columns"),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for c in &self.columns {
            if c.name.is_empty() {
                return Err(invalid(
                    "a column without a name".into(),
                    "a non-empty name for every column",
                ));
            }
            if !seen.insert(c.name.as_str()) {
                return Err(invalid(
                    format!("column `{}` twice", c.name),
                    "distinct column names",
                ));
            }
            c.validate()?;
        }
        let labels = self
            .columns
            .iter()
            .filter(|c| c.kind == ColumnType::Label)
            .count();
        if labels != 1 {
            return Err(invalid(
                format!("{labels} label columns"),
                "exactly one column of type `label`",
            ));
        }
        if self.feature_columns() == 0 {
            return Err(invalid(
                "no numeric or categorical column".into(),
                "at least one feature column",
            ));
        }
        if let Some(d) = &self.drafted {
            d.validate()?;
        }
        let d = self.feature_dim();
        if d > MAX_SCHEMA_FEATURES {
            return Err(invalid(
                format!("{d} encoded features"),
                format!("at most {MAX_SCHEMA_FEATURES}"),
            ));
        }
        Ok(())
    }

    /// The label column's index among the file's columns.
    pub fn label_index(&self) -> usize {
        self.columns
            .iter()
            .position(|c| c.kind == ColumnType::Label)
            .unwrap_or(0)
    }

    /// The label's classes.
    pub fn classes(&self) -> &[String] {
        self.columns[self.label_index()]
            .classes
            .as_deref()
            .unwrap_or_default()
    }

    /// m: the number of numeric and categorical columns.
    pub fn feature_columns(&self) -> usize {
        self.columns
            .iter()
            .filter(|c| matches!(c.kind, ColumnType::Numeric | ColumnType::Categorical))
            .count()
    }

    /// The encoded feature dimension: one per numeric column, one per category (and "other"
    /// slot) of each categorical column.
    pub fn feature_dim(&self) -> usize {
        self.columns.iter().map(Column::width).sum::<usize>() + self.map.extra_dims()
    }

    /// The column names.
    pub fn names(&self) -> Vec<&str> {
        self.columns.iter().map(|c| c.name.as_str()).collect()
    }

    /// Checks a header row against the declared names (the first mismatch is named).
    pub fn check_header(&self, names: &[String]) -> std::result::Result<(), String> {
        if names.len() != self.columns.len() {
            return Err(format!(
                "the header has {} columns, the schema declares {} ({})",
                names.len(),
                self.columns.len(),
                show_list(
                    &self
                        .columns
                        .iter()
                        .map(|c| c.name.clone())
                        .collect::<Vec<_>>()
                )
            ));
        }
        for (i, (n, c)) in names.iter().zip(&self.columns).enumerate() {
            if n.trim() != c.name {
                return Err(format!(
                    "column {i} of the header is `{n}`, the schema declares `{}`",
                    c.name
                ));
            }
        }
        Ok(())
    }

    /// The encoded features of one row of the file (every declared column, in order) and its
    /// class index. `Err` names the column and what is wrong (the caller adds the row).
    pub fn encode_row<S: AsRef<str>>(
        &self,
        cells: &[S],
    ) -> std::result::Result<(Vec<f32>, u32), String> {
        if cells.len() != self.columns.len() {
            return Err(format!(
                "{} columns, the schema declares {}",
                cells.len(),
                self.columns.len()
            ));
        }
        let mut v = Vec::with_capacity(self.feature_dim());
        let mut label = 0u32;
        for (c, cell) in self.columns.iter().zip(cells) {
            let cell = cell.as_ref().trim();
            if c.kind == ColumnType::Label {
                let classes = c.classes.as_deref().unwrap_or_default();
                label = position_of(classes, cell).ok_or_else(|| {
                    format!(
                        "column `{}`: label `{}` is not one of the declared classes ({})",
                        c.name,
                        cell.escape_debug(),
                        show_list(classes)
                    )
                })? as u32;
            } else {
                c.encode(cell, &self.map, &mut v)?;
            }
        }
        Ok((self.finish(&v), label))
    }

    /// The encoded features of one query row: the file's columns without the label, or all of
    /// them (the label's cell is then ignored). `Err` says what is wrong.
    pub fn encode_query<S: AsRef<str>>(
        &self,
        cells: &[S],
    ) -> std::result::Result<Vec<f32>, String> {
        let li = self.label_index();
        let all = self.columns.len();
        let with_label = match cells.len() {
            n if n == all => true,
            n if n + 1 == all => false,
            n => {
                // one cell holding another delimiter: the row was not split at all
                let hint = match cells.first().map(|c| c.as_ref()) {
                    Some(c) if n == 1 && (c.contains(';') || c.contains('\t')) => {
                        "; the row reads as one value because it is not comma-separated (it holds `;` or a tab): a table's rows are separated by commas"
                    }
                    _ => "",
                };
                let values = if n == 1 { "value" } else { "values" };
                return Err(format!(
                    "{n} {values}; the model's schema takes {} (every column but the label `{}`: {}) or all {all} columns{hint}",
                    all - 1,
                    self.columns[li].name,
                    show_list(
                        &self
                            .columns
                            .iter()
                            .filter(|c| c.kind != ColumnType::Label)
                            .map(|c| c.name.clone())
                            .collect::<Vec<_>>()
                    )
                ));
            }
        };
        let mut v = Vec::with_capacity(self.feature_dim());
        let mut k = 0;
        for c in &self.columns {
            if c.kind == ColumnType::Label {
                if with_label {
                    k += 1;
                }
                continue;
            }
            c.encode(cells[k].as_ref().trim(), &self.map, &mut v)?;
            k += 1;
        }
        Ok(self.finish(&v))
    }

    /// The bytes a query row (every column but the label) may take as JSON, for a server's
    /// default body limit: 32 per numeric column, 64 per ignored column, and per categorical
    /// column twice its longest declared category plus 8 (quotes, escapes, separator), at
    /// least 32.
    pub fn query_row_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(|c| match c.kind {
                ColumnType::Numeric => 32,
                ColumnType::Ignore => 64,
                ColumnType::Label => 0,
                ColumnType::Categorical => {
                    let longest = c
                        .categories
                        .as_deref()
                        .unwrap_or_default()
                        .iter()
                        .map(String::len)
                        .max()
                        .unwrap_or(0);
                    longest.saturating_mul(2).saturating_add(8).max(32)
                }
            })
            .fold(0usize, usize::saturating_add)
    }

    /// The mapped row of a row's column entries `v` ([`RowMap::finish`]).
    fn finish(&self, v: &[f64]) -> Vec<f32> {
        let mut out = Vec::with_capacity(v.len() + self.map.extra_dims());
        self.map.finish(self.feature_columns(), v, &mut out);
        out
    }

    /// The mapping in words, for the recorded preprocessing steps.
    pub fn describe(&self) -> String {
        let num = self
            .columns
            .iter()
            .filter(|c| c.kind == ColumnType::Numeric)
            .count();
        let cat = self.feature_columns() - num;
        format!(
            "schema: {num} numeric and {cat} categorical columns (one-hot over their public categories); {} (‖x‖ ≤ 1; data-independent); {} features",
            self.map.describe(self.feature_columns()),
            self.feature_dim()
        )
    }
}

impl Column {
    /// The encoded width of the column.
    fn width(&self) -> usize {
        match self.kind {
            ColumnType::Numeric => 1,
            ColumnType::Categorical => {
                self.categories.as_ref().map_or(0, Vec::len)
                    + usize::from(self.unknown == Some(Unknown::Other))
            }
            ColumnType::Label | ColumnType::Ignore => 0,
        }
    }

    fn validate(&self) -> Result<()> {
        let name = &self.name;
        let stray = |field: &str, present: bool| -> Result<()> {
            if present {
                Err(invalid(
                    format!("column `{name}` ({:?}) with `{field}`", self.kind).to_lowercase(),
                    format!(
                        "`{field}` only on the column types it belongs to (see docs/tables.md)"
                    ),
                ))
            } else {
                Ok(())
            }
        };
        let numeric = self.kind == ColumnType::Numeric;
        let categorical = self.kind == ColumnType::Categorical;
        stray("min", !numeric && self.min.is_some())?;
        stray("max", !numeric && self.max.is_some())?;
        stray("out_of_bounds", !numeric && self.out_of_bounds.is_some())?;
        stray("categories", !categorical && self.categories.is_some())?;
        stray("unknown", !categorical && self.unknown.is_some())?;
        stray(
            "classes",
            self.kind != ColumnType::Label && self.classes.is_some(),
        )?;
        match self.kind {
            ColumnType::Numeric => {
                let (Some(lo), Some(hi)) = (self.min, self.max) else {
                    return Err(invalid(
                        format!("numeric column `{name}` without min and max"),
                        "public bounds `min` < `max` (finite numbers) on every numeric column",
                    ));
                };
                if !(lo.is_finite() && hi.is_finite() && lo < hi && (hi - lo).is_finite()) {
                    return Err(invalid(
                        format!("bounds [{}, {}] of column `{name}`", num(lo), num(hi)),
                        "finite numbers with min < max",
                    ));
                }
            }
            ColumnType::Categorical => {
                let cats = self.categories.as_deref().unwrap_or_default();
                check_list(name, "categories", cats, 1)?;
            }
            ColumnType::Label => {
                let classes = self.classes.as_deref().unwrap_or_default();
                check_list(name, "classes", classes, 2)?;
                if classes.len() > crate::limits::MAX_CLASSES {
                    return Err(invalid(
                        format!("{} classes in column `{name}`", classes.len()),
                        format!(
                            "at most {} (privpred_data::limits::MAX_CLASSES)",
                            crate::limits::MAX_CLASSES
                        ),
                    ));
                }
            }
            ColumnType::Ignore => {}
        }
        Ok(())
    }

    /// Appends the column's entries for `cell` (before the row's scaling, [`RowMap::finish`]).
    fn encode(
        &self,
        cell: &str,
        map: &RowMap,
        out: &mut Vec<f64>,
    ) -> std::result::Result<(), String> {
        let name = &self.name;
        match self.kind {
            ColumnType::Numeric => {
                if cell.is_empty() {
                    return Err(format!("column `{name}`: missing value"));
                }
                let x = cell.parse::<f64>().unwrap_or(f64::NAN);
                if !x.is_finite() {
                    return Err(format!(
                        "column `{name}`: `{}` is not a finite number",
                        cell.escape_debug()
                    ));
                }
                self.encode_number(x, map, out)?;
            }
            ColumnType::Categorical => {
                let cats = self.categories.as_deref().unwrap_or_default();
                let other = self.unknown == Some(Unknown::Other);
                let slot = match position_of(cats, cell) {
                    Some(i) => i,
                    None if other => cats.len(),
                    None => {
                        return Err(format!(
                            "column `{name}`: unknown category `{}` (declared: {}; add it to the list or declare \"unknown\": \"other\")",
                            cell.escape_debug(),
                            show_list(cats)
                        ));
                    }
                };
                let start = out.len();
                out.resize(start + cats.len() + usize::from(other), 0.0);
                out[start + slot] = 1.0;
            }
            ColumnType::Label | ColumnType::Ignore => {}
        }
        Ok(())
    }

    /// A numeric column's finite value `x`: inside the declared bounds, clipped into them
    /// (`out_of_bounds: clip`) or refused, then mapped by the row map.
    fn encode_number(
        &self,
        x: f64,
        map: &RowMap,
        out: &mut Vec<f64>,
    ) -> std::result::Result<(), String> {
        let (lo, hi) = (self.min.unwrap_or(0.0), self.max.unwrap_or(1.0));
        let x = if (lo..=hi).contains(&x) {
            x
        } else if self.out_of_bounds == Some(OutOfBounds::Clip) {
            x.clamp(lo, hi)
        } else {
            return Err(format!(
                "column `{}`: value {} outside the declared bounds [{}, {}] (out_of_bounds: refuse; declare \"clip\" to clip it or widen the bounds)",
                self.name,
                num(x),
                num(lo),
                num(hi)
            ));
        };
        out.push(map.numeric(x, lo, hi));
        Ok(())
    }
}

/// A list of at least `min` distinct non-empty values.
fn check_list(name: &str, what: &str, list: &[String], min: usize) -> Result<()> {
    if list.len() < min {
        return Err(invalid(
            format!("column `{name}` with {} {what}", list.len()),
            format!("at least {min} {what}"),
        ));
    }
    for (i, v) in list.iter().enumerate() {
        if v.trim().is_empty() {
            return Err(invalid(
                format!("{what} `{v}` of column `{name}` (empty)"),
                format!("distinct non-empty {what}"),
            ));
        }
        // a cell is matched exactly or as the same number (`1` and `1.0`): two values that
        // match each other would make which one a cell means depend on their order
        let earlier = &list[..i];
        if let Some(j) = position_of(earlier, v.trim())
            .or_else(|| earlier.iter().position(|e| e.trim() == v.trim()))
        {
            return Err(invalid(
                format!(
                    "{what} `{v}` of column `{name}` (repeated: it matches `{}`, listed before it, as the same text or the same number)",
                    list[j]
                ),
                format!("distinct non-empty {what}, no two the same number"),
            ));
        }
    }
    Ok(())
}

/// A number for a message: as written when short, else in exponent form (`-1.7e308`, not
/// its 309 digits).
fn num(v: f64) -> String {
    let s = v.to_string();
    if s.len() > 20 { format!("{v:e}") } else { s }
}

/// `v` as the f32 nearest to it on the side of zero (|result| ≤ |v|).
fn toward_zero(v: f64) -> f32 {
    let f = v as f32;
    if (f as f64).abs() > v.abs() {
        if f > 0.0 { f.next_down() } else { f.next_up() }
    } else {
        f
    }
}

/// What a table without a schema is told.
pub const NEEDS_SCHEMA: &str = "a schema for this table: `--schema FILE`, a JSON file that declares the label column and its classes, each numeric column's public bounds and each categorical column's public categories (format in docs/tables.md); `privpred data schema FILE` drafts one from the file for you to check. A CSV of pixel intensities 0..255 is read as an image set with `csv-pixels:PATH`";

/// The warning printed with every drafted schema.
pub const DRAFT_WARNING: &str = "WARNING: this schema was drafted from the data itself. Its bounds and category lists are statistics of that data, read without noise: they are NOT private. Replace them with public knowledge (units, physical ranges, published category lists, rounded-out limits) before training a private model on private data.";

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::from_json(
            r#"{"privpred_schema": 1, "header": true, "columns": [
                {"name": "a", "type": "numeric", "min": 0, "max": 10, "out_of_bounds": "clip"},
                {"name": "b", "type": "numeric", "min": -1, "max": 1},
                {"name": "c", "type": "categorical", "categories": ["x", "y"], "unknown": "other"},
                {"name": "d", "type": "ignore"},
                {"name": "y", "type": "label", "classes": ["no", "yes"]}],
               "map": {"range": "centered", "sphere": false, "bias": false}}"#,
            Path::new("s.json"),
        )
        .unwrap()
    }

    fn norm(v: &[f32]) -> f64 {
        v.iter()
            .map(|&x| (x as f64) * (x as f64))
            .sum::<f64>()
            .sqrt()
    }

    #[test]
    fn rows_map_into_the_unit_ball_through_the_declared_bounds() {
        let s = schema();
        assert_eq!(s.feature_dim(), 5);
        let r3 = 1.0 / 3f64.sqrt();
        let (x, y) = s.encode_row(&["5", "1", "y", "ignored", "yes"]).unwrap();
        assert_eq!(y, 1);
        let want = [0.0, r3, 0.0, r3, 0.0];
        for (a, b) in x.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-7, "{x:?}");
        }
        // the corners reach norm 1 and never pass it; clipping holds values at the bound
        let (x, _) = s.encode_row(&["1e9", "-1", "zzz", "", "no"]).unwrap();
        assert_eq!(x[4] as f64, toward_zero(r3) as f64, "unknown → other slot");
        assert!(norm(&x) <= 1.0 && norm(&x) > 1.0 - 1e-6, "{}", norm(&x));
        assert_eq!(x[0], toward_zero(r3));
        // queries with or without the label column
        assert_eq!(s.encode_query(&["1e9", "-1", "zzz", "q"]).unwrap(), x);
        assert_eq!(
            s.encode_query(&["1e9", "-1", "zzz", "q", "anything"])
                .unwrap(),
            x
        );
    }

    #[test]
    fn the_unit_sphere_map_places_values_on_0_1_scales_rows_to_the_sphere_and_adds_a_bias() {
        let mut s = schema();
        s.map = RowMap {
            bias: true,
            ..RowMap::default()
        };
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""map":{"range":"unit","sphere":true,"bias":true}"#));
        // three feature columns and the bias: 6 features
        assert_eq!(s.feature_dim(), 6);
        let (x, _) = s.encode_row(&["5", "1", "y", "", "yes"]).unwrap();
        // column entries (0.5, 1, one-hot y) of norm 1.5, scaled to √(3/4); bias 1/2
        let k = (0.75f64).sqrt() / 1.5;
        let want = [0.5 * k, k, 0.0, k, 0.0, 0.5];
        for (a, b) in x.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-7, "{x:?}");
        }
        assert!(norm(&x) <= 1.0 && norm(&x) > 1.0 - 1e-6);
        assert!(s.describe().contains("[0, 1]"), "{}", s.describe());
        // an unknown field of the map is refused
        let bad = json.replace(r#""bias":true"#, r#""bias":true,"scale":2"#);
        assert!(Schema::from_json(&bad, Path::new("s.json")).is_err());
        // the default: the same without the bias coordinate
        s.map = RowMap::default();
        assert_eq!(s.feature_dim(), 5);
        let (x, _) = s.encode_row(&["5", "1", "y", "", "yes"]).unwrap();
        let k = 1.0 / 1.5;
        for (a, b) in x.iter().zip([0.5 * k, k, 0.0, k, 0.0]) {
            assert!((*a as f64 - b).abs() < 1e-7, "{x:?}");
        }
    }

    #[test]
    fn errors_name_the_column_and_the_rule() {
        let s = schema();
        let e = s.encode_row(&["5", "2", "x", "", "no"]).unwrap_err();
        assert!(
            e.contains("`b`") && e.contains("[-1, 1]") && e.contains("refuse"),
            "{e}"
        );
        let e = s.encode_row(&["5", "0", "x", "", "maybe"]).unwrap_err();
        assert!(e.contains("`y`") && e.contains("maybe"), "{e}");
        let e = s.encode_row(&["5", "0", "x", "no"]).unwrap_err();
        assert!(e.contains("4 columns") && e.contains("5"), "{e}");
        let e = s.encode_row(&["", "0", "x", "", "no"]).unwrap_err();
        assert!(e.contains("missing"), "{e}");
        let e = s.encode_query(&["1", "2"]).unwrap_err();
        assert!(e.contains("2 values"), "{e}");
        let mut strict = s.clone();
        strict.columns[2].unknown = None;
        let e = strict.encode_row(&["5", "0", "z", "", "no"]).unwrap_err();
        assert!(
            e.contains("unknown category `z`") && e.contains("`x`"),
            "{e}"
        );
        // a number written another way still matches
        assert_eq!(position_of(&["0".into(), "1".into()], "1.0"), Some(1));
    }

    #[test]
    fn bad_schemas_are_refused_with_what_is_wrong() {
        let base = serde_json::to_value(schema()).unwrap();
        let bad = |edit: &dyn Fn(&mut serde_json::Value), want: &str| {
            let mut v = base.clone();
            edit(&mut v);
            let e = Schema::from_json(&v.to_string(), Path::new("s.json"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{want}: {e}");
        };
        bad(&|v| v["columns"][0]["min"] = 10.into(), "min < max");
        bad(
            &|v| v["columns"][0]["max"] = serde_json::Value::Null,
            "without min and max",
        );
        bad(
            &|v| v["columns"][2]["categories"] = serde_json::json!([]),
            "at least 1 categories",
        );
        bad(
            &|v| v["columns"][2]["categories"] = serde_json::json!(["x", "x"]),
            "repeated",
        );
        // classes that match each other as numbers: a cell `1` would mean either
        bad(
            &|v| v["columns"][4]["classes"] = serde_json::json!(["0", "1", "1.0"]),
            "`1.0` of column `y` (repeated: it matches `1`",
        );
        bad(
            &|v| v["columns"][4]["classes"] = serde_json::json!(["a"]),
            "at least 2 classes",
        );
        bad(&|v| v["columns"][4]["type"] = "ignore".into(), "classes");
        bad(&|v| v["columns"][1]["name"] = "a".into(), "twice");
        bad(&|v| v["privpred_schema"] = 2.into(), "version 1");
        bad(
            &|v| v["columns"][0]["out_of_bound"] = "clip".into(),
            "unknown field",
        );
        bad(
            &|v| v["columns"][1]["categories"] = serde_json::json!(["q"]),
            "`categories` only",
        );
    }

    #[test]
    fn a_draft_reads_bounds_and_categories_from_the_rows() {
        let rows: Vec<Vec<String>> = [["1.5", "red", "0"], ["-2", "blue", "1"], ["3", "red", "1"]]
            .iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect();
        let h: Vec<String> = ["a", "c", "y"].iter().map(|s| s.to_string()).collect();
        let s = draft(&rows, Some(&h), None).unwrap();
        assert_eq!(
            (s.columns[0].min, s.columns[0].max),
            (Some(-2.0), Some(3.0))
        );
        assert_eq!(s.columns[1].categories.as_deref().unwrap(), ["blue", "red"]);
        assert_eq!(s.classes(), ["0", "1"]);
        for r in &rows {
            assert!(norm(&s.encode_row(r).unwrap().0) <= 1.0);
        }
        assert!(draft(&rows, Some(&h), Some("nope")).is_err());
    }
}
