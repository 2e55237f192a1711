//! A bounded cache of full tiles, each with the seven tree levels inside it hashed out.
//!
//! Full tiles never change, so a cached one is never stale; the only question is which to
//! keep. Eviction is CLOCK (second chance): a hit sets one flag under the lock, with no list
//! to reorder, and a miss evicts the first tile not touched since the hand last passed.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use signet_core::hash::Hash;

use crate::merkle;
use crate::tiles::TILE_WIDTH;

/// The memory one cached tile takes: 510 hashes of 32 bytes.
pub const TILE_BYTES: usize = 510 * 32;

/// One full tile and every node inside it: `levels[s]` holds the 256 >> s nodes of tree
/// level 8·L + s (510 hashes, 16 KiB).
pub struct Expanded {
    levels: [Vec<Hash>; 8],
}

impl Expanded {
    /// Hashes out a full tile's inner levels: 255 node hashes, once per tile loaded.
    pub fn new(base: Vec<Hash>) -> Option<Expanded> {
        if base.len() as u64 != TILE_WIDTH {
            return None;
        }
        let mut levels: [Vec<Hash>; 8] = Default::default();
        levels[0] = base;
        for s in 1..8 {
            let below = &levels[s - 1];
            levels[s] = below.chunks_exact(2).map(|p| merkle::node_hash(&p[0], &p[1])).collect();
        }
        Some(Expanded { levels })
    }

    /// A tile as [`Expanded::to_bytes`] wrote it, if it has the right length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Expanded> {
        if bytes.len() != TILE_BYTES {
            return None;
        }
        let mut levels: [Vec<Hash>; 8] = Default::default();
        let mut rest = bytes;
        for (s, level) in levels.iter_mut().enumerate() {
            let (this, next) = rest.split_at_checked((TILE_WIDTH as usize >> s) * 32)?;
            *level = this.chunks_exact(32).filter_map(|c| c.try_into().ok()).collect();
            rest = next;
        }
        Some(Expanded { levels })
    }

    /// Every level, lowest first: the stored form of a full leaf tile ([`crate::storage::LeafTile`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.levels.iter().flatten().flatten().copied().collect()
    }

    /// The root of the 256 nodes at the tile's base: the node one tile level up.
    pub fn root(&self) -> Hash {
        merkle::node_hash(&self.levels[7][0], &self.levels[7][1])
    }

    /// Node `index` (counted within the tile) of inner level `s`.
    pub fn node(&self, s: u32, index: u64) -> Option<Hash> {
        self.levels.get(s as usize)?.get(index as usize).copied()
    }

    pub fn base(&self) -> &[Hash] {
        &self.levels[0]
    }
}

/// (tile level, tile index).
pub type TileId = (u8, u64);

struct Slot {
    id: TileId,
    tile: Arc<Expanded>,
    touched: bool,
}

pub struct TileCache {
    inner: Mutex<Clock>,
}

struct Clock {
    capacity: usize,
    slots: Vec<Slot>,
    /// foldhash, seeded per process: a lookup per proof node read; the map holds at most
    /// `capacity` tiles, so no request can grow a chain of colliding keys past that.
    by_id: HashMap<TileId, usize, foldhash::fast::RandomState>,
    hand: usize,
    hits: u64,
    misses: u64,
}

impl TileCache {
    /// A cache of at most `capacity` tiles (16 KiB each); 0 caches nothing.
    pub fn new(capacity: usize) -> Self {
        TileCache {
            inner: Mutex::new(Clock { capacity, slots: Vec::new(), by_id: HashMap::default(), hand: 0, hits: 0, misses: 0 }),
        }
    }

    pub fn get(&self, id: TileId) -> Option<Arc<Expanded>> {
        let mut c = self.inner.lock();
        match c.by_id.get(&id).copied() {
            Some(i) => {
                c.hits += 1;
                let slot = &mut c.slots[i];
                // Written only when it changes: the slot's line stays shared between workers.
                if !slot.touched {
                    slot.touched = true;
                }
                Some(slot.tile.clone())
            }
            None => {
                c.misses += 1;
                None
            }
        }
    }

    pub fn insert(&self, id: TileId, tile: Arc<Expanded>) {
        let mut c = self.inner.lock();
        if c.capacity == 0 || c.by_id.contains_key(&id) {
            return;
        }
        if c.slots.len() < c.capacity {
            let at = c.slots.len();
            c.slots.push(Slot { id, tile, touched: false });
            c.by_id.insert(id, at);
            return;
        }
        // Second chance: clear flags until an untouched slot comes round (at most one lap).
        loop {
            let h = c.hand;
            c.hand = (h + 1) % c.capacity;
            if std::mem::take(&mut c.slots[h].touched) {
                continue;
            }
            let old = std::mem::replace(&mut c.slots[h], Slot { id, tile, touched: false });
            c.by_id.remove(&old.id);
            c.by_id.insert(id, h);
            return;
        }
    }

    /// (tiles held, hits, misses) since the cache was made.
    pub fn stats(&self) -> (usize, u64, u64) {
        let c = self.inner.lock();
        (c.slots.len(), c.hits, c.misses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(seed: u8) -> Arc<Expanded> {
        Arc::new(Expanded::new((0..256u32).map(|i| merkle::leaf_hash(&[seed, i as u8])).collect()).unwrap())
    }

    #[test]
    fn expands_like_the_tree_and_refuses_partial_tiles() {
        let leaves: Vec<Hash> = (0..256u32).map(|i| merkle::leaf_hash(&i.to_be_bytes())).collect();
        let e = Expanded::new(leaves.clone()).unwrap();
        let mut t = crate::tree::Tree::new();
        for l in &leaves {
            t.push(*l);
        }
        assert_eq!(e.node(7, 1), Some(merkle::node_hash(&e.node(6, 2).unwrap(), &e.node(6, 3).unwrap())));
        assert_eq!(merkle::node_hash(&e.node(7, 0).unwrap(), &e.node(7, 1).unwrap()), t.root(256).unwrap());
        assert_eq!(e.node(7, 2), None);
        assert!(Expanded::new(leaves[..255].to_vec()).is_none());
        assert_eq!(e.root(), t.root(256).unwrap());
        let bytes = e.to_bytes();
        assert_eq!(bytes.len(), TILE_BYTES);
        let back = Expanded::from_bytes(&bytes).unwrap();
        assert_eq!(back.levels, e.levels);
        assert!(Expanded::from_bytes(&bytes[32..]).is_none());
    }

    #[test]
    fn keeps_what_is_used_and_stays_bounded() {
        let c = TileCache::new(2);
        c.insert((0, 1), tile(1));
        c.insert((0, 2), tile(2));
        assert!(c.get((0, 1)).is_some());
        // (0,1) was touched since the hand passed, so (0,2) goes.
        c.insert((0, 3), tile(3));
        assert!(c.get((0, 1)).is_some());
        assert!(c.get((0, 2)).is_none());
        assert!(c.get((0, 3)).is_some());
        for n in 4..100 {
            c.insert((1, n), tile(n as u8));
        }
        assert_eq!(c.stats().0, 2);
        let none = TileCache::new(0);
        none.insert((0, 1), tile(1));
        assert!(none.get((0, 1)).is_none());
    }
}
