//! The payload of a ResNet model file: safetensors bytes with the ResNet weights (f32) and, in
//! the metadata, the guarantee with the public training parameters it is re-derived from,
//! the typed seed policy, the architecture, the input normalisation, a format version and a
//! SHA-256 of the weight bytes — the same conventions as `privpred-linear`'s payload, so
//! `evaluate` and `serve` can treat both alike. `privpred-release` wraps it in the signed
//! envelope of every model file.
//!
//! Tensors: PyTorch-style names (`conv1.weight`, `layer1.0.gn1.weight`, ..., `linear.bias`).
//! A DP-SGD (or non-private) model stores each tensor with its own shape; a teacher ensemble
//! stacks the T teachers along a leading axis (`[T, ...shape]`).
//!
//! Metadata keys: `format` = `privpred-nn`, `format_version`, `model` (JSON [`ModelHeader`]),
//! `extra` (JSON, the caller's), `weights_sha256`, `ledger_id` (the model's identity in budget
//! ledgers, drawn when the trained model is built, covered by the checksum).
//!
//! The guarantee a file states is not trusted: [`load`] re-derives it from the recorded
//! public parameters ([`crate::calib::rederive`]: DP-SGD's σ, sampling rate and steps from
//! N, the batch size, the epochs and (ε, δ) through the accountant training uses; the
//! teachers' β from (ε, δ, B) and the mode) and refuses any difference, naming the field.

use crate::calib::PublicTraining;
use crate::data::Normalization;
use crate::error::{NnError, Result};
use crate::resnet::{ResNet, ResNetConfig, Tape};
use privpred_core::validate::check_calibration;
use privpred_core::{Calibration, Method, SeedPolicy};
use privpred_data::artifact;
use rand::Rng;
use rayon::prelude::*;
use safetensors::tensor::{Dtype, TensorView};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// The artifact format name written in the header.
pub const FORMAT: &str = "privpred-nn";
/// The artifact format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// What the weights are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// One network trained with DP-SGD: private itself, unlimited answers.
    DpSgd,
    /// T teachers on disjoint slices: each answer is drawn by the exponential mechanism
    /// over their votes, β from the calibration, at most B answers.
    Teachers,
    /// A non-private reference network (no guarantee).
    NonPrivate,
}

/// Everything but the weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelHeader {
    /// Kind.
    pub kind: ModelKind,
    /// Architecture.
    pub config: ResNetConfig,
    /// Input normalisation (raw pixels 0..255 → network input).
    pub normalization: Normalization,
    /// The guarantee (None only for [`ModelKind::NonPrivate`]).
    pub calibration: Option<Calibration>,
    /// The public training parameters the guarantee is re-derived from (None only for
    /// [`ModelKind::NonPrivate`]).
    pub training: Option<PublicTraining>,
    /// How the model's noise was seeded (None only for [`ModelKind::NonPrivate`]): a seeded
    /// model is an experiment, whose noise can be regenerated from the seed.
    pub seed_policy: Option<SeedPolicy>,
    /// Number of stored networks (1, or T teachers).
    pub members: usize,
    /// Class names, when known.
    #[serde(default)]
    pub class_names: Option<Vec<String>>,
    /// Where the training data came from (e.g. "CIFAR-10 (JPEG copy)").
    pub data_source: String,
}

/// A trained deep model with its guarantee.
#[derive(Debug, Clone, PartialEq)]
pub struct NnModel {
    /// Header.
    pub header: ModelHeader,
    /// The networks' flat parameter vectors.
    pub members: Vec<Vec<f32>>,
    /// The caller's extra metadata (training settings, quick-mode label...).
    pub extra: serde_json::Value,
    /// SHA-256 (hex) of the weight bytes, filled by [`load`] (and [`save`]).
    pub weights_sha256: String,
    /// The model's identity in budget ledgers: 128 random bits drawn when the model is built
    /// after training ([`NnModel::new`]), written by [`save`] (covered by the checksum) and
    /// read back by [`load`] (a file without one is refused).
    pub ledger_id: Option<String>,
}

/// One answer (defined once, in `privpred-core`).
pub use privpred_core::Answer;

fn err(path: &Path, msg: impl Into<String>) -> NnError {
    NnError::format(path, msg)
}

