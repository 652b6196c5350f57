//! Training: mini-batch SGD with momentum (non-private, teachers) and DP-SGD (docs/guarantees.md#calibrations, §4.2–4.3).
//!
//! Gradients are computed example by example in parallel (rayon, one contiguous chunk of the
//! batch per worker): each worker runs forward + backward for its examples and either adds
//! the gradient to its running sum (non-private) or first writes it into a per-example buffer,
//! clips it, and then adds it (DP-SGD). The per-example gradient is the backward pass itself,
//! so DP-SGD costs one extra pass over the parameter vector per example (norm, scale, add).
//!
//! The loops themselves take a [`GradientEngine`] (the `*_on` functions): the batch gradient
//! and the batched forward pass can run on another engine (libtorch, feature `torch`) while
//! sampling, augmentation, noise, the optimiser and the schedule stay here. The functions
//! without `_on` use [`CpuEngine`].

use crate::data::{ImageSet, Normalization};
use crate::error::{NnError, Result};
use crate::gradient::{CpuEngine, GradientEngine, check_image_shape};
use crate::resnet::{InitScheme, ResNet};
use crate::resume::{self, Checkpoint, LoopRng, Resume};

pub use crate::gradient::{
    BatchStats, GradMode, Inputs, accuracy, batch_gradient, clip_in_place, per_example_gradients,
    predict_labels, predict_labels_on, predict_logits,
};
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;

mod lockstep;
pub use lockstep::{GroupMember, train_group_resumable_on, train_members_on};

/// What a training run computes on (the `*_on` functions' first argument): the engine that
/// computes the batch gradients, the network architecture, the training set and its
/// normalisation.
#[derive(Clone, Copy)]
pub struct TrainInputs<'a> {
    /// The gradient engine ([`CpuEngine`], or libtorch with feature `torch`).
    pub engine: &'a dyn GradientEngine,
    /// The architecture.
    pub net: &'a ResNet,
    /// The training set.
    pub data: &'a ImageSet,
    /// The normalisation applied to every image.
    pub norm: &'a Normalization,
}

impl<'a> TrainInputs<'a> {
    /// The inputs of one batch gradient, with augmentation seeded by `augment_seed` (`None`:
    /// no augmentation).
    pub fn batch_inputs(&self, augment_seed: Option<u64>) -> Inputs<'a> {
        Inputs {
            data: self.data,
            norm: self.norm,
            augment_seed,
        }
    }
}

/// Hyper-parameters of SGD with momentum and the step schedule (docs/study.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SgdConfig {
    /// Passes over the training set (fractional allowed).
    pub epochs: f64,
    /// Batch size b (the expected batch size for Poisson sampling).
    pub batch_size: usize,
    /// Initial learning rate.
    pub lr: f64,
    /// Times the learning rate is divided by 10, at equal intervals (3 in the paper).
    pub lr_drops: usize,
    /// Momentum μ (PyTorch convention: v ← μv + g, θ ← θ − lr·v).
    pub momentum: f64,
    /// L2 weight decay added to the (noisy) gradient (post-processing under DP).
    pub weight_decay: f64,
    /// Random horizontal flip + random crop with 4-pixel padding.
    pub augment: bool,
    /// Initialisation of fresh networks.
    #[serde(default)]
    pub init: InitScheme,
}

