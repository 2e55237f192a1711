//! Liveness and readiness: `GET /healthz` is 200 while the process answers, `GET /readyz` only
//! while this instance can take writes; and the router that answers while the instance is still
//! opening.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::error::ApiError;
use crate::lifecycle::Phase;
use crate::state::AppState;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// 200 once storage is open, keys are loaded and every log's sequencer runs; 503 while
/// starting, once shutdown has begun, if a sequencer has stopped (or a log was frozen by a
/// rotation whose next shard this instance does not serve yet), while the logs refuse
/// appends (an unrestored backup), or while the sequencer has stepped down for want of a
/// lease renewal (PostgreSQL).
pub async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, Json<Value>) {
    match readiness(&state) {
        Ok(ready) => (StatusCode::OK, Json(ready)),
        Err(unready) => (StatusCode::SERVICE_UNAVAILABLE, Json(unready)),
    }
}

/// What `/readyz` answers: `Ok` with the instance's role and tree sizes, or `Err` saying why
/// not. `/metrics` exports the same as `signet_ready`, so that an alert needs no probe.
pub(crate) fn readiness(state: &AppState) -> Result<Value, Value> {
    let unready = |status: &str| Err(json!({"status": status}));
    match state.lifecycle.phase() {
        Phase::Starting => return unready("starting"),
        Phase::ShuttingDown => return unready("shutting down"),
        Phase::Ready => {}
    }
    let (rekor_v1, rekor_v2, ct) = (state.rekor_v1.log(), state.rekor_v2.log(), state.ct.log());
    let logs = [("rekor_v1", &rekor_v1), ("rekor_v2", &rekor_v2), ("ct", &ct)];
    if let Some((name, _)) = logs.iter().find(|(_, log)| !log.is_running()) {
        // A log frozen by another instance's rotation, whose successor this one cannot serve
        // yet: say why (a seal key to copy, a sequencer that has not made it).
        let why = match *name {
            "rekor_v1" => state.rekor_v1.behind(),
            "rekor_v2" => state.rekor_v2.behind.lock().clone(),
            _ => state.ct.behind.lock().clone(),
        };
        return Err(json!({"status": "sequencer stopped", "log": name, "why": why}));
    }
    if let Some(why) = logs.iter().find_map(|(_, log)| log.appends_refused()) {
        return Err(json!({"status": "appends refused", "why": why}));
    }
    if crate::lease::stepped_down() {
        return unready("stepped down: the sequencer lease could not be renewed for its lifetime (is PostgreSQL reachable?)");
    }
    Ok(json!({
        "status": "ready",
        // On shared PostgreSQL: whether this instance sequences the logs or follows them.
        "role": match rekor_v1.role() {
            signet_log::Role::Sequencer => "sequencer",
            signet_log::Role::Follower => "follower",
        },
        "rekorV1TreeSize": rekor_v1.head().checkpoint.size,
        "rekorV2TreeSize": rekor_v2.head().checkpoint.size,
    }))
}

/// What answers before the app is open: liveness yes, readiness no, everything else 503.
pub fn starting_router() -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(|| async { (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "starting"}))) }))
        .fallback(|| async {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "signet is starting (opening storage and keys); retry shortly")
                .with_header("retry-after", "1")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use tower::ServiceExt;

    /// Issue 17 item 16: before the app is open, liveness answers and readiness does not.
    #[tokio::test]
    async fn while_starting_only_liveness_answers() {
        let status = |path: &'static str| async move {
            let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
            starting_router().oneshot(request).await.unwrap().status()
        };
        assert_eq!(status("/healthz").await, StatusCode::OK);
        assert_eq!(status("/readyz").await, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status("/api/v1/log").await, StatusCode::SERVICE_UNAVAILABLE);
    }
}
