//! Where a chain is kept: `audit.sqlite` in the data dir, or its rows in PostgreSQL, shared
//! by the instances of one deployment, one chain each ([`super::postgres`]). Segments cut
//! from either are SQLite files in the data dir ([`super::segment`]): an archive is a file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::postgres::ChainDb;
use crate::store::StoreError;

#[derive(Clone)]
pub enum Place {
    Sqlite { data_dir: PathBuf },
    Postgres {
        data_dir: PathBuf,
        /// The storage URL, for the writer's own connection. Never shown: it may hold a password.
        url: String,
        db: Arc<ChainDb>,
    },
}

impl Place {
    pub fn sqlite(data_dir: &Path) -> Place {
        Place::Sqlite { data_dir: data_dir.to_path_buf() }
    }

    /// Connects to the chain named `chain` in the database at `url`.
    pub fn postgres(data_dir: &Path, url: &str, chain: &str) -> Result<Place, StoreError> {
        let db = ChainDb::open(url, chain)?;
        Ok(Place::Postgres { data_dir: data_dir.to_path_buf(), url: url.to_string(), db: Arc::new(db) })
    }

    /// Where segments are cut to (and where `audit.sqlite` is, on SQLite).
    pub fn data_dir(&self) -> &Path {
        match self {
            Place::Sqlite { data_dir } | Place::Postgres { data_dir, .. } => data_dir,
        }
    }

    /// The live log's file, on SQLite.
    pub fn file(&self) -> Option<PathBuf> {
        match self {
            Place::Sqlite { data_dir } => Some(data_dir.join(super::FILE)),
            Place::Postgres { .. } => None,
        }
    }

    /// For messages: the file, or the chain's name.
    pub fn describe(&self) -> String {
        match self {
            Place::Sqlite { data_dir } => data_dir.join(super::FILE).display().to_string(),
            Place::Postgres { db, .. } => format!("audit chain {:?} in PostgreSQL", db.chain()),
        }
    }
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}
