//! In-memory lookup of entries by leaf hash and by artifact digest.
//!
//! Both keys are uniformly random, so B-tree indexes on them would dirty a random page per
//! entry on every commit: megabytes of WAL per batch. Instead they live here, keyed by the
//! first 8 bytes of the hash (about 40 bytes per entry for both maps), rebuilt from storage
//! at startup and extended by the committer once a batch is durable. A prefix match is only
//! a candidate: callers confirm it against the full leaf hash in the tree.

use std::collections::HashMap;

use signet_core::hash::{sha256, Hash};

#[derive(Default)]
pub struct KeyIndex {
    /// Leaf-hash prefix → index. Almost every prefix maps to one entry.
    leaves: HashMap<u64, Vec<u64>>,
    /// Prefix of SHA-256(digest key) → indices, oldest first.
    digests: HashMap<u64, Vec<u64>>,
}

fn prefix(h: &Hash) -> u64 {
    let [a, b, c, d, e, f, g, h8, ..] = *h;
    u64::from_be_bytes([a, b, c, d, e, f, g, h8])
}

impl KeyIndex {
    pub fn insert(&mut self, index: u64, leaf: &Hash, digest_key: Option<&[u8]>) {
        self.leaves.entry(prefix(leaf)).or_default().push(index);
        if let Some(d) = digest_key {
            self.digests.entry(prefix(&sha256(d))).or_default().push(index);
        }
    }

    /// Indices whose leaf hash may be `leaf`.
    pub fn leaf_candidates(&self, leaf: &Hash) -> &[u64] {
        self.leaves.get(&prefix(leaf)).map_or(&[], Vec::as_slice)
    }

    /// Indices whose digest key may be `digest_key`.
    pub fn digest_candidates(&self, digest_key: &[u8]) -> &[u64] {
        self.digests.get(&prefix(&sha256(digest_key))).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_leaf_and_digest() {
        let mut k = KeyIndex::default();
        k.insert(0, &[1; 32], Some(b"sha256:aa"));
        k.insert(1, &[2; 32], Some(b"sha256:aa"));
        k.insert(2, &[3; 32], None);
        assert_eq!(k.leaf_candidates(&[2; 32]), &[1]);
        assert_eq!(k.leaf_candidates(&[9; 32]), &[] as &[u64]);
        assert_eq!(k.digest_candidates(b"sha256:aa"), &[0, 1]);
        assert!(k.digest_candidates(b"sha256:bb").is_empty());
    }
}
