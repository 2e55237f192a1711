//! The Rekor v1 log as this instance serves it: its shards, the newest of which takes the
//! appends, swapped whole by a rotation. The API over it is [`crate::api::rekor_v1`].

use std::sync::Arc;

use signet_log::Log;

use super::reindex::Reindexing;
use super::ShardOpener;

/// One shard of the Rekor v1 log (see [`signet_log::shards`]) and the identifiers its
/// entries carry.
#[derive(Clone)]
pub struct Shard {
    pub log: Log,
    pub tree_id: i64,
    pub log_id_hex: String,
    /// The virtual index of its entry 0.
    pub start: u64,
}

impl Shard {
    pub fn new(log: Log, tree_id: i64, start: u64) -> Self {
        let log_id_hex = hex::encode(log.key().key_id());
        Shard { log, tree_id, log_id_hex, start }
    }
}

/// The Rekor v1 log: its shards, of which the newest takes the appends.
pub struct RekorV1 {
    /// Swapped whole by a rotation; every request reads it, without a lock.
    pub(crate) shards: Arc<arc_swap::ArcSwap<Shards>>,
    /// Held shared by every append and exclusively by a rotation: a rotation waits for the
    /// appends in flight, and those that arrive meanwhile wait for the next shard.
    pub(crate) appending: tokio::sync::RwLock<()>,
    pub(crate) opener: ShardOpener,
    /// Why this instance does not serve the shard another instance rotated to, while it
    /// can't (`/readyz` says it); `None` otherwise.
    pub(crate) behind: parking_lot::Mutex<Option<String>>,
    /// `signet admin log reindex` on this instance.
    pub(crate) reindexing: Reindexing,
}

/// The shards as served at one moment; a rotation replaces the whole set.
pub struct Shards {
    pub(crate) active: Shard,
    /// The frozen shards, oldest first.
    pub(crate) frozen: Vec<Shard>,
    /// Their records, oldest first (the active one's last).
    pub(crate) registry: Vec<signet_log::shards::Shard>,
}

impl RekorV1 {
    pub fn new(active: Shard, frozen: Vec<Shard>, registry: Vec<signet_log::shards::Shard>, opener: ShardOpener) -> Self {
        RekorV1 {
            shards: Arc::new(arc_swap::ArcSwap::from_pointee(Shards { active, frozen, registry })),
            appending: tokio::sync::RwLock::new(()),
            opener,
            behind: Default::default(),
            reindexing: Reindexing::default(),
        }
    }

    /// The shards now.
    pub fn current(&self) -> Arc<Shards> {
        self.shards.load_full()
    }

    /// Why this instance is behind a rotation another instance made, if it is.
    pub fn behind(&self) -> Option<String> {
        self.behind.lock().clone()
    }

    /// The data dir that holds the shards' keys.
    /// Every shard's record, oldest first (the active one's last).
    pub fn registry(&self) -> Vec<signet_log::shards::Shard> {
        self.current().registry.clone()
    }

    /// What opens its shards: the storage, the seal key, where keys live.
    pub fn opener(&self) -> &crate::shards::ShardOpener {
        &self.opener
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.opener.data_dir
    }

    /// The search-key backfill of entries logged before those keys were kept.
    pub fn reindexing(&self) -> &Reindexing {
        &self.reindexing
    }

    /// The active shard's log.
    pub fn log(&self) -> Log {
        self.shards.load().active.log.clone()
    }

    /// The active shard's log whenever it is called (the sequencer lease's takeover lists the
    /// logs when it happens, after any rotation since start).
    pub fn active_log_source(&self) -> impl Fn() -> Log + Send + Sync + 'static {
        let shards = self.shards.clone();
        move || shards.load().active.log.clone()
    }
}
