//! The log's tables, one migration at a time, and what `signet doctor` reads of a database
//! from outside a server.

use std::future::Future;
use std::time::Duration;

use tokio_postgres::Client;

use signet_db::migrations::{self, Migration};
use crate::storage::{LogId, ShardRecords, StorageError};

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
pub(crate) fn shard_records(url: &str) -> Result<ShardRecords, StorageError> {
    look(url, move |client, shown| async move {
        let pg = |e: tokio_postgres::Error| StorageError::Backend(format!("PostgreSQL at {shown}: {e}"));
        if client.query_opt("SELECT 1 FROM pg_tables WHERE tablename = 'meta'", &[]).await.map_err(pg)?.is_none() {
            return Ok(ShardRecords::default());
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
        Ok(ShardRecords { records, frozen })
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
