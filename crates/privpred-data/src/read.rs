//! Dataset discovery and reading from local files (no network: [`crate::load()`] adds the
//! fetch of a missing named dataset on top, and [`crate::fetch`] reads what it fetched
//! through this module, so the two do not import each other).
//!
//! Resolution order for a named dataset (first hit wins): `LoadOptions::data_dir` (the
//! directory itself, then `<dir>/<name>/`), the environment variable `PRIVPRED_DATA_DIR`
//! (likewise), the per-user cache `${XDG_CACHE_HOME:-~/.cache}/privpred/<name>/`, known
//! system locations (Debian's `/usr/share/datasets/fashion-mnist/`; for CIFAR-10 a
//! `shared/data/` folder beside the working directory or one of its ancestors, e.g.
//! `../shared/data/cifar10-jpeg.tar.gz` seen from a repository root; never required, and
//! `PRIVPRED_NO_SHARED_DATA=1` turns this look-up off), and finally, when `LoadOptions::fetch` is set, [`crate::fetch::fetch`] into
//! the cache. Files with a known SHA-256 are verified on every load; a mismatch is an error
//! and the file is not used.

use crate::csvfile::{CsvOptions, read_csv};
use crate::dataset::{Dataset, Provenance};
use crate::error::{DataError, Result};
use crate::limits::MAX_CLASSES;
use crate::spec::DatasetSpec;
use crate::{cifar, fsutil, idx, images, known, split};
use std::path::{Path, PathBuf};

/// Environment variable naming a data directory (searched after `--data-dir`).
pub const ENV_DATA_DIR: &str = "PRIVPRED_DATA_DIR";

/// Options of [`crate::load::load`] and [`read`].
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// A directory searched first (`--data-dir`).
    pub data_dir: Option<PathBuf>,
    /// Whether a missing named dataset may be fetched into the cache (default true).
    pub fetch: bool,
    /// Test fraction for sources without a test split (digits, a single CSV): default 0.2.
    pub test_fraction: f64,
    /// Seed of that test hold-out (default 0).
    pub split_seed: u64,
    /// CSV options.
    pub csv: CsvOptions,
    /// The declared number of classes C of user data without published classes
    /// (`csv-pixels:`, `idx:`, a CSV read without a schema; for image folders at least their
    /// class folders): labels must be below it, a label outside is an error. `None`: the
    /// largest label + 1, marked [`crate::Provenance::classes_from_labels`] (which private
    /// training refuses). Named data sets and schema tables have their own published classes.
    pub classes: Option<usize>,
    /// The declared class names of an image folder (`images:PATH`; label i = `class_names[i]`):
    /// every class folder must be one of them, a name without a folder is a class without
    /// images. `None`: the class folders present, marked
    /// [`crate::Provenance::classes_from_labels`] (the names and their count come from the
    /// data).
    pub class_names: Option<Vec<String>>,
    /// The schema of a table (`csv:`, `parquet:`, `breast-cancer`, `wine`): its rows are read
    /// through it into the unit ball ([`crate::schema`]).
    pub schema: Option<crate::schema::Schema>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            data_dir: None,
            fetch: true,
            test_fraction: 0.2,
            split_seed: 0,
            csv: CsvOptions::default(),
            classes: None,
            class_names: None,
            schema: None,
        }
    }
}

