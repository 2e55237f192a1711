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

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

use signet_db::migrations::{self, Migration};
use super::*;

mod tuf;
pub use tuf::TufFile;

/// Reader connections. Each pipelines its queries, so a few keep up with many request tasks.
const READERS: usize = 4;
/// How long a query may wait for a connection to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a read may take before the request gets a 503 instead of waiting on.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The log's tables, its lease and the TUF repository (`postgres/tuf.rs`), one version at a
/// time; the guard's and the witness's come with their own crates. Never edit a released
/// migration: add the next one ([`signet_db::migrations::REGISTRY`]).
///
/// Entries are one row each, keyed by (log, idx). The leaf-hash, digest, identity and key indexes
/// make the dedupe and search lookups work from the database, across instances and beyond RAM.
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "logs: entries, tiles, checkpoints, meta",
    sql: "
CREATE TABLE meta(key TEXT PRIMARY KEY, value BYTEA NOT NULL);
CREATE TABLE entries(
    log SMALLINT NOT NULL,
    idx BIGINT NOT NULL,
    leaf_hash BYTEA NOT NULL,
    digest BYTEA,
    integrated_time BIGINT NOT NULL,
    body BYTEA NOT NULL,
    stamp BYTEA,
    PRIMARY KEY (log, idx)
);
CREATE INDEX entries_by_leaf ON entries(log, leaf_hash);
CREATE INDEX entries_by_digest ON entries(log, digest, idx) WHERE digest IS NOT NULL;
CREATE TABLE tiles(
    log SMALLINT NOT NULL, level SMALLINT NOT NULL, idx BIGINT NOT NULL, hashes BYTEA NOT NULL,
    PRIMARY KEY (log, level, idx)
);
CREATE TABLE checkpoints(log SMALLINT PRIMARY KEY, size BIGINT NOT NULL, note TEXT NOT NULL);
",
}, Migration {
    version: 2,
    name: "the sequencer lease",
    sql: "CREATE TABLE leases(name TEXT PRIMARY KEY, holder TEXT NOT NULL, epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);",
}, Migration {
    version: 3,
    name: "the queue of entries for the sequencer",
    sql: "
CREATE TABLE queue(
    id BIGSERIAL PRIMARY KEY,
    log SMALLINT NOT NULL,
    leaf_hash BYTEA NOT NULL,
    digest BYTEA,
    body BYTEA NOT NULL,
    extra BYTEA
);
CREATE INDEX queue_by_log ON queue(log, id);
-- A client retrying the same entry while no instance sequences adds no row.
CREATE UNIQUE INDEX queue_by_leaf ON queue(log, leaf_hash);
",
}, Migration {
    version: 5,
    name: "full leaf tiles with their inner levels",
    sql: "CREATE TABLE leaf_tiles(log SMALLINT NOT NULL, idx BIGINT NOT NULL, nodes BYTEA NOT NULL, PRIMARY KEY (log, idx));",
}, Migration {
    version: 8,
    name: "search by signing identity",
    // Entries logged before this have NULL identity: they are found by digest only.
    sql: "
ALTER TABLE entries ADD COLUMN identity BYTEA;
CREATE INDEX entries_by_identity ON entries(log, identity, idx) WHERE identity IS NOT NULL;
ALTER TABLE queue ADD COLUMN identity BYTEA;
",
}, Migration {
    version: 9,
    name: "the TUF repository, shared by every instance",
    // One row per published file (`N.root.json`, `timestamp.json`, `targets/<sha256>.<name>`…),
    // with the generation that last wrote it; tuf_meta's generation moves once per write, so a
    // follower polls one row and reads only the files past the generation it holds.
    sql: "
CREATE TABLE tuf_files(name TEXT PRIMARY KEY, bytes BYTEA NOT NULL, generation BIGINT NOT NULL);
CREATE INDEX tuf_files_by_generation ON tuf_files(generation);
CREATE TABLE tuf_meta(id INT PRIMARY KEY, generation BIGINT NOT NULL);
INSERT INTO tuf_meta(id, generation) VALUES (1, 0);
",
}, Migration {
    version: 11,
    name: "frozen trees",
    // Set once by a shard rotation, under the checkpoint's row lock; every commit's
    // compare-and-swap requires it unset, so no instance can grow a frozen tree.
    sql: "ALTER TABLE checkpoints ADD COLUMN frozen BOOLEAN NOT NULL DEFAULT false;",
}, Migration {
    version: 12,
    name: "search by signer's key",
    // Entries logged before this have NULL public_key: they are found by digest or identity.
    sql: "
ALTER TABLE entries ADD COLUMN public_key BYTEA;
CREATE INDEX entries_by_public_key ON entries(log, public_key, idx) WHERE public_key IS NOT NULL;
ALTER TABLE queue ADD COLUMN public_key BYTEA;
",
}, Migration {
    version: 13,
    name: "attestations",
    // One row per content (an intoto entry's statement); an entry names its own by digest.
    sql: "
CREATE TABLE attestations(digest BYTEA PRIMARY KEY, data BYTEA NOT NULL);
ALTER TABLE entries ADD COLUMN attestation BYTEA;
ALTER TABLE queue ADD COLUMN attestation BYTEA;
",
}];

