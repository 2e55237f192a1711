//! The four role keys of the repository: Ed25519, PKCS#8 in PEM, mode 0600, beside the
//! instance's other keys as `tuf-<role>.pem`.
//!
//! Ed25519 because every TUF client signet serves (python-tuf, go-tuf, tough) verifies it,
//! and its keys print as plain hex in root.json. The snapshot and timestamp keys must stay
//! online (they are re-signed before expiry); the root and targets keys may leave the
//! machine once the repository exists.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::Ed25519KeyPair;
use tough::key_source::KeySource;
use tough::schema::key::Key;
use tough::sign::{parse_keypair, Sign};

use super::TufError;

/// A top-level TUF role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Root,
    Targets,
    Snapshot,
    Timestamp,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Root, Role::Targets, Role::Snapshot, Role::Timestamp];

    pub fn name(self) -> &'static str {
        match self {
            Role::Root => "root",
            Role::Targets => "targets",
            Role::Snapshot => "snapshot",
            Role::Timestamp => "timestamp",
        }
    }

    pub fn file_name(self) -> String {
        format!("tuf-{}.pem", self.name())
    }

    pub(crate) fn tough(self) -> tough::schema::RoleType {
        use tough::schema::RoleType;
        match self {
            Role::Root => RoleType::Root,
            Role::Targets => RoleType::Targets,
            Role::Snapshot => RoleType::Snapshot,
            Role::Timestamp => RoleType::Timestamp,
        }
    }
}

/// One role's private key, held in memory: what tough signs with. Its `Debug` names the
/// role only, so that no key reaches a log.
pub struct HeldKey {
    role: Role,
    pkcs8: Vec<u8>,
}

impl fmt::Debug for HeldKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HeldKey({})", self.role.name())
    }
}

#[tough::async_trait]
impl KeySource for HeldKey {
    async fn as_sign(&self) -> Result<Box<dyn Sign>, Box<dyn std::error::Error + Send + Sync + 'static>> {
        Ok(Box::new(parse_keypair(&self.pkcs8)?))
    }

    async fn write(&self, _value: &str, _key_id_hex: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync + 'static>> {
        Err("signet's TUF keys are written by signet only".into())
    }
}

impl HeldKey {
    fn parse(role: Role, pem: &[u8], path: &Path) -> Result<HeldKey, TufError> {
        let bad = |msg: String| TufError::Key { path: path.to_path_buf(), msg };
        let block = signet_core::pem::decode_first(pem).map_err(|e| bad(e.to_string()))?;
        if block.label != "PRIVATE KEY" {
            return Err(bad(format!("a PEM \"PRIVATE KEY\" (PKCS#8 Ed25519) was expected, not {:?}", block.label)));
        }
        Ed25519KeyPair::from_pkcs8(&block.der).map_err(|e| bad(format!("not an Ed25519 PKCS#8 key: {e}")))?;
        Ok(HeldKey { role, pkcs8: block.der })
    }

    /// A new key for `role`, in memory, and its PEM (to be written where it will live).
    pub fn generate(role: Role) -> Result<(HeldKey, String), TufError> {
        let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).map_err(|e| TufError::Tough(format!("generating an Ed25519 key: {e}")))?;
        let pem = signet_core::pem::encode("PRIVATE KEY", doc.as_ref());
        Ok((HeldKey { role, pkcs8: doc.as_ref().to_vec() }, pem))
    }

    /// Its key id, hex, as root.json names it.
    pub fn key_id_hex(&self) -> Result<String, TufError> {
        let id = self.public()?.key_id().map_err(|e| TufError::Tough(e.to_string()))?;
        Ok(hex::encode(id.as_ref()))
    }

    /// Reads the key of `role` from `path`.
    pub fn read(role: Role, path: &Path) -> Result<HeldKey, TufError> {
        let pem = std::fs::read(path).map_err(|source| TufError::Io { path: path.to_path_buf(), source })?;
        HeldKey::parse(role, &pem, path)
    }

    /// The key as root.json lists it.
    pub fn public(&self) -> Result<Key, TufError> {
        let pair = parse_keypair(&self.pkcs8).map_err(|e| TufError::Tough(e.to_string()))?;
        Ok(pair.tuf_key())
    }
}

