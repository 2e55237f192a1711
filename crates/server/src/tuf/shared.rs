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
use signet_trust::tuf::{Files, TufError};

use super::{Tuf, Work};

/// How often an instance that does not sign looks for a new generation (one row read).
pub(super) const POLL_EVERY: Duration = Duration::from_secs(1);

pub(super) struct Shared {
    pg: Arc<PostgresStorage>,
    /// The database's repository as last read or written here: its generation and files.
    table: parking_lot::Mutex<(i64, Arc<Files>)>,
    /// The last problem logged, so that one that persists is logged once, not every round.
    complaint: parking_lot::Mutex<Option<String>>,
    /// Whether this instance, as the lease holder, has had a signing round with its own
    /// documents (later rounds only refresh).
    led: std::sync::atomic::AtomicBool,
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

    fn table(&self) -> (i64, Arc<Files>) {
        self.table.lock().clone()
    }

    /// Reads what was stored since the last read, if anything was; the files as they now are.
    async fn pull(&self) -> Result<Option<Arc<Files>>, String> {
        let (held, files) = self.table();
        if self.pg.tuf_generation().await.map_err(|e| e.to_string())? == held {
            return Ok(None);
        }
        let (generation, changed) = self.pg.tuf_files_since(held).await.map_err(|e| e.to_string())?;
        let mut files = (*files).clone();
        for f in changed {
            files.insert(&f.name, Bytes::from(f.bytes)).map_err(|e| format!("the database's TUF repository: {e}"))?;
        }
        let files = Arc::new(files);
        *self.table.lock() = (generation, files.clone());
        Ok(Some(files))
    }

    /// Stores `files` as the next generation; the repository as now published.
    async fn store(&self, files: Vec<(String, Bytes)>) -> Result<Arc<Files>, StorageError> {
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

    fn complain(&self, what: String) {
        let mut last = self.complaint.lock();
        if last.as_deref() != Some(what.as_str()) {
            tracing::error!("{what}");
            *last = Some(what);
        }
    }

    fn settled(&self) {
        if self.complaint.lock().take().is_some() {
            tracing::info!("the shared TUF repository is signed and stored again");
        }
    }
}

impl Tuf {
    fn shared(&self) -> Option<&Shared> {
        self.shared.as_ref()
    }

    /// Serves what the database holds, once it changed, and keeps the directory a copy of it
    /// (for `signet tuf status`, `trust export` and `/metrics`).
    pub(super) async fn follow(&self) {
        let Some(s) = self.shared() else { return };
        let _one = self.signing.lock().await;
        let files = match s.pull().await {
            Ok(Some(files)) => files,
            Ok(None) => return,
            Err(e) => return tracing::warn!(error = %e, "reading the shared TUF repository failed; the previous files are served"),
        };
        let first = !self.published();
        self.files.store(files.clone());
        if first && !files.is_empty() {
            tracing::info!("the TUF repository the sequencer published is served at /tuf/");
        }
        if let Err(e) = self.repo.mirror(files.iter()) {
            tracing::warn!(error = %e, "copying the shared TUF repository into the data dir failed; /tuf/ serves it all the same");
        }
    }

