//! The SQLite backend's lookup index: leaf hash → entry (dedupe), digest, signing identity
//! and signer's key → entries (search).
//!
//! Both keys are uniformly random, so a B-tree of them dirties one random page per entry.
//! Inside the log's own commits that would multiply the WAL that every commit fsyncs, so the
//! index lives in a file of its own (`<database>.keys`), written by a background thread a
//! few hundred milliseconds after the commits, without fsync. Keys committed but not yet
//! written sit in memory ([`Recent`]), so a lookup always sees every committed entry.
//!
//! The file is derived data: each log's `indexed.through` says how far it is complete, and
//! opening re-indexes the rest from the entries. A crash loses at most its unflushed tail; a
//! missing or foreign file (another database's, or a restored backup's) is rebuilt.
//!
//! Keys are 64-bit prefixes (of the leaf hash; of SHA-256 of the digest or identity key): a
//! match is a candidate, which the caller confirms against the entry itself.
//!
//! `identities` came with schema version 3 of the database, `public_keys` with version 4: a
//! file made before gains the empty table at open, which is complete, since entries logged
//! before then have no identity (or key).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use rusqlite::{params, Connection, OptionalExtension};
use signet_core::hash::{sha256, Hash};

use signet_db::sqlite as db;

use super::{backend, LogId, StorageError};

