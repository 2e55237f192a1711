//! The sequencer: the task that grows a log's tree and assigns indices.
//!
//! One task owns the tree ([`Sequencer`]): it alone pushes to it, cuts it back and rebuilds
//! it, so no path can build a batch on a state that another path changed. Readers never see
//! it: they read the snapshots it publishes once a batch is durable ([`crate::snapshot`]). A
//! follower's poll loop owns its tree the same way, and hands it over on promotion
//! ([`crate::follow`]).
//!
//! Appends wait in a pool (a channel). The task gathers up to `max_entries` of them, or
//! whatever arrived within `max_delay` of the first, drops entries the log already holds
//! (on the CPU pool: a lookup in storage), appends the rest to the tree, signs one checkpoint
//! and stamps each entry (the SET on Rekor v1; on the CPU pool again), then writes the batch
//! in one durable commit and only then answers the waiting requests.
//!
//! The stages overlap: while one batch is being fsynced, the next is gathered, deduped and
//! signed. Commits stay strictly in order, one at a time, and each prepared batch is bound to
//! its base, the size and root it extends, and to the generation of the tree it was built in:
//! it is committed only on exactly that durable state. A commit that fails, whatever the
//! reason, puts the task into [`crate::reconcile`]: the tree is rebuilt from storage before
//! anything else is prepared, committed or answered, and no index is ever handed out twice.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use signet_core::cpu::Panicked;
use signet_core::hash::Hash;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::log::{AppendError, Shared};
use crate::reconcile::{self, Base};
use crate::tree::Tree;
use crate::storage::{Batch, LeafTile, NewEntry, StorageError, StoredCheckpoint, Tile};
use crate::tiles::TILE_WIDTH;

type Reply = oneshot::Sender<Result<Sequenced, AppendError>>;

