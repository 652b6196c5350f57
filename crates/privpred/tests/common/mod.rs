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

/// The toy set of the train/predict/serve tests, written to `dir/toy.csv`: `rows` rows of 8
/// pixel-like features (0..255) in 3 well-separated classes (class `i % 3`), label last, from a
/// fixed linear congruential sequence (seed 777), so every test file trains on the same data.
pub fn toy_csv(dir: &Path, rows: usize) -> PathBuf {
    let p = dir.join("toy.csv");
    let mut s = String::from("f0,f1,f2,f3,f4,f5,f6,f7,label\n");
    let mut state = 777u64;
    for i in 0..rows {
        let y = i % 3;
        let row: Vec<String> = (0..8)
            .map(|j| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (((state >> 33) % 60) as u32 + if j % 3 == y { 180 } else { 0 }).to_string()
            })
            .collect();
        s.push_str(&format!("{},{}\n", row.join(","), y));
    }
    std::fs::write(&p, s).unwrap();
    p
}

/// [`toy_csv`] as the `--dataset` argument (`csv:PATH`).
pub fn toy_dataset(dir: &Path, rows: usize) -> String {
    format!("csv:{}", toy_csv(dir, rows).display())
}

/// `privpred train METHOD --dataset DATASET --out DIR/NAME.safetensors ARGS…`, which must
/// succeed; returns the artifact's path and the command's standard output.
pub fn train_into(
    dir: &Path,
    name: &str,
    method: &str,
    dataset: &str,
    args: &[&str],
) -> (PathBuf, String) {
    let out = dir.join(format!("{name}.safetensors"));
    let mut all = vec!["train", method, "--dataset", dataset, "--out"];
    all.push(out.to_str().expect("a UTF-8 temporary path"));
    all.extend_from_slice(args);
    let stdout = ok(&all);
    (out, stdout)
}

/// The budget record of a model in its default ledger (`privpred ledger show --model`).
pub fn ledger_record(model: &Path) -> Value {
    let v: Value = serde_json::from_str(&ok(&[
        "ledger",
        "show",
        "--model",
        model.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    v["records"][0].clone()
}
