//! The trusted root (protobuf-specs `TrustedRoot`, JSON): which logs, CAs, CT logs and TSAs
//! to trust, and when. It is parsed once, with every key and certificate decoded up front,
//! so verifying many bundles against one root costs no re-parsing.

use serde::Deserialize;
use signet_core::b64;
use signet_core::pubkey::{KeyError, PublicKey};

use crate::cert::Cert;
use crate::error::{Result, VerifyError};
use crate::time::{self, Window, WindowError};

/// A transparency log or CT log key: `logId` names it in entries and SCTs.
#[derive(Debug, Clone)]
pub struct LogKey {
    pub base_url: String,
    pub log_id: Vec<u8>,
    /// A key that does not parse is kept with its reason, and fails only if an entry uses it.
    pub key: std::result::Result<PublicKey, UnusableKey>,
    pub valid: Window,
}

/// Why a log's key in the trusted root cannot be used; each names the root's `keyDetails`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnusableKey {
    #[error("the trusted root gives no key bytes (keyDetails {key_details:?})")]
    NoBytes { key_details: String },
    #[error("publicKey.rawBytes is not base64 (keyDetails {key_details:?})")]
    NotBase64 { key_details: String },
    #[error("{source} (keyDetails {key_details:?})")]
    Key {
        #[source]
        source: KeyError,
        key_details: String,
    },
}

/// A certificate or timestamp authority: its chain, leaf (issuing) certificate first.
#[derive(Debug, Clone)]
pub struct Authority {
    pub uri: String,
    pub chain: Vec<Cert>,
    pub valid: Window,
    /// Set when the chain does not verify internally; checked once, here.
    pub chain_error: Option<crate::cert::CertError>,
}

#[derive(Debug, Clone)]
pub struct TrustedRoot {
    pub tlogs: Vec<LogKey>,
    pub ctlogs: Vec<LogKey>,
    pub certificate_authorities: Vec<Authority>,
    pub timestamp_authorities: Vec<Authority>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootJson {
    media_type: Option<String>,
    #[serde(default)]
    tlogs: Vec<LogJson>,
    #[serde(default)]
    certificate_authorities: Vec<AuthorityJson>,
    #[serde(default)]
    ctlogs: Vec<LogJson>,
    #[serde(default)]
    timestamp_authorities: Vec<AuthorityJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogJson {
    #[serde(default)]
    base_url: String,
    public_key: KeyJson,
    log_id: LogIdJson,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyJson {
    raw_bytes: Option<String>,
    key_details: Option<String>,
    valid_for: Option<RangeJson>,
}

#[derive(Deserialize)]
struct RangeJson {
    start: Option<String>,
    end: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogIdJson {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthorityJson {
    #[serde(default)]
    uri: String,
    cert_chain: ChainJson,
    valid_for: Option<RangeJson>,
}

#[derive(Deserialize)]
struct ChainJson {
    #[serde(default)]
    certificates: Vec<RawBytesJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytesJson {
    raw_bytes: String,
}

/// An absent `validFor` is unbounded (as sigstore-python reads it); a present one must have a start.
fn window_of(r: Option<&RangeJson>, what: &str) -> std::result::Result<Window, WindowError> {
    match r {
        None => Ok(Window { start: i64::MIN, end: None }),
        Some(r) => time::window(r.start.as_deref(), r.end.as_deref(), what),
    }
}

impl TrustedRoot {
    pub fn from_json(json: &[u8]) -> Result<TrustedRoot> {
        let bad = |m: String| VerifyError::TrustedRoot(m);
        let raw: RootJson = serde_json::from_slice(json).map_err(|e| bad(format!("not a TrustedRoot JSON document: {e}")))?;
        if let Some(mt) = &raw.media_type {
            if !mt.starts_with("application/vnd.dev.sigstore.trustedroot") {
                return Err(bad(format!("unknown mediaType {mt:?}")));
            }
        }
        let logs = |list: &[LogJson], kind: &str| -> Result<Vec<LogKey>> {
            list.iter()
                .enumerate()
                .map(|(i, l)| {
                    let what = format!("{kind}[{i}] ({})", l.base_url);
                    let log_id = b64::decode(&l.log_id.key_id).map_err(|_| bad(format!("{what}: logId.keyId is not base64")))?;
                    let key_details = || l.public_key.key_details.clone().unwrap_or_default();
                    let key = match &l.public_key.raw_bytes {
                        None => Err(UnusableKey::NoBytes { key_details: key_details() }),
                        Some(raw) => b64::decode(raw)
                            .map_err(|_| UnusableKey::NotBase64 { key_details: key_details() })
                            .and_then(|der| PublicKey::from_spki(&der).map_err(|source| UnusableKey::Key { source, key_details: key_details() })),
                    };
                    let valid = window_of(l.public_key.valid_for.as_ref(), &format!("{what}.publicKey")).map_err(|e| bad(e.to_string()))?;
                    Ok(LogKey { base_url: l.base_url.clone(), log_id, key, valid })
                })
                .collect()
        };
        let authorities = |list: &[AuthorityJson], kind: &str| -> Result<Vec<Authority>> {
            list.iter()
                .enumerate()
                .map(|(i, a)| {
                    let what = format!("{kind}[{i}] ({})", a.uri);
                    let chain = a
                        .cert_chain
                        .certificates
                        .iter()
                        .map(|c| {
                            let der = b64::decode(&c.raw_bytes).map_err(|_| bad(format!("{what}: certificate is not base64")))?;
                            Cert::parse(&der).map_err(|e| bad(format!("{what}: {e}")))
                        })
                        .collect::<Result<Vec<Cert>>>()?;
                    if chain.is_empty() {
                        return Err(bad(format!("{what}: certChain is empty")));
                    }
                    let valid = window_of(a.valid_for.as_ref(), &what).map_err(|e| bad(e.to_string()))?;
                    let chain_error = chain.windows(2).find_map(|w| w[0].check_issued_by(&w[1]).err());
                    Ok(Authority { uri: a.uri.clone(), chain, valid, chain_error })
                })
                .collect()
        };
        if raw.tlogs.is_empty() {
            return Err(bad("no transparency logs (tlogs): no bundle could verify against it".into()));
        }
        Ok(TrustedRoot {
            tlogs: logs(&raw.tlogs, "tlogs")?,
            ctlogs: logs(&raw.ctlogs, "ctlogs")?,
            certificate_authorities: authorities(&raw.certificate_authorities, "certificateAuthorities")?,
            timestamp_authorities: authorities(&raw.timestamp_authorities, "timestampAuthorities")?,
        })
    }

    pub fn tlog(&self, log_id: &[u8]) -> Option<&LogKey> {
        self.tlogs.iter().find(|l| l.log_id == log_id)
    }

    pub fn ctlog(&self, log_id: &[u8]) -> Option<&LogKey> {
        self.ctlogs.iter().find(|l| l.log_id == log_id)
    }
}
