//! `[keys]`: where each signing key is (a file or a PKCS#11 token).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use signet_keys::{KeySource, Pkcs11Settings};

use super::ca::CaSettings;
use super::error::ConfigError;

/// Where the signing keys are: each a file path (PKCS#8 PEM) or a PKCS#11 URI
/// (`pkcs11:token=…;object=…`, RFC 7512; docs/operations.md "Keys on a token").
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KeyPaths {
    /// The Rekor v1 log's key; default `<data_dir>/keys/rekor-v1.pem`.
    pub rekor_v1: Option<KeySource>,
    /// The Rekor v2 log's key; default `<data_dir>/keys/rekor-v2.pem`.
    pub rekor_v2: Option<KeySource>,
    /// The CT log's key; default `<data_dir>/keys/ct.pem`.
    pub ct: Option<KeySource>,
    /// The timestamp authority's key; default `<data_dir>/keys/tsa.pem`.
    pub tsa: Option<KeySource>,
    /// The CA's intermediate key (P-256 or P-384), which signs every certificate; default
    /// `<data_dir>/keys/ca-intermediate.pem`.
    pub ca_intermediate: Option<KeySource>,
    /// The CA's root key (P-384), used only while certificates are made (the first start, a
    /// renewal); default `<data_dir>/keys/ca-root.pem`, which `signet init` can keep offline.
    pub ca_root: Option<KeySource>,
    /// The key that signs the audit log's anchors (P-256); default `<data_dir>/keys/audit.pem`.
    pub audit: Option<KeySource>,
    /// The TUF roles' Ed25519 keys; default `<data_dir>/keys/tuf-<role>.pem`. The root and
    /// targets keys are needed only to sign those roles (`signet tuf`), not to serve.
    pub tuf_root: Option<KeySource>,
    pub tuf_targets: Option<KeySource>,
    pub tuf_snapshot: Option<KeySource>,
    pub tuf_timestamp: Option<KeySource>,
    /// The PKCS#11 module for URIs that give no `module-path`.
    pub pkcs11_module: Option<PathBuf>,
    /// The tokens' user PIN for URIs that give none; better from `SIGNET_KEYS_PKCS11_PIN`.
    pub pkcs11_pin: Option<String>,
    /// Sessions each key on a token keeps open; 0: the default (4).
    pub pkcs11_sessions: usize,
}

impl std::fmt::Debug for KeyPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPaths")
            .field("rekor_v1", &self.rekor_v1)
            .field("rekor_v2", &self.rekor_v2)
            .field("ct", &self.ct)
            .field("tsa", &self.tsa)
            .field("ca_intermediate", &self.ca_intermediate)
            .field("ca_root", &self.ca_root)
            .field("audit", &self.audit)
            .field("tuf_root", &self.tuf_root)
            .field("tuf_targets", &self.tuf_targets)
            .field("tuf_snapshot", &self.tuf_snapshot)
            .field("tuf_timestamp", &self.tuf_timestamp)
            .field("pkcs11_module", &self.pkcs11_module)
            .field("pkcs11_pin", &self.pkcs11_pin.as_ref().map(|_| "<hidden>"))
            .field("pkcs11_sessions", &self.pkcs11_sessions)
            .finish()
    }
}

impl KeyPaths {
    /// What every PKCS#11 URI may leave out.
    pub fn pkcs11(&self) -> Pkcs11Settings {
        Pkcs11Settings { module: self.pkcs11_module.clone(), pin: self.pkcs11_pin.clone(), sessions: self.pkcs11_sessions }
    }

    /// Where the TUF roles' keys are: those configured, and the files of the others.
    pub fn tuf(&self, data_dir: &Path) -> signet_trust::tuf::keys::KeyPlaces {
        use signet_trust::tuf::Role;
        let configured = [(Role::Root, &self.tuf_root), (Role::Targets, &self.tuf_targets), (Role::Snapshot, &self.tuf_snapshot), (Role::Timestamp, &self.tuf_timestamp)]
            .into_iter()
            .filter_map(|(role, source)| source.clone().map(|s| (role, s)))
            .collect();
        signet_trust::tuf::keys::KeyPlaces::new(data_dir.join("keys"), configured, self.pkcs11())
    }

    /// Where the CA's keys are, and the curve of a new intermediate.
    pub fn ca(&self, ca: &CaSettings) -> Result<signet_ca::authority::CaKeys, ConfigError> {
        Ok(signet_ca::authority::CaKeys {
            intermediate_curve: ca.intermediate_curve()?,
            intermediate: self.ca_intermediate.clone(),
            root: self.ca_root.clone(),
            pkcs11: self.pkcs11(),
        })
    }
}
