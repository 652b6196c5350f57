//! IDX reader (the MNIST file format), plain or gzip-compressed.
//!
//! Layout: two zero bytes, a type byte (only `0x08` = unsigned byte is used by the datasets
//! here), the number of dimensions, then each dimension as a big-endian `u32`, then the data.
//! The reader streams the payload straight into the output type (no second copy) and hashes
//! the decompressed bytes with SHA-256 as it goes.

use crate::error::{DataError, Result};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// A parsed IDX array of unsigned bytes converted on the fly by the caller's sink.
#[derive(Debug, Clone, PartialEq)]
pub struct IdxArray<T> {
    /// Dimensions from the header (first is the number of items).
    pub dims: Vec<usize>,
    /// The payload, converted element-wise.
    pub data: Vec<T>,
    /// SHA-256 (hex) of the decompressed file bytes (header included).
    pub sha256: String,
}

fn fmt_err(path: &Path, reason: impl Into<String>) -> DataError {
    DataError::Format {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Opens a file, transparently decompressing gzip (detected by its magic bytes).
pub(crate) fn open_maybe_gz(path: &Path) -> Result<Box<dyn Read + Send>> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io)?;
    let mut magic = [0u8; 2];
    let got = read_full(&mut f, &mut magic).map_err(io)?;
    drop(f);
    let f = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    if got == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(f),
        )))
    } else {
        Ok(Box::new(f))
    }
}

/// Reads as many bytes as available up to `buf.len()`; returns the count.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut off = 0;
    while off < buf.len() {
        match r.read(&mut buf[off..]) {
            Ok(0) => break,
            Ok(k) => off += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(off)
}

/// Reads an IDX stream of unsigned bytes with exactly `rank` dimensions, converting each byte
/// with `conv`. `path` only names the source in errors. Errors (never panics) on a wrong
/// magic, an unsupported type, a wrong rank, a size overflow, a truncated payload or trailing
/// bytes.
pub fn read_idx<T, R: Read>(
    mut r: R,
    path: &Path,
    rank: usize,
    conv: impl Fn(u8) -> T,
) -> Result<IdxArray<T>> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut hasher = Sha256::new();
    let mut head = [0u8; 4];
    let got = read_full(&mut r, &mut head).map_err(io)?;
    if got < 4 {
        return Err(fmt_err(
            path,
            format!("truncated IDX header ({got} of 4 bytes)"),
        ));
    }
    if head[0] != 0 || head[1] != 0 {
        return Err(fmt_err(
            path,
            format!(
                "wrong IDX magic {:02x} {:02x} {:02x} {:02x} (expected 00 00 08 <rank>)",
                head[0], head[1], head[2], head[3]
            ),
        ));
    }
    if head[2] != 0x08 {
        return Err(fmt_err(
            path,
            format!(
                "unsupported IDX element type 0x{:02x} (only 0x08, unsigned byte)",
                head[2]
            ),
        ));
    }
    if head[3] as usize != rank {
        return Err(fmt_err(
            path,
            format!("IDX file has {} dimensions, expected {rank}", head[3]),
        ));
    }
    hasher.update(head);
    let mut dimbuf = vec![0u8; 4 * rank];
    let got = read_full(&mut r, &mut dimbuf).map_err(io)?;
    if got < dimbuf.len() {
        return Err(fmt_err(path, "truncated IDX header (dimensions)"));
    }
    hasher.update(&dimbuf);
    let dims: Vec<usize> = dimbuf
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let total = dims
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or_else(|| fmt_err(path, format!("IDX dimensions {dims:?} overflow")))?;
    // Never trust the header for the allocation size: grow as bytes arrive.
    let mut data: Vec<T> = Vec::with_capacity(total.min(1 << 24));
    let mut buf = vec![0u8; 1 << 16];
    let mut remaining = total;
    while remaining > 0 {
        let want = remaining.min(buf.len());
        let got = read_full(&mut r, &mut buf[..want]).map_err(io)?;
        hasher.update(&buf[..got]);
        data.extend(buf[..got].iter().map(|&b| conv(b)));
        remaining -= got;
        if got < want {
            return Err(fmt_err(
                path,
                format!(
                    "truncated IDX file: header {dims:?} promises {total} values, only {} present",
                    total - remaining
                ),
            ));
        }
    }
    let extra = read_full(&mut r, &mut buf[..1]).map_err(io)?;
    if extra > 0 {
        return Err(fmt_err(
            path,
            format!("trailing bytes after the {total} values promised by the IDX header {dims:?}"),
        ));
    }
    let sha256 = hex(&hasher.finalize());
    Ok(IdxArray { dims, data, sha256 })
}

/// Lower-case hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads an IDX image file (rank 3: n × rows × cols) into f32 values 0..255.
pub fn read_images(path: &Path) -> Result<IdxArray<f32>> {
    let r = open_maybe_gz(path)?;
    let a = read_idx(r, path, 3, |b| b as f32)?;
    if a.dims[0] == 0 || a.dims[1] == 0 || a.dims[2] == 0 {
        return Err(fmt_err(
            path,
            format!("empty IDX image file (dimensions {:?})", a.dims),
        ));
    }
    Ok(a)
}

/// Reads an IDX label file (rank 1).
pub fn read_labels(path: &Path) -> Result<IdxArray<u32>> {
    let r = open_maybe_gz(path)?;
    let a = read_idx(r, path, 1, |b| b as u32)?;
    if a.dims[0] == 0 {
        return Err(fmt_err(path, "empty IDX label file"));
    }
    Ok(a)
}

/// Finds `<stem>` in `dir` under the usual spellings (`train-images-idx3-ubyte`,
/// `train-images.idx3-ubyte`, each optionally `.gz`).
pub fn find_idx_file(dir: &Path, stems: &[&str]) -> Option<PathBuf> {
    for stem in stems {
        let dotted = stem.replacen("-idx", ".idx", 1);
        for name in [stem.to_string(), dotted] {
            for ext in ["", ".gz"] {
                let p = dir.join(format!("{name}{ext}"));
                if p.is_file() {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// The canonical file stems of the train and test splits.
pub const TRAIN_IMAGES: &[&str] = &["train-images-idx3-ubyte"];
/// Training labels.
pub const TRAIN_LABELS: &[&str] = &["train-labels-idx1-ubyte"];
/// Test images.
pub const TEST_IMAGES: &[&str] = &["t10k-images-idx3-ubyte", "test-images-idx3-ubyte"];
/// Test labels.
pub const TEST_LABELS: &[&str] = &["t10k-labels-idx1-ubyte", "test-labels-idx1-ubyte"];

/// Writes an IDX u8 array (temp file in the same directory, then rename).
pub fn write_idx_atomic(path: &Path, dims: &[usize], data: &[u8]) -> Result<()> {
    crate::fsutil::write_atomic(path, |w| {
        use std::io::Write;
        w.write_all(&[0, 0, 0x08, dims.len() as u8])?;
        for &d in dims {
            w.write_all(&(d as u32).to_be_bytes())?;
        }
        w.write_all(data)
    })
}
