//! The sequencer: the task that grows a log's tree and assigns indices.
//!
//! Readers never see its tree: they read the snapshots it publishes once a batch is durable
//! ([`crate::snapshot`]). Its preparer and committer (and a reconcile, and a follower's
//! catch-up before a promotion) still share the tree under one lock; making it one task's
//! alone, as DESIGN.md says, is issue 41's next step.
//!
//! Appends wait in a pool (a channel). The sequencer takes up to `max_entries` of them, or
//! whatever arrived within `max_delay` of the first, drops entries the log already holds,
//! appends the rest to the tree, signs one checkpoint, and stamps each entry (the SET on
//! Rekor v1). The committer then writes the batch in one durable commit and only then answers
//! the waiting requests.
//!
//! The two stages run concurrently: while one batch is being fsynced, the next is prepared.
//! Commits stay strictly in order, and each prepared batch is bound to its base, the size and
//! root it extends, and to the generation of the tree it was built in: the committer commits
//! it only on exactly that durable state. A commit that fails, whatever the reason, sends the
//! committer into [`crate::reconcile`]: memory is rebuilt from storage before anything else
//! is prepared, committed or answered, and no index is ever handed out twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use signet_core::hash::Hash;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::log::{AppendError, Shared};
use crate::reconcile::{self, Base};
use crate::storage::{Batch, LeafTile, NewEntry, StorageError, StoredCheckpoint, Tile};
use crate::tiles::TILE_WIDTH;

type Reply = oneshot::Sender<Result<Sequenced, AppendError>>;

/// An entry waiting to be sequenced.
pub(crate) struct Pending {
    pub leaf_hash: Hash,
    pub digest: Option<Vec<u8>>,
    pub identity: Option<Vec<u8>>,
    pub body: Vec<u8>,
    /// Bytes made at submission to keep beside the entry (the CT log's precertificate),
    /// stored as its stamp when the log has no [`crate::Stamper`].
    pub extra: Option<Vec<u8>>,
    pub reply: Reply,
    /// When it was handed to the log, for the integration latency ([`crate::stats`]).
    pub queued: std::time::Instant,
}

/// What the sequencer tells a waiting request.
#[derive(Debug, Clone)]
pub enum Sequenced {
    /// A new entry, durable as of `checkpoint`.
    New { index: u64, integrated_time: i64, stamp: Option<Vec<u8>>, checkpoint: Arc<SignedCheckpoint> },
    /// The log already holds an identical entry at `index`.
    Duplicate { index: u64 },
}

#[derive(Debug, Clone, Copy)]
pub struct BatchPolicy {
    pub max_entries: usize,
    pub max_delay: Duration,
}

impl Default for BatchPolicy {
    fn default() -> Self {
        BatchPolicy { max_entries: 256, max_delay: Duration::from_millis(10) }
    }
}

/// A batch that is sequenced and signed, waiting for its durable commit.
pub(crate) struct Prepared {
    /// How many pool entries this batch was made from (see `Shared::in_pipeline`).
    taken: usize,
    /// The tree this batch extends, and the generation it was built in.
    base: Base,
    generation: u64,
    pub batch: Batch,
    checkpoint: Arc<SignedCheckpoint>,
    /// One reply per entry of `batch.entries`, in order.
    fresh: Vec<Reply>,
    /// Requests for entries that are already sequenced (their index and leaf hash); answered
    /// once this batch is durable.
    repeats: Vec<(u64, Hash, Reply)>,
    /// When the batch's longest-waiting entry was handed to the log.
    oldest: Option<std::time::Instant>,
}

/// Panics caught in the sequencer since the process started (served at `/metrics`).
static PANICS: AtomicU64 = AtomicU64::new(0);

pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// How many prepared batches may wait for the committer.
const PIPELINE_DEPTH: usize = 2;

