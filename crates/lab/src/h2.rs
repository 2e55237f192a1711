//! HTTP/2 clients on hyper: h2c with prior knowledge over plain TCP, `h2` by ALPN over TLS.
//!
//! In keep-alive mode, `--connections` TCP connections are shared: each is a [`Shared`]
//! slot, and `--streams` clients use one slot, so at most that many streams are open on a
//! connection at once. In new-connection mode a client opens a connection per request.
//!
//! Workloads prepare their requests as HTTP/1.1 bytes, the form the cheap default path
//! writes as is; here each is turned into an `http::Request` when sent. HTTP/2 is not the
//! headline path, so that copy is the simpler trade.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::conn::{ConnError, Reply};
use crate::dial::{Dialer, Setup};

type Sender = SendRequest<Full<Bytes>>;

/// One HTTP/2 connection that several clients multiplex streams on; reopened when it dies.
pub struct Shared {
    dialer: Arc<Dialer>,
    current: tokio::sync::Mutex<Option<Sender>>,
}

impl Shared {
    pub fn new(dialer: &Arc<Dialer>) -> Arc<Shared> {
        Arc::new(Shared { dialer: dialer.clone(), current: tokio::sync::Mutex::new(None) })
    }
}

/// Sends one request at a time, as one stream, on a shared or a fresh connection.
pub struct H2Client {
    dialer: Arc<Dialer>,
    /// Keep-alive mode: the connection this client's streams go to.
    shared: Option<Arc<Shared>>,
    /// This client's handle on the shared connection (a cheap clone of it).
    send: Option<Sender>,
    scheme: &'static str,
    setups: Vec<Setup>,
}

impl H2Client {
    /// A client whose streams go to `shared`.
    pub fn shared(shared: &Arc<Shared>) -> H2Client {
        let mut c = H2Client::fresh(&shared.dialer);
        c.shared = Some(shared.clone());
        c
    }

    /// A client that opens a new connection for every request and closes it after.
    pub fn fresh(dialer: &Arc<Dialer>) -> H2Client {
        let scheme = if dialer.is_tls() { "https" } else { "http" };
        H2Client { dialer: dialer.clone(), shared: None, send: None, scheme, setups: Vec::new() }
    }

    /// Opens the shared connection now, so that its setup is not billed to a request.
    pub async fn warm_up(&mut self) -> Result<(), ConnError> {
        self.sender().await.map(|_| ())
    }

    /// A timed-out stream was reset when its future was dropped; the connection stays usable.
    pub fn reset(&mut self) {}

    pub fn drain_setups(&mut self) -> std::vec::Drain<'_, Setup> {
        self.setups.drain(..)
    }

    /// A sender on the shared connection, (re)opening it if it is closed.
    async fn sender(&mut self) -> Result<&mut Sender, ConnError> {
        let Some(shared) = &self.shared else { return Err(ConnError::Http2("not a shared client".into())) };
        if self.send.as_ref().is_none_or(|s| s.is_closed()) {
            // The lock makes the clients of one slot reopen it once, not once each.
            let mut current = shared.current.lock().await;
            if current.as_ref().is_none_or(|s| s.is_closed()) {
                let (send, setup) = handshake(&shared.dialer).await?;
                self.setups.push(setup);
                *current = Some(send);
            }
            self.send = current.clone();
        }
        Ok(self.send.as_mut().expect("just set"))
    }

    /// Sends one serialized request and reads the whole response, dropping the body.
    pub async fn send(&mut self, raw: &[u8]) -> Result<Reply, ConnError> {
        let (status, body) = self.exchange(raw).await?;
        Ok(Reply { status, body_len: body.len() })
    }

    /// Sends one request and returns the status and the body.
    pub async fn fetch(&mut self, raw: &[u8]) -> Result<(u16, Vec<u8>), ConnError> {
        let (status, body) = self.exchange(raw).await?;
        Ok((status, body.to_vec()))
    }

    async fn exchange(&mut self, raw: &[u8]) -> Result<(u16, Bytes), ConnError> {
        let request = to_request(raw, self.scheme)?;
        if self.shared.is_none() {
            let (mut send, setup) = handshake(&self.dialer).await?;
            self.setups.push(setup);
            // Dropping the sender afterwards ends the connection (GOAWAY, then close).
            return round_trip(&mut send, request).await;
        }
        let send = self.sender().await?;
        let result = round_trip(send, request).await;
        if result.is_err() && self.send.as_ref().is_some_and(|s| s.is_closed()) {
            self.send = None;
        }
        result
    }
}

async fn round_trip(send: &mut Sender, request: Request<Full<Bytes>>) -> Result<(u16, Bytes), ConnError> {
    // Waits while the server's SETTINGS_MAX_CONCURRENT_STREAMS are all in use.
    send.ready().await.map_err(http2_error)?;
    let response = send.send_request(request).await.map_err(http2_error)?;
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.map_err(http2_error)?;
    let status = grpc_status(&parts.headers, collected.trailers()).map_or(parts.status.as_u16(), http_equivalent);
    Ok((status, collected.to_bytes()))
}

