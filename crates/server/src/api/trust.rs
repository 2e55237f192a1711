//! The trust documents over HTTP: `/trust/trusted_root.json`, `/trust/signing_config.json`,
//! `/trust/client_trust_config.json` (the same bytes `signet trust export` writes).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde_json::Value;

use super::error::ApiError;
use crate::state::AppState;

pub async fn document(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let instance = state.trust.read().clone();
    match name.as_str() {
        "trusted_root.json" => Ok(Json(instance.trusted_root())),
        "signing_config.json" => Ok(Json(instance.signing_config())),
        "client_trust_config.json" => Ok(Json(instance.client_trust_config())),
        _ => Err(ApiError::not_found(format!("no trust document {name:?}; there are trusted_root.json, signing_config.json and client_trust_config.json"))),
    }
}
