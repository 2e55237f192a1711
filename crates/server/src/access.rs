//! The outermost layer: every request gets an id, sent back as `x-request-id`, (when
//! `http.access_log` is on) one log line under the target `signet::access`, and (when trace
//! export is on) a server span around everything inside ([`crate::otel`]).
//!
//! The line names the path without its query string: a query may carry a token, and no
//! token reaches a log. The client is the TCP peer.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderValue;
use axum::response::Response;
use signet_core::request_id::RequestId;
use tracing::Instrument;

pub struct Access {
    pub log: bool,
    /// The audit log is on: its records carry the request id, which it reads from the request.
    pub audited: bool,
}

/// The layer, written by hand: a request costs one allocation (its future), where
/// `from_fn` cloned and boxed the whole service beneath it (issue 40).
#[derive(Clone)]
pub struct AccessLayer(pub Arc<Access>);

impl<S> tower::Layer<S> for AccessLayer {
    type Service = AccessService<S>;

    fn layer(&self, inner: S) -> AccessService<S> {
        AccessService { access: self.0.clone(), inner }
    }
}

#[derive(Clone)]
pub struct AccessService<S> {
    access: Arc<Access>,
    inner: S,
}

impl<S> tower::Service<Request> for AccessService<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let id = RequestId::next();
        if self.access.audited {
            request.extensions_mut().insert(id);
        }
        let started = Instant::now();
        let line = self.access.log.then(|| {
            let peer = request.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip().to_string());
            (request.method().clone(), request.uri().path().to_string(), peer)
        });
        let span = crate::otel::request_span(&request, id);
        let inner = span.in_scope(|| self.inner.call(request));
        Box::pin(async move {
            let Ok(mut response) = inner.instrument(span.clone()).await;
            crate::otel::answered(&span, response.status().as_u16());
            if let Ok(value) = HeaderValue::from_bytes(&id.to_hex()) {
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
            Ok(response)
        })
    }
}
