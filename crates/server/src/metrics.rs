//! Request counters, served at `/metrics` in the Prometheus text format.
//!
//! A tower layer counts every response by route template and status, and every refusal
//! (a 4xx) by route and reason. Handlers name the reason through [`Refusal`], a response
//! extension that `ApiError` sets, so the counting stays out of the handlers.
//!
//! The same layer keeps OpenTelemetry's HTTP server metrics, named as OpenTelemetry's
//! Prometheus exporter names them: `http_server_request_duration_seconds` (by route template,
//! method and status, on OpenTelemetry's bucket boundaries) and `http_server_active_requests`
//! (by method). Labels are bounded: a route template (unmatched paths have none), one of the
//! standard methods or `_OTHER`, a status code, `error_type` (the status, on a 5xx, as the
//! semantic conventions ask) and `url_scheme` (every listener of an instance has the same).

mod process;

use std::collections::HashMap;

/// Keys are the server's own (route templates, methods, statuses), so no request picks them:
/// SipHash's resistance to chosen keys buys nothing here, and it was a hash per request.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::response::Response;
use parking_lot::RwLock;
use signet_core::histogram::{Histogram, OTEL_HTTP_SECONDS};

/// Why a request was refused, in a few stable words (`token_expired`, `body_too_large`, …):
/// one type for the guard's refusals and the handlers', which the audit log records too.
pub use signet_guard::Refusal;

/// Status codes are counted in a fixed table per route: no allocation or lock on the hot path
/// once a route has been seen.
struct RouteCounters {
    by_status: Box<[AtomicU64]>,
    refusals: RwLock<FastMap<&'static str, AtomicU64>>,
    /// Request durations by (method, status), made on first use.
    durations: RwLock<FastMap<(usize, u16), Arc<Histogram>>>,
}

impl RouteCounters {
    fn new() -> Self {
        RouteCounters {
            by_status: (0..600).map(|_| AtomicU64::new(0)).collect(),
            refusals: Default::default(),
            durations: Default::default(),
        }
    }

    fn answered(&self, method: usize, status: u16, refusal: Option<Refusal>, seconds: f64) {
        Metrics::count_on(self, status, refusal);
        if let Some(h) = self.durations.read().get(&(method, status)) {
            return h.observe(seconds);
        }
        self.duration(method, status).observe(seconds);
    }

    fn duration(&self, method: usize, status: u16) -> Arc<Histogram> {
        if let Some(h) = self.durations.read().get(&(method, status)) {
            return h.clone();
        }
        self.durations.write().entry((method, status)).or_insert_with(|| Arc::new(Histogram::new(OTEL_HTTP_SECONDS))).clone()
    }
}

/// OpenTelemetry's `http.request.method` values: the standard methods, then `_OTHER`.
const METHODS: [&str; 10] = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "_OTHER"];

fn method_index(method: &axum::http::Method) -> usize {
    METHODS[..9].iter().position(|m| *m == method.as_str()).unwrap_or(9)
}

#[derive(Default)]
pub struct Metrics {
    routes: RwLock<FastMap<String, Arc<RouteCounters>>>,
    /// Requests being handled now, by method ([`METHODS`]).
    active: [AtomicI64; 10],
    /// Requests whose handling panicked (answered 500 by [`crate::panic`]).
    pub panics: AtomicU64,
    /// The connection layer's counters.
    pub conn: Arc<crate::conn::ConnStats>,
    /// `url.scheme`: `http` or `https` (empty: not known, and not labelled).
    url_scheme: &'static str,
}

impl Metrics {
    /// Counters that also report the connection layer's `conn`, for an instance whose
    /// listeners speak `url_scheme`.
    pub fn with_conn(conn: Arc<crate::conn::ConnStats>, url_scheme: &'static str) -> Metrics {
        Metrics { conn, url_scheme, ..Default::default() }
    }

    fn route(&self, path: &str) -> Arc<RouteCounters> {
        if let Some(c) = self.routes.read().get(path) {
            return c.clone();
        }
        self.routes.write().entry(path.to_string()).or_insert_with(|| Arc::new(RouteCounters::new())).clone()
    }

    pub fn record(&self, path: &str, status: u16, refusal: Option<Refusal>) {
        Self::count_on(&self.route(path), status, refusal);
    }

