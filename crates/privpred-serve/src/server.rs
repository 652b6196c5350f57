//! The HTTP service (axum): routes, validation, authentication, the ledger round-trip.
//!
//! Flow of `POST /v1/predict`: authenticate → read the body (size-limited) → parse JSON →
//! validate every row (dimension, finite values, batch size) → preprocess and compute fresh
//! noisy answers in memory (a blocking thread, OS-seeded ChaCha20) → one ledger transaction
//! decides and durably records the request (see [`crate::ledger`]) → only then respond.
//! Any failure before the commit spends nothing and releases nothing.

use crate::auth::TokenSet;
use crate::error::{Result, ServeError};
use crate::ledger::{BudgetState, Key, Ledger, LedgerSpec, SpendOutcome, SpendRequest};
use crate::metrics::Metrics;
use crate::model::{Answer, ServedModel};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use privpred_core::Budget;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Default largest batch (rows per request).
pub const DEFAULT_MAX_BATCH: usize = 1024;

/// Server configuration.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on (`host:port`; port 0 picks a free port).
    pub listen: String,
    /// The budget ledger; required for finite budgets, unused for unlimited ones.
    pub ledger: Option<LedgerSpec>,
    /// Accepted bearer tokens; `None` = no authentication, loopback only.
    pub tokens: Option<TokenSet>,
    /// Most rows per request (≥ 1).
    pub max_batch: usize,
    /// Largest request body in bytes; `None` = derived from `max_batch` and the input dimension
    /// (32 bytes per number + 64 KiB).
    pub max_body_bytes: Option<usize>,
    /// Serve repeated identical queries from the answer store without spending (default on).
    pub answer_store: bool,
}

impl ServeConfig {
    /// Loopback, no ledger, no tokens, default batch, answer store on.
    pub fn new(listen: impl Into<String>) -> Self {
        ServeConfig {
            listen: listen.into(),
            ledger: None,
            tokens: None,
            max_batch: DEFAULT_MAX_BATCH,
            max_body_bytes: None,
            answer_store: true,
        }
    }
}

struct App {
    model: Arc<dyn ServedModel>,
    ledger: Option<Ledger>,
    tokens: Option<TokenSet>,
    metrics: Metrics,
    max_batch: usize,
    max_body: usize,
    answer_store: bool,
}

/// A bound, ready-to-run server.
pub struct Server {
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    addr: SocketAddr,
    notes: Vec<String>,
}

