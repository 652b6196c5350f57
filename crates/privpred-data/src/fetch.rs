//! Obtaining named datasets into the cache.

use crate::error::{DataError, Result};
use crate::load::LoadOptions;
use crate::spec::DatasetSpec;
use std::path::PathBuf;

/// Obtains a named dataset into its cache directory and returns that directory.
pub fn fetch(spec: &DatasetSpec, _opts: &LoadOptions) -> Result<PathBuf> {
    Err(DataError::NotFound(format!(
        "fetching {} is not available yet",
        spec.name()
    )))
}
