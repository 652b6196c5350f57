//! Integration tests of the service: a real server on a loopback port, real HTTP, and both
//! ledgers. PostgreSQL variants run when `PRIVPRED_TEST_POSTGRES` holds a libpq connection
//! string (CI sets it); otherwise they print a skip note and pass.

use privpred_answer::LedgerSpec;
use privpred_answer::ledger::admin;
use privpred_core::Method;
use privpred_serve::client::Client;
use privpred_serve::{FixtureModel, FixtureSpec, ServeConfig, ServedModel, Server, TokenSet};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A ledger location unique to one test.
struct TestLedger {
    spec: LedgerSpec,
    _dir: Option<tempfile::TempDir>,
}

fn unique(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{name}_{}_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

impl TestLedger {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        TestLedger {
            spec: LedgerSpec::Sqlite(dir.path().join("ledger.sqlite")),
            _dir: Some(dir),
        }
    }

    /// A fresh schema in the test PostgreSQL, or None (skip) when it is not configured.
    fn postgres(test: &str) -> Option<Self> {
        let Ok(base) = std::env::var("PRIVPRED_TEST_POSTGRES") else {
            eprintln!(
                "skipping the PostgreSQL variant of {test}: PRIVPRED_TEST_POSTGRES is not set"
            );
            return None;
        };
        let schema = unique(&format!("t_{test}")).to_lowercase();
        rt().block_on(async {
            let (c, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
                .await
                .expect("connect to PRIVPRED_TEST_POSTGRES");
            tokio::spawn(conn);
            c.batch_execute(&format!("CREATE SCHEMA {schema}"))
                .await
                .unwrap();
        });
        let conn = if base.contains("://") {
            let sep = if base.contains('?') { '&' } else { '?' };
            format!("{base}{sep}options=-csearch_path%3D{schema}")
        } else {
            format!("{base} options='-c search_path={schema}'")
        };
        Some(TestLedger {
            spec: LedgerSpec::Postgres(conn),
            _dir: None,
        })
    }
}

struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    model_id: String,
}

impl Running {
    fn client(&self) -> Client {
        Client::new(self.addr, None)
    }

    fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn fixture(method: Method, budget: u64, dim: usize, tag: &str) -> String {
    let mut s = FixtureSpec::new(method, budget, dim, 3);
    s.tag = unique(tag);
    s.to_json()
}

fn try_start(model_json: &str, cfg: ServeConfig) -> Result<Running, String> {
    let model = Arc::new(FixtureModel::from_bytes(model_json.as_bytes()).unwrap());
    let model_id = model.info().model_id.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        rt().block_on(async move {
            match Server::bind(model, cfg).await {
                Ok(server) => {
                    tx.send(Ok(server.local_addr())).unwrap();
                    let r = server
                        .run(async move {
                            let _ = stop_rx.await;
                        })
                        .await;
                    // A ledger deleted under the server (a test of that) cannot be
                    // checkpointed at shutdown: the one expected error.
                    if let Err(e) = r {
                        assert!(e.to_string().contains("since the server opened it"), "{e}");
                    }
                }
                Err(e) => tx.send(Err(e.to_string())).unwrap(),
            }
        })
    });
    match rx.recv().unwrap() {
        Ok(addr) => Ok(Running {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
            model_id,
        }),
        Err(e) => {
            thread.join().unwrap();
            Err(e)
        }
    }
}

/// Starts a server on `ledger`. The ledger is never created implicitly: this helper passes
/// `init_ledger` deliberately the first time a model is started on a test's ledger (no
/// record yet), and not on restarts.
fn start(model_json: &str, ledger: &TestLedger, f: impl FnOnce(&mut ServeConfig)) -> Running {
    let mut cfg = ServeConfig::new("127.0.0.1:0");
    cfg.ledger = Some(ledger.spec.clone());
    let id = FixtureModel::from_bytes(model_json.as_bytes())
        .unwrap()
        .info()
        .model_id
        .clone();
    cfg.init_ledger = !matches!(
        rt().block_on(admin::read_state(&ledger.spec, &id)),
        Ok(Some(_))
    );
    f(&mut cfg);
    try_start(model_json, cfg).expect("server starts")
}

