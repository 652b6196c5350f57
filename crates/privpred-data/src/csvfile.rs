//! CSV reader for users' tabular data: one example per row, numeric features and an integer
//! label column (default: the last), optional header (auto-detected: a first row is a header
//! only if every cell is a column name, see [`parse_csv`]; a first row mixing numbers and text
//! is an error). Plain or gzip-compressed. Ragged rows, non-numeric fields,
//! NaN/inf and non-integer or negative labels are errors naming the file, row and column.

use crate::error::{DataError, Result};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;

/// Which column holds the label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum LabelColumn {
    /// The first column.
    First,
    /// The last column (default).
    #[default]
    Last,
    /// A 0-based column index.
    Index(usize),
    /// A header name (needs a header row).
    Name(String),
}

impl std::str::FromStr for LabelColumn {
    type Err = DataError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "first" => LabelColumn::First,
            "last" => LabelColumn::Last,
            _ => match s.parse::<usize>() {
                Ok(i) => LabelColumn::Index(i),
                Err(_) if !s.is_empty() => LabelColumn::Name(s.to_string()),
                Err(_) => {
                    return Err(DataError::InvalidArgument {
                        name: "label column",
                        value: s.into(),
                        expected: "first, last, a 0-based index or a header name".into(),
                    });
                }
            },
        })
    }
}

/// CSV reading options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CsvOptions {
    /// The label column.
    pub label: LabelColumn,
    /// `Some(true)`: first row is a header; `Some(false)`: no header; `None`: auto-detect.
    pub header: Option<bool>,
    /// Field delimiter.
    pub delimiter: u8,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            label: LabelColumn::Last,
            header: None,
            delimiter: b',',
        }
    }
}

/// A parsed CSV table.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvTable {
    /// Feature dimension (columns minus the label).
    pub d: usize,
    /// Row-major features.
    pub features: Vec<f32>,
    /// Labels.
    pub labels: Vec<u32>,
    /// The header, if there was one.
    pub header: Option<Vec<String>>,
}

fn fmt_err(path: &Path, reason: String) -> DataError {
    DataError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

fn parse_num(field: &[u8]) -> Option<f64> {
    std::str::from_utf8(field).ok()?.trim().parse::<f64>().ok()
}

/// The header rule of auto-detection: the first row is a header only if **every** cell is a
/// column name — non-empty UTF-8 text without control characters that does not parse as a
/// number — or if it is pandas' default header (the feature columns named `0, 1, 2, …` in
/// order and one named column). A first row of numbers is data. A first row that mixes the two (a text cell or a
/// NUL byte in a data row, a text label) is neither and is refused with an error naming the
/// cell, so a corrupt first row is never silently dropped as a header.
fn detect_header(rec: &csv::ByteRecord) -> std::result::Result<bool, String> {
    let name_problem = |f: &[u8]| -> Option<&'static str> {
        match std::str::from_utf8(f) {
            Err(_) => Some("is not UTF-8 text"),
            Ok("") => Some("is empty"),
            Ok(t) if t.chars().any(char::is_control) => Some("holds a control character"),
            Ok(_) => None,
        }
    };
    let numeric: Vec<bool> = rec.iter().map(|f| parse_num(f).is_some()).collect();
    if numeric.iter().all(|&n| n) {
        return Ok(false);
    }
    let show = |f: &[u8]| String::from_utf8_lossy(f).escape_debug().to_string();
    // pandas' default column names: the feature columns are 0, 1, 2, … in order and one
    // column (the label's) has a name.
    let names: Vec<usize> = (0..numeric.len()).filter(|&c| !numeric[c]).collect();
    if let [label] = names[..]
        && name_problem(rec.get(label).unwrap_or_default()).is_none()
        && rec
            .iter()
            .enumerate()
            .filter(|(c, _)| *c != label)
            .enumerate()
            .all(|(k, (_, f))| std::str::from_utf8(f).ok() == Some(k.to_string().as_str()))
    {
        return Ok(true);
    }
    if let Some(c) = numeric.iter().position(|&n| n) {
        let t = numeric.iter().position(|&n| !n).unwrap_or(0);
        let f = rec.get(t).unwrap_or_default();
        return Err(format!(
            "the first row mixes numbers (column {c}) and non-numbers (column {t}: `{}`): it is neither a header (every cell a column name) nor a data row (every cell a number)",
            show(f)
        ));
    }
    for (c, f) in rec.iter().enumerate() {
        if let Some(p) = name_problem(f) {
            return Err(format!(
                "column {c} of the first row (`{}`) {p}: not a column name, so the row is neither a header nor a data row",
                show(f)
            ));
        }
    }
    Ok(true)
}

