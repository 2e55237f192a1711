//! Many instances on one database: one sequences, the others follow.
//!
//! A follower serves what a sequencer serves. Its tree is rebuilt at open and then extended
//! by polling the stored checkpoint; each new checkpoint's signature, and its root against the
//! tree extended by the stored entries' leaf hashes, are checked before any reader sees it, so
//! a follower never serves a state the log's key did not sign.
//!
//! An append on a follower goes into the storage's [`Queue`] (one write for each group of
//! concurrent appends), and its request waits until the follower's tree holds the entry: it
//! is answered, as on the sequencer, only once the entry is durably integrated. The sequencer
//! drains the queue into its own pool ([`drain`]), and forgets a queued entry only once it is
//! logged, so a sequencer that dies mid-way loses nothing: its successor logs what is left.
//!
//! The poll loop owns the follower's tree, as the sequencer's task owns a sequencer's: only it
//! extends the tree. When a follower takes the sequencer lease over, it is
//! [`promoted`](crate::Log::promote): the loop makes one last catch-up, hands its tree to the
//! new sequencer and ends, so no catch-up can touch the tree once the sequencer has it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use signet_core::hash::Hash;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::error::AppendError;
use crate::shared::Shared;
use crate::merkle;
use crate::answers::append_error;
use crate::pipeline::{Pending, Sequenced};
use crate::storage::{Queue, QueuedEntry, StorageError};
use crate::tree::Tree;

/// A promotion's request to the poll loop: its tree, caught up, or why it could not be.
type Handover = oneshot::Sender<Result<Tree, StorageError>>;

/// Whether an instance sequences a log or follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sequencer,
    Follower,
}

/// How often a follower looks for a new checkpoint while appends of its own wait for one.
const BUSY_POLL: Duration = Duration::from_millis(5);
/// How often otherwise: the most a follower's reads lag behind the sequencer's.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// How long an append on a follower waits to be integrated before the client is told to
/// retry (a retry is safe: the log deduplicates). A takeover takes about 4 s.
pub const FOLLOWER_APPEND_TIMEOUT: Duration = Duration::from_secs(15);
/// How many queued entries the sequencer takes at a time.
const DRAIN_BATCH: usize = 1024;
/// How often the sequencer looks at an empty queue.
const DRAIN_IDLE: Duration = Duration::from_millis(10);
/// Entries enqueued in one write.
const SUBMIT_GROUP: usize = 512;

type Reply = oneshot::Sender<Result<Sequenced, AppendError>>;

pub(crate) struct Follower {
    queue: Arc<dyn Queue>,
    submit: mpsc::Sender<QueuedEntry>,
    /// Appends of this instance waiting for their entry, by leaf hash.
    waiters: parking_lot::Mutex<HashMap<Hash, Vec<Reply>>>,
    /// One promotion at a time.
    promoting: tokio::sync::Mutex<()>,
    handover: mpsc::Sender<Handover>,
    promoted: AtomicBool,
    wake: Notify,
    /// Counts the poll loop's catch-ups, so that a read can wait for the next one.
    polled: tokio::sync::watch::Sender<u64>,
    /// Set once the log is frozen ([`Follower::close`]): the poll loop ends and appends are
    /// refused with this answer.
    closed: std::sync::OnceLock<AppendError>,
}

impl Follower {
    /// Starts following `shared`'s log from `tree` (at the published head): the poll loop,
    /// which owns the tree from now on, and the queue writer.
    pub(crate) fn start(shared: Arc<Shared>, queue: Arc<dyn Queue>, tree: Tree) -> Arc<Follower> {
        let (submit, rx) = mpsc::channel(SUBMIT_GROUP * 4);
        let (handover, promotions) = mpsc::channel(1);
        let me = Arc::new(Follower {
            queue,
            submit,
            waiters: Default::default(),
            promoting: tokio::sync::Mutex::new(()),
            handover,
            promoted: AtomicBool::new(false),
            wake: Notify::new(),
            polled: tokio::sync::watch::Sender::new(0),
            closed: std::sync::OnceLock::new(),
        });
        tokio::spawn(follow(shared.clone(), me.clone(), tree, promotions));
        tokio::spawn(submit_loop(shared, me.clone(), rx));
        me
    }

    /// Queues `pending` for the sequencer; its reply comes once the entry is integrated.
    pub(crate) async fn append(&self, shared: &Shared, pending: Pending) {
        let Pending { leaf_hash, digest, identity, public_key, body, extra, attestation, reply, .. } = pending;
        if let Some(why) = self.closed.get() {
            let _ = reply.send(Err(why.clone()));
            return;
        }
        self.waiters.lock().entry(leaf_hash).or_default().push(reply);
        // Checked after the waiter is in place: storage finds every committed entry, and the
        // poll loop answers waiters for the entries it brings, so an entry integrated
        // meanwhile is seen by one side or the other.
        match shared.storage.find_leaves_async(shared.id, vec![leaf_hash]).await {
            Ok(found) => {
                if let Some(&(_, index)) = found.first() {
                    if index >= shared.durable_size() {
                        // Committed, but not yet in this instance's tree: catch up first, so
                        // that the answer can be proven.
                        self.poll_now().await;
                    }
                    self.answer(&leaf_hash, Ok(Sequenced::Duplicate { index }));
                    return;
                }
            }
            Err(e) => {
                self.answer(&leaf_hash, Err(append_error(e)));
                return;
            }
        }
        if self.submit.send(QueuedEntry { leaf_hash, digest, identity, public_key, body, extra, attestation }).await.is_err() {
            self.answer(&leaf_hash, Err(AppendError::Closed));
        }
        self.wake.notify_one();
    }

