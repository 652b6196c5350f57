//! What a released model contains: only data-independent facts and the noisy release. Two
//! trainings with the same seed on neighbouring datasets D and D′ (one row replaced, same
//! file name) give artifacts whose metadata are byte-identical apart from the fields random
//! by design, and `privpred serve`'s `GET /v1/model` is identical apart from the model id;
//! the trainer's measurements go to `train --json` and stderr, marked private. Data-dependent
//! preprocessing (max-norm, PCA fitted on the private data) is refused for private methods.

mod common;

use common::{Serve, capture, code, ok, serve_model};
use privpred_serve::client::Client;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Metadata entries random by design: two hash the noisy weights (the file's `checksum`
/// covers every entry and the weights; `weights_sha256` the weights alone), and `ledger_id`
/// is the model's identity in budget ledgers, 128 bits from the OS at every save.
const RANDOM_BY_DESIGN: &[&str] = &["checksum", "weights_sha256", "ledger_id"];

/// The toy CSV (300 rows, 8 pixel-like features, 3 classes) at `path`; with `neighbour`, row
/// 0 is replaced by an outlier of another class (D′).
fn write_csv(path: &Path, neighbour: bool) {
    write_variant(
        path,
        if neighbour {
            Variant::Replaced
        } else {
            Variant::Base
        },
    );
}

/// Which neighbour of the toy set [`write_variant`] writes.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    /// D: 300 rows, labels 0..3.
    Base,
    /// D′: row 0 replaced by an outlier of class 2.
    Replaced,
    /// D′: row 0 replaced by an outlier with a new largest label, 3.
    NewLabel,
    /// D′: row 0 removed (299 rows; an add/remove neighbour).
    Removed,
}

/// The toy CSV of [`write_csv`] as `variant` has it.
fn write_variant(path: &Path, variant: Variant) {
    let neighbour = variant != Variant::Base;
    let mut s = String::from("f0,f1,f2,f3,f4,f5,f6,f7,label\n");
    let mut state = 4242u64;
    for i in 0..300 {
        let y = i % 3;
        let mut row: Vec<u32> = (0..8)
            .map(|j| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 33) % 60) as u32 + if j % 3 == y { 180 } else { 0 }
            })
            .collect();
        let mut label = y;
        if neighbour && i == 0 {
            row = vec![255, 0, 3, 255, 7, 0, 255, 1];
            label = if variant == Variant::NewLabel { 3 } else { 2 };
        }
        if variant == Variant::Removed && i == 0 {
            continue;
        }
        let cells: Vec<String> = row.iter().map(|v| v.to_string()).collect();
        s.push_str(&format!("{},{label}\n", cells.join(",")));
    }
    std::fs::write(path, s).unwrap();
}

/// The safetensors header's `__metadata__` of an artifact.
fn metadata(path: &Path) -> BTreeMap<String, String> {
    let bytes = common::payload(path);
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    serde_json::from_value(header["__metadata__"].clone()).unwrap()
}

/// Every method `train` supports, with arguments that keep the test fast. λ and DP-SGD's
/// clip are given (public values): a value selected on the private data differs between D
/// and D′ by design of the selection, whose cost is accounted with the guarantee, not here
/// (`cross_validation_scores_stay_with_the_data_owner` checks that its scores are not
/// released).
const METHODS: [(&str, &[&str]); 5] = [
    ("model-sensitivity", &["--epsilon", "1", "--lambda", "0.01"]),
    ("loss-perturbation", &["--epsilon", "1", "--lambda", "0.01"]),
    (
        "dp-sgd",
        &[
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--epochs",
            "2",
            "--clip",
            "0.5",
            "--batch-size",
            "32",
        ],
    ),
    (
        "prediction-sensitivity",
        &["--epsilon", "1", "--budget", "10", "--lambda", "0.01"],
    ),
    (
        "subsample-aggregate",
        &["--epsilon", "1", "--budget", "10", "--teachers", "8"],
    ),
];

/// `csv:PATH,TEST`: every row of `csv` is a training row (a CSV alone is split into train
/// and test, and the replaced row could land in the test split); the test file is a copy of
/// the first training file written.
fn dataset(csv: &Path) -> String {
    let test = csv.with_file_name("test.csv");
    if !test.exists() {
        std::fs::copy(csv, &test).unwrap();
    }
    format!("csv-pixels:{},{}", csv.display(), test.display())
}