    fn count_on(route: &RouteCounters, status: u16, refusal: Option<Refusal>) {
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

    /// One request's duration, under OpenTelemetry's names; `route` is None for a path
    /// that matched no route.
    pub fn observe(&self, route: Option<&str>, method: usize, status: u16, seconds: f64) {
        self.route(route.unwrap_or(UNMATCHED)).duration(method, status).observe(seconds);
    }

    /// One answered request: its status, refusal and duration, with one lookup of its route.
    /// The counters are used under the read locks, not cloned out: an `Arc` clone and drop
    /// per request is two more writes to a cache line that every worker shares (issue 40).
    fn answered(&self, route: Option<&str>, method: usize, status: u16, refusal: Option<Refusal>, seconds: f64) {
        let path = route.unwrap_or(UNMATCHED);
        if let Some(counters) = self.routes.read().get(path) {
            return counters.answered(method, status, refusal, seconds);
        }
        self.route(path).answered(method, status, refusal, seconds);
    }

    /// The Prometheus text exposition, sorted so that scrapes diff cleanly.
    pub fn render(&self) -> String {
        let routes = self.routes.read();
        let mut names: Vec<&String> = routes.keys().collect();
        names.sort();
        let mut out = String::new();
        out.push_str("# HELP http_server_request_duration_seconds Duration of HTTP server requests.\n");
        out.push_str("# TYPE http_server_request_duration_seconds histogram\n");
        for name in &names {
            let durations = routes[*name].durations.read();
            let mut series: Vec<_> = durations.iter().collect();
            series.sort_by_key(|((m, s), _)| (METHODS[*m], *s));
            for ((method, status), h) in series {
                let route = if name.as_str() == UNMATCHED { String::new() } else { format!(",http_route=\"{name}\"") };
                let mut labels = format!("http_request_method=\"{}\"{route},http_response_status_code=\"{status}\"", METHODS[*method]);
                if *status >= 500 {
                    let _ = write!(labels, ",error_type=\"{status}\"");
                }
                if !self.url_scheme.is_empty() {
                    let _ = write!(labels, ",url_scheme=\"{}\"", self.url_scheme);
                }
                h.render(&mut out, "http_server_request_duration_seconds", &labels);
            }
        }
        out.push_str("# HELP http_server_active_requests Number of active HTTP server requests.\n");
        out.push_str("# TYPE http_server_active_requests gauge\n");
        for (i, method) in METHODS.iter().enumerate() {
            let n = self.active[i].load(Ordering::Relaxed);
            if n != 0 || i < 2 {
                let _ = writeln!(out, "http_server_active_requests{{http_request_method=\"{method}\"}} {n}");
            }
        }
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
        out.push_str("# HELP signet_tls_handshakes_total TLS handshakes, by outcome: the version agreed, or failed, or timed out.\n");
        out.push_str("# TYPE signet_tls_handshakes_total counter\n");
        for (outcome, c) in crate::conn::TLS_OUTCOMES.iter().zip(&conn.tls_handshakes) {
            let _ = writeln!(out, "signet_tls_handshakes_total{{outcome=\"{outcome}\"}} {}", c.load(Ordering::Relaxed));
        }
        out.push_str("# HELP signet_tls_handshake_duration_seconds How long completed TLS handshakes took.\n");
        out.push_str("# TYPE signet_tls_handshake_duration_seconds histogram\n");
        conn.tls_handshake_seconds.render(&mut out, "signet_tls_handshake_duration_seconds", "");
        let (installed, invalid) = signet_tls::reloader::reloads();
        out.push_str("# HELP signet_tls_certificate_reloads_total Changed TLS files read: installed, or refused by the check (the previous pair kept serving).\n");
        out.push_str("# TYPE signet_tls_certificate_reloads_total counter\n");
        let _ = writeln!(out, "signet_tls_certificate_reloads_total{{outcome=\"installed\"}} {installed}");
        let _ = writeln!(out, "signet_tls_certificate_reloads_total{{outcome=\"invalid\"}} {invalid}");
        if let Some(lag) = signet_tls::reloader::last_reload_lag_seconds() {
            out.push_str("# HELP signet_tls_certificate_reload_lag_seconds From the newest TLS file's modification to the install of the last reload.\n");
            out.push_str("# TYPE signet_tls_certificate_reload_lag_seconds gauge\n");
            let _ = writeln!(out, "signet_tls_certificate_reload_lag_seconds {lag:.6}");
        }
        render_tls_sources(&mut out, conn);
        out.push_str("# HELP signet_log_lines_dropped_total Log lines that could not be written (stderr or stdout failed).\n");
        out.push_str("# TYPE signet_log_lines_dropped_total counter\n");
        let _ = writeln!(out, "signet_log_lines_dropped_total {}", crate::logging::dropped());
        out.push_str("# HELP signet_signatures_total Signatures made with signet's keys (logs, CA, TSA).\n");
        out.push_str("# TYPE signet_signatures_total counter\n");
        let _ = writeln!(out, "signet_signatures_total {}", signet_keys::signatures_made());
        out.push_str("# HELP signet_sqlite_memory_bytes Bytes SQLite has allocated in this process (page caches, statements).\n");
        out.push_str("# TYPE signet_sqlite_memory_bytes gauge\n");
        let _ = writeln!(out, "signet_sqlite_memory_bytes {}", signet_log::storage::sqlite_memory_used());
        out.push_str("# HELP signet_panics_total Panics caught: in request handling, or in a log's sequencer (whose batch then failed).\n");
        out.push_str("# TYPE signet_panics_total counter\n");
        let _ = writeln!(out, "signet_panics_total{{where=\"request\"}} {}", self.panics.load(Ordering::Relaxed));
        let _ = writeln!(out, "signet_panics_total{{where=\"sequencer\"}} {}", signet_log::sequencer::panics());
        crate::otel::render(&mut out);
        process::render(&mut out);
        out
    }
}

/// The certificate sources' counters (report 000's list), the served certificate's time to
/// expiry, and which backend, library version and source serve TLS.
fn render_tls_sources(out: &mut String, conn: &crate::conn::ConnStats) {
    let counts = signet_tls::source::counts();
    out.push_str("# HELP signet_tls_certificate_loads_total Reads of the TLS certificate and key files: timer ticks and inotify wake-ups (file, watch), handshakes (reload), cache misses (cached).\n");
    out.push_str("# TYPE signet_tls_certificate_loads_total counter\n");
    let _ = writeln!(out, "signet_tls_certificate_loads_total {}", counts.loads);
    out.push_str("# HELP signet_tls_certificate_cache_lookups_total Handshakes of the cached source: served from its copy (hit), or re-reading the files (miss).\n");
    out.push_str("# TYPE signet_tls_certificate_cache_lookups_total counter\n");
    let _ = writeln!(out, "signet_tls_certificate_cache_lookups_total{{result=\"hit\"}} {}", counts.cache_hits);
    let _ = writeln!(out, "signet_tls_certificate_cache_lookups_total{{result=\"miss\"}} {}", counts.cache_misses);
    out.push_str("# HELP signet_tls_certificate_validation_errors_total Reads of the TLS files that could not be used (unreadable, not PEM, a key that does not match); the last good pair kept serving.\n");
    out.push_str("# TYPE signet_tls_certificate_validation_errors_total counter\n");
    let _ = writeln!(out, "signet_tls_certificate_validation_errors_total {}", counts.validation_errors);
    // Once a handshake has used it: the served certificate may change at any handshake.
    let not_after = conn.tls_not_after.load(Ordering::Relaxed);
    if not_after > 0 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        out.push_str("# HELP signet_tls_certificate_expiry_seconds Seconds until the served TLS certificate expires (negative once expired).\n");
        out.push_str("# TYPE signet_tls_certificate_expiry_seconds gauge\n");
        let _ = writeln!(out, "signet_tls_certificate_expiry_seconds {}", not_after - now);
    }
    if let Some((backend, source)) = conn.tls_info {
        out.push_str("# HELP signet_tls_info The TLS backend, its library version and the certificate source (always 1).\n");
        out.push_str("# TYPE signet_tls_info gauge\n");
        let version = backend.library_version().replace('\\', "\\\\").replace('"', "\\\"");
        let _ = writeln!(out, "signet_tls_info{{backend=\"{backend}\",version=\"{version}\",source=\"{source}\"}} 1");
    }
}

