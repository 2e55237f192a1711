//! Where the writer puts each batch: `audit.sqlite` in the data dir (WAL, its own checkpointer)
//! or the chain's rows in PostgreSQL ([`super::postgres`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use signet_db::sqlite as db;

use super::place::Place;
use super::postgres::ChainDb;
use super::queue::Shared;
use super::record::Batch;
use crate::config::AuditMode;
use crate::store::StoreError;

/// How often `audit-checkpoint` copies the WAL into the database, off the writer's thread: as
/// SQLite's auto-checkpoint, that copy and its fsync ran inside a commit and held up every
/// request waiting on it (the log's store does the same, for the same reason).
///
/// That copy alone never lets the WAL start over: SQLite rewinds it only when a write begins
/// with every frame copied, and under steady load the writer commits more frames while the
/// checkpoint runs (bench-guard's closed instance grew a 1.3 GB WAL in about a minute, every
/// commit an append). So after each copy the writer copies the few
/// frames committed meanwhile itself, between two commits ([`Writer::finish_checkpoint`](super::writer::Writer::finish_checkpoint)), and
/// its next commit writes the WAL from its start again.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);
/// The WAL's size after it starts over, at most: above what 200 ms of commits write at full
/// load, so that it is not cut and regrown each time; a WAL left bigger shrinks to it.
pub(super) const WAL_SIZE_LIMIT: u64 = 64 << 20;

/// One row per written batch: its records' JSON, one per line, and their hashes, 32 bytes
/// each, in order. A row per record cost more than the record's hashing and encoding.
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS audit(first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, \
                      records BLOB NOT NULL, hashes BLOB NOT NULL);";

pub(super) fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite { path: path.display().to_string(), source }
}

/// Where the writer puts its batches.
pub(super) enum Sink {
    Sqlite(Connection),
    Postgres(ChainDb),
}

impl Sink {
    /// Stores records `first..=last`, borrowed: the writer reuses its buffers batch after batch.
    pub(super) fn insert(&mut self, first: u64, last: u64, records: &[u8], hashes: &[u8]) -> Result<(), InsertError> {
        match self {
            Sink::Sqlite(conn) => conn
                .prepare_cached("INSERT INTO audit(first_seq, last_seq, records, hashes) VALUES (?1, ?2, ?3, ?4)")
                .and_then(|mut insert| insert.execute(params![first as i64, last as i64, records, hashes]))
                .map(drop)
                .map_err(InsertError::Sqlite),
            // The query runs on the pool's runtime, which takes its parameters owned.
            Sink::Postgres(db) => {
                db.insert(Batch { first, last, records: records.to_vec(), hashes: hashes.to_vec() }).map_err(InsertError::Postgres)
            }
        }
    }
}

/// Why a batch was not stored: the writer logs it (beside the place) and counts its records
/// as lost.
#[derive(Debug, thiserror::Error)]
pub(super) enum InsertError {
    #[error(transparent)]
    Sqlite(rusqlite::Error),
    #[error(transparent)]
    Postgres(StoreError),
}

/// The chain's head from its newest batch; where it starts when it holds none (every
/// record cut into segments).
pub(super) fn head_of(newest: Option<(u64, Vec<u8>)>, start: (u64, [u8; 32]), place: &Place) -> Result<(u64, [u8; 32]), StoreError> {
    let Some((seq, hashes)) = newest else { return Ok(start) };
    let last = hashes.len().checked_sub(32).and_then(|i| <[u8; 32]>::try_from(&hashes[i..]).ok());
    let hash = last.ok_or_else(|| StoreError::Corrupt {
        path: place.describe(),
        what: format!("the batch ending at record {seq} holds no hashes"),
    })?;
    Ok((seq, hash))
}

/// Opens (or creates, 0600) the live log at `path`: the writer's connection, the
/// checkpointer's, and the chain's head.
pub(super) fn open_sqlite(path: &Path, mode: AuditMode, place: &Place) -> Result<(Connection, Connection, (u64, [u8; 32])), StoreError> {
    let how = db::Writer {
        // FULL fsyncs the WAL at each commit: a record is durable when its answer goes out.
        durability: match mode {
            AuditMode::Closed => db::Durability::Full,
            AuditMode::BestEffort => db::Durability::Normal,
        },
        checkpoints: db::Checkpoints::Manual,
        // 64 KiB pages (only a new file takes them): a batch of a hundred records is one or
        // two WAL frames rather than a dozen 4 KiB ones, each its own pwrite on commit and
        // again in the checkpoint.
        page_size: Some(65536),
        cache_kib: None,
        mmap: false,
        journal_size_limit: Some(WAL_SIZE_LIMIT),
    };
    let conn = db::open_writer(path, &how)?;
    let checkpointer = db::open_beside(path)?;
    conn.execute_batch(SCHEMA).map_err(sqlite(path))?;
    conn.execute_batch(super::anchor::SCHEMA).map_err(sqlite(path))?;
    let start = super::segment::start(&conn).map_err(sqlite(path))?;
    let newest: Option<(u64, Vec<u8>)> = conn
        .query_row("SELECT last_seq, hashes FROM audit WHERE last_seq > ?1 ORDER BY first_seq DESC LIMIT 1", [start.0 as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(sqlite(path))?;
    let head = head_of(newest, start, place)?;
    Ok((conn, checkpointer, head))
}

/// Copies the WAL into the database every [`CHECKPOINT_EVERY`] until the log closes. PASSIVE
/// never blocks the writer; a failure is retried at the next turn.
pub(super) fn checkpoint(conn: Connection, shared: Arc<Shared>) {
    while !shared.closed.load(Ordering::Relaxed) {
        std::thread::sleep(CHECKPOINT_EVERY);
        match db::checkpoint(&conn) {
            Ok(()) => shared.checkpointed.store(true, Ordering::Relaxed),
            Err(e) => tracing::warn!(error = %e, "audit log WAL checkpoint failed"),
        }
    }
}
