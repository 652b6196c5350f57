//! The one model-artifact format of privpred and its one loader.
//!
//! Every model family (logistic regression, and with the `nn` feature the ResNets) is
//! written into the same [`envelope`] (format version 2): a public, strictly parsed
//! [`Header`] (family, method, typed [`SeedPolicy`], calibration, ledger id), the family's
//! payload, and an Ed25519 signature over the exact bytes. A payload that holds non-private
//! parameters — a non-private model, a prediction-sensitivity model (its θ is the
//! non-private minimiser) or a subsample-and-aggregate ensemble (its teachers are
//! non-private) — is sealed with XChaCha20-Poly1305 under the owner's [`SealingKey`], so the
//! file alone reveals nothing but its header ([`must_seal`]).
//!
//! Loading is one path, [`open`]: integrity (lengths, canonical header, payload hash) →
//! signature → trust → unsealing → the family's payload loader, which re-derives the
//! guarantee from the public parameters → the header checked against the payload. What
//! may then answer is decided by [`Released::for_release`]: a file not covered by a trusted
//! signature or trained with a seed is refused unless the caller opts in, and then every
//! answer carries the [`Marks`].

pub mod envelope;
mod error;
pub mod keys;
mod linear;
#[cfg(feature = "nn")]
pub mod resnet;

pub use envelope::{Family, Header, SeedPolicy};
pub use error::{ReleaseError, Result};
pub use keys::{KeyDir, SealingKey, SigningKey, VerifyKey};
pub use linear::{linear_header, save_linear};
#[cfg(feature = "nn")]
pub use resnet::{nn_seed_policy, resnet_header, save_resnet};

use privpred_core::Method;
use std::path::{Path, PathBuf};

/// The largest artifact file read.
pub const MAX_ARTIFACT_BYTES: u64 = privpred_data::limits::MAX_ARTIFACT_BYTES;

/// Whether a model of `method` (`None`: non-private) holds parameters that are not private
/// and is therefore sealed: the non-private model, prediction sensitivity (θ is the
/// non-private minimiser; the noise is added per answer) and subsample-and-aggregate (the
/// teachers). Private-training models (model sensitivity, loss perturbation, DP-SGD)
/// release their weights, which are private, and are signed but not sealed.
pub fn must_seal(method: Option<Method>) -> bool {
    match method {
        None => true,
        Some(m) => matches!(
            m,
            Method::PredictionSensitivity | Method::SubsampleAggregate
        ),
    }
}

/// Whether the answers of a model of `method` include (noisy) scores: every method but
/// subsample-and-aggregate, whose answer is one exponential-mechanism draw of a label.
pub fn releases_scores(method: Option<Method>) -> bool {
    method != Some(Method::SubsampleAggregate)
}

/// The keys an artifact is written with.
#[derive(Debug, Default)]
pub struct WriteKeys {
    /// Signs the file; `None` writes an unsigned file (which no host answers from without
    /// opting in).
    pub signing: Option<SigningKey>,
    /// Seals the payload of a model that holds non-private parameters ([`must_seal`]);
    /// required for those.
    pub sealing: Option<SealingKey>,
}

impl WriteKeys {
    /// The keys of `signing` (a `signing.key`) and the `sealing.key` next to it when there is
    /// one; without `signing`, the default key directory's, created on first use (the
    /// directory is then returned, for the one line that says where).
    pub fn from_files(signing: Option<&Path>) -> Result<(WriteKeys, Option<PathBuf>)> {
        let (file, created) = match signing {
            Some(f) => (f.to_path_buf(), None),
            None => {
                let dir = KeyDir::default_dir().ok_or_else(no_default_dir)?;
                let (kd, created) = KeyDir::open_or_create(&dir.0)?;
                (kd.signing(), created.then(|| kd.0.clone()))
            }
        };
        let key = SigningKey::read(&file)?;
        let sealing = sibling(&file, keys::SEALING_FILE);
        let sealing = match sealing.exists() {
            true => Some(SealingKey::read(&sealing)?),
            false => None,
        };
        Ok((
            WriteKeys {
                signing: Some(key),
                sealing,
            },
            created,
        ))
    }
}

fn no_default_dir() -> ReleaseError {
    ReleaseError::Key {
        path: PathBuf::from("~/.config/privpred/keys"),
        reason: "no default key directory (neither XDG_CONFIG_HOME nor HOME is set): give the key files explicitly".into(),
    }
}

fn sibling(file: &Path, name: &str) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.join(name),
        _ => PathBuf::from(name),
    }
}

