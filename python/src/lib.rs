//! `privpred._native`: the Rust side of the Python package `privpred`.
//!
//! - [`model`]: training ([`model::train`]) and the fitted model ([`model::NativeModel`]):
//!   prediction with the in-memory budget ledger, the guarantee, artifacts.
//! - [`accounting`]: `calibrate` and the DP-SGD accountants.
//! - [`datasets`]: datasets through the CLI's loader and cache.
//! - [`schema`]: table rows mapped through a schema, as `privpred train --schema` does.
//! - [`odometer`]: the data owner's privacy odometer (the CLI's `train --odometer` store).
//! - [`errors`]: Rust errors → Python exceptions with the same messages.
//!
//! The Python layer (`pysrc/privpred`) adds the scikit-learn estimator, the HTTP client and
//! input validation; everything privacy-relevant (calibration, noise, preprocessing into the
//! unit ball, the budget check) happens here, in the same code paths as the CLI.

mod accounting;
mod answers;
mod datasets;
mod errors;
mod guarantee;
mod ledger;
mod model;
mod odometer;
mod schema;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "BudgetExhausted",
        m.py().get_type::<errors::BudgetExhausted>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<model::NativeModel>()?;
    m.add_function(wrap_pyfunction!(model::train, m)?)?;
    m.add_function(wrap_pyfunction!(model::load, m)?)?;
    m.add_function(wrap_pyfunction!(model::check_knobs, m)?)?;
    m.add_function(wrap_pyfunction!(schema::encode_table, m)?)?;
    m.add_function(wrap_pyfunction!(schema::encode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(schema::schema_check, m)?)?;
    m.add_function(wrap_pyfunction!(schema::draft_schema, m)?)?;
    m.add_function(wrap_pyfunction!(datasets::load_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::calibrate, m)?)?;
    m.add_class::<odometer::OdometerReservation>()?;
    m.add_function(wrap_pyfunction!(odometer::dataset_identity, m)?)?;
    m.add_function(wrap_pyfunction!(odometer::odometer_fit_key, m)?)?;
    m.add_function(wrap_pyfunction!(odometer::odometer_limit, m)?)?;
    m.add_function(wrap_pyfunction!(odometer::odometer_show, m)?)?;
    m.add_function(wrap_pyfunction!(odometer::odometer_reserve, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::epsilon_dp_sgd, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::noise_multiplier, m)?)?;
    Ok(())
}