impl Server {
    /// Validates the configuration, opens the ledger (creating the model's budget row) and
    /// binds the listener. Refuses a non-loopback address without tokens, and a finite budget
    /// without a ledger.
    pub async fn bind(model: Arc<dyn ServedModel>, cfg: ServeConfig) -> Result<Server> {
        if cfg.max_batch == 0 {
            return Err(ServeError::config("--max-batch", "must be >= 1"));
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(&cfg.listen)
            .await
            .map_err(|e| {
                ServeError::config(
                    "--listen",
                    format!("'{}': {e} (expected HOST:PORT)", cfg.listen),
                )
            })?
            .collect();
        let Some(&addr) = addrs.first() else {
            return Err(ServeError::config(
                "--listen",
                format!("'{}' resolves to no address", cfg.listen),
            ));
        };
        let mut notes = Vec::new();
        match &cfg.tokens {
            None => {
                if addrs.iter().any(|a| !a.ip().is_loopback()) {
                    return Err(ServeError::config(
                        "--listen",
                        format!(
                            "'{}' is not a loopback address: without --tokens the server listens on loopback only \
                             (pass --tokens FILE to accept remote clients)",
                            cfg.listen
                        ),
                    ));
                }
                notes.push("no --tokens: authentication is off, listening on loopback only".into());
            }
            Some(t) => {
                notes.push(format!("bearer tokens required ({} accepted)", t.len()));
                if t.plaintext_entries() > 0 {
                    notes.push(format!(
                        "warning: the tokens file holds {} plaintext token(s); store `sha256:<hex>` hashes instead",
                        t.plaintext_entries()
                    ));
                }
            }
        }
        let info = model.info();
        let ledger = match info.budget {
            Budget::Unlimited => {
                notes.push(format!(
                    "{} is a private-training method: the released model is private, answers are not budgeted (B = ∞)",
                    info.method
                ));
                None
            }
            Budget::Finite(b) => {
                let spec = cfg.ledger.as_ref().ok_or_else(|| {
                    ServeError::config(
                        "--ledger",
                        format!(
                            "{} has a finite budget (B = {b}): a ledger is required",
                            info.method
                        ),
                    )
                })?;
                let l = Ledger::open(spec, &info.model_id, b, cfg.answer_store).await?;
                let st = l.status().await?;
                notes.push(format!(
                    "budget B = {b} answers, {} spent, {} remaining; ledger {} (durable, transactional); answer store {}",
                    st.spent,
                    st.remaining(),
                    l.description(),
                    if cfg.answer_store { "on (repeated identical queries cost nothing)" } else { "off" }
                ));
                Some((l, st))
            }
        };
        if info.test_fixture {
            notes.push(
                "warning: serving a TEST FIXTURE model (synthetic weights), not a trained model"
                    .into(),
            );
        }
        let max_body = cfg.max_body_bytes.unwrap_or(
            cfg.max_batch
                .saturating_mul(info.input_dim)
                .saturating_mul(32)
                + 65_536,
        );
        let metrics = Metrics::new();
        let ledger = ledger.map(|(l, st)| {
            metrics.budget_total.store(st.total, Ordering::Relaxed);
            metrics.budget_spent.store(st.spent, Ordering::Relaxed);
            l
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServeError::Io {
                context: format!("binding {addr}"),
                source: e,
            })?;
        let addr = listener.local_addr().map_err(|e| ServeError::Io {
            context: "reading the bound address".into(),
            source: e,
        })?;
        let app = Arc::new(App {
            model,
            ledger,
            tokens: cfg.tokens,
            metrics,
            max_batch: cfg.max_batch,
            max_body,
            answer_store: cfg.answer_store,
        });
        Ok(Server {
            listener,
            app,
            addr,
            notes,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Human-readable start-up notes (auth mode, budget, ledger).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets in-flight requests finish
    /// (their answers are recorded before they are sent) and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let router = router(self.app);
        axum::serve(self.listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| ServeError::Io {
                context: "serving".into(),
                source: e,
            })
    }
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/predict", post(predict))
        .route("/v1/model", get(model_info))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(app.clone(), track))
        .with_state(app)
}

async fn track(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let resp = next.run(req).await;
    app.metrics.record_request(&path, resp.status().as_u16());
    resp
}

/// A JSON error body: `{"error": {"code", "message", ...extra}}`.
fn error(status: StatusCode, code: &str, message: impl Into<String>, extra: Value) -> Response {
    let mut e = json!({ "code": code, "message": message.into() });
    if let (Value::Object(m), Value::Object(x)) = (&mut e, extra) {
        m.extend(x);
    }
    (status, axum::Json(json!({ "error": e }))).into_response()
}

fn berror(
    status: StatusCode,
    code: &str,
    message: impl Into<String>,
    extra: Value,
) -> Box<Response> {
    Box::new(error(status, code, message, extra))
}

fn unauthorized(app: &App) -> Response {
    app.metrics.refusals_auth.fetch_add(1, Ordering::Relaxed);
    let mut r = error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or invalid bearer token (send `Authorization: Bearer <token>`)",
        json!({}),
    );
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
    match &app.tokens {
        None => true,
        Some(t) => t.verify_header(
            headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok()),
        ),
    }
}

/// `POST /v1/predict` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PredictRequest {
    /// Raw input rows (as the training data was read, before preprocessing). Parsed as f64
    /// so that a value outside the f32 range is reported as non-finite (not as bad JSON),
    /// whatever float features serde_json is built with.
    inputs: Vec<Vec<f64>>,
}

#[derive(Serialize)]
struct AnswerOut {
    label: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    scores: Option<Vec<f64>>,
    /// True where this is the stored answer to an earlier identical query (no budget spent).
    stored: bool,
}