/// The one lease: the instance holding it sequences every log in the database.
const LEASE: &str = "sequencer";

/// The schema version of the PostgreSQL database at `url`, and the newest this build knows,
/// read without changing anything (`signet doctor`). A database signet never migrated is at 0;
/// one that lacks a version below its newest (a store that never opened) is at the version
/// before the first it lacks.
pub fn schema_version(url: &str) -> Result<(i32, i32), StorageError> {
    let known = migrations::newest();
    look(url, move |client, shown| async move {
        let applied = migrations::applied(&client).await.map_err(|e| StorageError::Backend(format!("PostgreSQL at {shown}: {e}")))?;
        let newest = applied.last().copied().unwrap_or(0);
        if newest > known {
            return Ok((newest, known));
        }
        Ok((migrations::missing(&applied).first().map_or(newest, |first| first - 1), known))
    })
}

/// One value of the logs' `meta` table, read without changing anything (`signet doctor`);
/// `None` when it is not there, or the table is not made yet.
pub fn read_meta(url: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
    let key = key.to_string();
    look(url, move |client, shown| async move {
        if client.query_opt("SELECT 1 FROM pg_tables WHERE tablename = 'meta'", &[]).await.map_err(|e| StorageError::Backend(format!("PostgreSQL at {shown}: {e}")))?.is_none() {
            return Ok(None);
        }
        let row = client.query_opt("SELECT value FROM meta WHERE key = $1", &[&key]).await.map_err(|e| StorageError::Backend(format!("PostgreSQL at {shown}: {e}")))?;
        row.map(|r| r.try_get(0)).transpose().map_err(|e| StorageError::Backend(format!("PostgreSQL at {shown}: {e}")))
    })
}

/// [`super::shard_records`] on PostgreSQL.
pub(super) fn shard_records(url: &str) -> Result<super::ShardRecords, StorageError> {
    look(url, move |client, shown| async move {
        let pg = |e: tokio_postgres::Error| StorageError::Backend(format!("PostgreSQL at {shown}: {e}"));
        if client.query_opt("SELECT 1 FROM pg_tables WHERE tablename = 'meta'", &[]).await.map_err(pg)?.is_none() {
            return Ok(super::ShardRecords::default());
        }
        let rows = client.query("SELECT key, value FROM meta WHERE key LIKE '%.shard.%' ORDER BY key", &[]).await.map_err(pg)?;
        let records = rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect::<Result<_, tokio_postgres::Error>>().map_err(pg)?;
        // Before schema version 11 nothing was frozen in storage.
        let has_frozen = client
            .query_opt("SELECT 1 FROM information_schema.columns WHERE table_name = 'checkpoints' AND column_name = 'frozen'", &[])
            .await
            .map_err(pg)?
            .is_some();
        let frozen = match has_frozen {
            true => client.query("SELECT log FROM checkpoints WHERE frozen", &[]).await.map_err(pg)?.iter().map(|r| r.try_get::<_, i16>(0).map(|l| l as LogId)).collect::<Result<_, _>>().map_err(pg)?,
            false => Vec::new(),
        };
        Ok(super::ShardRecords { records, frozen })
    })
}

/// Runs `f` on one connection of its own to `url`, made for a look from outside a server
/// (its text in errors is redacted: `shown`).
fn look<T, F, Fut>(url: &str, f: F) -> Result<T, StorageError>
where
    T: Send + 'static,
    F: FnOnce(Client, String) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, StorageError>> + Send + 'static,
{
    let target = signet_db::pg::Target::parse(url).map_err(|e| StorageError::Backend(e.to_string()))?;
    let shown = signet_db::pg::redact(url);
    signet_db::runtime::block(async move {
        let (client, driver) = tokio::time::timeout(Duration::from_secs(10), target.connect())
            .await
            .map_err(|_| StorageError::Backend(format!("PostgreSQL at {shown}: no answer within 10 s")))?
            .map_err(|e| StorageError::Backend(format!("PostgreSQL at {shown}: {e}")))?;
        tokio::spawn(driver);
        f(client, shown).await
    })
    .map_err(|e| StorageError::Backend(e.to_string()))?
}

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

