//! `privpred train … --model resnet20|resnet-tiny` (with `--features nn`): a ResNet with
//! GroupNorm on an image dataset (CIFAR-10, MNIST, Fashion-MNIST, an image folder), written
//! as a `privpred-nn` safetensors artifact that `evaluate`, `predict` and `serve` read like a
//! linear model.
//!
//! Methods: `non-private` (reference network, no guarantee), `dp-sgd` (Poisson sampling,
//! joint per-example clipping to ν, σ from the accountant; `--calibration paper` trains the
//! reference code's per-layer clipping and shuffled batches and is labelled not valid), and
//! `subsample-aggregate` (T teachers on disjoint slices; each answer is an
//! exponential-mechanism draw over their votes, at most B answers). Defaults follow the paper
//! (SPEC §6): batch 600, lr 0.1 divided by 10 three times at equal intervals, momentum 0.9, no
//! weight decay, flip + 4-pixel-pad crop, DP-SGD 100 epochs, teachers 500 epochs, T = 16,
//! ν = 1. Inputs are normalised with fixed public constants (the CIFAR-10 channel statistics
//! for cifar10, mean 0.5 / std 0.25 otherwise), never with statistics of the private data.
//!
//! `--engine cpu|torch` picks the gradient engine (privpred-nn's own CPU engine, or libtorch
//! with `--features torch`: CUDA when present, CPU otherwise, `PRIVPRED_DEVICE` overrides);
//! default `$PRIVPRED_NN_ENGINE`, else `torch` when built in and CUDA is present, else `cpu`.
//! Sampling, noise, clipping bound, optimiser and accounting are the same code for both.

use super::train::{Args, TrainMethod};
use crate::cmd::nn_artifact::nn_err;
use crate::exit::usage;
use anyhow::Context;
use privpred_core::{CalibrationMode, Method, Privacy};
use privpred_data::{DatasetSpec, LoadOptions, load};
use privpred_nn::artifact::{self, ModelHeader, ModelKind, NnModel};
use privpred_nn::data::{ImageSet, Normalization, PixelLayout};
use privpred_nn::train::{self, DpSgdConfig, Progress, SgdConfig};
use privpred_nn::{ResNet, ResNetConfig, calib, engine};
use serde_json::json;
use std::time::Instant;

fn progress_printer(label: &str) -> impl FnMut(&Progress) + '_ {
    let mut shown = Instant::now();
    move |p: &Progress| {
        if p.step == p.steps || shown.elapsed().as_secs() >= 30 {
            shown = Instant::now();
            eprintln!(
                "  {label}: step {}/{} (epoch {:.2}, lr {:.0e}, batch loss {:.3})",
                p.step,
                p.steps,
                p.epoch,
                p.lr,
                p.batch.loss_sum / p.batch.n.max(1) as f64
            );
        }
    }
}

fn method_name(m: TrainMethod) -> &'static str {
    match m {
        TrainMethod::NonPrivate => "non-private",
        TrainMethod::DpSgd => "dp-sgd",
        TrainMethod::SubsampleAggregate => "subsample-aggregate",
        TrainMethod::ModelSensitivity => "model-sensitivity",
        TrainMethod::LossPerturbation => "loss-perturbation",
        TrainMethod::PredictionSensitivity => "prediction-sensitivity",
    }
}

