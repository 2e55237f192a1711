//! Durable storage for the logs, behind one trait so that backends can be swapped.
//!
//! The contract, in Sunlight's words: when [`Storage::commit`] returns, the batch is fully
//! persisted. A batch is the entries of one sequencer flush, the tiles they changed and the
//! checkpoint that covers them, and it lands whole or not at all.
//!
//! The log's tasks (the sequencer, a follower, a reconcile) await storage through the
//! trait's async methods ([`Storage::start_commit`], the `*_async` reads, [`Queue`]'s): a
//! backend whose calls are network round trips (PostgreSQL) runs them on its own runtime and
//! no thread waits; the embedded one (SQLite) commits on a blocking thread, for its fsync,
//! and reads in place, where a page-cache read costs less than a hand-off. The blocking
//! methods remain for callers that are not async (`signet admin`, start-up).
//!
//! Storage also answers lookups by leaf hash (dedupe) and by artifact digest, signing
//! identity or signer's key (search), from
//! indexes of its own, so that no instance holds an index of the whole log in memory:
//! PostgreSQL from its B-tree indexes, SQLite from a derived index file ([`sqlite`]).
//!
//! - [`sqlite`]: the embedded default.
//! - [`postgres`]: PostgreSQL, for many instances on one database (and their [`Queue`]).
//! - [`StorageUrl`]: which backend a `storage = "…"` setting names.

pub mod postgres;
mod sqlite;
mod url;

pub use postgres::{read_meta as read_shared_meta, Lease, PostgresStorage, TufFile};
pub use sqlite::{memory_used as sqlite_memory_used, SqliteStorage};
pub use url::{migrate, open, schema_version, shard_records, StorageUrl, UrlError};

use std::sync::Arc;

use signet_core::hash::Hash;

/// Which log a row belongs to. Several logs share one store.
pub type LogId = u8;

/// What the shard registries say, as [`shard_records`] reads them.
#[derive(Debug, Default)]
pub struct ShardRecords {
    /// `(key, value)` of each shard record.
    pub records: Vec<(String, Vec<u8>)>,
    /// Logs frozen in storage.
    pub frozen: Vec<LogId>,
}

/// An entry as the sequencer hands it to storage.
#[derive(Debug, Clone)]
pub struct NewEntry {
    pub index: u64,
    pub leaf_hash: Hash,
    /// The artifact digest the entry is searchable by (`sha256:<hex>`), if any.
    pub digest: Option<Vec<u8>>,
    /// The signing identity the entry is searchable by (see [`crate::rekor::identity_key`]), if any.
    pub identity: Option<Vec<u8>>,
    /// The signer's key or certificate the entry is searchable by (see
    /// [`crate::rekor::public_key_index`]), if any.
    pub public_key: Option<Vec<u8>>,
    pub body: Vec<u8>,
    /// Per-entry signature made at sequencing time (the SET on the Rekor v1 log).
    pub stamp: Option<Vec<u8>>,
    /// The entry's own integrated time, where it is not the batch's: an entry copied from
    /// another log keeps the time that log gave it ([`crate::import`]).
    pub integrated_time: Option<i64>,
    /// Kept beside the entry and read with it (an intoto entry's attestation).
    pub attestation: Option<Attestation>,
}

/// Bytes an entry names but its body leaves out (an intoto entry's in-toto statement), kept
/// once per content: entries with the same attestation share one stored copy, found by its
/// SHA-256, which the entry's row records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    pub digest: Hash,
    pub data: Vec<u8>,
}

impl Attestation {
    pub fn new(data: Vec<u8>) -> Self {
        Attestation { digest: signet_core::hash::sha256(&data), data }
    }
}

/// An entry as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub index: u64,
    pub leaf_hash: Hash,
    pub integrated_time: i64,
    pub body: Vec<u8>,
    pub stamp: Option<Vec<u8>>,
    /// Its attestation's bytes, if it was logged with one ([`NewEntry::attestation`]).
    pub attestation: Option<Vec<u8>>,
}

/// The lookup keys of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKeys {
    pub leaf_hash: Hash,
    pub digest: Option<Vec<u8>>,
    /// `None` also for every entry logged before identities were kept.
    pub identity: Option<Vec<u8>>,
    /// `None` also for every entry logged before signers' keys were kept.
    pub public_key: Option<Vec<u8>>,
}

/// The search keys found for an entry logged without them (see [`crate::reindex`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backfill {
    pub index: u64,
    pub identity: Option<Vec<u8>>,
    pub public_key: Vec<u8>,
}