/// The reads every request path uses, prepared once per connection.
struct Statements {
    entry: Statement,
    entries: Statement,
    keys: Statement,
    checkpoint: Statement,
}

/// The sequencer lease as held by one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    /// The fencing token: one more at every takeover.
    pub epoch: i64,
}

struct Conn {
    client: Client,
    st: Statements,
}

struct Pool {
    target: signet_db::pg::Target,
    /// The committing connection: it needs no prepared reads, and exists before the schema does.
    writer: tokio::sync::Mutex<Option<Client>>,
    readers: Vec<parking_lot::Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    /// When a connection attempt last failed. For a moment after, reads fail at once instead
    /// of each making an attempt of its own: an outage under load must not become thousands
    /// of connection attempts waiting out their timeouts.
    last_failure: parking_lot::Mutex<Option<std::time::Instant>>,
}

/// How long reads fail fast after a failed connection attempt.
const BACKOFF: Duration = Duration::from_millis(250);

/// Sorts a database error into the kinds callers act on: the database gone (503, retry),
/// its disk full (507), or anything else.
fn classify(e: tokio_postgres::Error) -> StorageError {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::DISK_FULL || *code == SqlState::OUT_OF_MEMORY || *code == SqlState::INSUFFICIENT_RESOURCES {
            return StorageError::Full(format!("PostgreSQL: {}", db.message()));
        }
        // A bound of the writer's session ([`WRITER_SESSION`]) ended the statement: someone else
        // holds what it needs, and a retry (perhaps on another instance) may succeed.
        if *code == SqlState::LOCK_NOT_AVAILABLE || *code == SqlState::QUERY_CANCELED || *code == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT {
            return StorageError::Unavailable(format!("PostgreSQL: {}", db.message()));
        }
        if *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::TOO_MANY_CONNECTIONS
            || code.code().starts_with("08")
        {
            return StorageError::Unavailable(format!("PostgreSQL: {}", db.message()));
        }
        return StorageError::Backend(format!("PostgreSQL: {} ({})", db.message(), code.code()));
    }
    if e.is_closed() || e.code().is_none() {
        // No SQLSTATE: the connection itself failed (refused, reset, closed, or TLS, whose
        // reason, such as "certificate verify failed", is in the error's sources).
        return StorageError::Unavailable(format!("PostgreSQL: {}", signet_db::pg::message(&e)));
    }
    StorageError::Backend(format!("PostgreSQL: {e}"))
}

impl Pool {
    /// A new connection. Every attempt, whichever connection it is for, sets or clears the
    /// moment of the last failure that reads back off from.
    async fn connect_client(&self) -> Result<Client, StorageError> {
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, self.target.connect())
            .await
            .map_err(|_| StorageError::Unavailable(format!("PostgreSQL: no connection within {CONNECT_TIMEOUT:?}")))
            .and_then(|r| r.map_err(classify));
        *self.last_failure.lock() = attempt.is_err().then(std::time::Instant::now);
        let (client, connection) = attempt?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %signet_db::pg::message(&e), "PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    async fn connect(&self) -> Result<Conn, StorageError> {
        let client = self.connect_client().await?;
        let st = Statements {
            entry: client
                .prepare(concat!(ENTRY_COLUMNS!(), " WHERE e.log = $1 AND e.idx = $2"))
                .await
                .map_err(classify)?,
            entries: client
                .prepare(concat!(ENTRY_COLUMNS!(), " WHERE e.log = $1 AND e.idx >= $2 AND e.idx < $3 ORDER BY e.idx"))
                .await
                .map_err(classify)?,
            keys: client
                .prepare("SELECT leaf_hash, digest, identity, public_key FROM entries WHERE log = $1 AND idx >= $2 AND idx < $3 ORDER BY idx")
                .await
                .map_err(classify)?,
            checkpoint: client.prepare("SELECT size, note FROM checkpoints WHERE log = $1").await.map_err(classify)?,
        };
        Ok(Conn { client, st })
    }

    /// A reader connection, made anew if the one in its slot broke.
    async fn reader(&self) -> Result<Arc<Conn>, StorageError> {
        let slot = &self.readers[self.next.fetch_add(1, Ordering::Relaxed) % self.readers.len()];
        if let Some(c) = slot.lock().as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(c.clone());
        }
        if self.last_failure.lock().is_some_and(|t| t.elapsed() < BACKOFF) {
            return Err(StorageError::Unavailable("PostgreSQL: the last connection attempt failed moments ago".into()));
        }
        let conn = Arc::new(self.connect().await?);
        *slot.lock() = Some(conn.clone());
        Ok(conn)
    }
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

