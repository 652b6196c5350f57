//! `privpred audit`: empirical lower bound on ε for a method's claimed guarantee, from a
//! worst-case pair of neighbouring datasets, the product's own calibration and samplers, and
//! the optimal distinguishing test with Clopper–Pearson confidence bounds; `privpred audit
//! floating-point`: the reachability attack on the samplers' exact bits, and their timing.

use privpred_audit::{AuditReport, AuditRequest, AuditSetting};
use privpred_core::{CalibrationMode, Method, Neighbours, Privacy};

/// Arguments of `privpred audit`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to audit: a method (model-sensitivity, loss-perturbation, dp-sgd,
    /// prediction-sensitivity, subsample-aggregate), or `floating-point`: whether the exact bits
    /// of the samplers' releases tell neighbouring inputs apart, and what their timing reveals
    /// (uses --trials as draws per sampler, --seed, --confidence, --json).
    #[arg(value_parser = parse_target, value_name = "METHOD|floating-point")]
    pub method: Target,
    /// Which calibration's claim to audit.
    #[arg(long, value_enum, default_value_t = CalibrationMode::Corrected)]
    pub calibration: CalibrationMode,
    /// The claimed ε (> 0; required to audit a method).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// The claimed δ in [0, 1) (DP-SGD needs δ > 0).
    #[arg(long, default_value_t = 0.0)]
    pub delta: f64,
    /// Inference budget B (private-prediction methods): answers to the same query per trial.
    #[arg(long, default_value_t = 1)]
    pub budget: u64,
    /// Trials per dataset (half choose the test, half bound ε).
    #[arg(long, default_value_t = 100_000)]
    pub trials: usize,
    /// Seed of the trials (audits are experiments: deterministic from the seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Confidence of the lower bound, in (0, 1).
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Training-set size N (model/prediction sensitivity, loss perturbation).
    #[arg(long, default_value_t = AuditSetting::default().n)]
    pub n: usize,
    /// L2 regularisation λ.
    #[arg(long, default_value_t = AuditSetting::default().lambda)]
    pub lambda: f64,
    /// Number of classes C.
    #[arg(long, default_value_t = AuditSetting::default().classes)]
    pub classes: usize,
    /// Input dimension D (model sensitivity releases D·C parameters).
    #[arg(long, default_value_t = AuditSetting::default().features)]
    pub features: usize,
    /// Number of teachers T (subsample-and-aggregate).
    #[arg(long, default_value_t = AuditSetting::default().teachers)]
    pub teachers: usize,
    /// DP-SGD training-set size.
    #[arg(long, default_value_t = AuditSetting::default().dpsgd_n)]
    pub dpsgd_n: usize,
    /// DP-SGD expected batch size b (q = b/N).
    #[arg(long, default_value_t = AuditSetting::default().batch_size)]
    pub batch_size: usize,
    /// DP-SGD epochs.
    #[arg(long, default_value_t = AuditSetting::default().epochs)]
    pub epochs: f64,
    /// DP-SGD parameter tensors clipped separately by the reference code (`paper` mode only:
    /// erratum 4.2; `corrected`/`tight` clip jointly).
    #[arg(long, default_value_t = AuditSetting::default().tensors)]
    pub tensors: usize,
    /// The neighbouring relation of the audited claim (docs/guarantees.md#neighbouring-relations): the product is calibrated
    /// for it and audited on that relation's worst-case pair.
    #[arg(long, value_enum, default_value_t = Neighbours::ReplaceOne)]
    pub neighbours: Neighbours,
    /// DP-SGD: audit on a replace-one pair even when the claim is for `--neighbours
    /// add-remove` (shows what an add/remove guarantee delivers for replace-one).
    #[arg(long)]
    pub replace_one: bool,
    /// Loss perturbation: audit the proof's noise term alone, against its ε/2 share of the
    /// claim, on the pair that moves b by the relation's full sensitivity (2K replace-one, K
    /// add-remove); b has D·C = features × classes coordinates.
    #[arg(long)]
    pub noise_term: bool,
    /// Training-set size of the end-to-end loss-perturbation audit.
    #[arg(long, default_value_t = AuditSetting::default().e2e_n)]
    pub e2e_n: usize,
    /// DP-SGD: train the product's DP-SGD on D and D′ every trial (final model only) instead
    /// of simulating the noisy gradients. (Loss perturbation is always end to end.)
    #[arg(long)]
    pub end_to_end: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `privpred audit` audits.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// A method's claimed guarantee.
    Method(Method),
    /// The samplers' exact bits and timing.
    FloatingPoint,
}

