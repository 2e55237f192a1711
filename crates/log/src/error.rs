//! What appending to a log and opening one fail with.

use signet_keys::KeyError;

use crate::storage::{LogId, StorageError};

#[derive(Debug, Clone, thiserror::Error)]
pub enum AppendError {
    #[error("storage failed; the entry was not logged: {0}")]
    Storage(String),
    /// The disk is full: reads go on, and writes resume by themselves once space returns.
    #[error("storage is full; the entry was not logged. Reads go on; writes resume once space is freed ({0})")]
    Full(String),
    /// The database is unreachable for now; a retry may succeed.
    #[error("storage is unavailable; the entry was not logged, retry later ({0})")]
    Unavailable(String),
    #[error("signing failed; the entry was not logged: {0}")]
    Signing(String),
    /// The log's key is on a token that did not sign now (unplugged, restarting).
    #[error("the log's signing key cannot sign now; the entry was not logged, retry later ({0})")]
    KeyUnavailable(String),
    /// The log takes no more entries here: signet is shutting down, or the log rotated to a
    /// new shard (a retry lands there).
    #[error("this log takes no more entries (shutting down, or rotated to a new shard); the entry was not logged, retry")]
    Closed,
    #[error("the log failed the batch that held this entry (an internal error, logged); the entry was not logged, retry")]
    Aborted,
    /// More appends are waiting than the log admits (`log.max_pending_appends`): shed at
    /// once rather than queued into a timeout.
    #[error("the log is at capacity ({limit} appends waiting); the entry was not logged, retry after a moment")]
    Overloaded { limit: usize },
    /// This log takes no appends, for a reason that a retry does not change.
    #[error("{0}")]
    Refused(String),
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("stored log {log} is inconsistent: {why}")]
    Corrupt { log: LogId, why: String },
    /// The data is intact, but the configuration names the log differently: its origin
    /// comes from the public URL's host, and was fixed when the log was created.
    /// A follower opened a log its sequencer has not created yet.
    #[error("log {log} has not been created yet: the instance that sequences this database makes it")]
    NotCreated { log: LogId },
    #[error("log {log} was created with origin {stored:?}, but this configuration gives it origin {configured:?}. The data is intact. A log's origin is fixed when it is created, because clients pin it: set public_url back to the URL the log was created with (its host is the origin), or start a new log in another data dir")]
    OriginChanged { log: LogId, stored: String, configured: String },
}
