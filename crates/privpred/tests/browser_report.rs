//! The HTML report in a real browser: headless Chromium (Debian's `chromium` package, which
//! `.ci/run` installs) loads the report of `privpred compare` from a file, without network,
//! and must (1) build a DOM with the plots (inline SVG), the recommendation and the tables, (2)
//! log no console error or failed resource load, and (3) render a non-blank 1200×2400
//! screenshot. Without Chromium the test prints one line and passes, unless
//! `PRIVPRED_REQUIRE_BROWSER=1` (set by `.ci/run`), where a missing browser fails it.

mod common;

use common::{privpred as run, stderr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The browser: `$PRIVPRED_CHROMIUM`, else `chromium` (or `chromium-browser`) on the PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PRIVPRED_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Runs headless Chromium with a fresh profile and no network services, killing it after
/// two minutes; returns (success, stdout, stderr). Output goes to files, not pipes: a DOM
/// dump is larger than a pipe's buffer.
fn headless(browser: &Path, profile: &Path, extra: &[String], url: &str) -> (bool, String, String) {
    let out_path = profile.with_extension("stdout");
    let err_path = profile.with_extension("stderr");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for chromium") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    (status.success(), read(&out_path), read(&err_path))
}

/// Console errors and failed loads in Chromium's log (D-Bus and GPU chatter of a headless
/// container is not about the page).
fn page_errors(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            l.contains("CONSOLE")
                || l.contains("Uncaught")
                || l.contains("net::ERR_")
                || l.contains("Failed to load resource")
                || l.contains("Refused to")
        })
        .map(str::to_string)
        .collect()
}

fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&bytes[16..20]), be(&bytes[20..24])))
}

#[test]
fn compare_report_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        if std::env::var("PRIVPRED_REQUIRE_BROWSER").as_deref() == Ok("1") {
            panic!(
                "PRIVPRED_REQUIRE_BROWSER=1 but no chromium on the PATH (apt-get install -y chromium)"
            );
        }
        println!(
            "skipped: no chromium on the PATH (apt-get install -y chromium; PRIVPRED_REQUIRE_BROWSER=1 makes this a failure)"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // the error check sees errors: a page whose script throws is caught
    let bad = tmp.path().join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>throw new Error('boom')</script></body></html>",
    )
    .unwrap();
    let (_, _, log) = headless(
        &browser,
        &tmp.path().join("profile-bad"),
        &["--dump-dom".to_string()],
        &format!("file://{}", bad.display()),
    );
    assert!(
        !page_errors(&log).is_empty(),
        "the console check missed a thrown error: {log}"
    );
    // a name with markup in it: it must arrive escaped, not as elements
    let report = tmp.path().join("report <b>&.html");
    let o = run(&[
        "compare",
        "--dataset",
        "digits",
        "--epsilon",
        "0.5,1,2",
        "--budget",
        "1..1000:7",
        "--teachers",
        "16",
        "--repetitions",
        "3",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let url = format!(
        "file://{}",
        report
            .to_str()
            .unwrap()
            .replace('%', "%25")
            .replace(' ', "%20")
            .replace('<', "%3C")
            .replace('>', "%3E")
            .replace('&', "%26")
    );

    // 1. the DOM after loading
    let (ok, html, log) = headless(
        &browser,
        &tmp.path().join("profile-dom"),
        &["--dump-dom".to_string()],
        &url,
    );
    assert!(ok, "chromium failed: {log}");
    assert!(html.contains("</html>"), "no page loaded: {log}");
    // 3 plots against B (one per ε) and 6 against ε (at most 6 budgets shown)
    assert_eq!(html.matches("<svg").count(), 9, "plots missing");
    assert!(html.matches("<polyline").count() + html.matches("<path").count() > 0);
    for needle in [
        "id=\"recommendation\"",
        "Which private method for digits?",
        "class=\"results\"",
        "class=\"guarantees\"",
        "id=\"command\"",
        "&lt;b&gt;&amp;.html",
    ] {
        assert!(html.contains(needle), "{needle} missing from the DOM");
    }
    assert!(
        !html.contains("<b>&amp;.html"),
        "markup from user input became elements"
    );
    let errors = page_errors(&log);
    assert!(errors.is_empty(), "page errors: {errors:#?}");

    // 2. a screenshot
    let png = tmp.path().join("out.png");
    let (ok, _, log) = headless(
        &browser,
        &tmp.path().join("profile-shot"),
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1200,2400".to_string(),
        ],
        &url,
    );
    assert!(ok, "chromium failed: {log}");
    let errors = page_errors(&log);
    assert!(errors.is_empty(), "page errors: {errors:#?}");
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert_eq!(png_size(&bytes), Some((1200, 2400)));
    // a blank 1200×2400 page compresses to a few kB; plots and tables make it far larger
    assert!(
        bytes.len() > 50_000,
        "screenshot looks blank ({} bytes)",
        bytes.len()
    );
    if let Some(keep) = std::env::var_os("PRIVPRED_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).expect("copy the screenshot");
    }
}
