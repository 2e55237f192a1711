//! The Rekor v1 log's shards in an instance (see [`signet_log::shards`]): which storage
//! namespace and key file each one has, `signet admin log rotate`, and the public list of
//! shard keys that the trust documents are made from.
//!
//! Rotation is offline: every instance of the database is stopped first. On SQLite the data
//! dir's lock proves it; on PostgreSQL the sequencer lease does (a running follower cannot
//! be seen, so the docs say to stop them too: it would go on queueing into the frozen shard).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use signet_core::b64;
use signet_core::keys::SigningKey;
use signet_log::shards::{self, Shard};
use signet_log::storage::{LogId, Storage, StorageError, StorageUrl};

/// The registry's name for the Rekor v1 log.
pub const KIND: &str = "rekor_v1";
/// Storage namespace of shard 0: the log as it was before any rotation. Never renumber.
pub const SHARD_ZERO_LOG: LogId = 1;
/// Storage namespaces of shards 1, 2, …: 16 up to 127. Never renumber: they are on disk.
const FIRST_LATER_LOG: LogId = 16;
const LAST_LATER_LOG: LogId = 127;
/// The file beside the keys that lists every shard's public key and validity.
const PUBLIC_FILE: &str = "log-shards.json";

/// Shard `number`'s storage namespace, if there can be such a shard.
pub fn log_id(number: u32) -> Option<LogId> {
    match number {
        0 => Some(SHARD_ZERO_LOG),
        n => u8::try_from(n - 1).ok().and_then(|k| FIRST_LATER_LOG.checked_add(k)).filter(|&id| id <= LAST_LATER_LOG),
    }
}

/// Where shard `number`'s key lives, for shards after 0 (shard 0's is `keys.rekor_v1`).
pub fn key_path(data_dir: &Path, number: u32) -> PathBuf {
    data_dir.join("keys").join(format!("rekor-v1.shard-{number}.pem"))
}

/// Shard 0's tree ID: made once, with the log.
pub fn tree_id_zero(storage: &dyn Storage) -> Result<i64, StorageError> {
    let fresh = (rand::random::<u64>() >> 1).max(1) as i64;
    let stored = storage.get_or_init_meta("rekor_v1.tree_id", &fresh.to_be_bytes())?;
    Ok(i64::from_be_bytes(
        stored.as_slice().try_into().map_err(|_| StorageError::Corrupt("rekor_v1.tree_id is not 8 bytes".into()))?,
    ))
}

/// Every shard of the Rekor v1 log, oldest first, given shard 0's key.
pub fn registry(storage: &dyn Storage, zero_key: &SigningKey) -> Result<Vec<Shard>, StorageError> {
    let zero = Shard {
        number: 0,
        log_id: SHARD_ZERO_LOG,
        tree_id: tree_id_zero(storage)?,
        start: 0,
        spki: zero_key.spki_der().to_vec(),
        valid_from: None,
        frozen: None,
    };
    shards::load(storage, KIND, zero)
}

/// A later shard's key, checked against the one its record names.
pub fn shard_key(data_dir: &Path, shard: &Shard) -> Result<Arc<SigningKey>, String> {
    let path = key_path(data_dir, shard.number);
    if !path.exists() {
        return Err(format!(
            "{} is missing: the key of Rekor v1 shard {} (made by `signet admin log rotate`); copy it from the instance that rotated the log",
            path.display(),
            shard.number
        ));
    }
    let key = SigningKey::load_or_generate(&path).map_err(|e| e.to_string())?;
    if key.spki_der() != shard.spki {
        return Err(format!("{} is not the key Rekor v1 shard {} was started with", path.display(), shard.number));
    }
    Ok(Arc::new(key))
}

/// One shard's public key and validity, as the trust documents list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicShard {
    pub spki: Vec<u8>,
    /// Unix seconds; `None`: from the instance's start.
    pub valid_from: Option<i64>,
    pub valid_to: Option<i64>,
}

/// Writes `<data dir>/log-shards.json`, the shard list `signet trust export` reads. It is
/// derived from storage (by `serve` at every start, and by a rotation), never the truth.
pub fn write_public(data_dir: &Path, shards: &[Shard]) -> std::io::Result<()> {
    let list: Vec<Value> = shards
        .iter()
        .map(|s| json!({"spki": b64::encode(&s.spki), "valid_from": s.valid_from, "valid_to": s.frozen.map(|f| f.valid_to)}))
        .collect();
    let text = serde_json::to_string_pretty(&json!({ KIND: list })).unwrap_or_default() + "\n";
    signet_core::files::write_atomic(&data_dir.join(PUBLIC_FILE), text.as_bytes(), 0o600)
}

