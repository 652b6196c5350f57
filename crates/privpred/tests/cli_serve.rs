//! `privpred serve` end to end: the real binary on a loopback port. Crash safety (kill -9 and
//! restart), graceful SIGTERM, a full or read-only ledger, CLI validation and tokens.
//! Uses the serve crate's TEST FIXTURE model files (synthetic linear models), so these tests
//! do not depend on training. PostgreSQL variants run when `PRIVPRED_TEST_POSTGRES` is set.

use privpred_answer::LedgerSpec;
use privpred_answer::ledger::blocking;
use privpred_core::Method;
use privpred_serve::FixtureSpec;
use privpred_serve::client::Client;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_privpred");

/// The tests' config directory (their default key directory lives under it, never in the
/// real home; the same one as `common::CONFIG_HOME`).
const CONFIG_HOME: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/privpred-config");

fn bin() -> Command {
    let mut c = Command::new(BIN);
    c.env("XDG_CONFIG_HOME", CONFIG_HOME);
    c
}

fn unique(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{tag}_{}_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn write_fixture(dir: &Path, method: Method, budget: u64, dim: usize) -> PathBuf {
    let mut s = FixtureSpec::new(method, budget, dim, 3);
    s.tag = unique("cli");
    let p = dir.join("model.fixture.json");
    std::fs::write(&p, s.to_json()).unwrap();
    p
}

/// A PostgreSQL ledger string with a fresh schema, or None (skip note) when not configured.
fn postgres_ledger(test: &str) -> Option<String> {
    let Ok(base) = std::env::var("PRIVPRED_TEST_POSTGRES") else {
        eprintln!("skipping the PostgreSQL variant of {test}: PRIVPRED_TEST_POSTGRES is not set");
        return None;
    };
    let schema = unique(&format!("cli_{test}")).to_lowercase();
    create_schema(&base, &schema);
    Some(if base.contains("://") {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options=-csearch_path%3D{schema}")
    } else {
        format!("{base} options='-c search_path={schema}'")
    })
}

fn create_schema(base: &str, schema: &str) {
    privpred_answer::ledger::blocking::create_schema(
        &LedgerSpec::Postgres(base.to_string()),
        schema,
    )
    .expect("create a test schema in PRIVPRED_TEST_POSTGRES");
}

struct Serve {
    child: Child,
    addr: SocketAddr,
    stderr: PathBuf,
}

impl Serve {
    fn client(&self, token: Option<&str>) -> Client {
        Client::new(self.addr, token)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `privpred serve ARGS` (optionally under `sh -c "PREFIX; exec …"`); Ok once it
/// prints its address, Err((exit code, stderr)) if it exits first.
fn spawn(dir: &Path, args: &[&str], shell_prefix: Option<&str>) -> Result<Serve, (i32, String)> {
    let stderr = dir.join(format!("{}.stderr", unique("serve")));
    let err_file = std::fs::File::create(&stderr).unwrap();
    let mut cmd = match shell_prefix {
        Some(prefix) => {
            let quoted: Vec<String> = args
                .iter()
                .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
                .collect();
            let mut c = Command::new("sh");
            c.env("XDG_CONFIG_HOME", CONFIG_HOME)
                .arg("-c")
                .arg(format!("{prefix}; exec '{BIN}' serve {}", quoted.join(" ")));
            c
        }
        None => {
            let mut c = bin();
            c.arg("serve").args(args);
            c
        }
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(err_file)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if let Some(a) = line.trim().strip_prefix("listening on http://") {
        let addr = a.parse().unwrap();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while out.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        return Ok(Serve {
            child,
            addr,
            stderr,
        });
    }
    let status = child.wait().unwrap();
    Err((
        status.code().unwrap_or(-1),
        std::fs::read_to_string(&stderr).unwrap_or_default(),
    ))
}

fn serve(dir: &Path, args: &[&str]) -> Serve {
    spawn(dir, args, None)
        .unwrap_or_else(|(code, err)| panic!("privpred serve exited {code}: {err}"))
}

/// Row `i`: three base-4096 digits of i over 8192 (exact in f32, norm < 1, so the fixture's
/// preprocessing leaves it unchanged): distinct rows for distinct i < 2^36.
fn row(i: u64, dim: usize) -> Vec<f32> {
    let mut r = vec![0.0f32; dim];
    for (k, v) in r.iter_mut().take(3).enumerate() {
        *v = ((i >> (12 * k)) % 4096) as f32 / 8192.0;
    }
    r
}

fn predict(c: &mut Client, rows: &[Vec<f32>]) -> std::io::Result<(u16, Value)> {
    let r = c.post_json("/v1/predict", &json!({ "inputs": rows }).to_string())?;
    Ok((r.status, r.json()))
}

fn model_id(s: &Serve) -> String {
    s.client(None).get("/v1/model").unwrap().json()["model_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Clients send batches of `batch` distinct rows until told to stop or refused; returns the
/// fresh answers received (budget units spent by delivered responses).
fn load(
    addr: SocketAddr,
    threads: u64,
    batch: u64,
    dim: usize,
    start: u64,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..threads)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = Client::new(addr, None);
                let mut received = 0u64;
                let mut next = start + t * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    let rows: Vec<_> = (0..batch).map(|k| row(next + k, dim)).collect();
                    next += batch;
                    match predict(&mut c, &rows) {
                        Ok((200, v)) => received += v["spent"].as_u64().unwrap(),
                        Ok((429, _)) => break,
                        Ok((st, v)) => panic!("unexpected {st}: {v}"),
                        Err(_) => break, // server gone
                    }
                }
                received
            })
        })
        .collect()
}

