//! The result of one load run: the JSON contract of `signet bench load --json` and the table
//! printed at the end of a run.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// Percentiles in milliseconds of a microsecond histogram.
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return Latency { p50: 0.0, p90: 0.0, p99: 0.0, p999: 0.0, max: 0.0, mean: 0.0 };
        }
        Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// One second of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Second {
    pub t: u64,
    pub ok: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadResult {
    pub workload: String,
    pub target: String,
    pub offered_rps: f64,
    pub achieved_rps: f64,
    pub duration_s: f64,
    pub connections: usize,
    /// Requests scheduled by the arrival process.
    pub scheduled: u64,
    /// Responses with a 2xx status.
    pub ok: u64,
    /// Latency of the 2xx responses, from each request's intended send time.
    pub latency_ms: Latency,
    /// Failures by kind: `status_<code>`, `connect`, `http`, `timeout`.
    pub errors: BTreeMap<String, u64>,
    /// Requests never sent: the backlog was full, or the run's time was up.
    pub dropped: u64,
    pub per_second: Vec<Second>,
}

impl LoadResult {
    /// The short table printed last.
    pub fn table(&self) -> String {
        let errors: u64 = self.errors.values().sum();
        let l = &self.latency_ms;
        let mut s = String::new();
        s.push_str("workload        offered/s  achieved/s      ok  errors  dropped   p50 ms   p90 ms   p99 ms  p99.9 ms   max ms\n");
        s.push_str(&format!(
            "{:<15} {:>9.0} {:>11.0} {:>7} {:>7} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2}\n",
            self.workload, self.offered_rps, self.achieved_rps, self.ok, errors, self.dropped, l.p50, l.p90, l.p99, l.p999, l.max
        ));
        for (k, v) in &self.errors {
            s.push_str(&format!("  error {k}: {v}\n"));
        }
        s
    }
}
