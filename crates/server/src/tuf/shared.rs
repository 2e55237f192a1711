//! One TUF repository for every instance on a PostgreSQL database.
//!
//! The published files live in the database (`PostgresStorage::write_tuf_files`). Every
//! instance serves them from memory and polls their generation. Only the sequencer-lease
//! holder signs: it brings its directory up to date from the database, signs there as a
//! single instance does, and stores what changed in one transaction fenced by its lease's
//! epoch. So every instance serves the same bytes, versions go on from what was published
//! whoever published it, and a stale holder stores nothing.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use signet_log::storage::{PostgresStorage, StorageError, TufFile};
use signet_trust::tuf::Files;

/// How often an instance that does not sign looks for a new generation (one row read).
pub(super) const POLL_EVERY: Duration = Duration::from_secs(1);

/// What reading the database's TUF repository fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PullError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("the database's TUF repository: {0}")]
    Files(#[source] signet_trust::tuf::TufError),
}

pub(super) struct Shared {
    pg: Arc<PostgresStorage>,
    /// The database's repository as last read or written here: its generation and files.
    table: parking_lot::Mutex<(i64, Arc<Files>)>,
    /// The last problem logged, so that one that persists is logged once, not every round.
    complaint: parking_lot::Mutex<Option<String>>,
    /// Whether this instance, as the lease holder, has had a signing round with its own
    /// documents (later rounds only refresh).
    pub(super) led: std::sync::atomic::AtomicBool,
}

impl Shared {
    pub(super) fn new(pg: Arc<PostgresStorage>) -> Shared {
        Shared { pg, table: parking_lot::Mutex::new((0, Arc::default())), complaint: Default::default(), led: Default::default() }
    }

    pub(super) fn led(&self) -> bool {
        self.led.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(super) fn holds_lease(&self) -> bool {
        self.pg.held_lease().is_some()
    }

    pub(super) fn table(&self) -> (i64, Arc<Files>) {
        self.table.lock().clone()
    }

    /// Reads what was stored since the last read, if anything was; the files as they now are.
    pub(super) async fn pull(&self) -> Result<Option<Arc<Files>>, PullError> {
        let (held, files) = self.table();
        if self.pg.tuf_generation().await? == held {
            return Ok(None);
        }
        let (generation, changed) = self.pg.tuf_files_since(held).await?;
        let mut files = (*files).clone();
        for f in changed {
            files.insert(&f.name, Bytes::from(f.bytes)).map_err(PullError::Files)?;
        }
        let files = Arc::new(files);
        *self.table.lock() = (generation, files.clone());
        Ok(Some(files))
    }

    /// Stores `files` as the next generation; the repository as now published.
    pub(super) async fn store(&self, files: Vec<(String, Bytes)>) -> Result<Arc<Files>, StorageError> {
        let (held, table) = self.table();
        let rows: Vec<TufFile> = files.iter().map(|(n, b)| TufFile { name: n.clone(), bytes: b.to_vec() }).collect();
        let generation = self.pg.write_tuf_files(held, &rows).await?;
        let mut now = (*table).clone();
        for (name, bytes) in files {
            now.insert(&name, bytes).map_err(|e| StorageError::Corrupt(e.to_string()))?;
        }
        let now = Arc::new(now);
        *self.table.lock() = (generation, now.clone());
        Ok(now)
    }

    pub(super) fn complain(&self, what: String) {
        let mut last = self.complaint.lock();
        if last.as_deref() != Some(what.as_str()) {
            tracing::error!("{what}");
            *last = Some(what);
        }
    }

    pub(super) fn settled(&self) {
        if self.complaint.lock().take().is_some() {
            tracing::info!("the shared TUF repository is signed and stored again");
        }
    }
}
