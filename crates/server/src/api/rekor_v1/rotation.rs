//! Rotating the Rekor v1 log online, and serving a rotation another instance made.
//!
//! On storage this instance alone writes (SQLite), a rotation waits for the appends in
//! flight, freezes the active shard, records the next one and opens it.
//!
//! On PostgreSQL any instance may rotate, and every instance must serve the new shard within
//! a bound. Three things make that safe:
//! - the database freezes the tree ([`Storage::freeze`]): from then on no commit of any
//!   instance can grow it, so the size the registry records is final, whoever sequences;
//! - the new shard's key goes through the database sealed with the seal key every data dir
//!   holds ([`crate::shards::sealed`]), so each instance takes it from there;
//! - each instance looks at the registry every [`WATCH_EVERY`] ([`RekorV1::follow_rotations`])
//!   and, on finding a newer shard, stops appending to the old one (a sequencer finishes what
//!   is in its pool; a follower catches up to the frozen size and tells the appends still
//!   waiting to retry), then opens the new one as sequencer or follower, as its lease says.
//!
//! Appends that meet the frozen shard meanwhile get a 503 and retry into the new one. The
//! sequencer makes the new shard's first entry (its genesis); a follower waits for it.

use std::sync::Arc;
use std::time::Duration;

use signet_log::Role;

use super::{RekorV1, Shard, Shards};
use crate::shards::active::{blocking, internal, unavailable, Cause, OnlineRotationError};
use crate::shards::opener::FollowError;
use crate::shards::{self, Kind, Rotated, ShardError, CATCH_UP};
use crate::state::AppState;

/// How often each instance on shared storage looks for a rotation another instance made.
pub const WATCH_EVERY: Duration = Duration::from_millis(500);

impl RekorV1 {
    /// Rotates the log online: freezes the active shard and starts the next, with a new key.
    /// Reads of every shard go on throughout.
    pub async fn rotate(&self) -> Result<Rotated, OnlineRotationError> {
        match self.opener.shared.is_some() {
            false => self.rotate_alone().await,
            true => self.rotate_shared().await,
        }
    }

    /// On storage this instance alone writes: appends that arrive meanwhile wait (a batch, a
    /// few milliseconds), then go to the new shard.
    async fn rotate_alone(&self) -> Result<Rotated, OnlineRotationError> {
        let _exclusive = self.appending.write().await;
        let current = self.current();
        let (store, data_dir, list) = (self.opener.storage.clone(), self.opener.data_dir.clone(), current.registry.clone());
        let key = {
            let (data_dir, list, homes) = (data_dir.clone(), list.clone(), self.opener.homes.clone());
            blocking(move || shards::next_key(&data_dir, &homes, &list).map(|(_, _, key)| key)).await.map_err(|e| internal("making the new shard's key", e))?
        };
        let old = current.active.clone();
        let size = old.log.freeze().await.map_err(|e| internal("freezing the active shard", e))?.checkpoint.size;
        let key = Arc::new(key);
        let recorded = {
            let (store, data_dir, key) = (store.clone(), data_dir.clone(), key.clone());
            blocking(move || shards::record_rotation(store.as_ref(), &data_dir, list, size, &key)).await
        };
        let list = match recorded {
            Ok(list) => list,
            Err(e) => {
                // Nothing recorded: the old shard goes on taking entries. Recorded: a restart finishes it.
                let number = current.registry.last().map_or(0, |s| s.number);
                if !signet_log::shards::is_frozen(store.as_ref(), shards::KIND, number).unwrap_or(true) {
                    old.log.resume();
                }
                return Err(internal("recording the rotation", e));
            }
        };
        let rotated = shards::rotated(&list, &data_dir, &self.opener.homes).ok_or_else(|| internal("recording the rotation", Cause::NoNew { what: "shard" }))?;
        let log = self
            .opener
            .open(&rotated.active, key)
            .await
            .map_err(|e| unavailable("the rotation is recorded, but the new shard did not open", Cause::Restart(FollowError::Open(Box::new(e)))))?;
        log.genesis_written().await.map_err(|e| unavailable("the rotation is recorded, but the new shard's first entry failed", e))?;
        let mut frozen = current.frozen.clone();
        frozen.push(old);
        self.shards.store(Arc::new(Shards { active: Shard::new(log, rotated.active.tree_id, rotated.active.start), frozen, registry: list }));
        tracing::info!(frozen = rotated.frozen.number, size, active = rotated.active.number, tree_id = rotated.active.tree_id, "rotated the Rekor v1 log");
        Ok(rotated)
    }

