//! Figure 7 of the paper (docs/study.md): ResNet-20-GN on CIFAR-10, DP-SGD vs
//! subsample-and-aggregate, accuracy vs ε (fig7a, B = 10) and vs B (fig7b, ε = 1), δ = 1e-5.
//!
//! The expensive parts are trained once per context and cached on disk (so a study can resume):
//! the T = 16 teachers (one partition → one vote matrix on the test set, from which every
//! (ε, B) is derived by the exponential mechanism), one DP-SGD network per ε (B does not
//! matter: the released model is private), and the non-private reference network.
//! [`run_unit`] answers one (method, ε, δ, B) point with `repetitions` measurements:
//! fresh exponential-mechanism draws over the fixed vote matrix for subsample-and-aggregate;
//! for DP-SGD the test accuracy of the network(s) trained for that ε (one training run per
//! repetition up to `dpsgd_runs`, then reused — say so when reporting).
//!
//! Study code over the `privpred-nn` engines, next to the other figures; compiled
//! with the `nn` feature. Errors are the engine crate's [`NnError`].

use privpred_core::ParamGuard;
use privpred_core::{Calibration, CalibrationMode, Method, Privacy};
use privpred_nn::artifact::{self, ModelHeader, ModelKind, NnModel};
use privpred_nn::calib;
use privpred_nn::data::{self, ImageSet, Normalization};
use privpred_nn::engine::{CpuEngine, GradientEngine};
use privpred_nn::error::{NnError, Result};
use privpred_nn::params::SgdParams;
use privpred_nn::resnet::{ResNet, ResNetConfig};
use privpred_nn::resume::Resume;
use privpred_nn::teachers::VoteMatrix;
use privpred_nn::train::{self, DpSgdConfig, Progress, SgdConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

mod teachers;

/// Settings of a figure-7 run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fig7Config {
    /// The CIFAR-10 image-folder archive.
    pub data_path: PathBuf,
    /// Use only the first (train, test) images per class (None: all 50,000 / 10,000).
    pub per_class: Option<(usize, usize)>,
    /// Small-scale CPU run (labelled in every result).
    pub quick: bool,
    /// Calibration mode (`paper` also trains DP-SGD with per-layer clipping and shuffled batches).
    pub mode: CalibrationMode,
    /// Teachers T.
    pub teachers: usize,
    /// Teacher training schedule (paper: 500 epochs).
    pub teacher_sgd: SgdConfig,
    /// DP-SGD schedule (paper: 100 epochs).
    pub dpsgd_sgd: SgdConfig,
    /// DP-SGD clipping norm ν.
    pub clip: f64,
    /// Non-private reference schedule.
    pub reference_sgd: SgdConfig,
    /// Independent DP-SGD trainings per ε (the rest of the repetitions reuse them).
    pub dpsgd_runs: usize,
    /// Architecture.
    pub net: ResNetConfig,
    /// Seed of every random choice (partition, initialisation, sampling, noise draws).
    pub seed: u64,
    /// Where trained models and vote matrices are cached.
    pub cache_dir: PathBuf,
}

impl Fig7Config {
    /// The paper's setting (docs/study.md): all of CIFAR-10, T = 16 teachers × 500 epochs, DP-SGD
    /// 100 epochs, batch 600, lr 0.1 with three ÷10 drops, ν = 1 — needs a GPU-class budget
    /// of compute (see the crate README for CPU timings).
    pub fn full(cache_dir: PathBuf) -> Self {
        Fig7Config {
            data_path: PathBuf::from(data::CIFAR10_JPEG_DEFAULT),
            per_class: None,
            quick: false,
            mode: CalibrationMode::Corrected,
            teachers: privpred_core::defaults::RESNET_TEACHERS,
            teacher_sgd: SgdConfig::paper_teacher(),
            dpsgd_sgd: SgdConfig::paper_dpsgd(),
            clip: privpred_core::defaults::RESNET_CLIP,
            reference_sgd: SgdConfig::paper_dpsgd(),
            dpsgd_runs: 1,
            net: ResNetConfig::resnet20(10),
            seed: 0,
            cache_dir,
        }
    }

