//! The Rekor v1 JSON API (`/api/v1/...`): hashedrekord entries with SETs, over a log cut
//! into shards (see [`crate::shards`]): the newest takes the appends, every one serves reads,
//! and indices are log-wide across them.

use tracing::Instrument;
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use signet_core::wire::{self, Index};
use signet_log::rekor::v1::{self, EntryView};
use signet_log::storage::StoredEntry;
use signet_log::{merkle, Log, Sequenced};

use signet_guard::audit::Did;

use super::error::ApiError;
use super::input::{Query, Typed};
use crate::state::AppState;

mod rotation;
mod search;
pub use crate::shards::reindex::{Reindexing, Status as ReindexStatus};
pub use crate::shards::rekor_v1::{RekorV1, Shard, Shards};
pub use rotation::{republish, watch as watch_rotations};
pub use search::{search_index, SearchRequest};

/// Rekor caps batch lookups; so do we, to bound the work one request can ask for.
const MAX_RETRIEVE: usize = 10;

impl Shard {
    fn uuid(&self, leaf_hash: &[u8]) -> String {
        v1::entry_uuid(self.tree_id, leaf_hash)
    }

    fn size(&self) -> u64 {
        self.log.durable_size()
    }

    /// The entry map for a stored entry, proven against the shard's newest checkpoint. Its
    /// `logIndex` is the log-wide one; the proof's is the shard's, as in Rekor.
    fn view(&self, entry: &StoredEntry) -> Result<String, ApiError> {
        let (head, proof) = self.log.inclusion_proof_at_head(entry.index)?;
        let size = head.checkpoint.size;
        Ok(EntryView {
            uuid: &self.uuid(&entry.leaf_hash),
            body: &entry.body,
            integrated_time: entry.integrated_time,
            log_id_hex: &self.log_id_hex,
            index: self.start + entry.index,
            proof_index: entry.index,
            set: entry.stamp.as_deref(),
            proof: &proof,
            root_hash: &head.checkpoint.root_hash,
            tree_size: size,
            checkpoint: &head.note,
            attestation: entry.attestation.as_deref(),
        }
        .to_json_string())
    }

    async fn by_leaf(&self, leaf: &[u8; 32]) -> Result<Option<String>, ApiError> {
        match self.log.entry_by_leaf(leaf).await? {
            Some(e) => Ok(Some(self.view(&e)?)),
            None => Ok(None),
        }
    }

    fn info(&self) -> Value {
        let head = self.log.head();
        json!({
            "rootHash": hex::encode(head.checkpoint.root_hash),
            "signedTreeHead": head.note,
            "treeID": self.tree_id.to_string(),
            "treeSize": head.checkpoint.size,
        })
    }
}

