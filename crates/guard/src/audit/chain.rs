//! [`AuditLog`]: the writer of the chain.
//!
//! The request path only appends to a buffer under a mutex held for a push (no I/O, no
//! system call: the writer is never woken per record, which cost more than the record).
//! One thread, `audit-writer`, wakes every [`FLUSH_AFTER`], takes the whole buffer, chains
//! the records and writes them in one transaction. SQLite's WAL keeps each batch whole: a
//! crash loses at most the last batch, and never leaves a gap inside the chain.
//!
//! Nothing is lost silently. A record that finds [`QUEUE`] records already waiting, or a
//! batch that fails to write, is counted, and the count goes into the chain as a record of
//! its own (`client` `signet`, `note` `"lost N records: …"`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use rusqlite::{params, Connection, OptionalExtension};

use http::{Method, Uri};

use super::record::{self, clip, Record, GENESIS};
use crate::client::ClientKey;
use crate::store::StoreError;

/// Records that may wait for the writer; one more is counted as lost.
pub const QUEUE: usize = 262_144;
/// How often the writer takes what has arrived.
pub const FLUSH_AFTER: Duration = Duration::from_millis(100);

/// One row per written batch: its records' JSON, one per line, and their hashes, 32 bytes
/// each, in order. A row per record cost more than the record's hashing and encoding.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS audit(first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, \
                      records BLOB NOT NULL, hashes BLOB NOT NULL);";

/// A request's record before the writer numbers it. It holds the request's own values
/// (an address or token id, the method, the URI, whose clone shares its bytes), so the
/// request path allocates nothing for it; the writer formats them.
#[derive(Debug, Clone)]
pub struct Entry {
    pub time_ms: u64,
    pub client: ClientKey,
    pub method: Method,
    pub uri: Uri,
    pub status: u16,
    pub micros: u64,
    pub request_id: Option<signet_core::request_id::RequestId>,
    pub role: Option<crate::roles::Role>,
    pub route: Option<axum::extract::MatchedPath>,
    pub reason: Option<&'static str>,
    pub did: Option<super::Did>,
}