/// One C2SP tile as stored: the concatenated hashes of up to 256 nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tile {
    pub level: u8,
    pub index: u64,
    pub hashes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    pub size: u64,
    pub note: String,
}

/// A full leaf tile with every node inside it: tree levels 0 to 7 of 256 entries, the 256
/// leaf hashes then the 128, 64, … 2 nodes above them (510 hashes, 16,320 bytes). Stored so
/// that a proof reaching an old part of the log reads one row instead of 256 and hashes
/// nothing (see [`crate::tree`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafTile {
    pub index: u64,
    pub nodes: Vec<u8>,
}

/// Everything one sequencer flush makes durable, in one commit.
#[derive(Debug, Clone)]
pub struct Batch {
    pub log: LogId,
    pub integrated_time: i64,
    pub entries: Vec<NewEntry>,
    pub tiles: Vec<Tile>,
    /// The leaf tiles this batch fills.
    pub leaf_tiles: Vec<LeafTile>,
    pub checkpoint: StoredCheckpoint,
}

impl Batch {
    /// The size of the checkpoint this batch extends: its entries are the indices from there on.
    pub fn previous_size(&self) -> u64 {
        self.checkpoint.size.saturating_sub(self.entries.len() as u64)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage backend failed: {0}")]
    Backend(String),
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
    /// The disk (or the database's disk) is full: nothing was written, and writes succeed
    /// again once space returns.
    #[error("storage is full; nothing was written ({0})")]
    Full(String),
    /// The database cannot be reached right now, or did not answer in time; a retry may
    /// succeed. A read wrote nothing; a commit's outcome is unknown until the log has
    /// reconciled with storage (`reconcile.rs`), so the text claims neither.
    #[error("storage is unavailable ({0})")]
    Unavailable(String),
    /// The stored checkpoint is not the one this batch extends: another writer moved the log,
    /// or an earlier commit whose answer was lost did land. Nothing was written.
    #[error("log {log} was moved by another writer: this batch extends size {expected}, but the stored checkpoint has size {stored}")]
    Conflict { log: LogId, expected: u64, stored: u64 },
    /// Another instance took the sequencer lease over: this one may no longer write.
    #[error("not the sequencer any more; nothing was written: {0}")]
    Fenced(String),
    /// The tree was frozen at `size` (a shard rotation, perhaps by another instance): it
    /// never grows again. Nothing was written; the entries belong in the next shard.
    #[error("log {log} is frozen at size {size} (the log rotated to a new shard); nothing was written")]
    Frozen { log: LogId, size: u64 },
}

/// An entry submitted by an instance that does not sequence, for the one that does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedEntry {
    pub leaf_hash: Hash,
    pub digest: Option<Vec<u8>>,
    pub identity: Option<Vec<u8>>,
    pub public_key: Option<Vec<u8>>,
    pub body: Vec<u8>,
    /// Bytes made at submission to keep beside the entry (the CT log's precertificate).
    pub extra: Option<Vec<u8>>,
    pub attestation: Option<Attestation>,
}

/// Where instances that do not sequence leave their entries for the one that does: Trillian's
/// unsequenced table. Entries wait here until the sequencer has logged them (or found them
/// already logged) and only then are forgotten, so a sequencer that dies mid-way loses none:
/// its successor logs them, and repeats are deduplicated like any other.
pub trait Queue: Send + Sync + 'static {
    /// Queues `entries` in one atomic write.
    fn enqueue(&self, log: LogId, entries: &[QueuedEntry]) -> Result<(), StorageError>;
    /// Up to `limit` queued entries of `log`, oldest first, with their queue ids. They stay
    /// queued until [`Queue::forget`].
    fn dequeue(&self, log: LogId, limit: usize) -> Result<Vec<(i64, QueuedEntry)>, StorageError>;
    fn forget(&self, log: LogId, ids: &[i64]) -> Result<(), StorageError>;
    /// Drops every entry queued for `log`, once it is frozen: no one will log them there, and
    /// their appends were told to retry, which puts them in the next shard. Returns how many.
    fn discard(&self, log: LogId) -> Result<u64, StorageError>;

    /// [`Queue::enqueue`] for the log's tasks (see [`Storage::entry_async`]).
    fn enqueue_async(&self, log: LogId, entries: Vec<QueuedEntry>) -> ReadFuture<'_, ()> {
        Box::pin(std::future::ready(self.enqueue(log, &entries)))
    }

    /// [`Queue::dequeue`] for the log's tasks.
    fn dequeue_async(&self, log: LogId, limit: usize) -> ReadFuture<'_, Vec<(i64, QueuedEntry)>> {
        Box::pin(std::future::ready(self.dequeue(log, limit)))
    }

    /// [`Queue::forget`] for the log's tasks.
    fn forget_async(&self, log: LogId, ids: Vec<i64>) -> ReadFuture<'_, ()> {
        Box::pin(std::future::ready(self.forget(log, &ids)))
    }
}