impl SgdConfig {
    /// The paper's schedule for subsample-and-aggregate teachers: 500 epochs, batch 600,
    /// lr 0.1 divided by 10 three times, momentum 0.9 (no Nesterov), no weight decay (docs/study.md:
    /// the teachers train without L2; the reference code's `--weight_decay` defaults to 0),
    /// augmentation, and the initialisation of the PyTorch reference that reached 82.5 % on
    /// the CIFAR-10 JPEG copy (`benches/resnet20_gn_reference.py`: [`InitScheme::FanOut`]).
    pub fn paper_teacher() -> Self {
        SgdConfig {
            epochs: privpred_core::defaults::RESNET_TEACHER_EPOCHS,
            batch_size: privpred_core::defaults::RESNET_BATCH_SIZE,
            lr: privpred_core::defaults::RESNET_LEARNING_RATE,
            lr_drops: privpred_core::defaults::RESNET_LR_DROPS,
            momentum: privpred_core::defaults::RESNET_MOMENTUM,
            weight_decay: privpred_core::defaults::RESNET_WEIGHT_DECAY,
            augment: true,
            init: InitScheme::FanOut,
        }
    }
    /// The paper's DP-SGD schedule: 100 epochs, otherwise as [`SgdConfig::paper_teacher`].
    pub fn paper_dpsgd() -> Self {
        SgdConfig {
            epochs: privpred_core::defaults::RESNET_DPSGD_EPOCHS,
            ..Self::paper_teacher()
        }
    }
    /// The learning rate at `step` of `steps`: lr·10^(−k), k = ⌊(drops+1)·step/steps⌋.
    pub fn lr_at(&self, step: usize, steps: usize) -> f64 {
        let k = ((self.lr_drops + 1) * step / steps.max(1)).min(self.lr_drops);
        self.lr * 0.1f64.powi(k as i32)
    }
    /// Validates the values.
    pub fn validate(&self) -> Result<()> {
        if !(self.epochs.is_finite() && self.epochs > 0.0) {
            return Err(NnError::invalid("epochs", self.epochs, "must be > 0"));
        }
        if self.batch_size == 0 {
            return Err(NnError::invalid(
                "batch-size",
                self.batch_size,
                "must be ≥ 1",
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(NnError::invalid("lr", self.lr, "must be > 0"));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(NnError::invalid(
                "momentum",
                self.momentum,
                "must be in [0, 1)",
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(NnError::invalid(
                "weight-decay",
                self.weight_decay,
                "must be ≥ 0",
            ));
        }
        Ok(())
    }
}

/// How per-example gradients are clipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clipping {
    /// The whole per-example gradient (all parameters jointly) to norm ≤ ν: sensitivity ν,
    /// what the accountant assumes (docs/guarantees.md#calibrations, `corrected`/`tight`).
    Joint,
    /// Each parameter tensor separately to ν, as the paper's reference code does: the true
    /// sensitivity is √k·ν for k tensors (docs/guarantees.md#errata (erratum 4.2)) — **not a valid guarantee**.
    PerLayer,
}

/// How batches are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sampling {
    /// Each example independently with probability q = b/N per step (what the RDP accountant
    /// of the sampled Gaussian mechanism assumes).
    Poisson,
    /// Shuffled fixed-size batches, as the paper's reference code — **not** covered by the
    /// accountant (docs/guarantees.md#errata (erratum 4.3)).
    Shuffle,
}

/// DP-SGD settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DpSgdConfig {
    /// The optimiser and schedule.
    pub sgd: SgdConfig,
    /// Clipping norm ν.
    pub clip: f64,
    /// Noise multiplier σ: Gaussian noise of std σ·ν on the sum of clipped gradients.
    pub noise_multiplier: f64,
    /// Joint (valid) or per-layer (paper) clipping.
    pub clipping: Clipping,
    /// Poisson (valid) or shuffled (paper) batches.
    pub sampling: Sampling,
}

impl DpSgdConfig {
    /// `corrected`: joint clipping and Poisson sampling.
    pub fn corrected(sgd: SgdConfig, clip: f64, noise_multiplier: f64) -> Self {
        DpSgdConfig {
            sgd,
            clip,
            noise_multiplier,
            clipping: Clipping::Joint,
            sampling: Sampling::Poisson,
        }
    }
    /// `paper`: the reference code's per-layer clipping and shuffled batches (docs/guarantees.md#errata (erratum 4.2)–4.3).
    pub fn paper(sgd: SgdConfig, clip: f64, noise_multiplier: f64) -> Self {
        DpSgdConfig {
            sgd,
            clip,
            noise_multiplier,
            clipping: Clipping::PerLayer,
            sampling: Sampling::Shuffle,
        }
    }
    /// The batch-gradient mode of this clipping: [`GradMode::ClipJoint`] or
    /// [`GradMode::ClipPerLayer`] at ν = `clip`.
    pub fn grad_mode(&self) -> GradMode {
        match self.clipping {
            Clipping::Joint => GradMode::ClipJoint(self.clip),
            Clipping::PerLayer => GradMode::ClipPerLayer(self.clip),
        }
    }
    /// Whether the accountant's guarantee holds for this configuration.
    pub fn valid_guarantee(&self) -> bool {
        self.clipping == Clipping::Joint && self.sampling == Sampling::Poisson
    }
    /// Number of steps, ⌈epochs·N/b⌉ (as the accountant counts them).
    pub fn steps(&self, n: usize) -> usize {
        (self.sgd.epochs * n as f64 / self.sgd.batch_size as f64).ceil() as usize
    }
    /// Sampling rate q = b/N.
    pub fn sampling_rate(&self, n: usize) -> f64 {
        self.sgd.batch_size as f64 / n as f64
    }
    /// Validates the values.
    pub fn validate(&self, n: usize) -> Result<()> {
        self.sgd.validate()?;
        if !(self.clip.is_finite() && self.clip > 0.0) {
            return Err(NnError::invalid("clip", self.clip, "must be > 0"));
        }
        if !(self.noise_multiplier.is_finite() && self.noise_multiplier >= 0.0) {
            return Err(NnError::invalid(
                "noise-multiplier",
                self.noise_multiplier,
                "must be ≥ 0",
            ));
        }
        if self.sgd.batch_size > n {
            return Err(NnError::invalid(
                "batch-size",
                self.sgd.batch_size,
                format!("must be ≤ the training-set size {n}"),
            ));
        }
        Ok(())
    }
}

/// Progress record emitted after every step (observer pattern: the caller decides whether it
/// goes to a progress bar, a log or nowhere).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Step just finished (1-based).
    pub step: usize,
    /// Total steps.
    pub steps: usize,
    /// Epochs done.
    pub epoch: f64,
    /// Learning rate used.
    pub lr: f64,
    /// Batch statistics.
    pub batch: BatchStats,
}

