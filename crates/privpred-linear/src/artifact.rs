//! Model artifacts: safetensors files holding the weights (f64) plus, in the header's
//! metadata, the guarantee (method, mode, ε, δ, B, N, λ, T, ν, seed policy, noise), the fitted
//! preprocessing (so queries are mapped exactly as the training data was), a format version
//! and a SHA-256 of the weight bytes. Files that are not privpred models, from another format
//! version, or whose weights do not match their checksum are refused with a clear error.
//!
//! Tensors: `theta` (`[D, C]`) for a single model; `teachers` (`[T, D, C]`) for
//! subsample-and-aggregate (all T teachers are stored).
//!
//! Metadata keys: `format` = `privpred-linear`, `format_version`, `model` (JSON: kind and
//! guarantee), `preprocessing` (JSON [`FittedPreprocessing`]), `extra` (JSON, caller's),
//! `weights_sha256`, `privacy_notes`, `ledger_id` (the model's identity in budget ledgers: 128
//! random bits drawn when the model is saved after training, covered by the checksum).
//!
//! An artifact of a private model is meant for release, so it holds only data-independent
//! facts and the noisy release: [`encode_model_with_id`] writes the predictor's public record (the
//! certificate's bound, not the measured norm; DP-SGD's steps, not its clipped fraction),
//! the preprocessing without the subsample's seed or the PCA's variances
//! ([`FittedPreprocessing::for_release`]) and the caller's `extra` without the keys in
//! [`PRIVATE_EXTRA_KEYS`].
//!
//! The checksum is public, so [`load`] does not trust the guarantee a file states: it
//! recalibrates the stored public parameters with the trainer's own calibration and refuses
//! any difference ([`crate::rederive::check_rederived`]), and reads "experiment vs release"
//! from the predictor's `seed_policy` alone, refusing a `release` entry or `extra.seed` that
//! disagrees with it.

use crate::error::{LinearError, Result};
use crate::methods::{PredictorKind, PrivatePredictor, SeedPolicy, Teachers};
use crate::model::LinearModel;
use privpred_core::Method;
use privpred_core::validate::check_calibration;
use privpred_data::FittedPreprocessing;
use privpred_data::artifact;
use safetensors::tensor::{Dtype, TensorView};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The artifact format name written in the header.
pub const FORMAT: &str = "privpred-linear";
/// The artifact format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// Keys of an artifact's `extra` object that hold statistics of the private data
/// (cross-validation hold-out scores): never written into, nor read from, the artifact of a
/// private model.
pub const PRIVATE_EXTRA_KEYS: &[&str] = &["cross_validation"];

/// `extra` without the [`PRIVATE_EXTRA_KEYS`].
fn public_extra(mut extra: serde_json::Value) -> serde_json::Value {
    if let Some(o) = extra.as_object_mut() {
        for k in PRIVATE_EXTRA_KEYS {
            o.remove(*k);
        }
    }
    extra
}

/// What an artifact holds: a non-private reference model or a private predictor.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredModel {
    /// The non-private baseline (no guarantee).
    NonPrivate(LinearModel),
    /// A private predictor with its guarantee.
    Private(Box<PrivatePredictor>),
}

impl StoredModel {
    /// Input dimension D (after preprocessing).
    pub fn input_dim(&self) -> usize {
        match self {
            StoredModel::NonPrivate(m) => m.d,
            StoredModel::Private(p) => p.input_dim(),
        }
    }

    /// Number of classes C.
    pub fn classes(&self) -> usize {
        match self {
            StoredModel::NonPrivate(m) => m.c,
            StoredModel::Private(p) => p.classes(),
        }
    }

    /// The private predictor, if any.
    pub fn private(&self) -> Option<&PrivatePredictor> {
        match self {
            StoredModel::Private(p) => Some(p.as_ref()),
            StoredModel::NonPrivate(_) => None,
        }
    }
}

/// A loaded artifact.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedModel {
    /// The model.
    pub model: StoredModel,
    /// The preprocessing to apply to raw queries.
    pub preprocessing: FittedPreprocessing,
    /// The caller's extra metadata.
    pub extra: serde_json::Value,
    /// The format version read.
    pub format_version: u32,
    /// SHA-256 (hex) of the weight bytes.
    pub weights_sha256: String,
    /// The model's ledger id ([`privpred_data::artifact::new_ledger_id`]): the key of its
    /// budget in every ledger; every loaded file has one (a file without it is refused).
    pub ledger_id: Option<String>,
}

impl LoadedModel {
    /// The private predictor, if the artifact holds one.
    pub fn private(&self) -> Option<&PrivatePredictor> {
        self.model.private()
    }

    /// The experiment seed of a private predictor trained with `--seed` (docs/guarantees.md#errata (erratum 4.9)):
    /// its noise can be regenerated from the seed and subtracted, so it is an experiment, not
    /// a private release — `serve` and `predict` refuse it, `evaluate` reads it.
    pub fn experiment_seed(&self) -> Option<u64> {
        match self.private()?.seed_policy {
            SeedPolicy::Seeded { seed } => Some(seed),
            SeedPolicy::OsRandom => None,
        }
    }
}

/// The metadata value of the `release` key: `experiment` for a seeded private predictor (not
/// a private release, erratum 4.9), `private-release` for an OS-seeded one, `non-private`.
pub fn release_label(model: &StoredModel) -> &'static str {
    match model.private().map(|p| p.seed_policy) {
        Some(SeedPolicy::Seeded { .. }) => "experiment",
        Some(SeedPolicy::OsRandom) => "private-release",
        None => "non-private",
    }
}

/// Header description of the model (everything but the weights).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ModelHeader {
    kind: String,
    d: usize,
    c: usize,
    #[serde(default)]
    teachers: Option<usize>,
    #[serde(default)]
    shard_size: Option<usize>,
    /// The private predictor with its weights emptied (guarantee fields only).
    #[serde(default)]
    predictor: Option<PrivatePredictor>,
}

