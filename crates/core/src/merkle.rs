//! RFC 6962 §2.1 / RFC 9162 §2.1 Merkle hashing and proof checking: the half of the tree
//! that a verifier needs. Proof construction lives with the log (`signet-log::merkle`).
//! Verification is the iterative algorithm of RFC 9162 §2.1.3.2 / §2.1.4.2.

use crate::hash::{sha256, sha256_parts, Hash};

/// RFC 6962: MTH({d(0)}) = SHA-256(0x00 || d(0)).
pub fn leaf_hash(data: &[u8]) -> Hash {
    sha256_parts(&[&[0x00], data])
}

/// RFC 6962: MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut buf = [0u8; 65];
    buf[0] = 0x01;
    buf[1..33].copy_from_slice(left);
    buf[33..].copy_from_slice(right);
    sha256(&buf)
}

/// The root of the empty tree: SHA-256 of the empty string.
pub fn empty_root() -> Hash {
    sha256(b"")
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("index {index} is not below tree size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("tree size {size} is larger than the log ({available})")]
    SizeOutOfRange { size: u64, available: u64 },
    #[error("first size {first} must be at most second size {second}")]
    SizesReversed { first: u64, second: u64 },
    #[error("proof has {got} hashes, expected {want}")]
    WrongLength { got: usize, want: usize },
    #[error("proof does not lead to the expected root hash")]
    RootMismatch,
    /// The nodes a proof needs are in storage, and storage could not be read.
    #[error("the log's stored tree could not be read: {0}")]
    Unavailable(String),
}

/// RFC 9162 §2.1.3.2: checks that `leaf` sits at `index` in the tree with `root` of `size` leaves.
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let (mut f_n, mut s_n) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s_n == 0 {
            return Err(ProofError::WrongLength { got: proof.len(), want: inclusion_len(index, size) });
        }
        if f_n & 1 == 1 || f_n == s_n {
            r = node_hash(p, &r);
            while f_n & 1 == 0 && f_n != 0 {
                f_n >>= 1;
                s_n >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    if s_n != 0 {
        return Err(ProofError::WrongLength { got: proof.len(), want: inclusion_len(index, size) });
    }
    if &r != root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

fn inclusion_len(index: u64, size: u64) -> usize {
    let (mut f, mut s, mut n) = (index, size - 1, 0);
    while s != 0 {
        if f & 1 == 1 || f == s {
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        }
        f >>= 1;
        s >>= 1;
        n += 1;
    }
    n
}

/// RFC 9162 §2.1.4.2: checks that `first_root` (size `first`) is a prefix of `second_root`.
pub fn verify_consistency(
    first: u64,
    second: u64,
    proof: &[Hash],
    first_root: &Hash,
    second_root: &Hash,
) -> Result<(), ProofError> {
    if first > second {
        return Err(ProofError::SizesReversed { first, second });
    }
    if first == second {
        if !proof.is_empty() {
            return Err(ProofError::WrongLength { got: proof.len(), want: 0 });
        }
        return if first_root == second_root { Ok(()) } else { Err(ProofError::RootMismatch) };
    }
    if first == 0 {
        return if proof.is_empty() { Ok(()) } else { Err(ProofError::WrongLength { got: proof.len(), want: 0 }) };
    }
    if proof.is_empty() {
        return Err(ProofError::WrongLength { got: 0, want: 1 });
    }
    // If `first` is a power of two, the first subtree root is implicitly the first hash.
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if first.is_power_of_two() {
        path.push(*first_root);
    }
    path.extend_from_slice(proof);
    let (mut f_n, mut s_n) = (first - 1, second - 1);
    while f_n & 1 == 1 {
        f_n >>= 1;
        s_n >>= 1;
    }
    let (mut fr, mut sr) = (path[0], path[0]);
    for c in &path[1..] {
        if s_n == 0 {
            return Err(ProofError::WrongLength { got: proof.len(), want: proof.len() - 1 });
        }
        if f_n & 1 == 1 || f_n == s_n {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f_n & 1 == 0 && f_n != 0 {
                f_n >>= 1;
                s_n >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    if s_n != 0 {
        return Err(ProofError::WrongLength { got: proof.len(), want: proof.len() + 1 });
    }
    if &fr != first_root || &sr != second_root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}
