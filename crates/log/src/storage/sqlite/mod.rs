//! The embedded default backend: SQLite in WAL mode with `synchronous=FULL`.
//!
//! WAL lets readers run while the sequencer commits, and FULL makes every commit fsync the
//! WAL, which is the durability the sequencer's acknowledgements promise. One connection
//! writes; a small pool serves reads (see [`Readers`]).
//!
//! - `readers`: the pool of read-only connections and their snapshots, and SQLite's errors as
//!   the store's.
//! - [`keys`]: the lookup index by leaf hash, digest, identity and signer's key, in a file of its own.
//! - `schema`: the tables and their migrations, and `signet doctor`'s looks.
//! - `rows`: an entry's row id, and the entry reads' statements and decoders.

#[macro_use]
mod rows;
mod keys;
mod readers;
mod schema;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};
use signet_db::sqlite::{self as db, Checkpoints, Durability};

use super::*;
use keys::{KeyIndex, SearchKind};
use readers::{backend, from_db, stable_plans, Reader, Readers, READER_CACHE_KIB};
use rows::{attach, entry_keys, hash_column, row_id, stored_entry, ENTRY_BY_ID, MAX_INDEX};
pub use schema::{schema_version, shard_records};
use schema::MIGRATIONS;

pub struct SqliteStorage {
    /// The schema versions this open applied (empty when the file was current).
    pub applied_migrations: Vec<i32>,
    writer: Mutex<Connection>,
    readers: Arc<Readers>,
    keys: Arc<KeyIndex>,
    /// Tells the checkpointer thread to end with the store.
    stop: Arc<AtomicBool>,
}

/// The writer's page cache, in KiB. A commit touches the last pages of the append-only tables,
/// the changed tiles and the checkpoint row: a few hundred pages, and the writer reads through
/// the memory map too. A larger cache only kept written pages nobody reads again, filling for
/// half an hour at the soak's rate (it was 128 MiB).
const WRITER_CACHE_KIB: u32 = 16 * 1024;

/// How often the checkpointer copies the WAL into the database. Often, so that each copy is
/// small: the copy ends with an fsync of the database file, and the commits' WAL fsyncs queue
/// behind its writes on the disk (figures: docs/performance.md, "The measurements behind the code's shape").
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// Copies the WAL back into the database from a thread of its own. Left to SQLite's
/// auto-checkpoint, that copy (and its fsync) would run inside a commit every few thousand
/// entries and stall the sequencer; PASSIVE checkpoints never block the writer.
fn spawn_checkpointer(path: &Path, readers: Arc<Readers>, stop: Arc<AtomicBool>) -> Result<(), StorageError> {
    let conn = db::open_beside(path).map_err(from_db)?;
    std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || loop {
            std::thread::sleep(CHECKPOINT_INTERVAL);
            if stop.load(Ordering::Relaxed) {
                return;
            }
            readers.expire();
            if let Err(e) = db::checkpoint(&conn) {
                tracing::warn!(error = %e, "WAL checkpoint failed");
            }
        })
        .map_err(|e| StorageError::Backend(e.to_string()))?;
    Ok(())
}

impl SqliteStorage {
    pub fn open(path: &Path) -> Result<Self, StorageError> {
        let how = db::Writer {
            durability: Durability::Full,
            checkpoints: Checkpoints::Manual,
            page_size: None,
            cache_kib: Some(WRITER_CACHE_KIB),
            mmap: true,
            journal_size_limit: None,
        };
        let mut writer = db::open_writer(path, &how).map_err(from_db)?;
        let applied_migrations = db::migrate(&mut writer, path, MIGRATIONS).map_err(|e| StorageError::Backend(e.to_string()))?;
        let keys = KeyIndex::open(path, &database_id(&writer)?)?;
        catch_up(&writer, &keys)?;
        keys.spawn_writer()?;
        let stop = Arc::new(AtomicBool::new(false));
        let readers = Arc::new(Readers { path: path.to_path_buf(), idle: Mutex::new(Vec::new()) });
        spawn_checkpointer(path, readers.clone(), stop.clone())?;
        Ok(SqliteStorage { applied_migrations, writer: Mutex::new(writer), readers, keys, stop })
    }

