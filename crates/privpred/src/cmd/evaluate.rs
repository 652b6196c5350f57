//! `privpred evaluate`: test accuracy of a trained model, mean and standard deviation over R
//! draws of the prediction mechanism (private-prediction methods draw fresh noise for every
//! answer; privately trained and non-private models are deterministic, std 0).
//!
//! Evaluation is a study activity on labelled test data: it does not touch the model's
//! inference-budget ledger (`privpred predict` does).
//!
//! Deep models (`privpred-nn` artifacts: a DP-SGD ResNet, a teacher ensemble or a
//! non-private ResNet) go through the same command when the binary is built with
//! `--features nn`; the test images are read as raw pixels and the model's own normalisation
//! is applied. Teachers' votes are computed once and the exponential mechanism is drawn
//! afresh in each repetition.

use crate::exit::usage;
use anyhow::Context;
use privpred_data::{DatasetSpec, LoadOptions, load};
use privpred_linear::LinearError;
use privpred_linear::artifact::{LoadedModel, StoredModel};
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
    /// The table's schema. Default: the one recorded in the model (a table is always read
    /// through it); a different schema is refused.
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Number of independent draws of the mechanism R ≥ 1.
    #[arg(long, default_value_t = 1)]
    pub repetitions: usize,
    /// Experiment seed for the mechanism's draws (default: OS random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
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

/// Runs `privpred evaluate`.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::limits::count(
        "repetitions",
        args.repetitions as u64,
        1,
        crate::limits::MAX_REPETITIONS,
        "MAX_REPETITIONS",
    )?;
    // evaluation reads a seeded model too (an experiment); it answers nothing from a budget
    let released = args.keys.open(&args.model)?;
    let uncovered = match &released.coverage {
        privpred_release::Coverage::NotCovered(why) => {
            eprintln!(
                "privpred evaluate: WARNING: the model is not covered by a trusted signature ({why}); the output is marked not covered"
            );
            Some(why.clone())
        }
        privpred_release::Coverage::Signed(_) => None,
    };
    let uncovered = uncovered.as_deref();
    match released.model {
        privpred_release::Model::Linear(m) => run_linear(&args, *m, uncovered),
        #[cfg(feature = "nn")]
        privpred_release::Model::Resnet(m) => nn::run(&args, *m, uncovered),
    }
}

fn run_linear(args: &Args, loaded: LoadedModel, uncovered: Option<&str>) -> anyhow::Result<()> {
    let spec = DatasetSpec::parse(&args.dataset)?;
    let stored = loaded.preprocessing.schema.clone();
    let schema = match (super::shared::read_schema(args.schema.as_deref())?, stored) {
        (Some(given), Some(stored)) if given != stored => {
            return Err(usage(
                "--schema differs from the schema recorded in the model: the test table must be read the way the training table was (leave --schema out to use the model's)",
            ));
        }
        (given, stored) => stored.or(given),
    };
    let opts = LoadOptions {
        data_dir: args.data_dir.clone(),
        schema,
        // the model's declared classes for data without published ones (csv-pixels:, idx:)
        classes: Some(loaded.preprocessing.input_classes).filter(|_| declares_classes(&spec)),
        ..LoadOptions::default()
    };
    let splits = load(&spec, &opts).with_context(|| format!("loading dataset {}", args.dataset))?;
    if splits.test.provenance.needs_schema {
        return Err(usage(format!(
            "{}: {}",
            args.dataset,
            privpred_data::schema::NEEDS_SCHEMA
        )));
    }
    if splits.test.d != loaded.preprocessing.input_dim() {
        return Err(usage(format!(
            "dimension mismatch: dataset {} has {} raw features, the model's preprocessing expects {}",
            args.dataset,
            splits.test.d,
            loaded.preprocessing.input_dim()
        )));
    }
    let test = loaded.preprocessing.apply_owned(splits.test)?;
    let model_classes = loaded.model.classes();
    // a table read through a schema must have the model's classes (the labels index them)
    if test.classes > model_classes || (args.schema.is_some() && test.classes != model_classes) {
        return Err(usage(format!(
            "dataset {} has {} classes, the model {model_classes}: the test set's classes must be the model's (a schema's `classes` list the training table's, in its order)",
            args.dataset, test.classes
        )));
    }
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
    let out = match &loaded.model {
        StoredModel::NonPrivate(m) => json!({
            "method": "non-private", "calibration": null, "epsilon": null, "delta": null, "budget": null,
            "classes": m.c, "input_dim": m.d,
        }),
        StoredModel::Private(p) => {
            let c = &p.calibration;
            json!({
                "method": c.method().name(), "calibration": c.mode().name(),
                "neighbours": c.neighbours().name(), "loss": c.assumptions.loss.name(),
                "epsilon": c.epsilon(), "delta": c.delta(), "budget": c.budget().get(),
                "valid_guarantee": c.is_valid(), "n": c.assumptions.n, "lambda": p.lambda(),
                "teachers": p.teachers(), "clip": p.clip(), "classes": p.classes(), "input_dim": p.input_dim(),
            })
        }
    };
    report(
        args,
        out,
        Output {
            kind: "",
            accs: &accs,
            test_examples: test.n,
            labels: &[],
            uncovered,
        },
    )
}

