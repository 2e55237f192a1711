//! The entries this instance committed or read lately, kept in memory so that reading one
//! again does not go to storage.
//!
//! On PostgreSQL every proven read was a query: at one instance it cost the database as much
//! CPU as the instance (39 µs), so reads past a few instances were bounded by the database's
//! cores (docs/performance.md, "A scaling model past two cores"). Most reads are of recent
//! entries: a client verifies what it just logged, a monitor follows the head. The sequencer
//! puts each batch here as it lands, and a read that misses puts what storage returned.
//!
//! A committed entry never changes, so nothing here goes stale: the cache only has to be
//! bounded. It holds at most its budget of bytes, evicting the oldest put first, and only
//! entries a durable checkpoint covers (callers check the index against the head first).
//! Range reads (entry bundles, CT's `get-entries`) are answered from here only when every
//! entry is present, and put nothing: a monitor catching up from index 0 would otherwise
//! push out the recent entries that most reads want.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use signet_core::hash::Hash;

use crate::storage::StoredEntry;

/// Bytes counted for an entry besides its body, SET and attestation: the struct, its two map
/// slots and its place in the eviction order.
const PER_ENTRY: usize = 160;

/// An entry larger than this share of the budget is not kept: one large attestation must not
/// push out hundreds of ordinary entries.
const MAX_SHARE: usize = 64;

/// What [`EntryCache::stats`] reports, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EntryCacheStats {
    pub entries: usize,
    pub bytes: usize,
    pub hits: u64,
    pub misses: u64,
}

pub struct EntryCache {
    budget: usize,
    inner: parking_lot::Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct Inner {
    by_index: HashMap<u64, StoredEntry>,
    by_leaf: HashMap<Hash, u64>,
    /// Indices in the order they were put: the front is evicted first.
    order: VecDeque<u64>,
    bytes: usize,
}

fn cost(e: &StoredEntry) -> usize {
    PER_ENTRY + e.body.len() + e.stamp.as_ref().map_or(0, Vec::len) + e.attestation.as_ref().map_or(0, Vec::len)
}

impl EntryCache {
    /// A cache of at most `budget` bytes; 0 keeps nothing.
    pub fn new(budget: usize) -> EntryCache {
        EntryCache { budget, inner: Default::default(), hits: AtomicU64::new(0), misses: AtomicU64::new(0) }
    }

    /// The entry at `index`, if it is kept.
    pub fn get(&self, index: u64) -> Option<StoredEntry> {
        if self.budget == 0 {
            return None;
        }
        let found = self.inner.lock().by_index.get(&index).cloned();
        self.count(found.is_some());
        found
    }

    /// The entry with leaf hash `leaf`, if it is kept.
    pub fn get_by_leaf(&self, leaf: &Hash) -> Option<StoredEntry> {
        if self.budget == 0 {
            return None;
        }
        let found = {
            let inner = self.inner.lock();
            inner.by_leaf.get(leaf).and_then(|i| inner.by_index.get(i)).cloned()
        };
        self.count(found.is_some());
        found
    }

    /// The `count` entries from `start`, if every one of them is kept.
    pub fn get_range(&self, start: u64, count: u64) -> Option<Vec<StoredEntry>> {
        if self.budget == 0 || count == 0 {
            return None;
        }
        let found = {
            let inner = self.inner.lock();
            // Looked up before anything is copied: a range with a gap copies nothing.
            let range = start..start.saturating_add(count);
            if range.clone().all(|i| inner.by_index.contains_key(&i)) {
                range.map(|i| inner.by_index.get(&i).cloned()).collect::<Option<Vec<_>>>()
            } else {
                None
            }
        };
        self.count(found.is_some());
        found
    }

    /// Keeps `entry`, evicting the oldest kept entries to stay within the budget.
    pub fn put(&self, entry: StoredEntry) {
        self.put_all(std::iter::once(entry));
    }