/// What the request path and the writer share.
struct Shared {
    pending: Mutex<Vec<Entry>>,
    lost: AtomicU64,
    /// Since start, for `/metrics`: records written, and records lost (a full queue or a
    /// failed write), and batches whose write failed.
    written_total: AtomicU64,
    lost_total: AtomicU64,
    failed_writes_total: AtomicU64,
    /// Flush requests made and served; the writer wakes early when they differ.
    flushes: Mutex<(u64, u64)>,
    wake: Condvar,
    flushed: Condvar,
    closed: AtomicBool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditStats {
    pub queued: usize,
    pub written: u64,
    pub lost: u64,
    pub failed_writes: u64,
}

pub struct AuditLog {
    shared: Arc<Shared>,
    path: PathBuf,
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite { path: path.display().to_string(), source }
}

impl AuditLog {
    /// Opens (or creates, 0600) `audit.sqlite` under `data_dir` and starts the writer.
    pub fn open(data_dir: &Path) -> Result<Arc<AuditLog>, StoreError> {
        let path = data_dir.join(super::FILE);
        let conn = Connection::open(&path).map_err(sqlite(&path))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|source| StoreError::Io { path: path.display().to_string(), source })?;
        }
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;")
            .map_err(sqlite(&path))?;
        conn.execute_batch(SCHEMA).map_err(sqlite(&path))?;
        let head: Option<(u64, Vec<u8>)> = conn
            .query_row("SELECT last_seq, hashes FROM audit ORDER BY first_seq DESC LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(sqlite(&path))?;
        let (seq, hash) = match head {
            None => (0, GENESIS),
            Some((seq, hashes)) => {
                let last = hashes.len().checked_sub(32).and_then(|i| <[u8; 32]>::try_from(&hashes[i..]).ok());
                let hash = last.ok_or_else(|| StoreError::Corrupt {
                    path: path.display().to_string(),
                    what: format!("the batch ending at record {seq} holds no hashes"),
                })?;
                (seq, hash)
            }
        };
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::new()),
            lost: AtomicU64::new(0),
            written_total: AtomicU64::new(0),
            lost_total: AtomicU64::new(0),
            failed_writes_total: AtomicU64::new(0),
            flushes: Mutex::new((0, 0)),
            wake: Condvar::new(),
            flushed: Condvar::new(),
            closed: AtomicBool::new(false),
        });
        let writer = Writer { conn, seq, head: hash, shared: shared.clone(), path: path.clone() };
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || writer.run())
            .map_err(|source| StoreError::Io { path: "audit-writer thread".into(), source })?;
        Ok(Arc::new(AuditLog { shared, path }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues one record; never blocks on I/O. A full queue counts the record as lost.
    pub fn record(&self, entry: Entry) {
        let mut pending = self.shared.pending.lock();
        if pending.len() < QUEUE {
            pending.push(entry);
        } else {
            drop(pending);
            self.shared.lost.fetch_add(1, Ordering::Relaxed);
            self.shared.lost_total.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// For `/metrics`: records waiting for the writer, written, lost, and failed batch writes
    /// since start.
    pub fn stats(&self) -> AuditStats {
        AuditStats {
            queued: self.shared.pending.lock().len(),
            written: self.shared.written_total.load(Ordering::Relaxed),
            lost: self.shared.lost_total.load(Ordering::Relaxed),
            failed_writes: self.shared.failed_writes_total.load(Ordering::Relaxed),
        }
    }

    /// Waits until everything queued so far is written (tests, and shutdown).
    pub fn flush(&self) {
        let mut f = self.shared.flushes.lock();
        f.0 += 1;
        let wanted = f.0;
        self.shared.wake.notify_one();
        while f.1 < wanted {
            self.shared.flushed.wait(&mut f);
        }
    }

    #[cfg(test)]
    pub(super) fn count_lost(&self, n: u64) {
        self.shared.lost.fetch_add(n, Ordering::Relaxed);
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        let _f = self.shared.flushes.lock();
        self.shared.wake.notify_one();
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

struct Writer {
    conn: Connection,
    seq: u64,
    head: [u8; 32],
    shared: Arc<Shared>,
    path: PathBuf,
}

impl Writer {
    fn run(mut self) {
        let mut batch = Vec::new();
        loop {
            let serving = {
                let mut f = self.shared.flushes.lock();
                if f.0 == f.1 && !self.shared.closed.load(Ordering::Relaxed) {
                    self.shared.wake.wait_for(&mut f, FLUSH_AFTER);
                }
                f.0
            };
            std::mem::swap(&mut batch, &mut *self.shared.pending.lock());
            self.write(&mut batch);
            let mut f = self.shared.flushes.lock();
            f.1 = f.1.max(serving);
            self.shared.flushed.notify_all();
            if self.shared.closed.load(Ordering::Relaxed) && self.shared.pending.lock().is_empty() {
                return;
            }
        }
    }

    fn write(&mut self, batch: &mut Vec<Entry>) {
        let lost = self.shared.lost.swap(0, Ordering::Relaxed);
        let mut records: Vec<Record> = batch
            .drain(..)
            .map(|e| Record {
                seq: 0,
                time_ms: e.time_ms,
                client: e.client.to_string(),
                method: e.method.as_str().to_string(),
                path: clip(e.uri.path()),
                status: e.status,
                micros: e.micros,
                request_id: e.request_id.map(|id| id.to_string()),
                note: None,
                role: e.role.map(|r| r.to_string()),
                route: e.route.map(|r| r.as_str().to_string()),
                reason: e.reason.map(str::to_string),
                did: e.did,
            })
            .collect();
        if lost > 0 {
            records.push(own_record(format!("lost {lost} records: the queue was full or a write failed")));
        }
        if records.is_empty() {
            return;
        }
        let count = records.len() as u64;
        match self.commit(&mut records) {
            Ok((seq, head)) => {
                (self.seq, self.head) = (seq, head);
                self.shared.written_total.fetch_add(count, Ordering::Relaxed);
            }
            Err(e) => {
                self.shared.failed_writes_total.fetch_add(1, Ordering::Relaxed);
                tracing::error!(path = %self.path.display(), error = %e, records = count, "writing audit records failed; they are counted as lost");
                // The lost-count record of this batch was lost too: count what it counted.
                let own = records.iter().filter(|r| r.client == "signet").count() as u64;
                self.shared.lost.fetch_add(count - own + lost, Ordering::Relaxed);
                self.shared.lost_total.fetch_add(count - own, Ordering::Relaxed);
            }
        }
    }

    /// Numbers, chains and stores `records` as one batch row; the new head on success.
    fn commit(&mut self, records: &mut [Record]) -> rusqlite::Result<(u64, [u8; 32])> {
        let (mut seq, mut head) = (self.seq, self.head);
        let mut lines = Vec::with_capacity(records.len() * 160);
        let mut hashes = Vec::with_capacity(records.len() * 32);
        for r in records.iter_mut() {
            seq += 1;
            r.seq = seq;
            let start = lines.len();
            // Writing strings and integers into a Vec cannot fail; the request path never
            // gets here (this is the writer thread).
            #[allow(clippy::expect_used)]
            serde_json::to_writer(&mut lines, r).expect("a record serializes");
            head = record::link(&head, &lines[start..]);
            hashes.extend_from_slice(&head);
            lines.push(b'\n');
        }
        lines.pop();
        self.conn
            .prepare_cached("INSERT INTO audit(first_seq, last_seq, records, hashes) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![(self.seq + 1) as i64, seq as i64, lines, hashes])?;
        Ok((seq, head))
    }
}

fn own_record(note: String) -> Record {
    Record {
        seq: 0,
        time_ms: now_ms(),
        client: "signet".into(),
        method: "-".into(),
        path: "-".into(),
        status: 0,
        micros: 0,
        request_id: None,
        note: Some(note),
        role: None,
        route: None,
        reason: None,
        did: None,
    }
}
