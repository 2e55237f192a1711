//! `POST /api/v1/index/retrieve`: the UUIDs of entries by artifact digest, signing identity or
//! signer's key, as Rekor's search index answers them.
//!
//! Each criterion is an index of the log ([`signet_log::Log::indices_by_digest`] and its
//! siblings). Several criteria combine as Rekor's `operator` says: `or` (the default) is the
//! union, `and` the intersection. gitsign sends a commit's hash and its certificate with no
//! operator, and filters the union itself.
//!
//! A search answers at most [`SEARCH_PAGE`] UUIDs, log-wide index order. When there may be more,
//! the reply carries `x-next-after: <index>`, to be sent back as `?after=<index>`. Each index
//! lookup reads at most a page, so one request's work is bounded whatever the criteria match;
//! with several criteria a page holds what is certain below the first lookup that was cut
//! short, and may be empty with `x-next-after` set.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use signet_core::wire::{self, Base64};
use signet_log::DigestPage;

use super::Shard;
use crate::api::error::ApiError;
use crate::api::input::{Query, Typed};
use crate::state::AppState;

/// UUIDs in one page of a search; `?after=<index>` (from `x-next-after`) asks for the next.
const SEARCH_PAGE: usize = 256;

/// The longest identity or email a search takes: far past any real SAN, and bounded so
/// that a request cannot make the server hash megabytes.
const MAX_IDENTITY: usize = 1024;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SearchIndex)]
pub struct SearchRequest {
    /// `sha256:<64 hex>` (or sha384, sha512), or the bare hex of a SHA-256.
    #[schema(pattern = "^((sha256:)?[0-9a-fA-F]{64}|sha384:[0-9a-fA-F]{96}|sha512:[0-9a-fA-F]{128})$")]
    hash: Option<String>,
    /// The signer's public key or certificate (rekor-cli `search --public-key`, gitsign).
    #[serde(default, rename = "publicKey", deserialize_with = "wire::object_opt")]
    public_key: Option<PublicKeyQuery>,
    /// An email address: entries signed with a certificate whose SAN is that address (in
    /// any case). Entries logged before signet kept identities are found by hash only.
    #[serde(default)]
    #[schema(pattern = "@", max_length = 1024)]
    email: Option<String>,
    /// The signing certificate's SAN, an email address (in any case), a URI (exactly) or a
    /// Fulcio user name (`user!domain`), as the web explorer sends it; Rekor 1.5 calls this
    /// field `subject`, and both names are read. Entries logged before signet kept
    /// identities are found by hash only.
    #[serde(default, alias = "subject")]
    #[schema(min_length = 1, max_length = 1024)]
    identity: Option<String>,
    /// How several criteria combine: `or` (the default, Rekor's) or `and`.
    #[serde(default)]
    operator: Option<Operator>,
}

/// Rekor's `SearchIndex.publicKey`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SearchIndexPublicKey)]
struct PublicKeyQuery {
    /// `x509`: the one kind of key this log's entries carry.
    format: String,
    /// Base64 of a PEM public key or certificate.
    #[schema(value_type = Option<String>)]
    content: Option<Base64>,
    /// Refused: the key must come in the request (a fetch on behalf of an unauthenticated
    /// request would be the server's cost and a way into its network).
    url: Option<String>,
}

#[derive(Deserialize, utoipa::ToSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[schema(as = SearchOperator)]
enum Operator {
    And,
    Or,
}

/// One index key a search looks up.
enum Criterion {
    /// `<algorithm>:<hex>`, lower-case.
    Digest(String),
    /// See [`signet_log::rekor::identity`].
    Identity(String),
    /// See [`signet_log::rekor::public_key_index`].
    PublicKey(String),
}

impl Criterion {
    async fn lookup(&self, shard: &Shard, after: Option<u64>, limit: usize) -> Result<DigestPage, ApiError> {
        Ok(match self {
            Criterion::Digest(digest) => shard.log.indices_by_digest(digest.as_bytes(), after, limit).await?,
            Criterion::Identity(key) => shard.log.indices_by_identity(key.as_bytes(), after, limit).await?,
            Criterion::PublicKey(key) => shard.log.indices_by_public_key(key.as_bytes(), after, limit).await?,
        })
    }
}

