//! Which log a shard belongs to ([`Kind`]): its names, storage namespaces and key files, and
//! shard 0's tree ID (its public key: [`super::keys::zero_spki`]).

use signet_log::storage::LogId;
use signet_log::storage::Storage;
use signet_log::storage::StorageError;
use std::path::Path;
use std::path::PathBuf;

/// A log that rotates into shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RekorV1,
    RekorV2,
    Ct,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::RekorV1, Kind::RekorV2, Kind::Ct];

    /// `--log` of `signet admin log rotate`; `None` names no log ([`super::error::ShardError::UnknownLog`]).
    pub fn parse(name: &str) -> Option<Kind> {
        match name {
            "rekor-v1" => Some(Kind::RekorV1),
            "rekor-v2" => Some(Kind::RekorV2),
            "ct" => Some(Kind::Ct),
            _ => None,
        }
    }

    pub fn cli_name(self) -> &'static str {
        match self {
            Kind::RekorV1 => "rekor-v1",
            Kind::RekorV2 => "rekor-v2",
            Kind::Ct => "ct",
        }
    }

    /// The registry's name (storage meta keys) and the public list's. Never rename: on disk.
    pub fn registry_name(self) -> &'static str {
        match self {
            Kind::RekorV1 => "rekor_v1",
            Kind::RekorV2 => "rekor_v2",
            Kind::Ct => "ct",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Kind::RekorV1 => "Rekor v1",
            Kind::RekorV2 => "Rekor v2",
            Kind::Ct => "CT",
        }
    }

    /// Storage namespace of shard 0 (the log as it was before any rotation), and the range
    /// of the later shards'. Never renumber: they are on disk.
    fn namespaces(self) -> (LogId, LogId, LogId) {
        match self {
            Kind::RekorV1 => (1, 16, 127),
            Kind::Ct => (3, 128, 191),
            Kind::RekorV2 => (2, 192, 255),
        }
    }

    pub fn zero_log(self) -> LogId {
        self.namespaces().0
    }

    /// How many shards it has room for.
    pub(crate) fn room(self) -> u32 {
        let (_, first, last) = self.namespaces();
        u32::from(last - first) + 2
    }

    /// Shard 0's key, `keys/<name>.pem`, unless the config points elsewhere.
    pub fn zero_key_path(self, data_dir: &Path) -> PathBuf {
        data_dir.join("keys").join(format!("{}.pem", self.cli_name()))
    }

    /// Shard 0's public key, `keys/<name>.pub.pem`, written at every start: what the trust
    /// documents name, wherever the private key is (a file elsewhere, a token).
    pub fn zero_public_path(self, data_dir: &Path) -> PathBuf {
        data_dir.join("keys").join(format!("{}.pub.pem", self.cli_name()))
    }
}

/// The registry's name for the Rekor v1 log.
pub const KIND: &str = "rekor_v1";
/// Storage namespace of Rekor v1 shard 0.
pub const SHARD_ZERO_LOG: LogId = 1;
/// The file beside the keys that lists every shard's public key and validity.
pub(crate) const PUBLIC_FILE: &str = "log-shards.json";

/// Shard `number`'s storage namespace, if there can be such a shard.
pub fn log_id(kind: Kind, number: u32) -> Option<LogId> {
    let (zero, first, last) = kind.namespaces();
    match number {
        0 => Some(zero),
        n => u8::try_from(n - 1).ok().and_then(|k| first.checked_add(k)).filter(|&id| id <= last),
    }
}

/// Where shard `number`'s key lives, for shards after 0 (shard 0's is the configured key).
pub fn key_path(kind: Kind, data_dir: &Path, number: u32) -> PathBuf {
    data_dir.join("keys").join(format!("{}.shard-{number}.pem", kind.cli_name()))
}

/// Shard 0's tree ID: made once, with the log.
pub fn tree_id_zero(storage: &dyn Storage) -> Result<i64, StorageError> {
    let fresh = (rand::random::<u64>() >> 1).max(1) as i64;
    let stored = storage.get_or_init_meta("rekor_v1.tree_id", &fresh.to_be_bytes())?;
    Ok(i64::from_be_bytes(
        stored.as_slice().try_into().map_err(|_| StorageError::Corrupt("rekor_v1.tree_id is not 8 bytes".into()))?,
    ))
}

/// Unix seconds now (0 before 1970); the time shard windows, backups and restores record.
pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}
