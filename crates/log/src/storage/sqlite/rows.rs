//! How an entry is a row: its row id, and the statements and decoders of entry reads.

use rusqlite::{Connection, OptionalExtension};

use crate::storage::{EntryKeys, LogId, StoredEntry};
use signet_core::hash::Hash;

/// Indices stay below 2^48 so the log id fits above them in a row id.
pub(super) const MAX_INDEX: u64 = 1 << 48;

/// Entries of all logs share one table; the log id sits in the top bits of the row id.
pub(super) fn row_id(log: LogId, index: u64) -> i64 {
    // `+`, not `|`: a range end of MAX_INDEX is the next log's first row.
    ((log as i64) << 48) + index as i64
}

/// Entry rows from `entry_bodies` alone, except for rows older than its `integrated_time`
/// column (COALESCE evaluates the subquery only for those); a row's attestation by [`attach`].
/// A macro, so that each statement is a constant that the statement cache finds without
/// formatting a string per read.
macro_rules! entry_select {
    ($where:literal) => {
        concat!(
            "SELECT b.id, b.body, b.stamp, ",
            "COALESCE(b.integrated_time, (SELECT k.integrated_time FROM entry_keys k WHERE k.id = b.id)), b.attestation ",
            "FROM entry_bodies b ",
            $where
        )
    };
}
pub(super) const ENTRY_BY_ID: &str = entry_select!("WHERE b.id = ?1");

/// The columns [`entry_keys`] reads, in its order.
macro_rules! ENTRY_KEYS {
    () => {
        "SELECT leaf_hash, digest, identity, public_key FROM entry_keys"
    };
}

/// `leaf_hash, digest, identity, public_key` of an `entry_keys` row.
pub(super) fn entry_keys(r: &rusqlite::Row<'_>) -> rusqlite::Result<EntryKeys> {
    Ok(EntryKeys { leaf_hash: hash_column(r, 0)?, digest: r.get(1)?, identity: r.get(2)?, public_key: r.get(3)? })
}

pub(super) fn hash_column(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Hash> {
    let v: Vec<u8> = row.get(i)?;
    v.try_into().map_err(|_| rusqlite::Error::InvalidColumnType(i, "leaf_hash".into(), rusqlite::types::Type::Blob))
}

/// An entry row, and the digest of the attestation it names, for [`attach`].
pub(super) fn stored_entry(log: LogId, row: &rusqlite::Row<'_>) -> rusqlite::Result<(StoredEntry, Option<Vec<u8>>)> {
    let id: i64 = row.get(0)?;
    let body: Vec<u8> = row.get(1)?;
    let entry = StoredEntry {
        index: (id - row_id(log, 0)) as u64,
        leaf_hash: crate::merkle::leaf_hash(&body),
        integrated_time: row.get(3)?,
        body,
        stamp: row.get(2)?,
        attestation: None,
    };
    Ok((entry, row.get(4)?))
}

/// The entry with the attestation its row names, read on the same snapshot. A second
/// statement rather than a subquery in the entry's: a read of an entry without one (most)
/// then costs nothing more than before attestations were kept.
pub(super) fn attach(c: &Connection, (mut entry, digest): (StoredEntry, Option<Vec<u8>>)) -> rusqlite::Result<StoredEntry> {
    if let Some(digest) = digest {
        entry.attestation = c.prepare_cached("SELECT data FROM attestations WHERE digest = ?1")?.query_row([digest], |r| r.get(0)).optional()?;
    }
    Ok(entry)
}
