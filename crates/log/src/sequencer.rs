//! The sequencer: the task that grows a log's tree and assigns indices.
//!
//! One task owns the tree ([`Sequencer`](crate::pipeline::Sequencer)): it alone pushes to it, cuts it back and rebuilds
//! it, so no path can build a batch on a state that another path changed. Readers never see
//! it: they read the snapshots it publishes once a batch is durable ([`crate::snapshot`]). A
//! follower's poll loop owns its tree the same way, and hands it over on promotion
//! ([`crate::follow`]).
//!
//! Appends wait in a pool (a channel). The task gathers up to `max_entries` of them, or
//! whatever arrived within `max_delay` of the first, drops entries the log already holds
//! (on the CPU pool: a lookup in storage), appends the rest to the tree, signs one checkpoint
//! and stamps each entry (the SET on Rekor v1; on the CPU pool again, spread as the key allows:
//! over the cores, a token's sessions or a KMS's round trips), then writes the batch
//! in one durable commit and only then answers the waiting requests.
//!
//! The stages overlap: while one batch is being fsynced, the next is gathered, deduped and
//! signed. Commits stay strictly in order, one at a time, and each prepared batch is bound to
//! its base, the size and root it extends, and to the generation of the tree it was built in:
//! it is committed only on exactly that durable state. A commit that fails, whatever the
//! reason, puts the task into [`crate::reconcile`]: the tree is rebuilt from storage before
//! anything else is prepared, committed or answered, and no index is ever handed out twice.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use signet_core::hash::Hash;
use tokio::sync::mpsc;

use crate::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::answers::{append_error, drop_prepared, fail, fail_staged, land_answers};
use crate::error::AppendError;
use crate::pipeline::{gather, poll_opt, Base, BatchPolicy, Built, Commit, Deduped, Pending, Prepared, Reply, Sequenced, Sequencer, Stage, Staged, Taken, Work};
use crate::reconcile;
use crate::shared::Shared;
use crate::tree::Tree;
use crate::storage::{Batch, LeafTile, NewEntry, StorageError, StoredCheckpoint, StoredEntry, Tile};
use crate::tiles::TILE_WIDTH;

/// Panics caught in the sequencer since the process started (served at `/metrics`).
static PANICS: AtomicU64 = AtomicU64::new(0);

pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// How many prepared batches may wait for their commit.
const PIPELINE_DEPTH: usize = 2;

/// The sequencer's task: runs until the pool is closed and everything taken from it is
/// durable and answered, then hands its tree back (a frozen log may resume with it).
pub(crate) async fn run(shared: Arc<Shared>, rx: mpsc::Receiver<Pending>, policy: BatchPolicy, tree: Tree) -> Tree {
    let mut s = Sequencer::start(shared, tree).await;
    let mut work = Work { pool: Some(rx), gathering: None, stage: None, prepared: VecDeque::new(), committing: None, policy, closing: false };
    if s.tree.size() != s.tip.size {
        // Cannot happen: whoever handed the tree over published its head. Rebuild rather
        // than build on a tree that is not the head's.
        let cause = StorageError::Backend(format!("the tree handed to the sequencer has {} entries, its head {}", s.tree.size(), s.tip.size));
        reconcile::reconcile(&mut s, &mut work, None, cause).await;
    }
    loop {
        s.start_work(&mut work).await;
        if work.closing && work.idle() {
            return s.tree;
        }
        let Work { gathering, stage, committing, .. } = &mut work;
        tokio::select! {
            outcome = poll_commit(committing) => {
                if let Some((p, _)) = work.committing.take() {
                    s.committed(&mut work, p, outcome).await;
                }
            }
            staged = poll_opt(stage) => {
                work.stage = None;
                s.staged(&mut work, staged).await;
            }
            (batch, rx) = poll_opt(gathering) => {
                work.gathering = None;
                work.pool = Some(rx);
                match batch {
                    Some(batch) => work.stage = Some(s.dedupe(batch)),
                    None => {
                        work.pool = None;
                        work.closing = true;
                    }
                }
            }
        }
    }
}

/// The commit's outcome; a commit task that failed to run (cancelled at shutdown) is an
/// outcome as unknown as a lost answer.
async fn poll_commit(c: &mut Option<(Prepared, Commit)>) -> Result<(Batch, Result<(), StorageError>), tokio::task::JoinError> {
    match c.as_mut() {
        Some((_, handle)) => handle.await,
        None => std::future::pending().await,
    }
}

