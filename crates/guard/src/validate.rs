//! Validation: the request's framing checked before anything else reads it.
//!
//! Outermost of the guard's layers (inside the audit, which records what it refuses), so
//! a malformed request costs one pass over its headers and is answered before a token is
//! hashed, a bucket touched or a handler run:
//!
//! - **Headers** (431): at most `max_header_count` fields and `max_header_bytes` of names
//!   and values in all. hyper bounds the parse itself (100 fields); this bound is the one
//!   a client hears about, in JSON, and audited.
//! - **Duplicated security headers** (400): two `Authorization`, `Content-Length`, `Host`
//!   or `Content-Type` fields make a request mean different things to different parsers
//!   (request smuggling, a proxy checking one token and signet another).
//! - **Credentials in the URL** (400): `access_token=` or an `sgt_` token in the query.
//!   URLs end up in access logs, proxy logs and shell histories; a token belongs in
//!   `Authorization`.
//! - **Bodies, per route class** (413, 415, 400): a body-less route takes none; the
//!   others take their content types only and at most their class's size, read no further
//!   than that, whatever `Content-Length` declares or a chunked body goes on to send. A JSON
//!   body nested deeper than `max_json_depth` is refused here too, before any parser
//!   recurses into it. The body is then handed on whole, so the handler reads it from
//!   memory.
//!
//! What a JSON body must hold is the handler's business, through `api/input.rs` of the
//! server, which names the field and what was expected.

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use futures_util::future::{Either, Ready};
use http::{header, HeaderMap, Method, Request, StatusCode};
use tower::{Layer, Service};

use crate::refuse::refuse;

/// What a route takes as a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyClass {
    /// None (reads, probes): a `Content-Length` above 0 or a chunked body is refused.
    Empty,
    /// A log entry: JSON up to `max_body_bytes`.
    Entry,
    /// A small JSON request (the CA, searches, admin): up to `max_small_body_bytes`.
    Small,
    /// An RFC 3161 request (DER `application/timestamp-query`) or its JSON form.
    Stamp,
    /// A text body (c2sp.org/tlog-witness's checkpoint and proof): up to `max_small_body_bytes`.
    Note,
    /// A unary gRPC request (one protobuf message, framed): up to `max_small_body_bytes`.
    Grpc,
}

impl BodyClass {
    fn content_types(self) -> &'static [&'static str] {
        match self {
            BodyClass::Empty => &[],
            BodyClass::Entry | BodyClass::Small => &["application/json"],
            BodyClass::Stamp => &["application/timestamp-query", "application/json"],
            BodyClass::Note => &["text/plain", "application/octet-stream"],
            BodyClass::Grpc => &["application/grpc", "application/grpc+proto"],
        }
    }
}

/// The server's body classes: what the route matched as (method, template) takes; `None`
/// for no route (only the header checks apply before the router's 404 or 405).
pub type BodyTable = fn(&Method, &str) -> Option<BodyClass>;

/// The bounds, from the server's `[limits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    pub max_body_bytes: usize,
    pub max_small_body_bytes: usize,
    pub max_header_count: usize,
    pub max_header_bytes: usize,
    pub max_json_depth: usize,
}

impl InputLimits {
    fn max_body(&self, class: BodyClass) -> usize {
        match class {
            BodyClass::Empty => 0,
            BodyClass::Entry => self.max_body_bytes,
            BodyClass::Small | BodyClass::Stamp | BodyClass::Note | BodyClass::Grpc => self.max_small_body_bytes.min(self.max_body_bytes),
        }
    }
}

/// How long a refused body is read for before the 413 goes out.
const LINGER: std::time::Duration = std::time::Duration::from_millis(500);

/// Fields whose duplicates are refused.
const SINGLE: [header::HeaderName; 4] = [header::AUTHORIZATION, header::CONTENT_LENGTH, header::HOST, header::CONTENT_TYPE];

#[derive(Clone)]
pub struct ValidateLayer {
    limits: InputLimits,
    bodies: BodyTable,
}

impl ValidateLayer {
    pub fn new(limits: InputLimits, bodies: BodyTable) -> Self {
        ValidateLayer { limits, bodies }
    }
}

impl<S> Layer<S> for ValidateLayer {
    type Service = Validate<S>;
    fn layer(&self, inner: S) -> Validate<S> {
        Validate { limits: self.limits, bodies: self.bodies, inner }
    }
}