    /// On storage several instances share. This instance freezes the tree in the database,
    /// seals the new key there and records the next shard; the others follow within a look.
    async fn rotate_shared(&self) -> Result<Rotated, OnlineRotationError> {
        let seal = self.opener.seal.clone();
        if seal.is_none() && !self.opener.homes.elsewhere(Kind::RekorV1) {
            return Err(OnlineRotationError::NoSharedSeal);
        }
        // Serve whatever another instance rotated to first, so that this rotation starts from
        // the newest shard.
        self.follow_rotations().await.map_err(|e| unavailable("serving an earlier rotation first", e))?;
        let _exclusive = self.appending.write().await;
        let current = self.current();
        let store = self.opener.storage.clone();
        let list = self.stored_registry(&current).await.map_err(|e| unavailable("reading the shard registry", e))?;
        if list.len() != current.registry.len() {
            return Err(OnlineRotationError::RotatedMeanwhile);
        }
        let number = {
            let (store, data_dir, list, homes) = (store.clone(), self.opener.data_dir.clone(), list.clone(), self.opener.homes.clone());
            blocking(move || shards::offer_next_key(Kind::RekorV1, store.as_ref(), seal.as_deref(), &data_dir, &homes, &list))
        };
        let (_, key) = number.await.map_err(|e| internal("making and sealing the new shard's key", e))?;
        let old = current.active.clone();
        // This instance's sequencer finishes the appends in its pool first, so none fails.
        let sequencing = old.log.role() == Role::Sequencer;
        if sequencing {
            old.log.freeze().await.map_err(|e| internal("freezing the active shard", e))?;
        }
        let id = old.log.storage_id();
        let frozen = {
            let store = store.clone();
            blocking(move || store.freeze(id).map_err(ShardError::from)).await
        };
        let size = match frozen {
            Ok(size) => size,
            Err(e) => {
                // Not frozen in storage (or not known to be): appends go on.
                if sequencing {
                    old.log.resume();
                }
                return Err(unavailable("freezing the active shard in storage", e));
            }
        };
        // From here on the tree is frozen whatever happens next; a failure leaves the rest
        // for a rerun (or the other instances) to finish.
        if !sequencing {
            old.log
                .follow_until(size, CATCH_UP)
                .await
                .map_err(|e| unavailable("the shard is frozen, but this instance could not catch up with it to finish the rotation (rotate again to finish it)", e))?;
        }
        let list = {
            let (store, data_dir, key) = (store.clone(), self.opener.data_dir.clone(), key);
            blocking(move || shards::record_rotation(store.as_ref(), &data_dir, list, size, &key).map(|l| (l, key))).await
        };
        let (list, key) = list.map_err(|e| internal("recording the rotation (the shard is frozen: rotate again to finish)", e))?;
        let rotated = shards::rotated(&list, &self.opener.data_dir, &self.opener.homes)
            .ok_or_else(|| internal("recording the rotation", Cause::NoNew { what: "shard" }))?;
        let log = self
            .opener
            .open_active(Kind::RekorV1, &rotated.active, Arc::new(key))
            .await
            .map_err(|e| unavailable("the rotation is recorded, but this instance could not open the new shard yet (it retries within a second)", e))?;
        let mut frozen = current.frozen.clone();
        frozen.push(old);
        self.serve(Shards { active: Shard::new(log, rotated.active.tree_id, rotated.active.start), frozen, registry: list }).await;
        tracing::info!(frozen = rotated.frozen.number, size, active = rotated.active.number, tree_id = rotated.active.tree_id, "rotated the Rekor v1 log; the other instances follow");
        Ok(rotated)
    }

    /// The registry as storage has it, from `current`'s shard 0.
    async fn stored_registry(&self, current: &Shards) -> Result<Vec<signet_log::shards::Shard>, ShardError> {
        let Some(zero) = current.registry.first() else { return Err(ShardError::NoShards) };
        let zero = signet_log::shards::Shard { frozen: None, ..zero.clone() };
        let store = self.opener.storage.clone();
        blocking(move || signet_log::shards::load(store.as_ref(), shards::KIND, zero).map_err(ShardError::from)).await
    }

