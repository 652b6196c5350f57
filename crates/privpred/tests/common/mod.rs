//! Helpers shared by the CLI integration tests: run the `privpred` binary built for this test
//! run and check its exit status, output and error text. Each test file uses a subset.
#![allow(dead_code)]

use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of the `privpred` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_privpred");

/// Runs `privpred ARGS` to completion.
pub fn privpred(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run privpred")
}

/// Runs `privpred ARGS` with extra environment variables.
pub fn privpred_env<V: AsRef<OsStr>>(args: &[&str], env: &[(&str, V)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run privpred")
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// (exit code, stdout, stderr); -1 when killed by a signal.
pub fn outcome(o: &Output) -> (i32, String, String) {
    (o.status.code().unwrap_or(-1), stdout(o), stderr(o))
}

/// (exit code, stdout, stderr) of `privpred ARGS`.
pub fn capture(args: &[&str]) -> (i32, String, String) {
    outcome(&privpred(args))
}

/// (exit code, stdout, stderr) of `privpred ARGS` with extra environment variables.
pub fn capture_env<V: AsRef<OsStr>>(args: &[&str], env: &[(&str, V)]) -> (i32, String, String) {
    outcome(&privpred_env(args, env))
}

/// (exit code, stderr) of `privpred ARGS`.
pub fn code(args: &[&str]) -> (i32, String) {
    let o = privpred(args);
    (o.status.code().unwrap_or(-1), stderr(&o))
}

/// Standard output of `privpred ARGS`, which must succeed.
pub fn ok(args: &[&str]) -> String {
    let o = privpred(args);
    assert!(
        o.status.success(),
        "privpred {args:?} failed: {}\n{}",
        stderr(&o),
        stdout(&o)
    );
    stdout(&o)
}

/// The one JSON object a successful run printed.
pub fn json_of(o: &Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// The one JSON object `privpred ARGS` printed; the run must succeed.
pub fn json(args: &[&str]) -> Value {
    let o = privpred(args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    json_of(&o)
}

/// `privpred ARGS` is a usage error: exit code 2, `needle` named on stderr, no panic, no NaN
/// printed.
pub fn assert_bad(args: &[&str], needle: &str) {
    let o = privpred(args);
    assert_eq!(o.status.code(), Some(2), "{args:?} should exit 2");
    let err = stderr(&o);
    assert!(
        err.contains(needle),
        "{args:?}: stderr {err:?} should name {needle}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(!stdout(&o).contains("NaN"));
}

/// The CIFAR-10 JPEG copy through the normal resolution order (`$PRIVPRED_DATA_DIR`, the
/// cache, `shared/data` beside the repository), or `None` after one printed skip line naming
/// `test` (a test failure instead when `PRIVPRED_REQUIRE_DATA=1`): see
/// `privpred_data::testdata`.
pub fn cifar_or_skip(test: &str) -> Option<PathBuf> {
    privpred_data::testdata::cifar10_jpeg_or_skip(test)
}

/// 30 training and 20 test images per class of the CIFAR-10 JPEG copy as an image folder
/// (`images:DIR`) under `dir`, extracted with the system `tar`; `None` (the test skips, see
/// [`cifar_or_skip`]) when the copy is absent.
pub fn small_cifar(dir: &Path, test: &str) -> Option<PathBuf> {
    let tarball = cifar_or_skip(test)?;
    let dst = dir.join("cifar-small");
    std::fs::create_dir_all(&dst).unwrap();
    let o = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&dst)
        .args(["--wildcards", "train/*/00[0-2]?.jpg", "test/*/00[0-1]?.jpg"])
        .output()
        .expect("the system tar runs");
    assert!(o.status.success(), "tar: {}", stderr(&o));
    Some(dst)
}