fn spent_in_ledger(ledger: &TestLedger, model_id: &str) -> u64 {
    rt().block_on(admin::read_state(&ledger.spec, model_id))
        .unwrap()
        .expect("budget row")
        .spent
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

fn predict(c: &mut Client, rows: &[Vec<f32>]) -> (u16, Value) {
    let r = c
        .post_json("/v1/predict", &json!({ "inputs": rows }).to_string())
        .unwrap();
    (r.status, r.json())
}

macro_rules! both_ledgers {
    ($name:ident) => {
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::TestLedger::sqlite());
            }
            #[test]
            fn postgres() {
                if let Some(l) = super::TestLedger::postgres(stringify!($name)) {
                    super::$name(l);
                }
            }
        }
    };
}

fn exhaustion_at_exactly_b(ledger: TestLedger) {
    let b = 20;
    let m = fixture(Method::PredictionSensitivity, b, 4, "exhaust");
    let s = start(&m, &ledger, |_| {});
    let mut c = s.client();
    for i in 0..b {
        let (st, v) = predict(&mut c, &[row(i, 4)]);
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["spent"], 1);
        assert_eq!(v["budget"]["spent"], i + 1);
        assert_eq!(v["budget"]["remaining"], b - i - 1);
        assert_eq!(v["answers"][0]["scores"].as_array().unwrap().len(), 3);
    }
    let (st, v) = predict(&mut c, &[row(b, 4)]);
    assert_eq!(st, 429, "{v}");
    assert_eq!(v["error"]["code"], "budget_exhausted");
    assert_eq!(v["error"]["budget"]["remaining"], 0);
    // An earlier query again: the stored answer, nothing spent.
    let (st, v) = predict(&mut c, &[row(3, 4)]);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["answers"][0]["stored"], true);
    assert_eq!(v["spent"], 0);
    // A batch mixing stored and new rows is refused whole.
    let (st, _) = predict(&mut c, &[row(3, 4), row(b + 1, 4)]);
    assert_eq!(st, 429);
    let model = c.get("/v1/model").unwrap().json();
    assert_eq!(model["budget"]["spent"], b);
    assert_eq!(model["budget"]["remaining"], 0);
    let metrics = c.get("/metrics").unwrap().body;
    assert!(metrics.contains("privpred_budget_remaining 0"), "{metrics}");
    assert!(
        metrics.contains("privpred_refusals_total{reason=\"budget_exhausted\"} 2"),
        "{metrics}"
    );
    let id = s.model_id.clone();
    s.stop();
    assert_eq!(spent_in_ledger(&ledger, &id), b);
    // After a restart the count is kept.
    let s = start(&m, &ledger, |_| {});
    let mut c = s.client();
    let (st, _) = predict(&mut c, &[row(b + 2, 4)]);
    assert_eq!(st, 429);
}
both_ledgers!(exhaustion_at_exactly_b);

fn partial_batch_refused_whole(ledger: TestLedger) {
    let m = fixture(Method::PredictionSensitivity, 10, 4, "partial");
    let s = start(&m, &ledger, |_| {});
    let mut c = s.client();
    let rows: Vec<_> = (0..8).map(|i| row(i, 4)).collect();
    assert_eq!(predict(&mut c, &rows).0, 200);
    let rows: Vec<_> = (8..11).map(|i| row(i, 4)).collect();
    let (st, v) = predict(&mut c, &rows);
    assert_eq!(st, 429, "{v}");
    assert_eq!(v["error"]["needed"], 3);
    assert_eq!(v["error"]["budget"]["remaining"], 2);
    // Duplicate rows in one request cost one unit.
    let (st, v) = predict(&mut c, &[row(20, 4), row(20, 4)]);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["spent"], 1);
    assert_eq!(v["answers"][0]["label"], v["answers"][1]["label"]);
    assert_eq!(v["answers"][1]["stored"], true);
    let id = s.model_id.clone();
    s.stop();
    assert_eq!(spent_in_ledger(&ledger, &id), 9);
}
both_ledgers!(partial_batch_refused_whole);

