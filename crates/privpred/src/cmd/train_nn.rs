//! `privpred train … --model resnet20|resnet-tiny` (with `--features nn`): a ResNet with
//! GroupNorm on an image dataset (CIFAR-10, MNIST, Fashion-MNIST, an image folder), written
//! as a privpred model file (family `resnet`, the `privpred-nn` payload) that `evaluate`,
//! `predict` and `serve` read like a linear model.
//!
//! Methods: `non-private` (reference network, no guarantee), `dp-sgd` (Poisson sampling,
//! joint per-example clipping to ν, σ from the accountant; `--calibration paper` trains the
//! reference code's per-layer clipping and shuffled batches and is labelled not valid), and
//! `subsample-aggregate` (T teachers on disjoint slices; each answer is an
//! exponential-mechanism draw over their votes, at most B answers). Defaults follow the paper
//! (the study's schedule): batch 600, lr 0.1 divided by 10 three times at equal intervals, momentum 0.9, no
//! weight decay, flip + 4-pixel-pad crop, DP-SGD 100 epochs, teachers 500 epochs, T = 16,
//! ν = 1. Inputs are normalised with fixed public constants (the CIFAR-10 channel statistics
//! for cifar10, mean 0.5 / std 0.25 otherwise), never with statistics of the private data.
//!
//! `--engine cpu|torch` picks the gradient engine (privpred-nn's own CPU engine, or libtorch
//! with `--features torch`: CUDA when present, CPU otherwise, `PRIVPRED_DEVICE` overrides);
//! default `$PRIVPRED_NN_ENGINE`, else `torch` when built in and CUDA is present, else `cpu`.
//! Sampling, noise, clipping bound, optimiser and accounting are the same code for both.

use super::args::{EngineArg, ModelArg, ValueOrCv};
use crate::cmd::nn_artifact::nn_err;
use crate::exit::usage;
use anyhow::Context;
use privpred_core::{Calibration, CalibrationMode, Method, Neighbours, PrivRng, Privacy, defaults};
use privpred_data::{DatasetSpec, LoadOptions, Provenance, load};
use privpred_nn::artifact::{ModelHeader, ModelKind, NnModel};
use privpred_nn::data::{ImageSet, Normalization, PixelLayout};
use privpred_nn::engine::GradientEngine;
use privpred_nn::train::{self, DpSgdConfig, Progress, SgdConfig};
use privpred_nn::{ResNet, ResNetConfig, calib, engine};
use serde_json::json;
use std::path::Path;
use std::time::Instant;

/// What `train` asks of the ResNet path: the arguments that apply to a ResNet, after `train`
/// refused the linear-only ones and checked ε, δ and the neighbouring relation.
pub struct Request<'a> {
    /// The private method (`None`: the non-private reference); dp-sgd or subsample-aggregate.
    pub method: Option<Method>,
    /// The method's name as the CLI spells it.
    pub method_name: &'static str,
    /// `resnet20` or `resnet-tiny`.
    pub model: ModelArg,
    /// (ε, δ) of a private method.
    pub privacy: Option<Privacy>,
    /// The dataset as given (`--dataset`).
    pub dataset: &'a str,
    /// `--data-dir`.
    pub data_dir: Option<&'a Path>,
    /// Inference budget B (subsample-and-aggregate).
    pub budget: u64,
    /// Which analysis calibrates the noise.
    pub calibration: CalibrationMode,
    /// The neighbouring relation of the guarantee.
    pub neighbours: Neighbours,
    /// Experiment seed (`None`: OS-seeded release generator).
    pub seed: Option<u64>,
    /// Teachers T (default [`defaults::RESNET_TEACHERS`]).
    pub teachers: Option<usize>,
    /// DP-SGD clip ν (default [`defaults::RESNET_CLIP`]; `cv` is refused).
    pub clip: Option<ValueOrCv>,
    /// Batch size (default [`defaults::RESNET_BATCH_SIZE`]).
    pub batch_size: Option<usize>,
    /// Epochs (defaults: [`defaults::RESNET_DPSGD_EPOCHS`], teachers
    /// [`defaults::RESNET_TEACHER_EPOCHS`]).
    pub epochs: Option<f64>,
    /// Initial learning rate (default [`defaults::RESNET_LEARNING_RATE`]).
    pub learning_rate: Option<f64>,
    /// Keep a random subset of this many training images.
    pub subsample: Option<usize>,
    /// `--classes`: the declared class set (a count, or an image folder's class names).
    pub classes: Option<&'a super::args::ClassesArg>,
    /// `--engine` (default: `$PRIVPRED_NN_ENGINE`, else by build and device).
    pub engine: Option<EngineArg>,
    /// Output file.
    pub out: &'a Path,
    /// The keys the model file is signed (and sealed) with.
    pub keys: &'a privpred_release::WriteKeys,
    /// Print the summary as JSON.
    pub json: bool,
}

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