fn err(path: &Path, reason: impl Into<String>) -> LinearError {
    LinearError::Artifact {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn to_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes a private predictor's payload atomically (temporary file in the same directory,
/// then rename) under a fresh ledger id, unsigned: the bytes a release envelope wraps, for the
/// tests and tools that build payloads by hand ([`encode_model_with_id`]).
pub fn save(
    path: &Path,
    predictor: &PrivatePredictor,
    preprocessing: &FittedPreprocessing,
    extra: serde_json::Value,
) -> Result<()> {
    let model = StoredModel::Private(Box::new(predictor.clone()));
    let (bytes, _) = encode_model_with_id(path, &model, preprocessing, extra, None)?;
    write_atomic(path, &bytes)
}

/// The payload bytes of a model and the ledger id they record (`path` only names
/// the file in errors; `ledger_id: None` draws a fresh one, an id that is not 32 lower-case
/// hex digits is refused): the payload a release envelope wraps.
pub fn encode_model_with_id(
    path: &Path,
    model: &StoredModel,
    preprocessing: &FittedPreprocessing,
    extra: serde_json::Value,
    ledger_id: Option<&str>,
) -> Result<(Vec<u8>, String)> {
    let ledger_id = match ledger_id {
        Some(id) => {
            let m = HashMap::from([
                (artifact::LEDGER_ID_KEY.to_string(), id.to_string()),
                (artifact::CHECKSUM_KEY.to_string(), String::new()),
            ]);
            artifact::read_ledger_id(&m).map_err(|e| err(path, e))?;
            id.to_string()
        }
        None => artifact::new_ledger_id().map_err(|e| err(path, e))?,
    };
    if preprocessing.output_dim() != model.input_dim() {
        return Err(LinearError::Dimension(format!(
            "the preprocessing outputs {} features, the model expects {}",
            preprocessing.output_dim(),
            model.input_dim()
        )));
    }
    let (name, shape, weights, header) = match model {
        StoredModel::NonPrivate(m) => (
            "theta",
            vec![m.d, m.c],
            to_bytes(&m.theta),
            ModelHeader {
                kind: "non-private".into(),
                d: m.d,
                c: m.c,
                teachers: None,
                shard_size: None,
                predictor: None,
            },
        ),
        StoredModel::Private(p) => {
            let mut stripped = p.clone();
            let (name, shape, w, t, shard) = match &mut stripped.kind {
                PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => {
                    let w = to_bytes(&model.theta);
                    model.theta = Vec::new();
                    ("theta", vec![model.d, model.c], w, None, None)
                }
                PredictorKind::Teachers { teachers } => {
                    let mut w =
                        Vec::with_capacity(teachers.models.len() * teachers.d * teachers.c * 8);
                    for m in &teachers.models {
                        w.extend(to_bytes(&m.theta));
                    }
                    let t = teachers.models.len();
                    teachers.models = Vec::new();
                    (
                        "teachers",
                        vec![t, teachers.d, teachers.c],
                        w,
                        Some(t),
                        Some(teachers.shard_size),
                    )
                }
            };
            let kind = match p.kind {
                PredictorKind::Released { .. } => "released",
                PredictorKind::NoisyLogits { .. } => "noisy-logits",
                PredictorKind::Teachers { .. } => "teachers",
            };
            (
                name,
                shape,
                w,
                ModelHeader {
                    kind: kind.into(),
                    d: p.input_dim(),
                    c: p.classes(),
                    teachers: t,
                    shard_size: shard,
                    predictor: Some(*stripped),
                },
            )
        }
    };
    let json = |v: &dyn erased::Ser| {
        v.to_json()
            .map_err(|e| err(path, format!("cannot serialise the header: {e}")))
    };
    let (preprocessing, extra) = released_records(model, preprocessing, extra);
    let mut meta = HashMap::new();
    meta.insert("format".to_string(), FORMAT.to_string());
    meta.insert("format_version".to_string(), FORMAT_VERSION.to_string());
    meta.insert("model".to_string(), json(&header)?);
    meta.insert("preprocessing".to_string(), json(&preprocessing)?);
    meta.insert("extra".to_string(), json(&extra)?);
    meta.insert("weights_sha256".to_string(), sha256_hex(&weights));
    meta.insert("release".to_string(), release_label(model).to_string());
    let ledger_id_out = ledger_id.clone();
    meta.insert(artifact::LEDGER_ID_KEY.to_string(), ledger_id);
    let mut notes = vec![selection_note(model)];
    notes.extend(preprocessing.data_dependent());
    meta.insert("privacy_notes".to_string(), json(&notes)?);
    let dtype = format!("{:?}", Dtype::F64);
    let sum = artifact::checksum(&meta, &[(name, &dtype, &shape, &weights)]);
    meta.insert(artifact::CHECKSUM_KEY.to_string(), sum);
    let view =
        TensorView::new(Dtype::F64, shape, &weights).map_err(|e| err(path, format!("{e}")))?;
    let bytes = safetensors::tensor::serialize([(name, view)], Some(meta))
        .map_err(|e| err(path, format!("{e}")))?;
    Ok((bytes, ledger_id_out))
}

/// The model's privacy note on its hyper-parameter selection
/// ([`privpred_core::tuning::selection_note`], the note of every family), with the public
/// rule's formula computed from the guarantee's public inputs.
fn selection_note(model: &StoredModel) -> String {
    let Some(p) = model.private() else {
        return privpred_core::tuning::selection_note(None, None);
    };
    let c = &p.calibration;
    // the recorded N is the public size the calibration used (N̂ under add-remove)
    let public = c.assumptions.n.and_then(|n| {
        let declared = (c.neighbours() == privpred_core::Neighbours::AddRemove).then_some(n);
        privpred_core::public_rule::PublicN::new(c.neighbours(), n, declared)
    });
    let rule = public.and_then(|n| {
        privpred_core::public_rule::lambda(&privpred_core::public_rule::PublicInputs {
            method: c.method(),
            loss: c.assumptions.loss,
            classes: c.assumptions.classes,
            n,
            dim: p.input_dim(),
            epsilon: c.epsilon(),
            budget: c.budget(),
        })
        // stated only when it is the rule that gave this model's λ
        .filter(|r| {
            p.lambda()
                .is_some_and(|l| privpred_core::rederive::close(l, r.value))
        })
        .map(|r| r.formula)
    });
    privpred_core::tuning::selection_note(c.selection.as_ref(), rule.as_deref())
}

/// A private model's artifact is a release (module documentation): its preprocessing for
/// release (row count N̂ under add/remove, where the exact N is private) and public `extra`.
fn released_records(
    model: &StoredModel,
    preprocessing: &FittedPreprocessing,
    extra: serde_json::Value,
) -> (FittedPreprocessing, serde_json::Value) {
    match model {
        StoredModel::Private(p) => {
            let mut pre = preprocessing.for_release();
            if p.calibration.neighbours() == privpred_core::Neighbours::AddRemove
                && let Some(n) = p.calibration.assumptions.n
            {
                pre.train_rows = n;
            }
            (pre, public_extra(extra))
        }
        StoredModel::NonPrivate(_) => (preprocessing.clone(), extra),
    }
}

mod erased {
    /// Object-safe JSON serialisation (keeps `encode_model_with_id` free of generic closures).
    pub trait Ser {
        fn to_json(&self) -> serde_json::Result<String>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_json(&self) -> serde_json::Result<String> {
            serde_json::to_string(self)
        }
    }
}

/// Writes `bytes` to a temporary file next to `path`, syncs it and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let fname = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let tmp = dir.join(format!(".{fname}.tmp{}", std::process::id()));
    let io = |e: std::io::Error, p: &Path| LinearError::Io {
        path: p.to_path_buf(),
        source: e,
    };
    let mut f = std::fs::File::create(&tmp).map_err(|e| io(e, &tmp))?;
    let res = f.write_all(bytes).and_then(|_| f.sync_all());
    drop(f);
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e, &tmp));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e, path)
    })
}

