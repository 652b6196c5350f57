//! The envelope: the one container of every model artifact (format version 2).
//!
//! # Layout (integers little-endian)
//! ```text
//! magic     8 bytes   "PPMODEL\0"
//! version   u32       2
//! hlen      u32       length of the header (at most 1 MiB)
//! header    hlen      JSON object, canonical (exactly as `serde_json` writes [`Header`])
//! plen      u64       length of the payload
//! payload   plen      the family's model bytes; ciphertext + 16-byte tag when sealed
//! signature 64 bytes  Ed25519, present exactly when the header names a `signer`
//! ```
//! Nothing may follow. The header is parsed strictly: a duplicate key at any depth, an
//! unknown field or a byte of padding is refused (the header must be the canonical
//! serialisation of what it holds). The signature covers the domain tag
//! `privpred-model-signature-v2\0` followed by every byte before it, so any edit of the
//! header, the payload or their lengths is refused. A sealed payload is XChaCha20-Poly1305
//! with the header's nonce and every byte up to the end of the header as associated data:
//! it cannot be moved under another header.

use crate::error::{ReleaseError, Result};
use crate::keys::{SealingKey, SigningKey, VerifyKey, hex, unhex};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The first bytes of every artifact.
pub const MAGIC: &[u8; 8] = b"PPMODEL\0";
/// The envelope's format version.
pub const FORMAT_VERSION: u32 = 2;
/// The `format` field of every header.
pub const FORMAT: &str = "privpred-model";
/// The largest header accepted.
pub const MAX_HEADER_BYTES: u32 = 1 << 20;
/// The AEAD a sealed payload uses.
pub const AEAD: &str = "xchacha20-poly1305";
const SIGNATURE_TAG: &[u8] = b"privpred-model-signature-v2\0";

/// Which code reads the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Logistic regression (`privpred-linear`): every linear method and the non-private model.
    Linear,
    /// ResNet-20-GN (`privpred-nn`): a DP-SGD network, a teacher ensemble, a non-private one.
    Resnet,
}

/// How the model's randomness was seeded: a release needs the OS-seeded generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "policy", deny_unknown_fields)]
pub enum SeedPolicy {
    /// An experiment: the noise was drawn from a recorded seed, so it can be regenerated and
    /// subtracted (not a private release).
    Seeded {
        /// The seed.
        seed: u64,
    },
    /// A release: drawn from an OS-seeded cryptographic generator; no seed exists.
    OsRandom,
    /// A non-private model: nothing was randomised for privacy.
    NonPrivate,
}

/// How a sealed payload was encrypted (public).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealing {
    /// Always [`AEAD`].
    pub aead: String,
    /// [`SealingKey::id`] of the key it was sealed with.
    pub key_id: String,
    /// The 24-byte nonce, hex.
    pub nonce: String,
}

/// The public header of an artifact: what anyone holding the file can read, sealed or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`FORMAT_VERSION`].
    pub version: u32,
    /// Which code reads the payload.
    pub family: Family,
    /// The method (`non-private` for a non-private model).
    pub method: String,
    /// The seed policy.
    pub seed_policy: SeedPolicy,
    /// The identity the model's inference budget is recorded under in every ledger (128 bits
    /// from the OS random source, 32 lower-case hex digits).
    pub ledger_id: String,
    /// The calibration (the guarantee and the mechanism's parameters), as the payload records
    /// it; `null` for a non-private model.
    pub calibration: serde_json::Value,
    /// SHA-256 (hex) of the payload bytes as stored (the ciphertext when sealed).
    pub payload_sha256: String,
    /// How the payload is sealed; `null` when it is stored in the clear.
    pub sealed: Option<Sealing>,
    /// [`VerifyKey::id`] of the key that signed the file; `null` for an unsigned file.
    pub signer: Option<String>,
}

/// What [`parse`] read: the header and the payload as stored.
#[derive(Debug)]
pub struct Parsed<'a> {
    /// The header.
    pub header: Header,
    /// Every byte the signature covers (after the domain tag).
    pub signed: &'a [u8],
    /// The payload as stored.
    pub payload: &'a [u8],
    /// The signature, when the header names a signer.
    pub signature: Option<[u8; 64]>,
}

/// Whether `bytes` look like an artifact of the unreleased version-1 format (a bare
/// safetensors file: an 8-byte header length, then a JSON object).
pub fn is_version_1(bytes: &[u8]) -> bool {
    bytes.len() > 9 && bytes[8] == b'{' && &bytes[..8] != MAGIC
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (h, t) = b.split_at(n);
    *b = t;
    Some(h)
}

