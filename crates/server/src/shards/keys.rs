//! A shard's signing key: made for the next shard, offered and taken over the database on
//! PostgreSQL (sealed), kept on disk, found for the active shard.

use crate::shards::homes::KeyHomes;
use crate::shards::kind::Kind;
use crate::shards::kind::key_path;
use crate::shards::kind::log_id;
use signet_keys::Signer;
use signet_log::shards::Shard;
use signet_log::storage::Storage;
use std::path::Path;
use std::sync::Arc;

/// A later shard's key (a file, or beside shard 0's: [`KeyHomes`]), checked against the one
/// its record names.
pub fn shard_key(kind: Kind, data_dir: &Path, homes: &KeyHomes, shard: &Shard) -> Result<Arc<Signer>, String> {
    let place = homes.place(kind, data_dir, shard.number)?;
    if let super::homes::Place::File(path) = &place {
        if !path.exists() {
            return Err(format!(
                "{} is missing: the key of {} shard {} (made by `signet admin log rotate --log {}`); copy it from the instance that rotated the log",
                path.display(),
                kind.title(),
                shard.number,
                kind.cli_name()
            ));
        }
    }
    let key = homes.open(&place, false)?;
    if key.spki_der() != shard.spki {
        return Err(format!("{place} is not the key {} shard {} was started with", kind.title(), shard.number));
    }
    Ok(Arc::new(key))
}

/// The storage meta key of shard `number`'s sealed key ([`sealed`]).
pub fn sealed_key_name(kind: Kind, number: u32) -> String {
    format!("{}.shard.{number}.key", kind.registry_name())
}

/// Writes shard `number`'s key file from its PKCS#8, or checks the one there is the same key.
pub(crate) fn keep_key_file(kind: Kind, data_dir: &Path, number: u32, pkcs8: &[u8]) -> Result<Signer, String> {
    let path = key_path(kind, data_dir, number);
    let key = Signer::from_pkcs8(pkcs8, &path.display().to_string(), &[signet_keys::Algorithm::EcdsaP256Sha256]).map_err(|e| e.to_string())?;
    if path.exists() {
        let there = Signer::load_or_generate(&path, signet_keys::Algorithm::EcdsaP256Sha256).map_err(|e| e.to_string())?;
        if there.spki_der() != key.spki_der() {
            return Err(format!("{} is not the key {} shard {number} was started with", path.display(), kind.title()));
        }
        return Ok(there);
    }
    let text = signet_core::pem::encode("PRIVATE KEY", pkcs8);
    signet_core::files::write_atomic(&path, text.as_bytes(), 0o600).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(key)
}

/// On shared storage, the key of the shard after the last of `list`, offered to the other
/// instances: a new key, sealed into storage, unless an earlier rotation cut short already
/// put one there (then that one, so a rerun finishes what it began). Kept in this data dir.
/// A key made beside shard 0's on a token or in KMS ([`KeyHomes`]) is not sealed: the other
/// instances open it there.
pub fn offer_next_key(
    kind: Kind,
    store: &dyn Storage,
    seal: Option<&super::sealed::SealKey>,
    data_dir: &Path,
    homes: &KeyHomes,
    list: &[Shard],
) -> Result<(u32, Signer), String> {
    if homes.elsewhere(kind) {
        return next_key_of(kind, data_dir, homes, list).map(|(n, _, key)| (n, key));
    }
    let Some(seal) = seal else {
        return Err("this data dir's keys/shard-seal.key is missing or is not the one the database's instances share".into());
    };
    let number = list.last().map_or(1, |s| s.number + 1);
    if log_id(kind, number).is_none() {
        return Err(full(kind));
    }
    let made = signet_keys::file::generate_pkcs8(signet_keys::Algorithm::EcdsaP256Sha256)
        .map_err(|_| "making the new shard's key failed".to_string())?;
    let name = sealed_key_name(kind, number);
    let ours = seal.seal(&name, &made)?;
    let stored = store.get_or_init_meta(&name, &ours).map_err(|e| e.to_string())?;
    let pkcs8 = seal.open(&name, &stored)?;
    Ok((number, keep_key_file(kind, data_dir, number, &pkcs8)?))
}

