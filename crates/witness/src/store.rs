//! The witness's memory: for each log, the size and root of the latest checkpoint it cosigned.
//!
//! This row is the whole of a witness's promise. It only moves forward, and only by a
//! compare-and-set on the state the request was checked against, so two requests racing
//! with different views can't both win (c2sp.org/tlog-witness: "checking the old size …
//! and persisting the new checkpoint must be performed atomically"). It is durable before
//! the cosignature leaves: SQLite with `synchronous=FULL`, or a PostgreSQL commit.
//! On PostgreSQL every instance shares the rows, so a witness run as several instances
//! still never cosigns two roots for one size.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use signet_core::hash::Hash;
use signet_db::connection::{OnConnect, Reconnecting};
use signet_db::DbError;

/// What the witness last cosigned for a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeHead {
    pub size: u64,
    pub root: Hash,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("witness state: {0}")]
    Backend(String),
}

/// The outcome of [`WitnessStore::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advanced {
    Done,
    /// The state was no longer what the request was checked against: here it is now.
    Moved(Option<TreeHead>),
}

#[async_trait::async_trait]
pub trait WitnessStore: Send + Sync {
    /// The latest cosigned state of `origin`, if it was ever cosigned.
    async fn latest(&self, origin: &str) -> Result<Option<TreeHead>, StoreError>;

    /// Sets `origin`'s state to `new` if it is still `old`, durably.
    async fn advance(&self, origin: &str, old: Option<TreeHead>, new: TreeHead) -> Result<Advanced, StoreError>;
}

/// SQL's signed 64-bit integers hold every size a log can reach; refuse the rest.
fn as_i64(n: u64) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| StoreError::Backend(format!("tree size {n} is beyond what the witness stores")))
}

fn head(size: i64, root: Vec<u8>) -> Result<TreeHead, StoreError> {
    let root = Hash::try_from(root.as_slice()).map_err(|_| StoreError::Backend("a stored root is not 32 bytes".into()))?;
    Ok(TreeHead { size: size.max(0) as u64, root })
}

/// `witness.sqlite` in the data directory.
pub struct SqliteStore {
    conn: Arc<Mutex<rusqlite::Connection>>,
}

const SQLITE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS witness_logs(origin TEXT PRIMARY KEY, size INTEGER NOT NULL, root BLOB NOT NULL, updated_ms INTEGER NOT NULL);";

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let fail = |e: rusqlite::Error| StoreError::Backend(format!("{}: {e}", path.display()));
        let conn = signet_db::sqlite::open_writer(path, &signet_db::sqlite::Writer::durable()).map_err(|e| StoreError::Backend(e.to_string()))?;
        conn.execute_batch(SQLITE_SCHEMA).map_err(fail)?;
        Ok(SqliteStore { conn: Arc::new(Mutex::new(conn)) })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || f(&mut conn.lock()))
            .await
            .map_err(|e| StoreError::Backend(e.to_string()))?
            .map_err(|e| StoreError::Backend(e.to_string()))
    }
}

fn sqlite_latest(conn: &rusqlite::Connection, origin: &str) -> rusqlite::Result<Option<(i64, Vec<u8>)>> {
    use rusqlite::OptionalExtension;
    conn.query_row("SELECT size, root FROM witness_logs WHERE origin = ?1", [origin], |r| Ok((r.get(0)?, r.get(1)?))).optional()
}

#[async_trait::async_trait]
impl WitnessStore for SqliteStore {
    async fn latest(&self, origin: &str) -> Result<Option<TreeHead>, StoreError> {
        let origin = origin.to_string();
        let row = self.blocking(move |c| sqlite_latest(c, &origin)).await?;
        row.map(|(size, root)| head(size, root)).transpose()
    }

    async fn advance(&self, origin: &str, old: Option<TreeHead>, new: TreeHead) -> Result<Advanced, StoreError> {
        let origin = origin.to_string();
        let size = as_i64(new.size)?;
        let old = old.map(|h| as_i64(h.size).map(|s| (s, h.root.to_vec()))).transpose()?;
        let now = signet_core_now_ms();
        let moved = self
            .blocking(move |c| {
                let tx = c.transaction()?;
                let current = sqlite_latest(&tx, &origin)?;
                if current != old {
                    return Ok(Some(current));
                }
                tx.execute(
                    "INSERT INTO witness_logs(origin, size, root, updated_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(origin) DO UPDATE SET size = excluded.size, root = excluded.root, updated_ms = excluded.updated_ms",
                    rusqlite::params![origin, size, new.root.to_vec(), now],
                )?;
                tx.commit()?;
                Ok(None)
            })
            .await?;
        match moved {
            None => Ok(Advanced::Done),
            Some(current) => Ok(Advanced::Moved(current.map(|(s, r)| head(s, r)).transpose()?)),
        }
    }
}