pub async fn search_index(
    State(state): State<Arc<AppState>>,
    RawQuery(q): RawQuery,
    Typed(request): Typed<SearchRequest>,
) -> Result<Response, ApiError> {
    let after = Query::parse(q.as_deref())?.u64("after", i64::MAX as u64)?;
    let operator = request.operator.unwrap_or(Operator::Or);
    let criteria = criteria_of(request)?;
    // Shard by shard, oldest first, so that log-wide indices ascend across the pages.
    let mut uuids: Vec<Value> = Vec::new();
    let mut next_after = None;
    let shards = state.rekor_v1.current();
    for shard in shards.shards() {
        let room = SEARCH_PAGE - uuids.len();
        let local_after = match after {
            Some(a) if a >= shard.start => Some(a - shard.start),
            _ => None,
        };
        if local_after.is_some_and(|a| a.saturating_add(1) >= shard.size()) {
            continue;
        }
        let page = search_shard(shard, &criteria, operator, local_after, room).await?;
        let last = page.indices.last().copied();
        for i in page.indices {
            if let Some(leaf) = shard.log.leaf_hash(i)? {
                uuids.push(Value::String(shard.uuid(&leaf)));
            }
        }
        if let Some(n) = page.next_after {
            next_after = Some(shard.start + n);
            break;
        }
        if uuids.len() >= SEARCH_PAGE {
            next_after = last.map(|l| shard.start + l);
            break;
        }
    }
    let mut response = Json(Value::Array(uuids)).into_response();
    if let Some(next) = next_after {
        if let Ok(v) = next.to_string().parse() {
            response.headers_mut().insert("x-next-after", v);
        }
    }
    Ok(response)
}

/// One shard's page for `criteria` combined by `operator`: at most `limit` indices after
/// `after`, and where to go on from when there may be more.
async fn search_shard(shard: &Shard, criteria: &[Criterion], operator: Operator, after: Option<u64>, limit: usize) -> Result<DigestPage, ApiError> {
    if let [one] = criteria {
        return one.lookup(shard, after, limit).await;
    }
    let mut pages = Vec::with_capacity(criteria.len());
    for c in criteria {
        pages.push(c.lookup(shard, after, limit).await?);
    }
    Ok(combine(&pages, operator, limit))
}

/// Pages of several lookups, each of at most `limit` ascending indices, combined. Past the
/// last index of a page that was cut short the others are not known: the result stops there,
/// and goes on from there.
fn combine(pages: &[DigestPage], operator: Operator, limit: usize) -> DigestPage {
    let known_through = pages.iter().filter_map(|p| p.next_after).min();
    let within = |i: &u64| known_through.is_none_or(|t| *i <= t);
    let mut indices: Vec<u64> = match operator {
        Operator::Or => pages.iter().flat_map(|p| p.indices.iter().copied()).filter(within).collect::<BTreeSet<_>>().into_iter().collect(),
        Operator::And => {
            let mut common: BTreeSet<u64> = pages.first().map(|p| p.indices.iter().copied().filter(within).collect()).unwrap_or_default();
            for p in pages.iter().skip(1) {
                let here: BTreeSet<u64> = p.indices.iter().copied().collect();
                common.retain(|i| here.contains(i));
            }
            common.into_iter().collect()
        }
    };
    let mut next_after = known_through;
    if indices.len() > limit {
        indices.truncate(limit);
        next_after = indices.last().copied();
    }
    DigestPage { indices, next_after }
}

/// The criteria `request` names, or a 400 saying what is wrong with one.
fn criteria_of(request: SearchRequest) -> Result<Vec<Criterion>, ApiError> {
    let mut criteria = Vec::with_capacity(4);
    if let Some(hash) = request.hash {
        criteria.push(Criterion::Digest(digest_of(hash)?));
    }
    if let Some(key) = request.public_key {
        criteria.push(Criterion::PublicKey(key_index_of(key)?));
    }
    if let Some(email) = request.email {
        check_identity("email", &email)?;
        if !email.contains('@') {
            return Err(ApiError::bad_request("email must be an email address (local@domain)").at("email"));
        }
        criteria.push(Criterion::Identity(signet_log::rekor::email_key(&email)));
    }
    if let Some(identity) = request.identity {
        check_identity("identity", &identity)?;
        criteria.push(Criterion::Identity(signet_log::rekor::identity_key(&identity)));
    }
    if criteria.is_empty() {
        return Err(ApiError::bad_request("one of hash, publicKey, email or identity is required").at("hash"));
    }
    Ok(criteria)
}