impl Shards {
    /// Each shard's tree ID and log, oldest first.
    pub fn logs(&self) -> impl Iterator<Item = (i64, Log)> + '_ {
        self.shards().map(|s| (s.tree_id, s.log.clone()))
    }

    /// Every shard, oldest first.
    fn shards(&self) -> impl DoubleEndedIterator<Item = &Shard> {
        self.frozen.iter().chain(std::iter::once(&self.active))
    }

    /// The shard of tree `tree_id`.
    fn shard(&self, tree_id: i64) -> Option<&Shard> {
        self.shards().find(|s| s.tree_id == tree_id)
    }

    /// `?treeID=` picks a shard (Rekor's parameter); without it, the active one.
    fn shard_of(&self, q: &Query) -> Result<&Shard, ApiError> {
        match q.get("treeID") {
            None => Ok(&self.active),
            Some(t) => {
                let id: i64 = t.parse().map_err(|_| ApiError::bad_request(format!("treeID {t:?} is not a decimal tree ID")))?;
                self.shard(id).ok_or_else(|| ApiError::not_found(format!("this log has no shard with treeID {id}")))
            }
        }
    }

    /// Accepts a 64-hex leaf hash (any shard) or an 80-hex tree ID + leaf hash (that shard).
    fn parse_uuid(&self, uuid: &str) -> Result<(Option<&Shard>, [u8; 32]), ApiError> {
        // Hex first: only then are byte offsets character boundaries.
        if !uuid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ApiError::bad_request(format!("entry UUID {uuid:?} is not hex; expected 64 or 80 hex characters")));
        }
        let (shard, hash_hex) = match uuid.len() {
            64 => (None, uuid),
            80 => {
                let (tree, hash) = uuid.split_at(16);
                let shard = i64::from_str_radix(tree, 16).ok().and_then(|id| self.shard(id)).ok_or_else(|| {
                    ApiError::not_found(format!("entry UUID {uuid} names tree {tree}, which is none of this log's shards"))
                })?;
                (Some(shard), hash)
            }
            n => return Err(ApiError::bad_request(format!("entry UUID must be 64 or 80 hex characters, got {n}"))),
        };
        let mut leaf = [0u8; 32];
        hex::decode_to_slice(hash_hex, &mut leaf).map_err(|_| ApiError::bad_request(format!("entry UUID {uuid:?} is not hex")))?;
        Ok((shard, leaf))
    }

    /// The entry at log-wide index `index`, in whichever shard holds it.
    async fn by_index(&self, index: u64) -> Result<Option<String>, ApiError> {
        let Some(shard) = self.shards().find(|s| index >= s.start && index - s.start < s.size()) else { return Ok(None) };
        match shard.log.entry_async(index - shard.start).await? {
            Some(e) => Ok(Some(shard.view(&e)?)),
            None => Ok(None),
        }
    }

    /// The entry with leaf hash `leaf`: in `shard` if named, else the newest shard holding it
    /// (an entry logged again after a rotation is in two shards, as in Rekor).
    async fn by_leaf(&self, shard: Option<&Shard>, leaf: [u8; 32]) -> Result<Option<String>, ApiError> {
        if let Some(s) = shard {
            return s.by_leaf(&leaf).await;
        }
        for s in self.shards().rev() {
            if let Some(found) = s.by_leaf(&leaf).await? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

pub async fn create_entry(State(state): State<Arc<AppState>>, Typed(request): Typed<v1::ProposedEntry>) -> Result<Response, ApiError> {
    // Held until answered: a rotation waits for this append, or this one for the rotation.
    let _appending = state.rekor_v1.appending.read().await;
    let shards = state.rekor_v1.current();
    let rekor = &shards.active;
    let _admitted = super::input::admit(&rekor.log)?;
    let entry = crate::otel::span!("entry.verify").in_scope(|| v1::verify(&request))?;
    super::input::entry_size(&entry.body, state.max_entry)?;
    let leaf = signet_log::Leaf::new(entry.body.clone());
    let leaf_hash = *leaf.hash();
    let uuid = rekor.uuid(&leaf_hash);
    let location = format!("/api/v1/log/entries/{uuid}");
    let identity = entry.identity.map(String::into_bytes);
    let attestation = entry.attestation.filter(|a| a.data.len() <= state.max_attestation);
    let appending = crate::otel::span!("log.append", signet.log = "rekor-v1");
    let searchable =
        rekor.log.append_searchable(leaf, Some(entry.digest_key.into_bytes()), identity, Some(entry.public_key.into_bytes()), attestation);
    match searchable.instrument(appending).await? {
        Sequenced::New { index, integrated_time, stamp, checkpoint } => {
            let proof = rekor.log.inclusion_proof(index, checkpoint.checkpoint.size)?;
            let view = EntryView {
                uuid: &uuid,
                body: &entry.body,
                integrated_time,
                log_id_hex: &rekor.log_id_hex,
                index: rekor.start + index,
                proof_index: index,
                set: stamp.as_deref(),
                proof: &proof,
                root_hash: &checkpoint.checkpoint.root_hash,
                tree_size: checkpoint.checkpoint.size,
                checkpoint: &checkpoint.note,
                // As Rekor's answer to an append: the attestation comes with reads.
                attestation: None,
            };
            let mut response = (
                StatusCode::CREATED,
                [(header::LOCATION, location), (header::ETAG, uuid.clone()), (header::CONTENT_TYPE, JSON.to_string())],
                as_rekor_writes_it(view.to_json_string()),
            )
                .into_response();
            let did = Did::Appended { log: "rekor-v1".into(), index: rekor.start + index, entry_hash: hex::encode(leaf_hash) };
            response.extensions_mut().insert(did);
            Ok(response)
        }
        Sequenced::Duplicate { .. } => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("an equivalent entry already exists in the transparency log with UUID {uuid}"),
        )
        .with_header("location", &location)),
    }
}

const JSON: &str = "application/json";

fn json_text(text: String) -> Response {
    ([(header::CONTENT_TYPE, JSON)], as_rekor_writes_it(text)).into_response()
}

/// JSON text ended with a newline, as Rekor's Go encoder ends every answer: sigstore-rs reads
/// an entry's answer by byte offsets that count on it (its `entries_api.rs` drops the last two
/// bytes, the closing brace and that newline). The view's capacity leaves room for it.
fn as_rekor_writes_it(mut text: String) -> String {
    text.push('\n');
    text
}

pub async fn get_entry_by_index(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let index = q
        .u64("logIndex", i64::MAX as u64)?
        .ok_or_else(|| ApiError::bad_request("logIndex query parameter is required"))?;
    state
        .rekor_v1
        .current()
        .by_index(index)
        .await?
        .map(json_text)
        .ok_or_else(|| ApiError::not_found(format!("no entry at logIndex {index}")))
}

pub async fn get_entry_by_uuid(State(state): State<Arc<AppState>>, Path(uuid): Path<String>) -> Result<Response, ApiError> {
    let shards = state.rekor_v1.current();
    let (shard, leaf) = shards.parse_uuid(&uuid)?;
    shards
        .by_leaf(shard, leaf)
        .await?
        .map(json_text)
        .ok_or_else(|| ApiError::not_found(format!("no entry with UUID {uuid}")))
}

