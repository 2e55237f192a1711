//! The `file` certificate source: a PEM chain and a PEM key on disk (and, for mTLS, a
//! client-CA bundle), re-read on a timer.
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
use crate::client_auth::{ClientAuth, ClientAuthMode};

/// The default time between two reads of the files.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// A certificate chain file and its key file, and, for mTLS, a client-CA bundle file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Re-read like the pair; a changed bundle is verified against from the next handshake.
    pub client_ca: Option<(PathBuf, ClientAuthMode)>,
}

impl FileSource {
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> FileSource {
        FileSource { cert: cert.into(), key: key.into(), client_ca: None }
    }

    /// The same, asking clients for certificates issued by the CAs in `bundle`.
    pub fn with_client_ca(self, bundle: impl Into<PathBuf>, mode: ClientAuthMode) -> FileSource {
        FileSource { client_ca: Some((bundle.into(), mode)), ..self }
    }

    /// Reads and checks the client-CA bundle now, if there is one.
    pub fn load_client_auth(&self) -> Result<Option<ClientAuth>, CertError> {
        self.client_ca.as_ref().map(|(path, mode)| ClientAuth::from_file(*mode, path)).transpose()
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
        let seen_ca = self.client_ca.as_ref().and_then(|(path, _)| std::fs::read(path).ok());
        let mut watch = Watch { source: self.clone(), acceptor, seen: contents(&self.cert, &self.key).ok(), last_error: None, seen_ca, last_ca_error: None };
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let (cert, key, ca) = (watch.source.cert.clone(), watch.source.key.clone(), watch.source.client_ca.clone());
                let read = tokio::task::spawn_blocking(move || {
                    let ca = ca.map(|(path, _)| std::fs::read(&path).map_err(|source| CertError::Read { what: "client CA bundle", path: path.display().to_string(), source }));
                    (contents(&cert, &key), ca)
                })
                .await;
                if let Ok((read, ca)) = read {
                    watch.consider(read);
                    if let Some(ca) = ca {
                        watch.consider_client_ca(ca);
                    }
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
    /// The same for the client-CA bundle.
    seen_ca: Option<Vec<u8>>,
    last_ca_error: Option<String>,
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

fn contents(cert: &Path, key: &Path) -> Result<Contents, CertError> {
    let read = |what, path: &Path| {
        std::fs::read(path).map_err(|source| CertError::Read { what, path: path.display().to_string(), source })
    };
    Ok((read("certificate", cert)?, read("key", key)?))
}
