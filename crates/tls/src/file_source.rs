//! The `file` certificate source: a PEM chain and a PEM key on disk, re-read on a timer.
//!
//! Every interval both files are read again (through any symlinks, the way Kubernetes swaps
//! a `..data` link in a mounted secret) and compared with what was read last time. Comparing
//! contents rather than mtimes or inodes catches every kind of replacement, in place, by
//! rename or by a symlink swap, and costs two small reads. When the contents changed, the new
//! pair is checked and installed; if the check fails (a half-written file, a key that does
//! not match yet) the old certificate keeps serving and the reason is logged once. A key and
//! certificate written one after the other are thus picked up on the tick that sees both.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::acceptor::Acceptor;
use crate::certified::{CertError, CertifiedPair};

/// The default time between two reads of the files.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// A certificate chain file and its key file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl FileSource {
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> FileSource {
        FileSource { cert: cert.into(), key: key.into() }
    }

    /// Reads and checks the pair now; logs a warning if the certificate is expired.
    pub fn load(&self) -> Result<CertifiedPair, CertError> {
        let pair = CertifiedPair::from_files(&self.cert, &self.key)?;
        if let Some(warning) = pair.validity_warning(SystemTime::now()) {
            tracing::warn!("{warning}");
        }
        Ok(pair)
    }

    /// Re-reads the files every `interval` and installs changed pairs into `acceptor`, until
    /// the returned [`Reloader`] is dropped. Must be called inside a tokio runtime.
    pub fn watch(&self, acceptor: Acceptor, interval: Duration) -> Reloader {
        let mut watch = Watch { source: self.clone(), acceptor, seen: contents(&self.cert, &self.key).ok(), last_error: None };
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let (cert, key) = (watch.source.cert.clone(), watch.source.key.clone());
                let read = tokio::task::spawn_blocking(move || contents(&cert, &key)).await;
                if let Ok(read) = read {
                    watch.consider(read);
                }
            }
        });
        Reloader { task }
    }
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

type Contents = (Vec<u8>, Vec<u8>);

struct Watch {
    source: FileSource,
    acceptor: Acceptor,
    /// What the files held at the last successful read, installed or not.
    seen: Option<Contents>,
    /// The last failure logged, so that a persisting problem is logged once, not every tick.
    last_error: Option<String>,
}

impl Watch {
    fn consider(&mut self, read: Result<Contents, CertError>) {
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
                self.last_error = None;
                match pair.validity_warning(SystemTime::now()) {
                    Some(warning) => tracing::warn!("reloaded, but: {warning}"),
                    None => tracing::info!("reloaded TLS certificate {}", pair.origin()),
                }
            }
            Err(e) => {
                let why = e.to_string();
                if self.last_error.as_ref() != Some(&why) {
                    tracing::warn!("TLS certificate reload failed, still serving the previous certificate: {why}");
                    self.last_error = Some(why);
                }
            }
        }
    }
}

fn contents(cert: &Path, key: &Path) -> Result<Contents, CertError> {
    let read = |what, path: &Path| {
        std::fs::read(path).map_err(|source| CertError::Read { what, path: path.display().to_string(), source })
    };
    Ok((read("certificate", cert)?, read("key", key)?))
}
