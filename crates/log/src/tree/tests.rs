use super::*;
use crate::merkle::{leaf_hash, verify_consistency, verify_inclusion};
use parking_lot::Mutex;

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
        verify_inclusion(&t.leaf(idx).unwrap().unwrap(), idx, 300, &p, &roots[300]).unwrap();
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

/// Full tiles as storage keeps them, kept as a full in-memory tree would.
struct Memory {
    all: Mutex<Tree>,
    reads: Mutex<u32>,
    fail: Mutex<bool>,
    /// Serve leaf tiles whole, as storage written since they were stored does; the
    /// number is added to each tile's index (0: the right tile).
    leaf_tiles: Mutex<Option<u64>>,
    leaf_tile_reads: Mutex<u32>,
}

impl NodeStore for Arc<Memory> {
    fn nodes(&self, tile_level: u8, start: u64, count: u64) -> Result<Vec<Hash>, StorageError> {
        *self.reads.lock() += 1;
        if *self.fail.lock() {
            return Err(StorageError::Unavailable("test".into()));
        }
        self.all.lock().level_slice(8 * tile_level as u32, start, count)
    }

    fn leaf_tile(&self, index: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(shift) = *self.leaf_tiles.lock() else { return Ok(None) };
        *self.leaf_tile_reads.lock() += 1;
        let leaves = self.all.lock().level_slice(0, (index + shift) * TILE_WIDTH, TILE_WIDTH)?;
        Ok(Expanded::new(leaves).map(|t| t.to_bytes()))
    }
}

fn full(leaves: u64) -> Tree {
    let mut t = Tree::new();
    for i in 0..leaves {
        t.push(leaf_hash(&i.to_le_bytes()));
    }
    t
}

fn memory(leaves: u64) -> Arc<Memory> {
    Arc::new(Memory {
        all: Mutex::new(full(leaves)),
        reads: Mutex::new(0),
        fail: Mutex::new(false),
        leaf_tiles: Mutex::new(None),
        leaf_tile_reads: Mutex::new(0),
    })
}

#[test]
fn a_tree_opened_from_tiles_proves_like_a_full_one() {
    // Sizes around tile boundaries at tile levels 0 and 1 (256 and 65,536 leaves).
    let store = memory(70_000);
    let full = full(70_000);
    for size in [0u64, 1, 255, 256, 257, 511, 512, 65_535, 65_536, 65_537, 66_000, 70_000] {
        let t = Tree::open(Box::new(store.clone()), 8, size).unwrap();
        assert_eq!(t.size(), size);
        assert_eq!(t.root(size).unwrap(), full.root(size).unwrap(), "root at {size}");
        for index in [0, size / 3, size.saturating_sub(257), size.saturating_sub(1)] {
            if index < size {
                assert_eq!(t.inclusion_proof(index, size).unwrap(), full.inclusion_proof(index, size).unwrap());
                assert_eq!(t.leaf(index).unwrap(), full.leaf(index).unwrap());
            }
        }
        for first in [1, size / 2, size.saturating_sub(300)] {
            if first <= size {
                assert_eq!(t.consistency_proof(first, size).unwrap(), full.consistency_proof(first, size).unwrap());
            }
        }
    }
}

#[test]
fn memory_stays_bounded_as_the_tree_grows_and_settles() {
    let store = memory(0);
    let mut t = Tree::open(Box::new(store.clone()), 4, 0).unwrap();
    for i in 0u64..20_000 {
        let leaf = leaf_hash(&i.to_le_bytes());
        store.all.lock().push(leaf);
        t.push(leaf);
        if i % 97 == 0 {
            t.settle(t.size());
        }
    }
    t.settle(t.size());
    let held: usize = t.levels.iter().map(|l| l.nodes.len()).sum();
    assert!(held < 2 * 256 * 3, "{held} nodes in memory for 20,000 leaves");
    let full = full(20_000);
    assert_eq!(t.root(20_000).unwrap(), full.root(20_000).unwrap());
    assert_eq!(t.inclusion_proof(3, 20_000).unwrap(), full.inclusion_proof(3, 20_000).unwrap());
    assert_eq!(t.consistency_proof(700, 20_000).unwrap(), full.consistency_proof(700, 20_000).unwrap());
    assert!(t.cache_stats().0 <= 4);
    // Undo past the window is refused by construction: truncating to the settled size works.
    t.push([7; 32]);
    t.truncate(20_000);
    assert_eq!(t.size(), 20_000);
}

