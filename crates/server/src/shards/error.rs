//! What the shards of a log fail with: their keys, their records in storage, the public
//! lists, rotating and importing. Each message names the file, shard or record at fault.

use std::path::PathBuf;

use signet_keys::{KeyError, KeySource};
use signet_log::storage::StorageError;
use signet_log::AppendError;

use super::kind::Kind;
use super::sealed::SealError;
use crate::config::ConfigError;
use crate::datadir::LockError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    #[error("--log {name:?}: expected rekor-v1, rekor-v2 or ct")]
    UnknownLog { name: String },
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Seal(#[from] SealError),
    /// Freezing a log, or catching up with a frozen one.
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Encoding a record (a bug).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A blocking task that panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("writing {}: {source}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", .path.display())]
    Pem { path: PathBuf, source: signet_core::pem::PemError },
    #[error("{}: expected a PUBLIC KEY block, found {found}", .path.display())]
    NotPublicKey { path: PathBuf, found: String },
    #[error("{}: {source}; `signet serve` rewrites it at start", .path.display())]
    PublicJson { path: PathBuf, source: serde_json::Error },
    #[error("{}: {} is not a list; `signet serve` rewrites it at start", .path.display(), .kind.registry_name())]
    PublicNotAList { path: PathBuf, kind: Kind },
    #[error("{}: a shard without spki; `signet serve` rewrites it at start", .path.display())]
    PublicNoSpki { path: PathBuf },
    #[error("log-shards.json: {0}")]
    PublicWrite(#[source] std::io::Error),
    #[error("{}: {source}; `signet serve` takes it again from storage", .path.display())]
    PreparedJson { path: PathBuf, source: serde_json::Error },
    #[error("storage's {name}: {source}")]
    StoredJson { name: String, source: serde_json::Error },
    #[error("storage's {name} names another key than the one prepared for {} shard {number}", .kind.title())]
    PreparedOther { name: String, kind: Kind, number: u32 },
    #[error("this instance cannot hand the new key to the others: its keys/shard-seal.key is missing, or is not the one the database's other instances share (its start-up log says which); copy theirs here and restart, or prepare through another instance")]
    CannotHandPrepared,
    #[error("{}: name the {} key by its object (object=…), so that its shards' keys can be named beside it", .zero, .kind.title())]
    NoObject { zero: KeySource, kind: Kind },
    #[error("making {key}: {error}")]
    Making { key: KeySource, #[source] error: KeyError },
    #[error("{} is missing: the key of {} shard {number} (made by `signet admin log rotate --log {}`); copy it from the instance that rotated the log", .path.display(), .kind.title(), .kind.cli_name())]
    MissingKey { path: PathBuf, kind: Kind, number: u32 },
    /// `key`: its file or URI.
    #[error("{key} is not the key {} shard {number} was started with", .kind.title())]
    NotTheKey { key: String, kind: Kind, number: u32 },
    #[error("{} is not the key shard {number} was started with (an earlier rotation made another)", .path.display())]
    StartedWithOther { path: PathBuf, number: u32 },
    #[error("this data dir's keys/shard-seal.key is missing or is not the one the database's instances share")]
    NoSealKey,
    #[error("{} shard {number} is sealed in storage, but this data dir's keys/shard-seal.key is missing or is not the one this database's instances share (see the warning above): copy theirs here", .kind.title())]
    SealedWithoutSealKey { kind: Kind, number: u32 },
    #[error("the sealed key {name} is not the key {} shard {number} was started with", .kind.title())]
    SealedNotTheKey { name: String, kind: Kind, number: u32 },
    #[error("making the new shard's key failed")]
    MakeKey(#[source] KeyError),
    #[error("the {} log has room for {} shards; it has them all", .kind.title(), .kind.room())]
    Full { kind: Kind },
    #[error("the log has no shards")]
    NoShards,
    #[error("the {} log's newest shard is frozen and none follows it: a rotation was cut short; run `signet admin log rotate --log {}` again to finish it", .kind.title(), .kind.cli_name())]
    CutShort { kind: Kind },
    /// Rekor v1's shards, as its online rotation says it.
    #[error("shard {number} is frozen and no shard follows it: a rotation was cut short; run `signet admin log rotate --log rekor-v1` again to finish it")]
    ShardCutShort { number: u32 },
    #[error("{} shard {number} was frozen at size {frozen}, but its stored tree has size {stored}", .kind.title())]
    FrozenAt { kind: Kind, number: u32, frozen: u64, stored: u64 },
    #[error("storage lists shards past shard {number}, which it does not list as frozen")]
    NotFrozen { number: u32 },
    #[error("{} shard {number} was frozen at size {frozen}, but this instance's tree of it has size {held}", .kind.title())]
    Behind { kind: Kind, number: u32, frozen: u64, held: u64 },
    /// Rekor v1's shards, as its online rotation says it.
    #[error("shard {number} was frozen at size {frozen}, but this instance's tree of it has size {held}")]
    ShardBehind { number: u32, frozen: u64, held: u64 },
    #[error("the rotation recorded no new shard")]
    NoNewShard,
    #[error(transparent)]
    NotCreated(#[from] NotCreated),
    /// `hint` follows "stop the server first".
    #[error("{source} (stop the server first{hint})")]
    Locked { source: LockError, hint: &'static str },
    #[error("{holder} holds the sequencer lease: stop every instance of this database first (`{command}` runs offline)")]
    LeaseHeld { holder: String, command: &'static str },
    #[error("this store's Rekor v1 log has been created (a server ran on it): entries are imported only into a log that has none, since log indices are handed out once. Import into a new data dir (or database), then start the server on it")]
    LogCreated,
    #[error("rekor_v1.imported: {0}")]
    ImportRecord(#[source] serde_json::Error),
    #[error("this store holds an import of tree {stored_tree} from {stored_url} already; it takes one, and this is tree {tree}")]
    OtherImport { stored_tree: i64, stored_url: String, tree: i64 },
    #[error("the Rekor v1 log is being imported from {url} (tree {tree_id}) and the import has not finished: run the same `signet import rekor` again to finish it")]
    ImportUnfinished { url: String, tree_id: i64 },
    #[error("the import recorded no shard after the copy")]
    ImportNoShard,
    #[error("the imported Rekor v1 shard's key: {0}")]
    ImportedKey(#[source] KeyError),
    #[error("reading shard {tree_id}'s cursor: {source}")]
    ReindexCursor { tree_id: i64, source: StorageError },
    #[error("shard {tree_id}, entries from {from}: {source}")]
    ReindexStep { tree_id: i64, from: u64, source: StorageError },
    #[error("shard {tree_id} stopped at {from} of {size} entries")]
    ReindexShort { tree_id: i64, from: u64, size: u64 },
}

/// Why a log has nothing to rotate: it was never created in this data dir or store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotCreated {
    #[error("{} does not exist, nor its public half {}: rotate on the data dir of the instance that made the log", .key.display(), .public.display())]
    NoZeroKey { key: PathBuf, public: PathBuf },
    #[error("the {} log has not been created yet: start `signet serve` on it once first", .kind.title())]
    NeverServed { kind: Kind },
}
