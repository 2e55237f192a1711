//! An entry's body and its leaf hash, made together.

use signet_core::hash::Hash;

use crate::merkle;

/// An entry's body with its RFC 6962 leaf hash, computed once: the API answers with the hash
/// (a Rekor UUID, the audit record) and the sequencer orders by it, and hashing a large body
/// twice cost each append a second pass over it. The only way to make one is to hash.
pub struct Leaf {
    body: Vec<u8>,
    hash: Hash,
}

impl Leaf {
    pub fn new(body: Vec<u8>) -> Leaf {
        let hash = merkle::leaf_hash(&body);
        Leaf { body, hash }
    }

    pub fn hash(&self) -> &Hash {
        &self.hash
    }

    pub fn body(&self) -> &[u8] {
        &self.body
    }

    pub(super) fn into_parts(self) -> (Vec<u8>, Hash) {
        (self.body, self.hash)
    }
}

impl From<Vec<u8>> for Leaf {
    fn from(body: Vec<u8>) -> Leaf {
        Leaf::new(body)
    }
}
