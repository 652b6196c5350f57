//! What `privpred train` refuses before any work for a private method: preprocessing that
//! would release a statistic of the data, a class set read from the labels or a class
//! filter under replace-one, a loss the method does not train, a flag the method would
//! ignore, and the fits the odometer cannot add up.

use super::Args;
use super::args::ValueOrCv;
use crate::exit::usage;
use privpred_core::Method;
use privpred_data::UnitBall;

/// Refuses, for a private method, a preprocessing step that would map every query with an
/// un-noised statistic of the private training data and so release it with the model.
pub(super) fn check_public_preprocessing(args: &Args) -> anyhow::Result<()> {
    if args.method.method().is_none() {
        return Ok(());
    }
    if args.pca.is_some() {
        return Err(usage(format!(
            "--pca is refused for {}: the basis would be fitted on the private training data and released, un-noised, with the model (every query is projected with it), outside the guarantee. Project the data beforehand with a basis fitted on public data, or train without --pca (non-private training may use it)",
            args.method.name()
        )));
    }
    if args.unit_ball == Some(UnitBall::MaxNorm) {
        return Err(usage(format!(
            "--unit-ball max-norm is refused for {}: it divides every query by the private training set's largest norm, which the model would release un-noised, outside the guarantee. Use the data-independent `normalize` (the default) or `clip:R` (non-private training may use max-norm)",
            args.method.name()
        )));
    }
    Ok(())
}

/// Under add/remove, a private method refuses a test split held out of the training input by
/// a seeded permutation of its N rows: one added row changes the whole permutation, so the
/// training sets of D and D ∪ {z} would not be neighbours. A separate test file keeps them so.
pub(super) fn check_add_remove_input(
    args: &Args,
    train: &privpred_data::Dataset,
) -> anyhow::Result<()> {
    if args.method.method().is_none()
        || args.neighbours != privpred_core::Neighbours::AddRemove
        || !train.provenance.held_out
    {
        return Ok(());
    }
    Err(usage(format!(
        "{} under add-remove neighbours needs its test rows in a separate file ({}:TRAIN,TEST, or a data set with a test split): the seeded hold-out permutes all N rows, so adding one row would change which rows are trained on",
        args.method.name(),
        args.dataset.split(':').next().unwrap_or("csv")
    )))
}

/// For a private method: the class set must be declared (never read from the labels), and a
/// class filter (fewer classes than the source publishes) drops rows by label, so N depends
/// on the data: only an add/remove guarantee covers it (one added or removed row of the
/// source adds or removes at most one row of the filtered set).
pub(super) fn check_public_classes(
    args: &Args,
    train: &privpred_data::Dataset,
) -> anyhow::Result<()> {
    if args.method.method().is_none() {
        return Ok(());
    }
    train.require_declared_classes().map_err(usage)?;
    if let Some(c) = &args.classes
        && c.count() < train.classes
        && args.neighbours == privpred_core::Neighbours::ReplaceOne
    {
        return Err(usage(format!(
            "invalid classes = {} for {} under replace-one neighbours: {} publishes {} classes, and keeping the first {} drops rows by their label, so one replaced row can add or remove a row of the training set (its size N then depends on the data). Use --neighbours add-remove, or a data set holding only the declared classes",
            c.count(),
            args.method.name(),
            args.dataset,
            train.classes,
            c.count()
        )));
    }
    Ok(())
}

/// The fits the odometer refuses (it adds up only single releases whose guarantee holds): a
/// seeded experiment (its noise can be regenerated: not a release), and a λ or clip chosen
/// on a hold-out without privacy (`cv`: the model's guarantee is not valid, its loss
/// unbounded). The paper's calibration is refused by the charge itself.
pub(super) fn check_odometer_fit(args: &Args) -> anyhow::Result<()> {
    if args.method.method().is_none() {
        return Ok(());
    }
    if let Some(s) = args.seed {
        return Err(usage(format!(
            "--seed {s} is refused with --odometer: a seeded fit is an experiment whose noise can be regenerated from the seed, not a release the odometer can add up; train without --seed"
        )));
    }
    for (v, flag) in [(args.lambda, "--lambda"), (args.clip, "--clip")] {
        if v == Some(ValueOrCv::Cv) {
            return Err(usage(format!(
                "{flag} cv is refused with --odometer: the hold-out selection looks at the private data without privacy (the model's guarantee is not valid, its loss unbounded), and the odometer adds up only guarantees that hold; give a public value or `private`"
            )));
        }
    }
    Ok(())
}

/// `--loss logistic` (one sigmoid output) is trained by model sensitivity, prediction
/// sensitivity, loss perturbation and DP-SGD; any other method is refused before any work.
pub(super) fn check_loss(loss: privpred_core::Loss, method: Option<Method>) -> anyhow::Result<()> {
    match (loss, method) {
        (privpred_core::Loss::Softmax, _)
        | (
            _,
            Some(
                Method::ModelSensitivity
                | Method::PredictionSensitivity
                | Method::LossPerturbation
                | Method::DpSgd,
            ),
        ) => Ok(()),
        (_, m) => Err(usage(format!(
            "invalid loss = logistic for method = {}: the one-output sigmoid model is trained by model-sensitivity, prediction-sensitivity, loss-perturbation and dp-sgd; use --loss softmax",
            m.map_or("non-private", |m| m.name())
        ))),
    }
}

/// Refuses, by name, a flag the linear method would ignore
/// ([`privpred_linear::settings::check_knobs`], the rule the Python estimator applies too).
pub(super) fn check_method_flags(args: &Args) -> anyhow::Result<()> {
    let given = privpred_linear::settings::GivenKnobs {
        lambda: args.lambda.is_some(),
        clip: args.clip.is_some(),
        teachers: args.teachers.is_some(),
        batch_size: args.batch_size.is_some(),
        epochs: args.epochs.is_some(),
        learning_rate: args.learning_rate.is_some(),
        // --budget has a default value: whether it was given is not known here
        budget: false,
    };
    privpred_linear::settings::check_knobs(args.method.method(), given).map_err(usage)
}

/// The arguments with `--loss` resolved: as given (the sigmoid refused unless there are two
/// classes), or the sigmoid for two classes where the method trains it, the softmax otherwise.
pub(super) fn with_loss(
    args: &Args,
    method: Option<Method>,
    classes: usize,
) -> anyhow::Result<Args> {
    let loss = args
        .loss
        .unwrap_or(privpred_core::Loss::default_for(method, classes));
    if loss == privpred_core::Loss::Logistic && classes != 2 {
        return Err(usage(format!(
            "invalid loss = logistic for {classes} classes: the one-output sigmoid model needs exactly 2 classes; use --loss softmax"
        )));
    }
    Ok(Args {
        loss: Some(loss),
        ..args.clone()
    })
}
