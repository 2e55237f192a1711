//! The SQLite log's versioned schema changes, applied in order when it opens (and by
//! `signet migrate`), with the versions applied in its `user_version`. A file whose schema is
//! newer than this build is refused, so that an older signet never writes to a layout it does
//! not know. PostgreSQL's schema is one sequence that every crate adds to:
//! [`signet_db::migrations`].

use super::StorageError;

fn too_new(found: i32, known: i32) -> StorageError {
    StorageError::Backend(signet_db::migrations::MigrationError::TooNew { found, known }.to_string())
}

/// Applies to SQLite the migrations it lacks, each with its `user_version` bump in one
/// transaction.
pub(crate) fn apply_sqlite(conn: &mut rusqlite::Connection, all: &[SqliteMigration]) -> Result<Vec<i32>, StorageError> {
    let sq = |e: rusqlite::Error| StorageError::Backend(format!("SQLite migration: {e}"));
    let known = all.iter().map(|m| m.version).max().unwrap_or(0);
    let mut applied = Vec::new();
    for m in all {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sq)?;
        let have: i32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sq)?;
        if have > known {
            return Err(too_new(have, known));
        }
        if have >= m.version {
            continue;
        }
        (m.apply)(&tx).map_err(sq)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", m.version)).map_err(sq)?;
        tx.commit().map_err(sq)?;
        applied.push(m.version);
    }
    Ok(applied)
}

/// A SQLite schema change: code rather than SQL alone, since some steps depend on what an
/// older release left (SQLite has no `ADD COLUMN IF NOT EXISTS`).
pub(crate) struct SqliteMigration {
    pub version: i32,
    pub apply: fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>,
}
