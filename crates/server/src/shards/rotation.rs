//! `signet admin log rotate`, offline: the active shard frozen and the next started, with
//! the rotation's record, and the proof that no instance runs meanwhile ([`Offline`]).

use signet_core::b64;
use crate::config::ConfigError;
use crate::shards::error::{NotCreated, ShardError};
use crate::shards::homes::KeyHomes;
use crate::shards::keys::{next_key_of, offer_next_key};
use crate::shards::keys::seal_key_for;
use crate::shards::keys::zero_spki;
use crate::shards::kind::Kind;
use crate::shards::kind::key_path;
use crate::shards::kind::log_id;
use crate::shards::kind::now;
use crate::shards::public::write_public;
use crate::shards::registry::registry;
use serde_json::Value;
use serde_json::json;
use signet_keys::Signer;
use signet_log::shards::{self, Shard};
use signet_log::storage::Storage;
use signet_log::storage::StorageUrl;
use std::path::Path;
use std::sync::Arc;

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

/// [`record_rotation_of`] for Rekor v1 (its online rotation).
pub fn record_rotation(store: &dyn Storage, data_dir: &Path, list: Vec<Shard>, final_size: u64, key: &Signer) -> Result<Vec<Shard>, ShardError> {
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
) -> Result<Vec<Shard>, ShardError> {
    let name = kind.registry_name();
    let Some(mut active) = list.pop() else { return Err(ShardError::NoShards) };
    if active.frozen.is_none() {
        // One second past now: whatever was integrated before the freeze falls inside the window.
        active.frozen = Some(shards::freeze(store, name, &active, final_size, now() + 1)?);
    }
    let number = active.number + 1;
    let id = log_id(kind, number).ok_or(ShardError::Full { kind })?;
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
    let next = shards::start(store, name, &active, &proposed)?;
    if next.spki != proposed.spki {
        return Err(ShardError::StartedWithOther { path: key_path(kind, data_dir, number), number });
    }
    list.push(active);
    list.push(next);
    write_public(data_dir, kind, &list).map_err(ShardError::PublicWrite)?;
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
    let key = homes.place(kind, data_dir, active.number).map_or_else(|e| e.to_string(), |p| p.to_string());
    Some(Rotated { kind, frozen: frozen.clone(), active: active.clone(), key })
}

/// `signet admin log rotate --log rekor-v1|rekor-v2|ct --data-dir …`, offline: freezes the
/// active shard at its size and starts the next one with a new key. The next `serve` opens it
/// (a Rekor log with a genesis entry of its own); old shards stay in storage. Rerunning a
/// rotation that was cut short finishes it; rerunning a finished one starts yet another
/// shard. (A running instance rotates online: `POST /api/admin/log/rotate`.)
pub fn rotate(data_dir: &Path, storage: Option<&str>, log: &str, homes: &KeyHomes) -> Result<Rotated, ShardError> {
    let kind = Kind::parse(log).ok_or_else(|| ShardError::UnknownLog { name: log.to_string() })?;
    match rotate_kind(data_dir, storage, kind, homes)? {
        Rotation::Done(rotated) => Ok(rotated),
        Rotation::NotCreated(why) => Err(why.into()),
    }
}

/// What an offline rotation came to.
#[derive(Debug)]
pub enum Rotation {
    Done(Rotated),
    /// The log was never created here, so there is nothing to rotate (why, for the operator).
    NotCreated(NotCreated),
}

/// The sequencer lease an offline rotation holds on PostgreSQL, given up when it ends: the
/// next rotation (`signet restore` rotates every log) or instance need not wait it out.
pub(crate) struct HeldLease {
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
pub(crate) fn hold_offline(data_dir: &Path, storage: Option<&str>, command: &'static str, hint: &'static str) -> Result<Offline, ShardError> {
    let url = StorageUrl::parse(storage, data_dir).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    Ok(match &url {
        StorageUrl::Sqlite(_) => {
            let lock = crate::datadir::DataDirLock::acquire(data_dir).map_err(|source| ShardError::Locked { source, hint })?;
            Offline { _lock: Some(lock), _lease: None, store: signet_log::storage::open(&url)?, url }
        }
        StorageUrl::Postgres(u) => {
            let pg = Arc::new(signet_log::storage::PostgresStorage::open(u)?);
            let Some(lease) = pg.acquire_lease(command, crate::lease::TTL)? else {
                let holder = pg.lease_holder().ok().flatten().unwrap_or_else(|| "another instance".into());
                return Err(ShardError::LeaseHeld { holder, command });
            };
            Offline { _lock: None, _lease: Some(HeldLease { pg: pg.clone(), lease }), store: pg, url }
        }
    })
}

/// [`rotate`] of one log, telling a log that was never created apart from a failure.
pub fn rotate_kind(data_dir: &Path, storage: Option<&str>, kind: Kind, homes: &KeyHomes) -> Result<Rotation, ShardError> {
    let online = ", or rotate it online: signet admin log rotate --url URL --token ADMIN_TOKEN";
    // Hold off every server for the whole rotation (see the module's comment).
    let offline = hold_offline(data_dir, storage, "signet admin log rotate", online)?;
    let (store, url) = (offline.store.clone(), offline.url.clone());
    // Its public half is enough: shard 0's private key may be on a token. An imported shard
    // 0's is in its record.
    let imported = kind == Kind::RekorV1 && super::imported::record(store.as_ref())?.is_some();
    let Some(zero_spki) = zero_spki(kind, data_dir)?.or_else(|| imported.then(Vec::new)) else {
        return Ok(Rotation::NotCreated(NotCreated::NoZeroKey { key: kind.zero_key_path(data_dir), public: kind.zero_public_path(data_dir) }));
    };
    let list = registry(kind, store.as_ref(), &zero_spki)?;
    let Some(active) = list.last() else { return Err(ShardError::NoShards) };
    if active.frozen.is_none() && store.latest_checkpoint(active.log_id)?.is_none() {
        return Ok(Rotation::NotCreated(NotCreated::NeverServed { kind }));
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
        None => store.freeze(active.log_id)?,
    };
    let list = record_rotation_of(kind, store.as_ref(), data_dir, list, size, &key)?;
    rotated_of(kind, &list, data_dir, homes).map(Rotation::Done).ok_or(ShardError::NoNewShard)
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
pub fn check_frozen(kind: Kind, storage: &dyn Storage, list: &[Shard]) -> Result<(), ShardError> {
    for shard in list {
        let Some(frozen) = shard.frozen else { continue };
        let size = storage.latest_checkpoint(shard.log_id)?.map_or(0, |c| c.size);
        if size != frozen.size {
            return Err(ShardError::FrozenAt { kind, number: shard.number, frozen: frozen.size, stored: size });
        }
    }
    Ok(())
}
