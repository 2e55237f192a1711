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
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
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
