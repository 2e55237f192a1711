//! Reconciling: what the committer does when it no longer knows what storage holds.
//!
//! A commit that fails may still have landed (its answer was lost with the connection), or
//! may land later (a COMMIT delayed in the network); a commit refused as a conflict means
//! storage moved without this committer. In each case memory may no longer match storage,
//! and every batch prepared since was built on memory. Guessing here is how a log forks:
//! a prepared batch committed on a state it was not built on, or a checkpoint signed over a
//! tree that is not the stored one.
//!
//! So there is one state for all of them. The sequencer's task stops preparing and drops
//! every prepared batch, reads the stored checkpoint until it gets an answer, and rebuilds the
//! tree's edge from the stored entries, checking the checkpoint's signature and root as a
//! follower does. Only then does it answer the uncertain batch's waiters, from what is
//! durable: 201 if their entries are stored at their indices, 503 (retry) if not. The tree's
//! generation, bumped as the reconcile begins, marks all work begun before as stale, so none
//! of it is ever committed on a state it was not built on. The task owns the tree, so while
//! it reconciles nothing else can touch it.
//!
//! If storage cannot be read, the uncertain batch's waiters get a 503 after
//! [`ANSWER_WITHIN`], and the task keeps reading: nothing is committed, signed for commit, or
//! answered from a guessed state in the meantime; appends that arrive meanwhile get a 503.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checkpoint::{self, SignedCheckpoint};
use crate::error::AppendError;
use crate::shared::Shared;
use crate::answers::{append_error, drop_prepared, fail_gathered, fail_staged, land_answers};
use crate::pipeline::{gather, poll_opt, Base, Prepared, Sequenced, Sequencer, Work};
use crate::storage::{EntryKeys, StorageError, StoredCheckpoint};
use crate::tree::Tree;

/// How long the waiters of a commit whose outcome is unknown wait for it before they get a
/// 503: a client's retry is then answered as a duplicate if the entry did land.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// The longest pause between two reads of the stored checkpoint while it cannot be read.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Why a waiting entry was not logged while the log reconciled; the client should retry.
fn reconciling_error() -> AppendError {
    AppendError::Unavailable("the log is reconciling with its storage after a commit whose outcome was unknown; retry".into())
}

pub(crate) fn stale_error() -> AppendError {
    AppendError::Unavailable("the log was reconciled with its storage while this batch waited; retry".into())
}