/// The shard list of `<data dir>/log-shards.json`, if the file exists.
pub fn read_public(data_dir: &Path) -> Result<Option<Vec<PublicShard>>, String> {
    let path = data_dir.join(PUBLIC_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let bad = |why: &str| format!("{}: {why}; `signet serve` rewrites it at start", path.display());
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let list = v.get(KIND).and_then(Value::as_array).ok_or_else(|| bad("no rekor_v1 list"))?;
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
    /// The shard it froze, with its final size.
    pub frozen: Shard,
    /// The shard that is active from the next start on.
    pub active: Shard,
    pub key_path: PathBuf,
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// The key of the shard after the last of `list`, made if it is not there yet (so made before
/// anything is frozen: a failure here changes nothing).
pub fn next_key(data_dir: &Path, list: &[Shard]) -> Result<(u32, PathBuf, SigningKey), String> {
    let number = list.last().map_or(1, |s| s.number + 1);
    if log_id(number).is_none() {
        return Err(format!("Rekor v1 has room for {} shards; it has them all", LAST_LATER_LOG - FIRST_LATER_LOG + 2));
    }
    let path = key_path(data_dir, number);
    let key = SigningKey::load_or_generate(&path).map_err(|e| e.to_string())?;
    Ok((number, path, key))
}

/// Records a rotation: freezes the last of `list` at `final_size` (unless a cut-short rotation
/// already did) and starts the next shard with `key`, then rewrites the public list. Returns
/// the whole new list.
pub fn record_rotation(
    store: &dyn Storage,
    data_dir: &Path,
    mut list: Vec<Shard>,
    final_size: u64,
    key: &SigningKey,
) -> Result<Vec<Shard>, String> {
    let Some(mut active) = list.pop() else { return Err("the log has no shards".into()) };
    if active.frozen.is_none() {
        // One second past now: whatever was integrated before the freeze falls inside the window.
        active.frozen = Some(shards::freeze(store, KIND, &active, final_size, now() + 1).map_err(|e| e.to_string())?);
    }
    let number = active.number + 1;
    let id = log_id(number).ok_or_else(|| format!("Rekor v1 has room for {} shards; it has them all", LAST_LATER_LOG - FIRST_LATER_LOG + 2))?;
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
    };
    let next = shards::start(store, KIND, &active, &proposed).map_err(|e| e.to_string())?;
    if next.spki != proposed.spki {
        return Err(format!(
            "{} is not the key shard {number} was started with (an earlier rotation made another)",
            key_path(data_dir, number).display()
        ));
    }
    list.push(active);
    list.push(next);
    write_public(data_dir, &list).map_err(|e| format!("{PUBLIC_FILE}: {e}"))?;
    Ok(list)
}

/// A rotation as `signet admin log rotate` prints it (and the admin API answers it).
pub fn rotation_report(r: &Rotated) -> Value {
    json!({
        "frozen": {"shard": r.frozen.number, "treeID": r.frozen.tree_id.to_string(), "treeSize": r.frozen.frozen.map_or(0, |f| f.size)},
        "active": {"shard": r.active.number, "treeID": r.active.tree_id.to_string(), "startIndex": r.active.start},
        "key": r.key_path.display().to_string(),
    })
}

/// What a rotation did, from its new shard list.
pub fn rotated(list: &[Shard], data_dir: &Path) -> Option<Rotated> {
    let [.., frozen, active] = list else { return None };
    Some(Rotated { frozen: frozen.clone(), active: active.clone(), key_path: key_path(data_dir, active.number) })
}

/// `signet admin log rotate --log rekor-v1 --data-dir …`, offline: freezes the active shard at
/// its size and starts the next one with a new key and tree ID (so a new origin). The next
/// `serve` opens it and writes its genesis entry; old shards stay readable and provable.
/// Rerunning a rotation that was cut short finishes it; rerunning a finished one starts yet
/// another shard. (A running SQLite instance rotates online: `POST /api/admin/log/rotate`.)
pub fn rotate(data_dir: &Path, storage: Option<&str>, log: &str) -> Result<Rotated, String> {
    check_log_name(log)?;
    let url = StorageUrl::parse(storage, data_dir)?;
    // Hold off every server for the whole rotation (see the module's comment).
    let (_lock, store): (Option<crate::datadir::DataDirLock>, Arc<dyn Storage>) = match &url {
        StorageUrl::Sqlite(_) => {
            let lock = crate::datadir::DataDirLock::acquire(data_dir).map_err(|e| {
                format!("{e} (stop the server first, or rotate it online: signet admin log rotate --url URL --token ADMIN_TOKEN)")
            })?;
            (Some(lock), signet_log::storage::open(&url).map_err(|e| e.to_string())?)
        }
        StorageUrl::Postgres(u) => {
            let pg = signet_log::storage::PostgresStorage::open(u).map_err(|e| e.to_string())?;
            if pg.acquire_lease("signet admin log rotate", crate::lease::TTL).map_err(|e| e.to_string())?.is_none() {
                let holder = pg.lease_holder().ok().flatten().unwrap_or_else(|| "another instance".into());
                return Err(format!("{holder} holds the sequencer lease: stop every instance of this database first (rotation is offline)"));
            }
            (None, Arc::new(pg))
        }
    };
    let zero_path = data_dir.join("keys").join("rekor-v1.pem");
    if !zero_path.exists() {
        return Err(format!("{} does not exist: rotate on the data dir of the instance that made the log", zero_path.display()));
    }
    let zero_key = SigningKey::load_or_generate(&zero_path).map_err(|e| e.to_string())?;
    let list = registry(store.as_ref(), &zero_key).map_err(|e| e.to_string())?;
    let Some(active) = list.last() else { return Err("the log has no shards".into()) };
    let size = match active.frozen {
        Some(f) => f.size,
        None => match store.latest_checkpoint(active.log_id).map_err(|e| e.to_string())? {
            Some(head) => head.size,
            None => return Err("the Rekor v1 log has not been created yet: start `signet serve` on it once first".into()),
        },
    };
    let (_, _, key) = next_key(data_dir, &list)?;
    let list = record_rotation(store.as_ref(), data_dir, list, size, &key)?;
    rotated(&list, data_dir).ok_or_else(|| "the rotation recorded no new shard".into())
}

pub fn check_log_name(log: &str) -> Result<(), String> {
    match log {
        "rekor-v1" => Ok(()),
        _ => Err(format!(
            "--log {log:?}: only rekor-v1 has shards. A Rekor v2 log is rotated by starting a new log under a new host name, which its clients take as the log's origin"
        )),
    }
}

/// Opens a shard's log: at start, and for the new shard of an online rotation.
pub struct ShardOpener {
    pub storage: Arc<dyn Storage>,
    /// On PostgreSQL: the queue and this instance's role, for the active shard.
    pub shared: Option<(Arc<signet_log::storage::PostgresStorage>, signet_log::Role)>,
    pub data_dir: PathBuf,
    pub host: String,
    pub batch: signet_log::BatchPolicy,
    pub max_pending: usize,
    pub tile_cache: usize,
}

impl ShardOpener {
    /// Opens `shard` with `key`. An active shard begins with its genesis entry and is shared
    /// with the other instances; a frozen one takes no appends, so it is opened alone.
    pub async fn open(&self, shard: &Shard, key: Arc<SigningKey>) -> Result<signet_log::Log, crate::StartError> {
        let origin = format!("{} - {}", self.host, shard.tree_id);
        let genesis = match shard.frozen {
            None => Some(
                signet_log::rekor::genesis::v1_entry(&key, &origin)
                    .map(|(body, digest)| signet_log::Genesis { body, digest: Some(digest.into_bytes()) })
                    .map_err(|e| crate::StartError::Genesis(e.to_string()))?,
            ),
            Some(_) => None,
        };
        let cfg = signet_log::LogConfig {
            id: shard.log_id,
            genesis,
            origin,
            key_name: self.host.clone(),
            key: key.clone(),
            batch: self.batch,
            stamper: Some(Arc::new(signet_log::rekor::v1::SetSigner::for_shard(key, shard.start))),
            max_pending: self.max_pending,
            tile_cache: self.tile_cache,
        };
        let log = match (&self.shared, shard.frozen) {
            (Some((pg, role)), None) => signet_log::Log::open_shared(cfg, self.storage.clone(), pg.clone(), *role).await?,
            _ => signet_log::Log::open(cfg, self.storage.clone()).await?,
        };
        if let Some(frozen) = shard.frozen {
            let size = log.head().checkpoint.size;
            if size != frozen.size {
                return Err(crate::StartError::Shards(format!(
                    "Rekor v1 shard {} was frozen at size {}, but its stored tree has size {size}",
                    shard.number, frozen.size
                )));
            }
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_namespaces_never_meet_the_other_logs() {
        assert_eq!(log_id(0), Some(1));
        assert_eq!(log_id(1), Some(16));
        assert_eq!(log_id(112), Some(127));
        assert_eq!(log_id(113), None);
        // Rekor v2 is 2 and CT is 3 (state.rs).
        assert!((1..=200).filter_map(log_id).all(|id| id != 2 && id != 3));
    }

    #[test]
    fn the_public_list_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_public(dir.path()).unwrap(), None);
        let s = |n, spki: u8, from, frozen| Shard {
            number: n,
            log_id: log_id(n).unwrap(),
            tree_id: 1,
            start: 0,
            spki: vec![spki],
            valid_from: from,
            frozen,
        };
        write_public(
            dir.path(),
            &[s(0, 1, None, Some(signet_log::shards::Frozen { size: 3, valid_to: 50 })), s(1, 2, Some(50), None)],
        )
        .unwrap();
        assert_eq!(
            read_public(dir.path()).unwrap().unwrap(),
            vec![
                PublicShard { spki: vec![1], valid_from: None, valid_to: Some(50) },
                PublicShard { spki: vec![2], valid_from: Some(50), valid_to: None }
            ]
        );
        std::fs::write(dir.path().join(PUBLIC_FILE), "{").unwrap();
        assert!(read_public(dir.path()).unwrap_err().contains("log-shards.json"));
    }
}
