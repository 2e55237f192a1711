//! What a log's handle ([`crate::Log`]) and the task that owns its tree (the sequencer, or a
//! follower's poll loop) share: the log's identity and key, its storage, the snapshot readers
//! see, and the counters of appends in flight.

use std::sync::Arc;

use arc_swap::ArcSwap;
use signet_core::hash::Hash;
use signet_keys::KeyError;

use crate::checkpoint::{NoteSigner, SignedCheckpoint};
use crate::snapshot::Snapshot;
use crate::storage::{LogId, Storage};
use crate::tree::Tree;

/// Signs something per entry at sequencing time, once its index and time are known.
pub trait Stamper: Send + Sync + 'static {
    fn stamp(&self, index: u64, integrated_time: i64, body: &[u8]) -> Result<Vec<u8>, KeyError>;

    /// How a batch's stamps are spread over threads: by default as signatures made here.
    fn spread(&self) -> signet_keys::Spread {
        signet_keys::Spread::on_cores()
    }
}

pub(crate) struct Shared {
    pub id: LogId,
    pub origin: String,
    pub signer: NoteSigner,
    pub stamper: Option<Arc<dyn Stamper>>,
    pub storage: Arc<dyn Storage>,
    /// The newest durable checkpoint and the tree as of it ([`crate::snapshot`]). Readers
    /// never see a size beyond it. Replaced only by the task that owns the tree (the
    /// sequencer's, or a follower's poll loop), so snapshots are published in order.
    pub(crate) published: ArcSwap<Snapshot>,
    /// Leaves sequenced but not yet durable, so that duplicates are caught in flight too.
    /// Durable ones are found through storage ([`Storage::find_leaves`]).
    pub inflight: parking_lot::Mutex<std::collections::HashMap<Hash, u64>>,
    /// `LogConfig::max_pending`: with it, the sequencer knows when no more entries can come.
    pub max_pending: usize,
    /// Entries the sequencer has taken from the pool and not yet answered.
    pub in_pipeline: std::sync::atomic::AtomicUsize,
    /// What `/metrics` reports of this log's sequencing.
    pub stats: crate::stats::LogStats,
    /// Set by [`Log::freeze`]: the queue's drain takes nothing more, so the pool can close.
    pub closing: std::sync::atomic::AtomicBool,
    /// Set when a commit found the tree frozen in storage (another instance rotated the
    /// log): appends are refused at once from then on, and [`Log::frozen_in_storage`] wakes.
    pub frozen_in_storage: std::sync::OnceLock<u64>,
    pub frozen_notice: tokio::sync::Notify,
    /// Entries committed or read lately, which reads look in before storage.
    pub entry_cache: crate::entrycache::EntryCache,
}

impl Shared {
    /// What readers see now: the newest durable checkpoint and the tree as of it.
    pub fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.published.load()
    }

    pub fn head(&self) -> Arc<SignedCheckpoint> {
        self.published.load().head.clone()
    }

    pub fn durable_size(&self) -> u64 {
        self.published.load().size()
    }

    /// Makes `head` what readers see, with `tree` (which the caller owns) as of it.
    pub fn publish(&self, tree: &Tree, head: Arc<SignedCheckpoint>) {
        self.published.store(Arc::new(Snapshot::of(tree, head)));
    }
}