fn kill9_during_load_then_restart(ledger: Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let b = 3000u64;
    let model = write_fixture(dir.path(), Method::PredictionSensitivity, b, 4);
    let ledger =
        ledger.unwrap_or_else(|| format!("sqlite:{}", dir.path().join("ledger.sqlite").display()));
    let args = [
        "--model",
        model.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--ledger",
        &ledger,
    ];
    // The first start creates the ledger, deliberately; the restart below must not.
    let mut s = serve(dir.path(), &[&args[..], &["--init-ledger"]].concat());
    let id = model_id(&s);
    let stop = Arc::new(AtomicBool::new(false));
    let handles = load(s.addr, 6, 5, 4, 0, stop.clone());
    // Kill -9 once load is well under way.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let st = blocking::read_state(&LedgerSpec::parse(&ledger).unwrap(), &id)
            .unwrap()
            .unwrap();
        if st.spent >= 400 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();
    let before: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let spec = LedgerSpec::parse(&ledger).unwrap();
    let recorded = blocking::read_state(&spec, &id).unwrap().unwrap().spent;
    assert!(before >= 300, "load too small before the kill: {before}");
    assert!(
        recorded >= before,
        "released {before} answers but the ledger recorded only {recorded}"
    );
    assert!(recorded <= b);
    drop(s);
    // Restart on the same ledger and drain the budget.
    let s = serve(dir.path(), &args);
    let info = s.client(None).get("/v1/model").unwrap().json();
    assert_eq!(info["budget"]["spent"], recorded, "restart keeps the count");
    let after: u64 = load(s.addr, 6, 5, 4, 500_000, Arc::new(AtomicBool::new(false)))
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    let final_state = blocking::read_state(&spec, &id).unwrap().unwrap();
    assert_eq!(final_state.spent, b);
    assert!(
        before + after <= b,
        "{before} + {after} answers released for a budget of {b}"
    );
    assert_eq!(
        before + after + (recorded - before),
        b,
        "every unit is either released or lost in the crash"
    );
    let (st, v) = predict(&mut s.client(None), &[row(9_999_999, 4)]).unwrap();
    assert_eq!(st, 429, "{v}");
}

#[test]
fn kill9_during_load_then_restart_sqlite() {
    kill9_during_load_then_restart(None);
}