#[derive(Clone)]
pub struct Validate<S> {
    limits: InputLimits,
    bodies: BodyTable,
    inner: S,
}

type Boxed = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S> Service<Request<Body>> for Validate<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, Either<S::Future, Boxed>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let refused = |r: Response| Either::Left(futures_util::future::ready(Ok(r)));
        // A refusal before the body was read: the body is read and dropped first (bounded, as
        // the 413 below), or an HTTP/1.1 client that sends its whole request before reading
        // would be reset mid-upload, never see the answer, and lose its keep-alive connection.
        let max_body = self.limits.max_body_bytes;
        let refused_unread = |request: Request<Body>, r: Response| -> Self::Future {
            let carries_body = request.headers().contains_key(header::TRANSFER_ENCODING)
                || request.headers().get(header::CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0");
            match carries_body {
                false => Either::Left(futures_util::future::ready(Ok(r))),
                true => Either::Right(Either::Right(Box::pin(async move {
                    let _ = tokio::time::timeout(LINGER, axum::body::to_bytes(request.into_body(), max_body)).await;
                    Ok(r)
                }))),
            }
        };
        if let Err(r) = check_headers(request.headers(), &self.limits) {
            return refused_unread(request, r);
        }
        if let Err(r) = check_query(request.uri().query()) {
            return refused_unread(request, r);
        }
        let template = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
        let class = match template.and_then(|t| (self.bodies)(request.method(), t)) {
            Some(class) => class,
            None => return Either::Right(Either::Left(self.inner.call(request))),
        };
        let max = self.limits.max_body(class);
        let declared = match declared_length(request.headers()) {
            Ok(n) => n,
            // A Content-Length that does not parse: the body's end is unknown, nothing to read.
            Err(r) => return refused(r),
        };
        let chunked = request.headers().contains_key(header::TRANSFER_ENCODING);
        if class == BodyClass::Empty {
            if declared.unwrap_or(0) > 0 || chunked {
                let message = format!("{} {} takes no request body", request.method(), request.uri().path());
                return refused_unread(request, refuse(StatusCode::BAD_REQUEST, "unexpected_body", &message, None));
            }
            return Either::Right(Either::Left(self.inner.call(request)));
        }
        let json = match content_type(request.headers(), class) {
            Ok(json) => json,
            Err(r) => return refused_unread(request, r),
        };
        let declared_too_large = declared.filter(|n| *n > max as u64);
        // Take the ready service and leave a fresh clone behind (tower's rule for services
        // used from an owned future).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let depth = self.limits.max_json_depth;
        Either::Right(Either::Right(Box::pin(async move {
            let (parts, body) = request.into_parts();
            if let Some(n) = declared_too_large {
                // Read (and drop) as much as an admitted body before answering, as nginx's
                // lingering close does: a client that sends its whole body before reading
                // would otherwise be reset mid-upload and never see the 413. It costs what a
                // valid request does, and waits at most a moment for a body that never comes.
                let _ = tokio::time::timeout(LINGER, axum::body::to_bytes(body, max)).await;
                return Ok(too_large(n.to_string(), max, class));
            }
            let bytes = match axum::body::to_bytes(body, max).await {
                Ok(bytes) => bytes,
                Err(_) => return Ok(too_large(format!("more than {max}"), max, class)),
            };
            if json {
                if let Err(why) = within_depth(&bytes, depth) {
                    return Ok(refuse(StatusCode::BAD_REQUEST, "json_too_deep", &why.to_string(), None));
                }
            }
            inner.call(Request::from_parts(parts, Body::from(bytes))).await
        })))
    }
}

