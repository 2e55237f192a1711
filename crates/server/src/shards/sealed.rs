//! A new shard's key, handed from the instance that rotates to every other instance of the
//! database, sealed.
//!
//! On PostgreSQL any instance may rotate a log online, and every instance must then sign with
//! the new shard's key (any of them may be the sequencer tomorrow). The key travels through
//! the database, sealed with AES-256-GCM under `keys/shard-seal.key`, a key that every data
//! dir of the database holds: made with the first instance's data dir, and copied with the
//! rest of `keys/` when `signet backup` makes the next one. So the database alone (a dump, a
//! replica, its operator) never holds a usable shard key, and an instance never needs a
//! file copied by hand after a rotation.
//!
//! Each sealed key is bound to its record's name (log and shard number) as associated data:
//! a sealed key moved to another shard's record does not open.

use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use serde_json::{json, Value};
use signet_core::{b64, files, hash, pem};

const FILE: &str = "shard-seal.key";
const LABEL: &str = "SIGNET SHARD SEAL KEY";
/// The storage meta key that records which seal key the database's instances share.
pub const SHARED_ID: &str = "shard_seal.key_id";

/// What reading the seal key, or sealing and opening a shard key with it, fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    #[error("the system's random source failed")]
    Random,
    #[error("making {}: {source}", .path.display())]
    MakeDir { path: PathBuf, source: std::io::Error },
    #[error("reading {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("writing {}: {source}", .path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{} is not a shard seal key: {source}", .path.display())]
    NotPem { path: PathBuf, source: pem::PemError },
    #[error("{} is not a shard seal key: expected a SIGNET SHARD SEAL KEY block of 32 bytes", .path.display())]
    NotASealKey { path: PathBuf },
    #[error("an AES-256 key is 32 bytes")]
    KeySize,
    #[error("sealing failed")]
    Sealing,
    #[error("the sealed key {name} in storage is unusable: {why}")]
    Unusable { name: String, #[source] why: Unusable },
    #[error("{name} is sealed with shard seal key {by}, but this data dir's keys/shard-seal.key is {ours}: copy keys/shard-seal.key from an instance of this database")]
    OtherSealKey { name: String, by: String, ours: String },
}

/// What is wrong with a sealed key's record in storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unusable {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("nonce is not 12 bytes of base64")]
    Nonce,
    #[error("sealed is not base64")]
    NotBase64,
    #[error("it does not open with this data dir's seal key (altered, or sealed for another record)")]
    DoesNotOpen,
}

/// The key that seals shard keys in the database.
pub struct SealKey {
    key: LessSafeKey,
    id: String,
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealKey({})", self.id)
    }
}

/// `keys/shard-seal.key` of a data dir.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("keys").join(FILE)
}

impl SealKey {
    /// The data dir's seal key, made (0600) if it has none.
    pub fn load_or_make(data_dir: &Path) -> Result<SealKey, SealError> {
        if let Some(key) = Self::load(data_dir)? {
            return Ok(key);
        }
        let mut bytes = [0u8; 32];
        SystemRandom::new().fill(&mut bytes).map_err(|_| SealError::Random)?;
        let file = path(data_dir);
        if let Some(dir) = file.parent() {
            files::ensure_private_dir(dir).map_err(|source| SealError::MakeDir { path: dir.to_path_buf(), source })?;
        }
        files::write_atomic(&file, pem::encode(LABEL, &bytes).as_bytes(), 0o600).map_err(|source| SealError::Write { path: file.clone(), source })?;
        Self::from_bytes(&bytes)
    }

    /// The data dir's seal key, if it has one.
    pub fn load(data_dir: &Path) -> Result<Option<SealKey>, SealError> {
        let file = path(data_dir);
        let text = match std::fs::read(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(SealError::Read { path: file, source }),
        };
        let block = pem::decode_first(&text).map_err(|source| SealError::NotPem { path: file.clone(), source })?;
        if block.label != LABEL || block.der.len() != 32 {
            return Err(SealError::NotASealKey { path: file });
        }
        Self::from_bytes(&block.der).map(Some)
    }