/// How often the writer thread moves recent keys to the file. The keys are random, so a flush
/// writes about one page per key until it holds more keys than the table has pages: fewer,
/// larger flushes write fewer pages per key, and each flush also ends every reader's kept
/// snapshot (figures: docs/performance.md, "The measurements behind the code's shape").
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Recent keys past which the writer flushes at once rather than at its next tick.
const FLUSH_AT: usize = 65_536;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS leaves(log INTEGER NOT NULL, prefix INTEGER NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY(log, prefix, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS digests(log INTEGER NOT NULL, prefix INTEGER NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY(log, prefix, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS identities(log INTEGER NOT NULL, prefix INTEGER NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY(log, prefix, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS public_keys(log INTEGER NOT NULL, prefix INTEGER NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY(log, prefix, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS indexed(log INTEGER PRIMARY KEY, through INTEGER NOT NULL);
";

pub(super) fn leaf_key(leaf: &Hash) -> i64 {
    let [a, b, c, d, e, f, g, h, ..] = *leaf;
    i64::from_be_bytes([a, b, c, d, e, f, g, h])
}

/// The prefix of a search key (a digest or an identity).
pub(super) fn search_key(value: &[u8]) -> i64 {
    leaf_key(&sha256(value))
}

/// What a search looks entries up by: each kind has a table of its own in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum SearchKind {
    Digest,
    Identity,
    PublicKey,
}

impl SearchKind {
    const ALL: [SearchKind; 3] = [SearchKind::Digest, SearchKind::Identity, SearchKind::PublicKey];

    fn table(self) -> &'static str {
        match self {
            SearchKind::Digest => "digests",
            SearchKind::Identity => "identities",
            SearchKind::PublicKey => "public_keys",
        }
    }

    /// The search's statement, a constant so that each connection's statement cache finds it
    /// without formatting a string per search.
    fn select(self) -> &'static str {
        match self {
            SearchKind::Digest => "SELECT idx FROM digests WHERE log = ?1 AND prefix = ?2 AND idx >= ?3 ORDER BY idx LIMIT ?4",
            SearchKind::Identity => "SELECT idx FROM identities WHERE log = ?1 AND prefix = ?2 AND idx >= ?3 ORDER BY idx LIMIT ?4",
            SearchKind::PublicKey => "SELECT idx FROM public_keys WHERE log = ?1 AND prefix = ?2 AND idx >= ?3 ORDER BY idx LIMIT ?4",
        }
    }
}

/// Keys of committed entries that the file does not hold yet.
#[derive(Default)]
struct Memtable {
    leaves: HashMap<(LogId, i64), Vec<u64>>,
    search: HashMap<(LogId, SearchKind, i64), Vec<u64>>,
    /// Per log, one past the highest index held.
    through: HashMap<LogId, u64>,
    len: usize,
}

/// The active memtable, and those being written (visible until the file has them).
#[derive(Default)]
struct Recent {
    active: Memtable,
    flushing: Vec<Arc<Memtable>>,
    /// Flushes whose keys have left memory. A snapshot of the file begun after generation `g`
    /// was seen holds every key that left memory up to `g`: while the generation is still `g`,
    /// that snapshot and memory together hold every committed key.
    generation: u64,
}

/// A pooled reader of the file, marked with the generation its snapshot began after.
/// Starting a read transaction takes the WAL's locks (two `fcntl`s), a fifth of a lookup's
/// cost; a snapshot is kept until a flush moves keys out of memory.
type Reader = super::Reader<u64>;

pub(super) struct KeyIndex {
    recent: RwLock<Recent>,
    readers: Mutex<Vec<Reader>>,
    writer: Mutex<Connection>,
    path: PathBuf,
    wake: Condvar,
    wake_lock: Mutex<()>,
    stop: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// One entry's keys, as a commit or the catch-up hands them over.
pub(super) struct Keys<'a> {
    pub log: LogId,
    pub index: u64,
    pub leaf: &'a Hash,
    pub digest: Option<&'a [u8]>,
    pub identity: Option<&'a [u8]>,
    pub public_key: Option<&'a [u8]>,
}

impl Keys<'_> {
    fn search(&self) -> impl Iterator<Item = (SearchKind, &[u8])> {
        [(SearchKind::Digest, self.digest), (SearchKind::Identity, self.identity), (SearchKind::PublicKey, self.public_key)]
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
    }
}

impl KeyIndex {
    /// Opens the index beside the database at `db_path`, whose identity is `db_id`. A file
    /// made for another database is replaced.
    pub fn open(db_path: &Path, db_id: &[u8]) -> Result<Arc<KeyIndex>, StorageError> {
        let mut name = db_path.as_os_str().to_owned();
        name.push(".keys");
        let path = PathBuf::from(name);
        let writer = match Self::open_file(&path, db_id)? {
            Some(c) => c,
            None => {
                tracing::warn!(path = %path.display(), "the key index belongs to another database; rebuilding it");
                for suffix in ["", "-wal", "-shm"] {
                    let mut p = path.as_os_str().to_owned();
                    p.push(suffix);
                    let _ = std::fs::remove_file(PathBuf::from(p));
                }
                Self::open_file(&path, db_id)?
                    .ok_or_else(|| StorageError::Backend(format!("cannot make a fresh key index at {}", path.display())))?
            }
        };
        Ok(Arc::new(KeyIndex {
            recent: Default::default(),
            readers: Mutex::new(Vec::new()),
            writer: Mutex::new(writer),
            path,
            wake: Condvar::new(),
            wake_lock: Mutex::new(()),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
        }))
    }

    /// The file's connection, or `None` if the file was made for another database.
    fn open_file(path: &Path, db_id: &[u8]) -> Result<Option<Connection>, StorageError> {
        // Rebuilt from the log's own rows after a crash (`catch_up`), so its commits need
        // not wait for the disk; small pages, as its keys land on random pages.
        let how = db::Writer { durability: db::Durability::Normal, page_size: Some(1024), ..db::Writer::durable() };
        let c = db::open_writer(path, &how).map_err(super::from_db)?;
        c.execute_batch(SCHEMA).map_err(backend)?;
        c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('database', ?1)", [db_id]).map_err(backend)?;
        let owner: Vec<u8> = c.query_row("SELECT value FROM meta WHERE key = 'database'", [], |r| r.get(0)).map_err(backend)?;
        Ok((owner == db_id).then_some(c))
    }

    /// How far the file holds `log`'s entries.
    pub fn indexed_through(&self, log: LogId) -> Result<u64, StorageError> {
        let c = self.writer.lock();
        let n: Option<i64> = c
            .query_row("SELECT through FROM indexed WHERE log = ?1", [log], |r| r.get(0))
            .optional()
            .map_err(backend)?;
        Ok(n.unwrap_or(0) as u64)
    }

    /// Forgets everything about `log` (its entries are indexed again from the start).
    pub fn reset(&self, log: LogId) -> Result<(), StorageError> {
        let c = self.writer.lock();
        for table in ["leaves", "digests", "identities", "public_keys", "indexed"] {
            c.execute(&format!("DELETE FROM {table} WHERE log = ?1"), [log]).map_err(backend)?;
        }
        drop(c);
        self.snapshots_outdated(|_| ());
        Ok(())
    }

    /// Writes keys straight to the file (the catch-up at open), with `log`'s mark.
    pub fn write_direct(&self, log: LogId, keys: &[Keys<'_>], through: u64) -> Result<(), StorageError> {
        let mut c = self.writer.lock();
        let tx = c.transaction().map_err(backend)?;
        {
            let mut leaves = tx.prepare_cached("INSERT OR IGNORE INTO leaves(log, prefix, idx) VALUES (?1, ?2, ?3)").map_err(backend)?;
            for k in keys {
                leaves.execute(params![k.log, leaf_key(k.leaf), k.index as i64]).map_err(backend)?;
                for (kind, value) in k.search() {
                    insert_search(&tx, kind)?.execute(params![k.log, search_key(value), k.index as i64]).map_err(backend)?;
                }
            }
            mark(&tx, log, through)?;
        }
        tx.commit().map_err(backend)?;
        drop(c);
        self.snapshots_outdated(|_| ());
        Ok(())
    }

    /// Writes the search keys of entries the file already holds (`Storage::backfill_search_keys`)
    /// straight to it: they are older than its mark, so neither memory nor the catch-up at
    /// open would ever carry them there.
    pub fn add_search_direct(&self, log: LogId, keys: &[(u64, SearchKind, &[u8])]) -> Result<(), StorageError> {
        let mut c = self.writer.lock();
        let tx = c.transaction().map_err(backend)?;
        for &(index, kind, value) in keys {
            insert_search(&tx, kind)?.execute(params![log, search_key(value), index as i64]).map_err(backend)?;
        }
        tx.commit().map_err(backend)?;
        drop(c);
        self.snapshots_outdated(|_| ());
        Ok(())
    }

    /// Adds the keys of a batch that just committed.
    pub fn add(&self, keys: &[Keys<'_>]) {
        type Hashed = (LogId, u64, i64, Vec<(SearchKind, i64)>);
        let hashed: Vec<Hashed> = keys
            .iter()
            .map(|k| (k.log, k.index, leaf_key(k.leaf), k.search().map(|(kind, v)| (kind, search_key(v))).collect()))
            .collect();
        let mut r = self.recent.write();
        let m = &mut r.active;
        for (log, index, leaf, search) in hashed {
            m.leaves.entry((log, leaf)).or_default().push(index);
            for (kind, prefix) in search {
                m.search.entry((log, kind, prefix)).or_default().push(index);
            }
            let t = m.through.entry(log).or_default();
            *t = (*t).max(index + 1);
            m.len += 1;
        }
        if m.len >= FLUSH_AT {
            self.wake.notify_one();
        }
    }

    /// Indices whose leaf-hash prefix is `leaf`'s: candidates, unconfirmed.
    pub fn leaf_candidates(&self, log: LogId, leaves: &[Hash]) -> Result<Vec<(usize, u64)>, StorageError> {
        let mut out = self.read(
            |r| {
                let mut out = Vec::new();
                for (pos, leaf) in leaves.iter().enumerate() {
                    let k = (log, leaf_key(leaf));
                    for m in std::iter::once(&r.active).chain(r.flushing.iter().map(|m| &**m)) {
                        out.extend(m.leaves.get(&k).into_iter().flatten().map(|&i| (pos, i)));
                    }
                }
                out
            },
            |c, out| {
                let mut st = c.prepare_cached("SELECT idx FROM leaves WHERE log = ?1 AND prefix = ?2")?;
                for (pos, leaf) in leaves.iter().enumerate() {
                    let rows = st.query_map(params![log, leaf_key(leaf)], |r| r.get::<_, i64>(0))?;
                    for i in rows {
                        out.push((pos, i? as u64));
                    }
                }
                Ok(())
            },
        )?;
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Up to `limit` indices after `after` whose `kind` prefix is `value`'s, in order.
    pub fn search_candidates(
        &self,
        log: LogId,
        kind: SearchKind,
        value: &[u8],
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<u64>, StorageError> {
        let key = (log, kind, search_key(value));
        let from = after.map_or(0, |a| a.saturating_add(1));
        let lim = limit.min(i64::MAX as usize) as i64;
        let mut out: Vec<u64> = self.read(
            |r| {
                std::iter::once(&r.active)
                    .chain(r.flushing.iter().map(|m| &**m))
                    .flat_map(|m| m.search.get(&key).into_iter().flatten().copied())
                    .filter(|&i| i >= from)
                    .collect()
            },
            |c, out: &mut Vec<u64>| {
                let mut st = c.prepare_cached(kind.select())?;
                let rows = st.query_map(params![log, key.2, from.min(i64::MAX as u64) as i64, lim], |r| r.get::<_, i64>(0))?;
                for i in rows {
                    out.push(i? as u64);
                }
                Ok(())
            },
        )?;
        out.sort_unstable();
        out.dedup();
        out.truncate(limit);
        Ok(out)
    }

    /// Moves the recent keys to the file. Until the file has them they stay visible in memory;
    /// if writing fails they stay there and the next flush retries them.
    pub fn flush(&self) -> Result<(), StorageError> {
        let batch = {
            let mut r = self.recent.write();
            if r.active.len == 0 && r.flushing.is_empty() {
                return Ok(());
            }
            if r.active.len > 0 {
                let m = Arc::new(std::mem::take(&mut r.active));
                r.flushing.push(m);
            }
            r.flushing.clone()
        };
        let mut c = self.writer.lock();
        let tx = c.transaction().map_err(backend)?;
        {
            // Sorted, so that consecutive inserts land on neighbouring pages.
            let mut rows: Vec<(LogId, i64, u64)> = Vec::new();
            for m in &batch {
                rows.extend(m.leaves.iter().flat_map(|(&(log, p), v)| v.iter().map(move |&i| (log, p, i))));
            }
            rows.sort_unstable();
            let mut st = tx.prepare_cached("INSERT OR IGNORE INTO leaves(log, prefix, idx) VALUES (?1, ?2, ?3)").map_err(backend)?;
            for (log, p, i) in rows.drain(..) {
                st.execute(params![log, p, i as i64]).map_err(backend)?;
            }
            for kind in SearchKind::ALL {
                for m in &batch {
                    let of_kind = m.search.iter().filter(|((_, k, _), _)| *k == kind);
                    rows.extend(of_kind.flat_map(|(&(log, _, p), v)| v.iter().map(move |&i| (log, p, i))));
                }
                rows.sort_unstable();
                let mut st = insert_search(&tx, kind)?;
                for (log, p, i) in rows.drain(..) {
                    st.execute(params![log, p, i as i64]).map_err(backend)?;
                }
            }
            for m in &batch {
                for (&log, &through) in &m.through {
                    mark(&tx, log, through)?;
                }
            }
        }
        tx.commit().map_err(backend)?;
        drop(c);
        self.snapshots_outdated(|r| r.flushing.retain(|m| !batch.iter().any(|b| Arc::ptr_eq(b, m))));
        Ok(())
    }

    /// After the file changed: `forget` drops from memory what the file now holds, and every
    /// snapshot begun before is outdated. Idle ones are ended here, so that none pins the
    /// file's WAL until its next lookup.
    fn snapshots_outdated(&self, forget: impl FnOnce(&mut Recent)) {
        {
            let mut r = self.recent.write();
            forget(&mut r);
            r.generation += 1;
        }
        self.readers.lock().retain_mut(|r| r.end_snapshot().is_ok());
    }

    /// Keys in memory, not yet in the file.
    pub fn pending(&self) -> usize {
        let r = self.recent.read();
        r.active.len + r.flushing.iter().map(|m| m.len).sum::<usize>()
    }

    /// Starts the thread that flushes every [`FLUSH_INTERVAL`] (or at once past [`FLUSH_AT`]),
    /// until [`KeyIndex::stop`].
    pub fn spawn_writer(self: &Arc<Self>) -> Result<(), StorageError> {
        let me = self.clone();
        let handle = std::thread::Builder::new()
            .name("sqlite-keys".into())
            .spawn(move || {
                let mut failing = false;
                while !me.stop.load(Ordering::Relaxed) {
                    {
                        let mut g = me.wake_lock.lock();
                        if me.pending() < FLUSH_AT {
                            me.wake.wait_for(&mut g, FLUSH_INTERVAL);
                        }
                    }
                    match me.flush() {
                        Ok(()) if failing => {
                            failing = false;
                            tracing::info!("the key index is written again");
                        }
                        Ok(()) => {}
                        Err(e) if !failing => {
                            failing = true;
                            tracing::warn!(error = %e, pending = me.pending(), "writing the key index failed; its keys stay in memory and are retried");
                        }
                        Err(_) => {}
                    }
                }
                let _ = me.flush();
            })
            .map_err(|e| StorageError::Backend(e.to_string()))?;
        *self.thread.lock() = Some(handle);
        Ok(())
    }

    /// Stops the writer thread once it has flushed what it holds, and waits for it.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        {
            let _g = self.wake_lock.lock();
            self.wake.notify_one();
        }
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    /// One lookup: `memory` finds what the recent keys hold, then `file` adds what a snapshot
    /// of the file holds, a snapshot that with those recent keys holds every committed key. A
    /// reader whose query failed is dropped, not reused: its transaction state is unknown.
    fn read<T>(
        &self,
        memory: impl FnOnce(&Recent) -> T,
        file: impl FnOnce(&Connection, &mut T) -> rusqlite::Result<()>,
    ) -> Result<T, StorageError> {
        let pooled = self.readers.lock().pop();
        let mut reader = match pooled {
            Some(r) => r,
            None => Reader { conn: self.open_reader()?, snapshot: None },
        };
        let (mut out, generation) = {
            let r = self.recent.read();
            (memory(&r), r.generation)
        };
        if reader.snapshot != Some(generation) {
            // Begun after `generation` was seen: the snapshot starts at the first read below.
            reader.begin_snapshot(generation).map_err(backend)?;
        }
        file(&reader.conn, &mut out).map_err(backend)?;
        self.readers.lock().push(reader);
        Ok(out)
    }

    fn open_reader(&self) -> Result<Connection, StorageError> {
        // Mapped, with a small cache, as the log's own readers are: lookups land on random
        // pages, and each pooled connection would otherwise fill 2 MB with them.
        let c = db::open_reader(&self.path, &db::Reader { cache_kib: super::READER_CACHE_KIB }).map_err(super::from_db)?;
        super::stable_plans(&c).map_err(backend)?;
        Ok(c)
    }
}

fn insert_search(tx: &Connection, kind: SearchKind) -> Result<rusqlite::CachedStatement<'_>, StorageError> {
    tx.prepare_cached(&format!("INSERT OR IGNORE INTO {}(log, prefix, idx) VALUES (?1, ?2, ?3)", kind.table())).map_err(backend)
}

fn mark(tx: &Connection, log: LogId, through: u64) -> Result<(), StorageError> {
    tx.execute(
        "INSERT INTO indexed(log, through) VALUES (?1, ?2) ON CONFLICT(log) DO UPDATE SET through = max(through, excluded.through)",
        params![log, through as i64],
    )
    .map_err(backend)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_reuses_its_plan_across_values() {
        let dir = tempfile::tempdir().unwrap();
        let index = KeyIndex::open(&dir.path().join("db.sqlite"), b"db").unwrap();
        let leaves: Vec<Hash> = (0..50u8).map(|i| sha256(&[i])).collect();
        let digests: Vec<[u8; 32]> = (0..50u8).map(|i| [i; 32]).collect();
        let keys: Vec<Keys<'_>> =
            (0..50).map(|i| Keys { log: 1, index: i as u64, leaf: &leaves[i], digest: Some(&digests[i]), identity: None, public_key: None }).collect();
        index.add(&keys);
        index.flush().unwrap();
        assert_eq!(index.pending(), 0, "the search below reads the file, not memory");

        for (i, d) in digests.iter().enumerate() {
            let found = index.search_candidates(1, SearchKind::Digest, d, None, 1 + i % 7).unwrap();
            assert_eq!(found, vec![i as u64]);
            assert!(index.search_candidates(1, SearchKind::Digest, d, Some(i as u64), 5).unwrap().is_empty());
        }
        // Under STAT4, a statement with `LIMIT ?` expires at each new binding unless the plan is
        // held stable: each search would then parse and plan its SQL again.
        let r = index.readers.lock().pop().expect("a pooled reader");
        let st = r.conn.prepare_cached(SearchKind::Digest.select()).unwrap();
        assert_eq!(st.get_status(rusqlite::StatementStatus::RePrepare), 0);
        assert!(st.get_status(rusqlite::StatementStatus::Run) >= 100, "the cached statement is the one the searches ran");
    }

    /// A pooled reader keeps its snapshot of the file between lookups, and still finds the
    /// keys that a flush moved from memory to the file after that snapshot began.
    #[test]
    fn a_kept_snapshot_misses_nothing_a_flush_moves() {
        let dir = tempfile::tempdir().unwrap();
        let index = KeyIndex::open(&dir.path().join("db.sqlite"), b"db").unwrap();
        let leaves: Vec<Hash> = (0..3u8).map(|i| sha256(&[i])).collect();
        let digest = [7u8; 32];
        let keys = |i: usize| Keys { log: 1, index: i as u64, leaf: &leaves[i], digest: Some(&digest), identity: None, public_key: None };
        let found = |i: usize| index.leaf_candidates(1, &leaves[i..=i]).unwrap();
        let generation = |index: &KeyIndex| index.readers.lock().last().and_then(|r| r.snapshot);

        index.add(&[keys(0)]);
        index.flush().unwrap();
        assert_eq!(found(0), [(0, 0)], "from the file");
        let kept = generation(&index).expect("the reader keeps its snapshot");

        index.add(&[keys(1)]);
        assert_eq!(found(1), [(0, 1)], "from memory, beside the kept snapshot");
        assert_eq!(generation(&index), Some(kept), "no flush since: the snapshot is reused");

        // The flush takes entry 1 out of memory: a snapshot from before it would miss it.
        index.flush().unwrap();
        assert_eq!(index.pending(), 0);
        assert_eq!(generation(&index), None, "the flush ended the idle snapshot");
        assert_eq!(found(1), [(0, 1)], "from the file, on a fresh snapshot");
        assert_eq!(index.search_candidates(1, SearchKind::Digest, &digest, None, 10).unwrap(), [0, 1]);

        // A snapshot held by a reader in use across a flush is replaced at its next lookup.
        let held = index.readers.lock().pop().expect("a pooled reader");
        held.conn.query_row("SELECT count(*) FROM leaves", [], |r| r.get::<_, i64>(0)).unwrap();
        index.add(&[keys(2)]);
        index.flush().unwrap();
        index.readers.lock().push(held);
        assert_eq!(found(2), [(0, 2)]);
        assert!(generation(&index) > Some(kept));
    }
}
