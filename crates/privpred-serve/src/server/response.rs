//! One error type for every refusal and failure of the service: [`ApiError`] carries the
//! status, the stable error code, the message, the extra fields and the refusal counter it
//! counts against, and renders itself as the JSON body `{"error": {"code", "message",
//! ...extra}}`.

use crate::metrics::Refusal;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A refusal or failure, rendered as its HTTP response.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    /// The status code.
    pub status: StatusCode,
    /// The stable machine-readable code (`wrong_dimension`, `budget_exhausted`, …).
    pub code: &'static str,
    /// The human-readable message.
    pub message: String,
    /// Extra fields of the error object (an object, or null for none).
    pub extra: Value,
    /// The refusal counter this error counts against (`None`: a server failure, uncounted).
    pub refusal: Option<Refusal>,
}

impl ApiError {
    /// An error counted against no refusal counter (server failures).
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: Value::Null,
            refusal: None,
        }
    }

    /// A refusal of an invalid request (counted as `invalid`).
    pub fn invalid(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            refusal: Some(Refusal::Invalid),
            ..ApiError::new(status, code, message)
        }
    }

    /// The same error with extra fields in its body.
    pub fn with(mut self, extra: Value) -> Self {
        self.extra = extra;
        self
    }

    /// The same error counted against `refusal`.
    pub fn counted(mut self, refusal: Refusal) -> Self {
        self.refusal = Some(refusal);
        self
    }

    /// 401 with `WWW-Authenticate: Bearer` (counted as `auth`).
    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or invalid bearer token (send `Authorization: Bearer <token>`)",
        )
        .counted(Refusal::Auth)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut e = json!({ "code": self.code, "message": self.message });
        if let (Value::Object(m), Value::Object(x)) = (&mut e, self.extra) {
            m.extend(x);
        }
        let mut r = (self.status, axum::Json(json!({ "error": e }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}
