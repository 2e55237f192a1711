//! `signet monitor`: follow transparency logs and alert on what matters to you.
//!
//! For each log, every poll verifies the newest checkpoint's signature, proves it
//! consistent with the last one seen, reads every new entry, checks it against the watch
//! list, and proves that the entries read hash to the signed root. Alerts go to stdout as
//! JSON lines, to a webhook, and to metrics; state survives restarts.
//!
//! - [`watch`]: the watch list and its file format.
//! - [`entries`]: an entry body → identities, issuer, key, digests.
//! - [`source`]: fetching from a tile log or the Rekor v1 API.
//! - [`keys`]: the keys a log's checkpoints must verify with.
//! - [`range`]: the compact range the entries are hashed into.
//! - [`scan`]: reading pages of entries in parallel, consumed in order.
//! - [`follow`]: one log's poll: checkpoint, consistency, entries.
//! - [`state`]: what is remembered between runs.
//! - [`kind`]: what an alert is about.
//! - [`error`]: why a poll failed (retried at the next one).
//! - [`alert`] and [`metrics`]: where alerts go.

pub mod alert;
pub mod entries;
pub mod error;
pub mod follow;
pub mod keys;
pub mod kind;
pub mod metrics;
pub mod range;
pub mod scan;
pub mod source;
pub mod state;
pub mod watch;

use std::time::Duration;

pub use alert::{Alert, Alerts};
pub use error::MonitorError;
pub use kind::Kind;
pub use follow::{Followed, Keys};
pub use source::{Api, Source};
pub use watch::WatchList;

/// A monitor over some logs.
pub struct Monitor {
    pub logs: Vec<Followed>,
    pub watch: WatchList,
    pub store: state::Store,
    pub alerts: Alerts,
    /// Threads reading entries (fetch, hash, parse, match).
    pub workers: usize,
    pub interval: Duration,
}

/// What a run saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Summary {
    pub read: u64,
    pub matches: u64,
    pub unparsed: u64,
    pub bytes: u64,
    /// A log misbehaved or served a checkpoint that did not verify.
    pub problem: bool,
    /// A log could not be fetched (or state not kept) on the last poll.
    pub failed: bool,
}

impl Monitor {
    /// Polls every log once.
    pub fn poll_all(&self) -> Summary {
        let ctx = follow::Ctx { store: &self.store, watch: &self.watch, alerts: &self.alerts, workers: self.workers };
        let mut sum = Summary::default();
        for log in &self.logs {
            match follow::poll(log, &ctx) {
                Ok(p) => {
                    sum.read += p.read;
                    sum.matches += p.matches;
                    sum.unparsed += p.unparsed;
                    sum.bytes += p.bytes;
                    sum.problem |= p.problem;
                }
                Err(e) => {
                    tracing::warn!(log = %log.source.id(), error = %e, "poll failed; retrying at the next one");
                    self.alerts.metrics().fetch_error(log.source.id());
                    sum.failed = true;
                }
            }
        }
        sum
    }

    /// Polls forever, every `interval`.
    pub fn run(&self) -> ! {
        loop {
            self.poll_all();
            std::thread::sleep(self.interval);
        }
    }
}
