//! Anchors: the chain's head, published in signet's own Rekor v2 log.
//!
//! Someone who can write `audit.sqlite` can rewrite every record from the one they change
//! onwards, with fresh hashes, and the chain alone still verifies. An anchor stops that: from
//! time to time the server signs a [`statement`] of the chain's head (seq and hash) with the
//! audit key and appends it to the transparency log, which is append-only and whose
//! checkpoints others see. The log entry is kept beside the chain (`anchors` table), with
//! its inclusion proof and checkpoint, so that `signet audit verify` can check, offline,
//! that each anchored head is still the chain's hash at that record, that the entry is in
//! the log, and that records after the last anchor are not yet covered by any.

use rusqlite::{params, Connection, OptionalExtension};

use super::place::Place;
use crate::store::StoreError;

/// The table, created with the log (`audit.sqlite`).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS anchors(seq INTEGER PRIMARY KEY, head BLOB NOT NULL, \
                          log_index INTEGER NOT NULL, entry TEXT NOT NULL);";

/// What the audit key signs and the log holds the digest of: the head of the chain after
/// record `seq`. A fixed text, so that anyone can rebuild it from the chain.
pub fn statement(seq: u64, head: &[u8; 32]) -> Vec<u8> {
    let mut hex = String::with_capacity(64);
    for b in head {
        hex.push_str(&format!("{b:02x}"));
    }
    format!("signet audit anchor v1\nseq {seq}\nhead {hex}\n").into_bytes()
}

pub use super::record::Anchor;

/// Adds `anchor` to the chain at `place` (a connection of its own: anchors are rare).
pub fn store(place: &Place, anchor: &Anchor) -> Result<(), StoreError> {
    match place {
        Place::Sqlite { data_dir } => {
            let path = data_dir.join(super::FILE);
            let err = |source| StoreError::Sqlite { path: path.display().to_string(), source };
            let conn = signet_db::sqlite::open_beside(&path)?;
            conn.execute(
                "INSERT OR REPLACE INTO anchors(seq, head, log_index, entry) VALUES (?1, ?2, ?3, ?4)",
                params![anchor.seq as i64, anchor.head.as_slice(), anchor.log_index as i64, anchor.entry],
            )
            .map_err(err)?;
            Ok(())
        }
        Place::Postgres { db, .. } => db.store_anchor(anchor),
    }
}

/// The anchors of the log at `path`, by seq; none in a log from before anchors existed.
pub(super) fn load(conn: &Connection) -> rusqlite::Result<Vec<Anchor>> {
    let exists: Option<String> =
        conn.query_row("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'anchors'", [], |r| r.get(0)).optional()?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let mut q = conn.prepare("SELECT seq, head, log_index, entry FROM anchors ORDER BY seq")?;
    let rows = q.query_map([], |r| {
        let head: Vec<u8> = r.get(1)?;
        Ok((r.get::<_, i64>(0)?, head, r.get::<_, i64>(2)?, r.get::<_, String>(3)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, head, log_index, entry) = row?;
        // A head of the wrong length can match no chain hash: kept as zeros, it fails the
        // comparison with a message naming the anchor.
        let head = <[u8; 32]>::try_from(head.as_slice()).unwrap_or([0; 32]);
        out.push(Anchor { seq: seq.max(0) as u64, head, log_index: log_index.max(0) as u64, entry });
    }
    Ok(out)
}

/// The newest anchor's seq, for the server to know where it left off.
pub fn last_seq(place: &Place) -> Result<u64, StoreError> {
    match place {
        Place::Sqlite { data_dir } => {
            let path = data_dir.join(super::FILE);
            let err = |source| StoreError::Sqlite { path: path.display().to_string(), source };
            let conn = signet_db::sqlite::open_inspect(&path)?;
            Ok(load(&conn).map_err(err)?.last().map_or(0, |a| a.seq))
        }
        Place::Postgres { db, .. } => Ok(db.anchors(u64::MAX)?.last().map_or(0, |a| a.seq)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_names_the_record_and_its_hash() {
        let s = String::from_utf8(statement(1042, &[0xab; 32])).unwrap();
        assert_eq!(s, format!("signet audit anchor v1\nseq 1042\nhead {}\n", "ab".repeat(32)));
        assert_ne!(statement(1, &[0; 32]), statement(2, &[0; 32]));
    }
}