/// The route label of every path that matched no route: one label, so that a scanner cannot
/// grow the table without bound.
const UNMATCHED: &str = "unmatched";

/// One request being counted, from the moment a layer sees it ([`crate::panic`], which also
/// turns panics into answers, so that a panic's 500 is counted). Counted as active until
/// answered or dropped (a client that hangs up drops the request's future).
pub struct Counting {
    metrics: Arc<Metrics>,
    start: Instant,
    method: usize,
    route: Option<MatchedPath>,
}

impl Counting {
    pub fn start(metrics: Arc<Metrics>, request: &Request) -> Counting {
        let method = method_index(request.method());
        if let Some(active) = metrics.active.get(method) {
            active.fetch_add(1, Ordering::Relaxed);
        }
        let route = request.extensions().get::<MatchedPath>().cloned();
        Counting { metrics, start: Instant::now(), method, route }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Counts the answer: its status, refusal and duration.
    pub fn answered(self, response: Response) -> Response {
        let status = response.status().as_u16();
        let refusal = response.extensions().get::<Refusal>().copied().or_else(|| {
            response.status().is_client_error().then_some(Refusal("client_error"))
        });
        let route = self.route.as_ref().map(|p| p.as_str());
        self.metrics.answered(route, self.method, status, refusal, self.start.elapsed().as_secs_f64());
        response
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        if let Some(active) = self.metrics.active.get(self.method) {
            active.fetch_sub(1, Ordering::Relaxed);
        }
    }
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

    #[test]
    fn tls_info_and_time_to_expiry() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let conn = crate::conn::ConnStats { tls_info: Some((signet_tls::Backend::Openssl, signet_tls::SourceKind::Cached)), ..Default::default() };
        conn.tls_not_after.store(now + 3600, Ordering::Relaxed);
        let text = Metrics::with_conn(Arc::new(conn), "https").render();
        let info = text.lines().find(|l| l.starts_with("signet_tls_info{")).unwrap_or_else(|| panic!("{text}"));
        assert!(info.starts_with("signet_tls_info{backend=\"openssl\",version=\"OpenSSL ") && info.ends_with("\",source=\"cached\"} 1"), "{info}");
        let left: i64 = text.lines().find_map(|l| l.strip_prefix("signet_tls_certificate_expiry_seconds ")).unwrap().parse().unwrap();
        assert!((3590..=3600).contains(&left), "{left}");
        for series in ["signet_tls_certificate_loads_total ", "signet_tls_certificate_cache_lookups_total{result=\"miss\"} ", "signet_tls_certificate_validation_errors_total "] {
            assert!(text.contains(series), "{series}: {text}");
        }
        // Plain HTTP: no info, no expiry.
        let text = Metrics::default().render();
        assert!(!text.contains("signet_tls_info{") && !text.contains("signet_tls_certificate_expiry_seconds "), "{text}");
    }

