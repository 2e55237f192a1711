//! The four role keys of the repository: Ed25519, each a PKCS#8 PEM file (mode 0600) beside
//! the instance's other keys as `tuf-<role>.pem`, or a key on a PKCS#11 token named in
//! `[keys] tuf_<role>` ([`KeyPlaces`]). Every signature goes through a [`Signer`].
//!
//! Ed25519 because every TUF client signet serves (python-tuf, go-tuf, tough) verifies it,
//! and its keys print as plain hex in root.json. The snapshot and timestamp keys must stay
//! online (they are re-signed before expiry); the root and targets keys may leave the
//! machine once the repository exists.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};

use signet_keys::{Algorithm, Pkcs11Settings, Signer};
use tough::key_source::KeySource;
use tough::schema::key::{Ed25519Key, Ed25519Scheme, Key};
use tough::sign::Sign;

use super::error::TufError;

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

/// One role's private key: what tough signs with. Its `Debug` names the role only, so that
/// no key reaches a log.
pub struct HeldKey {
    role: Role,
    key: Arc<Signer>,
}

impl fmt::Debug for HeldKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HeldKey({})", self.role.name())
    }
}

#[tough::async_trait]
impl KeySource for HeldKey {
    async fn as_sign(&self) -> Result<Box<dyn Sign>, Box<dyn std::error::Error + Send + Sync + 'static>> {
        Ok(Box::new(SignWith { public: tuf_key(&self.key)?, key: self.key.clone() }))
    }

    async fn write(&self, _value: &str, _key_id_hex: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync + 'static>> {
        Err("signet's TUF keys are written by signet only".into())
    }
}

/// A [`Signer`] as tough signs with it, with its public key as root.json lists it.
struct SignWith {
    key: Arc<Signer>,
    public: Key,
}

/// An Ed25519 public key (32 bytes) as root.json lists it.
pub fn ed25519_key(public: &[u8]) -> Key {
    Key::Ed25519 {
        keyval: Ed25519Key { public: public.to_vec().into(), _extra: HashMap::new() },
        scheme: Ed25519Scheme::Ed25519,
        _extra: HashMap::new(),
    }
}

/// The key as root.json lists it: Ed25519, its public key in hex.
pub fn tuf_key(key: &Signer) -> Result<Key, TufError> {
    let public = key.ed25519_public().ok_or_else(|| TufError::Tough(format!("a TUF key must be Ed25519, not {}", key.algorithm())))?;
    Ok(ed25519_key(&public))
}

#[tough::async_trait]
impl Sign for SignWith {
    fn tuf_key(&self) -> Key {
        self.public.clone()
    }

    async fn sign(&self, msg: &[u8], _rng: &(dyn aws_lc_rs::rand::SecureRandom + Sync)) -> Result<Vec<u8>, Box<dyn std::error::Error + Send + Sync + 'static>> {
        Ok(self.key.sign(msg)?)
    }
}

impl HeldKey {
    /// `key` for `role`; it must be Ed25519.
    pub fn new(role: Role, key: Arc<Signer>) -> Result<HeldKey, TufError> {
        tuf_key(&key)?;
        Ok(HeldKey { role, key })
    }

    fn parse(role: Role, pem: &[u8], path: &Path) -> Result<HeldKey, TufError> {
        let bad = |msg: String| TufError::Key { path: path.to_path_buf(), msg };
        let block = signet_core::pem::decode_first(pem).map_err(|e| bad(e.to_string()))?;
        if block.label != "PRIVATE KEY" {
            return Err(bad(format!("a PEM \"PRIVATE KEY\" (PKCS#8 Ed25519) was expected, not {:?}", block.label)));
        }
        let key = Signer::from_pkcs8(&block.der, &path.display().to_string(), &[Algorithm::Ed25519]).map_err(|e| bad(format!("not an Ed25519 PKCS#8 key: {e}")))?;
        Ok(HeldKey { role, key: Arc::new(key) })
    }

