//! What the two model-artifact formats (`privpred-linear`, `privpred-nn`, both safetensors
//! files) share: reading a file with its sizes checked before anything is allocated, and the
//! one checksum that covers a whole artifact — every metadata entry and every tensor's name,
//! dtype, shape and bytes — so that an edited or corrupted file is refused on load.
//!
//! # The checksum
//! Metadata key [`CHECKSUM_KEY`] holds `sha256:<hex>` of this byte string: the domain tag
//! `privpred-artifact-checksum-v1`, then every other metadata entry sorted by key (key length
//! as u64 LE, key, value length, value), then every tensor sorted by name (name length, name,
//! dtype name length, dtype name, rank, each dimension, data length, data; all integers u64
//! LE). Any metadata field a later version adds is covered automatically.
//!
//! It detects corruption and edits, not forgery: anyone who can write the file can recompute
//! it (it is not a signature). What keeps an edited file from carrying a guarantee no
//! calibration gives is the range check of every field on load, which runs as well.

use crate::error::{DataError, Result};
use crate::limits::{MAX_ARTIFACT_BYTES, MAX_ARTIFACT_HEADER_BYTES};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// The metadata key of the whole-artifact checksum.
pub const CHECKSUM_KEY: &str = "checksum";

/// The metadata key of a model's ledger id: the identity its inference budget is recorded
/// under in every ledger (see [`new_ledger_id`]).
pub const LEDGER_ID_KEY: &str = "ledger_id";

/// Hex digits of a ledger id (128 bits).
pub const LEDGER_ID_HEX_LEN: usize = 32;

/// A fresh ledger id: 128 bits from the operating system's random source, as 32 lower-case
/// hex digits. It is written into an artifact when the model is trained and covered by the
/// checksum, so the budget ledger never depends on the file's bytes (header padding or a
/// re-serialisation cannot make a new model of an old one).
pub fn new_ledger_id() -> std::result::Result<String, String> {
    use rand::TryRng;
    let mut b = [0u8; LEDGER_ID_HEX_LEN / 2];
    rand::rngs::SysRng
        .try_fill_bytes(&mut b)
        .map_err(|e| format!("the operating system's random source failed: {e}"))?;
    Ok(crate::fsutil::hex(&b))
}

/// The ledger id an artifact's metadata records; `Err` (the reason) for a missing or
/// malformed id, or for an id in a file without the whole-file checksum (an id is only
/// trusted where the checksum covers it).
pub fn read_ledger_id(meta: &HashMap<String, String>) -> std::result::Result<String, String> {
    let Some(id) = meta.get(LEDGER_ID_KEY) else {
        return Err(format!(
            "metadata key `{LEDGER_ID_KEY}` missing: every model records the identity its budget is kept under"
        ));
    };
    if !meta.contains_key(CHECKSUM_KEY) {
        return Err(format!(
            "`{LEDGER_ID_KEY}` without the whole-file checksum: the file was edited"
        ));
    }
    let ok = id.len() == LEDGER_ID_HEX_LEN
        && id
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    if !ok {
        return Err(format!(
            "`{LEDGER_ID_KEY}` must be {LEDGER_ID_HEX_LEN} lower-case hex digits"
        ));
    }
    Ok(id.clone())
}

/// One tensor as the checksum sees it: name, dtype name (e.g. `F64`), shape, little-endian
/// bytes.
pub type TensorRef<'a> = (&'a str, &'a str, &'a [usize], &'a [u8]);

