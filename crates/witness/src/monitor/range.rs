//! The tree as a monitor holds it: the roots of the perfect subtrees covering the leaves
//! seen so far (a "compact range" from 0). At most 64 hashes however long the log, so it is
//! kept in the state file; pushing each entry's leaf hash and comparing the root with the
//! checkpoint's proves that the entries read are exactly the ones the log signed.

use signet_core::hash::Hash;
use signet_core::merkle::{empty_root, node_hash};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Range {
    size: u64,
    /// Subtree roots, largest (leftmost) first: one per set bit of `size`.
    peaks: Vec<Hash>,
}

impl Range {
    /// A range from stored peaks; `None` when their count does not fit `size`.
    pub fn from_parts(size: u64, peaks: Vec<Hash>) -> Option<Range> {
        (peaks.len() == size.count_ones() as usize).then_some(Range { size, peaks })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn peaks(&self) -> &[Hash] {
        &self.peaks
    }

    /// Appends one leaf hash: equal-sized subtrees merge as the size's low bits carry.
    pub fn push(&mut self, leaf: Hash) {
        let mut hash = leaf;
        let mut carry = self.size;
        while carry & 1 == 1 {
            let Some(left) = self.peaks.pop() else { break };
            hash = node_hash(&left, &hash);
            carry >>= 1;
        }
        self.peaks.push(hash);
        self.size += 1;
    }

    /// The RFC 6962 root of the leaves pushed so far: the peaks folded from the right.
    pub fn root(&self) -> Hash {
        let mut peaks = self.peaks.iter().rev();
        let Some(last) = peaks.next() else { return empty_root() };
        peaks.fold(*last, |right, left| node_hash(left, &right))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signet_core::merkle::leaf_hash;

    /// The root by the RFC's recursive definition (split at the largest power of two below n).
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    #[test]
    fn roots_match_the_rfc_definition_at_every_size() {
        let leaves: Vec<Hash> = (0u32..300).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let mut range = Range::default();
        assert_eq!(range.root(), empty_root());
        for (i, leaf) in leaves.iter().enumerate() {
            range.push(*leaf);
            assert_eq!(range.root(), mth(&leaves[..=i]), "size {}", i + 1);
        }
        let again = Range::from_parts(range.size(), range.peaks().to_vec()).unwrap();
        assert_eq!(again, range);
        assert!(Range::from_parts(3, vec![[0; 32]]).is_none());
    }
}
