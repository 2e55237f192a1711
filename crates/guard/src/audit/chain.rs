//! [`AuditLog`]: the writer of the chain.
//!
//! The request path only appends to a buffer under a mutex held for a push. One thread,
//! `audit-writer`, takes the whole buffer, chains the records and writes them in one
//! transaction, as one batch: SQLite's WAL (or PostgreSQL's, for a chain kept there, see
//! [`super::postgres`]) keeps each batch whole, and never leaves a gap inside the chain. When it takes the buffer depends on the [`AuditMode`]:
//!
//! - **closed** (the default): as soon as a record arrives, and each request waits on a
//!   [`Receipt`] for its batch to be committed with `synchronous=FULL` (fsynced). Requests
//!   that arrive while a batch is being written form the next one, so one fsync serves all
//!   the requests in flight (group commit), however many there are. A batch that fails is
//!   told to its requests, which answer 503 instead ([`super::layer`]); until a write
//!   succeeds again, [`AuditLog::refusing`] turns requests away before any handler runs.
//! - **best-effort**: every [`FLUSH_AFTER`], behind the answers, with `synchronous=NORMAL`;
//!   the writer is never woken per record, which would cost more than the record. A crash
//!   loses at most the last batch.
//!
//! Nothing is lost silently. A record that finds [`QUEUE`] records already waiting, or a
//! batch that fails to write, is counted, and the count goes into the chain as a record of
//! its own (`client` `signet`, `note` `"lost N records: …"`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use rusqlite::{params, Connection, OptionalExtension};
use signet_db::sqlite as db;

use http::Method;

use super::batch::{BatchDone, Outcome, Receipt};
use super::place::Place;
use super::postgres::ChainDb;
use super::record::{self, Batch, PathText, Record};
use crate::client::ClientKey;
use crate::config::AuditMode;
use crate::store::StoreError;

/// Records that may wait for the writer; one more is counted as lost.
pub const QUEUE: usize = 262_144;
/// How often the best-effort writer takes what has arrived.
pub const FLUSH_AFTER: Duration = Duration::from_millis(100);
/// Closed mode: the least time between the starts of two commits. A commit's fsync costs the
/// same CPU whatever it holds, so committing as fast as the disk allows spends a share of a
/// core on fsyncs; pacing caps the commits per second at the price of at most this much more
/// wait, and only under load (a request that finds the writer idle is committed at once). With
/// answers held as bytes ([`super::gate`]) the wait bounds a client's throughput, so the gap
/// is short (figures: docs/performance.md, "The measurements behind the code's shape").
pub const COMMIT_GAP: Duration = Duration::from_millis(1);
/// How often `audit-checkpoint` copies the WAL into the database, off the writer's thread: as
/// SQLite's auto-checkpoint, that copy and its fsync ran inside a commit and held up every
/// request waiting on it (the log's store does the same, for the same reason).
///
/// That copy alone never lets the WAL start over: SQLite rewinds it only when a write begins
/// with every frame copied, and under steady load the writer commits more frames while the
/// checkpoint runs (bench-guard's closed instance grew a 1.3 GB WAL in about a minute, every
/// commit an append). So after each copy the writer copies the few
/// frames committed meanwhile itself, between two commits ([`Writer::finish_checkpoint`]), and
/// its next commit writes the WAL from its start again.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);
/// The WAL's size after it starts over, at most: above what 200 ms of commits write at full
/// load, so that it is not cut and regrown each time; a WAL left bigger shrinks to it.
const WAL_SIZE_LIMIT: u64 = 64 << 20;

/// One row per written batch: its records' JSON, one per line, and their hashes, 32 bytes
/// each, in order. A row per record cost more than the record's hashing and encoding.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS audit(first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, \
                      records BLOB NOT NULL, hashes BLOB NOT NULL);";

