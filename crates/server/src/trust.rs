//! The trust documents of an instance, from the public parts of its data dir.
//!
//! `serve` writes its public URL to `<data dir>/public-url` at every start. The logs are
//! named after that URL's host, so trust documents for any other host would describe logs
//! that do not exist: exporting for one is refused.

use std::path::{Path, PathBuf};

use signet_core::pem;
use signet_trust::root::{Instance, ShardKey};

use crate::config::host_of;
use crate::shards::Kind;
use crate::rotate::record::instance_valid_from;

pub mod error;

pub use error::{IncludedError, TrustError};

pub fn public_url_file(data_dir: &Path) -> PathBuf {
    data_dir.join("public-url")
}

fn read_cert(path: &Path) -> Result<Vec<u8>, TrustError> {
    let bytes = std::fs::read(path).map_err(|source| TrustError::Io { path: path.to_path_buf(), source })?;
    Ok(pem::decode_first(&bytes).map_err(|source| TrustError::Pem { path: path.to_path_buf(), source })?.der)
}

/// Shard 0's public key ([`crate::shards::zero_spki`]).
fn zero_key_spki(data_dir: &Path, kind: Kind) -> Result<Vec<u8>, TrustError> {
    crate::shards::zero_spki(kind, data_dir)?.ok_or_else(|| TrustError::NotServed { key: kind.zero_key_path(data_dir) })
}

/// Builds the instance description; `url`, if given, must have the instance's host.
pub fn instance(data_dir: &Path, url: Option<&str>) -> Result<Instance, TrustError> {
    let stored = std::fs::read_to_string(public_url_file(data_dir)).map_err(|_| TrustError::NoPublicUrl { data_dir: data_dir.to_path_buf() })?;
    let stored = stored.trim().trim_end_matches('/').to_string();
    let url = match url {
        Some(u) => {
            let u = u.trim_end_matches('/').to_string();
            let (want, got) = (host_of(&stored)?, host_of(&u)?);
            if want != got {
                return Err(TrustError::OtherHost { got, want });
            }
            u
        }
        None => stored,
    };
    let ca = data_dir.join("ca");
    let root = read_cert(&ca.join("root.pem"))?;
    let valid_from = instance_valid_from(&root)?;
    // Each shard's key of each log, with its window; before any rotation, the one key. Then
    // a key prepared for the next shard, from when it was published (crate::shards::prepared).
    let shard_keys = |kind: Kind| -> Result<Vec<ShardKey>, TrustError> {
        let mut keys = match crate::shards::read_public(data_dir, kind)? {
            Some(list) => list
                .into_iter()
                .map(|s| ShardKey {
                    spki: s.spki,
                    valid_from: s.valid_from.map_or_else(|| valid_from.clone(), unix_rfc3339),
                    valid_to: s.valid_to.map(unix_rfc3339),
                })
                .collect(),
            None => vec![ShardKey { spki: zero_key_spki(data_dir, kind)?, valid_from: valid_from.clone(), valid_to: None }],
        };
        let last = keys.len().saturating_sub(1) as u32;
        if let Some(next) = crate::shards::prepared::listed_after(data_dir, kind, last)? {
            let spki = signet_core::b64::decode(&next.spki).map_err(|_| TrustError::PreparedKey)?;
            keys.push(ShardKey { spki, valid_from: unix_rfc3339(next.from), valid_to: None });
        }
        Ok(keys)
    };
    let (rekor_v1, rekor_v2, ct) = (shard_keys(Kind::RekorV1)?, shard_keys(Kind::RekorV2)?, shard_keys(Kind::Ct)?);
    // Rotated authorities: each retired certificate with its window, and the current start.
    // A scheduled rotation is published as if done: the current certificate retired at its
    // window's end, the new one current from its first second (crate::rotate::scheduled).
    let rotations = crate::rotate::read(data_dir)?;
    let windows = |rotated: Option<crate::rotate::Rotated>, current: &str| -> Result<(Vec<u8>, String, Vec<signet_trust::root::RetiredAuthority>), TrustError> {
        let current_cert = read_cert(&ca.join(current))?;
        let Some(r) = rotated else { return Ok((current_cert, valid_from.clone(), Vec::new())) };
        let mut retired = r
            .retired
            .into_iter()
            .map(|t| {
                Ok(signet_trust::root::RetiredAuthority {
                    chain: vec![read_cert(&ca.join(&t.cert))?, root.clone()],
                    valid_from: t.valid_from,
                    valid_to: t.valid_to,
                })
            })
            .collect::<Result<Vec<_>, TrustError>>()?;
        match r.next {
            Some(next) => {
                retired.push(signet_trust::root::RetiredAuthority { chain: vec![current_cert, root.clone()], valid_from: r.current_from, valid_to: next.old_to });
                Ok((read_cert(&ca.join(&next.cert))?, next.from, retired))
            }
            None => Ok((current_cert, r.current_from, retired)),
        }
    };
    let included = included(data_dir)?.into_iter().map(|(_, doc)| doc).collect();
    let (tsa_cert, tsa_valid_from, retired_tsas) = windows(rotations.tsa, "tsa.pem")?;
    let (ca_cert, ca_valid_from, retired_cas) = windows(rotations.intermediate, "intermediate.pem")?;
    Ok(Instance {
        operator: host_of(&url)?,
        valid_from,
        url,
        rekor_v1,
        rekor_v2,
        ct,
        ca_chain: vec![ca_cert, root.clone()],
        ca_valid_from,
        retired_cas,
        tsa_chain: vec![tsa_cert, root],
        tsa_valid_from,
        retired_tsas,
        included,
    })
}

