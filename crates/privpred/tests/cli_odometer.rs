//! The data owner's privacy odometer at the CLI: `privpred odometer limit|show` and
//! `train --odometer`. Every fit on a dataset is charged its whole guarantee before training;
//! a fit that would take the total (basic composition) past the owner's limit is refused with
//! exit code 2 and writes nothing; concurrent trainers cannot both pass the limit; a fit that
//! stops before writing its model is not charged. The PostgreSQL variants run when
//! `PRIVPRED_TEST_POSTGRES` is set.

mod common;

use common::{capture, ok, toy_csv};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn show(odo: &str, dataset: &str) -> Value {
    let out = ok(&[
        "odometer",
        "show",
        "--odometer",
        odo,
        "--dataset",
        dataset,
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["datasets"].as_array().unwrap().len(), 1, "{v}");
    v["datasets"][0].clone()
}

/// `train METHOD --dataset DS --odometer ODO --out DIR/NAME.safetensors ARGS…`.
fn train(
    dir: &Path,
    odo: &str,
    ds: &str,
    name: &str,
    method: &str,
    args: &[&str],
) -> (i32, String, String, PathBuf) {
    let out = dir.join(format!("{name}.safetensors"));
    let mut all = vec![
        "train",
        method,
        "--dataset",
        ds,
        "--classes",
        "3",
        "--odometer",
        odo,
    ];
    // linear DP-SGD takes no λ (refused by name); the others a fixed public one
    if method != "dp-sgd" {
        all.extend_from_slice(&["--lambda", "1e-2"]);
    }
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    all.extend_from_slice(args);
    let (c, o, e) = capture(&all);
    (c, o, e, out)
}

fn limit(odo: &str, ds: &str, eps: &str, delta: &str) {
    ok(&[
        "odometer",
        "limit",
        "--odometer",
        odo,
        "--dataset",
        ds,
        "--epsilon",
        eps,
        "--delta",
        delta,
    ]);
}

/// A PostgreSQL odometer in a fresh schema, or None when not configured.
fn postgres_odometer(test: &str) -> Option<String> {
    let Ok(base) = std::env::var("PRIVPRED_TEST_POSTGRES") else {
        eprintln!("skipping the PostgreSQL variant of {test}: PRIVPRED_TEST_POSTGRES is not set");
        return None;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("odo_{test}_{}_{nanos}", std::process::id()).to_lowercase();
    privpred_answer::odometer::create_test_schema(
        &privpred_answer::LedgerSpec::Postgres(base.clone()),
        &schema,
    )
    .expect("create a test schema in PRIVPRED_TEST_POSTGRES");
    Some(if base.contains("://") {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options=-csearch_path%3D{schema}")
    } else {
        format!("{base} options='-c search_path={schema}'")
    })
}

/// Model sensitivity (ε = 0.5) and prediction sensitivity (ε = 0.5 for all B = 10 answers)
/// fill a limit of ε = 1 exactly; the next fit, however small, is refused before training
/// and writes nothing, and so is the same data in another row order. The records add up.
fn refuses_past_the_limit(odo: &str) {
    let dir = tempfile::tempdir().unwrap();
    let csv = toy_csv(dir.path(), 300);
    let ds = format!("csv-pixels:{}", csv.display());
    limit(odo, &ds, "1", "1e-5");
    let (c, _, e, _) = train(
        dir.path(),
        odo,
        &ds,
        "a",
        "model-sensitivity",
        &["--epsilon", "0.5"],
    );
    assert_eq!(c, 0, "{e}");
    assert!(e.contains("total 1 fit(s), epsilon = 0.5"), "{e}");
    let (c, _, e, _) = train(
        dir.path(),
        odo,
        &ds,
        "b",
        "prediction-sensitivity",
        &["--epsilon", "0.5", "--delta", "1e-5", "--budget", "10"],
    );
    assert_eq!(c, 0, "{e}");
    let rec = show(odo, &ds);
    assert_eq!(rec["spent"]["fits"], 2, "{rec}");
    assert_eq!(rec["spent"]["epsilon"], 1.0, "{rec}");
    assert_eq!(rec["spent"]["delta"], 1e-5, "{rec}");
    assert_eq!(rec["fits"][1]["budget"], 10, "{rec}");
    assert!(
        rec["fits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["state"] == "released"),
        "{rec}"
    );

    let (c, _, e, out) = train(
        dir.path(),
        odo,
        &ds,
        "c",
        "model-sensitivity",
        &["--epsilon", "0.01"],
    );
    assert_eq!(c, 2, "{e}");
    for needle in [
        "2 fit(s) spent epsilon = 1, delta = 1e-5",
        "would cost epsilon = 0.01, delta = 0",
        "limit epsilon = 1, delta = 1e-5",
    ] {
        assert!(e.contains(needle), "{needle}: {e}");
    }
    assert!(!out.exists(), "a refused fit wrote its model");
    // the same rows in reverse order (another file) are the same dataset
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let header = lines.remove(0);
    lines.reverse();
    let rev = dir.path().join("reversed.csv");
    std::fs::write(&rev, format!("{header}\n{}\n", lines.join("\n"))).unwrap();
    let rds = format!("csv-pixels:{}", rev.display());
    let (c, _, e, _) = train(
        dir.path(),
        odo,
        &rds,
        "e",
        "model-sensitivity",
        &["--epsilon", "0.01"],
    );
    assert_eq!(c, 2, "{e}");
    // a non-private model has no finite guarantee: it passes any limit
    let (c, _, e, out) = train(dir.path(), odo, &ds, "f", "non-private", &[]);
    assert_eq!(c, 2, "{e}");
    assert!(e.contains("no finite guarantee"), "{e}");
    assert!(!out.exists());
    assert_eq!(show(odo, &ds)["spent"]["fits"], 2);
    // raising the limit lets the next fit through
    limit(odo, &ds, "1.5", "1e-5");
    let (c, _, e, _) = train(
        dir.path(),
        odo,
        &ds,
        "g",
        "model-sensitivity",
        &["--epsilon", "0.5"],
    );
    assert_eq!(c, 0, "{e}");
    assert_eq!(show(odo, &ds)["spent"]["epsilon"], 1.5);
}

#[test]
fn a_fit_past_the_limit_is_refused_before_training_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let odo = dir.path().join("odometer.sqlite");
    refuses_past_the_limit(odo.to_str().unwrap());
}

#[test]
fn a_fit_past_the_limit_is_refused_before_training_postgres() {
    if let Some(odo) = postgres_odometer("limit") {
        refuses_past_the_limit(&odo);
    }
}

/// N trainers started at once with ε = 0.25 each against a limit of ε = 1: exactly 4 are
/// charged and write their models, the rest are refused with exit 2 and write nothing.
fn concurrent_trainers(odo: &str) {
    let dir = tempfile::tempdir().unwrap();
    let ds = format!("csv-pixels:{}", toy_csv(dir.path(), 300).display());
    limit(odo, &ds, "1", "0");
    let n = 10;
    let children: Vec<_> = (0..n)
        .map(|i| {
            let out = dir.path().join(format!("m{i}.safetensors"));
            let c = common::bin()
                .args([
                    "train",
                    "model-sensitivity",
                    "--dataset",
                    &ds,
                    "--classes",
                    "3",
                    "--epsilon",
                    "0.25",
                ])
                .args([
                    "--lambda",
                    "1e-2",
                    "--odometer",
                    odo,
                    "--out",
                    out.to_str().unwrap(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (c, out)
        })
        .collect();
    let mut passed = 0;
    for (c, out) in children {
        let o = c.wait_with_output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        match o.status.code() {
            Some(0) => {
                passed += 1;
                assert!(out.exists());
            }
            Some(2) => {
                assert!(e.contains("past the limit epsilon = 1"), "{e}");
                assert!(!out.exists());
            }
            other => panic!("exit {other:?}: {e}"),
        }
    }
    assert_eq!(passed, 4);
    let rec = show(odo, &ds);
    assert_eq!(rec["spent"]["fits"], 4, "{rec}");
    assert_eq!(rec["spent"]["epsilon"], 1.0, "{rec}");
}

#[test]
fn concurrent_trainers_cannot_both_pass_the_limit_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let odo = dir.path().join("odometer.sqlite");
    concurrent_trainers(&format!("sqlite:{}", odo.display()));
}

#[test]
fn concurrent_trainers_cannot_both_pass_the_limit_postgres() {
    if let Some(odo) = postgres_odometer("concurrent") {
        concurrent_trainers(&odo);
    }
}

/// The odometer is created by `odometer limit` only: a fit names a missing odometer or a
/// dataset without a limit and is refused (exit 2) without creating anything; seeded and
/// hold-out-selected fits are refused; a fit that fails after its reservation stays charged
/// (no refund); bad arguments exit 2.
#[test]
fn a_missing_odometer_or_limit_refuses_and_a_failed_fit_stays_charged() {
    let dir = tempfile::tempdir().unwrap();
    let ds = format!("csv-pixels:{}", toy_csv(dir.path(), 300).display());
    let odo = dir.path().join("odo.sqlite");
    let o = odo.to_str().unwrap();
    let (c, _, e, _) = train(
        dir.path(),
        o,
        &ds,
        "a",
        "model-sensitivity",
        &["--epsilon", "0.5"],
    );
    assert_eq!(c, 2, "{e}");
    assert!(
        e.contains("does not exist") && e.contains("odometer limit"),
        "{e}"
    );
    assert!(!odo.exists(), "a fit created the odometer");
    let (c, _, e) = capture(&["odometer", "show", "--odometer", o]);
    assert_eq!(c, 2, "{e}");
    // a limit on another key: this dataset has none
    ok(&[
        "odometer",
        "limit",
        "--odometer",
        o,
        "--key",
        "other",
        "--epsilon",
        "1",
    ]);
    let (c, _, e, _) = train(
        dir.path(),
        o,
        &ds,
        "a",
        "model-sensitivity",
        &["--epsilon", "0.5"],
    );
    assert_eq!(c, 2, "{e}");
    assert!(e.contains("no limit for dataset sha256:"), "{e}");
    // the owner's own key
    let (c, _, e, _) = train(
        dir.path(),
        o,
        &ds,
        "a",
        "model-sensitivity",
        &["--epsilon", "0.5", "--odometer-key", "other"],
    );
    assert_eq!(c, 0, "{e}");
    // refused before its reservation (DP-SGD needs δ > 0): nothing recorded
    let (c, _, e, out) = train(
        dir.path(),
        o,
        &ds,
        "b",
        "dp-sgd",
        &["--epsilon", "0.5", "--odometer-key", "other"],
    );
    assert_eq!(c, 2, "{e}");
    assert!(!out.exists());
    // seeded experiments and hold-out selections (`cv`) are refused, as the paper's calibration
    for (method, extra, needle) in [
        ("model-sensitivity", &["--seed", "3"][..], "--seed"),
        (
            "dp-sgd",
            &["--delta", "1e-6", "--clip", "cv"][..],
            "--clip cv",
        ),
        (
            "model-sensitivity",
            &["--calibration", "paper"][..],
            "paper",
        ),
    ] {
        let mut a = vec!["--epsilon", "0.1", "--odometer-key", "other"];
        a.extend_from_slice(extra);
        let (c, _, e, out) = train(dir.path(), o, &ds, "s", method, &a);
        assert_eq!(c, 2, "{extra:?}: {e}");
        assert!(
            e.contains(needle) && e.contains("odometer"),
            "{extra:?}: {e}"
        );
        assert!(!out.exists());
    }
    // reserved, then failed in training (DP-SGD diverges): the charge stays, no refund
    ok(&[
        "odometer",
        "limit",
        "--odometer",
        o,
        "--key",
        "dp",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
    ]);
    let (c, _, e, out) = train(
        dir.path(),
        o,
        &ds,
        "d",
        "dp-sgd",
        &[
            "--epsilon",
            "0.25",
            "--delta",
            "1e-6",
            "--clip",
            "0.5",
            "--learning-rate",
            "1e308",
            "--odometer-key",
            "dp",
        ],
    );
    assert_ne!(c, 0, "{e}");
    assert!(e.contains("no refund"), "{e}");
    assert!(!out.exists());
    let v: Value = serde_json::from_str(&ok(&[
        "odometer",
        "show",
        "--odometer",
        o,
        "--key",
        "dp",
        "--json",
    ]))
    .unwrap();
    assert_eq!(v["datasets"][0]["spent"]["fits"], 1, "{v}");
    assert_eq!(v["datasets"][0]["spent"]["epsilon"], 0.25, "{v}");
    assert_eq!(v["datasets"][0]["fits"][0]["state"], "reserved", "{v}");
    // bad arguments and files
    for (args, needle) in [
        (
            vec![
                "odometer",
                "limit",
                "--odometer",
                o,
                "--key",
                "k",
                "--epsilon",
                "-1",
            ],
            "epsilon = -1",
        ),
        (
            vec![
                "odometer",
                "limit",
                "--odometer",
                o,
                "--key",
                "k",
                "--epsilon",
                "1",
                "--delta",
                "1",
            ],
            "delta = 1",
        ),
        (
            vec![
                "odometer",
                "limit",
                "--odometer",
                o,
                "--key",
                "",
                "--epsilon",
                "1",
            ],
            "odometer key",
        ),
        (
            vec!["odometer", "show", "--odometer", o, "--key", "nope"],
            "no limit for dataset nope",
        ),
        (
            vec![
                "odometer",
                "show",
                "--odometer",
                dir.path().to_str().unwrap(),
            ],
            "not a regular file",
        ),
    ] {
        let (c, _, e) = capture(&args);
        assert_eq!(c, 2, "{args:?}: {e}");
        assert!(e.contains(needle), "{args:?}: {e}");
    }
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(
        &junk,
        b"not a database at all, just some text that is long enough",
    )
    .unwrap();
    let (c, _, e) = capture(&["odometer", "show", "--odometer", junk.to_str().unwrap()]);
    assert_eq!(c, 2, "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// A parameter the fit would refuse once it runs (a batch or teacher count above the rows it
/// trains on, one that does not fit the private selection's parts, N̂ under replace-one, a
/// zero epoch count) is refused before the odometer's reservation: exit 2 naming it, nothing
/// written and nothing charged. A fit that runs is charged.
#[test]
fn a_bad_parameter_is_refused_before_the_reservation_and_not_charged() {
    let dir = tempfile::tempdir().unwrap();
    let ds = format!("csv-pixels:{}", toy_csv(dir.path(), 300).display());
    let odo = dir.path().join("odo.sqlite");
    let o = odo.to_str().unwrap();
    ok(&[
        "odometer",
        "limit",
        "--odometer",
        o,
        "--key",
        "p",
        "--epsilon",
        "100",
        "--delta",
        "1e-3",
    ]);
    let spent = || -> Value {
        let v: Value = serde_json::from_str(&ok(&[
            "odometer",
            "show",
            "--odometer",
            o,
            "--key",
            "p",
            "--json",
        ]))
        .unwrap();
        v["datasets"][0]["spent"].clone()
    };
    let dp: &[&str] = &["--epsilon", "1", "--delta", "1e-6", "--clip", "0.5"];
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "dp-sgd",
            [dp, &["--batch-size", "100000"]].concat(),
            "batch-size",
        ),
        ("dp-sgd", [dp, &["--epochs", "0"]].concat(), "epochs"),
        (
            "subsample-aggregate",
            vec!["--epsilon", "1", "--budget", "10", "--teachers", "100000"],
            "teachers",
        ),
        (
            "loss-perturbation",
            vec!["--epsilon", "1", "--public-n", "300"],
            "public-n",
        ),
    ];
    for (method, args, needle) in cases {
        let mut a = args.clone();
        a.extend_from_slice(&["--odometer-key", "p"]);
        let (c, _, e, out) = train(dir.path(), o, &ds, "bad", method, &a);
        assert_eq!(c, 2, "{method} {args:?}: {e}");
        assert!(e.contains(needle), "{method} {args:?}: {e}");
        assert!(!e.contains("charged"), "{method} {args:?}: {e}");
        assert!(!out.exists());
        assert_eq!(spent()["fits"], 0, "{method} {args:?} was charged");
    }
    // teachers that fit the training set but not the private selection's parts
    let out = dir.path().join("sel.safetensors");
    let (c, _, e) = capture(&[
        "train",
        "subsample-aggregate",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--odometer",
        o,
        "--odometer-key",
        "p",
        "--epsilon",
        "1",
        "--budget",
        "10",
        "--teachers",
        "200",
        "--lambda",
        "private",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(c, 2, "{e}");
    assert!(
        e.contains("teachers") && e.contains("private selection"),
        "{e}"
    );
    assert!(!out.exists());
    assert_eq!(
        spent()["fits"],
        0,
        "a refused private selection was charged"
    );
    // a fit that runs is charged
    let (c, _, e, out) = train(
        dir.path(),
        o,
        &ds,
        "good",
        "dp-sgd",
        &[dp, &["--batch-size", "16", "--odometer-key", "p"]].concat(),
    );
    assert_eq!(c, 0, "{e}");
    assert!(out.exists());
    assert_eq!(spent()["fits"], 1);
}
