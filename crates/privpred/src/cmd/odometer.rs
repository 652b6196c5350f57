//! `privpred odometer`: the data owner's privacy odometer — a limit per dataset on the total
//! (ε, δ) of every model trained from it, and the record of those fits.
//!
//! * `limit --odometer URL (--dataset SPEC | --key KEY) --epsilon E [--delta D]`: sets or
//!   changes the limit (creating the odometer: an SQLite path or a postgres:// URL).
//! * `show --odometer URL [--dataset SPEC | --key KEY] [--json]`: the limit, the total by
//!   basic composition and every fit of each dataset.
//!
//! `privpred train --odometer URL` charges each fit against the limit before training
//! ([`FitCharge`]); see `privpred_answer::odometer` for the guarantees.

use crate::exit::usage;
use anyhow::Context;
use privpred_answer::LedgerSpec;
use privpred_answer::odometer::{self, Charge, DatasetRecord, OdometerError, Reservation, short};
use privpred_core::{CalibrationMode, Method, Neighbours, Privacy};
use privpred_data::{DatasetSpec, LoadOptions, load};
use std::path::PathBuf;

/// Arguments of `privpred odometer`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

/// Which dataset: its data (keyed by the SHA-256 identity of its training rows) or a key.
#[derive(clap::Args, Debug)]
pub struct Which {
    /// The dataset, as `train --dataset` names it; its key is the SHA-256 identity of its
    /// training rows (the key `train --odometer` charges).
    #[arg(long, conflicts_with = "key")]
    pub dataset: Option<String>,
    /// Directory searched first for the dataset files.
    #[arg(long, requires = "dataset")]
    pub data_dir: Option<PathBuf>,
    /// A table's schema (as `train --schema`): its rows are keyed as the trainer reads them
    /// through it. Needed for csv: and parquet: tables.
    #[arg(long, value_name = "FILE", requires = "dataset")]
    pub schema: Option<PathBuf>,
    /// A key given directly (as `train --odometer-key` names it, or as `show` prints it).
    #[arg(long)]
    pub key: Option<String>,
}

/// `privpred odometer` actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Set or change a dataset's limit on the total (ε, δ) of the models trained from it.
    Limit {
        /// The odometer: an SQLite file path (or sqlite:PATH; created if missing) or a
        /// postgres:// URL / libpq string.
        #[arg(long, value_name = "URL")]
        odometer: String,
        #[command(flatten)]
        which: Which,
        /// The largest total ε ≥ 0.
        #[arg(long, allow_negative_numbers = true)]
        epsilon: f64,
        /// The largest total δ ∈ [0, 1).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        delta: f64,
        /// The neighbouring relation every charged guarantee must be stated under.
        #[arg(long, value_enum, default_value_t = Neighbours::ReplaceOne)]
        neighbours: Neighbours,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the limit, the total spent and every fit of each dataset.
    Show {
        /// The odometer (it must exist).
        #[arg(long, value_name = "URL")]
        odometer: String,
        #[command(flatten)]
        which: Which,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// An odometer error at the CLI: refusals and bad input exit 2, store failures 1.
pub(crate) fn odo_err(e: OdometerError) -> anyhow::Error {
    if e.is_user_error() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// Parses `--odometer`.
pub(crate) fn spec(s: &str) -> anyhow::Result<LedgerSpec> {
    odometer::parse_spec(s).map_err(odo_err)
}

/// Checks a key given by the owner: 1 to 256 printable characters
/// (`privpred_answer::odometer::check_key`).
pub(crate) fn check_key(k: &str) -> anyhow::Result<String> {
    odometer::check_key(k).map_err(odo_err)?;
    Ok(k.to_string())
}

fn key(w: &Which) -> anyhow::Result<Option<String>> {
    match (&w.dataset, &w.key) {
        (_, Some(k)) => check_key(k).map(Some),
        (Some(d), None) => {
            let spec = DatasetSpec::parse(d)?;
            let opts = LoadOptions {
                data_dir: w.data_dir.clone(),
                schema: super::shared::read_schema(w.schema.as_deref())?,
                ..LoadOptions::default()
            };
            let splits = load(&spec, &opts).with_context(|| format!("loading dataset {d}"))?;
            if splits.train.provenance.needs_schema {
                // `train` refuses such a table, so no fit would ever be charged to its key
                return Err(usage(format!(
                    "{d}: {}; give the schema `train --schema` reads it with",
                    privpred_data::schema::NEEDS_SCHEMA
                )));
            }
            let (dim, f, y) = splits.training_input();
            Ok(Some(odometer::dataset_identity(dim, &f, &y)))
        }
        (None, None) => Ok(None),
    }
}

/// Runs `privpred odometer`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.action {
        Action::Limit {
            odometer: url,
            which,
            epsilon,
            delta,
            neighbours,
            json,
        } => {
            let spec = spec(&url)?;
            let key = key(&which)?.ok_or_else(|| usage("give --dataset SPEC or --key KEY"))?;
            let limit = odometer::Limit {
                epsilon,
                delta,
                neighbours: neighbours.name().to_string(),
            };
            let r = odometer::set_limit(&spec, &key, &limit).map_err(odo_err)?;
            print(&spec, &[r], json, "limit set")
        }
        Action::Show {
            odometer: url,
            which,
            json,
        } => {
            let spec = spec(&url)?;
            let key = key(&which)?;
            let records = odometer::show(&spec, key.as_deref()).map_err(odo_err)?;
            if let (Some(k), true) = (&key, records.is_empty()) {
                return Err(usage(format!(
                    "{} holds no limit for dataset {k}",
                    spec.describe()
                )));
            }
            print(&spec, &records, json, "")
        }
    }
}

fn print(
    spec: &LedgerSpec,
    records: &[DatasetRecord],
    json: bool,
    what: &str,
) -> anyhow::Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "odometer": spec.describe(),
                "composition": "basic",
                "datasets": records,
            }))?
        );
        return Ok(());
    }
    println!(
        "odometer {}{}",
        spec.describe(),
        if what.is_empty() {
            String::new()
        } else {
            format!(": {what}")
        }
    );
    for r in records {
        println!("dataset {}", r.dataset);
        println!(
            "  limit   epsilon = {}, delta = {} ({})",
            short(r.limit.epsilon),
            short(r.limit.delta),
            r.limit.neighbours
        );
        println!(
            "  spent   epsilon = {}, delta = {} over {} fit(s) (basic composition)",
            short(r.spent.epsilon),
            short(r.spent.delta),
            r.spent.fits
        );
        for e in &r.fits {
            println!(
                "  #{:<5} {}  {:<9}  {:<22}  epsilon = {}, delta = {}{}{}",
                e.id,
                e.created_at,
                e.state,
                e.charge.method,
                short(e.charge.epsilon),
                short(e.charge.delta),
                e.charge
                    .budget
                    .map_or(String::new(), |b| format!(", B = {b}")),
                if e.note.is_empty() {
                    String::new()
                } else {
                    format!("  {}", e.note)
                }
            );
        }
    }
    Ok(())
}

