//! How the requests waiting on a batch are answered: with their indices once it is durable, or
//! with the error that kept it from being committed. Every path that ends a batch (the
//! sequencer's commit, [`crate::reconcile`]) ends it here, so that a waiter is answered once.

use signet_core::hash::Hash;

use crate::error::AppendError;
use crate::pipeline::{Pending, Prepared, Reply, Sequenced, Staged};
use crate::shared::Shared;
use crate::storage::{Batch, StorageError};

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
pub(crate) fn forget_inflight(shared: &Shared, batch: &Batch) {
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
pub(crate) fn repeat_answer(index: u64, leaf: &Hash, durable_size: u64, leaf_at: impl Fn(u64) -> Option<Hash>) -> Result<Sequenced, AppendError> {
    if index < durable_size && leaf_at(index).as_ref() == Some(leaf) {
        Ok(Sequenced::Duplicate { index })
    } else {
        Err(AppendError::Storage("the identical entry's batch failed to commit; retry".into()))
    }
}

pub(crate) fn fail<T>(replies: impl IntoIterator<Item = Reply>, err: AppendError) -> Option<T> {
    tracing::error!(error = %err, "batch not committed");
    for r in replies {
        let _ = r.send(Err(err.clone()));
    }
    None
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
