//! The transparency log engine and the Rekor formats built on it.
//!
//! - [`merkle`]: RFC 6962/9162 hashing, inclusion and consistency proofs.
//! - [`tree`]: the tree of one log: its right edge in memory, the rest in stored tiles.
//! - `snapshot`: what readers see: the durable head and the tree as of it, swapped whole.
//! - [`tilecache`]: the bounded cache of full tiles that proofs read.
//! - [`entrycache`]: the bounded cache of entries committed or read lately, that reads look in first.
//! - [`checkpoint`]: C2SP signed-note checkpoints.
//! - [`tiles`]: C2SP tlog-tiles paths and entry bundles.
//! - [`remote`]: another log's tree read through its tiles, for proofs a client builds.
//! - [`storage`]: the `Storage` and `Queue` traits, SQLite and PostgreSQL, and their
//!   indexes by leaf hash and digest.
//! - [`sequencer`]: the task that owns a log's tree: batching, durable commits.
//! - `pipeline`: what flows through it, stage by stage, and its state.
//! - `answers`: how the requests waiting on a batch are answered.
//! - [`reconcile`]: after a commit whose outcome is unknown, memory rebuilt from storage.
//! - [`follow`]: instances sharing storage: followers, the queue, promotion.
//! - [`log`]: one log (tree + key + sequencer + storage) behind a handle.
//! - `shared`: what the handle and the task that owns the tree share.
//! - [`error`]: what appending to a log and opening one fail with.
//! - [`shards`]: a log cut into trees (Rekor's shards): the registry and virtual indices.
//! - [`rekor`]: Rekor v1 and v2 entry formats.
//! - [`reindex`]: search keys found again for entries logged before the store kept them.
//! - [`import`]: another log's tree copied in, entry by entry, and proven against its checkpoint.
//! - `micro` (feature `micro`): the criterion suite of all of the above.

// Nothing derived from a request may panic (issue 17): no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub(crate) mod answers;
pub mod checkpoint;
pub mod entrycache;
pub mod error;
pub mod follow;
pub mod import;
pub mod log;
pub mod merkle;
pub(crate) mod pipeline;
#[cfg(feature = "micro")]
pub mod micro;
pub mod rekor;
pub mod reconcile;
pub mod reindex;
pub mod remote;
pub mod sequencer;
pub mod shards;
pub(crate) mod shared;
pub(crate) mod snapshot;
pub mod stats;
pub mod storage;
pub mod tilecache;
pub mod tiles;
pub mod tree;

pub use error::{AppendError, OpenError};
pub use log::{Admission, DigestPage, Genesis, Leaf, Log, LogConfig, DEFAULT_ENTRY_CACHE, DEFAULT_TILE_CACHE};
pub use shared::Stamper;
pub use follow::Role;
pub use pipeline::{BatchPolicy, Sequenced};
