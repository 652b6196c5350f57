//! `nn-train`: a full-scale timing and accuracy run of ResNet-20-GN on the CIFAR-10 JPEG copy,
//! for a many-core machine without network access (needs only this binary and the tarball).
//!
//! `--mode train` (default): non-private training with the paper's recipe (batch 600, SGD with
//! momentum 0.9, lr 0.1 divided by 10 three times at equal intervals of the planned epochs,
//! flip + 4-pixel crop padded with the mean colour, per-channel normalisation, Kaiming fan-out
//! initialisation as in `benches/resnet20_gn_reference.py`) for
//! `--epochs E`, stopping cleanly before `--time-limit-s` (which bounds the whole run: loading,
//! training and the final test evaluation), then the test accuracy on all 10,000 test images.
//! The JSON report (per-epoch training loss and accuracy — the last row may be a partial
//! epoch when the time limit stops the run — plus the loss of each of the first 200 steps) is
//! rewritten atomically after every epoch, so an interrupted run keeps its progress.
//!
//! `--mode throughput`: examples/s of one training step at batch 600 for non-private summed
//! gradients and DP-SGD (joint per-example clipping + noise; per-layer clipping too), on real
//! augmented CIFAR images, the modes interleaved so load drift hits them alike; then
//! `--teachers T` (default 16) teachers' non-private steps on their own shards, one after
//! another against together in one grouped call (`teachers` in the report).
//!
//! `--engine cpu|torch` picks the gradient engine (default: `$PRIVPRED_NN_ENGINE`, else `torch`
//! when built with `--features torch`, else `cpu`); the torch engine runs on CUDA when present
//! (`PRIVPRED_DEVICE=cpu|cuda|cuda:N` overrides). The report names the engine and its device.
//!
//! ```text
//! nn-train --data cifar10-jpeg.tar.gz --epochs 30 --batch 600 --threads 16 \
//!          --time-limit-s 3600 --out run.json
//! nn-train --mode throughput --data cifar10-jpeg.tar.gz --batch 600 --threads 16 --out tp.json
//! ```

use clap::{Parser, ValueEnum};
use privpred_nn::artifact::{self, ModelHeader, ModelKind, NnModel};
use privpred_nn::data::{self, ImageSet, Normalization};
use privpred_nn::train::{self, Clipping, DpSgdConfig, GradMode, SgdConfig, TrainInputs};
use privpred_nn::{GradientEngine, InitScheme, ResNet, ResNetConfig, engine};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Train non-privately and report accuracy and speed.
    Train,
    /// Measure examples/s of DP-SGD against non-private steps.
    Throughput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Init {
    /// The paper's code's: Kaiming-normal (fan-in) convolutions and linear layer, GroupNorm γ = 1.
    Reference,
    /// torchvision's and the PyTorch reference's: Kaiming-normal fan-out convolutions,
    /// PyTorch-default linear layer, γ = 1.
    FanOut,
    /// Zero γ in the last GroupNorm of each block, PyTorch-default linear layer.
    ZeroGamma,
}