    /// `--quick`: 2,000 training images (200 per class), 500 test images, T = 16 teachers ×
    /// 10 epochs, DP-SGD 3 epochs at batch 100, reference 6 epochs — minutes on two CPU
    /// cores; results are labelled quick and are far below the paper's.
    pub fn quick(cache_dir: PathBuf) -> Self {
        let base = SgdConfig {
            epochs: 10.0,
            batch_size: 25,
            lr: 0.05,
            ..SgdConfig::paper_teacher()
        };
        Fig7Config {
            per_class: Some((200, 50)),
            quick: true,
            teacher_sgd: base.clone(),
            dpsgd_sgd: SgdConfig {
                epochs: 3.0,
                batch_size: 100,
                lr: 0.05,
                weight_decay: 0.0,
                ..base.clone()
            },
            reference_sgd: SgdConfig {
                epochs: 6.0,
                batch_size: 50,
                ..base
            },
            ..Self::full(cache_dir)
        }
    }

    fn key(&self, what: &str, extra: &str) -> String {
        // a short content hash of everything that determines the cached object
        use sha2::{Digest, Sha256};
        let s = format!(
            "v2-resumable|{what}|{extra}|{:?}|{:?}|{}",
            self.per_class, self.net, self.seed
        );
        let full = match what {
            "teachers" => format!("{s}|{}|{:?}", self.teachers, self.teacher_sgd),
            "dpsgd" => format!("{s}|{:?}|{}|{:?}", self.dpsgd_sgd, self.clip, self.mode),
            _ => format!("{s}|{:?}", self.reference_sgd),
        };
        let h = Sha256::digest(full.as_bytes());
        format!(
            "{what}{extra}-{}",
            h.iter()
                .take(6)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )
    }
}

/// Loaded data and everything trained so far.
pub struct Fig7Context {
    /// Settings.
    pub cfg: Fig7Config,
    /// Training images.
    pub train: ImageSet,
    /// Test images (the queries).
    pub test: ImageSet,
    net: ResNet,
    norm: Normalization,
    votes: Option<VoteMatrix>,
    dataset_checksum: String,
    engine: Box<dyn GradientEngine>,
    deadline: Option<Instant>,
    teachers_together: Option<bool>,
}

/// One repetition's measurement (field names follow `privpred_study::results::Measurement`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fig7Measurement {
    /// Method.
    pub method: Method,
    /// ε, δ, B of the point.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// B.
    pub budget: u64,
    /// Repetition index.
    pub repetition: u32,
    /// Test accuracy of the private predictor.
    pub accuracy: f64,
    /// Test accuracy of the non-private reference network.
    pub nonprivate_accuracy: f64,
    /// Training examples.
    pub n_train: usize,
    /// Test queries answered.
    pub test_size: usize,
    /// Teachers (subsample-and-aggregate).
    pub teachers: Option<usize>,
    /// ν (DP-SGD).
    pub clip: Option<f64>,
    /// `gaussian` or `exponential`.
    pub noise: String,
    /// σ·ν for DP-SGD, β for the exponential mechanism.
    pub noise_param: f64,
    /// DP-SGD noise multiplier.
    pub noise_multiplier: Option<f64>,
    /// Whether the guarantee holds.
    pub valid_guarantee: bool,
    /// The full calibration.
    pub calibration: Calibration,
    /// Labels: "CIFAR-10 (JPEG copy)", "quick", "dp-sgd training run k reused", ...
    pub labels: Vec<String>,
    /// SHA-256 (hex) of the data source the run read ([`data::source_sha256`] of
    /// [`Fig7Config::data_path`]: the tarball's bytes, or a folder's files); empty when the
    /// images were handed in by [`prepare_with`] without one.
    pub dataset_checksum: String,
}

/// Loads the data (the CIFAR-10 JPEG copy or the binary batches, or a subset) and sets up
/// the network.
pub fn prepare(cfg: Fig7Config) -> Result<Fig7Context> {
    check_teacher_count(&cfg)?;
    check_schedules(&cfg)?;
    let dataset_checksum = data::source_sha256(&cfg.data_path)?;
    let (train, test) = data::load_cifar10(&cfg.data_path, cfg.per_class)?;
    let mut ctx = prepare_with(cfg, train, test, Normalization::cifar10())?;
    ctx.set_dataset_checksum(dataset_checksum);
    Ok(ctx)
}

