//! The Rekor v2 API: entry creation, checkpoints and C2SP tiles (`/api/v2/...`).

use tracing::Instrument;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use signet_log::rekor::v2::{self, TransparencyLogEntry};
use signet_log::tiles::{self, TilePath, TILE_WIDTH};
use signet_log::Sequenced;

use signet_guard::audit::Did;

use super::error::ApiError;
use super::input::Typed;
use crate::state::AppState;

pub async fn create_entry(State(state): State<Arc<AppState>>, Typed(request): Typed<v2::CreateEntryRequest>) -> Result<Response, ApiError> {
    // Held until answered: a rotation waits for this append, or this append for it.
    let _appending = state.rekor_v2.appending().await;
    let log = &state.rekor_v2.log();
    let _admitted = super::input::admit(log)?;
    let entry = crate::otel::span!("entry.verify").in_scope(|| v2::verify(request))?;
    super::input::entry_size(&entry.body, state.max_entry)?;
    let appending = crate::otel::span!("log.append", signet.log = "rekor-v2");
    let leaf = signet_log::Leaf::new(entry.body.clone());
    let entry_hash = hex::encode(leaf.hash());
    match log.append(leaf, Some(entry.digest_key.into_bytes())).instrument(appending).await? {
        Sequenced::New { index, checkpoint, .. } => {
            let tle = entry_json(log, index, &entry.body, &checkpoint)?;
            let mut response = (StatusCode::CREATED, Json(tle)).into_response();
            response.extensions_mut().insert(Did::Appended { log: "rekor-v2".into(), index, entry_hash });
            Ok(response)
        }
        Sequenced::Duplicate { index } => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("an equivalent entry already exists in the log at index {index}"),
        )
        .with_header("x-log-index", &index.to_string())),
    }
}

/// The `TransparencyLogEntry` of the entry at `index`, proved under `checkpoint`: what an
/// append answers (and what an audit anchor keeps).
pub fn entry_json(
    log: &signet_log::Log,
    index: u64,
    body: &[u8],
    checkpoint: &signet_log::checkpoint::SignedCheckpoint,
) -> Result<serde_json::Value, signet_log::merkle::ProofError> {
    let proof = log.inclusion_proof(index, checkpoint.checkpoint.size)?;
    Ok(TransparencyLogEntry {
        index,
        key_id: log.key().key_id(),
        body,
        proof: &proof,
        root_hash: &checkpoint.checkpoint.root_hash,
        tree_size: checkpoint.checkpoint.size,
        checkpoint: &checkpoint.note,
    }
    .to_json())
}

/// The latest checkpoint; with `[log.witnesses]`, the newest one a quorum of them cosigned,
/// with their cosignature lines (the log's own until a quorum has cosigned one).
pub async fn checkpoint(State(state): State<Arc<AppState>>) -> Response {
    let note: String = match state.cosigning.as_ref().and_then(|c| c.served()) {
        Some((_, cosigned)) => cosigned.to_string(),
        None => state.rekor_v2.log().head().note.clone(),
    };
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], note).into_response()
}

pub async fn tile(State(state): State<Arc<AppState>>, Path(path): Path<String>) -> Result<Response, ApiError> {
    let parsed = tiles::parse(&path).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let log = &state.rekor_v2.log();
    let data = match parsed {
        TilePath::Hashes { level, index, width } => log.tile(level, index, width)?,
        TilePath::Entries { index, width } => {
            let start = index
                .checked_mul(TILE_WIDTH)
                .ok_or_else(|| ApiError::bad_request("tile index is out of range"))?;
            let entries = log.entries_async(start, width).await?;
            match entries.len() as u64 == width {
                true => Some(tiles::entry_bundle(entries.iter().map(|e| e.body.as_slice())).map_err(|e| {
                    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("entry bundle {path} cannot be served: {e}"))
                })?),
                false => None,
            }
        }
    };
    let data = data.ok_or_else(|| ApiError::not_found(format!("tile {path} does not exist yet")))?;
    // Full tiles never change; partial ones are replaced as the tree grows.
    let cache = if parsed.is_full() { "public, max-age=31536000, immutable" } else { "public, max-age=1" };
    Ok(([(header::CONTENT_TYPE, "application/octet-stream"), (header::CACHE_CONTROL, cache)], data).into_response())
}
