//! Image sets for the convnet: 8-bit pixels stored channel-major per image, a reader for the
//! image-folder layout inside a `.tar.gz` (the CIFAR-10 JPEG copy), conversion from a
//! [`privpred_data::Dataset`], fixed per-channel normalisation and the training augmentation
//! (random horizontal flip, random crop with 4-pixel padding in the mean colour).

use crate::error::{NnError, Result};
use rand::{Rng, RngExt};
use rayon::prelude::*;
use std::io::Read;
use std::path::Path;

/// The label every result computed on the shared CIFAR-10 copy must carry (DATA.md).
pub const CIFAR10_JPEG_LABEL: &str = "CIFAR-10 (JPEG copy)";

/// Where the CIFAR-10 JPEG copy lies on the development machines, relative to the repository
/// root: the last resort of `privpred_study::fig7::Fig7Config`; `privpred reproduce` finds CIFAR-10
/// through the resolution order of docs/data.md instead.
pub const CIFAR10_JPEG_DEFAULT: &str = "../shared/data/cifar10-jpeg.tar.gz";

/// A labelled set of images, pixels `0..=255`, each image `C×H×W` channel-major.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSet {
    /// Channels.
    pub channels: usize,
    /// Height.
    pub height: usize,
    /// Width.
    pub width: usize,
    /// Number of classes.
    pub classes: usize,
    /// `n · C·H·W` pixels.
    pub pixels: Vec<u8>,
    /// `n` labels in `0..classes`.
    pub labels: Vec<u32>,
    /// Where the images came from (e.g. [`CIFAR10_JPEG_LABEL`]).
    pub source: String,
}

impl ImageSet {
    /// `n` RGB images of `size`×`size` uniformly random pixels (nothing to learn: shapes,
    /// batching and plumbing in tests), labels cycling 0, 1, …, `classes` − 1; the same
    /// arguments give the same images.
    pub fn synthetic_noise(n: usize, size: usize, classes: usize, seed: u64) -> ImageSet {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        ImageSet {
            channels: 3,
            height: size,
            width: size,
            classes,
            pixels: (0..n * 3 * size * size)
                .map(|_| rng.random::<u8>())
                .collect(),
            labels: (0..n).map(|i| (i % classes.max(1)) as u32).collect(),
            source: "random test images".into(),
        }
    }

    /// A small learnable synthetic set for tests and smoke checks: four texture classes on 8×8
    /// RGB images — horizontal stripes, vertical stripes, a checkerboard, no pattern — with
    /// random phase, contrast, per-channel brightness and pixel noise, so only spatial
    /// structure separates them (GroupNorm removes brightness). Labels cycle 0, 1, 2, 3; the
    /// same `(n, seed)` gives the same images.
    pub fn synthetic_textures(n: usize, seed: u64) -> ImageSet {
        use rand::SeedableRng;
        use rand_distr::{Distribution, StandardNormal};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let (c, s) = (3, 8);
        let mut pixels = Vec::with_capacity(n * c * s * s);
        let mut labels = Vec::with_capacity(n);
        for i in 0..n {
            let y = (i % 4) as u32;
            let phase = rng.random_range(0..2usize);
            let amp = 40.0 + 30.0 * rng.random::<f64>();
            for _ in 0..c {
                let base = 80.0 + 100.0 * rng.random::<f64>();
                for r in 0..s {
                    for col in 0..s {
                        let on = match y {
                            0 => (r + phase) % 2 == 0,
                            1 => (col + phase) % 2 == 0,
                            2 => (r + col + phase) % 2 == 0,
                            _ => false,
                        };
                        let z: f64 = StandardNormal.sample(&mut rng);
                        let v = base + if on { amp } else { 0.0 } + 15.0 * z;
                        pixels.push(v.clamp(0.0, 255.0) as u8);
                    }
                }
            }
            labels.push(y);
        }
        ImageSet {
            channels: c,
            height: s,
            width: s,
            classes: 4,
            pixels,
            labels,
            source: "synthetic textures (test)".into(),
        }
    }
}

/// How a flat row of pixels is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelLayout {
    /// Channel-major `C×H×W` (CIFAR binary batches).
    Chw,
    /// Interleaved `H×W×C` (decoded image files).
    Hwc,
}

