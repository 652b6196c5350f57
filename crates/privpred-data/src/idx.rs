//! IDX reader (the MNIST file format), plain or gzip-compressed.
//!
//! Layout: two zero bytes, a type byte (only `0x08` = unsigned byte is used by the datasets
//! here), the number of dimensions, then each dimension as a big-endian `u32`, then the data.
//! The reader streams the payload straight into the output type (no second copy) and hashes
//! the decompressed bytes with SHA-256 as it goes.

use crate::error::{DataError, Result};
use crate::limits::MAX_IDX_VALUES;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
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
    open_bounded(path).map(|(r, _, _)| r)
}

/// Largest expansion of DEFLATE (about 1032:1; a generous bound for the decompressed size of
/// a gzip file from its compressed size).
const DEFLATE_MAX_RATIO: u64 = 1032;

/// [`open_maybe_gz`] plus an upper bound on the number of bytes the reader can yield (the
/// file size for a plain file, `size × 1032 + 64 KiB` for gzip, DEFLATE's maximum ratio) and
/// whether the file is gzip. The IDX reader refuses an impossible header before allocating
/// anything; for a plain file the bound is exact and the output is allocated once, for gzip
/// the bound is a thousand times the file and the output grows only as values arrive.
fn open_bounded(path: &Path) -> Result<(Box<dyn Read + Send>, u64, bool)> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut magic = [0u8; 2];
    let got = read_full(&mut f, &mut magic).map_err(io)?;
    drop(f);
    let f = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    if got == 2 && magic == [0x1f, 0x8b] {
        let bound = len
            .saturating_mul(DEFLATE_MAX_RATIO)
            .saturating_add(1 << 16);
        Ok((
            Box::new(BufReader::with_capacity(1 << 20, GzMembers::new(f))),
            bound,
            true,
        ))
    } else {
        Ok((Box::new(f), len, false))
    }
}

/// A gzip stream of one or more members (as `MultiGzDecoder`), except that bytes after the
/// last member that do not start another one are an error naming them as trailing bytes
/// (a multi-member decoder reports them as a truncated member: "unexpected end of file").
struct GzMembers<R: BufRead> {
    dec: Option<flate2::bufread::GzDecoder<R>>,
}

impl<R: BufRead> GzMembers<R> {
    fn new(r: R) -> Self {
        GzMembers {
            dec: Some(flate2::bufread::GzDecoder::new(r)),
        }
    }
}

impl<R: BufRead> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(dec) = self.dec.as_mut() else {
                return Ok(0);
            };
            let n = dec.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(dec) = self.dec.take() else {
                return Ok(0);
            };
            let mut r = dec.into_inner();
            let rest = r.fill_buf()?;
            if rest.is_empty() {
                return Ok(0);
            }
            if rest.starts_with(&[0x1f, 0x8b]) {
                self.dec = Some(flate2::bufread::GzDecoder::new(r));
                continue;
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "trailing bytes after the end of the gzip data (not another gzip member)",
            ));
        }
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

/// Reads and checks an IDX header (magic, element type, rank, dimensions, the value count
/// against [`MAX_IDX_VALUES`]), feeding its bytes to `hasher`; returns the dimensions.
fn parse_header(
    r: &mut impl Read,
    path: &Path,
    rank: usize,
    hasher: &mut Sha256,
) -> Result<Vec<usize>> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut head = [0u8; 4];
    let got = read_full(r, &mut head).map_err(io)?;
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
    let got = read_full(r, &mut dimbuf).map_err(io)?;
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
    if total as u64 > MAX_IDX_VALUES {
        return Err(fmt_err(
            path,
            format!(
                "IDX header {dims:?} promises {total} values, more than the limit of {MAX_IDX_VALUES} (privpred_data::limits::MAX_IDX_VALUES)"
            ),
        ));
    }
    Ok(dims)
}

/// The dimensions in the header of an IDX file (plain or gzip) of the given rank, read
/// without touching the payload: only the first few decompressed bytes are produced.
pub fn read_header(path: &Path, rank: usize) -> Result<Vec<usize>> {
    let (mut r, _, _) = open_bounded(path)?;
    parse_header(&mut r, path, rank, &mut Sha256::new())
}

