//! What the request path and the writer share: the bounded queue of records, the batch they
//! will be told the fate of, and the counters `/metrics` reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use http::Method;
use parking_lot::{Condvar, Mutex};

use super::batch::BatchDone;
use super::record::PathText;
use crate::client::ClientKey;
use crate::config::AuditMode;

/// Records that may wait for the writer; one more is counted as lost.
pub const QUEUE: usize = 262_144;
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
pub(super) struct Queue {
    pub(super) entries: Vec<Entry>,
    pub(super) outcome: BatchDone,
    /// Flushes asked for ([`AuditLog::flush`]); the writer wakes for each.
    pub(super) flushes_asked: u64,
    /// Closed mode: the writer waits for a first record, and the next one must wake it.
    pub(super) idle: bool,
}

/// What the request path and the writer share.
pub(super) struct Shared {
    pub(super) mode: AuditMode,
    pub(super) queue: Mutex<Queue>,
    /// The writer waits on it, with `queue` locked.
    pub(super) wake: Condvar,
    pub(super) flushes_served: Mutex<u64>,
    pub(super) flushed: Condvar,
    /// False from a failed write to the next good one.
    pub(super) healthy: AtomicBool,
    pub(super) lost: AtomicU64,
    /// Since start, for `/metrics`: records written, and records lost (a full queue or a
    /// failed write), batches whose write failed, and answers turned into 503s.
    pub(super) written_total: AtomicU64,
    pub(super) lost_total: AtomicU64,
    pub(super) failed_writes_total: AtomicU64,
    pub(super) refused_total: AtomicU64,
    pub(super) closed: AtomicBool,
    /// Set by `audit-checkpoint` after it copied the WAL: the writer finishes the copy.
    pub(super) checkpointed: AtomicBool,
    /// The last record written and its hash: what an anchor covers.
    pub(super) head: Mutex<(u64, [u8; 32])>,
    /// The newest anchor's seq and when it was made (ms since the epoch; 0: none yet).
    pub(super) anchored: Mutex<(u64, u64)>,
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