#[derive(Serialize)]
struct BudgetOut {
    unlimited: bool,
    total: Option<u64>,
    spent: Option<u64>,
    remaining: Option<u64>,
}

impl BudgetOut {
    fn finite(s: BudgetState) -> Self {
        BudgetOut {
            unlimited: false,
            total: Some(s.total),
            spent: Some(s.spent),
            remaining: Some(s.remaining()),
        }
    }
    fn unlimited() -> Self {
        BudgetOut {
            unlimited: true,
            total: None,
            spent: None,
            remaining: None,
        }
    }
}

#[derive(Serialize)]
struct PredictResponse {
    model_id: String,
    answers: Vec<AnswerOut>,
    /// Budget units this request spent.
    spent: u64,
    budget: BudgetOut,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'static str>,
}

thread_local! {
    static RNG: RefCell<Option<ChaCha20Rng>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's OS-seeded ChaCha20 generator (no seed is ever exposed).
fn with_release_rng<T>(f: impl FnOnce(&mut ChaCha20Rng) -> T) -> Result<T> {
    RNG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let rng = ChaCha20Rng::try_from_rng(&mut rand::rngs::SysRng).map_err(|e| {
                ServeError::Model(format!("cannot seed the answer RNG from the OS: {e}"))
            })?;
            *slot = Some(rng);
        }
        Ok(f(slot.as_mut().expect("seeded")))
    })
}

/// Answer-store key: SHA-256(model id ‖ 0 ‖ preprocessed row as little-endian f32).
fn row_key(model_id: &str, row: &[f32]) -> Key {
    let mut h = Sha256::new();
    h.update(model_id.as_bytes());
    h.update([0u8]);
    for v in row {
        // Normalise −0.0 to 0.0 so that equal inputs hash equally.
        let v = if *v == 0.0 { 0.0f32 } else { *v };
        h.update(v.to_le_bytes());
    }
    h.finalize().into()
}

async fn predict(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let t0 = Instant::now();
    let resp = predict_inner(&app, &headers, body).await;
    app.metrics.record_latency(t0.elapsed().as_secs_f64());
    resp
}

fn invalid(
    app: &App,
    status: StatusCode,
    code: &str,
    message: impl Into<String>,
    extra: Value,
) -> Response {
    app.metrics.refusals_invalid.fetch_add(1, Ordering::Relaxed);
    error(status, code, message, extra)
}

