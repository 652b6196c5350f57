//! Datasets through the CLI's own loader and cache (`privpred_data::load`): the same files,
//! checksums and train/test splits as `privpred train --dataset SPEC`.

use crate::errors::data;
use numpy::{PyArray1, PyArray2, PyArrayMethods};
use privpred_data::{Dataset, DatasetSpec, LoadOptions, load};
use pyo3::prelude::*;
use serde_json::json;
use std::path::PathBuf;

type Split<'py> = (Bound<'py, PyArray2<f32>>, Bound<'py, PyArray1<u32>>);

fn split<'py>(py: Python<'py>, ds: Dataset) -> PyResult<Split<'py>> {
    let (n, d) = (ds.n, ds.d);
    let x = PyArray1::from_vec(py, ds.features).reshape([n, d])?;
    Ok((x, PyArray1::from_vec(py, ds.labels)))
}

/// Loads `spec` (mnist, fashion-mnist, digits, csv:PATH, ...) as raw features: returns
/// (X_train, y_train, X_test, y_test, provenance JSON). `fetch=False` never downloads.
#[pyfunction]
#[pyo3(signature = (spec, data_dir=None, fetch=true))]
#[allow(clippy::type_complexity)]
pub fn load_dataset<'py>(
    py: Python<'py>,
    spec: &str,
    data_dir: Option<PathBuf>,
    fetch: bool,
) -> PyResult<(
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray1<u32>>,
    String,
)> {
    let spec = DatasetSpec::parse(spec).map_err(data)?;
    let opts = LoadOptions {
        data_dir,
        fetch,
        ..LoadOptions::default()
    };
    let s = py.detach(|| load(&spec, &opts)).map_err(data)?;
    let p = &s.train.provenance;
    let info = json!({
        "name": p.name, "source": p.source, "checksum": p.checksum, "verified": p.verified,
        "classes": s.train.classes, "feature_shape": s.train.feature_shape(),
    })
    .to_string();
    let (xtr, ytr) = split(py, s.train)?;
    let (xte, yte) = split(py, s.test)?;
    Ok((xtr, ytr, xte, yte, info))
}
