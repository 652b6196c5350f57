//! `privpred evaluate`: test accuracy of a trained model, mean and standard deviation over R
//! draws of the prediction mechanism (private-prediction methods draw fresh noise for every
//! answer; privately trained and non-private models are deterministic, std 0).
//!
//! Evaluation is a study activity on labelled test data: it does not touch the model's
//! inference-budget ledger (`privpred predict` does).

use crate::exit::usage;
use anyhow::Context;
use privpred_data::{DatasetSpec, LoadOptions, load};
use privpred_linear::LinearError;
use privpred_linear::artifact::{StoredModel, load as load_model};
use privpred_linear::train::accuracy;
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `privpred evaluate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file written by `privpred train`.
    #[arg(long)]
    pub model: PathBuf,
    /// Dataset whose test split is evaluated (raw features; the model's preprocessing is applied).
    #[arg(long)]
    pub dataset: String,
    /// Directory searched first for the dataset files.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Number of independent draws of the mechanism R ≥ 1.
    #[arg(long, default_value_t = 1)]
    pub repetitions: usize,
    /// Experiment seed for the mechanism's draws (default: OS random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn lin(e: LinearError) -> anyhow::Error {
    if e.is_user_error() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// Runs `privpred evaluate`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.repetitions == 0 {
        return Err(usage("invalid repetitions = 0: must be an integer >= 1"));
    }
    let loaded = load_model(&args.model).map_err(lin)?;
    let spec = DatasetSpec::parse(&args.dataset)?;
    let opts = LoadOptions {
        data_dir: args.data_dir.clone(),
        ..LoadOptions::default()
    };
    let splits = load(&spec, &opts).with_context(|| format!("loading dataset {}", args.dataset))?;
    if splits.test.d != loaded.preprocessing.input_dim() {
        return Err(usage(format!(
            "dimension mismatch: dataset {} has {} raw features, the model's preprocessing expects {}",
            args.dataset,
            splits.test.d,
            loaded.preprocessing.input_dim()
        )));
    }
    let test = loaded.preprocessing.apply(&splits.test)?;
    let mut rng = match args.seed {
        Some(s) => privpred_core::noise::seeded_rng(s),
        None => privpred_core::noise::release_rng()?,
    };
    let mut accs = Vec::with_capacity(args.repetitions);
    for _ in 0..args.repetitions {
        accs.push(match &loaded.model {
            StoredModel::NonPrivate(m) => accuracy(m, &test).map_err(lin)?,
            StoredModel::Private(p) => p.accuracy(&test, &mut rng).map_err(lin)?,
        });
    }
    let r = accs.len() as f64;
    let mean = accs.iter().sum::<f64>() / r;
    let std = if accs.len() > 1 {
        (accs.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (r - 1.0)).sqrt()
    } else {
        0.0
    };
    let out = match &loaded.model {
        StoredModel::NonPrivate(m) => json!({
            "method": "non-private", "calibration": null, "epsilon": null, "delta": null, "budget": null,
            "classes": m.c, "input_dim": m.d,
        }),
        StoredModel::Private(p) => {
            let c = &p.calibration;
            json!({
                "method": c.method.name(), "calibration": c.calibration.name(),
                "epsilon": c.privacy.epsilon, "delta": c.privacy.delta, "budget": c.budget.get(),
                "valid_guarantee": c.valid_guarantee, "n": c.assumptions.n, "lambda": p.lambda,
                "teachers": p.teachers, "clip": p.clip, "classes": p.classes(), "input_dim": p.input_dim(),
            })
        }
    };
    let mut out = out;
    out["accuracy"] = json!({"mean": mean, "std": std, "repetitions": args.repetitions});
    out["dataset"] = json!(args.dataset);
    out["test_examples"] = json!(test.n);
    if args.json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        println!(
            "{} ({}): test accuracy {:.2} % ± {:.2} over {} repetition(s) on {} test examples of {}",
            out["method"].as_str().unwrap_or("?"),
            out["calibration"].as_str().unwrap_or("no guarantee"),
            100.0 * mean,
            100.0 * std,
            args.repetitions,
            test.n,
            args.dataset
        );
    }
    Ok(())
}
