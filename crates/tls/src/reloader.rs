//! The `file` and `watch` certificate sources: the files ([`FileSource`]) re-read on a timer, or
//! at once when inotify sees them change, and a changed pair installed into the acceptor.
//!
//! Every interval both files are read again (through any symlinks, the way Kubernetes swaps
//! a `..data` link in a mounted secret) and compared with what was read last time. Comparing
//! contents rather than mtimes or inodes catches every kind of replacement, in place, by
//! rename or by a symlink swap, and costs two small reads. When the contents changed, the new
//! pair is checked and installed; if the check fails (a half-written file, a key that does
//! not match yet) the old certificate keeps serving and the reason is logged once. A key and
//! certificate written one after the other are thus picked up on the tick that sees both.
//!
//! The `watch` source ([`Trigger::Watch`]) reads the same way, but at once: inotify watches the
//! files' directories (the one named, and the one a symlink resolves to), so a `..data` swap,
//! a rename or an in-place write is read within milliseconds; the timer stays as a fallback for
//! file systems that send no events (NFS, some FUSE mounts).
//!
//! The per-handshake sources (`reload`, `cached`, [`crate::per_handshake`]) read the pair
//! themselves; for them only the client-CA bundle is re-read here ([`FileSource::watch_client_ca`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::acceptor::Acceptor;
use crate::certified::{CertError, CertifiedPair};
use crate::client_auth::ClientAuth;
use crate::file_source::{contents, Contents, FileSource};
use crate::source::{count, Trigger, LOADS, VALIDATION_ERRORS};

/// The default time between two reads of the files.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// A change seen settles this long before the files are read: a writer that replaces the
/// certificate and then the key is read once, with both.
const SETTLE: Duration = Duration::from_millis(25);

/// Reloads since the process started: installed, and refused by the check (the previous
/// certificate kept serving). Read by `/metrics`.
pub fn reloads() -> (u64, u64) {
    (RELOADS_OK.load(Ordering::Relaxed), RELOADS_INVALID.load(Ordering::Relaxed))
}

/// Seconds from the newest file's modification to the install of the last reload, if any.
pub fn last_reload_lag_seconds() -> Option<f64> {
    match LAST_LAG_MICROS.load(Ordering::Relaxed) {
        u64::MAX => None,
        micros => Some(micros as f64 / 1e6),
    }
}

static RELOADS_OK: AtomicU64 = AtomicU64::new(0);
static RELOADS_INVALID: AtomicU64 = AtomicU64::new(0);
static LAST_LAG_MICROS: AtomicU64 = AtomicU64::new(u64::MAX);

impl FileSource {
    /// Re-reads the files every `interval`, and with [`Trigger::Watch`] also whenever their
    /// directories change, installing changed pairs into `acceptor` until the returned
    /// [`Reloader`] is dropped. Must be called inside a tokio runtime.
    pub fn watch(&self, acceptor: Acceptor, interval: Duration, trigger: Trigger) -> Reloader {
        self.spawn_reader(acceptor, interval, trigger, true)
    }

    /// Re-reads only the client-CA bundle every `interval`, for an acceptor that looks its
    /// certificate up at each handshake ([`Acceptor::per_handshake`]). None without a bundle.
    pub fn watch_client_ca(&self, acceptor: Acceptor, interval: Duration) -> Option<Reloader> {
        self.client_ca.as_ref().map(|_| self.spawn_reader(acceptor, interval, Trigger::Timer, false))
    }

    fn spawn_reader(&self, acceptor: Acceptor, interval: Duration, trigger: Trigger, pairs: bool) -> Reloader {
        let seen_ca = self.client_ca.as_ref().and_then(|(path, _)| std::fs::read(path).ok());
        let seen = if pairs { contents(&self.cert, &self.key).ok() } else { None };
        let mut watch = Watch { source: self.clone(), acceptor, pairs, seen, last_error: None, seen_ca, last_ca_error: None };
        let changed = Arc::new(tokio::sync::Notify::new());
        let mut notifier = match trigger {
            Trigger::Timer => None,
            Trigger::Watch => match Notifier::new(changed.clone(), self.files()) {
                Ok(n) => Some(n),
                Err(e) => {
                    tracing::warn!("cannot watch the TLS files for changes ({e}); they are re-read every {interval:?} instead");
                    None
                }
            },
        };
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    _ = changed.notified() => tokio::time::sleep(SETTLE).await,
                }
                let (cert, key, ca, pairs) = (watch.source.cert.clone(), watch.source.key.clone(), watch.source.client_ca.clone(), watch.pairs);
                let read = tokio::task::spawn_blocking(move || {
                    let ca = ca.map(|(path, _)| std::fs::read(&path).map_err(|source| CertError::Read { what: "client CA bundle", path: path.display().to_string(), source }));
                    let pair = pairs.then(|| (contents(&cert, &key), newest_change(&[&cert, &key])));
                    (pair, ca)
                })
                .await;
                if let Ok((pair, ca)) = read {
                    if let Some((read, modified)) = pair {
                        count(&LOADS);
                        watch.consider(read, modified);
                    }
                    if let Some(ca) = ca {
                        watch.consider_client_ca(ca);
                    }
                }
                // A `..data` swap moves the files to another directory: watch that one from now.
                if let Some(n) = notifier.as_mut() {
                    n.follow(watch.source.files());
                }
            }
        });
        Reloader { task }
    }
}