pub(crate) async fn run(shared: Arc<Shared>, mut rx: mpsc::Receiver<Pending>, policy: BatchPolicy) {
    start(&shared).await;
    let (commit_tx, commit_rx) = mpsc::channel::<Prepared>(PIPELINE_DEPTH);
    let committer = tokio::spawn(commit_loop(shared.clone(), commit_rx));
    let mut pool: Vec<Pending> = Vec::with_capacity(policy.max_entries);
    while let Some(first) = rx.recv().await {
        pool.push(first);
        let deadline = Instant::now() + policy.max_delay;
        while pool.len() < policy.max_entries && !all_admitted_are_here(&shared, pool.len()) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(p)) => pool.push(p),
                Ok(None) | Err(_) => break,
            }
        }
        // Preparing signs a checkpoint and, on Rekor v1, one SET per entry: up to 257 ECDSA
        // signatures, a few milliseconds of CPU. It runs on the bounded CPU pool, not on this
        // task's runtime worker, so that reads are not queued behind it. Batches stay in
        // order: this task waits for each before it takes the next.
        //
        // A panic while preparing (a bug in signing, stamping or the tree) fails this batch
        // only: its waiters' replies are dropped with it (they get `AppendError::Aborted`),
        // the tree is cut back, and the sequencer goes on with the next batch.
        let before = tip(&shared);
        let batch = std::mem::take(&mut pool);
        let taken = batch.len();
        shared.in_pipeline.fetch_add(taken, Ordering::Relaxed);
        let preparing = shared.clone();
        match signet_core::cpu::run(move || prepare(&preparing, batch, taken)).await {
            Ok(Some(prepared)) => {
                if commit_tx.send(prepared).await.is_err() {
                    break;
                }
            }
            Ok(None) => {
                shared.in_pipeline.fetch_sub(taken, Ordering::Relaxed);
            }
            Err(panicked) => {
                shared.in_pipeline.fetch_sub(taken, Ordering::Relaxed);
                PANICS.fetch_add(1, Ordering::Relaxed);
                if let Some((generation, base)) = before {
                    rewind(&shared, generation, base);
                }
                tracing::error!(log = shared.id, panic = %panicked.0, "preparing a batch panicked; its entries were not logged");
            }
        }
    }
    drop(commit_tx);
    if let Err(e) = committer.await {
        // The committer died mid-batch: what it acknowledged is durable, but memory may no
        // longer match storage. A server that answers but never commits is worse than none,
        // so stop, and let the restart rebuild the tree from storage.
        PANICS.fetch_add(1, Ordering::Relaxed);
        tracing::error!(log = shared.id, error = %e, "the log's committer failed; stopping signet (acknowledged entries are durable; restart to resume)");
        std::process::exit(1);
    }
}

/// Sets the tip to the durable head, and the clock's floor to the newest stored entry's
/// time: integrated times never go backwards, across restarts and takeovers.
async fn start(shared: &Arc<Shared>) {
    let head = shared.head();
    let (storage, id) = (shared.storage.clone(), shared.id);
    let last_time = match head.checkpoint.size.checked_sub(1) {
        None => 0,
        Some(last) => match tokio::task::spawn_blocking(move || storage.entry(id, last)).await {
            Ok(Ok(Some(e))) => e.integrated_time,
            other => {
                let why = match other {
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                    _ => "the entry is missing".into(),
                };
                tracing::warn!(log = id, error = %why, "cannot read the newest entry's time; integrated times follow this instance's clock");
                0
            }
        },
    };
    let tree = shared.tree.write();
    let mut seq = shared.sequencing.lock();
    seq.last_time = seq.last_time.max(last_time);
    seq.tip = (tree.size() == head.checkpoint.size).then_some(Base { size: head.checkpoint.size, root: head.checkpoint.root_hash });
}

/// The generation and tip a batch about to be prepared starts from.
fn tip(shared: &Shared) -> Option<(u64, Base)> {
    let _tree = shared.tree.read();
    let seq = shared.sequencing.lock();
    seq.tip.map(|t| (seq.generation, t))
}

/// Cuts the tree back to `base` after a batch built on it failed before it was sent to be
/// committed, unless a reconcile has rebuilt the tree since.
fn rewind(shared: &Shared, generation: u64, base: Base) {
    let mut tree = shared.tree.write();
    let mut seq = shared.sequencing.lock();
    if seq.generation == generation {
        tree.truncate(base.size);
        seq.tip = Some(base);
    }
}

/// Whether the pool holds every append the log has admitted that is not already in a batch:
/// then no more can arrive until some are answered, and waiting out `max_delay` would only
/// add latency. Without a bound on admissions (`max_pending` 0) this is never known.
fn all_admitted_are_here(shared: &Shared, in_pool: usize) -> bool {
    shared.max_pending != 0 && in_pool + shared.in_pipeline.load(Ordering::Relaxed) >= shared.max_pending
}