/// A request's record before the writer numbers it. It holds the request's own values (an
/// address or token id, the method, its path copied inline: [`PathText`]), so the request
/// path allocates nothing for it (short paths); the writer formats them.
#[derive(Debug, Clone)]
pub struct Entry {
    pub time_ms: u64,
    pub client: ClientKey,
    pub method: Method,
    pub path: PathText,
    pub status: u16,
    pub micros: u64,
    pub request_id: Option<signet_core::request_id::RequestId>,
    pub role: Option<crate::roles::Role>,
    pub route: Option<axum::extract::MatchedPath>,
    pub reason: Option<&'static str>,
    pub oidc: Option<super::Oidc>,
    pub did: Option<super::Did>,
    pub cert: Option<Arc<str>>,
}

/// The queue already held [`QUEUE`] records: this one is counted as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

/// The records waiting for the writer, and the channel that will tell their batch's fate.
struct Queue {
    entries: Vec<Entry>,
    outcome: BatchDone,
    /// Flushes asked for ([`AuditLog::flush`]); the writer wakes for each.
    flushes_asked: u64,
    /// Closed mode: the writer waits for a first record, and the next one must wake it.
    idle: bool,
}

/// What the request path and the writer share.
struct Shared {
    mode: AuditMode,
    queue: Mutex<Queue>,
    /// The writer waits on it, with `queue` locked.
    wake: Condvar,
    flushes_served: Mutex<u64>,
    flushed: Condvar,
    /// False from a failed write to the next good one.
    healthy: AtomicBool,
    lost: AtomicU64,
    /// Since start, for `/metrics`: records written, and records lost (a full queue or a
    /// failed write), batches whose write failed, and answers turned into 503s.
    written_total: AtomicU64,
    lost_total: AtomicU64,
    failed_writes_total: AtomicU64,
    refused_total: AtomicU64,
    closed: AtomicBool,
    /// Set by `audit-checkpoint` after it copied the WAL: the writer finishes the copy.
    checkpointed: AtomicBool,
    /// The last record written and its hash: what an anchor covers.
    head: Mutex<(u64, [u8; 32])>,
    /// The newest anchor's seq and when it was made (ms since the epoch; 0: none yet).
    anchored: Mutex<(u64, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditStats {
    pub queued: usize,
    pub written: u64,
    pub lost: u64,
    pub failed_writes: u64,
    /// Answers the audit log replaced with 503 (closed mode).
    pub refused: u64,
    /// Records written that no anchor covers yet.
    pub unanchored: u64,
    /// When the newest anchor was made, in ms since the epoch (0: none since start).
    pub anchored_at_ms: u64,
}

pub struct AuditLog {
    shared: Arc<Shared>,
    place: Place,
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite { path: path.display().to_string(), source }
}

/// Where the writer puts its batches.
enum Sink {
    Sqlite(Connection),
    Postgres(ChainDb),
}

impl Sink {
    /// Stores records `first..=last`, borrowed: the writer reuses its buffers batch after batch.
    fn insert(&mut self, first: u64, last: u64, records: &[u8], hashes: &[u8]) -> Result<(), String> {
        match self {
            Sink::Sqlite(conn) => conn
                .prepare_cached("INSERT INTO audit(first_seq, last_seq, records, hashes) VALUES (?1, ?2, ?3, ?4)")
                .and_then(|mut insert| insert.execute(params![first as i64, last as i64, records, hashes]))
                .map(drop)
                .map_err(|e| e.to_string()),
            // The query runs on the pool's runtime, which takes its parameters owned.
            Sink::Postgres(db) => {
                db.insert(Batch { first, last, records: records.to_vec(), hashes: hashes.to_vec() }).map_err(|e| e.to_string())
            }
        }
    }
}

/// The chain's head from its newest batch; where it starts when it holds none (every
/// record cut into segments).
fn head_of(newest: Option<(u64, Vec<u8>)>, start: (u64, [u8; 32]), place: &Place) -> Result<(u64, [u8; 32]), StoreError> {
    let Some((seq, hashes)) = newest else { return Ok(start) };
    let last = hashes.len().checked_sub(32).and_then(|i| <[u8; 32]>::try_from(&hashes[i..]).ok());
    let hash = last.ok_or_else(|| StoreError::Corrupt {
        path: place.describe(),
        what: format!("the batch ending at record {seq} holds no hashes"),
    })?;
    Ok((seq, hash))
}

impl AuditLog {
    /// Opens (or creates, 0600) `audit.sqlite` under `data_dir` and starts the writer.
    pub fn open(data_dir: &Path, mode: AuditMode) -> Result<Arc<AuditLog>, StoreError> {
        AuditLog::open_at(Place::sqlite(data_dir), mode)
    }

    /// Opens the chain at `place` and starts the writer. On PostgreSQL, the writer's
    /// connection holds the chain's lock: a second instance writing it fails here.
    pub fn open_at(place: Place, mode: AuditMode) -> Result<Arc<AuditLog>, StoreError> {
        let (sink, checkpointer, (seq, hash)) = match &place {
            Place::Sqlite { data_dir } => {
                let path = data_dir.join(super::FILE);
                let (conn, checkpointer, head) = open_sqlite(&path, mode, &place)?;
                (Sink::Sqlite(conn), Some(checkpointer), head)
            }
            Place::Postgres { url, db, .. } => {
                let writer = ChainDb::open_writer(url, db.chain())?;
                let head = head_of(writer.last_batch()?, writer.start()?, &place)?;
                (Sink::Postgres(writer), None, head)
            }
        };
        let shared = Arc::new(Shared {
            mode,
            queue: Mutex::new(Queue { entries: Vec::new(), outcome: BatchDone::new(), flushes_asked: 0, idle: false }),
            wake: Condvar::new(),
            flushes_served: Mutex::new(0),
            flushed: Condvar::new(),
            healthy: AtomicBool::new(true),
            lost: AtomicU64::new(0),
            written_total: AtomicU64::new(0),
            lost_total: AtomicU64::new(0),
            failed_writes_total: AtomicU64::new(0),
            refused_total: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            checkpointed: AtomicBool::new(false),
            head: Mutex::new((seq, hash)),
            anchored: Mutex::new((0, 0)),
        });
        let writer = Writer {
            runtime: tokio::runtime::Handle::try_current().ok(),
            sink,
            seq,
            head: hash,
            shared: shared.clone(),
            what: place.describe(),
            lines: Vec::new(),
            hashes: Vec::new(),
        };
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || writer.run())
            .map_err(|source| StoreError::Io { path: "audit-writer thread".into(), source })?;
        if let Some(checkpointer) = checkpointer {
            let for_checkpoints = shared.clone();
            std::thread::Builder::new()
                .name("audit-checkpoint".into())
                .spawn(move || checkpoint(checkpointer, for_checkpoints))
                .map_err(|source| StoreError::Io { path: "audit-checkpoint thread".into(), source })?;
        }
        Ok(Arc::new(AuditLog { shared, place }))
    }

    /// Where the chain is kept.
    pub fn place(&self) -> &Place {
        &self.place
    }

    pub fn mode(&self) -> AuditMode {
        self.shared.mode
    }

    /// Queues one record; never blocks on I/O. In closed mode, the receipt tells when it is
    /// durable. A full queue counts the record as lost.
    pub fn record(&self, entry: Entry) -> Result<Option<Receipt>, QueueFull> {
        let mut queue = self.shared.queue.lock();
        if queue.entries.len() >= QUEUE {
            drop(queue);
            self.shared.lost.fetch_add(1, Ordering::Relaxed);
            self.shared.lost_total.fetch_add(1, Ordering::Relaxed);
            return Err(QueueFull);
        }
        queue.entries.push(entry);
        match self.shared.mode {
            AuditMode::BestEffort => Ok(None),
            AuditMode::Closed => {
                // The first record of a batch wakes an idle writer; the others find it awake,
                // or pacing its next commit.
                if queue.idle {
                    queue.idle = false;
                    self.shared.wake.notify_one();
                }
                Ok(Some(Receipt(queue.outcome.0.clone())))
            }
        }
    }

    /// The last record on disk and its hash (seq 0 and the genesis hash for an empty log).
    pub fn head(&self) -> (u64, [u8; 32]) {
        *self.shared.head.lock()
    }

    /// Where the anchors stood when the server started (their time is not counted as an
    /// anchor made since start).
    pub fn anchored_earlier(&self, seq: u64) {
        self.shared.anchored.lock().0 = seq;
    }

    /// Notes that the chain is anchored up to `seq` (for `/metrics`).
    pub fn anchored(&self, seq: u64) {
        *self.shared.anchored.lock() = (seq, now_ms());
    }

    /// Closed mode, and the last write failed: a request would get a 503 after its handler
    /// ran, so it gets one before.
    pub fn refusing(&self) -> bool {
        self.shared.mode == AuditMode::Closed && !self.shared.healthy.load(Ordering::Relaxed)
    }

    /// An answer replaced with 503 because its record could not be made durable.
    pub fn count_refused(&self) {
        self.shared.refused_total.fetch_add(1, Ordering::Relaxed);
    }

    /// For `/metrics`: records waiting for the writer, written, lost, failed batch writes and
    /// refused answers since start.
    pub fn stats(&self) -> AuditStats {
        // One lock at a time: guards taken inside the literal would live to its end.
        let written_seq = self.shared.head.lock().0;
        let (anchored_seq, anchored_at_ms) = *self.shared.anchored.lock();
        AuditStats {
            queued: self.shared.queue.lock().entries.len(),
            written: self.shared.written_total.load(Ordering::Relaxed),
            lost: self.shared.lost_total.load(Ordering::Relaxed),
            failed_writes: self.shared.failed_writes_total.load(Ordering::Relaxed),
            refused: self.shared.refused_total.load(Ordering::Relaxed),
            unanchored: written_seq.saturating_sub(anchored_seq),
            anchored_at_ms,
        }
    }

    /// Waits until everything queued so far is written (tests, and shutdown).
    pub fn flush(&self) {
        let wanted = {
            let mut queue = self.shared.queue.lock();
            queue.flushes_asked += 1;
            self.shared.wake.notify_one();
            queue.flushes_asked
        };
        let mut served = self.shared.flushes_served.lock();
        while *served < wanted {
            self.shared.flushed.wait(&mut served);
        }
    }

    #[cfg(test)]
    pub(super) fn count_lost(&self, n: u64) {
        self.shared.lost.fetch_add(n, Ordering::Relaxed);
    }
}

/// Opens (or creates, 0600) the live log at `path`: the writer's connection, the
/// checkpointer's, and the chain's head.
fn open_sqlite(path: &Path, mode: AuditMode, place: &Place) -> Result<(Connection, Connection, (u64, [u8; 32])), StoreError> {
    let how = db::Writer {
        // FULL fsyncs the WAL at each commit: a record is durable when its answer goes out.
        durability: match mode {
            AuditMode::Closed => db::Durability::Full,
            AuditMode::BestEffort => db::Durability::Normal,
        },
        checkpoints: db::Checkpoints::Manual,
        // 64 KiB pages (only a new file takes them): a batch of a hundred records is one or
        // two WAL frames rather than a dozen 4 KiB ones, each its own pwrite on commit and
        // again in the checkpoint.
        page_size: Some(65536),
        cache_kib: None,
        mmap: false,
        journal_size_limit: Some(WAL_SIZE_LIMIT),
    };
    let conn = db::open_writer(path, &how)?;
    let checkpointer = db::open_beside(path)?;
    conn.execute_batch(SCHEMA).map_err(sqlite(path))?;
    conn.execute_batch(super::anchor::SCHEMA).map_err(sqlite(path))?;
    let start = super::segment::start(&conn).map_err(sqlite(path))?;
    let newest: Option<(u64, Vec<u8>)> = conn
        .query_row("SELECT last_seq, hashes FROM audit WHERE last_seq > ?1 ORDER BY first_seq DESC LIMIT 1", [start.0 as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(sqlite(path))?;
    let head = head_of(newest, start, place)?;
    Ok((conn, checkpointer, head))
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        let _queue = self.shared.queue.lock();
        self.shared.wake.notify_one();
    }
}

/// Copies the WAL into the database every [`CHECKPOINT_EVERY`] until the log closes. PASSIVE
/// never blocks the writer; a failure is retried at the next turn.
fn checkpoint(conn: Connection, shared: Arc<Shared>) {
    while !shared.closed.load(Ordering::Relaxed) {
        std::thread::sleep(CHECKPOINT_EVERY);
        match db::checkpoint(&conn) {
            Ok(()) => shared.checkpointed.store(true, Ordering::Relaxed),
            Err(e) => tracing::warn!(error = %e, "audit log WAL checkpoint failed"),
        }
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

struct Writer {
    /// The server's runtime, when opened from one.
    runtime: Option<tokio::runtime::Handle>,
    sink: Sink,
    seq: u64,
    head: [u8; 32],
    shared: Arc<Shared>,
    /// The place, for messages.
    what: String,
    /// A batch's JSON lines and hashes, kept from batch to batch: a fresh 20 KB buffer per
    /// commit cost the allocator's slow path and fresh pages' faults on every commit.
    lines: Vec<u8>,
    hashes: Vec<u8>,
}

impl Writer {
    fn run(mut self) {
        let mut batch = Vec::new();
        let mut served = 0;
        let mut last_commit = std::time::Instant::now().checked_sub(COMMIT_GAP).unwrap_or_else(std::time::Instant::now);
        loop {
            let (outcome, asked) = {
                let mut queue = self.shared.queue.lock();
                loop {
                    if self.shared.closed.load(Ordering::Relaxed) || queue.flushes_asked > served {
                        break;
                    }
                    match self.shared.mode {
                        AuditMode::Closed if queue.entries.is_empty() => {
                            queue.idle = true;
                            self.shared.wake.wait(&mut queue);
                            queue.idle = false;
                        }
                        AuditMode::Closed => {
                            let due = last_commit + COMMIT_GAP;
                            if std::time::Instant::now() >= due {
                                break;
                            }
                            self.shared.wake.wait_until(&mut queue, due);
                        }
                        AuditMode::BestEffort => {
                            if self.shared.wake.wait_for(&mut queue, FLUSH_AFTER).timed_out() {
                                break;
                            }
                        }
                    }
                }
                std::mem::swap(&mut batch, &mut queue.entries);
                (std::mem::replace(&mut queue.outcome, BatchDone::new()), queue.flushes_asked)
            };
            last_commit = std::time::Instant::now();
            let written = self.write(&mut batch);
            self.shared.healthy.store(written, Ordering::Relaxed);
            let told = if written { Outcome::Durable } else { Outcome::Failed };
            // Waking a batch's requests from this thread costs each of them a cross-thread
            // wake; from a runtime worker, they go onto that worker's own queue.
            // A failed batch's answers held as bytes become 503s there ([`super::gate`]).
            let shared = self.shared.clone();
            let tell = move || {
                let refused = outcome.tell(told);
                shared.refused_total.fetch_add(refused, Ordering::Relaxed);
            };
            match &self.runtime {
                Some(rt) => drop(rt.spawn(async move { tell() })),
                None => tell(),
            }
            served = asked;
            if self.shared.checkpointed.swap(false, Ordering::Relaxed) {
                self.finish_checkpoint();
            }
            {
                let mut s = self.shared.flushes_served.lock();
                *s = (*s).max(asked);
                self.shared.flushed.notify_all();
            }
            if self.shared.closed.load(Ordering::Relaxed) && self.shared.queue.lock().entries.is_empty() {
                return;
            }
        }
    }

    /// Copies into the database the frames committed since `audit-checkpoint`'s copy began (a
    /// few commits' pages, and an fsync with little to flush), so that the next commit starts
    /// the WAL over. After the batch is told: no answer waits for it.
    fn finish_checkpoint(&mut self) {
        if let Sink::Sqlite(conn) = &self.sink {
            // Busy (a reader, or another checkpoint) only means this turn's WAL goes on growing.
            if let Err(e) = db::checkpoint(conn) {
                tracing::debug!(audit = %self.what, error = %e, "finishing the audit log WAL checkpoint");
            }
        }
    }

    /// Writes `batch` and any lost-count record; false when the write failed.
    fn write(&mut self, batch: &mut Vec<Entry>) -> bool {
        let lost = self.shared.lost.swap(0, Ordering::Relaxed);
        if batch.is_empty() && lost == 0 {
            return true;
        }
        let (mut lines, mut hashes) = (std::mem::take(&mut self.lines), std::mem::take(&mut self.hashes));
        lines.clear();
        hashes.clear();
        lines.reserve(batch.len() * 300 + 200);
        hashes.reserve((batch.len() + 1) * 32);
        let mut out = Encoded { lines, hashes, seq: self.seq, head: self.head, dropped: 0 };
        for e in batch.drain(..) {
            out.push(|lines, seq| encode(seq, &e, lines));
        }
        let count = out.seq - self.seq;
        let own = lost > 0 && {
            let note = own_record(format!("lost {lost} records: the queue was full or a write failed"));
            out.push(|lines, seq| serde_json::to_writer(lines, &Record { seq, ..note }))
        };
        if lost > 0 && !own {
            // The note did not make it: its count waits for the next batch.
            self.shared.lost.fetch_add(lost, Ordering::Relaxed);
        }
        if out.dropped > 0 {
            tracing::error!(records = out.dropped, "audit records that do not encode were dropped (a bug); they are counted as lost");
            self.shared.lost.fetch_add(out.dropped, Ordering::Relaxed);
            self.shared.lost_total.fetch_add(out.dropped, Ordering::Relaxed);
        }
        let Encoded { mut lines, hashes, seq, head, .. } = out;
        if seq == self.seq {
            (self.lines, self.hashes) = (lines, hashes);
            return true;
        }
        lines.pop();
        let stored = self.sink.insert(self.seq + 1, seq, &lines, &hashes);
        // A burst's buffers are not kept for ever: past 4 MiB they go back to the allocator.
        if lines.capacity() <= 4 << 20 {
            (self.lines, self.hashes) = (lines, hashes);
        }
        match stored {
            Ok(()) => {
                (self.seq, self.head) = (seq, head);
                *self.shared.head.lock() = (seq, head);
                self.shared.written_total.fetch_add(count + u64::from(own), Ordering::Relaxed);
                true
            }
            Err(e) => {
                self.shared.failed_writes_total.fetch_add(1, Ordering::Relaxed);
                tracing::error!(audit = %self.what, error = %e, records = count, "writing audit records failed; they are counted as lost");
                // The lost-count record of this batch was lost too: count again what it counted.
                self.shared.lost.fetch_add(count + lost, Ordering::Relaxed);
                self.shared.lost_total.fetch_add(count, Ordering::Relaxed);
                false
            }
        }
    }
}

/// A batch as the writer builds it: the records' JSON lines, their chained hashes, and the
/// chain's last seq and hash so far.
struct Encoded {
    lines: Vec<u8>,
    hashes: Vec<u8>,
    seq: u64,
    head: [u8; 32],
    /// Records that did not encode (it cannot happen: strings and integers into a Vec);
    /// dropped and counted as lost rather than taking the writer down.
    dropped: u64,
}

impl Encoded {
    /// Numbers and chains one record written by `json`; false when it did not encode.
    fn push(&mut self, json: impl FnOnce(&mut Vec<u8>, u64) -> serde_json::Result<()>) -> bool {
        let start = self.lines.len();
        if json(&mut self.lines, self.seq + 1).is_err() {
            self.lines.truncate(start);
            self.dropped += 1;
            return false;
        }
        self.seq += 1;
        self.head = record::link(&self.head, &self.lines[start..]);
        self.hashes.extend_from_slice(&self.head);
        self.lines.push(b'\n');
        true
    }
}

/// Appends the JSON of `entry`'s record, numbered `seq`, to `out`: the bytes the chain hashes
/// and stores. Written from the entry's own values ([`RecordOut`]), allocating nothing but
/// `out`'s growth.
pub fn encode(seq: u64, entry: &Entry, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let record = RecordOut {
        seq,
        time_ms: entry.time_ms,
        client: Shown(&entry.client),
        method: entry.method.as_str(),
        path: entry.path.as_str(),
        status: entry.status,
        micros: entry.micros,
        request_id: entry.request_id.as_ref().map(Shown),
        role: entry.role.as_ref().map(Shown),
        oidc: entry.oidc.as_ref(),
        route: entry.route.as_ref().map(|r| r.as_str()),
        reason: entry.reason,
        did: entry.did.as_ref(),
        cert: entry.cert.as_deref(),
    };
    serde_json::to_writer(out, &record)
}

/// The same bytes as [`encode`], the way the writer made them before it: through an owned
/// [`Record`] (a string per field). For the test that the two agree, and the micro bench
/// that shows what borrowing saves.
#[cfg(any(test, feature = "micro"))]
pub fn encode_owned(seq: u64, e: &Entry) -> Vec<u8> {
    #[allow(clippy::expect_used)]
    serde_json::to_vec(&Record {
        seq,
        time_ms: e.time_ms,
        client: e.client.to_string(),
        method: e.method.as_str().to_string(),
        path: e.path.as_str().to_string(),
        status: e.status,
        micros: e.micros,
        request_id: e.request_id.map(|id| id.to_string()),
        note: None,
        role: e.role.as_ref().map(|r| r.to_string()),
        oidc: e.oidc.clone(),
        route: e.route.as_ref().map(|r| r.as_str().to_string()),
        reason: e.reason.map(str::to_string),
        did: e.did.clone(),
        cert: e.cert.as_deref().map(str::to_string),
    })
    .expect("a record serializes")
}

/// [`Record`]'s fields, names and order, borrowed from an [`Entry`] (`note` is never set on a
/// request's record, so it is left out, as `Record` skips it when absent).
#[derive(serde::Serialize)]
struct RecordOut<'a> {
    seq: u64,
    time_ms: u64,
    client: Shown<'a, ClientKey>,
    method: &'a str,
    path: &'a str,
    status: u16,
    micros: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<Shown<'a, signet_core::request_id::RequestId>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<Shown<'a, crate::roles::Role>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    oidc: Option<&'a super::Oidc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    route: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    did: Option<&'a super::Did>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cert: Option<&'a str>,
}

/// A value written as its `Display` string, without making the string first.
struct Shown<'a, T>(&'a T);

impl<T: std::fmt::Display> serde::Serialize for Shown<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
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
        oidc: None,
        route: None,
        reason: None,
        did: None,
        cert: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::verify::{tests::entry, verify};
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().build().unwrap()
    }