async fn predict_inner(app: &Arc<App>, headers: &HeaderMap, body: Body) -> Response {
    if !authorized(app, headers) {
        return unauthorized(app);
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > app.max_body as u64) {
        return invalid(
            app,
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("request body exceeds {} bytes", app.max_body),
            json!({ "max_body_bytes": app.max_body }),
        );
    }
    let bytes = match axum::body::to_bytes(body, app.max_body).await {
        Ok(b) => b,
        Err(_) => {
            return invalid(
                app,
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!(
                    "request body exceeds {} bytes (or could not be read)",
                    app.max_body
                ),
                json!({ "max_body_bytes": app.max_body }),
            );
        }
    };
    let req: PredictRequest = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            return invalid(
                app,
                StatusCode::BAD_REQUEST,
                "malformed_json",
                format!("expected {{\"inputs\": [[number, ...], ...]}}: {e}"),
                json!({}),
            );
        }
    };
    let info = app.model.info();
    let n = req.inputs.len();
    if n == 0 {
        return invalid(
            app,
            StatusCode::UNPROCESSABLE_ENTITY,
            "empty_batch",
            "`inputs` holds no rows",
            json!({}),
        );
    }
    if n > app.max_batch {
        return invalid(
            app,
            StatusCode::PAYLOAD_TOO_LARGE,
            "batch_too_large",
            format!(
                "{n} rows in one request; the most is {} (--max-batch)",
                app.max_batch
            ),
            json!({ "max_batch": app.max_batch }),
        );
    }
    for (i, row) in req.inputs.iter().enumerate() {
        if row.len() != info.input_dim {
            return invalid(
                app,
                StatusCode::UNPROCESSABLE_ENTITY,
                "wrong_dimension",
                format!(
                    "inputs[{i}] has {} values; the model takes {}",
                    row.len(),
                    info.input_dim
                ),
                json!({ "row": i, "expected_dim": info.input_dim }),
            );
        }
        if let Some(j) = row.iter().position(|&v| !(v as f32).is_finite()) {
            return invalid(
                app,
                StatusCode::UNPROCESSABLE_ENTITY,
                "non_finite_value",
                format!("inputs[{i}][{j}] is not a finite 32-bit number"),
                json!({ "row": i, "column": j }),
            );
        }
    }
    let inputs: Vec<Vec<f32>> = req
        .inputs
        .iter()
        .map(|r| r.iter().map(|&v| v as f32).collect())
        .collect();
    // Preprocess and compute fresh answers off the async threads; nothing leaves yet.
    let model = app.model.clone();
    let computed = tokio::task::spawn_blocking(
        move || -> std::result::Result<(Vec<Key>, Vec<Answer>), Box<Response>> {
            let info = model.info();
            let mut keys = Vec::with_capacity(inputs.len());
            let mut rows = Vec::with_capacity(inputs.len());
            for (i, raw) in inputs.iter().enumerate() {
                let x = model.preprocess(raw).map_err(|m| {
                    berror(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "invalid_input",
                        format!("inputs[{i}]: {m}"),
                        json!({ "row": i }),
                    )
                })?;
                keys.push(row_key(&info.model_id, &x));
                rows.push(x);
            }
            let answers = with_release_rng(|rng| model.answer(&rows, rng))
                .and_then(|r| r)
                .map_err(|e| {
                    berror(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "model_error",
                        e.to_string(),
                        json!({}),
                    )
                })?;
            if answers.len() != rows.len() {
                return Err(berror(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "model_error",
                    "model returned a wrong number of answers",
                    json!({}),
                ));
            }
            Ok((keys, answers))
        },
    )
    .await;
    let (keys, fresh) = match computed {
        Ok(Ok(x)) => x,
        Ok(Err(resp)) => {
            if resp.status().is_client_error() {
                app.metrics.refusals_invalid.fetch_add(1, Ordering::Relaxed);
            }
            return *resp;
        }
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "model_error",
                e.to_string(),
                json!({}),
            );
        }
    };
    let Some(ledger) = &app.ledger else {
        // Private-training method: B = ∞, nothing to record.
        app.metrics
            .answers
            .fetch_add(fresh.len() as u64, Ordering::Relaxed);
        return axum::Json(PredictResponse {
            model_id: info.model_id.clone(),
            answers: fresh
                .into_iter()
                .map(|a| AnswerOut {
                    label: a.label,
                    scores: a.scores,
                    stored: false,
                })
                .collect(),
            spent: 0,
            budget: BudgetOut::unlimited(),
            note: Some(
                "private-training method: the model itself is private; answers are not budgeted",
            ),
        })
        .into_response();
    };
    let keys = if app.answer_store {
        keys
    } else {
        vec![[0u8; 32]; fresh.len()]
    };
    match ledger.spend(SpendRequest { keys, fresh }).await {
        Ok(SpendOutcome::Answered {
            answers,
            spent_now,
            state,
        }) => {
            app.metrics
                .budget_total
                .store(state.total, Ordering::Relaxed);
            app.metrics
                .budget_spent
                .fetch_max(state.spent, Ordering::Relaxed);
            let stored = answers.iter().filter(|(_, s)| *s).count() as u64;
            app.metrics
                .answers
                .fetch_add(answers.len() as u64, Ordering::Relaxed);
            app.metrics
                .answers_stored
                .fetch_add(stored, Ordering::Relaxed);
            axum::Json(PredictResponse {
                model_id: info.model_id.clone(),
                answers: answers
                    .into_iter()
                    .map(|(a, stored)| AnswerOut {
                        label: a.label,
                        scores: a.scores,
                        stored,
                    })
                    .collect(),
                spent: spent_now,
                budget: BudgetOut::finite(state),
                note: None,
            })
            .into_response()
        }
        Ok(SpendOutcome::Exhausted { needed, state }) => {
            app.metrics.refusals_budget.fetch_add(1, Ordering::Relaxed);
            app.metrics
                .budget_total
                .store(state.total, Ordering::Relaxed);
            app.metrics
                .budget_spent
                .fetch_max(state.spent, Ordering::Relaxed);
            error(
                StatusCode::TOO_MANY_REQUESTS,
                "budget_exhausted",
                if state.remaining() == 0 {
                    format!(
                        "the inference budget of {} answers is exhausted; the guarantee covers no further answers",
                        state.total
                    )
                } else {
                    format!(
                        "this request needs {needed} new answers but only {} remain of the budget of {}; send at most {} new rows",
                        state.remaining(),
                        state.total,
                        state.remaining()
                    )
                },
                json!({ "needed": needed, "budget": BudgetOut::finite(state) }),
            )
        }
        Err(e) => {
            app.metrics.refusals_ledger.fetch_add(1, Ordering::Relaxed);
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "ledger_unavailable",
                format!(
                    "the budget ledger cannot be written, so no answer is released (fail closed): {e}"
                ),
                json!({}),
            )
        }
    }
}

