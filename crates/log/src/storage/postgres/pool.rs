//! The connections: one writer, whose session bounds what a stalled commit can hold, and a few
//! readers that pipeline their queries, each with the reads every request path uses prepared.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

use crate::storage::StorageError;

/// The columns `reads::stored_entry` reads, in its order: an entry row and its attestation's bytes.
macro_rules! ENTRY_COLUMNS {
    () => {
        "SELECT e.idx, e.body, e.stamp, e.integrated_time, a.data FROM entries e LEFT JOIN attestations a ON a.digest = e.attestation"
    };
}

/// How long a query may wait for a connection to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The reads every request path uses, prepared once per connection.
pub(super) struct Statements {
    pub(super) entry: Statement,
    pub(super) entries: Statement,
    pub(super) keys: Statement,
    pub(super) checkpoint: Statement,
}

pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) st: Statements,
}

pub(super) struct Pool {
    pub(super) target: signet_db::pg::Target,
    /// The committing connection: it needs no prepared reads, and exists before the schema does.
    pub(super) writer: tokio::sync::Mutex<Option<Client>>,
    pub(super) readers: Vec<parking_lot::Mutex<Option<Arc<Conn>>>>,
    pub(super) next: AtomicUsize,
    /// When a connection attempt last failed. For a moment after, reads fail at once instead
    /// of each making an attempt of its own: an outage under load must not become thousands
    /// of connection attempts waiting out their timeouts.
    pub(super) last_failure: parking_lot::Mutex<Option<std::time::Instant>>,
}

/// How long reads fail fast after a failed connection attempt.
const BACKOFF: Duration = Duration::from_millis(250);

/// Sorts a database error into the kinds callers act on: the database gone (503, retry),
/// its disk full (507), or anything else.
pub(super) fn classify(e: tokio_postgres::Error) -> StorageError {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::DISK_FULL || *code == SqlState::OUT_OF_MEMORY || *code == SqlState::INSUFFICIENT_RESOURCES {
            return StorageError::Full(format!("PostgreSQL: {}", db.message()));
        }
        // A bound of the writer's session ([`WRITER_SESSION`]) ended the statement: someone else
        // holds what it needs, and a retry (perhaps on another instance) may succeed.
        if *code == SqlState::LOCK_NOT_AVAILABLE || *code == SqlState::QUERY_CANCELED || *code == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT {
            return StorageError::Unavailable(format!("PostgreSQL: {}", db.message()));
        }
        if *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::TOO_MANY_CONNECTIONS
            || code.code().starts_with("08")
        {
            return StorageError::Unavailable(format!("PostgreSQL: {}", db.message()));
        }
        return StorageError::Backend(format!("PostgreSQL: {} ({})", db.message(), code.code()));
    }
    if e.is_closed() || e.code().is_none() {
        // No SQLSTATE: the connection itself failed (refused, reset, closed, or TLS, whose
        // reason, such as "certificate verify failed", is in the error's sources).
        return StorageError::Unavailable(format!("PostgreSQL: {}", signet_db::pg::message(&e)));
    }
    StorageError::Backend(format!("PostgreSQL: {e}"))
}

impl Pool {
    /// A new connection. Every attempt, whichever connection it is for, sets or clears the
    /// moment of the last failure that reads back off from.
    pub(super) async fn connect_client(&self) -> Result<Client, StorageError> {
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, self.target.connect())
            .await
            .map_err(|_| StorageError::Unavailable(format!("PostgreSQL: no connection within {CONNECT_TIMEOUT:?}")))
            .and_then(|r| r.map_err(classify));
        *self.last_failure.lock() = attempt.is_err().then(std::time::Instant::now);
        let (client, connection) = attempt?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %signet_db::pg::message(&e), "PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    async fn connect(&self) -> Result<Conn, StorageError> {
        let client = self.connect_client().await?;
        let st = Statements {
            entry: client
                .prepare(concat!(ENTRY_COLUMNS!(), " WHERE e.log = $1 AND e.idx = $2"))
                .await
                .map_err(classify)?,
            entries: client
                .prepare(concat!(ENTRY_COLUMNS!(), " WHERE e.log = $1 AND e.idx >= $2 AND e.idx < $3 ORDER BY e.idx"))
                .await
                .map_err(classify)?,
            keys: client
                .prepare("SELECT leaf_hash, digest, identity, public_key FROM entries WHERE log = $1 AND idx >= $2 AND idx < $3 ORDER BY idx")
                .await
                .map_err(classify)?,
            checkpoint: client.prepare("SELECT size, note FROM checkpoints WHERE log = $1").await.map_err(classify)?,
        };
        Ok(Conn { client, st })
    }

    /// A reader connection, made anew if the one in its slot broke.
    pub(super) async fn reader(&self) -> Result<Arc<Conn>, StorageError> {
        let slot = &self.readers[self.next.fetch_add(1, Ordering::Relaxed) % self.readers.len()];
        if let Some(c) = slot.lock().as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(c.clone());
        }
        if self.last_failure.lock().is_some_and(|t| t.elapsed() < BACKOFF) {
            return Err(StorageError::Unavailable("PostgreSQL: the last connection attempt failed moments ago".into()));
        }
        let conn = Arc::new(self.connect().await?);
        *slot.lock() = Some(conn.clone());
        Ok(conn)
    }
}

/// The bounds of the writer's session. A row lock held elsewhere (a paused instance, an
/// operator's open transaction) fails a commit after `lock_timeout` instead of holding every
/// append; a statement that runs away ends after `statement_timeout`; and a writer stopped
/// mid-transaction (SIGSTOP, a partition) has its session ended by the server after
/// `idle_in_transaction_session_timeout`, which frees the lease row it locked. That bound is
/// below the lease's 2.5 s lifetime, so a follower's takeover waits for the lease and never
/// for the lock: under steady writes the sequencer is nearly always mid-transaction, and the
/// fault suite measured takeovers of 5 s after a SIGSTOP when this was 5 s. A batch's
/// statements follow each other within milliseconds; two idle seconds inside one mean its
/// writer is stopped or cut off.
const WRITER_SESSION: &str = "SET lock_timeout = '3s'; SET statement_timeout = '10s'; SET idle_in_transaction_session_timeout = '2s'";

/// The writer connection, made anew if it broke.
pub(super) async fn writer<'a>(pool: &Pool, slot: &'a mut Option<Client>) -> Result<&'a mut Client, StorageError> {
    if slot.as_ref().is_none_or(|c| c.is_closed()) {
        let client = pool.connect_client().await?;
        client.batch_execute(WRITER_SESSION).await.map_err(classify)?;
        *slot = Some(client);
    }
    slot.as_mut().ok_or_else(|| StorageError::Unavailable("PostgreSQL: no connection".into()))
}
