//! RFC 6962 §2.1 / RFC 9162 §2.1 Merkle tree hashing, proof construction and proof checking.
//!
//! Construction works over any source of *complete* subtree hashes ([`Nodes`]): the hash of
//! the 2^level leaves starting at `index << level`. Incomplete subtrees on the right edge are
//! hashed on demand. Hashing and verification live in `signet_core::merkle` and are re-exported here.

use signet_core::hash::Hash;
pub use signet_core::merkle::{empty_root, leaf_hash, node_hash, verify_consistency, verify_inclusion, ProofError};

/// A source of complete subtree hashes.
pub trait Nodes {
    /// Hash of the perfect subtree of height `level` whose leftmost leaf is `index << level`.
    /// Only called for subtrees that lie wholly inside the tree being proven.
    fn node(&self, level: u32, index: u64) -> Hash;

    /// MTH(D[lo:hi]) for a range that is not a complete subtree, if the source has it at
    /// hand; `None` makes [`range_hash`] compute it from complete subtrees.
    fn known_range(&self, _lo: u64, _hi: u64) -> Option<Hash> {
        None
    }
}

/// The largest power of two strictly less than `n` (n ≥ 2), the split point k of RFC 6962.
fn split(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1 << (63 - (n - 1).leading_zeros())
}

/// MTH(D[lo:hi]) for a range that starts on a subtree boundary, as the tree decomposes it.
pub fn range_hash<N: Nodes + ?Sized>(nodes: &N, lo: u64, hi: u64) -> Hash {
    let n = hi - lo;
    if n == 0 {
        return empty_root();
    }
    if n.is_power_of_two() && lo % n == 0 {
        return nodes.node(n.trailing_zeros(), lo >> n.trailing_zeros());
    }
    if let Some(h) = nodes.known_range(lo, hi) {
        return h;
    }
    let k = split(n);
    node_hash(&range_hash(nodes, lo, lo + k), &range_hash(nodes, lo + k, hi))
}

/// The incomplete ranges on the right edge of the tree of `size` leaves, `[lo, size)` with
/// their hashes, largest first (the first is the root, unless `size` is a power of two).
///
/// Every proof against `size` that reaches the right edge hashes some of these, and
/// computing them costs one node hash per set bit of `size`: cheap once, not per proof.
pub fn right_edge<N: Nodes + ?Sized>(nodes: &N, size: u64) -> Vec<(u64, Hash)> {
    // Walk down the right edge: [lo, size) splits into a complete left part [lo, lo + k)
    // and the rest, until the rest is itself complete.
    let mut starts = Vec::new();
    let mut lo = 0;
    while size - lo > 1 && !((size - lo).is_power_of_two() && lo % (size - lo) == 0) {
        starts.push(lo);
        lo += split(size - lo);
    }
    // Then hash back up, each range from its complete left part and the range after it.
    let mut right = range_hash(nodes, lo, size);
    let mut out = Vec::with_capacity(starts.len());
    for &start in starts.iter().rev() {
        let k = split(size - start);
        right = node_hash(&range_hash(nodes, start, start + k), &right);
        out.push((start, right));
    }
    out.reverse();
    out
}

/// Root hash of the first `size` leaves.
pub fn root<N: Nodes + ?Sized>(nodes: &N, size: u64) -> Hash {
    range_hash(nodes, 0, size)
}

/// RFC 6962 §2.1.1 PATH(m, D[n]): the audit path of leaf `index` in the tree of `size` leaves.
pub fn inclusion_proof<N: Nodes + ?Sized>(nodes: &N, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let mut proof = Vec::with_capacity(64 - size.leading_zeros() as usize);
    let (mut lo, mut hi) = (0u64, size);
    // Walk down from the root, collecting siblings; PATH lists them leaf-first, so reverse.
    while hi - lo > 1 {
        let k = split(hi - lo);
        if index < lo + k {
            proof.push(range_hash(nodes, lo + k, hi));
            hi = lo + k;
        } else {
            proof.push(range_hash(nodes, lo, lo + k));
            lo += k;
        }
    }
    proof.reverse();
    Ok(proof)
}

/// RFC 6962 §2.1.2 PROOF(m, D[n]): proves that the tree of `first` leaves is a prefix of the
/// tree of `second` leaves.
pub fn consistency_proof<N: Nodes + ?Sized>(nodes: &N, first: u64, second: u64) -> Result<Vec<Hash>, ProofError> {
    if first > second {
        return Err(ProofError::SizesReversed { first, second });
    }
    if first == 0 || first == second {
        return Ok(Vec::new());
    }
    let mut proof = Vec::new();
    subproof(nodes, first, 0, second, true, &mut proof);
    Ok(proof)
}

