//! The PostgreSQL backend, for more than one machine (`storage = "postgres://…"`).
//!
//! [`Storage`] is a blocking trait: the sequencer calls it from blocking threads, and reads run
//! on the calling task because SQLite's page-cache reads are cheaper than a thread handoff.
//! tokio-postgres is async, and the synchronous `postgres` crate starts a runtime of its own,
//! which panics inside tokio's. So this backend's connections live on the process's one
//! database runtime ([`signet_db::runtime`], shared with the guard's and the audit's stores):
//! each blocking trait call hands its query there and waits on a plain channel, which is safe
//! from any thread, and each async one awaits the query's task.
//!
//! One connection commits (a transaction needs the connection to itself); a few more serve
//! reads, each pipelining whatever queries are in flight on it. A connection that breaks is
//! replaced on its next use, so a database restart costs the requests that were in flight and
//! nothing else: no restart of signet.
//!
//! Only plain SQL that PostgreSQL-wire distributed databases (CockroachDB, YugabyteDB) also
//! speak is used: no advisory locks, no LISTEN/NOTIFY, no server-side functions (the list is
//! in docs/scaling.md).
//!
//! - [`schema`]: the tables, one migration at a time, and looks from outside a server
//!   (`signet doctor`).
//! - [`pool`]: the connections: the writer's session, the readers and their prepared reads,
//!   and how a database error is sorted.
//! - [`reads`]: the read queries.
//! - [`commit`]: one batch, in one transaction, within a deadline.
//! - [`fence`]: the sequencer lease as held, and the check that fences every commit by it.
//! - [`lease`]: taking, renewing and giving up the lease.
//! - [`queue`]: the followers' queue ([`Queue`]).
//! - [`tuf`]: the shared TUF repository's files.

use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use signet_db::migrations::{self, Migration};
use super::*;

mod commit;
mod fence;
mod lease;
mod pool;
mod queue;
mod reads;
mod schema;
mod tuf;

use commit::{commit_within_deadline, COMMIT_DEADLINE};
use pool::{classify, writer, Conn, Pool};
use reads::{
    bigint, find_by, find_leaves, parse_keys, parse_receipts, read_checkpoint, read_entries, read_entry, read_receipts, SEARCH_BY_DIGEST,
    SEARCH_BY_IDENTITY, SEARCH_BY_PUBLIC_KEY,
};
#[doc(hidden)]
pub use reads::FIND_LEAVES;
pub use fence::Lease;
pub use schema::{read_meta, schema_version, MIGRATIONS};
pub(super) use schema::shard_records;
pub use tuf::TufFile;

/// Reader connections. Each pipelines its queries, so a few keep up with many request tasks.
const READERS: usize = 4;
/// How long a read may take before the request gets a 503 instead of waiting on.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub struct PostgresStorage {
    /// The schema versions this open applied (empty when the database was current).
    pub applied_migrations: Vec<i32>,
    /// The lease this instance holds, if any: then every commit checks, under a row lock,
    /// that the lease's epoch is still this one (see [`PostgresStorage::acquire_lease`]).
    fence: Arc<parking_lot::Mutex<Option<Lease>>>,
    /// The process's database runtime ([`signet_db::runtime`]).
    handle: Handle,
    pool: Arc<Pool>,
}

