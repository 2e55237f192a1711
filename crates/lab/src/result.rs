//! The result of one load run: the JSON contract of `signet bench load --json` and the table
//! printed at the end of a run.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    /// Report 004 (RHTAS) quotes p95.
    #[serde(default)]
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    #[serde(default)]
    pub mean: f64,
}

impl Latency {
    /// Percentiles in milliseconds of a microsecond histogram.
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return Latency { p50: 0.0, p90: 0.0, p95: 0.0, p99: 0.0, p999: 0.0, max: 0.0, mean: 0.0 };
        }
        Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// One bucket of the latency histogram: `count` responses took more than the previous
/// bucket's `le_ms` and at most this one's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Bucket {
    pub le_ms: f64,
    pub count: u64,
}

/// Buckets per decade of the latency histogram (upper bounds 10^(k/5) µs: 1, 1.58, 2.51, 3.98, 6.31, 10, ...).
pub const BUCKETS_PER_DECADE: f64 = 5.0;

impl Bucket {
    /// Log-spaced buckets of a microsecond histogram, from the first non-empty bucket to the
    /// last (empty ones in between included). The counts add up to `h.len()`.
    pub fn from_histogram(h: &Histogram<u64>) -> Vec<Bucket> {
        let mut by_k: BTreeMap<i32, u64> = BTreeMap::new();
        for v in h.iter_recorded() {
            // The highest value equivalent to the recorded one, so the bucket bound is never below it.
            let us = v.value_iterated_to().max(1) as f64;
            let k = (BUCKETS_PER_DECADE * us.log10()).ceil() as i32;
            *by_k.entry(k).or_insert(0) += v.count_at_value();
        }
        let (Some(&lo), Some(&hi)) = (by_k.keys().next(), by_k.keys().next_back()) else { return Vec::new() };
        (lo..=hi)
            .map(|k| Bucket { le_ms: bucket_bound_ms(k), count: by_k.get(&k).copied().unwrap_or(0) })
            .collect()
    }
}

/// The upper bound of bucket `k` in milliseconds, rounded to the nanosecond.
fn bucket_bound_ms(k: i32) -> f64 {
    let us = 10f64.powf(k as f64 / BUCKETS_PER_DECADE);
    (us * 1000.0).round() / 1_000_000.0
}

/// One second of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Second {
    pub t: u64,
    pub ok: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The fields outside the documented contract (`docs/lab.md`) default when absent, so files
/// written by older versions, or by hand, still load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadResult {
    pub workload: String,
    #[serde(default)]
    pub target: String,
    pub offered_rps: f64,
    pub achieved_rps: f64,
    pub duration_s: f64,
    #[serde(default)]
    pub connections: usize,
    /// Requests scheduled by the arrival process (after the warm-up).
    #[serde(default)]
    pub scheduled: u64,
    /// Seconds of arrivals sent before the measured `duration_s`, and not recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_s: f64,
    /// Responses with a 2xx status.
    #[serde(default)]
    pub ok: u64,
    /// Latency of the 2xx responses, from each request's intended send time.
    pub latency_ms: Latency,
    /// Failures by kind: `status_<code>`, `connect`, `http`, `timeout`.
    pub errors: BTreeMap<String, u64>,
    /// Requests never sent: the backlog was full, or the run's time was up.
    pub dropped: u64,
    #[serde(default)]
    pub per_second: Vec<Second>,
    /// Latency of the 2xx responses in log-spaced buckets ([`Bucket::from_histogram`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<Bucket>,
    /// Transaction workloads (`sign`, `verify`, `mixed`): the same figures per kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_kind: BTreeMap<String, KindResult>,
    /// `--preset soak`: the server process sampled every second, and the growth verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<crate::soak::SoakReport>,
    /// `--disk-probe DIR`: the disk's own `fdatasync` latency during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<crate::disk::DiskReport>,
    /// `--server-pid PID`: the server's own CPU per answered operation over the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<crate::server_cpu::ServerCpu>,
    /// `1.1` or `2` (`--http`).
    #[serde(default = "http_1_1")]
    pub http: String,
    /// HTTP/2 keep-alive: the most concurrent streams per connection (`--streams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<usize>,
    /// Every request opened its own connection (`--new-connection`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub new_connection: bool,
    /// An `https://` target: what the TLS handshake negotiated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::dial::TlsInfo>,
    /// Connections opened by measured requests (all of them with `--new-connection`; in
    /// keep-alive mode, reconnections after errors).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub connects: u64,
    /// Setup time of those connections: TCP connect, TLS handshake, HTTP/2 preface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<Latency>,
    /// The TLS handshake alone, from ClientHello to a usable session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_ms: Option<Latency>,
}

