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