/// The validated schedule and the engine, before any data is read.
struct Setup {
    clip: f64,
    teachers: usize,
    sgd: SgdConfig,
    eng: Box<dyn GradientEngine>,
    rng: PrivRng,
}

/// Validates the request (clip, teachers, schedule, output directory, engine) before any work.
fn setup(req: &Request) -> anyhow::Result<Setup> {
    let clip = match req.clip {
        None => defaults::RESNET_CLIP,
        Some(sel @ (ValueOrCv::Cv | ValueOrCv::Private)) => {
            return Err(usage(format!(
                "invalid clip = {}: selecting ν retrains a ResNet per grid value; pass a public --clip ν > 0 (default 1, costs nothing)",
                if sel == ValueOrCv::Cv {
                    "cv"
                } else {
                    "private"
                }
            )));
        }
        Some(ValueOrCv::Value(v)) => v,
    };
    let teachers = req.teachers.unwrap_or(defaults::RESNET_TEACHERS);
    if req.method == Some(Method::SubsampleAggregate) && teachers < 2 {
        return Err(usage(format!("invalid teachers = {teachers}: must be ≥ 2")));
    }
    let sgd = SgdConfig {
        epochs: req.epochs.unwrap_or(match req.method {
            Some(Method::SubsampleAggregate) => defaults::RESNET_TEACHER_EPOCHS,
            _ => defaults::RESNET_DPSGD_EPOCHS,
        }),
        batch_size: req.batch_size.unwrap_or(defaults::RESNET_BATCH_SIZE),
        lr: req.learning_rate.unwrap_or(defaults::RESNET_LEARNING_RATE),
        ..SgdConfig::paper_teacher()
    };
    sgd.validate().map_err(usage)?;
    super::shared::check_out_dir(req.out)?;
    let engine_kind = engine::resolve_kind(req.engine.map(EngineArg::as_str)).map_err(usage)?;
    let eng = engine::create(engine_kind).map_err(nn_err)?;
    let rng = match req.seed {
        Some(s) => privpred_core::noise::seeded_rng(s),
        None => privpred_core::noise::release_rng()?,
    };
    Ok(Setup {
        clip,
        teachers,
        sgd,
        eng,
        rng,
    })
}

/// The training images (raw pixels, square, optionally subsampled), their provenance, the
/// fixed public normalisation and the network for them.
struct Images {
    set: ImageSet,
    prov: Provenance,
    channels: usize,
    size: usize,
    norm: Normalization,
    config: ResNetConfig,
    net: ResNet,
}

impl Images {
    /// The training inputs of every run here: `engine` with this network, set and normalisation.
    fn inputs<'a>(&'a self, engine: &'a dyn GradientEngine) -> train::TrainInputs<'a> {
        train::TrainInputs {
            engine,
            net: &self.net,
            data: &self.set,
            norm: &self.norm,
        }
    }
}