/// Parses an envelope strictly (see the module documentation); checks neither the signature
/// nor the seal.
pub fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<Parsed<'a>> {
    let bad = |r: &str| ReleaseError::format(path, r);
    if is_version_1(bytes) {
        return Err(bad(
            "a privpred model of format version 1 (a bare safetensors file), which this privpred does not read: train the model again (version 2 artifacts are signed)",
        ));
    }
    let mut rest = bytes;
    let short = || bad("truncated: not a complete privpred model file");
    if take(&mut rest, 8).ok_or_else(short)? != MAGIC {
        return Err(bad("not a privpred model file (no `PPMODEL` magic)"));
    }
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or([0; 4]));
    let version = u32_of(take(&mut rest, 4).ok_or_else(short)?);
    if version != FORMAT_VERSION {
        return Err(ReleaseError::format(
            path,
            format!("format version {version}; this privpred reads version {FORMAT_VERSION} only"),
        ));
    }
    let hlen = u32_of(take(&mut rest, 4).ok_or_else(short)?);
    if hlen > MAX_HEADER_BYTES {
        return Err(ReleaseError::format(
            path,
            format!("header of {hlen} bytes (at most {MAX_HEADER_BYTES})"),
        ));
    }
    let hbytes = take(&mut rest, hlen as usize).ok_or_else(short)?;
    let header = parse_header(path, hbytes)?;
    let plen = u64::from_le_bytes(
        take(&mut rest, 8)
            .ok_or_else(short)?
            .try_into()
            .unwrap_or([0; 8]),
    );
    let plen = usize::try_from(plen)
        .ok()
        .filter(|&p| p <= rest.len())
        .ok_or_else(short)?;
    let payload = take(&mut rest, plen).ok_or_else(short)?;
    let signed = &bytes[..bytes.len() - rest.len()];
    let signature = match header.signer {
        None => None,
        Some(_) => {
            let s = take(&mut rest, 64)
                .ok_or_else(|| bad("the header names a signer but the signature is missing"))?;
            Some(s.try_into().unwrap_or([0; 64]))
        }
    };
    if !rest.is_empty() {
        return Err(ReleaseError::format(
            path,
            format!("{} bytes after the end of the artifact", rest.len()),
        ));
    }
    if hex(&Sha256::digest(payload)) != header.payload_sha256 {
        return Err(bad(
            "the payload's SHA-256 does not match the header (edited or corrupted)",
        ));
    }
    Ok(Parsed {
        header,
        signed,
        payload,
        signature,
    })
}

/// Parses the header: no duplicate key at any depth, no unknown field, nothing but the
/// canonical serialisation.
fn parse_header(path: &Path, hbytes: &[u8]) -> Result<Header> {
    let bad = |r: String| ReleaseError::format(path, format!("header: {r}"));
    serde_json::from_slice::<strict::NoDuplicates>(hbytes).map_err(|e| bad(e.to_string()))?;
    let header: Header = serde_json::from_slice(hbytes).map_err(|e| bad(e.to_string()))?;
    if header.format != FORMAT || header.version != FORMAT_VERSION {
        return Err(bad(format!(
            "format {:?} version {}, expected {FORMAT:?} version {FORMAT_VERSION}",
            header.format, header.version
        )));
    }
    let canonical = serde_json::to_vec(&header).map_err(|e| bad(e.to_string()))?;
    if canonical != hbytes {
        return Err(bad(
            "not in canonical form (re-padded or re-serialised): the file was edited".into(),
        ));
    }
    if unhex::<16>(&header.ledger_id).is_none() {
        return Err(bad("ledger_id must be 32 lower-case hex digits".into()));
    }
    Ok(header)
}

mod strict {
    //! A JSON visitor that refuses a repeated key in any object, at any depth.
    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::collections::HashSet;

    pub struct NoDuplicates;

    impl<'de> Deserialize<'de> for NoDuplicates {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(V)
        }
    }

    struct V;

    impl<'de> Visitor<'de> for V {
        type Value = NoDuplicates;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<NoDuplicates, E> {
            Ok(NoDuplicates)
        }
        fn visit_i64<E>(self, _: i64) -> Result<NoDuplicates, E> {
            Ok(NoDuplicates)
        }
        fn visit_u64<E>(self, _: u64) -> Result<NoDuplicates, E> {
            Ok(NoDuplicates)
        }
        fn visit_f64<E>(self, _: f64) -> Result<NoDuplicates, E> {
            Ok(NoDuplicates)
        }
        fn visit_str<E>(self, _: &str) -> Result<NoDuplicates, E> {
            Ok(NoDuplicates)
        }
        fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
            Ok(NoDuplicates)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<NoDuplicates, A::Error> {
            while s.next_element::<NoDuplicates>()?.is_some() {}
            Ok(NoDuplicates)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<NoDuplicates, A::Error> {
            let mut seen = HashSet::new();
            while let Some(k) = m.next_key::<String>()? {
                if !seen.insert(k.clone()) {
                    return Err(de::Error::custom(format!("duplicate key `{k}`")));
                }
                m.next_value::<NoDuplicates>()?;
            }
            Ok(NoDuplicates)
        }
    }
}

