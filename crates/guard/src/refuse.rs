//! The guard's answers: the same `{"code", "message"}` JSON as every other signet error,
//! plus a [`Refusal`] response extension naming the reason for `/metrics` and the audit log,
//! and, when the refusal is misbehaviour that counts towards a ban, a [`Strike`].

use axum::body::Body;
use axum::response::Response;
use http::{header, HeaderValue, StatusCode};

use crate::client::ClientKey;
use crate::store;

/// Why the guard refused a request, in a few stable words (`rate_limited`, `banned`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal(pub &'static str);

/// A refusal that counts towards its client's ban: the response extension by which a layer
/// (authn, the rate limiter) asks the ban layer ([`crate::ban::layer`]) for a strike, without
/// knowing anything of bans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strike {
    pub why: &'static str,
    pub on: Struck,
}

/// Whom a [`Strike`] counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Struck {
    /// The client's address (e.g. a bad token: nobody authenticated).
    Address,
    /// Whoever the request authenticated as (its [`crate::Identity`] on the response), else
    /// its address: the key the rate limiter counts.
    Caller,
}

impl Strike {
    /// `response`, marked as a strike.
    pub fn on(self, mut response: Response) -> Response {
        response.extensions_mut().insert(self);
        response
    }
}

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
