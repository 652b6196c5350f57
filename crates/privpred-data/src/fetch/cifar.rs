//! CIFAR-10 installs: from a user-given source (the JPEG copy, the binary tarball or a
//! batches directory) or, without `--from`, by the verified HTTPS download of
//! [`super::download`] with the JPEG copy of a `shared/data` folder as the offline fallback.

use super::download::{cifar10_download, cifar10_manual_instructions, download_verified};
use super::*;

pub(super) fn fetch_cifar(target: &Path, from: Option<&Path>) -> Result<FetchReport> {
    fetch_cifar_checked(target, from, None)
}

/// [`fetch_cifar`] where `expected_binary_sha` (a test-only override) is accepted as the
/// reference SHA-256 of `cifar-10-binary.tar.gz` besides the canonical one.
fn fetch_cifar_checked(
    target: &Path,
    from: Option<&Path>,
    expected_binary_sha: Option<&str>,
) -> Result<FetchReport> {
    let tmp = scratch(target)?;
    let stage = tmp.0.join("cifar10");
    std::fs::create_dir_all(&stage).map_err(|source| DataError::Io {
        path: stage.clone(),
        source,
    })?;
    let src = match from {
        Some(p) => p.to_path_buf(),
        None => shared_data_dirs()
            .into_iter()
            .map(|d| d.join(crate::read::CIFAR10_JPEG_FILE))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                DataError::NotFound(
                    "cifar10: no source found; pass the JPEG copy (cifar10-jpeg.tar.gz), cifar-10-binary.tar.gz or a cifar-10-batches-bin directory with --from".into(),
                )
            })?,
    };
    let mut tarball_sha = None;
    let batches: Vec<String> = (1..=5)
        .map(|i| format!("data_batch_{i}.bin"))
        .chain(["test_batch.bin".to_string(), "batches.meta.txt".to_string()])
        .collect();
    let wanted: Vec<&str> = batches.iter().map(String::as_str).collect();
    if src.is_dir() {
        let d = if src.join("data_batch_1.bin").is_file() {
            src.clone()
        } else {
            src.join("cifar-10-batches-bin")
        };
        for w in &wanted {
            let p = d.join(w);
            if p.is_file() {
                std::fs::copy(&p, stage.join(w)).map_err(|source| DataError::Io {
                    path: p.clone(),
                    source,
                })?;
            }
        }
    } else {
        let sha = fsutil::sha256_file(&src)?;
        tarball_sha = Some(sha.clone());
        if sha == known::CIFAR10_JPEG_TARBALL {
            let dst = stage.join("cifar10-jpeg.tar.gz");
            std::fs::copy(&src, &dst).map_err(|source| DataError::Io {
                path: src.clone(),
                source,
            })?;
            install(&stage, target)?;
            return Ok(FetchReport {
                dir: target.to_path_buf(),
                method: format!("JPEG copy from {}", src.display()),
                verified: true,
                files: vec![("cifar10-jpeg.tar.gz".into(), sha)],
            });
        }
        if src.file_name().is_some_and(|n| n == "cifar10-jpeg.tar.gz") {
            return Err(DataError::Checksum {
                path: src,
                expected: known::CIFAR10_JPEG_TARBALL.into(),
                actual: sha,
            });
        }
        if src
            .file_name()
            .is_some_and(|n| n == known::CIFAR10_BINARY_FILE)
            && sha != known::CIFAR10_BINARY_TARBALL
            && expected_binary_sha.is_none_or(|e| e != sha)
        {
            return Err(DataError::Checksum {
                path: src,
                expected: expected_binary_sha
                    .unwrap_or(known::CIFAR10_BINARY_TARBALL)
                    .into(),
                actual: sha,
            });
        }
        extract_from_tar(&src, &wanted, &stage)?;
    }
    // Validate the batches by parsing them.
    let s = crate::read::read(
        &DatasetSpec::CifarBin(stage.clone()),
        &LoadOptions {
            fetch: false,
            ..Default::default()
        },
    )?;
    drop(s);
    // Verified when the tarball they came from matched its reference SHA-256.
    let verified = tarball_sha.as_deref().is_some_and(|h| {
        h == known::CIFAR10_BINARY_TARBALL || expected_binary_sha.is_some_and(|e| e == h)
    });
    let mut files = Vec::new();
    if let (true, Some(h)) = (verified, &tarball_sha) {
        files.push((known::CIFAR10_BINARY_FILE.to_string(), h.clone()));
    }
    for w in &wanted[..6] {
        files.push((w.to_string(), fsutil::sha256_file(&stage.join(w))?));
    }
    install(&stage, target)?;
    Ok(FetchReport {
        dir: target.to_path_buf(),
        method: format!("binary batches from {}", src.display()),
        verified,
        files,
    })
}

/// `data fetch cifar10` without `--from`: downloads the canonical binary tarball into
/// `<cache>/downloads/` ([`download_verified`]), installs its batches into `target` and
/// deletes the tarball. When the network is unreachable it installs the JPEG copy from a
/// `shared/data` folder if there is one, else fails with [`cifar10_manual_instructions`].
pub(super) fn fetch_cifar_online(target: &Path) -> Result<FetchReport> {
    let (d, overridden) = cifar10_download()?;
    if overridden {
        eprintln!(
            "warning: test-only overrides {TEST_CIFAR10_URL_ENV} / {TEST_CIFAR10_SHA256_ENV} in use: downloading {} instead of {}",
            d.url,
            known::CIFAR10_BINARY_URL
        );
    }
    let downloads = target
        .parent()
        .map(|p| p.join("downloads"))
        .unwrap_or_else(|| PathBuf::from("downloads"));
    let dest = downloads.join(known::CIFAR10_BINARY_FILE);
    if !dest.is_file() {
        eprintln!("fetching cifar10: {} …", d.url);
        match download_verified(&d, &dest, true) {
            Ok(()) => {}
            Err(DownloadError::Network(why)) => {
                let jpeg = (!overridden)
                    .then(|| {
                        shared_data_dirs()
                            .into_iter()
                            .map(|p| p.join(crate::read::CIFAR10_JPEG_FILE))
                            .find(|p| p.is_file())
                    })
                    .flatten();
                return match jpeg {
                    Some(p) => {
                        eprintln!(
                            "cifar10: {why}; installing the CIFAR-10 JPEG copy {} instead",
                            p.display()
                        );
                        fetch_cifar(target, Some(&p))
                    }
                    None => Err(DataError::NotFound(cifar10_manual_instructions(
                        &d, target, &why,
                    ))),
                };
            }
            Err(DownloadError::Other(e)) => return Err(e),
        }
    }
    let r = fetch_cifar_checked(target, Some(&dest), overridden.then_some(d.sha256.as_str()));
    if r.is_ok() {
        let _ = std::fs::remove_file(&dest);
    }
    r.map(|mut r| {
        r.method = format!("download of {}", d.url);
        r
    })
}