fn signet_core_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The witness's table, version 10 of [`signet_db::migrations::REGISTRY`]: read and written
/// always conditional on the row's old state.
pub const MIGRATIONS: &[signet_db::migrations::Migration] = &[signet_db::migrations::Migration {
    version: 10,
    name: "the witness's latest cosigned checkpoint of each log",
    sql: "CREATE TABLE witness_logs(origin TEXT PRIMARY KEY, size BIGINT NOT NULL, root BYTEA NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now());",
}];

/// The `witness_logs` table of the PostgreSQL database ([`MIGRATIONS`]), shared by every
/// instance. It connects at first use, and applies its migration on each connection it makes
/// (a query when the table is there).
pub struct PostgresStore {
    connection: Reconnecting<StoreError>,
}

impl PostgresStore {
    pub fn new(url: &str) -> Result<PostgresStore, StoreError> {
        let target = signet_db::pg::Target::parse(url)?;
        let migrate: OnConnect<StoreError> = Arc::new(|client: Arc<tokio_postgres::Client>| {
            Box::pin(async move { signet_db::migrations::apply(&client, MIGRATIONS).await.map(|_| ()).map_err(|e| StoreError::Backend(e.to_string())) })
        });
        Ok(PostgresStore { connection: Reconnecting::new(target, "witness state", Some(migrate)) })
    }

    /// The connection, made anew when the last one broke (a database restart).
    async fn client(&self) -> Result<Arc<tokio_postgres::Client>, StoreError> {
        self.connection.client().await
    }
}

impl From<DbError> for StoreError {
    fn from(e: DbError) -> StoreError {
        StoreError::Backend(e.to_string())
    }
}

#[async_trait::async_trait]
impl WitnessStore for PostgresStore {
    async fn latest(&self, origin: &str) -> Result<Option<TreeHead>, StoreError> {
        let c = self.client().await?;
        let row = c.query_opt("SELECT size, root FROM witness_logs WHERE origin = $1", &[&origin]).await.map_err(DbError::from)?;
        row.map(|r| head(r.try_get(0).map_err(DbError::from)?, r.try_get(1).map_err(DbError::from)?)).transpose()
    }

    async fn advance(&self, origin: &str, old: Option<TreeHead>, new: TreeHead) -> Result<Advanced, StoreError> {
        let c = self.client().await?;
        let (size, root) = (as_i64(new.size)?, new.root.to_vec());
        // One statement each way, conditional on the state checked: the row is the lock.
        let changed = match old {
            None => {
                c.execute(
                    "INSERT INTO witness_logs(origin, size, root) VALUES ($1, $2, $3) ON CONFLICT (origin) DO NOTHING",
                    &[&origin, &size, &root],
                )
                .await
                .map_err(DbError::from)?
            }
            Some(old) => {
                c.execute(
                    "UPDATE witness_logs SET size = $2, root = $3, updated_at = now() WHERE origin = $1 AND size = $4 AND root = $5",
                    &[&origin, &size, &root, &as_i64(old.size)?, &old.root.to_vec()],
                )
                .await
                .map_err(DbError::from)?
            }
        };
        match changed {
            1 => Ok(Advanced::Done),
            _ => Ok(Advanced::Moved(self.latest(origin).await?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sqlite_state_moves_only_from_the_state_it_was_checked_against() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("witness.sqlite")).unwrap();
        let (a, b) = (TreeHead { size: 5, root: [1; 32] }, TreeHead { size: 9, root: [2; 32] });
        assert_eq!(store.latest("o").await.unwrap(), None);
        assert_eq!(store.advance("o", None, a).await.unwrap(), Advanced::Done);
        assert_eq!(store.advance("o", None, b).await.unwrap(), Advanced::Moved(Some(a)));
        assert_eq!(store.advance("o", Some(TreeHead { size: 5, root: [3; 32] }), b).await.unwrap(), Advanced::Moved(Some(a)));
        assert_eq!(store.advance("o", Some(a), b).await.unwrap(), Advanced::Done);
        drop(store);
        let reopened = SqliteStore::open(&dir.path().join("witness.sqlite")).unwrap();
        assert_eq!(reopened.latest("o").await.unwrap(), Some(b));
    }
}
