//! Checking logs: witnessing (c2sp.org/tlog-witness) and monitoring.
//!
//! - [`witness`]: signet as a witness: verify a log's new checkpoint against the last one
//!   it cosigned, store the new state, and cosign (`POST /add-checkpoint`).
//! - [`poll`]: the witness fetching checkpoints and tiles from logs that don't submit.
//! - [`request`]: the `add-checkpoint` body, parsed and written.
//! - [`cosigning`]: signet's own log, witnessed: checkpoints sent to witnesses, a quorum's
//!   cosignatures collected and served.
//! - [`store`]: the witness's durable state, one row per log, on SQLite or PostgreSQL.
//! - [`monitor`]: follow logs, verify their checkpoints, and alert on watched identities.

// Nothing derived from a request may panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod cosigning;
pub mod monitor;
pub mod poll;
pub mod request;
pub mod store;
pub mod witness;

pub use store::{SqliteStore, PostgresStore, TreeHead, WitnessStore};
pub use witness::{LogKey, Refused, Witness, WitnessedLog};
