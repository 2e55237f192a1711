//! A shard's signing key: made for the next shard, offered and taken over the database on
//! PostgreSQL (sealed), kept on disk, found for the active shard.

use crate::shards::error::ShardError;
use crate::shards::homes::KeyHomes;
use crate::shards::kind::Kind;
use crate::shards::kind::key_path;
use crate::shards::kind::log_id;
use signet_keys::Signer;
use signet_log::shards::Shard;
use signet_log::storage::Storage;
use std::path::Path;
use std::sync::Arc;

/// Shard 0's public key as this data dir knows it: the public file every start writes (the
/// private key may be on a token, or a file elsewhere), else the private key file of a data
/// dir from before; `None` if neither is here.
pub fn zero_spki(kind: Kind, data_dir: &Path) -> Result<Option<Vec<u8>>, ShardError> {
    let public = kind.zero_public_path(data_dir);
    if let Ok(bytes) = std::fs::read(&public) {
        let block = signet_core::pem::decode_first(&bytes).map_err(|source| ShardError::Pem { path: public.clone(), source })?;
        return match block.label.as_str() {
            "PUBLIC KEY" => Ok(Some(block.der)),
            other => Err(ShardError::NotPublicKey { path: public, found: other.to_string() }),
        };
    }
    let path = kind.zero_key_path(data_dir);
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(Signer::load_or_generate(&path, signet_keys::Algorithm::EcdsaP256Sha256)?.spki_der().to_vec()))
}

/// Writes shard 0's public key beside the keys, unless it is there already as it is.
pub fn keep_zero_public(kind: Kind, data_dir: &Path, key: &Signer) -> Result<(), ShardError> {
    let path = kind.zero_public_path(data_dir);
    let pem = key.public_pem();
    if std::fs::read_to_string(&path).is_ok_and(|there| there == pem) {
        return Ok(());
    }
    signet_core::files::write_atomic(&path, pem.as_bytes(), 0o644).map_err(|source| ShardError::Write { path, source })
}

/// A later shard's key (a file, or beside shard 0's: [`KeyHomes`]), checked against the one
/// its record names.
pub fn shard_key(kind: Kind, data_dir: &Path, homes: &KeyHomes, shard: &Shard) -> Result<Arc<Signer>, ShardError> {
    let place = homes.place(kind, data_dir, shard.number)?;
    if let super::homes::Place::File(path) = &place {
        if !path.exists() {
            return Err(ShardError::MissingKey { path: path.clone(), kind, number: shard.number });
        }
    }
    let key = homes.open(&place, false)?;
    if key.spki_der() != shard.spki {
        return Err(ShardError::NotTheKey { key: place.to_string(), kind, number: shard.number });
    }
    Ok(Arc::new(key))
}

/// The storage meta key of shard `number`'s sealed key ([`sealed`]).
pub fn sealed_key_name(kind: Kind, number: u32) -> String {
    format!("{}.shard.{number}.key", kind.registry_name())
}