    /// Keys committed and not yet in the key index file (for tests and metrics).
    pub fn keys_pending(&self) -> usize {
        self.keys.pending()
    }

    /// Writes the recent keys to the key index file now.
    pub fn flush_keys(&self) -> Result<(), StorageError> {
        self.keys.flush()
    }

    /// The candidates of a search by `kind`, confirmed against the stored keys: a 64-bit
    /// prefix match is not yet a match.
    fn find_search_key(&self, log: LogId, kind: SearchKind, value: &[u8], after: Option<u64>, limit: usize) -> Result<Vec<u64>, StorageError> {
        let candidates = self.keys.search_candidates(log, kind, value, after, limit)?;
        let stored = self.stored_keys(log, candidates.iter().copied())?;
        let confirmed: std::collections::HashSet<u64> = stored
            .into_iter()
            .filter(|(_, k)| match kind {
                SearchKind::Digest => k.digest.as_deref() == Some(value),
                SearchKind::Identity => k.identity.as_deref() == Some(value),
                SearchKind::PublicKey => k.public_key.as_deref() == Some(value),
            })
            .map(|(i, _)| i)
            .collect();
        Ok(candidates.into_iter().filter(|i| confirmed.contains(i)).collect())
    }

    /// The entry with leaf hash `leaf`: the key index's candidates confirmed against the
    /// entries themselves, which the caller wants anyway (one read instead of two).
    fn entry_by_leaf(&self, log: LogId, leaf: &Hash) -> Result<Option<StoredEntry>, StorageError> {
        let candidates: Vec<u64> = self.keys.leaf_candidates(log, std::slice::from_ref(leaf))?.into_iter().map(|(_, i)| i).collect();
        if candidates.is_empty() {
            return Ok(None);
        }
        let rows = self.readers.read_complete(
            |c| {
                let mut st = c.prepare_cached(ENTRY_BY_ID)?;
                let mut out = Vec::with_capacity(candidates.len());
                for &i in candidates.iter().filter(|&&i| i < MAX_INDEX) {
                    if let Some(row) = st.query_row([row_id(log, i)], |r| stored_entry(log, r)).optional()? {
                        out.push(attach(c, row)?);
                    }
                }
                Ok(out)
            },
            // Every candidate is a committed entry (see `stored_keys`).
            |out| out.len() == candidates.len(),
        )?;
        Ok(rows.into_iter().find(|e| e.leaf_hash == *leaf))
    }

    /// Confirms candidate indices against the stored entries' keys. Every candidate is a
    /// committed entry (the key index holds only those, a prefix match included), so a reused
    /// snapshot serves unless it predates one of them: then a fresh one is read, once.
    fn stored_keys(&self, log: LogId, indices: impl Iterator<Item = u64>) -> Result<Vec<(u64, EntryKeys)>, StorageError> {
        let ids: Vec<u64> = indices.filter(|&i| i < MAX_INDEX).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.readers.read_complete(
            |c| {
                let mut st = c.prepare_cached(concat!(ENTRY_KEYS!(), " WHERE id = ?1"))?;
                let mut out = Vec::with_capacity(ids.len());
                for &i in &ids {
                    let row = st.query_row([row_id(log, i)], entry_keys).optional()?;
                    out.extend(row.map(|k| (i, k)));
                }
                Ok(out)
            },
            |out| out.len() == ids.len(),
        )
    }
}

/// Bytes SQLite has allocated in this process (every connection's page cache, statements,
/// the key index's): what a soak compares the process's heap with.
pub fn memory_used() -> u64 {
    // SAFETY: sqlite3_memory_used takes no arguments and reads SQLite's own allocation
    // counter, which the bundled (serialized) build keeps under its own mutex.
    let bytes = unsafe { rusqlite::ffi::sqlite3_memory_used() };
    bytes.max(0) as u64
}

