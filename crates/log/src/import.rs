//! A copy of another log's tree, entry by entry, into a storage namespace of its own (`signet
//! import rekor`): each entry with the time and stamp that log gave it, the tiles signet's
//! proofs read, and in the end that log's own signed checkpoint.
//!
//! Nothing copied is trusted before [`Import::finish`]: each leaf hash is computed here from
//! the entry's body, and the root over all of them must be the root that the log signed at
//! that size. That proves every entry's place at once, which is what an inclusion proof per
//! entry would prove, for the price of hashing the tree once.
//!
//! Resumable: entries are committed a batch at a time, and [`Import::open`] goes on after the
//! prefix a run cut short left. Until `finish` the stored checkpoint is a placeholder that
//! verifies under no key, and the namespace is no shard: a log is served only once a shard
//! record names it.

use std::sync::Arc;

use signet_core::hash::Hash;
use signet_core::note::{Checkpoint, NoteError};

use crate::merkle;
use crate::sequencer::{changed_tiles, filled_leaf_tiles};
use crate::storage::{Batch, LogId, NewEntry, Storage, StorageError, StoredCheckpoint};
use crate::tree::Tree;

/// The checkpoint note of a copy in progress: no signature line, so no reader takes it for a
/// log's checkpoint.
pub const IN_PROGRESS: &str = "signet: import in progress\n";

/// One entry as the other log served it, and what it is searchable by.
#[derive(Debug, Clone)]
pub struct CopiedEntry {
    pub body: Vec<u8>,
    pub integrated_time: i64,
    /// Its per-entry signature (a Rekor v1 SET), kept as is.
    pub stamp: Option<Vec<u8>>,
    pub digest: Option<Vec<u8>>,
    pub identity: Option<Vec<u8>>,
    pub public_key: Option<Vec<u8>>,
    /// An intoto entry's statement, where the log served it.
    pub attestation: Option<crate::storage::Attestation>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("log {0} holds a finished log, not a copy in progress")]
    Finished(LogId),
    #[error("the copied tree does not match the signed checkpoint: {0}")]
    Mismatch(String),
    #[error("the checkpoint does not verify: {0}")]
    Checkpoint(#[source] NoteError),
}

/// A copy under way in one storage namespace.
pub struct Import {
    storage: Arc<dyn Storage>,
    log: LogId,
    tree: Tree,
}

impl Import {
    /// Opens the copy in namespace `log`: empty, or the prefix an earlier run committed.
    /// Blocking (storage reads).
    pub fn open(storage: Arc<dyn Storage>, log: LogId) -> Result<Import, ImportError> {
        let (tree, stored) = crate::log::reopen(storage.clone(), log, crate::DEFAULT_TILE_CACHE).map_err(|e| match e {
            crate::OpenError::Storage(s) => ImportError::Storage(s),
            other => ImportError::Storage(StorageError::Corrupt(other.to_string())),
        })?;
        if stored.is_some_and(|c| c.note != IN_PROGRESS) {
            return Err(ImportError::Finished(log));
        }
        Ok(Import { storage, log, tree })
    }

    /// Entries copied so far: the index the next one takes.
    pub fn size(&self) -> u64 {
        self.tree.size()
    }

    /// Appends `entries` after those copied, durable on return.
    pub fn append(&mut self, entries: Vec<CopiedEntry>) -> Result<(), ImportError> {
        if entries.is_empty() {
            return Ok(());
        }
        let old = self.tree.size();
        let mut stored = Vec::with_capacity(entries.len());
        for (i, e) in entries.into_iter().enumerate() {
            let leaf_hash = merkle::leaf_hash(&e.body);
            self.tree.push(leaf_hash);
            stored.push(NewEntry {
                index: old + i as u64,
                leaf_hash,
                digest: e.digest,
                identity: e.identity,
                public_key: e.public_key,
                body: e.body,
                stamp: e.stamp,
                integrated_time: Some(e.integrated_time),
                attestation: e.attestation,
            });
        }
        let new = self.tree.size();
        let batch = Batch {
            log: self.log,
            integrated_time: 0,
            entries: stored,
            tiles: changed_tiles(&self.tree, old, new)?,
            leaf_tiles: filled_leaf_tiles(&self.tree, old, new)?,
            checkpoint: StoredCheckpoint { size: new, note: IN_PROGRESS.into() },
        };
        if let Err(e) = self.storage.commit(&batch) {
            // Memory back to what storage holds, so that a retry appends the same entries.
            self.tree.truncate(old);
            return Err(e.into());
        }
        self.tree.settle(new);
        Ok(())
    }

    /// The root of the entries copied so far.
    pub fn root(&self) -> Result<Hash, ImportError> {
        self.tree.root(self.tree.size()).map_err(|e| ImportError::Mismatch(e.to_string()))
    }

    /// Ends the copy with the other log's signed checkpoint `note`, whose signature `verify`
    /// checks: its size must be the number of entries copied and its root their root. The
    /// note becomes the stored checkpoint, and the namespace is frozen at that size.
    pub fn finish(self, note: &str, verify: impl FnOnce(&str) -> Result<Checkpoint, NoteError>) -> Result<Checkpoint, ImportError> {
        let checkpoint = verify(note).map_err(ImportError::Checkpoint)?;
        let size = self.tree.size();
        if checkpoint.size != size {
            return Err(ImportError::Mismatch(format!("the checkpoint is of {} entries, {size} were copied", checkpoint.size)));
        }
        let root = self.root()?;
        if checkpoint.root_hash != root {
            return Err(ImportError::Mismatch(format!(
                "the {size} entries copied hash to root {}, the checkpoint signs {}",
                hex::encode(root),
                hex::encode(checkpoint.root_hash)
            )));
        }
        let batch = Batch {
            log: self.log,
            integrated_time: 0,
            entries: Vec::new(),
            tiles: Vec::new(),
            leaf_tiles: Vec::new(),
            checkpoint: StoredCheckpoint { size, note: note.to_string() },
        };
        self.storage.commit(&batch)?;
        self.storage.freeze(self.log)?;
        Ok(checkpoint)
    }
}
