//! One batch, in one transaction, fenced by the lease and bounded by a deadline.

use std::time::Duration;

use tokio_postgres::Client;

use crate::storage::{Batch, StorageError};
use super::fence::{check_fence, Lease};
use super::pool::{classify, writer, Pool};
use super::reads::bigint;

/// How long a commit may take, end to end, before its outcome counts as unknown and its
/// connection is dropped (the sequencer then reconciles).
pub(super) const COMMIT_DEADLINE: Duration = Duration::from_secs(15);

/// [`commit`] on the writer connection, bounded by [`COMMIT_DEADLINE`].
pub(super) async fn commit_within_deadline(pool: &Pool, batch: &Batch, fence: Option<&Lease>) -> Result<(), StorageError> {
    let mut slot = pool.writer.lock().await;
    let client = writer(pool, &mut slot).await?;
    match tokio::time::timeout(COMMIT_DEADLINE, commit(client, batch, fence)).await {
        Ok(done) => done,
        Err(_) => {
            // Mid-transaction, or mid-COMMIT: the connection's state is unknown, so it goes.
            *slot = None;
            Err(StorageError::Unavailable(format!("PostgreSQL: the commit did not finish within {COMMIT_DEADLINE:?}; its outcome is unknown")))
        }
    }
}

/// One batch in one transaction: the checkpoint, moved only from the size this batch extends
/// (see [`Storage::commit`]), then the entries (one multi-row insert) and the tiles.
async fn commit(client: &mut Client, batch: &Batch, fence: Option<&Lease>) -> Result<(), StorageError> {
    let tx = client.transaction().await.map_err(classify)?;
    let log = batch.log as i16;
    if let Some(lease) = fence {
        check_fence(&tx, lease).await?;
    }
    // The checkpoint first: the compare-and-swap also locks its row, so concurrent writers of
    // one log queue here, and a stale one learns that rather than a key collision.
    let previous = batch.previous_size();
    let moved = tx
        .execute(
            "UPDATE checkpoints SET size = $2, note = $3 WHERE log = $1 AND size = $4 AND NOT frozen",
            &[&log, &bigint(batch.checkpoint.size), &batch.checkpoint.note, &bigint(previous)],
        )
        .await
        .map_err(classify)?;
    if moved == 0 {
        let inserted = tx
            .execute(
                "INSERT INTO checkpoints(log, size, note) VALUES ($1, $2, $3) ON CONFLICT (log) DO NOTHING",
                &[&log, &bigint(batch.checkpoint.size), &batch.checkpoint.note],
            )
            .await
            .map_err(classify)?;
        if inserted == 0 {
            let row = tx.query_one("SELECT size, frozen FROM checkpoints WHERE log = $1", &[&log]).await.map_err(classify)?;
            let (stored, frozen): (i64, bool) = (row.try_get(0).map_err(classify)?, row.try_get(1).map_err(classify)?);
            if frozen {
                return Err(StorageError::Frozen { log: batch.log, size: stored as u64 });
            }
            return Err(StorageError::Conflict { log: batch.log, expected: previous, stored: stored as u64 });
        }
    }
    if !batch.entries.is_empty() {
        let n = batch.entries.len();
        let (mut idx, mut leaf, mut digest, mut body, mut stamp) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut identity, mut public_key, mut time) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        let mut attestation = Vec::with_capacity(n);
        let (mut attested_digest, mut attested_data) = (Vec::new(), Vec::new());
        for e in &batch.entries {
            idx.push(bigint(e.index));
            time.push(e.integrated_time.unwrap_or(batch.integrated_time));
            leaf.push(&e.leaf_hash[..]);
            digest.push(e.digest.as_deref());
            identity.push(e.identity.as_deref());
            public_key.push(e.public_key.as_deref());
            body.push(e.body.as_slice());
            stamp.push(e.stamp.as_deref());
            attestation.push(e.attestation.as_ref().map(|a| &a.digest[..]));
            if let Some(a) = &e.attestation {
                attested_digest.push(&a.digest[..]);
                attested_data.push(a.data.as_slice());
            }
        }
        tx.execute(
            "INSERT INTO entries(log, idx, leaf_hash, digest, integrated_time, body, stamp, identity, public_key, attestation) \
             SELECT $1, i, l, d, t, b, s, n, k, a \
             FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::BYTEA[], $5::BYTEA[], $6::BYTEA[], $7::BYTEA[], $8::BYTEA[], $9::BYTEA[], $10::BYTEA[]) \
             AS u(t, i, l, d, b, s, n, k, a)",
            &[&log, &time, &idx, &leaf, &digest, &body, &stamp, &identity, &public_key, &attestation],
        )
        .await
        .map_err(classify)?;
        if !attested_digest.is_empty() {
            tx.execute(
                "INSERT INTO attestations(digest, data) SELECT d, a FROM UNNEST($1::BYTEA[], $2::BYTEA[]) AS u(d, a) ON CONFLICT (digest) DO NOTHING",
                &[&attested_digest, &attested_data],
            )
            .await
            .map_err(classify)?;
        }
    }
    for t in &batch.tiles {
        tx.execute(
            "INSERT INTO tiles(log, level, idx, hashes) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (log, level, idx) DO UPDATE SET hashes = EXCLUDED.hashes",
            &[&log, &(t.level as i16), &bigint(t.index), &t.hashes],
        )
        .await
        .map_err(classify)?;
    }
    for t in &batch.leaf_tiles {
        tx.execute("INSERT INTO leaf_tiles(log, idx, nodes) VALUES ($1, $2, $3)", &[&log, &bigint(t.index), &t.nodes])
            .await
            .map_err(classify)?;
    }
    tx.commit().await.map_err(classify)
}
