//! Every shard of a log, oldest first, as storage records them.

use crate::shards::kind::Kind;
use crate::shards::kind::tree_id_zero;
use signet_log::shards::{self, Shard};
use signet_log::storage::Storage;
use signet_log::storage::StorageError;

/// Every shard of a log, oldest first, given shard 0's public key (SPKI DER). A Rekor v1 log
/// imported from another Rekor begins with the tree copied from it ([`import`]) instead.
pub fn registry(kind: Kind, storage: &dyn Storage, zero_spki: &[u8]) -> Result<Vec<Shard>, StorageError> {
    if kind == Kind::RekorV1 {
        if let Some(zero) = super::imported::shard_zero(storage)? {
            return shards::load(storage, kind.registry_name(), zero);
        }
    }
    let zero = Shard {
        number: 0,
        log_id: kind.zero_log(),
        // Only Rekor v1 names its trees (in its origin); the others' origins do not need one.
        tree_id: match kind {
            Kind::RekorV1 => tree_id_zero(storage)?,
            _ => 0,
        },
        start: 0,
        spki: zero_spki.to_vec(),
        valid_from: None,
        frozen: None,
        imported: None,
    };
    shards::load(storage, kind.registry_name(), zero)
}