fn race_for_the_last_units(ledger: TestLedger, replicas: usize) {
    let b = 100u64;
    let m = fixture(Method::PredictionSensitivity, b, 8, "race");
    let servers: Vec<Running> = (0..replicas).map(|_| start(&m, &ledger, |_| {})).collect();
    // Spend 70 first, leaving 30 for 64 racing clients.
    let (st, _) = predict(
        &mut servers[0].client(),
        &(0..70).map(|i| row(i, 8)).collect::<Vec<_>>(),
    );
    assert_eq!(st, 200);
    let fresh = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(std::sync::Barrier::new(64));
    let handles: Vec<_> = (0..64u64)
        .map(|t| {
            let addr = servers[t as usize % replicas].addr;
            let fresh = fresh.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut c = Client::new(addr, None);
                barrier.wait();
                for k in 0..3u64 {
                    let (st, v) = predict(&mut c, &[row(1000 + t * 10 + k, 8)]);
                    match st {
                        200 => {
                            assert_eq!(v["spent"], 1);
                            fresh.fetch_add(1, Ordering::SeqCst);
                        }
                        429 => assert_eq!(v["error"]["code"], "budget_exhausted"),
                        _ => panic!("unexpected {st}: {v}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // 192 distinct single-row requests for 30 units: exactly 30 answered, never more.
    assert_eq!(fresh.load(Ordering::SeqCst), 30);
    let id = servers[0].model_id.clone();
    drop(servers);
    assert_eq!(spent_in_ledger(&ledger, &id), b);
}

fn sixty_four_clients_race(ledger: TestLedger) {
    race_for_the_last_units(ledger, 1);
}
both_ledgers!(sixty_four_clients_race);

fn two_replicas_share_one_budget(ledger: TestLedger) {
    race_for_the_last_units(ledger, 2);
}
both_ledgers!(two_replicas_share_one_budget);

fn malformed_requests_spend_nothing(ledger: TestLedger) {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "malformed");
    let s = start(&m, &ledger, |c| {
        c.max_batch = 8;
        c.max_body_bytes = Some(4096);
    });
    let mut c = s.client();
    let cases: Vec<(String, u16, &str)> = vec![
        ("not json".into(), 400, "malformed_json"),
        ("{\"inputs\": [[1,2,3,NaN]]}".into(), 400, "malformed_json"),
        (
            "{\"inputs\": [[1,2,3,\"4\"]]}".into(),
            400,
            "malformed_json",
        ),
        ("{\"rows\": [[1,2,3,4]]}".into(), 400, "malformed_json"),
        (
            "{\"inputs\": [[1,2,3,4]], \"extra\": 1}".into(),
            400,
            "malformed_json",
        ),
        ("{\"inputs\": []}".into(), 422, "empty_batch"),
        ("{\"inputs\": [[1,2,3]]}".into(), 422, "wrong_dimension"),
        (
            "{\"inputs\": [[0,0,0,0],[1,2,3,4,5]]}".into(),
            422,
            "wrong_dimension",
        ),
        (
            "{\"inputs\": [[1e39,0,0,0]]}".into(),
            422,
            "non_finite_value",
        ),
        (
            "{\"inputs\": [[-1e300,0,0,0]]}".into(),
            422,
            "non_finite_value",
        ),
        (
            json!({ "inputs": vec![vec![0.1f32; 4]; 9] }).to_string(),
            413,
            "batch_too_large",
        ),
        (
            format!("{{\"inputs\": [[{}]]}}", vec!["0.0"; 2000].join(",")),
            413,
            "body_too_large",
        ),
    ];
    for (body, status, code) in cases {
        let r = c.post_json("/v1/predict", &body).unwrap();
        assert_eq!(r.status, status, "{body:.80} → {}", r.body);
        assert_eq!(r.json()["error"]["code"], code, "{body:.80} → {}", r.body);
    }
    assert_eq!(c.get("/v1/model").unwrap().json()["budget"]["spent"], 0);
    let (st, _) = predict(&mut c, &[row(1, 4)]);
    assert_eq!(st, 200);
    let id = s.model_id.clone();
    s.stop();
    assert_eq!(spent_in_ledger(&ledger, &id), 1);
}
both_ledgers!(malformed_requests_spend_nothing);

fn unwritable_ledger_fails_closed(ledger: TestLedger) {
    let m = fixture(Method::SubsampleAggregate, 50, 4, "closed");
    let s = start(&m, &ledger, |_| {});
    let mut c = s.client();
    for i in 0..3 {
        let (st, v) = predict(&mut c, &[row(i, 4)]);
        assert_eq!(st, 200);
        assert!(
            v["answers"][0].get("scores").is_none(),
            "subsample-and-aggregate releases labels only"
        );
    }
    rt().block_on(admin::block_writes(&ledger.spec, &s.model_id))
        .unwrap();
    for i in 3..6 {
        let (st, v) = predict(&mut c, &[row(i, 4)]);
        assert_eq!(st, 503, "{v}");
        assert_eq!(v["error"]["code"], "ledger_unavailable");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.matches("ledger error").count() <= 1,
            "the ledger error's prefix is printed once: {msg}"
        );
    }
    // /healthz proves the ledger writable: it reports the failure the predicts get.
    let h = c.get("/healthz").unwrap();
    assert_eq!(h.status, 503, "{}", h.body);
    assert_eq!(h.json()["status"], "unavailable");
    // A stored answer needs no write: still served.
    let (st, v) = predict(&mut c, &[row(1, 4)]);
    assert_eq!(st, 200, "{v}");
    assert!(
        c.get("/metrics")
            .unwrap()
            .body
            .contains("privpred_refusals_total{reason=\"ledger_unavailable\"} 3")
    );
    let id = s.model_id.clone();
    s.stop();
    assert_eq!(spent_in_ledger(&ledger, &id), 3);
    // A server cannot start on a ledger it cannot write.
    let mut cfg = ServeConfig::new("127.0.0.1:0");
    cfg.ledger = Some(ledger.spec.clone());
    let err = try_start(&m, cfg)
        .err()
        .expect("start-up must fail on an unwritable ledger");
    assert!(err.contains("ledger"), "{err}");
}
both_ledgers!(unwritable_ledger_fails_closed);

fn answer_store_option(ledger: TestLedger) {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "store");
    let s = start(&m, &ledger, |_| {});
    let mut c = s.client();
    let (_, first) = predict(&mut c, &[row(7, 4)]);
    let (_, again) = predict(&mut c, &[row(7, 4)]);
    assert_eq!(first["answers"][0]["scores"], again["answers"][0]["scores"]);
    assert_eq!(again["answers"][0]["stored"], true);
    assert_eq!(again["budget"]["spent"], 1);
    // The key is the *preprocessed* input: a scaled copy outside the unit ball maps to the
    // same preprocessed row only if equal after scaling; an equal row is equal.
    s.stop();
    let s = start(&m, &ledger, |c| c.answer_store = false);
    let mut c = s.client();
    let (_, v) = predict(&mut c, &[row(7, 4)]);
    assert_eq!(v["spent"], 1);
    assert_eq!(v["budget"]["spent"], 2);
    assert_eq!(v["answers"][0]["stored"], false);
    assert_ne!(
        first["answers"][0]["scores"], v["answers"][0]["scores"],
        "fresh noise per answer"
    );
}
both_ledgers!(answer_store_option);

fn tokens_enforced(ledger: TestLedger) {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "tokens");
    let hash = privpred_serve::model::hex(&<sha2::Sha256 as sha2::Digest>::digest(b"alpha-token"));
    let tokens = TokenSet::parse(&format!("# clients\nsha256:{hash}\nbeta-token\n")).unwrap();
    let s = start(&m, &ledger, |c| c.tokens = Some(tokens));
    for token in [
        None,
        Some("wrong"),
        Some("sha256:".to_string() + &hash).as_deref(),
    ] {
        let mut c = Client::new(s.addr, token);
        let r = c
            .post_json("/v1/predict", &json!({ "inputs": [row(1, 4)] }).to_string())
            .unwrap();
        assert_eq!(r.status, 401, "{token:?}");
        assert_eq!(r.json()["error"]["code"], "unauthorized");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert_eq!(c.get("/v1/model").unwrap().status, 401);
        assert_eq!(c.get("/metrics").unwrap().status, 401);
        assert_eq!(c.get("/healthz").unwrap().status, 200);
        assert_eq!(c.get("/openapi.json").unwrap().status, 200);
    }
    for token in ["alpha-token", "beta-token"] {
        let mut c = Client::new(s.addr, Some(token));
        let (st, v) = predict(&mut c, &[row(1, 4)]);
        assert_eq!(st, 200);
        // The answer store is per token by default: beta does not get alpha's answer.
        assert_eq!(v["answers"][0]["stored"], false, "{token}: {v}");
        let (_, again) = predict(&mut c, &[row(1, 4)]);
        assert_eq!(again["answers"][0]["stored"], true, "{token}: {again}");
        assert_eq!(again["answers"][0]["scores"], v["answers"][0]["scores"]);
    }
    let id = s.model_id.clone();
    s.stop();
    assert_eq!(spent_in_ledger(&ledger, &id), 2);
}
both_ledgers!(tokens_enforced);

#[test]
fn non_loopback_needs_tokens() {
    let m = fixture(Method::PredictionSensitivity, 5, 4, "loopback");
    let l = TestLedger::sqlite();
    let mut cfg = ServeConfig::new("0.0.0.0:0");
    cfg.ledger = Some(l.spec.clone());
    cfg.init_ledger = true;
    let err = try_start(&m, cfg.clone()).err().expect("refused");
    assert!(err.contains("loopback"), "{err}");
    cfg.tokens = Some(TokenSet::parse("t\n").unwrap());
    try_start(&m, cfg)
        .expect("with tokens any address is allowed")
        .stop();
}

#[test]
fn finite_budget_needs_a_ledger() {
    let m = fixture(Method::PredictionSensitivity, 5, 4, "noledger");
    let err = try_start(&m, ServeConfig::new("127.0.0.1:0"))
        .err()
        .expect("refused");
    assert!(err.contains("--ledger"), "{err}");
}

#[test]
fn private_training_is_unlimited() {
    for method in [
        Method::ModelSensitivity,
        Method::LossPerturbation,
        Method::DpSgd,
    ] {
        let m = fixture(method, 1, 4, "unlimited");
        let s = try_start(&m, ServeConfig::new("127.0.0.1:0")).unwrap();
        let mut c = s.client();
        for i in 0..5 {
            let (st, v) = predict(&mut c, &[row(i, 4), row(i + 100, 4)]);
            assert_eq!(st, 200, "{v}");
            assert_eq!(v["budget"]["unlimited"], true);
            assert!(v["note"].as_str().unwrap().contains("not budgeted"));
        }
        let info = c.get("/v1/model").unwrap().json();
        assert_eq!(info["budget"]["unlimited"], true);
        assert_eq!(info["private_training"], true);
        assert!(
            c.get("/metrics")
                .unwrap()
                .body
                .contains("privpred_budget_remaining +Inf")
        );
    }
}

#[test]
fn info_endpoints_reveal_no_weights() {
    let m = fixture(Method::PredictionSensitivity, 5, 4, "info");
    let l = TestLedger::sqlite();
    let s = start(&m, &l, |_| {});
    let mut c = s.client();
    let info = c.get("/v1/model").unwrap();
    assert_eq!(info.status, 200);
    let v = info.json();
    assert_eq!(v["method"], "prediction-sensitivity");
    assert_eq!(v["guarantee"]["privacy"]["epsilon"], 1.0);
    assert_eq!(v["budget"]["total"], 5);
    assert_eq!(v["test_fixture"], true);
    fn keys(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                out.push(k.clone());
                keys(x, out)
            }),
            Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    keys(&v, &mut all);
    for key in ["theta", "weights", "seed", "teachers"] {
        assert!(!all.iter().any(|k| k == key), "/v1/model has a field {key}");
    }
    let api = c.get("/openapi.json").unwrap().json();
    assert_eq!(api["openapi"], "3.1.0");
    assert!(api["paths"]["/v1/predict"]["post"]["responses"]["429"].is_object());
    let h = c.get("/healthz").unwrap();
    assert_eq!(h.json()["status"], "ok");
    predict(&mut c, &[row(1, 4)]);
    let metrics = c.get("/metrics").unwrap();
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    for needle in [
        "privpred_requests_total{route=\"/v1/predict\",code=\"2xx\"} 1",
        "privpred_answers_total 1",
        "privpred_budget_remaining 4",
        "privpred_predict_duration_seconds_bucket{le=\"+Inf\"} 1",
        "privpred_predict_duration_seconds_count 1",
    ] {
        assert!(
            metrics.body.contains(needle),
            "missing {needle} in\n{}",
            metrics.body
        );
    }
    assert_eq!(c.get("/nope").unwrap().status, 404);
}

