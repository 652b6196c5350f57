//! How `train` chooses λ (or DP-SGD's clip): a public value, the private split selection or
//! the paper's non-private hold-out selection, and the record of that choice.

use super::*;

/// The public λ of a private linear method when `--lambda` is not given.
pub(super) const PUBLIC_LAMBDA: f64 = defaults::LINEAR_PUBLIC_LAMBDA;

/// `--lambda` as given, or its default: [`PUBLIC_LAMBDA`] for a private method, `cv` for the
/// non-private reference (which has no guarantee to keep).
pub(super) fn lambda_arg(args: &Args) -> ValueOrCv {
    args.lambda.unwrap_or(match args.method.method() {
        Some(_) => ValueOrCv::Value(PUBLIC_LAMBDA),
        None => ValueOrCv::Cv,
    })
}

/// The public training-set size the rule reads ([`privpred_core::public_rule::PublicN`]): the
/// N training rows under replace-one, the declared `--public-n` N̂ under add-remove. `None`
/// only where the method's configuration check refuses the pair (no N̂ under add-remove).
pub(super) fn public_size(args: &Args, n: usize) -> Option<privpred_core::public_rule::PublicN> {
    privpred_core::public_rule::PublicN::new(args.neighbours, n, args.public_n)
}

/// `--teachers` as given, or the public rule's T for the public size
/// ([`privpred_core::public_rule::teachers`]; N, or N̂ under add-remove).
pub(super) fn teachers_arg(args: &Args, n: usize) -> usize {
    args.teachers.unwrap_or_else(|| {
        public_size(args, n).map_or(
            defaults::LINEAR_TEACHERS,
            privpred_core::public_rule::teachers,
        )
    })
}

/// `--batch-size` as given, or the public rule's DP-SGD batch for the public size
/// ([`privpred_core::public_rule::dpsgd_batch_size`]; N, or N̂ under add-remove).
pub(super) fn batch_size_arg(args: &Args, n: usize) -> usize {
    args.batch_size.unwrap_or_else(|| {
        public_size(args, n).map_or(
            defaults::LINEAR_DPSGD_BATCH_SIZE,
            privpred_core::public_rule::dpsgd_batch_size,
        )
    })
}

/// `--clip` as given, or its default for linear DP-SGD: the public rule's
/// [`privpred_core::public_rule::DPSGD_CLIP`] (under either neighbouring relation: it reads
/// no size).
pub(super) fn clip_arg(args: &Args) -> ValueOrCv {
    args.clip
        .unwrap_or(ValueOrCv::Value(privpred_core::public_rule::DPSGD_CLIP))
}

/// The cross-validation record of the artifact and the summary.
pub(super) fn cv_json(
    parameter: &str,
    draws: usize,
    scores: &impl serde::Serialize,
    chosen: f64,
) -> serde_json::Value {
    json!({"parameter": parameter, "holdout_fraction": defaults::HOLDOUT_FRACTION, "draws": draws, "scores": scores, "chosen": chosen})
}

/// How λ (or the clip) was chosen: the value, the selection's record kind, its private
/// diagnostics (null when none) and, for the private split, the part the release trains on.
pub(super) struct Chosen {
    pub(super) value: f64,
    pub(super) selection: SelectionMethod,
    pub(super) record: serde_json::Value,
    pub(super) final_train: Option<UnitBallDataset>,
    /// The public rule's formula with its inputs, when the rule gave the value.
    pub(super) formula: Option<String>,
}

impl Chosen {
    pub(super) fn public(value: f64) -> Chosen {
        Chosen {
            value,
            selection: SelectionMethod::Public,
            record: serde_json::Value::Null,
            final_train: None,
            formula: None,
        }
    }
}