/// The figures of one kind of transaction in a mixed run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KindResult {
    /// Transactions whose every step answered 2xx.
    pub ok: u64,
    /// Failed transactions, of every kind of error.
    pub errors: u64,
    pub achieved_rps: f64,
    /// From each transaction's intended start to its last response.
    pub latency_ms: Latency,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

fn is_false(x: &bool) -> bool {
    !*x
}

fn http_1_1() -> String {
    "1.1".into()
}

/// Why a result file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: cannot read: {why}")]
    Io { path: String, why: std::io::Error },
    #[error("{path}: not JSON: {why}")]
    NotJson { path: String, why: serde_json::Error },
    #[error("{path}: this is a `signet bench verify` result; expected a `signet bench load --json` result (workload, offered_rps, achieved_rps, latency_ms, ...)")]
    VerifyResult { path: String },
    #[error("{path}: not a `signet bench load --json` result: {why}")]
    NotLoadResult { path: String, why: serde_json::Error },
}

impl LoadResult {
    /// Reads a `signet bench load --json` file.
    pub fn read(path: &std::path::Path) -> Result<LoadResult, ReadError> {
        let p = path.display().to_string();
        let text = std::fs::read(path).map_err(|why| ReadError::Io { path: p.clone(), why })?;
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|why| ReadError::NotJson { path: p.clone(), why })?;
        if value.get("signet").is_some() && value.get("workload").is_none() {
            return Err(ReadError::VerifyResult { path: p });
        }
        serde_json::from_value(value).map_err(|why| ReadError::NotLoadResult { path: p, why })
    }

    /// All failed requests, of every kind.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Failed requests as a percentage of the answered ones (ok + errors).
    pub fn error_pct(&self) -> f64 {
        let errors = self.error_count();
        let answered = self.ok + errors;
        if answered == 0 { 0.0 } else { 100.0 * errors as f64 / answered as f64 }
    }

    /// The transport in a few words: `HTTP/2 over TLSv1.3, new connections`.
    pub fn transport(&self) -> String {
        let mut s = format!("HTTP/{}", self.http);
        s.push_str(&self.tls.as_ref().map_or(" plain".to_string(), |t| format!(" over {}", t.version)));
        s.push_str(if self.new_connection { ", new connections" } else { ", keep-alive" });
        s
    }

    /// How the run talked to the target, when that is not plain HTTP/1.1 keep-alive, and
    /// connection setup times when connections were opened during the run.
    fn transport_line(&self) -> Option<String> {
        let mut s = String::new();
        if self.http != "1.1" || self.new_connection || self.tls.is_some() {
            s.push_str(&format!("transport: HTTP/{}", self.http));
            if let Some(tls) = &self.tls {
                s.push_str(&format!(" over {} ({}, ALPN {})", tls.version, tls.cipher, tls.alpn.as_deref().unwrap_or("none")));
            }
            if let Some(n) = self.streams {
                s.push_str(&format!(", up to {n} streams per connection"));
            }
            if self.new_connection {
                s.push_str(", a new connection per request");
            }
            s.push('\n');
        }
        if let Some(c) = &self.connect_ms {
            s.push_str(&format!(
                "connection setup ({} opened): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms\n",
                self.connects, c.p50, c.p99, c.max
            ));
        }
        if let Some(h) = &self.tls_handshake_ms {
            s.push_str(&format!("  of which TLS handshake: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms\n", h.p50, h.p99, h.max));
        }
        (!s.is_empty()).then_some(s)
    }

    /// The short table printed last.
    pub fn table(&self) -> String {
        let errors = self.error_count();
        let l = &self.latency_ms;
        let mut s = String::new();
        s.push_str("workload        offered/s  achieved/s      ok  errors  dropped   p50 ms   p90 ms   p99 ms  p99.9 ms   max ms\n");
        s.push_str(&format!(
            "{:<15} {:>9.0} {:>11.0} {:>7} {:>7} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2}\n",
            self.workload, self.offered_rps, self.achieved_rps, self.ok, errors, self.dropped, l.p50, l.p90, l.p99, l.p999, l.max
        ));
        for (kind, r) in &self.by_kind {
            let l = &r.latency_ms;
            s.push_str(&format!(
                "  {:<13} {:>9} {:>11.0} {:>7} {:>7} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2}\n",
                kind, "", r.achieved_rps, r.ok, r.errors, "", l.p50, l.p90, l.p99, l.p999, l.max
            ));
        }
        for (k, v) in &self.errors {
            s.push_str(&format!("  error {k}: {v}\n"));
        }
        if let Some(line) = self.transport_line() {
            s.push_str(&line);
        }
        if let Some(soak) = &self.soak {
            s.push_str(&soak.summary());
        }
        if let Some(cpu) = &self.server_cpu {
            s.push_str(&cpu.summary());
        }
        if let Some(d) = &self.disk {
            s.push_str(&format!(
                "disk probe ({}): fdatasync p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} samples\n",
                d.dir, d.p50_ms, d.p99_ms, d.max_ms, d.samples
            ));
            if let Some(p99) = d.quiet_worst_p99_ms {
                s.push_str(&format!(
                    "  in the {} seconds without an fdatasync over {} ms (nor in the second before), the worst p99 was {p99:.2} ms\n",
                    d.quiet_seconds,
                    crate::disk::QUIET_MS
                ));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(name: &str, text: &str) -> Result<LoadResult, ReadError> {
        let dir = std::env::temp_dir().join(format!("signet-result-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let r = LoadResult::read(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        r
    }

    #[test]
    fn a_result_with_only_the_documented_fields_loads() {
        let text = r#"{"workload": "log-append", "offered_rps": 2000.0, "achieved_rps": 1990.2, "duration_s": 5.02,
            "latency_ms": {"p50": 10.7, "p90": 16.2, "p99": 20.7, "p999": 23.8, "max": 25.5},
            "errors": {"status_409": 3}, "dropped": 0}"#;
        let r = read_text("old.json", text).unwrap();
        assert_eq!(r.latency_ms.p99, 20.7);
        assert!(r.histogram.is_empty() && r.per_second.is_empty());
        assert_eq!(r.error_count(), 3);
        // Older files were all plain HTTP/1.1 keep-alive.
        assert_eq!((r.http.as_str(), r.new_connection, r.tls.is_none()), ("1.1", false, true));
        assert_eq!(r.transport(), "HTTP/1.1 plain, keep-alive");
    }

    #[test]
    fn other_files_are_refused_with_what_was_expected() {
        let verify = read_text("v.json", r#"{"signet": {"cases": []}, "peer": null}"#).unwrap_err();
        assert!(verify.to_string().ends_with("v.json: this is a `signet bench verify` result; expected a `signet bench load --json` result (workload, offered_rps, achieved_rps, latency_ms, ...)"), "{verify}");
        let partial = read_text("p.json", r#"{"workload": "tsa"}"#).unwrap_err();
        assert!(partial.to_string().contains("p.json: not a `signet bench load --json` result: missing field `offered_rps`"), "{partial}");
        let text = read_text("t.txt", "p99 = 3").unwrap_err();
        assert!(text.to_string().contains("t.txt: not JSON"), "{text}");
    }

    #[test]
    fn the_histogram_round_trips_and_is_omitted_when_empty() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3).unwrap();
        for us in [1, 999, 1000, 1001, 25_000, 25_000] {
            h.record(us).unwrap();
        }
        let buckets = Bucket::from_histogram(&h);
        assert_eq!(buckets.iter().map(|b| b.count).sum::<u64>(), 6);
        assert_eq!(buckets[0], Bucket { le_ms: 0.001, count: 1 });
        // 999 and 1000 µs fall in the bucket up to 1 ms; 1001 µs in the next one.
        let one_ms = buckets.iter().find(|b| b.le_ms == 1.0).unwrap();
        assert_eq!(one_ms.count, 2);
        assert!(Bucket::from_histogram(&Histogram::<u64>::new(3).unwrap()).is_empty());

        let mut r = crate::fixture::result("tsa", 100.0, 5.0, &[]);
        assert!(!serde_json::to_string(&r).unwrap().contains("histogram"));
        r.histogram = buckets;
        let back: LoadResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