/// A later shard's key on an instance that did not rotate: from this data dir, or else
/// opened from storage, where the rotating instance sealed it, and kept here from then on.
pub fn take_key(
    kind: Kind,
    store: &dyn Storage,
    seal: Option<&super::sealed::SealKey>,
    data_dir: &Path,
    homes: &KeyHomes,
    shard: &Shard,
) -> Result<Arc<Signer>, String> {
    if homes.elsewhere(kind) || key_path(kind, data_dir, shard.number).exists() {
        return shard_key(kind, data_dir, homes, shard);
    }
    let name = sealed_key_name(kind, shard.number);
    let Some(record) = store.meta(&name).map_err(|e| e.to_string())? else {
        // Rotated offline, by hand: the key was never in storage.
        return shard_key(kind, data_dir, homes, shard);
    };
    let Some(seal) = seal else {
        return Err(format!(
            "{} shard {} is sealed in storage, but this data dir's keys/shard-seal.key is missing or is not the one this database's instances share (see the warning above): copy theirs here",
            kind.title(),
            shard.number
        ));
    };
    let pkcs8 = seal.open(&name, &record)?;
    let key = Signer::from_pkcs8(&pkcs8, &name, &[signet_keys::Algorithm::EcdsaP256Sha256]).map_err(|e| e.to_string())?;
    if key.spki_der() != shard.spki {
        return Err(format!("the sealed key {name} is not the key {} shard {} was started with", kind.title(), shard.number));
    }
    keep_key_file(kind, data_dir, shard.number, &pkcs8).map(Arc::new)
}

/// This data dir's seal key, checked against the one the database's other instances use (the
/// first to start records its own). `None`, with a warning, when this data dir has none or
/// another than the database names: the instance serves, but can neither rotate online nor
/// follow a rotation (`signet doctor` says so too).
pub fn seal_key_for(store: &dyn Storage, data_dir: &Path) -> Result<Option<Arc<super::sealed::SealKey>>, String> {
    let local = super::sealed::SealKey::load(data_dir)?;
    let recorded = store.meta(super::sealed::SHARED_ID).map_err(|e| e.to_string())?;
    match (local, recorded) {
        (None, Some(theirs)) => {
            tracing::warn!(
                seal_key = %String::from_utf8_lossy(&theirs),
                "this data dir has no keys/shard-seal.key, which the database's other instances share: copy it from one of them, or this instance cannot follow an online rotation of a log"
            );
            Ok(None)
        }
        (local, recorded) => {
            let key = match local {
                Some(k) => k,
                None => super::sealed::SealKey::load_or_make(data_dir)?,
            };
            let shared = match recorded {
                Some(r) => r,
                None => store.get_or_init_meta(super::sealed::SHARED_ID, key.id().as_bytes()).map_err(|e| e.to_string())?,
            };
            if shared != key.id().as_bytes() {
                tracing::warn!(
                    ours = key.id(),
                    theirs = %String::from_utf8_lossy(&shared),
                    "this data dir's keys/shard-seal.key is not the one the database's other instances share: copy theirs here, or this instance can neither rotate a log online nor follow such a rotation"
                );
                return Ok(None);
            }
            Ok(Some(Arc::new(key)))
        }
    }
}

/// The active shard of `list` (the last) and its key; an error if a rotation was cut short
/// after freezing it. `zero_key` is shard 0's.
/// A key that another instance rotated to on shared storage comes from storage, sealed
/// (`seal`, see [`take_key`]).
pub fn active_key(
    kind: Kind,
    store: &dyn Storage,
    seal: Option<&super::sealed::SealKey>,
    data_dir: &Path,
    homes: &KeyHomes,
    list: &[Shard],
    zero_key: &Arc<Signer>,
) -> Result<(Shard, Arc<Signer>), String> {
    let Some(active) = list.last().filter(|s| s.frozen.is_none()) else {
        return Err(format!(
            "the {} log's newest shard is frozen and none follows it: a rotation was cut short; run `signet admin log rotate --log {}` again to finish it",
            kind.title(),
            kind.cli_name()
        ));
    };
    let key = match active.number {
        0 => zero_key.clone(),
        _ => take_key(kind, store, seal, data_dir, homes, active)?,
    };
    Ok((active.clone(), key))
}

pub(crate) fn full(kind: Kind) -> String {
    format!("the {} log has room for {} shards; it has them all", kind.title(), kind.room())
}

/// The key of the Rekor v1 shard after the last of `list` (see [`next_key_of`]).
pub fn next_key(data_dir: &Path, homes: &KeyHomes, list: &[Shard]) -> Result<(u32, String, Signer), String> {
    next_key_of(Kind::RekorV1, data_dir, homes, list)
}

/// The key of the shard after the last of `list`, made if it is not there yet (so made before
/// anything is frozen: a failure here changes nothing): a file, or beside shard 0's key on
/// its token or in KMS ([`KeyHomes`]). Returns its number, where it is, and the key.
pub fn next_key_of(kind: Kind, data_dir: &Path, homes: &KeyHomes, list: &[Shard]) -> Result<(u32, String, Signer), String> {
    let number = list.last().map_or(1, |s| s.number + 1);
    if log_id(kind, number).is_none() {
        return Err(full(kind));
    }
    let place = homes.place(kind, data_dir, number)?;
    let key = homes.open(&place, true)?;
    Ok((number, place.to_string(), key))
}
