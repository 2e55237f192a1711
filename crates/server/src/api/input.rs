//! Reading request input with errors that say what was wrong and what was expected.
//!
//! The request's framing (header bounds, content type, body size per route class, JSON
//! nesting) is checked before any handler runs, by the guard's validation layer
//! (`signet_guard::validate`). What is left is the body's shape: handlers read bodies and
//! queries through here, and every mistake is answered in signet's JSON error shape
//! (axum's stock extractors answer in plain text).

use axum::body::Body;
use axum::http::StatusCode;
use serde_json::Value;

use super::error::ApiError;

/// Reads a JSON object body. The validation layer has checked its content type and size
/// and holds it in memory; `limit` bounds it again for a caller outside the router.
pub async fn json_body(body: Body, limit: usize) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body is larger than the {limit}-byte limit"))
            .because("body_too_large")
    })?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request("request body is empty; expected a JSON object"));
    }
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("request body is not valid JSON: {e}")).because("malformed_json"))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    }
    Ok(value)
}

/// Admits one append to `log`, or refuses it at once. A refused request's body is still
/// read (up to `limit`): an HTTP/1.1 connection whose request body was left unread cannot be
/// reused, and a shed request that costs the client a new connection is not cheap.
pub async fn admit(log: &signet_log::Log, body: Body, limit: usize) -> Result<(signet_log::Admission, Body), ApiError> {
    match log.admit() {
        Ok(admission) => Ok((admission, body)),
        Err(e) => {
            let _ = axum::body::to_bytes(body, limit).await;
            Err(e.into())
        }
    }
}

/// Refuses a body whose top-level object has a field outside `allowed`, naming it: a typo
/// in a request must not be silently ignored.
pub fn only_fields(request: &Value, allowed: &[&str]) -> Result<(), ApiError> {
    if let Some(obj) = request.as_object() {
        if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ApiError::bad_request(format!("unknown field {k:?}; expected only {allowed:?}")).because("unknown_field"));
        }
    }
    Ok(())
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
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Result<Query, ApiError> {
        let mut pairs = Vec::new();
        for part in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let decode = |s: &str| {
                percent_decode(s).ok_or_else(|| ApiError::bad_request(format!("query parameter {k:?} is not valid percent-encoding")))
            };
            pairs.push((decode(k)?, decode(v)?));
        }
        Ok(Query(pairs))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
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

fn percent_decode(s: &str) -> Option<String> {
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
    String::from_utf8(out).ok()
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
    }
}
