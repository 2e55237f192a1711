//! The pool of read-only connections that serve reads beside the one writer, each holding a
//! snapshot for a bounded time; and SQLite's errors as the store's.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rusqlite::Connection;
use signet_db::sqlite as db;

use crate::storage::StorageError;

/// The page cache of each pooled reader, in KiB (see [`Readers::open`]).
pub(super) const READER_CACHE_KIB: u32 = 256;
/// How long a reader may keep one read transaction (one snapshot of the database) open.
///
/// Beginning and ending a WAL read transaction takes file locks (fcntl) and resets the
/// statement's pager; at tens of thousands of point reads a second that was a fifth of the
/// read path. Entries are immutable once committed, so a snapshot a few milliseconds old
/// returns the same bytes for everything it holds; what it lacks (entries committed since)
/// is caught by [`Readers::read_complete`], which retries on a fresh snapshot. Snapshots
/// are bounded in age so that WAL checkpoints can always make progress.
pub(super) const SNAPSHOT_TTL: Duration = Duration::from_millis(50);

/// A pooled read-only connection and what marks its open read transaction (its snapshot),
/// if one is open: when it began for the log's readers, the flush generation it began after
/// for the key index's (`keys.rs`).
pub(super) struct Reader<T = Instant> {
    pub(super) conn: Connection,
    pub(super) snapshot: Option<T>,
}

impl<T> Reader<T> {
    pub(super) fn end_snapshot(&mut self) -> rusqlite::Result<()> {
        if self.snapshot.take().is_some() {
            // Cached: `execute_batch` would parse the statement on every snapshot (issue 40).
            self.conn.prepare_cached("COMMIT")?.execute([])?;
        }
        Ok(())
    }

    /// Ends the open snapshot, if any, and opens one marked `mark`. SQLite defers it to the
    /// first read: the snapshot is of the database as that read finds it.
    pub(super) fn begin_snapshot(&mut self, mark: T) -> rusqlite::Result<()> {
        self.end_snapshot()?;
        self.conn.prepare_cached("BEGIN")?.execute([])?;
        self.snapshot = Some(mark);
        Ok(())
    }
}

impl Reader {
    /// Makes sure a read transaction is open, starting a new one if the current one is
    /// older than `max_age`. Returns whether the snapshot is newer than this call.
    pub(super) fn begin(&mut self, max_age: Duration) -> rusqlite::Result<bool> {
        match self.snapshot {
            Some(t) if t.elapsed() < max_age => Ok(false),
            _ => {
                self.begin_snapshot(Instant::now())?;
                Ok(true)
            }
        }
    }
}

/// Read-only connections, checked out one per read.
pub(super) struct Readers {
    pub(super) path: PathBuf,
    pub(super) idle: Mutex<Vec<Reader>>,
}

impl Readers {
    pub(super) fn open(&self) -> Result<Reader, StorageError> {
        // Memory-mapped pages skip the copy into SQLite's page cache; measured against a
        // 64 MiB page cache without mmap, they cost less CPU per entry read. Only pages still in
        // the WAL go through the cache, so it is kept small: each pooled reader would otherwise
        // fill SQLite's default 2 MB with them, slowly, for most of an hour (the soak's growth).
        let conn = db::open_reader(&self.path, &db::Reader { cache_kib: READER_CACHE_KIB }).map_err(from_db)?;
        stable_plans(&conn).map_err(backend)?;
        Ok(Reader { conn, snapshot: None })
    }

    /// Runs `f` in a snapshot no older than `max_age` and passes it whether that snapshot
    /// began during this call. A reader whose query failed is dropped, not reused: its
    /// transaction state is unknown.
    pub(super) fn with<T>(&self, max_age: Duration, f: impl FnOnce(&Connection, bool) -> rusqlite::Result<T>) -> Result<T, StorageError> {
        let pooled = self.idle.lock().pop();
        let mut reader = match pooled {
            Some(r) => r,
            None => self.open()?,
        };
        let fresh = reader.begin(max_age).map_err(backend)?;
        let out = f(&reader.conn, fresh).map_err(backend)?;
        self.idle.lock().push(reader);
        Ok(out)
    }

    /// A read whose result is only as current as the latest commit: tiles, checkpoints.
    pub(super) fn read_latest<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StorageError> {
        self.with(Duration::ZERO, |c, _| f(c))
    }

    /// A read of immutable rows that the caller knows were committed. On a recent snapshot
    /// a result that `complete` judges short is retried once on a fresh one.
    pub(super) fn read_complete<T>(
        &self,
        f: impl Fn(&Connection) -> rusqlite::Result<T>,
        complete: impl Fn(&T) -> bool,
    ) -> Result<T, StorageError> {
        let (out, fresh) = self.with(SNAPSHOT_TTL, |c, fresh| Ok((f(c)?, fresh)))?;
        if fresh || complete(&out) {
            return Ok(out);
        }
        self.read_latest(f)
    }

    /// Ends the snapshots of idle readers that have outlived their TTL, so that none pins
    /// an old part of the WAL while its thread has no reads to serve.
    pub(super) fn expire(&self) {
        for r in self.idle.lock().iter_mut() {
            if r.snapshot.is_some_and(|t| t.elapsed() >= SNAPSHOT_TTL) {
                if let Err(e) = r.end_snapshot() {
                    tracing::warn!(error = %e, "ending an idle read snapshot failed");
                }
            }
        }
    }
}

/// Keeps a cached statement's plan across new bindings. The bundled SQLite is built with STAT4,
/// under which a statement whose plan may depend on a bound value (`LIMIT ?`, a range bound)
/// expires at every rebind and is parsed and planned again on its next step, which cost more than
/// the rest of a search (docs/performance.md, "The measurements behind the code's shape"). The
/// plans here are the primary keys' whatever the values, so nothing is lost.
pub(super) fn stable_plans(c: &Connection) -> rusqlite::Result<()> {
    c.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map(|_| ())
}

/// The connection layer's errors name the file; a full disk stays [`StorageError::Full`].
pub(super) fn from_db(e: db::SqliteError) -> StorageError {
    classify(&e.source, &e)
}

pub(super) fn backend(e: rusqlite::Error) -> StorageError {
    classify(&e, &e)
}

/// `e`, shown as `shown`: a full disk is [`StorageError::Full`] (SQLITE_FULL; SQLITE_IOERR with
/// ENOSPC underneath shows up as a write error), anything else the backend's failure.
fn classify(e: &rusqlite::Error, shown: &dyn std::fmt::Display) -> StorageError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => StorageError::Full(format!("SQLite: {shown}")),
        _ => StorageError::Backend(format!("SQLite: {shown}")),
    }
}
