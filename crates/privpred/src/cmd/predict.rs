//! `privpred predict`: answer queries from a file with a trained model.
//!
//! Input: CSV rows of raw features (the model's preprocessing is applied; an optional
//! non-numeric header line is skipped) or an IDX image file (detected by its magic number).
//! Output: one label per line (or JSON with `--json`).
//!
//! Budget: private-prediction models (prediction sensitivity, subsample-and-aggregate) cover
//! B answers. A local ledger `<model>.ledger.json` (keyed by the model's weights checksum)
//! records the answers spent; it is updated atomically **before** any answer is printed, and a
//! request that would exceed B is refused (exit 2) with nothing answered. The ledger is
//! created only with `--init-ledger` (first use); a missing ledger, one of other weights, or
//! one whose counts do not fit the model's budget is an error, never a fresh start. Privately trained
//! models (B = ∞) and the non-private model do not spend budget. Answers use the OS-seeded
//! release generator.
//!
//! Deep models (`privpred-nn` artifacts, with `--features nn`) answer the same way: rows are
//! raw pixels `C×H×W` (0..255); a DP-SGD network answers with labels and probabilities, a
//! teacher ensemble with one exponential-mechanism draw per row, spending the same ledger.

use crate::exit::usage;
use privpred_linear::LinearError;
use privpred_linear::artifact::{StoredModel, load as load_model, write_atomic};
use serde::{Deserialize, Serialize};
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
    /// Print JSON (labels and, where the mechanism releases them, scores).
    #[arg(long)]
    pub json: bool,
    /// Create the model's budget ledger `<MODEL>.ledger.json` (first use). Refused if it
    /// exists; without it a missing ledger is an error (a deleted ledger never resets the
    /// budget).
    #[arg(long)]
    pub init_ledger: bool,
    /// Answer with a model whose guarantee is not valid (e.g. `paper` calibration). Refused
    /// without it; with it a warning is printed and every answer is marked.
    #[arg(long)]
    pub allow_invalid_guarantee: bool,
}

/// The local budget ledger of a model file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ledger {
    /// Checksum of the model weights this ledger belongs to.
    pub weights_sha256: String,
    /// The budget B.
    pub budget: u64,
    /// Answers given so far.
    pub spent: u64,
}

fn lin(e: LinearError) -> anyhow::Error {
    if e.is_user_error() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// `<model>.ledger.json`.
pub fn ledger_path(model: &Path) -> PathBuf {
    let mut s = model.as_os_str().to_owned();
    s.push(".ledger.json");
    PathBuf::from(s)
}

fn read_queries(path: &Path, d: usize) -> anyhow::Result<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    if bytes.len() >= 4 && bytes[0] == 0 && bytes[1] == 0 && bytes[3] >= 1 {
        let arr = privpred_data::idx::read_images(path)?;
        let n = arr.dims.first().copied().unwrap_or(0);
        if n == 0 || arr.data.len() != n * d {
            return Err(usage(format!(
                "{}: IDX file holds {} items of {} values; the model expects {d} raw features per query",
                path.display(),
                n,
                arr.data.len().checked_div(n).unwrap_or(0)
            )));
        }
        return Ok(arr.data.chunks_exact(d).map(|r| r.to_vec()).collect());
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        usage(format!(
            "{}: neither an IDX file nor UTF-8 CSV text",
            path.display()
        ))
    })?;
    let mut rows = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split([',', ';', '\t']).map(str::trim).collect();
        let parsed: Result<Vec<f32>, _> = fields.iter().map(|f| f.parse::<f32>()).collect();
        let row = match parsed {
            Ok(r) => r,
            Err(_) if ln == 0 && rows.is_empty() => continue, // header line
            Err(_) => {
                return Err(usage(format!(
                    "{} line {}: not a row of numbers",
                    path.display(),
                    ln + 1
                )));
            }
        };
        if row.len() != d {
            return Err(usage(format!(
                "{} line {}: {} values, the model expects {d} raw features",
                path.display(),
                ln + 1,
                row.len()
            )));
        }
        if let Some(j) = row.iter().position(|v| !v.is_finite()) {
            return Err(usage(format!(
                "{} line {}: value {} is not finite",
                path.display(),
                ln + 1,
                j + 1
            )));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(usage(format!("{}: no query rows", path.display())));
    }
    Ok(rows)
}

