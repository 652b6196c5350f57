//! `POST /v1/predict` in three steps, each its own function: [`validate`] (token, content
//! type, body, JSON, batch and rows; nothing computed), [`compute`] (preprocess and draw fresh
//! noisy answers off the async threads; nothing released) and [`spend`] (one ledger
//! transaction decides and durably records the request; only then are answers released).
//! Every refusal is an [`ApiError`] that renders its own response; the counters are updated
//! from [`Event`]s by [`crate::metrics::Metrics::observe`].

use super::response::ApiError;
use super::{App, client_scope, is_json_content_type, is_length_limit};
use crate::error::{Result, ServeError};
use crate::metrics::{Event, Refusal};
use crate::model::Answer;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use privpred_answer::ledger::{BudgetState, Key, SpendOutcome, SpendRequest, answer_key};
use privpred_core::PrivRng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

/// `POST /v1/predict` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PredictRequest {
    /// Raw input rows (as the training data was read, before preprocessing). Numbers are
    /// parsed as f64 so that a value outside the f32 range is reported as non-finite (not as
    /// bad JSON), whatever float features serde_json is built with; text cells (a table's
    /// categories) are taken by a model with a schema only.
    inputs: Vec<Vec<Cell>>,
}

/// One cell of a raw row: a number, text (a table's category or class name), or `null` (a
/// missing value, as a Parquet null or an empty CSV cell).
#[derive(Debug)]
enum Cell {
    Num(f64),
    Text(String),
    Null,
}