#[test]
fn kill9_during_load_then_restart_postgres() {
    if let Some(l) = postgres_ledger("kill9") {
        kill9_during_load_then_restart(Some(l));
    }
}

#[test]
fn sigterm_finishes_in_flight_answers() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_fixture(dir.path(), Method::PredictionSensitivity, 1_000_000, 4);
    let ledger = format!("sqlite:{}", dir.path().join("l.sqlite").display());
    let mut s = serve(
        dir.path(),
        &[
            "--model",
            model.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--ledger",
            &ledger,
            "--init-ledger",
        ],
    );
    let id = model_id(&s);
    let handles = load(s.addr, 4, 3, 4, 0, Arc::new(AtomicBool::new(false)));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let ok = Command::new("kill")
        .arg("-TERM")
        .arg(s.child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    let status = s.child.wait().unwrap();
    assert!(
        status.success(),
        "exit status {status:?}: {}",
        std::fs::read_to_string(&s.stderr).unwrap()
    );
    let received: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let recorded = blocking::read_state(&LedgerSpec::parse(&ledger).unwrap(), &id)
        .unwrap()
        .unwrap()
        .spent;
    assert!(received > 0);
    assert!(
        received <= recorded,
        "{received} released, {recorded} recorded"
    );
    assert!(
        std::fs::read_to_string(&s.stderr)
            .unwrap()
            .contains("shut down cleanly")
    );
}

#[test]
fn full_ledger_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_fixture(dir.path(), Method::PredictionSensitivity, 100_000, 4);
    let path = dir.path().join("full.sqlite");
    let ledger = format!("sqlite:{}", path.display());
    // Files written by the server may not exceed 256 KiB (SIGXFSZ ignored: writes fail with
    // EFBIG, as on a full disk).
    let s = spawn(
        dir.path(),
        &[
            "--model",
            model.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--ledger",
            &ledger,
            "--init-ledger",
        ],
        Some("trap '' XFSZ; ulimit -f 512"),
    )
    .unwrap_or_else(|(c, e)| panic!("exit {c}: {e}"));
    let id = model_id(&s);
    let mut c = s.client(None);
    let mut received = 0u64;
    let mut refused = 0;
    for i in 0..5000u64 {
        let rows: Vec<_> = (0..20).map(|k| row(i * 20 + k, 4)).collect();
        let (st, v) = predict(&mut c, &rows).unwrap();
        match st {
            200 => received += v["spent"].as_u64().unwrap(),
            503 => {
                assert_eq!(v["error"]["code"], "ledger_unavailable", "{v}");
                refused += 1;
                if refused == 3 {
                    break;
                }
            }
            _ => panic!("unexpected {st}: {v}"),
        }
    }
    assert_eq!(
        refused, 3,
        "the ledger never filled up ({received} answers)"
    );
    assert!(received > 0);
    drop(s);
    let recorded = blocking::read_state(&LedgerSpec::parse(&ledger).unwrap(), &id)
        .unwrap()
        .unwrap()
        .spent;
    assert_eq!(
        recorded, received,
        "every released answer is recorded, nothing else"
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

#[test]
fn read_only_ledger_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_fixture(dir.path(), Method::PredictionSensitivity, 10, 4);
    let path = dir.path().join("ro.sqlite");
    let ledger = format!("sqlite:{}", path.display());
    let args = [
        "--model",
        model.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--ledger",
        &ledger,
    ];
    // creates the ledger (deliberately); the starts below open it without --init-ledger
    drop(serve(dir.path(), &[&args[..], &["--init-ledger"]].concat()));
    if is_root() {
        // Root ignores file modes; a zero file-size limit makes every write fail instead.
        let (code, err) = spawn(dir.path(), &args, Some("trap '' XFSZ; ulimit -f 4"))
            .err()
            .expect("must not start");
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("ledger"), "{err}");
        eprintln!(
            "note: running as root, so the read-only file case was checked with a zero file-size limit"
        );
    } else {
        use std::os::unix::fs::PermissionsExt;
        for p in [path.clone(), dir.path().to_path_buf()] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        let (code, err) = spawn(dir.path(), &args, None)
            .err()
            .expect("must not start");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("ledger"), "{err}");
    }
    if let Ok(base) = std::env::var("PRIVPRED_TEST_POSTGRES") {
        let ro = if base.contains("://") {
            let sep = if base.contains('?') { '&' } else { '?' };
            format!("{base}{sep}options=-cdefault_transaction_read_only%3Don")
        } else {
            format!("{base} options='-c default_transaction_read_only=on'")
        };
        let args = [
            "--model",
            model.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--ledger",
            &ro,
            "--init-ledger",
        ];
        let (code, err) = spawn(dir.path(), &args, None)
            .err()
            .expect("must not start on a read-only database");
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("read-only"), "{err}");
    } else {
        eprintln!("skipping the PostgreSQL read-only case: PRIVPRED_TEST_POSTGRES is not set");
    }
}