#[test]
fn a_frozen_copy_proves_its_size_whatever_the_tree_does_after() {
    let full = full(70_000);
    // Storage already holds every leaf: each size below is durable when it is frozen.
    let store = memory(70_000);
    let mut t = Tree::open(Box::new(store), 8, 0).unwrap();
    let mut frozen = Vec::new();
    for size in [1u64, 255, 256, 257, 600, 65_535, 65_536, 65_537, 66_000] {
        while t.size() < size {
            t.push(full.leaf(t.size()).unwrap().unwrap());
        }
        t.settle(size);
        // A batch prepared past the durable size is not in the copy, and undoing it (a
        // failed commit) does not reach the copy either.
        for i in 0u32..300 {
            t.push(leaf_hash(&i.to_be_bytes()));
        }
        frozen.push((size, t.frozen(size)));
        t.truncate(size);
    }
    for (size, f) in &frozen {
        let size = *size;
        assert_eq!(f.size(), size);
        assert_eq!(f.root(size).unwrap(), full.root(size).unwrap(), "root at {size}");
        for index in [0, size / 2, size - 1] {
            assert_eq!(f.inclusion_proof(index, size).unwrap(), full.inclusion_proof(index, size).unwrap(), "{index} in {size}");
        }
        assert_eq!(f.consistency_proof(size / 3, size).unwrap(), full.consistency_proof(size / 3, size).unwrap());
        assert!(matches!(f.root(size + 1), Err(ProofError::SizeOutOfRange { .. })));
        assert_eq!(f.leaf(size).unwrap(), None);
        let held: usize = f.levels.iter().map(|l| l.nodes.len()).sum();
        assert!(held < 2 * 256 * 3, "{held} nodes copied at size {size}");
    }
    // A tree without storage is copied whole.
    let small = Tree::new().frozen(0);
    assert_eq!(small.size(), 0);
    let f = full.frozen(1_000);
    assert_eq!(f.inclusion_proof(3, 1_000).unwrap(), full.inclusion_proof(3, 1_000).unwrap());
}

#[test]
fn a_storage_failure_is_an_error_not_a_wrong_proof() {
    let store = memory(2_000);
    let t = Tree::open(Box::new(store.clone()), 0, 2_000).unwrap();
    *store.fail.lock() = true;
    assert!(matches!(t.inclusion_proof(5, 2_000), Err(ProofError::Unavailable(_))));
    // The right edge is in memory and needs no storage.
    assert!(t.root(2_000).is_ok());
    *store.fail.lock() = false;
    assert!(t.inclusion_proof(5, 2_000).is_ok());
}

#[test]
fn a_stored_leaf_tile_is_read_whole_and_checked_against_the_tree() {
    let store = memory(3_000);
    *store.leaf_tiles.lock() = Some(0);
    let full = full(3_000);
    let t = Tree::open(Box::new(store.clone()), 0, 3_000).unwrap();
    let node_reads = *store.reads.lock();
    for index in [0, 300, 1_000, 2_047] {
        assert_eq!(t.inclusion_proof(index, 3_000).unwrap(), full.inclusion_proof(index, 3_000).unwrap());
    }
    assert_eq!(t.consistency_proof(777, 3_000).unwrap(), full.consistency_proof(777, 3_000).unwrap());
    // Every full leaf tile came whole from storage, none from its 256 leaves.
    assert_eq!(*store.reads.lock(), node_reads);
    assert!(*store.leaf_tile_reads.lock() >= 4);

    // The neighbouring tile's contents, stored under this index: refused, never proven from.
    *store.leaf_tiles.lock() = Some(1);
    assert!(matches!(t.inclusion_proof(5, 3_000), Err(ProofError::Unavailable(e)) if e.contains("does not match")));
    // Without stored leaf tiles (a log written before they were), the leaves still serve.
    *store.leaf_tiles.lock() = None;
    assert_eq!(t.inclusion_proof(5, 3_000).unwrap(), full.inclusion_proof(5, 3_000).unwrap());
}

#[test]
fn a_proof_asks_the_cache_once_per_tile_it_crosses() {
    let store = memory(70_000);
    let t = Tree::open(Box::new(store), 64, 70_000).unwrap();
    let lookups = |t: &Tree| {
        let (_, hits, misses) = t.cache_stats();
        hits + misses
    };
    let before = lookups(&t);
    // Leaf 1,000 is in leaf tile 3 and in level-1 tile 0, both full and left of memory:
    // eight proof nodes come from each, and the cache is asked once for each tile.
    t.inclusion_proof(1_000, 70_000).unwrap();
    assert_eq!(lookups(&t) - before, 2);
}

#[test]
fn a_tampered_upper_tile_is_found_at_open() {
    struct Tampered(Arc<Memory>);
    impl NodeStore for Tampered {
        fn nodes(&self, tile_level: u8, start: u64, count: u64) -> Result<Vec<Hash>, StorageError> {
            let mut n = self.0.nodes(tile_level, start, count)?;
            if let (1, Some(last)) = (tile_level, n.last_mut()) {
                last[0] ^= 1;
            }
            Ok(n)
        }
    }
    let store = memory(1_000);
    assert!(Tree::open(Box::new(store.clone()), 4, 1_000).is_ok());
    assert!(matches!(Tree::open(Box::new(Tampered(store)), 4, 1_000), Err(StorageError::Corrupt(_))));
}
