//! The `issued` certificate source: a serving certificate that the instance's own CA issues
//! in memory, renewed at half its lifetime.
//!
//! Half, as SPIFFE agents renew SVIDs: a renewal that fails has the other half of the
//! lifetime to succeed, and it is retried every [`RETRY`] until then. The new certificate is
//! installed with [`Acceptor::install`], so it serves from the next handshake while open
//! connections keep theirs. Nothing is written to disk.

use std::time::{Duration, SystemTime};

use crate::acceptor::Acceptor;
use crate::certified::{CertError, CertifiedPair};
use crate::source::{count, LOADS, VALIDATION_ERRORS};

/// The default lifetime of an issued certificate.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// How soon a failed renewal is tried again (or sooner, for a very short lifetime).
const RETRY: Duration = Duration::from_secs(10);

/// What issues the certificates: called once at start and at each renewal.
pub type Issue = Box<dyn Fn() -> Result<CertifiedPair, CertError> + Send + Sync>;

/// Renews the certificate while it lives.
pub struct Renewer {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Issues the first certificate, for the acceptor to be built with.
pub fn first(issue: &Issue) -> Result<CertifiedPair, CertError> {
    count(&LOADS);
    issue()
}

/// Renews `acceptor`'s certificate (issued by `issue` at `issued_at`, expiring at
/// `not_after`) at half its remaining lifetime, again and again, until the [`Renewer`] is
/// dropped. Must be called inside a tokio runtime.
pub fn keep_renewed(acceptor: Acceptor, issue: Issue, issued_at: SystemTime, not_after: SystemTime) -> Renewer {
    let task = tokio::spawn(async move {
        let mut due = half_way(issued_at, not_after);
        let mut expires = not_after;
        loop {
            tokio::time::sleep(due.duration_since(SystemTime::now()).unwrap_or_default()).await;
            count(&LOADS);
            let issued_at = SystemTime::now();
            match issue().and_then(|pair| acceptor.install(&pair).map(|()| pair)) {
                Ok(pair) => {
                    tracing::info!(not_after = ?pair.not_after(), "renewed the issued TLS certificate");
                    expires = pair.not_after();
                    due = half_way(issued_at, expires);
                }
                Err(e) => {
                    count(&VALIDATION_ERRORS);
                    let left = expires.duration_since(issued_at).unwrap_or_default();
                    tracing::warn!(error = %e, left_secs = left.as_secs(), "renewing the issued TLS certificate failed; the current one serves until it expires");
                    due = issued_at + RETRY.min(left / 4).max(Duration::from_millis(100));
                }
            }
        }
    });
    Renewer { task }
}

fn half_way(from: SystemTime, to: SystemTime) -> SystemTime {
    from + to.duration_since(from).unwrap_or_default() / 2
}