    /// A new key for `role`, in memory, and its PEM (to be written where it will live).
    pub fn generate(role: Role) -> Result<(HeldKey, String), TufError> {
        let der = signet_keys::file::generate_pkcs8(Algorithm::Ed25519).map_err(|e| TufError::Tough(format!("generating an Ed25519 key: {e}")))?;
        let pem = signet_core::pem::encode("PRIVATE KEY", &der);
        let key = Signer::from_pkcs8(&der, "<generated>", &[Algorithm::Ed25519]).map_err(|e| TufError::Tough(e.to_string()))?;
        Ok((HeldKey { role, key: Arc::new(key) }, pem))
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

    /// What signs for it (a ceremony signs with a held key too).
    pub fn signer(&self) -> &Signer {
        &self.key
    }

    /// The key as root.json lists it.
    pub fn public(&self) -> Result<Key, TufError> {
        tuf_key(&self.key)
    }
}

/// Where each role's key is: `[keys] tuf_<role>` when configured (a token's object, or a
/// file), else `tuf-<role>.pem` in the keys dir. A key on a token is opened once and kept:
/// the repository is signed again every few minutes, and each opening logs in anew.
#[derive(Debug, Default)]
pub struct KeyPlaces {
    pub dir: PathBuf,
    pub configured: Vec<(Role, signet_keys::KeySource)>,
    pub pkcs11: Pkcs11Settings,
    opened: Mutex<HashMap<Role, Arc<Signer>>>,
}

impl KeyPlaces {
    pub fn new(dir: PathBuf, configured: Vec<(Role, signet_keys::KeySource)>, pkcs11: Pkcs11Settings) -> KeyPlaces {
        KeyPlaces { dir, configured, pkcs11, opened: Mutex::default() }
    }

    /// Only the files of `dir`.
    pub fn in_dir(dir: &Path) -> KeyPlaces {
        KeyPlaces::new(dir.to_path_buf(), Vec::new(), Pkcs11Settings::default())
    }

    /// The role keys there are now: the configured ones, and the files of the others.
    pub fn load(&self) -> Result<RoleKeys, TufError> {
        let mut keys = RoleKeys::load_except(&self.dir, &self.configured_roles())?;
        for (role, source) in &self.configured {
            keys = keys.with(HeldKey::new(*role, self.open(*role, source)?)?);
        }
        Ok(keys)
    }

    /// For a new repository: a file key for each role that has neither a file nor a
    /// configured key, then [`load`](Self::load).
    pub fn generate_missing(&self) -> Result<RoleKeys, TufError> {
        RoleKeys::generate_missing_except(&self.dir, &self.configured_roles())?;
        self.load()
    }

    fn configured_roles(&self) -> Vec<Role> {
        self.configured.iter().map(|(r, _)| *r).collect()
    }

    fn open(&self, role: Role, source: &signet_keys::KeySource) -> Result<Arc<Signer>, TufError> {
        let mut opened = self.opened.lock().map_err(|_| TufError::Tough("the TUF key cache is poisoned".into()))?;
        if let Some(key) = opened.get(&role) {
            return Ok(key.clone());
        }
        let generate = matches!(source, signet_keys::KeySource::File(_));
        let key = Signer::open(source, &self.pkcs11, &[Algorithm::Ed25519], generate)
            .map_err(|e| TufError::Key { path: PathBuf::from(source.to_string()), msg: e.to_string() })?;
        let key = Arc::new(key);
        opened.insert(role, key.clone());
        Ok(key)
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
        Self::load_except(dir, &[])
    }

    /// Reads whichever role keys `dir` holds, but those of `skip` (kept elsewhere).
    fn load_except(dir: &Path, skip: &[Role]) -> Result<RoleKeys, TufError> {
        let mut held = HashMap::new();
        for role in Role::ALL.into_iter().filter(|r| !skip.contains(r)) {
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
        Self::generate_missing_except(dir, &[])
    }

    fn generate_missing_except(dir: &Path, skip: &[Role]) -> Result<RoleKeys, TufError> {
        signet_core::files::ensure_private_dir(dir).map_err(|source| TufError::Io { path: dir.to_path_buf(), source })?;
        for role in Role::ALL.into_iter().filter(|r| !skip.contains(r)) {
            let path = Self::path(dir, role);
            if path.exists() {
                continue;
            }
            let (_, pem) = HeldKey::generate(role)?;
            signet_core::files::write_atomic(&path, pem.as_bytes(), 0o600).map_err(|source| TufError::Io { path, source })?;
        }
        Self::load_except(dir, skip)
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