/// Compares the headers of an image file and its label file before either payload is read:
/// the counts must agree and the images must not be empty. Returns the image dimensions
/// `[n, rows, cols]`.
pub fn check_pair(images: &Path, labels: &Path) -> Result<Vec<usize>> {
    let img = read_header(images, 3)?;
    let lab = read_header(labels, 1)?;
    if img.contains(&0) {
        return Err(fmt_err(
            images,
            format!("empty IDX image file (dimensions {img:?})"),
        ));
    }
    if img[0] != lab[0] {
        return Err(fmt_err(
            labels,
            format!(
                "{} labels but {} promises {} images (the counts must be equal)",
                lab[0],
                images.display(),
                img[0]
            ),
        ));
    }
    Ok(img)
}

/// The error for an output of `total` values that cannot be allocated.
fn alloc_err(path: &Path, dims: &[usize], bytes: u64) -> DataError {
    fmt_err(
        path,
        format!(
            "cannot allocate {} for the values promised by the IDX header {dims:?}",
            crate::limits::human_bytes(bytes)
        ),
    )
}

/// Reads an IDX stream of unsigned bytes with exactly `rank` dimensions, converting each byte
/// with `conv`. `path` only names the source in errors. Errors (never panics) on a wrong
/// magic, an unsupported type, a wrong rank, a size overflow, a truncated payload or trailing
/// bytes.
///
/// The payload is converted while it streams through a fixed 64 KiB buffer: the raw bytes
/// are never held in full next to the converted array. Without a size bound the output grows
/// as bytes arrive (the header is not trusted for the allocation); see [`read_idx_bounded`].
pub fn read_idx<T, R: Read>(
    r: R,
    path: &Path,
    rank: usize,
    conv: impl Fn(u8) -> T,
) -> Result<IdxArray<T>> {
    read_idx_bounded(r, path, rank, conv, None)
}

/// [`read_idx`] for a stream known to hold at most `max_bytes` bytes (header included): a
/// header promising more is refused as truncated before anything is allocated, and a
/// plausible one gets its output allocated exactly once (no growth, no spare capacity), so
/// reading an `n`-value file costs one `n`-element array plus the 64 KiB buffer.
pub fn read_idx_bounded<T, R: Read>(
    r: R,
    path: &Path,
    rank: usize,
    conv: impl Fn(u8) -> T,
    max_bytes: Option<u64>,
) -> Result<IdxArray<T>> {
    read_idx_inner(r, path, rank, conv, max_bytes, max_bytes.is_some())
}

