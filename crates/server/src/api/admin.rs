//! `/api/admin/…`: operator views. The router puts these behind their `admin.*` permission
//! always (`signet_guard::authn::Scope::Admin`); handlers can assume an allowed caller.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use crate::state::AppState;

/// `GET /api/admin/tokens`: names, ids, roles, creation, expiry and revocation of every API
/// token; never a token or its hash.
pub async fn tokens(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"tokens": state.guard.tokens()}))
}

/// `GET /api/admin/roles`: the role table in force, each role with the permissions it grants.
pub async fn roles(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(roles_json(&state.guard.roles()))
}

/// The role table as `signet admin roles --json` and `GET /api/admin/roles` show it.
pub fn roles_json(roles: &signet_guard::Roles) -> Value {
    let table: Vec<Value> = roles
        .table()
        .into_iter()
        .map(|(role, perms)| json!({"role": role.name(), "permissions": perms.iter().map(|p| p.name()).collect::<Vec<_>>()}))
        .collect();
    json!({"roles": table})
}

/// `POST /api/admin/log/rotate` with `{"log": "rekor-v1"}`: rotates the log online (see
/// [`crate::shards`]) and answers what `signet admin log rotate` prints. The trust documents
/// served from then on list the new shard's key.
pub async fn rotate_log(State(state): State<Arc<AppState>>, body: Body) -> Result<Json<Value>, ApiError> {
    let request = super::input::json_body(body, state.max_body).await?;
    super::input::only_fields(&request, &["log"])?;
    let log = request.get("log").and_then(Value::as_str).ok_or_else(|| ApiError::bad_request("log is required: \"rekor-v1\""))?;
    crate::shards::check_log_name(log).map_err(ApiError::bad_request)?;
    // A task of its own: a client that hangs up must not leave the log half rotated.
    let rotating = state.clone();
    let r = tokio::spawn(async move { rotating.rekor_v1.rotate().await })
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the rotation failed unexpectedly: {e}")))??;
    let data_dir = state.rekor_v1.data_dir().to_path_buf();
    match tokio::task::spawn_blocking(move || crate::trust::instance(&data_dir, None)).await {
        Ok(Ok(instance)) => *state.trust.write() = Arc::new(instance),
        Ok(Err(e)) => tracing::error!(error = %e, "rotated, but the trust documents could not be rebuilt; they list the new shard after a restart"),
        Err(e) => tracing::error!(error = %e, "rotated, but rebuilding the trust documents failed"),
    }
    Ok(Json(crate::shards::rotation_report(&r)))
}
