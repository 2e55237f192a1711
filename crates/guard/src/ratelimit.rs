//! Rate limiting: a GCRA token bucket per client (governor), one for reads and one for
//! writes, as a tower layer.
//!
//! A refusal is a 429 with `Retry-After` (whole seconds, rounded up, at least 1) and counts
//! as a strike towards a [`crate::ban`]. The refused path does no I/O and takes no lock
//! beyond governor's sharded map: at 50,000 requests/s it is most of what the server does.

use std::convert::Infallible;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use futures_util::future::{Either, Ready};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use http::{Method, Request, StatusCode};
use tower::{Layer, Service};

use crate::authn::{Identity, Needs, Route, RouteTable};
use crate::permission::Permission;
use crate::client::ClientKey;
use crate::config::RateLimitConfig;
use crate::guard::Guard;
use crate::refuse::refuse;
use crate::config::OnFailure;
use crate::shared::{Decision, SharedLimits};

/// The read and write buckets of every tracked client.
///
/// Memory is bounded by `max_clients` per table. When a table is full, idle clients (whose
/// buckets are full again, so forgetting them changes nothing) are swept at once, at most
/// once a second; if it is still full, clients share the [`ClientKey::Overflow`] bucket
/// until room frees up. That is safe in both directions: forgetting a bucket only ever
/// hands a client a fresh burst it would have had anyway after idling, and the overflow
/// bucket can only limit more, never less. Bans are kept apart and never evicted this way.
pub struct Limiters {
    reads: DefaultKeyedRateLimiter<ClientKey>,
    writes: DefaultKeyedRateLimiter<ClientKey>,
    clock: DefaultClock,
    max_clients: usize,
    /// Whether the read and the write table were full when last counted.
    full: [AtomicBool; 2],
    /// When a full table was last swept, in whole seconds since start.
    last_full_sweep: AtomicU64,
    started: std::time::Instant,
}

/// How many decisions a thread makes between two counts of a table.
pub const CHECK_EVERY: u32 = 256;

thread_local! {
    static CALLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn quota(per_second: u32, burst: u32) -> Quota {
    let nz = |n: u32| NonZeroU32::new(n.max(1)).unwrap_or(NonZeroU32::MIN);
    Quota::per_second(nz(per_second)).allow_burst(nz(burst))
}

impl Limiters {
    pub fn new(c: &RateLimitConfig, max_clients: usize) -> Limiters {
        let writes = (c.write_per_second.unwrap_or(c.per_second), c.write_burst.unwrap_or(c.burst));
        Limiters {
            reads: DefaultKeyedRateLimiter::keyed(quota(c.per_second, c.burst)),
            writes: DefaultKeyedRateLimiter::keyed(quota(writes.0, writes.1)),
            clock: DefaultClock::default(),
            max_clients,
            full: Default::default(),
            last_full_sweep: AtomicU64::new(u64::MAX),
            started: std::time::Instant::now(),
        }
    }

    /// `Err(wait)`: refused; the bucket has room again after `wait`.
    pub fn check(&self, client: &ClientKey, write: bool) -> Result<(), Duration> {
        let (limiter, full) = if write { (&self.writes, &self.full[1]) } else { (&self.reads, &self.full[0]) };
        // Counting a table walks its shards (75 ns, three times the decision itself), so each
        // thread looks only every CHECK_EVERY decisions: a table may overshoot its cap by
        // that many clients per thread, and stays bounded.
        let n = CALLS.with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n
        });
        if n % CHECK_EVERY == 0 {
            // Both tables: a caller's reads and writes may alternate in step with the count.
            self.full[0].store(self.reads.len() >= self.max_clients, Ordering::Relaxed);
            self.full[1].store(self.writes.len() >= self.max_clients, Ordering::Relaxed);
        }
        let key = if !full.load(Ordering::Relaxed) {
            client
        } else {
            let now = self.started.elapsed().as_secs();
            let last = self.last_full_sweep.load(Ordering::Relaxed);
            if last != now && self.last_full_sweep.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                self.forget_idle();
                full.store(limiter.len() >= self.max_clients, Ordering::Relaxed);
            }
            if full.load(Ordering::Relaxed) { &ClientKey::Overflow } else { client }
        };
        limiter.check_key(key).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Clients tracked (reads, writes).
    pub fn tracked(&self) -> (usize, usize) {
        (self.reads.len(), self.writes.len())
    }

    /// Drops the buckets of clients that have been idle long enough to be full again.
    pub fn forget_idle(&self) {
        self.reads.retain_recent();
        self.writes.retain_recent();
    }
}

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
        if let Some(until) = self.guard.banned_until(&client) {
            return Either::Left(Either::Left(futures_util::future::ready(Ok(crate::authn::banned(&client, until)))));
        }
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
                self.guard.strike(client, "rate limited");
                Either::Left(Either::Left(futures_util::future::ready(Ok(refused(&self.guard, &client, write, wait)))))
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
        Decision::Banned(until) => Err(crate::authn::banned(client, until)),
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
