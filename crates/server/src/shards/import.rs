//! A Rekor v1 log brought from another Rekor (`signet import rekor`): its tree copied into a
//! storage namespace of its own ([`signet_log::import`]), then served as shard 0 of the
//! Rekor v1 log, frozen, under the other log's tree ID, origin and key (the public half: it
//! signs nothing here). signet's own log continues as shard 1, from the next index, so old
//! bundles verify, their UUIDs and indices answer from the copy, and the trust documents
//! list both keys.
//!
//! Only into a log that has no entries yet: log indices are handed out once. The record
//! `rekor_v1.imported` names the copy from the first run on, so that a run cut short is
//! finished by running the same import again, and another tree is refused; shard 0 is the
//! copy once it is frozen, and until then `serve` refuses to start.

use std::path::Path;

use serde::{Deserialize, Serialize};
use signet_core::b64;
use signet_keys::Signer;
use signet_log::shards::{self, Imported, Shard};
use signet_log::storage::{LogId, Storage, StorageError};

use super::{hold_offline, Kind, KeyHomes, Offline, Rotated};

/// The copy's storage namespace: outside every log's range ([`Kind`]'s namespaces).
pub const IMPORTED_LOG: LogId = 4;
const RECORD: &str = "rekor_v1.imported";

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
fn shard_of(storage: &dyn Storage, source: &Source) -> Result<Shard, StorageError> {
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
/// finishes it; `None` when there is none.
pub fn unfinished(storage: &dyn Storage) -> Result<Option<String>, StorageError> {
    let Some(source) = record(storage)? else { return Ok(None) };
    Ok((!shards::is_frozen(storage, Kind::RekorV1.registry_name(), 0)?).then(|| {
        format!(
            "the Rekor v1 log is being imported from {} (tree {}) and the import has not finished: run the same `signet import rekor` again to finish it",
            source.url, source.tree_id
        )
    }))
}

/// Shard 0 of the Rekor v1 log when it was imported; an error while the import is unfinished.
pub fn shard_zero(storage: &dyn Storage) -> Result<Option<Shard>, StorageError> {
    if let Some(why) = unfinished(storage)? {
        return Err(StorageError::Corrupt(why));
    }
    let Some(source) = record(storage)? else { return Ok(None) };
    shard_of(storage, &source).map(Some)
}

/// The key a frozen, imported shard is served under: its public half alone.
pub fn public_key(shard: &Shard) -> Result<Signer, String> {
    Signer::public_only(&shard.spki, "this shard was copied from another Rekor (signet import rekor): only its public key is here, and it signs nothing")
        .map_err(|e| format!("the imported Rekor v1 shard's key: {e}"))
}

/// A store held for an import ([`hold_offline`]).
pub struct Target {
    offline: Offline,
}

impl Target {
    /// Holds the data dir or database: no server may run on it meanwhile.
    pub fn hold(data_dir: &Path, storage: Option<&str>) -> Result<Target, String> {
        Ok(Target { offline: hold_offline(data_dir, storage, "signet import rekor", "")? })
    }

    pub fn storage(&self) -> std::sync::Arc<dyn Storage> {
        self.offline.store.clone()
    }

    /// Claims the Rekor v1 log for `source`: refused when it has entries of its own, or
    /// another import claimed it. Claiming again for the same source (a rerun) is allowed.
    pub fn claim(&self, source: &Source) -> Result<(), String> {
        let store = self.offline.store.as_ref();
        let err = |e: StorageError| e.to_string();
        let kind = Kind::RekorV1;
        if record(store).map_err(err)?.is_none()
            && (store.latest_checkpoint(kind.zero_log()).map_err(err)?.is_some() || shards::is_frozen(store, kind.registry_name(), 0).map_err(err)?)
        {
            return Err(
                "this store's Rekor v1 log has been created (a server ran on it): entries are imported only into a log that has none, since log indices are handed out once. Import into a new data dir (or database), then start the server on it"
                    .into(),
            );
        }
        let json = serde_json::to_vec(source).map_err(|e| e.to_string())?;
        let stored: Source = serde_json::from_slice(&store.get_or_init_meta(RECORD, &json).map_err(err)?).map_err(|e| format!("{RECORD}: {e}"))?;
        if stored.tree_id != source.tree_id || stored.spki != source.spki {
            return Err(format!(
                "this store holds an import of tree {} from {} already; it takes one, and this is tree {}",
                stored.tree_id, stored.url, source.tree_id
            ));
        }
        Ok(())
    }

    /// After the copy is finished at `size` entries: shard 0 frozen there, its key valid
    /// until `valid_to` (Unix seconds), and shard 1, signet's own log, started after it with
    /// a new key. Finishing twice changes nothing.
    pub fn register(&self, data_dir: &Path, homes: &KeyHomes, source: &Source, size: u64, valid_to: i64) -> Result<Rotated, String> {
        let kind = Kind::RekorV1;
        let store = self.offline.store.as_ref();
        let err = |e: StorageError| e.to_string();
        let zero = shard_of(store, source).map_err(err)?;
        shards::freeze(store, kind.registry_name(), &zero, size, valid_to).map_err(err)?;
        let list = super::registry(kind, store, &[]).map_err(err)?;
        if let Some(rotated) = super::rotated_of(kind, &list, data_dir, homes) {
            return Ok(rotated);
        }
        // A new data dir has no keys directory yet (the server makes it at its first start).
        signet_core::files::ensure_private_dir(&data_dir.join("keys")).map_err(|e| format!("{}: {e}", data_dir.join("keys").display()))?;
        let key = match &self.offline.url {
            signet_log::storage::StorageUrl::Postgres(_) => {
                let seal = super::seal_key_for(store, data_dir)?;
                super::offer_next_key(kind, store, seal.as_deref(), data_dir, homes, &list)?.1
            }
            signet_log::storage::StorageUrl::Sqlite(_) => super::next_key_of(kind, data_dir, homes, &list)?.2,
        };
        let list = super::record_rotation_of(kind, store, data_dir, list, size, &key)?;
        super::rotated_of(kind, &list, data_dir, homes).ok_or_else(|| "the import recorded no shard after the copy".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Source {
        Source {
            url: "http://rekor.example".into(),
            tree_id: 42,
            spki: b64::encode(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap().spki_der()),
            origin: "rekor.example - 42".into(),
            key_name: "rekor.example".into(),
        }
    }

    #[test]
    fn the_copy_is_shard_zero_once_frozen_and_a_server_refuses_to_start_before() {
        let dir = tempfile::tempdir().unwrap();
        let target = Target::hold(dir.path(), None).unwrap();
        assert!(shard_zero(target.storage().as_ref()).unwrap().is_none(), "no import, no imported shard");
        let source = source();
        target.claim(&source).unwrap();
        target.claim(&source).unwrap();
        let other = Source { tree_id: 43, ..source.clone() };
        assert!(target.claim(&other).unwrap_err().contains("holds an import of tree 42"));
        let why = unfinished(target.storage().as_ref()).unwrap().unwrap();
        assert!(why.contains("has not finished") && why.contains("signet import rekor"), "{why}");
        assert!(shard_zero(target.storage().as_ref()).unwrap_err().to_string().contains(&why));

        let rotated = target.register(dir.path(), &KeyHomes::default(), &source, 0, 1_700_000_000).unwrap();
        assert_eq!((rotated.frozen.number, rotated.active.number, rotated.active.start), (0, 1, 0));
        assert_eq!(unfinished(target.storage().as_ref()).unwrap(), None);
        let zero = shard_zero(target.storage().as_ref()).unwrap().unwrap();
        assert_eq!((zero.log_id, zero.tree_id), (IMPORTED_LOG, 42));
        assert_eq!(zero.imported, Some(Imported { origin: "rekor.example - 42".into(), key_name: "rekor.example".into() }));
        // Registering again finds what the first did.
        let again = target.register(dir.path(), &KeyHomes::default(), &source, 0, 1_700_000_000).unwrap();
        assert_eq!(again.active.tree_id, rotated.active.tree_id);
        let key = public_key(&zero).unwrap();
        assert!(key.sign(b"x").is_err(), "an imported shard's key signs nothing");
    }

    #[test]
    fn a_log_with_entries_of_its_own_is_not_imported_into() {
        let dir = tempfile::tempdir().unwrap();
        let target = Target::hold(dir.path(), None).unwrap();
        let store = target.storage();
        let batch = signet_log::storage::Batch {
            log: Kind::RekorV1.zero_log(),
            integrated_time: 0,
            entries: vec![],
            tiles: vec![],
            leaf_tiles: vec![],
            checkpoint: signet_log::storage::StoredCheckpoint { size: 0, note: "x\n".into() },
        };
        store.commit(&batch).unwrap();
        assert!(target.claim(&source()).unwrap_err().contains("has been created"));
    }
}