impl NnModel {
    /// Builds a model, checking the members' lengths against the architecture.
    pub fn new(
        header: ModelHeader,
        members: Vec<Vec<f32>>,
        extra: serde_json::Value,
    ) -> Result<Self> {
        let net = ResNet::new(header.config)?;
        if members.is_empty() || members.len() != header.members {
            return Err(NnError::Shape(format!(
                "{} parameter vectors for a header of {}",
                members.len(),
                header.members
            )));
        }
        if header.kind != ModelKind::Teachers && members.len() != 1 {
            return Err(NnError::Shape(
                "DP-SGD and non-private models hold exactly one network".into(),
            ));
        }
        if header.kind != ModelKind::NonPrivate
            && (header.calibration.is_none()
                || header.training.is_none()
                || header.seed_policy.is_none())
        {
            return Err(NnError::Shape(
                "a private model needs its calibration, its public training parameters and its seed policy".into(),
            ));
        }
        for m in &members {
            if m.len() != net.num_params() {
                return Err(NnError::Shape(format!(
                    "{} parameters, the architecture has {}",
                    m.len(),
                    net.num_params()
                )));
            }
        }
        let ledger_id = artifact::new_ledger_id().map_err(|e| NnError::Io {
            path: "the operating system's random source".into(),
            source: std::io::Error::other(e),
        })?;
        let mut m = NnModel {
            header,
            members,
            extra,
            weights_sha256: String::new(),
            ledger_id: Some(ledger_id),
        };
        m.weights_sha256 = sha256_hex(&m.weight_bytes());
        Ok(m)
    }

    fn weight_bytes(&self) -> Vec<u8> {
        self.members
            .iter()
            .flatten()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    }

    /// Values per query row: `C·H·W` raw pixels 0..255, channel-major (the layout of
    /// `privpred_data`'s CIFAR and image-folder readers).
    pub fn input_dim(&self) -> usize {
        let c = &self.header.config;
        c.in_channels * c.image_size * c.image_size
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.header.config.classes
    }

    /// Checks that every row holds [`NnModel::input_dim`] raw pixel values in `0..=255`.
    pub fn check_rows(&self, rows: &[&[f32]]) -> Result<()> {
        let d = self.input_dim();
        for (i, r) in rows.iter().enumerate() {
            if r.len() != d {
                return Err(NnError::invalid(
                    "query row",
                    i,
                    format!("has {} values; expected {d} raw pixels (C×H×W)", r.len()),
                ));
            }
            if let Some(v) = r
                .iter()
                .find(|v| !(v.is_finite() && (0.0..=255.0).contains(*v)))
            {
                return Err(NnError::invalid(
                    "query pixel",
                    v,
                    format!("row {i}: pixels must be raw values in 0..=255"),
                ));
            }
        }
        Ok(())
    }

    /// The logits of every member network for every row (`[row][member][class]`), after
    /// [`NnModel::check_rows`]. Deterministic; nothing is private about them for teachers
    /// (their votes must go through [`NnModel::answers_from_logits`]).
    pub fn member_logits(&self, rows: &[&[f32]]) -> Result<Vec<Vec<Vec<f32>>>> {
        self.check_rows(rows)?;
        let net = ResNet::new(self.header.config)?;
        let c = self.header.config;
        let hw = c.image_size * c.image_size;
        let norm = &self.header.normalization;
        if norm.mean.len() != c.in_channels || norm.std.len() != c.in_channels {
            return Err(NnError::Shape(format!(
                "normalisation for {} channels, the network has {}",
                norm.mean.len(),
                c.in_channels
            )));
        }
        Ok(rows
            .par_iter()
            .map_init(
                || (Tape::default(), Vec::new()),
                |(tape, x), r| {
                    x.clear();
                    for ch in 0..c.in_channels {
                        let (m, s) = (norm.mean[ch], norm.std[ch]);
                        x.extend(
                            r[ch * hw..(ch + 1) * hw]
                                .iter()
                                .map(|&v| (v / 255.0 - m) / s),
                        );
                    }
                    self.members
                        .iter()
                        .map(|p| net.forward(p, x, tape).to_vec())
                        .collect()
                },
            )
            .collect())
    }

    /// The released answers for logits from [`NnModel::member_logits`]: DP-SGD and
    /// non-private networks answer with the arg-max and the softmax probabilities
    /// (post-processing of the private network); teachers with one draw of the exponential
    /// mechanism over their votes per row (β from the calibration, no scores). Each teacher
    /// answer spends one unit of the inference budget, which the caller must account.
    pub fn answers_from_logits(
        &self,
        logits: &[Vec<Vec<f32>>],
        rng: &mut impl Rng,
    ) -> Result<Vec<Answer>> {
        match self.header.kind {
            ModelKind::DpSgd | ModelKind::NonPrivate => Ok(logits
                .iter()
                .map(|ls| {
                    let l = &ls[0];
                    let mut p = vec![0.0f32; l.len()];
                    crate::ops::softmax(l, &mut p);
                    Answer {
                        label: argmax(l) as u32,
                        scores: Some(p.iter().map(|&v| v as f64).collect()),
                    }
                })
                .collect()),
            ModelKind::Teachers => {
                self.beta()?;
                // the calibrated selection: exponential mechanism, or permute-and-flip
                let mechanism = self
                    .header
                    .calibration
                    .as_ref()
                    .map(|c| c.mechanism)
                    .ok_or_else(|| NnError::Shape("teachers without calibration".into()))?;
                logits
                    .iter()
                    .map(|ls| {
                        let votes = self.votes(ls);
                        let y = mechanism.select(rng, &votes)?;
                        Ok(Answer {
                            label: y as u32,
                            scores: None,
                        })
                    })
                    .collect()
            }
        }
    }

