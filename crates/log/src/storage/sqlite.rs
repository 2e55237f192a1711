//! The embedded default backend: SQLite in WAL mode with `synchronous=FULL`.
//!
//! WAL lets readers run while the sequencer commits, and FULL makes every commit fsync the
//! WAL, which is the durability the sequencer's acknowledgements promise. One connection
//! writes; a small pool serves reads.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::*;

const READERS: usize = 4;

pub struct SqliteStorage {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
}

fn backend(e: rusqlite::Error) -> StorageError {
    StorageError::Backend(e.to_string())
}

/// Entries of all logs share one table; the log id sits in the top bits of the row id.
fn row_id(log: LogId, index: u64) -> i64 {
    ((log as i64) << 48) | index as i64
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS entries(
    id INTEGER PRIMARY KEY,
    leaf_hash BLOB NOT NULL,
    digest BLOB,
    integrated_time INTEGER NOT NULL,
    body BLOB NOT NULL,
    stamp BLOB
);
CREATE INDEX IF NOT EXISTS entries_by_leaf ON entries(leaf_hash);
CREATE INDEX IF NOT EXISTS entries_by_digest ON entries(digest) WHERE digest IS NOT NULL;
CREATE TABLE IF NOT EXISTS tiles(
    log INTEGER NOT NULL, level INTEGER NOT NULL, idx INTEGER NOT NULL, hashes BLOB NOT NULL,
    PRIMARY KEY(log, level, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints(log INTEGER PRIMARY KEY, size INTEGER NOT NULL, note TEXT NOT NULL);
";

impl SqliteStorage {
    pub fn open(path: &Path) -> Result<Self, StorageError> {
        let writer = Connection::open(path).map_err(backend)?;
        writer
            .execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000; \
                 PRAGMA cache_size=-131072; PRAGMA mmap_size=17179869184; PRAGMA wal_autocheckpoint=16384;",
            )
            .map_err(backend)?;
        writer.execute_batch(SCHEMA).map_err(backend)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let r = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(backend)?;
            r.execute_batch("PRAGMA busy_timeout=5000; PRAGMA mmap_size=17179869184;")
                .map_err(backend)?;
            readers.push(Mutex::new(r));
        }
        Ok(SqliteStorage { writer: Mutex::new(writer), readers, next_reader: AtomicUsize::new(0) })
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StorageError> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.readers.len() {
            if let Some(conn) = self.readers[(start + i) % self.readers.len()].try_lock() {
                return f(&conn).map_err(backend);
            }
        }
        let conn = self.readers[start % self.readers.len()].lock();
        f(&conn).map_err(backend)
    }
}

fn stored_entry(log: LogId, row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEntry> {
    let id: i64 = row.get(0)?;
    let leaf: Vec<u8> = row.get(1)?;
    Ok(StoredEntry {
        index: (id - row_id(log, 0)) as u64,
        leaf_hash: leaf.try_into().map_err(|_| rusqlite::Error::InvalidColumnType(1, "leaf_hash".into(), rusqlite::types::Type::Blob))?,
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
            let mut ins = tx
                .prepare_cached(
                    "INSERT INTO entries(id, leaf_hash, digest, integrated_time, body, stamp) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(backend)?;
            for e in &batch.entries {
                ins.execute(params![
                    row_id(batch.log, e.index),
                    &e.leaf_hash[..],
                    e.digest.as_deref(),
                    batch.integrated_time,
                    &e.body,
                    e.stamp.as_deref()
                ])
                .map_err(backend)?;
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

    fn find_leaves(&self, log: LogId, leaves: &[Hash]) -> Result<Vec<Option<u64>>, StorageError> {
        let (lo, hi) = (row_id(log, 0), row_id(log + 1, 0));
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT id FROM entries WHERE leaf_hash = ?1 AND id >= ?2 AND id < ?3 LIMIT 1",
            )?;
            leaves
                .iter()
                .map(|h| {
                    st.query_row(params![&h[..], lo, hi], |r| r.get::<_, i64>(0))
                        .optional()
                        .map(|id| id.map(|id| (id - lo) as u64))
                })
                .collect()
        })
    }

    fn entry(&self, log: LogId, index: u64) -> Result<Option<StoredEntry>, StorageError> {
        self.read(|c| {
            c.prepare_cached("SELECT id, leaf_hash, integrated_time, body, stamp FROM entries WHERE id = ?1")?
                .query_row([row_id(log, index)], |r| stored_entry(log, r))
                .optional()
        })
    }

    fn entries(&self, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT id, leaf_hash, integrated_time, body, stamp FROM entries WHERE id >= ?1 AND id < ?2 ORDER BY id",
            )?;
            let rows = st.query_map(params![row_id(log, start), row_id(log, start + count)], |r| stored_entry(log, r))?;
            rows.collect()
        })
    }

    fn indices_by_digest(&self, log: LogId, digest: &[u8], limit: usize) -> Result<Vec<u64>, StorageError> {
        let (lo, hi) = (row_id(log, 0), row_id(log + 1, 0));
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT id FROM entries WHERE digest = ?1 AND id >= ?2 AND id < ?3 ORDER BY id LIMIT ?4",
            )?;
            let rows = st.query_map(params![digest, lo, hi, limit as i64], |r| r.get::<_, i64>(0))?;
            rows.map(|id| id.map(|id| (id - lo) as u64)).collect()
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
        let found = s.find_leaves(1, &[crate::merkle::leaf_hash(b"c"), [0; 32]]).unwrap();
        assert_eq!(found, vec![Some(2), None]);
        assert_eq!(s.find_leaves(2, &[crate::merkle::leaf_hash(b"c")]).unwrap(), vec![None]);
        assert_eq!(s.indices_by_digest(1, &[0; 32], 10).unwrap(), vec![0, 2]);
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