/// An entry waiting to be sequenced.
pub(crate) struct Pending {
    pub leaf_hash: Hash,
    pub digest: Option<Vec<u8>>,
    pub identity: Option<Vec<u8>>,
    pub public_key: Option<Vec<u8>>,
    pub body: Vec<u8>,
    /// Bytes made at submission to keep beside the entry (the CT log's precertificate),
    /// stored as its stamp when the log has no [`crate::Stamper`].
    pub extra: Option<Vec<u8>>,
    /// Kept beside the entry ([`crate::storage::NewEntry::attestation`]).
    pub attestation: Option<crate::storage::Attestation>,
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

/// Entries taken from the pool and not yet answered, counted in `Shared::in_pipeline` for as
/// long as this lives: whichever way a batch ends (answered, failed, or dropped by a panic),
/// its count goes with it.
pub(crate) struct Taken {
    shared: Arc<Shared>,
    count: usize,
}

impl Taken {
    fn new(shared: &Arc<Shared>, count: usize) -> Taken {
        shared.in_pipeline.fetch_add(count, Ordering::Relaxed);
        Taken { shared: shared.clone(), count }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.shared.in_pipeline.fetch_sub(self.count, Ordering::Relaxed);
    }
}

/// A batch after the dedupe, before it is put on the tree.
pub(crate) struct Deduped {
    taken: Taken,
    generation: u64,
    fresh: Vec<Pending>,
    /// Requests for entries in flight in an earlier batch (their index and leaf hash).
    repeats: Vec<(u64, Hash, Reply)>,
    /// Requests for an entry that came earlier in this batch (its position in `fresh`).
    repeat_of_fresh: Vec<(usize, Hash, Reply)>,
}

/// A batch put on the tree, to be signed.
pub(crate) struct Built {
    taken: Taken,
    generation: u64,
    base: Base,
    new_size: u64,
    root: Hash,
    integrated_time: i64,
    tiles: Vec<Tile>,
    leaf_tiles: Vec<LeafTile>,
    fresh: Vec<Pending>,
    repeats: Vec<(u64, Hash, Reply)>,
    oldest: Option<std::time::Instant>,
}

/// A batch that is sequenced and signed, waiting for its durable commit.
pub(crate) struct Prepared {
    /// Held for its count in the pipeline, given back when the batch is done with.
    _taken: Taken,
    /// The tree this batch extends, and the generation of the tree it was built in.
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

/// What a stage of preparation, run on the CPU pool, hands back to the sequencer.
pub(crate) enum Staged {
    /// `None`: nothing of the batch is left to sequence (every entry was answered).
    Deduped(Result<Option<Deduped>, Panicked>),
    /// `Err`: signing failed and the batch's waiters were told; the tree is to be cut back.
    Signed { generation: u64, base: Base, result: Result<Result<Prepared, ()>, Panicked> },
}

type Stage = Pin<Box<dyn Future<Output = Staged> + Send>>;
type Gathering = Pin<Box<dyn Future<Output = (Option<Vec<Pending>>, mpsc::Receiver<Pending>)> + Send>>;
type Commit = crate::storage::CommitTask;

/// Panics caught in the sequencer since the process started (served at `/metrics`).
static PANICS: AtomicU64 = AtomicU64::new(0);

pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// How many prepared batches may wait for their commit.
const PIPELINE_DEPTH: usize = 2;

/// The sequencer's state. One task owns it, and with it the tree: nothing else can push to,
/// cut or rebuild the tree, so no batch can be built on a state another path changed.
pub(crate) struct Sequencer {
    pub(crate) shared: Arc<Shared>,
    pub(crate) tree: Tree,
    /// Bumped whenever the tree is rebuilt from storage: work begun before is stale.
    pub(crate) generation: u64,
    /// The tree the next batch extends: the last built batch's result, or the durable head.
    pub(crate) tip: Base,
    /// The latest integrated time handed out: the next batch's is never earlier, whatever
    /// this instance's clock says (a takeover by an instance whose clock is behind).
    pub(crate) last_time: i64,
}

/// The work in flight around the tree: at most one batch being gathered from the pool, one
/// being deduped or signed, `PIPELINE_DEPTH` prepared, and one being committed.
pub(crate) struct Work {
    /// The pool, while no gathering holds it; `None` after it closed.
    pub(crate) pool: Option<mpsc::Receiver<Pending>>,
    pub(crate) gathering: Option<Gathering>,
    pub(crate) stage: Option<Stage>,
    pub(crate) prepared: VecDeque<Prepared>,
    committing: Option<(Prepared, Commit)>,
    pub(crate) policy: BatchPolicy,
    /// The pool closed: finish what was taken, then stop.
    pub(crate) closing: bool,
}

impl Work {
    fn idle(&self) -> bool {
        self.gathering.is_none() && self.stage.is_none() && self.prepared.is_empty() && self.committing.is_none()
    }
}

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

pub(crate) async fn poll_opt<F: Future + Unpin>(f: &mut Option<F>) -> F::Output {
    match f.as_mut() {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// The commit's outcome; a commit task that failed to run (cancelled at shutdown) is an
/// outcome as unknown as a lost answer.
async fn poll_commit(c: &mut Option<(Prepared, Commit)>) -> Result<(Batch, Result<(), StorageError>), String> {
    match c.as_mut() {
        Some((_, handle)) => handle.await.map_err(|e| e.to_string()),
        None => std::future::pending().await,
    }
}

/// Takes up to `max_entries` from the pool, or whatever arrived within `max_delay` of the
/// first; hands the pool back with them.
pub(crate) fn gather(shared: Arc<Shared>, mut rx: mpsc::Receiver<Pending>, policy: BatchPolicy) -> Gathering {
    Box::pin(async move {
        let Some(first) = rx.recv().await else { return (None, rx) };
        let mut pool = Vec::with_capacity(policy.max_entries);
        pool.push(first);
        let deadline = Instant::now() + policy.max_delay;
        while pool.len() < policy.max_entries && !all_admitted_are_here(&shared, pool.len()) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(p)) => pool.push(p),
                Ok(None) | Err(_) => break,
            }
        }
        (Some(pool), rx)
    })
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
            let root = self.tree.root(new_size).map_err(|e| e.to_string())?;
            let tiles = changed_tiles(&self.tree, old_size, new_size).map_err(|e| e.to_string())?;
            let leaf_tiles = filled_leaf_tiles(&self.tree, old_size, new_size).map_err(|e| e.to_string())?;
            Ok::<_, String>((root, tiles, leaf_tiles))
        })();
        let (root, tiles, leaf_tiles) = match built {
            Ok(x) => x,
            // Cannot happen (the sizes are the tree's own); fail the batch rather than panic.
            Err(e) => {
                self.tree.truncate(old_size);
                return fail_all(std::mem::take(&mut fresh), repeats, AppendError::Storage(e));
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
    async fn committed(&mut self, work: &mut Work, mut p: Prepared, outcome: Result<(Batch, Result<(), StorageError>), String>) {
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

    /// A committed batch: its checkpoint becomes the head, and its waiters are answered.
    fn land(&mut self, p: Prepared) {
        let answers = p
            .batch
            .entries
            .iter()
            .map(|e| Sequenced::New { index: e.index, integrated_time: p.batch.integrated_time, stamp: e.stamp.clone(), checkpoint: p.checkpoint.clone() })
            .collect();
        let size = p.checkpoint.checkpoint.size;
        self.tree.settle(size);
        self.shared.publish(&self.tree, p.checkpoint.clone());
        land_answers(&self.shared, p, answers, size);
    }
}

/// Fails the waiters of a stage's result that will not go on (a reconcile began meanwhile).
pub(crate) fn fail_staged(shared: &Shared, staged: Staged, err: AppendError) {
    match staged {
        Staged::Deduped(Ok(Some(d))) => {
            let replies = d.fresh.into_iter().map(|p| p.reply).chain(d.repeats.into_iter().map(|r| r.2)).chain(d.repeat_of_fresh.into_iter().map(|r| r.2));
            fail::<()>(replies, err);
        }
        Staged::Signed { result: Ok(Ok(p)), .. } => drop_prepared(shared, p, err),
        // Answered already, or dropped by a panic (their waiters get `AppendError::Aborted`).
        Staged::Deduped(_) | Staged::Signed { .. } => {}
    }
}

/// Fails a gathered batch that will not be sequenced.
pub(crate) fn fail_gathered(batch: Vec<Pending>, err: AppendError) {
    fail::<()>(batch.into_iter().map(|p| p.reply), err);
}

/// Whether the pool holds every append the log has admitted that is not already in a batch:
/// then no more can arrive until some are answered, and waiting out `max_delay` would only
/// add latency. Without a bound on admissions (`max_pending` 0) this is never known.
fn all_admitted_are_here(shared: &Shared, in_pool: usize) -> bool {
    shared.max_pending != 0 && in_pool + shared.in_pipeline.load(Ordering::Relaxed) >= shared.max_pending
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
    let mut stamps = Vec::with_capacity(fresh.len());
    for (i, p) in fresh.iter().enumerate() {
        stamps.push(match &shared.stamper {
            Some(s) => Some(s.stamp(old_size + i as u64, integrated_time, &p.body).map_err(signing_failed)?),
            None => p.extra.clone(),
        });
    }
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

/// Answers a batch that is durable up to `durable_size`: `answers` for its new entries, in
/// order, and its repeats from the tree.
pub(crate) fn land_answers(shared: &Shared, p: Prepared, answers: Vec<Sequenced>, durable_size: u64) {
    if !p.batch.entries.is_empty() {
        shared.stats.integrated(p.batch.entries.len(), p.oldest);
    }
    for (reply, answer) in p.fresh.into_iter().zip(answers) {
        let _ = reply.send(Ok(answer));
    }
    if !p.repeats.is_empty() {
        let snap = shared.snapshot();
        for (index, leaf, reply) in p.repeats {
            let _ = reply.send(repeat_answer(index, &leaf, durable_size, |i| snap.tree.leaf(i).ok().flatten()));
        }
    }
    forget_inflight(shared, &p.batch);
}

/// Fails every waiter of a batch that will not be committed.
pub(crate) fn drop_prepared(shared: &Shared, p: Prepared, err: AppendError) {
    fail::<()>(p.fresh.into_iter().chain(p.repeats.into_iter().map(|r| r.2)), err);
    forget_inflight(shared, &p.batch);
}

/// A batch is answered: its entries leave the in-flight set (and, as its [`Taken`] drops,
/// the pipeline).
fn forget_inflight(shared: &Shared, batch: &Batch) {
    let mut inflight = shared.inflight.lock();
    for e in &batch.entries {
        // Only this batch's claim: a later batch may hold the same leaf at another index.
        if inflight.get(&e.leaf_hash) == Some(&e.index) {
            inflight.remove(&e.leaf_hash);
        }
    }
}

pub(crate) fn append_error(e: StorageError) -> AppendError {
    match e {
        StorageError::Full(m) => AppendError::Full(m),
        StorageError::Unavailable(m) => AppendError::Unavailable(m),
        // The client should retry; a load balancer sends it to the instance that sequences now.
        e @ StorageError::Fenced(_) => AppendError::Unavailable(e.to_string()),
        // A rotation froze the tree: a retry lands in the next shard.
        StorageError::Frozen { .. } => AppendError::Closed,
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
