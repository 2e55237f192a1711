//! The sequencer lease, on PostgreSQL: one instance sequences the logs of a database, and
//! the others follow them (serving reads, and queueing appends for the sequencer) until its
//! lease expires, when one of them takes over.
//!
//! The lease is a row with an epoch (a fencing token) and an expiry on the database's clock.
//! The holder renews it every half second for two and a half; a standby tries to take it
//! every quarter second, so a dead sequencer is replaced within 2.25 s (the lease's last
//! renewal 0.5 s before the death, at worst) plus the new one's start: the fault suite's
//! takeovers after a SIGKILL stay under 3 s (docs/scaling.md). The
//! epoch, not the timing, is what keeps two writers apart: every commit checks it under a
//! row lock (`PostgresStorage::acquire_lease`), so a holder that was paused past its expiry
//! writes nothing when it wakes, learns at its next renewal that the lease is gone, and
//! stops.

use std::sync::Arc;
use std::time::Duration;

use signet_log::storage::{Lease, LogId, PostgresStorage, Storage, StorageError};
use signet_log::{Log, Role};

/// How long a lease lasts without renewal. Above the writer's idle-in-transaction bound (2 s,
/// `signet_log::storage::postgres`), so that a takeover after a pause mid-commit waits for
/// the lease, never for the row lock the paused writer held.
pub const TTL: Duration = Duration::from_millis(2500);
/// How often the holder renews: five tries inside a lifetime before it steps down.
const RENEW_EVERY: Duration = Duration::from_millis(500);
/// How often a standby tries to take the lease.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// Whether this instance starts as the sequencer (it took the lease, and keeps renewing it
/// from now on, while its logs open) or as a follower. A follower needs the logs made first, by a sequencer: on a
/// new database this waits until another instance has made them, or takes the lease itself.
pub async fn role_at_start(store: Arc<PostgresStorage>, holder: &str, logs: &[LogId]) -> Result<Role, StorageError> {
    let mut announced = false;
    loop {
        if let Some(lease) = store.acquire_lease_async(holder, TTL).await? {
            tracing::info!(holder, epoch = lease.epoch, "took the sequencer lease: this instance sequences the logs");
            HOLDING.store(true, std::sync::atomic::Ordering::SeqCst);
            // Renewed from now: opening big logs may take longer than the lease lasts.
            keep(store, lease);
            return Ok(Role::Sequencer);
        }
        let mut made = true;
        for &id in logs {
            made &= store.latest_checkpoint_async(id).await?.is_some();
        }
        if made {
            let current = store.lease_holder_async().await.ok().flatten();
            tracing::info!(
                sequencer = current.as_deref().unwrap_or("another instance"),
                "following: another instance sequences this database; this one serves reads, hands its appends to it, and takes over if its lease expires"
            );
            return Ok(Role::Follower);
        }
        if !announced {
            tracing::info!("another instance holds the sequencer lease and has not made the logs yet; waiting for it");
            announced = true;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Set once this instance holds the sequencer lease (it never gives it back while it runs:
/// losing it stops the process). A log opened from then on is opened as its sequencer.
static HOLDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this instance holds the sequencer lease.
pub fn holding() -> bool {
    HOLDING.load(std::sync::atomic::Ordering::SeqCst)
}

/// After a follower's logs are open: waits for the lease to be free, then promotes the logs
/// and keeps the lease from then on. (A sequencer keeps its lease from [`role_at_start`].)
/// `logs` lists them when the lease is taken: a rotation may have changed the Rekor v1
/// log's active shard since start. (A shard opened as the lease is taken is promoted by the
/// rotation itself, which looks at [`holding`] after it serves the shard.)
pub fn take_over_when_free(store: Arc<PostgresStorage>, holder: String, logs: impl Fn() -> Vec<Log> + Send + 'static) {
    tokio::spawn(async move {
        let lease = match acquire(store.clone(), holder).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "waiting for the sequencer lease failed; stopping");
                std::process::exit(1);
            }
        };
        // Renewed while the logs are promoted, for the same reason as at start.
        keep(store, lease.clone());
        HOLDING.store(true, std::sync::atomic::Ordering::SeqCst);
        let logs = logs();
        let started = std::time::Instant::now();
        for log in &logs {
            if let Err(e) = log.promote().await {
                tracing::error!(error = %e, log = log.origin(), "cannot take over sequencing (acknowledged entries are durable; restart to follow again)");
                std::process::exit(1);
            }
        }
        // A sequencer that died between creating a log and writing its genesis left that to us.
        for log in &logs {
            if let Err(e) = log.genesis_written().await {
                tracing::error!(error = %e, log = log.origin(), "the log's genesis entry was not written");
            }
        }
        tracing::info!(epoch = lease.epoch, took = ?started.elapsed(), "took over sequencing the logs");
    });
}

/// Waits until this instance holds the lease.
pub async fn acquire(store: Arc<PostgresStorage>, holder: String) -> Result<Lease, StorageError> {
    let mut announced = false;
    loop {
        match store.acquire_lease_async(&holder, TTL).await {
            Ok(Some(lease)) => {
                tracing::info!(holder = %lease.holder, epoch = lease.epoch, "took the sequencer lease");
                return Ok(lease);
            }
            Ok(None) => {}
            Err(e) if !announced => {
                tracing::warn!(error = %e, "cannot reach the database to take the sequencer lease; retrying");
                announced = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// The lease this instance holds, for [`give_up`]. Each renewal runs holding it, so a give-up
/// waits for a renewal in flight, and none runs after it (a renewal would take the lease back).
fn held() -> &'static Held {
    static HELD: std::sync::OnceLock<Held> = std::sync::OnceLock::new();
    HELD.get_or_init(Default::default)
}

type Held = tokio::sync::Mutex<Option<(Arc<PostgresStorage>, Lease)>>;

/// At shutdown, once nothing more will be written: gives the lease up, so that a standby
/// takes over at its next try (a quarter second) instead of when the lease would have
/// lapsed (up to 2.5 s). A rolling restart then costs writes a moment, not a lease lifetime.
/// Writes that were still under way are fenced by the epoch, as after any takeover.
pub async fn give_up() {
    // Bounded: a database that does not answer must not hold the shutdown; the lease then
    // lapses by itself, as after a crash.
    let releasing = async {
        let Some((store, lease)) = held().lock().await.take() else { return Ok(None) };
        let epoch = lease.epoch;
        store.release_lease_async(&lease).await.map(|()| Some(epoch))
    };
    match tokio::time::timeout(TTL, releasing).await {
        Ok(Ok(Some(epoch))) => tracing::info!(epoch, "gave the sequencer lease up: another instance takes over at once"),
        Ok(Ok(None)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "could not give the sequencer lease up; it lapses by itself"),
        Err(_) => tracing::warn!("giving the sequencer lease up took longer than its lifetime; it lapses by itself"),
    }
}

static RENEW_FAILURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Set while the lease has gone a lifetime without a successful renewal.
static STEPPED_DOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this instance has stepped down: its lease went a whole [`TTL`] without a renewal,
/// so another instance may be sequencing by now, and what this one serves may be stale.
/// `/readyz` says so, so that a load balancer sends clients elsewhere.
pub fn stepped_down() -> bool {
    STEPPED_DOWN.load(std::sync::atomic::Ordering::Relaxed)
}

/// Renewals of the sequencer lease that failed since start (the database did not answer).
pub fn renew_failures() -> u64 {
    RENEW_FAILURES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Renews `lease` for as long as the process runs. If another instance has taken it over,
/// stops the process: its commits are already fenced, and a process manager's restart makes
/// it a standby. A database that cannot be reached is retried (the epoch, not the renewal,
/// keeps writes safe), but after a lease lifetime without a renewal the instance steps down
/// ([`stepped_down`]) until a renewal succeeds: the lease is then still its own.
pub fn keep(store: Arc<PostgresStorage>, lease: Lease) {
    tokio::spawn(async move {
        *held().lock().await = Some((store.clone(), lease.clone()));
        let mut failing = false;
        let mut renewed = std::time::Instant::now();
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            let holding = held().lock().await;
            if holding.is_none() {
                return; // given up at shutdown
            }
            // On the database runtime: a renewal never waits for a free blocking thread.
            let outcome = store.renew_lease_async(&lease, TTL).await;
            if !matches!(outcome, Ok(true)) && renewed.elapsed() >= TTL && !STEPPED_DOWN.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::error!(epoch = lease.epoch, since = ?renewed.elapsed(), "the sequencer lease was not renewed for its whole lifetime: stepping down (/readyz answers 503) until a renewal succeeds");
            }
            match outcome {
                Ok(true) => {
                    renewed = std::time::Instant::now();
                    if STEPPED_DOWN.swap(false, std::sync::atomic::Ordering::Relaxed) {
                        tracing::info!(epoch = lease.epoch, "the sequencer lease is renewed again, still this instance's: ready");
                    } else if failing {
                        tracing::info!("the sequencer lease is renewed again");
                    }
                    failing = false;
                }
                Ok(false) => {
                    tracing::error!(epoch = lease.epoch, "another instance has taken over the sequencer lease; stopping (acknowledged entries are durable; restart to follow)");
                    std::process::exit(1);
                }
                Err(e) => {
                    RENEW_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if !failing {
                        tracing::warn!(error = %e, "cannot renew the sequencer lease; retrying");
                    }
                    failing = true;
                }
            }
        }
    });
}

/// This instance's name in the lease: where it listens and its pid, unique per process.
pub fn holder(listen: &std::net::SocketAddr) -> String {
    format!("{listen} pid {} ({:08x})", std::process::id(), rand::random::<u32>())
}