impl Sequencer {
    /// Sets the tip to the durable head, and the clock's floor to the newest stored entry's
    /// time: integrated times never go backwards, across restarts and takeovers.
    async fn start(shared: Arc<Shared>, tree: Tree) -> Sequencer {
        let head = shared.head();
        let id = shared.id;
        let last_time = match head.checkpoint.size.checked_sub(1) {
            None => 0,
            Some(last) => match shared.storage.entry_async(id, last).await {
                Ok(Some(e)) => e.integrated_time,
                other => {
                    let why = match other {
                        Err(e) => e.to_string(),
                        _ => "the entry is missing".into(),
                    };
                    tracing::warn!(log = id, error = %why, "cannot read the newest entry's time; integrated times follow this instance's clock");
                    0
                }
            },
        };
        let tip = Base { size: head.checkpoint.size, root: head.checkpoint.root_hash };
        Sequencer { shared, tree, generation: 0, tip, last_time }
    }

    /// Starts what can start: a commit of the oldest prepared batch, and the gathering of the
    /// next batch once the pipeline has room for it.
    async fn start_work(&mut self, work: &mut Work) {
        while work.committing.is_none() {
            let Some(mut p) = work.prepared.pop_front() else { break };
            if p.generation != self.generation {
                // Prepared before the tree was rebuilt from storage.
                drop_prepared(&self.shared, p, reconcile::stale_error());
                continue;
            }
            if !builds_on_durable(&self.shared, &p) {
                // Cannot happen: batches are built in order on the tree that commits extend. If
                // it does, memory is not what storage holds, and only a rebuild can tell.
                tracing::error!(log = self.shared.id, base = p.base.size, durable = self.shared.durable_size(), "a prepared batch does not extend the durable head");
                let cause = StorageError::Backend("a prepared batch did not extend the durable head".into());
                reconcile::reconcile(self, work, Some(p), cause).await;
                continue;
            }
            if p.batch.entries.is_empty() {
                let size = p.base.size;
                land_answers(&self.shared, p, Vec::new(), size);
                continue;
            }
            // The batch comes back with the outcome, for a reconcile to compare if it is unknown.
            let batch = std::mem::replace(&mut p.batch, empty_batch(self.shared.id));
            work.committing = Some((p, self.shared.storage.clone().start_commit(batch)));
        }
        let room = work.prepared.len() < PIPELINE_DEPTH;
        if room && work.stage.is_none() && work.gathering.is_none() && !work.closing {
            if let Some(rx) = work.pool.take() {
                work.gathering = Some(gather(self.shared.clone(), rx, work.policy));
            }
        }
    }

    /// Dedupes a gathered batch on the CPU pool.
    fn dedupe(&self, pool: Vec<Pending>) -> Stage {
        let taken = Taken::new(&self.shared, pool.len());
        let (shared, generation) = (self.shared.clone(), self.generation);
        Box::pin(async move { Staged::Deduped(signet_core::cpu::run(move || dedupe(&shared, pool, taken, generation)).await) })
    }

    /// The next step of a batch whose stage finished.
    async fn staged(&mut self, work: &mut Work, staged: Staged) {
        match staged {
            Staged::Deduped(Ok(None)) => {}
            Staged::Deduped(Ok(Some(d))) if d.generation != self.generation => {
                // Deduped before the tree was rebuilt: what was in flight then may be stored now.
                fail_staged(&self.shared, Staged::Deduped(Ok(Some(d))), reconcile::stale_error());
            }
            Staged::Deduped(Ok(Some(d))) => {
                // Putting the batch on the tree is this task's alone; it hashes a few hundred
                // nodes, microseconds. Signing (up to 257 signatures) goes back to the pool.
                match signet_core::cpu::inline(|| self.build(d)) {
                    Ok(Ok(built)) => {
                        let (shared, generation, base) = (self.shared.clone(), built.generation, built.base);
                        work.stage = Some(Box::pin(async move {
                            Staged::Signed { generation, base, result: signet_core::cpu::run(move || sign(&shared, built)).await }
                        }));
                    }
                    Ok(Err(())) => {}
                    Err(panicked) => {
                        // The tree is in an unknown state: only a rebuild from storage can tell.
                        PANICS.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(log = self.shared.id, panic = %panicked.0, "building a batch on the tree panicked; its entries were not logged");
                        let cause = StorageError::Backend("building a batch on the tree panicked".into());
                        reconcile::reconcile(self, work, None, cause).await;
                    }
                }
            }
            Staged::Deduped(Err(panicked)) => {
                PANICS.fetch_add(1, Ordering::Relaxed);
                tracing::error!(log = self.shared.id, panic = %panicked.0, "deduping a batch panicked; its entries were not logged");
            }
            Staged::Signed { result: Ok(Ok(p)), .. } if p.generation != self.generation => {
                drop_prepared(&self.shared, p, reconcile::stale_error());
            }
            Staged::Signed { result: Ok(Ok(p)), .. } => {
                let mut inflight = self.shared.inflight.lock();
                for e in &p.batch.entries {
                    inflight.insert(e.leaf_hash, e.index);
                }
                drop(inflight);
                work.prepared.push_back(p);
            }
            Staged::Signed { generation, base, result } => {
                if let Err(panicked) = result {
                    // Its waiters' replies were dropped with it: they get `AppendError::Aborted`.
                    PANICS.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(log = self.shared.id, panic = %panicked.0, "signing a batch panicked; its entries were not logged");
                }
                // Nothing was built on it since: batches are built one at a time.
                if generation == self.generation {
                    self.tree.truncate(base.size);
                    self.tip = base;
                }
            }
        }
    }

