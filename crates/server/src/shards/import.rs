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

use signet_log::shards::{self};
use signet_log::storage::Storage;

use super::error::ShardError;
use super::rotation::hold_offline;
use super::kind::Kind;
use super::homes::KeyHomes;
use super::imported::{shard_of, RECORD};
pub use super::imported::{public_key, record, shard_zero, unfinished, Source, IMPORTED_LOG};
use super::rotation::Offline;
use super::rotation::Rotated;

/// A store held for an import ([`hold_offline`]).
pub struct Target {
    offline: Offline,
}

impl Target {
    /// Holds the data dir or database: no server may run on it meanwhile.
    pub fn hold(data_dir: &Path, storage: Option<&str>) -> Result<Target, ShardError> {
        Ok(Target { offline: hold_offline(data_dir, storage, "signet import rekor", "")? })
    }

    pub fn storage(&self) -> std::sync::Arc<dyn Storage> {
        self.offline.store.clone()
    }

    /// Claims the Rekor v1 log for `source`: refused when it has entries of its own, or
    /// another import claimed it. Claiming again for the same source (a rerun) is allowed.
    pub fn claim(&self, source: &Source) -> Result<(), ShardError> {
        let store = self.offline.store.as_ref();
        let kind = Kind::RekorV1;
        if record(store)?.is_none() && (store.latest_checkpoint(kind.zero_log())?.is_some() || shards::is_frozen(store, kind.registry_name(), 0)?) {
            return Err(ShardError::LogCreated);
        }
        let json = serde_json::to_vec(source)?;
        let stored: Source = serde_json::from_slice(&store.get_or_init_meta(RECORD, &json)?).map_err(ShardError::ImportRecord)?;
        if stored.tree_id != source.tree_id || stored.spki != source.spki {
            return Err(ShardError::OtherImport { stored_tree: stored.tree_id, stored_url: stored.url, tree: source.tree_id });
        }
        Ok(())
    }

    /// After the copy is finished at `size` entries: shard 0 frozen there, its key valid
    /// until `valid_to` (Unix seconds), and shard 1, signet's own log, started after it with
    /// a new key. Finishing twice changes nothing.
    pub fn register(&self, data_dir: &Path, homes: &KeyHomes, source: &Source, size: u64, valid_to: i64) -> Result<Rotated, ShardError> {
        let kind = Kind::RekorV1;
        let store = self.offline.store.as_ref();
        let zero = shard_of(store, source)?;
        shards::freeze(store, kind.registry_name(), &zero, size, valid_to)?;
        let list = super::registry::registry(kind, store, &[])?;
        if let Some(rotated) = super::rotation::rotated_of(kind, &list, data_dir, homes) {
            return Ok(rotated);
        }
        // A new data dir has no keys directory yet (the server makes it at its first start).
        let keys = data_dir.join("keys");
        signet_core::files::ensure_private_dir(&keys).map_err(|source| ShardError::Io { path: keys.clone(), source })?;
        let key = match &self.offline.url {
            signet_log::storage::StorageUrl::Postgres(_) => {
                let seal = super::keys::seal_key_for(store, data_dir)?;
                super::keys::offer_next_key(kind, store, seal.as_deref(), data_dir, homes, &list)?.1
            }
            signet_log::storage::StorageUrl::Sqlite(_) => super::keys::next_key_of(kind, data_dir, homes, &list)?.2,
        };
        let list = super::rotation::record_rotation_of(kind, store, data_dir, list, size, &key)?;
        super::rotation::rotated_of(kind, &list, data_dir, homes).ok_or(ShardError::ImportNoShard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shards::imported::IMPORTED_LOG;
    use signet_core::b64;
    use signet_keys::Signer;
    use signet_log::shards::Imported;

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
        assert!(target.claim(&other).unwrap_err().to_string().contains("holds an import of tree 42"));
        let why = unfinished(target.storage().as_ref()).unwrap().unwrap().to_string();
        assert!(why.contains("has not finished") && why.contains("signet import rekor"), "{why}");
        assert!(shard_zero(target.storage().as_ref()).unwrap_err().to_string().contains(&why));

        let rotated = target.register(dir.path(), &KeyHomes::default(), &source, 0, 1_700_000_000).unwrap();
        assert_eq!((rotated.frozen.number, rotated.active.number, rotated.active.start), (0, 1, 0));
        assert!(unfinished(target.storage().as_ref()).unwrap().is_none());
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
        assert!(target.claim(&source()).unwrap_err().to_string().contains("has been created"));
    }
}
