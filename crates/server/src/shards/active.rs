//! The CT log and the Rekor v2 log: served one shard at a time ([`ActiveShard`]).
//!
//! A rotation of either makes a new log: a new key, a new tree counting from 0. So unlike
//! Rekor v1, whose frozen shards stay served beside the active one
//! (`api::rekor_v1::rotation`), a rotation here freezes the active log and swaps the new one
//! in; the frozen one stays in storage (bundles carry their own proofs) and is not served.
//!
//! Online, the steps and their order are Rekor v1's, for the same reasons:
//! - appends hold [`ActiveShard::appending`] shared, and a rotation holds it exclusively, so
//!   an append either lands in the old log before the freeze or waits and goes to the new one;
//! - the new key is made before anything is frozen (on PostgreSQL, sealed into the database
//!   for the other instances), so a failure before the freeze changes nothing, and one after
//!   it is finished by running the rotation again;
//! - on PostgreSQL the database freezes the tree ([`Storage::freeze`]), so whichever
//!   instance sequences, nothing commits past the size the registry records, and every
//!   instance looks for a rotation every [`crate::api::rekor_v1::WATCH_EVERY`]
//!   ([`ActiveShard::follow_rotations`]).

use std::sync::Arc;

use arc_swap::ArcSwap;
use signet_keys::Signer;
use signet_log::shards::Shard;
use signet_log::{Log, Role};

use super::error::ShardError;
use super::kind::Kind;
use super::rotation::Rotated;
use super::opener::{FollowError, ShardOpener};
use super::opener::CATCH_UP;

/// What an [`ActiveShard`] serves now.
pub struct Current {
    pub log: Log,
    pub key: Arc<Signer>,
    /// Every shard of the log, oldest first; the last is `log`'s.
    pub registry: Vec<Shard>,
}

/// Called with the new log when one is swapped in, under the rotation's lock (the CA takes
/// its new CT log this way).
type OnServe = Box<dyn Fn(&Current) + Send + Sync>;

/// A log of which one shard is served: the CT log, the Rekor v2 log.
pub struct ActiveShard {
    kind: Kind,
    /// Swapped whole by a rotation; requests read it without a lock.
    current: ArcSwap<Current>,
    /// Held shared by every append and exclusively by a rotation.
    appending: tokio::sync::RwLock<()>,
    opener: ShardOpener,
    on_serve: std::sync::OnceLock<OnServe>,
    /// Why this instance does not serve the log another instance rotated to, while it can't
    /// (`/readyz` says it); `None` otherwise.
    pub behind: parking_lot::Mutex<Option<String>>,
}

/// Runs `f` on a blocking thread (the registry's and the keys' files and queries).
pub(crate) async fn blocking<T, E>(f: impl FnOnce() -> Result<T, E> + Send + 'static) -> Result<T, E>
where
    T: Send + 'static,
    E: From<tokio::task::JoinError> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(E::from)?
}