/// Writes an envelope around `payload`: sealed with `sealing` when given, signed with
/// `signing` when given. `header`'s `payload_sha256`, `sealed` and `signer` are filled in.
pub fn encode(
    mut header: Header,
    payload: &[u8],
    signing: Option<&SigningKey>,
    sealing: Option<&SealingKey>,
) -> Result<Vec<u8>> {
    header.format = FORMAT.into();
    header.version = FORMAT_VERSION;
    header.signer = signing.map(|k| k.verify_key().id());
    let nonce = match sealing {
        Some(k) => {
            let n: [u8; 24] = {
                use rand::TryRng;
                let mut n = [0u8; 24];
                rand::rngs::SysRng
                    .try_fill_bytes(&mut n)
                    .map_err(|e| ReleaseError::Random(e.to_string()))?;
                n
            };
            header.sealed = Some(Sealing {
                aead: AEAD.into(),
                key_id: k.id(),
                nonce: hex(&n),
            });
            Some(n)
        }
        None => {
            header.sealed = None;
            None
        }
    };
    // the payload's hash is of the stored bytes, which (sealed) depend on the header: the
    // ciphertext's length is known up front, and its bytes are bound to the header through
    // the associated data, which leaves `payload_sha256` out (filled in after sealing)
    let stored = match (sealing, nonce) {
        (Some(k), Some(n)) => {
            header.payload_sha256 = String::new();
            let aad = prefix(&header)?;
            seal(k, &n, &aad, payload)?
        }
        _ => payload.to_vec(),
    };
    header.payload_sha256 = hex(&Sha256::digest(&stored));
    let mut out = prefix(&header)?;
    out.extend_from_slice(&(stored.len() as u64).to_le_bytes());
    out.extend_from_slice(&stored);
    if let Some(k) = signing {
        out.extend_from_slice(&k.sign(&signature_message(&out)));
    }
    Ok(out)
}

/// Magic, version, header length and header.
fn prefix(header: &Header) -> Result<Vec<u8>> {
    let h = serde_json::to_vec(header).map_err(|e| ReleaseError::Random(e.to_string()))?;
    let mut out = Vec::with_capacity(16 + h.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    Ok(out)
}

fn signature_message(signed: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(SIGNATURE_TAG.len() + signed.len());
    m.extend_from_slice(SIGNATURE_TAG);
    m.extend_from_slice(signed);
    m
}

/// Whether the signature of a parsed envelope is valid for the key its header names:
/// `None` for an unsigned file.
pub fn check_signature(path: &Path, p: &Parsed<'_>) -> Result<Option<VerifyKey>> {
    let (Some(id), Some(sig)) = (&p.header.signer, &p.signature) else {
        return Ok(None);
    };
    let key = VerifyKey::from_id(id)
        .ok_or_else(|| ReleaseError::format(path, "header: signer is not an Ed25519 key"))?;
    if !key.verify(&signature_message(p.signed), sig) {
        return Err(ReleaseError::refused(
            path,
            "the signature does not match the file's bytes: the file was edited or corrupted after it was signed",
        ));
    }
    Ok(Some(key))
}

fn seal(k: &SealingKey, nonce: &[u8; 24], aad: &[u8], msg: &[u8]) -> Result<Vec<u8>> {
    let c = XChaCha20Poly1305::new(&Key::from(*k.0));
    c.encrypt(&XNonce::from(*nonce), Payload { msg, aad })
        .map_err(|_| ReleaseError::Random("sealing failed".into()))
}

/// The plaintext payload of a parsed envelope: the stored bytes when it is not sealed, else
/// decrypted and authenticated with `key` (refused without it, with another key, or when
/// the ciphertext or header was changed).
pub fn unseal(path: &Path, p: &Parsed<'_>, key: Option<&SealingKey>) -> Result<Vec<u8>> {
    let Some(s) = &p.header.sealed else {
        return Ok(p.payload.to_vec());
    };
    if s.aead != AEAD {
        return Err(ReleaseError::format(
            path,
            format!(
                "header: sealed with {:?}; this privpred opens {AEAD:?}",
                s.aead
            ),
        ));
    }
    let nonce = unhex::<24>(&s.nonce)
        .ok_or_else(|| ReleaseError::format(path, "header: the nonce must be 48 hex digits"))?;
    let Some(key) = key else {
        return Err(ReleaseError::refused(
            path,
            format!(
                "sealed (it holds non-private parameters): opening it needs the owner's sealing key (id {}; give --sealing-key FILE)",
                s.key_id
            ),
        ));
    };
    if key.id() != s.key_id {
        return Err(ReleaseError::refused(
            path,
            format!(
                "sealed with the sealing key {}, not with the given one ({})",
                s.key_id,
                key.id()
            ),
        ));
    }
    let mut h = p.header.clone();
    h.payload_sha256 = String::new();
    let aad = prefix(&h)?;
    let c = XChaCha20Poly1305::new(&Key::from(*key.0));
    c.decrypt(
        &XNonce::from(nonce),
        Payload {
            msg: p.payload,
            aad: &aad,
        },
    )
    .map_err(|_| {
        ReleaseError::refused(
            path,
            "the sealed payload does not authenticate: edited, corrupted or moved under another header",
        )
    })
}
