//! The shards of signet's transparency logs in an instance (see [`signet_log::shards`]):
//! which storage namespace and key file each one has, `signet admin log rotate`, and the
//! public list of shard keys that the trust documents are made from.
//!
//! Three logs rotate this way ([`Kind`]). A Rekor v1 log is cut into shards with log-wide
//! indices, all of them served. The CT log and the Rekor v2 log rotate into a new log of
//! their own: a new key (so a new log ID), a new storage namespace and tree, indices from 0
//! again; the old one is frozen at its final checkpoint and only the new one is served
//! ([`active`]).
//!
//! Every log rotates online, through any running instance (`POST /api/admin/log/rotate`:
//! `api::rekor_v1::rotation`, [`active`]); on PostgreSQL the new shard's key reaches the
//! other instances sealed through the database ([`sealed`]). Offline means every instance
//! of the database is stopped: on SQLite the data dir's lock proves it; on PostgreSQL the
//! sequencer lease does, and the tree is frozen in the database too, so that nothing a
//! follower still queues can grow it.
//!
//! A Rekor v1 log may begin with a tree copied from another Rekor ([`import`]).

pub mod active;
pub mod error;
pub mod keys;
pub mod kind;
pub mod opener;
pub mod public;
pub mod registry;
pub mod reindex;
pub mod rekor_v1;
pub mod rotation;
pub mod homes;
pub mod import;
pub mod imported;
pub mod prepared;
pub mod sealed;

pub use error::{NotCreated, ShardError};
pub use homes::KeyHomes;
pub use keys::{active_key, keep_zero_public, next_key, next_key_of, offer_next_key, seal_key_for, sealed_key_name, shard_key, take_key, zero_spki};
pub use kind::{key_path, log_id, now, tree_id_zero, KIND, Kind, SHARD_ZERO_LOG};
pub use opener::{CATCH_UP, ShardOpener};
pub use public::{read_public, write_public, PublicShard};
pub use registry::registry;
pub use rotation::{check_frozen, record_rotation, record_rotation_of, rotate, rotate_kind, rotated, rotation_report, unfinished_rotations, Rotated, Rotation};

#[cfg(test)]
mod tests {
    use super::*;
    use kind::PUBLIC_FILE;
    use signet_log::shards::Shard;
    use signet_log::storage::LogId;

    #[test]
    fn shard_namespaces_never_meet_the_other_logs() {
        assert_eq!(log_id(Kind::RekorV1, 0), Some(1));
        assert_eq!(log_id(Kind::RekorV1, 1), Some(16));
        assert_eq!(log_id(Kind::RekorV1, 112), Some(127));
        assert_eq!(log_id(Kind::RekorV1, 113), None);
        assert_eq!(log_id(Kind::Ct, 0), Some(3));
        assert_eq!(log_id(Kind::Ct, 1), Some(128));
        assert_eq!(log_id(Kind::Ct, 65), None);
        assert_eq!(log_id(Kind::RekorV2, 0), Some(2));
        assert_eq!(log_id(Kind::RekorV2, 64), Some(255));
        assert_eq!(log_id(Kind::RekorV2, 65), None);
        // No namespace is two logs' (nor one of the others in state.rs, which has none).
        let mut all: Vec<LogId> = Kind::ALL.iter().flat_map(|&k| (0..=200).filter_map(move |n| log_id(k, n))).collect();
        let count = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), count);
        assert_eq!(count, 113 + 65 + 65);
    }

    #[test]
    fn the_public_list_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_public(dir.path(), Kind::RekorV1).unwrap(), None);
        let s = |n, spki: u8, from, frozen| Shard {
            number: n,
            log_id: log_id(Kind::RekorV1, n).unwrap(),
            tree_id: 1,
            start: 0,
            spki: vec![spki],
            valid_from: from,
            frozen,
            imported: None,
        };
        write_public(
            dir.path(),
            Kind::RekorV1,
            &[s(0, 1, None, Some(signet_log::shards::Frozen { size: 3, valid_to: 50 })), s(1, 2, Some(50), None)],
        )
        .unwrap();
        // Each log's list is its own: writing one keeps the others.
        assert_eq!(read_public(dir.path(), Kind::Ct).unwrap(), None);
        write_public(dir.path(), Kind::Ct, &[s(0, 3, None, None)]).unwrap();
        assert_eq!(read_public(dir.path(), Kind::Ct).unwrap().unwrap()[0].spki, vec![3]);
        assert_eq!(
            read_public(dir.path(), Kind::RekorV1).unwrap().unwrap(),
            vec![
                PublicShard { spki: vec![1], valid_from: None, valid_to: Some(50) },
                PublicShard { spki: vec![2], valid_from: Some(50), valid_to: None }
            ]
        );
        std::fs::write(dir.path().join(PUBLIC_FILE), "{").unwrap();
        assert!(read_public(dir.path(), Kind::RekorV1).unwrap_err().to_string().contains("log-shards.json"));
    }
}