/// Writes shard `number`'s key file from its PKCS#8, or checks the one there is the same key.
pub(crate) fn keep_key_file(kind: Kind, data_dir: &Path, number: u32, pkcs8: &[u8]) -> Result<Signer, ShardError> {
    let path = key_path(kind, data_dir, number);
    let key = Signer::from_pkcs8(pkcs8, &path.display().to_string(), &[signet_keys::Algorithm::EcdsaP256Sha256])?;
    if path.exists() {
        let there = Signer::load_or_generate(&path, signet_keys::Algorithm::EcdsaP256Sha256)?;
        if there.spki_der() != key.spki_der() {
            return Err(ShardError::NotTheKey { key: path.display().to_string(), kind, number });
        }
        return Ok(there);
    }
    let text = signet_core::pem::encode("PRIVATE KEY", pkcs8);
    signet_core::files::write_atomic(&path, text.as_bytes(), 0o600).map_err(|source| ShardError::Write { path, source })?;
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
) -> Result<(u32, Signer), ShardError> {
    if homes.elsewhere(kind) {
        return next_key_of(kind, data_dir, homes, list).map(|(n, _, key)| (n, key));
    }
    let Some(seal) = seal else {
        return Err(ShardError::NoSealKey);
    };
    let number = list.last().map_or(1, |s| s.number + 1);
    if log_id(kind, number).is_none() {
        return Err(ShardError::Full { kind });
    }
    let made = signet_keys::file::generate_pkcs8(signet_keys::Algorithm::EcdsaP256Sha256).map_err(ShardError::MakeKey)?;
    let name = sealed_key_name(kind, number);
    let ours = seal.seal(&name, &made)?;
    let stored = store.get_or_init_meta(&name, &ours)?;
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
) -> Result<Arc<Signer>, ShardError> {
    if homes.elsewhere(kind) || key_path(kind, data_dir, shard.number).exists() {
        return shard_key(kind, data_dir, homes, shard);
    }
    let name = sealed_key_name(kind, shard.number);
    let Some(record) = store.meta(&name)? else {
        // Rotated offline, by hand: the key was never in storage.
        return shard_key(kind, data_dir, homes, shard);
    };
    let Some(seal) = seal else {
        return Err(ShardError::SealedWithoutSealKey { kind, number: shard.number });
    };
    let pkcs8 = seal.open(&name, &record)?;
    let key = Signer::from_pkcs8(&pkcs8, &name, &[signet_keys::Algorithm::EcdsaP256Sha256])?;
    if key.spki_der() != shard.spki {
        return Err(ShardError::SealedNotTheKey { name, kind, number: shard.number });
    }
    keep_key_file(kind, data_dir, shard.number, &pkcs8).map(Arc::new)
}

/// This data dir's seal key, checked against the one the database's other instances use (the
/// first to start records its own). `None`, with a warning, when this data dir has none or
/// another than the database names: the instance serves, but can neither rotate online nor
/// follow a rotation (`signet doctor` says so too).
pub fn seal_key_for(store: &dyn Storage, data_dir: &Path) -> Result<Option<Arc<super::sealed::SealKey>>, ShardError> {
    let local = super::sealed::SealKey::load(data_dir)?;
    let recorded = store.meta(super::sealed::SHARED_ID)?;
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
                None => store.get_or_init_meta(super::sealed::SHARED_ID, key.id().as_bytes())?,
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
) -> Result<(Shard, Arc<Signer>), ShardError> {
    let Some(active) = list.last().filter(|s| s.frozen.is_none()) else {
        return Err(ShardError::CutShort { kind });
    };
    let key = match active.number {
        0 => zero_key.clone(),
        _ => take_key(kind, store, seal, data_dir, homes, active)?,
    };
    Ok((active.clone(), key))
}

/// The key of the Rekor v1 shard after the last of `list` (see [`next_key_of`]).
pub fn next_key(data_dir: &Path, homes: &KeyHomes, list: &[Shard]) -> Result<(u32, String, Signer), ShardError> {
    next_key_of(Kind::RekorV1, data_dir, homes, list)
}

/// The key of the shard after the last of `list`, made if it is not there yet (so made before
/// anything is frozen: a failure here changes nothing): a file, or beside shard 0's key on
/// its token or in KMS ([`KeyHomes`]). Returns its number, where it is, and the key.
pub fn next_key_of(kind: Kind, data_dir: &Path, homes: &KeyHomes, list: &[Shard]) -> Result<(u32, String, Signer), ShardError> {
    let number = list.last().map_or(1, |s| s.number + 1);
    if log_id(kind, number).is_none() {
        return Err(ShardError::Full { kind });
    }
    let place = homes.place(kind, data_dir, number)?;
    let key = homes.open(&place, true)?;
    Ok((number, place.to_string(), key))
}
