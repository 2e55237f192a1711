//! The `audit-writer` thread: takes the whole queue, chains and writes it as one batch (group
//! commit), and tells the batch's requests its fate.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use signet_db::sqlite as db;

use super::batch::{BatchDone, Outcome};
use super::encode::{encode, own_record, Encoded};
use super::queue::{Entry, Shared};
use super::record::Record;
use super::sink::Sink;
use crate::config::AuditMode;

/// How often the best-effort writer takes what has arrived.
pub const FLUSH_AFTER: Duration = Duration::from_millis(100);
/// Closed mode: the least time between the starts of two commits. A commit's fsync costs the
/// same CPU whatever it holds, so committing as fast as the disk allows spends a share of a
/// core on fsyncs; pacing caps the commits per second at the price of at most this much more
/// wait, and only under load (a request that finds the writer idle is committed at once). With
/// answers held as bytes ([`super::gate`]) the wait bounds a client's throughput, so the gap
/// is short (figures: docs/performance.md, "The measurements behind the code's shape").
pub const COMMIT_GAP: Duration = Duration::from_millis(1);

pub(super) struct Writer {
    /// The server's runtime, when opened from one.
    pub(super) runtime: Option<tokio::runtime::Handle>,
    pub(super) sink: Sink,
    pub(super) seq: u64,
    pub(super) head: [u8; 32],
    pub(super) shared: Arc<Shared>,
    /// The place, for messages.
    pub(super) what: String,
    /// A batch's JSON lines and hashes, kept from batch to batch: a fresh 20 KB buffer per
    /// commit cost the allocator's slow path and fresh pages' faults on every commit.
    pub(super) lines: Vec<u8>,
    pub(super) hashes: Vec<u8>,
}

impl Writer {
    pub(super) fn run(mut self) {
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
    pub(super) fn finish_checkpoint(&mut self) {
        if let Sink::Sqlite(conn) = &self.sink {
            // Busy (a reader, or another checkpoint) only means this turn's WAL goes on growing.
            if let Err(e) = db::checkpoint(conn) {
                tracing::debug!(audit = %self.what, error = %e, "finishing the audit log WAL checkpoint");
            }
        }
    }

    /// Writes `batch` and any lost-count record; false when the write failed.
    pub(super) fn write(&mut self, batch: &mut Vec<Entry>) -> bool {
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
