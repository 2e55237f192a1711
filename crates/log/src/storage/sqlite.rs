//! The embedded default backend: SQLite in WAL mode with `synchronous=FULL`.
//!
//! WAL lets readers run while the sequencer commits, and FULL makes every commit fsync the
//! WAL, which is the durability the sequencer's acknowledgements promise. One connection
//! writes; a small pool serves reads.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::*;

/// Distinguishes stores in the per-thread reader cache.
static NEXT_STORE_ID: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// One read-only connection per thread and store: reads never wait on a lock or hand
    /// off to another thread, which at tens of thousands of reads a second is most of
    /// their cost.
    static READERS: RefCell<HashMap<usize, Connection>> = RefCell::new(HashMap::new());
}

pub struct SqliteStorage {
    id: usize,
    path: PathBuf,
    writer: Mutex<Connection>,
    /// Tells the checkpointer thread to end with the store.
    stop: Arc<AtomicBool>,
}

fn backend(e: rusqlite::Error) -> StorageError {
    StorageError::Backend(e.to_string())
}

/// Indices stay below 2^48 so the log id fits above them in a row id.
const MAX_INDEX: u64 = 1 << 48;

/// Entries of all logs share one table; the log id sits in the top bits of the row id.
fn row_id(log: LogId, index: u64) -> i64 {
    ((log as i64) << 48) | index as i64
}

/// `entry_keys` is small and scanned at startup; `entry_bodies` holds the bulk. Both are
/// append-only rowid tables, so a commit dirties only the pages at their ends.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS entry_keys(
    id INTEGER PRIMARY KEY,
    leaf_hash BLOB NOT NULL,
    digest BLOB,
    integrated_time INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entry_bodies(id INTEGER PRIMARY KEY, body BLOB NOT NULL, stamp BLOB);
CREATE TABLE IF NOT EXISTS tiles(
    log INTEGER NOT NULL, level INTEGER NOT NULL, idx INTEGER NOT NULL, hashes BLOB NOT NULL,
    PRIMARY KEY(log, level, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints(log INTEGER PRIMARY KEY, size INTEGER NOT NULL, note TEXT NOT NULL);
";

/// Copies the WAL back into the database from a thread of its own. Left to SQLite's
/// auto-checkpoint, that copy (and its fsync) would run inside a commit every few thousand
/// entries and stall the sequencer; PASSIVE checkpoints never block the writer.
fn spawn_checkpointer(path: &Path, stop: Arc<AtomicBool>) -> Result<(), StorageError> {
    let conn = Connection::open(path).map_err(backend)?;
    conn.execute_batch("PRAGMA busy_timeout=5000;").map_err(backend)?;
    std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(500));
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                tracing::warn!(error = %e, "WAL checkpoint failed");
            }
        })
        .map_err(|e| StorageError::Backend(e.to_string()))?;
    Ok(())
}

impl SqliteStorage {
    pub fn open(path: &Path) -> Result<Self, StorageError> {
        let writer = Connection::open(path).map_err(backend)?;
        writer
            .execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000; \
                 PRAGMA cache_size=-131072; PRAGMA mmap_size=17179869184; PRAGMA wal_autocheckpoint=0;",
            )
            .map_err(backend)?;
        writer.execute_batch(SCHEMA).map_err(backend)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        let stop = Arc::new(AtomicBool::new(false));
        spawn_checkpointer(path, stop.clone())?;
        let id = NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed);
        Ok(SqliteStorage { id, path: path.to_path_buf(), writer: Mutex::new(writer), stop })
    }

    fn open_reader(&self) -> rusqlite::Result<Connection> {
        let r = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        r.execute_batch("PRAGMA busy_timeout=5000; PRAGMA mmap_size=17179869184;")?;
        Ok(r)
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StorageError> {
        READERS.with(|cell| {
            let mut readers = cell.borrow_mut();
            let conn = match readers.entry(self.id) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(self.open_reader().map_err(backend)?),
            };
            f(conn).map_err(backend)
        })
    }
}

impl Drop for SqliteStorage {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Readers on other threads close when those threads end; this one's goes now.
        let _ = READERS.try_with(|cell| cell.borrow_mut().remove(&self.id));
    }
}

const ENTRY_SELECT: &str = "SELECT k.id, k.leaf_hash, k.integrated_time, b.body, b.stamp \
     FROM entry_keys k JOIN entry_bodies b ON b.id = k.id";