/// `POST /api/v1/log/entries/retrieve`: entries by UUID, by index, or by the proposed entry
/// that would have made them.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = SearchLogQuery)]
pub struct RetrieveRequest {
    // Each list may be `null`: the Go client (rekor-cli) sends the ones it does not use so.
    #[serde(default, rename = "entryUUIDs", deserialize_with = "wire::list")]
    #[schema(nullable)]
    entry_uuids: Vec<String>,
    #[serde(default, deserialize_with = "wire::list")]
    #[schema(nullable)]
    log_indexes: Vec<Index>,
    /// Each read by its kind, as `POST /api/v1/log/entries` reads it.
    #[serde(default, deserialize_with = "wire::list")]
    #[schema(value_type = Vec<signet_log::rekor::v1::ProposedEntry>, nullable)]
    entries: Vec<Box<RawValue>>,
}

pub async fn retrieve_entries(State(state): State<Arc<AppState>>, Typed(request): Typed<RetrieveRequest>) -> Result<Response, ApiError> {
    for (name, len) in [("entryUUIDs", request.entry_uuids.len()), ("logIndexes", request.log_indexes.len()), ("entries", request.entries.len())] {
        if len > MAX_RETRIEVE {
            return Err(ApiError::bad_request(format!("{name} may hold at most {MAX_RETRIEVE} items, got {len}")).at(name).because("invalid_field"));
        }
    }
    let rekor = state.rekor_v1.current();
    let mut out = Vec::new();
    for (i, uuid) in request.entry_uuids.iter().enumerate() {
        let (shard, leaf) = rekor.parse_uuid(uuid).map_err(|e| e.at(format!("entryUUIDs[{i}]")))?;
        out.extend(rekor.by_leaf(shard, leaf).await?);
    }
    for Index(index) in request.log_indexes {
        out.extend(rekor.by_index(index).await?);
    }
    for (i, proposed) in request.entries.iter().enumerate() {
        let at = format!("entries[{i}]");
        // A kind of Rekor's that this log never accepts cannot be in it: nothing is found,
        // as for any entry that is not there. cosign and policy-controller look attestations
        // up as [dsse, intoto 0.0.1]; the intoto entry must not fail the dsse lookup beside it.
        if kind_never_logged(proposed.get()) {
            continue;
        }
        let entry = v1::parse(proposed.get().as_bytes()).map_err(|e| e.within(&at))?;
        out.extend(rekor.by_leaf(None, merkle::leaf_hash(&entry.body)).await?);
    }
    Ok(json_text(format!("[{}]", out.join(","))))
}

/// Rekor's entry kinds that this log does not accept (it logs `hashedrekord` and `dsse`
/// 0.0.1, and `intoto` 0.0.2 and 0.0.1).
const OTHER_REKOR_KINDS: [&str; 8] = ["rekord", "rpm", "jar", "helm", "tuf", "alpine", "cose", "rfc3161"];

/// Whether `proposed` names one of [`OTHER_REKOR_KINDS`]. Anything else, a kind no Rekor
/// knows included, goes on to [`v1::parse`], which says what is wrong with it.
fn kind_never_logged(proposed: &str) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let Ok(Kind { kind: Some(kind) }) = serde_json::from_str::<Kind>(proposed) else { return false };
    OTHER_REKOR_KINDS.contains(&kind.as_ref())
}

/// `GET /api/v1/log`: the active shard, and (as Rekor does) the frozen ones under
/// `inactiveShards`, newest first.
pub async fn log_info(State(state): State<Arc<AppState>>) -> Json<Value> {
    let rekor = state.rekor_v1.current();
    let mut info = rekor.active.info();
    if !rekor.frozen.is_empty() {
        info["inactiveShards"] = Value::Array(rekor.frozen.iter().rev().map(Shard::info).collect());
    }
    Json(info)
}

pub async fn consistency_proof(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Json<Value>, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let shards = state.rekor_v1.current();
    let log = &shards.shard_of(&q)?.log;
    let size = log.head().checkpoint.size;
    let first = q.u64("firstSize", i64::MAX as u64)?.unwrap_or(1);
    let last = q.u64("lastSize", i64::MAX as u64)?.unwrap_or(size);
    if first == 0 {
        return Err(ApiError::bad_request("firstSize must be at least 1"));
    }
    if first > last {
        return Err(ApiError::bad_request(format!("firstSize {first} must not exceed lastSize {last}")));
    }
    if last > size {
        return Err(ApiError::bad_request(format!("lastSize {last} is beyond the current tree size {size}")));
    }
    let hashes = log.consistency_proof(first, last)?;
    let root = log.root(last)?;
    Ok(Json(json!({
        "rootHash": hex::encode(root),
        "hashes": hashes.iter().map(hex::encode).collect::<Vec<_>>(),
    })))
}

/// `GET /api/v1/log/publicKey[?treeID=]`: the key of the active shard, or of the one named.
pub async fn public_key(State(state): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = Query::parse(q.as_deref())?;
    let shards = state.rekor_v1.current();
    let shard = shards.shard_of(&q)?;
    Ok(([(header::CONTENT_TYPE, "application/x-pem-file")], shard.log.key().public_pem()).into_response())
}