    /// One signing round of the lease holder (the caller holds `signing`): brings the
    /// directory up to date, makes the repository if the database has none, signs, and stores
    /// what changed. False when it should be tried again soon (the database failed).
    pub(super) async fn lead(&self, s: &Shared, work: Work) -> bool {
        let done = self.lead_once(s, work).await;
        if done && work == Work::Publish {
            s.led.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        done
    }

    async fn lead_once(&self, s: &Shared, work: Work) -> bool {
        let table = match s.pull().await {
            Ok(_) => s.table().1,
            Err(e) => {
                s.complain(format!("reading the shared TUF repository before signing failed: {e}"));
                return false;
            }
        };
        self.files.store(table.clone());
        if let Err(e) = self.repo.mirror(table.iter()) {
            s.complain(format!("copying the shared TUF repository into {} failed: {e}", self.repo.dir().display()));
            return false;
        }
        if table.is_empty() {
            match self.start_repository(s).await {
                Ok(true) => {}
                Ok(false) => return false,
                Err(e) => {
                    s.complain(format!("making the shared TUF repository failed: {e}"));
                    return false;
                }
            }
        }
        match self.keys.load().and_then(|keys| self.repo.foreign_keys(&keys)) {
            Ok(foreign) if foreign.is_empty() => {}
            Ok(foreign) => {
                let names: Vec<_> = foreign.iter().map(|r| r.file_name()).collect();
                s.complain(format!(
                    "this instance holds the sequencer lease but its TUF keys ({}) are not the ones the published TUF root names: it \
                     signs nothing and serves the repository as published, which expires if this goes on; give every instance that may \
                     sequence the keys of the instance that made the repository (`signet backup` copies them)",
                    names.join(", ")
                ));
                return true;
            }
            Err(e) => {
                s.complain(format!("the TUF keys could not be checked against the published root: {e}"));
                return true;
            }
        }
        let before = match Files::load(self.repo.dir()) {
            Ok(f) => f,
            Err(e) => {
                s.complain(format!("reading the TUF repository's copy failed: {e}"));
                return false;
            }
        };
        let rotated = self.resign_unaccepted().await;
        let changed = match work {
            Work::Publish => self.sign_publish().await | self.sign_refresh().await,
            Work::Refresh => self.sign_refresh().await,
        } | rotated;
        if !changed {
            s.settled();
            return true;
        }
        let after = match self.changes(&before, &table) {
            Ok(a) => a,
            Err(e) => {
                s.complain(format!("reading back what was signed failed: {e}"));
                self.undo(&before, &table);
                return false;
            }
        };
        match s.store(after).await {
            Ok(published) => {
                self.files.store(published);
                s.settled();
                true
            }
            Err(e) => {
                // Undone, so that what was signed and never published is not mistaken later
                // for published (or for targets signed offline).
                self.undo(&before, &table);
                let soon = !matches!(e, StorageError::Fenced(_) | StorageError::Corrupt(_));
                s.complain(format!("the TUF metadata signed here could not be stored, so it is not published: {e}"));
                !soon
            }
        }
    }

    /// After `signet tuf rotate` here, the copy from the database holds metadata that the
    /// new root (only here) does not accept: signs it again. True if it did.
    async fn resign_unaccepted(&self) -> bool {
        let result = match self.keys.load() {
            Ok(keys) => self.repo.resign_unaccepted(&keys, &self.expiry, jiff::Timestamp::now()).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(None) => false,
            Ok(Some(role)) => {
                tracing::info!(role = role.name(), "TUF metadata signed again with the key the newest root names (a key rotation)");
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "TUF metadata the newest root does not accept could not be signed again");
                false
            }
        }
    }

    /// What a signing changed, to store: the files it wrote, and any file of the current
    /// state the database lacks (targets signed offline, just adopted).
    fn changes(&self, before: &Files, table: &Files) -> Result<Vec<(String, Bytes)>, TufError> {
        let after = Files::load(self.repo.dir())?;
        let mut out = after.changed_from(before);
        for name in self.repo.current_names()? {
            if let Some(bytes) = after.get(&name) {
                if table.get(&name).as_ref() != Some(&bytes) && !out.iter().any(|(n, _)| *n == name) {
                    out.push((name, bytes));
                }
            }
        }
        Ok(out)
    }

    /// Puts the directory back as `before`: the database's bytes where it has the file, and
    /// no file where it has none.
    fn undo(&self, before: &Files, table: &Files) {
        let Ok(after) = Files::load(self.repo.dir()) else { return };
        for (name, _) in after.changed_from(before) {
            let restored = match table.get(&name).or_else(|| before.get(&name)) {
                Some(bytes) => self.repo.mirror([(name.as_str(), &bytes)]).map(|_| ()),
                None => self.repo.forget(&name),
            };
            if let Err(e) = restored {
                tracing::warn!(error = %e, file = name, "undoing an unpublished TUF signing failed");
            }
        }
    }

    /// The database has no repository: this holder stores the one in its data dir (a copy
    /// of the first instance's, from `signet backup`), or makes one. True once stored.
    async fn start_repository(&self, s: &Shared) -> Result<bool, TufError> {
        if !self.repo.exists() {
            let keys = self.keys.generate_missing()?;
            let documents = self.documents.lock().clone();
            self.repo.create(&keys, &self.expiry, &documents, jiff::Timestamp::now()).await?;
            tracing::info!("TUF repository created; its root is /tuf/1.root.json (move keys/tuf-root.pem offline)");
        }
        let local = Files::load(self.repo.dir())?;
        let all: Vec<(String, Bytes)> = local.iter().map(|(n, b)| (n.to_string(), b.clone())).collect();
        match s.store(all).await {
            Ok(published) => {
                tracing::info!(files = published.len(), "the TUF repository is stored in the database: every instance serves it");
                self.files.store(published);
                Ok(true)
            }
            Err(e) => {
                s.complain(format!("storing the TUF repository in the database failed: {e}"));
                Ok(false)
            }
        }
    }
}