/// Trains `method` on `csv` ([`dataset`]) into `out` with `args` (the toy set's 3 classes
/// declared unless `args` declare others), returning `train --json`.
fn train(method: &str, csv: &Path, out: &Path, args: &[&str]) -> Value {
    let ds = dataset(csv);
    let classes = if args.contains(&"--classes") {
        &[][..]
    } else {
        &["--classes", "3"][..]
    };
    let mut all = vec!["train", method, "--dataset", &ds];
    all.extend_from_slice(classes);
    all.extend_from_slice(&["--cv-draws", "1", "--json", "--out", out.to_str().unwrap()]);
    all.extend_from_slice(args);
    serde_json::from_str(&ok(&all)).unwrap()
}

/// Per method: the same seed on D and on D′ (the same file name, one row replaced) gives
/// artifacts whose metadata differ only in the entries random by design; the measurements
/// that tell D from D′ (the certificate's gradient norm, DP-SGD's clipped fraction, the
/// hold-out scores) are in `train --json`'s `private_diagnostics` and nowhere in the file.
#[test]
fn artifacts_of_neighbouring_datasets_have_identical_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    for (method, args) in METHODS {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--seed", "11"]);
        let mut metas = Vec::new();
        let mut diagnostics = Vec::new();
        for (i, neighbour) in [false, true].into_iter().enumerate() {
            write_csv(&csv, neighbour);
            let out = tmp.path().join(format!("{method}-{i}.safetensors"));
            let j = train(method, &csv, &out, &args);
            let diag = j["private_diagnostics"].clone();
            assert!(
                diag["notice"]
                    .as_str()
                    .unwrap()
                    .starts_with("private to the data owner"),
                "{method}: {j}"
            );
            diagnostics.push(diag);
            let mut meta = metadata(&out);
            let all: String = meta.values().cloned().collect();
            for private in [
                "\"gradient_norm\"",
                "rounding_bound",
                "refinement_evaluations",
                "clipped_fraction",
                "cross_validation",
                "explained_variance\":[0",
            ] {
                assert!(!all.contains(private), "{method}: {private} in {all}");
            }
            for k in RANDOM_BY_DESIGN {
                assert!(meta.remove(*k).is_some(), "{method}: {k}");
            }
            metas.push(meta);
        }
        // the data owner does see what differs (so the comparison below is not vacuous);
        // subsample-and-aggregate measures nothing
        if method != "subsample-aggregate" {
            assert_ne!(diagnostics[0], diagnostics[1], "{method}");
        }
        for (k, v) in &metas[0] {
            assert_eq!(Some(v), metas[1].get(k), "{method}: metadata `{k}` differs");
        }
        assert_eq!(metas[0], metas[1], "{method}");
        let model: Value = serde_json::from_str(&metas[0]["model"]).unwrap();
        match method {
            "dp-sgd" => assert!(model["predictor"]["dp_sgd"]["steps"].is_u64(), "{model}"),
            "subsample-aggregate" => {}
            _ => assert_eq!(
                model["predictor"]["optimization"]["certified"], true,
                "{method}: {model}"
            ),
        }
    }
}

/// `--lambda cv` and `--clip cv` measure hold-out scores on the private data: they are in
/// `train --json`'s `private_diagnostics`, not in the artifact (which names only the chosen
/// value, a parameter of the guarantee).
#[test]
fn cross_validation_scores_stay_with_the_data_owner() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    write_csv(&csv, false);
    for (method, args) in [
        (
            "model-sensitivity",
            &["--epsilon", "1", "--lambda", "cv"][..],
        ),
        (
            "dp-sgd",
            &[
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--epochs",
                "1",
                "--batch-size",
                "32",
                "--clip",
                "cv",
            ][..],
        ),
    ] {
        let out = tmp.path().join(format!("{method}.safetensors"));
        let j = train(method, &csv, &out, args);
        let cv = &j["private_diagnostics"]["cross_validation"];
        assert!(cv["scores"].is_array(), "{method}: {j}");
        assert!(j.get("cross_validation").is_none(), "{method}: {j}");
        let all: String = metadata(&out).values().cloned().collect();
        assert!(!all.contains("cross_validation"), "{method}: {all}");
        assert!(!all.contains("holdout_fraction"), "{method}: {all}");
    }
}

/// `privpred serve` on an artifact, creating its ledger record.
fn serve(model: &Path) -> Serve {
    serve_model(model, &["--init-ledger"])
}

/// `GET /v1/model` of a release trained on D and of one trained on D′ (release generator:
/// `serve` refuses seeded experiments) are identical apart from the model id (the file's
/// hash, random by design) and the ledger's location (the operator's path).
#[test]
fn the_model_endpoint_is_the_same_for_neighbouring_datasets() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    for (method, args) in METHODS {
        let mut infos = Vec::new();
        for (i, neighbour) in [false, true].into_iter().enumerate() {
            write_csv(&csv, neighbour);
            let dir = tmp.path().join(format!("{method}-{i}"));
            std::fs::create_dir(&dir).unwrap();
            let out = dir.join("model.safetensors");
            train(method, &csv, &out, args);
            let s = serve(&out);
            let mut c = Client::new(s.addr, None);
            let mut info = c.get("/v1/model").unwrap().json();
            let o = info.as_object_mut().unwrap();
            assert!(o.remove("model_id").is_some(), "{method}");
            o.remove("ledger");
            infos.push(info);
        }
        assert_eq!(infos[0], infos[1], "{method}");
    }
}