/// Reads a CSV file (plain or gzip).
pub fn read_csv(path: &Path, opts: &CsvOptions) -> Result<CsvTable> {
    let r = crate::idx::open_maybe_gz(path)?;
    parse_csv(r, path, opts)
}

/// Parses CSV from a reader; `path` names the source in errors. Never panics. With
/// `header: None` the first row is a header only if every cell is non-empty text without
/// control characters that is not a number; a first row mixing numbers and other cells is an
/// error naming the line and column (never silently dropped).
///
/// Stages: the first non-blank row fixes the layout (`first_row_layout`: header or data,
/// width, label column), then every data row is checked and split into features and a label
/// (`RowSink::push`).
pub fn parse_csv<R: Read>(r: R, path: &Path, opts: &CsvOptions) -> Result<CsvTable> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(opts.delimiter)
        .trim(csv::Trim::All)
        .from_reader(r);
    let mut rec = csv::ByteRecord::new();
    let mut header: Option<Vec<String>> = None;
    let mut layout: Option<Layout> = None;
    let mut sink = RowSink {
        path,
        delimiter: opts.delimiter,
        features: Vec::new(),
        labels: Vec::new(),
    };
    loop {
        let more = rdr
            .read_byte_record(&mut rec)
            .map_err(|e| fmt_err(path, format!("malformed CSV: {e}")))?;
        if !more {
            break;
        }
        let line = rec.position().map(|p| p.line()).unwrap_or(0);
        if rec.len() == 1 && rec.get(0).is_some_and(|f| f.is_empty()) {
            continue; // blank line
        }
        let row_layout = match layout {
            Some(l) => l,
            None => {
                let (first, names) = first_row_layout(&rec, line, path, opts)?;
                layout = Some(first);
                if let Some(names) = names {
                    header = Some(names);
                    continue;
                }
                first
            }
        };
        sink.push(&rec, line, &row_layout)?;
    }
    if sink.labels.is_empty() {
        return Err(fmt_err(path, "empty dataset: no data rows".into()));
    }
    let d = layout.map_or(1, |l| l.width) - 1;
    Ok(CsvTable {
        d,
        features: sink.features,
        labels: sink.labels,
        header,
    })
}

/// What the first row fixes for the whole file: the number of columns and the label's index.
#[derive(Debug, Clone, Copy)]
struct Layout {
    width: usize,
    label_idx: usize,
}

/// Reads the first non-blank row: whether it is a header (`opts.header`, else
/// [`detect_header`]), the width (at least a feature and a label) and the label column.
/// Returns the layout and, for a header row, its column names.
fn first_row_layout(
    rec: &csv::ByteRecord,
    line: u64,
    path: &Path,
    opts: &CsvOptions,
) -> Result<(Layout, Option<Vec<String>>)> {
    if let Some(reason) = rec
        .iter()
        .find_map(|f| foreign_delimiter(f, opts.delimiter))
    {
        return Err(fmt_err(path, format!("line {line}: {reason}")));
    }
    let is_header = match opts.header {
        Some(h) => h,
        None => {
            detect_header(rec).map_err(|reason| fmt_err(path, format!("line {line}: {reason}")))?
        }
    };
    let names: Vec<String> = rec
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    let w = rec.len();
    if w < 2 {
        return Err(fmt_err(
            path,
            format!("line {line}: {w} column(s); need at least one feature and a label"),
        ));
    }
    let label_idx = label_index(&opts.label, &names, is_header, path)?;
    let layout = Layout {
        width: w,
        label_idx,
    };
    Ok((layout, is_header.then_some(names)))
}

