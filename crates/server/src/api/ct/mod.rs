//! The RFC 6962 CT log API: `/ct/v1/get-sth`, `get-sth-consistency`, `get-proof-by-hash`,
//! `get-entries`, `get-roots` and `get-entry-and-proof` here; `add-chain` and
//! `add-pre-chain` in [`add`].

pub mod add;

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use signet_ca::authority::Authority;
use signet_ca::ct;
use signet_ca::x509::Issuers;
use signet_core::b64;

use super::error::ApiError;
use super::input::Query;
use crate::state::AppState;

/// Most entries one get-entries call returns.
const MAX_ENTRIES: u64 = 256;
/// Most precertificates one get-entries call rebuilds (entries logged before they were stored).
const MAX_REBUILT: usize = 4;

pub async fn get_sth(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    ct::signed_tree_head(&state.ca.ct()).map(Json).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub async fn get_sth_consistency(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Json<Value>, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let first = q.u64("first", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("first is required"))?;
    let second = q.u64("second", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("second is required"))?;
    if first > second {
        return Err(ApiError::bad_request(format!("first {first} must not exceed second {second}")));
    }
    let proof = state.ct.log().consistency_proof(first, second)?;
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
    let log = state.ct.log();
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
    let mut entries = Vec::new();
    let mut rebuilt = 0;
    let (authority, trust) = (state.ca.authority(), state.trust.read().clone());
    let issuers = intermediates(&authority, &trust);
    for e in state.ct.log().entries_async(start, count).await? {
        // A page ends early when it has rebuilt as many precertificates as one GET may
        // (RFC 6962 §4.6 allows a shorter page).
        let Some((leaf_input, extra_data)) = entry(&authority, &issuers, &e, &mut rebuilt)? else { break };
        entries.push(json!({"leaf_input": leaf_input, "extra_data": extra_data}));
    }
    if entries.is_empty() {
        return Err(ApiError::bad_request(format!("no entries from {start}: the tree has {}", state.ct.log().head().checkpoint.size)));
    }
    Ok(Json(json!({"entries": entries})))
}

/// `GET /ct/v1/get-roots` (RFC 6962 §4.7): the roots this log accepts chains to. signet's CT
/// log logs only its own CA's certificates, so that is one root.
pub async fn get_roots(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"certificates": [b64::encode(state.ca.authority().root_der())]}))
}

/// `GET /ct/v1/get-entry-and-proof` (RFC 6962 §4.8): one entry, and its inclusion proof in
/// the tree of `tree_size`.
pub async fn get_entry_and_proof(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Json<Value>, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let index = q.u64("leaf_index", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("leaf_index is required"))?;
    let size = q.u64("tree_size", i64::MAX as u64)?.ok_or_else(|| ApiError::bad_request("tree_size is required"))?;
    let log = state.ct.log();
    let head = log.head().checkpoint.size;
    if index >= size || size > head {
        return Err(ApiError::bad_request(format!(
            "leaf_index {index} must be below tree_size {size}, and tree_size at most the tree's size, {head}"
        )));
    }
    let proof = log.inclusion_proof(index, size)?;
    let stored = log.entries_async(index, 1).await?;
    let e = stored.first().ok_or_else(|| ApiError::not_found(format!("no entry at {index}")))?;
    let mut rebuilt = 0;
    let (authority, trust) = (state.ca.authority(), state.trust.read().clone());
    let (leaf_input, extra_data) =
        entry(&authority, &intermediates(&authority, &trust), e, &mut rebuilt)?.ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the precertificate could not be rebuilt"))?;
    Ok(Json(json!({
        "leaf_input": leaf_input,
        "extra_data": extra_data,
        "audit_path": proof.iter().map(b64::encode).collect::<Vec<_>>(),
    })))
}

/// The intermediates a precertificate in the log may be signed by: today's, the next one a
/// scheduled rotation published, and those `trust rotate --intermediate` retired (the trusted
/// root keeps them all).
fn intermediates<'a>(authority: &'a Authority, trust: &'a signet_trust::root::Instance) -> Issuers<'a> {
    Issuers::new(
        std::iter::once(authority.intermediate_der())
            .chain(trust.ca_chain.first().map(Vec::as_slice))
            .chain(trust.retired_cas.iter().filter_map(|r| r.chain.first().map(Vec::as_slice))),
    )
}

/// An entry's `leaf_input` and `extra_data`, base64. An X.509 entry (`add-chain`) keeps its
/// chain as its extra data. A precert entry keeps its precertificate (stored at issuance;
/// entries from before that have none, and it is rebuilt, a signature, at most
/// [`MAX_REBUILT`] per request counted in `rebuilt`, so that one GET costs O(1) signatures),
/// followed by the chain. `None` once that many were rebuilt.
fn entry(
    authority: &Authority,
    issuers: &Issuers,
    e: &signet_log::storage::StoredEntry,
    rebuilt: &mut usize,
) -> Result<Option<(String, String)>, ApiError> {
    let malformed = || ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "stored CT leaf is malformed");
    let tbs = match ct::leaf_entry(&e.body).ok_or_else(malformed)? {
        ct::LeafEntry::X509(_) => {
            let chain = e.stamp.as_deref().ok_or_else(malformed)?;
            return Ok(Some((b64::encode(&e.body), b64::encode(chain))));
        }
        ct::LeafEntry::Precert { tbs } => tbs,
    };
    // PrecertChainEntry: the precertificate, then the chain to the root from the intermediate
    // that signed it: one retired since, for a precertificate stored at its issuance; today's,
    // for one rebuilt now.
    let (precert, intermediate) = match &e.stamp {
        Some(precert) => (precert.clone(), issuers.of(precert).unwrap_or(authority.intermediate_der())),
        None if *rebuilt < MAX_REBUILT => {
            *rebuilt += 1;
            let precert = authority.precertificate(tbs).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
            (precert, authority.intermediate_der())
        }
        None => return Ok(None),
    };
    let mut extra = Vec::new();
    ct::opaque24(&mut extra, &precert);
    let mut list = Vec::new();
    for c in [intermediate, authority.root_der()] {
        ct::opaque24(&mut list, c);
    }
    ct::opaque24(&mut extra, &list);
    Ok(Some((b64::encode(&e.body), b64::encode(&extra))))
}
