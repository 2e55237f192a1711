//! The instance's TUF repository (`<data dir>/tuf`, keys in `<data dir>/keys/tuf-*.pem`):
//! made at the first start, its targets published again whenever the trust documents
//! change (a new public URL, a rotated shard), its snapshot and timestamp signed again
//! before they expire, and served from memory at `/tuf/`.
//!
//! On PostgreSQL every instance of the database serves one repository, stored in it
//! ([`shared`]): only the sequencer-lease holder signs, and the others serve what it stored.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use signet_log::storage::{PostgresStorage, StorageError};
use signet_trust::root::Instance;
use signet_trust::tuf::{Expiry, Files, Published, Repository, TufError, SIGNING_CONFIG_TARGET, TRUSTED_ROOT_TARGET};

mod shared;

use shared::Shared;

pub struct Tuf {
    repo: Repository,
    keys: signet_trust::tuf::keys::KeyPlaces,
    expiry: Expiry,
    files: arc_swap::ArcSwap<Files>,
    /// One change at a time: the timer and a shard rotation may both want to sign.
    signing: tokio::sync::Mutex<()>,
    /// The documents last handed to [`Tuf::publish`]: what this instance publishes when it
    /// becomes the sequencer.
    documents: parking_lot::Mutex<Vec<(&'static str, Vec<u8>)>>,
    /// The repository in the database, on PostgreSQL.
    shared: Option<shared::Shared>,
}

/// The targets' bytes: the same documents `signet trust export` writes.
pub fn documents(instance: &Instance) -> Vec<(&'static str, Vec<u8>)> {
    [(TRUSTED_ROOT_TARGET, instance.trusted_root()), (SIGNING_CONFIG_TARGET, instance.signing_config())]
        .into_iter()
        .map(|(name, doc)| {
            let mut bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
            bytes.push(b'\n');
            (name, bytes)
        })
        .collect()
}

pub fn repo_dir(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("tuf")
}

/// What a signing round does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    /// Publish the documents if they changed, then refresh.
    Publish,
    /// Adopt targets signed offline, and sign again what is due.
    Refresh,
}

impl Tuf {
    /// Opens the repository, making it (and its keys) on the first start, and publishes
    /// `instance`'s documents if they changed. Without the targets key (kept offline), stale
    /// targets are logged and served as they are: clients keep what they verified last.
    ///
    /// With `pg`, the repository is the database's: this instance signs only while it holds
    /// the sequencer lease, and otherwise serves what the holder stored.
    pub async fn open(
        data_dir: &Path,
        keys: signet_trust::tuf::keys::KeyPlaces,
        expiry: Expiry,
        instance: &Instance,
        pg: Option<Arc<PostgresStorage>>,
    ) -> Result<Tuf, TufError> {
        let repo = Repository::at(repo_dir(data_dir));
        let shared = pg.map(shared::Shared::new);
        if shared.is_none() && !repo.exists() {
            let made = keys.generate_missing()?;
            repo.create(&made, &expiry, &documents(instance), jiff::Timestamp::now()).await?;
            tracing::info!(dir = %repo.dir().display(), "TUF repository created; its root is /tuf/1.root.json (move keys/tuf-root.pem offline)");
        }
        let files = match shared {
            None => Files::load(repo.dir())?,
            Some(_) => Files::default(),
        };
        let tuf = Tuf {
            files: arc_swap::ArcSwap::from_pointee(files),
            repo,
            keys,
            expiry,
            signing: Default::default(),
            documents: parking_lot::Mutex::new(documents(instance)),
            shared,
        };
        match &tuf.shared {
            None => {
                tuf.publish(instance).await;
                tuf.refresh().await;
            }
            Some(s) => {
                tuf.follow().await;
                if s.holds_lease() {
                    tuf.lead(s, Work::Publish).await;
                } else if tuf.files.load().is_empty() {
                    tracing::info!("the TUF repository is not in the database yet: the instance holding the sequencer lease publishes it; /tuf/ answers 503 until then");
                }
            }
        }
        Ok(tuf)
    }

    pub fn file(&self, name: &str) -> Option<Bytes> {
        self.files.load().get(name)
    }

    /// False until there is a repository to serve (a follower on a new database waits for
    /// the sequencer's).
    pub fn published(&self) -> bool {
        !self.files.load().is_empty()
    }

    pub fn repository(&self) -> &Repository {
        &self.repo
    }

    /// After what a ceremony staged is served: `signet tuf publish --wait` returns on this.
    fn forget_adopted(&self) {
        if let Err(e) = self.repo.forget_adopted() {
            tracing::warn!(error = %e, "removing the staged TUF metadata that is now published failed; it is removed at the next round");
        }
    }

    fn reload(&self) {
        match Files::load(self.repo.dir()) {
            Ok(files) => self.files.store(Arc::new(files)),
            Err(e) => tracing::error!(error = %e, "reading the TUF repository back failed; the previous files are served"),
        }
    }

    /// Publishes `instance`'s documents as new targets if they differ from the current ones.
    /// On PostgreSQL, only while this instance holds the sequencer lease; otherwise the
    /// documents are kept for when it does.
    pub async fn publish(&self, instance: &Instance) {
        *self.documents.lock() = documents(instance);
        let _one = self.signing.lock().await;
        match &self.shared {
            None => {
                if self.sign_publish().await {
                    self.reload();
                }
            }
            Some(s) if s.holds_lease() => {
                self.lead(s, Work::Publish).await;
            }
            Some(_) => tracing::debug!("the trust documents changed; the sequencer publishes TUF targets, not this instance"),
        }
    }