fn from_bytes(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8-byte chunk")))
        .collect()
}

/// Range-checks the model header: dimensions, the kind's name, and for a private model its
/// guarantee ([`check_calibration`]) and that the guarantee is the kind's method with the
/// model's classes and the kind's parameters (T teachers, shard size, λ, clip).
fn check_header(h: &ModelHeader) -> std::result::Result<(), String> {
    let max_c = privpred_data::limits::MAX_CLASSES;
    if h.d == 0 || !(2..=max_c).contains(&h.c) {
        return Err(format!(
            "model header: {} features × {} classes (need ≥ 1 feature and 2..={max_c} classes)",
            h.d, h.c
        ));
    }
    let methods: &[Method] = match h.kind.as_str() {
        "non-private" => {
            if h.predictor.is_some() {
                return Err("a non-private model with a guarantee".into());
            }
            return Ok(());
        }
        "released" => &[
            Method::ModelSensitivity,
            Method::LossPerturbation,
            Method::DpSgd,
        ],
        "noisy-logits" => &[Method::PredictionSensitivity],
        "teachers" => &[Method::SubsampleAggregate],
        other => return Err(format!("unknown model kind `{other}`")),
    };
    let p = h
        .predictor
        .as_ref()
        .ok_or("private model without its guarantee")?;
    let cal = &p.calibration;
    check_calibration(cal).map_err(|e| format!("guarantee: {e}"))?;
    if !methods.contains(&cal.method()) {
        return Err(format!(
            "model kind `{}` cannot carry a {} guarantee",
            h.kind,
            cal.method()
        ));
    }
    let variant_ok = matches!(
        (h.kind.as_str(), &p.kind),
        ("released", PredictorKind::Released { .. })
            | ("noisy-logits", PredictorKind::NoisyLogits { .. })
            | ("teachers", PredictorKind::Teachers { .. })
    );
    if !variant_ok {
        return Err(format!(
            "model kind `{}` does not match its predictor",
            h.kind
        ));
    }
    if cal.assumptions.classes != h.c {
        return Err(format!(
            "the guarantee is for {} classes, the model has {}",
            cal.assumptions.classes, h.c
        ));
    }
    if let Some(l) = p.lambda()
        && !(l.is_finite() && l >= 0.0)
    {
        return Err(format!("lambda = {l}: must be a finite number >= 0"));
    }
    if let Some(v) = p.clip()
        && !(v.is_finite() && v > 0.0)
    {
        return Err(format!("clip = {v}: must be a finite number > 0"));
    }
    if h.kind == "teachers" {
        let t = h.teachers.unwrap_or(0);
        if t == 0 || p.teachers() != Some(t) {
            return Err(format!(
                "teachers: header {}, guarantee {} (need the same T ≥ 1)",
                crate::rederive::shown(h.teachers),
                crate::rederive::shown(p.teachers())
            ));
        }
        if h.shard_size.unwrap_or(0) == 0 {
            return Err("teachers: shard size must be ≥ 1".into());
        }
        if let Some(n) = cal.assumptions.n
            && (t > n || h.shard_size != Some(n / t))
        {
            return Err(format!(
                "shard_size: {t} teachers for N = {n} training examples have ⌊N/T⌋ = {} each, the header states {}",
                n / t.max(1),
                crate::rederive::shown(h.shard_size)
            ));
        }
    }
    Ok(())
}

/// Reads an artifact, refusing anything that is not a valid privpred-linear model of this
/// format version: the file's sizes are checked before reading, the whole-file checksum
/// (metadata and weights, [`privpred_data::artifact`]) must match, and every header field is
/// range-checked ([`check_calibration`], [`FittedPreprocessing::validate`], the shapes).
pub fn load(path: &Path) -> Result<LoadedModel> {
    load_with_bytes(path).map(|(m, _)| m)
}

/// [`load`], also returning the file's bytes as read (one read): for callers that key
/// something by the file's content, such as a budget ledger by its SHA-256, so the key and
/// the model come from the same bytes.
pub fn load_with_bytes(path: &Path) -> Result<(LoadedModel, Vec<u8>)> {
    let bytes = artifact::read_artifact_bytes(path).map_err(|e| match e {
        privpred_data::DataError::Io { path, source } => LinearError::Io { path, source },
        e => err(path, e.reason()),
    })?;
    let m = load_from_bytes(path, &bytes)?;
    Ok((m, bytes))
}

