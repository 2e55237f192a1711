//! `[log]`: batching, pending appends and witnesses of the transparency log.

use serde::Deserialize;

use super::witness::LogWitnesses;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// Flush a batch once it holds this many entries...
    pub batch_max_entries: usize,
    /// ...or this many milliseconds after its first entry arrived.
    pub batch_max_delay_ms: u64,
    /// The CT log's batch delay: every certificate waits for its SCT, so keep it short.
    pub ct_batch_max_delay_ms: u64,
    /// Appends each Rekor log admits at once (parsed, verified, waiting for their batch);
    /// past it, 503 with Retry-After at once. 0 is no bound. See docs/log.md, "Overload".
    pub max_pending_appends: usize,
    /// MiB of full tiles each log keeps in memory for proofs into its older entries (16 KiB
    /// per 256 entries). The right edge of the tree is always in memory. See docs/log.md.
    pub tile_cache_mb: usize,
    /// MiB of entries each log keeps in memory, those it committed or read lately, so that
    /// reading one again does not go to storage (on PostgreSQL, a query). See docs/log.md.
    pub entry_cache_mb: usize,
    /// Witnesses that cosign the Rekor v2 log's checkpoints (docs/witness.md); none by default.
    pub witnesses: LogWitnesses,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings { batch_max_entries: 256, batch_max_delay_ms: 10, ct_batch_max_delay_ms: 2, max_pending_appends: 512, tile_cache_mb: 64, entry_cache_mb: 64, witnesses: Default::default() }
    }
}