impl Trust {
    /// What a host trusts: the verify key `verify` (default: the default key directory's
    /// `verify.pub`, when it exists), the sealing key `sealing` (default: the `sealing.key`
    /// next to the verify key, when it exists), and whether uncovered files are opened.
    pub fn from_files(
        verify: Option<&Path>,
        sealing: Option<&Path>,
        allow_unsigned: bool,
    ) -> Result<Trust> {
        let verify = match verify {
            Some(f) => Some(f.to_path_buf()),
            None => KeyDir::default_dir()
                .map(|kd| kd.verify())
                .filter(|p| p.exists()),
        };
        let keys = match &verify {
            Some(f) => vec![VerifyKey::read(f)?],
            None => Vec::new(),
        };
        let sealing = match (sealing, &verify) {
            (Some(f), _) => Some(SealingKey::read(f)?),
            (None, Some(v)) => {
                let p = sibling(v, keys::SEALING_FILE);
                match p.exists() {
                    true => Some(SealingKey::read(&p)?),
                    false => None,
                }
            }
            (None, None) => None,
        };
        Ok(Trust {
            keys,
            sealing,
            allow_unsigned,
        })
    }
}

/// What a loader trusts.
#[derive(Debug, Default)]
pub struct Trust {
    /// The verify keys whose signatures are trusted.
    pub keys: Vec<VerifyKey>,
    /// The sealing key that opens sealed payloads.
    pub sealing: Option<SealingKey>,
    /// Open unsigned files and files signed by other keys (every answer is then marked as
    /// not covered).
    pub allow_unsigned: bool,
}

/// Whether a file's contents are covered by a trusted signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coverage {
    /// Signed by this trusted key (its id).
    Signed(String),
    /// Opened with `allow_unsigned`: why the file is not covered.
    NotCovered(String),
}

/// A model read by [`open`].
#[derive(Debug)]
pub enum Model {
    /// A logistic-regression model.
    Linear(Box<privpred_linear::artifact::LoadedModel>),
    /// A ResNet model.
    #[cfg(feature = "nn")]
    Resnet(Box<privpred_nn::artifact::NnModel>),
}

impl Model {
    /// The linear model, if this is one.
    pub fn into_linear(self) -> Option<privpred_linear::artifact::LoadedModel> {
        match self {
            Model::Linear(m) => Some(*m),
            #[cfg(feature = "nn")]
            Model::Resnet(_) => None,
        }
    }
}

/// An opened artifact: its header, its model, and whether a trusted key signed it.
#[derive(Debug)]
pub struct Released {
    /// The public header.
    pub header: Header,
    /// The model (guarantee re-derived by its family's loader).
    pub model: Model,
    /// Whether a trusted key signed it.
    pub coverage: Coverage,
}

/// What every answer of an opened model must carry: why it is not covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Why the answers are not covered by a trusted signature (opened with
    /// `allow_unsigned`); `None` when they are.
    pub not_covered: Option<String>,
}

impl Released {
    /// The experiment seed of a model trained with a seed (not a private release).
    pub fn experiment_seed(&self) -> Option<u64> {
        match self.header.seed_policy {
            SeedPolicy::Seeded { seed } => Some(seed),
            _ => None,
        }
    }

    /// Whether this model may answer: a seeded model is refused (its noise can be
    /// regenerated from the seed and subtracted); a model that is not covered by a trusted
    /// signature was only opened because the caller opted in, and every answer then carries
    /// the returned [`Marks`].
    pub fn for_release(&self, path: &Path) -> Result<Marks> {
        if let Some(seed) = self.experiment_seed() {
            return Err(ReleaseError::refused(
                path,
                format!(
                    "trained with --seed {seed}: its noise can be regenerated from the seed and subtracted, so it is an experiment, not a private release (erratum 4.9); `privpred evaluate` still reads it. Train again without --seed (OS-seeded noise) to get a model that predict and serve accept"
                ),
            ));
        }
        Ok(Marks {
            not_covered: match &self.coverage {
                Coverage::Signed(_) => None,
                Coverage::NotCovered(why) => Some(why.clone()),
            },
        })
    }
}

/// Reads a file's bytes (bounded by [`MAX_ARTIFACT_BYTES`]).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .map_err(|e| ReleaseError::io(path, e))?
        .len();
    if len > MAX_ARTIFACT_BYTES {
        return Err(ReleaseError::format(
            path,
            format!("{len} bytes; a model file may have at most {MAX_ARTIFACT_BYTES}"),
        ));
    }
    std::fs::read(path).map_err(|e| ReleaseError::io(path, e))
}

/// The public header of an artifact, read without verifying anything (for telling the
/// families apart before opening; `None` when the file is not a version-2 artifact).
pub fn peek_header(path: &Path) -> Option<Header> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = [0u8; 16];
    f.read_exact(&mut head).ok()?;
    if &head[..8] != envelope::MAGIC {
        return None;
    }
    let hlen = u32::from_le_bytes(head[12..16].try_into().ok()?);
    if hlen > envelope::MAX_HEADER_BYTES {
        return None;
    }
    let mut h = vec![0u8; hlen as usize];
    f.read_exact(&mut h).ok()?;
    serde_json::from_slice(&h).ok()
}