/// Whether `spec` is a source whose class count the caller declares (`LoadOptions::classes`).
fn declares_classes(spec: &DatasetSpec) -> bool {
    matches!(
        spec,
        DatasetSpec::CsvPixels { .. } | DatasetSpec::Idx(_) | DatasetSpec::Csv { .. }
    )
}

/// What `evaluate`'s output is, in its JSON (`output_private: false`) and its text: a
/// statistic of the test data without noise, its queries outside the model's ledger.
pub(crate) const NOT_PRIVATE_NOTICE: &str = "not private: this accuracy is measured on the test data without noise and its queries are not charged to the model's budget ledger; the model's guarantee (valid_guarantee) covers its release, not this output (publish it only for public test data)";

/// Mean and sample standard deviation (0 for a single value) of the accuracies.
fn mean_std(accs: &[f64]) -> (f64, f64) {
    let r = accs.len() as f64;
    let mean = accs.iter().sum::<f64>() / r;
    let std = if accs.len() > 1 {
        (accs.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (r - 1.0)).sqrt()
    } else {
        0.0
    };
    (mean, std)
}

/// What an evaluation measured, for [`report`].
struct Output<'a> {
    /// The model family, e.g. " ResNet" (empty for linear models).
    kind: &'a str,
    /// One accuracy per repetition.
    accs: &'a [f64],
    /// Test examples.
    test_examples: usize,
    /// The dataset's provenance labels, shown in brackets.
    labels: &'a [String],
    /// Why the model is not covered by a trusted signature (opened with `--allow-unsigned`).
    uncovered: Option<&'a str>,
}

/// What marks the output of a model opened with `--allow-unsigned` (text and JSON).
fn not_covered_line(why: &str) -> String {
    format!(
        "not covered: the model is not covered by a trusted signature ({why}), so nothing here is vouched for by its owner's key"
    )
}

/// Adds the accuracy summary and the test set to `out` (the model's description) and prints it:
/// one JSON object with `--json`, else one line, then the notices (not private; not covered
/// by a trusted signature, when so).
fn report(args: &Args, mut out: serde_json::Value, o: Output<'_>) -> anyhow::Result<()> {
    let Output {
        kind,
        accs,
        test_examples,
        labels,
        uncovered,
    } = o;
    let (mean, std) = mean_std(accs);
    out["accuracy"] = json!({"mean": mean, "std": std, "repetitions": args.repetitions});
    out["dataset"] = json!(args.dataset);
    out["test_examples"] = json!(test_examples);
    out["output_private"] = json!(false);
    out["notice"] = json!(NOT_PRIVATE_NOTICE);
    if let Some(why) = uncovered {
        out["covered"] = json!(false);
        out["not_covered"] = json!(why);
    }
    if args.json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        println!(
            "{}{kind} ({}): test accuracy {:.2} % ± {:.2} over {} repetition(s) on {} test examples of {}{}",
            out["method"].as_str().unwrap_or("?"),
            out["calibration"].as_str().unwrap_or("no guarantee"),
            100.0 * mean,
            100.0 * std,
            args.repetitions,
            test_examples,
            args.dataset,
            if labels.is_empty() {
                String::new()
            } else {
                format!(" [{}]", labels.join("; "))
            }
        );
        println!("{NOT_PRIVATE_NOTICE}");
        if let Some(why) = uncovered {
            println!("{}", not_covered_line(why));
        }
    }
    Ok(())
}