pub(crate) fn check_headers(headers: &HeaderMap, limits: &InputLimits) -> Result<(), Response> {
    let count = headers.len();
    if count > limits.max_header_count {
        let message = format!("the request has {count} header fields; at most {} are accepted", limits.max_header_count);
        return Err(refuse(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large", &message, None));
    }
    let bytes: usize = headers.iter().map(|(k, v)| k.as_str().len() + v.len()).sum();
    if bytes > limits.max_header_bytes {
        let message = format!("the request's header fields hold {bytes} bytes; at most {} are accepted", limits.max_header_bytes);
        return Err(refuse(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large", &message, None));
    }
    // Every value having a name of its own means no name repeats: the per-name lookups
    // (a hash each) are for the rare request where one does.
    let repeats = headers.len() > headers.keys_len();
    for name in SINGLE.iter().filter(|_| repeats) {
        if headers.get_all(name).iter().nth(1).is_some() {
            let message = format!("the request has more than one {name} header field; send it once");
            return Err(refuse(StatusCode::BAD_REQUEST, "duplicate_header", &message, None));
        }
    }
    Ok(())
}

/// Refuses a query that carries a credential.
pub(crate) fn check_query(query: Option<&str>) -> Result<(), Response> {
    match query.and_then(credential_in_query) {
        None => Ok(()),
        Some(key) => {
            let message = format!(
                "query parameter {key:?} carries a credential; credentials never go in a URL (URLs are logged): send Authorization: Bearer"
            );
            Err(refuse(StatusCode::BAD_REQUEST, "credential_in_query", &message, None))
        }
    }
}

/// The name (at most 64 characters) of the first query parameter that carries a
/// credential: one named like a token, or an `sgt_` token in its name or value. Names and
/// values are looked at percent-decoded, so an encoded `sgt%5F…` is caught as well.
pub fn credential_in_query(query: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, value) = (decode(key), decode(value));
        let (key, value) = (key.as_ref(), value.as_ref());
        let named = ["access_token", "token", "api_key", "apikey"].iter().any(|n| key.eq_ignore_ascii_case(n));
        (named || key.contains(crate::token::PREFIX) || value.contains(crate::token::PREFIX)).then(|| shown(key))
    })
}

/// A parameter name as it may be shown back: at most 64 characters.
fn shown(key: &str) -> String {
    key.chars().take(64).collect()
}

/// Percent-decoding for the checks above: lossy, since only a match matters here. Borrows
/// what has nothing to decode: every request with a query passes here.
fn decode(s: &str) -> Cow<'_, str> {
    if !s.bytes().any(|b| b == b'%' || b == b'+') {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, Response> {
    match headers.get(header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(v) => v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()).map(Some).ok_or_else(|| {
            refuse(StatusCode::BAD_REQUEST, "bad_content_length", "Content-Length is not a decimal number of bytes", None)
        }),
    }
}

/// Whether the body is JSON; a content type the class does not take is a 415. A missing
/// one is read as the class's first type: HTML forms, the cross-site way to make a browser
/// POST, always send one, so requiring it would stop no attack and break plain clients.
fn content_type(headers: &HeaderMap, class: BodyClass) -> Result<bool, Response> {
    let accepted = class.content_types();
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(accepted.first() == Some(&"application/json"));
    };
    let mime = value.to_str().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match accepted.iter().find(|t| **t == mime) {
        Some(t) => Ok(*t == "application/json"),
        None => {
            let message = format!("content type {:?} is not accepted here; expected {}", shown(&mime), accepted.join(" or "));
            Err(refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", &message, None))
        }
    }
}

fn too_large(size: String, max: usize, class: BodyClass) -> Response {
    let key = if class == BodyClass::Entry { "max_body_bytes" } else { "max_small_body_bytes" };
    let message = format!("the request body is {size} bytes, over this route's limit: it accepts at most {max} (limits.{key})");
    refuse(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", &message, None)
}

/// Refuses JSON nested deeper than `max` arrays and objects, in one pass over the bytes
/// and without parsing: brackets inside strings (escapes included) do not count. Bytes
/// that are not JSON are left for the parser to name.
///
/// Inside a string only a quote or a backslash matters, so the scan jumps from one to the
/// next (memchr, many bytes per instruction): a signing request is mostly base64 inside
/// strings (what byte by byte cost: docs/performance.md, "The measurements behind the code's shape").
pub fn within_depth(json: &[u8], max: usize) -> Result<(), TooDeep> {
    let mut depth = 0usize;
    let mut at = 0usize;
    while let Some(&b) = json.get(at) {
        match b {
            b'"' => match string_end(json, at + 1) {
                Some(end) => at = end,
                // An unterminated string: nothing after it can open a bracket.
                None => return Ok(()),
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Err(TooDeep { max, at });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    Ok(())
}

/// JSON nested deeper than the route allows: `at` is the byte that went over `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the JSON body nests deeper than {max} levels (at byte {at}); no request of this API needs that")]
pub struct TooDeep {
    pub max: usize,
    pub at: usize,
}

/// The index of the quote that closes a string whose content starts at `from`.
fn string_end(json: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let found = from + memchr::memchr2(b'"', b'\\', json.get(from..)?)?;
        match json.get(found) {
            Some(b'"') => return Some(found),
            // A backslash escapes the byte after it, whatever it is.
            _ => from = found + 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_outside_strings_only() {
        assert_eq!(within_depth(br#"{"a":[{"b":1}]}"#, 3), Ok(()));
        assert!(within_depth(br#"{"a":[{"b":[1]}]}"#, 3).unwrap_err().to_string().contains("deeper than 3"));
        assert_eq!(within_depth(br#"{"a":"[[[[[[[[\"[[[["}"#, 1), Ok(()), "brackets in strings, escaped quotes too");
        assert_eq!(within_depth(br#"{"a":"\\"}"#, 1), Ok(()), "an escaped backslash ends the escape");
        let deep = "[".repeat(100_000);
        assert!(within_depth(deep.as_bytes(), 32).is_err());
        assert!(within_depth(br#"{"a":"\\"#, 0).unwrap_err().to_string().contains("deeper than 0"));
        assert_eq!(within_depth(br#"["\"#, 1), Ok(()), "a trailing backslash in an unterminated string");
    }

    /// The byte-by-byte form the scan replaced, as the reference it must agree with.
    fn reference_depth_ok(json: &[u8], max: usize) -> bool {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for &b in json {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > max {
                        return false;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        true
    }

    #[test]
    fn the_jumping_scan_agrees_with_the_byte_by_byte_one() {
        // Every string of up to 7 bytes over the alphabet that matters, and some longer ones.
        let alphabet = [b'"', b'\\', b'[', b']', b'{', b'}', b'a'];
        let mut inputs: Vec<Vec<u8>> = vec![vec![]];
        for len in 1..=7 {
            let mut next = Vec::new();
            for prefix in inputs.iter().filter(|i| i.len() == len - 1) {
                for &c in &alphabet {
                    next.push([&prefix[..], &[c]].concat());
                }
            }
            inputs.extend(next);
        }
        inputs.push(br#"{"a":"x\"[[[[","b":[[["\\"]]]}"#.to_vec());
        inputs.push([&b"[\""[..], &vec![b'q'; 5000], b"\"]"].concat());
        for input in &inputs {
            for max in 0..4 {
                assert_eq!(within_depth(input, max).is_ok(), reference_depth_ok(input, max), "{:?} at {max}", String::from_utf8_lossy(input));
            }
        }
    }

    #[test]
    fn credentials_in_queries_are_found_encoded_or_not() {
        assert!(check_query(Some("logIndex=5&x=%41")).is_ok());
        assert!(check_query(None).is_ok());
        for bad in ["access_token=abc", "ACCESS_TOKEN=abc", "t=sgt_0011223344556677_x", "t=sgt%5F0011", "a=1&sgt_00=1", "api_key=1"] {
            assert!(check_query(Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(decode("a%zz%4"), "a%zz%4", "malformed escapes are kept as they are");
    }

    #[test]
    fn header_bounds_and_duplicates() {
        let limits = InputLimits { max_body_bytes: 1024, max_small_body_bytes: 512, max_header_count: 4, max_header_bytes: 64, max_json_depth: 8 };
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "x".parse().unwrap());
        assert!(check_headers(&h, &limits).is_ok());
        h.append(header::AUTHORIZATION, "Bearer a".parse().unwrap());
        h.append(header::AUTHORIZATION, "Bearer b".parse().unwrap());
        assert_eq!(check_headers(&h, &limits).unwrap_err().status(), StatusCode::BAD_REQUEST);
        let mut many = HeaderMap::new();
        for i in 0..5 {
            many.insert(header::HeaderName::from_bytes(format!("x-{i}").as_bytes()).unwrap(), "v".parse().unwrap());
        }
        assert_eq!(check_headers(&many, &limits).unwrap_err().status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        let mut big = HeaderMap::new();
        big.insert("x-big", "v".repeat(100).parse().unwrap());
        assert_eq!(check_headers(&big, &limits).unwrap_err().status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        assert_eq!(limits.max_body(BodyClass::Stamp), 512);
        assert_eq!(limits.max_body(BodyClass::Entry), 1024);
    }
}
