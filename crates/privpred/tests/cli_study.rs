//! `privpred reproduce`, `merge` and `compare` end to end on the scikit-learn digits fixture
//! (real data, small): output files, sharding + merging equals an unsharded run, resuming after
//! an interruption gives byte-identical files, bad input exits with code 2.

mod common;

use common::{digits_compare, ok, privpred as run};
use std::path::{Path, PathBuf};

fn reproduce_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "reproduce",
        "fig1a",
        "--dataset",
        "digits",
        "--repetitions",
        "2",
        "--calibration",
        "paper,tight",
        "--seed",
        "3",
        "--out",
        out,
    ];
    v.extend_from_slice(extra);
    v
}

fn same(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(x == y, "{} and {} differ", a.display(), b.display());
}

const FILES: [&str; 5] = [
    "results.jsonl",
    "results.csv",
    "summary.csv",
    "summary.md",
    "manifest.json",
];

fn full_run(tmp: &Path) -> PathBuf {
    let full = tmp.join("full");
    let stdout = ok(&reproduce_args(full.to_str().unwrap(), &[]));
    assert!(stdout.contains("fig1a"), "{stdout}");
    full
}

#[test]
fn outputs_shards_merge_and_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let full = full_run(tmp.path());
    // Files: tidy rows in JSONL and CSV with every parameter, summary, plots.
    let jsonl = std::fs::read_to_string(full.join("results.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4 * 10 * 2 * 2);
    for key in [
        "unit_id",
        "calibration",
        "epsilon",
        "delta",
        "budget",
        "noise",
        "noise_param",
        "dataset_checksum",
        "seed",
        "data_dependent_steps",
        "accuracy",
        "nonprivate_accuracy",
    ] {
        assert!(rows[0].get(key).is_some(), "missing {key}: {}", rows[0]);
    }
    assert!(
        rows.iter()
            .all(|r| (0.0..=1.0).contains(&r["accuracy"].as_f64().unwrap()))
    );
    assert!(rows.iter().any(|r| {
        r["data_dependent_steps"]
            .as_str()
            .unwrap()
            .contains("cross-validated")
    }));
    // The defaults chosen on the training hold-out (docs/study.md): no bias
    // feature, λ picked by the mean hold-out accuracy of 5 private draws.
    assert!(
        rows.iter().all(|r| r["bias"].as_f64() == Some(0.0)),
        "{}",
        rows[0]
    );
    let cv: Vec<_> = rows.iter().filter(|r| !r["cv_draws"].is_null()).collect();
    assert!(!cv.is_empty());
    assert!(
        cv.iter().all(|r| r["cv_draws"].as_u64() == Some(5)),
        "{}",
        cv[0]
    );
    let csv = std::fs::read_to_string(full.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), rows.len() + 1);
    for f in [
        "fig1a-paper.png",
        "fig1a-paper.svg",
        "fig1a-tight.png",
        "fig1a-paper-vs-tight.png",
        "fig1a-paper-vs-tight.svg",
    ] {
        let m = std::fs::metadata(full.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(m.len() > 1000, "{f} is too small");
    }
    let png = std::fs::read(full.join("fig1a-paper.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // Shards 0/2 and 1/2, merged, equal the unsharded run byte for byte.
    let s0 = tmp.path().join("s0");
    let s1 = tmp.path().join("s1");
    ok(&reproduce_args(s0.to_str().unwrap(), &["--shard", "0/2"]));
    ok(&reproduce_args(s1.to_str().unwrap(), &["--shard", "1/2"]));
    let merged = tmp.path().join("merged");
    ok(&[
        "merge",
        s0.to_str().unwrap(),
        s1.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    for f in FILES {
        same(&full.join(f), &merged.join(f));
    }

    // Interrupted run: keep the first 37 finished units and a torn line, drop the final files.
    let cut = tmp.path().join("cut");
    std::fs::create_dir_all(&cut).unwrap();
    std::fs::copy(full.join("manifest.json"), cut.join("manifest.json")).unwrap();
    let partial = std::fs::read_to_string(full.join("results.partial.jsonl")).unwrap();
    let mut kept: String = partial.lines().take(37).map(|l| format!("{l}\n")).collect();
    kept.push_str(&partial.lines().nth(37).unwrap()[..25]);
    std::fs::write(cut.join("results.partial.jsonl"), kept).unwrap();
    // Without --resume the directory is refused (exit code 2).
    let o = run(&reproduce_args(cut.to_str().unwrap(), &[]));
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("--resume"));
    let stdout = ok(&reproduce_args(cut.to_str().unwrap(), &["--resume"]));
    assert!(stdout.contains("37 resumed"), "{stdout}");
    for f in FILES {
        same(&full.join(f), &cut.join(f));
    }
}

#[test]
fn bad_arguments_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let o = out.to_str().unwrap();
    for (args, needle) in [
        (vec!["reproduce", "fig9", "--out", o], "fig1a"),
        (
            vec!["reproduce", "fig1a", "--shard", "2/2", "--out", o],
            "--shard",
        ),
        (
            vec!["reproduce", "fig1a", "--repetitions", "0", "--out", o],
            "--repetitions",
        ),
        (
            vec![
                "compare",
                "--dataset",
                "digits",
                "--epsilon",
                "-1",
                "--budget",
                "10",
            ],
            "epsilon",
        ),
        (
            vec![
                "compare",
                "--dataset",
                "digits",
                "--epsilon",
                "1",
                "--budget",
                "0",
            ],
            "budget",
        ),
        (vec!["merge", "--out", o, "/nonexistent/dir"], "nonexistent"),
    ] {
        let r = run(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn compare_recommends_on_digits() {
    let out = ok(&digits_compare("2", &[]));
    for m in [
        "model-sensitivity",
        "loss-perturbation",
        "dp-sgd",
        "prediction-sensitivity",
        "subsample-aggregate",
    ] {
        assert!(out.contains(m), "{m} missing:\n{out}");
    }
    assert!(out.contains("Recommendation:"), "{out}");
}

/// fig2a: a private-training method's released model does not depend on B, so its rows are the
/// same draws at every B (seeded without B and computed once) — also when the B values fall
/// into different shards; budget-dependent methods still differ across B.
#[test]
fn fig2a_private_training_rows_are_shared_across_budgets() {
    let tmp = tempfile::tempdir().unwrap();
    let args = |out: &'static str, extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "reproduce",
            "fig2a",
            "--dataset",
            "digits",
            "--repetitions",
            "2",
            "--seed",
            "5",
            "--out",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.push(tmp.path().join(out).to_string_lossy().into_owned());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let a = args("full", &[]);
    ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let rows: Vec<serde_json::Value> =
        std::fs::read_to_string(tmp.path().join("full/results.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let acc = |method: &str, rep: u64| -> Vec<f64> {
        rows.iter()
            .filter(|r| r["method"] == method && r["repetition"] == rep)
            .map(|r| r["accuracy"].as_f64().unwrap())
            .collect()
    };
    for m in ["model-sensitivity", "loss-perturbation"] {
        for rep in 0..2 {
            let v = acc(m, rep);
            assert_eq!(v.len(), 18, "{m}: one row per B");
            assert!(
                v.iter().all(|x| *x == v[0]),
                "{m} r{rep} differs across B: {v:?}"
            );
        }
    }
    let sa = acc("subsample-aggregate", 0);
    assert!(
        sa.iter().any(|x| *x != sa[0]),
        "subsample-and-aggregate must depend on B"
    );
    // the shards of a sharded run compute the shared rows independently, identically
    for k in 0..3 {
        let shard = format!("{k}/3");
        let out: &'static str = ["s0", "s1", "s2"][k];
        let a = args(out, &["--shard", Box::leak(shard.into_boxed_str())]);
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let merged = tmp.path().join("merged");
    let mut m = vec!["merge".to_string()];
    for s in ["s0", "s1", "s2"] {
        m.push(tmp.path().join(s).to_string_lossy().into_owned());
    }
    m.extend(["--out".into(), merged.to_string_lossy().into_owned()]);
    ok(&m.iter().map(String::as_str).collect::<Vec<_>>());
    for f in ["results.jsonl", "results.csv", "summary.csv"] {
        same(&tmp.path().join("full").join(f), &merged.join(f));
    }
}

/// The rows of a run's `results.jsonl`.
fn result_rows(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A result row without the fields that name its unit and calibration mode (what two modes
/// sharing draws may differ in).
fn without_id_and_calibration(r: &serde_json::Value) -> serde_json::Value {
    let mut r = r.clone();
    let o = r.as_object_mut().unwrap();
    o.remove("unit_id");
    o.remove("calibration");
    r
}

/// The `corrected` row of `rows` that a `tight` row `r` shares its draws with (same unit id
/// but the mode).
fn corrected_row<'a>(
    rows: &'a [serde_json::Value],
    r: &serde_json::Value,
) -> &'a serde_json::Value {
    let id = r["unit_id"]
        .as_str()
        .unwrap()
        .replace("/tight/", "/corrected/");
    rows.iter()
        .find(|c| c["unit_id"] == id.as_str())
        .unwrap_or_else(|| panic!("no corrected row {id}"))
}

/// `reproduce FIG --dataset digits --repetitions 2 --calibration MODES --seed SEED --out DIR`
/// and `extra`.
fn reproduce_modes(dir: &Path, fig: &str, modes: &str, seed: &str, extra: &[&str]) {
    let dir_s = dir.to_string_lossy().into_owned();
    let mut args = vec![
        "reproduce",
        fig,
        "--dataset",
        "digits",
        "--repetitions",
        "2",
        "--calibration",
        modes,
        "--seed",
        seed,
        "--out",
        &dir_s,
    ];
    args.extend_from_slice(extra);
    ok(&args);
}

/// `tight` model sensitivity and loss perturbation are the `corrected` mechanism
/// (`draws_mode`), so their `tight` rows are the `corrected` draws: every field equal but the
/// unit id and the calibration column — in a run with both modes (where the `tight` groups
/// replay the computed draws) and in a `tight`-only run (where they compute them afresh from
/// the `corrected` seeds). The other methods keep their own `tight` mechanism and draws.
#[test]
fn tight_model_and_loss_perturbation_rows_are_the_corrected_draws() {
    let tmp = tempfile::tempdir().unwrap();
    // fig1a on digits, 2 repetitions, seed 4, in `modes`, into `dir` (plus `extra`)
    let reproduce =
        |dir: &Path, modes: &str, extra: &[&str]| reproduce_modes(dir, "fig1a", modes, "4", extra);
    let run_fig = |out: &str, modes: &str| -> Vec<serde_json::Value> {
        let dir = tmp.path().join(out);
        reproduce(&dir, modes, &[]);
        result_rows(&dir)
    };
    let both = run_fig("both", "corrected,tight");
    let tight_only = run_fig("tight", "tight");
    let strip = without_id_and_calibration;
    let corrected_of = |r: &serde_json::Value| corrected_row(&both, r);
    let mut shared = 0;
    for rows in [&both, &tight_only] {
        for r in rows.iter().filter(|r| r["calibration"] == "tight") {
            let c = corrected_of(r);
            if r["method"] == "model-sensitivity" || r["method"] == "loss-perturbation" {
                assert_eq!(strip(r), strip(c), "{}", r["unit_id"]);
                shared += 1;
            }
        }
    }
    assert_eq!(
        shared,
        2 * 2 * 2 * 10,
        "two methods × 10 ε × 2 repetitions, in both runs"
    );
    // prediction sensitivity at δ = 0 selects a label in `tight`: another mechanism
    let ps_differs = both.iter().any(|r| {
        r["calibration"] == "tight"
            && r["method"] == "prediction-sensitivity"
            && strip(r) != strip(corrected_of(r))
    });
    assert!(
        ps_differs,
        "tight prediction sensitivity has its own mechanism"
    );

    // Resumed after the corrected groups finished but before the tight model-sensitivity and
    // loss-perturbation ones: the finished corrected draws are replayed (nothing computed for
    // those groups) and the result files equal the uninterrupted run's byte for byte.
    let full = tmp.path().join("both");
    let cut = tmp.path().join("cut");
    std::fs::create_dir_all(&cut).unwrap();
    std::fs::copy(full.join("manifest.json"), cut.join("manifest.json")).unwrap();
    let partial = std::fs::read_to_string(full.join("results.partial.jsonl")).unwrap();
    let shared_method = |l: &str| {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        r["calibration"] == "tight"
            && (r["method"] == "model-sensitivity" || r["method"] == "loss-perturbation")
    };
    let kept: String = partial
        .lines()
        .filter(|l| !shared_method(l))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(cut.join("results.partial.jsonl"), kept).unwrap();
    reproduce(&cut, "corrected,tight", &["--resume"]);
    for f in FILES {
        same(&full.join(f), &cut.join(f));
    }
    let timings = std::fs::read_to_string(cut.join("timings.jsonl")).unwrap();
    let resumed: Vec<serde_json::Value> = timings
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(resumed.len(), 20, "the 20 tight groups resumed: {timings}");
    for t in &resumed {
        assert_eq!(t["train_s"], 0.0, "{t}: replayed, not computed");
    }
}

/// Under replace-one neighbours `tight` DP-SGD is the `corrected` mechanism (both use the PLD
/// accountant of the replace-one dominating pair), so the study draws it once: every `tight`
/// DP-SGD row of fig2b equals its `corrected` row but for the unit id and calibration, in a
/// run of both modes and in a run of `tight` alone (which computes the shared draws itself).
#[test]
fn tight_dp_sgd_rows_are_the_corrected_draws_under_replace_one() {
    let tmp = tempfile::tempdir().unwrap();
    let run_fig = |out: &str, modes: &str| -> Vec<serde_json::Value> {
        let dir = tmp.path().join(out);
        reproduce_modes(&dir, "fig2b", modes, "5", &["--quick"]);
        result_rows(&dir)
    };
    let both = run_fig("both", "corrected,tight");
    let tight_only = run_fig("tight", "tight");
    let mut shared = 0;
    for rows in [&both, &tight_only] {
        for r in rows
            .iter()
            .filter(|r| r["calibration"] == "tight" && r["method"] == "dp-sgd")
        {
            let c = corrected_row(&both, r);
            assert_eq!(
                without_id_and_calibration(r),
                without_id_and_calibration(c),
                "{}",
                r["unit_id"]
            );
            shared += 1;
        }
    }
    assert_eq!(shared, 2 * 18 * 2, "18 B × 2 repetitions, in both runs");
}
