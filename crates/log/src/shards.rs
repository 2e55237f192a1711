//! Log shards, as Rekor has them: a log cut into trees, each with its own key, tree ID and
//! origin, so that it can grow without one tree (or one key) growing forever.
//!
//! Rotation freezes the active tree at its size and starts the next. Frozen shards stay
//! readable and provable. Indices are virtual across shards: entry `i` of shard `n` is entry
//! `start(n) + i` of the log as a whole, where `start(n)` is the sum of the frozen sizes
//! before it.
//!
//! The registry is a chain of set-once values in storage ([`Storage::get_or_init_meta`]):
//! every instance of a database reads the same shards, and a rotation cut short by a crash
//! is finished by running it again, which finds what the first run wrote.
//! - `<kind>.shard.<n>` (n ≥ 1): the shard's storage namespace, tree ID, start, key and the
//!   start of its validity;
//! - `<kind>.shard.<n>.frozen`: its final size and the end of its validity.
//!
//! Shard 0 is the log as it was before any rotation, described by the caller; only its
//! `frozen` value is stored.

use serde_json::{json, Value};
use signet_core::b64;

use crate::storage::{LogId, Storage, StorageError};

/// One tree of a sharded log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub number: u32,
    /// Its storage namespace.
    pub log_id: LogId,
    pub tree_id: i64,
    /// The virtual index of its entry 0.
    pub start: u64,
    /// SPKI DER of its key.
    pub spki: Vec<u8>,
    /// Unix seconds from which its key signs; `None` for shard 0 (the instance's own start).
    pub valid_from: Option<i64>,
    pub frozen: Option<Frozen>,
    /// A tree copied from another log (`signet import rekor`), served under that log's
    /// origin and key name; `None` for the shards this log made.
    pub imported: Option<Imported>,
}

/// Where an imported shard came from, and the names its checkpoints carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// Its checkpoints' origin line (Rekor's `<host> - <tree ID>`).
    pub origin: String,
    /// The name its checkpoints are signed under.
    pub key_name: String,
}

/// The end of a shard: no entry is ever added to it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frozen {
    pub size: u64,
    /// Unix seconds after which its key signs nothing new.
    pub valid_to: i64,
}

fn shard_key(kind: &str, number: u32) -> String {
    format!("{kind}.shard.{number}")
}

fn frozen_key(kind: &str, number: u32) -> String {
    format!("{kind}.shard.{number}.frozen")
}

fn corrupt(key: &str, why: impl std::fmt::Display) -> StorageError {
    StorageError::Corrupt(format!("shard record {key}: {why}"))
}

fn int(v: &Value, key: &str, field: &str) -> Result<i64, StorageError> {
    v.get(field).and_then(Value::as_i64).ok_or_else(|| corrupt(key, format!("{field} is missing or not an integer")))
}

fn parse_frozen(key: &str, bytes: &[u8]) -> Result<Frozen, StorageError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| corrupt(key, e))?;
    let size = u64::try_from(int(&v, key, "size")?).map_err(|_| corrupt(key, "size is negative"))?;
    Ok(Frozen { size, valid_to: int(&v, key, "valid_to")? })
}

fn parse_shard(key: &str, number: u32, bytes: &[u8]) -> Result<Shard, StorageError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| corrupt(key, e))?;
    let log_id = LogId::try_from(int(&v, key, "log_id")?).map_err(|_| corrupt(key, "log_id is out of range"))?;
    let start = u64::try_from(int(&v, key, "start")?).map_err(|_| corrupt(key, "start is negative"))?;
    let spki = v
        .get("spki")
        .and_then(Value::as_str)
        .and_then(|s| b64::decode(s).ok())
        .ok_or_else(|| corrupt(key, "spki is missing or not base64"))?;
    Ok(Shard {
        number,
        log_id,
        tree_id: int(&v, key, "tree_id")?,
        start,
        spki,
        valid_from: Some(int(&v, key, "valid_from")?),
        frozen: None,
        imported: None,
    })
}

