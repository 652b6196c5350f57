//! The OpenAPI 3.1 description served at `/openapi.json`.

use serde_json::{Value, json};

/// The API description for a model with `input_dim` raw features and batches of ≤ `max_batch`;
/// `cells`: the model maps a table's rows through its schema, so a row's values are numbers
/// (numeric columns) or strings (category names).
pub fn document(input_dim: usize, max_batch: usize, cells: bool) -> Value {
    let cell = if cells {
        json!({ "type": ["number", "string"], "description": "A numeric column's number or a categorical column's category name, in the schema's column order." })
    } else {
        json!({ "type": "number" })
    };
    let err = json!({ "$ref": "#/components/schemas/Error" });
    let err_resp =
        |d: &str| json!({ "description": d, "content": { "application/json": { "schema": err } } });
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "privpred prediction service",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Differentially private predictions with an enforced, durable inference budget. \
                Every answer of a private-prediction model spends one unit of the budget B, recorded durably \
                before the answer is sent; when B is spent every further query is refused (429). \
                Repeated identical queries return the stored earlier answer without spending (the store is per \
                bearer token unless the server shares it). Private-training models have B = ∞. No endpoint \
                reveals weights or training data. POST bodies must be `Content-Type: application/json` (415 \
                otherwise). Connections are limited (503 `too_many_connections` over the limit) and slow or idle \
                clients are cut off (header, body and idle timeouts: see `limits` in /v1/model)."
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "PredictRequest": {
                    "type": "object", "required": ["inputs"], "additionalProperties": false,
                    "properties": { "inputs": {
                        "type": "array", "minItems": 1, "maxItems": max_batch,
                        "description": "Raw input rows, preprocessed by the server exactly as at training time.",
                        "items": { "type": "array", "minItems": input_dim, "maxItems": input_dim, "items": cell }
                    } }
                },
                "Budget": {
                    "type": "object",
                    "properties": {
                        "unlimited": { "type": "boolean" },
                        "total": { "type": ["integer", "null"] },
                        "spent": { "type": ["integer", "null"] },
                        "remaining": { "type": ["integer", "null"] }
                    }
                },
                "Answer": {
                    "type": "object", "required": ["label", "stored"],
                    "properties": {
                        "label": { "type": "integer", "minimum": 0 },
                        "scores": { "type": "array", "items": { "type": "number" }, "description": "Noisy logits, where the method releases them." },
                        "stored": { "type": "boolean", "description": "The stored answer to an earlier identical query (nothing spent)." }
                    }
                },
                "PredictResponse": {
                    "type": "object", "required": ["model_id", "answers", "spent", "budget"],
                    "properties": {
                        "model_id": { "type": "string" },
                        "answers": { "type": "array", "items": { "$ref": "#/components/schemas/Answer" } },
                        "spent": { "type": "integer", "description": "Budget units this request spent." },
                        "budget": { "$ref": "#/components/schemas/Budget" },
                        "note": { "type": "string" }
                    }
                },
                "Error": {
                    "type": "object", "required": ["error"],
                    "properties": { "error": {
                        "type": "object", "required": ["code", "message"],
                        "properties": {
                            "code": { "type": "string", "enum": ["unauthorized", "unsupported_media_type", "body_too_large",
                                "truncated_body", "body_timeout", "malformed_json", "empty_batch",
                                "batch_too_large", "wrong_dimension", "non_finite_value", "invalid_input", "budget_exhausted",
                                "ledger_unavailable", "model_error", "not_found", "request_timeout", "too_many_connections"] },
                            "message": { "type": "string" }
                        }
                    } }
                }
            }
        },
        "paths": {
            "/v1/predict": { "post": {
                "summary": "Answer a batch of queries, spending one budget unit per new answer",
                "security": [{ "bearer": [] }],
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/PredictRequest" } } } },
                "responses": {
                    "200": { "description": "Answers (recorded in the ledger before sending)",
                             "content": { "application/json": { "schema": { "$ref": "#/components/schemas/PredictResponse" } } } },
                    "400": err_resp("Malformed JSON, or a truncated body (nothing spent)"),
                    "401": err_resp("Missing or invalid bearer token"),
                    "408": err_resp("The body did not arrive within the body timeout (nothing spent)"),
                    "413": err_resp("Body or batch too large (nothing spent)"),
                    "415": err_resp("Content-Type is not application/json (nothing spent)"),
                    "431": { "description": "Request headers too large (nothing spent)" },
                    "422": err_resp("Wrong dimension or non-finite value (nothing spent)"),
                    "429": err_resp("Budget exhausted, or fewer units remain than the request needs (nothing spent; the whole request is refused)"),
                    "503": err_resp("The ledger cannot be written (or was deleted or replaced under the server): fail closed, no answer; or too many connections")
                }
            } },
            "/v1/model": { "get": {
                "summary": "Method, guarantee, budget total/spent/remaining (no weights)",
                "security": [{ "bearer": [] }],
                "responses": { "200": { "description": "Model description" }, "401": err_resp("Unauthorized") }
            } },
            "/healthz": { "get": {
                "summary": "Readiness: proves the ledger writable with a real write transaction (and, for SQLite, that the ledger file is still the one opened)",
                "description": "200 exactly when a predict could be recorded now; 503 when predicts would fail closed (unwritable, deleted or replaced ledger). Unauthenticated; reveals no budget.",
                "responses": { "200": { "description": "ok" }, "503": { "description": "ledger unavailable" } }
            } },
            "/metrics": { "get": {
                "summary": "Prometheus text format: requests, answers, refusals, budget remaining, latency histogram",
                "security": [{ "bearer": [] }],
                "responses": { "200": { "description": "text/plain; version=0.0.4" }, "401": err_resp("Unauthorized") }
            } },
            "/openapi.json": { "get": { "summary": "This document", "responses": { "200": { "description": "OpenAPI 3.1" } } } }
        }
    })
}
