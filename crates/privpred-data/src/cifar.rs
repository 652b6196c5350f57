//! CIFAR-10 binary batches (the canonical `cifar-10-batches-bin` format): records of one
//! label byte followed by 3 × 32 × 32 channel-major pixel bytes.

use crate::error::{DataError, Result};
use std::path::{Path, PathBuf};

/// Bytes per record.
pub const RECORD: usize = 1 + 3 * 32 * 32;

/// The canonical CIFAR-10 class names, in label order.
pub const CLASSES: [&str; 10] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];

/// Parses one batch file's bytes, appending features (0..255) and labels.
pub fn parse_batch(
    bytes: &[u8],
    path: &Path,
    features: &mut Vec<f32>,
    labels: &mut Vec<u32>,
) -> Result<()> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(RECORD) {
        return Err(DataError::Format {
            path: path.to_path_buf(),
            reason: format!(
                "{} bytes is not a positive multiple of the {RECORD}-byte CIFAR-10 record",
                bytes.len()
            ),
        });
    }
    for (i, rec) in bytes.chunks_exact(RECORD).enumerate() {
        if rec[0] >= 10 {
            return Err(DataError::Format {
                path: path.to_path_buf(),
                reason: format!("record {i}: label {} outside the class range 0..10", rec[0]),
            });
        }
        labels.push(rec[0] as u32);
        features.extend(rec[1..].iter().map(|&b| b as f32));
    }
    Ok(())
}

/// The batch files of a `cifar-10-batches-bin` directory: (train files, test file).
pub fn batch_files(dir: &Path) -> Option<(Vec<PathBuf>, PathBuf)> {
    let train: Vec<PathBuf> = (1..=5)
        .map(|i| dir.join(format!("data_batch_{i}.bin")))
        .collect();
    let test = dir.join("test_batch.bin");
    (train.iter().all(|p| p.is_file()) && test.is_file()).then_some((train, test))
}

/// Reads batch files into (features, labels).
pub fn read_batches(files: &[PathBuf]) -> Result<(Vec<f32>, Vec<u32>)> {
    let mut f = Vec::new();
    let mut l = Vec::new();
    for p in files {
        let bytes = std::fs::read(p).map_err(|source| DataError::Io {
            path: p.clone(),
            source,
        })?;
        parse_batch(&bytes, p, &mut f, &mut l)?;
    }
    Ok((f, l))
}