/// A train and a test split.
#[derive(Debug, Clone, PartialEq)]
pub struct Splits {
    /// Training split.
    pub train: Dataset,
    /// Test split.
    pub test: Dataset,
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/privpred`. A relative `XDG_CACHE_HOME` is ignored, as
/// the XDG Base Directory specification requires (all its paths must be absolute); so is a
/// relative `HOME`.
pub fn cache_root() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let base = std::env::var_os("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join("privpred"))
}

/// The cache directory of a named dataset.
pub fn cache_dir(name: &str) -> Option<PathBuf> {
    cache_root().map(|r| r.join(name))
}

/// Environment variable that, set to `1`, stops the look-up of `shared/data` folders (so
/// that a run, or CI's data-absent test pass, sees only `--data-dir`,
/// `$PRIVPRED_DATA_DIR` and the cache).
pub const ENV_NO_SHARED_DATA: &str = "PRIVPRED_NO_SHARED_DATA";

/// File name of the CIFAR-10 JPEG copy (an image-folder tarball, see docs/data.md).
pub const CIFAR10_JPEG_FILE: &str = "cifar10-jpeg.tar.gz";

/// `shared/data` directories beside the working directory or one of its ancestors (none
/// when `PRIVPRED_NO_SHARED_DATA=1`).
pub fn shared_data_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if std::env::var(ENV_NO_SHARED_DATA).is_ok_and(|v| v.trim() == "1") {
        return out;
    }
    if let Ok(cwd) = std::env::current_dir() {
        for a in cwd.ancestors() {
            let p = a.join("shared").join("data");
            if p.is_dir() {
                out.push(p);
            }
        }
    }
    out
}

/// Candidate directories for a named dataset, in resolution order, with where each comes from.
pub fn candidate_dirs(name: &str, opts: &LoadOptions) -> Vec<(PathBuf, &'static str)> {
    let mut v = Vec::new();
    if let Some(d) = &opts.data_dir {
        v.push((d.clone(), "--data-dir"));
        v.push((d.join(name), "--data-dir"));
    }
    if let Some(d) = std::env::var_os(ENV_DATA_DIR).filter(|v| !v.is_empty()) {
        let d = PathBuf::from(d);
        v.push((d.clone(), ENV_DATA_DIR));
        v.push((d.join(name), ENV_DATA_DIR));
    }
    if let Some(c) = cache_dir(name) {
        v.push((c, "cache"));
    }
    match name {
        "fashion-mnist" => v.push((PathBuf::from("/usr/share/datasets/fashion-mnist"), "system")),
        "cifar10" => v.extend(shared_data_dirs().into_iter().map(|d| (d, "system"))),
        _ => {}
    }
    v
}

/// Reads a dataset from local files as train and test splits with raw f32 features (pixels
/// 0..255), without fetching: `Ok(None)` when a named dataset (mnist, fashion-mnist, digits,
/// cifar10) is in none of the [`candidate_dirs`]; every other source is read or fails.
/// [`crate::load::load`] fetches a missing named dataset on top of this.
pub fn read(spec: &DatasetSpec, opts: &LoadOptions) -> Result<Option<Splits>> {
    crate::table::check_schema_applies(spec, opts.schema.is_some())?;
    match spec {
        DatasetSpec::Mnist
        | DatasetSpec::FashionMnist
        | DatasetSpec::Digits
        | DatasetSpec::BreastCancer
        | DatasetSpec::Wine
        | DatasetSpec::Fair
        | DatasetSpec::Cifar10 => {
            let name = spec.name();
            for (dir, origin) in candidate_dirs(&name, opts) {
                if let Some(s) = try_named_dir(spec, &dir, opts)? {
                    let _ = origin;
                    return Ok(Some(s));
                }
            }
            Ok(None)
        }
        DatasetSpec::Mnist1m => load_mnist1m(opts, || {
            read(&DatasetSpec::Mnist, opts)?
                .map(|s| s.test)
                .ok_or_else(|| not_found("mnist", opts))
        })
        .map(Some),
        DatasetSpec::Idx(dir) => {
            if !dir.is_dir() {
                return Err(DataError::NotFound(format!(
                    "{}: no such directory of IDX files",
                    dir.display()
                )));
            }
            load_idx_dir(dir, &spec.name(), None, opts.classes)?
                .ok_or_else(|| {
                    DataError::NotFound(format!(
                        "{}: no IDX files found (expected train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, optionally .gz)",
                        dir.display()
                    ))
                })
                .map(Some)
        }
        DatasetSpec::Images(p) => load_images(p, &spec.name(), false, opts).map(Some),
        DatasetSpec::CifarBin(dir) => {
            let d =
                if cifar::batch_files(dir).is_none() && dir.join("cifar-10-batches-bin").is_dir() {
                    dir.join("cifar-10-batches-bin")
                } else {
                    dir.clone()
                };
            load_cifar_bin(&d, &spec.name())?
                .ok_or_else(|| {
                    DataError::NotFound(format!(
                        "{}: no CIFAR-10 binary batches (data_batch_1.bin … data_batch_5.bin, test_batch.bin)",
                        dir.display()
                    ))
                })
                .map(Some)
        }
        DatasetSpec::Csv { train, test } | DatasetSpec::Parquet { train, test } => {
            table(spec, train, test.as_deref(), opts).map(Some)
        }
        DatasetSpec::CsvPixels { train, test } => {
            load_csv(train, test.as_deref(), &spec.name(), opts).map(Some)
        }
    }
}

/// The error for a named dataset found nowhere (the directories searched, how to fetch it).
pub(crate) fn not_found(name: &str, opts: &LoadOptions) -> DataError {
    let dirs: Vec<String> = candidate_dirs(name, opts)
        .iter()
        .map(|(d, _)| d.display().to_string())
        .collect();
    // a cache entry that is not a directory (a file left in its place) is named: it is why
    // the dataset was not found there
    let odd: Vec<String> = candidate_dirs(name, opts)
        .iter()
        .filter(|(d, origin)| *origin == "cache" && d.exists() && !d.is_dir())
        .map(|(d, _)| {
            format!(
                "; the cache entry {} is a file, not a directory (`privpred data fetch {name}` replaces it)",
                d.display()
            )
        })
        .collect();
    let searched = if dirs.is_empty() {
        format!(
            "searched nowhere: no --data-dir, no ${ENV_DATA_DIR}, and no cache directory since neither XDG_CACHE_HOME nor HOME is set to an absolute path"
        )
    } else {
        format!("searched {}", dirs.join(", "))
    };
    DataError::NotFound(format!(
        "dataset {name} not found ({searched}{}); run `privpred data fetch {name}` or pass --data-dir",
        odd.concat()
    ))
}

/// Tries to load a named dataset from one directory; `Ok(None)` when it is not there.
pub(crate) fn try_named_dir(
    spec: &DatasetSpec,
    dir: &Path,
    opts: &LoadOptions,
) -> Result<Option<Splits>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let name = spec.name();
    match spec {
        DatasetSpec::Mnist => load_idx_dir(dir, &name, Some(&known::MNIST), Some(10)),
        DatasetSpec::FashionMnist => {
            load_idx_dir(dir, &name, Some(&known::FASHION_MNIST), Some(10))
        }
        DatasetSpec::Digits => {
            let p = dir.join("digits.csv.gz");
            if !p.is_file() {
                return Ok(None);
            }
            let sha = fsutil::sha256_file(&p)?;
            if sha != known::DIGITS_CSV_GZ {
                return Err(DataError::Checksum {
                    path: p,
                    expected: known::DIGITS_CSV_GZ.into(),
                    actual: sha,
                });
            }
            let o = LoadOptions {
                csv: CsvOptions {
                    header: Some(false),
                    ..CsvOptions::default()
                },
                classes: Some(10),
                ..opts.clone()
            };
            let mut s = load_csv(&p, None, &name, &o)?;
            for ds in [&mut s.train, &mut s.test] {
                ds.provenance.checksum = Some(sha.clone());
                ds.provenance.verified = true;
                ds.provenance.feature_shape = vec![8, 8];
            }
            Ok(Some(s))
        }
        DatasetSpec::BreastCancer | DatasetSpec::Wine | DatasetSpec::Fair => {
            match crate::table::load_named_table(spec, dir, opts.schema.as_ref())? {
                Some(ds) => holdout_test(ds, opts).map(Some),
                None => Ok(None),
            }
        }
        DatasetSpec::Cifar10 => {
            for d in [dir.to_path_buf(), dir.join("cifar-10-batches-bin")] {
                if let Some(s) = load_cifar_bin(&d, &name)? {
                    return Ok(Some(s));
                }
            }
            let tarball = dir.join("cifar10-jpeg.tar.gz");
            if tarball.is_file() {
                let sha = fsutil::sha256_file(&tarball)?;
                if sha != known::CIFAR10_JPEG_TARBALL {
                    return Err(DataError::Checksum {
                        path: tarball,
                        expected: known::CIFAR10_JPEG_TARBALL.into(),
                        actual: sha,
                    });
                }
                let mut s = load_images(&tarball, &name, true, opts)?;
                for ds in [&mut s.train, &mut s.test] {
                    ds.provenance.checksum = Some(sha.clone());
                    ds.provenance.verified = true;
                }
                return Ok(Some(s));
            }
            if dir.join("train").is_dir() && dir.join("test").is_dir() {
                return load_images(dir, &name, true, opts).map(Some);
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Compares the four IDX headers before any payload is read (the image and label counts of
/// each split, the train and test image shapes) and bounds what the data set will allocate
/// by the machine's memory, so that a compressed file promising billions of values is
/// refused in milliseconds instead of being decompressed.
fn check_idx_headers(tri: &Path, trl: &Path, tei: &Path, tel: &Path) -> Result<()> {
    let train = idx::check_pair(tri, trl)?;
    let test = idx::check_pair(tei, tel)?;
    if train[1..] != test[1..] {
        return Err(DataError::Format {
            path: tei.to_path_buf(),
            reason: format!(
                "test images are {}×{}, training images {}×{} (the image shapes must match, not only the pixel counts)",
                test[1], test[2], train[1], train[2]
            ),
        });
    }
    // f32 pixels plus u32 labels for both splits.
    let values = |d: &[usize]| d.iter().map(|&x| x as u64).product::<u64>();
    let bytes = (values(&train) + values(&test) + train[0] as u64 + test[0] as u64) * 4;
    crate::limits::check_memory(
        &format!("the data set in {}", tri.parent().unwrap_or(tri).display()),
        bytes,
    )
    .map_err(|reason| DataError::Format {
        path: tri.to_path_buf(),
        reason,
    })
}

/// Loads a directory of the four IDX files; `Ok(None)` if they are not all there. With a
/// checksum table every file must match; labels must be below `classes` (default: largest
/// label + 1).
pub fn load_idx_dir(
    dir: &Path,
    name: &str,
    table: Option<&'static [(&'static str, &'static str)]>,
    classes: Option<usize>,
) -> Result<Option<Splits>> {
    let files = [
        idx::TRAIN_IMAGES,
        idx::TRAIN_LABELS,
        idx::TEST_IMAGES,
        idx::TEST_LABELS,
    ]
    .map(|s| idx::find_idx_file(dir, s));
    let [Some(tri), Some(trl), Some(tei), Some(tel)] = files else {
        return Ok(None);
    };
    check_idx_headers(&tri, &trl, &tei, &tel)?;
    let ((a, b), (c, d)) = rayon::join(
        || rayon::join(|| idx::read_images(&tri), || idx::read_labels(&trl)),
        || rayon::join(|| idx::read_images(&tei), || idx::read_labels(&tel)),
    );
    let (tri_a, trl_a, tei_a, tel_a) = (a?, b?, c?, d?);
    if tri_a.dims[1..] != tei_a.dims[1..] {
        return Err(DataError::Format {
            path: tei.clone(),
            reason: format!(
                "test images are {}×{}, training images {}×{} (the image shapes must match, not only the pixel counts)",
                tei_a.dims[1], tei_a.dims[2], tri_a.dims[1], tri_a.dims[2]
            ),
        });
    }
    let mut hashes = Vec::new();
    let mut verified = table.is_some();
    for (p, sha, stem) in [
        (&tri, &tri_a.sha256, idx::TRAIN_IMAGES[0]),
        (&trl, &trl_a.sha256, idx::TRAIN_LABELS[0]),
        (&tei, &tei_a.sha256, idx::TEST_IMAGES[0]),
        (&tel, &tel_a.sha256, idx::TEST_LABELS[0]),
    ] {
        if let Some(t) = table {
            match known::expected(t, stem) {
                Some(e) if e == sha => {}
                Some(e) => {
                    return Err(DataError::Checksum {
                        path: p.clone(),
                        expected: e.into(),
                        actual: sha.clone(),
                    });
                }
                None => verified = false,
            }
        }
        hashes.push((stem.to_string(), sha.clone()));
    }
    let from_labels = classes.is_none();
    let classes = match classes {
        Some(c) => c,
        None => trl_a
            .data
            .iter()
            .chain(tel_a.data.iter())
            .max()
            .map_or(1, |&m| m as usize + 1)
            .max(2),
    };
    let checksum = fsutil::combine_hashes(&hashes);
    let mk = |img: idx::IdxArray<f32>,
              lab: idx::IdxArray<u32>,
              ip: &Path,
              lp: &Path|
     -> Result<Dataset> {
        if img.dims[0] != lab.dims[0] {
            return Err(DataError::Format {
                path: lp.to_path_buf(),
                reason: format!(
                    "{} labels but {} has {} images",
                    lab.dims[0],
                    ip.display(),
                    img.dims[0]
                ),
            });
        }
        if let Some((i, y)) = lab
            .data
            .iter()
            .enumerate()
            .find(|(_, y)| **y as usize >= classes)
        {
            return Err(DataError::Format {
                path: lp.to_path_buf(),
                reason: format!("label {y} at item {i} outside the class range 0..{classes}"),
            });
        }
        let prov = Provenance {
            name: name.to_string(),
            source: dir.display().to_string(),
            checksum: Some(checksum.clone()),
            verified,
            feature_shape: vec![img.dims[1], img.dims[2]],
            classes_from_labels: from_labels,
            ..Default::default()
        };
        let d = img.dims[1] * img.dims[2];
        Dataset::new(d, classes, img.data, lab.data, prov)
    };
    let train = mk(tri_a, trl_a, &tri, &trl)?;
    let test = mk(tei_a, tel_a, &tei, &tel)?;
    if train.d != test.d {
        return Err(DataError::Format {
            path: tei.clone(),
            reason: format!(
                "test images have {} pixels, training images {}",
                test.d, train.d
            ),
        });
    }
    Ok(Some(Splits { train, test }))
}

fn load_cifar_bin(dir: &Path, name: &str) -> Result<Option<Splits>> {
    let Some((train_files, test_file)) = cifar::batch_files(dir) else {
        return Ok(None);
    };
    let (tr, te) = rayon::join(
        || cifar::read_batches(&train_files),
        || cifar::read_batches(std::slice::from_ref(&test_file)),
    );
    let ((trf, trl), (tef, tel)) = (tr?, te?);
    let prov = Provenance {
        name: name.to_string(),
        source: dir.display().to_string(),
        checksum: None,
        verified: false,
        feature_shape: vec![3, 32, 32],
        class_names: cifar::CLASSES.iter().map(|s| s.to_string()).collect(),
        labels: vec!["CIFAR-10 (binary batches)".into()],
        ..Default::default()
    };
    Ok(Some(Splits {
        train: Dataset::new(3072, 10, trf, trl, prov.clone())?,
        test: Dataset::new(3072, 10, tef, tel, prov)?,
    }))
}

fn load_images(path: &Path, name: &str, cifar_named: bool, opts: &LoadOptions) -> Result<Splits> {
    let folder = images::read_image_folder(path)?;
    if cifar_named
        && folder
            .classes
            .iter()
            .map(String::as_str)
            .ne(cifar::CLASSES.iter().copied())
    {
        return Err(DataError::Format {
            path: path.to_path_buf(),
            reason: format!(
                "class folders {:?} are not the ten CIFAR-10 classes",
                folder.classes
            ),
        });
    }
    let mut folder = folder;
    let from_labels = !cifar_named && opts.class_names.is_none();
    if !cifar_named && let Some(names) = &opts.class_names {
        folder.declare_class_names(names, path)?;
    }
    if let Some(c) = opts.classes
        && !cifar_named
    {
        return Err(DataError::InvalidArgument {
            name: "classes",
            value: c.to_string(),
            expected: format!(
                "the class names of the image folder {} (--classes NAME,NAME,...: its class folders are named, so a count does not say which folder is which class)",
                path.display()
            ),
        });
    }
    let classes = folder.classes.len().max(2);
    let d = folder.shape.iter().product();
    let mut labels = Vec::new();
    if cifar_named {
        labels.push("CIFAR-10 (JPEG copy)".to_string());
    }
    let prov = Provenance {
        name: name.to_string(),
        source: path.display().to_string(),
        feature_shape: folder.shape.to_vec(),
        class_names: folder.classes.clone(),
        labels,
        classes_from_labels: from_labels,
        ..Default::default()
    };
    let mut splits = folder.splits;
    let train = splits.remove("train");
    let test = splits.remove("test");
    let mk = |s: images::ImageSplit| Dataset::new(d, classes, s.features, s.labels, prov.clone());
    match (train, test) {
        (Some(tr), Some(te)) => Ok(Splits {
            train: shuffle_fixed(mk(tr)?),
            test: mk(te)?,
        }),
        (Some(tr), None) => holdout_test(mk(tr)?, opts),
        _ => Err(DataError::Format {
            path: path.to_path_buf(),
            reason: "no `train/` split in the image folder".into(),
        }),
    }
}

/// Image folders come sorted by class; a fixed (seed-0) permutation of the training split
/// makes contiguous slices (e.g. the teachers of subsample-and-aggregate) class-balanced.
fn shuffle_fixed(ds: Dataset) -> Dataset {
    let perm = split::permutation(ds.n, 0);
    let mut out = ds.subset(&perm);
    out.provenance
        .steps
        .push("order: fixed permutation (seed 0) of the class-sorted folder".into());
    out
}

pub(crate) fn holdout_test(ds: Dataset, opts: &LoadOptions) -> Result<Splits> {
    let (train, mut test) = split::try_holdout(&ds, opts.test_fraction, opts.split_seed)?;
    let step = format!(
        "test split: seeded hold-out of {} of {} rows (fraction {}, seed {})",
        test.n, ds.n, opts.test_fraction, opts.split_seed
    );
    let mut train = train;
    train.provenance.steps.push(step.clone());
    test.provenance.steps.push(step);
    train.provenance.held_out = true;
    test.provenance.held_out = true;
    Ok(Splits { train, test })
}

/// Reads the MNIST-1M substitute from the first of its [`candidate_dirs`] that holds it; its
/// test split is MNIST's, from `mnist_test`.
pub(crate) fn load_mnist1m(
    opts: &LoadOptions,
    mnist_test: impl FnOnce() -> Result<Dataset>,
) -> Result<Splits> {
    let dirs = candidate_dirs("mnist1m", opts).into_iter().map(|(d, _)| d);
    let (train, test) = crate::mnist1m::load_mnist1m(dirs.collect(), mnist_test)?;
    Ok(Splits { train, test })
}

/// A user's table: through its schema, or (a CSV without one) as plain numbers marked
/// [`Provenance::needs_schema`], which training refuses.
fn table(
    spec: &DatasetSpec,
    train: &Path,
    test: Option<&Path>,
    opts: &LoadOptions,
) -> Result<Splits> {
    use crate::table::{TableFormat, read_table};
    let format = match spec {
        DatasetSpec::Parquet { .. } => TableFormat::Parquet,
        _ => TableFormat::Csv,
    };
    match (&opts.schema, format) {
        (Some(s), _) => {
            let tr = read_table(train, format, s, &spec.name())?;
            match test {
                Some(t) => Ok(Splits {
                    train: tr,
                    test: read_table(t, format, s, &spec.name())?,
                }),
                None => holdout_test(tr, opts),
            }
        }
        (None, TableFormat::Parquet) => Err(DataError::InvalidArgument {
            name: "schema",
            value: "none".into(),
            expected: crate::schema::NEEDS_SCHEMA.into(),
        }),
        (None, TableFormat::Csv) => {
            let mut s = load_csv(train, test, &spec.name(), opts).map_err(|e| match e {
                DataError::Format { path, reason } => DataError::Format {
                    path,
                    reason: format!(
                        "{reason} (read without a schema, a CSV must hold numbers only; a table needs {})",
                        crate::schema::NEEDS_SCHEMA
                    ),
                },
                e => e,
            })?;
            s.train.provenance.needs_schema = true;
            s.test.provenance.needs_schema = true;
            Ok(s)
        }
    }
}

/// The file and 0-based data row of the first label ≥ `limit` (the training file first), for
/// the error that names it.
fn first_label_at_or_above<'a>(
    limit: usize,
    (train, tr): (&'a Path, &crate::csvfile::CsvTable),
    test: Option<&'a Path>,
    te: Option<&crate::csvfile::CsvTable>,
) -> (&'a Path, usize, u32) {
    let (p, tbl) = if tr.labels.iter().any(|&y| y as usize >= limit) {
        (train, tr)
    } else {
        (test.unwrap_or(train), te.unwrap_or(tr))
    };
    let (i, y) = tbl
        .labels
        .iter()
        .enumerate()
        .find(|(_, y)| **y as usize >= limit)
        .map(|(i, y)| (i, *y))
        .unwrap_or((0, 0));
    (p, i, y)
}

fn load_csv(train: &Path, test: Option<&Path>, name: &str, opts: &LoadOptions) -> Result<Splits> {
    if !train.is_file() {
        return Err(DataError::NotFound(format!(
            "{}: no such CSV file",
            train.display()
        )));
    }
    let tr = read_csv(train, &opts.csv)?;
    let te = match test {
        Some(t) => {
            if !t.is_file() {
                return Err(DataError::NotFound(format!(
                    "{}: no such CSV file",
                    t.display()
                )));
            }
            let te = read_csv(t, &opts.csv)?;
            if te.d != tr.d {
                return Err(DataError::Format {
                    path: t.to_path_buf(),
                    reason: format!("{} feature columns, the training file has {}", te.d, tr.d),
                });
            }
            Some(te)
        }
        None => None,
    };
    let maxl = tr
        .labels
        .iter()
        .chain(te.iter().flat_map(|t| t.labels.iter()))
        .copied()
        .max()
        .unwrap_or(0) as usize;
    if let Some(c) = opts.classes
        && !(2..=MAX_CLASSES).contains(&c)
    {
        return Err(DataError::InvalidArgument {
            name: "classes",
            value: c.to_string(),
            expected: format!("2..={MAX_CLASSES} (privpred_data::limits::MAX_CLASSES)"),
        });
    }
    if opts.classes.is_none() && maxl >= MAX_CLASSES {
        let (p, i, y) = first_label_at_or_above(MAX_CLASSES, (train, &tr), test, te.as_ref());
        return Err(DataError::Format {
            path: p.to_path_buf(),
            reason: format!(
                "label {y} in data row {}: labels are class indices 0..C-1 with at most {MAX_CLASSES} classes (privpred_data::limits::MAX_CLASSES)",
                i + 1
            ),
        });
    }
    let classes = match opts.classes {
        Some(c) => {
            if maxl >= c {
                let (p, i, y) = first_label_at_or_above(c, (train, &tr), test, te.as_ref());
                return Err(DataError::Format {
                    path: p.to_path_buf(),
                    reason: format!(
                        "label {y} in data row {} outside the class range 0..{c}",
                        i + 1
                    ),
                });
            }
            c
        }
        None => (maxl + 1).max(2),
    };
    let prov = |p: &Path, t: &crate::csvfile::CsvTable| Provenance {
        name: name.to_string(),
        source: p.display().to_string(),
        feature_shape: vec![t.d],
        class_names: Vec::new(),
        classes_from_labels: opts.classes.is_none(),
        ..Default::default()
    };
    let trp = prov(train, &tr);
    let train_ds = Dataset::new(tr.d, classes, tr.features, tr.labels, trp)?;
    match te {
        Some(te) => {
            let p = prov(test.unwrap_or(train), &te);
            Ok(Splits {
                train: train_ds,
                test: Dataset::new(te.d, classes, te.features, te.labels, p)?,
            })
        }
        None => holdout_test(train_ds, opts),
    }
}