/// Runs `privpred train` for a ResNet.
pub fn run(args: &Args, started: Instant) -> anyhow::Result<()> {
    // ---- validate before any work
    let method = match args.method {
        TrainMethod::NonPrivate => None,
        TrainMethod::DpSgd => Some(Method::DpSgd),
        TrainMethod::SubsampleAggregate => Some(Method::SubsampleAggregate),
        other => {
            return Err(usage(format!(
                "invalid method = {} for --model {}: ResNets train as non-private, dp-sgd or subsample-aggregate (the other methods need a convex linear model)",
                method_name(other),
                args.model
            )));
        }
    };
    for (given, name) in [
        (args.pca.is_some(), "--pca"),
        (args.classes.is_some(), "--classes"),
        (args.bias.is_some(), "--bias"),
        (args.lambda != "cv", "--lambda"),
        (args.unit_ball != "normalize", "--unit-ball"),
    ] {
        if given {
            return Err(usage(format!(
                "{name} applies to linear models only; a ResNet trains on raw pixels with fixed normalisation and no L2 (as in the paper)"
            )));
        }
    }
    let privacy = match (method, args.epsilon) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(usage("invalid epsilon: private methods need --epsilon > 0"));
        }
        (Some(_), Some(e)) => Some(Privacy::new(e, args.delta)?),
    };
    let clip = match args.clip.as_deref() {
        None => 1.0,
        Some("cv") => {
            return Err(usage(
                "invalid clip = cv: cross-validating ν retrains a ResNet per grid value; pass --clip ν > 0 (default 1)",
            ));
        }
        Some(s) => match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => v,
            _ => {
                return Err(usage(format!(
                    "invalid clip = {s}: must be a finite number > 0"
                )));
            }
        },
    };
    let teachers = args.teachers.unwrap_or(16);
    if method == Some(Method::SubsampleAggregate) && teachers < 2 {
        return Err(usage(format!("invalid teachers = {teachers}: must be ≥ 2")));
    }
    let sgd = SgdConfig {
        epochs: args.epochs.unwrap_or(match method {
            Some(Method::SubsampleAggregate) => 500.0,
            _ => 100.0,
        }),
        batch_size: args.batch_size.unwrap_or(600),
        lr: args.learning_rate.unwrap_or(0.1),
        ..SgdConfig::paper_teacher()
    };
    sgd.validate().map_err(usage)?;
    super::train::check_out_dir(&args.out)?;
    let engine_kind = engine::resolve_kind(args.engine.as_deref()).map_err(usage)?;
    let eng = engine::create(engine_kind).map_err(nn_err)?;
    let (mut rng, seed_note) = match args.seed {
        Some(s) => (privpred_core::noise::seeded_rng(s), json!({"seed": s})),
        None => (
            privpred_core::noise::release_rng()?,
            json!("OS random (release)"),
        ),
    };

    // ---- data: raw pixels, square images
    let spec = DatasetSpec::parse(&args.dataset)?;
    let opts = LoadOptions {
        data_dir: args.data_dir.clone(),
        ..LoadOptions::default()
    };
    let splits = load(&spec, &opts).with_context(|| format!("loading dataset {}", args.dataset))?;
    let prov = &splits.train.provenance;
    let (c, s) = match prov.feature_shape[..] {
        [c, h, w] if h == w && h >= 2 => (c, h),
        [h, w] if h == w && h >= 2 => (1, h),
        _ => {
            return Err(usage(format!(
                "dataset {} has examples of shape {:?}; a ResNet needs square images (C×S×S)",
                args.dataset, prov.feature_shape
            )));
        }
    };
    let mut train_set = ImageSet::from_dataset(&splits.train, c, s, s, PixelLayout::Chw)
        .map_err(|e| usage(format!("dataset {}: {e}", args.dataset)))?;
    if let Some(k) = args.subsample {
        if k == 0 || k > train_set.len() {
            return Err(usage(format!(
                "invalid subsample = {k}: must be in 1..={} (the training-set size)",
                train_set.len()
            )));
        }
        let mut idx: Vec<usize> = (0..train_set.len()).collect();
        train::shuffle(&mut idx, &mut rng);
        idx.truncate(k);
        train_set = train_set.subset(&idx);
    }
    let n = train_set.len();
    let norm = if spec == DatasetSpec::Cifar10 && c == 3 {
        Normalization::cifar10()
    } else {
        Normalization::generic(c)
    };
    let base = match args.model.as_str() {
        "resnet20" => ResNetConfig::resnet20(train_set.classes),
        _ => ResNetConfig {
            widths: [4, 8, 8],
            blocks_per_stage: 1,
            ..ResNetConfig::resnet20(train_set.classes)
        },
    };
    let cfg = ResNetConfig {
        in_channels: c,
        image_size: s,
        ..base
    };
    let net = ResNet::new(cfg).map_err(usage)?;

    // ---- train
    let label = format!("{} {}", args.model, method_name(args.method));
    let (kind, members, calibration, method_extra) = match method {
        None => {
            let p = train::train_nonprivate_on(
                &*eng,
                &net,
                &train_set,
                &norm,
                &sgd,
                None,
                &mut rng,
                &mut progress_printer(&label),
            )
            .map_err(nn_err)?;
            (ModelKind::NonPrivate, vec![p], None, json!({"sgd": sgd}))
        }
        Some(Method::DpSgd) => {
            let cal = calib::dpsgd_neighbours(
                args.calibration,
                privacy.expect("checked"),
                n,
                sgd.batch_size,
                sgd.epochs,
                net.classes(),
                args.neighbours,
            )
            .map_err(usage)?;
            let sigma = cal
                .noise_multiplier
                .ok_or_else(|| anyhow::anyhow!("DP-SGD calibration without a noise multiplier"))?;
            let dcfg = if args.calibration == CalibrationMode::Paper {
                DpSgdConfig::paper(sgd.clone(), clip, sigma)
            } else {
                DpSgdConfig::corrected(sgd.clone(), clip, sigma)
            };
            dcfg.validate(n).map_err(usage)?;
            let p = train::train_dpsgd_on(
                &*eng,
                &net,
                &train_set,
                &norm,
                &dcfg,
                &mut rng,
                &mut progress_printer(&label),
            )
            .map_err(nn_err)?;
            (
                ModelKind::DpSgd,
                vec![p],
                Some(cal),
                json!({"dpsgd": dcfg, "steps": dcfg.steps(n), "sampling_rate": dcfg.sampling_rate(n)}),
            )
        }
        Some(_) => {
            let cal = calib::subsample_aggregate_neighbours(
                args.calibration,
                privacy.expect("checked"),
                args.budget,
                net.classes(),
                args.neighbours,
            )
            .map_err(usage)?;
            if teachers > n {
                return Err(usage(format!(
                    "invalid teachers = {teachers}: must be ≤ the training-set size {n}"
                )));
            }
            let ens = train::train_teachers_on(
                &*eng,
                &net,
                &train_set,
                &norm,
                &sgd,
                teachers,
                &mut rng,
                &mut |k, p| {
                    if p.step == p.steps {
                        eprintln!(
                            "  {label}: teacher {}/{teachers} done ({} steps)",
                            k + 1,
                            p.steps
                        );
                    }
                },
            )
            .map_err(nn_err)?;
            (
                ModelKind::Teachers,
                ens.params,
                Some(cal),
                json!({"teacher_sgd": sgd, "teachers": teachers, "examples_per_teacher": n / teachers}),
            )
        }
    };
    let class_names = (!prov.class_names.is_empty()).then(|| prov.class_names.clone());
    let mut source = vec![prov.name.clone()];
    source.extend(prov.labels.iter().cloned());
    let model = NnModel::new(
        ModelHeader {
            kind,
            config: cfg,
            normalization: norm,
            calibration: calibration.clone(),
            members: members.len(),
            class_names,
            data_source: source.join(", "),
        },
        members,
        json!({
            "dataset": args.dataset,
            "dataset_provenance": {"name": prov.name, "checksum": prov.checksum, "verified": prov.verified, "labels": prov.labels},
            "n_train": n,
            "subsample": args.subsample,
            "method": method_extra,
            "seed": seed_note,
            // erratum 4.9: a seeded private model is an experiment (predict/serve refuse it)
            "release": if args.seed.is_some() { "experiment" } else { "private-release" },
            "trained_with": format!("privpred {} (--model {})", env!("CARGO_PKG_VERSION"), args.model),
            "engine": eng.describe(),
        }),
    )
    .map_err(nn_err)?;
    artifact::save(&args.out, &model).map_err(nn_err)?;

    // ---- report
    let c0 = calibration.as_ref();
    let summary = json!({
        "method": method_name(args.method),
        "model": args.model,
        "architecture": cfg,
        "parameters": net.num_params(),
        "calibration": c0.map(|c| c.calibration.name()),
        "neighbours": c0.map(|c| c.neighbours.name()),
        "epsilon": c0.map(|c| c.privacy.epsilon),
        "delta": c0.map(|c| c.privacy.delta),
        "budget": c0.and_then(|c| c.budget.get()),
        "noise": c0.map(|c| &c.noise),
        "noise_multiplier": c0.and_then(|c| c.noise_multiplier),
        "valid_guarantee": c0.map(|c| c.valid_guarantee),
        "notes": c0.map(|c| &c.notes),
        "clip": (method == Some(Method::DpSgd)).then_some(clip),
        "teachers": (method == Some(Method::SubsampleAggregate)).then_some(teachers),
        "n": n,
        "epochs": sgd.epochs,
        "batch_size": sgd.batch_size,
        "learning_rate": sgd.lr,
        "dataset_labels": prov.labels,
        "out": args.out.display().to_string(),
        "engine": eng.name(),
        "device": eng.device(),
        "seconds": started.elapsed().as_secs_f64(),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "trained {} {} on {} (N = {n}, {c}×{s}×{s}, C = {}, {} parameters{})",
            args.model,
            method_name(args.method),
            args.dataset,
            net.classes(),
            net.num_params(),
            if kind == ModelKind::Teachers {
                format!(" × {teachers} teachers")
            } else {
                String::new()
            }
        );
        super::train::print_guarantee(c0);
        println!(
            "schedule: {} epochs, batch {}, lr {} (÷10 three times), seed {}",
            sgd.epochs,
            sgd.batch_size,
            sgd.lr,
            args.seed
                .map_or("OS random (release)".to_string(), |s| s.to_string())
        );
        println!("engine: {}", eng.describe());
        println!(
            "wrote {} in {:.1} s",
            args.out.display(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
