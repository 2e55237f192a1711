//! The layer that audits every request: the outermost one, so that it sees the requests the
//! other guard layers refuse (401, 403, 429) as well as the ones they let through.
//!
//! The caller is named as the rate limiter names it ([`crate::client`]): its API token's id
//! when it presented a valid one, else its IP. A token is never recorded, only its id.
//! A tower service rather than an axum `from_fn`: it adds no allocation to the request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use http::{Method, Request, Uri};
use tower::{Layer, Service};

use super::chain::{now_ms, AuditLog, Entry};
use super::Did;
use crate::client::{bearer, ClientKey};
use crate::guard::Guard;
use crate::refuse::Refusal;
use crate::roles::Role;

/// The log, and the guard to recognise API tokens.
#[derive(Clone)]
pub struct AuditLayer {
    pub log: Arc<AuditLog>,
    pub guard: Arc<Guard>,
}

impl<S> Layer<S> for AuditLayer {
    type Service = Audited<S>;
    fn layer(&self, inner: S) -> Audited<S> {
        Audited { log: self.log.clone(), guard: self.guard.clone(), inner }
    }
}

#[derive(Clone)]
pub struct Audited<S> {
    log: Arc<AuditLog>,
    guard: Arc<Guard>,
    inner: S,
}

impl<S> Service<Request<Body>> for Audited<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Recorded<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let (client, role) = client_of(&self.guard, &request);
        let pending = Pending {
            log: self.log.clone(),
            start: Instant::now(),
            client,
            role,
            route: request.extensions().get::<MatchedPath>().cloned(),
            method: request.method().clone(),
            uri: request.uri().clone(),
            request_id: request.extensions().get::<signet_core::request_id::RequestId>().copied(),
        };
        Recorded { inner: self.inner.call(request), pending: Some(pending) }
    }
}

struct Pending {
    log: Arc<AuditLog>,
    start: Instant,
    client: ClientKey,
    role: Option<Role>,
    route: Option<MatchedPath>,
    method: Method,
    uri: Uri,
    request_id: Option<signet_core::request_id::RequestId>,
}

pin_project_lite::pin_project! {
    /// The inner response future; records the request when it completes.
    pub struct Recorded<F> {
        #[pin]
        inner: F,
        pending: Option<Pending>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Recorded<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = std::task::ready!(this.inner.poll(cx));
        if let (Some(p), Ok(response)) = (this.pending.take(), &out) {
            p.log.record(Entry {
                time_ms: now_ms(),
                client: p.client,
                method: p.method,
                uri: p.uri,
                status: response.status().as_u16(),
                micros: p.start.elapsed().as_micros() as u64,
                request_id: p.request_id,
                role: p.role,
                route: p.route,
                reason: response.extensions().get::<Refusal>().map(|r| r.0),
                did: response.extensions().get::<Did>().cloned(),
            });
        }
        Poll::Ready(out)
    }
}

fn client_of<B>(guard: &Guard, request: &Request<B>) -> (ClientKey, Option<Role>) {
    match bearer(request).and_then(|t| guard.authenticate(t)) {
        Some(Ok(identity)) => (ClientKey::Token(identity.id), Some(identity.role)),
        _ => (guard.keying.key_of(request), None),
    }
}