    /// On shared storage: serves the shards that another instance's rotation made, if there
    /// are any this instance does not serve yet. True when it changed what it serves.
    pub async fn follow_rotations(&self) -> Result<bool, FollowError> {
        if self.opener.shared.is_none() {
            return Ok(false);
        }
        let current = self.current();
        let Some(active) = current.registry.last() else { return Err(ShardError::NoShards.into()) };
        let moved = {
            let (store, active) = (self.opener.storage.clone(), active.clone());
            blocking(move || signet_log::shards::moved_on(store.as_ref(), shards::KIND, &active).map_err(ShardError::from)).await?
        };
        if !moved {
            return Ok(false);
        }
        let list = self.stored_registry(&current).await?;
        let frozen_now = list.get(current.registry.len() - 1).and_then(|s| s.frozen);
        if list.len() == current.registry.len() && frozen_now.is_none() {
            return Ok(false);
        }
        let Some(frozen) = frozen_now else {
            return Err(ShardError::NotFrozen { number: active.number }.into());
        };
        if list.len() == current.registry.len() {
            // Frozen with nothing after it yet: a rotation under way (its next record follows
            // at once), or one cut short, which a rerun finishes. The database refuses commits
            // to the frozen tree meanwhile; keep serving it as it is.
            return Ok(false);
        }
        // Stop appending to the frozen shard before taking the lock that appends hold: a
        // follower's appends wait for entries that will never come until this answers them.
        let old = current.active.clone();
        let head = old.log.follow_until(frozen.size, CATCH_UP).await.map_err(ShardError::from)?;
        if head.checkpoint.size != frozen.size {
            return Err(ShardError::ShardBehind { number: active.number, frozen: frozen.size, held: head.checkpoint.size }.into());
        }
        let _exclusive = self.appending.write().await;
        if !Arc::ptr_eq(&current, &self.current()) {
            return Ok(true); // a rotation of this instance's got there first
        }
        let mut served_frozen = current.frozen.clone();
        served_frozen.push(old);
        let mut served_active = None;
        for shard in &list[current.registry.len()..] {
            let key = {
                let (store, seal, data_dir, shard) = (self.opener.storage.clone(), self.opener.seal.clone(), self.opener.data_dir.clone(), shard.clone());
                let homes = self.opener.homes.clone();
                blocking(move || shards::take_key(Kind::RekorV1, store.as_ref(), seal.as_deref(), &data_dir, &homes, &shard)).await?
            };
            let log = match shard.frozen {
                Some(_) => self.opener.open(shard, key).await.map_err(|e| FollowError::Open(Box::new(e)))?,
                None => self.opener.open_active(Kind::RekorV1, shard, key).await?,
            };
            let served = Shard::new(log, shard.tree_id, shard.start);
            match shard.frozen {
                Some(_) => served_frozen.push(served),
                None => served_active = Some(served),
            }
        }
        let Some(active) = served_active else {
            return Err(ShardError::ShardCutShort { number: list.last().map_or(0, |s| s.number) }.into());
        };
        let number = list.last().map_or(0, |s| s.number);
        self.serve(Shards { active, frozen: served_frozen, registry: list }).await;
        tracing::info!(active = number, frozen_size = frozen.size, "serving the Rekor v1 shard another instance rotated to");
        Ok(true)
    }

    /// Swaps `shards` in, and tidies after the shard it froze.
    async fn serve(&self, shards: Shards) {
        let (list, active, frozen) = (shards.registry.clone(), shards.active.log.clone(), shards.frozen.last().map(|s| s.log.storage_id()));
        self.shards.store(Arc::new(shards));
        // The lease may have been taken between opening the shard as a follower and serving
        // it, after the takeover listed the logs: then promote it here (promoting twice is
        // harmless).
        if crate::lease::holding() && active.role() == Role::Follower {
            if let Err(e) = active.promote().await {
                tracing::error!(error = %e, "cannot sequence the new Rekor v1 shard (acknowledged entries are durable; restart to follow again)");
                std::process::exit(1);
            }
        }
        if let Err(e) = shards::write_public(&self.opener.data_dir, Kind::RekorV1, &list) {
            tracing::warn!(error = %e, "could not rewrite log-shards.json; signet serve rewrites it at start");
        }
        // What this instance queued into the frozen shard is logged nowhere: its appends were
        // told to retry.
        if let (Some(queue), Some(id)) = (self.opener.shared.clone(), frozen) {
            match blocking(move || signet_log::storage::Queue::discard(queue.as_ref(), id).map_err(ShardError::from)).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(log = id, dropped = n, "dropped entries queued for the frozen shard (their appends were told to retry)"),
                Err(e) => tracing::warn!(log = id, error = %e, "could not clear the frozen shard's queue"),
            }
        }
    }
}