/// ResNet-20-GN on the CIFAR-10 JPEG copy: full-scale training or throughput measurement.
#[derive(Parser, Debug)]
#[command(name = "nn-train", version)]
struct Args {
    /// What to run.
    #[arg(long, value_enum, default_value_t = Mode::Train)]
    mode: Mode,
    /// The CIFAR-10 JPEG copy (`cifar10-jpeg.tar.gz`, image-folder layout).
    #[arg(long)]
    data: PathBuf,
    /// Planned epochs; the learning-rate schedule is laid out over them.
    #[arg(long, default_value_t = 100.0)]
    epochs: f64,
    /// Batch size.
    #[arg(long, default_value_t = 600)]
    batch: usize,
    /// Initial learning rate.
    #[arg(long, default_value_t = 0.1)]
    lr: f64,
    /// L2 weight decay added to the gradient (the paper's runs: 0).
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Wall-clock limit of the whole run in seconds (training stops early to leave time for
    /// the test evaluation and the report).
    #[arg(long)]
    time_limit_s: Option<f64>,
    /// Initialisation.
    #[arg(long, value_enum, default_value_t = Init::FanOut)]
    init: Init,
    /// Seed of initialisation, batches and augmentation.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Use only the first TRAIN,TEST images of each class (quick checks).
    #[arg(long, value_name = "TRAIN,TEST")]
    per_class: Option<String>,
    /// Throughput mode: timed steps per mode.
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// Throughput mode: also time T teachers' non-private steps (T shards, one batch of
    /// `--batch` each), one after another against together in one grouped call; 0 skips it.
    #[arg(long, default_value_t = 16)]
    teachers: usize,
    /// Save the trained network as a privpred-nn artifact (non-private, no guarantee).
    #[arg(long)]
    model_out: Option<PathBuf>,
    /// Gradient engine: `cpu` (privpred-nn's own) or `torch` (libtorch; CUDA when present).
    /// Default: $PRIVPRED_NN_ENGINE, else `torch` when built in, else `cpu`.
    #[arg(long)]
    engine: Option<String>,
    /// The JSON report.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(a: &Args) -> Result<(), String> {
    let t0 = Instant::now();
    if let Some(t) = a.threads {
        if t == 0 {
            return Err("invalid threads = 0: must be ≥ 1".into());
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global()
            .map_err(|e| format!("thread pool: {e}"))?;
    }
    if !(a.epochs.is_finite() && a.epochs > 0.0) {
        return Err(format!("invalid epochs = {}: must be > 0", a.epochs));
    }
    if a.batch == 0 {
        return Err("invalid batch = 0: must be ≥ 1".into());
    }
    if let Some(t) = a.time_limit_s
        && !(t.is_finite() && t > 0.0)
    {
        return Err(format!("invalid time-limit-s = {t}: must be > 0"));
    }
    let per_class = match &a.per_class {
        None => None,
        Some(s) => {
            let v: Vec<usize> = s
                .split(',')
                .map(|x| x.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("invalid per-class = {s}: expected TRAIN,TEST counts"))?;
            match v[..] {
                [tr, te] if tr > 0 && te > 0 => Some((tr, te)),
                _ => return Err(format!("invalid per-class = {s}: expected TRAIN,TEST ≥ 1")),
            }
        }
    };
    if let Some(parent) = a.out.parent()
        && !parent.as_os_str().is_empty()
        && !parent.is_dir()
    {
        return Err(format!(
            "invalid out = {}: directory {} does not exist",
            a.out.display(),
            parent.display()
        ));
    }
    let eng = engine::from_choice(a.engine.as_deref()).map_err(|e| e.to_string())?;
    let sha = data::source_sha256(&a.data).map_err(|e| e.to_string())?;
    let (train_set, test_set) =
        data::load_cifar10_jpeg(&a.data, per_class).map_err(|e| e.to_string())?;
    let load_s = t0.elapsed().as_secs_f64();
    eprintln!(
        "{}: {} train / {} test images ({load_s:.1} s), {} threads, engine {}",
        train_set.source,
        train_set.len(),
        test_set.len(),
        rayon::current_num_threads(),
        eng.describe()
    );
    let engine_label = match eng.name() {
        "cpu" => format!("privpred-nn {} (CPU, f32, gemm)", env!("CARGO_PKG_VERSION")),
        _ => format!(
            "privpred-nn {} ({})",
            env!("CARGO_PKG_VERSION"),
            eng.describe()
        ),
    };
    let base = json!({
        "engine": engine_label,
        "engine_kind": eng.name(),
        "device": eng.device(),
        "machine": machine(),
        "data": {
            "path": a.data.display().to_string(),
            "sha256": sha,
            "label": train_set.source,
            "train_images": train_set.len(),
            "test_images": test_set.len(),
            "per_class": per_class,
            "load_s": load_s,
        },
    });
    match a.mode {
        Mode::Train => train_mode(a, &*eng, t0, base, &train_set, &test_set),
        Mode::Throughput => throughput_mode(a, &*eng, base, &train_set),
    }
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    json!({
        "threads": rayon::current_num_threads(),
        "available_parallelism": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    })
}

fn write_json(path: &Path, v: &Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    privpred_data::fsutil::write_atomic(path, |w| std::io::Write::write_all(w, text.as_bytes()))
        .map_err(|e| e.to_string())
}

fn init_scheme(i: Init) -> InitScheme {
    match i {
        Init::Reference => InitScheme::Reference,
        Init::FanOut => InitScheme::FanOut,
        Init::ZeroGamma => InitScheme::ZeroGamma,
    }
}

fn test_accuracy(
    eng: &dyn GradientEngine,
    net: &ResNet,
    p: &[f32],
    test: &ImageSet,
    norm: &Normalization,
) -> Result<f64, String> {
    let pred = train::predict_labels_on(eng, net, p, test, norm).map_err(|e| e.to_string())?;
    Ok(train::accuracy(&pred, &test.labels))
}

/// Training losses of this many first steps go into the report one by one.
const FIRST_STEPS: usize = 200;

/// `--mode train`: non-private ResNet-20 training with a time limit. Steps: configure SGD and
/// write the configuration into the report, train while [`EpochLog`] logs every epoch (and
/// stops before the limit), measure the test accuracy, fill in the report
/// ([`record_training`]), save the model if asked ([`save_trained_model`]), write the report.
fn train_mode(
    a: &Args,
    eng: &dyn GradientEngine,
    t0: Instant,
    mut report: Value,
    train_set: &ImageSet,
    test_set: &ImageSet,
) -> Result<(), String> {
    let net = ResNet::new(ResNetConfig::resnet20(10)).map_err(|e| e.to_string())?;
    let norm = Normalization::cifar10();
    let cfg = SgdConfig {
        epochs: a.epochs,
        batch_size: a.batch,
        lr: a.lr,
        weight_decay: a.weight_decay,
        init: init_scheme(a.init),
        ..SgdConfig::paper_teacher()
    };
    cfg.validate().map_err(|e| e.to_string())?;
    report["config"] = json!({
        "model": "ResNet-20 (type-A shortcuts), GroupNorm min(32, C) groups",
        "parameters": net.num_params(),
        "sgd": cfg,
        "lr_schedule": "lr divided by 10 three times at equal intervals of the planned epochs",
        "normalisation": norm,
        "seed": a.seed,
    });
    let mut rng = ChaCha20Rng::seed_from_u64(a.seed);
    let mut log = EpochLog::new(a, t0, test_set.len(), report.clone());
    let on = TrainInputs {
        engine: eng,
        net: &net,
        data: train_set,
        norm: &norm,
    };
    let trained = train::train_nonprivate_ctl_on(on, &cfg, None, &mut rng, &mut |p| log.step(p))
        .map_err(|e| e.to_string())?;
    let train_s = log.train_start.elapsed().as_secs_f64();
    let te = Instant::now();
    let acc = test_accuracy(eng, &net, &trained.params, test_set, &norm)?;
    let eval_s = te.elapsed().as_secs_f64();
    let n = train_set.len() as f64;
    let epochs_done = trained.steps_done as f64 * a.batch.min(train_set.len()) as f64 / n;
    record_training(&mut report, a, &trained, &log, train_s, epochs_done, n);
    report["test_accuracy"] = json!(acc);
    report["test_images"] = json!(test_set.len());
    report["test_eval_s"] = json!(eval_s);
    report["total_s"] = json!(t0.elapsed().as_secs_f64());
    report["finished"] = json!(true);
    report["note"] = json!(if log.stopped {
        "stopped at the time limit: the learning-rate schedule was laid out over the planned epochs, so the later (lower) learning rates were not all reached"
    } else {
        "the full planned schedule ran"
    });
    if let Some(path) = &a.model_out {
        save_trained_model(path, a, on, &cfg, &trained)?;
        report["model_out"] = json!(path.display().to_string());
    }
    write_json(&a.out, &report)?;
    eprintln!(
        "test accuracy {acc:.4} after {epochs_done:.2} of {} epochs ({:.1} examples/s); wrote {}",
        a.epochs,
        epochs_done * n / train_s,
        a.out.display()
    );
    Ok(())
}

/// The training log of `--mode train`: per-epoch loss and accuracy rows (each also written
/// into a partial report), the first steps' losses, and the decision to stop before the time
/// limit (leaving room for one more step, the test pass and the report).
struct EpochLog<'a> {
    a: &'a Args,
    t0: Instant,
    test_len: usize,
    /// The report so far (configuration), the base of every partial report.
    base_report: Value,
    limit: f64,
    /// Smoothed seconds per training example (the test pass costs about a third of it per
    /// example: forward only).
    per_example_s: f64,
    per_epoch: Vec<Value>,
    loss: f64,
    correct: usize,
    seen: usize,
    epoch_done: usize,
    stopped: bool,
    first_steps: Vec<f64>,
    train_start: Instant,
    last: Instant,
}

impl<'a> EpochLog<'a> {
    fn new(a: &'a Args, t0: Instant, test_len: usize, base_report: Value) -> Self {
        EpochLog {
            a,
            t0,
            test_len,
            base_report,
            limit: a.time_limit_s.unwrap_or(f64::INFINITY),
            per_example_s: 0.0,
            per_epoch: Vec::new(),
            loss: 0.0,
            correct: 0,
            seen: 0,
            epoch_done: 0,
            stopped: false,
            first_steps: Vec::new(),
            train_start: Instant::now(),
            last: Instant::now(),
        }
    }