/// Loads the training images and builds the network for their shape.
fn load_images(req: &Request, rng: &mut PrivRng) -> anyhow::Result<Images> {
    let spec = DatasetSpec::parse(req.dataset)?;
    let opts = LoadOptions {
        data_dir: req.data_dir.map(Path::to_path_buf),
        classes: req.classes.and_then(super::args::ClassesArg::as_count),
        class_names: req.classes.and_then(super::args::ClassesArg::names),
        ..LoadOptions::default()
    };
    let splits = load(&spec, &opts).with_context(|| format!("loading dataset {}", req.dataset))?;
    super::shared::check_two_classes(&splits.train)?;
    if req.method.is_some() {
        // C is released with the network: declared, never read from the labels
        splits.train.require_declared_classes().map_err(usage)?;
    }
    if let Some(c) = req.classes
        && c.count() != splits.train.classes
    {
        return Err(usage(format!(
            "invalid classes = {} for {}: it has {} classes; a ResNet trains on every class of its data set",
            c.count(),
            req.dataset,
            splits.train.classes
        )));
    }
    let prov = &splits.train.provenance;
    let (c, s) = match prov.feature_shape[..] {
        [c, h, w] if h == w && h >= 2 => (c, h),
        [h, w] if h == w && h >= 2 => (1, h),
        _ => {
            return Err(usage(format!(
                "dataset {} has examples of shape {:?}; a ResNet needs square images (C×S×S)",
                req.dataset, prov.feature_shape
            )));
        }
    };
    let mut set = ImageSet::from_dataset(&splits.train, c, s, s, PixelLayout::Chw)
        .map_err(|e| usage(format!("dataset {}: {e}", req.dataset)))?;
    if let Some(k) = req.subsample {
        if k == 0 || k > set.len() {
            return Err(usage(format!(
                "invalid subsample = {k}: must be in 1..={} (the training-set size)",
                set.len()
            )));
        }
        let mut idx: Vec<usize> = (0..set.len()).collect();
        train::shuffle(&mut idx, rng);
        idx.truncate(k);
        set = set.subset(&idx);
    }
    let norm = if spec == DatasetSpec::Cifar10 && c == 3 {
        Normalization::cifar10()
    } else {
        Normalization::generic(c)
    };
    let base = match req.model {
        ModelArg::Resnet20 => ResNetConfig::resnet20(set.classes),
        _ => ResNetConfig {
            widths: [4, 8, 8],
            blocks_per_stage: 1,
            ..ResNetConfig::resnet20(set.classes)
        },
    };
    let config = ResNetConfig {
        in_channels: c,
        image_size: s,
        ..base
    };
    let net = ResNet::new(config).map_err(usage)?;
    Ok(Images {
        set,
        prov: prov.clone(),
        channels: c,
        size: s,
        norm,
        config,
        net,
    })
}

/// What training produced: the artifact's kind, its parameter vectors, the guarantee and
/// the method's record.
struct Trained {
    kind: ModelKind,
    members: Vec<Vec<f32>>,
    calibration: Option<Calibration>,
    /// The public parameters the guarantee is re-derived from on load.
    training: Option<calib::PublicTraining>,
    method_extra: serde_json::Value,
}

/// The guarantee's request: what `train` was asked for (mode, (ε, δ), B, relation) and C.
fn request(req: &Request, classes: usize) -> calib::GuaranteeRequest {
    calib::GuaranteeRequest {
        mode: req.calibration,
        privacy: req.privacy.expect("checked"),
        budget: req.budget,
        neighbours: req.neighbours,
        classes,
    }
}

