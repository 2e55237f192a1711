//! The public list of every shard's key and validity (`log-shards.json`), which the trust
//! documents are made from.

use signet_core::b64;
use crate::shards::error::ShardError;
use crate::shards::kind::Kind;
use crate::shards::kind::PUBLIC_FILE;
use serde_json::Value;
use serde_json::json;
use signet_log::shards::Shard;
use std::path::Path;

/// One shard's public key and validity, as the trust documents list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicShard {
    pub spki: Vec<u8>,
    /// Unix seconds; `None`: from the instance's start.
    pub valid_from: Option<i64>,
    pub valid_to: Option<i64>,
}

/// Writes `kind`'s list into `<data dir>/log-shards.json`, the shard lists `signet trust
/// export` reads; the other logs' lists are kept. It is derived from storage (by `serve` at
/// every start, and by a rotation), never the truth.
pub fn write_public(data_dir: &Path, kind: Kind, shards: &[Shard]) -> std::io::Result<()> {
    let list: Vec<Value> = shards
        .iter()
        .map(|s| json!({"spki": b64::encode(&s.spki), "valid_from": s.valid_from, "valid_to": s.frozen.map(|f| f.valid_to)}))
        .collect();
    let path = data_dir.join(PUBLIC_FILE);
    // A file that cannot be read is replaced: serve rewrites every list at start.
    let mut all = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    all[kind.registry_name()] = Value::Array(list);
    let text = serde_json::to_string_pretty(&all).unwrap_or_default() + "\n";
    signet_core::files::write_atomic(&path, text.as_bytes(), 0o600)
}

/// `kind`'s shard list in `<data dir>/log-shards.json`, if the file lists it (files written
/// before the CT and Rekor v2 logs rotated list only rekor_v1).
pub fn read_public(data_dir: &Path, kind: Kind) -> Result<Option<Vec<PublicShard>>, ShardError> {
    let path = data_dir.join(PUBLIC_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ShardError::Io { path, source }),
    };
    let v: Value = serde_json::from_str(&text).map_err(|source| ShardError::PublicJson { path: path.clone(), source })?;
    let Some(list) = v.get(kind.registry_name()) else { return Ok(None) };
    let list = list.as_array().ok_or_else(|| ShardError::PublicNotAList { path: path.clone(), kind })?;
    list.iter()
        .map(|s| {
            let spki = s
                .get("spki")
                .and_then(Value::as_str)
                .and_then(|k| b64::decode(k).ok())
                .ok_or_else(|| ShardError::PublicNoSpki { path: path.clone() })?;
            Ok(PublicShard { spki, valid_from: s.get("valid_from").and_then(Value::as_i64), valid_to: s.get("valid_to").and_then(Value::as_i64) })
        })
        .collect::<Result<Vec<_>, ShardError>>()
        .map(Some)
}
