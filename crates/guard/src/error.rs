//! What the guard's store (tokens and bans, on SQLite or PostgreSQL) can fail with.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("guard store {path}: {source}")]
    Sqlite { path: String, source: rusqlite::Error },
    #[error("guard store {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("guard store {path}: {what}")]
    Corrupt { path: String, what: String },
    #[error("a token named {0:?} already exists; pick another --name or revoke it first")]
    NameTaken(String),
    #[error("no token named or with id {0:?}")]
    NoSuchToken(String),
    #[error("token {0:?} is revoked; create a new one instead")]
    Revoked(String),
    #[error("{0}")]
    Config(String),
    #[error("guard store on PostgreSQL: {0}")]
    Postgres(String),
}

impl From<signet_db::sqlite::SqliteError> for StoreError {
    fn from(e: signet_db::sqlite::SqliteError) -> StoreError {
        StoreError::Sqlite { path: e.path, source: e.source }
    }
}

impl From<signet_db::DbError> for StoreError {
    fn from(e: signet_db::DbError) -> StoreError {
        StoreError::Postgres(e.to_string())
    }
}