// ---- the ledger is never created silently, and is checked while it is used ----

fn missing_ledger_needs_init(ledger: TestLedger) {
    let m = fixture(Method::PredictionSensitivity, 20, 4, "init");
    let cfg = |init: bool| {
        let mut c = ServeConfig::new("127.0.0.1:0");
        c.ledger = Some(ledger.spec.clone());
        c.init_ledger = init;
        c
    };
    let err = try_start(&m, cfg(false)).err().expect("no ledger yet");
    assert!(err.contains("--init-ledger"), "{err}");
    let s = try_start(&m, cfg(true)).unwrap();
    let mut c = s.client();
    for i in 0..20 {
        assert_eq!(predict(&mut c, &[row(i, 4)]).0, 200);
    }
    assert_eq!(predict(&mut c, &[row(99, 4)]).0, 429);
    s.stop();
    // --init-ledger never resets an existing record.
    let err = try_start(&m, cfg(true)).err().expect("record exists");
    assert!(err.contains("already holds"), "{err}");
    let s = try_start(&m, cfg(false)).unwrap();
    let mut c = s.client();
    assert_eq!(predict(&mut c, &[row(100, 4)]).0, 429);
    s.stop();
}
both_ledgers!(missing_ledger_needs_init);

fn sqlite_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    ["ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"]
        .iter()
        .map(|f| dir.join(f))
        .collect()
}

