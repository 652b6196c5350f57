//! Dataset loading: [`load`] reads a dataset from local files ([`crate::read`]) and, when
//! `LoadOptions::fetch` is set and a named dataset is found nowhere, fetches it into the cache
//! ([`crate::fetch::fetch`]) and reads it from there.
//!
//! Resolution order for a named dataset (first hit wins): `LoadOptions::data_dir` (the
//! directory itself, then `<dir>/<name>/`), the environment variable `PRIVPRED_DATA_DIR`
//! (likewise), the per-user cache `${XDG_CACHE_HOME:-~/.cache}/privpred/<name>/`, known
//! system locations (Debian's `/usr/share/datasets/fashion-mnist/`; for CIFAR-10 a
//! `shared/data/` folder beside the working directory or one of its ancestors, e.g.
//! `../shared/data/cifar10-jpeg.tar.gz` seen from a repository root; never required, and
//! `PRIVPRED_NO_SHARED_DATA=1` turns this look-up off), and finally, when
//! `LoadOptions::fetch` is set, [`crate::fetch::fetch`] into the cache. Files with a known
//! SHA-256 are verified on every load; a mismatch is an error and the file is not used.
//!
//! The discovery helpers and options live in [`crate::read`] (which `fetch` uses too, so
//! neither imports the other) and are re-exported here under their old paths.

use crate::error::Result;
use crate::read::{self, not_found, try_named_dir};
use crate::spec::DatasetSpec;

pub use crate::read::{
    CIFAR10_JPEG_FILE, ENV_DATA_DIR, ENV_NO_SHARED_DATA, LoadOptions, Splits, cache_dir,
    cache_root, candidate_dirs, load_idx_dir, shared_data_dirs,
};
use std::path::{Path, PathBuf};

/// Where CIFAR-10 is found in the resolution order of [`candidate_dirs`] (`data_dir`,
/// `$PRIVPRED_DATA_DIR`, the cache, `shared/data`): the first JPEG copy
/// ([`CIFAR10_JPEG_FILE`]) or directory of binary batches, whichever comes first. Nothing is
/// fetched; `None` when CIFAR-10 is nowhere.
pub fn find_cifar10(data_dir: Option<&Path>) -> Option<PathBuf> {
    let opts = LoadOptions {
        data_dir: data_dir.map(Path::to_path_buf),
        fetch: false,
        ..Default::default()
    };
    candidate_dirs("cifar10", &opts)
        .into_iter()
        .find_map(|(d, _)| {
            let jpeg = d.join(CIFAR10_JPEG_FILE);
            if jpeg.is_file() {
                return Some(jpeg);
            }
            [d.clone(), d.join("cifar-10-batches-bin")]
                .into_iter()
                .find(|b| crate::cifar::batch_files(b).is_some())
        })
}

/// The CIFAR-10 JPEG copy ([`CIFAR10_JPEG_FILE`]) in the resolution order of
/// [`candidate_dirs`]; `None` when it is nowhere (binary batches do not count).
pub fn find_cifar10_jpeg(data_dir: Option<&Path>) -> Option<PathBuf> {
    let opts = LoadOptions {
        data_dir: data_dir.map(Path::to_path_buf),
        fetch: false,
        ..Default::default()
    };
    candidate_dirs("cifar10", &opts)
        .into_iter()
        .map(|(d, _)| d.join(CIFAR10_JPEG_FILE))
        .find(|p| p.is_file())
}

/// Loads a dataset as train and test splits with raw f32 features (pixels 0..255), fetching
/// a missing named dataset into the cache when `opts.fetch` is set.
pub fn load(spec: &DatasetSpec, opts: &LoadOptions) -> Result<Splits> {
    crate::table::check_schema_applies(spec, opts.schema.is_some())?;
    if *spec == DatasetSpec::Mnist1m {
        // its test split is MNIST's, which may need fetching
        return read::load_mnist1m(opts, || Ok(load(&DatasetSpec::Mnist, opts)?.test));
    }
    if let Some(s) = read::read(spec, opts)? {
        return Ok(s);
    }
    // Only the named datasets (mnist, fashion-mnist, digits, cifar10) can be missing.
    let name = spec.name();
    if opts.fetch {
        let dir = crate::fetch::fetch(spec, opts)?;
        if let Some(s) = try_named_dir(spec, &dir, opts)? {
            return Ok(s);
        }
    }
    Err(not_found(&name, opts))
}

impl crate::read::Splits {
    /// The rows of the whole training input, as the trainer reads them (after a table's
    /// schema, before any preprocessing): the training split, with the test split when that
    /// is a hold-out of the same input ([`crate::Provenance::held_out`]) — the rows the
    /// caller handed over for training, whichever part the seeded hold-out kept for testing.
    /// Row order is the splits'; the odometer's identity does not depend on it.
    pub fn training_input(&self) -> (usize, Vec<f32>, Vec<u32>) {
        let (tr, te) = (&self.train, &self.test);
        if !tr.provenance.held_out {
            return (tr.d, tr.features.clone(), tr.labels.clone());
        }
        let mut f = Vec::with_capacity(tr.features.len() + te.features.len());
        f.extend_from_slice(&tr.features);
        f.extend_from_slice(&te.features);
        let mut y = Vec::with_capacity(tr.n + te.n);
        y.extend_from_slice(&tr.labels);
        y.extend_from_slice(&te.labels);
        (tr.d, f, y)
    }
}