/// [`load`] on bytes already read from `path` (named in errors): the checksum and every
/// header field are checked as for a file.
///
/// Steps: the format and its version (`check_format`), the checksum over every entry, the
/// JSON headers (`read_headers`), the one weights tensor and its SHA-256
/// (`weights_tensor`), the model it holds (`stored_model`), and the preprocessing's
/// output fitting the model (`check_preprocessing_fits`).
pub fn load_from_bytes(path: &Path, bytes: &[u8]) -> Result<LoadedModel> {
    let (st, meta) = artifact::parse_safetensors(bytes).map_err(|e| err(path, e))?;
    let version = check_format(path, &meta)?;
    // One checksum over every metadata entry and every tensor.
    let names =
        artifact::verify_safetensors(path, &meta, &st).map_err(|e| err(path, e.reason()))?;
    let (header, preprocessing, extra) = read_headers(path, &meta)?;
    let ledger_id = Some(artifact::read_ledger_id(&meta).map_err(|e| err(path, e))?);
    let (t, weights_sha256) = weights_tensor(path, &meta, &st, &names, &header)?;
    let model = stored_model(path, &header, &t)?;
    check_preprocessing_fits(path, &preprocessing, &model)?;
    check_seed_policy(path, &meta, &model, &extra)?;
    Ok(LoadedModel {
        model,
        preprocessing,
        extra,
        format_version: version,
        weights_sha256,
        ledger_id,
    })
}