/// Without `--json` the measurements go to stderr under the private notice, never stdout.
#[test]
fn the_trainers_measurements_go_to_stderr_marked_private() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    write_csv(&csv, false);
    let ds = dataset(&csv);
    let out: PathBuf = tmp.path().join("m.safetensors");
    let (rc, stdout, stderr) = capture(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--lambda",
        "0.01",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{stderr}");
    assert!(
        stderr.contains("private to the data owner") && stderr.contains("measured ||grad J||_2"),
        "{stderr}"
    );
    assert!(!stdout.contains("measured"), "{stdout}");
}

/// A private method refuses a preprocessing step that maps queries with an un-noised
/// statistic of the private data (exit 2, saying why and what to use instead, nothing
/// written); the non-private model may use it.
#[test]
fn private_methods_refuse_data_dependent_preprocessing() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    write_csv(&csv, false);
    let ds = dataset(&csv);
    let out = tmp.path().join("m.safetensors");
    let o = out.to_str().unwrap();
    for (extra, needle, instead) in [
        (&["--unit-ball", "max-norm"][..], "max-norm", "clip:R"),
        (&["--pca", "4"][..], "--pca", "public data"),
    ] {
        for method in ["model-sensitivity", "prediction-sensitivity", "dp-sgd"] {
            let mut args = vec![
                "train",
                method,
                "--dataset",
                &ds,
                "--classes",
                "3",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--out",
                o,
            ];
            args.extend_from_slice(extra);
            let (rc, err) = code(&args);
            assert_eq!(rc, 2, "{method} {extra:?}: {err}");
            assert!(
                err.contains(needle) && err.contains("private") && err.contains(instead),
                "{method} {extra:?}: {err}"
            );
            assert!(!out.exists());
        }
        let mut args = vec!["train", "non-private", "--dataset", &ds, "--out", o];
        args.extend_from_slice(extra);
        ok(&args);
        assert!(out.exists());
        std::fs::remove_file(&out).unwrap();
    }
}

/// The metadata of the artifact `train` writes for `variant` of the toy set, less the entries
/// random by design.
fn released(dir: &Path, variant: Variant, method: &str, args: &[&str]) -> BTreeMap<String, String> {
    let csv = dir.join("private.csv");
    write_variant(&csv, variant);
    let out = dir.join(format!("{method}-{}.safetensors", variant as u8));
    train(method, &csv, &out, args);
    let mut meta = metadata(&out);
    for k in RANDOM_BY_DESIGN {
        assert!(meta.remove(*k).is_some(), "{method}: {k}");
    }
    meta
}

/// The class count is a public parameter: without `--classes` a private method on data
/// without published classes is refused (exit 2, naming it) rather than C read from the
/// labels; with it, one row given a new largest label leaves the artifact's metadata as they
/// were (C, the shape of θ, `input_classes`), and a label outside the declared classes is an
/// error, not a dropped row.
#[test]
fn the_class_count_is_declared_never_read_from_the_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    write_variant(&csv, Variant::NewLabel);
    let ds = dataset(&csv);
    let out = tmp.path().join("m.safetensors");
    let o = out.to_str().unwrap();
    for method in ["model-sensitivity", "dp-sgd", "subsample-aggregate"] {
        let (rc, err) = code(&[
            "train",
            method,
            "--dataset",
            &ds,
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--out",
            o,
        ]);
        assert_eq!(rc, 2, "{method}: {err}");
        assert!(
            err.contains("classes") && err.contains("--classes C"),
            "{method}: {err}"
        );
        assert!(!out.exists());
    }
    // a label outside the declared classes: an error naming the row, not a filter
    let (rc, err) = code(&[
        "train",
        "model-sensitivity",
        "--dataset",
        &ds,
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--out",
        o,
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("label 3") && err.contains("0..3"), "{err}");
    // declared: D and D′ (one row with a new largest label) release the same metadata
    for (method, args) in METHODS {
        let mut args = args.to_vec();
        args.extend_from_slice(&["--seed", "11", "--classes", "4"]);
        let d = released(tmp.path(), Variant::Base, method, &args);
        let dn = released(tmp.path(), Variant::NewLabel, method, &args);
        assert_eq!(d, dn, "{method}");
        assert!(
            d.values().any(|v| v.contains("\"input_classes\":4")),
            "{method}: {d:?}"
        );
    }
}