impl ImageSet {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    /// Values per image.
    pub fn image_len(&self) -> usize {
        self.channels * self.height * self.width
    }
    /// Image `i` (channel-major bytes).
    pub fn image(&self, i: usize) -> &[u8] {
        let l = self.image_len();
        &self.pixels[i * l..(i + 1) * l]
    }
    /// The images at `idx`, in that order.
    pub fn subset(&self, idx: &[usize]) -> ImageSet {
        let mut pixels = Vec::with_capacity(idx.len() * self.image_len());
        for &i in idx {
            pixels.extend_from_slice(self.image(i));
        }
        ImageSet {
            pixels,
            labels: idx.iter().map(|&i| self.labels[i]).collect(),
            ..self.clone_meta()
        }
    }
    fn clone_meta(&self) -> ImageSet {
        ImageSet {
            channels: self.channels,
            height: self.height,
            width: self.width,
            classes: self.classes,
            pixels: Vec::new(),
            labels: Vec::new(),
            source: self.source.clone(),
        }
    }
    /// The first `per_class` images of each class (in stored order).
    pub fn take_per_class(&self, per_class: usize) -> ImageSet {
        let mut count = vec![0usize; self.classes];
        let idx: Vec<usize> = (0..self.len())
            .filter(|&i| {
                let c = &mut count[self.labels[i] as usize];
                *c += 1;
                *c <= per_class
            })
            .collect();
        self.subset(&idx)
    }

    /// Converts a [`privpred_data::Dataset`] of raw pixel values (`0..=255`, as the data
    /// layer reads them) into an image set.
    pub fn from_dataset(
        ds: &privpred_data::Dataset,
        channels: usize,
        height: usize,
        width: usize,
        layout: PixelLayout,
    ) -> Result<ImageSet> {
        let l = channels * height * width;
        if ds.d != l {
            return Err(NnError::Shape(format!(
                "{}: rows have {} values, expected {channels}×{height}×{width} = {l}",
                ds.provenance.name, ds.d
            )));
        }
        let mut pixels = vec![0u8; ds.n * l];
        for i in 0..ds.n {
            let row = ds.row(i);
            let out = &mut pixels[i * l..(i + 1) * l];
            for c in 0..channels {
                for p in 0..height * width {
                    let v = match layout {
                        PixelLayout::Chw => row[c * height * width + p],
                        PixelLayout::Hwc => row[p * channels + c],
                    };
                    if !(0.0..=255.0).contains(&v) {
                        return Err(NnError::Shape(format!(
                            "{}: pixel value {v} at row {i} outside 0..=255 (pass raw, unscaled pixels)",
                            ds.provenance.name
                        )));
                    }
                    out[c * height * width + p] = v.round() as u8;
                }
            }
        }
        let mut labels = ds.provenance.labels.clone();
        labels.insert(0, ds.provenance.name.clone());
        Ok(ImageSet {
            channels,
            height,
            width,
            classes: ds.classes,
            pixels,
            labels: ds.labels.clone(),
            source: labels.join(", "),
        })
    }
}

/// (class, width, height, channel-major pixels) of one decoded image.
type Decoded = (u32, u32, u32, Vec<u8>);

/// One archive entry under `<split>/<class>/<file>`: (split, class, file name, bytes).
type FolderEntry = (String, String, String, Vec<u8>);

/// Reads an image-folder archive (`.tar.gz` holding `<split>/<class>/<file>.jpg|png`) and
/// returns `(train, test)`; classes are the sorted folder names of the train split. With
/// `per_class = Some((a, b))` only the first `a` train and `b` test files of each class (by
/// sorted file name) are decoded.
///
/// Steps: read the entries (`read_folder_entries`), take the classes from `train/`, sort
/// the entries, then decode each split (`decode_split`).
pub fn load_image_folder_tar(
    path: &Path,
    per_class: Option<(usize, usize)>,
    source: &str,
) -> Result<(ImageSet, ImageSet)> {
    let mut entries = read_folder_entries(path)?;
    let mut classes: Vec<String> = entries
        .iter()
        .filter(|e| e.0 == "train")
        .map(|e| e.1.clone())
        .collect();
    classes.sort();
    classes.dedup();
    if classes.len() < 2 {
        return Err(NnError::format(
            path,
            "expected train/<class>/<image> entries for at least two classes",
        ));
    }
    entries.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    let train_limit = per_class.map(|(a, _)| a);
    let test_limit = per_class.map(|(_, b)| b);
    let train = decode_split(path, &entries, &classes, "train", train_limit, source)?;
    let test = decode_split(path, &entries, &classes, "test", test_limit, source)?;
    Ok((train, test))
}