impl PostgresStorage {
    /// Connects to `url` (`postgres://user@host:port/db`), and brings the schema up to date.
    pub fn open(url: &str) -> Result<Self, StorageError> {
        let target = signet_db::pg::Target::parse(url).map_err(|e| StorageError::Backend(e.to_string()))?;
        let handle = signet_db::runtime::handle().map_err(|e| StorageError::Backend(e.to_string()))?;
        let pool = Arc::new(Pool {
            target,
            writer: tokio::sync::Mutex::new(None),
            readers: (0..READERS).map(|_| parking_lot::Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            last_failure: Default::default(),
        });
        let mut storage = PostgresStorage {
            applied_migrations: Vec::new(),
            fence: Default::default(),
            handle,
            pool,
        };
        storage.applied_migrations = storage.migrate()?;
        Ok(storage)
    }

    /// Applies the log's migrations that this database lacks; returns the versions applied.
    pub fn migrate(&self) -> Result<Vec<i32>, StorageError> {
        self.apply(MIGRATIONS)
    }

    /// Applies those of `ours` (any crate's) that this database lacks, on the writer's
    /// connection (`signet migrate` applies every crate's through the log's store).
    pub fn apply(&self, ours: &'static [Migration]) -> Result<Vec<i32>, StorageError> {
        self.block(move |pool| async move {
            let mut slot = pool.writer.lock().await;
            let client = writer(&pool, &mut slot).await?;
            migrations::apply(client, ours).await.map_err(|e| StorageError::Backend(e.to_string()))
        })
    }

    /// The lease this instance took, if it took one: whether it may act as the sequencer (a
    /// takeover by another instance shows at its next write or renewal, which the epoch fences).
    pub fn held_lease(&self) -> Option<Lease> {
        self.fence.lock().clone()
    }

    /// Starts `f` on the backend's runtime, bounded by `timeout` if given.
    fn spawn<T, F, Fut>(&self, timeout: Option<Duration>, f: F) -> tokio::task::JoinHandle<Result<T, StorageError>>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Pool>) -> Fut,
        Fut: Future<Output = Result<T, StorageError>> + Send + 'static,
    {
        let fut = f(self.pool.clone());
        self.handle.spawn(async move {
            match timeout {
                Some(t) => tokio::time::timeout(t, fut)
                    .await
                    .unwrap_or_else(|_| Err(StorageError::Unavailable(format!("PostgreSQL did not answer within {t:?}")))),
                None => fut.await,
            }
        })
    }

    /// Runs `f` on the database runtime and waits for it, from any thread
    /// ([`signet_db::runtime::block`]).
    fn block<T, F, Fut>(&self, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Pool>) -> Fut,
        Fut: Future<Output = Result<T, StorageError>> + Send + 'static,
    {
        signet_db::runtime::block(f(self.pool.clone())).map_err(|e| StorageError::Backend(format!("PostgreSQL: {e}")))?
    }

    fn read_future<T, F, Fut>(&self, f: F) -> impl Future<Output = Result<T, StorageError>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(Arc<Conn>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let task = self.spawn(Some(READ_TIMEOUT), |pool| async move {
            let conn = pool.reader().await?;
            f(conn).await.map_err(classify)
        });
        async move { task.await.map_err(|e| StorageError::Backend(format!("a PostgreSQL read failed: {e}")))? }
    }

    /// `fut` (one of the `*_async` calls, on the database runtime), waited for in place.
    fn wait<T: Send + 'static>(&self, fut: impl Future<Output = Result<T, StorageError>> + Send + 'static) -> Result<T, StorageError> {
        self.block(move |_| fut)
    }

    /// A read, waited for in place (the blocking trait methods).
    fn read<T, F, Fut>(&self, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Conn>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let fut = self.read_future(f);
        self.block(move |_| fut)
    }
}

pub use signet_db::pg::redact;

impl Storage for PostgresStorage {
    fn commit(&self, batch: &Batch) -> Result<(), StorageError> {
        let batch = batch.clone();
        let fence = self.fence.lock().clone();
        self.block(move |pool| async move { commit_within_deadline(&pool, &batch, fence.as_ref()).await })
    }

    /// On the database runtime: the sequencer awaits the handle, and no thread waits.
    fn start_commit(self: Arc<Self>, batch: Batch) -> CommitTask {
        let fence = self.fence.lock().clone();
        let pool = self.pool.clone();
        self.handle.spawn(async move {
            // Shared with the commit's own task, so that a panic there still gives it back.
            let batch = Arc::new(batch);
            let committing = {
                let batch = batch.clone();
                tokio::spawn(async move { commit_within_deadline(&pool, &batch, fence.as_ref()).await })
            };
            let result = committing.await.unwrap_or_else(|e| Err(StorageError::Backend(format!("the commit panicked: {e}"))));
            // The task has ended, so this is the only reference left: no copy is made.
            let batch = Arc::try_unwrap(batch).unwrap_or_else(|still_shared| (*still_shared).clone());
            (batch, result)
        })
    }