/// Builds a context from already-loaded images (e.g. tests, other datasets). Their source's
/// checksum is unknown here: set it with [`Fig7Context::set_dataset_checksum`].
pub fn prepare_with(
    cfg: Fig7Config,
    train: ImageSet,
    test: ImageSet,
    norm: Normalization,
) -> Result<Fig7Context> {
    check_teacher_count(&cfg)?;
    check_schedules(&cfg)?;
    check_teachers(&cfg, train.len())?;
    let net = ResNet::new(cfg.net)?;
    std::fs::create_dir_all(&cfg.cache_dir).map_err(|e| NnError::io(&cfg.cache_dir, e))?;
    Ok(Fig7Context {
        cfg,
        train,
        test,
        net,
        norm,
        votes: None,
        dataset_checksum: String::new(),
        engine: Box::new(CpuEngine),
        deadline: None,
        teachers_together: None,
    })
}

/// The three training schedules and ν through the checked parameters of
/// [`privpred_nn::params`], before any data is read: every bad value is refused with its name
/// and valid range.
fn check_schedules(cfg: &Fig7Config) -> Result<()> {
    for sgd in [&cfg.teacher_sgd, &cfg.dpsgd_sgd, &cfg.reference_sgd] {
        SgdParams::from(sgd.clone()).check()?;
    }
    privpred_core::params::positive("clip", cfg.clip)?;
    Ok(())
}

/// Subsample-and-aggregate needs at least two teachers (one vote cannot be outvoted).
fn check_teacher_count(cfg: &Fig7Config) -> Result<()> {
    if cfg.teachers < 2 {
        return Err(NnError::invalid("teachers", cfg.teachers, "must be ≥ 2"));
    }
    Ok(())
}

/// T in 1..=N for the `n` training images (each teacher needs at least one).
fn check_teachers(cfg: &Fig7Config, n: usize) -> Result<()> {
    privpred_core::params::count_up_to(
        "teachers",
        cfg.teachers,
        n,
        "each teacher needs >= 1 training image",
    )?;
    Ok(())
}

fn stable_seed(base: u64, tag: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(format!("{base}:{tag}").as_bytes());
    u64::from_le_bytes(h[..8].try_into().expect("8 bytes"))
}

fn read_json<T: for<'de> Deserialize<'de>>(p: &Path) -> Option<T> {
    std::fs::read(p)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

fn write_json<T: Serialize>(p: &Path, v: &T) -> Result<()> {
    let tmp = p.with_extension("json.tmp");
    let bytes = serde_json::to_vec(v).map_err(|e| NnError::format(p, e.to_string()))?;
    std::fs::write(&tmp, bytes).map_err(|e| NnError::io(&tmp, e))?;
    std::fs::rename(&tmp, p).map_err(|e| NnError::io(p, e))
}

/// A trained network's parameters as raw little-endian f32 (atomically written).
fn write_params(p: &Path, v: &[f32]) -> Result<()> {
    let tmp = p.with_extension("params.tmp");
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&tmp, bytes).map_err(|e| NnError::io(&tmp, e))?;
    std::fs::rename(&tmp, p).map_err(|e| NnError::io(p, e))
}

/// Parameters written by [`write_params`], when the file is there with `n` values.
fn read_params(p: &Path, n: usize) -> Option<Vec<f32>> {
    let b = std::fs::read(p).ok()?;
    (b.len() == 4 * n).then(|| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    })
}

#[derive(Serialize, Deserialize)]
struct CachedPredictions {
    predictions: Vec<u32>,
    accuracy: f64,
    calibration: Option<Calibration>,
}

impl Fig7Context {
    /// Trains and predicts with `engine` from now on (default [`CpuEngine`]). Models cached by
    /// another engine are not reused: the cache names of engines other than the CPU one carry
    /// the engine's name (the random seeds do not depend on the engine).
    pub fn set_engine(&mut self, engine: Box<dyn GradientEngine>) {
        self.engine = engine;
    }

