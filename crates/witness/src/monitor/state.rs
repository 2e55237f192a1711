//! What the monitor remembers of each log between runs, one JSON file per log in the state
//! directory, replaced atomically (temp file, fsync, rename, fsync of the directory): a
//! crash leaves the old state or the new one, never half of each.
//!
//! A restart resumes where the last run stopped: from the last verified checkpoint, and
//! within it from the last entry read (with the tree's compact range up to there).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use signet_core::hash::{sha256, Hash};

use super::range::Range;

/// Why the state of a log cannot be read or kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    #[error("state dir {}: {source}", path.display())]
    Dir { path: PathBuf, source: std::io::Error },
    /// The file could not be read or written.
    #[error("state file {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("state file {}: {source}", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error(transparent)]
    Serialize(serde_json::Error),
    #[error("state file: range holds a hash that is not 32 bytes of hex")]
    RangeHash,
    #[error("state file: range does not fit its size")]
    RangeSize,
    #[error("state file: root is not 32 bytes of hex")]
    Root,
    #[error("state file: {read} entries read, more than the checkpoint's {size}")]
    AheadOfCheckpoint { read: u64, size: u64 },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogState {
    pub url: String,
    /// The origin line of the first checkpoint seen; a log never changes it.
    pub origin: Option<String>,
    /// The newest checkpoint verified (signature, and consistency with the one before).
    pub checkpoint: Option<Seen>,
    /// Entries read: the compact range of leaves `0..range_size`.
    pub range_size: u64,
    pub range: Vec<String>,
    /// Set once the log was caught misbehaving (a fork, an inconsistent or misleading
    /// checkpoint): the monitor stops following it, since nothing it serves can be believed
    /// any more, and keeps alerting on the evidence until an operator looks.
    pub broken: Option<String>,
    /// SHA-256 of the last bad checkpoint alerted on, so one bad note alerts once.
    pub last_bad: Option<String>,
    /// SHA-256 (hex) of the SubjectPublicKeyInfo of the key that signed `checkpoint`: a
    /// checkpoint by another trusted key is a new tree (a shard rotation).
    #[serde(default)]
    pub key: Option<String>,
    /// The trees the log rotated away from: each one's key and its last checkpoint seen.
    #[serde(default)]
    pub retired: Vec<Retired>,
}

/// A tree the log left for a new one: it never grows again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Retired {
    pub key: String,
    pub origin: Option<String>,
    pub checkpoint: Option<Seen>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Seen {
    pub size: u64,
    pub root: String,
    pub note: String,
}

impl LogState {
    pub fn range(&self) -> Result<Range, StateError> {
        let peaks = self
            .range
            .iter()
            .map(|h| hex::decode(h).ok().and_then(|b| <Hash>::try_from(b).ok()))
            .collect::<Option<Vec<Hash>>>()
            .ok_or(StateError::RangeHash)?;
        Range::from_parts(self.range_size, peaks).ok_or(StateError::RangeSize)
    }

    pub fn set_range(&mut self, range: &Range) {
        self.range_size = range.size();
        self.range = range.peaks().iter().map(hex::encode).collect();
    }
}

/// The state directory.
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn open(dir: &Path) -> Result<Store, StateError> {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Dir { path: dir.to_path_buf(), source })?;
        Ok(Store { dir: dir.to_path_buf() })
    }

    /// One file per log, named after its URL (readable, plus a hash so that no two URLs collide).
    fn path(&self, url: &str) -> PathBuf {
        let readable: String = url
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' })
            .take(80)
            .collect();
        self.dir.join(format!("{readable}-{}.json", &hex::encode(sha256(url.as_bytes()))[..12]))
    }

    pub fn load(&self, url: &str) -> Result<LogState, StateError> {
        let path = self.path(url);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| StateError::Parse { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LogState { url: url.to_string(), ..LogState::default() }),
            Err(source) => Err(StateError::Io { path, source }),
        }
    }

    pub fn save(&self, state: &LogState) -> Result<(), StateError> {
        let path = self.path(&state.url);
        let bytes = serde_json::to_vec_pretty(state).map_err(StateError::Serialize)?;
        signet_core::files::write_atomic(&path, &bytes, 0o644).map_err(|source| StateError::Io { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_a_missing_file_is_a_fresh_log() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let fresh = store.load("http://127.0.0.1:1/api/v2").unwrap();
        assert_eq!((fresh.range_size, fresh.checkpoint.as_ref()), (0, None));
        let mut range = Range::default();
        for i in 0u8..5 {
            range.push([i; 32]);
        }
        let mut s = fresh.clone();
        s.set_range(&range);
        s.checkpoint = Some(Seen { size: 5, root: hex::encode(range.root()), note: "n".into() });
        store.save(&s).unwrap();
        let back = store.load("http://127.0.0.1:1/api/v2").unwrap();
        assert_eq!(back.range().unwrap(), range);
        assert_eq!(back.checkpoint, s.checkpoint);
        assert!(store.load("http://127.0.0.1:2/api/v2").unwrap().checkpoint.is_none());
    }
}
