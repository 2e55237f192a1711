//! Versioned schema changes, applied in order when a store opens (and by `signet migrate`).
//!
//! Each backend keeps the versions it has applied: PostgreSQL in a `signet_schema` table,
//! SQLite in its `user_version`. A store whose schema is newer than this build is refused,
//! so that an older signet never writes to a layout it does not know.

use super::StorageError;

/// One schema change. Released migrations are never edited; the next change is a new one.
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

fn too_new(found: i32, known: i32) -> StorageError {
    StorageError::Backend(format!(
        "the database's schema is at version {found}, newer than this signet knows (up to {known}); run a newer signet"
    ))
}

/// Applies to PostgreSQL the migrations it lacks, each in its own transaction with its
/// `signet_schema` row, so that two instances starting at once apply each exactly once: the
/// second one's insert of the same version fails, rolls back, and it finds the version applied.
pub(crate) async fn apply_postgres(client: &mut tokio_postgres::Client, all: &[Migration]) -> Result<Vec<i32>, StorageError> {
    let pg = |e: tokio_postgres::Error| StorageError::Backend(format!("PostgreSQL migration: {e}"));
    // Two instances creating the table at once can collide in the catalog; the loser retries.
    for attempt in 0..3 {
        match client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS signet_schema(\
                 version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
            )
            .await
        {
            Ok(()) => break,
            Err(e) if attempt < 2 && e.code().is_some() => continue,
            Err(e) => return Err(pg(e)),
        }
    }
    let known = all.iter().map(|m| m.version).max().unwrap_or(0);
    let mut applied = Vec::new();
    for m in all {
        let have: i32 = client.query_one("SELECT COALESCE(MAX(version), 0) FROM signet_schema", &[]).await.map_err(pg)?.try_get(0).map_err(pg)?;
        if have > known {
            return Err(too_new(have, known));
        }
        let done = client.query_opt("SELECT 1 FROM signet_schema WHERE version = $1", &[&m.version]).await.map_err(pg)?;
        if done.is_some() {
            continue;
        }
        let tx = client.transaction().await.map_err(pg)?;
        match tx.execute("INSERT INTO signet_schema(version, name) VALUES ($1, $2)", &[&m.version, &m.name]).await {
            Ok(_) => {}
            // Another instance is applying it: its transaction holds the row; ours waits, then loses.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => continue,
            Err(e) => return Err(pg(e)),
        }
        tx.batch_execute(m.sql).await.map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        tracing::info!(version = m.version, name = m.name, "PostgreSQL schema migrated");
        applied.push(m.version);
    }
    Ok(applied)
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
