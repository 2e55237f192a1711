//! The trust documents over HTTP: `/trust/trusted_root.json`, `/trust/signing_config.json`,
//! `/trust/client_trust_config.json` (the same bytes `signet trust export` writes), and the
//! TUF repository that publishes them, `/tuf/…`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
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

/// `GET /tuf/{file}`: a file of the TUF repository (`N.root.json`, `timestamp.json`,
/// `N.snapshot.json`, `N.targets.json`, `targets/<sha256>.<name>`). A missing file is a 404,
/// which is also how a TUF client learns that there is no newer root.
pub async fn tuf_file(State(state): State<Arc<AppState>>, Path(file): Path<String>) -> Result<Response, ApiError> {
    let Some(tuf) = &state.tuf else {
        return Err(ApiError::not_found("this instance serves no TUF repository ([tuf] enabled = false)"));
    };
    if !tuf.published() {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the TUF repository is not published yet: the instance that sequences this database publishes it",
        )
        .with_header("retry-after", "1"));
    }
    match tuf.file(&file) {
        Some(bytes) => {
            let kind = if file.ends_with(".json") { "application/json" } else { "application/octet-stream" };
            Ok(([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], bytes).into_response())
        }
        None => Err(ApiError::not_found(format!("no TUF file {file:?}"))),
    }
}
