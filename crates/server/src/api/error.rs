//! HTTP errors: every failure is `{"code": <status>, "message": "<what and why>"}`, with
//! `"path": "<JSON path>"` when a field of the request body was at fault.
//!
//! This is the one place where crate errors become status codes. Client mistakes are 4xx
//! with a message naming the field; only signet's own failures are 5xx, and those messages
//! never carry secrets.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use signet_log::rekor::EntryError;
use signet_log::storage::StorageError;
use signet_log::{merkle::ProofError, AppendError};

use crate::metrics::Refusal;
use crate::shards::active::OnlineRotationError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub headers: HeaderMap,
    /// Why a client request was refused, for `/metrics` (see [`crate::metrics::Refusal`]).
    pub reason: Option<&'static str>,
    /// The JSON path of the body's field at fault, if one was.
    pub path: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), headers: HeaderMap::new(), reason: None, path: None }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// Names the refusal for the metrics: a few stable words, such as `token_expired`.
    pub fn because(mut self, reason: &'static str) -> Self {
        self.reason = Some(reason);
        self
    }

    /// Names the body's field at fault by its JSON path (`spec.signature.content`).
    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        if let Ok(v) = value.parse() {
            self.headers.insert(name, v);
        }
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // 503 and 507 are conditions (overload, storage down or full) that their cause logs once,
        // not per request: a flood of refusals must not become a flood of log lines.
        match self.status {
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::INSUFFICIENT_STORAGE => {
                tracing::debug!(status = self.status.as_u16(), message = %self.message, "request refused")
            }
            s if s.is_server_error() => tracing::error!(status = s.as_u16(), message = %self.message, "request failed"),
            _ => {}
        }
        let body = match self.path {
            Some(path) => Json(json!({"code": self.status.as_u16(), "message": self.message, "path": path})),
            None => Json(json!({"code": self.status.as_u16(), "message": self.message})),
        };
        let mut response = (self.status, self.headers, body).into_response();
        if let Some(reason) = self.reason {
            response.extensions_mut().insert(Refusal(reason));
        }
        response
    }
}

/// For handlers that answer with the guard's refusals (already responses) beside their own.
impl From<ApiError> for Response {
    fn from(e: ApiError) -> Response {
        e.into_response()
    }
}

impl From<EntryError> for ApiError {
    fn from(e: EntryError) -> Self {
        let path = e.field().to_string();
        let error = match e {
            EntryError::Malformed { .. } => ApiError::bad_request(e.to_string()).because("entry_malformed"),
            EntryError::Rejected { .. } => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).because("entry_rejected"),
        };
        match path.is_empty() {
            true => error,
            false => error.at(path),
        }
    }
}

impl From<ProofError> for ApiError {
    fn from(e: ProofError) -> Self {
        if let ProofError::Unavailable(_) = e {
            return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                .with_header("retry-after", STORAGE_RETRY_AFTER)
                .because("storage_unavailable");
        }
        ApiError::bad_request(e.to_string()).because("proof_out_of_range")
    }
}

/// An online rotation: 409 when another rotation or a missing seal key stands in the way, 503
/// for a step that may succeed when retried, 500 for one that failed here.
impl From<OnlineRotationError> for ApiError {
    fn from(e: OnlineRotationError) -> Self {
        let status = match e {
            OnlineRotationError::NoSharedSeal | OnlineRotationError::RotatedMeanwhile => StatusCode::CONFLICT,
            OnlineRotationError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

/// How long a client should wait before retrying a request that storage could not serve.
const STORAGE_RETRY_AFTER: &str = "1";

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Unavailable(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                .with_header("retry-after", STORAGE_RETRY_AFTER)
                .because("storage_unavailable"),
            _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

impl From<AppendError> for ApiError {
    fn from(e: AppendError) -> Self {
        let overloaded = matches!(e, AppendError::Overloaded { .. });
        if let AppendError::Refused(why) = e {
            // No Retry-After: waiting changes nothing until an operator acts.
            return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, why).because("appends_refused");
        }
        let status = match e {
            AppendError::Closed
            | AppendError::Aborted
            | AppendError::Unavailable(_)
            | AppendError::KeyUnavailable(_)
            | AppendError::Overloaded { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppendError::Full(_) => StatusCode::INSUFFICIENT_STORAGE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let err = ApiError::new(status, e.to_string());
        match status {
            StatusCode::SERVICE_UNAVAILABLE if overloaded => err.with_header("retry-after", STORAGE_RETRY_AFTER).because("overloaded"),
            StatusCode::SERVICE_UNAVAILABLE => err.with_header("retry-after", STORAGE_RETRY_AFTER),
            StatusCode::INSUFFICIENT_STORAGE => err.because("storage_full"),
            _ => err,
        }
    }
}