/// `privpred evaluate` of a deep-model artifact.
#[cfg(feature = "nn")]
mod nn {
    use super::Args;
    use crate::cmd::nn_artifact::{self, nn_err};
    use crate::exit::usage;
    use anyhow::Context;
    use privpred_data::{DatasetSpec, LoadOptions, load};
    use privpred_nn::artifact::{ModelKind, NnModel};
    use serde_json::json;

    pub fn run(args: &Args, model: NnModel, uncovered: Option<&str>) -> anyhow::Result<()> {
        let spec = DatasetSpec::parse(&args.dataset)?;
        let opts = LoadOptions {
            data_dir: args.data_dir.clone(),
            ..LoadOptions::default()
        };
        let splits =
            load(&spec, &opts).with_context(|| format!("loading dataset {}", args.dataset))?;
        let test = &splits.test;
        if test.d != model.input_dim() {
            return Err(usage(format!(
                "dimension mismatch: dataset {} has {} raw features per example, the model takes {} raw pixels ({}×{}×{})",
                args.dataset,
                test.d,
                model.input_dim(),
                model.header.config.in_channels,
                model.header.config.image_size,
                model.header.config.image_size
            )));
        }
        if test.classes > model.classes() {
            return Err(usage(format!(
                "dataset {} has {} classes, the model {}",
                args.dataset,
                test.classes,
                model.classes()
            )));
        }
        let rows: Vec<&[f32]> = (0..test.n).map(|i| test.row(i)).collect();
        let logits = model
            .member_logits(&rows)
            .map_err(|e| usage(format!("dataset {}: {e}", args.dataset)))?;
        let mut rng = match args.seed {
            Some(s) => privpred_core::noise::seeded_rng(s),
            None => privpred_core::noise::release_rng()?,
        };
        let deterministic = model.header.kind != ModelKind::Teachers;
        let mut accs = Vec::with_capacity(args.repetitions);
        let mut first: Option<f64> = None;
        for _ in 0..args.repetitions {
            let acc = match (deterministic, first) {
                (true, Some(a)) => a,
                _ => {
                    let answers = model
                        .answers_from_logits(&logits, &mut rng)
                        .map_err(nn_err)?;
                    answers
                        .iter()
                        .zip(&test.labels)
                        .filter(|(a, y)| a.label == **y)
                        .count() as f64
                        / test.n.max(1) as f64
                }
            };
            first.get_or_insert(acc);
            accs.push(acc);
        }
        let h = &model.header;
        let c = h.calibration.as_ref();
        let out = json!({
            "method": nn_artifact::kind_name(&model),
            "model": "resnet",
            "architecture": h.config,
            "calibration": c.map(|c| c.mode().name()),
            "neighbours": c.map(|c| c.neighbours().name()),
            "epsilon": c.map(|c| c.epsilon()),
            "delta": c.map(|c| c.delta()),
            "budget": c.and_then(|c| c.budget().get()),
            "valid_guarantee": c.map(|c| c.is_valid()),
            "teachers": (h.kind == ModelKind::Teachers).then_some(h.members),
            "noise_multiplier": c.and_then(|c| c.mechanism.noise_multiplier()),
            "classes": model.classes(),
            "input_dim": model.input_dim(),
            "trained_on": h.data_source,
            "dataset_labels": test.provenance.labels,
        });
        super::report(
            args,
            out,
            super::Output {
                kind: " ResNet",
                accs: &accs,
                test_examples: test.n,
                labels: &test.provenance.labels,
                uncovered,
            },
        )
    }
}
