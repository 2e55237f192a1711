//! The record of a Rekor v1 log's shard 0 imported from another Rekor (`rekor_v1.imported`):
//! what was copied, and the copy as a shard, for the registry, rotations and `serve`.

use serde::{Deserialize, Serialize};
use signet_core::b64;
use signet_keys::Signer;
use signet_log::shards::{self, Imported, Shard};

use super::error::ShardError;
use super::kind::Kind;
use signet_log::storage::{LogId, Storage, StorageError};

/// The copy's storage namespace: outside every log's range ([`Kind`]'s namespaces).
pub const IMPORTED_LOG: LogId = 4;
pub(super) const RECORD: &str = "rekor_v1.imported";

/// What is being imported, as its first run recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The Rekor it was copied from (for the operator; nothing reads it back from there).
    pub url: String,
    pub tree_id: i64,
    /// Base64 of the SPKI DER of its key.
    pub spki: String,
    pub origin: String,
    pub key_name: String,
}

/// The import recorded in `storage`, finished or not.
pub fn record(storage: &dyn Storage) -> Result<Option<Source>, StorageError> {
    storage
        .meta(RECORD)?
        .map(|bytes| serde_json::from_slice(&bytes).map_err(|e| StorageError::Corrupt(format!("{RECORD}: {e}"))))
        .transpose()
}

/// The copy as a shard, whether its import finished or not.
pub(super) fn shard_of(storage: &dyn Storage, source: &Source) -> Result<Shard, StorageError> {
    let spki = b64::decode(&source.spki).map_err(|_| StorageError::Corrupt(format!("{RECORD}: spki is not base64")))?;
    Ok(Shard {
        number: 0,
        log_id: IMPORTED_LOG,
        tree_id: source.tree_id,
        start: 0,
        spki,
        // Its key signed from the copy's first entry on (for the trust documents' window).
        valid_from: storage.entry(IMPORTED_LOG, 0)?.map(|e| e.integrated_time),
        frozen: None,
        imported: Some(Imported { origin: source.origin.clone(), key_name: source.key_name.clone() }),
    })
}

/// Why no server may start on `storage` yet: an import under way, with the command that
/// finishes it ([`ShardError::ImportUnfinished`]); `None` when there is none.
pub fn unfinished(storage: &dyn Storage) -> Result<Option<ShardError>, StorageError> {
    let Some(source) = record(storage)? else { return Ok(None) };
    Ok((!shards::is_frozen(storage, Kind::RekorV1.registry_name(), 0)?)
        .then_some(ShardError::ImportUnfinished { url: source.url, tree_id: source.tree_id }))
}

/// Shard 0 of the Rekor v1 log when it was imported; an error while the import is unfinished.
pub fn shard_zero(storage: &dyn Storage) -> Result<Option<Shard>, StorageError> {
    if let Some(why) = unfinished(storage)? {
        return Err(StorageError::Corrupt(why.to_string()));
    }
    let Some(source) = record(storage)? else { return Ok(None) };
    shard_of(storage, &source).map(Some)
}

/// The key a frozen, imported shard is served under: its public half alone.
pub fn public_key(shard: &Shard) -> Result<Signer, ShardError> {
    Signer::public_only(&shard.spki, "this shard was copied from another Rekor (signet import rekor): only its public key is here, and it signs nothing")
        .map_err(ShardError::ImportedKey)
}