/// Reconciles after a commit failed with `cause` (`uncertain`: the batch whose outcome is
/// unknown, if there is one), or after the tree was found in a state it cannot be in.
pub(crate) async fn reconcile(s: &mut Sequencer, work: &mut Work, uncertain: Option<Prepared>, cause: StorageError) {
    let started = Instant::now();
    s.generation += 1;
    let shared = s.shared.clone();
    tracing::warn!(log = shared.id, error = %cause, size = uncertain.as_ref().map(|p| p.batch.checkpoint.size), "{}; reconciling with storage", why(&cause));
    if let StorageError::Frozen { size, .. } = cause {
        // No commit can land from now on: refuse appends at once, and wake whoever serves
        // the next shard.
        let _ = shared.frozen_in_storage.set(size);
        shared.frozen_notice.notify_one();
    }
    // What the waiters hear if their batch did not land: the cause's own answer where it is
    // definite (a full disk is 507, and the batches behind would have met it too), else a retry.
    let (not_landed, dropped) = match cause {
        StorageError::Full(m) => (AppendError::Full(m.clone()), AppendError::Full(m)),
        StorageError::Conflict { .. } => (reconciling_error(), reconciling_error()),
        other => (append_error(other), reconciling_error()),
    };
    for p in work.prepared.drain(..) {
        drop_prepared(&shared, p, dropped.clone());
    }
    let mut uncertain = uncertain;
    let mut backoff = Duration::from_millis(10);
    let mut failing = false;
    loop {
        match settle(s).await {
            Ok((keys, head)) => {
                if let Some(p) = uncertain.take() {
                    answer_uncertain(&shared, p, &keys, &head, not_landed).await;
                }
                shared.stats.reconciled(started.elapsed());
                tracing::info!(log = shared.id, size = head.checkpoint.size, took_ms = started.elapsed().as_millis() as u64, "reconciled with storage");
                return;
            }
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(log = shared.id, error = %e, "cannot read the stored state yet; nothing is committed until it can be");
            }
            Err(_) => {}
        }
        if started.elapsed() >= ANSWER_WITHIN {
            if let Some(p) = uncertain.take() {
                drop_prepared(&shared, p, reconciling_error());
            }
        }
        // Work begun before the reconcile, and batches gathered during it, are failed while
        // waiting: a client told to retry can go to an instance that sequences.
        let pause = tokio::time::sleep(backoff);
        tokio::pin!(pause);
        loop {
            if work.gathering.is_none() && !work.closing {
                if let Some(rx) = work.pool.take() {
                    work.gathering = Some(gather(shared.clone(), rx, work.policy));
                }
            }
            let Work { gathering, stage, .. } = &mut *work;
            tokio::select! {
                _ = &mut pause => break,
                staged = poll_opt(stage) => {
                    work.stage = None;
                    fail_staged(&shared, staged, dropped.clone());
                }
                (batch, rx) = poll_opt(gathering) => {
                    work.gathering = None;
                    match batch {
                        Some(batch) => {
                            work.pool = Some(rx);
                            fail_gathered(batch, dropped.clone());
                        }
                        None => {
                            // The log is shutting down: stop here. The tree is rebuilt at the
                            // next start, from whatever storage then holds.
                            work.closing = true;
                            if let Some(p) = uncertain.take() {
                                drop_prepared(&shared, p, reconciling_error());
                            }
                            return;
                        }
                    }
                }
            }
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// What the log line says brought the reconcile on: only some causes leave the outcome unknown.
fn why(cause: &StorageError) -> &'static str {
    match cause {
        StorageError::Full(_) => "storage is full and refused a commit (nothing was written)",
        StorageError::Conflict { .. } => "storage moved without this sequencer",
        StorageError::Fenced(_) => "another instance holds the sequencer lease",
        StorageError::Frozen { .. } => "a rotation froze the tree (nothing was written)",
        _ => "a commit's outcome is unknown",
    }
}

/// Reads the stored checkpoint and rebuilds the tree from it. Returns the stored keys past the
/// old durable size, and the new head.
async fn settle(s: &mut Sequencer) -> Result<(Vec<EntryKeys>, Arc<SignedCheckpoint>), StorageError> {
    let shared = s.shared.clone();
    let id = shared.id;
    let stored = shared.storage.latest_checkpoint_async(id).await?;
    let from = shared.durable_size();
    let adopted = match stored {
        Some(stored) if stored.size < from => Err(StorageError::Corrupt(format!(
            "log {id}: storage holds a checkpoint of size {} but {from} entries were durable here (was it restored from a backup?)",
            stored.size
        ))),
        Some(stored) => adopt_stored(&shared, &mut s.tree, from, stored).await,
        None if from == 0 => {
            let head = shared.head();
            rebuild(&shared, &mut s.tree, from, &[], &head)?;
            Ok((Vec::new(), head))
        }
        None => Err(StorageError::Corrupt(format!("log {id}: storage holds no checkpoint but {from} entries were durable here"))),
    };
    let adopted = match adopted {
        Ok(a) => a,
        Err(e) => {
            // Whatever the tree held past the durable size is gone either way.
            s.tree.truncate(from);
            s.tip = Base { size: from, root: shared.head().checkpoint.root_hash };
            return Err(e);
        }
    };
    s.tip = Base { size: adopted.1.checkpoint.size, root: adopted.1.checkpoint.root_hash };
    // The newest stored time bounds the next one (another instance may have written it).
    if let Some(last) = adopted.1.checkpoint.size.checked_sub(1) {
        if let Ok(Some(e)) = shared.storage.entry_async(id, last).await {
            s.last_time = s.last_time.max(e.integrated_time);
        }
    }
    Ok(adopted)
}

/// Extends `tree` from durable size `from` to `stored`, after checking its signature with
/// this log's key and its root against the stored entries' leaf hashes, and publishes it.
/// Returns the stored keys past `from` and the new head. Followers catch up through this too.
pub(crate) async fn adopt_stored(
    shared: &Arc<Shared>,
    tree: &mut Tree,
    from: u64,
    stored: StoredCheckpoint,
) -> Result<(Vec<EntryKeys>, Arc<SignedCheckpoint>), StorageError> {
    const CHUNK: u64 = 65_536;
    let id = shared.id;
    let corrupt = |why: String| StorageError::Corrupt(format!("log {id}, checkpoint of size {}: {why}", stored.size));
    let parsed = checkpoint::verify(&stored.note, shared.signer.name(), shared.signer.key().spki_der())
        .map_err(|e| corrupt(format!("does not verify with this instance's key for the log: {e}")))?;
    if parsed.size != stored.size || parsed.origin != shared.origin {
        return Err(corrupt(format!("its note says origin {:?} and size {}", parsed.origin, parsed.size)));
    }
    let wanted = stored.size.saturating_sub(from);
    let mut keys = Vec::with_capacity(wanted.min(CHUNK) as usize);
    while (keys.len() as u64) < wanted {
        let start = from + keys.len() as u64;
        let count = CHUNK.min(stored.size - start);
        let chunk = shared.storage.keys_async(id, start, count).await?;
        if chunk.is_empty() {
            break;
        }
        keys.extend(chunk);
    }
    if keys.len() as u64 != wanted {
        return Err(corrupt(format!("storage holds {} of its entries past {from}", keys.len())));
    }
    let head = Arc::new(SignedCheckpoint { checkpoint: parsed, note: stored.note });
    rebuild(shared, tree, from, &keys, &head).map_err(|e| corrupt(e.to_string()))?;
    Ok((keys, head))
}

/// Puts `tree` at `from` plus `keys`, checks its root against `head`, and publishes `head`
/// with it. On a mismatch the tree is left at `from`.
fn rebuild(shared: &Shared, tree: &mut Tree, from: u64, keys: &[EntryKeys], head: &Arc<SignedCheckpoint>) -> Result<(), StorageError> {
    let size = head.checkpoint.size;
    tree.truncate(from);
    for k in keys {
        tree.push(k.leaf_hash);
    }
    let root = tree.root(size).map_err(|e| StorageError::Corrupt(e.to_string()))?;
    if root != head.checkpoint.root_hash {
        tree.truncate(from);
        return Err(StorageError::Corrupt("its root is not the root of the stored entries".into()));
    }
    tree.settle(size);
    shared.publish(tree, head.clone());
    Ok(())
}

/// Answers the batch whose commit was in doubt, from what storage holds: its entries are
/// logged if the stored leaves at its indices are theirs.
async fn answer_uncertain(shared: &Arc<Shared>, p: Prepared, stored_keys: &[EntryKeys], head: &Arc<SignedCheckpoint>, not_landed: AppendError) {
    // The batch extended the old durable size, which is where `stored_keys` start.
    let landed = stored_keys.len() >= p.batch.entries.len()
        && p.batch.entries.iter().zip(stored_keys).all(|(e, k)| e.leaf_hash == k.leaf_hash);
    if !landed {
        tracing::warn!(log = shared.id, size = p.batch.checkpoint.size, "the commit in doubt did not land; its entries are not logged");
        drop_prepared(shared, p, not_landed);
        return;
    }
    tracing::warn!(log = shared.id, size = p.batch.checkpoint.size, "the commit in doubt had landed; its entries are acknowledged");
    let answers: Result<Vec<Sequenced>, AppendError> = if head.note == p.batch.checkpoint.note {
        Ok(p.batch
            .entries
            .iter()
            .map(|e| Sequenced::New { index: e.index, integrated_time: p.batch.integrated_time, stamp: e.stamp.clone(), checkpoint: head.clone() })
            .collect())
    } else {
        // Storage moved on past this batch: its times and stamps are read back as stored.
        let indices: Vec<u64> = p.batch.entries.iter().map(|e| e.index).collect();
        match shared.storage.receipts_async(shared.id, indices.clone()).await {
            Ok(found) => indices
                .iter()
                .map(|&index| {
                    found
                        .iter()
                        .find(|r| r.0 == index)
                        .map(|(_, time, stamp)| Sequenced::New { index, integrated_time: *time, stamp: stamp.clone(), checkpoint: head.clone() })
                        .ok_or_else(|| AppendError::Storage(format!("entry {index} is covered by the checkpoint but not stored")))
                })
                .collect(),
            Err(e) => Err(append_error(e)),
        }
    };
    match answers {
        Ok(answers) => land_answers(shared, p, answers, head.checkpoint.size),
        Err(e) => drop_prepared(shared, p, e),
    }
}
