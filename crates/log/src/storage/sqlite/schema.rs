//! The log file's tables, one migration at a time, and what `signet doctor` reads of a file
//! from outside a server.

use std::path::Path;

use rusqlite::Connection;
use signet_db::sqlite::{self as db, Migration};

use crate::storage::{ShardRecords, StorageError};
use super::readers::from_db;

/// `entry_keys` is small and scanned at startup; `entry_bodies` holds the bulk and everything
/// an entry read needs, so that a read is one B-tree descent (the leaf hash is recomputed
/// from the body). Both are append-only rowid tables, so a commit dirties only the pages at
/// their ends. `entry_bodies.integrated_time` came later: rows written before it are NULL
/// there and read it from `entry_keys`.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS entry_keys(
    id INTEGER PRIMARY KEY,
    leaf_hash BLOB NOT NULL,
    digest BLOB,
    integrated_time INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entry_bodies(id INTEGER PRIMARY KEY, body BLOB NOT NULL, stamp BLOB, integrated_time INTEGER);
CREATE TABLE IF NOT EXISTS tiles(
    log INTEGER NOT NULL, level INTEGER NOT NULL, idx INTEGER NOT NULL, hashes BLOB NOT NULL,
    PRIMARY KEY(log, level, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints(log INTEGER PRIMARY KEY, size INTEGER NOT NULL, note TEXT NOT NULL);
";

/// The schema versions (`PRAGMA user_version`). Version 1 is the layout above; databases made
/// before versions were kept have user_version 0 and the tables already, which `IF NOT EXISTS`
/// and the column check make a no-op for.
/// The schema version of the SQLite store at `path`, and the newest this build knows,
/// read without changing anything (`signet doctor`).
pub fn schema_version(path: &Path) -> Result<(i32, i32), StorageError> {
    if !path.exists() {
        return Err(StorageError::Backend(format!("{} does not exist; `signet serve` or `signet migrate` creates it", path.display())));
    }
    let have = db::schema_version(path).map_err(from_db)?;
    Ok((have, db::newest(MIGRATIONS)))
}

/// [`super::shard_records`] on SQLite: the records alone (it freezes nothing in storage).
pub fn shard_records(path: &Path) -> Result<ShardRecords, StorageError> {
    if !path.exists() {
        return Ok(ShardRecords::default());
    }
    let fail = |e: rusqlite::Error| StorageError::Backend(format!("{}: {e}", path.display()));
    let conn = db::open_inspect(path).map_err(from_db)?;
    let mut st = conn.prepare("SELECT key, value FROM meta WHERE key LIKE '%.shard.%' ORDER BY key").map_err(fail)?;
    let records = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(fail)?.collect::<rusqlite::Result<_>>().map_err(fail)?;
    Ok(ShardRecords { records, frozen: Vec::new() })
}

pub(super) const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, apply: |tx| {
        tx.execute_batch(SCHEMA)?;
        add_integrated_time(tx)
    } },
    // Full leaf tiles with their inner levels ([`LeafTile`]), keyed like the entries (row_id of
    // the tile's index). A rowid table: each row is 16 KiB, and they are only ever appended.
    Migration { version: 2, apply: |tx| tx.execute_batch("CREATE TABLE IF NOT EXISTS leaf_tiles(id INTEGER PRIMARY KEY, nodes BLOB NOT NULL);") },
    // The signing identity an entry is searchable by. Entries logged before have NULL there:
    // they are found by digest only (nothing re-reads old bodies to fill it in).
    Migration { version: 3, apply: |tx| add_key_column(tx, "identity") },
    // The signer's key an entry is searchable by (rekor-cli `search --public-key`), likewise
    // NULL for the entries before.
    Migration { version: 4, apply: |tx| add_key_column(tx, "public_key") },
    // intoto entries' attestations, one row per content (`NewEntry::attestation`); an entry
    // row names its own by digest. A rowid table: rows run to the attestation limit (100 KiB
    // by default), too long for a WITHOUT ROWID table's B-tree.
    Migration { version: 5, apply: |tx| {
        let has: bool = tx.query_row("SELECT count(*) FROM pragma_table_info('entry_bodies') WHERE name = 'attestation'", [], |r| {
            r.get::<_, i64>(0).map(|n| n > 0)
        })?;
        if !has {
            tx.execute_batch("ALTER TABLE entry_bodies ADD COLUMN attestation BLOB")?;
        }
        tx.execute_batch("CREATE TABLE IF NOT EXISTS attestations(digest BLOB NOT NULL UNIQUE, data BLOB NOT NULL)")
    } },
];

/// Adds the search key column `entry_keys.<column>` (schema versions 3 and 4).
fn add_key_column(conn: &Connection, column: &str) -> rusqlite::Result<()> {
    let has: bool = conn.query_row("SELECT count(*) FROM pragma_table_info('entry_keys') WHERE name = ?1", [column], |r| {
        r.get::<_, i64>(0).map(|n| n > 0)
    })?;
    if !has {
        conn.execute_batch(&format!("ALTER TABLE entry_keys ADD COLUMN {column} BLOB"))?;
    }
    Ok(())
}

/// Adds `entry_bodies.integrated_time` to a database made by the first release.
fn add_integrated_time(conn: &Connection) -> rusqlite::Result<()> {
    let has_time: bool = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('entry_bodies') WHERE name = 'integrated_time'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !has_time {
        conn.execute_batch("ALTER TABLE entry_bodies ADD COLUMN integrated_time INTEGER")?;
    }
    Ok(())
}
