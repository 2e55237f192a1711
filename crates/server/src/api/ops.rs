//! Operational endpoints: liveness, readiness and metrics; the dev OIDC issuer's documents.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::state::AppState;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /metrics`: Prometheus text format (see [`crate::metrics`]).
pub async fn metrics(State(state): State<Arc<AppState>>) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let mut text = state.metrics.render();
    tile_caches(&state, &mut text);
    if let Some(shared) = &state.guard.shared {
        use std::fmt::Write;
        let (checks, failures) = shared.counts();
        text.push_str("# HELP signet_guard_redis_checks_total Rate-limit checks sent to Redis ([guard.redis]).\n");
        text.push_str("# TYPE signet_guard_redis_checks_total counter\n");
        let _ = writeln!(text, "signet_guard_redis_checks_total {checks}");
        text.push_str("# HELP signet_guard_redis_failures_total Checks Redis did not answer; guard.redis.on_failure decided them.\n");
        text.push_str("# TYPE signet_guard_redis_failures_total counter\n");
        let _ = writeln!(text, "signet_guard_redis_failures_total {failures}");
    }
    guard_and_audit(&state, &mut text);
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// The guard's bans, and the audit log's queue, writes and losses.
fn guard_and_audit(state: &AppState, text: &mut String) {
    use std::fmt::Write;
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    };
    metric("signet_guard_active_bans", "gauge", "Clients banned on this instance now (its own bans and the store's).", state.guard.active_bans().to_string());
    if let Some(audit) = &state.audit {
        let s = audit.stats();
        metric("signet_audit_queue_depth", "gauge", "Audit records waiting for the writer.", s.queued.to_string());
        metric("signet_audit_records_written_total", "counter", "Audit records written since start.", s.written.to_string());
        metric("signet_audit_records_lost_total", "counter", "Audit records lost since start (a full queue or a failed write; the chain records the count).", s.lost.to_string());
        metric("signet_audit_write_failures_total", "counter", "Batches of audit records whose write failed.", s.failed_writes.to_string());
        metric("signet_audit_refused_total", "counter", "Answers replaced with 503 because their audit record could not be made durable (mode = closed).", s.refused.to_string());
        metric("signet_audit_unanchored_records", "gauge", "Audit records written that no anchor in the Rekor v2 log covers yet.", s.unanchored.to_string());
        if s.anchored_at_ms > 0 {
            let age = signet_guard::audit::chain::now_ms().saturating_sub(s.anchored_at_ms) as f64 / 1000.0;
            metric("signet_audit_last_anchor_age_seconds", "gauge", "Seconds since the audit chain was last anchored (absent until the first anchor since start).", format!("{age:.3}"));
        }
    }
}

/// Each log's cache of full tiles (bounded by `log.tile_cache_mb`): what it holds and how
/// often proofs found what they needed there.
fn tile_caches(state: &AppState, text: &mut String) {
    use std::fmt::Write;
    let shards = state.rekor_v1.current();
    let mut logs: Vec<(String, signet_log::Log)> = shards.logs().map(|(tree, log)| (format!("rekor_v1/{tree}"), log)).collect();
    logs.push(("rekor_v2".into(), state.rekor_v2.clone()));
    logs.push(("ct".into(), state.ca.ct.log().clone()));
    let stats: Vec<(String, (usize, u64, u64))> = logs.into_iter().map(|(name, log)| (name, log.tile_cache_stats())).collect();
    text.push_str("# HELP signet_log_tile_cache_bytes Bytes of full tiles a log keeps in memory for proofs (at most log.tile_cache_mb each).\n");
    text.push_str("# TYPE signet_log_tile_cache_bytes gauge\n");
    for (name, (tiles, _, _)) in &stats {
        let _ = writeln!(text, "signet_log_tile_cache_bytes{{log=\"{name}\"}} {}", tiles * signet_log::tilecache::TILE_BYTES);
    }
    text.push_str("# HELP signet_log_tile_cache_lookups_total Tile lookups by proofs, by whether the cache held the tile.\n");
    text.push_str("# TYPE signet_log_tile_cache_lookups_total counter\n");
    for (name, (_, hits, misses)) in &stats {
        let _ = writeln!(text, "signet_log_tile_cache_lookups_total{{log=\"{name}\",result=\"hit\"}} {hits}");
        let _ = writeln!(text, "signet_log_tile_cache_lookups_total{{log=\"{name}\",result=\"miss\"}} {misses}");
    }
}

/// `GET /oidc/.well-known/openid-configuration` (dev only).
pub async fn oidc_discovery(State(state): State<Arc<AppState>>) -> Result<Json<Value>, super::error::ApiError> {
    let dev = state.dev_issuer.as_ref().ok_or_else(|| super::error::ApiError::not_found("no dev OIDC issuer outside --dev"))?;
    Ok(Json(dev.discovery()))
}

/// `GET /oidc/jwks` (dev only).
pub async fn oidc_jwks(State(state): State<Arc<AppState>>) -> Result<Json<Value>, super::error::ApiError> {
    let dev = state.dev_issuer.as_ref().ok_or_else(|| super::error::ApiError::not_found("no dev OIDC issuer outside --dev"))?;
    Ok(Json(dev.jwks().clone()))
}