/// One source of truth for "experiment vs release": the predictor's `seed_policy`. The
/// `release` entry written beside it and the `extra.seed` that `train` records must say the
/// same (a seed written as `3.0` or `"3"` is refused), so that flipping one of them alone
/// cannot turn an experiment whose noise can be regenerated into a "private release".
fn check_seed_policy(
    path: &Path,
    meta: &HashMap<String, String>,
    model: &StoredModel,
    extra: &serde_json::Value,
) -> Result<()> {
    let Some(p) = model.private() else {
        return Ok(());
    };
    let label = release_label(model);
    if let Some(r) = meta.get("release")
        && r != label
    {
        return Err(err(
            path,
            format!("seed_policy: makes the model `{label}` but the `release` entry says `{r}`"),
        ));
    }
    let seed = extra.get("seed");
    let agrees = match (seed, p.seed_policy) {
        (None, _) | (Some(serde_json::Value::Null), SeedPolicy::OsRandom) => true,
        (Some(v), SeedPolicy::Seeded { seed }) => v.as_u64() == Some(seed) && v.is_u64(),
        (Some(_), SeedPolicy::OsRandom) => false,
    };
    if !agrees {
        return Err(err(
            path,
            format!(
                "extra.seed: {} does not agree with the guarantee's seed_policy {}",
                seed.unwrap_or(&serde_json::Value::Null),
                serde_json::to_string(&p.seed_policy).unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// The metadata entry `k`, or an error saying the file is not a privpred model.
fn meta_get<'m>(path: &Path, meta: &'m HashMap<String, String>, k: &str) -> Result<&'m String> {
    meta.get(k).ok_or_else(|| {
        err(
            path,
            format!("metadata key `{k}` missing: not a privpred model or corrupt"),
        )
    })
}

/// Checks the `format` entry and returns the `format_version`, which must be the one this
/// build reads.
fn check_format(path: &Path, meta: &HashMap<String, String>) -> Result<u32> {
    let format = meta_get(path, meta, "format")?;
    if format != FORMAT {
        return Err(err(path, format!("format `{format}` is not `{FORMAT}`")));
    }
    let version: u32 = meta_get(path, meta, "format_version")?
        .parse()
        .map_err(|_| err(path, "unreadable format_version"))?;
    if version != FORMAT_VERSION {
        return Err(err(
            path,
            format!(
                "format version {version} is not supported (this build reads version {FORMAT_VERSION})"
            ),
        ));
    }
    Ok(version)
}

/// Parses the JSON headers (model, preprocessing, optional extra) and range-checks the first
/// two ([`FittedPreprocessing::validate`], [`check_header`]).
fn read_headers(
    path: &Path,
    meta: &HashMap<String, String>,
) -> Result<(ModelHeader, FittedPreprocessing, serde_json::Value)> {
    let header: ModelHeader = serde_json::from_str(meta_get(path, meta, "model")?)
        .map_err(|e| err(path, format!("corrupt model header: {e}")))?;
    let preprocessing: FittedPreprocessing =
        serde_json::from_str(meta_get(path, meta, "preprocessing")?)
            .map_err(|e| err(path, format!("corrupt preprocessing header: {e}")))?;
    let extra: serde_json::Value = match meta.get("extra") {
        Some(s) => {
            serde_json::from_str(s).map_err(|e| err(path, format!("corrupt extra header: {e}")))?
        }
        None => serde_json::Value::Null,
    };
    preprocessing
        .validate()
        .map_err(|e| err(path, format!("preprocessing header: {e}")))?;
    check_header(&header).map_err(|reason| err(path, reason))?;
    Ok((header, preprocessing, extra))
}

/// The file's one tensor (`teachers` for a teacher ensemble, `theta` otherwise), F64, whose
/// bytes match the `weights_sha256` entry; returned with that checksum.
fn weights_tensor<'a>(
    path: &Path,
    meta: &HashMap<String, String>,
    st: &safetensors::SafeTensors<'a>,
    names: &[String],
    header: &ModelHeader,
) -> Result<(TensorView<'a>, String)> {
    let tname = if header.kind == "teachers" {
        "teachers"
    } else {
        "theta"
    };
    if names.len() != 1 {
        return Err(err(
            path,
            format!(
                "{} tensors ({}); a privpred-linear model holds exactly one, `{tname}`",
                names.len(),
                names.join(", ")
            ),
        ));
    }
    let t = st
        .tensor(tname)
        .map_err(|_| err(path, format!("tensor `{tname}` missing")))?;
    if t.dtype() != Dtype::F64 {
        return Err(err(
            path,
            format!("tensor `{tname}` has dtype {:?}, expected F64", t.dtype()),
        ));
    }
    let weights_sha256 = meta_get(path, meta, "weights_sha256")?.clone();
    if sha256_hex(t.data()) != weights_sha256 {
        return Err(err(
            path,
            "weights do not match their SHA-256 checksum: the file is corrupt",
        ));
    }
    Ok((t, weights_sha256))
}

/// The model the weights tensor holds, by the header's kind: a non-private θ, or a private
/// predictor ([`private_predictor`]).
fn stored_model(path: &Path, header: &ModelHeader, t: &TensorView<'_>) -> Result<StoredModel> {
    let (d, c) = (header.d, header.c);
    match header.kind.as_str() {
        "non-private" => {
            if t.shape() != [d, c] {
                return Err(err(
                    path,
                    format!("tensor shape {:?} does not match {d} × {c}", t.shape()),
                ));
            }
            let theta = from_bytes(t.data());
            let model = LinearModel::new(d, c, theta).map_err(|e| err(path, format!("{e}")))?;
            Ok(StoredModel::NonPrivate(model))
        }
        "released" | "noisy-logits" | "teachers" => Ok(StoredModel::Private(Box::new(
            private_predictor(path, header, t)?,
        ))),
        other => Err(err(path, format!("unknown model kind `{other}`"))),
    }
}

/// A private predictor: its header's guarantee (re-derived) with the weights
/// put in place, one θ of `d × c` or `T` teachers of `d × c` each.
fn private_predictor(
    path: &Path,
    header: &ModelHeader,
    t: &TensorView<'_>,
) -> Result<PrivatePredictor> {
    let (d, c) = (header.d, header.c);
    let w = from_bytes(t.data());
    let check_model =
        |theta: Vec<f64>| LinearModel::new(d, c, theta).map_err(|e| err(path, format!("{e}")));
    let mut p = header
        .predictor
        .clone()
        .ok_or_else(|| err(path, "private model without its guarantee"))?;
    // the guarantee is recalibrated from its public parameters, never trusted as written
    crate::rederive::check_rederived(&p).map_err(|e| err(path, e))?;
    match &mut p.kind {
        PredictorKind::Released { model } | PredictorKind::NoisyLogits { model } => {
            if t.shape() != [d, c] {
                return Err(err(
                    path,
                    format!("tensor shape {:?} does not match {d} × {c}", t.shape()),
                ));
            }
            *model = check_model(w)?;
        }
        PredictorKind::Teachers { teachers } => {
            let tt = header.teachers.unwrap_or(0);
            if t.shape() != [tt, d, c] || tt == 0 {
                return Err(err(
                    path,
                    format!(
                        "tensor shape {:?} does not match {tt} × {d} × {c}",
                        t.shape()
                    ),
                ));
            }
            let models: Result<Vec<LinearModel>> = w
                .chunks_exact(d * c)
                .map(|ch| check_model(ch.to_vec()))
                .collect();
            *teachers = Teachers {
                d,
                c,
                models: models?,
                shard_size: header.shard_size.unwrap_or(0),
            };
        }
    }
    Ok(p)
}

/// The preprocessing's output (features and classes) must be the model's input.
fn check_preprocessing_fits(
    path: &Path,
    preprocessing: &FittedPreprocessing,
    model: &StoredModel,
) -> Result<()> {
    if preprocessing.output_dim() != model.input_dim() {
        return Err(err(
            path,
            format!(
                "preprocessing outputs {} features but the model expects {}",
                preprocessing.output_dim(),
                model.input_dim()
            ),
        ));
    }
    if preprocessing.classes() != model.classes() {
        return Err(err(
            path,
            format!(
                "preprocessing yields {} classes but the model has {}",
                preprocessing.classes(),
                model.classes()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload writer under a given ledger id (`None`: a fresh one).
    fn save_model_with_id(
        path: &Path,
        model: &StoredModel,
        preprocessing: &FittedPreprocessing,
        extra: serde_json::Value,
        ledger_id: Option<&str>,
    ) -> Result<()> {
        let (bytes, _) = encode_model_with_id(path, model, preprocessing, extra, ledger_id)?;
        write_atomic(path, &bytes)
    }

    /// The payload writer under a fresh ledger id.
    fn save_model(
        path: &Path,
        model: &StoredModel,
        preprocessing: &FittedPreprocessing,
        extra: serde_json::Value,
    ) -> Result<()> {
        save_model_with_id(path, model, preprocessing, extra, None)
    }
    use crate::methods::{MethodConfig, train_private};
    use crate::train::tests::toy;
    use privpred_core::{Budget, CalibrationMode, Method, Privacy};
    use privpred_data::Preprocessing;
    use rand::SeedableRng;
    use safetensors::tensor::SafeTensors;

    type Tensors = Vec<(String, Vec<usize>, Vec<u8>)>;
    type Edit = dyn Fn(&mut serde_json::Value, &mut serde_json::Value, &mut Tensors);

    fn prep(d: usize, c: usize) -> FittedPreprocessing {
        let ds = toy(50, d, c, 1);
        Preprocessing {
            scale: 1.0,
            ..Preprocessing::default()
        }
        .fit(&ds, 0)
        .unwrap()
    }

    #[test]
    fn round_trip_every_kind() {
        let ds = toy(400, 6, 3, 2);
        let fitted = prep(6, 3);
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        for m in [
            Method::ModelSensitivity,
            Method::LossPerturbation,
            Method::PredictionSensitivity,
            Method::SubsampleAggregate,
        ] {
            let mut cfg = MethodConfig::new(
                m,
                CalibrationMode::Corrected,
                Privacy::new(1.0, 0.0).unwrap(),
                Budget::finite(10).unwrap(),
            );
            cfg.teachers = 4;
            cfg.lambda = 1e-2;
            let p = train_private(&cfg, &ds, &mut rng).unwrap();
            let path = dir.path().join(format!("{m}.safetensors"));
            save(&path, &p, &fitted, serde_json::json!({"k": 1})).unwrap();
            let l = load(&path).unwrap();
            assert_eq!(l.private(), Some(&p), "{m}");
            assert_eq!(l.preprocessing, fitted);
            assert_eq!(l.extra["k"], 1);
        }
        let np = crate::fit_logistic(&ds, 1e-3, None, &Default::default())
            .unwrap()
            .model;
        let path = dir.path().join("np.safetensors");
        save_model(
            &path,
            &StoredModel::NonPrivate(np.clone()),
            &fitted,
            serde_json::Value::Null,
        )
        .unwrap();
        assert_eq!(load(&path).unwrap().model, StoredModel::NonPrivate(np));
    }

    /// A private artifact holds no statistics of the private data: the caller's
    /// cross-validation record, the subsample's seed and the PCA's variances are not written.
    #[test]
    fn private_statistics_are_neither_written_nor_read_back() {
        let raw = toy(300, 6, 3, 4);
        let fitted = Preprocessing {
            scale: 1.0,
            pca: Some(4),
            subsample: Some(250),
            ..Preprocessing::default()
        }
        .fit(&raw, 1234)
        .unwrap();
        let ds = fitted.apply_train(&raw).unwrap();
        let mut cfg = MethodConfig::new(
            Method::ModelSensitivity,
            CalibrationMode::Corrected,
            Privacy::new(1.0, 0.0).unwrap(),
            Budget::Unlimited,
        );
        cfg.lambda = 1e-2;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let p = train_private(&cfg, &ds, &mut rng).unwrap();
        assert!(p.optimization().is_some());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        let extra = serde_json::json!({"k": 1, "cross_validation": {"scores": [0.5]}});
        save(&path, &p, &fitted, extra).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let (_, md) = SafeTensors::read_metadata(&bytes).unwrap();
        let meta = md.metadata().clone().unwrap();
        let all: String = meta.values().cloned().collect();
        for private in [
            "cross_validation",
            "\"gradient_norm\"",
            "rounding_bound",
            "refinement_evaluations",
            "1234",
        ] {
            assert!(!all.contains(private), "{private} written");
        }
        let prep: serde_json::Value = serde_json::from_str(&meta["preprocessing"]).unwrap();
        assert_eq!(prep["pca"]["explained_variance"], serde_json::json!([]));
        let l = load(&path).unwrap();
        assert_eq!(l.extra, serde_json::json!({"k": 1}));
        assert_eq!(l.preprocessing, fitted.for_release());
        assert_eq!(l.private(), Some(&p));
    }

    /// `privacy_notes` states the recorded selection and its cost, for every kind, and the
    /// public rule's formula only where the rule gave the model's λ.
    #[test]
    fn privacy_notes_state_what_the_selection_cost() {
        use privpred_core::SelectionMethod as S;
        let ds = toy(300, 4, 2, 5);
        let fitted = prep(4, 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        let notes = |p: &PrivatePredictor| -> String {
            save(&path, p, &fitted, serde_json::Value::Null).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let (_, md) = SafeTensors::read_metadata(&bytes).unwrap();
            md.metadata().clone().unwrap()["privacy_notes"].clone()
        };
        let train = |lambda: f64| {
            let mut cfg = MethodConfig::new(
                Method::ModelSensitivity,
                CalibrationMode::Corrected,
                Privacy::new(1.0, 0.0).unwrap(),
                Budget::Unlimited,
            );
            cfg.lambda = lambda;
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
            train_private(&cfg, &ds, &mut rng).unwrap()
        };
        let base = train(1e-2);
        for (sel, needles) in [
            (S::Public, &["public value", "costs nothing"][..]),
            (S::PublicRule, &["public rule", "costs nothing"]),
            (
                S::PrivateSplit,
                &[
                    "private split",
                    "epsilon = 1",
                    "inside the stated guarantee",
                ],
            ),
            (S::NonPrivateHoldout, &["hold-out", "OUTSIDE"]),
            (S::ExternalSearch, &["outside privpred", "OUTSIDE"]),
        ] {
            let mut p = base.clone();
            p.calibration = p.calibration.clone().with_selection(sel).unwrap();
            let n = notes(&p);
            for needle in needles {
                assert!(n.contains(needle), "{sel}: {n}");
            }
            assert!(!n.contains("ignored"), "{sel}: {n}");
            // λ = 0.01 is not the rule's value here: no formula is claimed
            assert!(!n.contains("the rule:"), "{sel}: {n}");
        }
        // trained with the rule's own λ: its formula is stated
        let rule = privpred_core::public_rule::lambda(&privpred_core::public_rule::PublicInputs {
            method: Method::ModelSensitivity,
            loss: base.calibration.assumptions.loss,
            classes: 2,
            n: privpred_core::public_rule::PublicN::new(
                privpred_core::Neighbours::ReplaceOne,
                300,
                None,
            )
            .unwrap(),
            dim: base.input_dim(),
            epsilon: 1.0,
            budget: Budget::Unlimited,
        })
        .unwrap();
        let mut p = train(rule.value);
        p.calibration = p.calibration.clone().with_selection(S::PublicRule).unwrap();
        let n = notes(&p);
        assert!(n.contains("the rule: λ = "), "{n}");
    }

    /// Rewrites an artifact with `edit` applied to its `model` and `preprocessing` JSON and
    /// its tensors, then (if `resum`) a correct checksum, so that the range checks are
    /// tested on their own.
    fn rewrite(src: &Path, dst: &Path, edit: &Edit, resum: bool) {
        let bytes = std::fs::read(src).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let (_, md) = SafeTensors::read_metadata(&bytes).unwrap();
        let mut meta = md.metadata().clone().unwrap();
        let mut model: serde_json::Value = serde_json::from_str(&meta["model"]).unwrap();
        let mut prep: serde_json::Value = serde_json::from_str(&meta["preprocessing"]).unwrap();
        let mut ts: Tensors = st
            .tensors()
            .into_iter()
            .map(|(n, v)| (n, v.shape().to_vec(), v.data().to_vec()))
            .collect();
        edit(&mut model, &mut prep, &mut ts);
        meta.insert("model".into(), model.to_string());
        meta.insert("preprocessing".into(), prep.to_string());
        let refs: Vec<artifact::TensorRef<'_>> = ts
            .iter()
            .map(|(n, sh, d)| (n.as_str(), "F64", sh.as_slice(), d.as_slice()))
            .collect();
        if resum {
            let c = artifact::checksum(&meta, &refs);
            meta.insert(artifact::CHECKSUM_KEY.into(), c);
        }
        let views: Vec<(String, TensorView<'_>)> = ts
            .iter()
            .map(|(n, sh, d)| {
                (
                    n.clone(),
                    TensorView::new(Dtype::F64, sh.clone(), d).unwrap(),
                )
            })
            .collect();
        std::fs::write(dst, safetensors::serialize(views, Some(meta)).unwrap()).unwrap();
    }

    fn reason(path: &Path) -> String {
        match load(path) {
            Err(LinearError::Artifact { reason, .. }) => reason,
            other => panic!("expected an artifact error, got {other:?}"),
        }
    }

    #[test]
    fn edited_guarantees_and_crafted_shapes_are_refused() {
        let raw = toy(400, 6, 3, 2);
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let fitted_pca = Preprocessing {
            scale: 1.0,
            pca: Some(4),
            ..Preprocessing::default()
        }
        .fit(&raw, 0)
        .unwrap();
        let ds4 = fitted_pca.apply_train(&raw).unwrap();
        let mut files = Vec::new();
        for m in [
            Method::ModelSensitivity,
            Method::PredictionSensitivity,
            Method::SubsampleAggregate,
        ] {
            let mut cfg = MethodConfig::new(
                m,
                CalibrationMode::Corrected,
                Privacy::new(1.0, 0.0).unwrap(),
                Budget::finite(10).unwrap(),
            );
            cfg.teachers = 4;
            cfg.lambda = 1e-2;
            let p = train_private(&cfg, &ds4, &mut rng).unwrap();
            let path = dir.path().join(format!("{m}.safetensors"));
            save(&path, &p, &fitted_pca, serde_json::Value::Null).unwrap();
            load(&path).unwrap();
            files.push((m, path));
        }
        let bad = dir.path().join("bad.safetensors");
        let cal = |f: fn(&mut serde_json::Value)| {
            move |m: &mut serde_json::Value, _: &mut serde_json::Value, _: &mut Tensors| {
                f(&mut m["predictor"]["calibration"])
            }
        };
        let cases: Vec<(&str, Box<Edit>, &str)> = vec![
            (
                "eps -1",
                Box::new(cal(|c| c["privacy"]["epsilon"] = (-1.0).into())),
                "epsilon",
            ),
            (
                "eps 0",
                Box::new(cal(|c| c["privacy"]["epsilon"] = 0.0.into())),
                "epsilon",
            ),
            (
                "delta 2",
                Box::new(cal(|c| c["privacy"]["delta"] = 2.0.into())),
                "delta",
            ),
            (
                "classes 0",
                Box::new(cal(|c| c["assumptions"]["classes"] = 0.into())),
                "classes",
            ),
            (
                "beta -1",
                Box::new(cal(|c| {
                    let n = c["noise"].as_object_mut().unwrap();
                    let k = if n.contains_key("beta") {
                        "beta"
                    } else {
                        "sigma"
                    };
                    n.insert(k.into(), (-1.0).into());
                })),
                "must be a finite number > 0",
            ),
            (
                "renamed method",
                Box::new(cal(|c| c["method"] = "dp-sgd".into())),
                "",
            ),
            (
                "scale 0",
                Box::new(
                    |_: &mut serde_json::Value, p: &mut serde_json::Value, _: &mut Tensors| {
                        p["recipe"]["scale"] = 0.0.into()
                    },
                ),
                "scale",
            ),
            (
                "scale -1",
                Box::new(
                    |_: &mut serde_json::Value, p: &mut serde_json::Value, _: &mut Tensors| {
                        p["recipe"]["scale"] = (-1.0).into()
                    },
                ),
                "scale",
            ),
            (
                "basis too short",
                Box::new(
                    |_: &mut serde_json::Value, p: &mut serde_json::Value, _: &mut Tensors| {
                        p["pca"]["components"].as_array_mut().unwrap().truncate(3)
                    },
                ),
                "PCA basis",
            ),
            (
                "basis missing",
                Box::new(
                    |_: &mut serde_json::Value, p: &mut serde_json::Value, _: &mut Tensors| {
                        p["pca"] = serde_json::Value::Null
                    },
                ),
                "PCA basis",
            ),
            (
                "mean too short",
                Box::new(
                    |_: &mut serde_json::Value, p: &mut serde_json::Value, _: &mut Tensors| {
                        p["pca"]["mean"].as_array_mut().unwrap().pop();
                    },
                ),
                "PCA basis",
            ),
            (
                "model classes 0",
                Box::new(
                    |m: &mut serde_json::Value, _: &mut serde_json::Value, _: &mut Tensors| {
                        m["c"] = 0.into()
                    },
                ),
                "classes",
            ),
            (
                "extra tensor",
                Box::new(
                    |_: &mut serde_json::Value, _: &mut serde_json::Value, t: &mut Tensors| {
                        t.push(("zz".into(), vec![1], vec![0; 8]))
                    },
                ),
                "tensors",
            ),
        ];
        for (m, path) in &files {
            for (what, edit, needle) in &cases {
                rewrite(path, &bad, edit.as_ref(), true);
                let r = reason(&bad);
                assert!(r.contains(needle), "{m} / {what}: {r}");
                // the same edit without a new checksum: refused by the checksum
                rewrite(path, &bad, edit.as_ref(), false);
                assert!(reason(&bad).contains("checksum"), "{m} / {what}");
            }
        }
        // an in-range edit (ε 1 → 9) is caught by the checksum alone
        let (_, sa) = &files[2];
        rewrite(
            sa,
            &bad,
            &cal(|c| c["privacy"]["epsilon"] = 9.0.into()),
            false,
        );
        assert!(reason(&bad).contains("checksum"));
        // teachers: an empty teachers tensor, and a header whose T disagrees with the guarantee
        let empty = |m: &mut serde_json::Value, _: &mut serde_json::Value, t: &mut Tensors| {
            m["teachers"] = 0.into();
            t[0].1[0] = 0;
            t[0].2.clear();
        };
        rewrite(sa, &bad, &empty, true);
        assert!(reason(&bad).contains("teachers"), "{}", reason(&bad));
        rewrite(
            sa,
            &bad,
            &|m: &mut serde_json::Value, _: &mut serde_json::Value, _: &mut Tensors| {
                m["teachers"] = 3.into()
            },
            true,
        );
        assert!(reason(&bad).contains("teachers"), "{}", reason(&bad));
    }

    #[test]
    fn an_artifact_without_the_checksum_or_the_ledger_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fitted = prep(4, 2);
        let m = LinearModel::new(4, 2, vec![0.5; 8]).unwrap();
        let path = dir.path().join("m.safetensors");
        save_model(
            &path,
            &StoredModel::NonPrivate(m.clone()),
            &fitted,
            serde_json::Value::Null,
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let (_, md) = SafeTensors::read_metadata(&bytes).unwrap();
        let meta = md.metadata().clone().unwrap();
        let t = st.tensor("theta").unwrap();
        let old = dir.path().join("old.safetensors");
        for (key, needle) in [
            (artifact::CHECKSUM_KEY, "checksum"),
            (artifact::LEDGER_ID_KEY, "ledger_id"),
        ] {
            let mut meta = meta.clone();
            assert!(meta.remove(key).is_some());
            if key == artifact::LEDGER_ID_KEY {
                let refs = [("theta", "F64", t.shape(), t.data())];
                let sum = artifact::checksum(&meta, &refs);
                meta.insert(artifact::CHECKSUM_KEY.into(), sum);
            }
            std::fs::write(
                &old,
                safetensors::serialize([("theta", t.clone())], Some(meta)).unwrap(),
            )
            .unwrap();
            let r = reason(&old);
            assert!(r.contains(needle), "{key}: {r}");
        }
        assert_eq!(load(&path).unwrap().model, StoredModel::NonPrivate(m));
    }

    /// The ledger id is the model's identity: drawn at save, read back, kept by
    /// `save_model_with_id`, unchanged by header padding (which changes the file's bytes and
    /// so must not change its ledger key) and covered by the checksum.
    #[test]
    fn the_ledger_id_is_random_kept_and_covered_by_the_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let fitted = prep(4, 2);
        let m = StoredModel::NonPrivate(LinearModel::new(4, 2, vec![0.5; 8]).unwrap());
        let (a, b) = (dir.path().join("a.st"), dir.path().join("b.st"));
        save_model(&a, &m, &fitted, serde_json::Value::Null).unwrap();
        save_model(&b, &m, &fitted, serde_json::Value::Null).unwrap();
        let id = load(&a).unwrap().ledger_id.expect("an id is written");
        assert_ne!(Some(id.clone()), load(&b).unwrap().ledger_id);
        let c = dir.path().join("c.st");
        save_model_with_id(&c, &m, &fitted, serde_json::Value::Null, Some(&id)).unwrap();
        assert_eq!(load(&c).unwrap().ledger_id.as_deref(), Some(id.as_str()));
        assert!(save_model_with_id(&c, &m, &fitted, serde_json::Value::Null, Some("x")).is_err());
        // 8 spaces of header padding: other bytes, a valid checksum, the same identity
        let bytes = std::fs::read(&a).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut padded = ((n + 8) as u64).to_le_bytes().to_vec();
        padded.extend_from_slice(&bytes[8..8 + n]);
        padded.extend_from_slice(b"        ");
        padded.extend_from_slice(&bytes[8 + n..]);
        let p = dir.path().join("padded.st");
        std::fs::write(&p, &padded).unwrap();
        assert_ne!(padded, bytes);
        assert_eq!(load(&p).unwrap().ledger_id.as_deref(), Some(id.as_str()));
        // another id without a new checksum is refused
        let other = "0".repeat(32);
        let at = bytes
            .windows(id.len())
            .position(|w| w == id.as_bytes())
            .unwrap();
        let mut edited = bytes.clone();
        edited[at..at + id.len()].copy_from_slice(other.as_bytes());
        let e = dir.path().join("edited.st");
        std::fs::write(&e, &edited).unwrap();
        let r = load(&e);
        assert!(
            matches!(&r, Err(LinearError::Artifact { reason, .. }) if reason.contains("checksum")),
            "{r:?}"
        );
    }

    #[test]
    fn refuses_corrupt_and_incompatible_files() {
        let dir = tempfile::tempdir().unwrap();
        let fitted = prep(4, 2);
        let m = LinearModel::new(4, 2, vec![0.5; 8]).unwrap();
        let path = dir.path().join("m.safetensors");
        save_model(
            &path,
            &StoredModel::NonPrivate(m.clone()),
            &fitted,
            serde_json::Value::Null,
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let bad = dir.path().join("bad.safetensors");
        // flipped weight byte → checksum
        let mut b = bytes.clone();
        let n = b.len();
        b[n - 1] ^= 1;
        std::fs::write(&bad, &b).unwrap();
        assert!(
            matches!(load(&bad), Err(LinearError::Artifact { reason, .. }) if reason.contains("checksum"))
        );
        // truncated
        std::fs::write(&bad, &bytes[..n - 8]).unwrap();
        assert!(matches!(load(&bad), Err(LinearError::Artifact { .. })));
        // other format version
        let pat = b"\"format_version\":\"1\"";
        let at = bytes
            .windows(pat.len())
            .position(|w| w == pat)
            .expect("version key in header");
        let mut b = bytes.clone();
        b[at + pat.len() - 2] = b'9';
        std::fs::write(&bad, &b).unwrap();
        assert!(
            matches!(load(&bad), Err(LinearError::Artifact { reason, .. }) if reason.contains("version 9"))
        );
        // a plain safetensors file without our metadata
        let w = to_bytes(&[1.0, 2.0]);
        let v = TensorView::new(Dtype::F64, vec![2], &w).unwrap();
        std::fs::write(
            &bad,
            safetensors::tensor::serialize([("x", v)], None).unwrap(),
        )
        .unwrap();
        assert!(matches!(load(&bad), Err(LinearError::Artifact { .. })));
        // preprocessing that does not fit the model: refused at save, nothing written
        let other = dir.path().join("other.safetensors");
        assert!(
            save_model(
                &other,
                &StoredModel::NonPrivate(m),
                &prep(5, 2),
                serde_json::Value::Null
            )
            .is_err()
        );
        assert!(!other.exists());
    }
}
