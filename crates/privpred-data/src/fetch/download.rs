//! A resumable, SHA-256-verified HTTPS download (the canonical CIFAR-10 binary tarball):
//! through a `.part` file with a progress bar, plus the test-only overrides of its address
//! and checksum and the instructions shown when no network is available.

use super::*;

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
        let bar = progress_bar(progress, total, dest, start);
        let reader = resp.into_body().into_reader();
        let done = copy_body(reader, &mut f, &bar, start, d, &part)?;
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

/// The download's progress bar on standard error (hidden without `progress`), at `start` of
/// `total` bytes, labelled with the destination's file name.
fn progress_bar(
    progress: bool,
    total: Option<u64>,
    dest: &Path,
    start: u64,
) -> indicatif::ProgressBar {
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
    bar
}

/// Appends the response body to the `.part` file `f` (which holds `start` bytes), advancing
/// `bar`; returns the bytes the file then holds. A broken-off transfer keeps what arrived, so
/// the next fetch resumes from there.
fn copy_body(
    mut reader: impl std::io::Read,
    f: &mut std::fs::File,
    bar: &indicatif::ProgressBar,
    start: u64,
    d: &Download,
    part: &Path,
) -> std::result::Result<u64, DownloadError> {
    use std::io::Write;
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
        f.write_all(&buf[..k]).map_err(|source| DataError::Io {
            path: part.to_path_buf(),
            source,
        })?;
        done += k as u64;
        bar.set_position(done);
    }
    Ok(done)
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
