//! The ledgers at the CLI: one identity (the ledger id written at training) and one
//! transactional ledger per model behind `predict`, `serve` and `ledger` (checked arithmetic,
//! never created or reset silently, no overspend by concurrent processes), a spend mark that refuses a ledger gone backwards (a restored backup, a
//! lost `-wal` file), the checkpoint at a clean shutdown, and `privpred ledger
//! show|backup|reconcile`.

mod common;

use common::{Serve, code, ledger_record, ok, spawn_serve as spawn, toy_dataset, train_into};
use privpred_core::Method;
use privpred_serve::FixtureSpec;
use privpred_serve::client::Client;
use serde_json::{Value, json};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A prediction-sensitivity model of budget `b` on the toy data.
fn budgeted_model(dir: &Path, name: &str, b: u64) -> PathBuf {
    let ds = toy_dataset(dir, 300);
    let b = b.to_string();
    let args = ["--epsilon", "1", "--budget", &b, "--lambda", "1e-2"];
    train_into(dir, name, "prediction-sensitivity", &ds, &args).0
}

/// A CSV of `n` distinct query rows (8 raw features), starting at row `first`.
fn queries(dir: &Path, name: &str, first: usize, n: usize) -> PathBuf {
    let rows: Vec<String> = (first..first + n)
        .map(|i| format!("{},10,10,200,10,{},200,10", 100 + i % 97, 10 + i / 97))
        .collect();
    let p = dir.join(name);
    std::fs::write(&p, rows.join("\n")).unwrap();
    p
}

/// `privpred predict --model M --input Q ARGS…`: (exit code, stdout lines, stderr).
fn predict(model: &Path, q: &Path, args: &[&str]) -> (i32, usize, String) {
    let o = common::bin()
        .args(["predict", "--model", model.to_str().unwrap()])
        .args(["--input", q.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).lines().count();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.code().unwrap_or(-1), out, err)
}

/// The ledger id an artifact records in its header.
fn ledger_id(model: &Path) -> String {
    let meta = header_metadata(model);
    meta["ledger_id"].as_str().unwrap().to_string()
}

fn header_metadata(model: &Path) -> Value {
    let bytes = common::payload(model);
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let h: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    h["__metadata__"].clone()
}

/// The artifact with 8 spaces of header padding: other bytes, still a valid file.
///
/// The payload's header is padded and the file signed again with the tests' key (a file
/// re-padded by anyone else is refused: its signature covers the exact bytes).
fn padded_copy(model: &Path, to: &Path) {
    let (header, bytes) = common::open_envelope(model);
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut out = ((n + 8) as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&bytes[8..8 + n]);
    out.extend_from_slice(b"        ");
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(to, common::rewrap(header, &out)).unwrap();
}