/// Where `signet trust include` keeps the trusted roots it was given.
pub fn included_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("trust").join("include")
}

/// A trusted root from elsewhere, checked as a verifier reads it: its media type, every
/// log's key id and key, every authority's certificates.
pub fn check_included(bytes: &[u8]) -> Result<serde_json::Value, IncludedError> {
    let doc: serde_json::Value = serde_json::from_slice(bytes).map_err(IncludedError::NotJson)?;
    if !doc["mediaType"].as_str().is_some_and(|m| m.starts_with("application/vnd.dev.sigstore.trustedroot")) {
        return Err(IncludedError::MediaType { found: doc["mediaType"].clone() });
    }
    signet_verify::trust_root::TrustedRoot::from_json(bytes)?;
    Ok(doc)
}

/// The trusted roots included in this instance's, by file name, in name order.
pub fn included(data_dir: &Path) -> Result<Vec<(String, serde_json::Value)>, TrustError> {
    let dir = included_dir(data_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(TrustError::Io { path: dir, source }),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.map_err(|source| TrustError::Io { path: dir.clone(), source })?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).filter(|n| n.ends_with(".json")).map(str::to_string) else { continue };
        let bytes = std::fs::read(&path).map_err(|source| TrustError::Io { path: path.clone(), source })?;
        out.push((name, check_included(&bytes).map_err(|source| TrustError::Included { path: path.clone(), source })?));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn rfc3339(t: der::DateTime) -> String {
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", t.year(), t.month(), t.day(), t.hour(), t.minutes(), t.seconds())
}

/// Unix seconds in RFC 3339; a time outside what X.509 can say (never written by signet)
/// becomes the epoch, which no window starts before.
fn unix_rfc3339(secs: i64) -> String {
    match der::DateTime::from_unix_duration(std::time::Duration::from_secs(secs.max(0) as u64)) {
        Ok(t) => rfc3339(t),
        Err(_) => "1970-01-01T00:00:00Z".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unix_times_read_as_rfc3339() {
        assert_eq!(super::unix_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::unix_rfc3339(1_795_000_000), "2026-11-18T11:06:40Z");
    }
}
