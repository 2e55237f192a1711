//! Results for the unit tests.

use crate::result::{Latency, LoadResult};

/// A result of `workload` at 1,000/s offered over 10 s, with the given throughput, p99 and errors.
pub fn result(workload: &str, rps: f64, p99: f64, errors: &[(&str, u64)]) -> LoadResult {
    LoadResult {
        workload: workload.into(),
        target: "http://127.0.0.1:1".into(),
        offered_rps: 1000.0,
        achieved_rps: rps,
        duration_s: 10.0,
        connections: 8,
        scheduled: 10_000,
        warmup_s: 0.0,
        ok: (rps * 10.0) as u64,
        latency_ms: Latency { p50: p99 / 2.0, p90: p99 * 0.8, p95: p99 * 0.9, p99, p999: p99 * 1.5, max: p99 * 2.0, mean: p99 / 2.0 },
        errors: errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        dropped: 0,
        per_second: Vec::new(),
        histogram: Vec::new(),
        by_kind: Default::default(),
        soak: None,
        disk: None,
        server_cpu: None,
        http: "1.1".into(),
        streams: None,
        new_connection: false,
        tls: None,
        connects: 0,
        connect_ms: None,
        tls_handshake_ms: None,
    }
}
