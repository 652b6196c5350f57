//! The HTTP service (axum): routes, validation, authentication, the ledger round-trip.
//!
//! Flow of `POST /v1/predict`: authenticate → read the body (size-limited) → parse JSON →
//! validate every row (dimension, finite values, batch size) → preprocess and compute fresh
//! noisy answers in memory (a blocking thread, OS-seeded ChaCha20) → one ledger transaction
//! decides and durably records the request (see [`privpred_answer::ledger`]) → only then respond.
//! Any failure before the commit spends nothing and releases nothing.
//!
//! Connections (see [`ConnLimits`]): at most [`DEFAULT_MAX_CONNECTIONS`] at once (more get
//! an immediate 503 and are closed); request headers must arrive within
//! [`DEFAULT_HEADER_TIMEOUT`], a body within [`DEFAULT_BODY_TIMEOUT`] (408 otherwise); a
//! connection that makes no progress for [`DEFAULT_IDLE_TIMEOUT`] while no request of it is
//! being handled (an idle keep-alive, or a client that stops reading its response) is closed;
//! a request's handling is bounded by [`DEFAULT_REQUEST_TIMEOUT`]. Headers are limited to
//! [`MAX_HEADER_BYTES`] bytes and [`MAX_HEADERS`] fields (431 otherwise). HTTP/1.1 only.

mod conn;
mod predict;
mod response;

use crate::auth::TokenSet;
use crate::error::{Result, ServeError};
use crate::metrics::{Event, Metrics, Refusal};
use crate::model::ServedModel;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use predict::BudgetOut;
use privpred_answer::ledger::{BudgetState, Ledger, LedgerSpec};
use privpred_core::Budget;
use response::ApiError;
use serde_json::{Value, json};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Default largest batch (rows per request).
pub const DEFAULT_MAX_BATCH: usize = 1024;

/// Default most simultaneous connections (`--max-connections`); more are answered 503 and
/// closed at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default time for a request's headers to arrive, from the connection's start or the end of
/// the previous response (`--header-timeout`). A slowloris client is cut off after it.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time for a request body to arrive once its headers have (`--body-timeout`); 408
/// after it.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a connection may make no progress (no byte read or written) while none of its
/// requests is being handled (`--idle-timeout`): idle keep-alive connections, and clients that
/// stop reading their response, are closed after it.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default bound on handling one request once it has arrived (ledger included); 503 after it.
/// A predict cut off after its ledger commit loses only unreleased answers (never releases
/// unrecorded ones).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// `/healthz` runs its write transaction at most once per this interval and answers from the
/// last result in between, so that unauthenticated health checks cannot force a disk sync each.
pub const HEALTH_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// Largest request head (request line and headers) in bytes; 431 above it.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most header fields in one request; 431 above it.
pub const MAX_HEADERS: usize = 64;

/// Connection limits and timeouts (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Most simultaneous connections (≥ 1).
    pub max_connections: usize,
    /// Time for request headers to arrive.
    pub header_timeout: Duration,
    /// Time for a request body to arrive.
    pub body_timeout: Duration,
    /// Time without progress before an idle connection is closed.
    pub idle_timeout: Duration,
    /// Bound on handling one request.
    pub request_timeout: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

impl ConnLimits {
    fn validate(&self) -> Result<()> {
        if self.max_connections == 0 {
            return Err(ServeError::config("--max-connections", "must be >= 1"));
        }
        for (name, d) in [
            ("--header-timeout", self.header_timeout),
            ("--body-timeout", self.body_timeout),
            ("--idle-timeout", self.idle_timeout),
            ("--request-timeout", self.request_timeout),
        ] {
            if d.is_zero() || d > Duration::from_secs(86_400) {
                return Err(ServeError::config(
                    name,
                    format!("{d:?} is out of range: use 1 ms to 86400 s"),
                ));
            }
        }
        Ok(())
    }
}

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
    /// Share the answer store across bearer tokens (default off: each token sees only the
    /// stored answers of its own queries). Without tokens there is one client, so one store.
    pub share_answer_store: bool,
    /// Create the ledger and the model's budget record (refused if the record exists).
    /// Without it, a missing ledger or record is an error (`--init-ledger`).
    pub init_ledger: bool,
    /// The spend mark mirrored outside the ledger (the CLI keeps it beside the model file): a
    /// ledger whose `spent` is below it is refused at start, and every spending commit raises
    /// it before the answers are sent. `None`: no mark.
    pub spend_mark: Option<privpred_answer::ledger::SpendMark>,
    /// Connection limits and timeouts.
    pub limits: ConnLimits,
    /// Serve a model whose guarantee is not valid (`--allow-invalid-guarantee`): refused
    /// without it; with it every answer and the start-up notes say the guarantee does not hold.
    pub allow_invalid_guarantee: bool,
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
            share_answer_store: false,
            init_ledger: false,
            spend_mark: None,
            limits: ConnLimits::default(),
            allow_invalid_guarantee: false,
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
    share_answer_store: bool,
    limits: ConnLimits,
    /// The last `/healthz` probe: when, and its error (None = ok).
    last_probe: tokio::sync::Mutex<Option<(Instant, Option<String>)>>,
}

