//! Reads of the durable log: its head, proofs, tiles, entries and searches. None of them
//! waits for the sequencer.

use std::sync::Arc;

use signet_core::hash::Hash;

use super::Log;
use crate::checkpoint::SignedCheckpoint;
use crate::merkle::ProofError;
use crate::storage::{StorageError, StoredEntry};
use crate::tiles::TILE_WIDTH;

/// A page of a search by digest, identity or key ([`Log::indices_by_digest`], [`Log::indices_by_identity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestPage {
    pub indices: Vec<u64>,
    /// Pass as `after` for the next page; `None` on the last one.
    pub next_after: Option<u64>,
}

impl Log {
    /// The newest durable checkpoint.
    pub fn head(&self) -> Arc<SignedCheckpoint> {
        self.shared.head()
    }

    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
        let snap = self.shared.snapshot();
        snap.with_edge(size, |edge| snap.tree.inclusion_proof_at(edge, index))?
    }

    /// The newest durable checkpoint and the inclusion proof of `index` against it, from one
    /// state of the log.
    pub fn inclusion_proof_at_head(&self, index: u64) -> Result<(Arc<SignedCheckpoint>, Vec<Hash>), ProofError> {
        let snap = self.shared.snapshot();
        let proof = snap.with_edge(snap.size(), |edge| snap.tree.inclusion_proof_at(edge, index))??;
        Ok((snap.head.clone(), proof))
    }

    pub fn consistency_proof(&self, first: u64, second: u64) -> Result<Vec<Hash>, ProofError> {
        let snap = self.shared.snapshot();
        snap.with_edge(second, |edge| snap.tree.consistency_proof_at(first, edge))?
    }

    pub fn root(&self, size: u64) -> Result<Hash, ProofError> {
        let snap = self.shared.snapshot();
        snap.check(size)?;
        snap.tree.root(size)
    }

    /// Leaf hash at `index`, if it is durable.
    pub fn leaf_hash(&self, index: u64) -> Result<Option<Hash>, StorageError> {
        self.shared.snapshot().tree.leaf(index)
    }

    /// (tiles cached, hits, misses) of the tree's tile cache.
    pub fn tile_cache_stats(&self) -> (usize, u64, u64) {
        self.shared.snapshot().tree.cache_stats()
    }

    /// Entries appended, batch sizes and integration latency since start ([`crate::stats`]).
    pub fn stats(&self) -> &crate::stats::LogStats {
        &self.shared.stats
    }

    /// The durable size: what the newest checkpoint covers.
    pub fn durable_size(&self) -> u64 {
        self.shared.durable_size()
    }

    /// The size of the newest checkpoint in storage, read now (a follower's head may trail it).
    pub fn stored_size(&self) -> Result<u64, StorageError> {
        Ok(self.shared.storage.latest_checkpoint(self.shared.id)?.map_or(0, |c| c.size))
    }

    /// The hashes of tile `index` at tile level `level`, cut at `width` nodes, if the durable
    /// tree has that many; the bytes served at /tile/<L>/<N>[.p/<W>].
    pub fn tile(&self, level: u8, index: u64, width: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let snap = self.shared.snapshot();
        let available = (snap.size() >> (8 * level as u32)).saturating_sub(index.saturating_mul(TILE_WIDTH));
        if width == 0 || width > TILE_WIDTH || available < width {
            return Ok(None);
        }
        Ok(Some(snap.tree.level_slice(8 * level as u32, index * TILE_WIDTH, width)?.concat()))
    }

    // Reads run on the calling task. They are short, page-cache-served point reads, cheaper
    // than the thread handoff `spawn_blocking` would add; commits, which fsync, never run here.
    // Each looks in the entry cache first (`crate::entrycache`).

    pub fn entry(&self, index: u64) -> Result<Option<StoredEntry>, StorageError> {
        if index >= self.durable_size() {
            return Ok(None);
        }
        if let Some(e) = self.shared.entry_cache.get(index) {
            return Ok(Some(e));
        }
        let found = self.shared.storage.entry(self.shared.id, index)?;
        Ok(self.kept(found))
    }

    pub fn entries(&self, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError> {
        let size = self.durable_size();
        let count = count.min(size.saturating_sub(start));
        if let Some(all) = self.shared.entry_cache.get_range(start, count) {
            return Ok(all);
        }
        self.shared.storage.entries(self.shared.id, start, count)
    }

    /// [`Log::entry`] from an async handler: on a networked backend the wait for the
    /// database holds no runtime thread (see `Storage::entry_async`).
    pub async fn entry_async(&self, index: u64) -> Result<Option<StoredEntry>, StorageError> {
        if index >= self.durable_size() {
            // A follower may just lag: an entry written through another instance moments ago
            // is looked for once before it is called missing.
            if !self.caught_up_past(index).await {
                return Ok(None);
            }
        }
        if let Some(e) = self.shared.entry_cache.get(index) {
            return Ok(Some(e));
        }
        let found = self.shared.storage.entry_async(self.shared.id, index).await?;
        Ok(self.kept(found))
    }

    /// [`Log::entries`] from an async handler.
    pub async fn entries_async(&self, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError> {
        let size = self.durable_size();
        let count = count.min(size.saturating_sub(start));
        if let Some(all) = self.shared.entry_cache.get_range(start, count) {
            return Ok(all);
        }
        self.shared.storage.entries_async(self.shared.id, start, count).await
    }

    /// An entry read from storage, kept for the next read. Only one the head covers is
    /// kept: storage may hold entries committed before this instance's head reaches them.
    fn kept(&self, found: Option<StoredEntry>) -> Option<StoredEntry> {
        if let Some(e) = found.as_ref().filter(|e| e.index < self.durable_size()) {
            self.shared.entry_cache.put(e.clone());
        }
        found
    }

    /// The index of the durable entry with leaf hash `leaf`.
    pub async fn find_leaf(&self, leaf: &Hash) -> Result<Option<u64>, StorageError> {
        let size = self.durable_size();
        let found = self.shared.storage.find_leaves_async(self.shared.id, vec![*leaf]).await?;
        // On shared storage an entry may be committed before this instance's head covers it.
        Ok(found.into_iter().map(|(_, i)| i).find(|&i| i < size))
    }

    /// The durable entry with leaf hash `leaf`.
    pub async fn entry_by_leaf(&self, leaf: &Hash) -> Result<Option<StoredEntry>, StorageError> {
        let size = self.durable_size();
        if let Some(e) = self.shared.entry_cache.get_by_leaf(leaf).filter(|e| e.index < size) {
            return Ok(Some(e));
        }
        let found = self.shared.storage.entry_by_leaf_async(self.shared.id, *leaf).await?;
        // As in find_leaf: committed on shared storage, but not yet covered by this head.
        Ok(self.kept(found.filter(|e| e.index < size)))
    }

    /// What the log's entry cache holds, and how often reads found their entry there.
    pub fn entry_cache_stats(&self) -> crate::entrycache::EntryCacheStats {
        self.shared.entry_cache.stats()
    }

    /// One page of the durable entries with digest key `digest` (`sha256:<hex>`), oldest
    /// first, starting after index `after`: at most `limit` indices, and the index to ask
    /// after for the next page, if there may be more.
    ///
    /// The work is bounded by `limit` whatever the digest: storage reads one index range of
    /// `limit + 1` rows. (A digest logged a million times must not make one search read a
    /// million.)
    pub async fn indices_by_digest(&self, digest: &[u8], after: Option<u64>, limit: usize) -> Result<DigestPage, StorageError> {
        let size = self.durable_size();
        let indices =
            self.shared.storage.find_digest_async(self.shared.id, digest.to_vec(), after, limit.saturating_add(1)).await?;
        Ok(page_of(indices, size, limit))
    }

    /// [`Log::indices_by_digest`] by signing identity key (see [`crate::rekor::identity_key`]),
    /// with the same bound on the work. Entries logged before identities were kept have none.
    pub async fn indices_by_identity(&self, identity: &[u8], after: Option<u64>, limit: usize) -> Result<DigestPage, StorageError> {
        let size = self.durable_size();
        let indices =
            self.shared.storage.find_identity_async(self.shared.id, identity.to_vec(), after, limit.saturating_add(1)).await?;
        Ok(page_of(indices, size, limit))
    }

    /// [`Log::indices_by_digest`] by the signer's key index (see
    /// [`crate::rekor::public_key_index`]). Entries logged before signers' keys were kept have none.
    pub async fn indices_by_public_key(&self, key: &[u8], after: Option<u64>, limit: usize) -> Result<DigestPage, StorageError> {
        let size = self.durable_size();
        let indices = self.shared.storage.find_public_key_async(self.shared.id, key.to_vec(), after, limit.saturating_add(1)).await?;
        Ok(page_of(indices, size, limit))
    }

    /// On a follower, catches up now and says whether the log then holds `index`.
    async fn caught_up_past(&self, index: u64) -> bool {
        let Some(f) = self.follower.as_ref().filter(|_| self.tx.read().is_none()) else { return false };
        // Twice at most: the poll in progress when the read came may have started before the
        // entry was committed.
        for _ in 0..2 {
            f.poll_now().await;
            if index < self.durable_size() {
                return true;
            }
        }
        false
    }
}


/// A page from up to `limit + 1` found indices: those the head covers (on shared storage an
/// entry may be committed before this instance's head covers it), and whether there is more.
fn page_of(mut indices: Vec<u64>, size: u64, limit: usize) -> DigestPage {
    indices.retain(|&i| i < size);
    let more = indices.len() > limit;
    indices.truncate(limit);
    let next_after = if more { indices.last().copied() } else { None };
    DigestPage { indices, next_after }
}