    /// The teachers' vote counts per class for one row's member logits.
    pub fn votes(&self, member_logits: &[Vec<f32>]) -> Vec<u32> {
        let mut votes = vec![0u32; self.classes()];
        for l in member_logits {
            votes[argmax(l)] += 1;
        }
        votes
    }

    /// β of a teacher ensemble's exponential mechanism (from its calibration).
    pub fn beta(&self) -> Result<f64> {
        let cal = self
            .header
            .calibration
            .as_ref()
            .ok_or_else(|| NnError::Shape("teachers without calibration".into()))?;
        crate::calib::beta_of(cal).ok_or_else(|| {
            NnError::Shape("teachers need an exponential-mechanism calibration".into())
        })
    }

    /// Answers one query per row. Rows are raw pixels (0..255, channel-major). DP-SGD and
    /// non-private models answer with the arg-max (and probabilities); teachers answer with
    /// the exponential mechanism over their votes, with β from the calibration — each call
    /// spends one unit of the inference budget per row, which the caller must account
    /// (the service's ledger does). `rng` is only used by teachers (pass an OS-seeded
    /// cryptographic generator in a release).
    pub fn predict(&self, rows: &[&[f32]], rng: &mut impl Rng) -> Result<Vec<Answer>> {
        let logits = self.member_logits(rows)?;
        self.answers_from_logits(&logits, rng)
    }

    /// Whether answers spend an inference budget (teachers) or not (a DP-SGD network is
    /// private itself; a non-private network has no guarantee).
    pub fn spends_budget(&self) -> bool {
        self.header.kind == ModelKind::Teachers
    }
}

fn argmax(l: &[f32]) -> usize {
    l.iter()
        .enumerate()
        .fold(0, |b, (i, &v)| if v > l[b] { i } else { b })
}

fn sha256_hex(bytes: &[u8]) -> String {
    privpred_data::fsutil::sha256_bytes(bytes)
}

/// Writes the model atomically (temporary file in the same directory, then rename).
pub fn save(path: &Path, model: &NnModel) -> Result<()> {
    let bytes = encode(path, model)?;
    privpred_data::fsutil::write_atomic(path, |w| w.write_all(&bytes))?;
    Ok(())
}

/// The bytes [`save`] writes (`path` only names the file in errors): the payload a release
/// envelope wraps.
pub fn encode(path: &Path, model: &NnModel) -> Result<Vec<u8>> {
    let net = ResNet::new(model.header.config)?;
    let t = model.members.len();
    let stacked = model.header.kind == ModelKind::Teachers;
    let mut bufs: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for ti in net.tensors() {
        let mut bytes = Vec::with_capacity(ti.len * 4 * t);
        for m in &model.members {
            bytes.extend(m[ti.range()].iter().flat_map(|v| v.to_le_bytes()));
        }
        let mut shape = ti.shape.clone();
        if stacked {
            shape.insert(0, t);
        }
        bufs.push((ti.name.clone(), shape, bytes));
    }
    let views: Vec<(String, TensorView<'_>)> = bufs
        .iter()
        .map(|(n, s, b)| TensorView::new(Dtype::F32, s.clone(), b).map(|v| (n.clone(), v)))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| err(path, format!("cannot build tensors: {e}")))?;
    let mut meta = HashMap::new();
    meta.insert("format".to_string(), FORMAT.to_string());
    meta.insert("format_version".to_string(), FORMAT_VERSION.to_string());
    meta.insert(
        "model".to_string(),
        serde_json::to_string(&model.header).map_err(|e| err(path, e.to_string()))?,
    );
    meta.insert("extra".to_string(), model.extra.to_string());
    // the same note on the selection as every family's model file
    let note = privpred_core::tuning::selection_note(
        model
            .header
            .calibration
            .as_ref()
            .and_then(|c| c.selection.as_ref()),
        None,
    );
    meta.insert(
        "privacy_notes".to_string(),
        serde_json::to_string(&[note]).map_err(|e| err(path, e.to_string()))?,
    );
    let ledger_id = match &model.ledger_id {
        Some(id) => id.clone(),
        None => artifact::new_ledger_id().map_err(|e| err(path, e))?,
    };
    meta.insert(artifact::LEDGER_ID_KEY.to_string(), ledger_id);
    meta.insert(
        "weights_sha256".to_string(),
        sha256_hex(&model.weight_bytes()),
    );
    let dtype = format!("{:?}", Dtype::F32);
    let refs: Vec<artifact::TensorRef<'_>> = bufs
        .iter()
        .map(|(n, sh, b)| (n.as_str(), dtype.as_str(), sh.as_slice(), b.as_slice()))
        .collect();
    let sum = artifact::checksum(&meta, &refs);
    meta.insert(artifact::CHECKSUM_KEY.to_string(), sum);
    let bytes = safetensors::serialize(views, Some(meta))
        .map_err(|e| err(path, format!("cannot serialise: {e}")))?;
    Ok(bytes)
}

