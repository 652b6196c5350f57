//! `privpred predict`: answer queries from a file with a trained model.
//!
//! Input: CSV rows of raw features (the model's preprocessing is applied; a header line only
//! with `--header`) or an IDX image file (detected by its magic number), bounded in size and
//! rows (see the `queries` module).
//! Output: one label per line (or JSON with `--json`).
//!
//! Budget: private-prediction models (prediction sensitivity, subsample-and-aggregate) cover
//! B answers, spent from the same transactional ledger `privpred serve` uses (by default
//! `<model>.ledger.sqlite`, or `--ledger`), keyed by the model's ledger id: the answers are
//! computed, then one transaction checks the budget and records them, and only then are they
//! printed (see `budget`). A request that would exceed B is refused whole (exit 2), nothing
//! answered; concurrent runs never overspend. The ledger record is created only with
//! `--init-ledger`. The path is `privpred_answer`'s, the one `serve` and Python take. Privately trained
//! models (B = ∞) and the non-private model do not spend budget. Answers use the OS-seeded
//! release generator.
//!
//! Deep models (`privpred-nn` artifacts, with `--features nn`) answer the same way: rows are
//! raw pixels `C×H×W` (0..255); a DP-SGD network answers with labels and probabilities, a
//! teacher ensemble with one exponential-mechanism draw per row, spending the same ledger.

use super::budget::ledger_err;
use super::queries::{read_queries, read_query_cells};
use crate::exit::usage;
use privpred_answer::{Account, Answering};
use privpred_core::Answer;
use privpred_linear::LinearError;
use privpred_linear::artifact::{LoadedModel, StoredModel};
use privpred_release::Marks;
use serde_json::json;
use std::path::{Path, PathBuf};

/// Arguments of `privpred predict`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file written by `privpred train`.
    #[arg(long)]
    pub model: PathBuf,
    /// Queries: a CSV file of raw feature rows, or an IDX image file.
    #[arg(long)]
    pub input: PathBuf,
    /// The CSV query file's first line is a header (column names) and is skipped. Without
    /// it every line must be a row of numbers.
    #[arg(long)]
    pub header: bool,
    /// Print JSON (labels and, where the mechanism releases them, scores).
    #[arg(long)]
    pub json: bool,
    /// Create the model's budget record in the ledger (first use, by `predict` or `serve`).
    /// Refused if the record exists; without it a missing ledger or record is an error (a
    /// deleted ledger never resets the budget).
    #[arg(long)]
    pub init_ledger: bool,
    /// Answer with a model whose guarantee is not valid (e.g. `paper` calibration). Refused
    /// without it; with it a warning is printed and every answer is marked.
    #[arg(long)]
    pub allow_invalid_guarantee: bool,
    /// Budget ledger: `sqlite:PATH`, `postgres://user@host:port/db`, or a libpq string.
    /// Default: `sqlite:<MODEL>.ledger.sqlite`, the ledger `privpred serve` uses.
    #[arg(long, value_name = "LEDGER")]
    pub ledger: Option<String>,
    /// Which keys are trusted and open sealed models.
    #[command(flatten)]
    pub keys: super::keys::TrustArgs,
}

fn lin(e: LinearError) -> anyhow::Error {
    if e.is_user_error() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// Prints the answers; `warning` (a guarantee that does not hold, answered with
/// `--allow-invalid-guarantee`) and `marks` (a model not covered by a trusted signature,
/// opened with `--allow-unsigned`) mark every one of them.
fn print_answers(
    answers: &[Answer],
    as_json: bool,
    warning: Option<&str>,
    marks: &Marks,
) -> anyhow::Result<()> {
    let uncovered = marks.not_covered.as_deref();
    if as_json {
        let v: Vec<_> = answers
            .iter()
            .map(|a| {
                let mut o = json!({"label": a.label, "scores": a.scores});
                if warning.is_some() {
                    o["valid_guarantee"] = json!(false);
                }
                if uncovered.is_some() {
                    o["covered"] = json!(false);
                }
                o
            })
            .collect();
        let mut out = json!({"answers": v});
        if let Some(w) = warning {
            out["valid_guarantee"] = json!(false);
            out["warning"] = json!(w);
        }
        if let Some(why) = uncovered {
            out["covered"] = json!(false);
            out["not_covered"] = json!(why);
        }
        println!("{}", serde_json::to_string(&out)?);
    } else {
        let mut out = String::new();
        for a in answers {
            out.push_str(&a.label.to_string());
            if warning.is_some() {
                out.push_str("\tguarantee-not-valid");
            }
            if uncovered.is_some() {
                out.push_str("\tnot-covered");
            }
            out.push('\n');
        }
        print!("{out}");
    }
    Ok(())
}

/// The warning printed once on stderr for a model opened with `--allow-unsigned` whose
/// file is not covered by a trusted signature.
pub(crate) fn warn_not_covered(command: &str, marks: &Marks) {
    if let Some(why) = &marks.not_covered {
        eprintln!(
            "privpred {command}: WARNING: the model is not covered by a trusted signature ({why}); every answer is marked not covered"
        );
    }
}

/// The refusal of a model whose guarantee does not hold, or (with
/// `--allow-invalid-guarantee`) the warning its answers carry, printed once on stderr.
pub(crate) fn invalid_guarantee(
    path: &Path,
    calibration: Option<&privpred_core::Calibration>,
    allow: bool,
) -> anyhow::Result<Option<String>> {
    let Some(w) = calibration.and_then(privpred_serve::model::invalid_guarantee_warning) else {
        return Ok(None);
    };
    if !allow {
        return Err(usage(format!(
            "{}: valid_guarantee: false ({w}); pass --allow-invalid-guarantee to answer anyway, every answer marked",
            path.display()
        )));
    }
    eprintln!("privpred predict: WARNING: {w}");
    Ok(Some(w))
}

/// Runs `privpred predict`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let released = args.keys.open(&args.model)?;
    let answering = Answering::open(&args.model, released, args.ledger.as_deref(), false)
        .map_err(ledger_err)?;
    let (marks, account) = (answering.marks, answering.account);
    match answering.model {
        privpred_release::Model::Linear(m) => run_linear(&args, *m, marks, account.as_ref()),
        #[cfg(feature = "nn")]
        privpred_release::Model::Resnet(m) => nn::run(&args, *m, marks, account.as_ref()),
    }
}