/// Records `want` answers in the model's local ledger **before** they are given; refuses
/// (exit 2, nothing recorded) when fewer than `want` of the budget B are left. The ledger is
/// created only with `init` (and then must not exist yet); a missing ledger, a ledger of other
/// weights (the model file was replaced) or one whose counts do not fit B is an error. The
/// arithmetic is checked: `spent + want` can never wrap round to a small number.
fn spend(
    model: &Path,
    weights_sha256: &str,
    budget: u64,
    want: u64,
    init: bool,
) -> anyhow::Result<()> {
    let lp = ledger_path(model);
    let mut ledger = match std::fs::read(&lp) {
        Ok(_) if init => {
            return Err(usage(format!(
                "--init-ledger: {} already exists; it is never reset. Drop --init-ledger to spend from it",
                lp.display()
            )));
        }
        Ok(b) => {
            let l: Ledger = serde_json::from_slice(&b).map_err(|e| {
                usage(format!(
                    "{}: corrupt budget ledger ({e}); refusing to answer",
                    lp.display()
                ))
            })?;
            if l.weights_sha256 != weights_sha256 {
                return Err(usage(format!(
                    "{}: the ledger belongs to other model weights (sha256 {}, the model's are {weights_sha256}); \
                     refusing to answer. If the model file was replaced on purpose, move the old ledger away and \
                     pass --init-ledger",
                    lp.display(),
                    l.weights_sha256
                )));
            }
            if l.budget != budget || l.spent > l.budget {
                return Err(usage(format!(
                    "{}: corrupt budget ledger (records {} spent of a budget of {}, the model states B = {budget}); \
                     refusing to answer",
                    lp.display(),
                    l.spent,
                    l.budget
                )));
            }
            l
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !init {
                return Err(usage(format!(
                    "{}: no budget ledger for {}; pass --init-ledger to create it (first use). A ledger is never \
                     created silently: a fresh one would reset the budget",
                    lp.display(),
                    model.display()
                )));
            }
            Ledger {
                weights_sha256: weights_sha256.to_string(),
                budget,
                spent: 0,
            }
        }
        Err(e) => return Err(usage(format!("{}: {e}", lp.display()))),
    };
    let after = ledger.spent.checked_add(want).filter(|&s| s <= budget);
    let Some(after) = after else {
        return Err(usage(format!(
            "budget exhausted: {} queries requested, {} of {} answers left for {} (ledger {})",
            want,
            budget.saturating_sub(ledger.spent),
            budget,
            model.display(),
            lp.display()
        )));
    };
    ledger.spent = after;
    write_atomic(&lp, serde_json::to_string_pretty(&ledger)?.as_bytes()).map_err(lin)?;
    Ok(())
}