/// B = 20, 20 answers, ledger deleted, restart: no fresh ledger, so no 20 more answers.
#[test]
fn deleted_ledger_is_not_recreated_on_restart() {
    for only_wal in [false, true] {
        let ledger = TestLedger::sqlite();
        let LedgerSpec::Sqlite(path) = &ledger.spec else {
            unreachable!()
        };
        let dir = path.parent().unwrap().to_path_buf();
        let m = fixture(Method::PredictionSensitivity, 20, 4, "deleted");
        let s = start(&m, &ledger, |_| {});
        let mut c = s.client();
        for i in 0..20 {
            assert_eq!(predict(&mut c, &[row(i, 4)]).0, 200);
        }
        let id = s.model_id.clone();
        s.stop();
        // After a clean shutdown the main file holds everything: no -wal content is needed.
        let wal = dir.join("ledger.sqlite-wal");
        assert!(
            std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) == 0,
            "the -wal file is checkpointed at shutdown"
        );
        let copy_dir = tempfile::tempdir().unwrap();
        let copy = copy_dir.path().join("copy.sqlite");
        std::fs::copy(path, &copy).unwrap();
        let st = privpred_answer::ledger::blocking::read_state(&LedgerSpec::Sqlite(copy), &id)
            .unwrap()
            .expect("the copied main file holds the record");
        assert_eq!(st.spent, 20);
        if only_wal {
            let _ = std::fs::remove_file(&wal);
            // The main file still holds the whole ledger: the budget stays spent.
            let s = start(&m, &ledger, |_| {});
            let mut c = s.client();
            assert_eq!(predict(&mut c, &[row(50, 4)]).0, 429);
            s.stop();
        } else {
            for f in sqlite_files(&dir) {
                let _ = std::fs::remove_file(f);
            }
            let mut cfg = ServeConfig::new("127.0.0.1:0");
            cfg.ledger = Some(ledger.spec.clone());
            let err = try_start(&m, cfg)
                .err()
                .expect("a deleted ledger is an error");
            assert!(
                err.contains("does not exist") && err.contains("--init-ledger"),
                "{err}"
            );
        }
    }
}

