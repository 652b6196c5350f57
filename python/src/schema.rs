//! Tables in Python through a schema: raw rows (numbers and category strings) mapped into the
//! unit ball by the same code as `privpred train --schema` (`privpred_data::schema`), with the
//! CLI's messages naming the row and the column.

use crate::errors::data;
use numpy::PyArray1;
use numpy::PyArray2;
use numpy::PyArrayMethods;
use privpred_data::schema::Schema;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::Path;

/// Parses and checks a schema given as JSON text (`source` names it in errors).
pub fn parse(text: &str, source: &str) -> PyResult<Schema> {
    Schema::from_json(text, Path::new(source)).map_err(data)
}

/// Checks a schema (JSON text) and returns it as canonical JSON text; a ValueError names what
/// is wrong. `source` names it in the message (the file, or `schema=`).
#[pyfunction]
pub fn schema_check(text: &str, source: &str) -> PyResult<String> {
    let s = parse(text, source)?;
    serde_json::to_string(&s).map_err(|e| PyValueError::new_err(format!("invalid schema: {e}")))
}

/// Encoded rows (N × feature_dim) and, with `labels`, the class indices.
type Encoded<'py> = (Bound<'py, PyArray2<f32>>, Option<Bound<'py, PyArray1<u32>>>);

/// Maps raw rows through a schema (JSON text). Each row holds the table's cells as text:
/// every column but the label, or all columns. With `labels` (one per row) the label is
/// mapped to its class index by the schema's classes (a label cell in the row is replaced
/// by it); without, the rows are queries. The first row that does not match is refused with
/// a ValueError naming the row (0-based, as in X), the column and what is wrong.
#[pyfunction]
#[pyo3(signature = (schema, rows, labels=None))]
pub fn encode_table<'py>(
    py: Python<'py>,
    schema: &str,
    rows: Vec<Vec<String>>,
    labels: Option<Vec<String>>,
) -> PyResult<Encoded<'py>> {
    let s = parse(schema, "schema")?;
    if rows.is_empty() {
        return Err(PyValueError::new_err(
            "empty table: X has no rows (at least one is needed)",
        ));
    }
    let d = s.feature_dim();
    let n = rows.len();
    let bad = |i: usize, e: String| {
        PyValueError::new_err(format!(
            "row {i} of X: {e} (the schema does not match the data)"
        ))
    };
    let mut features = Vec::with_capacity(n * d);
    let classes = match labels {
        None => {
            for (i, r) in rows.iter().enumerate() {
                features.extend(s.encode_query(r).map_err(|e| bad(i, e))?);
            }
            None
        }
        Some(labels) => {
            if labels.len() != n {
                return Err(PyValueError::new_err(format!(
                    "dimension mismatch: {n} rows of X but {} labels in y",
                    labels.len()
                )));
            }
            let li = s.label_index();
            let all = s.columns.len();
            let mut y = Vec::with_capacity(n);
            for (i, (r, l)) in rows.into_iter().zip(labels).enumerate() {
                let mut cells = r;
                if cells.len() + 1 == all {
                    cells.insert(li, l);
                } else if cells.len() == all {
                    cells[li] = l;
                } else {
                    // encode_query's message says what the schema takes
                    return Err(bad(i, s.encode_query(&cells).err().unwrap_or_default()));
                }
                let (x, c) = s.encode_row(&cells).map_err(|e| bad(i, e))?;
                features.extend(x);
                y.push(c);
            }
            Some(y)
        }
    };
    let x = PyArray1::from_vec(py, features).reshape([n, d])?;
    Ok((x, classes.map(|y| PyArray1::from_vec(py, y))))
}

