//! The shards of signet's transparency logs in an instance (see [`signet_log::shards`]):
//! which storage namespace and key file each one has, `signet admin log rotate`, and the
//! public list of shard keys that the trust documents are made from.
//!
//! Three logs rotate this way ([`Kind`]). A Rekor v1 log is cut into shards with log-wide
//! indices, all of them served. The CT log and the Rekor v2 log rotate into a new log of
//! their own: a new key (so a new log ID), a new storage namespace and tree, indices from 0
//! again; the old one is frozen at its final checkpoint and only the new one is served
//! ([`active`]).
//!
//! Every log rotates online, through any running instance (`POST /api/admin/log/rotate`:
//! `api::rekor_v1::rotation`, [`active`]); on PostgreSQL the new shard's key reaches the
//! other instances sealed through the database ([`sealed`]). Offline means every instance
//! of the database is stopped: on SQLite the data dir's lock proves it; on PostgreSQL the
//! sequencer lease does, and the tree is frozen in the database too, so that nothing a
//! follower still queues can grow it.
//!
//! A Rekor v1 log may begin with a tree copied from another Rekor ([`import`]).

pub mod active;
pub mod homes;
pub mod import;
pub mod prepared;
pub mod sealed;

pub use homes::KeyHomes;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use signet_core::b64;
use signet_keys::Signer;
use signet_log::shards::{self, Shard};
use signet_log::storage::{LogId, Storage, StorageError, StorageUrl};

/// A log that rotates into shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RekorV1,
    RekorV2,
    Ct,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::RekorV1, Kind::RekorV2, Kind::Ct];

    /// `--log` of `signet admin log rotate`.
    pub fn parse(name: &str) -> Result<Kind, String> {
        match name {
            "rekor-v1" => Ok(Kind::RekorV1),
            "rekor-v2" => Ok(Kind::RekorV2),
            "ct" => Ok(Kind::Ct),
            _ => Err(format!("--log {name:?}: expected rekor-v1, rekor-v2 or ct")),
        }
    }

    pub fn cli_name(self) -> &'static str {
        match self {
            Kind::RekorV1 => "rekor-v1",
            Kind::RekorV2 => "rekor-v2",
            Kind::Ct => "ct",
        }
    }

    /// The registry's name (storage meta keys) and the public list's. Never rename: on disk.
    pub fn registry_name(self) -> &'static str {
        match self {
            Kind::RekorV1 => "rekor_v1",
            Kind::RekorV2 => "rekor_v2",
            Kind::Ct => "ct",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Kind::RekorV1 => "Rekor v1",
            Kind::RekorV2 => "Rekor v2",
            Kind::Ct => "CT",
        }
    }

    /// Storage namespace of shard 0 (the log as it was before any rotation), and the range
    /// of the later shards'. Never renumber: they are on disk.
    fn namespaces(self) -> (LogId, LogId, LogId) {
        match self {
            Kind::RekorV1 => (1, 16, 127),
            Kind::Ct => (3, 128, 191),
            Kind::RekorV2 => (2, 192, 255),
        }
    }

    pub fn zero_log(self) -> LogId {
        self.namespaces().0
    }

    /// How many shards it has room for.
    fn room(self) -> u32 {
        let (_, first, last) = self.namespaces();
        u32::from(last - first) + 2
    }

    /// Shard 0's key, `keys/<name>.pem`, unless the config points elsewhere.
    pub fn zero_key_path(self, data_dir: &Path) -> PathBuf {
        data_dir.join("keys").join(format!("{}.pem", self.cli_name()))
    }

    /// Shard 0's public key, `keys/<name>.pub.pem`, written at every start: what the trust
    /// documents name, wherever the private key is (a file elsewhere, a token).
    pub fn zero_public_path(self, data_dir: &Path) -> PathBuf {
        data_dir.join("keys").join(format!("{}.pub.pem", self.cli_name()))
    }
}