/// The checksum (`sha256:<hex>`) of an artifact's metadata (the [`CHECKSUM_KEY`] entry, if
/// present, is left out) and tensors (any order: they are sorted by name).
pub fn checksum(meta: &HashMap<String, String>, tensors: &[TensorRef<'_>]) -> String {
    let mut h = Sha256::new();
    let mut put = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    put(b"privpred-artifact-checksum-v1");
    let mut keys: Vec<&String> = meta.keys().filter(|k| *k != CHECKSUM_KEY).collect();
    keys.sort();
    put(&(keys.len() as u64).to_le_bytes());
    for k in keys {
        put(k.as_bytes());
        put(meta[k].as_bytes());
    }
    let mut ts: Vec<&TensorRef<'_>> = tensors.iter().collect();
    ts.sort_by(|a, b| a.0.cmp(b.0));
    put(&(ts.len() as u64).to_le_bytes());
    for (name, dtype, shape, data) in ts {
        put(name.as_bytes());
        put(dtype.as_bytes());
        put(&(shape.len() as u64).to_le_bytes());
        for d in shape.iter() {
            put(&(*d as u64).to_le_bytes());
        }
        put(data);
    }
    let digest = h.finalize();
    format!("sha256:{}", crate::fsutil::hex(&digest))
}

/// Checks the metadata's checksum: an error naming the file when it is missing or does not
/// match.
pub fn verify_checksum(
    path: &Path,
    meta: &HashMap<String, String>,
    tensors: &[TensorRef<'_>],
) -> Result<()> {
    match meta.get(CHECKSUM_KEY) {
        None => Err(DataError::Format {
            path: path.to_path_buf(),
            reason: format!(
                "metadata key `{CHECKSUM_KEY}` missing: not a privpred model or corrupt"
            ),
        }),
        Some(stored) if *stored == checksum(meta, tensors) => Ok(()),
        Some(_) => Err(DataError::Format {
            path: path.to_path_buf(),
            reason: "the artifact's SHA-256 checksum does not match its contents (metadata or weights edited or corrupted): refusing it — re-train or restore the file".into(),
        }),
    }
}

/// Verifies the checksum of a parsed safetensors artifact over its metadata and every tensor
/// (name, dtype, shape, bytes; see [`verify_checksum`]) and returns its tensor names, sorted.
/// The one place both artifact formats (linear and ResNet) collect their tensors for it.
pub fn verify_safetensors(
    path: &Path,
    meta: &HashMap<String, String>,
    st: &safetensors::SafeTensors<'_>,
) -> Result<Vec<String>> {
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    let views = names
        .iter()
        .map(|n| st.tensor(n))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| DataError::Format {
            path: path.to_path_buf(),
            reason: format!("not a valid safetensors file ({e})"),
        })?;
    let dtypes: Vec<String> = views.iter().map(|v| format!("{:?}", v.dtype())).collect();
    let refs: Vec<TensorRef<'_>> = names
        .iter()
        .zip(&views)
        .zip(&dtypes)
        .map(|((n, v), d)| (n.as_str(), d.as_str(), v.shape(), v.data()))
        .collect();
    verify_checksum(path, meta, &refs)?;
    Ok(names)
}

/// Parses the bytes of a safetensors artifact (from [`read_artifact_bytes`]) into its tensors
/// and its metadata header: the one parser of both artifact formats (linear and ResNet).
/// `Err` is the reason, for the caller's own error type: not a safetensors file, or no
/// metadata header (then it is not a privpred model).
pub fn parse_safetensors(
    bytes: &[u8],
) -> std::result::Result<(safetensors::SafeTensors<'_>, HashMap<String, String>), String> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| format!("not a valid safetensors file ({e})"))?;
    let (_, md) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| format!("not a valid safetensors file ({e})"))?;
    let meta = md
        .metadata()
        .clone()
        .ok_or_else(|| "no metadata header: not a privpred model".to_string())?;
    Ok((st, meta))
}

/// The metadata header of a safetensors file, reading only its header (at most
/// [`MAX_ARTIFACT_HEADER_BYTES`]): for telling artifact formats apart before loading one.
/// `None` for an unreadable or foreign file (its loader then says what is wrong).
pub fn read_header_metadata(path: &Path) -> Option<HashMap<String, String>> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).ok()?;
    let n = u64::from_le_bytes(len);
    if n == 0 || n > MAX_ARTIFACT_HEADER_BYTES {
        return None;
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&header).ok()?;
    let meta = v.get("__metadata__")?.as_object()?;
    Some(
        meta.iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
    )
}

