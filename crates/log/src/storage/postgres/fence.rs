//! The sequencer lease as one instance holds it, and the check that fences a commit by it.

use crate::storage::StorageError;
use super::pool::classify;

/// The sequencer lease as held by one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    /// The fencing token: one more at every takeover.
    pub epoch: i64,
}

/// The one lease: the instance holding it sequences every log in the database.
pub(super) const LEASE: &str = "sequencer";

/// Checks, inside `tx`, that `lease` is still the sequencer lease. The lease row stays locked
/// until `tx` ends, so a takeover (which updates the row) waits for it, and the new holder's
/// view includes what `tx` writes. After a takeover this reads the new epoch, and the caller
/// writes nothing.
pub(super) async fn check_fence(tx: &tokio_postgres::Transaction<'_>, lease: &Lease) -> Result<(), StorageError> {
    let row = tx.query_opt("SELECT holder, epoch FROM leases WHERE name = $1 FOR UPDATE", &[&LEASE]).await.map_err(classify)?;
    let current: Option<(String, i64)> = row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose().map_err(classify)?;
    if current.as_ref().is_none_or(|(h, e)| *h != lease.holder || *e != lease.epoch) {
        let by = current.map_or_else(|| "nobody".to_string(), |(h, e)| format!("{h} (epoch {e})"));
        return Err(StorageError::Fenced(format!("this instance's sequencer lease (epoch {}) is now held by {by}", lease.epoch)));
    }
    Ok(())
}