    fn freeze(&self, log: LogId) -> Result<u64, StorageError> {
        self.block(move |pool| async move {
            let mut slot = pool.writer.lock().await;
            let client = writer(&pool, &mut slot).await?;
            // One statement: it waits on the row lock of a commit under way, and every commit
            // after it finds the tree frozen.
            let id = log as i16;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
            let freezing = client.query_opt("UPDATE checkpoints SET frozen = true WHERE log = $1 RETURNING size", &params);
            match tokio::time::timeout(COMMIT_DEADLINE, freezing).await {
                Ok(Ok(Some(row))) => Ok(row.try_get::<_, i64>(0).map_err(classify)? as u64),
                Ok(Ok(None)) => Err(StorageError::Corrupt(format!("log {log} has no stored checkpoint to freeze"))),
                Ok(Err(e)) => Err(classify(e)),
                Err(_) => {
                    *slot = None;
                    Err(StorageError::Unavailable(format!("PostgreSQL: freezing log {log} did not finish within {COMMIT_DEADLINE:?}")))
                }
            }
        })
    }

    fn latest_checkpoint(&self, log: LogId) -> Result<Option<StoredCheckpoint>, StorageError> {
        self.read(move |c| read_checkpoint(c, log))
    }

    fn latest_checkpoint_async(&self, log: LogId) -> ReadFuture<'_, Option<StoredCheckpoint>> {
        Box::pin(self.read_future(move |c| read_checkpoint(c, log)))
    }

    fn tiles(&self, log: LogId, level: u8) -> Result<Vec<Tile>, StorageError> {
        self.read(move |c| async move {
            let rows = c
                .client
                .query("SELECT idx, hashes FROM tiles WHERE log = $1 AND level = $2 ORDER BY idx", &[&(log as i16), &(level as i16)])
                .await?;
            rows.iter().map(|r| Ok(Tile { level, index: r.try_get::<_, i64>(0)? as u64, hashes: r.try_get(1)? })).collect()
        })
    }

    fn tile(&self, log: LogId, level: u8, index: u64) -> Result<Option<Tile>, StorageError> {
        let idx = bigint(index);
        self.read(move |c| async move {
            let row = c
                .client
                .query_opt("SELECT hashes FROM tiles WHERE log = $1 AND level = $2 AND idx = $3", &[&(log as i16), &(level as i16), &idx])
                .await?;
            row.map(|r| Ok(Tile { level, index, hashes: r.try_get(0)? })).transpose()
        })
    }

    fn leaf_tile(&self, log: LogId, index: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let idx = bigint(index);
        self.read(move |c| async move {
            let row = c.client.query_opt("SELECT nodes FROM leaf_tiles WHERE log = $1 AND idx = $2", &[&(log as i16), &idx]).await?;
            row.map(|r| r.try_get(0)).transpose()
        })
    }

    fn find_leaves(&self, log: LogId, leaves: &[Hash]) -> Result<Vec<(usize, u64)>, StorageError> {
        if leaves.is_empty() {
            return Ok(Vec::new());
        }
        let leaves = leaves.to_vec();
        self.read(move |c| find_leaves(c, log, leaves))
    }

    fn keys(&self, log: LogId, start: u64, count: u64) -> Result<Vec<EntryKeys>, StorageError> {
        let (lo, hi) = (bigint(start), bigint(start.saturating_add(count)));
        let rows = self.read(move |c| async move { c.client.query(&c.st.keys, &[&(log as i16), &lo, &hi]).await })?;
        parse_keys(&rows)
    }

    fn keys_async(&self, log: LogId, start: u64, count: u64) -> ReadFuture<'_, Vec<EntryKeys>> {
        let (lo, hi) = (bigint(start), bigint(start.saturating_add(count)));
        let rows = self.read_future(move |c| async move { c.client.query(&c.st.keys, &[&(log as i16), &lo, &hi]).await });
        Box::pin(async move { parse_keys(&rows.await?) })
    }

    fn entry(&self, log: LogId, index: u64) -> Result<Option<StoredEntry>, StorageError> {
        if index > i64::MAX as u64 {
            return Ok(None);
        }
        self.read(move |c| read_entry(c, log, index))
    }

    fn entries(&self, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError> {
        self.read(move |c| read_entries(c, log, start, count))
    }

    fn entry_async(&self, log: LogId, index: u64) -> ReadFuture<'_, Option<StoredEntry>> {
        if index > i64::MAX as u64 {
            return Box::pin(std::future::ready(Ok(None)));
        }
        Box::pin(self.read_future(move |c| read_entry(c, log, index)))
    }

    fn find_leaves_async(&self, log: LogId, leaves: Vec<Hash>) -> ReadFuture<'_, Vec<(usize, u64)>> {
        Box::pin(self.read_future(move |c| find_leaves(c, log, leaves)))
    }

    fn find_digest_async(&self, log: LogId, digest: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>> {
        // entries_by_digest is (log, digest, idx): one index range scan, in index order.
        Box::pin(self.read_future(move |c| find_by(c, SEARCH_BY_DIGEST, log, digest, after, limit)))
    }

    fn find_identity_async(&self, log: LogId, identity: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>> {
        // entries_by_identity is (log, identity, idx), likewise.
        Box::pin(self.read_future(move |c| find_by(c, SEARCH_BY_IDENTITY, log, identity, after, limit)))
    }

    fn find_public_key_async(&self, log: LogId, key: Vec<u8>, after: Option<u64>, limit: usize) -> ReadFuture<'_, Vec<u64>> {
        // entries_by_public_key is (log, public_key, idx), likewise.
        Box::pin(self.read_future(move |c| find_by(c, SEARCH_BY_PUBLIC_KEY, log, key, after, limit)))
    }

    fn entries_async(&self, log: LogId, start: u64, count: u64) -> ReadFuture<'_, Vec<StoredEntry>> {
        Box::pin(self.read_future(move |c| read_entries(c, log, start, count)))
    }

    fn receipts(&self, log: LogId, indices: &[u64]) -> Result<Vec<(u64, i64, Option<Vec<u8>>)>, StorageError> {
        let wanted: Vec<i64> = indices.iter().map(|&i| bigint(i)).collect();
        parse_receipts(&self.read(move |c| read_receipts(c, log, wanted))?)
    }

    fn receipts_async(&self, log: LogId, indices: Vec<u64>) -> ReadFuture<'_, Vec<(u64, i64, Option<Vec<u8>>)>> {
        let wanted: Vec<i64> = indices.iter().map(|&i| bigint(i)).collect();
        let rows = self.read_future(move |c| read_receipts(c, log, wanted));
        Box::pin(async move { parse_receipts(&rows.await?) })
    }

    fn backfill_search_keys(&self, log: LogId, keys: &[Backfill]) -> Result<(), StorageError> {
        if keys.is_empty() {
            return Ok(());
        }
        let index: Vec<i64> = keys.iter().map(|k| bigint(k.index)).collect();
        let identity: Vec<Option<Vec<u8>>> = keys.iter().map(|k| k.identity.clone()).collect();
        let public_key: Vec<Vec<u8>> = keys.iter().map(|k| k.public_key.clone()).collect();
        // One statement, atomic on its own; the partial indexes on identity and public_key
        // take the rows in as they gain them.
        self.read(move |c| async move {
            c.client
                .execute(
                    "UPDATE entries SET identity = k.identity, public_key = k.public_key \
                     FROM unnest($2::bigint[], $3::bytea[], $4::bytea[]) AS k(idx, identity, public_key) \
                     WHERE entries.log = $1 AND entries.idx = k.idx AND entries.public_key IS NULL",
                    &[&(log as i16), &index, &identity, &public_key],
                )
                .await
                .map(|_| ())
        })
    }

    fn put_meta(&self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        let (key, value) = (key.to_string(), value.to_vec());
        self.read(move |c| async move {
            c.client
                .execute("INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value", &[&key, &value])
                .await
                .map(|_| ())
        })
    }

    fn get_or_init_meta(&self, key: &str, init: &[u8]) -> Result<Vec<u8>, StorageError> {
        let (key, init) = (key.to_string(), init.to_vec());
        self.read(move |c| async move {
            c.client.execute("INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", &[&key, &init]).await?;
            c.client.query_one("SELECT value FROM meta WHERE key = $1", &[&key]).await?.try_get(0)
        })
    }

    fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let key = key.to_string();
        self.read(move |c| async move {
            match c.client.query_opt("SELECT value FROM meta WHERE key = $1", &[&key]).await? {
                Some(row) => row.try_get(0).map(Some),
                None => Ok(None),
            }
        })
    }
}

// Queue operations are single statements, atomic on their own, so they run on the reader
// connections: the writer stays free for the sequencer's commits.
