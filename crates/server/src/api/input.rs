//! Reading request input with errors that say what was wrong, where, and what was expected.
//!
//! The request's framing (header bounds, content type, body size per route class, JSON
//! nesting) is checked before any handler runs, by the guard's validation layer
//! (`signet_guard::validate`). What is left is the body's shape, and this is the one place
//! that reads it: every JSON body is read into a typed request (unknown fields, wrong types,
//! out-of-range numbers and bad base64 or hex are refused, see `signet_core::wire`) by the
//! [`Typed`] extractor, so a handler only ever sees a well-formed request. Every mistake is
//! answered in signet's JSON error shape with the JSON path of the field (axum's stock
//! extractors answer in plain text, without one).

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use signet_core::wire::{self, InputError};

use super::error::ApiError;
use crate::state::AppState;

/// A JSON body read into `T`, for handlers that take one.
pub struct Typed<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Arc<AppState>> for Typed<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, ApiError> {
        typed(req.into_body(), state.max_body).await.map(Typed)
    }
}

/// Reads a JSON body into `T`. The validation layer has checked its content type and size
/// and holds it in memory; `limit` bounds it again for a caller outside the router.
pub async fn typed<T: DeserializeOwned>(body: Body, limit: usize) -> Result<T, ApiError> {
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body is larger than the {limit}-byte limit"))
            .because("body_too_large")
    })?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request("request body is empty; expected a JSON object").because("malformed_json"));
    }
    wire::from_slice(&bytes).map_err(ApiError::from)
}

impl From<InputError> for ApiError {
    fn from(e: InputError) -> Self {
        match e.syntax {
            true => ApiError::bad_request(format!("request body is not valid JSON: {}", e.why)).because("malformed_json"),
            false if e.path.is_empty() => ApiError::bad_request(format!("request body: {}", e.why)).because("invalid_field"),
            false => ApiError::bad_request(e.to_string()).at(e.path).because("invalid_field"),
        }
    }
}

/// Admits one append to `log`, or refuses it at once (its body is already read, so the
/// connection stays reusable).
pub fn admit(log: &signet_log::Log) -> Result<signet_log::Admission, ApiError> {
    log.admit().map_err(ApiError::from)
}

/// Refuses an entry whose canonical body is longer than `limit` bytes, before it is logged.
pub fn entry_size(body: &[u8], limit: usize) -> Result<(), ApiError> {
    if body.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the entry is {} bytes; this log admits entries of at most {limit} bytes (limits.max_entry_bytes)", body.len()),
        )
        .because("entry_too_large"));
    }
    Ok(())
}

/// Query parameters of a request, with typed accessors.
/// Borrowed from the request where nothing needed decoding: every query-string read passes here.
pub struct Query<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> Query<'a> {
    pub fn parse(raw: Option<&'a str>) -> Result<Query<'a>, ApiError> {
        let mut pairs = Vec::new();
        for part in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let invalid = || ApiError::bad_request(format!("query parameter {k:?} is not valid percent-encoding"));
            pairs.push((percent_decode(k).ok_or_else(invalid)?, percent_decode(v).ok_or_else(invalid)?));
        }
        Ok(Query(pairs))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_ref())
    }

    /// An optional integer in `0..=max`.
    pub fn u64(&self, name: &str, max: u64) -> Result<Option<u64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n <= max => Ok(Some(n)),
                _ => Err(ApiError::bad_request(format!("{name} must be an integer from 0 to {max}, got {v:?}"))),
            },
        }
    }
}

fn percent_decode(s: &str) -> Option<Cow<'_, str>> {
    if !s.bytes().any(|b| b == b'%' || b == b'+') {
        return Some(Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_bounds() {
        let q = Query::parse(Some("logIndex=5&firstSize=-1&x=%41")).unwrap();
        assert_eq!(q.u64("logIndex", 10).unwrap(), Some(5));
        assert!(q.u64("logIndex", 4).is_err());
        assert!(q.u64("firstSize", 10).is_err());
        assert_eq!(q.get("x"), Some("A"));
        assert_eq!(q.u64("missing", 1).unwrap(), None);
        assert!(Query::parse(Some("a=%zz")).is_err());
        let q = Query::parse(Some("a+b=c%2Bd&plain=1")).unwrap();
        assert_eq!((q.get("a b"), q.get("plain")), (Some("c+d"), Some("1")));
    }
}
