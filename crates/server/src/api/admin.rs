//! `/api/admin/…`: operator views. The router puts these behind the admin role always
//! (`signet_guard::authn::Scope::Admin`); handlers can assume an admin caller.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::state::AppState;

/// `GET /api/admin/tokens`: names, ids, roles, creation, expiry and revocation of every API
/// token; never a token or its hash.
pub async fn tokens(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"tokens": state.guard.tokens()}))
}
