//! Which certificate source a server uses, and the counters every source keeps for `/metrics`
//! (report 000's list: loads, cache hits and misses, validation errors).
//!
//! - `file` and `watch` ([`crate::file_source`]) read the files off the handshake path and
//!   install a changed pair; a handshake reads the current one with one atomic load.
//! - `reload` and `cached` ([`crate::per_handshake`]) look the pair up on the handshake path:
//!   `reload` reads and parses the files at every handshake, `cached` when its copy is older
//!   than the TTL. Report 000's two modes, kept so that the comparison can be made.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;


/// A certificate source, as `[tls] source` / `--tls-source` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceKind {
    /// Re-read on a timer, compared by content (the default).
    #[default]
    File,
    /// Re-read at once on an inotify event, the timer as a fallback.
    Watch,
    /// Read and parsed at every handshake.
    Reload,
    /// Read at a handshake when the cached pair is older than the TTL.
    Cached,
    /// Issued in memory by the instance's own CA and renewed at half its lifetime
    /// ([`crate::issued`]); there are no files.
    Issued,
}

impl SourceKind {
    pub const ALL: [SourceKind; 5] = [SourceKind::File, SourceKind::Watch, SourceKind::Reload, SourceKind::Cached, SourceKind::Issued];

    pub fn name(self) -> &'static str {
        match self {
            SourceKind::File => "file",
            SourceKind::Watch => "watch",
            SourceKind::Reload => "reload",
            SourceKind::Cached => "cached",
            SourceKind::Issued => "issued",
        }
    }

    /// What re-reads the files off the handshake path (`file`, `watch`); none for the
    /// per-handshake sources.
    pub fn trigger(self) -> Option<Trigger> {
        match self {
            SourceKind::File => Some(Trigger::Timer),
            SourceKind::Watch => Some(Trigger::Watch),
            SourceKind::Reload | SourceKind::Cached | SourceKind::Issued => None,
        }
    }

    /// How a per-handshake source decides to read (`reload`, `cached` with `ttl`).
    pub fn freshness(self, ttl: Duration) -> Option<Freshness> {
        match self {
            SourceKind::Reload => Some(Freshness::Reload),
            SourceKind::Cached => Some(Freshness::Cached(ttl)),
            SourceKind::File | SourceKind::Watch | SourceKind::Issued => None,
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("certificate source {0:?} is not supported; expected file, watch, reload, cached or issued")]
pub struct UnknownSource(pub String);

impl std::str::FromStr for SourceKind {
    type Err = UnknownSource;
    fn from_str(s: &str) -> Result<SourceKind, UnknownSource> {
        SourceKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| UnknownSource(s.to_string()))
    }
}

/// The default TTL of the `cached` source: report 000's.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(5);

/// What the sources counted since the process started (all sources of the process together).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Reads of the certificate and key files: each timer tick or inotify wake-up (`file`,
    /// `watch`), each handshake (`reload`), each cache miss (`cached`), each issuance (`issued`).
    pub loads: u64,
    /// Handshakes served from the `cached` source's copy (including while another handshake
    /// re-reads the files).
    pub cache_hits: u64,
    /// Handshakes that re-read the files because the copy had expired.
    pub cache_misses: u64,
    /// Reads whose result could not be used (unreadable, not PEM, a key that does not match):
    /// the last good pair kept serving.
    pub validation_errors: u64,
}

pub(crate) static LOADS: AtomicU64 = AtomicU64::new(0);
pub(crate) static CACHE_MISSES: AtomicU64 = AtomicU64::new(0);
pub(crate) static VALIDATION_ERRORS: AtomicU64 = AtomicU64::new(0);

pub(crate) fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The counters, for `/metrics`.
pub fn counts() -> Counts {
    Counts {
        loads: LOADS.load(Ordering::Relaxed),
        cache_hits: HITS.sum(),
        cache_misses: CACHE_MISSES.load(Ordering::Relaxed),
        validation_errors: VALIDATION_ERRORS.load(Ordering::Relaxed),
    }
}

/// What makes the files be read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trigger {
    /// The timer only (`file`).
    #[default]
    Timer,
    /// A change in the files' directories, and the timer as a fallback (`watch`).
    Watch,
}

/// When a per-handshake source reads the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// At every handshake (`reload`).
    Reload,
    /// When the copy is older than this (`cached`).
    Cached(Duration),
}

/// Cache hits are counted at every cached handshake: one counter per thread slot, each on its
/// own cache line, so that 32 threads do not contend on one atomic.
pub(crate) struct Striped([Slot; STRIPES]);

const STRIPES: usize = 16;

#[repr(align(128))]
struct Slot(AtomicU64);

pub(crate) static HITS: Striped = Striped([const { Slot(AtomicU64::new(0)) }; STRIPES]);

impl Striped {
    pub(crate) fn add(&self) {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local!(static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES);
        let i = STRIPE.with(|s| *s);
        self.0[i].0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for kind in SourceKind::ALL {
            assert_eq!(kind.name().parse::<SourceKind>().unwrap(), kind);
        }
        let err = "self-signed".parse::<SourceKind>().unwrap_err();
        assert_eq!(err.to_string(), "certificate source \"self-signed\" is not supported; expected file, watch, reload, cached or issued");
        assert_eq!(SourceKind::Watch.trigger(), Some(Trigger::Watch));
        assert_eq!(SourceKind::Cached.freshness(Duration::from_secs(3)), Some(Freshness::Cached(Duration::from_secs(3))));
        assert_eq!(SourceKind::Reload.trigger(), None);
    }
}
