//! Operational endpoints: liveness and readiness.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::state::AppState;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Ready once the logs are open and have a durable checkpoint, which `AppState` guarantees.
pub async fn readyz(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "status": "ready",
        "rekorV1TreeSize": state.rekor_v1.log.head().checkpoint.size,
        "rekorV2TreeSize": state.rekor_v2.head().checkpoint.size,
    }))
}