impl<'de> Deserialize<'de> for Cell {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Cell;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a cell: a number, a string, or null (a missing value)")
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Cell, E> {
                Ok(Cell::Num(v))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Cell, E> {
                Ok(Cell::Num(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Cell, E> {
                Ok(Cell::Num(v as f64))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Cell, E> {
                Ok(Cell::Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Cell, E> {
                Ok(Cell::Text(v))
            }
            fn visit_unit<E>(self) -> std::result::Result<Cell, E> {
                Ok(Cell::Null)
            }
            fn visit_none<E>(self) -> std::result::Result<Cell, E> {
                Ok(Cell::Null)
            }
        }
        d.deserialize_any(V)
    }
}

impl Cell {
    /// The cell as a table's text cell (a number in its shortest round-trip form; a null is
    /// an empty cell, which the schema reports as a missing value).
    fn text(&self) -> String {
        match self {
            Cell::Num(v) => v.to_string(),
            Cell::Text(t) => t.clone(),
            Cell::Null => String::new(),
        }
    }
}

/// A checked raw row: numbers, or a table's cells for a model with a schema.
enum RawRow {
    Numbers(Vec<f32>),
    Cells(Vec<String>),
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
pub(super) struct BudgetOut {
    unlimited: bool,
    total: Option<u64>,
    spent: Option<u64>,
    remaining: Option<u64>,
}

impl BudgetOut {
    pub(super) fn finite(s: BudgetState) -> Self {
        BudgetOut {
            unlimited: false,
            total: Some(s.total),
            spent: Some(s.spent),
            remaining: Some(s.remaining()),
        }
    }

    pub(super) fn unlimited() -> Self {
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
    /// Present (with `valid_guarantee: false`) only when the model's guarantee does not hold
    /// (served with `--allow-invalid-guarantee`).
    #[serde(skip_serializing_if = "Option::is_none")]
    valid_guarantee: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
    /// Present (with `covered: false`) only when the model file is not covered by a trusted
    /// signature (served with `--allow-unsigned`).
    #[serde(skip_serializing_if = "Option::is_none")]
    covered: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_covered: Option<String>,
}

thread_local! {
    static RNG: RefCell<Option<PrivRng>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's release generator, [`privpred_core::release_rng`] (OS-seeded
/// ChaCha20; no seed is ever exposed), created on the thread's first answer.
fn with_release_rng<T>(f: impl FnOnce(&mut PrivRng) -> T) -> Result<T> {
    RNG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let rng = privpred_core::release_rng().map_err(|e| {
                ServeError::Model(format!("cannot seed the answer RNG from the OS: {e}"))
            })?;
            *slot = Some(rng);
        }
        Ok(f(slot.as_mut().expect("seeded")))
    })
}

/// The handler: runs the three steps, reports a refusal's event and renders it.
pub(super) async fn predict(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let t0 = Instant::now();
    let resp = match predict_steps(&app, &headers, body).await {
        Ok(r) => r,
        Err(e) => {
            if let Some(r) = e.refusal {
                app.metrics.observe(Event::Refused(r));
            }
            e.into_response()
        }
    };
    app.metrics.record_latency(t0.elapsed().as_secs_f64());
    resp
}

async fn predict_steps(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: Body,
) -> std::result::Result<Response, ApiError> {
    let valid = validate(app, headers, body).await?;
    let (keys, fresh) = compute(app, valid).await?;
    spend(app, keys, fresh).await
}

/// A validated request: the caller's answer-store scope and the rows as f32.
struct Valid {
    scope: Option<[u8; 32]>,
    inputs: Vec<RawRow>,
}

/// Step 1: authenticates, reads the body (size- and time-limited) and checks the JSON, the
/// batch size and every row (dimension, finite values). Nothing is computed.
async fn validate(
    app: &App,
    headers: &HeaderMap,
    body: Body,
) -> std::result::Result<Valid, ApiError> {
    let token = client_scope(app, headers).ok_or_else(ApiError::unauthorized)?;
    // The store is scoped to the token unless sharing is configured (or there are no tokens).
    let scope = if app.share_answer_store { None } else { token };
    if !is_json_content_type(headers) {
        // A browser can send a cross-site text/plain POST without a preflight; only JSON
        // bodies (which need a CORS preflight cross-site) may spend budget.
        return Err(ApiError::invalid(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "POST /v1/predict takes a JSON body: send `Content-Type: application/json`",
        ));
    }
    let req = read_body(app, headers, body).await?;
    let inputs = check_rows(app, req)?;
    Ok(Valid { scope, inputs })
}

/// The body, read whole within the size and time limits, parsed as a [`PredictRequest`].
async fn read_body(
    app: &App,
    headers: &HeaderMap,
    body: Body,
) -> std::result::Result<PredictRequest, ApiError> {
    let too_large = || {
        ApiError::invalid(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "request body exceeds {} bytes: send fewer rows per request, or start the server with a larger --max-body-bytes",
                app.max_body
            ),
        )
        .with(json!({ "max_body_bytes": app.max_body }))
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > app.max_body as u64) {
        return Err(too_large());
    }
    let bytes = match tokio::time::timeout(
        app.limits.body_timeout,
        axum::body::to_bytes(body, app.max_body),
    )
    .await
    {
        Ok(Ok(b)) => b,
        Ok(Err(e)) if is_length_limit(&e) => return Err(too_large()),
        Ok(Err(e)) => {
            return Err(ApiError::invalid(
                StatusCode::BAD_REQUEST,
                "truncated_body",
                format!("the request body could not be read whole (truncated or malformed): {e}"),
            ));
        }
        Err(_) => {
            return Err(ApiError::invalid(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the request body did not arrive within {:?}",
                    app.limits.body_timeout
                ),
            ));
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("expected {{\"inputs\": [[number or text, ...], ...]}}: {e}"),
        )
    })
}

/// The batch size and every row's dimension and values; the rows as f32.
fn check_rows(app: &App, req: PredictRequest) -> std::result::Result<Vec<RawRow>, ApiError> {
    let info = app.model.info();
    let n = req.inputs.len();
    if n == 0 {
        return Err(ApiError::invalid(
            StatusCode::UNPROCESSABLE_ENTITY,
            "empty_batch",
            "`inputs` holds no rows",
        ));
    }
    if n > app.max_batch {
        return Err(ApiError::invalid(
            StatusCode::PAYLOAD_TOO_LARGE,
            "batch_too_large",
            format!(
                "{n} rows in one request; the most is {} (--max-batch)",
                app.max_batch
            ),
        )
        .with(json!({ "max_batch": app.max_batch })));
    }
    if app.model.takes_cells() {
        // the model's schema checks each row's width, numbers and categories
        return Ok(req
            .inputs
            .iter()
            .map(|r| RawRow::Cells(r.iter().map(Cell::text).collect()))
            .collect());
    }
    let mut rows = Vec::with_capacity(n);
    for (i, row) in req.inputs.iter().enumerate() {
        if row.len() != info.input_dim {
            return Err(ApiError::invalid(
                StatusCode::UNPROCESSABLE_ENTITY,
                "wrong_dimension",
                format!(
                    "inputs[{i}] has {} values; the model takes {}",
                    row.len(),
                    info.input_dim
                ),
            )
            .with(json!({ "row": i, "expected_dim": info.input_dim })));
        }
        let mut x = Vec::with_capacity(row.len());
        for (j, c) in row.iter().enumerate() {
            match c {
                Cell::Num(v) if (*v as f32).is_finite() => x.push(*v as f32),
                Cell::Num(_) => {
                    return Err(ApiError::invalid(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "non_finite_value",
                        format!("inputs[{i}][{j}] is not a finite 32-bit number"),
                    )
                    .with(json!({ "row": i, "column": j })));
                }
                Cell::Null => {
                    return Err(ApiError::invalid(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "missing_value",
                        format!(
                            "inputs[{i}][{j}] is null (a missing value); this model takes a finite number in every cell"
                        ),
                    )
                    .with(json!({ "row": i, "column": j })));
                }
                Cell::Text(_) => {
                    // as before text cells existed: a numbers-only model's body is malformed
                    return Err(ApiError::invalid(
                        StatusCode::BAD_REQUEST,
                        "malformed_json",
                        format!(
                            "inputs[{i}][{j}] is text; this model takes rows of numbers (expected {{\"inputs\": [[number, ...], ...]}})"
                        ),
                    )
                    .with(json!({ "row": i, "column": j })));
                }
            }
        }
        rows.push(RawRow::Numbers(x));
    }
    Ok(rows)
}

/// Step 2: preprocesses the rows and draws fresh noisy answers on a blocking thread, with the
/// release generator. Nothing leaves yet; returns the answer-store keys and the answers.
async fn compute(
    app: &App,
    valid: Valid,
) -> std::result::Result<(Vec<Key>, Vec<Answer>), ApiError> {
    let model = app.model.clone();
    let Valid { scope, inputs } = valid;
    let model_error =
        |m: String| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "model_error", m);
    tokio::task::spawn_blocking(move || {
        let info = model.info();
        let mut keys = Vec::with_capacity(inputs.len());
        let mut rows = Vec::with_capacity(inputs.len());
        for (i, raw) in inputs.iter().enumerate() {
            let x = match raw {
                RawRow::Numbers(r) => model.preprocess(r),
                RawRow::Cells(c) => model.preprocess_cells(c),
            };
            let x = x.map_err(|m| {
                ApiError::invalid(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_input",
                    format!("inputs[{i}]: {m}"),
                )
                .with(json!({ "row": i }))
            })?;
            keys.push(answer_key(&info.model_id, scope.as_ref(), &x));
            rows.push(x);
        }
        let answers = with_release_rng(|rng| model.answer(&rows, rng))
            .and_then(|r| r)
            .map_err(|e| model_error(e.to_string()))?;
        if answers.len() != rows.len() {
            return Err(model_error(
                "model returned a wrong number of answers".into(),
            ));
        }
        Ok((keys, answers))
    })
    .await
    .map_err(|e| model_error(e.to_string()))?
}

/// Step 3: without a budget (a private-training method) the answers are released as they
/// are; otherwise one ledger transaction spends for the fresh answers (or refuses, spending
/// nothing) and only then are they released, with stored answers to repeated rows.
async fn spend(
    app: &App,
    keys: Vec<Key>,
    fresh: Vec<Answer>,
) -> std::result::Result<Response, ApiError> {
    let info = app.model.info();
    let warning = info.invalid_guarantee_warning();
    let Some(ledger) = &app.ledger else {
        // Private-training method: B = ∞, nothing to record.
        app.metrics.observe(Event::Answered {
            answers: fresh.len() as u64,
            stored: 0,
        });
        return Ok(axum::Json(PredictResponse {
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
            valid_guarantee: warning.as_ref().map(|_| false),
            warning,
            covered: info.not_covered.as_ref().map(|_| false),
            not_covered: info.not_covered.clone(),
        })
        .into_response());
    };
    let keys = if app.answer_store {
        keys
    } else {
        vec![[0u8; 32]; fresh.len()]
    };
    let outcome = ledger
        .spend(SpendRequest { keys, fresh })
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "ledger_unavailable",
                format!(
                    "the budget ledger cannot be written, so no answer is released (fail closed): {}",
                    privpred_answer::ledger::bare_message(&e)
                ),
            )
            .counted(Refusal::Ledger)
        })?;
    match outcome {
        SpendOutcome::Answered {
            answers,
            spent_now,
            state,
        } => {
            app.metrics.observe(Event::Budget {
                total: state.total,
                spent: state.spent,
            });
            app.metrics.observe(Event::Answered {
                answers: answers.len() as u64,
                stored: answers.iter().filter(|(_, s)| *s).count() as u64,
            });
            Ok(axum::Json(PredictResponse {
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
                valid_guarantee: warning.as_ref().map(|_| false),
                warning,
                covered: info.not_covered.as_ref().map(|_| false),
                not_covered: info.not_covered.clone(),
            })
            .into_response())
        }
        SpendOutcome::Exhausted { needed, state } => {
            app.metrics.observe(Event::Budget {
                total: state.total,
                spent: state.spent,
            });
            Err(exhausted(needed, state))
        }
    }
}

/// 429: the request needs more fresh answers than the budget has left.
fn exhausted(needed: u64, state: BudgetState) -> ApiError {
    ApiError::new(
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
    )
    .with(json!({ "needed": needed, "budget": BudgetOut::finite(state) }))
    .counted(Refusal::Budget)
}