    #[test]
    fn durations_follow_opentelemetry_names_and_buckets() {
        let m = Metrics::default();
        m.observe(Some("/api/v1/log"), method_index(&axum::http::Method::GET), 200, 0.003);
        m.observe(Some("/api/v1/log"), method_index(&axum::http::Method::GET), 200, 0.2);
        m.observe(None, method_index(&axum::http::Method::from_bytes(b"BREW").unwrap()), 404, 0.001);
        let text = m.render();
        let series = "http_request_method=\"GET\",http_route=\"/api/v1/log\",http_response_status_code=\"200\"";
        assert!(text.contains(&format!("http_server_request_duration_seconds_bucket{{{series},le=\"0.005\"}} 1\n")), "{text}");
        assert!(text.contains(&format!("http_server_request_duration_seconds_bucket{{{series},le=\"0.25\"}} 2\n")), "{text}");
        assert!(text.contains(&format!("http_server_request_duration_seconds_count{{{series}}} 2\n")), "{text}");
        // An unmatched path has no route label; an unknown method is _OTHER.
        assert!(text.contains("http_server_request_duration_seconds_count{http_request_method=\"_OTHER\",http_response_status_code=\"404\"} 1\n"), "{text}");
        assert!(text.contains("http_server_active_requests{http_request_method=\"GET\"} 0\n"), "{text}");
    }

    #[test]
    fn server_errors_carry_error_type_and_every_series_the_scheme() {
        let m = Metrics::with_conn(Default::default(), "https");
        m.observe(Some("/api/v1/log"), method_index(&axum::http::Method::GET), 200, 0.003);
        m.observe(Some("/api/v1/log"), method_index(&axum::http::Method::GET), 503, 0.003);
        let text = m.render();
        let ok = "http_request_method=\"GET\",http_route=\"/api/v1/log\",http_response_status_code=\"200\",url_scheme=\"https\"";
        let failed = "http_request_method=\"GET\",http_route=\"/api/v1/log\",http_response_status_code=\"503\",error_type=\"503\",url_scheme=\"https\"";
        for series in [ok, failed] {
            assert!(text.contains(&format!("http_server_request_duration_seconds_count{{{series}}} 1\n")), "{series}: {text}");
        }
        assert_eq!(text.matches("error_type=").count(), text.matches("status_code=\"503\"").count(), "only the 5xx series: {text}");
    }
}