/// The writer connection, made anew if it broke.
/// The bounds of the writer's session. A row lock held elsewhere (a paused instance, an
/// operator's open transaction) fails a commit after `lock_timeout` instead of holding every
/// append; a statement that runs away ends after `statement_timeout`; and a writer stopped
/// mid-transaction (SIGSTOP, a partition) has its session ended by the server after
/// `idle_in_transaction_session_timeout`, which frees the lease row it locked. That bound is
/// below the lease's 2.5 s lifetime, so a follower's takeover waits for the lease and never
/// for the lock: under steady writes the sequencer is nearly always mid-transaction, and the
/// fault suite measured takeovers of 5 s after a SIGSTOP when this was 5 s. A batch's
/// statements follow each other within milliseconds; two idle seconds inside one mean its
/// writer is stopped or cut off.
const WRITER_SESSION: &str = "SET lock_timeout = '3s'; SET statement_timeout = '10s'; SET idle_in_transaction_session_timeout = '2s'";
/// How long a commit may take, end to end, before its outcome counts as unknown and its
/// connection is dropped (the sequencer then reconciles).
const COMMIT_DEADLINE: Duration = Duration::from_secs(15);

async fn writer<'a>(pool: &Pool, slot: &'a mut Option<Client>) -> Result<&'a mut Client, StorageError> {
    if slot.as_ref().is_none_or(|c| c.is_closed()) {
        let client = pool.connect_client().await?;
        client.batch_execute(WRITER_SESSION).await.map_err(classify)?;
        *slot = Some(client);
    }
    slot.as_mut().ok_or_else(|| StorageError::Unavailable("PostgreSQL: no connection".into()))
}

/// The dedupe's probe: one lookup in entries_by_leaf per wanted leaf, whatever the planner
/// believes. `leaf_hash = ANY($2)` left the choice to it, and on a table that autovacuum had
/// not yet analyzed (a new database's first minute) it scanned the log's whole primary-key
/// range and filtered: 34 ms per batch at 96,000 entries, a third of a new instance's append
/// rate. `OFFSET 0` keeps the subquery from being flattened into a join it could plan as
/// a scan. Public so that a test can EXPLAIN it.
#[doc(hidden)]
pub const FIND_LEAVES: &str = "SELECT w.leaf, e.idx FROM UNNEST($2::BYTEA[]) AS w(leaf), \
    LATERAL (SELECT idx FROM entries WHERE log = $1 AND leaf_hash = w.leaf OFFSET 0) AS e";

/// The entries among `leaves`, by the entries_by_leaf index, in one query.
async fn find_leaves(c: Arc<Conn>, log: LogId, leaves: Vec<Hash>) -> Result<Vec<(usize, u64)>, tokio_postgres::Error> {
    // Each leaf once: a row per match is then mapped to every position that wants it.
    let mut wanted: Vec<&[u8]> = leaves.iter().map(|h| &h[..]).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let rows = c.client.query(FIND_LEAVES, &[&(log as i16), &wanted]).await?;
    let mut found = Vec::with_capacity(rows.len());
    for r in rows {
        let (leaf, idx): (&[u8], i64) = (r.try_get(0)?, r.try_get(1)?);
        found.extend(leaves.iter().enumerate().filter(|(_, l)| l[..] == *leaf).map(|(pos, _)| (pos, idx as u64)));
    }
    Ok(found)
}

const SEARCH_BY_DIGEST: &str = "SELECT idx FROM entries WHERE log = $1 AND digest = $2 AND idx > $3 ORDER BY idx LIMIT $4";
const SEARCH_BY_IDENTITY: &str = "SELECT idx FROM entries WHERE log = $1 AND identity = $2 AND idx > $3 ORDER BY idx LIMIT $4";
const SEARCH_BY_PUBLIC_KEY: &str = "SELECT idx FROM entries WHERE log = $1 AND public_key = $2 AND idx > $3 ORDER BY idx LIMIT $4";

/// Up to `limit` indices after `after` whose search column (the query's) equals `value`.
async fn find_by(c: Arc<Conn>, sql: &str, log: LogId, value: Vec<u8>, after: Option<u64>, limit: usize) -> Result<Vec<u64>, tokio_postgres::Error> {
    let (after, limit) = (after.map_or(-1, bigint), limit.min(i64::MAX as usize) as i64);
    let rows = c.client.query(sql, &[&(log as i16), &value, &after, &limit]).await?;
    rows.iter().map(|r| Ok(r.try_get::<_, i64>(0)? as u64)).collect()
}

pub use signet_db::pg::redact;