/// Reads a safetensors file after checking its size against [`MAX_ARTIFACT_BYTES`] and its
/// header length against [`MAX_ARTIFACT_HEADER_BYTES`] and the file size (nothing is
/// allocated for a length the file cannot hold).
pub fn read_artifact_bytes(path: &Path) -> Result<Vec<u8>> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let fmt = |reason: String| DataError::Format {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len > MAX_ARTIFACT_BYTES {
        return Err(fmt(format!(
            "{len} bytes, more than the limit of {MAX_ARTIFACT_BYTES} bytes for a model artifact (privpred_data::limits::MAX_ARTIFACT_BYTES)"
        )));
    }
    if len < 8 {
        return Err(fmt(format!(
            "not a valid safetensors file ({len} bytes, shorter than its 8-byte header length)"
        )));
    }
    let mut n = [0u8; 8];
    f.read_exact(&mut n).map_err(io)?;
    let n = u64::from_le_bytes(n);
    if n > MAX_ARTIFACT_HEADER_BYTES || n > len - 8 {
        return Err(fmt(format!(
            "not a valid safetensors file: its header claims {n} bytes (the file has {}, the limit is {MAX_ARTIFACT_HEADER_BYTES})",
            len - 8
        )));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    bytes.extend_from_slice(&n.to_le_bytes());
    f.take(len - 8).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {

    #[test]
    fn ledger_ids_are_random_128_bit_hex_and_trusted_only_under_the_checksum() {
        let a = new_ledger_id().unwrap();
        let b = new_ledger_id().unwrap();
        assert_eq!(a.len(), LEDGER_ID_HEX_LEN);
        assert_ne!(a, b, "two trainings never share an identity");
        let mut meta = HashMap::new();
        assert!(read_ledger_id(&meta).unwrap_err().contains("missing"));
        meta.insert(LEDGER_ID_KEY.to_string(), a.clone());
        assert!(read_ledger_id(&meta).unwrap_err().contains("checksum"));
        meta.insert(CHECKSUM_KEY.to_string(), "sha256:00".to_string());
        assert_eq!(read_ledger_id(&meta), Ok(a.clone()));
        for bad in ["", "xyz", &a.to_uppercase(), &format!("{a}0")] {
            meta.insert(LEDGER_ID_KEY.to_string(), bad.to_string());
            assert!(read_ledger_id(&meta).is_err(), "{bad:?}");
        }
    }
    use super::*;

    #[test]
    fn checksum_covers_every_entry_and_tensor_byte() {
        let mut meta = HashMap::new();
        meta.insert("a".to_string(), "1".to_string());
        meta.insert("b".to_string(), "x".to_string());
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let shape = [2usize];
        let t = [("w", "F32", &shape[..], &data[..])];
        let c = checksum(&meta, &t);
        assert!(c.starts_with("sha256:") && c.len() == 7 + 64);
        // the checksum entry itself is ignored
        let mut with = meta.clone();
        with.insert(CHECKSUM_KEY.into(), c.clone());
        assert_eq!(checksum(&with, &t), c);
        verify_checksum(Path::new("m"), &with, &t).unwrap();
        assert!(verify_checksum(Path::new("m"), &meta, &t).is_err());
        // any change is seen
        let mut m2 = with.clone();
        m2.insert("a".into(), "2".into());
        assert!(verify_checksum(Path::new("m"), &m2, &t).is_err());
        let mut m3 = with.clone();
        m3.insert("c".into(), String::new());
        assert!(verify_checksum(Path::new("m"), &m3, &t).is_err());
        let mut d2 = data;
        d2[7] ^= 1;
        let t2 = [("w", "F32", &shape[..], &d2[..])];
        assert!(verify_checksum(Path::new("m"), &with, &t2).is_err());
        let shape2 = [1usize, 2];
        let t3 = [("w", "F32", &shape2[..], &data[..])];
        assert!(verify_checksum(Path::new("m"), &with, &t3).is_err());
        let t4 = [("w", "F64", &shape[..], &data[..])];
        assert!(verify_checksum(Path::new("m"), &with, &t4).is_err());
        // entries do not run into each other: ("ab","") vs ("a","b")
        let mut x = HashMap::new();
        x.insert("ab".to_string(), String::new());
        let mut y = HashMap::new();
        y.insert("a".to_string(), "b".to_string());
        assert_ne!(checksum(&x, &[]), checksum(&y, &[]));
    }

    #[test]
    fn header_length_is_checked_before_allocating() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.safetensors");
        let mut b = (1u64 << 62).to_le_bytes().to_vec();
        b.extend_from_slice(b"{}");
        std::fs::write(&p, &b).unwrap();
        let e = read_artifact_bytes(&p).unwrap_err().to_string();
        assert!(e.contains("header claims"), "{e}");
        std::fs::write(&p, b"abc").unwrap();
        assert!(read_artifact_bytes(&p).is_err());
        let mut ok = 2u64.to_le_bytes().to_vec();
        ok.extend_from_slice(b"{}");
        std::fs::write(&p, &ok).unwrap();
        assert_eq!(read_artifact_bytes(&p).unwrap(), ok);
    }
}