fn check_data(net: &ResNet, data: &ImageSet) -> Result<()> {
    check_image_shape(net, data)?;
    if data.classes > net.classes() {
        return Err(NnError::Shape(format!(
            "{}: {} classes, the network has {}",
            data.source,
            data.classes,
            net.classes()
        )));
    }
    if data.is_empty() {
        return Err(NnError::Shape(format!("{}: no images", data.source)));
    }
    Ok(())
}

struct Momentum {
    v: Vec<f32>,
}

impl Momentum {
    fn step(&mut self, params: &mut [f32], grad: &[f32], lr: f64, mu: f64, wd: f64) -> Result<()> {
        let (lr, mu, wd) = (lr as f32, mu as f32, wd as f32);
        for ((p, v), &g) in params.iter_mut().zip(self.v.iter_mut()).zip(grad) {
            let g = g + wd * *p;
            *v = mu * *v + g;
            *p -= lr * *v;
        }
        if params.iter().any(|v| !v.is_finite()) {
            return Err(NnError::Diverged(
                "non-finite parameters (lower the learning rate)".into(),
            ));
        }
        Ok(())
    }
}

/// Non-private mini-batch SGD with momentum on shuffled fixed-size batches from `init`
/// (or a fresh initialisation of scheme `cfg.init` drawn from `rng`). Returns the parameters.
pub fn train_nonprivate(
    net: &ResNet,
    data: &ImageSet,
    norm: &Normalization,
    cfg: &SgdConfig,
    init: Option<Vec<f32>>,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(&Progress),
) -> Result<Vec<f32>> {
    let on = TrainInputs {
        engine: &CpuEngine,
        net,
        data,
        norm,
    };
    train_nonprivate_on(on, cfg, init, rng, observer)
}

/// [`train_nonprivate`] with the batch gradients from `on.engine`.
pub fn train_nonprivate_on(
    on: TrainInputs<'_>,
    cfg: &SgdConfig,
    init: Option<Vec<f32>>,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(&Progress),
) -> Result<Vec<f32>> {
    let out = train_nonprivate_ctl_on(on, cfg, init, rng, &mut |p| {
        observer(p);
        ControlFlow::Continue(())
    })?;
    Ok(out.params)
}

/// The result of a training run that may stop early.
#[derive(Debug, Clone, PartialEq)]
pub struct Trained {
    /// The parameters after the last finished step.
    pub params: Vec<f32>,
    /// Steps finished.
    pub steps_done: usize,
    /// Steps planned (the learning-rate schedule is laid out over these).
    pub steps_planned: usize,
}

/// [`train_nonprivate`] whose observer may stop the run after any step
/// ([`ControlFlow::Break`], e.g. at a time limit): the learning-rate schedule stays the one
/// planned for `cfg.epochs`, and the parameters after the last finished step are returned.
pub fn train_nonprivate_ctl(
    net: &ResNet,
    data: &ImageSet,
    norm: &Normalization,
    cfg: &SgdConfig,
    init: Option<Vec<f32>>,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(&Progress) -> ControlFlow<()>,
) -> Result<Trained> {
    let on = TrainInputs {
        engine: &CpuEngine,
        net,
        data,
        norm,
    };
    train_nonprivate_ctl_on(on, cfg, init, rng, observer)
}