    fn rows(dir: &Path) -> (u64, i64) {
        let conn = Connection::open(dir.join(super::super::FILE)).unwrap();
        conn.query_row("SELECT COALESCE(MAX(last_seq), 0), COUNT(*) FROM audit", [], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
            .unwrap()
    }

    #[test]
    fn closed_mode_answers_once_the_record_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let receipt = log.record(entry("/healthz", 200)).unwrap().expect("closed mode gives a receipt");
        assert!(runtime().block_on(receipt.durable()));
        // No flush: the receipt alone says it is in the file, as another reader sees it.
        assert_eq!(rows(dir.path()).0, 1);
        let best = tempfile::tempdir().unwrap();
        let log = AuditLog::open(best.path(), AuditMode::BestEffort).unwrap();
        assert!(log.record(entry("/healthz", 200)).unwrap().is_none(), "best-effort gives no receipt");
    }

    /// Under steady commits the WAL starts over after checkpoints, rather than growing by a
    /// frame a commit for as long as the load lasts.
    #[test]
    fn the_wal_starts_over_under_steady_commits() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let rt = runtime();
        let until = std::time::Instant::now() + CHECKPOINT_EVERY * 7;
        // Batches of a hundred, as under load: the checkpoint's copy takes longer than the gap
        // between two commits, so commits always land while it runs.
        while std::time::Instant::now() < until {
            let receipts: Vec<Receipt> = (0..100).map(|_| log.record(entry("/steady", 200)).unwrap().unwrap()).collect();
            for r in receipts {
                assert!(rt.block_on(r.durable()));
            }
        }
        let (_, commits) = rows(dir.path());
        let wal = std::fs::metadata(dir.path().join(format!("{}-wal", super::super::FILE))).unwrap().len();
        // A commit writes at least one 64 KiB frame: a WAL never rewound holds one per commit.
        let frames = wal / (65536 + 24);
        assert!(commits > 100, "only {commits} commits in {:?}", CHECKPOINT_EVERY * 7);
        assert!(frames < commits as u64 / 2, "the WAL holds {frames} frames after {commits} commits: it never started over");
    }

    #[test]
    fn requests_in_flight_share_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let receipts: Vec<Receipt> = (0..200).map(|i| log.record(entry(&format!("/{i}"), 200)).unwrap().unwrap()).collect();
        let rt = runtime();
        for r in receipts {
            assert!(rt.block_on(r.durable()));
        }
        let (records, batches) = rows(dir.path());
        assert_eq!(records, 200);
        // The first record wakes the writer; the others arrive while it commits.
        assert!(batches < 20, "200 queued records took {batches} commits");
        assert_eq!(verify(&Place::sqlite(dir.path())).unwrap().records, 200);
    }

    #[test]
    fn a_failing_store_fails_its_receipts_and_refuses_until_it_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), AuditMode::Closed).unwrap();
        let rt = runtime();
        assert!(rt.block_on(log.record(entry("/a", 200)).unwrap().unwrap().durable()));
        assert!(!log.refusing());
        // A trigger makes every insert fail, as a full disk or an I/O error would.
        let db = Connection::open(dir.path().join(super::super::FILE)).unwrap();
        db.execute_batch("CREATE TRIGGER fail BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'injected'); END;").unwrap();
        assert!(!rt.block_on(log.record(entry("/b", 200)).unwrap().unwrap().durable()), "a failed batch is not durable");
        assert!(log.refusing(), "a failed write refuses what follows");
        let s = log.stats();
        assert_eq!((s.failed_writes, s.lost), (1, 1));
        db.execute_batch("DROP TRIGGER fail;").unwrap();
        assert!(rt.block_on(log.record(entry("/c", 503)).unwrap().unwrap().durable()));
        assert!(!log.refusing(), "the next good write lifts it");
        // /a, the note of the lost /b, /c; the chain holds.
        let v = verify(&Place::sqlite(dir.path())).unwrap();
        assert_eq!(v.records, 3);
        let conn = Connection::open(dir.path().join(super::super::FILE)).unwrap();
        let last: Vec<u8> = conn.query_row("SELECT records FROM audit ORDER BY first_seq DESC LIMIT 1", [], |r| r.get(0)).unwrap();
        let last = String::from_utf8(last).unwrap();
        assert!(last.contains("/c") && last.contains("lost 1 records"), "{last}");
    }

    #[test]
    fn a_record_is_written_as_record_would_write_it() {
        let mut full = entry(&format!("/api/v1/log/entries/{}", "é".repeat(300)), 201);
        full.client = "token:0102030405060708".parse().unwrap();
        full.request_id = Some(signet_core::request_id::RequestId::next());
        full.role = Some(crate::roles::Role::signer());
        full.reason = Some("rate_limited");
        full.oidc = Some(super::super::Oidc { issuer: "https://issuer.example".into(), subject: "a\"b@example.com".into() });
        full.did = Some(super::super::Did::Stamped { serial: "01".into() });
        full.cert = Some("spiffe://example.org/ci".into());
        for e in [entry("/healthz", 200), full] {
            let mut out = Vec::new();
            encode(42, &e, &mut out).unwrap();
            assert_eq!(String::from_utf8(out.clone()).unwrap(), String::from_utf8(encode_owned(42, &e)).unwrap());
            let parsed: Record = serde_json::from_slice(&out).unwrap();
            assert_eq!(parsed.seq, 42);
        }
    }

    #[test]
    fn a_receipt_whose_writer_is_gone_is_not_durable() {
        let done = BatchDone::new();
        let receipt = Receipt(done.0.clone());
        drop(done);
        assert!(!runtime().block_on(receipt.durable()));
    }
}