/// Every shard of `kind`, oldest first, beginning with `zero`; the last one is active unless
/// a rotation stopped between freezing it and starting the next.
pub fn load(storage: &dyn Storage, kind: &str, zero: Shard) -> Result<Vec<Shard>, StorageError> {
    let mut shards = vec![zero];
    loop {
        let last = shards.len() - 1;
        let number = shards[last].number;
        let key = frozen_key(kind, number);
        if let Some(bytes) = storage.meta(&key)? {
            shards[last].frozen = Some(parse_frozen(&key, &bytes)?);
        }
        let key = shard_key(kind, number + 1);
        let Some(bytes) = storage.meta(&key)? else { break };
        let next = parse_shard(&key, number + 1, &bytes)?;
        let Some(frozen) = shards[last].frozen else {
            return Err(corrupt(&key, format!("shard {} is not frozen, yet shard {} follows it", number, number + 1)));
        };
        if next.start != shards[last].start + frozen.size {
            return Err(corrupt(
                &key,
                format!("starts at {}, but shard {number} ends at {}", next.start, shards[last].start + frozen.size),
            ));
        }
        shards.push(next);
    }
    Ok(shards)
}

/// Whether `active`, the newest shard a reader knows of, has moved on in storage: frozen, or
/// followed by another. Two reads however many shards there are, for a reader that looks
/// often ([`load`] reads them all).
pub fn moved_on(storage: &dyn Storage, kind: &str, active: &Shard) -> Result<bool, StorageError> {
    Ok(storage.meta(&frozen_key(kind, active.number))?.is_some() || storage.meta(&shard_key(kind, active.number + 1))?.is_some())
}

/// Freezes `shard` at `size` from `valid_to` on. Set once: if it was frozen before (a rotation
/// that is being finished), the stored end is returned, and a different size is an error.
pub fn freeze(storage: &dyn Storage, kind: &str, shard: &Shard, size: u64, valid_to: i64) -> Result<Frozen, StorageError> {
    let key = frozen_key(kind, shard.number);
    let value = json!({"size": size, "valid_to": valid_to}).to_string();
    let stored = parse_frozen(&key, &storage.get_or_init_meta(&key, value.as_bytes())?)?;
    if stored.size != size {
        return Err(corrupt(&key, format!("was frozen at size {}, but the stored tree has size {size}", stored.size)));
    }
    Ok(stored)
}

/// Records `next` as the shard after the frozen `prev`. Set once: if a shard of that number
/// was recorded before (a rotation that is being finished), that one is returned.
pub fn start(storage: &dyn Storage, kind: &str, prev: &Shard, next: &Shard) -> Result<Shard, StorageError> {
    let Some(frozen) = prev.frozen else {
        return Err(StorageError::Corrupt(format!("shard {} of {kind} must be frozen before the next starts", prev.number)));
    };
    let key = shard_key(kind, prev.number + 1);
    let value = json!({
        "log_id": next.log_id,
        "tree_id": next.tree_id,
        "start": prev.start + frozen.size,
        "spki": b64::encode(&next.spki),
        "valid_from": next.valid_from.unwrap_or(frozen.valid_to),
    })
    .to_string();
    parse_shard(&key, prev.number + 1, &storage.get_or_init_meta(&key, value.as_bytes())?)
}

/// Whether shard `number` of `kind` is recorded as frozen.
pub fn is_frozen(storage: &dyn Storage, kind: &str, number: u32) -> Result<bool, StorageError> {
    Ok(storage.meta(&frozen_key(kind, number))?.is_some())
}

