//! `data schema FILE --epsilon E --delta D`: a private schema draft, charged to the data's
//! privacy odometer before anything drafted is printed (see `privpred_data::schema::PrivateDraft`
//! for the mechanisms and the budget split).

use crate::exit::usage;
use privpred_answer::odometer::Charge;
use privpred_core::Neighbours;
use privpred_data::schema::{DEFAULT_DRAFT_QUANTILE, PrivateDraft, declare_header};
use privpred_data::table::{self, TableFormat};
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

/// The private draft of `file`: checks, then the charge, then the draft on standard output.
pub fn run(file: &Path, label: Option<&str>, a: &DraftArgs, epsilon: f64) -> anyhow::Result<()> {
    let format = table::format_of(file);
    if a.no_header && format == TableFormat::Parquet {
        return Err(usage(format!(
            "--no-header applies to CSV files: {} is Parquet, whose column names are its header",
            file.display()
        )));
    }
    let (detected, rows) = table::read_cells(file, format)?;
    let (header, rows) = declare_header(detected, rows, !a.no_header);
    let opts = PrivateDraft {
        epsilon,
        delta: a.delta,
        quantile: a.quantile.unwrap_or(DEFAULT_DRAFT_QUANTILE),
        label: label.map(str::to_string),
        categorical: a.categorical.clone(),
        ignore: a.ignore.clone(),
        seed: a.seed,
    };
    let plan = opts
        .plan(header.as_deref(), &rows)
        .map_err(|e| usage(format!("{}: {e}", file.display())))?;
    let odometer = match (&a.odometer, &a.odometer_key) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(usage(
                "--odometer needs --odometer-key KEY with data schema: a table's default key is the identity of its rows as read through its schema, which is what is being drafted; give the key `odometer limit --key` set, and train with the same `--odometer-key`",
            ));
        }
        (Some(_), Some(_)) if a.seed.is_some() => {
            return Err(usage(format!(
                "--seed {} is refused with --odometer: a seeded draft's noise can be regenerated from the seed, it is not a release the odometer can add up; draft without --seed",
                a.seed.unwrap_or_default()
            )));
        }
        (Some(url), Some(key)) => Some((
            super::super::odometer::spec(url)?,
            super::super::odometer::check_key(key)?,
        )),
    };
    let mut rng = match a.seed {
        Some(s) => privpred_core::noise::seeded_rng(s),
        None => privpred_core::noise::release_rng()?,
    };
    let (eps, delta) = plan.cost();
    let reservation = match &odometer {
        None => None,
        Some((spec, key)) => {
            let charge = Charge {
                epsilon: eps,
                delta,
                method: "schema-draft".into(),
                budget: None,
                neighbours: Neighbours::ReplaceOne.name().to_string(),
            };
            Some(super::super::odometer::reserve_reported(
                spec, key, &charge, "draft",
            )?)
        }
    };
    let mut schema = match plan.draft(&rows, &mut rng) {
        Ok(s) => s,
        Err(e) => {
            if reservation.is_some() {
                eprintln!(
                    "privacy odometer: the draft failed after reading the data; its charge stays counted (no refund)"
                );
            }
            return Err(usage(format!("{}: {e}", file.display())));
        }
    };
    // the key the draft was charged to: `train --schema` with `--odometer` charges it too
    if let (Some((_, key)), Some(d)) = (&odometer, schema.drafted.as_mut()) {
        d.odometer_key = Some(key.clone());
    }
    let text = serde_json::to_string_pretty(&schema)?;
    if let Some(r) = reservation {
        r.confirm(&format!("schema draft of {}", file.display()))
            .map_err(super::super::odometer::odo_err)?;
    }
    eprintln!(
        "drafted privately: {}; recorded in the schema's \"drafted\"",
        plan.describe()
    );
    if let Some(s) = a.seed {
        eprintln!(
            "seeded with --seed {s}: an experiment whose noise can be regenerated from the seed, not a release"
        );
    }
    println!("{text}");
    Ok(())
}