#[test]
fn cli_validation_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_fixture(dir.path(), Method::PredictionSensitivity, 10, 4);
    let m = model.to_str().unwrap();
    let empty = dir.path().join("empty.tokens");
    std::fs::write(&empty, "# none\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--model", m, "--listen", "0.0.0.0:0"], "loopback"),
        (
            vec![
                "--model",
                m,
                "--listen",
                "127.0.0.1:0",
                "--ledger",
                "mysql://x",
            ],
            "--ledger",
        ),
        (
            vec!["--model", "/nonexistent/model", "--listen", "127.0.0.1:0"],
            "--model",
        ),
        (
            vec![
                "--model",
                m,
                "--listen",
                "127.0.0.1:0",
                "--tokens",
                empty.to_str().unwrap(),
            ],
            "--tokens",
        ),
        (
            vec!["--model", m, "--listen", "127.0.0.1:0", "--max-batch", "0"],
            "--max-batch",
        ),
        (vec!["--model", m, "--listen", "not-an-address"], "--listen"),
        (
            vec![
                "--model",
                m,
                "--listen",
                "127.0.0.1:0",
                "--header-timeout",
                "0",
            ],
            "--header-timeout",
        ),
        (
            vec![
                "--model",
                m,
                "--listen",
                "127.0.0.1:0",
                "--idle-timeout",
                "NaN",
            ],
            "--idle-timeout",
        ),
        (
            vec![
                "--model",
                m,
                "--listen",
                "127.0.0.1:0",
                "--max-connections",
                "0",
            ],
            "--max-connections",
        ),
        // no ledger and no --init-ledger: nothing is created, the flag is named
        (
            vec!["--model", m, "--listen", "127.0.0.1:0"],
            "--init-ledger",
        ),
    ];
    for (args, needle) in cases {
        let (code, err) = spawn(dir.path(), &args, None)
            .err()
            .unwrap_or_else(|| panic!("{args:?} started"));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A file that is neither an artifact nor a fixture.
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"not a model").unwrap();
    let (code, err) = spawn(
        dir.path(),
        &["--model", junk.to_str().unwrap(), "--listen", "127.0.0.1:0"],
        None,
    )
    .err()
    .unwrap();
    assert_eq!(code, 2, "{err}");
}

