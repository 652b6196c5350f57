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

/// `--teachers` as given, or the public rule's T for the public size
/// ([`privpred_core::public_rule::teachers`]; N, or N̂ under add-remove).
pub(super) fn teachers_arg(args: &Args, n: usize) -> usize {
    args.teachers.unwrap_or_else(|| {
        privpred_linear::settings::default_teachers(args.neighbours, n, args.public_n)
    })
}

/// `--clip` as given, or its default for linear DP-SGD: the public rule's
/// [`privpred_core::public_rule::DPSGD_CLIP`] (under either neighbouring relation: it reads
/// no size).
pub(super) fn clip_arg(args: &Args) -> ValueOrCv {
    args.clip
        .unwrap_or(ValueOrCv::Value(privpred_linear::settings::default_clip()))
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

/// The public rule's λ when `--lambda` is not given (replace-one only: under add/remove N is
/// not public), from public quantities only.
fn public_rule_lambda(
    args: &Args,
    plan: &LinearPlan,
    data: &LinearData,
) -> Option<privpred_core::public_rule::RuleValue> {
    let (None, Some(m)) = (args.lambda, plan.method) else {
        return None;
    };
    // the public size: N, or the declared N̂ under add-remove
    privpred_core::public_rule::lambda(&privpred_core::public_rule::PublicInputs {
        method: m,
        loss: args.loss.unwrap_or_default(),
        classes: data.train.classes,
        n: privpred_core::public_rule::PublicN::new(args.neighbours, data.train.n, args.public_n)?,
        dim: data.train.d,
        epsilon: plan.privacy.expect("checked").epsilon(),
        budget: plan.budget,
    })
}

/// Checks every parameter the fit checks once it runs, before it runs (and before the
/// odometer's reservation, so that a bad flag is refused without a charge): the method's
/// values against the rows the release trains on (the private selection's final part when λ
/// or the clip is selected privately, with the selection's own checks), and, when λ is known
/// before the fit (a given value or the public rule), the calibration. A value selected later
/// is checked with the default in its place.
pub(super) fn check_fit_parameters(
    args: &Args,
    plan: &LinearPlan,
    data: &LinearData,
) -> anyhow::Result<()> {
    let (Some(m), Some(privacy)) = (plan.method, plan.privacy) else {
        return Ok(());
    };
    let n = data.train.n;
    let known = match (public_rule_lambda(args, plan, data), lambda_arg(args)) {
        (Some(r), _) => Some(r.value),
        (None, ValueOrCv::Value(l)) => Some(l),
        (None, _) if matches!(m, Method::DpSgd) => Some(0.0),
        (None, _) => None,
    };
    let lambda = known.unwrap_or(PUBLIC_LAMBDA);
    let selects_privately = match m {
        Method::DpSgd => clip_arg(args) == ValueOrCv::Private,
        _ => lambda_arg(args) == ValueOrCv::Private && known.is_none(),
    };
    let params = |rows: usize| {
        let p = train_params(
            args,
            m,
            privacy,
            plan.budget,
            (lambda, rows),
            plan.seed_policy,
        );
        match clip_arg(args).value() {
            Some(_) => p,
            None => p.clip(defaults::LINEAR_DPSGD_CLIP),
        }
    };
    let rows = if selects_privately {
        // the selection's configuration: DP-SGD's sizes from all N rows, the others' teachers too
        let cfg = params(n).check().map_err(lin)?;
        let grid = if m == Method::DpSgd {
            CLIP_GRID.len()
        } else {
            LAMBDA_GRID.len()
        };
        methods::check_private_split(&cfg, n, grid)
            .map_err(lin)?
            .final_n
    } else {
        n
    };
    let sizes = if m == Method::DpSgd { n } else { rows };
    let cfg = params(sizes).check_for(rows).map_err(lin)?;
    if known.is_some() || m == Method::SubsampleAggregate {
        methods::calibrate(&cfg, rows, data.train.classes).map_err(lin)?;
    }
    Ok(())
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
    if let Some(r) = public_rule_lambda(args, plan, data) {
        return Ok(Chosen {
            value: r.value,
            selection: SelectionMethod::PublicRule,
            record: serde_json::Value::Null,
            final_train: None,
            formula: Some(r.formula),
        });
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
