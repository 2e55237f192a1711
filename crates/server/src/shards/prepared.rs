//! A log's next key, made and published ahead of its rotation (`signet admin log rotate
//! --prepare`).
//!
//! A rotation's new key signs from the moment the new log is served, and a client that has
//! not taken the new trusted root yet cannot verify what it signs. So the key can be made
//! first, and listed in the trust documents (and TUF) beside the active one, from now and
//! with no end: both are this log's, and a key that signs nothing yet costs a verifier
//! nothing. The rotation, run once clients have the new trusted root, takes the same key:
//! where a rotation makes its key ([`super::rotation::next_key_of`], [`super::keys::offer_next_key`]) it
//! finds the prepared one there. The trust documents then end the old key's window at the
//! rotation, and start the new one's there.
//!
//! What is published is recorded in storage (`<registry>.shard.<n>.prepared`, written once),
//! so that every instance of a database lists it; each keeps a copy in
//! `<data dir>/log-prepared.json`, which the trust documents are made from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use signet_core::b64;
use signet_log::shards::Shard;
use signet_log::storage::Storage;

use super::error::ShardError;
use super::kind::Kind;
use super::homes::KeyHomes;

/// A key published ahead of the shard it will sign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prepared {
    /// The shard it will sign.
    pub number: u32,
    /// Its public key (SPKI DER, base64).
    pub spki: String,
    /// When it was published (Unix seconds): its window starts there.
    pub from: i64,
}

fn meta_name(kind: Kind, number: u32) -> String {
    format!("{}.shard.{number}.prepared", kind.registry_name())
}

fn file(data_dir: &Path) -> PathBuf {
    data_dir.join("log-prepared.json")
}

/// This data dir's copy: each log's prepared key, by registry name.
pub fn read_local(data_dir: &Path) -> Result<BTreeMap<String, Prepared>, ShardError> {
    let path = file(data_dir);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| ShardError::PreparedJson { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(source) => Err(ShardError::Io { path, source }),
    }
}

/// The key prepared for the shard after `last` (the number of the newest shard listed), if
/// any: what the trust documents list beside it.
pub fn listed_after(data_dir: &Path, kind: Kind, last: u32) -> Result<Option<Prepared>, ShardError> {
    Ok(read_local(data_dir)?.remove(kind.registry_name()).filter(|p| p.number > last))
}

fn keep_local(data_dir: &Path, kind: Kind, prepared: &Prepared) -> Result<bool, ShardError> {
    let mut all = read_local(data_dir).unwrap_or_default();
    if all.get(kind.registry_name()) == Some(prepared) {
        return Ok(false);
    }
    all.insert(kind.registry_name().to_string(), prepared.clone());
    let text = serde_json::to_vec_pretty(&all)?;
    signet_core::files::write_atomic(&file(data_dir), &text, 0o644).map_err(|source| ShardError::Io { path: file(data_dir), source })?;
    Ok(true)
}

/// Makes (or finds) the key of the shard after the last of `list` where its rotation will
/// look for it, records it in storage as published from now (or from when it first was), and
/// keeps it in this data dir. On shared storage a file key is sealed into the database, as a
/// rotation seals it ([`super::keys::offer_next_key`]).
pub fn prepare(
    kind: Kind,
    store: &dyn Storage,
    shared: bool,
    seal: Option<&super::sealed::SealKey>,
    data_dir: &Path,
    homes: &KeyHomes,
    list: &[Shard],
) -> Result<Prepared, ShardError> {
    let (number, key) = match shared {
        true => super::keys::offer_next_key(kind, store, seal, data_dir, homes, list)?,
        false => super::keys::next_key_of(kind, data_dir, homes, list).map(|(n, _, key)| (n, key))?,
    };
    let ours = Prepared { number, spki: b64::encode(key.spki_der()), from: super::kind::now() };
    let name = meta_name(kind, number);
    let stored = store.get_or_init_meta(&name, &serde_json::to_vec(&ours)?)?;
    let prepared: Prepared = serde_json::from_slice(&stored).map_err(|source| ShardError::StoredJson { name: name.clone(), source })?;
    if prepared.spki != ours.spki {
        return Err(ShardError::PreparedOther { name, kind, number });
    }
    keep_local(data_dir, kind, &prepared)?;
    Ok(prepared)
}

/// On shared storage: takes the key another instance prepared for the shard after the last
/// of `list` into this data dir. True if that changed what the trust documents list.
pub fn follow(kind: Kind, store: &dyn Storage, data_dir: &Path, list: &[Shard]) -> Result<bool, ShardError> {
    let number = list.last().map_or(1, |s| s.number + 1);
    let name = meta_name(kind, number);
    let Some(stored) = store.meta(&name)? else { return Ok(false) };
    let prepared: Prepared = serde_json::from_slice(&stored).map_err(|source| ShardError::StoredJson { name, source })?;
    keep_local(data_dir, kind, &prepared)
}

/// [`prepare`] for a running instance, after `list` (the shards it serves).
pub async fn prepare_online(kind: Kind, opener: &super::opener::ShardOpener, list: Vec<Shard>) -> Result<Prepared, ShardError> {
    let (store, shared, seal, data_dir, homes) =
        (opener.storage.clone(), opener.shared.is_some(), opener.seal.clone(), opener.data_dir.clone(), opener.homes.clone());
    if shared && seal.is_none() && !homes.elsewhere(kind) {
        return Err(ShardError::CannotHandPrepared);
    }
    super::active::blocking(move || prepare(kind, store.as_ref(), shared, seal.as_deref(), &data_dir, &homes, &list)).await
}

/// On shared storage, for each log this instance serves: [`follow`]. True if any changed
/// what the trust documents list.
pub async fn follow_all(state: &crate::state::AppState) -> Result<bool, ShardError> {
    let opener = state.rekor_v1.opener();
    if opener.shared.is_none() {
        return Ok(false);
    }
    let lists = [
        (Kind::RekorV1, state.rekor_v1.registry()),
        (Kind::RekorV2, state.rekor_v2.current().registry.clone()),
        (Kind::Ct, state.ct.current().registry.clone()),
    ];
    let (store, data_dir) = (opener.storage.clone(), opener.data_dir.clone());
    super::active::blocking(move || {
        let mut changed = false;
        for (kind, list) in lists {
            changed |= follow(kind, store.as_ref(), &data_dir, &list)?;
        }
        Ok(changed)
    })
    .await
}
