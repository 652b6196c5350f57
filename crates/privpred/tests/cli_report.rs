//! `privpred compare` over grids of ε and B (`--json`, `--report`) and `reproduce --report`,
//! end to end on the scikit-learn digits fixture (real data, small).

mod common;

use common::{assert_bad, privpred as run, stderr, stdout};
use serde_json::Value;

fn compare_grid(dir: &std::path::Path) -> (Value, String) {
    let report = dir.join("report.html");
    let o = run(&[
        "compare",
        "--dataset",
        "digits",
        "--epsilon",
        "0.5,2",
        "--budget",
        "1..1000:4",
        "--teachers",
        "16",
        "--repetitions",
        "2",
        "--seed",
        "9",
        "--json",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    (v, std::fs::read_to_string(report).unwrap())
}

#[test]
fn compare_grid_json_and_report() {
    let tmp = tempfile::tempdir().unwrap();
    let (v, html) = compare_grid(tmp.path());
    let g = &v["grid"];
    assert_eq!(g["budgets"], serde_json::json!([1, 10, 100, 1000]));
    assert_eq!(g["epsilons"], serde_json::json!([0.5, 2.0]));
    let cells = g["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 8);
    for c in cells {
        // δ = 0: four methods ran, DP-SGD skipped with its reason
        assert_eq!(c["results"].as_array().unwrap().len(), 4);
        assert_eq!(c["skipped"].as_array().unwrap().len(), 1);
    }
    // private-training draws are shared across B at one ε (the same released models)
    let lp = |k: usize| {
        cells[k]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["method"] == "loss-perturbation")
            .unwrap()["mean"]
            .clone()
    };
    assert_eq!(lp(0), lp(3));
    let dec = v["decisions"]["over_budget"].as_array().unwrap();
    assert_eq!(dec.len(), 2);
    for d in dec {
        assert_eq!(d["recommended"].as_array().unwrap().len(), 4);
        assert_eq!(d["cost"].as_array().unwrap().len(), 4);
        assert!(d["text"].as_str().unwrap().starts_with("At ε = "), "{d}");
    }
    assert_eq!(v["decisions"]["over_epsilon"].as_array().unwrap().len(), 4);
    let gs = v["guarantees"].as_array().unwrap();
    assert!(gs.iter().all(|g| g["neighbouring"] == "replace-one"));
    assert!(v["provenance"]["checksum"].as_str().unwrap().len() == 64);
    let cmd = v["provenance"]["command"].as_str().unwrap();
    assert!(
        cmd.starts_with("privpred compare --dataset digits"),
        "{cmd}"
    );
    // the report: plots against B (2) and against ε (4), the table, the provenance
    assert_eq!(html.matches("<svg").count(), 6);
    assert!(html.contains(v["provenance"]["checksum"].as_str().unwrap()));
    assert!(!html.to_lowercase().contains("<script"));
    // written atomically: nothing else in the directory
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["report.html".to_string()]);
    // the same command gives the same numbers
    let tmp2 = tempfile::tempdir().unwrap();
    let (w, _) = compare_grid(tmp2.path());
    assert_eq!(v["grid"]["cells"], w["grid"]["cells"]);
}

#[test]
fn compare_text_names_the_crossover() {
    let o = run(&[
        "compare",
        "--dataset",
        "digits",
        "--epsilon",
        "1",
        "--budget",
        "1,3,10,30,100",
        "--teachers",
        "16",
        "--repetitions",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("| B |"), "{out}");
    assert!(out.contains("cost of privacy"), "{out}");
    assert!(out.contains("At ε = 1: "), "{out}");
    assert!(out.contains("Time: shared fits"), "{out}");
}

#[test]
fn bad_grids_and_report_paths_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let base = ["compare", "--dataset", "digits"];
    let with = |extra: &[&'static str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    for (args, needle) in [
        (with(&["--epsilon", "1", "--budget", "1..10"]), "LO..HI:N"),
        (
            with(&["--epsilon", "1", "--budget", "10,2.5"]),
            "whole numbers",
        ),
        (with(&["--epsilon", "0,1", "--budget", "10"]), "--epsilon"),
        (with(&["--epsilon", "1", "--budget", "10..1:3"]), "LO < HI"),
        (
            with(&["--epsilon", "1", "--delta", "2", "--budget", "10"]),
            "delta",
        ),
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_bad(&a, needle);
    }
    assert_bad(
        &[
            "compare",
            "--dataset",
            "digits",
            "--epsilon",
            "1",
            "--budget",
            "10",
            "--report",
            dir,
        ],
        "--report",
    );
    assert_bad(
        &["reproduce", "fig1a", "--quick", "--report", dir],
        "--report",
    );
}

#[test]
fn reproduce_writes_one_report() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let report = tmp.path().join("study.html");
    let o = run(&[
        "reproduce",
        "fig2a",
        "--dataset",
        "digits",
        "--repetitions",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&report).unwrap();
    assert_eq!(html.matches("<svg").count(), 1);
    assert!(html.contains("id=\"fig2a\""));
    assert!(html.contains("privpred reproduce fig2a --dataset digits"));
    assert!(html.contains("Guarantees of fig2a"));
    assert!(
        html.contains("corrected calibration. At ε = 1: "),
        "no recommendation along B"
    );
}