fn hash_column(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Hash> {
    let v: Vec<u8> = row.get(i)?;
    v.try_into().map_err(|_| rusqlite::Error::InvalidColumnType(i, "leaf_hash".into(), rusqlite::types::Type::Blob))
}

fn stored_entry(log: LogId, row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEntry> {
    let id: i64 = row.get(0)?;
    Ok(StoredEntry {
        index: (id - row_id(log, 0)) as u64,
        leaf_hash: hash_column(row, 1)?,
        integrated_time: row.get(2)?,
        body: row.get(3)?,
        stamp: row.get(4)?,
    })
}

impl Storage for SqliteStorage {
    fn commit(&self, batch: &Batch) -> Result<(), StorageError> {
        let mut conn = self.writer.lock();
        let tx = conn.transaction().map_err(backend)?;
        {
            let mut keys = tx
                .prepare_cached("INSERT INTO entry_keys(id, leaf_hash, digest, integrated_time) VALUES (?1, ?2, ?3, ?4)")
                .map_err(backend)?;
            let mut bodies =
                tx.prepare_cached("INSERT INTO entry_bodies(id, body, stamp) VALUES (?1, ?2, ?3)").map_err(backend)?;
            for e in &batch.entries {
                let id = row_id(batch.log, e.index);
                keys.execute(params![id, &e.leaf_hash[..], e.digest.as_deref(), batch.integrated_time])
                    .map_err(backend)?;
                bodies.execute(params![id, &e.body, e.stamp.as_deref()]).map_err(backend)?;
            }
            let mut tile = tx
                .prepare_cached("INSERT OR REPLACE INTO tiles(log, level, idx, hashes) VALUES (?1, ?2, ?3, ?4)")
                .map_err(backend)?;
            for t in &batch.tiles {
                tile.execute(params![batch.log, t.level, t.index as i64, &t.hashes]).map_err(backend)?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO checkpoints(log, size, note) VALUES (?1, ?2, ?3)",
                params![batch.log, batch.checkpoint.size as i64, &batch.checkpoint.note],
            )
            .map_err(backend)?;
        }
        tx.commit().map_err(backend)
    }

    fn latest_checkpoint(&self, log: LogId) -> Result<Option<StoredCheckpoint>, StorageError> {
        self.read(|c| {
            c.query_row("SELECT size, note FROM checkpoints WHERE log = ?1", [log], |r| {
                Ok(StoredCheckpoint { size: r.get::<_, i64>(0)? as u64, note: r.get(1)? })
            })
            .optional()
        })
    }

    fn tiles(&self, log: LogId, level: u8) -> Result<Vec<Tile>, StorageError> {
        self.read(|c| {
            let mut st = c.prepare_cached("SELECT idx, hashes FROM tiles WHERE log = ?1 AND level = ?2 ORDER BY idx")?;
            let rows = st.query_map(params![log, level], |r| {
                Ok(Tile { level, index: r.get::<_, i64>(0)? as u64, hashes: r.get(1)? })
            })?;
            rows.collect()
        })
    }

    fn keys(&self, log: LogId, start: u64, count: u64) -> Result<Vec<EntryKeys>, StorageError> {
        self.read(|c| {
            let mut st = c.prepare_cached("SELECT leaf_hash, digest FROM entry_keys WHERE id >= ?1 AND id < ?2 ORDER BY id")?;
            let rows = st.query_map(params![row_id(log, start), row_id(log, start.saturating_add(count).min(MAX_INDEX))], |r| {
                Ok(EntryKeys { leaf_hash: hash_column(r, 0)?, digest: r.get(1)? })
            })?;
            rows.collect()
        })
    }

    fn entry(&self, log: LogId, index: u64) -> Result<Option<StoredEntry>, StorageError> {
        if index >= MAX_INDEX {
            return Ok(None);
        }
        self.read(|c| {
            c.prepare_cached(&format!("{ENTRY_SELECT} WHERE k.id = ?1"))?
                .query_row([row_id(log, index)], |r| stored_entry(log, r))
                .optional()
        })
    }

    fn entries(&self, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError> {
        self.read(|c| {
            let mut st = c.prepare_cached(&format!("{ENTRY_SELECT} WHERE k.id >= ?1 AND k.id < ?2 ORDER BY k.id"))?;
            let end = row_id(log, start.saturating_add(count).min(MAX_INDEX));
            let rows = st.query_map(params![row_id(log, start.min(MAX_INDEX)), end], |r| stored_entry(log, r))?;
            rows.collect()
        })
    }

    fn get_or_init_meta(&self, key: &str, init: &[u8]) -> Result<Vec<u8>, StorageError> {
        let conn = self.writer.lock();
        conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?1, ?2)", params![key, init])
            .map_err(backend)?;
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).map_err(backend)
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
            body: body.to_vec(),
            stamp: None,
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
    fn a_failed_batch_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap();
        let ok = Batch {
            log: 1,
            integrated_time: 1,
            entries: vec![entry(0, b"a")],
            tiles: vec![],
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
