//! Issue #20, the ledgers at the CLI: `predict`'s local ledger (checked arithmetic, never
//! created or reset silently), `serve --init-ledger` (a deleted ledger is an error, not a
//! fresh budget), the checkpoint at a clean shutdown, and `privpred ledger show|backup`.

mod common;

use common::{code, ok, toy_dataset, train_into};
use privpred_core::Method;
use privpred_serve::FixtureSpec;
use privpred_serve::client::Client;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_privpred");

/// The red-team reproducer: a ledger whose `spent` is near u64::MAX made `spent + want` wrap
/// round to a small number, resetting the budget. Now: refused, ledger unchanged.
#[test]
fn predict_ledger_arithmetic_is_checked_and_never_silently_created() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ds = toy_dataset(dir, 300);
    let (model, _) = train_into(
        dir,
        "ps",
        "prediction-sensitivity",
        &ds,
        &["--epsilon", "1", "--budget", "10", "--lambda", "1e-2"],
    );
    let m = model.to_str().unwrap();
    let q = dir.join("q.csv");
    std::fs::write(&q, "200,10,10,200,10,10,200,10\n").unwrap();
    let qs = q.to_str().unwrap();
    // No ledger yet and no --init-ledger: an error naming the flag, nothing answered.
    let (c, err) = code(&["predict", "--model", m, "--input", qs]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--init-ledger"), "{err}");
    ok(&["predict", "--model", m, "--input", qs, "--init-ledger"]);
    // --init-ledger never resets an existing ledger.
    let (c, err) = code(&["predict", "--model", m, "--input", qs, "--init-ledger"]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("never reset"), "{err}");
    let lp = dir.join("ps.safetensors.ledger.json");
    let mut l: Value = serde_json::from_slice(&std::fs::read(&lp).unwrap()).unwrap();
    assert_eq!(l["spent"], 1);
    // Edit the ledger: spent = u64::MAX (with the right weights). Before the fix,
    // u64::MAX + 1 wrapped to 0 ≤ B and the budget restarted from 0.
    l["spent"] = json!(u64::MAX);
    l["budget"] = json!(u64::MAX);
    std::fs::write(&lp, serde_json::to_vec(&l).unwrap()).unwrap();
    let (c, err) = code(&["predict", "--model", m, "--input", qs]);
    assert_eq!(c, 2, "{err}");
    let after: Value = serde_json::from_slice(&std::fs::read(&lp).unwrap()).unwrap();
    assert_eq!(after["spent"], json!(u64::MAX), "the ledger is unchanged");
    // Same with the model's own budget and spent beyond it.
    l["budget"] = json!(10);
    std::fs::write(&lp, serde_json::to_vec(&l).unwrap()).unwrap();
    let (c, err) = code(&["predict", "--model", m, "--input", qs]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("corrupt budget ledger"), "{err}");
    // At exactly B - 1 one more answer fits, then the budget is exhausted.
    l["spent"] = json!(9);
    std::fs::write(&lp, serde_json::to_vec(&l).unwrap()).unwrap();
    ok(&["predict", "--model", m, "--input", qs]);
    let (c, err) = code(&["predict", "--model", m, "--input", qs]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("budget exhausted"), "{err}");
    // A ledger of other weights is an error, not a fresh start.
    l["weights_sha256"] = json!("00".repeat(32));
    std::fs::write(&lp, serde_json::to_vec(&l).unwrap()).unwrap();
    let (c, err) = code(&["predict", "--model", m, "--input", qs]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("other model weights"), "{err}");
    // A deleted ledger is an error, not a fresh start.
    std::fs::remove_file(&lp).unwrap();
    let (c, err) = code(&["predict", "--model", m, "--input", qs]);
    assert_eq!(c, 2, "{err}");
    assert!(err.contains("--init-ledger"), "{err}");
}

struct Serve {
    child: Child,
    addr: std::net::SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(args: &[&str]) -> Result<Serve, (i32, String)> {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if let Some(a) = line.trim().strip_prefix("listening on http://") {
        std::thread::spawn(move || {
            let mut sink = String::new();
            while out.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        return Ok(Serve {
            child,
            addr: a.parse().unwrap(),
        });
    }
    let o = child.wait_with_output().unwrap();
    Err((
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
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
/// there), delete the ledger, restart: formerly a fresh ledger and 20 more answers; now an
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