    /// [`EntryCache::put`] for each of `entries`, under one lock.
    pub fn put_all(&self, entries: impl IntoIterator<Item = StoredEntry>) {
        if self.budget == 0 {
            return;
        }
        let mut inner = self.inner.lock();
        for e in entries {
            let size = cost(&e);
            if size > self.budget / MAX_SHARE || inner.by_index.contains_key(&e.index) {
                continue;
            }
            while inner.bytes + size > self.budget {
                let Some(old) = inner.order.pop_front() else { break };
                inner.evict(old);
            }
            inner.bytes += size;
            inner.order.push_back(e.index);
            inner.by_leaf.insert(e.leaf_hash, e.index);
            inner.by_index.insert(e.index, e);
        }
    }

    pub fn stats(&self) -> EntryCacheStats {
        let inner = self.inner.lock();
        EntryCacheStats {
            entries: inner.by_index.len(),
            bytes: inner.bytes,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    fn count(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl Inner {
    fn evict(&mut self, index: u64) {
        if let Some(e) = self.by_index.remove(&index) {
            self.bytes -= cost(&e);
            // Appends are deduplicated, but an imported log may hold a leaf twice: only the
            // mapping to this index goes.
            if self.by_leaf.get(&e.leaf_hash) == Some(&index) {
                self.by_leaf.remove(&e.leaf_hash);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, body_len: usize) -> StoredEntry {
        let mut leaf = [0u8; 32];
        leaf[..8].copy_from_slice(&index.to_be_bytes());
        StoredEntry { index, leaf_hash: leaf, integrated_time: 1_700_000_000, body: vec![index as u8; body_len], stamp: Some(vec![1; 70]), attestation: None }
    }

    #[test]
    fn keeps_what_it_was_given_by_index_and_by_leaf() {
        let cache = EntryCache::new(1 << 20);
        cache.put_all((0..10).map(|i| entry(i, 500)));
        assert_eq!(cache.get(3), Some(entry(3, 500)));
        assert_eq!(cache.get_by_leaf(&entry(7, 0).leaf_hash), Some(entry(7, 500)));
        assert_eq!(cache.get(10), None);
        assert_eq!(cache.get_by_leaf(&[9; 32]), None);
        let s = cache.stats();
        assert_eq!((s.entries, s.hits, s.misses), (10, 2, 2));
        assert_eq!(s.bytes, 10 * (PER_ENTRY + 570));
    }

    #[test]
    fn stays_within_its_budget_by_evicting_the_oldest_first() {
        let per = PER_ENTRY + 1_000 + 70;
        let cache = EntryCache::new(per * 64 * 4);
        for i in 0..1_000 {
            cache.put(entry(i, 1_000));
            assert!(cache.stats().bytes <= per * 64 * 4);
        }
        let s = cache.stats();
        assert_eq!(s.entries, 256);
        assert_eq!(cache.get(743), None, "the oldest went first");
        assert_eq!(cache.get(744), Some(entry(744, 1_000)));
        assert_eq!(cache.get_by_leaf(&entry(100, 0).leaf_hash), None, "an evicted entry's leaf goes with it");
    }

    #[test]
    fn a_range_is_answered_only_whole() {
        let cache = EntryCache::new(1 << 20);
        cache.put_all((0..5).chain(6..9).map(|i| entry(i, 10)));
        assert_eq!(cache.get_range(0, 5).map(|v| v.len()), Some(5));
        assert_eq!(cache.get_range(3, 4), None, "index 5 is missing");
        assert_eq!(cache.get_range(6, 3).unwrap()[2], entry(8, 10));
        assert_eq!(cache.get_range(0, 0), None);
    }

    #[test]
    fn keeps_nothing_with_no_budget_nor_an_entry_too_large_for_its_share() {
        let off = EntryCache::new(0);
        off.put(entry(1, 10));
        assert_eq!(off.get(1), None);
        assert_eq!(off.stats(), EntryCacheStats::default(), "a cache that is off counts nothing");

        let small = EntryCache::new(64 * 1_000);
        small.put(entry(1, 2_000));
        small.put(entry(2, 500));
        assert_eq!(small.get(1), None, "larger than a 64th of the budget");
        assert_eq!(small.get(2), Some(entry(2, 500)));
    }

    #[test]
    fn an_entry_put_twice_is_counted_once() {
        let cache = EntryCache::new(1 << 20);
        cache.put(entry(4, 100));
        cache.put(entry(4, 100));
        assert_eq!(cache.stats().entries, 1);
        assert_eq!(cache.stats().bytes, PER_ENTRY + 170);
    }
}
