//! The read queries, on a reader connection ([`Conn`]).

use std::sync::Arc;

use crate::storage::{EntryKeys, LogId, StorageError, StoredCheckpoint, StoredEntry};
use signet_core::hash::Hash;
use super::pool::{classify, Conn};

/// The dedupe's probe: one lookup in entries_by_leaf per wanted leaf, whatever the planner
/// believes. `leaf_hash = ANY($2)` left the choice to it, and on a table that autovacuum had
/// not yet analyzed (a new database's first minute) it scanned the log's whole primary-key
/// range and filtered: 34 ms per batch at 96,000 entries, a third of a new instance's append
/// rate. `OFFSET 0` keeps the subquery from being flattened into a join it could plan as
/// a scan. Public so that a test can EXPLAIN it.
#[doc(hidden)]
pub const FIND_LEAVES: &str = "SELECT w.leaf, e.idx FROM UNNEST($2::BYTEA[]) AS w(leaf), \
    LATERAL (SELECT idx FROM entries WHERE log = $1 AND leaf_hash = w.leaf OFFSET 0) AS e";

/// The entries among `leaves`, by the entries_by_leaf index, in one query.
pub(super) async fn find_leaves(c: Arc<Conn>, log: LogId, leaves: Vec<Hash>) -> Result<Vec<(usize, u64)>, tokio_postgres::Error> {
    // Each leaf once: a row per match is then mapped to every position that wants it.
    let mut wanted: Vec<&[u8]> = leaves.iter().map(|h| &h[..]).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let rows = c.client.query(FIND_LEAVES, &[&(log as i16), &wanted]).await?;
    let mut found = Vec::with_capacity(rows.len());
    for r in rows {
        let (leaf, idx): (&[u8], i64) = (r.try_get(0)?, r.try_get(1)?);
        found.extend(leaves.iter().enumerate().filter(|(_, l)| l[..] == *leaf).map(|(pos, _)| (pos, idx as u64)));
    }
    Ok(found)
}

pub(super) const SEARCH_BY_DIGEST: &str = "SELECT idx FROM entries WHERE log = $1 AND digest = $2 AND idx > $3 ORDER BY idx LIMIT $4";
pub(super) const SEARCH_BY_IDENTITY: &str = "SELECT idx FROM entries WHERE log = $1 AND identity = $2 AND idx > $3 ORDER BY idx LIMIT $4";
pub(super) const SEARCH_BY_PUBLIC_KEY: &str = "SELECT idx FROM entries WHERE log = $1 AND public_key = $2 AND idx > $3 ORDER BY idx LIMIT $4";

/// Up to `limit` indices after `after` whose search column (the query's) equals `value`.
pub(super) async fn find_by(c: Arc<Conn>, sql: &str, log: LogId, value: Vec<u8>, after: Option<u64>, limit: usize) -> Result<Vec<u64>, tokio_postgres::Error> {
    let (after, limit) = (after.map_or(-1, bigint), limit.min(i64::MAX as usize) as i64);
    let rows = c.client.query(sql, &[&(log as i16), &value, &after, &limit]).await?;
    rows.iter().map(|r| Ok(r.try_get::<_, i64>(0)? as u64)).collect()
}

pub(super) fn stored_entry(r: &tokio_postgres::Row) -> Result<StoredEntry, tokio_postgres::Error> {
    let body: Vec<u8> = r.try_get(1)?;
    Ok(StoredEntry {
        index: r.try_get::<_, i64>(0)? as u64,
        leaf_hash: crate::merkle::leaf_hash(&body),
        integrated_time: r.try_get(3)?,
        body,
        stamp: r.try_get(2)?,
        attestation: r.try_get(4)?,
    })
}

pub(super) async fn read_entry(c: Arc<Conn>, log: LogId, index: u64) -> Result<Option<StoredEntry>, tokio_postgres::Error> {
    let row = c.client.query_opt(&c.st.entry, &[&(log as i16), &(index as i64)]).await?;
    row.as_ref().map(stored_entry).transpose()
}

pub(super) async fn read_entries(c: Arc<Conn>, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, tokio_postgres::Error> {
    let (lo, hi) = (bigint(start), bigint(start.saturating_add(count)));
    let rows = c.client.query(&c.st.entries, &[&(log as i16), &lo, &hi]).await?;
    rows.iter().map(stored_entry).collect()
}
/// Indices are BIGINT: anything past i64::MAX is past every log's end.
pub(super) fn bigint(i: u64) -> i64 {
    i.min(i64::MAX as u64) as i64
}

pub(super) async fn read_checkpoint(c: Arc<Conn>, log: LogId) -> Result<Option<StoredCheckpoint>, tokio_postgres::Error> {
    let row = c.client.query_opt(&c.st.checkpoint, &[&(log as i16)]).await?;
    row.map(|r| Ok(StoredCheckpoint { size: r.try_get::<_, i64>(0)? as u64, note: r.try_get(1)? })).transpose()
}

pub(super) fn parse_keys(rows: &[tokio_postgres::Row]) -> Result<Vec<EntryKeys>, StorageError> {
    rows.iter()
        .map(|r| {
            let leaf: Vec<u8> = r.try_get(0).map_err(classify)?;
            Ok(EntryKeys {
                leaf_hash: leaf.try_into().map_err(|_| StorageError::Corrupt("a stored leaf hash is not 32 bytes".into()))?,
                digest: r.try_get(1).map_err(classify)?,
                identity: r.try_get(2).map_err(classify)?,
                public_key: r.try_get(3).map_err(classify)?,
            })
        })
        .collect()
}

pub(super) async fn read_receipts(c: Arc<Conn>, log: LogId, wanted: Vec<i64>) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    c.client.query("SELECT idx, integrated_time, stamp FROM entries WHERE log = $1 AND idx = ANY($2)", &[&(log as i16), &wanted]).await
}

pub(super) fn parse_receipts(rows: &[tokio_postgres::Row]) -> Result<Vec<(u64, i64, Option<Vec<u8>>)>, StorageError> {
    rows.iter()
        .map(|r| Ok((r.try_get::<_, i64>(0).map_err(classify)? as u64, r.try_get(1).map_err(classify)?, r.try_get(2).map_err(classify)?)))
        .collect()
}
