//! Request counters, served at `/metrics` in the Prometheus text format.
//!
//! A tower layer counts every response by route template and status, and every refusal
//! (a 4xx) by route and reason. Handlers name the reason through [`Refusal`], a response
//! extension that `ApiError` sets, so the counting stays out of the handlers.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use parking_lot::RwLock;

/// Why a request was refused, in a few stable words (`token_expired`, `body_too_large`, …):
/// one type for the guard's refusals and the handlers', which the audit log records too.
pub use signet_guard::Refusal;

/// Status codes are counted in a fixed table per route: no allocation or lock on the hot path
/// once a route has been seen.
struct RouteCounters {
    by_status: Box<[AtomicU64]>,
    refusals: RwLock<HashMap<&'static str, AtomicU64>>,
}

impl RouteCounters {
    fn new() -> Self {
        RouteCounters { by_status: (0..600).map(|_| AtomicU64::new(0)).collect(), refusals: RwLock::new(HashMap::new()) }
    }
}

#[derive(Default)]
pub struct Metrics {
    routes: RwLock<HashMap<String, Arc<RouteCounters>>>,
    /// Requests whose handling panicked (answered 500 by [`crate::panic`]).
    pub panics: AtomicU64,
    /// The connection layer's counters.
    pub conn: Arc<crate::conn::ConnStats>,
}

impl Metrics {
    /// Counters that also report the connection layer's `conn`.
    pub fn with_conn(conn: Arc<crate::conn::ConnStats>) -> Metrics {
        Metrics { conn, ..Default::default() }
    }

    fn route(&self, path: &str) -> Arc<RouteCounters> {
        if let Some(c) = self.routes.read().get(path) {
            return c.clone();
        }
        self.routes.write().entry(path.to_string()).or_insert_with(|| Arc::new(RouteCounters::new())).clone()
    }

    pub fn record(&self, path: &str, status: u16, refusal: Option<Refusal>) {
        let route = self.route(path);
        if let Some(c) = route.by_status.get(status as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(Refusal(reason)) = refusal {
            if let Some(c) = route.refusals.read().get(reason) {
                c.fetch_add(1, Ordering::Relaxed);
                return;
            }
            route.refusals.write().entry(reason).or_insert_with(|| AtomicU64::new(0)).fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The Prometheus text exposition, sorted so that scrapes diff cleanly.
    pub fn render(&self) -> String {
        let routes = self.routes.read();
        let mut names: Vec<&String> = routes.keys().collect();
        names.sort();
        let mut out = String::new();
        out.push_str("# HELP signet_http_responses_total HTTP responses by route and status.\n");
        out.push_str("# TYPE signet_http_responses_total counter\n");
        for name in &names {
            for (status, c) in routes[*name].by_status.iter().enumerate() {
                let n = c.load(Ordering::Relaxed);
                if n > 0 {
                    let _ = writeln!(out, "signet_http_responses_total{{route=\"{name}\",status=\"{status}\"}} {n}");
                }
            }
        }
        out.push_str("# HELP signet_refused_total Requests refused, by route and reason.\n");
        out.push_str("# TYPE signet_refused_total counter\n");
        for name in &names {
            let refusals = routes[*name].refusals.read();
            let mut reasons: Vec<(&&str, &AtomicU64)> = refusals.iter().collect();
            reasons.sort_by_key(|(r, _)| **r);
            for (reason, c) in reasons {
                let _ = writeln!(out, "signet_refused_total{{route=\"{name}\",reason=\"{reason}\"}} {}", c.load(Ordering::Relaxed));
            }
        }
        let conn = &self.conn;
        out.push_str("# HELP signet_connections_open Open client connections.\n# TYPE signet_connections_open gauge\n");
        let _ = writeln!(out, "signet_connections_open {}", conn.open.load(Ordering::Relaxed));
        out.push_str("# HELP signet_connections_closed_total Connections closed by signet, by reason.\n");
        out.push_str("# TYPE signet_connections_closed_total counter\n");
        let _ = writeln!(out, "signet_connections_closed_total{{reason=\"max_connections\"}} {}", conn.refused.load(Ordering::Relaxed));
        let _ = writeln!(out, "signet_connections_closed_total{{reason=\"idle\"}} {}", conn.idle_closed.load(Ordering::Relaxed));
        out.push_str("# HELP signet_log_lines_dropped_total Log lines that could not be written (stderr or stdout failed).\n");
        out.push_str("# TYPE signet_log_lines_dropped_total counter\n");
        let _ = writeln!(out, "signet_log_lines_dropped_total {}", crate::logging::dropped());
        out.push_str("# HELP signet_signatures_total Signatures made with signet's keys (logs, CA, TSA).\n");
        out.push_str("# TYPE signet_signatures_total counter\n");
        let _ = writeln!(out, "signet_signatures_total {}", signet_core::keys::signatures_made());
        out.push_str("# HELP signet_sqlite_memory_bytes Bytes SQLite has allocated in this process (page caches, statements).\n");
        out.push_str("# TYPE signet_sqlite_memory_bytes gauge\n");
        let _ = writeln!(out, "signet_sqlite_memory_bytes {}", signet_log::storage::sqlite_memory_used());
        out.push_str("# HELP signet_panics_total Panics caught: in request handling, or in a log's sequencer (whose batch then failed).\n");
        out.push_str("# TYPE signet_panics_total counter\n");
        let _ = writeln!(out, "signet_panics_total{{where=\"request\"}} {}", self.panics.load(Ordering::Relaxed));
        let _ = writeln!(out, "signet_panics_total{{where=\"sequencer\"}} {}", signet_log::sequencer::panics());
        out
    }
}

/// The counting layer (`axum::middleware::from_fn_with_state`).
pub async fn count(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    // Unmatched paths share one label, so a scanner cannot grow the table without bound.
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str()).to_string();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let refusal = response.extensions().get::<Refusal>().copied().or_else(|| {
        response.status().is_client_error().then_some(Refusal("client_error"))
    });
    metrics.record(&route, status, refusal);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_statuses_and_reasons() {
        let m = Metrics::default();
        m.record("/api/v2/signingCert", 200, None);
        m.record("/api/v2/signingCert", 401, Some(Refusal("token_expired")));
        m.record("/api/v2/signingCert", 401, Some(Refusal("token_expired")));
        m.record("/api/v1/log", 200, None);
        let text = m.render();
        assert!(text.contains("signet_http_responses_total{route=\"/api/v2/signingCert\",status=\"401\"} 2\n"), "{text}");
        assert!(text.contains("signet_refused_total{route=\"/api/v2/signingCert\",reason=\"token_expired\"} 2\n"), "{text}");
        assert!(text.find("/api/v1/log").unwrap() < text.find("/api/v2/signingCert").unwrap(), "sorted by route");
    }
}
