//! What a rotation leaves on disk: the record of each authority's rotations (`rotations.json`,
//! its retired certificates and windows, the one scheduled next), read and written under the
//! manifest's lock; and the times those windows are written in.

use std::path::{Path, PathBuf};

use der::Decode;
use serde::{Deserialize, Serialize};
use signet_core::{files, pem};

/// What reading and writing the rotation record, and the certificates beside it, fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", .path.display())]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{}: {source}", .path.display())]
    Pem { path: PathBuf, source: pem::PemError },
    /// A key recorded in `ca/rotations.json` (`path`).
    #[error("{}: {source}", .path.display())]
    KeySource { path: PathBuf, source: signet_keys::SourceError },
    #[error("{given}: not an RFC 3339 time: {source}")]
    Time { given: String, source: jiff::Error },
    /// Encoding a record (a bug).
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    #[error("ca/root.pem: {0}")]
    Root(#[source] der::Error),
}

/// `ca/rotations.json`: each rotated authority's retired certificates and its current start.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rotations {
    #[serde(default)]
    pub tsa: Option<Rotated>,
    /// The CA's intermediate, which signs leaf certificates.
    #[serde(default)]
    pub intermediate: Option<Rotated>,
}

/// An authority whose key `signet trust rotate` can replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    Tsa,
    Intermediate,
}

impl Authority {
    pub const ALL: [Authority; 2] = [Authority::Tsa, Authority::Intermediate];

    pub fn name(self) -> &'static str {
        match self {
            Authority::Tsa => "tsa",
            Authority::Intermediate => "intermediate",
        }
    }

    /// As a sentence names it.
    pub fn title(self) -> &'static str {
        match self {
            Authority::Tsa => "timestamp authority",
            Authority::Intermediate => "CA intermediate",
        }
    }

    /// Its certificate under `ca/`, and its key under `keys/`.
    pub fn files(self) -> (&'static str, &'static str) {
        match self {
            Authority::Tsa => ("tsa.pem", "tsa.pem"),
            Authority::Intermediate => ("intermediate.pem", "ca-intermediate.pem"),
        }
    }

    pub fn record(self, rotations: &mut Rotations) -> &mut Option<Rotated> {
        match self {
            Authority::Tsa => &mut rotations.tsa,
            Authority::Intermediate => &mut rotations.intermediate,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rotated {
    /// When the current certificate started to sign (RFC 3339).
    pub current_from: String,
    /// Oldest first.
    pub retired: Vec<Retired>,
    /// The current key, as a rotation made it: a path under the data dir, or a token's or
    /// KMS key's URI. It wins over the config's `[keys]` entry, which named the one before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A rotation scheduled for later ([`scheduled`]): published now, signing from its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Next>,
}

impl Rotated {
    /// Before an authority's first rotation: its key since `from`.
    pub fn starting(from: String) -> Rotated {
        Rotated { current_from: from, retired: Vec::new(), key: None, next: None }
    }

    /// The current key's source, when a rotation chose it ([`Rotated::key`]).
    pub fn key_source(&self, data_dir: &Path) -> Result<Option<signet_keys::KeySource>, RecordError> {
        self.key.as_deref().map(|k| key_source(data_dir, k)).transpose()
    }
}

/// A recorded key: a URI, or a path relative to the data dir.
pub(crate) fn key_source(data_dir: &Path, recorded: &str) -> Result<signet_keys::KeySource, RecordError> {
    match recorded.parse::<signet_keys::KeySource>().map_err(|source| RecordError::KeySource { path: manifest_path(data_dir), source })? {
        signet_keys::KeySource::File(p) if p.is_relative() => Ok(signet_keys::KeySource::File(data_dir.join(p))),
        other => Ok(other),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Retired {
    /// Under `ca/`.
    pub cert: String,
    pub valid_from: String,
    pub valid_to: String,
}

pub fn manifest_path(data_dir: &Path) -> PathBuf {
    data_dir.join("ca").join("rotations.json")
}

/// The rotations so far (none when the file is absent).
pub fn read(data_dir: &Path) -> Result<Rotations, RecordError> {
    let path = manifest_path(data_dir);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| RecordError::Json { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Rotations::default()),
        Err(source) => Err(RecordError::Io { path, source }),
    }
}

/// Unix seconds of an RFC 3339 time, as `ca/rotations.json` records them.
pub(crate) fn unix(rfc3339: &str) -> Result<i64, RecordError> {
    rfc3339.parse::<jiff::Timestamp>().map(|t| t.as_second()).map_err(|source| RecordError::Time { given: rfc3339.to_string(), source })
}

/// RFC 3339, whole seconds.
pub(crate) fn rfc3339(unix: i64) -> String {
    jiff::Timestamp::from_second(unix).map_or_else(|_| "1970-01-01T00:00:00Z".into(), |t| t.to_string())
}

pub(crate) fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A DER certificate from a PEM file.
pub(crate) fn read_der(p: &Path) -> Result<Vec<u8>, RecordError> {
    let bytes = std::fs::read(p).map_err(|source| RecordError::Io { path: p.to_path_buf(), source })?;
    Ok(pem::decode_first(&bytes).map_err(|source| RecordError::Pem { path: p.to_path_buf(), source })?.der)
}

/// Serialises changes to `ca/rotations.json` between `signet trust rotate` and a running
/// server, which both rewrite it: an exclusive `flock` on `ca/rotations.lock`, waited for.
pub(crate) struct ManifestLock {
    _file: std::fs::File,
}

impl ManifestLock {
    pub(crate) fn take(data_dir: &Path) -> Result<ManifestLock, RecordError> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let path = data_dir.join("ca").join("rotations.lock");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|source| RecordError::Io { path: path.clone(), source })?;
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(RecordError::Io { path, source: std::io::Error::last_os_error() });
        }
        Ok(ManifestLock { _file: file })
    }
}