/// Opens an artifact's bytes: the envelope's integrity and signature, trust, the seal, then
/// the family's payload loader (which re-derives the guarantee from the public parameters),
/// then the header checked against what the payload records.
pub fn open(path: &Path, bytes: &[u8], trust: &Trust) -> Result<Released> {
    let (p, coverage) = verify(path, bytes, trust)?;
    let payload = envelope::unseal(path, &p, trust.sealing.as_ref())?;
    let header = p.header;
    let model = match header.family {
        Family::Linear => Model::Linear(Box::new(linear::open_payload(path, &header, &payload)?)),
        #[cfg(feature = "nn")]
        Family::Resnet => Model::Resnet(Box::new(resnet::open_payload(path, &header, &payload)?)),
        #[cfg(not(feature = "nn"))]
        Family::Resnet => return Err(needs_nn(path)),
    };
    Ok(Released {
        header,
        model,
        coverage,
    })
}

/// The header of an artifact whose envelope and signature are verified against `trust`
/// (the payload is neither unsealed nor read): what a ledger needs of a model, its ledger
/// id and budget, without the sealing key.
pub fn open_header(path: &Path, trust: &Trust) -> Result<(Header, Coverage)> {
    let bytes = read_bytes(path)?;
    let (p, c) = verify(path, &bytes, trust)?;
    Ok((p.header, c))
}

/// The inference budget B a header's calibration states, for a model whose answers spend
/// one (prediction sensitivity, subsample-and-aggregate); `None` for the others.
pub fn header_budget(path: &Path, h: &Header) -> Result<Option<u64>> {
    if h.calibration.is_null() {
        return Ok(None);
    }
    let cal: privpred_core::Calibration = serde_json::from_value(h.calibration.clone())
        .map_err(|e| ReleaseError::format(path, format!("header: calibration: {e}")))?;
    if cal.method().is_private_training() {
        return Ok(None);
    }
    Ok(cal.budget().get())
}

#[cfg(not(feature = "nn"))]
fn needs_nn(path: &Path) -> ReleaseError {
    ReleaseError::format(
        path,
        "a ResNet (privpred-nn) model; this privpred was built without deep-model support — rebuild with `cargo build --release -p privpred --features nn`",
    )
}

/// The envelope parsed and its signature checked against `trust`.
fn verify<'a>(
    path: &Path,
    bytes: &'a [u8],
    trust: &Trust,
) -> Result<(envelope::Parsed<'a>, Coverage)> {
    let p = envelope::parse(path, bytes)?;
    #[cfg(not(feature = "nn"))]
    if p.header.family == Family::Resnet {
        return Err(needs_nn(path));
    }
    let coverage = match envelope::check_signature(path, &p)? {
        Some(k) if trust.keys.contains(&k) => Coverage::Signed(k.id()),
        Some(k) if trust.allow_unsigned => {
            Coverage::NotCovered(format!("signed by the untrusted key {}", k.id()))
        }
        Some(k) => {
            return Err(ReleaseError::refused(
                path,
                format!(
                    "signed by the key {}, which is not trusted (give its verify.pub with --trust, or --allow-unsigned to answer with every answer marked not covered)",
                    k.id()
                ),
            ));
        }
        None if trust.allow_unsigned => Coverage::NotCovered("unsigned".into()),
        None => {
            return Err(ReleaseError::refused(
                path,
                "unsigned: not signed by a trusted key (sign it with `privpred train --signing-key`, or pass --allow-unsigned to answer with every answer marked not covered)",
            ));
        }
    };
    Ok((p, coverage))
}

/// [`open`] of a file.
pub fn open_file(path: &Path, trust: &Trust) -> Result<Released> {
    open(path, &read_bytes(path)?, trust)
}

/// The header's `method` of a model of `method` (`None`: non-private).
pub(crate) fn method_name(method: Option<Method>) -> String {
    method.map_or("non-private".to_string(), |m| m.name().to_string())
}

/// Checks the header against what the payload records (the payload is covered by the same
/// signature; a mismatch means the file was built by something other than privpred).
pub(crate) fn check_header(path: &Path, h: &Header, from_payload: &Header) -> Result<()> {
    let mut a = h.clone();
    let mut b = from_payload.clone();
    for x in [&mut a, &mut b] {
        x.payload_sha256.clear();
        x.sealed = None;
        x.signer = None;
    }
    if a != b {
        return Err(ReleaseError::format(
            path,
            "the header does not match the model it holds (family, method, seed policy, ledger id or calibration differ)",
        ));
    }
    Ok(())
}

/// Writes `bytes` atomically (temporary sibling, then rename).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    privpred_data::fsutil::write_atomic(path, |w| w.write_all(bytes)).map_err(|e| match e {
        privpred_data::DataError::Io { path, source } => ReleaseError::Io { path, source },
        e => ReleaseError::format(path, e.to_string()),
    })
}

#[cfg(test)]
mod tests;
#[cfg(all(test, feature = "nn"))]
mod tests_resnet;