#[test]
fn tokens_file_and_default_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_fixture(dir.path(), Method::SubsampleAggregate, 10, 4);
    let tokens = dir.path().join("tokens");
    // sha256("hello-token")
    let hash = privpred_serve::model::sha256_hex(b"hello-token");
    std::fs::write(&tokens, format!("# hashed\nsha256:{hash}\n")).unwrap();
    let s = serve(
        dir.path(),
        &[
            "--model",
            model.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--tokens",
            tokens.to_str().unwrap(),
            "--init-ledger",
        ],
    );
    assert_eq!(predict(&mut s.client(None), &[row(1, 4)]).unwrap().0, 401);
    assert_eq!(
        predict(&mut s.client(Some("nope")), &[row(1, 4)])
            .unwrap()
            .0,
        401
    );
    let (st, v) = predict(&mut s.client(Some("hello-token")), &[row(1, 4)]).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["budget"]["spent"], 1);
    let err = std::fs::read_to_string(&s.stderr).unwrap();
    assert!(err.contains("bearer tokens required"), "{err}");
    assert!(err.contains("TEST FIXTURE"), "{err}");
    // Default ledger: beside the model.
    let mut p = model.clone().into_os_string();
    p.push(".ledger.sqlite");
    assert!(PathBuf::from(p).exists());
}

#[test]
fn loopback_only_is_announced() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_fixture(dir.path(), Method::ModelSensitivity, 10, 4);
    let s = serve(
        dir.path(),
        &[
            "--model",
            model.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let (st, v) = predict(&mut s.client(None), &[row(1, 4)]).unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["budget"]["unlimited"], true);
    let err = std::fs::read_to_string(&s.stderr).unwrap();
    assert!(err.contains("loopback only"), "{err}");
    assert!(err.contains("not budgeted"), "{err}");
}

/// A trained artifact of each method (small `digits` data set, 64 raw features) is served:
/// the guarantee is reported, private-prediction methods stop at exactly B, private-training
/// methods are unlimited, subsample-and-aggregate releases labels only, bad rows spend nothing.
#[test]
fn serves_trained_artifacts_of_every_method() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], bool, bool); 5] = [
        (
            "prediction-sensitivity",
            &["--epsilon", "1", "--budget", "5", "--lambda", "0.01"],
            true,
            true,
        ),
        (
            "subsample-aggregate",
            &["--epsilon", "1", "--budget", "5", "--teachers", "8"],
            true,
            false,
        ),
        (
            "model-sensitivity",
            &["--epsilon", "1", "--lambda", "0.01"],
            false,
            true,
        ),
        (
            "loss-perturbation",
            &["--epsilon", "1", "--lambda", "0.01"],
            false,
            true,
        ),
        (
            "dp-sgd",
            &["--epsilon", "1", "--delta", "1e-5", "--epochs", "1"],
            false,
            true,
        ),
    ];
    for (method, train_args, budgeted, scores) in cases {
        let model = dir.path().join(format!("{method}.safetensors"));
        let out = bin()
            .args([
                "train",
                method,
                "--dataset",
                "digits",
                "--out",
                model.to_str().unwrap(),
            ])
            .args(train_args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "train {method}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = serve(
            dir.path(),
            &[
                "--model",
                model.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--init-ledger",
            ],
        );
        let mut c = s.client(None);
        let info = c.get("/v1/model").unwrap().json();
        assert_eq!(info["method"], method);
        assert_eq!(info["test_fixture"], false);
        assert_eq!(info["input_dim"], 64);
        assert_eq!(info["budget"]["unlimited"], !budgeted, "{info}");
        let pixel_row =
            |i: u64| -> Vec<f32> { (0..64).map(|j| ((i * 7 + j * 3) % 17) as f32).collect() };
        let (st, v) = predict(&mut c, &[vec![1.0; 63]]).unwrap();
        assert_eq!(st, 422, "{v}");
        for i in 0..5 {
            let (st, v) = predict(&mut c, &[pixel_row(i)]).unwrap();
            assert_eq!(st, 200, "{method}: {v}");
            assert!(v["answers"][0]["label"].as_u64().unwrap() < 10);
            assert_eq!(
                v["answers"][0].get("scores").is_some(),
                scores,
                "{method}: {v}"
            );
        }
        let (st, v) = predict(&mut c, &[pixel_row(5)]).unwrap();
        assert_eq!(st, if budgeted { 429 } else { 200 }, "{method}: {v}");
        if budgeted {
            assert_eq!(c.get("/v1/model").unwrap().json()["budget"]["spent"], 5);
        }
    }
}