    /// Stops every training run cleanly at the first epoch boundary after `deadline` with
    /// [`NnError::Stopped`], keeping its checkpoint in the cache directory: the same call on a
    /// context over the same cache continues it (see [`privpred_nn::resume`]). Results do not
    /// depend on where runs were stopped.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// Trains the teachers together in lock step (`Some(true)`) or one after another
    /// (`Some(false)`); `None` (the default): as `$PRIVPRED_TEACHERS_TOGETHER` says, else
    /// together exactly when the engine computes a group in one pass
    /// ([`privpred_nn::engine::teachers_together`]). Every teacher takes the same steps either
    /// way.
    pub fn set_teachers_together(&mut self, together: Option<bool>) {
        self.teachers_together = together;
    }

    /// The checkpoint of the training run cached as `key`, written once per epoch of `n`
    /// examples at batch size `b`.
    fn resume(&self, key: &str, n: usize, b: usize) -> Result<Resume> {
        let every = n.div_ceil(b.max(1)).max(1);
        Resume::new(
            self.cfg.cache_dir.join(format!("{key}.ckpt")),
            every,
            self.deadline,
        )
    }

    /// The engine that trains and predicts.
    pub fn engine(&self) -> &dyn GradientEngine {
        &*self.engine
    }

    /// The engine, network, training set and normalisation every training run here uses.
    fn train_inputs(&self) -> train::TrainInputs<'_> {
        train::TrainInputs {
            engine: &*self.engine,
            net: &self.net,
            data: &self.train,
            norm: &self.norm,
        }
    }

    /// The cache key of an object: [`Fig7Config::key`] with the data's checksum, and the
    /// engine's name for engines other than the CPU one.
    fn cache_key(&self, what: &str, extra: &str) -> String {
        // the data by its content (its checksum), not by where it lies
        let data: String = self.dataset_checksum.chars().take(12).collect();
        match self.engine.name() {
            "cpu" => self.cfg.key(what, &format!("{extra}-{data}")),
            other => self.cfg.key(what, &format!("{extra}-{data}-{other}")),
        }
    }

    /// The labels every result of this context carries.
    pub fn labels(&self) -> Vec<String> {
        let mut l = vec![
            self.train.source.clone(),
            format!("engine: {}", self.engine.describe()),
        ];
        if self.cfg.quick {
            l.push(format!(
                "quick: {} train / {} test images, shortened schedules — not the paper's setting",
                self.train.len(),
                self.test.len()
            ));
        }
        l
    }

    /// SHA-256 (hex) of the data source (see [`Fig7Measurement::dataset_checksum`]).
    pub fn dataset_checksum(&self) -> &str {
        &self.dataset_checksum
    }

    /// Records the checksum of the source of images handed to [`prepare_with`].
    pub fn set_dataset_checksum(&mut self, sha256_hex: String) {
        self.dataset_checksum = sha256_hex;
    }

    /// The model cache directory.
    pub fn cache_dir(&self) -> &Path {
        &self.cfg.cache_dir
    }

    /// The teachers' vote matrix on the test set: trained once (and cached, with the
    /// ensemble saved as a safetensors artifact under the cache directory).
    pub fn vote_matrix(
        &mut self,
        observer: &mut dyn FnMut(&str, &Progress),
    ) -> Result<&VoteMatrix> {
        if self.votes.is_none() {
            let key = self.cache_key("teachers", "");
            let path = self.cfg.cache_dir.join(format!("{key}.votes.json"));
            let v = match read_json::<VoteMatrix>(&path) {
                Some(v) if v.n == self.test.len() && v.teachers == self.cfg.teachers => v,
                _ => {
                    let preds = self.teacher_predictions(&key, observer)?;
                    let v = VoteMatrix::from_predictions(&preds, self.net.classes())?;
                    self.save_ensemble(&key)?;
                    write_json(&path, &v)?;
                    v
                }
            };
            self.votes = Some(v);
        }
        Ok(self.votes.as_ref().expect("just set"))
    }

    /// Test accuracy of the non-private reference network on the full training set (cached).
    pub fn nonprivate_accuracy(
        &mut self,
        observer: &mut dyn FnMut(&str, &Progress),
    ) -> Result<f64> {
        let key = self.cache_key("reference", "");
        let path = self.cfg.cache_dir.join(format!("{key}.json"));
        if let Some(c) = read_json::<CachedPredictions>(&path) {
            return Ok(c.accuracy);
        }
        let mut rng = ChaCha20Rng::seed_from_u64(stable_seed(self.cfg.seed, "reference"));
        let resume = self.resume(&key, self.train.len(), self.cfg.reference_sgd.batch_size)?;
        let p = train::train_nonprivate_resumable_on(
            self.train_inputs(),
            &self.cfg.reference_sgd,
            &mut rng,
            &resume,
            &mut |p| observer("non-private", p),
        )?;
        let pred = train::predict_labels_on(&*self.engine, &self.net, &p, &self.test, &self.norm)?;
        let acc = train::accuracy(&pred, &self.test.labels);
        write_json(
            &path,
            &CachedPredictions {
                predictions: pred,
                accuracy: acc,
                calibration: None,
            },
        )?;
        resume.remove()?;
        Ok(acc)
    }

    /// DP-SGD test predictions for ε (training run `run`), trained once and cached (the model
    /// is saved as a safetensors artifact beside the predictions).
    pub fn dpsgd_predictions(
        &mut self,
        epsilon: f64,
        delta: f64,
        run: usize,
        observer: &mut dyn FnMut(&str, &Progress),
    ) -> Result<(Vec<u32>, Calibration)> {
        let extra = format!("-eps{epsilon}-delta{delta}-run{run}");
        // the seed is the CPU engine's key's, whatever the engine
        let seed_key = self.cfg.key("dpsgd", &extra);
        let key = self.cache_key("dpsgd", &extra);
        let path = self.cfg.cache_dir.join(format!("{key}.json"));
        if let Some(CachedPredictions {
            predictions,
            calibration: Some(c),
            ..
        }) = read_json::<CachedPredictions>(&path)
        {
            return Ok((predictions, c));
        }
        let n = self.train.len();
        let cal = calib::dpsgd(
            self.cfg.mode,
            Privacy::new(epsilon, delta)?,
            n,
            self.cfg.dpsgd_sgd.batch_size,
            self.cfg.dpsgd_sgd.epochs,
            self.net.classes(),
        )?;
        let sigma = cal.mechanism.noise_multiplier().ok_or_else(|| {
            NnError::Shape("DP-SGD calibration without a noise multiplier".into())
        })?;
        let dcfg = if self.cfg.mode == CalibrationMode::Paper {
            DpSgdConfig::paper(self.cfg.dpsgd_sgd.clone(), self.cfg.clip, sigma)
        } else {
            DpSgdConfig::corrected(self.cfg.dpsgd_sgd.clone(), self.cfg.clip, sigma)
        };
        let mut rng = ChaCha20Rng::seed_from_u64(stable_seed(self.cfg.seed, &seed_key));
        let label = format!("dp-sgd ε={epsilon}");
        let resume = self.resume(&key, n, self.cfg.dpsgd_sgd.batch_size)?;
        let p = train::train_dpsgd_resumable_on(
            self.train_inputs(),
            &dcfg,
            &mut rng,
            &resume,
            &mut |pr| observer(&label, pr),
        )?;
        let pred = train::predict_labels_on(&*self.engine, &self.net, &p, &self.test, &self.norm)?;
        let acc = train::accuracy(&pred, &self.test.labels);
        let model = NnModel::new(
            ModelHeader {
                kind: ModelKind::DpSgd,
                config: self.cfg.net,
                normalization: self.norm.clone(),
                calibration: Some(cal.clone()),
                training: Some(calib::PublicTraining {
                    n,
                    dp_sgd: Some(privpred_core::DpSgdSchedule {
                        batch_size: self.cfg.dpsgd_sgd.batch_size,
                        epochs: self.cfg.dpsgd_sgd.epochs,
                    }),
                    teachers: None,
                }),
                // an experiment: seeded from the run seed
                seed_policy: Some(privpred_core::SeedPolicy::Seeded {
                    seed: stable_seed(self.cfg.seed, &seed_key),
                }),
                members: 1,
                class_names: None,
                data_source: self.train.source.clone(),
            },
            vec![p],
            serde_json::json!({"dpsgd": dcfg, "quick": self.cfg.quick, "engine": self.engine.describe()}),
        )?;
        artifact::save(
            &self.cfg.cache_dir.join(format!("{key}.safetensors")),
            &model,
        )?;
        write_json(
            &path,
            &CachedPredictions {
                predictions: pred.clone(),
                accuracy: acc,
                calibration: Some(cal.clone()),
            },
        )?;
        resume.remove()?;
        Ok((pred, cal))
    }
}

