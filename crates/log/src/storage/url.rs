//! Which backend a `storage = "…"` setting (or `--storage`) names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{PostgresStorage, ShardRecords, SqliteStorage, Storage, StorageError};

/// Why a `storage` setting names no backend signet has. A URL in it has its password hidden.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    #[error("storage \"sqlite://\" names no file; expected sqlite://PATH")]
    NoFile,
    #[error("{0}; expected postgres://USER@HOST:PORT/DATABASE[?sslmode=require[&sslrootcert=PATH]]")]
    Postgres(#[source] signet_db::DbError),
    #[error("storage {0:?} is not supported; expected sqlite://PATH or postgres://USER@HOST:PORT/DATABASE")]
    Unsupported(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageUrl {
    /// `sqlite://PATH`, or the default `signet.sqlite` under the data dir.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`, as libpq spells it.
    Postgres(String),
}

impl StorageUrl {
    /// Parses a setting; `None` is the default under `data_dir`.
    pub fn parse(setting: Option<&str>, data_dir: &Path) -> Result<StorageUrl, UrlError> {
        let Some(url) = setting else {
            return Ok(StorageUrl::Sqlite(data_dir.join("signet.sqlite")));
        };
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(UrlError::NoFile);
            }
            return Ok(StorageUrl::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // Parsed now (TLS settings included), so that a bad URL is a configuration error.
            signet_db::pg::Target::parse(url).map_err(UrlError::Postgres)?;
            return Ok(StorageUrl::Postgres(url.to_string()));
        }
        Err(UrlError::Unsupported(signet_db::pg::redact(url)))
    }

    /// For messages: the URL without a password.
    pub fn display(&self) -> String {
        match self {
            StorageUrl::Sqlite(p) => format!("sqlite://{}", p.display()),
            StorageUrl::Postgres(u) => signet_db::pg::redact(u),
        }
    }
}

/// Opens the store `url` names, applying any migrations it lacks. Blocks (call it from a
/// blocking thread).
pub fn open(url: &StorageUrl) -> Result<Arc<dyn Storage>, StorageError> {
    Ok(match url {
        StorageUrl::Sqlite(path) => Arc::new(SqliteStorage::open(path)?),
        StorageUrl::Postgres(u) => Arc::new(PostgresStorage::open(u)?),
    })
}

/// The store's schema version and the newest this build knows, read without changing
/// anything; an error when it cannot be reached.
pub fn schema_version(url: &StorageUrl) -> Result<(i32, i32), StorageError> {
    match url {
        StorageUrl::Sqlite(path) => super::sqlite::schema_version(path),
        StorageUrl::Postgres(u) => super::postgres::schema_version(u),
    }
}

/// What the shard registries say, read without changing anything (`signet doctor`): every
/// `*.shard.*` record ([`crate::shards`]), and the logs whose trees storage holds frozen
/// (PostgreSQL's `checkpoints.frozen`; SQLite freezes nothing in storage). Empty for a store
/// not made yet.
pub fn shard_records(url: &StorageUrl) -> Result<ShardRecords, StorageError> {
    match url {
        StorageUrl::Sqlite(path) => super::sqlite::shard_records(path),
        StorageUrl::Postgres(u) => super::postgres::shard_records(u),
    }
}

/// Brings the store `url` names up to date and returns the schema versions that this applied,
/// in order (`signet migrate`). On PostgreSQL, `others` are the other crates' migrations
/// ([`signet_db::migrations`]), applied after the log's; a SQLite log file holds the log's
/// tables only.
pub fn migrate(url: &StorageUrl, others: &[&'static [signet_db::migrations::Migration]]) -> Result<Vec<i32>, StorageError> {
    Ok(match url {
        StorageUrl::Sqlite(path) => SqliteStorage::open(path)?.applied_migrations.clone(),
        StorageUrl::Postgres(u) => {
            let store = PostgresStorage::open(u)?;
            let mut applied = store.applied_migrations.clone();
            for set in others {
                applied.extend(store.apply(set)?);
            }
            applied.sort_unstable();
            applied
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_name_their_backend() {
        let dir = Path::new("/data");
        assert_eq!(StorageUrl::parse(None, dir).unwrap(), StorageUrl::Sqlite("/data/signet.sqlite".into()));
        assert_eq!(StorageUrl::parse(Some("sqlite:///x/y.db"), dir).unwrap(), StorageUrl::Sqlite("/x/y.db".into()));
        assert!(matches!(StorageUrl::parse(Some("postgres://u@127.0.0.1:5432/db"), dir), Ok(StorageUrl::Postgres(_))));
        let e = StorageUrl::parse(Some("mysql://u:pw@h/db"), dir).unwrap_err().to_string();
        assert!(e.contains("expected sqlite://PATH or postgres://") && !e.contains("pw"), "{e}");
        assert!(StorageUrl::parse(Some("sqlite://"), dir).is_err());
        assert!(StorageUrl::parse(Some("postgres://u@h:notaport/db"), dir).is_err());
    }
}
