//! The sequencer lease, on PostgreSQL: one instance sequences the logs of a database, and
//! the others wait as standbys until its lease expires.
//!
//! The lease is a row with an epoch (a fencing token) and an expiry on the database's clock.
//! The holder renews it every second for three; a standby tries to take it every half
//! second, so a dead sequencer is replaced within about 3.5 s plus the new one's start. The
//! epoch, not the timing, is what keeps two writers apart: every commit checks it under a
//! row lock (`PostgresStorage::acquire_lease`), so a holder that was paused past its expiry
//! writes nothing when it wakes, learns at its next renewal that the lease is gone, and
//! stops.

use std::sync::Arc;
use std::time::Duration;

use signet_log::storage::{Lease, PostgresStorage, StorageError};

/// How long a lease lasts without renewal.
pub const TTL: Duration = Duration::from_secs(3);
/// How often the holder renews.
const RENEW_EVERY: Duration = Duration::from_secs(1);
/// How often a standby tries to take the lease.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// Waits until this instance holds the lease. Until then the instance is a standby: its
/// socket answers `/healthz`, and `/readyz` says 503, so a load balancer sends it nothing.
pub async fn acquire(store: Arc<PostgresStorage>, holder: String) -> Result<Lease, StorageError> {
    let mut announced = false;
    loop {
        let (s, h) = (store.clone(), holder.clone());
        let outcome = tokio::task::spawn_blocking(move || s.acquire_lease(&h, TTL))
            .await
            .map_err(|e| StorageError::Backend(format!("taking the sequencer lease: {e}")))?;
        match outcome {
            Ok(Some(lease)) => {
                tracing::info!(holder = %lease.holder, epoch = lease.epoch, "took the sequencer lease");
                return Ok(lease);
            }
            Ok(None) if !announced => {
                let s = store.clone();
                let current = tokio::task::spawn_blocking(move || s.lease_holder()).await.ok().and_then(Result::ok).flatten();
                tracing::info!(holder = current.as_deref().unwrap_or("another instance"), "standby: another instance sequences this database; waiting for its lease to expire");
                announced = true;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot reach the database to take the sequencer lease; retrying"),
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Renews `lease` for as long as the process runs. If another instance has taken it over,
/// stops the process: its commits are already fenced, and a process manager's restart makes
/// it a standby. A database that cannot be reached is retried: the epoch, not the renewal,
/// keeps writes safe.
pub fn keep(store: Arc<PostgresStorage>, lease: Lease) {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            let (s, l) = (store.clone(), lease.clone());
            match tokio::task::spawn_blocking(move || s.renew_lease(&l, TTL)).await {
                Ok(Ok(true)) => {
                    if failing {
                        tracing::info!("the sequencer lease is renewed again");
                    }
                    failing = false;
                }
                Ok(Ok(false)) => {
                    tracing::error!(epoch = lease.epoch, "another instance has taken over the sequencer lease; stopping (acknowledged entries are durable; restart to run as a standby)");
                    std::process::exit(1);
                }
                Ok(Err(e)) => {
                    if !failing {
                        tracing::warn!(error = %e, "cannot renew the sequencer lease; retrying");
                    }
                    failing = true;
                }
                Err(e) => tracing::warn!(error = %e, "renewing the sequencer lease failed"),
            }
        }
    });
}

/// This instance's name in the lease: where it listens and its pid, unique per process.
pub fn holder(listen: &std::net::SocketAddr) -> String {
    format!("{listen} pid {} ({:08x})", std::process::id(), rand::random::<u32>())
}