/// One column from Python: numbers (a float64 array, NaN missing) or its distinct text cells
/// with each row's index into them (an int64 array, negative missing).
#[derive(FromPyObject)]
pub enum PyColumn<'py> {
    /// Numbers.
    Numbers(numpy::PyReadonlyArray1<'py, f64>),
    /// Distinct cells and codes.
    Coded(Vec<String>, numpy::PyReadonlyArray1<'py, i64>),
}

fn values<'a>(c: &'a PyColumn<'_>) -> PyResult<privpred_data::schema::ColumnValues<'a>> {
    use privpred_data::schema::ColumnValues;
    let contiguous = |_| PyValueError::new_err("invalid column: not a contiguous 1-D array");
    Ok(match c {
        PyColumn::Numbers(x) => ColumnValues::Numbers(x.as_slice().map_err(contiguous)?),
        PyColumn::Coded(cells, codes) => ColumnValues::Coded {
            cells,
            codes: codes.as_slice().map_err(contiguous)?,
        },
    })
}

/// Maps a table given column by column through a schema (JSON text): the schema's feature
/// columns in order (every column but the label) and, for training, the labels. The same
/// encoding and messages as [`encode_table`], without a text cell per number.
#[pyfunction]
#[pyo3(signature = (schema, columns, labels=None))]
pub fn encode_columns<'py>(
    py: Python<'py>,
    schema: &str,
    columns: Vec<PyColumn<'py>>,
    labels: Option<PyColumn<'py>>,
) -> PyResult<Encoded<'py>> {
    let s = parse(schema, "schema")?;
    let cols = columns.iter().map(values).collect::<PyResult<Vec<_>>>()?;
    let labels = labels.as_ref().map(values).transpose()?;
    let (features, classes) = py
        .detach(|| s.encode_columns(&cols, labels))
        .map_err(|(i, e)| {
            PyValueError::new_err(format!(
                "row {i} of X: {e} (the schema does not match the data)"
            ))
        })?;
    let d = s.feature_dim();
    let n = features.len() / d.max(1);
    if n == 0 {
        return Err(PyValueError::new_err(
            "empty table: X has no rows (at least one is needed)",
        ));
    }
    let x = PyArray1::from_vec(py, features).reshape([n, d])?;
    Ok((x, classes.map(|y| PyArray1::from_vec(py, y))))
}

/// A table's header (when it has one) and rows of text cells.
type Table = (Option<Vec<String>>, Vec<Vec<String>>);

/// The table a private draft reads: a CSV or Parquet file, or rows of text cells (the
/// header first, with `header`).
fn draft_table(
    path: Option<&str>,
    rows: Option<Vec<Vec<String>>>,
    header: bool,
) -> PyResult<Table> {
    use privpred_data::schema::declare_header;
    use privpred_data::table::draft_input;
    match (path, rows) {
        (Some(p), None) => draft_input(Path::new(p), header).map_err(data),
        (None, Some(r)) => Ok(declare_header(None, r, header)),
        _ => Err(PyValueError::new_err(
            "invalid data: give a table file's path or the table's rows, not both",
        )),
    }
}

/// Drafts a schema privately (the numeric bounds by DP quantiles, the category lists and the
/// label's classes by a DP thresholded histogram; `privpred data schema --epsilon`'s code,
/// [`privpred_answer::odometer::private_draft`]), charged to the privacy odometer before it
/// is returned; the schema as JSON text, its cost (and odometer key) in its `drafted`.
#[pyfunction]
#[pyo3(signature = (*, path=None, rows=None, header=true, epsilon, delta, quantile, label=None, categorical=Vec::new(), ignore=Vec::new(), odometer=None, odometer_key=None, seed=None, note))]
#[allow(clippy::too_many_arguments)]
pub fn draft_schema(
    py: Python<'_>,
    path: Option<&str>,
    rows: Option<Vec<Vec<String>>>,
    header: bool,
    epsilon: f64,
    delta: Option<f64>,
    quantile: f64,
    label: Option<String>,
    categorical: Vec<String>,
    ignore: Vec<String>,
    odometer: Option<&str>,
    odometer_key: Option<&str>,
    seed: Option<u64>,
    note: &str,
) -> PyResult<String> {
    use crate::errors::python_words;
    use privpred_answer::odometer::{DraftError, private_draft};
    use privpred_data::schema::PrivateDraft;
    use pyo3::exceptions::PyRuntimeError;
    let opts = PrivateDraft {
        epsilon,
        delta,
        quantile,
        label,
        categorical,
        ignore,
        seed,
    };
    let drafted = py.detach(|| -> PyResult<Result<Schema, DraftError>> {
        let (head, cells) = draft_table(path, rows, header)?;
        Ok(private_draft(
            &opts,
            head.as_deref(),
            &cells,
            odometer,
            odometer_key,
            note,
            |_, _| {},
        )
        .map(|r| r.schema))
    })?;
    let schema = drafted.map_err(|e| match e {
        DraftError::Invalid(d) => data(d),
        DraftError::Usage(m) => PyValueError::new_err(python_words(&m)),
        DraftError::Odometer(o) => crate::odometer::err(o),
        DraftError::Failed { error, charged } => PyValueError::new_err(format!(
            "{}{}",
            python_words(&error.to_string()),
            if charged {
                " (the draft read the data: its charge stays counted in the odometer, no refund)"
            } else {
                ""
            }
        )),
        DraftError::Noise(n) => PyRuntimeError::new_err(n.to_string()),
    })?;
    serde_json::to_string(&schema).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}