/// Writes `ca/rotations.json`.
pub(crate) fn write(data_dir: &Path, rotations: &Rotations) -> Result<(), RecordError> {
    let manifest = serde_json::to_vec_pretty(rotations)?;
    files::write_atomic(&manifest_path(data_dir), &manifest, 0o600).map_err(|source| RecordError::Io { path: manifest_path(data_dir), source })
}

/// A rotation published ahead of the second it starts to sign.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Next {
    /// The new certificate, under `ca/`.
    pub cert: String,
    /// The new key: a path under the data dir, or a token's or KMS key's URI.
    pub key: String,
    /// The first second it signs (RFC 3339).
    pub from: String,
    /// The end of the retired key's window (RFC 3339).
    pub old_to: String,
    /// When this instance published it (and, on PostgreSQL, handed it to the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
}

impl Next {
    pub fn from_unix(&self) -> Result<i64, RecordError> {
        unix(&self.from)
    }
}

/// Where a scheduled rotation keeps the new certificate and (a file) key until it is due.
pub(super) fn next_files(authority: Authority) -> (String, String) {
    let key_stem = authority.files().1.trim_end_matches(".pem");
    (format!("next/{}.pem", authority.name()), format!("keys/{key_stem}.next.pem"))
}

pub(super) fn write_cert(data_dir: &Path, name: &str, der: &[u8]) -> Result<(), RecordError> {
    let path = data_dir.join("ca").join(name);
    if let Some(dir) = path.parent() {
        files::ensure_private_dir(dir).map_err(|source| RecordError::Io { path: dir.to_path_buf(), source })?;
    }
    files::write_atomic(&path, pem::encode("CERTIFICATE", der).as_bytes(), 0o644).map_err(|source| RecordError::Io { path, source })
}

/// When the instance's trust starts: its root certificate's notBefore (RFC 3339).
pub fn instance_valid_from(root_der: &[u8]) -> Result<String, RecordError> {
    Ok(datetime_rfc3339(x509_cert::Certificate::from_der(root_der).map_err(RecordError::Root)?.tbs_certificate.validity.not_before.to_date_time()))
}

pub(crate) fn datetime_rfc3339(t: der::DateTime) -> String {
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", t.year(), t.month(), t.day(), t.hour(), t.minutes(), t.seconds())
}
