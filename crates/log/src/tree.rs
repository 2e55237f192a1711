//! The in-memory Merkle tree of one log: every complete subtree hash, level by level.
//!
//! Keeping all levels costs 64 bytes per leaf (32 MiB per million entries for leaves and
//! inner nodes together) and makes every proof a handful of array reads, which is what lets
//! proof reads run at tens of thousands per second. The tree is rebuilt from stored tiles at
//! startup; the sequencer is its only writer.

use signet_core::hash::Hash;

use crate::merkle::{self, Nodes, ProofError};

#[derive(Default, Clone)]
pub struct Tree {
    /// levels[l][i] = hash of the perfect subtree of 2^l leaves starting at leaf i·2^l.
    levels: Vec<Vec<Hash>>,
}

impl Tree {
    pub fn new() -> Self {
        Tree { levels: vec![Vec::new()] }
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.levels[0].len() as u64
    }

    /// Appends one leaf hash, completing every subtree it closes.
    pub fn push(&mut self, leaf: Hash) {
        self.levels[0].push(leaf);
        let mut level = 0;
        while self.levels[level].len() % 2 == 0 {
            let n = self.levels[level].len();
            let parent = merkle::node_hash(&self.levels[level][n - 2], &self.levels[level][n - 1]);
            if self.levels.len() == level + 1 {
                self.levels.push(Vec::new());
            }
            self.levels[level + 1].push(parent);
            level += 1;
        }
    }

    /// Drops everything after the first `size` leaves (undoing a batch whose commit failed).
    pub fn truncate(&mut self, size: u64) {
        for (level, nodes) in self.levels.iter_mut().enumerate() {
            nodes.truncate((size >> level) as usize);
        }
    }

    /// Root hash of the tree of the first `size` leaves.
    pub fn root(&self, size: u64) -> Result<Hash, ProofError> {
        self.check(size)?;
        Ok(merkle::root(self, size))
    }

    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
        self.check(size)?;
        merkle::inclusion_proof(self, index, size)
    }

    pub fn consistency_proof(&self, first: u64, second: u64) -> Result<Vec<Hash>, ProofError> {
        self.check(second)?;
        merkle::consistency_proof(self, first, second)
    }

    /// The right edge of the tree of `size` leaves, to prove against that size repeatedly.
    pub fn right_edge(&self, size: u64) -> Result<RightEdge, ProofError> {
        self.check(size)?;
        Ok(RightEdge { size, ranges: merkle::right_edge(self, size) })
    }

    /// [`Tree::inclusion_proof`] against `edge.size`, taking right-edge hashes from `edge`.
    pub fn inclusion_proof_at(&self, edge: &RightEdge, index: u64) -> Result<Vec<Hash>, ProofError> {
        self.check(edge.size)?;
        merkle::inclusion_proof(&WithEdge { tree: self, edge }, index, edge.size)
    }

    /// [`Tree::consistency_proof`] from `first` to `edge.size`, taking right-edge hashes from `edge`.
    pub fn consistency_proof_at(&self, first: u64, edge: &RightEdge) -> Result<Vec<Hash>, ProofError> {
        self.check(edge.size)?;
        merkle::consistency_proof(&WithEdge { tree: self, edge }, first, edge.size)
    }

    pub fn leaf(&self, index: u64) -> Option<&Hash> {
        self.levels[0].get(index as usize)
    }

    /// The stored nodes of one level from `start`, at most `count` of them: a tile's contents.
    pub fn level_slice(&self, level: u32, start: u64, count: u64) -> &[Hash] {
        let Some(nodes) = self.levels.get(level as usize) else { return &[] };
        let start = (start as usize).min(nodes.len());
        let end = start.saturating_add(count as usize).min(nodes.len());
        &nodes[start..end]
    }

    fn check(&self, size: u64) -> Result<(), ProofError> {
        if size > self.size() {
            return Err(ProofError::SizeOutOfRange { size, available: self.size() });
        }
        Ok(())
    }
}

impl Nodes for Tree {
    fn node(&self, level: u32, index: u64) -> Hash {
        self.levels[level as usize][index as usize]
    }
}

/// The hashes of the incomplete subtrees on the right edge of one tree size
/// ([`merkle::right_edge`]). Without them every proof against the head rehashes the edge.
pub struct RightEdge {
    pub size: u64,
    ranges: Vec<(u64, Hash)>,
}

struct WithEdge<'a> {
    tree: &'a Tree,
    edge: &'a RightEdge,
}

impl Nodes for WithEdge<'_> {
    fn node(&self, level: u32, index: u64) -> Hash {
        self.tree.node(level, index)
    }

    fn known_range(&self, lo: u64, hi: u64) -> Option<Hash> {
        if hi != self.edge.size {
            return None;
        }
        // At most 63 ranges, sorted by start.
        let i = self.edge.ranges.binary_search_by_key(&lo, |&(start, _)| start).ok()?;
        Some(self.edge.ranges[i].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::{leaf_hash, verify_consistency, verify_inclusion};

    #[test]
    fn grows_and_truncates_consistently() {
        let mut t = Tree::new();
        let mut roots = vec![merkle::empty_root()];
        for i in 0u32..300 {
            t.push(leaf_hash(&i.to_le_bytes()));
            roots.push(t.root(t.size()).unwrap());
        }
        for size in [1u64, 2, 3, 255, 256, 257, 300] {
            assert_eq!(t.root(size).unwrap(), roots[size as usize]);
            let p = t.consistency_proof(size, 300).unwrap();
            verify_consistency(size, 300, &p, &roots[size as usize], &roots[300]).unwrap();
            let idx = size - 1;
            let p = t.inclusion_proof(idx, 300).unwrap();
            verify_inclusion(t.leaf(idx).unwrap(), idx, 300, &p, &roots[300]).unwrap();
        }
        for size in [1u64, 5, 256, 299, 300] {
            let edge = t.right_edge(size).unwrap();
            for i in 0..size {
                assert_eq!(t.inclusion_proof_at(&edge, i).unwrap(), t.inclusion_proof(i, size).unwrap());
            }
            for first in [0, 1, size / 2, size] {
                assert_eq!(t.consistency_proof_at(first, &edge).unwrap(), t.consistency_proof(first, size).unwrap());
            }
        }
        t.truncate(257);
        assert_eq!(t.size(), 257);
        assert_eq!(t.root(257).unwrap(), roots[257]);
        t.push(leaf_hash(&257u32.to_le_bytes()));
        assert_eq!(t.root(258).unwrap(), roots[258], "regrowth after truncate is identical");
        assert!(matches!(t.root(259), Err(ProofError::SizeOutOfRange { .. })));
    }
}