/// The model's account, for a model whose answers spend a budget.
fn account_of<'a>(args: &Args, account: Option<&'a Account>) -> anyhow::Result<&'a Account> {
    account.ok_or_else(|| {
        usage(format!(
            "{}: the model spends budget but has no finite budget B recorded",
            args.model.display()
        ))
    })
}

fn run_linear(
    args: &Args,
    loaded: LoadedModel,
    marks: Marks,
    account: Option<&Account>,
) -> anyhow::Result<()> {
    let warning = invalid_guarantee(
        &args.model,
        loaded.private().map(|p| &p.calibration),
        args.allow_invalid_guarantee,
    )?;
    warn_not_covered("predict", &marks);
    let prep = &loaded.preprocessing;
    // a table's rows (text cells) go through the model's schema; other models take numbers
    let mapped: Vec<privpred_data::Result<Vec<f32>>> = match &prep.schema {
        Some(_) => read_query_cells(&args.input, args.header)?
            .iter()
            .map(|r| prep.encode_query(r))
            .collect(),
        None => read_queries(&args.input, prep.input_dim(), args.header)?
            .iter()
            .map(|r| prep.apply_row(r))
            .collect(),
    };
    let mut rows = Vec::with_capacity(mapped.len());
    for (i, x) in mapped.into_iter().enumerate() {
        let x = x.map_err(|e| usage(format!("query {}: {e}", i + 1)))?;
        privpred_linear::check_query(&x, loaded.model.input_dim())
            .map_err(|e| usage(format!("query {}: {e}", i + 1)))?;
        rows.push(x);
    }
    let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
    let mut rng = privpred_core::noise::release_rng()?;
    let answers: Vec<Answer> = match &loaded.model {
        StoredModel::NonPrivate(m) => refs
            .iter()
            .map(|x| Answer {
                label: m.predict(x),
                scores: Some(m.logits(x)),
            })
            .collect(),
        StoredModel::Private(p) => {
            let fresh = p.try_predict(&refs, &mut rng).map_err(lin)?;
            if p.spends_budget() {
                let account = account_of(args, account)?;
                super::budget::spend(account, &args.model, &rows, fresh, args.init_ledger)?
            } else {
                fresh
            }
        }
    };
    print_answers(&answers, args.json, warning.as_deref(), &marks)?;
    Ok(())
}

/// `privpred predict` with a deep-model artifact.
#[cfg(feature = "nn")]
mod nn {
    use super::{Args, print_answers};
    use crate::cmd::nn_artifact::nn_err;
    use crate::cmd::queries::read_queries;
    use crate::exit::usage;
    use privpred_answer::Account;
    use privpred_nn::artifact::NnModel;
    use privpred_release::Marks;

    pub fn run(
        args: &Args,
        model: NnModel,
        marks: Marks,
        account: Option<&Account>,
    ) -> anyhow::Result<()> {
        let warning = super::invalid_guarantee(
            &args.model,
            model.header.calibration.as_ref(),
            args.allow_invalid_guarantee,
        )?;
        super::warn_not_covered("predict", &marks);
        let raw = read_queries(&args.input, model.input_dim(), args.header)?;
        let refs: Vec<&[f32]> = raw.iter().map(|r| r.as_slice()).collect();
        // validate every row before anything is spent
        model.check_rows(&refs).map_err(usage)?;
        let mut rng = privpred_core::noise::release_rng()?;
        let fresh = model.predict(&refs, &mut rng).map_err(nn_err)?;
        let answers = if model.spends_budget() {
            let account = super::account_of(args, account)?;
            crate::cmd::budget::spend(account, &args.model, &raw, fresh, args.init_ledger)?
        } else {
            fresh
        };
        print_answers(&answers, args.json, warning.as_deref(), &marks)
    }
}
