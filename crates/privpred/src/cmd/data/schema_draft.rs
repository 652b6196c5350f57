//! `data schema FILE --epsilon E --delta D`: a private schema draft, charged to the data's
//! privacy odometer before anything drafted is printed (see `privpred_data::schema::PrivateDraft`
//! for the mechanisms and the budget split).

use crate::exit::usage;
use privpred_answer::odometer::{DraftError, private_draft};
use privpred_data::DataError;
use privpred_data::schema::{DEFAULT_DRAFT_QUANTILE, PrivateDraft};
use privpred_data::table::draft_input;
use std::path::Path;

/// The flags of a private draft.
#[derive(clap::Args, Debug)]
pub struct DraftArgs {
    /// Draft privately with this total ε > 0: the numeric bounds by DP quantiles, the category
    /// lists and the label's classes by a DP thresholded histogram, the cost recorded in the
    /// schema's `drafted` (replace-one; basic composition over the columns). Without it the
    /// draft reads the data without noise (not private).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// The private draft's total δ ∈ (0, 1), required with --epsilon (the lists are released
    /// by a thresholded histogram, which needs δ > 0; e.g. 1e-6, below 1/N).
    #[arg(long, requires = "epsilon", allow_negative_numbers = true)]
    pub delta: Option<f64>,
    /// The quantile q ∈ (0, 0.5) of the private numeric bounds: the bounds are the q and
    /// 1 − q quantiles (default 0.01: 1 % and 99 %), values outside them are clipped.
    #[arg(long, requires = "epsilon", allow_negative_numbers = true)]
    pub quantile: Option<f64>,
    /// Private draft: the categorical columns (comma-separated names); every other column but
    /// the label is numeric. The types are declared, never read from the cells.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAMES",
        requires = "epsilon"
    )]
    pub categorical: Vec<String>,
    /// Private draft: columns to ignore (comma-separated names; not read, cost nothing).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAMES",
        requires = "epsilon"
    )]
    pub ignore: Vec<String>,
    /// Private draft: the CSV's first row is data (default: it is the header, whose cells are
    /// printed as the column names).
    #[arg(long, requires = "epsilon")]
    pub no_header: bool,
    /// The data owner's privacy odometer (as `train --odometer`): the draft's (ε, δ) is
    /// charged against the limit of `--odometer-key` before anything drafted is printed.
    #[arg(long, value_name = "URL", requires = "epsilon")]
    pub odometer: Option<String>,
    /// The dataset's key in the odometer (required with --odometer: the key `odometer limit
    /// --key` set and `train --odometer-key` charges).
    #[arg(long, value_name = "KEY", requires = "odometer")]
    pub odometer_key: Option<String>,
    /// An experiment seed (tests): the draft's noise can be regenerated from it, so it is not
    /// a release; recorded in the schema and refused with --odometer.
    #[arg(long, requires = "epsilon")]
    pub seed: Option<u64>,
}

/// The private draft of `file`: checks, then the charge, then the draft on standard output
/// (`privpred_answer::odometer::private_draft`, the path the Python bindings take too).
pub fn run(file: &Path, label: Option<&str>, a: &DraftArgs, epsilon: f64) -> anyhow::Result<()> {
    let (header, rows) = draft_input(file, !a.no_header).map_err(|e| match e {
        DataError::InvalidArgument { .. } => usage(e),
        other => anyhow::Error::new(other),
    })?;
    let opts = PrivateDraft {
        epsilon,
        delta: a.delta,
        quantile: a.quantile.unwrap_or(DEFAULT_DRAFT_QUANTILE),
        label: label.map(str::to_string),
        categorical: a.categorical.clone(),
        ignore: a.ignore.clone(),
        seed: a.seed,
    };
    let note = format!("schema draft of {}", file.display());
    let released = private_draft(
        &opts,
        header.as_deref(),
        &rows,
        a.odometer.as_deref(),
        a.odometer_key.as_deref(),
        &note,
        |charge, r| super::super::odometer::report_charge(r, charge, "draft"),
    )
    .map_err(|e| match e {
        DraftError::Invalid(_) | DraftError::Failed { .. } => {
            if matches!(e, DraftError::Failed { charged: true, .. }) {
                eprintln!(
                    "privacy odometer: the draft failed after reading the data; its charge stays counted (no refund)"
                );
            }
            usage(format!("{}: {e}", file.display()))
        }
        DraftError::Usage(m) => usage(m),
        DraftError::Odometer(o) => super::super::odometer::odo_err(o),
        DraftError::Noise(n) => anyhow::Error::new(n),
    })?;
    let text = serde_json::to_string_pretty(&released.schema)?;
    eprintln!(
        "drafted privately: {}; recorded in the schema's \"drafted\"",
        released.plan.describe()
    );
    if let Some(s) = a.seed {
        eprintln!(
            "seeded with --seed {s}: an experiment whose noise can be regenerated from the seed, not a release"
        );
    }
    println!("{text}");
    Ok(())
}
