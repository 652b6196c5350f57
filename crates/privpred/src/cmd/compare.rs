//! `privpred compare`: every applicable method over a grid of ε and B, with a recommendation
//! that says where the decision changes, an HTML report and JSON for machines.

use privpred_core::CalibrationMode;
use privpred_core::ParamGuard;
use privpred_study::compare::{self, GRID_SYNTAX};
use privpred_study::linear::LinearRunner;
use privpred_study::params::LinearParams;
use privpred_study::progress::{self, Observer, Silent};
use privpred_study::report::{self, Provenance};
use privpred_study::selection::{Choice, SelectionOptions};

use super::args::ValueOrCv;
use std::path::PathBuf;

/// What `compare`'s output is (text, JSON `output_private: false`, the HTML report's list of
/// data-dependent steps): accuracies measured on the data without noise, from draws of a
/// fixed seed, so a deterministic function of the data set outside any guarantee.
const NOT_PRIVATE_NOTICE: &str = "not private: every accuracy here is measured on the data set without noise (the non-private baseline's too), from draws of a fixed seed, outside any guarantee; on a private table, choosing a method from it is a selection the trained model's guarantee does not cover. Compare on a public proxy table, or train with a private selection (--lambda private) whose cost is part of the guarantee (docs/guarantees.md#what-is-public)";