/// The index of the label column among the first row's `names` (`names.len()` ≥ 2 columns);
/// a column given by name needs a header row.
fn label_index(
    label: &LabelColumn,
    names: &[String],
    is_header: bool,
    path: &Path,
) -> Result<usize> {
    let w = names.len();
    match label {
        LabelColumn::First => Ok(0),
        LabelColumn::Last => Ok(w - 1),
        LabelColumn::Index(i) if *i < w => Ok(*i),
        LabelColumn::Index(i) => Err(fmt_err(
            path,
            format!(
                "label column {i} does not exist (the file has {w} columns, 0..{})",
                w - 1
            ),
        )),
        LabelColumn::Name(n) => {
            if !is_header {
                return Err(fmt_err(
                    path,
                    format!("label column `{n}` named but the file has no header row"),
                ));
            }
            names.iter().position(|x| x == n).ok_or_else(|| {
                fmt_err(
                    path,
                    format!("no column named `{n}` in the header ({})", names.join(",")),
                )
            })
        }
    }
}

/// The features and labels of the data rows read so far.
struct RowSink<'a> {
    path: &'a Path,
    delimiter: u8,
    features: Vec<f32>,
    labels: Vec<u32>,
}

impl RowSink<'_> {
    /// Checks one data row (the layout's width, finite numbers, an integer class index ≥ 0
    /// in the label column, features that fit an f32) and appends it.
    fn push(&mut self, rec: &csv::ByteRecord, line: u64, layout: &Layout) -> Result<()> {
        let (path, w) = (self.path, layout.width);
        if let Some(reason) = rec
            .iter()
            .find_map(|f| foreign_delimiter(f, self.delimiter))
        {
            return Err(fmt_err(path, format!("line {line}: {reason}")));
        }
        if rec.len() != w {
            return Err(fmt_err(
                path,
                format!(
                    "line {line}: ragged row with {} fields, expected {w}",
                    rec.len()
                ),
            ));
        }
        for (c, f) in rec.iter().enumerate() {
            let v = parse_cell(f, line, c, path, self.delimiter)?;
            if c == layout.label_idx {
                if v < 0.0 || v.fract() != 0.0 || v > u32::MAX as f64 {
                    return Err(fmt_err(
                        path,
                        format!(
                            "line {line}, column {c}: label `{}` is not a class index (an integer ≥ 0)",
                            String::from_utf8_lossy(f)
                        ),
                    ));
                }
                self.labels.push(v as u32);
            } else {
                let x = v as f32;
                if !x.is_finite() {
                    return Err(fmt_err(
                        path,
                        format!("line {line}, column {c}: value {v} overflows f32"),
                    ));
                }
                self.features.push(x);
            }
        }
        Ok(())
    }
}

/// Why a cell holds another delimiter than the file's (`None` when it does not): a
/// tab- or semicolon-separated file, or a row mixing delimiters, is named as such instead of
/// as a cell that is not a number or a name with a control character.
fn foreign_delimiter(f: &[u8], delimiter: u8) -> Option<String> {
    let (_, name) = [(b'\t', "tab"), (b';', "semicolon"), (b',', "comma")]
        .into_iter()
        .find(|&(d, _)| d != delimiter && f.contains(&d))?;
    Some(format!(
        "`{}` holds a {name}: the columns must be separated by `{}` only (a {name}-separated file or a row mixing delimiters is not read)",
        String::from_utf8_lossy(f).escape_debug(),
        (delimiter as char).escape_debug()
    ))
}

/// One cell as a finite number (line and column named in the error).
fn parse_cell(f: &[u8], line: u64, c: usize, path: &Path, delimiter: u8) -> Result<f64> {
    let v = parse_num(f).ok_or_else(|| {
        let why = foreign_delimiter(f, delimiter).unwrap_or_else(|| {
            format!(
                "`{}` is not a number",
                String::from_utf8_lossy(f).escape_debug()
            )
        });
        fmt_err(path, format!("line {line}, column {c}: {why}"))
    })?;
    if !v.is_finite() {
        return Err(fmt_err(
            path,
            format!(
                "line {line}, column {c}: non-finite value `{}`",
                String::from_utf8_lossy(f)
            ),
        ));
    }
    Ok(v)
}