/// Why an online rotation (`POST /api/admin/log/rotate`) did not happen, or did not finish:
/// the step, and its cause. Its HTTP status is `api::error`'s to decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnlineRotationError {
    /// On shared storage, without the seal key the other instances share.
    #[error("this instance cannot hand a new shard's key to the others: its keys/shard-seal.key is missing, or is not the one the database's other instances share (its start-up log says which); copy theirs here and restart, or rotate through another instance")]
    NoSharedSeal,
    /// The registry is longer than what this instance serves.
    #[error("another instance rotated the log a moment ago; this instance serves its new shard within a second. Rotate again if you meant to rotate twice")]
    RotatedMeanwhile,
    /// A step that failed here: rotating again does not help until its cause is fixed.
    #[error("{step}: {cause}")]
    Failed { step: &'static str, cause: Cause },
    /// A step that may succeed when retried.
    #[error("{step}: {cause}")]
    Unavailable { step: &'static str, cause: Cause },
}

/// What failed in a step of an online rotation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Cause {
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// Freezing the log, or catching up with it.
    #[error(transparent)]
    Append(#[from] signet_log::AppendError),
    #[error(transparent)]
    Follow(#[from] FollowError),
    /// The rotation is recorded; a restart opens the new log.
    #[error("{0}; restart signet to finish it")]
    Restart(#[source] FollowError),
    /// `what`: "log" or "shard".
    #[error("no new {what}")]
    NoNew { what: &'static str },
}

/// A rotation step that failed here.
pub(crate) fn internal(step: &'static str, cause: impl Into<Cause>) -> OnlineRotationError {
    OnlineRotationError::Failed { step, cause: cause.into() }
}

/// A rotation step that may succeed when retried.
pub(crate) fn unavailable(step: &'static str, cause: impl Into<Cause>) -> OnlineRotationError {
    OnlineRotationError::Unavailable { step, cause: cause.into() }
}

impl ActiveShard {
    pub fn new(kind: Kind, log: Log, key: Arc<Signer>, registry: Vec<Shard>, opener: ShardOpener) -> ActiveShard {
        ActiveShard {
            kind,
            current: ArcSwap::from_pointee(Current { log, key, registry }),
            appending: tokio::sync::RwLock::new(()),
            opener,
            on_serve: std::sync::OnceLock::new(),
            behind: Default::default(),
        }
    }

    /// Calls `f` with every log swapped in from now on (once; later calls are ignored).
    pub fn on_serve(&self, f: impl Fn(&Current) + Send + Sync + 'static) {
        let _ = self.on_serve.set(Box::new(f));
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The log served now.
    pub fn log(&self) -> Log {
        self.current.load().log.clone()
    }

    pub fn current(&self) -> Arc<Current> {
        self.current.load_full()
    }

    /// Held by an append for as long as it runs: a rotation waits for it, and it for a
    /// rotation (a batch and a commit, milliseconds).
    pub async fn appending(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.appending.read().await
    }

    /// Rotates the log online: freezes it and serves a new one under a new key.
    pub async fn rotate(&self) -> Result<Rotated, OnlineRotationError> {
        match self.opener.shared.is_some() {
            false => self.rotate_alone().await,
            true => self.rotate_shared().await,
        }
    }

    /// On storage this instance alone writes.
    async fn rotate_alone(&self) -> Result<Rotated, OnlineRotationError> {
        let kind = self.kind;
        let _exclusive = self.appending.write().await;
        let current = self.current();
        let (store, data_dir) = (self.opener.storage.clone(), self.opener.data_dir.clone());
        let key = {
            let (data_dir, list, homes) = (data_dir.clone(), current.registry.clone(), self.opener.homes.clone());
            blocking(move || super::keys::next_key_of(kind, &data_dir, &homes, &list).map(|(_, _, key)| key))
                .await
                .map_err(|e| internal("making the new log's key", e))?
        };
        let size = current.log.freeze().await.map_err(|e| internal("freezing the log", e))?.checkpoint.size;
        let key = Arc::new(key);
        let recorded = {
            let (store, data_dir, key, list) = (store.clone(), data_dir.clone(), key.clone(), current.registry.clone());
            blocking(move || super::rotation::record_rotation_of(kind, store.as_ref(), &data_dir, list, size, &key)).await
        };
        let list = match recorded {
            Ok(list) => list,
            Err(e) => {
                // Nothing recorded: the old log goes on taking entries. Recorded: a restart finishes it.
                let number = current.registry.last().map_or(0, |s| s.number);
                if !signet_log::shards::is_frozen(store.as_ref(), kind.registry_name(), number).unwrap_or(true) {
                    current.log.resume();
                }
                return Err(internal("recording the rotation", e));
            }
        };
        let rotated = super::rotation::rotated_of(kind, &list, &data_dir, &self.opener.homes)
            .ok_or_else(|| internal("recording the rotation", Cause::NoNew { what: "log" }))?;
        let log = self
            .opener
            .open_active(kind, &rotated.active, key.clone())
            .await
            .map_err(|e| unavailable("the rotation is recorded, but the new log did not open", Cause::Restart(e)))?;
        self.serve(Current { log, key, registry: list }).await;
        tracing::info!(log = kind.cli_name(), frozen = rotated.frozen.number, size, active = rotated.active.number, "rotated the {} log", kind.title());
        Ok(rotated)
    }

    /// On storage several instances share: this instance freezes the tree in the database,
    /// seals the new key there and records the next shard; the others follow within a look.
    async fn rotate_shared(&self) -> Result<Rotated, OnlineRotationError> {
        let kind = self.kind;
        let seal = self.opener.seal.clone();
        if seal.is_none() && !self.opener.homes.elsewhere(kind) {
            return Err(OnlineRotationError::NoSharedSeal);
        }
        // Serve whatever another instance rotated to first, so that this rotation starts there.
        self.follow_rotations().await.map_err(|e| unavailable("serving an earlier rotation first", e))?;
        let _exclusive = self.appending.write().await;
        let current = self.current();
        let store = self.opener.storage.clone();
        let list = self.stored_registry(&current).await.map_err(|e| unavailable("reading the shard registry", e))?;
        if list.len() != current.registry.len() {
            return Err(OnlineRotationError::RotatedMeanwhile);
        }
        let (_, key) = {
            let (store, data_dir, list, homes) = (store.clone(), self.opener.data_dir.clone(), list.clone(), self.opener.homes.clone());
            blocking(move || super::keys::offer_next_key(kind, store.as_ref(), seal.as_deref(), &data_dir, &homes, &list))
                .await
                .map_err(|e| internal("making and sealing the new log's key", e))?
        };
        let old = current.log.clone();
        // This instance's sequencer finishes the appends in its pool first, so none fails.
        let sequencing = old.role() == Role::Sequencer;
        if sequencing {
            old.freeze().await.map_err(|e| internal("freezing the log", e))?;
        }
        let id = old.storage_id();
        let frozen = {
            let store = store.clone();
            blocking(move || store.freeze(id).map_err(ShardError::from)).await
        };
        let size = match frozen {
            Ok(size) => size,
            Err(e) => {
                if sequencing {
                    old.resume();
                }
                return Err(unavailable("freezing the log in storage", e));
            }
        };
        // From here on the tree is frozen whatever happens next; a failure leaves the rest
        // for a rerun (or the other instances) to finish.
        if !sequencing {
            old.follow_until(size, CATCH_UP).await.map_err(|e| {
                unavailable("the log is frozen, but this instance could not catch up with it to finish the rotation (rotate again to finish it)", e)
            })?;
        }
        let (list, key) = {
            let (store, data_dir) = (store.clone(), self.opener.data_dir.clone());
            blocking(move || super::rotation::record_rotation_of(kind, store.as_ref(), &data_dir, list, size, &key).map(|l| (l, key)))
                .await
                .map_err(|e| internal("recording the rotation (the log is frozen: rotate again to finish)", e))?
        };
        let rotated = super::rotation::rotated_of(kind, &list, &self.opener.data_dir, &self.opener.homes)
            .ok_or_else(|| internal("recording the rotation", Cause::NoNew { what: "log" }))?;
        let key = Arc::new(key);
        let log = self.opener.open_active(kind, &rotated.active, key.clone()).await.map_err(|e| {
            unavailable("the rotation is recorded, but this instance could not open the new log yet (it retries within a second)", e)
        })?;
        self.serve(Current { log, key, registry: list }).await;
        tracing::info!(log = kind.cli_name(), frozen = rotated.frozen.number, size, active = rotated.active.number, "rotated the {} log; the other instances follow", kind.title());
        Ok(rotated)
    }

    /// The registry as storage has it, from `current`'s shard 0.
    async fn stored_registry(&self, current: &Current) -> Result<Vec<Shard>, ShardError> {
        let Some(zero) = current.registry.first() else { return Err(ShardError::NoShards) };
        let zero = Shard { frozen: None, ..zero.clone() };
        let (store, name) = (self.opener.storage.clone(), self.kind.registry_name());
        blocking(move || signet_log::shards::load(store.as_ref(), name, zero).map_err(ShardError::from)).await
    }

    /// On shared storage: serves the log another instance's rotation made, if this instance
    /// does not serve it yet. True when it changed what it serves.
    pub async fn follow_rotations(&self) -> Result<bool, FollowError> {
        if self.opener.shared.is_none() {
            return Ok(false);
        }
        let kind = self.kind;
        let current = self.current();
        let Some(active) = current.registry.last() else { return Err(ShardError::NoShards.into()) };
        let moved = {
            let (store, active) = (self.opener.storage.clone(), active.clone());
            blocking(move || signet_log::shards::moved_on(store.as_ref(), kind.registry_name(), &active).map_err(ShardError::from)).await?
        };
        if !moved {
            return Ok(false);
        }
        let list = self.stored_registry(&current).await?;
        let Some(frozen) = list.get(current.registry.len() - 1).and_then(|s| s.frozen) else {
            return match list.len() == current.registry.len() {
                true => Ok(false),
                false => Err(ShardError::NotFrozen { number: active.number }.into()),
            };
        };
        if list.len() == current.registry.len() {
            // Frozen, with no next record yet: a rotation under way, or one cut short.
            return Ok(false);
        }
        // Stop appending to the frozen log before taking the lock that appends hold: a
        // follower's appends wait for entries that will never come until this answers them.
        let head = current.log.follow_until(frozen.size, CATCH_UP).await.map_err(ShardError::from)?;
        if head.checkpoint.size != frozen.size {
            return Err(ShardError::Behind { kind, number: active.number, frozen: frozen.size, held: head.checkpoint.size }.into());
        }
        let _exclusive = self.appending.write().await;
        if !Arc::ptr_eq(&current, &self.current()) {
            return Ok(true); // a rotation of this instance's got there first
        }
        // Only the newest is served; a shard frozen in between (two rotations in one look)
        // is checked like any frozen one, at the next start.
        let Some(newest) = list.last().filter(|s| s.frozen.is_none()).cloned() else {
            return Err(ShardError::CutShort { kind }.into());
        };
        let key = {
            let (store, seal, data_dir, shard) = (self.opener.storage.clone(), self.opener.seal.clone(), self.opener.data_dir.clone(), newest.clone());
            let homes = self.opener.homes.clone();
            blocking(move || super::keys::take_key(kind, store.as_ref(), seal.as_deref(), &data_dir, &homes, &shard)).await?
        };
        let log = self.opener.open_active(kind, &newest, key.clone()).await?;
        self.serve(Current { log, key, registry: list }).await;
        tracing::info!(log = kind.cli_name(), active = newest.number, frozen_size = frozen.size, "serving the {} log another instance rotated to", kind.title());
        Ok(true)
    }

    /// Swaps `next` in, and tidies after the log it replaces.
    async fn serve(&self, next: Current) {
        let (list, active) = (next.registry.clone(), next.log.clone());
        if let Some(f) = self.on_serve.get() {
            f(&next);
        }
        let old = self.current.swap(Arc::new(next));
        // The lease may have been taken between opening the log as a follower and serving
        // it, after the takeover listed the logs: promote it here (promoting twice is harmless).
        if crate::lease::holding() && active.role() == Role::Follower {
            if let Err(e) = active.promote().await {
                tracing::error!(error = %e, "cannot sequence the new {} log (acknowledged entries are durable; restart to follow again)", self.kind.title());
                std::process::exit(1);
            }
        }
        if let Err(e) = super::public::write_public(&self.opener.data_dir, self.kind, &list) {
            tracing::warn!(error = %e, "could not rewrite log-shards.json; signet serve rewrites it at start");
        }
        // What this instance queued into the frozen log is logged nowhere: its appends were
        // told to retry.
        if let Some(queue) = self.opener.shared.clone() {
            let id = old.log.storage_id();
            match blocking(move || signet_log::storage::Queue::discard(queue.as_ref(), id).map_err(ShardError::from)).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(log = id, dropped = n, "dropped entries queued for the frozen log (their appends were told to retry)"),
                Err(e) => tracing::warn!(log = id, error = %e, "could not clear the frozen log's queue"),
            }
        }
    }
}
