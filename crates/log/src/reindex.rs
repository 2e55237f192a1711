//! Search keys for the entries logged before the store kept them (`signet admin log reindex`).
//!
//! A Rekor v1 entry is found by its signer's identity (schema 3 of the store) and key
//! (schema 4) only if it was logged after those came: the migrations left older entries'
//! keys empty, and a search by email or key misses them. Their bodies hold both
//! ([`crate::rekor::stored_keys`]), so they are found again from the stored entries, one
//! window at a time, beside the running log: the sequencer never waits for more than one
//! window's update, and no byte a client verifies changes.
//!
//! Resumable: each log's cursor (`reindex.<log>` in storage's meta) says how far every entry
//! has been looked at, and moves after each window. A window done twice (a crash between its
//! update and the cursor's, or two instances at once) changes nothing the second time, since
//! an entry that has keys keeps them.

use crate::rekor::stored_keys;
use crate::storage::{Backfill, StorageError};
use crate::Log;

/// Entries looked at per step: one read of their keys, one of the bodies of those without,
/// and one update.
pub const WINDOW: u64 = 1024;

/// What one [`step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Every entry below this has been looked at (the cursor, now stored).
    pub through: u64,
    /// Entries without keys found in the window.
    pub missing: u64,
    /// Of those, the ones given keys (the rest name no signer in a form read here).
    pub indexed: u64,
}

fn cursor_key(log: &Log) -> String {
    format!("reindex.{}", log.storage_id())
}

/// How far `log`'s entries have been looked at: 0 before the first [`step`].
pub fn cursor(log: &Log) -> Result<u64, StorageError> {
    let stored = log.storage().meta(&cursor_key(log))?;
    match stored.as_deref().map(<[u8; 8]>::try_from) {
        None => Ok(0),
        Some(Ok(bytes)) => Ok(u64::from_be_bytes(bytes)),
        Some(Err(_)) => Err(StorageError::Backend(format!("the reindex cursor {} is not 8 bytes", cursor_key(log)))),
    }
}

/// Looks at the entries from `from` up to `until` (at most [`WINDOW`] of them), gives those
/// without keys the keys their bodies name, and stores the cursor past them. Blocking: run it
/// on a thread of its own, never on an async runtime's.
pub fn step(log: &Log, from: u64, until: u64) -> Result<Step, StorageError> {
    let end = until.min(from.saturating_add(WINDOW)).min(log.durable_size());
    if end <= from {
        return Ok(Step { through: from, missing: 0, indexed: 0 });
    }
    let (storage, id) = (log.storage(), log.storage_id());
    let keys = storage.keys(id, from, end - from)?;
    if keys.len() as u64 != end - from {
        return Err(StorageError::Backend(format!(
            "entries {from}..{end} of log {id} are durable, but storage holds the keys of {} of them",
            keys.len()
        )));
    }
    let missing = keys.iter().filter(|k| k.public_key.is_none()).count() as u64;
    let mut backfill = Vec::new();
    if missing > 0 {
        for (entry, k) in storage.entries(id, from, end - from)?.into_iter().zip(&keys) {
            // The keys' order is the entries': both are read by index.
            if k.public_key.is_some() || entry.leaf_hash != k.leaf_hash {
                continue;
            }
            if let Some(found) = stored_keys(&entry.body) {
                backfill.push(Backfill {
                    index: entry.index,
                    identity: found.identity.map(String::into_bytes),
                    public_key: found.public_key.into_bytes(),
                });
            }
        }
        storage.backfill_search_keys(id, &backfill)?;
    }
    storage.put_meta(&cursor_key(log), &end.to_be_bytes())?;
    Ok(Step { through: end, missing, indexed: backfill.len() as u64 })
}