    /// Takes up targets signed offline (`signet tuf sign`, copied into the repository), then
    /// signs again whatever is past half its validity.
    pub async fn refresh(&self) {
        let _one = self.signing.lock().await;
        match &self.shared {
            None => {
                if self.sign_refresh().await {
                    self.reload();
                    self.forget_adopted();
                }
            }
            Some(s) if s.holds_lease() => {
                self.lead(s, Work::Refresh).await;
            }
            Some(_) => {}
        }
    }

    /// Signs the current documents as targets if they changed; true if anything was written.
    async fn sign_publish(&self) -> bool {
        let documents = self.documents.lock().clone();
        let result = match self.keys.load() {
            Ok(keys) => self.repo.publish(&keys, &self.expiry, &documents, jiff::Timestamp::now()).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(Published::Unchanged) => false,
            Ok(Published::Targets(version)) => {
                tracing::info!(version, "TUF targets published: the trust documents changed");
                true
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    "the trust documents changed but their TUF targets could not be signed here; clients see the previous ones until \
                     targets holding them are signed where the targets keys are (`signet tuf sign`, or a ceremony: `signet tuf propose \
                     targets`) and brought to the repository"
                );
                false
            }
        }
    }

    /// Adopts targets signed offline and signs again what is due; true if anything was written.
    async fn sign_refresh(&self) -> bool {
        let keys = match self.keys.load() {
            Ok(keys) => keys,
            Err(e) => {
                tracing::error!(error = %e, "the TUF keys could not be read; the metadata expires if this goes on");
                return false;
            }
        };
        let mut changed = false;
        match self.repo.adopt_staged(&keys, &self.expiry, jiff::Timestamp::now()).await {
            Ok(names) if names.is_empty() => {}
            Ok(names) => {
                tracing::info!(adopted = ?names, "TUF metadata signed in a ceremony is published");
                changed = true;
            }
            Err(e) => tracing::error!(error = %e, "TUF metadata staged for publication was not published"),
        }
        match self.repo.adopt(&keys, &self.expiry, jiff::Timestamp::now()).await {
            Ok(None) => {}
            Ok(Some(version)) => {
                tracing::info!(version, "TUF targets signed offline are published");
                changed = true;
            }
            Err(e) => tracing::error!(error = %e, "TUF targets copied into the repository were not published"),
        }
        match self.repo.refresh(&keys, &self.expiry, jiff::Timestamp::now()).await {
            Ok(roles) if roles.is_empty() => {}
            Ok(roles) => {
                let roles: Vec<_> = roles.iter().map(|r| r.name()).collect();
                tracing::info!(roles = ?roles, "TUF metadata signed again before it expires");
                changed = true;
            }
            Err(e) => tracing::error!(error = %e, "TUF metadata is due to be signed again and could not be; it expires if this goes on"),
        }
        changed
    }

    pub fn check_every(&self) -> Duration {
        check_every(&self.expiry)
    }
}

/// How often [`run`] looks for metadata that `signet tuf publish` staged (one directory read).
const STAGED_POLL: Duration = Duration::from_secs(2);

/// What `signet tuf publish` staged, as last seen. Staged metadata is taken up within seconds,
/// not at the next check; what stays staged (a key missing here) is tried again only when it
/// changes, not at every poll.
#[derive(Default)]
struct Staged(Vec<(String, std::time::SystemTime)>);

impl Staged {
    /// True when something is staged that was not at the last call that returned true.
    fn changed(&mut self, repo: &Repository) -> bool {
        let now = repo.staged_stamp();
        if now.is_empty() || now == self.0 {
            return false;
        }
        self.0 = now;
        true
    }
}

/// How often [`run`] looks: an eighth of the timestamp's validity, from 1 s to 10 min, so a
/// due timestamp is signed again long before it expires.
pub fn check_every(expiry: &Expiry) -> Duration {
    (expiry.timestamp / 8).clamp(Duration::from_secs(1), Duration::from_secs(600))
}

/// Keeps the metadata fresh while the server runs; on PostgreSQL, also follows the
/// database's repository, and takes over signing when this instance takes the lease.
pub async fn run(tuf: Arc<Tuf>) {
    let every = tuf.check_every();
    let Some(s) = &tuf.shared else {
        let mut next = tokio::time::Instant::now() + every;
        let mut staged = Staged::default();
        loop {
            tokio::time::sleep(STAGED_POLL.min(every)).await;
            if staged.changed(&tuf.repo) || tokio::time::Instant::now() >= next {
                tuf.refresh().await;
                next = tokio::time::Instant::now() + every;
            }
        }
    };
    // Whether this instance published its documents as the holder, and when it signs next.
    let mut announced = s.led();
    let mut next = tokio::time::Instant::now() + every;
    let mut staged = Staged::default();
    loop {
        tokio::time::sleep(shared::POLL_EVERY).await;
        if !s.holds_lease() {
            tuf.follow().await;
            continue;
        }
        if s.led() && !staged.changed(&tuf.repo) && tokio::time::Instant::now() < next {
            continue;
        }
        if !announced {
            tracing::info!("this instance holds the sequencer lease: it signs the shared TUF repository from now on");
            announced = true;
        }
        let _one = tuf.signing.lock().await;
        let done = tuf.lead(s, if s.led() { Work::Refresh } else { Work::Publish }).await;
        // A database that failed is tried again at the next poll; anything else at the next check.
        next = tokio::time::Instant::now() + if done { every } else { Duration::ZERO };
    }
}

// On PostgreSQL: follow the shared repository, or sign it as the lease holder.
impl Tuf {
    fn shared(&self) -> Option<&Shared> {
        self.shared.as_ref()
    }

    /// Serves what the database holds, once it changed, and keeps the directory a copy of it
    /// (for `signet tuf status`, `trust export` and `/metrics`).
    async fn follow(&self) {
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
    async fn lead(&self, s: &Shared, work: Work) -> bool {
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
                self.forget_adopted();
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
