//! The transparency log engine and the Rekor formats built on it.
//!
//! - [`merkle`]: RFC 6962/9162 hashing, inclusion and consistency proofs.
//! - [`tree`]: the in-memory tree of one log.
//! - [`checkpoint`]: C2SP signed-note checkpoints.
//! - [`index`]: in-memory lookup by leaf hash and artifact digest.
//! - [`tiles`]: C2SP tlog-tiles paths and entry bundles.
//! - [`storage`]: the `Storage` and `Queue` traits, SQLite and PostgreSQL.
//! - [`sequencer`]: batching, durable commits, and answering waiters.
//! - [`follow`]: instances sharing storage: followers, the queue, promotion.
//! - [`log`]: one log (tree + key + sequencer + storage) behind a handle.
//! - [`rekor`]: Rekor v1 and v2 entry formats.
//! - `micro` (feature `micro`): the criterion suite of all of the above.

// Nothing derived from a request may panic (issue 17): no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod checkpoint;
pub mod follow;
pub mod index;
pub mod log;
pub mod merkle;
#[cfg(feature = "micro")]
pub mod micro;
pub mod rekor;
pub mod sequencer;
pub mod storage;
pub mod tiles;
pub mod tree;

pub use log::{Admission, AppendError, DigestPage, Log, LogConfig, OpenError, Stamper};
pub use follow::Role;
pub use sequencer::{BatchPolicy, Sequenced};