/// A gRPC answer's status (`grpc-status`, in the trailers or, trailers-only, in the headers),
/// if the answer is gRPC's: its HTTP status is 200 whatever the outcome.
fn grpc_status(headers: &http::HeaderMap, trailers: Option<&http::HeaderMap>) -> Option<u32> {
    let grpc = headers.get(http::header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"application/grpc"));
    let value = trailers.and_then(|t| t.get("grpc-status")).or_else(|| headers.get("grpc-status"));
    match (grpc, value) {
        (false, _) => None,
        (true, Some(v)) => Some(v.to_str().ok().and_then(|s| s.parse().ok()).unwrap_or(2)),
        // No status at all: the stream ended early, as UNKNOWN.
        (true, None) => Some(2),
    }
}

/// The HTTP status a refusal with gRPC `code` corresponds to, so that the lab counts it as
/// it counts the REST API's (`status_401`, `status_429`, …).
fn http_equivalent(code: u32) -> u16 {
    match code {
        0 => 200,
        3 | 9 | 11 => 400,
        16 => 401,
        7 => 403,
        5 | 12 => 404,
        6 | 10 => 409,
        8 => 429,
        14 => 503,
        4 => 504,
        _ => 500,
    }
}

fn http2_error(e: hyper::Error) -> ConnError {
    // hyper's Display is terse ("connection error"); its source says what happened.
    let mut text = e.to_string();
    if let Some(source) = std::error::Error::source(&e) {
        text = format!("{text}: {source}");
    }
    ConnError::Http2(text)
}

/// Opens a connection and speaks the HTTP/2 preface on it; the connection is driven by its
/// own task until every sender is dropped.
async fn handshake(dialer: &Dialer) -> Result<(Sender, Setup), ConnError> {
    let started = Instant::now();
    let (stream, mut setup) = dialer.connect().await?;
    let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(stream))
        .await
        .map_err(http2_error)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    setup.total_us = started.elapsed().as_micros().max(1) as u64;
    Ok((send, setup))
}

/// The HTTP/2 form of a request that the lab serialized as HTTP/1.1: the request line and
/// `Host` become `:method`, `:scheme`, `:authority` and `:path`; other headers and the body
/// carry over.
pub fn to_request(raw: &[u8], scheme: &str) -> Result<Request<Full<Bytes>>, ConnError> {
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or(ConnError::Protocol("request has no head"))?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| ConnError::Protocol("request head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or("").split(' ');
    let (method, path) = match (request_line.next(), request_line.next()) {
        (Some(m), Some(p)) => (m, p),
        _ => return Err(ConnError::Protocol("bad request line")),
    };
    let mut headers = Vec::new();
    let mut host = "";
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        if name.eq_ignore_ascii_case("host") {
            host = value.trim();
        } else if !name.eq_ignore_ascii_case("connection") {
            headers.push((name, value.trim()));
        }
    }
    let mut builder = Request::builder().method(method).uri(format!("{scheme}://{host}{path}"));
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::copy_from_slice(&raw[head_end + 4..])))
        .map_err(|_| ConnError::Protocol("request does not convert to HTTP/2"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_answers_count_by_their_grpc_status() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(grpc_status(&headers, None), None, "not gRPC: the HTTP status stands");
        headers.insert("content-type", "application/grpc".parse().unwrap());
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        assert_eq!(grpc_status(&headers, Some(&trailers)).map(http_equivalent), Some(200));
        assert_eq!(grpc_status(&headers, None).map(http_equivalent), Some(500), "a gRPC answer without a status failed");
        headers.insert("grpc-status", "16".parse().unwrap());
        assert_eq!(grpc_status(&headers, None).map(http_equivalent), Some(401), "trailers-only");
        headers.insert("grpc-status", "8".parse().unwrap());
        assert_eq!(grpc_status(&headers, None).map(http_equivalent), Some(429));
    }

    #[test]
    fn http1_requests_become_http2_requests() {
        let uri: http::Uri = "http://127.0.0.1:9/".parse().unwrap();
        let raw = crate::conn::request_bytes_bearer("POST", &uri, "/api/v1/log/entries?x=1", b"{}", "t.o.k");
        let r = to_request(&raw, "https").unwrap();
        assert_eq!(r.method(), http::Method::POST);
        assert_eq!(r.uri().to_string(), "https://127.0.0.1:9/api/v1/log/entries?x=1");
        assert_eq!(r.headers()["authorization"], "Bearer t.o.k");
        assert_eq!(r.headers()["content-type"], "application/json");
        assert!(r.headers().get("host").is_none(), "the authority carries the host");
        let body = futures_body(r.into_body());
        assert_eq!(body, b"{}");
        assert_eq!(to_request(b"GET /", "http").unwrap_err().kind(), "protocol");
    }

    fn futures_body(body: Full<Bytes>) -> Vec<u8> {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async { body.collect().await.unwrap().to_bytes().to_vec() })
    }
}
