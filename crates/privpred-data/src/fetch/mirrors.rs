//! The mirror route of MNIST and Fashion-MNIST: the four gzipped IDX files downloaded with the
//! system `curl` from `PRIVPRED_MIRROR` or the public mirrors of [`crate::known`], each
//! decompressed file verified against its reference SHA-256 before anything is installed.

use super::*;

/// The mirror base URLs tried for `spec`, in order: `PRIVPRED_MIRROR` when set and non-empty,
/// then the public mirrors of [`known::MNIST_MIRRORS`] / [`known::FASHION_MNIST_MIRRORS`]
/// (none for other datasets).
pub fn mirrors(spec: &DatasetSpec) -> Vec<String> {
    let public: &[&str] = match spec {
        DatasetSpec::Mnist => &known::MNIST_MIRRORS,
        DatasetSpec::FashionMnist => &known::FASHION_MNIST_MIRRORS,
        _ => return Vec::new(),
    };
    std::env::var(known::MIRROR_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .into_iter()
        .chain(public.iter().map(|s| s.to_string()))
        .collect()
}

/// Downloads the four gzipped IDX files of `mnist` or `fashion-mnist` (`<base><stem>.gz`)
/// from the first of `mirrors` that works, with the system `curl`
/// (`curl -fsSL --retry 2 -o TMP URL`; any URL scheme curl accepts, `file://` included),
/// decompresses them, verifies every decompressed file against its reference SHA-256 in
/// [`known`] and installs them atomically into `target` (a temporary sibling directory
/// renamed into place). A file whose checksum does not match is not used: that mirror fails
/// with [`DataError::Checksum`] and nothing is installed from it. With a single mirror its
/// error is returned as is; with several, an error listing each mirror's failure.
pub fn fetch_from_mirrors(
    spec: &DatasetSpec,
    target: &Path,
    mirrors: &[String],
) -> Result<FetchReport> {
    let table: &'static [(&'static str, &'static str)] = match spec {
        DatasetSpec::Mnist => &known::MNIST,
        DatasetSpec::FashionMnist => &known::FASHION_MNIST,
        _ => {
            return Err(DataError::InvalidArgument {
                name: "dataset",
                value: spec.name(),
                expected: "mnist or fashion-mnist (the datasets with known mirrors)".into(),
            });
        }
    };
    if mirrors.is_empty() {
        return Err(DataError::InvalidArgument {
            name: "mirrors",
            value: "(none)".into(),
            expected: "at least one base URL holding the four <stem>.gz IDX files".into(),
        });
    }
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| DataError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let mut errors = Vec::new();
    for base in mirrors {
        match fetch_one_mirror(spec, table, target, base) {
            Ok(r) => return Ok(r),
            Err(e) if mirrors.len() == 1 => return Err(e),
            Err(e) => {
                eprintln!("{}: mirror {base} failed: {e}", spec.name());
                errors.push(format!("{base}: {e}"));
            }
        }
    }
    Err(DataError::NotFound(format!(
        "{}: every mirror failed: {}",
        spec.name(),
        errors.join("; ")
    )))
}

fn fetch_one_mirror(
    spec: &DatasetSpec,
    table: &'static [(&'static str, &'static str)],
    target: &Path,
    base: &str,
) -> Result<FetchReport> {
    let name = spec.name();
    let tmp = scratch(target)?;
    let stage = tmp.0.join(&name);
    std::fs::create_dir_all(&stage).map_err(|source| DataError::Io {
        path: stage.clone(),
        source,
    })?;
    let base = if base.ends_with('/') {
        base.to_string()
    } else {
        format!("{base}/")
    };
    for (stem, expected) in table {
        let url = format!("{base}{stem}.gz");
        let gz = tmp.0.join(format!("{stem}.gz"));
        eprintln!("fetching {name}: curl {url} …");
        run(
            Command::new("curl")
                .args(["-fsSL", "--retry", "2", "-o"])
                .arg(&gz)
                .arg(&url),
            &format!("curl {url}"),
        )?;
        let out = stage.join(stem);
        let actual = gunzip_hashing(&gz, &out, &url)?;
        let _ = std::fs::remove_file(&gz);
        if actual != *expected {
            return Err(DataError::Checksum {
                path: PathBuf::from(format!("{url} (decompressed)")),
                expected: expected.to_string(),
                actual,
            });
        }
    }
    let files = verify_idx_set(&stage, &name, table)?;
    install(&stage, target)?;
    Ok(FetchReport {
        dir: target.to_path_buf(),
        method: format!("download from {base} (curl)"),
        verified: true,
        files,
    })
}

/// Decompresses the gzip file `gz` into `out`, returning the SHA-256 of the decompressed
/// bytes; `url` names the source in errors.
fn gunzip_hashing(gz: &Path, out: &Path, url: &str) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Write};
    let f = std::fs::File::open(gz).map_err(|source| DataError::Io {
        path: gz.to_path_buf(),
        source,
    })?;
    let mut dec = flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(1 << 20, f));
    let o = std::fs::File::create(out).map_err(|source| DataError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, o);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = match dec.read(&mut buf) {
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(DataError::Format {
                    path: PathBuf::from(url),
                    reason: format!("not a valid gzip file: {e}"),
                });
            }
        };
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        w.write_all(&buf[..k]).map_err(|source| DataError::Io {
            path: out.to_path_buf(),
            source,
        })?;
    }
    w.flush().map_err(|source| DataError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    Ok(crate::fsutil::hex(&h.finalize()))
}