/// The signer's key index of a `publicKey` criterion.
fn key_index_of(key: PublicKeyQuery) -> Result<String, ApiError> {
    use signet_core::pubkey::PublicKey;
    if key.format != "x509" {
        return Err(ApiError::bad_request(format!(
            "publicKey.format {:?}: this log's entries are signed with x509 keys and certificates only, so none is signed with a {} key; expected \"x509\"",
            key.format, key.format
        ))
        .at("publicKey.format"));
    }
    if key.url.is_some() {
        return Err(ApiError::bad_request("publicKey.url: signet does not fetch keys on a client's behalf; send the key itself as publicKey.content (base64 of its PEM)").at("publicKey.url"));
    }
    let Some(Base64(pem_text)) = key.content else {
        return Err(ApiError::bad_request("publicKey.content is required: base64 of a PEM public key or certificate").at("publicKey.content"));
    };
    let bad = |why: String| ApiError::bad_request(format!("publicKey.content: {why}; expected base64 of a PEM public key or certificate")).at("publicKey.content");
    let block = signet_core::pem::decode_first(&pem_text).map_err(|e| bad(e.to_string()))?;
    let parsed = match block.label.as_str() {
        "CERTIFICATE" => PublicKey::from_certificate(&block.der),
        "PUBLIC KEY" => PublicKey::from_spki(&block.der),
        other => return Err(bad(format!("a PEM block {other:?}"))),
    };
    parsed.map_err(|e| bad(e.to_string()))?;
    Ok(signet_log::rekor::public_key_index(&block.label, &block.der))
}

fn check_identity(field: &str, value: &str) -> Result<(), ApiError> {
    let chars = value.chars().count();
    if chars == 0 || chars > MAX_IDENTITY {
        return Err(ApiError::bad_request(format!("{field} must be 1 to {MAX_IDENTITY} characters")).at(field));
    }
    Ok(())
}

/// The digest key of a `hash` criterion: `<algorithm>:<hex>`, lower-case.
fn digest_of(hash: String) -> Result<String, ApiError> {
    let hash = hash.to_ascii_lowercase();
    let (alg, hex_value) = hash.split_once(':').unwrap_or(("sha256", hash.as_str()));
    let want_len = match alg {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => {
            return Err(
                ApiError::bad_request(format!("hash algorithm {alg:?} is not supported; expected sha256, sha384 or sha512")).at("hash")
            )
        }
    };
    if hex_value.len() != want_len || hex::decode(hex_value).is_err() {
        return Err(ApiError::bad_request(format!("hash value must be {want_len} hex characters for {alg}")).at("hash"));
    }
    Ok(format!("{alg}:{hex_value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(indices: &[u64], more: bool) -> DigestPage {
        DigestPage { indices: indices.to_vec(), next_after: more.then(|| indices.last().copied()).flatten() }
    }

    #[test]
    fn or_is_the_union_and_and_the_intersection_up_to_what_is_known() {
        let (a, b) = (page(&[1, 4, 9], false), page(&[4, 5, 12], false));
        assert_eq!(combine(&[a.clone(), b.clone()], Operator::Or, 10), page(&[1, 4, 5, 9, 12], false));
        assert_eq!(combine(&[a.clone(), b.clone()], Operator::And, 10), page(&[4], false));
        // Cut short at 5: past it the second lookup is not known, so nothing past 5 is said,
        // and the next page goes on from 5.
        let cut = page(&[4, 5], true);
        assert_eq!(combine(&[a.clone(), cut.clone()], Operator::Or, 10), DigestPage { indices: vec![1, 4, 5], next_after: Some(5) });
        assert_eq!(combine(&[a.clone(), cut.clone()], Operator::And, 10), DigestPage { indices: vec![4], next_after: Some(5) });
        // Nothing in common below the cut: an empty page that still goes on.
        let far = page(&[20, 21], true);
        assert_eq!(combine(&[a.clone(), far], Operator::And, 10), DigestPage { indices: vec![], next_after: Some(21) });
        // At most `limit`, going on after the last given.
        assert_eq!(combine(&[a, b], Operator::Or, 2), DigestPage { indices: vec![1, 4], next_after: Some(4) });
    }
}