/// Most networks one artifact may hold (teachers T).
pub const MAX_MEMBERS: usize = 10_000;
/// Largest input side, channel width and input channel count an artifact's architecture may
/// name (ResNet-20 on CIFAR-10: 32, 64, 3), and most blocks per stage.
pub const MAX_IMAGE_SIZE: usize = 4_096;
/// See [`MAX_IMAGE_SIZE`].
pub const MAX_WIDTH: usize = 4_096;
/// See [`MAX_IMAGE_SIZE`].
pub const MAX_IN_CHANNELS: usize = 16;
/// See [`MAX_IMAGE_SIZE`].
pub const MAX_BLOCKS_PER_STAGE: usize = 1_000;

/// Range-checks a header read from a file: the architecture within the limits above (so its
/// parameter count cannot overflow) and 2 ≤ classes ≤ `privpred_data::limits::MAX_CLASSES`;
/// 1 ≤ members ≤ [`MAX_MEMBERS`] (exactly 1 unless teachers); the input normalisation with
/// one finite mean and one finite positive std per channel; class names (if any) one per
/// class; and the guarantee: none for a non-private network, else valid
/// ([`check_calibration`]) for the kind's method (DP-SGD, or subsample-and-aggregate for
/// teachers) and the network's classes, with its seed policy, and equal to the guarantee
/// its public training parameters give ([`crate::calib::rederive`]).
fn check_header(h: &ModelHeader) -> std::result::Result<(), String> {
    let c = &h.config;
    let max_c = privpred_data::limits::MAX_CLASSES;
    if c.in_channels == 0 || c.image_size == 0 || c.blocks_per_stage == 0 {
        return Err(format!(
            "architecture {c}: in_channels = {}, image_size = {}, blocks_per_stage = {} (each must be at least 1)",
            c.in_channels, c.image_size, c.blocks_per_stage
        ));
    }
    if c.in_channels > MAX_IN_CHANNELS
        || c.image_size > MAX_IMAGE_SIZE
        || c.widths.iter().any(|&w| w > MAX_WIDTH)
        || c.blocks_per_stage > MAX_BLOCKS_PER_STAGE
        || !(2..=max_c).contains(&c.classes)
    {
        return Err(format!(
            "architecture {c} outside the limits (in_channels ≤ {MAX_IN_CHANNELS}, image_size ≤ {MAX_IMAGE_SIZE}, widths ≤ {MAX_WIDTH}, blocks_per_stage ≤ {MAX_BLOCKS_PER_STAGE}, classes 2..={max_c})"
        ));
    }
    if h.members == 0 || h.members > MAX_MEMBERS {
        return Err(format!(
            "{} member networks (need 1..={MAX_MEMBERS})",
            h.members
        ));
    }
    if h.kind != ModelKind::Teachers && h.members != 1 {
        return Err("DP-SGD and non-private models hold exactly one network".into());
    }
    let n = &h.normalization;
    if n.mean.len() != c.in_channels
        || n.std.len() != c.in_channels
        || n.mean.iter().any(|v| !v.is_finite())
        || n.std.iter().any(|v| !(v.is_finite() && *v > 0.0))
    {
        return Err(format!(
            "input normalisation (mean {:?}, std {:?}): need {} finite means and {} finite stds > 0",
            n.mean, n.std, c.in_channels, c.in_channels
        ));
    }
    if let Some(names) = &h.class_names
        && names.len() != c.classes
    {
        return Err(format!(
            "{} class names for {} classes",
            names.len(),
            c.classes
        ));
    }
    let method = match h.kind {
        ModelKind::NonPrivate => {
            return match (&h.calibration, &h.training, &h.seed_policy) {
                (None, None, None) => Ok(()),
                _ => Err(
                    "a non-private network with a guarantee, training parameters or a seed policy"
                        .into(),
                ),
            };
        }
        ModelKind::DpSgd => Method::DpSgd,
        ModelKind::Teachers => Method::SubsampleAggregate,
    };
    let cal = h
        .calibration
        .as_ref()
        .ok_or("a private model without its guarantee")?;
    check_calibration(cal).map_err(|e| format!("guarantee: {e}"))?;
    if cal.method() != method {
        return Err(format!(
            "a {} model cannot carry a {} guarantee",
            match h.kind {
                ModelKind::DpSgd => "DP-SGD",
                ModelKind::Teachers => "teachers",
                ModelKind::NonPrivate => "non-private",
            },
            cal.method()
        ));
    }
    if cal.assumptions.classes != c.classes {
        return Err(format!(
            "the guarantee is for {} classes, the network has {}",
            cal.assumptions.classes, c.classes
        ));
    }
    if h.seed_policy.is_none() {
        return Err(
            "seed_policy: missing; a private model records how its noise was seeded".into(),
        );
    }
    let training = h.training.as_ref().ok_or(
        "training: missing; a private model records the public parameters its guarantee rests on",
    )?;
    crate::calib::rederive(method, cal, training, h.members)
}