    fn from_bytes(bytes: &[u8]) -> Result<SealKey, SealError> {
        let key = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| SealError::KeySize)?;
        // A name for the key that reveals nothing of it: the first 8 bytes of a hash of it,
        // under a label of its own.
        let mut named = b"signet shard seal key id\0".to_vec();
        named.extend_from_slice(bytes);
        let id = hex::encode(&hash::sha256(&named)[..8]);
        Ok(SealKey { key: LessSafeKey::new(key), id })
    }

    /// What the database and the errors call this key.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Seals `secret` for the record `name`: the JSON value to store.
    pub fn seal(&self, name: &str, secret: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| SealError::Random)?;
        let mut sealed = secret.to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(name.as_bytes()), &mut sealed)
            .map_err(|_| SealError::Sealing)?;
        Ok(json!({"seal_key": self.id, "nonce": b64::encode(nonce), "sealed": b64::encode(&sealed)}).to_string().into_bytes())
    }

    /// Opens what [`SealKey::seal`] made for the record `name`.
    pub fn open(&self, name: &str, record: &[u8]) -> Result<Vec<u8>, SealError> {
        let bad = |why: Unusable| SealError::Unusable { name: name.to_string(), why };
        let v: Value = serde_json::from_slice(record).map_err(|e| bad(e.into()))?;
        let field = |f: &'static str| v.get(f).and_then(Value::as_str).ok_or_else(|| bad(Unusable::Missing(f)));
        let by = field("seal_key")?;
        if by != self.id {
            return Err(SealError::OtherSealKey { name: name.to_string(), by: by.to_string(), ours: self.id.clone() });
        }
        let nonce: [u8; NONCE_LEN] =
            b64::decode(field("nonce")?).ok().and_then(|n| n.try_into().ok()).ok_or_else(|| bad(Unusable::Nonce))?;
        let mut sealed = b64::decode(field("sealed")?).map_err(|_| bad(Unusable::NotBase64))?;
        let opened = self
            .key
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(name.as_bytes()), &mut sealed)
            .map_err(|_| bad(Unusable::DoesNotOpen))?;
        Ok(opened.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_key_opens_only_with_its_seal_key_and_for_its_record() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let key = SealKey::load_or_make(a.path()).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path(a.path())).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        // Loaded again, the same key: the same id, and it opens what it sealed.
        let again = SealKey::load(a.path()).unwrap().unwrap();
        assert_eq!(again.id(), key.id());
        let record = key.seal("rekor_v1.shard.1.key", b"secret pkcs8").unwrap();
        assert_eq!(again.open("rekor_v1.shard.1.key", &record).unwrap(), b"secret pkcs8");
        assert!(!String::from_utf8_lossy(&record).contains("secret"));

        // Another data dir's key is named, and refused.
        let other = SealKey::load_or_make(b.path()).unwrap();
        assert_ne!(other.id(), key.id());
        let e = other.open("rekor_v1.shard.1.key", &record).unwrap_err().to_string();
        assert!(e.contains(key.id()) && e.contains(other.id()) && e.contains("copy keys/shard-seal.key"), "{e}");

        // Bound to its record: moved to another shard's, it does not open.
        assert!(key.open("rekor_v1.shard.2.key", &record).unwrap_err().to_string().contains("does not open"));
        // Altered, it does not open.
        let mut v: Value = serde_json::from_slice(&record).unwrap();
        let mut sealed = b64::decode(v["sealed"].as_str().unwrap()).unwrap();
        sealed[0] ^= 1;
        v["sealed"] = json!(b64::encode(&sealed));
        assert!(key.open("rekor_v1.shard.1.key", v.to_string().as_bytes()).unwrap_err().to_string().contains("does not open"));
        assert!(key.open("rekor_v1.shard.1.key", b"{").unwrap_err().to_string().contains("unusable"));

        std::fs::write(path(b.path()), "not a key").unwrap();
        assert!(SealKey::load(b.path()).unwrap_err().to_string().contains("is not a shard seal key"));
    }
}
