//! `privpred ledger`: inspect, back up and reconcile the budget ledger of `privpred predict`
//! and `privpred serve`.
//!
//! * `show`: every budget record (model id, B, spent, remaining, created, stored answers).
//! * `backup --out FILE`: SQLite through the SQLite online backup API (a consistent copy even
//!   while a server writes the ledger; the copy is integrity-checked and self-contained: no
//!   `-wal` file needed); PostgreSQL as a plain-SQL dump restorable with `psql -f FILE`
//!   (restoring never lowers a recorded `spent`). Written whole or not at all.
//!
//! * `reconcile --model FILE`: raises the model's recorded `spent` to its spend mark (the
//!   high-water mark kept beside the model file), after a restore of an older backup or a
//!   lost `-wal` file made the ledger record less than was released. Never lowers a count.
//!
//! The ledger is named like `serve --ledger`, or by `--model FILE` (the default
//! `sqlite:<MODEL>.ledger.sqlite` beside the model, shared by `predict` and `serve`; `show`
//! then lists that model's record, keyed by its ledger id).

use super::budget::{identity, ledger_err};
use crate::exit::usage;
use privpred_answer::LedgerSpec;
use privpred_answer::ledger::blocking;
use privpred_answer::{default_spend_mark as spend_mark, ledger_spec};
use std::path::PathBuf;

/// Arguments of `privpred ledger`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

/// Which ledger.
#[derive(clap::Args, Debug)]
pub struct Which {
    /// The ledger: `sqlite:PATH`, `postgres://user@host:port/db`, or a libpq string.
    #[arg(
        long,
        value_name = "LEDGER",
        conflicts_with = "model",
        required_unless_present = "model"
    )]
    pub ledger: Option<String>,
    /// A model file: its default ledger `sqlite:<MODEL>.ledger.sqlite` (as `serve` uses it).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
}

/// `privpred ledger` actions.
#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Print the budget records.
    Show {
        #[command(flatten)]
        which: Which,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Back the ledger up into a file (SQLite: a database copy; PostgreSQL: an SQL dump).
    Backup {
        #[command(flatten)]
        which: Which,
        /// The backup file to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Raise a model's recorded spent budget to its spend mark (never lowers it).
    Reconcile {
        /// The model file (its ledger id, budget and spend mark).
        #[arg(long, value_name = "FILE")]
        model: PathBuf,
        /// The ledger (default: `sqlite:<MODEL>.ledger.sqlite`).
        #[arg(long, value_name = "LEDGER")]
        ledger: Option<String>,
    },
}

/// The ledger spec and, with `--model`, the model's id.
fn resolve(w: &Which) -> anyhow::Result<(LedgerSpec, Option<String>)> {
    match (&w.ledger, &w.model) {
        (Some(l), _) => Ok((LedgerSpec::parse(l).map_err(usage)?, None)),
        (None, Some(m)) => Ok((
            ledger_spec(None, m).map_err(ledger_err)?,
            Some(identity(m)?.id),
        )),
        (None, None) => Err(usage("give --ledger LEDGER or --model FILE")),
    }
}

/// Runs `privpred ledger`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.action {
        Action::Show { which, json } => {
            let (spec, model_id) = resolve(&which)?;
            let mut records = blocking::show(&spec).map_err(ledger_err)?;
            if let Some(id) = &model_id {
                records.retain(|r| &r.model_id == id);
                if records.is_empty() {
                    return Err(usage(format!(
                        "{} holds no budget record for this model ({id})",
                        spec.describe()
                    )));
                }
            }
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "ledger": spec.describe(),
                        "records": records,
                    }))?
                );
            } else {
                println!("ledger {}", spec.describe());
                println!(
                    "{:<64}  {:>12}  {:>12}  {:>12}  {:>10}  created",
                    "model_id", "budget", "spent", "remaining", "stored"
                );
                for r in &records {
                    println!(
                        "{:<64}  {:>12}  {:>12}  {:>12}  {:>10}  {}",
                        r.model_id, r.total, r.spent, r.remaining, r.stored_answers, r.created_at
                    );
                }
            }
            Ok(())
        }
        Action::Backup { which, out } => {
            let (spec, _) = resolve(&which)?;
            let n = blocking::backup(&spec, &out).map_err(ledger_err)?;
            eprintln!(
                "privpred ledger: backed up {} ({n} budget record(s)) to {}{}",
                spec.describe(),
                out.display(),
                match spec {
                    LedgerSpec::Sqlite(_) =>
                        " (SQLite database; restore by copying it to the ledger path while no server runs)",
                    LedgerSpec::Postgres(_) =>
                        " (SQL; restore with psql -v ON_ERROR_STOP=1 -f FILE)",
                }
            );
            Ok(())
        }
        Action::Reconcile { model, ledger } => reconcile(&model, ledger.as_deref()),
    }
}

/// `privpred ledger reconcile`.
fn reconcile(model: &std::path::Path, ledger: Option<&str>) -> anyhow::Result<()> {
    let who = identity(model)?;
    let total = who.budget.ok_or_else(|| {
        usage(format!(
            "{}: this model has no finite budget, so no ledger record",
            model.display()
        ))
    })?;
    let spec = ledger_spec(ledger, model).map_err(ledger_err)?;
    let mark = spend_mark(model);
    let (before, after) = blocking::reconcile(&spec, &who.id, total, &mark).map_err(ledger_err)?;
    let before = before.map_or_else(|| "no record".to_string(), |b| format!("{} spent", b.spent));
    println!(
        "model {}: {before} before, {} of {} spent now (spend mark {}); ledger {}",
        who.id,
        after.spent,
        after.total,
        mark.path().display(),
        spec.describe()
    );
    Ok(())
}
