//! The followers' queue ([`Queue`]): entries an instance without the lease hands to the
//! sequencer, one row each.

use std::sync::Arc;

use crate::storage::{Attestation, LogId, Queue, QueuedEntry, ReadFuture, StorageError};
use super::pool::{classify, Conn};
use super::PostgresStorage;

impl Queue for PostgresStorage {
    fn enqueue(&self, log: LogId, entries: &[QueuedEntry]) -> Result<(), StorageError> {
        if entries.is_empty() {
            return Ok(());
        }
        let columns = QueueColumns::of(entries.iter().cloned());
        self.read(move |c| insert_queued(c, log, columns))
    }

    fn enqueue_async(&self, log: LogId, entries: Vec<QueuedEntry>) -> ReadFuture<'_, ()> {
        if entries.is_empty() {
            return Box::pin(std::future::ready(Ok(())));
        }
        // Moved into the columns, not copied: the follower hands over what it queued.
        let columns = QueueColumns::of(entries);
        Box::pin(self.read_future(move |c| insert_queued(c, log, columns)))
    }

    fn dequeue(&self, log: LogId, limit: usize) -> Result<Vec<(i64, QueuedEntry)>, StorageError> {
        parse_queued(&self.read(move |c| select_queued(c, log, limit))?)
    }

    fn dequeue_async(&self, log: LogId, limit: usize) -> ReadFuture<'_, Vec<(i64, QueuedEntry)>> {
        let rows = self.read_future(move |c| select_queued(c, log, limit));
        Box::pin(async move { parse_queued(&rows.await?) })
    }

    fn forget(&self, log: LogId, ids: &[i64]) -> Result<(), StorageError> {
        let ids = ids.to_vec();
        self.read(move |c| delete_queued(c, log, ids))
    }

    fn forget_async(&self, log: LogId, ids: Vec<i64>) -> ReadFuture<'_, ()> {
        Box::pin(self.read_future(move |c| delete_queued(c, log, ids)))
    }

    fn discard(&self, log: LogId) -> Result<u64, StorageError> {
        self.read(move |c| async move { c.client.execute("DELETE FROM queue WHERE log = $1", &[&(log as i16)]).await })
    }
}

/// Queued entries as the queue's columns, one array each, for one `INSERT … UNNEST`.
struct QueueColumns {
    leaf: Vec<Vec<u8>>,
    digest: Vec<Option<Vec<u8>>>,
    identity: Vec<Option<Vec<u8>>>,
    public_key: Vec<Option<Vec<u8>>>,
    body: Vec<Vec<u8>>,
    extra: Vec<Option<Vec<u8>>>,
    attestation: Vec<Option<Vec<u8>>>,
}

impl QueueColumns {
    fn of(entries: impl IntoIterator<Item = QueuedEntry>) -> QueueColumns {
        let mut c =
            QueueColumns { leaf: vec![], digest: vec![], identity: vec![], public_key: vec![], body: vec![], extra: vec![], attestation: vec![] };
        for e in entries {
            c.leaf.push(e.leaf_hash.to_vec());
            c.digest.push(e.digest);
            c.identity.push(e.identity);
            c.public_key.push(e.public_key);
            c.body.push(e.body);
            c.extra.push(e.extra);
            c.attestation.push(e.attestation.map(|a| a.data));
        }
        c
    }
}

async fn insert_queued(c: Arc<Conn>, log: LogId, q: QueueColumns) -> Result<(), tokio_postgres::Error> {
    c.client
        .execute(
            "INSERT INTO queue(log, leaf_hash, digest, body, extra, identity, public_key, attestation) \
             SELECT $1, l, d, b, x, n, k, a FROM UNNEST($2::BYTEA[], $3::BYTEA[], $4::BYTEA[], $5::BYTEA[], $6::BYTEA[], $7::BYTEA[], $8::BYTEA[]) \
             AS t(l, d, b, x, n, k, a) ON CONFLICT (log, leaf_hash) DO NOTHING",
            &[&(log as i16), &q.leaf, &q.digest, &q.body, &q.extra, &q.identity, &q.public_key, &q.attestation],
        )
        .await
        .map(|_| ())
}

async fn select_queued(c: Arc<Conn>, log: LogId, limit: usize) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let limit = limit.min(i64::MAX as usize) as i64;
    c.client
        .query("SELECT id, leaf_hash, digest, body, extra, identity, public_key, attestation FROM queue WHERE log = $1 ORDER BY id LIMIT $2", &[&(log as i16), &limit])
        .await
}

fn parse_queued(rows: &[tokio_postgres::Row]) -> Result<Vec<(i64, QueuedEntry)>, StorageError> {
    rows.iter()
        .map(|r| {
            let leaf: Vec<u8> = r.try_get(1).map_err(classify)?;
            let entry = QueuedEntry {
                leaf_hash: leaf.try_into().map_err(|_| StorageError::Corrupt("a queued leaf hash is not 32 bytes".into()))?,
                digest: r.try_get(2).map_err(classify)?,
                body: r.try_get(3).map_err(classify)?,
                extra: r.try_get(4).map_err(classify)?,
                identity: r.try_get(5).map_err(classify)?,
                public_key: r.try_get(6).map_err(classify)?,
                // The digest is made again from the bytes, not trusted from the row.
                attestation: r.try_get::<_, Option<Vec<u8>>>(7).map_err(classify)?.map(Attestation::new),
            };
            Ok((r.try_get(0).map_err(classify)?, entry))
        })
        .collect()
}

async fn delete_queued(c: Arc<Conn>, log: LogId, ids: Vec<i64>) -> Result<(), tokio_postgres::Error> {
    c.client.execute("DELETE FROM queue WHERE log = $1 AND id = ANY($2)", &[&(log as i16), &ids]).await.map(|_| ())
}