    /// Answers every append of this instance waiting for `leaf`.
    fn answer(&self, leaf: &Hash, answer: Result<Sequenced, AppendError>) {
        let replies = self.waiters.lock().remove(leaf).unwrap_or_default();
        for r in replies {
            let _ = r.send(answer.clone());
        }
    }

    /// Whether the log was frozen under this follower ([`Follower::close`]).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.get().is_some()
    }

    /// Whether this follower handed its tree to a sequencer of this instance.
    pub(crate) fn is_promoted(&self) -> bool {
        self.promoted.load(Ordering::Acquire)
    }

    /// Stops following a log that was frozen: the poll loop ends, and every append still
    /// waiting, and each one after, is answered `why`.
    pub(crate) fn close(&self, why: AppendError) {
        let _ = self.closed.set(why.clone());
        let waiting: Vec<Reply> = self.waiters.lock().drain().flat_map(|(_, r)| r).collect();
        for r in waiting {
            let _ = r.send(Err(why.clone()));
        }
        self.wake.notify_one();
    }

    /// Drops the waiters whose requests gave up (timed out or disconnected).
    pub(crate) fn forget_abandoned(&self) {
        self.waiters.lock().retain(|_, replies| {
            replies.retain(|r| !r.is_closed());
            !replies.is_empty()
        });
    }

    /// Has the poll loop look now, and waits (briefly) for it. However many reads ask, the
    /// database sees at most one catch-up per `BUSY_POLL`: a flood of reads past the head
    /// must not become a flood of queries.
    pub(crate) async fn poll_now(&self) {
        let mut polled = self.polled.subscribe();
        polled.borrow_and_update();
        self.wake.notify_one();
        let _ = tokio::time::timeout(IDLE_POLL * 2, polled.changed()).await;
    }

    /// Stops following, after one last catch-up: the caller holds the sequencer lease, so
    /// the stored state can no longer move under it. The poll loop hands its tree to `then`
    /// (which starts the sequencer) and ends.
    pub(crate) async fn promote(&self, then: impl FnOnce(Tree)) -> Result<(), StorageError> {
        let _one = self.promoting.lock().await;
        // A frozen log's follower has nothing to sequence.
        if self.promoted.load(Ordering::Acquire) || self.closed.get().is_some() {
            return Ok(());
        }
        let (ask, answer) = oneshot::channel();
        let gone = || StorageError::Backend("the follower's poll loop has stopped".into());
        self.handover.send(ask).await.map_err(|_| gone())?;
        let tree = answer.await.map_err(|_| gone())??;
        self.promoted.store(true, Ordering::Release);
        then(tree);
        Ok(())
    }
}

/// The poll loop: quick while this instance's appends wait, slow otherwise. It owns the
/// follower's tree until a promotion takes it.
async fn follow(shared: Arc<Shared>, me: Arc<Follower>, mut tree: Tree, mut promotions: mpsc::Receiver<Handover>) {
    let mut failing = false;
    loop {
        if me.closed.get().is_some() {
            return;
        }
        let wait = if me.waiters.lock().is_empty() { IDLE_POLL } else { BUSY_POLL };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = me.wake.notified() => tokio::time::sleep(BUSY_POLL).await,
            ask = promotions.recv() => {
                let Some(ask) = ask else { return };
                match catch_up(&shared, &me, &mut tree).await {
                    Ok(()) => {
                        // A promotion that gave up meanwhile gets no tree: keep following.
                        match ask.send(Ok(tree)) {
                            Err(Ok(back)) => tree = back,
                            Ok(()) | Err(Err(_)) => return,
                        }
                    }
                    Err(e) => {
                        let _ = ask.send(Err(e));
                    }
                }
                continue;
            }
        }
        match catch_up(&shared, &me, &mut tree).await {
            Ok(()) if failing => {
                tracing::info!(log = shared.id, "following the log again");
                failing = false;
            }
            Ok(()) => {}
            Err(e) if !failing => {
                tracing::warn!(log = shared.id, error = %e, "cannot follow the log; reads serve the last verified checkpoint until it can");
                failing = true;
            }
            Err(_) => {}
        }
        me.polled.send_modify(|n| *n += 1);
        me.forget_abandoned();
    }
}

