//! The outermost layer: every request gets an id, sent back as `x-request-id`, (when
//! `http.access_log` is on) one log line under the target `signet::access`, and (when trace
//! export is on) a server span around everything inside ([`crate::otel`]).
//!
//! The line names the path without its query string: a query may carry a token, and no
//! token reaches a log. The client is the TCP peer.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use signet_core::request_id::RequestId;
use tracing::Instrument;

pub struct Access {
    pub log: bool,
}

pub async fn layer(State(access): State<Arc<Access>>, mut request: Request, next: Next) -> Response {
    let id = RequestId::next();
    request.extensions_mut().insert(id);
    let started = Instant::now();
    let line = access.log.then(|| {
        let peer = request.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip().to_string());
        (request.method().clone(), request.uri().path().to_string(), peer)
    });
    let span = crate::otel::request_span(&request, id);
    let mut response = next.run(request).instrument(span.clone()).await;
    crate::otel::answered(&span, response.status().as_u16());
    if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
        response.headers_mut().insert("x-request-id", value);
    }
    if let Some((method, path, peer)) = line {
        tracing::info!(
            target: "signet::access",
            request_id = %id,
            client = peer.as_deref().unwrap_or("-"),
            method = %method,
            path = %path.escape_debug(),
            status = response.status().as_u16(),
            micros = started.elapsed().as_micros() as u64,
        );
    }
    response
}