/// inotify watches on every directory that holds a file of the source, as named and as
/// resolved through symlinks; any event there but a read wakes the reloader.
struct Notifier {
    watcher: notify::RecommendedWatcher,
    dirs: Vec<PathBuf>,
}

impl Notifier {
    fn new(changed: Arc<tokio::sync::Notify>, files: Vec<PathBuf>) -> notify::Result<Notifier> {
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
                changed.notify_one();
            }
        })?;
        let mut notifier = Notifier { watcher, dirs: Vec::new() };
        for dir in directories(&files) {
            notifier.add(dir)?;
        }
        Ok(notifier)
    }

    fn add(&mut self, dir: PathBuf) -> notify::Result<()> {
        use notify::Watcher as _;
        self.watcher.watch(&dir, notify::RecursiveMode::NonRecursive)?;
        self.dirs.push(dir);
        Ok(())
    }

    /// Watches the directories the files resolve to now, and lets go of those they left.
    fn follow(&mut self, files: Vec<PathBuf>) {
        use notify::Watcher as _;
        let now = directories(&files);
        for gone in self.dirs.iter().filter(|d| !now.contains(d)) {
            let _ = self.watcher.unwatch(gone);
        }
        self.dirs.retain(|d| now.contains(d));
        for dir in now {
            if !self.dirs.contains(&dir) {
                if let Err(e) = self.add(dir.clone()) {
                    tracing::warn!("cannot watch {} for TLS file changes ({e}); the timer still re-reads it", dir.display());
                }
            }
        }
    }
}

/// The directories of `files`: each as named, and as resolved through symlinks.
fn directories(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for file in files {
        let named = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        let resolved = std::fs::canonicalize(file).ok().and_then(|f| f.parent().map(Path::to_path_buf));
        for dir in std::iter::once(named).chain(resolved) {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The newest modification time among `files` (through symlinks), for the reload lag.
fn newest_change(files: &[&Path]) -> Option<SystemTime> {
    files.iter().filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok()).max()
}

/// Keeps re-reading a [`FileSource`] while it lives.
pub struct Reloader {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Watch {
    source: FileSource,
    acceptor: Acceptor,
    /// Whether the pair is read here (`file`, `watch`), or only the client-CA bundle.
    pairs: bool,
    /// What the files held at the last successful read, installed or not.
    seen: Option<Contents>,
    /// The last failure logged, so that a persisting problem is logged once, not every tick.
    last_error: Option<String>,
    /// The same for the client-CA bundle.
    seen_ca: Option<Vec<u8>>,
    last_ca_error: Option<String>,
}

impl Watch {
    fn consider(&mut self, read: Result<Contents, CertError>, modified: Option<SystemTime>) {
        let outcome = read.and_then(|now| {
            if self.seen.as_ref() == Some(&now) {
                return Ok(None);
            }
            let checked = CertifiedPair::from_pem(&now.0, &now.1, &self.source.cert.display().to_string(), &self.source.key.display().to_string());
            self.seen = Some(now);
            let pair = checked?;
            self.acceptor.install(&pair)?;
            Ok(Some(pair))
        });
        match outcome {
            Ok(None) => {}
            Ok(Some(pair)) => {
                RELOADS_OK.fetch_add(1, Ordering::Relaxed);
                if let Some(lag) = modified.and_then(|m| SystemTime::now().duration_since(m).ok()) {
                    LAST_LAG_MICROS.store(u64::try_from(lag.as_micros()).unwrap_or(u64::MAX - 1), Ordering::Relaxed);
                }
                self.last_error = None;
                match pair.validity_warning(SystemTime::now()) {
                    Some(warning) => tracing::warn!("reloaded, but: {warning}"),
                    None => tracing::info!("reloaded TLS certificate {}", pair.origin()),
                }
            }
            Err(e) => {
                count(&VALIDATION_ERRORS);
                if !matches!(e, CertError::Read { .. }) {
                    RELOADS_INVALID.fetch_add(1, Ordering::Relaxed);
                }
                let why = e.to_string();
                if self.last_error.as_ref() != Some(&why) {
                    tracing::warn!("TLS certificate reload failed, still serving the previous certificate: {why}");
                    self.last_error = Some(why);
                }
            }
        }
    }
}

impl Watch {
    /// A changed client-CA bundle is checked and installed; a bad one keeps the last good one.
    fn consider_client_ca(&mut self, read: Result<Vec<u8>, CertError>) {
        let Some((path, mode)) = self.source.client_ca.clone() else { return };
        let outcome = read.and_then(|now| {
            if self.seen_ca.as_ref() == Some(&now) {
                return Ok(false);
            }
            let checked = ClientAuth::from_pem(mode, &now, &path.display().to_string());
            self.seen_ca = Some(now);
            self.acceptor.install_client_auth(&checked?)?;
            Ok(true)
        });
        match outcome {
            Ok(false) => {}
            Ok(true) => {
                self.last_ca_error = None;
                tracing::info!("reloaded the client CA bundle {}", path.display());
            }
            Err(e) => {
                let why = e.to_string();
                if self.last_ca_error.as_ref() != Some(&why) {
                    tracing::warn!("client CA bundle reload failed, still verifying against the previous one: {why}");
                    self.last_ca_error = Some(why);
                }
            }
        }
    }
}