    /// Records one step; at the end of an epoch (or of the run, or at the time limit) logs
    /// the epoch's row and writes the partial report. Breaks when the next step would not
    /// leave time for the test pass.
    fn step(&mut self, p: &train::Progress) -> ControlFlow<()> {
        let dt = self.last.elapsed().as_secs_f64();
        self.last = Instant::now();
        self.per_example_s = if self.per_example_s == 0.0 {
            dt / p.batch.n.max(1) as f64
        } else {
            0.8 * self.per_example_s + 0.2 * dt / p.batch.n.max(1) as f64
        };
        self.loss += p.batch.loss_sum;
        self.correct += p.batch.correct;
        self.seen += p.batch.n;
        if self.first_steps.len() < FIRST_STEPS {
            self.first_steps
                .push(p.batch.loss_sum / p.batch.n.max(1) as f64);
        }
        // leave room for one more step, the test pass and the report
        let eval_est = self.per_example_s * self.test_len as f64 / 3.0 * 1.5 + 2.0;
        let next_step = self.per_example_s * self.a.batch as f64 * 1.2;
        self.stopped = self.t0.elapsed().as_secs_f64() + next_step + eval_est > self.limit;
        let ep = p.epoch.floor() as usize;
        if ep > self.epoch_done || p.step == p.steps || self.stopped {
            self.epoch_done = ep;
            self.end_epoch(p);
        }
        if self.stopped {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    /// Logs the finished epoch's row, resets the running sums and writes the partial report.
    fn end_epoch(&mut self, p: &train::Progress) {
        let row = json!({
            "epoch": p.epoch,
            "train_loss": self.loss / self.seen.max(1) as f64,
            "train_accuracy_augmented": self.correct as f64 / self.seen.max(1) as f64,
            "lr": p.lr,
            "step": p.step,
            "elapsed_s": self.train_start.elapsed().as_secs_f64(),
        });
        eprintln!("{row}");
        self.per_epoch.push(row);
        (self.loss, self.correct, self.seen) = (0.0, 0, 0);
        let mut r = self.base_report.clone();
        r["per_epoch"] = json!(self.per_epoch);
        r["finished"] = json!(false);
        r["first_steps_train_loss"] = json!(self.first_steps);
        let _ = write_json(&self.a.out, &r);
    }
}

/// The training part of the final report: steps and epochs planned and done, the time limit's
/// effect, throughput, and the log's per-epoch rows and first losses.
fn record_training(
    report: &mut Value,
    a: &Args,
    trained: &train::Trained,
    log: &EpochLog<'_>,
    train_s: f64,
    epochs_done: f64,
    n: f64,
) {
    report["steps_planned"] = json!(trained.steps_planned);
    report["steps_done"] = json!(trained.steps_done);
    report["epochs_planned"] = json!(a.epochs);
    report["epochs_done"] = json!(epochs_done);
    report["stopped_by_time_limit"] = json!(log.stopped);
    report["train_s"] = json!(train_s);
    report["epochs_per_s"] = json!(epochs_done / train_s);
    report["examples_per_s"] = json!(epochs_done * n / train_s);
    report["per_epoch"] = json!(log.per_epoch);
    report["first_steps_train_loss"] = json!(log.first_steps);
}

/// Saves the network trained on `on` as a non-private model artifact at `path`.
fn save_trained_model(
    path: &Path,
    a: &Args,
    on: TrainInputs<'_>,
    cfg: &SgdConfig,
    trained: &train::Trained,
) -> Result<(), String> {
    let TrainInputs {
        engine: eng,
        net,
        data: train_set,
        norm,
    } = on;
    let model = NnModel::new(
        ModelHeader {
            kind: ModelKind::NonPrivate,
            config: *net.config(),
            normalization: norm.clone(),
            calibration: None,
            training: None,
            seed_policy: None,
            members: 1,
            class_names: None,
            data_source: train_set.source.clone(),
        },
        vec![trained.params.clone()],
        json!({"trained_with": "nn-train", "engine": eng.describe(), "sgd": cfg, "steps_done": trained.steps_done, "seed": a.seed}),
    )
    .map_err(|e| e.to_string())?;
    artifact::save(path, &model).map_err(|e| e.to_string())
}

fn throughput_mode(
    a: &Args,
    eng: &dyn GradientEngine,
    mut report: Value,
    train_set: &ImageSet,
) -> Result<(), String> {
    let net = ResNet::new(ResNetConfig::resnet20(10)).map_err(|e| e.to_string())?;
    let norm = Normalization::cifar10();
    let mut rng = ChaCha20Rng::seed_from_u64(a.seed);
    let params = net.init_params_with(init_scheme(a.init), &mut rng);
    let b = a.batch.min(train_set.len());
    let sgd = SgdConfig {
        batch_size: b,
        ..SgdConfig::paper_dpsgd()
    };
    let joint = DpSgdConfig::corrected(sgd.clone(), 1.0, 1.0);
    let per_layer = DpSgdConfig {
        clipping: Clipping::PerLayer,
        ..joint.clone()
    };
    let mut g = vec![0.0f32; net.num_params()];
    let names = [
        "non-private",
        "dp-sgd joint clipping",
        "dp-sgd per-layer clipping",
    ];
    let mut secs = [0.0f64; 3];
    let mut prep_s = 0.0f64;
    let steps = a.steps.max(1);
    // one untimed warm-up step per mode, then `steps` timed rounds, the modes interleaved
    for round in 0..=steps {
        let idx: Vec<usize> = (0..b)
            .map(|_| rng.random_range(0..train_set.len()))
            .collect();
        let on = TrainInputs {
            engine: eng,
            net: &net,
            data: train_set,
            norm: &norm,
        };
        let augment_seed = Some(rng.random());
        let inputs = on.batch_inputs(augment_seed);
        // the CPU's share of a step on a device: preparing the pixels, which the device awaits
        let t = Instant::now();
        std::hint::black_box(privpred_nn::gradient::prepare_batch(&net, inputs, &idx, 0));
        if round > 0 {
            prep_s += t.elapsed().as_secs_f64();
        }
        for (k, s) in secs.iter_mut().enumerate() {
            let t = Instant::now();
            match k {
                0 => {
                    eng.batch_gradient(&net, &params, inputs, &idx, GradMode::Sum, &mut g)
                        .map_err(|e| e.to_string())?;
                    let inv = 1.0 / b as f32;
                    g.iter_mut().for_each(|v| *v *= inv);
                }
                _ => {
                    let cfg = if k == 1 { &joint } else { &per_layer };
                    train::dp_gradient_on(on, &params, &idx, augment_seed, cfg, &mut rng, &mut g)
                        .map_err(|e| e.to_string())?;
                }
            }
            if round > 0 {
                *s += t.elapsed().as_secs_f64();
            }
        }
        eprintln!("round {round}/{steps} done");
    }
    let rows: Vec<Value> = names
        .iter()
        .zip(secs)
        .map(|(name, s)| {
            json!({
                "mode": name,
                "seconds_per_step": s / steps as f64,
                "examples_per_s": (b * steps) as f64 / s,
            })
        })
        .collect();
    report["batch"] = json!(b);
    report["timed_steps_per_mode"] = json!(steps);
    report["engine_settings"] = eng.settings(b);
    report["cpu_input_preparation_s_per_step"] = json!(prep_s / steps as f64);
    report["throughput"] = json!(rows);
    if a.teachers > 0 {
        report["teachers"] = teacher_throughput(a, eng, &net, &norm, &params, train_set, &mut rng)?;
    }
    report["dp_sgd_slowdown_joint"] = json!(secs[1] / secs[0]);
    report["dp_sgd_slowdown_per_layer"] = json!(secs[2] / secs[0]);
    report["note"] = json!(
        "one gradient step each (forward + backward over the batch; DP-SGD also clips every per-example gradient and adds the Gaussian noise); modes interleaved per round; the SGD update itself is excluded from all three"
    );
    write_json(&a.out, &report)?;
    eprintln!(
        "examples/s: non-private {:.1}, DP-SGD joint {:.1} ({:.2}× the time), per-layer {:.1}; wrote {}",
        (b * steps) as f64 / secs[0],
        (b * steps) as f64 / secs[1],
        secs[1] / secs[0],
        (b * steps) as f64 / secs[2],
        a.out.display()
    );
    Ok(())
}

/// Examples/s of `--teachers` teachers' non-private steps (each on a batch of its own shard of
/// `train_set`, with its own parameters), one after another (one
/// [`GradientEngine::batch_gradient`] each) against together (one
/// [`GradientEngine::group_gradients`]), one warm-up round then `--steps` rounds, the two
/// interleaved.
fn teacher_throughput(
    a: &Args,
    eng: &dyn GradientEngine,
    net: &ResNet,
    norm: &Normalization,
    params: &[f32],
    train_set: &ImageSet,
    rng: &mut ChaCha20Rng,
) -> Result<Value, String> {
    let t = a.teachers;
    let shards: Vec<ImageSet> = train::partition(train_set.len(), t, rng)
        .map_err(|e| e.to_string())?
        .iter()
        .map(|idx| train_set.subset(idx))
        .collect();
    let b = a.batch.min(shards[0].len());
    // each teacher its own parameters: the first ones, slightly moved
    let members: Vec<Vec<f32>> = (0..t)
        .map(|k| {
            params
                .iter()
                .map(|&v| v * (1.0 + 0.01 * k as f32))
                .collect()
        })
        .collect();
    let mut outs = vec![vec![0.0f32; net.num_params()]; t];
    let mut secs = [0.0f64; 2];
    let steps = a.steps.max(1);
    for round in 0..=steps {
        let idx: Vec<Vec<usize>> = shards
            .iter()
            .map(|s| (0..b).map(|_| rng.random_range(0..s.len())).collect())
            .collect();
        let jobs: Vec<engine::GroupJob<'_>> = (0..t)
            .map(|k| engine::GroupJob {
                params: &members[k],
                inputs: privpred_nn::train::Inputs {
                    data: &shards[k],
                    norm,
                    augment_seed: Some(rng.random()),
                },
                idx: &idx[k],
            })
            .collect();
        for (k, s) in secs.iter_mut().enumerate() {
            let t0 = Instant::now();
            if k == 0 {
                privpred_nn::gradient::group_gradients_one_by_one(eng, net, &jobs, &mut outs)
            } else {
                eng.group_gradients(net, &jobs, &mut outs)
            }
            .map_err(|e| e.to_string())?;
            if round > 0 {
                *s += t0.elapsed().as_secs_f64();
            }
        }
        eprintln!("teachers round {round}/{steps} done");
    }
    let ex = (t * b * steps) as f64;
    eprintln!(
        "{t} teachers, examples/s: one after another {:.1}, together {:.1}",
        ex / secs[0],
        ex / secs[1]
    );
    Ok(json!({
        "teachers": t,
        "batch_per_teacher": b,
        "timed_rounds": steps,
        "groups_together": eng.groups_together(),
        "one_after_another_examples_per_s": ex / secs[0],
        "together_examples_per_s": ex / secs[1],
        "together_speedup": secs[0] / secs[1],
        "note": "one non-private gradient step of every teacher per round (forward + backward of its batch); one after another: one batch gradient per teacher; together: one grouped call for all",
    }))
}
