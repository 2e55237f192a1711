//! The sequencer: the one task that owns a log's tree and assigns indices.
//!
//! Appends wait in a pool (a channel). The sequencer takes up to `batch_size` of them, or
//! whatever arrived within `batch_delay` of the first, and then, in order:
//! drops entries already in the log, appends the rest to the tree, signs one checkpoint,
//! stamps each entry (the SET on Rekor v1), and commits all of it in one durable write.
//! Only after that commit are the waiting requests answered. If the commit fails the tree is
//! rolled back, every waiter gets the error, and no index is ever handed out twice.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use signet_core::hash::Hash;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::checkpoint::{Checkpoint, SignedCheckpoint};
use crate::log::{AppendError, Shared};
use crate::storage::{Batch, NewEntry, StoredCheckpoint, Tile};
use crate::tiles::TILE_WIDTH;

/// An entry waiting to be sequenced.
pub(crate) struct Pending {
    pub leaf_hash: Hash,
    pub digest: Option<Vec<u8>>,
    pub body: Vec<u8>,
    pub reply: oneshot::Sender<Result<Sequenced, AppendError>>,
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

pub(crate) async fn run(shared: Arc<Shared>, mut rx: mpsc::Receiver<Pending>, policy: BatchPolicy) {
    let mut pool: Vec<Pending> = Vec::with_capacity(policy.max_entries);
    while let Some(first) = rx.recv().await {
        pool.push(first);
        let deadline = Instant::now() + policy.max_delay;
        while pool.len() < policy.max_entries {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(p)) => pool.push(p),
                Ok(None) | Err(_) => break,
            }
        }
        flush(&shared, std::mem::take(&mut pool)).await;
    }
}

async fn flush(shared: &Arc<Shared>, pool: Vec<Pending>) {
    let leaves: Vec<Hash> = pool.iter().map(|p| p.leaf_hash).collect();
    let storage = shared.storage.clone();
    let log_id = shared.id;
    let known = match tokio::task::spawn_blocking(move || storage.find_leaves(log_id, &leaves)).await {
        Ok(Ok(known)) => known,
        Ok(Err(e)) => return fail_all(pool, AppendError::Storage(e.to_string())),
        Err(e) => return fail_all(pool, AppendError::Storage(e.to_string())),
    };

    // Split the pool into new entries, duplicates of stored entries, and repeats within the pool.
    let mut first_in_pool: HashMap<Hash, usize> = HashMap::new();
    let mut fresh: Vec<Pending> = Vec::with_capacity(pool.len());
    let mut repeats: Vec<(usize, Pending)> = Vec::new();
    for (p, known) in pool.into_iter().zip(known) {
        if let Some(index) = known {
            let _ = p.reply.send(Ok(Sequenced::Duplicate { index }));
        } else if let Some(&pos) = first_in_pool.get(&p.leaf_hash) {
            repeats.push((pos, p));
        } else {
            first_in_pool.insert(p.leaf_hash, fresh.len());
            fresh.push(p);
        }
    }
    if fresh.is_empty() {
        return;
    }

    let integrated_time = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (old_size, new_size, root, tiles) = {
        let mut tree = shared.tree.write();
        let old_size = tree.size();
        for p in &fresh {
            tree.push(p.leaf_hash);
        }
        let new_size = tree.size();
        let root = tree.root(new_size).expect("size is the tree's own");
        (old_size, new_size, root, changed_tiles(&tree, old_size, new_size))
    };

    let prepared = prepare(shared, &fresh, old_size, new_size, root, integrated_time);
    let (checkpoint, entries) = match prepared {
        Ok(x) => x,
        Err(e) => {
            shared.tree.write().truncate(old_size);
            return fail_all(fresh.into_iter().chain(repeats.into_iter().map(|r| r.1)).collect(), e);
        }
    };
    let batch = Batch {
        log: shared.id,
        integrated_time,
        entries,
        tiles,
        checkpoint: StoredCheckpoint { size: new_size, note: checkpoint.note.clone() },
    };
    let storage = shared.storage.clone();
    let committed = tokio::task::spawn_blocking(move || storage.commit(&batch).map(|()| batch)).await;
    let batch = match committed {
        Ok(Ok(batch)) => batch,
        Ok(Err(e)) => {
            shared.tree.write().truncate(old_size);
            return fail_all(fresh.into_iter().chain(repeats.into_iter().map(|r| r.1)).collect(), AppendError::Storage(e.to_string()));
        }
        Err(e) => {
            shared.tree.write().truncate(old_size);
            return fail_all(fresh.into_iter().chain(repeats.into_iter().map(|r| r.1)).collect(), AppendError::Storage(e.to_string()));
        }
    };

    let checkpoint = Arc::new(checkpoint);
    *shared.head.write() = checkpoint.clone();
    for (p, e) in fresh.into_iter().zip(batch.entries) {
        let _ = p.reply.send(Ok(Sequenced::New {
            index: e.index,
            integrated_time,
            stamp: e.stamp,
            checkpoint: checkpoint.clone(),
        }));
    }
    for (pos, p) in repeats {
        let _ = p.reply.send(Ok(Sequenced::Duplicate { index: old_size + pos as u64 }));
    }
}

/// Signs the checkpoint and stamps each entry. CPU-bound but short: one signature per entry.
fn prepare(
    shared: &Shared,
    fresh: &[Pending],
    old_size: u64,
    new_size: u64,
    root: Hash,
    integrated_time: i64,
) -> Result<(SignedCheckpoint, Vec<NewEntry>), AppendError> {
    let checkpoint = shared
        .signer
        .sign(Checkpoint { origin: shared.origin.clone(), size: new_size, root_hash: root })
        .map_err(|e| AppendError::Signing(e.to_string()))?;
    let mut entries = Vec::with_capacity(fresh.len());
    for (i, p) in fresh.iter().enumerate() {
        let index = old_size + i as u64;
        let stamp = match &shared.stamper {
            Some(s) => Some(s.stamp(index, integrated_time, &p.body).map_err(|e| AppendError::Signing(e.to_string()))?),
            None => None,
        };
        entries.push(NewEntry { index, leaf_hash: p.leaf_hash, digest: p.digest.clone(), body: p.body.clone(), stamp });
    }
    Ok((checkpoint, entries))
}

/// The tiles (c2sp.org/tlog-tiles) whose contents changed when the tree grew.
pub(crate) fn changed_tiles(tree: &crate::tree::Tree, old_size: u64, new_size: u64) -> Vec<Tile> {
    let mut tiles = Vec::new();
    for tile_level in 0u8..8 {
        let shift = 8 * tile_level as u32;
        let (old_n, new_n) = (old_size >> shift, new_size >> shift);
        if new_n == old_n {
            break;
        }
        for index in old_n / TILE_WIDTH..=(new_n - 1) / TILE_WIDTH {
            let nodes = tree.level_slice(shift, index * TILE_WIDTH, TILE_WIDTH);
            tiles.push(Tile { level: tile_level, index, hashes: nodes.concat() });
        }
    }
    tiles
}

fn fail_all(pool: Vec<Pending>, err: AppendError) {
    tracing::error!(error = %err, entries = pool.len(), "batch not committed");
    for p in pool {
        let _ = p.reply.send(Err(err.clone()));
    }
}