/// Deleting or replacing the ledger (or its -wal file) under a running server fails closed.
#[test]
fn ledger_replaced_while_running_fails_closed() {
    for victim in ["ledger.sqlite", "ledger.sqlite-wal"] {
        let ledger = TestLedger::sqlite();
        let LedgerSpec::Sqlite(path) = &ledger.spec else {
            unreachable!()
        };
        let dir = path.parent().unwrap().to_path_buf();
        let m = fixture(Method::PredictionSensitivity, 50, 4, "replaced");
        let s = start(&m, &ledger, |_| {});
        let mut c = s.client();
        assert_eq!(predict(&mut c, &[row(1, 4)]).0, 200);
        assert_eq!(c.get("/healthz").unwrap().status, 200);
        std::fs::remove_file(dir.join(victim)).unwrap();
        let (st, v) = predict(&mut c, &[row(2, 4)]);
        assert_eq!(st, 503, "{victim}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("since the server opened it"),
            "{v}"
        );
        // /healthz probes at most once per HEALTH_PROBE_INTERVAL (it answered 200 just before).
        std::thread::sleep(
            privpred_serve::server::HEALTH_PROBE_INTERVAL + Duration::from_millis(100),
        );
        let h = c.get("/healthz").unwrap();
        assert_eq!(h.status, 503, "{victim}: {}", h.body);
        s.stop();
    }
}