/// [`train_nonprivate_ctl`] with the batch gradients from `on.engine`.
pub fn train_nonprivate_ctl_on(
    on: TrainInputs<'_>,
    cfg: &SgdConfig,
    init: Option<Vec<f32>>,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(&Progress) -> ControlFlow<()>,
) -> Result<Trained> {
    nonprivate_loop(on, cfg, init, rng, None, observer)
}

/// [`train_nonprivate_on`] that checkpoints and stops as `resume` says (see
/// [`crate::resume`]): a run stopped at its deadline returns [`NnError::Stopped`], and the
/// same call later continues it to the parameters an uninterrupted run gives. The checkpoint
/// is left in place; remove it ([`Resume::remove`]) once the result is stored.
pub fn train_nonprivate_resumable_on(
    on: TrainInputs<'_>,
    cfg: &SgdConfig,
    rng: &mut impl Rng,
    resume: &Resume,
    observer: &mut dyn FnMut(&Progress),
) -> Result<Vec<f32>> {
    let t = nonprivate_loop(on, cfg, None, rng, Some(resume), &mut |p| {
        observer(p);
        ControlFlow::Continue(())
    })?;
    Ok(t.params)
}

fn nonprivate_loop(
    on: TrainInputs<'_>,
    cfg: &SgdConfig,
    init: Option<Vec<f32>>,
    rng: &mut impl Rng,
    resume: Option<&Resume>,
    observer: &mut dyn FnMut(&Progress) -> ControlFlow<()>,
) -> Result<Trained> {
    let TrainInputs {
        engine, net, data, ..
    } = on;
    let mut run = lockstep::SgdRun::start(net, data, cfg, init, rng, resume)?;
    let mut grad = vec![0.0f32; net.num_params()];
    while !run.finished() {
        let (batch, seed) = run.next_batch();
        let st = engine.batch_gradient(
            net,
            &run.params,
            on.batch_inputs(seed),
            &batch,
            GradMode::Sum,
            &mut grad,
        )?;
        let lr = run.apply(&mut grad, batch.len())?;
        if run.checkpoint(resume)? {
            resume::stop_if_expired(resume, run.step, run.steps)?;
        }
        if observer(&run.progress(lr, st)).is_break() {
            break;
        }
    }
    Ok(run.into_trained())
}

/// Restores a training loop from `resume`'s checkpoint, if there is one: overwrites the
/// parameters, the momentum, the shuffle order (over the `perm.len()` training examples the
/// run was started on) and its position, and returns (the first step to take, the seed of
/// the next segment); `(0, None)` otherwise, leaving everything as it is.
fn restore(
    resume: Option<&Resume>,
    steps: usize,
    params: &mut Vec<f32>,
    velocity: &mut Vec<f32>,
    perm: &mut Vec<usize>,
    pos: &mut usize,
) -> Result<(usize, Option<u64>)> {
    let Some(c) = resume
        .map(|r| r.load(steps, params.len()))
        .transpose()?
        .flatten()
    else {
        return Ok((0, None));
    };
    if c.perm.len() != perm.len() {
        return Err(NnError::Shape(format!(
            "checkpoint shuffles {} examples, the training set has {}",
            c.perm.len(),
            perm.len()
        )));
    }
    *perm = c.perm.into_iter().map(|i| i as usize).collect();
    (*params, *velocity, *pos) = (c.params, c.velocity, c.pos);
    Ok((c.step, Some(c.seed)))
}

/// The checkpoint of a loop after `step` of `steps` steps, whose next segment is seeded
/// with `seed`.
fn snapshot(
    step: usize,
    steps: usize,
    seed: u64,
    pos: usize,
    perm: &[usize],
    params: &[f32],
    velocity: &[f32],
) -> Checkpoint {
    Checkpoint {
        step,
        steps,
        seed,
        pos,
        perm: perm.iter().map(|&i| i as u32).collect(),
        params: params.to_vec(),
        velocity: velocity.to_vec(),
    }
}

/// Fisher–Yates shuffle.
pub fn shuffle(v: &mut [usize], rng: &mut impl Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
}

/// A Poisson-sampled batch: each of `0..n` independently with probability `q`.
pub fn poisson_batch(n: usize, q: f64, rng: &mut impl Rng) -> Vec<usize> {
    (0..n).filter(|_| rng.random::<f64>() < q).collect()
}

