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
//! - **best-effort**: every [`FLUSH_AFTER`](super::writer::FLUSH_AFTER), behind the answers, with `synchronous=NORMAL`;
//!   the writer is never woken per record, which would cost more than the record. A crash
//!   loses at most the last batch.
//!
//! Nothing is lost silently. A record that finds [`QUEUE`] records already waiting, or a
//! batch that fails to write, is counted, and the count goes into the chain as a record of
//! its own (`client` `signet`, `note` `"lost N records: …"`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};

use super::batch::{BatchDone, Receipt};
use super::place::Place;
use super::postgres::ChainDb;
use super::queue::{AuditStats, Entry, QUEUE, Queue, QueueFull, Shared};
use super::sink::{checkpoint, head_of, open_sqlite, Sink};
use super::writer::Writer;
use crate::config::AuditMode;
use crate::store::StoreError;

pub use super::record::now_ms;

pub struct AuditLog {
    shared: Arc<Shared>,
    place: Place,
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

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        let _queue = self.shared.queue.lock();
        self.shared.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::super::encode::{encode, encode_owned};
    use super::super::record::Record;
    use super::super::sink::CHECKPOINT_EVERY;
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
        // Every string field with the bytes JSON escapes (the writer's slow path must agree too).
        let mut odd = entry("/a\"b\\c\u{1}\u{7f}\t/é", 400);
        odd.reason = Some("quote\"d");
        odd.cert = Some("spiffe://x/\"\n".into());
        odd.route = None;
        odd.oidc = Some(super::super::Oidc { issuer: "https://i\\x".into(), subject: "\u{0}".into() });
        for e in [entry("/healthz", 200), full, odd] {
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