/// The shard holding virtual index `index`, and the index within it, among shards whose
/// current sizes are `sizes` (the frozen size, or the active tree's).
pub fn locate(shards: &[Shard], sizes: &[u64], index: u64) -> Option<(usize, u64)> {
    shards
        .iter()
        .zip(sizes)
        .enumerate()
        .find(|(_, (s, &size))| index >= s.start && index - s.start < size)
        .map(|(i, (s, _))| (i, index - s.start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::SqliteStorage;

    fn zero() -> Shard {
        Shard { number: 0, log_id: 1, tree_id: 7, start: 0, spki: vec![1], valid_from: None, frozen: None, imported: None }
    }

    fn next(log_id: LogId, tree_id: i64) -> Shard {
        Shard { number: 0, log_id, tree_id, start: 0, spki: vec![log_id], valid_from: Some(100), frozen: None, imported: None }
    }

    #[test]
    fn rotations_chain_and_a_cut_short_one_is_finished_by_rerunning_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap();
        assert_eq!(load(&s, "v1", zero()).unwrap(), vec![zero()]);
        assert!(!moved_on(&s, "v1", &zero()).unwrap());

        let shards = load(&s, "v1", zero()).unwrap();
        freeze(&s, "v1", &shards[0], 10, 100).unwrap();
        // A reader that knows shard 0 as active sees it moved on, frozen before anything follows.
        assert!(moved_on(&s, "v1", &zero()).unwrap());
        // Cut short here: shard 0 is frozen, nothing follows yet.
        let shards = load(&s, "v1", zero()).unwrap();
        assert_eq!(shards.len(), 1);
        assert_eq!(shards[0].frozen, Some(Frozen { size: 10, valid_to: 100 }));
        // Rerun: the freeze is found (same size), the next shard starts where shard 0 ends.
        freeze(&s, "v1", &shards[0], 10, 999).unwrap();
        let one = start(&s, "v1", &shards[0], &next(16, 8)).unwrap();
        assert_eq!((one.number, one.start, one.tree_id, one.valid_from), (1, 10, 8, Some(100)));
        // A second start of shard 1 returns the first one's record.
        assert_eq!(start(&s, "v1", &shards[0], &next(99, 9)).unwrap(), one);

        let shards = load(&s, "v1", zero()).unwrap();
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[1], one);
        assert!(!moved_on(&s, "v1", &one).unwrap());
        assert!(moved_on(&s, "v1", &shards[0]).unwrap());
        // A refreeze at another size is refused: the tree would have changed after its end.
        assert!(freeze(&s, "v1", &shards[0], 11, 100).is_err());

        freeze(&s, "v1", &shards[1], 5, 200).unwrap();
        let two = start(&s, "v1", &load(&s, "v1", zero()).unwrap()[1], &next(17, 9)).unwrap();
        assert_eq!(two.start, 15);
        let shards = load(&s, "v1", zero()).unwrap();
        let sizes = [10, 5, 3];
        assert_eq!(locate(&shards, &sizes, 0), Some((0, 0)));
        assert_eq!(locate(&shards, &sizes, 9), Some((0, 9)));
        assert_eq!(locate(&shards, &sizes, 10), Some((1, 0)));
        assert_eq!(locate(&shards, &sizes, 16), Some((2, 1)));
        assert_eq!(locate(&shards, &sizes, 18), None);
        // Other kinds are separate.
        assert_eq!(load(&s, "v2", zero()).unwrap().len(), 1);
    }

    #[test]
    fn a_shard_that_follows_an_unfrozen_one_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap();
        s.get_or_init_meta("v1.shard.1", br#"{"log_id":16,"tree_id":1,"start":0,"spki":"AQ==","valid_from":1}"#).unwrap();
        assert!(matches!(load(&s, "v1", zero()), Err(StorageError::Corrupt(_))));
        s.get_or_init_meta("v1.shard.0.frozen", br#"{"size":4,"valid_to":1}"#).unwrap();
        let e = load(&s, "v1", zero()).unwrap_err().to_string();
        assert!(e.contains("starts at 0, but shard 0 ends at 4"), "{e}");
    }
}
