//! RFC 6962 hashing, tree growth and proofs. Proof benchmarks run on one 1,000,000-leaf tree,
//! built once per process (about a second) and shared, with the leaf or size varying per
//! iteration so the measurements are not of one warm path.

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use signet_core::hash::Hash;
use signet_core::micro::criterion::{Criterion, Throughput};
use signet_core::micro::{measure, Bench, Opts};

use crate::merkle;
use crate::tree::Tree;

const SIZE: u64 = 1_000_000;

fn leaf(i: u64) -> Hash {
    merkle::leaf_hash(&i.to_be_bytes())
}

/// The shared million-leaf tree and its root.
fn million() -> &'static (Tree, Hash) {
    static TREE: OnceLock<(Tree, Hash)> = OnceLock::new();
    TREE.get_or_init(|| {
        let mut t = Tree::new();
        for i in 0..SIZE {
            t.push(leaf(i));
        }
        let root = t.root(SIZE).expect("size is the tree's");
        (t, root)
    })
}

/// Steps through 0..n in a scattered order (7919 is prime, so coprime with n = 10^6).
fn next(i: &mut u64, n: u64) -> u64 {
    *i = (*i + 7919) % n;
    *i
}

pub fn leaf_hash(c: &mut Criterion, bench: &Bench) {
    let body = super::v1_body();
    let opts = Opts { throughput: Some(Throughput::Bytes(body.len() as u64)), ..Opts::default() };
    measure(c, bench, opts, |b| b.iter(|| merkle::leaf_hash(black_box(&body))));
}

pub fn node_hash(c: &mut Criterion, bench: &Bench) {
    let (l, r) = (leaf(1), leaf(2));
    measure(c, bench, Opts::default(), |b| b.iter(|| merkle::node_hash(black_box(&l), black_box(&r))));
}

pub fn push(c: &mut Criterion, bench: &Bench) {
    // A tree that grew for the whole measurement would reach gigabytes; refill one instead,
    // 65,536 pushes at a time, and time only the pushes.
    const CHUNK: u64 = 1 << 16;
    let leaves: Vec<Hash> = (0..CHUNK).map(leaf).collect();
    let mut tree = Tree::new();
    measure(c, bench, Opts::default(), |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(CHUNK);
                tree.truncate(0);
                let start = Instant::now();
                for l in &leaves[..n as usize] {
                    tree.push(*l);
                }
                spent += start.elapsed();
                left -= n;
            }
            spent
        })
    });
}

pub fn inclusion_proof(c: &mut Criterion, bench: &Bench) {
    let (tree, _) = million();
    let mut i = 0;
    measure(c, bench, Opts::default(), |b| b.iter(|| tree.inclusion_proof(next(&mut i, SIZE), SIZE).expect("in range")));
}

pub fn consistency_proof(c: &mut Criterion, bench: &Bench) {
    let (tree, _) = million();
    let mut i = 0;
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| tree.consistency_proof(next(&mut i, SIZE - 1) + 1, SIZE).expect("in range"))
    });
}

pub fn verify_inclusion(c: &mut Criterion, bench: &Bench) {
    let (tree, root) = million();
    let mut i = 0;
    let proofs: Vec<(u64, Vec<Hash>)> = (0..1024)
        .map(|_| {
            let index = next(&mut i, SIZE);
            (index, tree.inclusion_proof(index, SIZE).expect("in range"))
        })
        .collect();
    let mut k = 0;
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            k = (k + 1) % proofs.len();
            let (index, proof) = &proofs[k];
            merkle::verify_inclusion(&tree.leaf(*index).ok().flatten().expect("in range"), *index, SIZE, proof, root).expect("verifies")
        })
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn scattered_order_visits_every_index() {
        let n = 1000;
        let mut seen = vec![false; n as usize];
        let mut i = 0;
        for _ in 0..n {
            seen[super::next(&mut i, n) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