fn parse_target(s: &str) -> Result<Target, String> {
    use clap::ValueEnum;
    if s == "floating-point" {
        return Ok(Target::FloatingPoint);
    }
    Method::from_str(s, false).map(Target::Method).map_err(|_| {
        let names: Vec<String> = Method::value_variants()
            .iter()
            .filter_map(|m| m.to_possible_value().map(|v| v.get_name().to_string()))
            .collect();
        format!(
            "'{s}' is not a method or floating-point (valid: {}, floating-point)",
            names.join(", ")
        )
    })
}

/// The counts' limits (`crate::limits`), checked before any work: a count near `u64::MAX`
/// would otherwise overflow an allocation or run for ever.
fn check_counts(a: &Args) -> anyhow::Result<()> {
    use crate::limits::*;
    count(
        "trials",
        a.trials as u64,
        8,
        MAX_AUDIT_TRIALS,
        "MAX_AUDIT_TRIALS",
    )?;
    count("budget", a.budget, 1, MAX_AUDIT_BUDGET, "MAX_AUDIT_BUDGET")?;
    count("classes", a.classes as u64, 2, MAX_CLASSES, "MAX_CLASSES")?;
    count(
        "features",
        a.features as u64,
        1,
        MAX_FEATURES,
        "MAX_FEATURES",
    )?;
    count(
        "features × --classes",
        (a.features as u64).saturating_mul(a.classes as u64),
        1,
        MAX_AUDIT_PARAMETERS,
        "MAX_AUDIT_PARAMETERS",
    )?;
    let per_answer = if matches!(a.method, Target::Method(Method::ModelSensitivity)) {
        (a.features as u64) * (a.classes as u64)
    } else {
        1
    };
    let work = (a.trials as u64)
        .saturating_mul(a.budget)
        .saturating_mul(per_answer);
    if work > MAX_AUDIT_WORK {
        return Err(crate::exit::usage(format!(
            "audit too large: --trials {} × --budget {} × {per_answer} released values = {work}, more than {MAX_AUDIT_WORK} (privpred::limits::MAX_AUDIT_WORK); lower --trials",
            a.trials, a.budget
        )));
    }
    count(
        "teachers",
        a.teachers as u64,
        2,
        MAX_TEACHERS,
        "MAX_TEACHERS",
    )?;
    count("n", a.n as u64, 1, MAX_AUDIT_N, "MAX_AUDIT_N")?;
    count("dpsgd-n", a.dpsgd_n as u64, 1, MAX_AUDIT_N, "MAX_AUDIT_N")?;
    count(
        "e2e-n",
        a.e2e_n as u64,
        4,
        MAX_AUDIT_E2E_N,
        "MAX_AUDIT_E2E_N",
    )?;
    count(
        "tensors",
        a.tensors as u64,
        1,
        MAX_AUDIT_TENSORS,
        "MAX_AUDIT_TENSORS",
    )?;
    count(
        "batch-size",
        a.batch_size as u64,
        1,
        a.dpsgd_n as u64,
        "the --dpsgd-n",
    )?;
    if !(a.epochs.is_finite() && a.epochs > 0.0) {
        return Err(crate::exit::usage(format!(
            "invalid --epochs = {}: must be a finite number > 0",
            a.epochs
        )));
    }
    let steps = (a.epochs * a.dpsgd_n as f64 / a.batch_size as f64).ceil();
    if steps > MAX_AUDIT_STEPS as f64 {
        return Err(crate::exit::usage(format!(
            "invalid DP-SGD schedule: --epochs {} × --dpsgd-n {} / --batch-size {} = {steps} steps, more than {MAX_AUDIT_STEPS} (privpred::limits::MAX_AUDIT_STEPS)",
            a.epochs, a.dpsgd_n, a.batch_size
        )));
    }
    Ok(())
}

/// Runs `privpred audit`.
pub fn run(args: Args) -> anyhow::Result<()> {
    check_counts(&args)?;
    let method = match args.method {
        Target::FloatingPoint => return run_floating_point(&args),
        Target::Method(m) => m,
    };
    let epsilon = args.epsilon.ok_or_else(|| {
        crate::exit::usage("--epsilon is required to audit a method (a number > 0)")
    })?;
    let privacy = Privacy::new(epsilon, args.delta)?;
    let req = AuditRequest {
        method,
        calibration: args.calibration,
        privacy,
        budget: args.budget,
        trials: args.trials,
        seed: args.seed,
        confidence: args.confidence,
        setting: AuditSetting {
            n: args.n,
            lambda: args.lambda,
            classes: args.classes,
            features: args.features,
            teachers: args.teachers,
            dpsgd_n: args.dpsgd_n,
            batch_size: args.batch_size,
            epochs: args.epochs,
            tensors: args.tensors,
            replace_one: args.replace_one,
            neighbours: args.neighbours,
            noise_term: args.noise_term,
            e2e_n: args.e2e_n,
        },
        end_to_end: args.end_to_end,
    };
    let report = privpred_audit::audit(&req).map_err(|e| match e {
        privpred_audit::AuditError::InvalidArgument { .. }
        | privpred_audit::AuditError::Unsupported(_)
        | privpred_audit::AuditError::Calibration(_) => crate::exit::usage(e),
        other => anyhow::Error::new(other),
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&json_view(&report))?);
    } else {
        print_text(&report);
    }
    Ok(())
}

