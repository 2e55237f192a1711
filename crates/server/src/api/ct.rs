//! The RFC 6962 CT log read API: `/ct/v1/get-sth`, `get-sth-consistency`,
//! `get-proof-by-hash`, `get-entries`.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use signet_ca::ct;
use signet_core::b64;

use super::error::ApiError;
use super::input::Query;
use crate::state::AppState;

/// Most entries one get-entries call returns.
const MAX_ENTRIES: u64 = 256;
/// Most precertificates one get-entries call rebuilds (entries logged before they were stored).
const MAX_REBUILT: usize = 4;

pub async fn get_sth(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    ct::signed_tree_head(&state.ca.ct).map(Json).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub async fn get_sth_consistency(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Json<Value>, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let first = q.u64("first", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("first is required"))?;
    let second = q.u64("second", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("second is required"))?;
    if first > second {
        return Err(ApiError::bad_request(format!("first {first} must not exceed second {second}")));
    }
    let proof = state.ca.ct.log().consistency_proof(first, second)?;
    Ok(Json(json!({"consistency": proof.iter().map(b64::encode).collect::<Vec<_>>()})))
}

pub async fn get_proof_by_hash(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Json<Value>, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let hash = q.get("hash").ok_or_else(|| ApiError::bad_request("hash (base64 leaf hash) is required"))?;
    let size = q.u64("tree_size", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("tree_size is required"))?;
    let leaf: [u8; 32] = b64::decode(hash)
        .ok()
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| ApiError::bad_request("hash must be 32 bytes of base64"))?;
    let log = state.ca.ct.log();
    let index = log.find_leaf(&leaf).await?.filter(|i| *i < size).ok_or_else(|| ApiError::not_found("no such leaf in a tree of that size"))?;
    let proof = log.inclusion_proof(index, size)?;
    Ok(Json(json!({"leaf_index": index, "audit_path": proof.iter().map(b64::encode).collect::<Vec<_>>()})))
}

pub async fn get_entries(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Json<Value>, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let start = q.u64("start", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("start is required"))?;
    let end = q.u64("end", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("end is required"))?;
    if start > end {
        return Err(ApiError::bad_request(format!("start {start} must not exceed end {end}")));
    }
    let count = (end - start + 1).min(MAX_ENTRIES);
    let authority = &state.ca.authority;
    let chain = [authority.intermediate_der(), authority.root_der()];
    let mut entries = Vec::new();
    let mut rebuilt = 0;
    for e in state.ca.ct.log().entries_async(start, count).await? {
        // The precertificate was stored at issuance. Entries from before that have none: it
        // is rebuilt (a signature), at most a few per request, and the page ends early, as
        // RFC 6962 §4.6 allows, so one GET costs O(1) signatures.
        let precert = match e.stamp {
            Some(precert) => precert,
            None if rebuilt < MAX_REBUILT => {
                rebuilt += 1;
                let tbs = ct::leaf_tbs(&e.body).ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "stored CT leaf is malformed"))?;
                authority.precertificate(tbs).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
            }
            None => break,
        };
        // PrecertChainEntry: the precertificate, then the chain to the root.
        let mut extra = Vec::new();
        ct::opaque24(&mut extra, &precert);
        let mut list = Vec::new();
        for c in chain {
            ct::opaque24(&mut list, c);
        }
        ct::opaque24(&mut extra, &list);
        entries.push(json!({"leaf_input": b64::encode(&e.body), "extra_data": b64::encode(&extra)}));
    }
    if entries.is_empty() {
        return Err(ApiError::bad_request(format!("no entries from {start}: the tree has {}", state.ca.ct.log().head().checkpoint.size)));
    }
    Ok(Json(json!({"entries": entries})))
}