/// Resolves `--listen`, refusing a non-loopback address without tokens; notes the
/// authentication mode.
async fn resolve_listen(cfg: &ServeConfig, notes: &mut Vec<String>) -> Result<SocketAddr> {
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
    Ok(addr)
}

/// Opens the ledger of a model with a finite budget (creating its budget row with
/// `--init-ledger`) and reads its state; `None` for a private-training method (B = ∞).
async fn open_ledger(
    cfg: &ServeConfig,
    info: &crate::model::ModelInfo,
    notes: &mut Vec<String>,
) -> Result<Option<(Ledger, BudgetState)>> {
    Ok(match info.budget {
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
            let account = privpred_answer::Account {
                identity: privpred_answer::BudgetIdentity {
                    ledger_id: info.model_id.clone(),
                    total: b.get(),
                },
                ledger: spec.clone(),
                mark: cfg.spend_mark.clone(),
            };
            let l = account.open(cfg.answer_store, cfg.init_ledger).await?;
            let st = l.status().await?;
            if cfg.init_ledger {
                notes.push(format!(
                    "--init-ledger: created the budget record of model {} in {}",
                    info.model_id,
                    l.description()
                ));
            }
            notes.push(format!(
                    "budget B = {b} answers, {} spent, {} remaining; ledger {} (durable, transactional); answer store {}",
                    st.spent,
                    st.remaining(),
                    l.description(),
                    if !cfg.answer_store {
                        "off"
                    } else if cfg.share_answer_store || cfg.tokens.is_none() {
                        "on, shared by all clients (repeated identical queries cost nothing)"
                    } else {
                        "on, per token (a token's repeated identical queries cost nothing)"
                    }
                ));
            Some((l, st))
        }
    })
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
        cfg.limits.validate()?;
        let mut notes = Vec::new();
        let addr = resolve_listen(&cfg, &mut notes).await?;
        let info = model.info();
        if let Some(w) = info.invalid_guarantee_warning() {
            if !cfg.allow_invalid_guarantee {
                return Err(ServeError::config(
                    "--model",
                    format!(
                        "valid_guarantee: false ({w}); such a model is served only with --allow-invalid-guarantee"
                    ),
                ));
            }
            notes.push(format!("WARNING: {w}; every answer says so"));
        }
        if let Some(why) = &info.not_covered {
            notes.push(format!(
                "WARNING: the model file is not covered by a trusted signature ({why}); every answer says so"
            ));
        }
        let ledger = open_ledger(&cfg, info, &mut notes).await?;
        if info.test_fixture {
            notes.push(
                "warning: serving a TEST FIXTURE model (synthetic weights), not a trained model"
                    .into(),
            );
        }
        let max_body = cfg.max_body_bytes.unwrap_or(
            cfg.max_batch
                .saturating_mul(model.row_bytes())
                .saturating_add(65_536),
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
            share_answer_store: cfg.share_answer_store,
            limits: cfg.limits,
            last_probe: tokio::sync::Mutex::new(None),
        });
        notes.push(format!(
            "limits: {} connections, header timeout {:?}, body timeout {:?}, idle timeout {:?}, request timeout {:?}",
            cfg.limits.max_connections,
            cfg.limits.header_timeout,
            cfg.limits.body_timeout,
            cfg.limits.idle_timeout,
            cfg.limits.request_timeout
        ));
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
    /// (their answers are recorded before they are sent), closes the ledger (SQLite:
    /// checkpointed into the main file) and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let ledger = self.app.ledger.clone();
        let limits = self.app.limits;
        let app = self.app.clone();
        let router = router(self.app);
        let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    let stream = match accepted {
                        Ok((s, _)) => s,
                        Err(_) => {
                            // Out of file descriptors or a connection reset before accept:
                            // back off a little instead of spinning.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                    };
                    match permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            tasks.spawn(conn::serve_connection(
                                stream,
                                router.clone(),
                                limits,
                                stop_rx.clone(),
                                permit,
                            ));
                        }
                        Err(_) => {
                            app.metrics.refusals_connections.fetch_add(1, Ordering::Relaxed);
                            tasks.spawn(conn::refuse_busy(stream, limits.max_connections));
                        }
                    }
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        drop(self.listener);
        let _ = stop_tx.send(true);
        while tasks.join_next().await.is_some() {}
        drop(router);
        if let Some(l) = ledger {
            l.close().await?;
        }
        Ok(())
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
        .route("/v1/predict", post(predict::predict))
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