/// Prints the answers; `warning` (a guarantee that does not hold, answered with
/// `--allow-invalid-guarantee`) marks every one of them.
fn print_answers(
    answers: &[(u32, Option<Vec<f64>>)],
    as_json: bool,
    warning: Option<&str>,
) -> anyhow::Result<()> {
    if as_json {
        let v: Vec<_> = answers
            .iter()
            .map(|(l, s)| match warning {
                None => json!({"label": l, "scores": s}),
                Some(_) => json!({"label": l, "scores": s, "valid_guarantee": false}),
            })
            .collect();
        let out = match warning {
            None => json!({"answers": v}),
            Some(w) => json!({"answers": v, "valid_guarantee": false, "warning": w}),
        };
        println!("{}", serde_json::to_string(&out)?);
    } else {
        let mut out = String::new();
        for (l, _) in answers {
            out.push_str(&l.to_string());
            if warning.is_some() {
                out.push_str("\tguarantee-not-valid");
            }
            out.push('\n');
        }
        print!("{out}");
    }
    Ok(())
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

/// Why a seeded artifact is refused by `predict` and `serve` (SPEC erratum 4.9).
pub(crate) fn seeded_refusal(path: &Path, seed: u64) -> String {
    format!(
        "{}: trained with --seed {seed}: its noise can be regenerated from the seed and subtracted, so it is an experiment, not a private release (erratum 4.9); `privpred evaluate` still reads it. Train again without --seed (OS-seeded noise) to get a model that predict and serve accept",
        path.display()
    )
}

/// Runs `privpred predict`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if super::nn_artifact::is_nn_artifact(&args.model) {
        #[cfg(feature = "nn")]
        return nn::run(&args);
        #[cfg(not(feature = "nn"))]
        return Err(super::nn_artifact::needs_nn_feature(&args.model));
    }
    let loaded = load_model(&args.model).map_err(lin)?;
    if let Some(seed) = loaded.experiment_seed() {
        return Err(usage(seeded_refusal(&args.model, seed)));
    }
    let warning = invalid_guarantee(
        &args.model,
        loaded.private().map(|p| &p.calibration),
        args.allow_invalid_guarantee,
    )?;
    let raw = read_queries(&args.input, loaded.preprocessing.input_dim())?;
    let mut rows = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let x = loaded
            .preprocessing
            .apply_row(r)
            .map_err(|e| usage(format!("query {}: {e}", i + 1)))?;
        privpred_linear::check_query(&x, loaded.model.input_dim())
            .map_err(|e| usage(format!("query {}: {e}", i + 1)))?;
        rows.push(x);
    }
    let refs: Vec<&[f32]> = rows.iter().map(|r| r.as_slice()).collect();
    let mut rng = privpred_core::noise::release_rng()?;
    let answers: Vec<(u32, Option<Vec<f64>>)> = match &loaded.model {
        StoredModel::NonPrivate(m) => refs
            .iter()
            .map(|x| (m.predict(x), Some(m.logits(x))))
            .collect(),
        StoredModel::Private(p) => {
            if p.spends_budget() {
                let budget = p
                    .calibration
                    .budget()
                    .get()
                    .ok_or_else(|| usage("model spends budget but has none recorded"))?;
                spend(
                    &args.model,
                    &loaded.weights_sha256,
                    budget,
                    refs.len() as u64,
                    args.init_ledger,
                )?;
            }
            p.try_predict(&refs, &mut rng)
                .map_err(lin)?
                .into_iter()
                .map(|a| (a.label, a.scores))
                .collect()
        }
    };
    print_answers(&answers, args.json, warning.as_deref())?;
    Ok(())
}

/// `privpred predict` with a deep-model artifact.
#[cfg(feature = "nn")]
mod nn {
    use super::{Args, print_answers, read_queries, spend};
    use crate::cmd::nn_artifact::{self, nn_err};
    use crate::exit::usage;

    pub fn run(args: &Args) -> anyhow::Result<()> {
        let model = nn_artifact::load(&args.model)?;
        if let Some(seed) = nn_artifact::experiment_seed(&args.model, &model)? {
            return Err(usage(super::seeded_refusal(&args.model, seed)));
        }
        let warning = super::invalid_guarantee(
            &args.model,
            model.header.calibration.as_ref(),
            args.allow_invalid_guarantee,
        )?;
        let raw = read_queries(&args.input, model.input_dim())?;
        let refs: Vec<&[f32]> = raw.iter().map(|r| r.as_slice()).collect();
        // validate every row before anything is spent
        model.check_rows(&refs).map_err(usage)?;
        if model.spends_budget() {
            let budget = model
                .header
                .calibration
                .as_ref()
                .and_then(|c| c.budget().get())
                .ok_or_else(|| usage("teacher ensemble without a finite budget B recorded"))?;
            spend(
                &args.model,
                &model.weights_sha256,
                budget,
                refs.len() as u64,
                args.init_ledger,
            )?;
        }
        let mut rng = privpred_core::noise::release_rng()?;
        let answers: Vec<(u32, Option<Vec<f64>>)> = model
            .predict(&refs, &mut rng)
            .map_err(nn_err)?
            .into_iter()
            .map(|a| (a.label, a.scores))
            .collect();
        print_answers(&answers, args.json, warning.as_deref())
    }
}