/// The role keys found in a keys dir; a role whose file is absent (kept offline) is missing.
#[derive(Default, Clone)]
pub struct RoleKeys {
    dir: PathBuf,
    held: HashMap<Role, std::sync::Arc<HeldKey>>,
}

impl RoleKeys {
    pub fn path(dir: &Path, role: Role) -> PathBuf {
        dir.join(role.file_name())
    }

    /// Reads whichever role keys `dir` holds.
    pub fn load(dir: &Path) -> Result<RoleKeys, TufError> {
        let mut held = HashMap::new();
        for role in Role::ALL {
            let path = Self::path(dir, role);
            match std::fs::read(&path) {
                Ok(pem) => {
                    held.insert(role, std::sync::Arc::new(HeldKey::parse(role, &pem, &path)?));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(TufError::Io { path, source }),
            }
        }
        Ok(RoleKeys { dir: dir.to_path_buf(), held })
    }

    /// Makes a key for each role that has none (mode 0600), for a new repository.
    pub fn generate_missing(dir: &Path) -> Result<RoleKeys, TufError> {
        signet_core::files::ensure_private_dir(dir).map_err(|source| TufError::Io { path: dir.to_path_buf(), source })?;
        let rng = SystemRandom::new();
        for role in Role::ALL {
            let path = Self::path(dir, role);
            if path.exists() {
                continue;
            }
            let doc = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|e| TufError::Tough(format!("generating an Ed25519 key: {e}")))?;
            let pem = signet_core::pem::encode("PRIVATE KEY", doc.as_ref());
            signet_core::files::write_atomic(&path, pem.as_bytes(), 0o600).map_err(|source| TufError::Io { path, source })?;
        }
        Self::load(dir)
    }

    /// These keys, with `role`'s read from `path` (a key kept offline, brought back).
    pub fn with_file(self, role: Role, path: &Path) -> Result<RoleKeys, TufError> {
        let pem = std::fs::read(path).map_err(|source| TufError::Io { path: path.to_path_buf(), source })?;
        Ok(self.with(HeldKey::parse(role, &pem, path)?))
    }

    /// These keys, with `key` for its role in place of the one held.
    pub fn with(mut self, key: HeldKey) -> RoleKeys {
        self.held.insert(key.role, std::sync::Arc::new(key));
        self
    }

    pub fn get(&self, role: Role) -> Option<&HeldKey> {
        self.held.get(&role).map(|k| k.as_ref())
    }

    /// The public key of `role`, as root.json lists it, or an error that says where the key
    /// was expected.
    pub fn public(&self, role: Role) -> Result<Key, TufError> {
        match self.held.get(&role) {
            Some(key) => key.public(),
            None => Err(TufError::MissingKey { role: role.name(), path: Self::path(&self.dir, role) }),
        }
    }

    /// The key of `role` as tough takes it, or an error that says where it was expected.
    pub(crate) fn source(&self, role: Role) -> Result<Box<dyn KeySource>, TufError> {
        match self.held.get(&role) {
            Some(key) => Ok(Box::new(Shared(key.clone()))),
            None => Err(TufError::MissingKey { role: role.name(), path: Self::path(&self.dir, role) }),
        }
    }
}

/// A held key shared into tough's `Box<dyn KeySource>`.
#[derive(Debug)]
struct Shared(std::sync::Arc<HeldKey>);

#[tough::async_trait]
impl KeySource for Shared {
    async fn as_sign(&self) -> Result<Box<dyn Sign>, Box<dyn std::error::Error + Send + Sync + 'static>> {
        self.0.as_sign().await
    }

    async fn write(&self, value: &str, key_id_hex: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync + 'static>> {
        self.0.write(value, key_id_hex).await
    }
}