/// Arguments of `privpred compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset: mnist, fashion-mnist, digits, breast-cancer, wine, fair, csv:PATH, parquet:PATH,
    /// csv-pixels:PATH, idx:DIR, ...
    #[arg(long, default_value = "mnist")]
    pub dataset: String,
    /// A table's schema (JSON; docs/tables.md): needed for csv: and parquet: tables.
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Directory searched first for datasets.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Privacy loss ε > 0: one value or a grid — a comma-separated list of values and ranges
    /// LO..HI:N (N points from LO to HI, geometrically spaced), e.g. `1` or `0.1,1,10` or
    /// `0.1..10:5`.
    #[arg(long)]
    pub epsilon: String,
    /// Privacy failure probability δ in [0, 1).
    #[arg(long, default_value_t = 0.0)]
    pub delta: f64,
    /// Inference budget B (answers the guarantee must cover): one value or a grid, same syntax
    /// as --epsilon with whole numbers (range points are rounded), e.g. `100` or
    /// `1,10,100,1000` or `1..1000:10`.
    #[arg(long)]
    pub budget: String,
    /// Calibration mode.
    #[arg(long, value_enum, default_value = "corrected")]
    pub calibration: CalibrationMode,
    /// Subsample-and-aggregate teachers T (default: the public rule clamp(⌊N/6⌋, 1, 256) of
    /// the N training rows, docs/tables.md).
    #[arg(long)]
    pub teachers: Option<usize>,
    /// DP-SGD's expected batch size (at most the rows of the training set's 90 % part, on
    /// which its clip is selected; DP-SGD is listed as not applicable otherwise; default: the
    /// public rule clamp(⌊√N⌋, 1, 256) of the N training rows).
    #[arg(long)]
    pub dpsgd_batch_size: Option<usize>,
    /// DP-SGD's epochs (> 0; default: the public rule's for each ε, 20·max(1, ε)^0.4 capped at
    /// 100, docs/tables.md; with --quick 5).
    #[arg(long)]
    pub dpsgd_epochs: Option<f64>,
    /// Repetitions (noise draws) per method and grid point.
    #[arg(long, default_value_t = 10)]
    pub repetitions: u32,
    /// Subsample the data for a fast first answer (5,000 train / 2,000 test).
    #[arg(long)]
    pub quick: bool,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The neighbouring relation every method is calibrated for (docs/guarantees.md#neighbouring-relations); methods without
    /// an analysis under it are listed as not applicable.
    #[arg(long, value_enum, default_value_t = privpred_core::Neighbours::ReplaceOne)]
    pub neighbours: privpred_core::Neighbours,
    /// The bias feature's value v in [0, 1): rows become [x·√(1 − v²), v]; 0 = none (the
    /// default, chosen on the training hold-out, docs/study.md; before: √½).
    #[arg(long, allow_negative_numbers = true)]
    pub bias: Option<String>,
    /// With `--lambda cv` / `--clip cv`: private draws averaged per cross-validated λ or
    /// DP-SGD clip ν (1..=1000; default 5, chosen on the training hold-out, docs/study.md).
    #[arg(long, default_value_t = privpred_study::linear::CV_DRAWS_DEFAULT)]
    pub cv_draws: usize,
    /// L2 strength λ of model sensitivity, loss perturbation and prediction sensitivity: a
    /// public value > 0 (chosen without the data: costs nothing; default: the public rule
    /// from N, d, C, ε and B, as `train`, docs/tables.md),
    /// `private` (the private split selection over the grid {1e-5, …, 0.5}: inside the
    /// guarantee, the release trained on the 80 % of the training set the selection does not
    /// use; replace-one only) or `cv` (the paper's selection on a hold-out of the training data
    /// without privacy: outside the guarantee, and every row says so).
    #[arg(long, allow_negative_numbers = true, value_parser = super::args::positive_or_cv)]
    pub lambda: Option<ValueOrCv>,
    /// DP-SGD's clip ν: a public value > 0 (costs nothing; default the public rule's 1, as
    /// `train`), `private`
    /// (private split selection over {5e-4, …, 0.5}, inside the guarantee; replace-one only) or
    /// `cv` (non-private hold-out selection, outside the guarantee).
    #[arg(long, allow_negative_numbers = true, value_parser = super::args::positive_or_cv)]
    pub clip: Option<ValueOrCv>,
    /// Also write one self-contained HTML report here (plots, tables, guarantees, provenance).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print the result as one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// `--lambda` / `--clip` as the runner's selection options: `train`'s public defaults unless
/// given; `private` under add-remove neighbours is a usage error (exit 2).
fn selection(args: &Args) -> anyhow::Result<SelectionOptions> {
    let choice = |v: Option<ValueOrCv>, default: Choice| match v {
        None => default,
        Some(ValueOrCv::Value(x)) => Choice::Value(x),
        Some(ValueOrCv::Private) => Choice::Private,
        Some(ValueOrCv::Cv) => Choice::Cv,
    };
    // the public rule reads the study's size: N, the N̂ it declares under add-remove
    let (lambda, clip) = (Choice::Rule, privpred_core::public_rule::DPSGD_CLIP);
    let s = SelectionOptions::new(
        choice(args.lambda, lambda),
        choice(args.clip, Choice::Value(clip)),
    );
    if s.uses_private_split() && args.neighbours != privpred_core::Neighbours::ReplaceOne {
        return Err(crate::exit::usage(format!(
            "--lambda/--clip private under --neighbours {}: the private split selection is analysed for replace-one neighbours only (its parts' sizes would depend on N); use --neighbours replace-one or a public value",
            args.neighbours
        )));
    }
    Ok(s)
}

/// The teachers T and DP-SGD's batch size: as given, or the public rule's for the training
/// set's size (the study's N, which it declares as N̂ under add-remove); DP-SGD's epochs: as
/// given, `--quick`'s short schedule, or `None` (the public rule's at each ε).
fn sizes(args: &Args, runner: &LinearRunner) -> anyhow::Result<(usize, usize, Option<f64>)> {
    let epochs = args.dpsgd_epochs.or(args
        .quick
        .then_some(privpred_core::defaults::LINEAR_DPSGD_EPOCHS_QUICK));
    if let (Some(t), Some(b)) = (args.teachers, args.dpsgd_batch_size) {
        return Ok((t, b, epochs));
    }
    let n = runner
        .train_size(&args.dataset)
        .map_err(super::shared::study_error)?;
    let add_remove = args.neighbours == privpred_core::Neighbours::AddRemove;
    let n = privpred_core::public_rule::PublicN::new(args.neighbours, n, add_remove.then_some(n))
        .ok_or_else(|| {
        crate::exit::usage(format!(
            "the data set {} has no training rows",
            args.dataset
        ))
    })?;
    Ok((
        args.teachers
            .unwrap_or(privpred_core::public_rule::teachers(n)),
        args.dpsgd_batch_size
            .unwrap_or(privpred_core::public_rule::dpsgd_batch_size(n)),
        epochs,
    ))
}

/// Runs `privpred compare`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (epsilons, budgets) = grid_axes(&args)?;
    let selection = selection(&args)?;
    let (bias, cv_draws) =
        super::reproduce::bias_and_cv_draws(args.bias.as_deref(), args.cv_draws)?;
    let opts = LinearParams::new(args.quick)
        .data_dir(args.data_dir.clone())
        .dataset(Some(args.dataset.clone()))
        .schema(super::shared::read_schema(args.schema.as_deref())?)
        .neighbours(args.neighbours)
        .bias(bias)
        .cv_draws(cv_draws)
        .selection(selection)
        // each method's loss as `train` picks it: the sigmoid on two classes
        .sigmoid_for_two_classes(true)
        // given values checked here; the runner then takes the defaults' (`sizes`)
        .dpsgd_batch_size(args.dpsgd_batch_size.unwrap_or(1))
        .dpsgd_epochs(args.dpsgd_epochs.unwrap_or(1.0))
        .check()
        .map_err(crate::exit::usage)?;
    let runner = LinearRunner::new(opts);
    let (teachers, batch, epochs) = sizes(&args, &runner)?;
    let runner = runner
        .with_dpsgd_batch_size(batch)
        .with_dpsgd_epochs(epochs);
    let points = epsilons.len() * budgets.len();
    let observer: Box<dyn Observer> = if points > 1 {
        progress::for_terminal()
    } else {
        Box::new(Silent)
    };
    let g = compare::compare_grid(
        &runner,
        &compare::GridRequest {
            epsilons: &epsilons,
            delta: args.delta,
            budgets: &budgets,
            teachers,
            calibration: args.calibration,
            repetitions: args.repetitions,
            seed: args.seed,
        },
        observer.as_ref(),
    )
    .map_err(super::shared::study_error)?;
    let mut prov = Provenance {
        command: super::shared::command_line(),
        dataset: args.dataset.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        seed: args.seed,
        quick: args.quick,
        bias: Some(bias),
        // the hold-out draws count only where a value is cross-validated
        cv_draws: (selection.lambda == Choice::Cv || selection.clip == Choice::Cv)
            .then_some(cv_draws),
        selection: Some(selection.describe()),
        ..Provenance::default()
    };
    if let Some(r) = g.cells.first().and_then(|c| c.results.first()) {
        prov = prov.with_measurement(&r.example);
    }
    // the comparison itself: the report's page, its JSON and its text say so
    prov.data_dependent = if prov.data_dependent.is_empty() {
        NOT_PRIVATE_NOTICE.to_string()
    } else {
        format!("{}; {NOT_PRIVATE_NOTICE}", prov.data_dependent)
    };
    let guarantees = report::compare_guarantees(&g, &|eps| runner.dpsgd_config(eps));
    if let Some(path) = &args.report {
        let html =
            report::compare_html(&g, &guarantees, &prov).map_err(super::shared::study_error)?;
        report::write_report(path, &html).map_err(super::shared::study_error)?;
        eprintln!("report: {}", path.display());
    }
    if args.json {
        let out = serde_json::json!({
            "dataset": args.dataset,
            "quick": args.quick,
            "bias": bias,
            "cv_draws": cv_draws,
            "selection": selection,
            "nonprivate_accuracy": g.nonprivate(),
            "grid": g,
            "decisions": decisions_json(&g),
            "guarantees": guarantees,
            "provenance": prov,
            "grid_syntax": GRID_SYNTAX,
            "output_private": false,
            "notice": NOT_PRIVATE_NOTICE,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{NOT_PRIVATE_NOTICE}");
    println!(
        "Dataset: {}{}",
        args.dataset,
        if args.quick {
            " (--quick: subsampled)"
        } else {
            ""
        }
    );
    if points == 1 {
        println!("{}", compare::render(g.cell(0, 0)));
    } else {
        println!("{}", compare::render_grid(&g));
        let t = &g.timing;
        let cpu = |c: Option<f64>| c.map_or(String::new(), |c| format!(", {c:.1} s CPU"));
        println!(
            "Time: shared fits (first B of each ε) {:.1} s wall{}; the rest of the grid {:.1} s wall{}.",
            t.fits_wall_s,
            cpu(t.fits_cpu_s),
            t.grid_wall_s,
            cpu(t.grid_cpu_s)
        );
    }
    Ok(())
}

/// The ε and B axes from `--epsilon` and `--budget`, with every (ε, δ), B, the repetitions, T
/// and `--report` checked (usage errors, exit 2).
fn grid_axes(args: &Args) -> anyhow::Result<(Vec<f64>, Vec<u64>)> {
    let usage = |e: privpred_study::StudyError| crate::exit::usage(e);
    let epsilons = compare::parse_epsilons(&args.epsilon).map_err(usage)?;
    let budgets = compare::parse_budgets(&args.budget).map_err(usage)?;
    for &e in &epsilons {
        privpred_core::Privacy::new(e, args.delta)?;
    }
    for &b in &budgets {
        privpred_core::Budget::finite(b)?;
    }
    use crate::limits::{MAX_REPETITIONS, MAX_TEACHERS, count};
    count(
        "repetitions",
        args.repetitions.into(),
        1,
        MAX_REPETITIONS,
        "MAX_REPETITIONS",
    )?;
    if let Some(t) = args.teachers {
        count("teachers", t as u64, 1, MAX_TEACHERS, "MAX_TEACHERS")?;
    }
    if let Some(p) = &args.report
        && (p.as_os_str().is_empty() || p.is_dir())
    {
        return Err(crate::exit::usage(format!(
            "invalid --report `{}`: a file path for the HTML report (not a directory)",
            p.display()
        )));
    }
    Ok((epsilons, budgets))
}

/// The decisions of `--json`: along B at each ε, and along ε at each B when there are several ε.
fn decisions_json(g: &compare::GridComparison) -> serde_json::Value {
    let over_budget: Vec<serde_json::Value> = (0..g.epsilons.len())
        .map(|i| {
            let d = g.decision_over_budget(i);
            let mut v = serde_json::to_value(&d).unwrap_or_default();
            v["text"] = serde_json::json!(d.text());
            v
        })
        .collect();
    let over_epsilon: Vec<serde_json::Value> = if g.epsilons.len() > 1 {
        (0..g.budgets.len())
            .map(|j| {
                let d = g.decision_over_epsilon(j);
                let mut v = serde_json::to_value(&d).unwrap_or_default();
                v["text"] = serde_json::json!(d.text());
                v
            })
            .collect()
    } else {
        Vec::new()
    };
    serde_json::json!({ "over_budget": over_budget, "over_epsilon": over_epsilon })
}