/// Under add/remove the exact N is private: without `--public-n` training is refused (exit
/// 2, naming it); with it, D and D less one row give artifacts whose metadata are identical
/// apart from the entries random by design (N̂ is recorded, neither the exact N nor anything
/// derived from it: DP-SGD's q and steps, loss perturbation's ρ_eff and certificate, the
/// preprocessing's row count).
#[test]
fn under_add_remove_nothing_released_depends_on_the_exact_n() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    write_variant(&csv, Variant::Base);
    let out = tmp.path().join("m.safetensors");
    let lp: &[&str] = &["--epsilon", "1", "--lambda", "0.01"];
    let mut a = vec![
        "train",
        "loss-perturbation",
        "--dataset",
        &dataset(&csv),
        "--classes",
        "3",
        "--neighbours",
        "add-remove",
        "--out",
        out.to_str().unwrap(),
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    a.extend(lp.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    let (rc, err) = code(&refs);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("public-n"), "{err}");
    assert!(!out.exists());
    // one file split by a seeded hold-out: adding a row would permute which rows train
    let single = format!("csv-pixels:{}", csv.display());
    let (rc, err) = code(&[
        "train",
        "loss-perturbation",
        "--dataset",
        &single,
        "--classes",
        "3",
        "--neighbours",
        "add-remove",
        "--public-n",
        "300",
        "--epsilon",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("separate file"), "{err}");
    assert!(!out.exists());
    for (method, args) in [METHODS[1], METHODS[2]] {
        let mut args = args.to_vec();
        args.extend_from_slice(&[
            "--seed",
            "11",
            "--classes",
            "3",
            "--neighbours",
            "add-remove",
            "--public-n",
            "320",
        ]);
        let d = released(tmp.path(), Variant::Base, method, &args);
        let removed = released(tmp.path(), Variant::Removed, method, &args);
        assert_eq!(d, removed, "{method}");
        let all: String = d.values().cloned().collect();
        for exact in ["300", "299"] {
            for key in ["\"n\":", "\"train_rows\":"] {
                assert!(!all.contains(&format!("{key}{exact}")), "{method}: {all}");
            }
        }
        assert!(all.contains("\"n\":320"), "{method}: {all}");
    }
}

/// A class filter (fewer classes than a named data set publishes) drops rows by label, so N
/// depends on the data: refused for a private method under replace-one.
#[test]
fn a_class_filter_needs_add_remove() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m.safetensors");
    let (rc, err) = code(&[
        "train",
        "model-sensitivity",
        "--dataset",
        "digits",
        "--classes",
        "3",
        "--epsilon",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("add-remove") && err.contains("classes"),
        "{err}"
    );
    assert!(!out.exists());
}

/// `evaluate` and `compare` measure accuracies on the data without noise and outside the
/// model's ledger: their output says it is not private, in the text, in the JSON
/// (`output_private: false` with the notice) and in `compare`'s HTML report.
#[test]
fn evaluate_and_compare_mark_their_output_not_private() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("private.csv");
    write_csv(&csv, false);
    let ds = dataset(&csv);
    let out = tmp.path().join("m.safetensors");
    train(
        "model-sensitivity",
        &csv,
        &out,
        &["--epsilon", "1", "--lambda", "0.01"],
    );
    let m = out.to_str().unwrap();
    let e: Value =
        serde_json::from_str(&ok(&["evaluate", "--model", m, "--dataset", &ds, "--json"])).unwrap();
    assert_eq!(e["output_private"], false, "{e}");
    assert_eq!(e["valid_guarantee"], true, "{e}");
    let notice = e["notice"].as_str().unwrap();
    assert!(
        notice.starts_with("not private") && notice.contains("not charged"),
        "{e}"
    );
    let text = ok(&["evaluate", "--model", m, "--dataset", &ds]);
    assert!(text.contains(notice), "{text}");

    let j: Value = serde_json::from_str(&ok(&common::digits_compare("1", &["--json"]))).unwrap();
    assert_eq!(j["output_private"], false, "{j}");
    let notice = j["notice"].as_str().unwrap();
    assert!(
        notice.starts_with("not private") && notice.contains("outside any guarantee"),
        "{j}"
    );
    let report = tmp.path().join("compare.html");
    let text = ok(&common::digits_compare(
        "1",
        &["--report", report.to_str().unwrap()],
    ));
    assert!(text.starts_with(notice), "{text}");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("not private: every accuracy here is measured on the data set without noise"),
        "the report does not say its accuracies are not private"
    );
}