/// `predict` and `serve` spend one budget, keyed by the ledger id: two ledgers per model
/// (one per command, each with a full B, so serve's 50 then `predict --init-ledger`'s 50 more)
/// or a copy of the artifact with 8 spaces of header padding taken for a new model with a
/// fresh budget would release 100 answers for B = 50. The budget's
/// arithmetic is checked and a ledger is never created or reset silently.
#[test]
fn predict_and_serve_share_one_ledger_keyed_by_the_ledger_id() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = budgeted_model(dir, "ps", 10);
    let m = model.to_str().unwrap();
    let id = ledger_id(&model);
    assert_eq!(id.len(), 32, "{id}");
    let q1 = queries(dir, "q1.csv", 0, 1);
    // No ledger yet and no --init-ledger: an error naming the flag, nothing answered.
    let (c, n, err) = predict(&model, &q1, &[]);
    assert_eq!((c, n), (2, 0), "{err}");
    assert!(err.contains("--init-ledger"), "{err}");
    let (c, n, err) = predict(&model, &q1, &["--init-ledger"]);
    assert_eq!((c, n), (0, 1), "{err}");
    assert!(dir.join("ps.safetensors.ledger.sqlite").is_file());
    assert!(
        !dir.join("ps.safetensors.ledger.json").exists(),
        "no JSON ledger"
    );
    // --init-ledger never resets an existing record, from predict or serve.
    let (c, _, err) = predict(&model, &q1, &["--init-ledger"]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("never resets"), "{err}");
    let (c, err) = spawn(&["--model", m, "--listen", "127.0.0.1:0", "--init-ledger"])
        .err()
        .expect("the record exists");
    assert_eq!(c, 2, "{err}");
    let rec = ledger_record(&model);
    assert_eq!(rec["model_id"], json!(id));
    assert_eq!(
        (rec["spent"].clone(), rec["total"].clone()),
        (json!(1), json!(10))
    );
    // serve spends the same record: 4 answers.
    let s = spawn(&["--model", m, "--listen", "127.0.0.1:0"]).unwrap();
    let mut cl = Client::new(s.addr, None);
    let info = cl.get("/v1/model").unwrap().json();
    assert_eq!(info["budget"]["spent"], 1, "{info}");
    for i in 0..4 {
        let r = cl
            .post_json(
                "/v1/predict",
                &json!({ "inputs": [[101 + i, 10, 10, 200, 10, 10, 200, 10]] }).to_string(),
            )
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    sigterm(s);
    assert_eq!(ledger_record(&model)["spent"], 5);
    // The padded copy is the same model: same identity, same record (no second budget).
    let padded = dir.join("padded.safetensors");
    padded_copy(&model, &padded);
    assert_ne!(
        std::fs::read(&padded).unwrap(),
        std::fs::read(&model).unwrap()
    );
    let ledger = format!(
        "sqlite:{}",
        dir.join("ps.safetensors.ledger.sqlite").display()
    );
    let p = padded.to_str().unwrap();
    let (c, err) = spawn(&[
        "--model",
        p,
        "--listen",
        "127.0.0.1:0",
        "--ledger",
        &ledger,
        "--init-ledger",
    ])
    .err()
    .expect("the padded copy has the same record");
    assert_eq!(c, 2, "{err}");
    assert!(err.contains(&id) && err.contains("5 of 10 spent"), "{err}");
    let q5 = queries(dir, "q5.csv", 10, 5);
    let (c, n, err) = predict(&padded, &q5, &["--ledger", &ledger]);
    assert_eq!((c, n), (0, 5), "{err}");
    let shown: Value =
        serde_json::from_str(&ok(&["ledger", "show", "--ledger", &ledger, "--json"])).unwrap();
    assert_eq!(
        shown["records"].as_array().unwrap().len(),
        1,
        "one record: {shown}"
    );
    assert_eq!(shown["records"][0]["spent"], 10, "{shown}");
    // B = 10 reached: a new row is refused (exit 2), a row already answered gets its stored
    // answer at no cost.
    let (c, n, err) = predict(&model, &queries(dir, "q6.csv", 20, 1), &[]);
    assert_eq!((c, n), (2, 0), "{err}");
    assert!(err.contains("budget exhausted"), "{err}");
    let (c, n, err) = predict(&model, &q1, &[]);
    assert_eq!((c, n), (0, 1), "{err}");
    assert_eq!(ledger_record(&model)["spent"], 10);
}

