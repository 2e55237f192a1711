//! Rate limiting: a GCRA token bucket per client (governor), one for reads and one for
//! writes, as a tower layer.
//!
//! A refusal is a 429 with `Retry-After` (whole seconds, rounded up, at least 1), marked as a
//! [`Strike`] against the caller for the ban layer ([`crate::ban::layer`]) to count. The
//! refused path does no I/O and takes no lock beyond governor's sharded map: at 50,000
//! requests/s it is most of what the server does. A client is keyed by the [`Identity`] that
//! authn put on the request, else by its address.
//!
//! With Redis the shared limiter decides in one atomic step the bucket, the strike and the
//! ban ([`crate::shared`]): its refusals are not marked, as Redis counted them already.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use futures_util::future::{Either, Ready};
use http::{Method, Request, StatusCode};
use tower::{Layer, Service};

use crate::identity::{Identity, Needs, Route, RouteTable};
use crate::permission::Permission;
use crate::client::ClientKey;
use crate::guard::Guard;
use crate::refuse::{refuse, Strike, Struck};
use crate::config::OnFailure;
use crate::shared::{Decision, SharedLimits};

/// Whether a request spends the write bucket: its route needs more than `read` (a search
/// is a POST that reads). With no route (the router's 404 or 405): anything but GET, HEAD
/// and OPTIONS.
pub fn is_write<B>(routes: RouteTable, request: &Request<B>) -> bool {
    let template = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
    match template.and_then(|t| routes(request.method(), t)) {
        Some(Route { needs: Needs::Open | Needs::Permission(Permission::Read), .. }) => false,
        Some(_) => true,
        None => !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS),
    }
}

#[derive(Clone)]
pub struct RateLimitLayer {
    guard: Arc<Guard>,
    routes: RouteTable,
}

impl RateLimitLayer {
    pub fn new(guard: Arc<Guard>, routes: RouteTable) -> Self {
        RateLimitLayer { guard, routes }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit { guard: self.guard.clone(), routes: self.routes, inner }
    }
}

#[derive(Clone)]
pub struct RateLimit<S> {
    guard: Arc<Guard>,
    routes: RouteTable,
    inner: S,
}

type Answer = futures_util::future::BoxFuture<'static, Result<Response, Infallible>>;

impl<S> Service<Request<Body>> for RateLimit<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Either<Ready<Result<Response, Infallible>>, S::Future>, Answer>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let client = match request.extensions().get::<Identity>() {
            Some(who) => who.principal.client_key(),
            None => self.guard.keying.key_of(&request),
        };
        let write = is_write(self.routes, &request);
        // Probes and metrics keep to this instance's own buckets: a load balancer or a scraper
        // must see the instance as it is, Redis or no Redis (fail-closed would fail them too).
        let ops = matches!(request.uri().path(), "/healthz" | "/readyz" | "/metrics");
        if let Some(shared) = self.guard.shared.clone().filter(|_| !ops) {
            // The one that was made ready goes with the request; a clone waits for the next.
            let ready = self.inner.clone();
            let mut inner = std::mem::replace(&mut self.inner, ready);
            let guard = self.guard.clone();
            return Either::Right(Box::pin(async move {
                match shared_check(&guard, &shared, &client, write).await {
                    Ok(()) => inner.call(request).await,
                    Err(refusal) => Ok(refusal),
                }
            }));
        }
        match self.guard.limiters.as_ref().map(|l| l.check(&client, write)) {
            Some(Err(wait)) => {
                let strike = Strike { why: "rate limited", on: Struck::Caller };
                Either::Left(Either::Left(futures_util::future::ready(Ok(strike.on(refused(&self.guard, &client, write, wait))))))
            }
            _ => Either::Left(Either::Right(self.inner.call(request))),
        }
    }
}

/// The shared limiter's (Redis) decision for `client`: `Ok` to go on (admitted, or Redis
/// unreachable with `on_failure = "open"`), or the refusal to answer.
pub(crate) async fn shared_check(guard: &Guard, shared: &SharedLimits, client: &ClientKey, write: bool) -> Result<(), Response> {
    match shared.check(client, write).await {
        Decision::Allow => Ok(()),
        Decision::Refuse(wait) => Err(refused(guard, client, write, wait)),
        Decision::Banned(until) => Err(crate::refuse::banned(client, until)),
        Decision::Unavailable => match shared.on_failure {
            OnFailure::Open => Ok(()),
            OnFailure::Closed => Err(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "limiter_unavailable",
                "the shared rate limiter (Redis) cannot be reached, and guard.redis.on_failure is \"closed\"; retry shortly",
                Some(1),
            )),
        },
    }
}

/// The 429 for a client over its limit, with when to retry.
pub(crate) fn refused(guard: &Guard, client: &ClientKey, write: bool, wait: Duration) -> Response {
    let retry = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
    let (rate, burst) = match write {
        true => (guard.config.rate_limit.write_per_second, guard.config.rate_limit.write_burst),
        false => (None, None),
    };
    let rate = rate.unwrap_or(guard.config.rate_limit.per_second);
    let burst = burst.unwrap_or(guard.config.rate_limit.burst);
    let kind = if write { "writes" } else { "reads" };
    let message = format!("rate limit exceeded for {client}: {rate} {kind}/s with a burst of {burst}; retry after {retry} s");
    refuse(StatusCode::TOO_MANY_REQUESTS, "rate_limited", &message, Some(retry))
}