/// This database's identity, made once: the key index file records whose index it is.
fn database_id(c: &Connection) -> Result<Vec<u8>, StorageError> {
    let mut fresh = [0u8; 16];
    aws_lc_rs::rand::fill(&mut fresh).map_err(|_| StorageError::Backend("no randomness for the database id".into()))?;
    c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('database-id', ?1)", [&fresh[..]]).map_err(backend)?;
    c.query_row("SELECT value FROM meta WHERE key = 'database-id'", [], |r| r.get(0)).map_err(backend)
}

/// Indexes the committed entries that the key index file lacks: the last moments before a
/// crash or stop, or, for a file that is new, every entry.
fn catch_up(c: &Connection, keys: &KeyIndex) -> Result<(), StorageError> {
    const CHUNK: u64 = 65_536;
    let logs: Vec<(LogId, u64)> = {
        let mut st = c.prepare("SELECT log, size FROM checkpoints").map_err(backend)?;
        let rows = st.query_map([], |r| Ok((r.get::<_, LogId>(0)?, r.get::<_, i64>(1)? as u64))).map_err(backend)?;
        rows.collect::<rusqlite::Result<_>>().map_err(backend)?
    };
    for (log, size) in logs {
        let mut through = keys.indexed_through(log)?;
        if through > size {
            // Ahead of the log: the database was restored from an older copy.
            tracing::warn!(log, through, size, "the key index is ahead of the log; rebuilding it");
            keys.reset(log)?;
            through = 0;
        }
        if size - through > CHUNK {
            tracing::info!(log, entries = size - through, "indexing entries the key index lacks");
        }
        let mut st = c
            .prepare_cached("SELECT id, leaf_hash, digest, identity, public_key FROM entry_keys WHERE id >= ?1 AND id < ?2 ORDER BY id")
            .map_err(backend)?;
        while through < size {
            let end = (through + CHUNK).min(size);
            let rows: Vec<(u64, EntryKeys)> = st
                .query_map(params![row_id(log, through), row_id(log, end)], |r| {
                    Ok(((r.get::<_, i64>(0)? - row_id(log, 0)) as u64, EntryKeys { leaf_hash: hash_column(r, 1)?, digest: r.get(2)?, identity: r.get(3)?, public_key: r.get(4)? }))
                })
                .map_err(backend)?
                .collect::<rusqlite::Result<_>>()
                .map_err(backend)?;
            if rows.len() as u64 != end - through {
                return Err(StorageError::Corrupt(format!("log {log}: its checkpoint covers {size} entries, but entries {through}..{end} are not all stored")));
            }
            let batch: Vec<keys::Keys<'_>> = rows
                .iter()
                .map(|(i, k)| keys::Keys {
                    log,
                    index: *i,
                    leaf: &k.leaf_hash,
                    digest: k.digest.as_deref(),
                    identity: k.identity.as_deref(),
                    public_key: k.public_key.as_deref(),
                })
                .collect();
            keys.write_direct(log, &batch, end)?;
            through = end;
        }
    }
    Ok(())
}