/// Reads a model written by [`save`]; refuses other files with a clear error: sizes are
/// checked before reading, the whole-file checksum (metadata and weights,
/// [`privpred_data::artifact`]) must match, every header field is range-checked
/// (`check_header`), tensor shapes are checked before the networks are allocated, and the
/// weights must be finite.
///
/// Steps: read and parse the file, check the format (`check_format`) and the checksum,
/// read the headers (`read_headers`), check every tensor against the architecture
/// (`checked_tensor`), then copy the weights into the members (`read_members`).
pub fn load(path: &Path) -> Result<NnModel> {
    let bytes = artifact::read_artifact_bytes(path).map_err(|e| match e {
        privpred_data::DataError::Io { path, source } => NnError::io(path, source),
        e => err(path, e.reason()),
    })?;
    load_from_bytes(path, &bytes)
}

/// [`load`] on bytes already read (a release envelope's payload; `path` names the file in
/// errors): every check of [`load`] runs.
pub fn load_from_bytes(path: &Path, bytes: &[u8]) -> Result<NnModel> {
    let (st, meta) = artifact::parse_safetensors(bytes).map_err(|e| err(path, e))?;
    check_format(path, &meta)?;
    // One checksum over every metadata entry and tensor.
    let names =
        artifact::verify_safetensors(path, &meta, &st).map_err(|e| err(path, e.reason()))?;
    let (header, extra) = read_headers(path, &meta)?;
    let net = ResNet::new(header.config).map_err(|e| err(path, e.to_string()))?;
    let members = header.members;
    let stacked = header.kind == ModelKind::Teachers;
    if names.len() != net.tensors().len() {
        return Err(err(
            path,
            format!(
                "{} tensors, the architecture has {}",
                names.len(),
                net.tensors().len()
            ),
        ));
    }
    // The tensors' shapes are checked against the header before anything is allocated for
    // the members: their sizes are then bounded by the file's.
    for ti in net.tensors() {
        checked_tensor(path, &st, ti, stacked, members)?;
    }
    let members = read_members(path, &st, &net, stacked, members)?;
    let mut model = NnModel::new(header, members, extra).map_err(|e| err(path, e.to_string()))?;
    model.ledger_id = Some(artifact::read_ledger_id(&meta).map_err(|e| err(path, e))?);
    if &model.weights_sha256 != meta_get(path, &meta, "weights_sha256")? {
        return Err(err(
            path,
            "weights do not match their SHA-256: corrupt file",
        ));
    }
    Ok(model)
}

/// The metadata entry `k`, or an error saying the file is not a privpred-nn model.
fn meta_get<'m>(path: &Path, meta: &'m HashMap<String, String>, k: &str) -> Result<&'m String> {
    meta.get(k).ok_or_else(|| {
        err(
            path,
            format!("metadata key `{k}` missing: not a privpred-nn model or corrupt"),
        )
    })
}

/// The `format` entry must be this crate's and the `format_version` the one this build reads.
fn check_format(path: &Path, meta: &HashMap<String, String>) -> Result<()> {
    let format = meta_get(path, meta, "format")?;
    if format != FORMAT {
        return Err(err(path, format!("format `{format}` is not `{FORMAT}`")));
    }
    let version = meta_get(path, meta, "format_version")?;
    if version != &FORMAT_VERSION.to_string() {
        return Err(err(
            path,
            format!(
                "format version {version} is not supported (this build reads {FORMAT_VERSION})"
            ),
        ));
    }
    Ok(())
}

/// Parses the model header and the extra header, and checks the model header
/// ([`check_header`]: ranges, and the guarantee re-derived).
fn read_headers(
    path: &Path,
    meta: &HashMap<String, String>,
) -> Result<(ModelHeader, serde_json::Value)> {
    let model_json = meta_get(path, meta, "model")?;
    let header: ModelHeader = serde_json::from_str(model_json)
        .map_err(|e| err(path, format!("corrupt model header: {e}")))?;
    let extra: serde_json::Value = serde_json::from_str(meta_get(path, meta, "extra")?)
        .map_err(|e| err(path, format!("corrupt extra header: {e}")))?;
    check_header(&header).map_err(|reason| err(path, reason))?;
    Ok((header, extra))
}

