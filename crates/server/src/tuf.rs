//! The instance's TUF repository (`<data dir>/tuf`, keys in `<data dir>/keys/tuf-*.pem`):
//! made at the first start, its targets published again whenever the trust documents
//! change (a new public URL, a rotated shard), its snapshot and timestamp signed again
//! before they expire, and served from memory at `/tuf/`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use signet_trust::root::Instance;
use signet_trust::tuf::{Expiry, Files, Published, Repository, RoleKeys, TufError, SIGNING_CONFIG_TARGET, TRUSTED_ROOT_TARGET};

pub struct Tuf {
    repo: Repository,
    keys_dir: std::path::PathBuf,
    expiry: Expiry,
    files: arc_swap::ArcSwap<Files>,
    /// One change at a time: the timer and a shard rotation may both want to sign.
    signing: tokio::sync::Mutex<()>,
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

impl Tuf {
    /// Opens the repository, making it (and its keys) on the first start, and publishes
    /// `instance`'s documents if they changed. Without the targets key (kept offline), stale
    /// targets are logged and served as they are: clients keep what they verified last.
    pub async fn open(data_dir: &Path, expiry: Expiry, instance: &Instance) -> Result<Tuf, TufError> {
        let repo = Repository::at(repo_dir(data_dir));
        let keys_dir = data_dir.join("keys");
        let now = jiff::Timestamp::now();
        if !repo.exists() {
            let keys = RoleKeys::generate_missing(&keys_dir)?;
            repo.create(&keys, &expiry, &documents(instance), now).await?;
            tracing::info!(dir = %repo.dir().display(), "TUF repository created; its root is /tuf/1.root.json (move keys/tuf-root.pem offline)");
        }
        let tuf = Tuf { files: arc_swap::ArcSwap::from_pointee(Files::load(repo.dir())?), repo, keys_dir, expiry, signing: Default::default() };
        tuf.publish(instance).await;
        tuf.refresh().await;
        Ok(tuf)
    }

    pub fn file(&self, name: &str) -> Option<Bytes> {
        self.files.load().get(name)
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
    pub async fn publish(&self, instance: &Instance) {
        let _one = self.signing.lock().await;
        let result = match RoleKeys::load(&self.keys_dir) {
            Ok(keys) => self.repo.publish(&keys, &self.expiry, &documents(instance), jiff::Timestamp::now()).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(Published::Unchanged) => {}
            Ok(Published::Targets(version)) => {
                tracing::info!(version, "TUF targets published: the trust documents changed");
                self.reload();
            }
            Err(e) => tracing::error!(
                error = %e,
                "the trust documents changed but their TUF targets could not be signed here; clients see the previous ones until \
                 `signet tuf sign` signs them where the targets key is and they are copied into the repository"
            ),
        }
    }

    /// Takes up targets signed offline (`signet tuf sign`, copied into the repository), then
    /// signs again whatever is past half its validity.
    pub async fn refresh(&self) {
        let _one = self.signing.lock().await;
        let keys = match RoleKeys::load(&self.keys_dir) {
            Ok(keys) => keys,
            Err(e) => return tracing::error!(error = %e, "the TUF keys could not be read; the metadata expires if this goes on"),
        };
        match self.repo.adopt(&keys, &self.expiry, jiff::Timestamp::now()).await {
            Ok(None) => {}
            Ok(Some(version)) => {
                tracing::info!(version, "TUF targets signed offline are published");
                self.reload();
            }
            Err(e) => tracing::error!(error = %e, "TUF targets copied into the repository were not published"),
        }
        match self.repo.refresh(&keys, &self.expiry, jiff::Timestamp::now()).await {
            Ok(roles) if roles.is_empty() => {}
            Ok(roles) => {
                let roles: Vec<_> = roles.iter().map(|r| r.name()).collect();
                tracing::info!(roles = ?roles, "TUF metadata signed again before it expires");
                self.reload();
            }
            Err(e) => tracing::error!(error = %e, "TUF metadata is due to be signed again and could not be; it expires if this goes on"),
        }
    }

    pub fn check_every(&self) -> Duration {
        check_every(&self.expiry)
    }
}

/// How often [`run`] looks: an eighth of the timestamp's validity, from 1 s to 10 min, so a
/// due timestamp is signed again long before it expires.
pub fn check_every(expiry: &Expiry) -> Duration {
    (expiry.timestamp / 8).clamp(Duration::from_secs(1), Duration::from_secs(600))
}

/// Keeps the metadata fresh while the server runs.
pub async fn run(tuf: Arc<Tuf>) {
    let every = tuf.check_every();
    loop {
        tokio::time::sleep(every).await;
        tuf.refresh().await;
    }
}