impl Drop for SqliteStorage {
    fn drop(&mut self) {
        self.keys.stop();
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Storage for SqliteStorage {
    fn commit(&self, batch: &Batch) -> Result<(), StorageError> {
        let mut conn = self.writer.lock();
        let tx = conn.transaction().map_err(backend)?;
        // The checkpoint moves only from the size this batch extends (the trait's contract),
        // checked first so that a stale writer learns that, not a key collision.
        let previous = batch.previous_size();
        // Cached statements, as below: a statement prepared anew costs more than a small batch's inserts.
        let stored: Option<i64> = tx
            .prepare_cached("SELECT size FROM checkpoints WHERE log = ?1")
            .and_then(|mut st| st.query_row([batch.log], |r| r.get(0)).optional())
            .map_err(backend)?;
        if let Some(stored) = stored.filter(|&s| s as u64 != previous) {
            return Err(StorageError::Conflict { log: batch.log, expected: previous, stored: stored as u64 });
        }
        {
            let mut keys = tx
                .prepare_cached("INSERT INTO entry_keys(id, leaf_hash, digest, integrated_time, identity, public_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .map_err(backend)?;
            let mut bodies = tx
                .prepare_cached("INSERT INTO entry_bodies(id, body, stamp, integrated_time, attestation) VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(backend)?;
            for e in &batch.entries {
                let id = row_id(batch.log, e.index);
                let time = e.integrated_time.unwrap_or(batch.integrated_time);
                keys.execute(params![id, &e.leaf_hash[..], e.digest.as_deref(), time, e.identity.as_deref(), e.public_key.as_deref()])
                    .map_err(backend)?;
                let attestation = e.attestation.as_ref().map(|a| &a.digest[..]);
                bodies.execute(params![id, &e.body, e.stamp.as_deref(), time, attestation]).map_err(backend)?;
                if let Some(a) = &e.attestation {
                    tx.prepare_cached("INSERT OR IGNORE INTO attestations(digest, data) VALUES (?1, ?2)")
                        .and_then(|mut st| st.execute(params![&a.digest[..], &a.data]))
                        .map_err(backend)?;
                }
            }
            let mut tile = tx
                .prepare_cached("INSERT OR REPLACE INTO tiles(log, level, idx, hashes) VALUES (?1, ?2, ?3, ?4)")
                .map_err(backend)?;
            for t in &batch.tiles {
                tile.execute(params![batch.log, t.level, t.index as i64, &t.hashes]).map_err(backend)?;
            }
            let mut leaf_tile = tx.prepare_cached("INSERT INTO leaf_tiles(id, nodes) VALUES (?1, ?2)").map_err(backend)?;
            for t in &batch.leaf_tiles {
                leaf_tile.execute(params![row_id(batch.log, t.index), &t.nodes]).map_err(backend)?;
            }
            tx.prepare_cached("INSERT OR REPLACE INTO checkpoints(log, size, note) VALUES (?1, ?2, ?3)")
                .and_then(|mut st| st.execute(params![batch.log, batch.checkpoint.size as i64, &batch.checkpoint.note]))
                .map_err(backend)?;
        }
        tx.commit().map_err(backend)?;
        drop(conn);
        // Before the commit is answered: whoever hears of an entry can look it up.
        let keys: Vec<keys::Keys<'_>> = batch
            .entries
            .iter()
            .map(|e| keys::Keys {
                log: batch.log,
                index: e.index,
                leaf: &e.leaf_hash,
                digest: e.digest.as_deref(),
                identity: e.identity.as_deref(),
                public_key: e.public_key.as_deref(),
            })
            .collect();
        self.keys.add(&keys);
        Ok(())
    }

    fn tile(&self, log: LogId, level: u8, index: u64) -> Result<Option<Tile>, StorageError> {
        if index > i64::MAX as u64 {
            return Ok(None);
        }
        self.readers.read_latest(|c| {
            c.prepare_cached("SELECT hashes FROM tiles WHERE log = ?1 AND level = ?2 AND idx = ?3")?
                .query_row(params![log, level, index as i64], |r| Ok(Tile { level, index, hashes: r.get(0)? }))
                .optional()
        })
    }

    fn leaf_tile(&self, log: LogId, index: u64) -> Result<Option<Vec<u8>>, StorageError> {
        if index >= MAX_INDEX {
            return Ok(None);
        }
        // Immutable once committed; a log written before leaf tiles were stored lacks the old ones.
        self.readers.read_complete(
            |c| c.prepare_cached("SELECT nodes FROM leaf_tiles WHERE id = ?1")?.query_row([row_id(log, index)], |r| r.get(0)).optional(),
            |found: &Option<Vec<u8>>| found.is_some(),
        )
    }

    fn find_leaves(&self, log: LogId, leaves: &[Hash]) -> Result<Vec<(usize, u64)>, StorageError> {
        let candidates = self.keys.leaf_candidates(log, leaves)?;
        if candidates.is_empty() {
            return Ok(candidates);
        }
        let stored: HashMap<u64, Hash> =
            self.stored_keys(log, candidates.iter().map(|c| c.1))?.into_iter().map(|(i, k)| (i, k.leaf_hash)).collect();
        Ok(candidates.into_iter().filter(|&(pos, i)| stored.get(&i) == leaves.get(pos)).collect())
    }

    fn entry_by_leaf_async(&self, log: LogId, leaf: Hash) -> ReadFuture<'_, Option<StoredEntry>> {
        Box::pin(std::future::ready(self.entry_by_leaf(log, &leaf)))
    }

    fn find_digest_async(&self, log: LogId, digest: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>> {
        Box::pin(std::future::ready(self.find_search_key(log, SearchKind::Digest, &digest, after, limit)))
    }

    fn find_identity_async(&self, log: LogId, identity: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>> {
        Box::pin(std::future::ready(self.find_search_key(log, SearchKind::Identity, &identity, after, limit)))
    }

    fn find_public_key_async(&self, log: LogId, key: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>> {
        Box::pin(std::future::ready(self.find_search_key(log, SearchKind::PublicKey, &key, after, limit)))
    }

    fn freeze(&self, log: LogId) -> Result<u64, StorageError> {
        self.latest_checkpoint(log)?
            .map(|c| c.size)
            .ok_or_else(|| StorageError::Corrupt(format!("log {log} has no stored checkpoint to freeze")))
    }

    fn latest_checkpoint(&self, log: LogId) -> Result<Option<StoredCheckpoint>, StorageError> {
        self.readers.read_latest(|c| {
            c.query_row("SELECT size, note FROM checkpoints WHERE log = ?1", [log], |r| {
                Ok(StoredCheckpoint { size: r.get::<_, i64>(0)? as u64, note: r.get(1)? })
            })
            .optional()
        })
    }

    fn tiles(&self, log: LogId, level: u8) -> Result<Vec<Tile>, StorageError> {
        self.readers.read_latest(|c| {
            let mut st = c.prepare_cached("SELECT idx, hashes FROM tiles WHERE log = ?1 AND level = ?2 ORDER BY idx")?;
            let rows = st.query_map(params![log, level], |r| {
                Ok(Tile { level, index: r.get::<_, i64>(0)? as u64, hashes: r.get(1)? })
            })?;
            rows.collect()
        })
    }

    fn keys(&self, log: LogId, start: u64, count: u64) -> Result<Vec<EntryKeys>, StorageError> {
        let (lo, hi) = (start.min(MAX_INDEX), start.saturating_add(count).min(MAX_INDEX));
        self.readers.read_complete(
            |c| {
                let mut st = c.prepare_cached(concat!(ENTRY_KEYS!(), " WHERE id >= ?1 AND id < ?2 ORDER BY id"))?;
                let rows = st.query_map(params![row_id(log, lo), row_id(log, hi)], entry_keys)?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            },
            |v| v.len() as u64 == hi - lo,
        )
    }

    fn entry(&self, log: LogId, index: u64) -> Result<Option<StoredEntry>, StorageError> {
        if index >= MAX_INDEX {
            return Ok(None);
        }
        self.readers.read_complete(
            |c| {
                let row = c.prepare_cached(ENTRY_BY_ID)?.query_row([row_id(log, index)], |r| stored_entry(log, r)).optional()?;
                row.map(|row| attach(c, row)).transpose()
            },
            Option::is_some,
        )
    }

    fn entries(&self, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError> {
        let (lo, hi) = (start.min(MAX_INDEX), start.saturating_add(count).min(MAX_INDEX));
        self.readers.read_complete(
            |c| {
                let mut st = c.prepare_cached(entry_select!("WHERE b.id >= ?1 AND b.id < ?2 ORDER BY b.id"))?;
                let rows = st.query_map(params![row_id(log, lo), row_id(log, hi)], |r| stored_entry(log, r))?;
                rows.map(|row| attach(c, row?)).collect::<rusqlite::Result<Vec<_>>>()
            },
            |v| v.len() as u64 == hi - lo,
        )
    }

    fn backfill_search_keys(&self, log: LogId, keys: &[Backfill]) -> Result<(), StorageError> {
        let keys: Vec<&Backfill> = keys.iter().filter(|k| k.index < MAX_INDEX).collect();
        if keys.is_empty() {
            return Ok(());
        }
        // The key file first: its rows are only candidates, each confirmed against
        // `entry_keys`, so a crash between the two leaves candidates that match nothing until
        // the next run fills `entry_keys` in (the other order would leave entries whose keys
        // are stored but can never be found, and which no later run would pick up).
        let mut search: Vec<(u64, SearchKind, &[u8])> = Vec::with_capacity(keys.len() * 2);
        for k in &keys {
            search.push((k.index, SearchKind::PublicKey, &k.public_key));
            if let Some(identity) = &k.identity {
                search.push((k.index, SearchKind::Identity, identity));
            }
        }
        self.keys.add_search_direct(log, &search)?;
        let mut conn = self.writer.lock();
        let tx = conn.transaction().map_err(backend)?;
        {
            let mut st = tx
                .prepare_cached("UPDATE entry_keys SET identity = ?2, public_key = ?3 WHERE id = ?1 AND public_key IS NULL")
                .map_err(backend)?;
            for k in &keys {
                st.execute(params![row_id(log, k.index), k.identity.as_deref(), &k.public_key[..]]).map_err(backend)?;
            }
        }
        tx.commit().map_err(backend)?;
        drop(conn);
        // Readers keep a snapshot up to `SNAPSHOT_TTL` on the grounds that entries never
        // change; these did, so the idle ones start over and the next search sees them.
        self.readers.idle.lock().retain_mut(|r| r.end_snapshot().is_ok());
        Ok(())
    }

    fn put_meta(&self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        let conn = self.writer.lock();
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", params![key, value]).map_err(backend)?;
        Ok(())
    }

    fn get_or_init_meta(&self, key: &str, init: &[u8]) -> Result<Vec<u8>, StorageError> {
        let conn = self.writer.lock();
        conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?1, ?2)", params![key, init])
            .map_err(backend)?;
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).map_err(backend)
    }

    fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        // The writer's connection: a value set a moment ago by this process is seen.
        let conn = self.writer.lock();
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).optional().map_err(backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, body: &[u8]) -> NewEntry {
        NewEntry {
            index,
            leaf_hash: crate::merkle::leaf_hash(body),
            digest: Some(vec![index as u8 % 2; 32]),
            identity: None,
            public_key: None,
            body: body.to_vec(),
            stamp: None,
            integrated_time: None,
            attestation: None,
        }
    }

    #[test]
    fn commit_and_read_back_per_log() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap();
        let batch = Batch {
            log: 1,
            integrated_time: 1700,
            entries: vec![entry(0, b"a"), entry(1, b"b"), entry(2, b"c")],
            tiles: vec![Tile { level: 0, index: 0, hashes: vec![1; 96] }],
            leaf_tiles: vec![],
            checkpoint: StoredCheckpoint { size: 3, note: "n".into() },
        };
        s.commit(&batch).unwrap();
        let mut other = batch.clone();
        other.log = 2;
        other.entries.truncate(1);
        other.checkpoint.size = 1;
        s.commit(&other).unwrap();

        assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().size, 3);
        assert_eq!(s.latest_checkpoint(2).unwrap().unwrap().size, 1);
        assert_eq!(s.latest_checkpoint(3).unwrap(), None);
        let e = s.entry(1, 1).unwrap().unwrap();
        assert_eq!((e.index, e.body.as_slice(), e.integrated_time), (1, &b"b"[..], 1700));
        assert_eq!(s.entries(1, 1, 10).unwrap().len(), 2);
        assert_eq!(s.entries(2, 0, 10).unwrap().len(), 1);
        let keys = s.keys(1, 0, 10).unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[2].leaf_hash, crate::merkle::leaf_hash(b"c"));
        assert_eq!(keys[1].digest.as_deref(), Some(&[1u8; 32][..]));
        assert_eq!(s.keys(2, 0, 10).unwrap().len(), 1);
        assert_eq!(s.entry(1, u64::MAX).unwrap(), None);
        assert_eq!(s.tiles(1, 0).unwrap()[0].hashes.len(), 96);
        assert_eq!(s.get_or_init_meta("tree", b"x").unwrap(), b"x");
        assert_eq!(s.get_or_init_meta("tree", b"y").unwrap(), b"x");
    }

    #[test]
    fn a_reused_snapshot_still_sees_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap();
        let batch = |i: u64| Batch {
            log: 1,
            integrated_time: 10 + i as i64,
            entries: vec![entry(i, format!("e{i}").as_bytes())],
            tiles: vec![],
            leaf_tiles: vec![],
            checkpoint: StoredCheckpoint { size: i + 1, note: format!("{i}") },
        };
        s.commit(&batch(0)).unwrap();
        // This read leaves a snapshot open in the pooled reader; the next commit lands after it.
        assert_eq!(s.entry(1, 0).unwrap().unwrap().integrated_time, 10);
        for i in 1..20 {
            s.commit(&batch(i)).unwrap();
            let e = s.entry(1, i).unwrap().expect("a committed entry is found at once");
            assert_eq!((e.body, e.integrated_time), (format!("e{i}").into_bytes(), 10 + i as i64));
            assert_eq!(e.leaf_hash, crate::merkle::leaf_hash(format!("e{i}").as_bytes()));
            assert_eq!(s.entries(1, 0, i + 1).unwrap().len() as u64, i + 1);
            assert_eq!(s.keys(1, 0, i + 1).unwrap().len() as u64, i + 1);
            assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().size, i + 1);
        }
    }

    #[test]
    fn idle_snapshots_end_after_their_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap();
        assert_eq!(s.entry(1, 0).unwrap(), None);
        assert!(s.readers.idle.lock().iter().all(|r| r.snapshot.is_some()));
        std::thread::sleep(readers::SNAPSHOT_TTL + Duration::from_millis(10));
        s.readers.expire();
        assert!(s.readers.idle.lock().iter().all(|r| r.snapshot.is_none()));
    }

    #[test]
    fn rows_from_before_the_integrated_time_column_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        {
            // The schema of the first release: no entry_bodies.integrated_time.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(&schema::SCHEMA.replace(", integrated_time INTEGER);", ");")).unwrap();
            c.execute("INSERT INTO entry_keys(id, leaf_hash, digest, integrated_time) VALUES (?1, ?2, NULL, 77)",
                params![row_id(1, 0), &crate::merkle::leaf_hash(b"old")[..]]).unwrap();
            c.execute("INSERT INTO entry_bodies(id, body, stamp) VALUES (?1, ?2, NULL)", params![row_id(1, 0), &b"old"[..]]).unwrap();
        }
        let s = SqliteStorage::open(&path).unwrap();
        let new = Batch {
            log: 1,
            integrated_time: 88,
            entries: vec![entry(1, b"new")],
            tiles: vec![],
            leaf_tiles: vec![],
            checkpoint: StoredCheckpoint { size: 2, note: "2".into() },
        };
        s.commit(&new).unwrap();
        let times: Vec<i64> = s.entries(1, 0, 2).unwrap().iter().map(|e| e.integrated_time).collect();
        assert_eq!(times, [77, 88]);
        assert_eq!(s.entry(1, 0).unwrap().unwrap().body, b"old");
    }

    fn batch(log: LogId, start: u64, end: u64) -> Batch {
        Batch {
            log,
            integrated_time: 1,
            entries: (start..end).map(|i| entry(i, format!("e{i}").as_bytes())).collect(),
            tiles: vec![],
            leaf_tiles: vec![],
            checkpoint: StoredCheckpoint { size: end, note: format!("{end}") },
        }
    }

    fn found(s: &SqliteStorage, i: u64) -> Vec<(usize, u64)> {
        s.find_leaves(1, &[crate::merkle::leaf_hash(format!("e{i}").as_bytes())]).unwrap()
    }

    /// The key index file is derived data: committed keys are found before it has them,
    /// and a file that is missing, another database's, or ahead of a restored database is
    /// rebuilt from the entries.
    #[test]
    fn the_key_index_finds_every_commit_and_is_rebuilt_when_it_cannot_be_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let (path, older) = (dir.path().join("db.sqlite"), dir.path().join("older.sqlite"));
        let keys_of = |p: &Path| std::path::PathBuf::from(format!("{}.keys", p.display()));
        let s = SqliteStorage::open(&path).unwrap();
        s.commit(&batch(1, 0, 3)).unwrap();
        assert_eq!(found(&s, 1), [(0, 1)], "found from memory before the file has it");
        assert!(s.keys_pending() >= 3);
        s.flush_keys().unwrap();
        assert_eq!(s.keys_pending(), 0);
        assert_eq!(found(&s, 1), [(0, 1)], "and from the file after");
        // A copy of the database as it is now: what a backup restores.
        s.writer.lock().execute("VACUUM INTO ?1", [older.to_str().unwrap()]).unwrap();
        s.commit(&batch(1, 3, 5)).unwrap();
        s.flush_keys().unwrap();
        drop(s);

        // The restored copy, beside the newer index: that index is ahead, so it is rebuilt.
        std::fs::copy(keys_of(&path), keys_of(&older)).unwrap();
        let restored = SqliteStorage::open(&older).unwrap();
        assert_eq!(found(&restored, 2), [(0, 2)]);
        assert!(found(&restored, 4).is_empty(), "an entry the restored log never had");
        restored.commit(&batch(1, 3, 4)).unwrap();
        assert_eq!(found(&restored, 3), [(0, 3)]);
        drop(restored);

        // Missing: rebuilt at open.
        std::fs::remove_file(keys_of(&path)).unwrap();
        let s = SqliteStorage::open(&path).unwrap();
        assert_eq!(found(&s, 4), [(0, 4)]);
        assert_eq!(found(&s, 0), [(0, 0)]);
        drop(s);

        // Another database's file, as far along as this one, is replaced, not believed.
        let other = dir.path().join("other.sqlite");
        let o = SqliteStorage::open(&other).unwrap();
        let mut theirs = batch(1, 0, 5);
        for e in &mut theirs.entries {
            e.body.insert(0, b'x');
            e.leaf_hash = crate::merkle::leaf_hash(&e.body);
        }
        o.commit(&theirs).unwrap();
        drop(o);
        std::fs::copy(keys_of(&path), keys_of(&other)).unwrap();
        let o = SqliteStorage::open(&other).unwrap();
        assert_eq!(o.find_leaves(1, &[theirs.entries[3].leaf_hash]).unwrap(), [(0, 3)]);
        assert!(found(&o, 3).is_empty());
    }

    #[test]
    fn a_failed_batch_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap();
        let ok = Batch {
            log: 1,
            integrated_time: 1,
            entries: vec![entry(0, b"a")],
            tiles: vec![],
            leaf_tiles: vec![],
            checkpoint: StoredCheckpoint { size: 1, note: "1".into() },
        };
        s.commit(&ok).unwrap();
        // Index 1 is new but index 0 repeats: the primary key refuses it, so the whole batch rolls back.
        let bad = Batch {
            entries: vec![entry(1, b"b"), entry(0, b"dup")],
            checkpoint: StoredCheckpoint { size: 2, note: "2".into() },
            ..ok.clone()
        };
        assert!(s.commit(&bad).is_err());
        assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().size, 1);
        assert_eq!(s.entry(1, 1).unwrap(), None);
    }
}
