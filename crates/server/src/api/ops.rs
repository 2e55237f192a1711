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
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render())
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