/// DP-SGD: σ from the accountant for (ε, δ), then training with per-example clipping.
fn train_dpsgd(req: &Request, st: &mut Setup, im: &Images, label: &str) -> anyhow::Result<Trained> {
    let n = im.set.len();
    let training = calib::PublicTraining {
        n,
        dp_sgd: Some(privpred_core::DpSgdSchedule {
            batch_size: st.sgd.batch_size,
            epochs: st.sgd.epochs,
        }),
        teachers: None,
    };
    // the clip is a public value (ResNets take no selection)
    let cal = calib::guarantee(Method::DpSgd, &request(req, im.net.classes()), &training)
        .map_err(usage)?;
    let sigma = cal
        .mechanism
        .noise_multiplier()
        .ok_or_else(|| anyhow::anyhow!("DP-SGD calibration without a noise multiplier"))?;
    let dcfg = if req.calibration == CalibrationMode::Paper {
        DpSgdConfig::paper(st.sgd.clone(), st.clip, sigma)
    } else {
        DpSgdConfig::corrected(st.sgd.clone(), st.clip, sigma)
    };
    dcfg.validate(n).map_err(usage)?;
    let on = im.inputs(&*st.eng);
    let p = train::train_dpsgd_on(on, &dcfg, &mut st.rng, &mut progress_printer(label))
        .map_err(nn_err)?;
    Ok(Trained {
        kind: ModelKind::DpSgd,
        members: vec![p],
        calibration: Some(cal),
        training: Some(training),
        method_extra: json!({"dpsgd": dcfg, "steps": dcfg.steps(n), "sampling_rate": dcfg.sampling_rate(n)}),
    })
}

/// Subsample-and-aggregate: the exponential mechanism's calibration, then T teachers on
/// disjoint slices.
fn train_teachers(
    req: &Request,
    st: &mut Setup,
    im: &Images,
    label: &str,
) -> anyhow::Result<Trained> {
    let n = im.set.len();
    let teachers = st.teachers;
    if teachers > n {
        return Err(usage(format!(
            "invalid teachers = {teachers}: must be ≤ the training-set size {n}"
        )));
    }
    let training = calib::PublicTraining {
        n,
        dp_sgd: None,
        teachers: Some(teachers),
    };
    let cal = calib::guarantee(
        Method::SubsampleAggregate,
        &request(req, im.net.classes()),
        &training,
    )
    .map_err(usage)?;
    let on = im.inputs(&*st.eng);
    let ens = train::train_teachers_on(on, &st.sgd, teachers, &mut st.rng, &mut |k, p| {
        if p.step == p.steps {
            eprintln!(
                "  {label}: teacher {}/{teachers} done ({} steps)",
                k + 1,
                p.steps
            );
        }
    })
    .map_err(nn_err)?;
    Ok(Trained {
        kind: ModelKind::Teachers,
        members: ens.params,
        calibration: Some(cal),
        training: Some(training),
        method_extra: json!({"teacher_sgd": st.sgd, "teachers": teachers, "examples_per_teacher": n / teachers}),
    })
}

/// Trains the requested method.
fn train_method(req: &Request, st: &mut Setup, im: &Images) -> anyhow::Result<Trained> {
    let label = format!("{} {}", req.model.as_str(), req.method_name);
    match req.method {
        None => {
            let on = im.inputs(&*st.eng);
            let p = train::train_nonprivate_on(
                on,
                &st.sgd,
                None,
                &mut st.rng,
                &mut progress_printer(&label),
            )
            .map_err(nn_err)?;
            Ok(Trained {
                kind: ModelKind::NonPrivate,
                members: vec![p],
                calibration: None,
                training: None,
                method_extra: json!({"sgd": st.sgd}),
            })
        }
        Some(Method::DpSgd) => train_dpsgd(req, st, im, &label),
        Some(_) => train_teachers(req, st, im, &label),
    }
}