/// The regular files of the gzipped tar at `path` under `train/<class>/<file>` or
/// `test/<class>/<file>` (a leading `./` allowed), in archive order; other entries are skipped.
fn read_folder_entries(path: &Path) -> Result<Vec<FolderEntry>> {
    let f = std::fs::File::open(path).map_err(|e| NnError::io(path, e))?;
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(std::io::BufReader::new(f)));
    let mut entries: Vec<FolderEntry> = Vec::new();
    for e in ar.entries().map_err(|e| NnError::io(path, e))? {
        let mut e = e.map_err(|e| NnError::io(path, e))?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let p = e
            .path()
            .map_err(|e| NnError::io(path, e))?
            .to_string_lossy()
            .into_owned();
        let parts: Vec<&str> = p.trim_start_matches("./").split('/').collect();
        if parts.len() != 3 || !(parts[0] == "train" || parts[0] == "test") {
            continue;
        }
        let (s, c, n) = (
            parts[0].to_string(),
            parts[1].to_string(),
            parts[2].to_string(),
        );
        let mut buf = Vec::with_capacity(e.header().size().unwrap_or(0) as usize);
        e.read_to_end(&mut buf).map_err(|e| NnError::io(path, e))?;
        entries.push((s, c, n, buf));
    }
    Ok(entries)
}

/// Decodes the (sorted) entries of one split, at most `limit` per class, in parallel into an
/// [`ImageSet`]; every class must be one of `train/`'s and every image of one size.
fn decode_split(
    path: &Path,
    entries: &[FolderEntry],
    classes: &[String],
    split: &str,
    limit: Option<usize>,
    source: &str,
) -> Result<ImageSet> {
    let mut count = vec![0usize; classes.len()];
    let mut sel: Vec<(u32, &Vec<u8>, &str)> = Vec::new();
    for e in entries.iter().filter(|e| e.0 == split) {
        let Ok(ci) = classes.binary_search(&e.1) else {
            return Err(NnError::format(
                path,
                format!("{split}/{}: class not present in train/", e.1),
            ));
        };
        count[ci] += 1;
        if limit.is_none_or(|l| count[ci] <= l) {
            sel.push((ci as u32, &e.3, &e.2));
        }
    }
    if sel.is_empty() {
        return Err(NnError::format(path, format!("no images under {split}/")));
    }
    let decoded: Vec<Result<Decoded>> = sel
        .par_iter()
        .map(|(ci, bytes, name)| {
            let what = || format!("{split}/{}/{name}", classes[*ci as usize]);
            decode_chw(path, bytes, what).map(|(w, h, chw)| (*ci, w, h, chw))
        })
        .collect();
    let mut set = ImageSet {
        channels: 3,
        height: 0,
        width: 0,
        classes: classes.len(),
        pixels: Vec::new(),
        labels: Vec::new(),
        source: source.to_string(),
    };
    for d in decoded {
        let (ci, w, h, chw) = d?;
        if set.labels.is_empty() {
            set.width = w as usize;
            set.height = h as usize;
        } else if (w as usize, h as usize) != (set.width, set.height) {
            return Err(NnError::format(
                path,
                format!(
                    "{split}: images of different sizes ({w}×{h} vs {}×{})",
                    set.width, set.height
                ),
            ));
        }
        set.pixels.extend_from_slice(&chw);
        set.labels.push(ci);
    }
    Ok(set)
}