/// The tensor `ti` of the file, F32 and of the architecture's shape (with a leading
/// `members` axis when the members are `stacked`, as a teacher ensemble's are).
fn checked_tensor<'a>(
    path: &Path,
    st: &safetensors::SafeTensors<'a>,
    ti: &crate::resnet::TensorInfo,
    stacked: bool,
    members: usize,
) -> Result<TensorView<'a>> {
    let v = st
        .tensor(&ti.name)
        .map_err(|e| err(path, format!("tensor `{}`: {e}", ti.name)))?;
    let mut shape = ti.shape.clone();
    if stacked {
        shape.insert(0, members);
    }
    if v.dtype() != Dtype::F32 || v.shape() != shape.as_slice() {
        return Err(err(
            path,
            format!(
                "tensor `{}` is {:?} {:?}, expected F32 {:?}",
                ti.name,
                v.dtype(),
                v.shape(),
                shape
            ),
        ));
    }
    Ok(v)
}

/// The members' flat parameter vectors, copied tensor by tensor from the file (each checked
/// again by [`checked_tensor`]); every weight must be finite.
fn read_members(
    path: &Path,
    st: &safetensors::SafeTensors<'_>,
    net: &ResNet,
    stacked: bool,
    members: usize,
) -> Result<Vec<Vec<f32>>> {
    let mut out = vec![vec![0.0f32; net.num_params()]; members];
    for ti in net.tensors() {
        let v = checked_tensor(path, st, ti, stacked, members)?;
        let vals: Vec<f32> = v
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        for (k, m) in out.iter_mut().enumerate() {
            m[ti.range()].copy_from_slice(&vals[k * ti.len..(k + 1) * ti.len]);
        }
    }
    if out.iter().flatten().any(|v| !v.is_finite()) {
        return Err(err(path, "weights contain NaN or infinity: corrupt file"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use privpred_core::{CalibrationMode, Privacy};
    use safetensors::tensor::SafeTensors;
    use serde_json::Value;

    type Tensors = Vec<(String, Vec<usize>, Vec<u8>)>;
    type Edit = Box<dyn Fn(&mut Value, &mut Tensors)>;

    fn params(cfg: ResNetConfig, k: usize) -> Vec<Vec<f32>> {
        let net = ResNet::new(cfg).unwrap();
        (0..k)
            .map(|j| {
                (0..net.num_params())
                    .map(|i| ((i * 7919 + j) % 101) as f32 / 101.0 - 0.5)
                    .collect()
            })
            .collect()
    }

    fn teachers(dir: &Path) -> std::path::PathBuf {
        let cfg = ResNetConfig::tiny(4);
        let cal = crate::calib::subsample_aggregate(
            CalibrationMode::Corrected,
            Privacy::new(1.0, 0.0).unwrap(),
            10,
            4,
        )
        .unwrap();
        let model = NnModel::new(
            ModelHeader {
                kind: ModelKind::Teachers,
                config: cfg,
                normalization: crate::data::Normalization::cifar10(),
                calibration: Some(cal),
                training: Some(PublicTraining {
                    n: 100,
                    dp_sgd: None,
                    teachers: Some(2),
                }),
                seed_policy: Some(SeedPolicy::OsRandom),
                members: 2,
                class_names: None,
                data_source: "test".into(),
            },
            params(cfg, 2),
            Value::Null,
        )
        .unwrap();
        let path = dir.join("t.safetensors");
        save(&path, &model).unwrap();
        assert_eq!(load(&path).unwrap(), model);
        path
    }

    fn dpsgd(dir: &Path, mode: CalibrationMode) -> std::path::PathBuf {
        let cfg = ResNetConfig::tiny(4);
        let cal =
            crate::calib::dpsgd(mode, Privacy::new(1.0, 1e-5).unwrap(), 200, 20, 2.0, 4).unwrap();
        let model = NnModel::new(
            ModelHeader {
                kind: ModelKind::DpSgd,
                config: cfg,
                normalization: crate::data::Normalization::cifar10(),
                calibration: Some(cal),
                training: Some(PublicTraining {
                    n: 200,
                    dp_sgd: Some(privpred_core::DpSgdSchedule {
                        batch_size: 20,
                        epochs: 2.0,
                    }),
                    teachers: None,
                }),
                seed_policy: Some(SeedPolicy::Seeded { seed: 3 }),
                members: 1,
                class_names: None,
                data_source: "test".into(),
            },
            params(cfg, 1),
            Value::Null,
        )
        .unwrap();
        let path = dir.join(format!("d-{mode}.safetensors"));
        save(&path, &model).unwrap();
        assert_eq!(load(&path).unwrap(), model);
        path
    }

    /// In-range edits of a public parameter, its noise or its validity, with the checksum
    /// recomputed (what anyone can do to an unsigned payload): the guarantee re-derived from
    /// the public parameters refuses each, naming the field and the re-derived value.
    #[test]
    fn guarantees_are_rederived_and_consistent_edits_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let t = teachers(dir.path());
        let d = dpsgd(dir.path(), CalibrationMode::Corrected);
        let paper = dpsgd(dir.path(), CalibrationMode::Paper);
        assert!(!load(&paper).unwrap().header.calibration.unwrap().is_valid());
        let bad = dir.path().join("bad.safetensors");
        let cases: Vec<(&str, &Path, Edit, &str)> = vec![
            // DP-SGD: N edited (q = b/N and the steps then differ from the stored ones)
            (
                "N × 10",
                &d,
                Box::new(|m, _| m["training"]["n"] = 2000.into()),
                "guarantee: `",
            ),
            (
                "N and the recorded N × 10",
                &d,
                Box::new(|m, _| {
                    m["training"]["n"] = 2000.into();
                    m["calibration"]["assumptions"]["n"] = 2000.into();
                }),
                "guarantee: `noise.sigma`",
            ),
            (
                "ε 1 → 0.1 with the old σ",
                &d,
                Box::new(|m, _| m["calibration"]["privacy"]["epsilon"] = 0.1.into()),
                "guarantee: `noise.sigma`",
            ),
            (
                "σ / 10",
                &d,
                Box::new(|m, _| {
                    let s = m["calibration"]["noise"]["sigma"].as_f64().unwrap();
                    m["calibration"]["noise"]["sigma"] = (s / 10.0).into();
                    m["calibration"]["noise_multiplier"] = (s / 10.0).into();
                }),
                "guarantee: `noise.sigma`",
            ),
            (
                "epochs / 10",
                &d,
                Box::new(|m, _| m["training"]["dp_sgd"]["epochs"] = 0.2.into()),
                "guarantee: `",
            ),
            (
                "a paper calibration marked valid",
                &paper,
                Box::new(|m, _| m["calibration"]["valid_guarantee"] = true.into()),
                "guarantee: `valid_guarantee`",
            ),
            (
                "add-remove relabel",
                &d,
                Box::new(|m, _| m["calibration"]["neighbours"] = "add-remove".into()),
                "add-remove",
            ),
            (
                "a private selection",
                &d,
                Box::new(
                    |m, _| m["calibration"]["selection"] = serde_json::json!({"method": "private-split", "epsilon": 1.0, "delta": 1e-5, "composition": "parallel"}),
                ),
                "selection",
            ),
            (
                "schedule removed",
                &d,
                Box::new(|m, _| m["training"]["dp_sgd"] = Value::Null),
                "training.dp_sgd",
            ),
            (
                "seed policy removed",
                &d,
                Box::new(|m, _| m["seed_policy"] = Value::Null),
                "seed_policy",
            ),
            // teachers: ε, B, T
            (
                "ε 1 → 0.1 with the old β",
                &t,
                Box::new(|m, _| m["calibration"]["privacy"]["epsilon"] = 0.1.into()),
                "guarantee: `noise.beta`",
            ),
            (
                "B × 100",
                &t,
                Box::new(|m, _| m["calibration"]["budget"]["finite"] = 1000.into()),
                "guarantee: `noise.beta`",
            ),
            (
                "β × 100",
                &t,
                Box::new(|m, _| {
                    let b = m["calibration"]["noise"]["beta"].as_f64().unwrap();
                    m["calibration"]["noise"]["beta"] = (b * 100.0).into();
                }),
                "guarantee: `noise.beta`",
            ),
            (
                "T recorded as 3 for 2 networks",
                &t,
                Box::new(|m, _| m["training"]["teachers"] = 3.into()),
                "training.teachers",
            ),
            (
                "T = 2 teachers for N = 1",
                &t,
                Box::new(|m, _| m["training"]["n"] = 1.into()),
                "training.teachers",
            ),
        ];
        for (what, src, edit, needle) in &cases {
            rewrite(src, &bad, edit.as_ref(), true);
            let e = load(&bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{what}: {e}");
        }
        // the re-derived value is named
        rewrite(
            &t,
            &bad,
            &|m, _| m["calibration"]["privacy"]["epsilon"] = 0.1.into(),
            true,
        );
        let e = load(&bad).unwrap_err().to_string();
        assert!(e.contains("gives 0.005"), "{e}");
        // the rewrite alone (nothing edited) changes nothing
        for src in [&t, &d, &paper] {
            rewrite(src, &bad, &|_, _| {}, true);
            assert_eq!(load(&bad).unwrap(), load(src).unwrap());
        }
    }

    /// Rewrites an artifact with `edit` applied to the `model` JSON and the tensors, then
    /// (if `resum`) a correct checksum.
    fn rewrite(src: &Path, dst: &Path, edit: &dyn Fn(&mut Value, &mut Tensors), resum: bool) {
        let bytes = std::fs::read(src).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let (_, md) = SafeTensors::read_metadata(&bytes).unwrap();
        let mut meta = md.metadata().clone().unwrap();
        let mut model: Value = serde_json::from_str(&meta["model"]).unwrap();
        let mut ts: Tensors = st
            .tensors()
            .into_iter()
            .map(|(n, v)| (n, v.shape().to_vec(), v.data().to_vec()))
            .collect();
        edit(&mut model, &mut ts);
        meta.insert("model".into(), model.to_string());
        if resum {
            let refs: Vec<artifact::TensorRef<'_>> = ts
                .iter()
                .map(|(n, sh, d)| (n.as_str(), "F32", sh.as_slice(), d.as_slice()))
                .collect();
            let c = artifact::checksum(&meta, &refs);
            meta.insert(artifact::CHECKSUM_KEY.into(), c);
        }
        let views: Vec<(String, TensorView<'_>)> = ts
            .iter()
            .map(|(n, sh, d)| {
                (
                    n.clone(),
                    TensorView::new(Dtype::F32, sh.clone(), d).unwrap(),
                )
            })
            .collect();
        std::fs::write(dst, safetensors::serialize(views, Some(meta)).unwrap()).unwrap();
    }

    #[test]
    fn crafted_headers_and_edits_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let good = teachers(dir.path());
        let bad = dir.path().join("bad.safetensors");
        let cases: Vec<(&str, Edit, &str)> = vec![
            (
                "empty teachers tensor",
                Box::new(|m, ts| {
                    m["members"] = 0.into();
                    for t in ts.iter_mut() {
                        t.1[0] = 0;
                        t.2.clear();
                    }
                }),
                "member networks",
            ),
            (
                "epsilon -1",
                Box::new(|m, _| m["calibration"]["privacy"]["epsilon"] = (-1.0).into()),
                "epsilon",
            ),
            (
                "delta 2",
                Box::new(|m, _| m["calibration"]["privacy"]["delta"] = 2.0.into()),
                "delta",
            ),
            (
                "beta 0",
                Box::new(|m, _| m["calibration"]["noise"]["beta"] = 0.0.into()),
                "beta",
            ),
            (
                "renamed method",
                Box::new(|m, _| m["calibration"]["method"] = "prediction-sensitivity".into()),
                "noise",
            ),
            (
                "classes 0",
                Box::new(|m, _| m["config"]["classes"] = 0.into()),
                "classes",
            ),
            (
                "huge widths",
                Box::new(|m, _| {
                    m["config"]["widths"] = serde_json::json!([1u64 << 40, 1u64 << 40, 1u64 << 40])
                }),
                "limits",
            ),
            (
                "std 0",
                Box::new(|m, _| m["normalization"]["std"][0] = 0.0.into()),
                "normalisation",
            ),
            (
                // named as such, not as "need 0 finite means"
                "in_channels 0",
                Box::new(|m, _| m["config"]["in_channels"] = 0.into()),
                "in_channels = 0",
            ),
            (
                "billions of members",
                Box::new(|m, _| m["members"] = 4_000_000_000u64.into()),
                "member networks",
            ),
            (
                "missing tensor",
                Box::new(|_, ts| {
                    ts.pop();
                }),
                "tensors",
            ),
        ];
        for (what, edit, needle) in &cases {
            rewrite(&good, &bad, edit.as_ref(), true);
            let e = load(&bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{what}: {e}");
            assert!(!e.contains("need 0 finite"), "{what}: {e}");
            rewrite(&good, &bad, edit.as_ref(), false);
            let e = load(&bad).unwrap_err().to_string();
            assert!(e.contains("checksum"), "{what}: {e}");
        }
        // an in-range edit is caught by the checksum alone
        rewrite(
            &good,
            &bad,
            &|m, _| m["calibration"]["privacy"]["epsilon"] = 8.0.into(),
            false,
        );
        assert!(load(&bad).unwrap_err().to_string().contains("checksum"));
        // a header length of 2^62: refused before allocating
        let mut b = (1u64 << 62).to_le_bytes().to_vec();
        b.extend_from_slice(b"{}");
        std::fs::write(&bad, &b).unwrap();
        assert!(
            load(&bad)
                .unwrap_err()
                .to_string()
                .contains("header claims")
        );
    }
}