/// Dedupes, appends to the tree, signs. Returns `None` if nothing new needs committing.
fn prepare(shared: &Arc<Shared>, pool: Vec<Pending>, taken: usize) -> Option<Prepared> {
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

    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let oldest = fresh.iter().map(|p| p.queued).min();
    let (generation, base, integrated_time, new_size, root, tiles, leaf_tiles) = {
        let mut tree = shared.tree.write();
        let mut seq = shared.sequencing.lock();
        let replies = |fresh: Vec<Pending>, repeats: Vec<(u64, Hash, Reply)>| fresh.into_iter().map(|p| p.reply).chain(repeats.into_iter().map(|r| r.2));
        if seq.reconciling {
            drop((tree, seq));
            return fail(replies(fresh, repeats), reconcile::stale_error());
        }
        let old_size = tree.size();
        let base = match seq.tip {
            Some(t) if t.size == old_size => Ok(t),
            _ => tree.root(old_size).map(|root| Base { size: old_size, root }).map_err(|e| e.to_string()),
        };
        for p in &fresh {
            tree.push(p.leaf_hash);
        }
        let new_size = tree.size();
        let built = base.and_then(|base| {
            let root = tree.root(new_size).map_err(|e| e.to_string())?;
            let tiles = changed_tiles(&tree, old_size, new_size).map_err(|e| e.to_string())?;
            let leaf_tiles = filled_leaf_tiles(&tree, old_size, new_size).map_err(|e| e.to_string())?;
            Ok((base, root, tiles, leaf_tiles))
        });
        let (base, root, tiles, leaf_tiles) = match built {
            Ok(x) => x,
            // Cannot happen (the size is the tree's own); fail the batch rather than panic.
            Err(e) => {
                tree.truncate(old_size);
                drop((tree, seq));
                return fail(replies(fresh, repeats), AppendError::Storage(e));
            }
        };
        let integrated_time = now.max(seq.last_time);
        seq.last_time = integrated_time;
        seq.tip = Some(Base { size: new_size, root });
        (seq.generation, base, integrated_time, new_size, root, tiles, leaf_tiles)
    };
    let old_size = base.size;
    repeats.extend(repeat_of_fresh.into_iter().map(|(pos, leaf, r)| (old_size + pos as u64, leaf, r)));

    let signed = sign_batch(shared, &mut fresh, old_size, new_size, root, integrated_time);
    let (checkpoint, entries, replies) = match signed {
        Ok(x) => x,
        Err(e) => {
            rewind(shared, generation, base);
            return fail(fresh.into_iter().map(|p| p.reply).chain(repeats.into_iter().map(|r| r.2)), e);
        }
    };
    {
        let mut inflight = shared.inflight.lock();
        for e in &entries {
            inflight.insert(e.leaf_hash, e.index);
        }
    }
    Some(Prepared {
        taken,
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
        .map_err(|e| AppendError::Signing(e.to_string()))?;
    let mut stamps = Vec::with_capacity(fresh.len());
    for (i, p) in fresh.iter().enumerate() {
        stamps.push(match &shared.stamper {
            Some(s) => Some(s.stamp(old_size + i as u64, integrated_time, &p.body).map_err(|e| AppendError::Signing(e.to_string()))?),
            None => p.extra.clone(),
        });
    }
    let mut entries = Vec::with_capacity(fresh.len());
    let mut replies = Vec::with_capacity(fresh.len());
    for (i, (p, stamp)) in fresh.drain(..).zip(stamps).enumerate() {
        entries.push(NewEntry { index: old_size + i as u64, leaf_hash: p.leaf_hash, digest: p.digest, identity: p.identity, body: p.body, stamp });
        replies.push(p.reply);
    }
    Ok((checkpoint, entries, replies))
}

/// Commits prepared batches in order and answers their waiters.
async fn commit_loop(shared: Arc<Shared>, mut rx: mpsc::Receiver<Prepared>) {
    while let Some(mut p) = rx.recv().await {
        if p.generation != shared.sequencing.lock().generation {
            // Prepared before the tree was rebuilt from storage.
            drop_prepared(&shared, p, reconcile::stale_error());
            continue;
        }
        if !builds_on_durable(&shared, &p) {
            // Cannot happen: batches are prepared in order on the tree that commits extend. If
            // it does, memory is not what storage holds, and only a rebuild can tell.
            tracing::error!(log = shared.id, base = p.base.size, durable = shared.durable_size(), "a prepared batch does not extend the durable head");
            let cause = StorageError::Backend("a prepared batch did not extend the durable head".into());
            if !reconcile::reconcile(&shared, &mut rx, p, cause).await {
                return;
            }
            continue;
        }
        if p.batch.entries.is_empty() {
            let size = p.base.size;
            land_answers(&shared, p, Vec::new(), size);
            continue;
        }
        let storage = shared.storage.clone();
        let batch = std::mem::replace(&mut p.batch, empty_batch(shared.id));
        let committed = tokio::task::spawn_blocking(move || {
            let result = storage.commit(&batch);
            (batch, result)
        })
        .await;
        let error = match committed {
            Ok((batch, Ok(()))) => {
                p.batch = batch;
                land(&shared, p);
                continue;
            }
            Ok((batch, Err(e))) => {
                p.batch = batch;
                e
            }
            // The blocking task panicked: whether its commit ran is as unknown as a lost answer.
            Err(e) => StorageError::Backend(format!("the commit task failed: {e}")),
        };
        if !reconcile::reconcile(&shared, &mut rx, p, error).await {
            return;
        }
    }
}

fn empty_batch(log: crate::storage::LogId) -> Batch {
    Batch { log, integrated_time: 0, entries: Vec::new(), tiles: Vec::new(), leaf_tiles: Vec::new(), checkpoint: StoredCheckpoint { size: 0, note: String::new() } }
}

/// Whether `p` extends exactly the durable head: its size and its root.
fn builds_on_durable(shared: &Shared, p: &Prepared) -> bool {
    let snap = shared.snapshot();
    p.base == Base { size: snap.head.checkpoint.size, root: snap.head.checkpoint.root_hash }
}

/// A committed batch: its checkpoint becomes the head, and its waiters are answered.
fn land(shared: &Shared, p: Prepared) {
    let answers = p
        .batch
        .entries
        .iter()
        .map(|e| Sequenced::New { index: e.index, integrated_time: p.batch.integrated_time, stamp: e.stamp.clone(), checkpoint: p.checkpoint.clone() })
        .collect();
    let size = p.checkpoint.checkpoint.size;
    {
        let mut tree = shared.tree.write();
        tree.settle(size);
        shared.publish(&tree, p.checkpoint.clone());
    }
    land_answers(shared, p, answers, size);
}

/// Answers a batch that is durable up to `durable_size`: `answers` for its new entries, in
/// order, and its repeats from the tree.
pub(crate) fn land_answers(shared: &Shared, p: Prepared, answers: Vec<Sequenced>, durable_size: u64) {
    if !p.batch.entries.is_empty() {
        shared.stats.integrated(p.batch.entries.len(), p.oldest);
    }
    for (reply, answer) in p.fresh.into_iter().zip(answers) {
        let _ = reply.send(Ok(answer));
    }
    {
        let tree = shared.tree.read();
        for (index, leaf, reply) in p.repeats {
            let _ = reply.send(repeat_answer(index, &leaf, durable_size, |i| tree.leaf(i).ok().flatten()));
        }
    }
    finish(shared, p.taken, &p.batch);
}

/// Fails every waiter of a batch that will not be committed.
pub(crate) fn drop_prepared(shared: &Shared, p: Prepared, err: AppendError) {
    fail::<()>(p.fresh.into_iter().chain(p.repeats.into_iter().map(|r| r.2)), err);
    finish(shared, p.taken, &p.batch);
}

/// A batch is answered: its entries leave the in-flight set and the pipeline.
fn finish(shared: &Shared, taken: usize, batch: &Batch) {
    let mut inflight = shared.inflight.lock();
    for e in &batch.entries {
        // Only this batch's claim: a later batch may hold the same leaf at another index.
        if inflight.get(&e.leaf_hash) == Some(&e.index) {
            inflight.remove(&e.leaf_hash);
        }
    }
    drop(inflight);
    shared.in_pipeline.fetch_sub(taken, Ordering::Relaxed);
}

pub(crate) fn append_error(e: StorageError) -> AppendError {
    match e {
        StorageError::Full(m) => AppendError::Full(m),
        StorageError::Unavailable(m) => AppendError::Unavailable(m),
        // The client should retry; a load balancer sends it to the instance that sequences now.
        e @ StorageError::Fenced(_) => AppendError::Unavailable(e.to_string()),
        other => AppendError::Storage(other.to_string()),
    }
}

/// The answer to a request whose entry was in flight at `index` when it arrived. That batch
/// may since have failed, and `index` been reused by another entry: only a durable leaf that
/// is the same entry makes it a duplicate. Otherwise the entry is not logged, and a retry
/// will log it.
fn repeat_answer(index: u64, leaf: &Hash, durable_size: u64, leaf_at: impl Fn(u64) -> Option<Hash>) -> Result<Sequenced, AppendError> {
    if index < durable_size && leaf_at(index).as_ref() == Some(leaf) {
        Ok(Sequenced::Duplicate { index })
    } else {
        Err(AppendError::Storage("the identical entry's batch failed to commit; retry".into()))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_a_duplicate_only_of_the_same_durable_leaf() {
        let (mine, other) = ([1u8; 32], [2u8; 32]);
        let leaves = [[0u8; 32], other, mine];
        let at = |i: u64| leaves.get(i as usize).copied();
        assert!(matches!(repeat_answer(2, &mine, 3, at), Ok(Sequenced::Duplicate { index: 2 })));
        // The batch that held the entry at 1 failed, and index 1 now holds another entry.
        assert!(repeat_answer(1, &mine, 3, at).is_err());
        // Not durable (yet, or ever).
        assert!(repeat_answer(2, &mine, 2, at).is_err());
    }
}

fn fail<T>(replies: impl IntoIterator<Item = Reply>, err: AppendError) -> Option<T> {
    tracing::error!(error = %err, "batch not committed");
    for r in replies {
        let _ = r.send(Err(err.clone()));
    }
    None
}
