//! What a log's sequencer counts for `/metrics`: entries integrated, the size of each batch,
//! how long its longest-waiting entry waited for the durable checkpoint, and the reconciles
//! after commits whose outcome was unknown ([`crate::reconcile`]) with how long each took.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use signet_core::histogram::{Histogram, POWERS_OF_TWO};

/// From half a millisecond (a batch of one on a fast disk) to ten seconds.
pub const INTEGRATION_SECONDS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

pub struct LogStats {
    pub appended: AtomicU64,
    pub batch_entries: Histogram,
    pub integration_seconds: Histogram,
    /// When the newest batch became durable, ms since the epoch (0: none since start).
    pub last_integrated_ms: AtomicU64,
    pub reconciles: AtomicU64,
    pub reconcile_seconds: Histogram,
}

impl Default for LogStats {
    fn default() -> Self {
        LogStats {
            appended: AtomicU64::new(0),
            batch_entries: Histogram::new(POWERS_OF_TWO),
            integration_seconds: Histogram::new(INTEGRATION_SECONDS),
            last_integrated_ms: AtomicU64::new(0),
            reconciles: AtomicU64::new(0),
            reconcile_seconds: Histogram::new(INTEGRATION_SECONDS),
        }
    }
}

impl LogStats {
    /// A batch of `entries` new entries is durable; `oldest` is when its first one arrived.
    pub(crate) fn integrated(&self, entries: usize, oldest: Option<Instant>) {
        self.appended.fetch_add(entries as u64, Ordering::Relaxed);
        self.batch_entries.observe(entries as f64);
        if let Some(t) = oldest {
            self.integration_seconds.observe(t.elapsed().as_secs_f64());
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        self.last_integrated_ms.store(now, Ordering::Relaxed);
    }

    /// The log reconciled with its storage, in `took`.
    pub(crate) fn reconciled(&self, took: std::time::Duration) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        self.reconcile_seconds.observe(took.as_secs_f64());
    }
}