/// A fit's charge on the odometer, reserved before training: confirmed once the model is
/// written, and kept when training fails after it started (a failed fit has looked at the
/// data and its outcome — the failure — is observable: no refund, or retrying until success
/// would spend several times the charge while the odometer shows one).
pub(crate) struct FitCharge {
    reservation: Option<Reservation>,
}

/// What `train` charges: the whole guarantee of the release.
pub(crate) struct FitRequest<'a> {
    pub url: &'a str,
    pub key: String,
    pub method: Option<Method>,
    pub privacy: Option<Privacy>,
    pub budget: u64,
    pub neighbours: Neighbours,
    pub calibration: CalibrationMode,
}

/// Reserves `charge` against the dataset's limit (exit 2 when refused) and says on standard
/// error what `what` (a fit, a draft) charged and what is spent of the limit.
pub(crate) fn reserve_reported(
    spec: &LedgerSpec,
    key: &str,
    charge: &Charge,
    what: &str,
) -> anyhow::Result<Reservation> {
    let res = odometer::reserve(spec, key, charge).map_err(odo_err)?;
    report_charge(&res, charge, what);
    Ok(res)
}

/// Says on standard error what `what` (a fit, a draft) charged and what is spent of the limit.
pub(crate) fn report_charge(res: &Reservation, charge: &Charge, what: &str) {
    eprintln!(
        "privacy odometer {}: dataset {}: this {what} charged epsilon = {}, delta = {}; total {} fit(s), epsilon = {}, delta = {} of the limit epsilon = {}, delta = {} (basic composition)",
        res.spec().describe(),
        res.dataset,
        short(charge.epsilon),
        short(charge.delta),
        res.after.fits,
        short(res.after.epsilon),
        short(res.after.delta),
        short(res.limit.epsilon),
        short(res.limit.delta)
    );
}

impl FitCharge {
    /// Checks the fit against the dataset's limit and reserves its charge (exit 2 when
    /// refused, saying what is spent, what the fit costs and the limit).
    pub(crate) fn reserve(r: FitRequest<'_>) -> anyhow::Result<Self> {
        let spec = spec(r.url)?;
        if r.calibration == CalibrationMode::Paper && r.method.is_some() {
            return Err(usage(
                "--calibration paper is refused with --odometer: the paper's calibration does not hold in every case, and the odometer adds up only guarantees that hold (use corrected or tight)",
            ));
        }
        let (epsilon, delta) = match r.privacy {
            Some(p) => (p.epsilon(), p.delta()),
            None => (f64::INFINITY, 1.0),
        };
        let method = r.method.map_or("non-private", Method::name);
        let charge = Charge {
            epsilon,
            delta,
            method: method.to_string(),
            budget: r
                .method
                .filter(|m| !m.is_private_training())
                .map(|_| r.budget),
            neighbours: r.neighbours.name().to_string(),
        };
        Ok(FitCharge {
            reservation: Some(reserve_reported(&spec, &r.key, &charge, "fit")?),
        })
    }

    /// The model was written to `out`: the charge stays (as `released`).
    pub(crate) fn confirm(mut self, out: &std::path::Path) -> anyhow::Result<()> {
        match self.reservation.take() {
            Some(r) => r.confirm(&out.display().to_string()).map_err(odo_err),
            None => Ok(()),
        }
    }
}

impl FitCharge {
    /// Writing the model failed after it may have reached the disk: the charge stays
    /// (`reserved`, counted), never cancelled.
    pub(crate) fn keep(mut self) {
        self.reservation.take();
    }
}

impl Drop for FitCharge {
    /// Training stopped with an error after the charge was reserved: the charge stays counted
    /// (`reserved`, as for a trainer that stopped before confirming), never cancelled.
    fn drop(&mut self) {
        if self.reservation.take().is_some() {
            eprintln!(
                "privacy odometer: this fit failed after training started; its charge stays counted (no refund)"
            );
        }
    }
}
