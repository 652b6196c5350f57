//! The sweep machinery with the synthetic runner: sharding + merging equals an unsharded run,
//! resuming after an interruption equals an uninterrupted run (byte for byte), and outputs
//! (JSONL, CSV, summary, PNG, SVG) exist.

use privpred_core::CalibrationMode;
use privpred_study::FigureId;
use privpred_study::progress::Silent;
use privpred_study::results::files;
use privpred_study::sweep::{self, SweepConfig, SyntheticRunner};
use privpred_study::units::Shard;
use std::path::Path;

fn cfg(out: &Path, shard: Shard, resume: bool) -> SweepConfig {
    SweepConfig {
        figures: vec![FigureId::Fig1a, FigureId::Fig6b],
        calibrations: vec![CalibrationMode::Paper, CalibrationMode::Tight],
        repetitions: 4,
        seed: 7,
        quick: false,
        dataset: None,
        shard,
        resume,
        out: out.to_path_buf(),
    }
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn same(a: &Path, b: &Path) {
    let (x, y) = (read(a), read(b));
    if x != y {
        let (sx, sy) = (String::from_utf8_lossy(&x), String::from_utf8_lossy(&y));
        let line = sx.lines().zip(sy.lines()).position(|(p, q)| p != q);
        panic!(
            "{} and {} differ ({} vs {} bytes), first differing line {:?}:\n{}\n{}",
            a.display(),
            b.display(),
            x.len(),
            y.len(),
            line,
            line.and_then(|l| sx.lines().nth(l)).unwrap_or(""),
            line.and_then(|l| sy.lines().nth(l)).unwrap_or("")
        );
    }
}

const COMPARED: [&str; 5] = [
    files::RESULTS_JSONL,
    files::RESULTS_CSV,
    files::SUMMARY_CSV,
    files::SUMMARY_MD,
    files::MANIFEST,
];

#[test]
fn shard_and_merge_equals_unsharded() {
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    let rep = sweep::run(
        &cfg(&full, Shard::ALL, false),
        &SyntheticRunner::new(),
        &Silent,
    )
    .unwrap();
    assert_eq!(rep.total_units, (40 + 33) * 2 * 4);
    let mut dirs = Vec::new();
    for k in 0..3 {
        let d = tmp.path().join(format!("shard{k}"));
        sweep::run(
            &cfg(&d, Shard { index: k, count: 3 }, false),
            &SyntheticRunner::new(),
            &Silent,
        )
        .unwrap();
        dirs.push(d);
    }
    let merged = tmp.path().join("merged");
    let m = sweep::merge(&dirs, &merged).unwrap();
    assert_eq!(m.missing_units, 0);
    for f in COMPARED {
        same(&full.join(f), &merged.join(f));
    }
    for f in [
        "fig1a-paper.png",
        "fig1a-tight.svg",
        "fig1a-paper-vs-tight.png",
        "fig6b-paper-vs-tight.svg",
    ] {
        assert!(
            full.join(f).metadata().unwrap().len() > 1000,
            "{f} missing or empty"
        );
        same(&full.join(f), &merged.join(f));
    }
    // A missing shard is reported.
    let partial = tmp.path().join("partial");
    let m = sweep::merge(&dirs[..2], &partial).unwrap();
    assert!(m.missing_units > 0);
}

#[test]
fn resume_after_interruption_is_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    sweep::run(
        &cfg(&full, Shard::ALL, false),
        &SyntheticRunner::new(),
        &Silent,
    )
    .unwrap();

    let cut = tmp.path().join("cut");
    let failing = SyntheticRunner {
        fail_after: Some(150),
        counter: Default::default(),
    };
    let err = sweep::run(&cfg(&cut, Shard::ALL, false), &failing, &Silent).unwrap_err();
    assert!(err.to_string().contains("simulated interruption"));
    // Simulate a torn write at the moment of the crash.
    let p = cut.join(files::PARTIAL);
    let mut bytes = read(&p);
    let done_lines = bytes.iter().filter(|&&b| b == b'\n').count();
    assert!((100..584).contains(&done_lines), "{done_lines}");
    bytes.extend_from_slice(b"{\"unit_id\":\"fig1a/pap");
    std::fs::write(&p, bytes).unwrap();
    // Without --resume the directory is refused.
    let e = sweep::run(
        &cfg(&cut, Shard::ALL, false),
        &SyntheticRunner::new(),
        &Silent,
    )
    .unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("--resume"), "{e}");
    // A different seed cannot resume it.
    let mut other = cfg(&cut, Shard::ALL, true);
    other.seed = 8;
    assert!(sweep::run(&other, &SyntheticRunner::new(), &Silent).is_err());
    let rep = sweep::run(
        &cfg(&cut, Shard::ALL, true),
        &SyntheticRunner::new(),
        &Silent,
    )
    .unwrap();
    assert_eq!(rep.skipped_units, done_lines);
    assert_eq!(rep.computed_units, 584 - done_lines);
    for f in COMPARED {
        same(&full.join(f), &cut.join(f));
    }
}

#[test]
fn table1_from_synthetic_runs() {
    use privpred_study::{results, summary, table1};
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t1");
    let mut c = cfg(&out, Shard::ALL, false);
    c.figures = table1::needed_figures();
    c.calibrations = vec![CalibrationMode::Corrected];
    c.repetitions = 3;
    sweep::run(&c, &SyntheticRunner::new(), &Silent).unwrap();
    let rows = results::read_dir_rows(&out).unwrap();
    let pts = summary::summarize(&rows);
    let d = table1::derive(&pts, &rows, &results::read_timings(&out).unwrap());
    let text = table1::render(&d);
    // The synthetic curves rise with log x: accuracy ↗ in N.
    let acc = &d.iter().find(|r| r.0 == "accuracy").unwrap().1;
    assert_eq!(acc[0].overall, Some(table1::Trend::Up), "{text}");
    assert!(text.contains("| accuracy |"));
}
