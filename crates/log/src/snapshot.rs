//! What readers see of a log: one durable checkpoint and the tree as of it, published whole.
//!
//! One task owns the growing tree (the sequencer's, or a follower's poll loop); readers never
//! see it. Whenever the durable head moves, the task that moved it publishes a new snapshot
//! through an atomic swap: the checkpoint and a
//! frozen copy of the tree at exactly its size ([`Tree::frozen`]). So a reader cannot see a
//! size past the head, or a node that a failed batch put in memory, or wait behind a batch
//! being prepared; and every read of one request (the head, the proof, the right edge) comes
//! from one state, not from two moments of a moving one. A read costs no write to a lock
//! shared between cores, either, which at the read ceiling was measurable (issue 40).

use std::sync::{Arc, OnceLock};

use crate::checkpoint::SignedCheckpoint;
use crate::merkle::ProofError;
use crate::tree::{RightEdge, Tree};

pub(crate) struct Snapshot {
    pub head: Arc<SignedCheckpoint>,
    /// The tree of `head`'s size, and no more.
    pub tree: Tree,
    /// The head's right edge, made by the first proof against the head that needs it.
    edge: OnceLock<Option<RightEdge>>,
}

impl Snapshot {
    /// The state of `tree` at `head`, whose size the tree holds and storage has made durable.
    pub fn of(tree: &Tree, head: Arc<SignedCheckpoint>) -> Snapshot {
        Snapshot { tree: tree.frozen(head.checkpoint.size), head, edge: OnceLock::new() }
    }

    pub fn size(&self) -> u64 {
        self.head.checkpoint.size
    }

    /// Whether proofs against `size` can be made: it is at most the head.
    pub fn check(&self, size: u64) -> Result<(), ProofError> {
        if size > self.size() {
            return Err(ProofError::SizeOutOfRange { size, available: self.size() });
        }
        Ok(())
    }

    /// Runs `f` with the right edge of `size`: the head's is kept, since nearly every proof is
    /// against the head; an older size's is made each time.
    pub fn with_edge<T>(&self, size: u64, f: impl FnOnce(&RightEdge) -> T) -> Result<T, ProofError> {
        self.check(size)?;
        if size != self.size() {
            return Ok(f(&self.tree.right_edge(size)?));
        }
        // A failure is kept as `None`, and each proof then makes the edge (and meets the error) itself.
        let edge = self.edge.get_or_init(|| self.tree.right_edge(size).ok());
        match edge {
            Some(edge) => Ok(f(edge)),
            None => Ok(f(&self.tree.right_edge(size)?)),
        }
    }
}