/// Decodes one JPEG or PNG into RGB, channel-major: (width, height, pixels); `what` names the
/// entry in the error.
fn decode_chw(path: &Path, bytes: &[u8], what: impl Fn() -> String) -> Result<(u32, u32, Vec<u8>)> {
    let img = image::load_from_memory(bytes)
        .map_err(|e| NnError::format(path, format!("{}: {e}", what())))?
        .to_rgb8();
    let (w, h) = img.dimensions();
    let raw = img.into_raw();
    let hw = (w * h) as usize;
    let mut chw = vec![0u8; 3 * hw];
    for p in 0..hw {
        for c in 0..3 {
            chw[c * hw + p] = raw[p * 3 + c];
        }
    }
    Ok((w, h, chw))
}

/// Loads the CIFAR-10 JPEG copy (DATA.md) from `path` (default [`CIFAR10_JPEG_DEFAULT`]).
pub fn load_cifar10_jpeg(
    path: &Path,
    per_class: Option<(usize, usize)>,
) -> Result<(ImageSet, ImageSet)> {
    let (tr, te) = load_image_folder_tar(path, per_class, CIFAR10_JPEG_LABEL)?;
    if tr.classes != 10 || tr.height != 32 || tr.width != 32 {
        return Err(NnError::format(
            path,
            format!(
                "expected 10 classes of 32×32 images, found {} classes of {}×{}",
                tr.classes, tr.width, tr.height
            ),
        ));
    }
    Ok((tr, te))
}

/// The label of results computed on the canonical CIFAR-10 binary batches
/// (`privpred data fetch cifar10`).
pub const CIFAR10_BINARY_LABEL: &str = "CIFAR-10 (binary batches)";

/// Loads CIFAR-10 from `path`: a directory of the canonical binary batches
/// (`data_batch_1.bin` … `test_batch.bin`, directly or in `cifar-10-batches-bin/`, as
/// `privpred data fetch cifar10` installs them; labelled [`CIFAR10_BINARY_LABEL`]), or else
/// the JPEG copy ([`load_cifar10_jpeg`]). `per_class` as there (the first images of each
/// class in stored order).
pub fn load_cifar10(
    path: &Path,
    per_class: Option<(usize, usize)>,
) -> Result<(ImageSet, ImageSet)> {
    let dir = [path.to_path_buf(), path.join("cifar-10-batches-bin")]
        .into_iter()
        .find(|d| d.is_dir() && privpred_data::cifar::batch_files(d).is_some());
    let Some(dir) = dir else {
        return load_cifar10_jpeg(path, per_class);
    };
    let s = privpred_data::load(
        &privpred_data::DatasetSpec::CifarBin(dir),
        &privpred_data::LoadOptions {
            fetch: false,
            ..Default::default()
        },
    )?;
    let mut tr = ImageSet::from_dataset(&s.train, 3, 32, 32, PixelLayout::Chw)?;
    let mut te = ImageSet::from_dataset(&s.test, 3, 32, 32, PixelLayout::Chw)?;
    if let Some((a, b)) = per_class {
        tr = tr.take_per_class(a);
        te = te.take_per_class(b);
    }
    tr.source = CIFAR10_BINARY_LABEL.into();
    te.source = CIFAR10_BINARY_LABEL.into();
    Ok((tr, te))
}

/// Fixed per-channel normalisation `(v/255 − mean_c)/std_c`. The default constants are the
/// published CIFAR-10 channel statistics (public constants, not computed from the private
/// training set).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Normalization {
    /// Per-channel mean (of pixel/255).
    pub mean: Vec<f32>,
    /// Per-channel standard deviation (of pixel/255).
    pub std: Vec<f32>,
}

impl Normalization {
    /// The usual CIFAR-10 constants.
    pub fn cifar10() -> Self {
        Normalization {
            mean: vec![0.4914, 0.4822, 0.4465],
            std: vec![0.2470, 0.2435, 0.2616],
        }
    }
    /// Mean 0.5, std 0.25 for every channel (for non-CIFAR inputs).
    pub fn generic(channels: usize) -> Self {
        Normalization {
            mean: vec![0.5; channels],
            std: vec![0.25; channels],
        }
    }
}

/// One draw of the training augmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Augment {
    /// Mirror horizontally.
    pub flip: bool,
    /// Crop offset in rows, `−pad..=pad` (outside the image: the mean colour, see
    /// [`prepare_image`]).
    pub dy: i32,
    /// Crop offset in columns.
    pub dx: i32,
}