#[test]
fn budget_beyond_the_ledger_range_is_refused_clearly() {
    let m = fixture(Method::PredictionSensitivity, u64::MAX, 4, "huge");
    // one rule (privpred_core::MAX_BUDGET, what a ledger can record): the model itself is
    // refused, before any ledger is opened
    let err = FixtureModel::from_bytes(m.as_bytes())
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("the largest count a budget ledger records"),
        "{err}"
    );
}

fn backup_and_show(ledger: TestLedger) {
    let m = fixture(Method::PredictionSensitivity, 30, 4, "backup");
    let s = start(&m, &ledger, |_| {});
    let mut c = s.client();
    assert_eq!(predict(&mut c, &[row(1, 4), row(2, 4), row(3, 4)]).0, 200);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("backup.out");
    // While the server runs.
    let n = privpred_answer::ledger::blocking::backup(&ledger.spec, &out).unwrap();
    assert_eq!(n, 1);
    let recs = privpred_answer::ledger::blocking::show(&ledger.spec).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        (recs[0].total, recs[0].spent, recs[0].remaining),
        (30, 3, 27)
    );
    assert_eq!(recs[0].model_id, s.model_id);
    assert_eq!(recs[0].stored_answers, 3);
    match &ledger.spec {
        LedgerSpec::Sqlite(_) => {
            let st = privpred_answer::ledger::blocking::read_state(
                &LedgerSpec::Sqlite(out),
                &s.model_id,
            )
            .unwrap()
            .unwrap();
            assert_eq!(st.spent, 3);
        }
        LedgerSpec::Postgres(_) => {
            let sql = std::fs::read_to_string(&out).unwrap();
            assert!(
                sql.contains("GREATEST") && sql.contains(&s.model_id),
                "{sql}"
            );
            // Restore the dump into a fresh schema: the record and the stored answers come back.
            let restored = TestLedger::postgres("backup_restore").unwrap();
            let LedgerSpec::Postgres(conn) = &restored.spec else {
                unreachable!()
            };
            rt().block_on(async {
                let (c, cn) = tokio_postgres::connect(conn, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(cn);
                c.batch_execute(&sql).await.unwrap();
                // Restoring over a record with more spent never lowers it.
                c.batch_execute("UPDATE privpred_budget SET spent = 10")
                    .await
                    .unwrap();
                c.batch_execute(&sql).await.unwrap();
            });
            let recs = privpred_answer::ledger::blocking::show(&restored.spec).unwrap();
            assert_eq!(recs.len(), 1);
            assert_eq!((recs[0].total, recs[0].spent), (30, 10));
            assert_eq!(recs[0].stored_answers, 3);
        }
    }
    s.stop();
}
both_ledgers!(backup_and_show);