/// Writes the artifact (parameters, guarantee, provenance).
fn save(req: &Request, st: &Setup, im: &Images, t: Trained) -> anyhow::Result<()> {
    let prov = &im.prov;
    let class_names = (!prov.class_names.is_empty()).then(|| prov.class_names.clone());
    let mut source = vec![prov.name.clone()];
    source.extend(prov.labels.iter().cloned());
    let model = NnModel::new(
        ModelHeader {
            kind: t.kind,
            config: im.config,
            normalization: im.norm.clone(),
            calibration: t.calibration,
            training: t.training,
            // the typed seed policy (an experiment's seed is recorded; a release has none)
            seed_policy: req.method.map(|_| match req.seed {
                Some(seed) => privpred_core::SeedPolicy::Seeded { seed },
                None => privpred_core::SeedPolicy::OsRandom,
            }),
            members: t.members.len(),
            class_names,
            data_source: source.join(", "),
        },
        t.members,
        json!({
            "dataset": req.dataset,
            // a private model records a file's hash only for data verified against a
            // published checksum: the hash of the caller's own files identifies their content
            "dataset_provenance": {"name": prov.name, "checksum": if req.method.is_none() || prov.verified { prov.checksum.clone() } else { None }, "verified": prov.verified, "labels": prov.labels},
            "n_train": im.set.len(),
            "subsample": req.subsample,
            "method": t.method_extra,
            "trained_with": format!("privpred {} (--model {})", env!("CARGO_PKG_VERSION"), req.model.as_str()),
            "engine": st.eng.describe(),
        }),
    )
    .map_err(nn_err)?;
    privpred_release::save_resnet(req.out, &model, req.keys)
        .map(|_| ())
        .map_err(super::keys::release_err)
}

/// Prints the summary (JSON or lines).
fn report(
    req: &Request,
    st: &Setup,
    im: &Images,
    kind: ModelKind,
    calibration: Option<&Calibration>,
    started: Instant,
) -> anyhow::Result<()> {
    let (n, c, s, net, sgd) = (im.set.len(), im.channels, im.size, &im.net, &st.sgd);
    let teachers = st.teachers;
    let c0 = calibration;
    let summary = json!({
        "method": req.method_name,
        "model": req.model.as_str(),
        "architecture": im.config,
        "parameters": net.num_params(),
        "calibration": c0.map(|c| c.mode().name()),
        "neighbours": c0.map(|c| c.neighbours().name()),
        "epsilon": c0.map(|c| c.epsilon()),
        "delta": c0.map(|c| c.delta()),
        "budget": c0.and_then(|c| c.budget().get()),
        "noise": c0.map(|c| c.noise()),
        "noise_multiplier": c0.and_then(|c| c.mechanism.noise_multiplier()),
        "valid_guarantee": c0.map(|c| c.is_valid()),
        "notes": c0.map(|c| &c.notes),
        "clip": (req.method == Some(Method::DpSgd)).then_some(st.clip),
        "teachers": (req.method == Some(Method::SubsampleAggregate)).then_some(teachers),
        "n": n,
        "epochs": sgd.epochs,
        "batch_size": sgd.batch_size,
        "learning_rate": sgd.lr,
        "dataset_labels": im.prov.labels,
        "out": req.out.display().to_string(),
        "engine": st.eng.name(),
        "device": st.eng.device(),
        "seconds": started.elapsed().as_secs_f64(),
    });
    if req.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    println!(
        "trained {} {} on {} (N = {n}, {c}×{s}×{s}, C = {}, {} parameters{})",
        req.model.as_str(),
        req.method_name,
        req.dataset,
        net.classes(),
        net.num_params(),
        if kind == ModelKind::Teachers {
            format!(" × {teachers} teachers")
        } else {
            String::new()
        }
    );
    super::shared::print_guarantee(c0);
    println!(
        "schedule: {} epochs, batch {}, lr {} (÷10 three times), seed {}",
        sgd.epochs,
        sgd.batch_size,
        sgd.lr,
        req.seed
            .map_or("OS random (release)".to_string(), |s| s.to_string())
    );
    println!("engine: {}", st.eng.describe());
    println!(
        "wrote {} in {:.1} s",
        req.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `privpred train` for a ResNet.
pub fn run(req: &Request, started: Instant) -> anyhow::Result<()> {
    let mut st = setup(req)?;
    let im = load_images(req, &mut st.rng)?;
    let t = train_method(req, &mut st, &im)?;
    let (kind, calibration) = (t.kind, t.calibration.clone());
    save(req, &st, &im, t)?;
    report(req, &st, &im, kind, calibration.as_ref(), started)
}