async fn model_info(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized(&app);
    }
    let info = app.model.info();
    let budget = match &app.ledger {
        None => BudgetOut::unlimited(),
        Some(l) => match l.status().await {
            Ok(s) => {
                app.metrics
                    .budget_spent
                    .fetch_max(s.spent, Ordering::Relaxed);
                BudgetOut::finite(s)
            }
            Err(e) => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "ledger_unavailable",
                    e.to_string(),
                    json!({}),
                );
            }
        },
    };
    axum::Json(json!({
        "model_id": info.model_id,
        "method": info.method,
        "private_training": info.method.is_private_training(),
        "guarantee": info.guarantee,
        "neighbours": info.guarantee.neighbours,
        "budget": budget,
        "input_dim": info.input_dim,
        "classes": info.classes,
        "releases_scores": info.releases_scores,
        "preprocessing": info.preprocessing,
        "test_fixture": info.test_fixture,
        "ledger": app.ledger.as_ref().map(|l| l.description().to_string()),
        "answer_store": app.answer_store && app.ledger.is_some(),
        "max_batch": app.max_batch,
        "max_body_bytes": app.max_body,
        "authentication": app.tokens.is_some(),
    }))
    .into_response()
}

async fn healthz(State(app): State<Arc<App>>) -> Response {
    match &app.ledger {
        Some(l) => match l.status().await {
            Ok(_) => axum::Json(json!({ "status": "ok", "ledger": "ok" })).into_response(),
            Err(e) => (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({ "status": "unavailable", "ledger": e.to_string() })),
            )
                .into_response(),
        },
        None => axum::Json(json!({ "status": "ok", "ledger": "none (unlimited budget)" }))
            .into_response(),
    }
}

async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if !authorized(&app, &headers) {
        return unauthorized(&app);
    }
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        app.metrics.render(),
    )
        .into_response()
}

async fn openapi(State(app): State<Arc<App>>) -> Response {
    axum::Json(crate::openapi::document(
        app.model.info().input_dim,
        app.max_batch,
    ))
    .into_response()
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint; see /openapi.json",
        json!({}),
    )
}

/// Runs a server to completion on its own multi-threaded tokio runtime: binds, calls
/// `on_ready` with the bound address and start-up notes, serves until SIGTERM or Ctrl-C, then
/// shuts down gracefully (in-flight answers finish and are recorded) and returns.
/// For front ends without their own runtime (the `privpred` binary).
pub fn run_until_signal(
    model: Arc<dyn ServedModel>,
    cfg: ServeConfig,
    on_ready: impl FnOnce(SocketAddr, &[String]),
) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("privpred-serve")
        .build()
        .map_err(|e| ServeError::Io {
            context: "starting the async runtime".into(),
            source: e,
        })?;
    rt.block_on(async move {
        let server = Server::bind(model, cfg).await?;
        on_ready(server.local_addr(), server.notes());
        server.run(shutdown_signal()).await
    })
}