/// A JSON error body: `{"error": {"code", "message", ...extra}}` (see [`ApiError`]).
fn error(
    status: StatusCode,
    code: &'static str,
    message: impl Into<String>,
    extra: Value,
) -> Response {
    ApiError::new(status, code, message)
        .with(extra)
        .into_response()
}

/// 401 (counted as an authentication refusal).
fn unauthorized(app: &App) -> Response {
    app.metrics.observe(Event::Refused(Refusal::Auth));
    ApiError::unauthorized().into_response()
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
    client_scope(app, headers).is_some()
}

/// The caller's identity: `Some(None)` = allowed without a token (no tokens configured),
/// `Some(Some(hash))` = the SHA-256 of a valid bearer token, `None` = refused.
fn client_scope(app: &App, headers: &HeaderMap) -> Option<Option<[u8; 32]>> {
    match &app.tokens {
        None => Some(None),
        Some(t) => t
            .identify_header(
                headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok()),
            )
            .map(Some),
    }
}

/// Whether a Content-Type header is `application/json` (parameters such as `charset` allowed).
fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
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
        "mechanism": info.guarantee.mechanism.name(),
        "neighbours": info.guarantee.neighbours(),
        "budget": budget,
        "input_dim": info.input_dim,
        "columns": app.model.columns(),
        "classes": info.classes,
        "releases_scores": info.releases_scores,
        "preprocessing": info.preprocessing,
        "test_fixture": info.test_fixture,
        "ledger": app.ledger.as_ref().map(|l| l.kind()),
        "answer_store": app.answer_store && app.ledger.is_some(),
        "answer_store_scope": if !(app.answer_store && app.ledger.is_some()) {
            "none"
        } else if app.share_answer_store || app.tokens.is_none() {
            "shared"
        } else {
            "per-token"
        },
        "limits": {
            "max_connections": app.limits.max_connections,
            "header_timeout_ms": app.limits.header_timeout.as_millis() as u64,
            "body_timeout_ms": app.limits.body_timeout.as_millis() as u64,
            "idle_timeout_ms": app.limits.idle_timeout.as_millis() as u64,
            "request_timeout_ms": app.limits.request_timeout.as_millis() as u64,
            "max_header_bytes": MAX_HEADER_BYTES,
            "max_headers": MAX_HEADERS,
        },
        "max_batch": app.max_batch,
        "max_body_bytes": app.max_body,
        "authentication": app.tokens.is_some(),
    }))
    .into_response()
}

/// `GET /healthz`: ok only if the ledger takes a real write transaction now (and, for
/// SQLite, is still the file the server opened), i.e. exactly when a predict could be
/// recorded; 503 otherwise.
/// The probe runs at most once per [`HEALTH_PROBE_INTERVAL`] (concurrent checks wait for it).
async fn healthz(State(app): State<Arc<App>>) -> Response {
    match &app.ledger {
        Some(l) => {
            let mut last = app.last_probe.lock().await;
            let fresh = last
                .as_ref()
                .is_some_and(|(t, _)| t.elapsed() < HEALTH_PROBE_INTERVAL);
            if !fresh {
                let r = l.probe().await.err().map(|e| e.to_string());
                *last = Some((Instant::now(), r));
            }
            match last.as_ref().and_then(|(_, e)| e.clone()) {
                None => axum::Json(
                    json!({ "status": "ok", "ledger": "ok (write transaction committed)" }),
                )
                .into_response(),
                Some(e) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(json!({ "status": "unavailable", "ledger": e })),
                )
                    .into_response(),
            }
        }
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
        app.model.takes_cells(),
    ))
    .into_response()
}

/// Whether a body-read error is the length limit (413) rather than a truncated body (400).
fn is_length_limit(e: &axum::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if c.to_string().contains("length limit exceeded") {
            return true;
        }
        cur = c.source();
    }
    false
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