// ---- the HTTP surface ----

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends raw bytes, half-closes if asked, and reads the whole answer (until the server closes
/// or `wait` passes). Returns the status code (0 if none) and the text.
fn raw(addr: SocketAddr, bytes: &[u8], half_close: bool, wait: Duration) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    let _ = s.write_all(bytes);
    if half_close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn post_raw(addr: SocketAddr, ctype: Option<&str>, body: &str) -> (u16, String) {
    let mut req = "POST /v1/predict HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_string();
    if let Some(c) = ctype {
        req.push_str(&format!("Content-Type: {c}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    raw(addr, req.as_bytes(), false, Duration::from_secs(10))
}

#[test]
fn json_content_type_required() {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "ctype");
    let l = TestLedger::sqlite();
    let s = start(&m, &l, |_| {});
    let body = json!({ "inputs": [row(1, 4)] }).to_string();
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonx"),
        None,
    ] {
        let (st, text) = post_raw(s.addr, ct, &body);
        assert_eq!(st, 415, "{ct:?}: {text}");
        assert!(text.contains("unsupported_media_type"), "{text}");
    }
    assert_eq!(spent_in_ledger(&l, &s.model_id), 0);
    let (st, text) = post_raw(s.addr, Some("Application/JSON; charset=utf-8"), &body);
    assert_eq!(st, 200, "{text}");
    assert_eq!(spent_in_ledger(&l, &s.model_id), 1);
}

#[test]
fn truncated_body_is_400_and_slow_body_408() {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "trunc");
    let l = TestLedger::sqlite();
    let s = start(&m, &l, |c| {
        c.limits.body_timeout = Duration::from_millis(800)
    });
    let req = b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"inputs\": [[0.1";
    let (st, text) = raw(s.addr, req, true, Duration::from_secs(10));
    assert_eq!(st, 400, "{text}");
    assert!(text.contains("truncated_body"), "{text}");
    // The same body left hanging (not closed) runs into the body timeout.
    let t0 = Instant::now();
    let (st, text) = raw(s.addr, req, false, Duration::from_secs(10));
    assert_eq!(st, 408, "{text}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    // A body over the limit is still 413.
    let big = format!(
        "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        100_000_000
    );
    let (st, _) = raw(s.addr, big.as_bytes(), false, Duration::from_secs(10));
    assert_eq!(st, 413);
    assert_eq!(spent_in_ledger(&l, &s.model_id), 0);
}

/// 300 idle connections do not starve a normal request, and
/// idle or slowloris connections are closed after the header timeout.
#[test]
fn idle_and_slowloris_connections_are_bounded() {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "idle");
    let l = TestLedger::sqlite();
    let s = start(&m, &l, |c| {
        c.limits.header_timeout = Duration::from_millis(1000);
        c.limits.idle_timeout = Duration::from_millis(1000);
    });
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(s.addr).unwrap())
        .collect();
    let t0 = Instant::now();
    let mut c = s.client();
    assert_eq!(predict(&mut c, &[row(1, 4)]).0, 200);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // A slowloris client: one header byte every 100 ms, never finishing.
    let mut slow = TcpStream::connect(s.addr).unwrap();
    slow.write_all(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .unwrap();
    let t0 = Instant::now();
    let mut closed = false;
    while t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        if slow.write_all(b"a").is_err() {
            closed = true;
            break;
        }
    }
    assert!(closed, "a slowloris connection must be closed");
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
    // Every idle connection has been closed by now (EOF or reset).
    for mut i in idle {
        i.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        match i.read(&mut b) {
            Ok(0) | Err(_) => {}
            Ok(_) => {
                // hyper may answer 408 before closing; then EOF follows
                let mut rest = Vec::new();
                let _ = i.read_to_end(&mut rest);
            }
        }
    }
    // An idle keep-alive connection is closed too.
    let mut k = TcpStream::connect(s.addr).unwrap();
    k.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    k.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let t0 = Instant::now();
    let mut all = Vec::new();
    let _ = k.read_to_end(&mut all);
    assert!(String::from_utf8_lossy(&all).starts_with("HTTP/1.1 200"));
    assert!(
        t0.elapsed() < Duration::from_secs(6),
        "idle keep-alive closed after the idle timeout: {:?}",
        t0.elapsed()
    );
}

#[test]
fn connection_limit_answers_503() {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "connlimit");
    let l = TestLedger::sqlite();
    let s = start(&m, &l, |c| {
        c.limits.max_connections = 4;
        c.limits.header_timeout = Duration::from_millis(800);
    });
    let idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(s.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let (st, text) = raw(
        s.addr,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        false,
        Duration::from_secs(5),
    );
    assert_eq!(st, 503, "{text}");
    assert!(text.contains("too_many_connections"), "{text}");
    // Once the idle ones time out, service resumes.
    std::thread::sleep(Duration::from_millis(1500));
    let mut c = s.client();
    assert_eq!(predict(&mut c, &[row(1, 4)]).0, 200);
    drop(idle);
}

#[test]
fn answer_store_sharing_is_explicit() {
    let m = fixture(Method::PredictionSensitivity, 50, 4, "share");
    let l = TestLedger::sqlite();
    let tokens = TokenSet::parse("alpha\nbeta\n").unwrap();
    let s = start(&m, &l, |c| {
        c.tokens = Some(tokens);
        c.share_answer_store = true;
    });
    let info = Client::new(s.addr, Some("alpha"))
        .get("/v1/model")
        .unwrap()
        .json();
    assert_eq!(info["answer_store_scope"], "shared");
    let (_, a) = predict(&mut Client::new(s.addr, Some("alpha")), &[row(5, 4)]);
    let (_, b) = predict(&mut Client::new(s.addr, Some("beta")), &[row(5, 4)]);
    assert_eq!(b["answers"][0]["stored"], true);
    assert_eq!(a["answers"][0]["scores"], b["answers"][0]["scores"]);
    assert_eq!(spent_in_ledger(&l, &s.model_id), 1);
}
