//! The data owner's privacy odometer for Python: the same store as `privpred train --odometer`
//! (`privpred_answer::odometer`, SQLite or PostgreSQL), keyed by the same dataset identity.
//! The estimator reserves each fit's whole guarantee before training and confirms it once the
//! model exists (or cancels it when training fails); a fit past the owner's limit is refused
//! with `ValueError` before any training.

use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use privpred_answer::odometer::{self, Charge, Limit, OdometerError, Reservation};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Mutex;

pub(crate) fn err(e: OdometerError) -> PyErr {
    if e.is_user_error() {
        PyValueError::new_err(e.to_string())
    } else {
        PyRuntimeError::new_err(e.to_string())
    }
}

fn spec(url: &str) -> PyResult<privpred_answer::LedgerSpec> {
    odometer::parse_spec(url).map_err(err)
}

/// The dataset identity the odometer keys a training set by (the CLI's: SHA-256 over the
/// sorted digests of the rows, features as f32, labels as u32).
#[pyfunction]
pub fn dataset_identity(
    x: PyReadonlyArray2<'_, f32>,
    y: PyReadonlyArray1<'_, u32>,
) -> PyResult<String> {
    let a = x.as_array();
    let (n, d) = a.dim();
    let features: Vec<f32> = a.iter().copied().collect();
    let labels = y.as_slice()?;
    if labels.len() != n {
        return Err(PyValueError::new_err(format!(
            "dimension mismatch: {n} rows of features but {} labels",
            labels.len()
        )));
    }
    Ok(odometer::dataset_identity(d, &features, labels))
}

/// The key a fit is charged to: `key` when given, else the key a privately drafted schema
/// (JSON text) was charged to, else the training set's [`dataset_identity`] (the CLI's rule,
/// `privpred_answer::odometer::fit_key`).
#[pyfunction]
#[pyo3(signature = (key, schema, x, y))]
pub fn odometer_fit_key(
    key: Option<&str>,
    schema: Option<&str>,
    x: PyReadonlyArray2<'_, f32>,
    y: PyReadonlyArray1<'_, u32>,
) -> PyResult<String> {
    let schema = schema
        .map(|t| crate::schema::parse(t, "schema"))
        .transpose()?;
    let a = x.as_array();
    let (n, d) = a.dim();
    let labels = y.as_slice()?;
    if labels.len() != n {
        return Err(PyValueError::new_err(format!(
            "dimension mismatch: {n} rows of features but {} labels",
            labels.len()
        )));
    }
    odometer::fit_key(key, schema.as_ref(), || {
        let features: Vec<f32> = a.iter().copied().collect();
        odometer::dataset_identity(d, &features, labels)
    })
    .map_err(err)
}

/// Sets (or changes) the limit of dataset `key`, creating the odometer if missing; returns
/// the dataset's record as JSON.
#[pyfunction]
#[pyo3(signature = (odometer, key, epsilon, delta=0.0, neighbours="replace-one"))]
pub fn odometer_limit(
    py: Python<'_>,
    odometer: &str,
    key: &str,
    epsilon: f64,
    delta: f64,
    neighbours: &str,
) -> PyResult<String> {
    let n = crate::guarantee::neighbours(neighbours)?;
    check_key(key)?;
    let s = spec(odometer)?;
    let limit = Limit {
        epsilon,
        delta,
        neighbours: n.name().to_string(),
    };
    let r = py
        .detach(|| odometer::set_limit(&s, key, &limit))
        .map_err(err)?;
    serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Every dataset's record (or dataset `key`'s) as JSON: limit, total (basic composition),
/// fits.
#[pyfunction]
#[pyo3(signature = (odometer, key=None))]
pub fn odometer_show(py: Python<'_>, odometer: &str, key: Option<&str>) -> PyResult<String> {
    let s = spec(odometer)?;
    let r = py.detach(|| odometer::show(&s, key)).map_err(err)?;
    serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

fn check_key(k: &str) -> PyResult<()> {
    odometer::check_key(k).map_err(err)
}

/// A fit's charge, reserved before training.
#[pyclass(module = "privpred._native")]
pub struct OdometerReservation {
    inner: Mutex<Option<Reservation>>,
    /// The total after this fit, as JSON.
    summary: String,
}

#[pymethods]
impl OdometerReservation {
    /// The model exists: the charge stays (`released`).
    fn confirm(&self, py: Python<'_>, note: &str) -> PyResult<()> {
        let r = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("poisoned"))?
            .take();
        match r {
            Some(r) => py.detach(|| r.confirm(note)).map_err(err),
            None => Ok(()),
        }
    }

    /// Training failed before a model existed: nothing released, the charge is cancelled.
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        let r = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("poisoned"))?
            .take();
        match r {
            Some(r) => py.detach(|| r.cancel()).map_err(err),
            None => Ok(()),
        }
    }

    /// The dataset's total with this fit, as JSON.
    fn summary_json(&self) -> String {
        self.summary.clone()
    }
}

/// Checks a fit against the limit of dataset `key` and reserves its charge (the whole
/// guarantee: for budgeted methods, of all B answers). `ValueError` when refused.
#[pyfunction]
#[pyo3(signature = (odometer, key, method, epsilon, delta, budget, neighbours, calibration))]
#[allow(clippy::too_many_arguments)]
pub fn odometer_reserve(
    py: Python<'_>,
    odometer: &str,
    key: &str,
    method: &str,
    epsilon: Option<f64>,
    delta: f64,
    budget: Option<u64>,
    neighbours: &str,
    calibration: &str,
) -> PyResult<OdometerReservation> {
    check_key(key)?;
    let s = spec(odometer)?;
    let n = crate::guarantee::neighbours(neighbours)?;
    let private = method != "non-private";
    if private && calibration == "paper" {
        return Err(PyValueError::new_err(
            "invalid calibration = paper with an odometer: the paper's calibration does not hold in every case, and the odometer adds up only guarantees that hold (use corrected or tight)",
        ));
    }
    let budgeted = matches!(
        method,
        "prediction-sensitivity" | "subsample-aggregate" | "subsample-and-aggregate"
    );
    let charge = Charge {
        epsilon: if private {
            epsilon.unwrap_or(f64::INFINITY)
        } else {
            f64::INFINITY
        },
        delta: if private { delta } else { 1.0 },
        method: method.to_string(),
        budget: if budgeted { budget } else { None },
        neighbours: n.name().to_string(),
    };
    let r = py
        .detach(|| odometer::reserve(&s, key, &charge))
        .map_err(err)?;
    let summary = serde_json::json!({
        "dataset": r.dataset, "limit": r.limit, "before": r.before, "after": r.after,
    })
    .to_string();
    Ok(OdometerReservation {
        inner: Mutex::new(Some(r)),
        summary,
    })
}