/// Adds N(0, std²) to every coordinate of `v`.
pub fn add_gaussian_noise(v: &mut [f32], std: f64, rng: &mut impl Rng) {
    if std == 0.0 {
        return;
    }
    for x in v.iter_mut() {
        let z: f64 = StandardNormal.sample(rng);
        *x = (*x as f64 + std * z) as f32;
    }
}

/// One DP-SGD update direction: Σ clip(g_i) + N(0, σ²ν²I), divided by the expected batch
/// size b. Returns the batch statistics. Exposed so tests can check the noise scale.
pub fn dp_gradient(
    net: &ResNet,
    params: &[f32],
    inputs: Inputs<'_>,
    batch: &[usize],
    cfg: &DpSgdConfig,
    rng: &mut impl Rng,
    out: &mut [f32],
) -> BatchStats {
    let st = batch_gradient(net, params, inputs, batch, cfg.grad_mode(), out);
    noise_and_scale(cfg, rng, out);
    st
}

/// [`dp_gradient`] with the clipped sum from `on.engine` on `on.net` at `params`, over the
/// examples `batch` of `on.data` (augmented with `augment_seed`, if any); the noise is drawn
/// here, on the CPU, from `rng`, whatever the engine.
pub fn dp_gradient_on(
    on: TrainInputs<'_>,
    params: &[f32],
    batch: &[usize],
    augment_seed: Option<u64>,
    cfg: &DpSgdConfig,
    rng: &mut impl Rng,
    out: &mut [f32],
) -> Result<BatchStats> {
    let inputs = on.batch_inputs(augment_seed);
    let st = on
        .engine
        .batch_gradient(on.net, params, inputs, batch, cfg.grad_mode(), out)?;
    noise_and_scale(cfg, rng, out);
    Ok(st)
}

fn noise_and_scale(cfg: &DpSgdConfig, rng: &mut impl Rng, out: &mut [f32]) {
    add_gaussian_noise(out, cfg.noise_multiplier * cfg.clip, rng);
    let inv = 1.0 / cfg.sgd.batch_size as f32;
    out.iter_mut().for_each(|g| *g *= inv);
}

/// DP-SGD (Abadi et al. 2016) with the sampling and clipping of `cfg`; the privacy of the
/// result is what the accountant gives for q = b/N, ⌈epochs·N/b⌉ steps and `cfg.noise_multiplier`
/// when [`DpSgdConfig::valid_guarantee`] holds. `rng` drives sampling, augmentation and noise
/// (pass an OS-seeded cryptographic generator for a release).
pub fn train_dpsgd(
    net: &ResNet,
    data: &ImageSet,
    norm: &Normalization,
    cfg: &DpSgdConfig,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(&Progress),
) -> Result<Vec<f32>> {
    let on = TrainInputs {
        engine: &CpuEngine,
        net,
        data,
        norm,
    };
    train_dpsgd_on(on, cfg, rng, observer)
}

/// [`train_dpsgd`] with the clipped gradient sums from `on.engine`; sampling, augmentation
/// seeds, noise, the optimiser and the schedule are the same code for every engine.
pub fn train_dpsgd_on(
    on: TrainInputs<'_>,
    cfg: &DpSgdConfig,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(&Progress),
) -> Result<Vec<f32>> {
    dpsgd_loop(on, cfg, rng, None, observer)
}

/// [`train_dpsgd_on`] that checkpoints and stops as `resume` says (see [`crate::resume`]),
/// like [`train_nonprivate_resumable_on`]. The privacy of the result is that of the whole
/// planned run: stopping and resuming changes no step.
pub fn train_dpsgd_resumable_on(
    on: TrainInputs<'_>,
    cfg: &DpSgdConfig,
    rng: &mut impl Rng,
    resume: &Resume,
    observer: &mut dyn FnMut(&Progress),
) -> Result<Vec<f32>> {
    dpsgd_loop(on, cfg, rng, Some(resume), observer)
}