fn stored_entry(r: &tokio_postgres::Row) -> Result<StoredEntry, tokio_postgres::Error> {
    let body: Vec<u8> = r.try_get(1)?;
    Ok(StoredEntry {
        index: r.try_get::<_, i64>(0)? as u64,
        leaf_hash: crate::merkle::leaf_hash(&body),
        integrated_time: r.try_get(3)?,
        body,
        stamp: r.try_get(2)?,
        attestation: r.try_get(4)?,
    })
}

/// The columns [`stored_entry`] reads, in its order: an entry row and its attestation's bytes.
macro_rules! ENTRY_COLUMNS {
    () => {
        "SELECT e.idx, e.body, e.stamp, e.integrated_time, a.data FROM entries e LEFT JOIN attestations a ON a.digest = e.attestation"
    };
}
use ENTRY_COLUMNS;

async fn read_entry(c: Arc<Conn>, log: LogId, index: u64) -> Result<Option<StoredEntry>, tokio_postgres::Error> {
    let row = c.client.query_opt(&c.st.entry, &[&(log as i16), &(index as i64)]).await?;
    row.as_ref().map(stored_entry).transpose()
}

async fn read_entries(c: Arc<Conn>, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, tokio_postgres::Error> {
    let (lo, hi) = (bigint(start), bigint(start.saturating_add(count)));
    let rows = c.client.query(&c.st.entries, &[&(log as i16), &lo, &hi]).await?;
    rows.iter().map(stored_entry).collect()
}

/// Indices are BIGINT: anything past i64::MAX is past every log's end.
fn bigint(i: u64) -> i64 {
    i.min(i64::MAX as u64) as i64
}

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

async fn read_checkpoint(c: Arc<Conn>, log: LogId) -> Result<Option<StoredCheckpoint>, tokio_postgres::Error> {
    let row = c.client.query_opt(&c.st.checkpoint, &[&(log as i16)]).await?;
    row.map(|r| Ok(StoredCheckpoint { size: r.try_get::<_, i64>(0)? as u64, note: r.try_get(1)? })).transpose()
}

fn parse_keys(rows: &[tokio_postgres::Row]) -> Result<Vec<EntryKeys>, StorageError> {
    rows.iter()
        .map(|r| {
            let leaf: Vec<u8> = r.try_get(0).map_err(classify)?;
            Ok(EntryKeys {
                leaf_hash: leaf.try_into().map_err(|_| StorageError::Corrupt("a stored leaf hash is not 32 bytes".into()))?,
                digest: r.try_get(1).map_err(classify)?,
                identity: r.try_get(2).map_err(classify)?,
                public_key: r.try_get(3).map_err(classify)?,
            })
        })
        .collect()
}

async fn read_receipts(c: Arc<Conn>, log: LogId, wanted: Vec<i64>) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    c.client.query("SELECT idx, integrated_time, stamp FROM entries WHERE log = $1 AND idx = ANY($2)", &[&(log as i16), &wanted]).await
}

fn parse_receipts(rows: &[tokio_postgres::Row]) -> Result<Vec<(u64, i64, Option<Vec<u8>>)>, StorageError> {
    rows.iter()
        .map(|r| Ok((r.try_get::<_, i64>(0).map_err(classify)? as u64, r.try_get(1).map_err(classify)?, r.try_get(2).map_err(classify)?)))
        .collect()
}

/// [`commit`] on the writer connection, bounded by [`COMMIT_DEADLINE`].
async fn commit_within_deadline(pool: &Pool, batch: &Batch, fence: Option<&Lease>) -> Result<(), StorageError> {
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

/// Checks, inside `tx`, that `lease` is still the sequencer lease. The lease row stays locked
/// until `tx` ends, so a takeover (which updates the row) waits for it, and the new holder's
/// view includes what `tx` writes. After a takeover this reads the new epoch, and the caller
/// writes nothing.
async fn check_fence(tx: &tokio_postgres::Transaction<'_>, lease: &Lease) -> Result<(), StorageError> {
    let row = tx.query_opt("SELECT holder, epoch FROM leases WHERE name = $1 FOR UPDATE", &[&LEASE]).await.map_err(classify)?;
    let current: Option<(String, i64)> = row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose().map_err(classify)?;
    if current.as_ref().is_none_or(|(h, e)| *h != lease.holder || *e != lease.epoch) {
        let by = current.map_or_else(|| "nobody".to_string(), |(h, e)| format!("{h} (epoch {e})"));
        return Err(StorageError::Fenced(format!("this instance's sequencer lease (epoch {}) is now held by {by}", lease.epoch)));
    }
    Ok(())
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
