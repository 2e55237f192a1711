//! `[witness]` (signet as a witness for other logs) and `[log.witnesses]` (the witnesses that
//! cosign this log's checkpoints), checked into what the witness crate takes.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use signet_core::notekey::{NoteKeyType, VerifierKey};
use signet_core::pubkey::PublicKey;
use signet_keys::KeySource;
use signet_witness::{LogKey, WitnessedLog};

use super::error::ConfigError;

/// `[witness]`: off unless at least one log is listed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WitnessSettings {
    /// The name in this witness's cosignature lines; default `<public host>/witness`.
    pub name: Option<String>,
    /// Its Ed25519 key: a PKCS#8 PEM file (default `<data dir>/keys/witness.pem`, made 0600
    /// if missing) or a PKCS#11 URI.
    pub key: Option<KeySource>,
    /// How often the logs with a `url` are polled.
    pub poll_interval_secs: u64,
    pub logs: Vec<WitnessedLogSettings>,
}

impl Default for WitnessSettings {
    fn default() -> Self {
        WitnessSettings { name: None, key: None, poll_interval_secs: 10, logs: Vec::new() }
    }
}

/// `[[witness.logs]]`: a log to cosign for, by origin, and the keys its checkpoints are signed with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessedLogSettings {
    pub origin: String,
    /// C2SP Ed25519 verifier keys (`<origin>+<id>+<base64>`), as Tessera, Sunlight and
    /// litetlog logs publish them.
    #[serde(default)]
    pub vkeys: Vec<String>,
    /// PEM public keys (SubjectPublicKeyInfo) of logs that sign the Rekor v2 way (ECDSA
    /// P-256, key hint from the SPKI): signet's own and Rekor v2's.
    #[serde(default)]
    pub public_keys: Vec<PathBuf>,
    /// The log's tile prefix (`<url>/checkpoint`, `<url>/tile/…`, c2sp.org/tlog-tiles; for
    /// signet and Rekor v2, `https://host/api/v2`): polled for logs that don't submit.
    pub url: Option<String>,
}

impl WitnessSettings {
    pub fn enabled(&self) -> bool {
        !self.logs.is_empty()
    }

    /// The logs with their keys read and checked; every mistake names the setting.
    pub fn logs(&self, base: &Path) -> Result<Vec<WitnessedLog>, ConfigError> {
        let mut seen = std::collections::HashSet::new();
        let mut logs = Vec::new();
        for (i, l) in self.logs.iter().enumerate() {
            let at = format!("witness.logs[{i}] (origin {:?})", l.origin);
            if !signet_core::notekey::valid_name(&l.origin) {
                return Err(ConfigError::Invalid(format!("{at}: the origin must be non-empty, without spaces or '+'")));
            }
            if !seen.insert(l.origin.clone()) {
                return Err(ConfigError::Invalid(format!("{at}: the origin is listed twice")));
            }
            let mut keys = Vec::new();
            for v in &l.vkeys {
                let vkey = VerifierKey::parse(v).map_err(|e| ConfigError::Invalid(format!("{at}: {e}")))?;
                if vkey.kind != NoteKeyType::Ed25519 || vkey.name != l.origin {
                    return Err(ConfigError::Invalid(format!(
                        "{at}: vkey {v:?} must be an Ed25519 log key (type 0x01) named after the origin"
                    )));
                }
                keys.push(LogKey::Note(vkey));
            }
            for p in &l.public_keys {
                let path = if p.is_absolute() { p.clone() } else { base.join(p) };
                let pem = std::fs::read(&path).map_err(|e| ConfigError::Invalid(format!("{at}: reading {}: {e}", path.display())))?;
                let der = signet_core::pem::decode_first(&pem)
                    .map_err(|e| ConfigError::Invalid(format!("{at}: {}: {e}; expected a PEM PUBLIC KEY", path.display())))?;
                let key = PublicKey::from_spki(&der.der)
                    .map_err(|e| ConfigError::Invalid(format!("{at}: {}: {e}", path.display())))?;
                keys.push(LogKey::Spki(key));
            }
            if keys.is_empty() {
                return Err(ConfigError::Invalid(format!("{at}: no key: give vkeys or public_keys")));
            }
            logs.push(WitnessedLog { origin: l.origin.clone(), keys });
        }
        Ok(logs)
    }
}

/// `[log.witnesses]`: the witnesses that cosign the Rekor v2 log, and how many must.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogWitnesses {
    /// k of the n members: the checkpoint served is the newest that k cosigned.
    pub quorum: usize,
    pub members: Vec<WitnessMember>,
    /// The log's Ed25519 key: witnesses (litewitness among them) verify only Ed25519 log
    /// keys, so every checkpoint carries a second signature line by it, under the origin.
    /// A file (default `<data dir>/keys/rekor-v2-note.pem`, made 0600 if missing) or a
    /// PKCS#11 URI.
    pub note_key: Option<KeySource>,
}

impl Default for LogWitnesses {
    fn default() -> Self {
        LogWitnesses { quorum: 1, members: Vec::new(), note_key: None }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessMember {
    /// Its submission prefix: requests go to `<url>/add-checkpoint`.
    pub url: String,
    /// Its cosignature/v1 verifier key.
    pub vkey: String,
}

impl LogWitnesses {
    pub fn enabled(&self) -> bool {
        !self.members.is_empty()
    }

    /// The members with their keys parsed; every mistake names the setting.
    pub fn endpoints(&self) -> Result<Vec<signet_witness::cosigning::Endpoint>, ConfigError> {
        if self.quorum == 0 || self.quorum > self.members.len() {
            return Err(ConfigError::Invalid(format!(
                "log.witnesses.quorum is {}: it must be between 1 and the {} members listed",
                self.quorum,
                self.members.len()
            )));
        }
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let vkey = VerifierKey::parse(&m.vkey).map_err(|e| ConfigError::Invalid(format!("log.witnesses.members[{i}]: {e}")))?;
                if vkey.kind != NoteKeyType::Cosignature {
                    return Err(ConfigError::Invalid(format!(
                        "log.witnesses.members[{i}]: vkey {:?} is not a cosignature/v1 key (type 0x04)",
                        m.vkey
                    )));
                }
                if !(m.url.starts_with("https://") || m.url.starts_with("http://")) {
                    return Err(ConfigError::Invalid(format!("log.witnesses.members[{i}]: url {:?} is not an http(s) URL", m.url)));
                }
                Ok(signet_witness::cosigning::Endpoint { url: m.url.clone(), vkey })
            })
            .collect()
    }
}