/// The reader behind [`read_idx`] and [`read_idx_bounded`]: with `exact_alloc` a header
/// within `max_bytes` gets its output allocated once; without it the output grows with the
/// values actually read (capacity doubling, never beyond the header's count), so a small
/// stream whose header promises billions of values costs only what it holds. Either way a
/// header promising more than [`MAX_IDX_VALUES`] values is refused first.
fn read_idx_inner<T, R: Read>(
    mut r: R,
    path: &Path,
    rank: usize,
    conv: impl Fn(u8) -> T,
    max_bytes: Option<u64>,
    exact_alloc: bool,
) -> Result<IdxArray<T>> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut hasher = Sha256::new();
    let dims = parse_header(&mut r, path, rank, &mut hasher)?;
    let total: usize = dims.iter().product();
    let header_len = 4 + 4 * rank as u64;
    if let Some(max) = max_bytes {
        let avail = max.saturating_sub(header_len);
        if total as u64 > avail {
            return Err(fmt_err(
                path,
                format!(
                    "truncated IDX file: header {dims:?} promises {total} values, the file can hold at most {avail}"
                ),
            ));
        }
    }
    // Never trust a header for more than the input can hold: allocate once only when the
    // bound is exact (a plain file); otherwise grow as values arrive.
    let out_bytes = (total as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    crate::limits::check_memory(&format!("the IDX header {dims:?}"), out_bytes)
        .map_err(|reason| fmt_err(path, reason))?;
    let mut data: Vec<T> = Vec::new();
    let first = if exact_alloc {
        total
    } else {
        total.min(1 << 16)
    };
    data.try_reserve_exact(first)
        .map_err(|_| alloc_err(path, &dims, out_bytes))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut remaining = total;
    while remaining > 0 {
        let want = remaining.min(buf.len());
        let got = read_full(&mut r, &mut buf[..want]).map_err(io)?;
        hasher.update(&buf[..got]);
        if data.capacity() - data.len() < got {
            // Double, but never past the header's count (the output ends exactly full).
            let grow = data.capacity().max(got).min(total - data.len());
            data.try_reserve_exact(grow)
                .map_err(|_| alloc_err(path, &dims, out_bytes))?;
        }
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
    let sha256 = crate::fsutil::hex(&hasher.finalize());
    Ok(IdxArray { dims, data, sha256 })
}

/// Reads an IDX image file (rank 3: n × rows × cols), plain or gzip, into f32 values 0..255,
/// converting while streaming: peak memory is the f32 array plus small fixed buffers.
pub fn read_images(path: &Path) -> Result<IdxArray<f32>> {
    let (r, bound, gz) = open_bounded(path)?;
    let a = read_idx_inner(r, path, 3, |b| b as f32, Some(bound), !gz)?;
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
    let (r, bound, gz) = open_bounded(path)?;
    let a = read_idx_inner(r, path, 1, |b| b as u32, Some(bound), !gz)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn bounded_reader_refuses_an_impossible_header_before_allocating() {
        // The header promises 60000 × 28 × 28 values; the stream holds 20 bytes.
        let mut bytes = vec![0u8, 0, 8, 3];
        for d in [60_000u32, 28, 28] {
            bytes.extend_from_slice(&d.to_be_bytes());
        }
        bytes.extend_from_slice(&[7; 20]);
        let max = bytes.len() as u64;
        let e = read_idx_bounded(&bytes[..], Path::new("x"), 3, |b| b as f32, Some(max))
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated") && e.contains("at most 20"), "{e}");
        // Exactly enough room is fine, and the output has no spare capacity.
        let mut ok = vec![0u8, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5];
        let a = read_idx_bounded(&ok[..], Path::new("x"), 1, |b| b as f32, Some(13)).unwrap();
        assert_eq!(a.data, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(a.data.capacity(), 5);
        ok.push(9);
        let e = read_idx_bounded(&ok[..], Path::new("x"), 1, |b| b, Some(14)).unwrap_err();
        assert!(e.to_string().contains("trailing"), "{e}");
    }

    #[test]
    fn gzip_members_concatenate_and_trailing_garbage_is_named() {
        let gz = |b: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b).unwrap();
            e.finish().unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.gz");
        let mut two = gz(&[0, 0, 8, 1, 0, 0, 0, 3, 1]);
        two.extend(gz(&[2, 3]));
        std::fs::write(&p, &two).unwrap();
        assert_eq!(read_labels(&p).unwrap().data, vec![1, 2, 3]);
        two.extend_from_slice(b"garbage");
        std::fs::write(&p, &two).unwrap();
        let e = read_labels(&p).unwrap_err().to_string();
        assert!(
            e.contains("trailing bytes") && !e.contains("unexpected end"),
            "{e}"
        );
    }

    #[test]
    fn a_label_count_other_than_the_image_count_is_refused_from_the_headers() {
        let dir = tempfile::tempdir().unwrap();
        let (i, l) = (dir.path().join("i"), dir.path().join("l"));
        // The image header promises 2,000,000 images with no payload at all.
        let mut head = vec![0u8, 0, 8, 3];
        for d in [2_000_000u32, 28, 28] {
            head.extend_from_slice(&d.to_be_bytes());
        }
        std::fs::write(&i, &head).unwrap();
        write_idx_atomic(&l, &[3], &[0, 1, 0]).unwrap();
        let e = check_pair(&i, &l).unwrap_err().to_string();
        assert!(
            e.contains("3 labels") && e.contains("2000000 images"),
            "{e}"
        );
    }

    #[test]
    fn plain_and_gzip_files_read_identically_with_exact_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let (n, side) = (300usize, 28usize);
        let data: Vec<u8> = (0..n * side * side).map(|i| (i * 37 % 256) as u8).collect();
        let plain = dir.path().join("train-images-idx3-ubyte");
        write_idx_atomic(&plain, &[n, side, side], &data).unwrap();
        let gz = dir.path().join("train-images-idx3-ubyte.gz");
        let mut enc = flate2::write::GzEncoder::new(
            File::create(&gz).unwrap(),
            flate2::Compression::default(),
        );
        enc.write_all(&std::fs::read(&plain).unwrap()).unwrap();
        enc.finish().unwrap();
        let a = read_images(&plain).unwrap();
        let b = read_images(&gz).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.dims, vec![n, side, side]);
        assert!(a.data.iter().zip(&data).all(|(&f, &u)| f == u as f32));
        assert_eq!(a.data.capacity(), a.data.len());
        assert_eq!(b.data.capacity(), b.data.len());
    }
}
