//! Taking, renewing and giving up the sequencer lease. Expiry is judged by the database's
//! clock, the one clock every instance shares.

use std::future::Future;
use std::time::Duration;

use crate::storage::StorageError;
use super::fence::{Lease, LEASE};
use super::PostgresStorage;

impl PostgresStorage {
    /// Takes the sequencer lease for `holder` if it is free or expired, for `ttl`, and returns
    /// it with its epoch (one more than the last holder's). From then on, every commit of this
    /// store is fenced by that epoch: once another instance takes the lease over, a commit of
    /// this one (say, after a pause) fails with [`StorageError::Fenced`], whatever its timing.
    ///
    /// Expiry is judged by the database's clock, the one clock every instance shares.
    pub fn acquire_lease(&self, holder: &str, ttl: Duration) -> Result<Option<Lease>, StorageError> {
        self.wait(self.acquire_lease_async(holder, ttl))
    }

    /// [`PostgresStorage::acquire_lease`] for a task: it awaits the database, on its runtime.
    pub fn acquire_lease_async(&self, holder: &str, ttl: Duration) -> impl Future<Output = Result<Option<Lease>, StorageError>> + Send + 'static {
        let (holder, ttl_ms) = (holder.to_string(), ttl.as_millis().min(i64::MAX as u128) as i64);
        let taking = self.read_future(move |c| async move {
            let row = c
                .client
                .query_opt(
                    "INSERT INTO leases(name, holder, epoch, expires_at) \
                     VALUES ($1, $2, 1, now() + $3::BIGINT * INTERVAL '1 millisecond') \
                     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, epoch = leases.epoch + 1, \
                     expires_at = EXCLUDED.expires_at WHERE leases.expires_at < now() \
                     RETURNING epoch",
                    &[&LEASE, &holder, &ttl_ms],
                )
                .await?;
            row.map(|r| Ok(Lease { holder, epoch: r.try_get(0)? })).transpose()
        });
        let fence = self.fence.clone();
        async move {
            let lease = taking.await?;
            if let Some(l) = &lease {
                *fence.lock() = Some(l.clone());
            }
            Ok(lease)
        }
    }

    /// Extends the lease by `ttl` if this holder still has it. `Ok(false)`: another instance
    /// has taken it over, and this one must stop sequencing.
    pub fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<bool, StorageError> {
        self.wait(self.renew_lease_async(lease, ttl))
    }

    /// [`PostgresStorage::renew_lease`] for a task.
    pub fn renew_lease_async(&self, lease: &Lease, ttl: Duration) -> impl Future<Output = Result<bool, StorageError>> + Send + 'static {
        let (holder, epoch, ttl_ms) = (lease.holder.clone(), lease.epoch, ttl.as_millis().min(i64::MAX as u128) as i64);
        self.read_future(move |c| async move {
            let n = c
                .client
                .execute(
                    "UPDATE leases SET expires_at = now() + $4::BIGINT * INTERVAL '1 millisecond' \
                     WHERE name = $1 AND holder = $2 AND epoch = $3",
                    &[&LEASE, &holder, &epoch, &ttl_ms],
                )
                .await?;
            Ok(n == 1)
        })
    }

    /// Gives the lease up at once, if this holder still has it: the next instance to ask
    /// takes it without waiting for it to expire. Only once nothing more will be written
    /// under it (a finished offline rotation); its epoch stays, so a late write under it is
    /// still fenced after a takeover.
    pub fn release_lease(&self, lease: &Lease) -> Result<(), StorageError> {
        self.wait(self.release_lease_async(lease))
    }

    /// [`PostgresStorage::release_lease`] for a task.
    pub fn release_lease_async(&self, lease: &Lease) -> impl Future<Output = Result<(), StorageError>> + Send + 'static {
        let (holder, epoch) = (lease.holder.clone(), lease.epoch);
        self.read_future(move |c| async move {
            c.client
                .execute(
                    "UPDATE leases SET expires_at = now() - INTERVAL '1 millisecond' WHERE name = $1 AND holder = $2 AND epoch = $3",
                    &[&LEASE, &holder, &epoch],
                )
                .await?;
            Ok(())
        })
    }

    /// Who holds the lease now, if anyone does (for messages).
    pub fn lease_holder(&self) -> Result<Option<String>, StorageError> {
        self.wait(self.lease_holder_async())
    }

    /// [`PostgresStorage::lease_holder`] for a task.
    pub fn lease_holder_async(&self) -> impl Future<Output = Result<Option<String>, StorageError>> + Send + 'static {
        self.read_future(move |c| async move {
            let row = c.client.query_opt("SELECT holder FROM leases WHERE name = $1 AND expires_at >= now()", &[&LEASE]).await?;
            row.map(|r| r.try_get(0)).transpose()
        })
    }
}
