//! The checker's own Merkle verification (RFC 9162 §2.1.3.2 and §2.1.4.2), written apart from
//! signet's: a bug shared by the log and its checker would prove nothing.

use std::collections::{BTreeMap, BTreeSet};

use aws_lc_rs::digest::{Context, SHA256};

pub type Hash = [u8; 32];

fn h(parts: &[&[u8]]) -> Hash {
    let mut c = Context::new(&SHA256);
    parts.iter().for_each(|p| c.update(p));
    c.finish().as_ref().try_into().unwrap()
}

pub fn leaf_hash(entry: &[u8]) -> Hash {
    h(&[&[0], entry])
}

fn node(left: &Hash, right: &Hash) -> Hash {
    h(&[&[1], left, right])
}

/// Whether `proof` proves `leaf` at `index` in the tree of `size` leaves with `root`.
pub fn inclusion_holds(index: u64, size: u64, leaf: &Hash, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut f, mut s, mut r) = (index, size - 1, *leaf);
    for p in proof {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            r = node(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    s == 0 && r == *root
}

/// Whether `proof` proves the tree of `first` leaves (`first_root`) a prefix of the tree of
/// `second` leaves (`second_root`).
pub fn consistency_holds(first: u64, second: u64, proof: &[Hash], first_root: &Hash, second_root: &Hash) -> bool {
    if first == 0 || first > second {
        return false;
    }
    if first == second {
        return proof.is_empty() && first_root == second_root;
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if first.is_power_of_two() {
        path.push(*first_root);
    }
    path.extend_from_slice(proof);
    let (mut f, mut s) = (first - 1, second - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let Some((head, rest)) = path.split_first() else { return false };
    let (mut fr, mut sr) = (*head, *head);
    for c in rest {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            fr = node(c, &fr);
            sr = node(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    fr == *first_root && sr == *second_root && s == 0
}

/// The root of every prefix of `leaves` whose size is in `sizes`, in one pass: the roots of
/// the perfect subtrees so far (one per set bit of the size, largest first), folded from the
/// right. A long run hands out thousands of checkpoints; hashing each prefix anew would not end.
pub fn prefix_roots(leaves: &[Hash], sizes: impl IntoIterator<Item = u64>) -> BTreeMap<u64, Hash> {
    let wanted: BTreeSet<u64> = sizes.into_iter().filter(|&n| n > 0 && n <= leaves.len() as u64).collect();
    let mut out = BTreeMap::new();
    let mut peaks: Vec<(u32, Hash)> = Vec::new();
    for (i, leaf) in leaves.iter().enumerate() {
        let (mut height, mut hash) = (0, *leaf);
        while let Some(&(h, left)) = peaks.last() {
            if h != height {
                break;
            }
            peaks.pop();
            hash = node(&left, &hash);
            height += 1;
        }
        peaks.push((height, hash));
        let n = i as u64 + 1;
        if wanted.contains(&n) {
            let mut iter = peaks.iter().rev();
            let first = iter.next().map(|p| p.1).unwrap_or_default();
            out.insert(n, iter.fold(first, |right, (_, left)| node(left, &right)));
        }
    }
    out
}

/// The root of `leaves` by the definition (RFC 9162 §2.1.1), to test the two checks above.
pub fn root_of(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => h(&[]),
        1 => leaves[0],
        n => {
            let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
            node(&root_of(&leaves[..k]), &root_of(&leaves[k..]))
        }
    }
}

/// An inclusion proof by the definition (RFC 9162 §2.1.3.1).
pub fn path_of(m: usize, leaves: &[Hash]) -> Vec<Hash> {
    let n = leaves.len();
    if n <= 1 {
        return vec![];
    }
    let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
    if m < k {
        let mut p = path_of(m, &leaves[..k]);
        p.push(root_of(&leaves[k..]));
        p
    } else {
        let mut p = path_of(m - k, &leaves[k..]);
        p.push(root_of(&leaves[..k]));
        p
    }
}

/// A consistency proof by the definition (RFC 9162 §2.1.4.1).
pub fn proof_of(m: usize, leaves: &[Hash]) -> Vec<Hash> {
    fn subproof(m: usize, leaves: &[Hash], whole: bool) -> Vec<Hash> {
        let n = leaves.len();
        if m == n {
            return if whole { vec![] } else { vec![root_of(leaves)] };
        }
        let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
        if m <= k {
            let mut p = subproof(m, &leaves[..k], whole);
            p.push(root_of(&leaves[k..]));
            p
        } else {
            let mut p = subproof(m - k, &leaves[k..], false);
            p.push(root_of(&leaves[..k]));
            p
        }
    }
    subproof(m, leaves, true)
}

#[test]
fn the_checkers_merkle_code_accepts_the_definitions_proofs_and_nothing_else() {
    let leaves: Vec<Hash> = (0..37u32).map(|i| leaf_hash(&i.to_be_bytes())).collect();
    let prefixes = prefix_roots(&leaves, 0..=40);
    assert_eq!(prefixes.len(), leaves.len(), "every size from 1 to 37, and none beyond");
    for (&n, root) in &prefixes {
        assert_eq!(*root, root_of(&leaves[..n as usize]), "the prefix of {n}");
    }
    for n in 1..=leaves.len() {
        let tree = &leaves[..n];
        let root = root_of(tree);
        for m in 0..n {
            let proof = path_of(m, tree);
            assert!(inclusion_holds(m as u64, n as u64, &tree[m], &proof, &root), "inclusion {m} in {n}");
            assert!(!inclusion_holds(m as u64, n as u64, &leaf_hash(b"other"), &proof, &root));
            if n > 1 {
                assert!(!inclusion_holds(((m + 1) % n) as u64, n as u64, &tree[m], &proof, &root), "{m} at the wrong index in {n}");
            }
        }
        for m in 1..=n {
            let proof = proof_of(m, tree);
            let first = root_of(&leaves[..m]);
            assert!(consistency_holds(m as u64, n as u64, &proof, &first, &root), "consistency {m} -> {n}");
            if m < n {
                // A different history of the same size is not a prefix.
                let mut forked = leaves[..m].to_vec();
                forked[m - 1] = leaf_hash(b"fork");
                assert!(!consistency_holds(m as u64, n as u64, &proof, &root_of(&forked), &root), "fork {m} -> {n}");
            }
        }
    }
}
