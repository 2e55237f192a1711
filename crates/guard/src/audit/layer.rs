//! The layer that audits every request: the outermost one, so that it sees the requests the
//! other guard layers refuse (401, 403, 429) as well as the ones they let through.
//!
//! In closed mode ([`crate::config::AuditMode`]) an answer waits for its record to be
//! durable, and becomes a 503 `audit_unavailable` when it cannot be; while the log's store
//! is failing, requests are answered 503 without reaching the layers inside, so nothing is
//! signed or appended that the audit log cannot record. A write that fails after a handler
//! ran cannot undo what the handler did: its answer is withheld, and the log entry or
//! certificate stands in its own transparency log.
//!
//! The caller is named as the rate limiter names it ([`crate::client`]): by the
//! [`Identity`] that authn put on the answer (an API token's id, or a mapped client
//! certificate), else by its address. This layer authenticates nothing itself: a request that
//! never reached authn (refused before it, or with the guard off) is named by its address. A
//! token is never recorded, only its id.
//!
//! Over HTTP/1 the server's connection may hold the answer's bytes rather than this layer its
//! future ([`HoldsOutput`]). A tower service rather than an axum `from_fn`: it adds no
//! allocation to the request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use http::{Method, Request, StatusCode};
use tower::{Layer, Service};

use super::batch::{HoldsOutput, Receipt};
use super::chain::{now_ms, AuditLog};
use super::queue::{Entry, QueueFull};
use super::UNAVAILABLE;
use super::record::PathText;
use super::Did;
use crate::identity::{Identity, Principal};
use crate::client::{ClientKey, Keying};
use crate::mtls::ClientCertificate;
use crate::config::AuditMode;
use crate::refuse::{refuse, Refusal};

/// The log, and how a request's address becomes a client key.
#[derive(Clone)]
pub struct AuditLayer {
    pub log: Arc<AuditLog>,
    pub keying: Arc<Keying>,
}

impl<S> Layer<S> for AuditLayer {
    type Service = Audited<S>;
    fn layer(&self, inner: S) -> Audited<S> {
        Audited { log: self.log.clone(), keying: self.keying.clone(), inner }
    }
}

#[derive(Clone)]
pub struct Audited<S> {
    log: Arc<AuditLog>,
    keying: Arc<Keying>,
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
        let refused = self.log.refusing();
        let pending = Pending {
            log: self.log.clone(),
            start: Instant::now(),
            address: self.keying.key_of(&request),
            cert: request.extensions().get::<ClientCertificate>().and_then(|c| c.sans().first()).map(|s| Arc::from(s.as_str())),
            route: request.extensions().get::<MatchedPath>().cloned(),
            method: request.method().clone(),
            path: PathText::new(request.uri().path()),
            request_id: request.extensions().get::<signet_core::request_id::RequestId>().copied(),
            // HTTP/2 multiplexes answers on one stream of bytes: there the future is held.
            gate: match request.version() {
                http::Version::HTTP_10 | http::Version::HTTP_11 => request.extensions().get::<HoldsOutput>().cloned(),
                _ => None,
            },
        };
        match refused {
            true => Recorded { inner: None, refused: Some(unavailable(&self.log)), pending: Some(pending), waiting: None },
            false => Recorded { inner: Some(self.inner.call(request)), refused: None, pending: Some(pending), waiting: None },
        }
    }
}

struct Pending {
    log: Arc<AuditLog>,
    start: Instant,
    /// The client's address as a key: the caller's name when no identity comes back.
    address: ClientKey,
    /// The connection's client certificate's first SAN, if it presented one.
    cert: Option<Arc<str>>,
    route: Option<MatchedPath>,
    method: Method,
    path: PathText,
    request_id: Option<signet_core::request_id::RequestId>,
    gate: Option<HoldsOutput>,
}

pin_project_lite::pin_project! {
    /// The inner response future (none when the log is refusing); records the request when
    /// it completes and, in closed mode, holds the answer until the record is durable.
    pub struct Recorded<F> {
        #[pin]
        inner: Option<F>,
        refused: Option<Response>,
        pending: Option<Pending>,
        waiting: Option<Waiting>,
    }
}

/// An answer held until its record is durable.
struct Waiting {
    response: Response,
    durable: Receipt,
    log: Arc<AuditLog>,
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Recorded<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(w) = this.waiting.as_mut() {
            let durable = std::task::ready!(Pin::new(&mut w.durable).poll(cx));
            return Poll::Ready(Ok(match this.waiting.take() {
                Some(w) if durable => w.response,
                Some(w) => unavailable(&w.log),
                None => unavailable_anyway(),
            }));
        }
        let (response, gated) = match (this.inner.as_mut().as_pin_mut(), this.refused.take()) {
            (Some(inner), _) => match std::task::ready!(inner.poll(cx)) {
                Ok(response) => {
                    // Freed now, on the thread that allocated it, rather than after the wait
                    // for the record, maybe on another worker (mimalloc's costly path).
                    this.inner.set(None);
                    (response, false)
                }
            },
            (None, Some(refused)) => (refused, true),
            // Polled after it completed.
            (None, None) => return Poll::Ready(Ok(unavailable_anyway())),
        };
        let Some(p) = this.pending.take() else { return Poll::Ready(Ok(response)) };
        let who = response.extensions().get::<Identity>();
        let cert = match who {
            // The SAN that `[guard.mtls]` mapped, rather than the certificate's first.
            Some(Identity { principal: Principal::Certificate(san), .. }) => Some(san.clone()),
            _ => p.cert,
        };
        let queued = p.log.record(Entry {
            time_ms: now_ms(),
            client: who.map_or(p.address, |w| w.principal.client_key()),
            method: p.method,
            path: p.path,
            status: response.status().as_u16(),
            micros: p.start.elapsed().as_micros() as u64,
            request_id: p.request_id,
            role: who.map(|w| w.role.clone()),
            route: p.route,
            reason: response.extensions().get::<Refusal>().map(|r| r.0),
            oidc: response.extensions().get::<super::Oidc>().cloned(),
            did: response.extensions().get::<Did>().cloned(),
            cert,
        });
        match queued {
            // Best-effort, or already the 503: out it goes.
            Ok(None) => Poll::Ready(Ok(response)),
            Ok(Some(_)) if gated => Poll::Ready(Ok(response)),
            // Over HTTP/1 the connection's stream holds the answer's bytes instead ([`super::gate`]).
            Ok(Some(durable)) if p.gate.is_some() => {
                let failed = p.gate.as_ref().is_some_and(|holder| durable.hold_output(holder) == Some(false));
                Poll::Ready(Ok(if failed { unavailable(&p.log) } else { response }))
            }
            Ok(Some(mut durable)) => {
                match Pin::new(&mut durable).poll(cx) {
                    Poll::Ready(true) => Poll::Ready(Ok(response)),
                    Poll::Ready(false) => Poll::Ready(Ok(unavailable(&p.log))),
                    Poll::Pending => {
                        *this.waiting = Some(Waiting { response, durable, log: p.log });
                        Poll::Pending
                    }
                }
            }
            Err(QueueFull) if p.log.mode() == AuditMode::BestEffort || gated => Poll::Ready(Ok(response)),
            Err(QueueFull) => Poll::Ready(Ok(unavailable(&p.log))),
        }
    }
}

/// The answer to a request whose record cannot be made durable.
fn unavailable(log: &AuditLog) -> Response {
    log.count_refused();
    unavailable_anyway()
}

fn unavailable_anyway() -> Response {
    refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        "audit_unavailable",
        UNAVAILABLE,
        Some(1),
    )
}