/// SUBPROOF(m, D[lo:hi], b), appending in RFC order (deepest first).
fn subproof<N: Nodes + ?Sized>(nodes: &N, m: u64, lo: u64, hi: u64, whole: bool, out: &mut Vec<Hash>) {
    let n = hi - lo;
    if m == n {
        if !whole {
            out.push(range_hash(nodes, lo, hi));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(nodes, m, lo, lo + k, whole, out);
        out.push(range_hash(nodes, lo + k, hi));
    } else {
        subproof(nodes, m - k, lo + k, hi, false, out);
        out.push(range_hash(nodes, lo, lo + k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree that hashes everything from the leaves up, independently of [`crate::tree`].
    struct Naive(Vec<Hash>);
    impl Nodes for Naive {
        fn node(&self, level: u32, index: u64) -> Hash {
            let lo = (index << level) as usize;
            let hi = lo + (1usize << level);
            naive_mth(&self.0[lo..hi])
        }
    }
    fn naive_mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = split(n as u64) as usize;
                node_hash(&naive_mth(&leaves[..k]), &naive_mth(&leaves[k..]))
            }
        }
    }

    /// The naive tree, with its right edge at one size cached.
    struct Edged<'a>(&'a Naive, u64, Vec<(u64, Hash)>);
    impl Nodes for Edged<'_> {
        fn node(&self, level: u32, index: u64) -> Hash {
            self.0.node(level, index)
        }
        fn known_range(&self, lo: u64, hi: u64) -> Option<Hash> {
            (hi == self.1).then(|| self.2.iter().find(|(s, _)| *s == lo).map(|(_, h)| *h)).flatten()
        }
    }

    #[test]
    fn right_edge_hashes_match_and_give_the_same_proofs() {
        let leaves = Naive((0u32..70).map(|i| leaf_hash(&i.to_le_bytes())).collect());
        for size in 1u64..=70 {
            let edge = right_edge(&leaves, size);
            assert_eq!(edge.len() as u32, size.count_ones() - 1, "one range per extra set bit of {size}");
            for &(lo, h) in &edge {
                assert_eq!(h, naive_mth(&leaves.0[lo as usize..size as usize]), "[{lo}, {size})");
            }
            let edged = Edged(&leaves, size, edge);
            assert_eq!(root(&edged, size), naive_mth(&leaves.0[..size as usize]));
            for i in 0..size {
                assert_eq!(inclusion_proof(&edged, i, size).unwrap(), inclusion_proof(&leaves, i, size).unwrap());
            }
            for first in 0..=size {
                assert_eq!(consistency_proof(&edged, first, size).unwrap(), consistency_proof(&leaves, first, size).unwrap());
            }
        }
    }

    fn h(s: &str) -> Hash {
        hex::decode(s).unwrap().try_into().unwrap()
    }

    // The certificate-transparency / transparency-dev reference corpus.
    fn ct_leaves() -> Naive {
        let inputs: [&[u8]; 8] = [
            b"",
            b"\x00",
            b"\x10",
            b"\x20\x21",
            b"\x30\x31",
            b"\x40\x41\x42\x43",
            b"\x50\x51\x52\x53\x54\x55\x56\x57",
            b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
        ];
        Naive(inputs.iter().map(|d| leaf_hash(d)).collect())
    }

    const ROOTS: [&str; 8] = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];

    #[test]
    fn roots_match_reference_vectors() {
        let t = ct_leaves();
        assert_eq!(root(&t, 0), h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
        for (i, want) in ROOTS.iter().enumerate() {
            assert_eq!(root(&t, i as u64 + 1), h(want), "size {}", i + 1);
        }
    }

    #[test]
    fn inclusion_proofs_match_reference_vectors() {
        let t = ct_leaves();
        let cases: [(u64, u64, &[&str]); 4] = [
            (0, 8, &[
                "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
            ]),
            (5, 8, &[
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            ]),
            (2, 3, &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
            (1, 5, &[
                "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            ]),
        ];
        for (index, size, want) in cases {
            let got = inclusion_proof(&t, index, size).unwrap();
            let want: Vec<Hash> = want.iter().map(|s| h(s)).collect();
            assert_eq!(got, want, "PATH({index}, D[{size}])");
            verify_inclusion(&t.0[index as usize], index, size, &got, &root(&t, size)).unwrap();
        }
    }

    #[test]
    fn consistency_proofs_match_reference_vectors() {
        let t = ct_leaves();
        let cases: [(u64, u64, &[&str]); 4] = [
            (1, 1, &[]),
            (1, 8, &[
                "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
            ]),
            (6, 8, &[
                "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            ]),
            (2, 5, &[
                "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            ]),
        ];
        for (first, second, want) in cases {
            let got = consistency_proof(&t, first, second).unwrap();
            let want: Vec<Hash> = want.iter().map(|s| h(s)).collect();
            assert_eq!(got, want, "PROOF({first}, D[{second}])");
            verify_consistency(first, second, &got, &root(&t, first), &root(&t, second)).unwrap();
        }
    }

    #[test]
    fn every_proof_up_to_70_leaves_verifies_and_tampering_fails() {
        let leaves: Vec<Hash> = (0u32..70).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let t = Naive(leaves);
        for size in 1..=70u64 {
            let r = root(&t, size);
            assert_eq!(r, naive_mth(&t.0[..size as usize]));
            for index in 0..size {
                let p = inclusion_proof(&t, index, size).unwrap();
                let leaf = t.0[index as usize];
                verify_inclusion(&leaf, index, size, &p, &r).unwrap();
                if let Some(first) = p.first() {
                    let mut bad = p.clone();
                    bad[0][0] ^= 1;
                    assert!(verify_inclusion(&leaf, index, size, &bad, &r).is_err());
                    assert_ne!(first, &leaf);
                }
            }
            for first in 1..=size {
                let p = consistency_proof(&t, first, size).unwrap();
                verify_consistency(first, size, &p, &root(&t, first), &r).unwrap();
                if first < size {
                    let wrong = root(&t, first - 1);
                    assert!(verify_consistency(first, size, &p, &wrong, &r).is_err());
                }
            }
        }
    }

    #[test]
    fn rejects_out_of_range() {
        let t = ct_leaves();
        assert_eq!(inclusion_proof(&t, 3, 3), Err(ProofError::IndexOutOfRange { index: 3, size: 3 }));
        assert_eq!(consistency_proof(&t, 4, 3), Err(ProofError::SizesReversed { first: 4, second: 3 }));
    }
}