    /// Appends a deduped batch's fresh entries to the tree. `Err`: the batch failed, and its
    /// waiters were told.
    fn build(&mut self, d: Deduped) -> Result<Built, ()> {
        let Deduped { taken, generation, mut fresh, mut repeats, repeat_of_fresh } = d;
        let fail_all = |fresh: Vec<Pending>, repeats: Vec<(u64, Hash, Reply)>, e: AppendError| {
            fail::<()>(fresh.into_iter().map(|p| p.reply).chain(repeats.into_iter().map(|r| r.2)), e);
            Err(())
        };
        let base = self.tip;
        let old_size = self.tree.size();
        if old_size != base.size {
            // Cannot happen: the tip is the tree's size whenever no batch is being built.
            return fail_all(fresh, repeats, AppendError::Storage(format!("the tree has {old_size} entries, the tip {}", base.size)));
        }
        repeats.extend(repeat_of_fresh.into_iter().map(|(pos, leaf, r)| (old_size + pos as u64, leaf, r)));
        for p in &fresh {
            self.tree.push(p.leaf_hash);
        }
        let new_size = self.tree.size();
        let built = (|| {
            let root = self.tree.root(new_size).map_err(|e| AppendError::Storage(e.to_string()))?;
            let tiles = changed_tiles(&self.tree, old_size, new_size).map_err(|e| AppendError::Storage(e.to_string()))?;
            let leaf_tiles = filled_leaf_tiles(&self.tree, old_size, new_size).map_err(|e| AppendError::Storage(e.to_string()))?;
            Ok::<_, AppendError>((root, tiles, leaf_tiles))
        })();
        let (root, tiles, leaf_tiles) = match built {
            Ok(x) => x,
            // Cannot happen (the sizes are the tree's own); fail the batch rather than panic.
            Err(e) => {
                self.tree.truncate(old_size);
                return fail_all(std::mem::take(&mut fresh), repeats, e);
            }
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let integrated_time = now.max(self.last_time);
        self.last_time = integrated_time;
        self.tip = Base { size: new_size, root };
        let oldest = fresh.iter().map(|p| p.queued).min();
        Ok(Built { taken, generation, base, new_size, root, integrated_time, tiles, leaf_tiles, fresh, repeats, oldest })
    }

    /// A commit finished: land it, or reconcile if its outcome is not known to be success.
    async fn committed(&mut self, work: &mut Work, mut p: Prepared, outcome: Result<(Batch, Result<(), StorageError>), tokio::task::JoinError>) {
        let error = match outcome {
            Ok((batch, Ok(()))) => {
                p.batch = batch;
                self.land(p);
                return;
            }
            Ok((batch, Err(e))) => {
                p.batch = batch;
                e
            }
            Err(e) => StorageError::Backend(format!("the commit task failed: {e}")),
        };
        reconcile::reconcile(self, work, Some(p), error).await;
    }

    /// A committed batch: its checkpoint becomes the head, its entries go to the entry cache
    /// (a client often reads back what it just logged), and its waiters are answered.
    fn land(&mut self, mut p: Prepared) {
        let answers = p
            .batch
            .entries
            .iter()
            .map(|e| Sequenced::New { index: e.index, integrated_time: p.batch.integrated_time, stamp: e.stamp.clone(), checkpoint: p.checkpoint.clone() })
            .collect();
        let size = p.checkpoint.checkpoint.size;
        self.tree.settle(size);
        self.shared.publish(&self.tree, p.checkpoint.clone());
        // The bodies move: past this point the batch's entries are needed for their indices
        // and leaf hashes only.
        let time = p.batch.integrated_time;
        self.shared.entry_cache.put_all(p.batch.entries.iter_mut().map(|e| StoredEntry {
            index: e.index,
            leaf_hash: e.leaf_hash,
            integrated_time: e.integrated_time.unwrap_or(time),
            body: std::mem::take(&mut e.body),
            stamp: e.stamp.take(),
            attestation: e.attestation.take().map(|a| a.data),
        }));
        land_answers(&self.shared, p, answers, size);
    }
}

/// Drops entries the log already holds or has in flight. `None` if nothing is left to
/// sequence (every waiter was answered).
fn dedupe(shared: &Shared, pool: Vec<Pending>, taken: Taken, generation: u64) -> Option<Deduped> {
    // Look in the in-flight set before the durable index: a batch leaves the set only after
    // it has been added to the index, so an entry is always visible in one of the two.
    let mut repeats: Vec<(u64, Hash, Reply)> = Vec::new();
    let mut unknown: Vec<Pending> = Vec::with_capacity(pool.len());
    {
        let inflight = shared.inflight.lock();
        for p in pool {
            match inflight.get(&p.leaf_hash) {
                Some(&index) => repeats.push((index, p.leaf_hash, p.reply)),
                None => unknown.push(p),
            }
        }
    }
    // The durable ones, in one lookup for the whole batch.
    let leaves: Vec<Hash> = unknown.iter().map(|p| p.leaf_hash).collect();
    let mut stored: Vec<Option<u64>> = vec![None; unknown.len()];
    match shared.storage.find_leaves(shared.id, &leaves) {
        Ok(found) => {
            for (pos, index) in found {
                if let Some(slot) = stored.get_mut(pos) {
                    *slot = Some(index);
                }
            }
        }
        Err(e) => {
            let replies = unknown.into_iter().map(|p| p.reply).chain(repeats.into_iter().map(|r| r.2));
            return fail(replies, append_error(e));
        }
    }

    let mut fresh: Vec<Pending> = Vec::with_capacity(unknown.len());
    let mut first_in_pool: HashMap<Hash, usize> = HashMap::new();
    let mut repeat_of_fresh: Vec<(usize, Hash, Reply)> = Vec::new();
    for (p, stored) in unknown.into_iter().zip(stored) {
        if let Some(index) = stored {
            let _ = p.reply.send(Ok(Sequenced::Duplicate { index }));
        } else if let Some(&pos) = first_in_pool.get(&p.leaf_hash) {
            repeat_of_fresh.push((pos, p.leaf_hash, p.reply));
        } else {
            first_in_pool.insert(p.leaf_hash, fresh.len());
            fresh.push(p);
        }
    }
    if fresh.is_empty() && repeats.is_empty() {
        return None;
    }
    Some(Deduped { taken, generation, fresh, repeats, repeat_of_fresh })
}

/// Signs a built batch's checkpoint and stamps each entry. `Err`: signing failed, and the
/// batch's waiters were told.
fn sign(shared: &Shared, b: Built) -> Result<Prepared, ()> {
    let Built { taken, generation, base, new_size, root, integrated_time, tiles, leaf_tiles, mut fresh, repeats, oldest } = b;
    let old_size = base.size;
    let (checkpoint, entries, replies) = match sign_batch(shared, &mut fresh, old_size, new_size, root, integrated_time) {
        Ok(x) => x,
        Err(e) => {
            fail::<()>(fresh.into_iter().map(|p| p.reply).chain(repeats.into_iter().map(|r| r.2)), e);
            return Err(());
        }
    };
    Ok(Prepared {
        _taken: taken,
        base,
        generation,
        batch: Batch {
            log: shared.id,
            integrated_time,
            entries,
            tiles,
            leaf_tiles,
            checkpoint: StoredCheckpoint { size: new_size, note: checkpoint.note.clone() },
        },
        checkpoint: Arc::new(checkpoint),
        fresh: replies,
        repeats,
        oldest,
    })
}

/// A key that cannot sign now (its token is away) is a 503, not a failure of the log.
fn signing_failed(e: signet_keys::KeyError) -> AppendError {
    match e.is_transient() {
        true => AppendError::KeyUnavailable(e.to_string()),
        false => AppendError::Signing(e.to_string()),
    }
}

/// Signs the checkpoint and stamps each entry, taking the entries out of `fresh`.
fn sign_batch(
    shared: &Shared,
    fresh: &mut Vec<Pending>,
    old_size: u64,
    new_size: u64,
    root: Hash,
    integrated_time: i64,
) -> Result<(SignedCheckpoint, Vec<NewEntry>, Vec<Reply>), AppendError> {
    let checkpoint = shared
        .signer
        .sign(Checkpoint { origin: shared.origin.clone(), size: new_size, root_hash: root })
        .map_err(signing_failed)?;
    let stamps: Vec<Option<Vec<u8>>> = match &shared.stamper {
        // The SETs are the batch's serial work: on one thread they would bound v1 appends at
        // one core's signatures per second, whatever the machine, and at one round trip per
        // entry with a key in a KMS.
        Some(s) => {
            let (spread, stamper) = (s.spread(), s.clone());
            let (back, stamps) = signet_core::cpu::fan_out(std::mem::take(fresh), spread.threads, spread.per_thread, move |i, p: &Pending| {
                stamper.stamp(old_size + i as u64, integrated_time, &p.body).map(Some)
            });
            // Back in place, so that a failure still answers every waiter.
            *fresh = back;
            stamps.map_err(signing_failed)?
        }
        None => fresh.iter().map(|p| p.extra.clone()).collect(),
    };
    let mut entries = Vec::with_capacity(fresh.len());
    let mut replies = Vec::with_capacity(fresh.len());
    for (i, (p, stamp)) in fresh.drain(..).zip(stamps).enumerate() {
        entries.push(NewEntry { index: old_size + i as u64, leaf_hash: p.leaf_hash, digest: p.digest, identity: p.identity, public_key: p.public_key, body: p.body, stamp, integrated_time: None, attestation: p.attestation });
        replies.push(p.reply);
    }
    Ok((checkpoint, entries, replies))
}

fn empty_batch(log: crate::storage::LogId) -> Batch {
    Batch { log, integrated_time: 0, entries: Vec::new(), tiles: Vec::new(), leaf_tiles: Vec::new(), checkpoint: StoredCheckpoint { size: 0, note: String::new() } }
}

/// Whether `p` extends exactly the durable head: its size and its root.
fn builds_on_durable(shared: &Shared, p: &Prepared) -> bool {
    let snap = shared.snapshot();
    p.base == Base { size: snap.head.checkpoint.size, root: snap.head.checkpoint.root_hash }
}

/// The tiles (c2sp.org/tlog-tiles) above the leaves whose contents changed when the tree
/// grew. Leaf tiles are not stored: the entries' own leaf hashes are that level.
pub fn changed_tiles(tree: &crate::tree::Tree, old_size: u64, new_size: u64) -> Result<Vec<Tile>, StorageError> {
    let mut tiles = Vec::new();
    for tile_level in 1u8..8 {
        let shift = 8 * tile_level as u32;
        let (old_n, new_n) = (old_size >> shift, new_size >> shift);
        if new_n == old_n {
            break;
        }
        for index in old_n / TILE_WIDTH..=(new_n - 1) / TILE_WIDTH {
            // The tiles a batch changes are at or right of the durable size: in memory.
            let nodes = tree.level_slice(shift, index * TILE_WIDTH, TILE_WIDTH)?;
            tiles.push(Tile { level: tile_level, index, hashes: nodes.concat() });
        }
    }
    Ok(tiles)
}

/// The leaf tiles that filled up when the tree grew, each with its inner levels, so that a
/// proof reading them later costs one row and no hashing.
pub fn filled_leaf_tiles(tree: &crate::tree::Tree, old_size: u64, new_size: u64) -> Result<Vec<LeafTile>, StorageError> {
    let mut filled = Vec::new();
    for index in old_size / TILE_WIDTH..new_size / TILE_WIDTH {
        let mut nodes = Vec::with_capacity(crate::tilecache::TILE_BYTES);
        for s in 0..8u32 {
            // At or right of the durable size's tile: in memory.
            let level = tree.level_slice(s, (index * TILE_WIDTH) >> s, TILE_WIDTH >> s)?;
            nodes.extend(level.iter().flatten());
        }
        filled.push(LeafTile { index, nodes });
    }
    Ok(filled)
}