/// The `--json` object: `{method, calibration, claimed_epsilon, delta,
/// empirical_epsilon_lower, confidence, trials}` plus the details of the test.
fn json_view(r: &AuditReport) -> serde_json::Value {
    serde_json::json!({
        "method": r.method,
        "calibration": r.calibration,
        "neighbours": r.neighbours,
        "claimed_epsilon": r.claimed_epsilon,
        "delta": r.delta,
        "empirical_epsilon_lower": r.empirical_epsilon_lower,
        "confidence": r.confidence,
        "trials": r.trials,
        "empirical_epsilon_point": r.empirical_epsilon_point,
        "exceeds_claim": r.exceeds_claim,
        "budget": r.budget,
        "noise": r.noise,
        "valid_guarantee": r.valid_guarantee,
        "pair": r.pair,
        "test": r.test,
    })
}

fn print_text(r: &AuditReport) {
    let budget = r
        .budget
        .map_or("unlimited (private model)".to_string(), |b| b.to_string());
    println!("method                  {}", r.method);
    println!(
        "calibration             {}{}",
        r.calibration,
        if r.valid_guarantee {
            ""
        } else {
            " (flagged: not a valid guarantee, docs/guarantees.md#errata)"
        }
    );
    println!(
        "claimed                 epsilon = {}, delta = {}, budget = {budget}, {} neighbours",
        r.claimed_epsilon, r.delta, r.neighbours
    );
    println!("noise                   {}", r.noise);
    println!("pair                    {}", r.pair);
    println!(
        "test                    region {}, t = {:.6} (likelier under {}): D {} / {}, D' {} / {} (evaluation half; {} trials per dataset chose the region)",
        r.test.side,
        r.test.threshold,
        r.test.likelier,
        r.test.hits_d,
        r.test.evaluation_trials,
        r.test.hits_d_prime,
        r.test.evaluation_trials,
        r.test.selection_trials
    );
    println!(
        "empirical epsilon       >= {:.4} at {} confidence (point estimate {:.4}; {} trials per dataset)",
        r.empirical_epsilon_lower, r.confidence, r.empirical_epsilon_point, r.trials
    );
    println!(
        "verdict                 {}",
        if r.exceeds_claim {
            "REFUTED: the lower bound exceeds the claimed epsilon"
        } else {
            "consistent: the lower bound does not exceed the claimed epsilon"
        }
    );
}

/// `privpred audit floating-point`: one row per sampler (the textbook reference, the exact
/// selections, the f64 releases of noisy logits).
fn run_floating_point(args: &Args) -> anyhow::Result<()> {
    use privpred_audit::floating_point::{FloatingPointAudit, audit_floating_point};
    let audit = FloatingPointAudit {
        draws: args.trials as u64,
        seed: args.seed,
        confidence: args.confidence,
    };
    let rows = audit_floating_point(&audit).map_err(crate::exit::usage)?;
    if args.json {
        println!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    println!(
        "| sampler | released by privpred | exact | draws | unreachable from the neighbour | advantage (upper bound at {}) | timing: mean ns (D / D'), z inputs, z labels |",
        args.confidence
    );
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        let timing = r.timing.as_ref().map_or("—".to_string(), |t| {
            format!(
                "{:.0} / {:.0}, {:.1}, {:.1}",
                t.mean_ns_d, t.mean_ns_d_prime, t.z_inputs, t.z_labels
            )
        });
        let advantage = if r.conclusive {
            format!("{:.4} (≤ {:.2e})", r.advantage, r.advantage_upper)
        } else {
            format!(
                "{:.4} (inconclusive: the f64 sampler is not inverted)",
                r.advantage
            )
        };
        println!(
            "| {} | {} | {} | {} | {} | {advantage} | {timing} |",
            r.mechanism,
            if r.shipped { "yes" } else { "no" },
            if r.exact { "yes" } else { "no" },
            r.draws,
            r.unreachable,
        );
    }
    Ok(())
}
