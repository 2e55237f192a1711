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
use signet_log::storage::PostgresStorage;
use signet_trust::root::Instance;
use signet_trust::tuf::{Expiry, Files, Published, Repository, TufError, SIGNING_CONFIG_TARGET, TRUSTED_ROOT_TARGET};

mod shared;

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
