//! What flows through the sequencer ([`crate::sequencer`]), stage by stage: an append waiting in
//! the pool, a batch gathered, deduped, built and signed, and the sequencer's own state (the
//! tree it owns, the tip a batch extends, the work in flight). Plain data, and the gathering of
//! a batch from the pool, so that the sequencer and [`crate::reconcile`] both read them without
//! reaching into each other.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use signet_core::cpu::Panicked;
use signet_core::hash::Hash;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::checkpoint::SignedCheckpoint;
use crate::error::AppendError;
use crate::shared::Shared;
use crate::storage::{Batch, LeafTile, Tile};
use crate::tree::Tree;

/// A batch's base: the tree it extends. A batch is committed only if its base is the durable
/// head, and it was prepared in the current generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Base {
    pub size: u64,
    pub root: Hash,
}

pub(crate) type Reply = oneshot::Sender<Result<Sequenced, AppendError>>;

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
    pub(crate) shared: Arc<Shared>,
    pub(crate) count: usize,
}

impl Taken {
    pub(crate) fn new(shared: &Arc<Shared>, count: usize) -> Taken {
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
    pub(crate) taken: Taken,
    pub(crate) generation: u64,
    pub(crate) fresh: Vec<Pending>,
    /// Requests for entries in flight in an earlier batch (their index and leaf hash).
    pub(crate) repeats: Vec<(u64, Hash, Reply)>,
    /// Requests for an entry that came earlier in this batch (its position in `fresh`).
    pub(crate) repeat_of_fresh: Vec<(usize, Hash, Reply)>,
}

/// A batch put on the tree, to be signed.
pub(crate) struct Built {
    pub(crate) taken: Taken,
    pub(crate) generation: u64,
    pub(crate) base: Base,
    pub(crate) new_size: u64,
    pub(crate) root: Hash,
    pub(crate) integrated_time: i64,
    pub(crate) tiles: Vec<Tile>,
    pub(crate) leaf_tiles: Vec<LeafTile>,
    pub(crate) fresh: Vec<Pending>,
    pub(crate) repeats: Vec<(u64, Hash, Reply)>,
    pub(crate) oldest: Option<std::time::Instant>,
}

/// A batch that is sequenced and signed, waiting for its durable commit.
pub(crate) struct Prepared {
    /// Held for its count in the pipeline, given back when the batch is done with.
    pub(crate) _taken: Taken,
    /// The tree this batch extends, and the generation of the tree it was built in.
    pub(crate) base: Base,
    pub(crate) generation: u64,
    pub batch: Batch,
    pub(crate) checkpoint: Arc<SignedCheckpoint>,
    /// One reply per entry of `batch.entries`, in order.
    pub(crate) fresh: Vec<Reply>,
    /// Requests for entries that are already sequenced (their index and leaf hash); answered
    /// once this batch is durable.
    pub(crate) repeats: Vec<(u64, Hash, Reply)>,
    /// When the batch's longest-waiting entry was handed to the log.
    pub(crate) oldest: Option<std::time::Instant>,
}

/// What a stage of preparation, run on the CPU pool, hands back to the sequencer.
pub(crate) enum Staged {
    /// `None`: nothing of the batch is left to sequence (every entry was answered).
    Deduped(Result<Option<Deduped>, Panicked>),
    /// `Err`: signing failed and the batch's waiters were told; the tree is to be cut back.
    Signed { generation: u64, base: Base, result: Result<Result<Prepared, ()>, Panicked> },
}

pub(crate) type Stage = Pin<Box<dyn Future<Output = Staged> + Send>>;
pub(crate) type Gathering = Pin<Box<dyn Future<Output = (Option<Vec<Pending>>, mpsc::Receiver<Pending>)> + Send>>;
pub(crate) type Commit = crate::storage::CommitTask;

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
    pub(crate) committing: Option<(Prepared, Commit)>,
    pub(crate) policy: BatchPolicy,
    /// The pool closed: finish what was taken, then stop.
    pub(crate) closing: bool,
}

impl Work {
    pub(crate) fn idle(&self) -> bool {
        self.gathering.is_none() && self.stage.is_none() && self.prepared.is_empty() && self.committing.is_none()
    }
}

pub(crate) async fn poll_opt<F: Future + Unpin>(f: &mut Option<F>) -> F::Output {
    match f.as_mut() {
        Some(f) => f.await,
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

/// Whether the pool holds every append the log has admitted that is not already in a batch:
/// then no more can arrive until some are answered, and waiting out `max_delay` would only
/// add latency. Without a bound on admissions (`max_pending` 0) this is never known.
pub(crate) fn all_admitted_are_here(shared: &Shared, in_pool: usize) -> bool {
    shared.max_pending != 0 && in_pool + shared.in_pipeline.load(Ordering::Relaxed) >= shared.max_pending
}