/// Answers one point of figure 7: `repetitions` measurements of `method` at (ε, δ, B).
pub fn run_unit(
    ctx: &mut Fig7Context,
    method: Method,
    epsilon: f64,
    delta: f64,
    budget: u64,
    repetitions: u32,
    observer: &mut dyn FnMut(&str, &Progress),
) -> Result<Vec<Fig7Measurement>> {
    let nonpriv = ctx.nonprivate_accuracy(observer)?;
    let classes = ctx.net.classes();
    let labels = ctx.labels();
    let dataset_checksum = ctx.dataset_checksum.clone();
    let n_train = ctx.train.len();
    let test_size = ctx.test.len();
    match method {
        Method::SubsampleAggregate => {
            let cal = calib::subsample_aggregate(
                ctx.cfg.mode,
                Privacy::new(epsilon, delta)?,
                budget,
                classes,
            )?;
            let beta = calib::beta_of(&cal).ok_or_else(|| {
                NnError::Shape("expected an exponential-mechanism calibration".into())
            })?;
            let teachers = ctx.cfg.teachers;
            let seed = stable_seed(
                ctx.cfg.seed,
                &format!("sa-{epsilon}-{delta}-{budget}-{:?}", ctx.cfg.mode),
            );
            let test_labels = ctx.test.labels.clone();
            let votes = ctx.vote_matrix(observer)?;
            (0..repetitions)
                .map(|r| {
                    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ r as u64);
                    Ok(Fig7Measurement {
                        method,
                        epsilon,
                        delta,
                        budget,
                        repetition: r,
                        accuracy: privpred_nn::train::accuracy(
                            &votes.private_answers_with(&cal.mechanism, &mut rng)?,
                            &test_labels,
                        ),
                        nonprivate_accuracy: nonpriv,
                        n_train,
                        test_size,
                        teachers: Some(teachers),
                        clip: None,
                        noise: cal.mechanism.distribution_name().into(),
                        noise_param: beta,
                        noise_multiplier: None,
                        valid_guarantee: cal.is_valid(),
                        calibration: cal.clone(),
                        labels: labels.clone(),
                        dataset_checksum: dataset_checksum.clone(),
                    })
                })
                .collect()
        }
        Method::DpSgd => {
            let runs = ctx.cfg.dpsgd_runs.max(1);
            let clip = ctx.cfg.clip;
            (0..repetitions)
                .map(|r| {
                    let run = r as usize % runs;
                    let (pred, cal) = ctx.dpsgd_predictions(epsilon, delta, run, observer)?;
                    let mut l = labels.clone();
                    if repetitions as usize > runs {
                        l.push(format!(
                            "{runs} DP-SGD training run(s) shared by {repetitions} repetitions"
                        ));
                    }
                    let sigma = cal.mechanism.noise_multiplier().unwrap_or(f64::NAN);
                    Ok(Fig7Measurement {
                        method,
                        epsilon,
                        delta,
                        budget,
                        repetition: r,
                        accuracy: train::accuracy(&pred, &ctx.test.labels),
                        nonprivate_accuracy: nonpriv,
                        n_train,
                        test_size,
                        teachers: None,
                        clip: Some(clip),
                        noise: "gaussian".into(),
                        noise_param: sigma * clip,
                        noise_multiplier: cal.mechanism.noise_multiplier(),
                        valid_guarantee: cal.is_valid(),
                        calibration: cal,
                        labels: l,
                        dataset_checksum: dataset_checksum.clone(),
                    })
                })
                .collect()
        }
        other => Err(NnError::invalid(
            "method",
            other,
            "figure 7 runs dp-sgd and subsample-aggregate only",
        )),
    }
}