/// Shard 0's public key as this data dir knows it: the public file every start writes (the
/// private key may be on a token, or a file elsewhere), else the private key file of a data
/// dir from before; `None` if neither is here.
pub fn zero_spki(kind: Kind, data_dir: &Path) -> Result<Option<Vec<u8>>, String> {
    let public = kind.zero_public_path(data_dir);
    if let Ok(bytes) = std::fs::read(&public) {
        let block = signet_core::pem::decode_first(&bytes).map_err(|e| format!("{}: {e}", public.display()))?;
        return match block.label.as_str() {
            "PUBLIC KEY" => Ok(Some(block.der)),
            other => Err(format!("{}: expected a PUBLIC KEY block, found {other}", public.display())),
        };
    }
    let path = kind.zero_key_path(data_dir);
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(Signer::load_or_generate(&path, signet_keys::Algorithm::EcdsaP256Sha256).map_err(|e| e.to_string())?.spki_der().to_vec()))
}

/// Writes shard 0's public key beside the keys, unless it is there already as it is.
pub fn keep_zero_public(kind: Kind, data_dir: &Path, key: &Signer) -> Result<(), String> {
    let path = kind.zero_public_path(data_dir);
    let pem = key.public_pem();
    if std::fs::read_to_string(&path).is_ok_and(|there| there == pem) {
        return Ok(());
    }
    signet_core::files::write_atomic(&path, pem.as_bytes(), 0o644).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The registry's name for the Rekor v1 log.
pub const KIND: &str = "rekor_v1";
/// Storage namespace of Rekor v1 shard 0.
pub const SHARD_ZERO_LOG: LogId = 1;
/// The file beside the keys that lists every shard's public key and validity.
const PUBLIC_FILE: &str = "log-shards.json";

/// Shard `number`'s storage namespace, if there can be such a shard.
pub fn log_id(kind: Kind, number: u32) -> Option<LogId> {
    let (zero, first, last) = kind.namespaces();
    match number {
        0 => Some(zero),
        n => u8::try_from(n - 1).ok().and_then(|k| first.checked_add(k)).filter(|&id| id <= last),
    }
}

/// Where shard `number`'s key lives, for shards after 0 (shard 0's is the configured key).
pub fn key_path(kind: Kind, data_dir: &Path, number: u32) -> PathBuf {
    data_dir.join("keys").join(format!("{}.shard-{number}.pem", kind.cli_name()))
}

/// Shard 0's tree ID: made once, with the log.
pub fn tree_id_zero(storage: &dyn Storage) -> Result<i64, StorageError> {
    let fresh = (rand::random::<u64>() >> 1).max(1) as i64;
    let stored = storage.get_or_init_meta("rekor_v1.tree_id", &fresh.to_be_bytes())?;
    Ok(i64::from_be_bytes(
        stored.as_slice().try_into().map_err(|_| StorageError::Corrupt("rekor_v1.tree_id is not 8 bytes".into()))?,
    ))
}

/// Every shard of a log, oldest first, given shard 0's public key (SPKI DER). A Rekor v1 log
/// imported from another Rekor begins with the tree copied from it ([`import`]) instead.
pub fn registry(kind: Kind, storage: &dyn Storage, zero_spki: &[u8]) -> Result<Vec<Shard>, StorageError> {
    if kind == Kind::RekorV1 {
        if let Some(zero) = import::shard_zero(storage)? {
            return shards::load(storage, kind.registry_name(), zero);
        }
    }
    let zero = Shard {
        number: 0,
        log_id: kind.zero_log(),
        // Only Rekor v1 names its trees (in its origin); the others' origins do not need one.
        tree_id: match kind {
            Kind::RekorV1 => tree_id_zero(storage)?,
            _ => 0,
        },
        start: 0,
        spki: zero_spki.to_vec(),
        valid_from: None,
        frozen: None,
        imported: None,
    };
    shards::load(storage, kind.registry_name(), zero)
}

/// A later shard's key (a file, or beside shard 0's: [`KeyHomes`]), checked against the one
/// its record names.
pub fn shard_key(kind: Kind, data_dir: &Path, homes: &KeyHomes, shard: &Shard) -> Result<Arc<Signer>, String> {
    let place = homes.place(kind, data_dir, shard.number)?;
    if let homes::Place::File(path) = &place {
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
fn keep_key_file(kind: Kind, data_dir: &Path, number: u32, pkcs8: &[u8]) -> Result<Signer, String> {
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
    seal: Option<&sealed::SealKey>,
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
    seal: Option<&sealed::SealKey>,
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
pub fn seal_key_for(store: &dyn Storage, data_dir: &Path) -> Result<Option<Arc<sealed::SealKey>>, String> {
    let local = sealed::SealKey::load(data_dir)?;
    let recorded = store.meta(sealed::SHARED_ID).map_err(|e| e.to_string())?;
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
                None => sealed::SealKey::load_or_make(data_dir)?,
            };
            let shared = match recorded {
                Some(r) => r,
                None => store.get_or_init_meta(sealed::SHARED_ID, key.id().as_bytes()).map_err(|e| e.to_string())?,
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
    seal: Option<&sealed::SealKey>,
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
pub fn read_public(data_dir: &Path, kind: Kind) -> Result<Option<Vec<PublicShard>>, String> {
    let path = data_dir.join(PUBLIC_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let bad = |why: &str| format!("{}: {why}; `signet serve` rewrites it at start", path.display());
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let Some(list) = v.get(kind.registry_name()) else { return Ok(None) };
    let list = list.as_array().ok_or_else(|| bad(&format!("{} is not a list", kind.registry_name())))?;
    list.iter()
        .map(|s| {
            let spki = s.get("spki").and_then(Value::as_str).and_then(|k| b64::decode(k).ok()).ok_or_else(|| bad("a shard without spki"))?;
            Ok(PublicShard { spki, valid_from: s.get("valid_from").and_then(Value::as_i64), valid_to: s.get("valid_to").and_then(Value::as_i64) })
        })
        .collect::<Result<Vec<_>, String>>()
        .map(Some)
}

/// What a rotation did.
#[derive(Debug)]
pub struct Rotated {
    pub kind: Kind,
    /// The shard it froze, with its final size.
    pub frozen: Shard,
    /// The shard that is active from the next start on.
    pub active: Shard,
    /// Where the active shard's key is: its file, or its URI.
    pub key: String,
}

/// Unix seconds now (0 before 1970); the time shard windows, backups and restores record.
pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn full(kind: Kind) -> String {
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

/// [`record_rotation_of`] for Rekor v1 (its online rotation).
pub fn record_rotation(store: &dyn Storage, data_dir: &Path, list: Vec<Shard>, final_size: u64, key: &Signer) -> Result<Vec<Shard>, String> {
    record_rotation_of(Kind::RekorV1, store, data_dir, list, final_size, key)
}

/// Records a rotation: freezes the last of `list` at `final_size` (unless a cut-short rotation
/// already did) and starts the next shard with `key`, then rewrites the public list. Returns
/// the whole new list.
pub fn record_rotation_of(
    kind: Kind,
    store: &dyn Storage,
    data_dir: &Path,
    mut list: Vec<Shard>,
    final_size: u64,
    key: &Signer,
) -> Result<Vec<Shard>, String> {
    let name = kind.registry_name();
    let Some(mut active) = list.pop() else { return Err("the log has no shards".into()) };
    if active.frozen.is_none() {
        // One second past now: whatever was integrated before the freeze falls inside the window.
        active.frozen = Some(shards::freeze(store, name, &active, final_size, now() + 1).map_err(|e| e.to_string())?);
    }
    let number = active.number + 1;
    let id = log_id(kind, number).ok_or_else(|| full(kind))?;
    let proposed = Shard {
        number,
        log_id: id,
        tree_id: (rand::random::<u64>() >> 1).max(1) as i64,
        start: 0,
        spki: key.spki_der().to_vec(),
        // From now (rounded down), while the old window ends a second after now (rounded
        // up): an entry integrated in the second of the rotation falls in whichever shard took
        // it. The overlap admits nothing more, since clients pick a shard's key by its logId.
        valid_from: Some(now()),
        frozen: None,
        imported: None,
    };
    let next = shards::start(store, name, &active, &proposed).map_err(|e| e.to_string())?;
    if next.spki != proposed.spki {
        return Err(format!(
            "{} is not the key shard {number} was started with (an earlier rotation made another)",
            key_path(kind, data_dir, number).display()
        ));
    }
    list.push(active);
    list.push(next);
    write_public(data_dir, kind, &list).map_err(|e| format!("{PUBLIC_FILE}: {e}"))?;
    Ok(list)
}

/// A rotation as `signet admin log rotate` prints it (and the admin API answers it).
pub fn rotation_report(r: &Rotated) -> Value {
    let mut report = json!({
        "log": r.kind.cli_name(),
        "frozen": {"shard": r.frozen.number, "treeID": r.frozen.tree_id.to_string(), "treeSize": r.frozen.frozen.map_or(0, |f| f.size)},
        "active": {"shard": r.active.number, "treeID": r.active.tree_id.to_string(), "logID": b64::encode(signet_core::hash::sha256(&r.active.spki))},
        "key": r.key,
    });
    // Only Rekor v1's indices run on across shards; a new CT or Rekor v2 log counts from 0.
    if r.kind == Kind::RekorV1 {
        report["active"]["startIndex"] = json!(r.active.start);
    }
    report
}

/// What a Rekor v1 rotation did, from its new shard list.
pub fn rotated(list: &[Shard], data_dir: &Path, homes: &KeyHomes) -> Option<Rotated> {
    rotated_of(Kind::RekorV1, list, data_dir, homes)
}

pub(crate) fn rotated_of(kind: Kind, list: &[Shard], data_dir: &Path, homes: &KeyHomes) -> Option<Rotated> {
    let [.., frozen, active] = list else { return None };
    let key = homes.place(kind, data_dir, active.number).map_or_else(|e| e, |p| p.to_string());
    Some(Rotated { kind, frozen: frozen.clone(), active: active.clone(), key })
}

/// `signet admin log rotate --log rekor-v1|rekor-v2|ct --data-dir …`, offline: freezes the
/// active shard at its size and starts the next one with a new key. The next `serve` opens it
/// (a Rekor log with a genesis entry of its own); old shards stay in storage. Rerunning a
/// rotation that was cut short finishes it; rerunning a finished one starts yet another
/// shard. (A running instance rotates online: `POST /api/admin/log/rotate`.)
pub fn rotate(data_dir: &Path, storage: Option<&str>, log: &str, homes: &KeyHomes) -> Result<Rotated, String> {
    match rotate_kind(data_dir, storage, Kind::parse(log)?, homes)? {
        Rotation::Done(rotated) => Ok(rotated),
        Rotation::NotCreated(why) => Err(why),
    }
}

/// What an offline rotation came to.
#[derive(Debug)]
pub enum Rotation {
    Done(Rotated),
    /// The log was never created here, so there is nothing to rotate (why, for the operator).
    NotCreated(String),
}

/// The sequencer lease an offline rotation holds on PostgreSQL, given up when it ends: the
/// next rotation (`signet restore` rotates every log) or instance need not wait it out.
struct HeldLease {
    pg: Arc<signet_log::storage::PostgresStorage>,
    lease: signet_log::storage::Lease,
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        if let Err(e) = self.pg.release_lease(&self.lease) {
            tracing::warn!(error = %e, "could not give the sequencer lease up; it lapses by itself");
        }
    }
}

/// What an offline change to the logs (a rotation, an import) holds for its whole run: the
/// data dir's lock (SQLite) or the sequencer lease (PostgreSQL), so that no server writes
/// meanwhile; and the store.
pub(crate) struct Offline {
    _lock: Option<crate::datadir::DataDirLock>,
    _lease: Option<HeldLease>,
    pub store: Arc<dyn Storage>,
    pub url: StorageUrl,
}

/// Takes what [`Offline`] holds, for `command` (`signet admin log rotate`); `hint` follows
/// "stop the server first" when a server holds the data dir.
pub(crate) fn hold_offline(data_dir: &Path, storage: Option<&str>, command: &str, hint: &str) -> Result<Offline, String> {
    let url = StorageUrl::parse(storage, data_dir)?;
    Ok(match &url {
        StorageUrl::Sqlite(_) => {
            let lock = crate::datadir::DataDirLock::acquire(data_dir).map_err(|e| format!("{e} (stop the server first{hint})"))?;
            Offline { _lock: Some(lock), _lease: None, store: signet_log::storage::open(&url).map_err(|e| e.to_string())?, url }
        }
        StorageUrl::Postgres(u) => {
            let pg = Arc::new(signet_log::storage::PostgresStorage::open(u).map_err(|e| e.to_string())?);
            let Some(lease) = pg.acquire_lease(command, crate::lease::TTL).map_err(|e| e.to_string())? else {
                let holder = pg.lease_holder().ok().flatten().unwrap_or_else(|| "another instance".into());
                return Err(format!("{holder} holds the sequencer lease: stop every instance of this database first (`{command}` runs offline)"));
            };
            Offline { _lock: None, _lease: Some(HeldLease { pg: pg.clone(), lease }), store: pg, url }
        }
    })
}

/// [`rotate`] of one log, telling a log that was never created apart from a failure.
pub fn rotate_kind(data_dir: &Path, storage: Option<&str>, kind: Kind, homes: &KeyHomes) -> Result<Rotation, String> {
    let online = ", or rotate it online: signet admin log rotate --url URL --token ADMIN_TOKEN";
    // Hold off every server for the whole rotation (see the module's comment).
    let offline = hold_offline(data_dir, storage, "signet admin log rotate", online)?;
    let (store, url) = (offline.store.clone(), offline.url.clone());
    // Its public half is enough: shard 0's private key may be on a token. An imported shard
    // 0's is in its record.
    let imported = kind == Kind::RekorV1 && import::record(store.as_ref()).map_err(|e| e.to_string())?.is_some();
    let Some(zero_spki) = zero_spki(kind, data_dir)?.or_else(|| imported.then(Vec::new)) else {
        return Ok(Rotation::NotCreated(format!(
            "{} does not exist, nor its public half {}: rotate on the data dir of the instance that made the log",
            kind.zero_key_path(data_dir).display(),
            kind.zero_public_path(data_dir).display()
        )));
    };
    let list = registry(kind, store.as_ref(), &zero_spki).map_err(|e| e.to_string())?;
    let Some(active) = list.last() else { return Err("the log has no shards".into()) };
    if active.frozen.is_none() && store.latest_checkpoint(active.log_id).map_err(|e| e.to_string())?.is_none() {
        return Ok(Rotation::NotCreated(format!("the {} log has not been created yet: start `signet serve` on it once first", kind.title())));
    }
    // On shared storage the new key is sealed there too, so that every instance with this
    // data dir's seal key takes it at its next start; without one it is copied by hand.
    let seal = match &url {
        StorageUrl::Postgres(_) => seal_key_for(store.as_ref(), data_dir)?,
        StorageUrl::Sqlite(_) => None,
    };
    let key = match &seal {
        Some(seal) => offer_next_key(kind, store.as_ref(), Some(seal), data_dir, homes, &list)?.1,
        None => next_key_of(kind, data_dir, homes, &list)?.2,
    };
    // Frozen in storage too (idempotent), so that no commit can grow it past its record.
    let size = match active.frozen {
        Some(f) => f.size,
        None => store.freeze(active.log_id).map_err(|e| e.to_string())?,
    };
    let list = record_rotation_of(kind, store.as_ref(), data_dir, list, size, &key)?;
    rotated_of(kind, &list, data_dir, homes).map(Rotation::Done).ok_or_else(|| "the rotation recorded no new shard".into())
}

/// The rotations a crash (or a lost connection) cut short, one line each, from what storage
/// holds ([`signet_log::storage::shard_records`]; `signet doctor`): a newest shard with a
/// frozen record and none after it, or frozen in storage (PostgreSQL) with no frozen record.
/// Either way its log takes no appends until the rotation is run again.
pub fn unfinished_rotations(found: &signet_log::storage::ShardRecords) -> Vec<String> {
    let has = |key: &str| found.records.iter().any(|(k, _)| k == key);
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let name = kind.registry_name();
        // Shard 0 has no record of its own; each later one has, in order.
        let newest = (1..=kind.room()).take_while(|n| has(&format!("{name}.shard.{n}"))).last().unwrap_or(0);
        let rerun = format!("run `signet admin log rotate --log {}` again to finish it", kind.cli_name());
        if has(&format!("{name}.shard.{newest}.frozen")) {
            out.push(format!("the {} log's newest shard ({newest}) is frozen and no shard follows it: a rotation was cut short; {rerun}", kind.title()));
        } else if log_id(kind, newest).is_some_and(|id| found.frozen.contains(&id)) {
            out.push(format!(
                "the {} log's newest shard ({newest}) is frozen in storage but not recorded as rotated: a rotation was cut short; {rerun}",
                kind.title()
            ));
        }
    }
    out
}

/// The frozen shards of `list`, checked against storage: each stored tree has the size it was
/// frozen at. (A frozen CT or Rekor v2 log is not opened: its entries and final checkpoint
/// stay in storage, and bundles carry their own proofs.)
pub fn check_frozen(kind: Kind, storage: &dyn Storage, list: &[Shard]) -> Result<(), String> {
    for shard in list {
        let Some(frozen) = shard.frozen else { continue };
        let size = storage.latest_checkpoint(shard.log_id).map_err(|e| e.to_string())?.map_or(0, |c| c.size);
        if size != frozen.size {
            return Err(format!(
                "{} shard {} was frozen at size {}, but its stored tree has size {size}",
                kind.title(),
                shard.number,
                frozen.size
            ));
        }
    }
    Ok(())
}

/// Opens a shard's log: at start, and for the new shard of an online rotation.
#[derive(Clone)]
pub struct ShardOpener {
    pub storage: Arc<dyn Storage>,
    /// On PostgreSQL: the queue, for the active shard. Its role is this instance's when it
    /// opens: the sequencer's once it holds the lease ([`crate::lease::holding`]).
    pub shared: Option<Arc<signet_log::storage::PostgresStorage>>,
    /// On PostgreSQL: what seals new shards' keys for the other instances ([`sealed`]);
    /// `None` when this data dir's is missing or not theirs.
    pub seal: Option<Arc<sealed::SealKey>>,
    /// Where later shards' keys are made and found.
    pub homes: KeyHomes,
    pub data_dir: PathBuf,
    pub host: String,
    pub batch: signet_log::BatchPolicy,
    /// The CT log's: certificates wait on their SCT, so its batches are cut sooner.
    pub ct_batch: signet_log::BatchPolicy,
    pub max_pending: usize,
    pub tile_cache: usize,
    /// The Rekor v2 log's checkpoints' second signature, for witnesses (`[log.witnesses]`).
    pub v2_note_key: Option<Arc<signet_keys::NoteSigner>>,
}

/// How long a follower waits for the sequencer to make a new shard, or to reach a frozen
/// size, before it gives up for this round (the next look tries again).
pub const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(10);

impl ShardOpener {
    /// Opens Rekor v1 `shard` with `key` ([`ShardOpener::open_kind`]).
    pub async fn open(&self, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::Log, crate::StartError> {
        self.open_kind(Kind::RekorV1, shard, key).await
    }

    /// What `kind`'s `shard` is opened with: its origin, its genesis entry (a Rekor log's
    /// active shard begins with one) and its batches.
    fn config(&self, kind: Kind, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::LogConfig, crate::StartError> {
        let genesis = |made: Result<(Vec<u8>, String), signet_log::rekor::EntryError>| match shard.frozen {
            None => made
                .map(|(body, digest)| Some(signet_log::Genesis { body, digest: Some(digest.into_bytes()) }))
                .map_err(|e| crate::StartError::Genesis(e.to_string())),
            Some(_) => Ok(None),
        };
        let host = self.host.clone();
        Ok(match (kind, shard.imported.clone()) {
            // Origin "<host> - <tree ID>", as sigstore-go's v1 checkpoint path expects.
            // A shard copied from another Rekor keeps that log's names: its checkpoint is
            // the one that log signed. It is frozen, so it makes no genesis entry and no SET.
            (Kind::RekorV1, Some(names)) => {
                signet_log::LogConfig {
                    id: shard.log_id,
                    genesis: None,
                    origin: names.origin,
                    key_name: names.key_name,
                    stamper: None,
                    key,
                    batch: self.batch,
                    max_pending: self.max_pending,
                    tile_cache: self.tile_cache,
                    note_key: None,
                }
            }
            (Kind::RekorV1, None) => {
                let origin = format!("{host} - {}", shard.tree_id);
                signet_log::LogConfig {
                    id: shard.log_id,
                    genesis: genesis(signet_log::rekor::genesis::v1_entry(&key, &origin))?,
                    origin,
                    key_name: host,
                    stamper: Some(Arc::new(signet_log::rekor::v1::SetSigner::for_shard(key.clone(), shard.start))),
                    key,
                    batch: self.batch,
                    max_pending: self.max_pending,
                    tile_cache: self.tile_cache,
                    note_key: None,
                }
            }
            // The bare host of the log's base URL, in every shard: sigstore-go checks a v2
            // checkpoint's origin against that host. A new shard is told apart by its key.
            (Kind::RekorV2, _) => signet_log::LogConfig {
                id: shard.log_id,
                genesis: genesis(signet_log::rekor::genesis::v2_entry(&key, &host))?,
                origin: host.clone(),
                key_name: host,
                key,
                batch: self.batch,
                stamper: None,
                max_pending: self.max_pending,
                tile_cache: self.tile_cache,
                note_key: self.v2_note_key.clone(),
            },
            // Its key names it (the SCTs' log ID); its checkpoints are internal.
            (Kind::Ct, _) => signet_log::LogConfig {
                id: shard.log_id,
                origin: match shard.number {
                    0 => format!("{host}/ct"),
                    n => format!("{host}/ct/{n}"),
                },
                key_name: host,
                key,
                batch: self.ct_batch,
                stamper: None,
                // Certificates are bounded by the CA's own admission (one CT entry each).
                max_pending: 0,
                genesis: None,
                tile_cache: self.tile_cache,
                note_key: None,
            },
        })
    }

    /// Opens `kind`'s `shard` with `key`. An active shard is shared with the other instances
    /// (as sequencer once this instance holds the lease); a frozen one takes no appends, so
    /// it is opened alone, and its stored tree must have the size it was frozen at.
    pub async fn open_kind(&self, kind: Kind, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::Log, crate::StartError> {
        let cfg = self.config(kind, shard, key)?;
        let log = match (&self.shared, shard.frozen) {
            (Some(pg), None) => {
                let role = if crate::lease::holding() { signet_log::Role::Sequencer } else { signet_log::Role::Follower };
                signet_log::Log::open_shared(cfg, self.storage.clone(), pg.clone(), role).await?
            }
            _ => signet_log::Log::open(cfg, self.storage.clone()).await?,
        };
        if let Some(frozen) = shard.frozen {
            let size = log.head().checkpoint.size;
            if size != frozen.size {
                return Err(crate::StartError::Shards(format!(
                    "{} shard {} was frozen at size {}, but its stored tree has size {size}",
                    kind.title(),
                    shard.number,
                    frozen.size
                )));
            }
        }
        Ok(log)
    }

    /// Opens a new active shard after a rotation: as its sequencer when this instance holds
    /// the lease (which writes a Rekor log's genesis entry), else once the sequencer has made
    /// it, waiting at most [`CATCH_UP`].
    pub async fn open_active(&self, kind: Kind, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::Log, String> {
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            if self.shared.is_none() || crate::lease::holding() {
                break;
            }
            let made = self.storage.latest_checkpoint_async(shard.log_id).await.map_err(|e| e.to_string())?;
            if made.is_some() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("the sequencer has not made {} shard {} within {CATCH_UP:?}", kind.title(), shard.number));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let log = self.open_kind(kind, shard, key).await.map_err(|e| e.to_string())?;
        log.genesis_written().await.map_err(|e| e.to_string())?;
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_namespaces_never_meet_the_other_logs() {
        assert_eq!(log_id(Kind::RekorV1, 0), Some(1));
        assert_eq!(log_id(Kind::RekorV1, 1), Some(16));
        assert_eq!(log_id(Kind::RekorV1, 112), Some(127));
        assert_eq!(log_id(Kind::RekorV1, 113), None);
        assert_eq!(log_id(Kind::Ct, 0), Some(3));
        assert_eq!(log_id(Kind::Ct, 1), Some(128));
        assert_eq!(log_id(Kind::Ct, 65), None);
        assert_eq!(log_id(Kind::RekorV2, 0), Some(2));
        assert_eq!(log_id(Kind::RekorV2, 64), Some(255));
        assert_eq!(log_id(Kind::RekorV2, 65), None);
        // No namespace is two logs' (nor one of the others in state.rs, which has none).
        let mut all: Vec<LogId> = Kind::ALL.iter().flat_map(|&k| (0..=200).filter_map(move |n| log_id(k, n))).collect();
        let count = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), count);
        assert_eq!(count, 113 + 65 + 65);
    }

    #[test]
    fn the_public_list_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_public(dir.path(), Kind::RekorV1).unwrap(), None);
        let s = |n, spki: u8, from, frozen| Shard {
            number: n,
            log_id: log_id(Kind::RekorV1, n).unwrap(),
            tree_id: 1,
            start: 0,
            spki: vec![spki],
            valid_from: from,
            frozen,
            imported: None,
        };
        write_public(
            dir.path(),
            Kind::RekorV1,
            &[s(0, 1, None, Some(signet_log::shards::Frozen { size: 3, valid_to: 50 })), s(1, 2, Some(50), None)],
        )
        .unwrap();
        // Each log's list is its own: writing one keeps the others.
        assert_eq!(read_public(dir.path(), Kind::Ct).unwrap(), None);
        write_public(dir.path(), Kind::Ct, &[s(0, 3, None, None)]).unwrap();
        assert_eq!(read_public(dir.path(), Kind::Ct).unwrap().unwrap()[0].spki, vec![3]);
        assert_eq!(
            read_public(dir.path(), Kind::RekorV1).unwrap().unwrap(),
            vec![
                PublicShard { spki: vec![1], valid_from: None, valid_to: Some(50) },
                PublicShard { spki: vec![2], valid_from: Some(50), valid_to: None }
            ]
        );
        std::fs::write(dir.path().join(PUBLIC_FILE), "{").unwrap();
        assert!(read_public(dir.path(), Kind::RekorV1).unwrap_err().contains("log-shards.json"));
    }
}
