//! The guard's answers: the same `{"code", "message"}` JSON as every other signet error,
//! plus a [`Refusal`] response extension naming the reason for `/metrics`.

use axum::body::Body;
use axum::response::Response;
use http::{header, HeaderValue, StatusCode};

use crate::client::ClientKey;
use crate::store;

/// Why the guard refused a request, in a few stable words (`rate_limited`, `banned`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal(pub &'static str);

/// A JSON refusal. `retry_after` (seconds) becomes the `Retry-After` header.
pub fn refuse(status: StatusCode, reason: &'static str, message: &str, retry_after: Option<u64>) -> Response {
    let body = serde_json::json!({"code": status.as_u16(), "message": message}).to_string();
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(s) = retry_after {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r.extensions_mut().insert(Refusal(reason));
    r
}

/// The 403 a banned client gets, with how long the ban still runs.
pub fn banned(client: &ClientKey, until: u64) -> Response {
    let left = until.saturating_sub(store::now()).max(1);
    let message = format!(
        "client {client} is banned for another {left} s after repeated refused requests; an operator can lift it with `signet admin ban lift {client}`"
    );
    refuse(StatusCode::FORBIDDEN, "banned", &message, Some(left))
}