/// N processes of `privpred predict` on one model with B = 12: exactly B answers in total
/// (a ledger read, modified and written with no lock would let 30 concurrent runs on B = 50
/// release 150).
#[test]
fn concurrent_predict_processes_never_overspend() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = budgeted_model(dir, "cc", 12);
    let (c, n, err) = predict(&model, &queries(dir, "first.csv", 0, 1), &["--init-ledger"]);
    assert_eq!((c, n), (0, 1), "{err}");
    let procs = 24;
    let children: Vec<Child> = (0..procs)
        .map(|i| {
            let q = queries(dir, &format!("c{i}.csv"), 1 + i, 1);
            common::bin()
                .args(["predict", "--model", model.to_str().unwrap()])
                .args(["--input", q.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut answers = 1;
    for ch in children {
        let o = ch.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        match o.status.code() {
            Some(0) => answers += String::from_utf8_lossy(&o.stdout).lines().count(),
            Some(2) => assert!(err.contains("budget exhausted"), "{err}"),
            c => panic!("exit {c:?}: {err}"),
        }
    }
    assert_eq!(answers, 12, "exactly B answers");
    assert_eq!(ledger_record(&model)["spent"], 12);
}

/// The ledger is the transactional one alone: a JSON file at `<MODEL>.ledger.json` is
/// neither read, renamed nor written (that format was never released), so a count planted
/// there never changes the budget.
#[test]
fn a_json_file_beside_the_model_is_not_a_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = budgeted_model(dir, "old", 10);
    let lp = dir.join("old.safetensors.ledger.json");
    let planted = json!({"budget": 10, "spent": 8}).to_string();
    std::fs::write(&lp, &planted).unwrap();
    let (c, n, err) = predict(&model, &queries(dir, "b.csv", 0, 2), &["--init-ledger"]);
    assert_eq!((c, n), (0, 2), "{err}");
    assert_eq!(ledger_record(&model)["spent"], 2, "nothing carried");
    assert_eq!(std::fs::read_to_string(&lp).unwrap(), planted, "left alone");
    assert!(!dir.join("old.safetensors.ledger.json.migrated").exists());
}

/// Restoring a ledger backup taken before answers were given (which would allow 50 more
/// answers for B = 50), or answering from a second ledger, is refused: the spend mark beside the model
/// records more than the restored ledger. `ledger reconcile` raises the ledger to the mark.
#[test]
fn a_restored_older_backup_or_a_second_ledger_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = budgeted_model(dir, "bk", 6);
    let m = model.to_str().unwrap();
    let (c, _, err) = predict(&model, &queries(dir, "a.csv", 0, 1), &["--init-ledger"]);
    assert_eq!(c, 0, "{err}");
    let bk = dir.join("backup.sqlite");
    ok(&[
        "ledger",
        "backup",
        "--model",
        m,
        "--out",
        bk.to_str().unwrap(),
    ]);
    let (c, n, err) = predict(&model, &queries(dir, "b.csv", 1, 5), &[]);
    assert_eq!((c, n), (0, 5), "{err}");
    let (c, _, _) = predict(&model, &queries(dir, "c.csv", 6, 1), &[]);
    assert_eq!(c, 2, "B = 6 spent");
    // restore the backup (spent 1) as the docs describe
    let path = dir.join("bk.safetensors.ledger.sqlite");
    for f in [
        "bk.safetensors.ledger.sqlite-wal",
        "bk.safetensors.ledger.sqlite-shm",
    ] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    std::fs::copy(&bk, &path).unwrap();
    let (c, n, err) = predict(&model, &queries(dir, "d.csv", 6, 1), &[]);
    assert_eq!((c, n), (2, 0), "{err}");
    assert!(
        err.contains("6 were already released") && err.contains("reconcile"),
        "{err}"
    );
    let (c, err) = spawn(&["--model", m, "--listen", "127.0.0.1:0"])
        .err()
        .expect("refused");
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("already released"), "{err}");
    // a second, fresh ledger for the same model is refused too
    let other = format!("sqlite:{}", dir.join("other.sqlite").display());
    let (c, n, err) = predict(
        &model,
        &queries(dir, "e.csv", 6, 1),
        &["--ledger", &other, "--init-ledger"],
    );
    assert_eq!((c, n), (2, 0), "{err}");
    assert!(err.contains("already released"), "{err}");
    // reconcile raises the restored ledger to the mark; then the budget is spent
    ok(&["ledger", "reconcile", "--model", m]);
    assert_eq!(ledger_record(&model)["spent"], 6);
    let (c, _, err) = predict(&model, &queries(dir, "f.csv", 7, 1), &[]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("budget exhausted"), "{err}");
}

/// kill -9, then delete the `-wal` file: the newest transactions are lost from the ledger
/// (which alone would allow 100 answers for B = 50), but not from the spend mark, so the restart is refused.
#[test]
fn a_deleted_wal_after_kill_9_is_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut spec = FixtureSpec::new(Method::PredictionSensitivity, 20, 4, 3);
    spec.tag = format!("cli_ledger_wal_{}", std::process::id());
    let model = dir.join("w.fixture.json");
    std::fs::write(&model, spec.to_json()).unwrap();
    let m = model.to_str().unwrap();
    let args = ["--model", m, "--listen", "127.0.0.1:0"];
    let mut s = spawn(&[&args[..], &["--init-ledger"]].concat()).unwrap();
    let mut cl = Client::new(s.addr, None);
    for i in 0..8 {
        let r = cl
            .post_json("/v1/predict", &json!({ "inputs": [row(i)] }).to_string())
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let wal = dir.join("w.fixture.json.ledger.sqlite-wal");
    assert!(wal.is_file());
    std::fs::remove_file(&wal).unwrap();
    let _ = std::fs::remove_file(dir.join("w.fixture.json.ledger.sqlite-shm"));
    let (c, err) = spawn(&args)
        .err()
        .expect("a ledger gone backwards: refused");
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("8 were already released"), "{err}");
}