fn dpsgd_loop(
    on: TrainInputs<'_>,
    cfg: &DpSgdConfig,
    rng: &mut impl Rng,
    resume: Option<&Resume>,
    observer: &mut dyn FnMut(&Progress),
) -> Result<Vec<f32>> {
    let (net, data) = (on.net, on.data);
    check_data(net, data)?;
    let n = data.len();
    cfg.validate(n)?;
    let steps = cfg.steps(n);
    let q = cfg.sampling_rate(n);
    let b = cfg.sgd.batch_size;
    let mut params = net.init_params_with(cfg.sgd.init, rng);
    let mut opt = Momentum {
        v: vec![0.0; params.len()],
    };
    let mut grad = vec![0.0f32; params.len()];
    let mut perm: Vec<usize> = (0..n).collect();
    let mut pos = n;
    let (first, seed) = restore(resume, steps, &mut params, &mut opt.v, &mut perm, &mut pos)?;
    let mut rng = LoopRng::start(rng, resume, seed);
    for step in first..steps {
        let batch = match cfg.sampling {
            Sampling::Poisson => poisson_batch(n, q, &mut rng),
            Sampling::Shuffle => {
                if pos + b > n {
                    shuffle(&mut perm, &mut rng);
                    pos = 0;
                }
                pos += b;
                perm[pos - b..pos].to_vec()
            }
        };
        let seed = cfg.sgd.augment.then(|| rng.random::<u64>());
        let st = dp_gradient_on(on, &params, &batch, seed, cfg, &mut rng, &mut grad)?;
        let lr = cfg.sgd.lr_at(step, steps);
        opt.step(
            &mut params,
            &grad,
            lr,
            cfg.sgd.momentum,
            cfg.sgd.weight_decay,
        )?;
        resume::boundary(resume, &mut rng, step + 1, steps, |seed| {
            snapshot(step + 1, steps, seed, pos, &perm, &params, &opt.v)
        })?;
        observer(&Progress {
            step: step + 1,
            steps,
            epoch: (step + 1) as f64 * q,
            lr,
            batch: st,
        });
    }
    Ok(params)
}

/// T teachers for subsample-and-aggregate: disjoint slices of ⌊N/T⌋ examples of a seeded
/// random permutation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeacherEnsemble {
    /// The training indices of each teacher (pairwise disjoint).
    pub partition: Vec<Vec<usize>>,
    /// Each teacher's parameters.
    #[serde(skip)]
    pub params: Vec<Vec<f32>>,
}

/// Splits `0..n` into `t` disjoint random slices of ⌊n/t⌋ (docs/study.md).
pub fn partition(n: usize, t: usize, rng: &mut impl Rng) -> Result<Vec<Vec<usize>>> {
    if t == 0 || t > n {
        return Err(NnError::invalid(
            "teachers",
            t,
            format!("must be in 1..={n} (the training-set size)"),
        ));
    }
    let mut perm: Vec<usize> = (0..n).collect();
    shuffle(&mut perm, rng);
    let m = n / t;
    Ok((0..t).map(|k| perm[k * m..(k + 1) * m].to_vec()).collect())
}

/// Trains `t` teachers, each non-privately on its own disjoint slice from a generator of its
/// own (seeded from `rng` after the partition), so that training them one after another or
/// together in lock step ([`crate::engine::teachers_together`]) takes the same steps.
/// `observer` gets (teacher index, progress).
pub fn train_teachers(
    net: &ResNet,
    data: &ImageSet,
    norm: &Normalization,
    cfg: &SgdConfig,
    t: usize,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(usize, &Progress),
) -> Result<TeacherEnsemble> {
    let on = TrainInputs {
        engine: &CpuEngine,
        net,
        data,
        norm,
    };
    train_teachers_on(on, cfg, t, rng, observer)
}

/// [`train_teachers`] with the batch gradients from `on.engine`.
pub fn train_teachers_on(
    on: TrainInputs<'_>,
    cfg: &SgdConfig,
    t: usize,
    rng: &mut impl Rng,
    observer: &mut dyn FnMut(usize, &Progress),
) -> Result<TeacherEnsemble> {
    let part = partition(on.data.len(), t, rng)?;
    let shards: Vec<ImageSet> = part.iter().map(|idx| on.data.subset(idx)).collect();
    let mut rngs: Vec<ChaCha20Rng> = (0..t)
        .map(|_| ChaCha20Rng::seed_from_u64(rng.random()))
        .collect();
    let members = rngs
        .iter_mut()
        .zip(&shards)
        .map(|(rng, data)| GroupMember {
            data,
            cfg,
            rng,
            resume: None,
        })
        .collect();
    let together = t >= 2 && crate::engine::teachers_together(on.engine)?;
    let mut params = vec![Vec::new(); t];
    train_members_on(
        on.engine,
        on.net,
        on.norm,
        members,
        together,
        &mut |k, p| {
            params[k] = p;
            Ok(())
        },
        observer,
    )?;
    Ok(TeacherEnsemble {
        partition: part,
        params,
    })
}