/// On shared storage: looks for rotations other instances made every [`WATCH_EVERY`] for as
/// long as the server runs, and serves them ([`RekorV1::follow_rotations`],
/// [`crate::shards::active::ActiveShard::follow_rotations`] for the Rekor v2 and CT logs), trust documents
/// included. `None` where this instance alone writes its logs.
pub fn watch(state: Arc<AppState>) -> Option<tokio::task::JoinHandle<()>> {
    state.rekor_v1.opener.shared.as_ref()?;
    Some(tokio::spawn(async move {
        let mut failing: [Option<String>; 3] = Default::default();
        loop {
            // A commit that met a tree frozen by another instance's rotation looks at once.
            let (v1, v2, ct) = (state.rekor_v1.log(), state.rekor_v2.log(), state.ct.log());
            let woken = tokio::select! {
                _ = tokio::time::sleep(WATCH_EVERY) => false,
                _ = v1.frozen_in_storage() => true,
                _ = v2.frozen_in_storage() => true,
                _ = ct.frozen_in_storage() => true,
            };
            // As text: `/readyz` says it, and a cause is logged once.
            let v1_looked = state.rekor_v1.follow_rotations().await.map_err(|e| e.to_string());
            let mut changed = matches!(v1_looked, Ok(true));
            let v1_behind = match &v1_looked {
                Ok(_) => (!state.rekor_v1.log().is_running()).then(|| cut_short(Kind::RekorV1)),
                Err(e) => Some(e.clone()),
            };
            *state.rekor_v1.behind.lock() = v1_behind;
            let mut looks = vec![(Kind::RekorV1, v1_looked)];
            for log in [&state.rekor_v2, &state.ct] {
                let looked = log.follow_rotations().await.map_err(|e| e.to_string());
                changed |= matches!(looked, Ok(true));
                *log.behind.lock() = match &looked {
                    Ok(_) => (!log.log().is_running()).then(|| cut_short(log.kind())),
                    Err(e) => Some(e.clone()),
                };
                looks.push((log.kind(), looked));
            }
            if woken && !changed {
                // Frozen, but not yet recorded as rotated (the rotating instance is between
                // the two): look again at the usual pace, not in a loop.
                tokio::time::sleep(WATCH_EVERY).await;
            }
            if changed {
                republish(&state).await;
            }
            // Said once per cause: the next look tries again.
            for ((kind, looked), failing) in looks.into_iter().zip(failing.iter_mut()) {
                match looked {
                    Ok(_) => *failing = None,
                    Err(e) => {
                        if failing.as_deref() != Some(e.as_str()) {
                            tracing::error!(error = %e, "cannot serve the {} log's newest shard yet; retrying", kind.title());
                            *failing = Some(e);
                        }
                    }
                }
            }
        }
    }))
}

/// Why a log takes no appends while its active shard is frozen with no successor recorded.
fn cut_short(kind: Kind) -> String {
    format!(
        "the {} log's active shard is frozen and no shard follows it yet: a rotation is under way, or was cut short (run `signet admin log rotate --log {}` again to finish it)",
        kind.title(),
        kind.cli_name()
    )
}

/// After a rotation: the trust documents served from now on list the new shard's key.
pub async fn republish(state: &Arc<AppState>) {
    let data_dir = state.rekor_v1.data_dir().to_path_buf();
    match tokio::task::spawn_blocking(move || crate::trust::instance(&data_dir, None)).await {
        Ok(Ok(instance)) => {
            let instance = Arc::new(instance);
            *state.trust.write() = instance.clone();
            if let Some(tuf) = &state.tuf {
                tuf.publish(&instance).await;
            }
        }
        Ok(Err(e)) => tracing::error!(error = %e, "rotated, but the trust documents could not be rebuilt; they list the new shard after a restart"),
        Err(e) => tracing::error!(error = %e, "rotated, but rebuilding the trust documents failed"),
    }
}
