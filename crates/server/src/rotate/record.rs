//! What a rotation leaves on disk: the record of each authority's rotations (`rotations.json`,
//! its retired certificates and windows, the one scheduled next), read and written under the
//! manifest's lock; and the times those windows are written in.

use std::path::{Path, PathBuf};

use der::Decode;
use serde::{Deserialize, Serialize};
use signet_core::{files, pem};

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
    pub fn key_source(&self, data_dir: &Path) -> Result<Option<signet_keys::KeySource>, String> {
        self.key.as_deref().map(|k| key_source(data_dir, k)).transpose()
    }
}

/// A recorded key: a URI, or a path relative to the data dir.
pub(crate) fn key_source(data_dir: &Path, recorded: &str) -> Result<signet_keys::KeySource, String> {
    match recorded.parse::<signet_keys::KeySource>().map_err(|e| format!("{}: {e}", manifest_path(data_dir).display()))? {
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
pub fn read(data_dir: &Path) -> Result<Rotations, String> {
    let path = manifest_path(data_dir);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Rotations::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Unix seconds of an RFC 3339 time, as `ca/rotations.json` records them.
pub(crate) fn unix(rfc3339: &str) -> Result<i64, String> {
    rfc3339.parse::<jiff::Timestamp>().map(|t| t.as_second()).map_err(|e| format!("{rfc3339}: not an RFC 3339 time: {e}"))
}

/// RFC 3339, whole seconds.
pub(crate) fn rfc3339(unix: i64) -> String {
    jiff::Timestamp::from_second(unix).map_or_else(|_| "1970-01-01T00:00:00Z".into(), |t| t.to_string())
}

pub(crate) fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A DER certificate from a PEM file.
pub(crate) fn read_der(p: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(pem::decode_first(&bytes).map_err(|e| format!("{}: {e}", p.display()))?.der)
}

/// Serialises changes to `ca/rotations.json` between `signet trust rotate` and a running
/// server, which both rewrite it: an exclusive `flock` on `ca/rotations.lock`, waited for.
pub(crate) struct ManifestLock {
    _file: std::fs::File,
}

impl ManifestLock {
    pub(crate) fn take(data_dir: &Path) -> Result<ManifestLock, String> {
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
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!("{}: {}", path.display(), std::io::Error::last_os_error()));
        }
        Ok(ManifestLock { _file: file })
    }
}

/// Writes `ca/rotations.json`.
pub(crate) fn write(data_dir: &Path, rotations: &Rotations) -> Result<(), String> {
    let manifest = serde_json::to_vec_pretty(rotations).map_err(|e| e.to_string())?;
    files::write_atomic(&manifest_path(data_dir), &manifest, 0o600).map_err(|e| format!("{}: {e}", manifest_path(data_dir).display()))
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
    pub fn from_unix(&self) -> Result<i64, String> {
        unix(&self.from)
    }
}

/// Where a scheduled rotation keeps the new certificate and (a file) key until it is due.
pub(super) fn next_files(authority: Authority) -> (String, String) {
    let key_stem = authority.files().1.trim_end_matches(".pem");
    (format!("next/{}.pem", authority.name()), format!("keys/{key_stem}.next.pem"))
}

pub(super) fn write_cert(data_dir: &Path, name: &str, der: &[u8]) -> Result<(), String> {
    let path = data_dir.join("ca").join(name);
    if let Some(dir) = path.parent() {
        files::ensure_private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    files::write_atomic(&path, pem::encode("CERTIFICATE", der).as_bytes(), 0o644).map_err(|e| format!("{}: {e}", path.display()))
}

/// When the instance's trust starts: its root certificate's notBefore (RFC 3339).
pub fn instance_valid_from(root_der: &[u8]) -> Result<String, String> {
    Ok(datetime_rfc3339(x509_cert::Certificate::from_der(root_der).map_err(|e| format!("ca/root.pem: {e}"))?.tbs_certificate.validity.not_before.to_date_time()))
}

pub(crate) fn datetime_rfc3339(t: der::DateTime) -> String {
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", t.year(), t.month(), t.day(), t.hour(), t.minutes(), t.seconds())
}