impl Augment {
    /// Random flip (p = 1/2) and random crop with `pad` pixels of padding.
    pub fn sample(rng: &mut impl Rng, pad: i32) -> Self {
        Augment {
            flip: rng.random::<bool>(),
            dy: rng.random_range(-pad..=pad),
            dx: rng.random_range(-pad..=pad),
        }
    }
}

/// Writes the normalised (and optionally augmented) float image into `out`. Pixels that a
/// crop shifts in from outside the image are 0 after normalisation, i.e. the normalisation's
/// mean colour (the published CIFAR-10 constants, not a statistic of the training data): what
/// the PyTorch reference (`benches/resnet20_gn_reference.py`) does by padding after
/// normalising.
pub fn prepare_image(
    img: &[u8],
    c: usize,
    h: usize,
    w: usize,
    norm: &Normalization,
    aug: Augment,
    out: &mut Vec<f32>,
) {
    out.clear();
    out.resize(c * h * w, 0.0);
    for ch in 0..c {
        let (m, s) = (norm.mean[ch], norm.std[ch]);
        let pad_val = 0.0;
        let src = &img[ch * h * w..(ch + 1) * h * w];
        let dst = &mut out[ch * h * w..(ch + 1) * h * w];
        for y in 0..h {
            let sy = y as i32 + aug.dy;
            for x in 0..w {
                let xx = if aug.flip { w - 1 - x } else { x };
                let sx = xx as i32 + aug.dx;
                dst[y * w + x] = if sy < 0 || sy >= h as i32 || sx < 0 || sx >= w as i32 {
                    pad_val
                } else {
                    (src[sy as usize * w + sx as usize] as f32 / 255.0 - m) / s
                };
            }
        }
    }
}

/// SHA-256 (hex) of a dataset source: the bytes of a file (e.g. the CIFAR-10 `.tar.gz`), or
/// for a directory, of the sorted list of `relative/path\0<file SHA-256>\n` lines of every
/// regular file below it (so the same folder hashes alike wherever it lives). Streams the
/// bytes; symbolic links are followed.
pub fn source_sha256(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    fn file_hash(p: &Path) -> Result<String> {
        Ok(privpred_data::fsutil::sha256_file(p)?)
    }
    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<()> {
        for e in std::fs::read_dir(dir).map_err(|e| NnError::io(dir, e))? {
            let p = e.map_err(|e| NnError::io(dir, e))?.path();
            if p.is_dir() {
                walk(root, &p, out)?;
            } else if p.is_file() {
                let rel = p
                    .strip_prefix(root)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, file_hash(&p)?));
            }
        }
        Ok(())
    }
    if path.is_dir() {
        let mut files = Vec::new();
        walk(path, path, &mut files)?;
        files.sort();
        let mut h = Sha256::new();
        for (rel, sha) in &files {
            h.update(rel.as_bytes());
            h.update([0u8]);
            h.update(sha.as_bytes());
            h.update(b"\n");
        }
        Ok(hex(&h.finalize()))
    } else {
        file_hash(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crop fills the pixels it shifts in with the mean colour (0 after normalisation), as
    /// the PyTorch reference pads after normalising; the rest is the shifted, flipped image.
    #[test]
    fn crops_pad_with_the_mean_colour() {
        let (c, h, w) = (3, 4, 5);
        let img: Vec<u8> = (0..c * h * w).map(|v| (v * 4) as u8).collect();
        let norm = Normalization::cifar10();
        let mut out = Vec::new();
        let aug = Augment {
            flip: true,
            dy: 2,
            dx: -1,
        };
        prepare_image(&img, c, h, w, &norm, aug, &mut out);
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    let (sy, sx) = (y as i32 + 2, (w - 1 - x) as i32 - 1);
                    let got = out[ch * h * w + y * w + x];
                    if sy >= h as i32 || sx < 0 {
                        assert_eq!(got, 0.0, "padding at ({ch}, {y}, {x})");
                    } else {
                        let v = img[ch * h * w + sy as usize * w + sx as usize] as f32 / 255.0;
                        let want = (v - norm.mean[ch]) / norm.std[ch];
                        assert!(
                            (got - want).abs() < 1e-6,
                            "({ch}, {y}, {x}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