/// Extends the tree and head to the stored checkpoint, after checking it, and
/// answers the waiters whose entries it brought.
async fn catch_up(shared: &Arc<Shared>, me: &Follower, tree: &mut Tree) -> Result<(), StorageError> {
    let id = shared.id;
    let from = shared.durable_size();
    let stored = shared.storage.latest_checkpoint_async(id).await?;
    let Some(stored) = stored.filter(|s| s.size > from) else { return Ok(()) };
    let (keys, head) = crate::reconcile::adopt_stored(shared, tree, from, stored).await?;

    let waiting: Vec<(u64, Vec<Reply>)> = {
        let mut waiters = me.waiters.lock();
        if waiters.is_empty() {
            return Ok(());
        }
        keys.iter().enumerate().filter_map(|(i, k)| waiters.remove(&k.leaf_hash).map(|r| (from + i as u64, r))).collect()
    };
    if waiting.is_empty() {
        return Ok(());
    }
    // The entries' times and stamps were made by the sequencer: read them back, in one query.
    let indices = waiting.iter().map(|w| w.0).collect::<Vec<u64>>();
    let receipts = shared.storage.receipts_async(id, indices).await;
    let receipts: Result<HashMap<u64, (i64, Option<Vec<u8>>)>, AppendError> = match receipts {
        Ok(all) => Ok(all.into_iter().map(|(i, t, s)| (i, (t, s))).collect()),
        Err(e) => Err(append_error(e)),
    };
    for (index, replies) in waiting {
        let answer = match &receipts {
            Ok(found) => match found.get(&index) {
                Some((time, stamp)) => Ok(Sequenced::New { index, integrated_time: *time, stamp: stamp.clone(), checkpoint: head.clone() }),
                None => Err(AppendError::Storage(format!("entry {index} is covered by the checkpoint but not stored"))),
            },
            Err(e) => Err(e.clone()),
        };
        for r in replies {
            let _ = r.send(answer.clone());
        }
    }
    Ok(())
}

/// Writes queued appends to the storage's queue, as many per write as are waiting.
async fn submit_loop(shared: Arc<Shared>, me: Arc<Follower>, mut rx: mpsc::Receiver<QueuedEntry>) {
    while let Some(first) = rx.recv().await {
        let mut group = vec![first];
        while group.len() < SUBMIT_GROUP {
            match rx.try_recv() {
                Ok(e) => group.push(e),
                Err(_) => break,
            }
        }
        let leaves: Vec<Hash> = group.iter().map(|e| e.leaf_hash).collect();
        let failure = match me.queue.enqueue_async(shared.id, group).await {
            Ok(()) => continue,
            Err(e) => append_error(e),
        };
        for leaf in &leaves {
            me.answer(leaf, Err(failure.clone()));
        }
    }
}

/// The sequencer's side: takes queued entries into the pool, and forgets each once it is
/// logged. `local`: the follower this sequencer was promoted from, whose own waiting appends
/// are answered here from now on.
pub(crate) async fn drain(shared: Arc<Shared>, tx: mpsc::Sender<Pending>, queue: Arc<dyn Queue>, local: Option<Arc<Follower>>) {
    let id = shared.id;
    let mut failing = false;
    loop {
        // A frozen log takes nothing more: dropping this sender lets its pool close.
        if shared.closing.load(Ordering::SeqCst) || shared.frozen_in_storage.get().is_some() {
            return;
        }
        let rows = match queue.dequeue_async(id, DRAIN_BATCH).await {
            Ok(rows) => rows,
            Err(e) => {
                if !failing {
                    tracing::warn!(log = id, error = %e, "cannot read the queue of other instances' appends; retrying");
                }
                failing = true;
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
        };
        failing = false;
        if rows.is_empty() {
            tokio::time::sleep(DRAIN_IDLE).await;
            continue;
        }
        let mut answers = Vec::with_capacity(rows.len());
        for (qid, e) in rows {
            let (reply, rx) = oneshot::channel();
            let leaf_hash = merkle::leaf_hash(&e.body);
            let pending = Pending {
                leaf_hash,
                digest: e.digest,
                identity: e.identity,
                public_key: e.public_key,
                body: e.body,
                extra: e.extra,
                attestation: e.attestation,
                reply,
                queued: std::time::Instant::now(),
            };
            if tx.send(pending).await.is_err() {
                return;
            }
            answers.push((qid, leaf_hash, rx));
        }
        let mut logged = Vec::with_capacity(answers.len());
        let mut unlogged = 0usize;
        for (qid, leaf, rx) in answers {
            match rx.await {
                Ok(Ok(sequenced)) => {
                    logged.push(qid);
                    if let Some(f) = &local {
                        f.answer(&leaf, Ok(sequenced));
                    }
                }
                _ => unlogged += 1,
            }
        }
        if !logged.is_empty() {
            if let Err(e) = queue.forget_async(id, logged).await {
                // Harmless: the next round finds them logged, as duplicates.
                tracing::warn!(log = id, error = %e, "cannot clear logged entries from the queue");
            }
        }
        if unlogged > 0 {
            // They stay queued; the batch's own error was logged by the committer.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