/// A read as a future ([`Storage::entry_async`]).
pub type ReadFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StorageError>> + Send + 'a>>;

/// A commit under way ([`Storage::start_commit`]). The batch comes back with the outcome, so
/// that a commit whose outcome is unknown can be compared with what storage holds. A task
/// that ends without an answer (cancelled at shutdown) is such a commit too.
pub type CommitTask = tokio::task::JoinHandle<(Batch, Result<(), StorageError>)>;

/// [`Storage::commit`] on a blocking thread, a panic in the backend caught as a failed commit
/// (whose outcome is unknown, like a lost answer).
fn commit_on_blocking_thread<S: Storage + ?Sized>(storage: Arc<S>, batch: Batch) -> CommitTask {
    tokio::task::spawn_blocking(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| storage.commit(&batch)))
            .unwrap_or_else(|_| Err(StorageError::Backend("the commit panicked".into())));
        (batch, result)
    })
}

pub trait Storage: Send + Sync + 'static {
    /// Persists `batch` atomically. When this returns `Ok`, the batch survives a crash.
    ///
    /// The checkpoint moves only from [`Batch::previous_size`] (a compare-and-swap, as
    /// Sunlight's is): if the stored checkpoint has another size, nothing is written and the
    /// answer is [`StorageError::Conflict`]. A log with no stored checkpoint takes any.
    fn commit(&self, batch: &Batch) -> Result<(), StorageError>;

    /// Starts [`Storage::commit`] of `batch` and returns at once. The default commits on a
    /// blocking thread (SQLite's fsync must not hold a runtime worker); a backend whose commit
    /// is a network round trip overrides it to run on its own runtime, with no thread waiting.
    fn start_commit(self: Arc<Self>, batch: Batch) -> CommitTask {
        commit_on_blocking_thread(self, batch)
    }

    /// Freezes `log` at its stored size, which it returns: from then on every commit to it is
    /// refused ([`StorageError::Frozen`]), whichever instance makes it, so a tree frozen by a
    /// rotation can't grow past the size its record names. Freezing a frozen log returns its
    /// size again. SQLite has one writer, the process holding the data dir, which freezes its
    /// sequencer first, so there it only reads the size.
    fn freeze(&self, log: LogId) -> Result<u64, StorageError>;

    /// The newest committed checkpoint of `log`, if it has one.
    fn latest_checkpoint(&self, log: LogId) -> Result<Option<StoredCheckpoint>, StorageError>;

    /// [`Storage::latest_checkpoint`] for the log's tasks (see [`Storage::entry_async`]).
    fn latest_checkpoint_async(&self, log: LogId) -> ReadFuture<'_, Option<StoredCheckpoint>> {
        Box::pin(std::future::ready(self.latest_checkpoint(log)))
    }

    /// All stored tiles of one tile level, in index order.
    fn tiles(&self, log: LogId, level: u8) -> Result<Vec<Tile>, StorageError>;

    /// One stored tile (level ≥ 1), if it is stored.
    fn tile(&self, log: LogId, level: u8, index: u64) -> Result<Option<Tile>, StorageError>;

    /// One full leaf tile with its inner nodes ([`LeafTile::nodes`]), if it is stored. Logs
    /// written before leaf tiles were stored lack the older ones; their nodes are in [`Storage::keys`].
    fn leaf_tile(&self, log: LogId, index: u64) -> Result<Option<Vec<u8>>, StorageError>;

    /// Which of `leaves` the log holds: (position in `leaves`, index of the entry). Every
    /// committed entry is found, from the moment its commit returns. What dedupe asks, for a
    /// whole batch in one call.
    fn find_leaves(&self, log: LogId, leaves: &[Hash]) -> Result<Vec<(usize, u64)>, StorageError>;

    /// [`Storage::find_leaves`] for callers on an async runtime (see [`Storage::entry_async`]).
    fn find_leaves_async(&self, log: LogId, leaves: Vec<Hash>) -> ReadFuture<'_, Vec<(usize, u64)>> {
        Box::pin(std::future::ready(self.find_leaves(log, &leaves)))
    }

    /// The committed entry with leaf hash `leaf`, if there is one: [`Storage::find_leaves`]
    /// then [`Storage::entry`], which a backend may answer in fewer reads.
    fn entry_by_leaf_async(&self, log: LogId, leaf: Hash) -> ReadFuture<'_, Option<StoredEntry>> {
        Box::pin(async move {
            match self.find_leaves_async(log, vec![leaf]).await?.first() {
                Some(&(_, index)) => self.entry_async(log, index).await,
                None => Ok(None),
            }
        })
    }

    /// The indices of committed entries with digest key `digest` (`sha256:<hex>`), oldest
    /// first, after index `after`: at most `limit`.
    fn find_digest_async(&self, log: LogId, digest: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>>;

    /// [`Storage::find_digest_async`] by identity key instead. Entries committed before the
    /// store kept identities have none, so are found by digest only.
    fn find_identity_async(&self, log: LogId, identity: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>>;

    /// [`Storage::find_digest_async`] by the signer's key index (see
    /// [`crate::rekor::public_key_index`]). Entries committed before the store kept signers'
    /// keys have none.
    fn find_public_key_async(&self, log: LogId, key: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>>;

    /// Keys of entries `start..start + count`, in index order (startup rebuilds from these).
    fn keys(&self, log: LogId, start: u64, count: u64) -> Result<Vec<EntryKeys>, StorageError>;

    /// [`Storage::keys`] for the log's tasks (a reconcile, a follower catching up).
    fn keys_async(&self, log: LogId, start: u64, count: u64) -> ReadFuture<'_, Vec<EntryKeys>> {
        Box::pin(std::future::ready(self.keys(log, start, count)))
    }

    fn entry(&self, log: LogId, index: u64) -> Result<Option<StoredEntry>, StorageError>;

    /// Entries `start..start + count` that exist, in index order.
    fn entries(&self, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError>;

    /// The integrated time and stamp of each of `indices` that exists, in any order: what the
    /// answer to an append carries, for a follower answering appends it queued.
    fn receipts(&self, log: LogId, indices: &[u64]) -> Result<Vec<(u64, i64, Option<Vec<u8>>)>, StorageError> {
        let mut out = Vec::with_capacity(indices.len());
        for &i in indices {
            if let Some(e) = self.entry(log, i)? {
                out.push((i, e.integrated_time, e.stamp));
            }
        }
        Ok(out)
    }

    /// [`Storage::receipts`] for the log's tasks.
    fn receipts_async(&self, log: LogId, indices: Vec<u64>) -> ReadFuture<'_, Vec<(u64, i64, Option<Vec<u8>>)>> {
        Box::pin(std::future::ready(self.receipts(log, &indices)))
    }

    /// Gives each entry in `keys` that has no signer's key index the identity and key found
    /// for it (entries logged before the store kept them: [`crate::reindex`]). An entry that
    /// has one keeps it, so running this twice, or on two instances at once, changes nothing
    /// more. Entries are otherwise immutable, and this changes no byte a client can verify.
    fn backfill_search_keys(&self, log: LogId, keys: &[Backfill]) -> Result<(), StorageError>;

    /// Sets the named value `key`, replacing any before: progress marks, such as the
    /// reindex's cursor (unlike [`Storage::get_or_init_meta`]'s values, which never change).
    fn put_meta(&self, key: &str, value: &[u8]) -> Result<(), StorageError>;

    /// A small named value, set once and read back forever after (tree IDs and the like).
    fn get_or_init_meta(&self, key: &str, init: &[u8]) -> Result<Vec<u8>, StorageError>;

    /// The named value [`Storage::get_or_init_meta`] set, if it was set.
    fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError>;

    /// [`Storage::entry`] for callers on an async runtime. The default reads in place, which
    /// suits SQLite's page-cache reads; a backend whose reads wait on a network round trip
    /// overrides it, so that the wait does not hold one of the runtime's few threads.
    fn entry_async(&self, log: LogId, index: u64) -> ReadFuture<'_, Option<StoredEntry>> {
        Box::pin(std::future::ready(self.entry(log, index)))
    }

    /// [`Storage::entries`] for callers on an async runtime (see [`Storage::entry_async`]).
    fn entries_async(&self, log: LogId, start: u64, count: u64) -> ReadFuture<'_, Vec<StoredEntry>> {
        Box::pin(std::future::ready(self.entries(log, start, count)))
    }
}