fn sigterm(mut s: Serve) {
    let ok = Command::new("kill")
        .arg("-TERM")
        .arg(s.child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(s.child.wait().unwrap().success());
}

fn row(i: u64) -> Vec<f32> {
    vec![(i % 4096) as f32 / 8192.0, 0.0, 0.0, 0.0]
}

/// B = 20: 20 answers, SIGTERM, copy only the `.sqlite` file (the checkpoint put everything
/// there), delete the ledger, restart: not a fresh ledger and 20 more answers but an
/// error (exit 2) naming --init-ledger, and the copy keeps the count.
#[test]
fn serve_never_recreates_a_deleted_ledger_and_the_sqlite_file_alone_is_a_backup() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut spec = FixtureSpec::new(Method::PredictionSensitivity, 20, 4, 3);
    spec.tag = format!("cli_ledger_{}", std::process::id());
    let model = dir.join("m.fixture.json");
    std::fs::write(&model, spec.to_json()).unwrap();
    let path = dir.join("ledger.sqlite");
    let ledger = format!("sqlite:{}", path.display());
    let m = model.to_str().unwrap();
    let args = ["--model", m, "--listen", "127.0.0.1:0", "--ledger", &ledger];
    let (c, err) = spawn(&args).err().expect("no ledger: must not start");
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--init-ledger"), "{err}");
    assert!(!path.exists(), "nothing created without --init-ledger");
    let s = spawn(&[&args[..], &["--init-ledger"]].concat()).unwrap();
    let mut cl = Client::new(s.addr, None);
    for i in 0..20 {
        let r = cl
            .post_json("/v1/predict", &json!({ "inputs": [row(i)] }).to_string())
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    sigterm(s);
    let copy = dir.join("copy.sqlite");
    std::fs::copy(&path, &copy).unwrap();
    let copy_spec = format!("sqlite:{}", copy.display());
    let shown: Value =
        serde_json::from_str(&ok(&["ledger", "show", "--ledger", &copy_spec, "--json"])).unwrap();
    assert_eq!(shown["records"][0]["spent"], 20, "{shown}");
    assert_eq!(shown["records"][0]["remaining"], 0, "{shown}");
    // Backup through the CLI; the backup is a ledger too.
    let bk = dir.join("backup.sqlite");
    ok(&[
        "ledger",
        "backup",
        "--ledger",
        &ledger,
        "--out",
        bk.to_str().unwrap(),
    ]);
    let shown: Value = serde_json::from_str(&ok(&[
        "ledger",
        "show",
        "--ledger",
        &format!("sqlite:{}", bk.display()),
        "--json",
    ]))
    .unwrap();
    assert_eq!(shown["records"][0]["spent"], 20, "{shown}");
    for f in ["ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let (c, err) = spawn(&args)
        .err()
        .expect("a deleted ledger: must not start");
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("does not exist"), "{err}");
    // Restoring the backup restores the spent budget.
    std::fs::copy(&bk, &path).unwrap();
    let s = spawn(&args).unwrap();
    let r = Client::new(s.addr, None)
        .post_json("/v1/predict", &json!({ "inputs": [row(99)] }).to_string())
        .unwrap();
    assert_eq!(r.status, 429, "{}", r.body);
    sigterm(s);
    // `ledger show` of a missing ledger: a clear error.
    let (c, err) = code(&[
        "ledger",
        "show",
        "--ledger",
        &format!("sqlite:{}", dir.join("nope.sqlite").display()),
    ]);
    assert_ne!(c, 0);
    assert!(err.contains("does not exist"), "{err}");
}