/// The private split selection of `knob` over `grid` (privpred-core's `tuning`).
pub(super) fn private_split(
    cfg: &MethodConfig,
    data: &LinearData,
    grid: &[f64],
    knob: Knob,
    rng: &mut PrivRng,
) -> anyhow::Result<Chosen> {
    let s = methods::private_split_select(cfg, &data.train, grid, knob, rng).map_err(lin)?;
    let parameter = if knob == Knob::Clip { "clip" } else { "lambda" };
    let record = json!({
        "parameter": parameter,
        "protocol": "private-split",
        "final_n": s.plan.final_n,
        "part_n": s.plan.part_n,
        "holdout_n": s.plan.holdout_n,
        "holdout_correct": s.private_counts.iter().map(|&(v, c)| json!({"value": v, "correct": c})).collect::<Vec<_>>(),
        "chosen": s.chosen,
    });
    Ok(Chosen {
        value: s.chosen,
        selection: SelectionMethod::PrivateSplit,
        record,
        final_train: Some(s.final_train),
        formula: None,
    })
}

/// λ: given (public), fixed by the method, selected privately (the private split) or by the
/// paper's non-private hold-out selection (recorded as outside the guarantee).
pub(super) fn choose_lambda(
    args: &Args,
    plan: &LinearPlan,
    data: &LinearData,
    lbfgs: &LbfgsOptions,
    rng: &mut PrivRng,
) -> anyhow::Result<Chosen> {
    if let (None, Some(m), Some(n)) = (args.lambda, plan.method, public_size(args, data.train.n)) {
        // the public rule, from public quantities only (N̂ in place of N under add-remove)
        let inputs = privpred_core::public_rule::PublicInputs {
            method: m,
            loss: args.loss.unwrap_or_default(),
            classes: data.train.classes,
            n,
            dim: data.train.d,
            epsilon: plan.privacy.expect("checked").epsilon(),
            budget: plan.budget,
        };
        if let Some(r) = privpred_core::public_rule::lambda(&inputs) {
            return Ok(Chosen {
                value: r.value,
                selection: SelectionMethod::PublicRule,
                record: serde_json::Value::Null,
                final_train: None,
                formula: Some(r.formula),
            });
        }
    }
    let arg = lambda_arg(args);
    let m = match (plan.method, arg) {
        (Some(Method::DpSgd), _) => return Ok(Chosen::public(0.0)),
        (Some(Method::SubsampleAggregate), ValueOrCv::Cv) => return Ok(Chosen::public(0.0)),
        (_, ValueOrCv::Value(l)) => return Ok(Chosen::public(l)),
        (m, _) => m,
    };
    let Some(m) = m else {
        // the non-private reference: `cv` selects on the hold-out, `private` means the same
        let (tr, ho) = holdout_unit(&data.train, defaults::HOLDOUT_FRACTION, data.holdout_seed);
        let cv = methods::non_private::select_lambda(&tr, &ho, &LAMBDA_GRID, lbfgs).map_err(lin)?;
        return Ok(Chosen {
            value: cv.best,
            selection: SelectionMethod::NonPrivateHoldout,
            record: cv_json("lambda", 1, &cv.scores, cv.best),
            final_train: None,
            formula: None,
        });
    };
    let cfg = TrainParams::new(
        m,
        args.calibration,
        plan.privacy.expect("checked"),
        plan.budget,
    )
    .neighbours(args.neighbours)
    .loss(args.loss.unwrap_or_default())
    .teachers(teachers_arg(args, data.train.n))
    .check()
    .map_err(lin)?;
    if arg == ValueOrCv::Private {
        return private_split(&cfg, data, &LAMBDA_GRID, Knob::Lambda, rng);
    }
    let (tr, ho) = holdout_unit(&data.train, defaults::HOLDOUT_FRACTION, data.holdout_seed);
    let cv =
        methods::cv_lambda_draws(&cfg, &tr, &ho, &LAMBDA_GRID, plan.cv_draws, rng).map_err(lin)?;
    Ok(Chosen {
        value: cv.best,
        selection: SelectionMethod::NonPrivateHoldout,
        record: cv_json("lambda", plan.cv_draws, &cv.scores, cv.best),
        final_train: None,
        formula: None,
    })
}
