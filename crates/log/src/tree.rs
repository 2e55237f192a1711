//! The Merkle tree of one log, in bounded memory.
//!
//! Memory holds only the *right edge*: at every tree level, the nodes from the start of the
//! tile (c2sp.org/tlog-tiles) that the durable size falls in, which is everything an append
//! touches and everything a root or a proof against the head needs. Everything to the left
//! lies in full tiles, which never change and are already in storage (level 0 as the
//! entries' leaf hashes, the levels above as stored tiles); a proof that reaches into them
//! reads them through a bounded [`TileCache`]. So memory does not grow with the log, and a
//! restart reads a few tiles instead of every leaf.
//!
//! A tree made with [`Tree::new`] has no storage behind it and keeps every node (tests, tools).

use std::cell::RefCell;
use std::sync::Arc;

use signet_core::hash::Hash;

use crate::merkle::{self, Nodes, ProofError};
use crate::storage::{LogId, Storage, StorageError};
use crate::tilecache::{Expanded, TileCache, TileId};
use crate::tiles::TILE_WIDTH;

/// Where the nodes of full tiles are read back from.
pub trait NodeStore: Send + Sync {
    /// Nodes `start..start + count` of tree level `8 * tile_level`, all inside one tile.
    fn nodes(&self, tile_level: u8, start: u64, count: u64) -> Result<Vec<Hash>, StorageError>;

    /// Full leaf tile `index` with its inner levels ([`Expanded::to_bytes`]), if stored so.
    fn leaf_tile(&self, _index: u64) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(None)
    }
}

/// A log's nodes as [`Storage`] holds them.
pub struct StoredNodes {
    pub storage: Arc<dyn Storage>,
    pub log: LogId,
}

impl NodeStore for StoredNodes {
    fn nodes(&self, tile_level: u8, start: u64, count: u64) -> Result<Vec<Hash>, StorageError> {
        let short = |got: usize| {
            StorageError::Corrupt(format!(
                "log {}: tree level {} holds {got} of the {count} nodes from {start}",
                self.log,
                8 * tile_level as u32
            ))
        };
        if tile_level == 0 {
            let keys = self.storage.keys(self.log, start, count)?;
            if keys.len() as u64 != count {
                return Err(short(keys.len()));
            }
            return Ok(keys.into_iter().map(|k| k.leaf_hash).collect());
        }
        let (tile, from) = (start / TILE_WIDTH, (start % TILE_WIDTH) as usize);
        let hashes = self.storage.tile(self.log, tile_level, tile)?.map(|t| t.hashes).unwrap_or_default();
        let nodes: Vec<Hash> = hashes.chunks_exact(32).skip(from).take(count as usize).filter_map(|c| c.try_into().ok()).collect();
        if nodes.len() as u64 != count {
            return Err(short(nodes.len()));
        }
        Ok(nodes)
    }

    fn leaf_tile(&self, index: u64) -> Result<Option<Vec<u8>>, StorageError> {
        self.storage.leaf_tile(self.log, index)
    }
}

/// The in-memory nodes of one level: `nodes[i]` is node `base + i`.
#[derive(Default, Clone)]
struct Level {
    base: u64,
    nodes: Vec<Hash>,
}

impl Level {
    fn len(&self) -> u64 {
        self.base + self.nodes.len() as u64
    }
}

struct Cold {
    store: Box<dyn NodeStore>,
    cache: TileCache,
}

pub struct Tree {
    levels: Vec<Level>,
    /// Full tiles to the left of memory; `None` keeps every node in memory. Shared with the
    /// [`Tree::frozen`] copies that readers hold.
    cold: Option<Arc<Cold>>,
}

/// The first node of tree level `level` that memory keeps when the durable size is `durable`:
/// the start of the tile that `durable` falls in, at that level's tile level.
fn window_start(level: u32, durable: u64) -> u64 {
    let (tile_level, inner) = (level / 8, level % 8);
    let at_tile_level = durable.checked_shr(8 * tile_level).unwrap_or(0);
    (at_tile_level & !(TILE_WIDTH - 1)) >> inner
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    /// A tree that keeps every node in memory.
    pub fn new() -> Self {
        Tree { levels: vec![Level::default()], cold: None }
    }

    /// The tree of the first `size` entries in `store`, holding at most `cache_tiles` full
    /// tiles (16 KiB each) beside its right edge. Reads one partial tile per tile level, and
    /// checks each against the full tile below it.
    pub fn open(store: Box<dyn NodeStore>, cache_tiles: usize, size: u64) -> Result<Tree, StorageError> {
        let mut levels: Vec<Level> = Vec::new();
        for level in 0u32..64 {
            let n = size >> level;
            if level > 0 && n == 0 {
                break;
            }
            let base = window_start(level, size);
            let nodes = if level % 8 == 0 {
                if n > base {
                    store.nodes((level / 8) as u8, base, n - base)?
                } else {
                    Vec::new()
                }
            } else {
                // Hashed up from the level below, whose window starts at 2 * base.
                let below = &levels[level as usize - 1];
                let at = |i: u64| below.nodes[(i - below.base) as usize];
                (base..n).map(|j| merkle::node_hash(&at(2 * j), &at(2 * j + 1))).collect()
            };
            levels.push(Level { base, nodes });
        }
        let tree = Tree { levels, cold: Some(Arc::new(Cold { store, cache: TileCache::new(cache_tiles) })) };
        // Each tile level's newest node must be the root of the full tile beneath it.
        for tile_level in 1u32..8 {
            let n = size >> (8 * tile_level);
            if n == 0 {
                break;
            }
            let below = tree.full_tile((tile_level - 1) as u8, n - 1)?;
            let (left, right) = (below.node(7, 0), below.node(7, 1));
            let root = left.zip(right).map(|(l, r)| merkle::node_hash(&l, &r));
            if root != Some(tree.get(8 * tile_level, n - 1)?) {
                return Err(StorageError::Corrupt(format!(
                    "stored tile {tile_level}/{} does not match the tiles below it",
                    (n - 1) / TILE_WIDTH
                )));
            }
        }
        Ok(tree)
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.levels[0].len()
    }

    /// Appends one leaf hash, completing every subtree it closes.
    pub fn push(&mut self, leaf: Hash) {
        self.levels[0].nodes.push(leaf);
        let mut level = 0;
        // A level of even length just gained its second child; both are in memory, since
        // windows start on even nodes.
        while self.levels[level].len() % 2 == 0 {
            let nodes = &self.levels[level].nodes;
            let n = nodes.len();
            let parent = merkle::node_hash(&nodes[n - 2], &nodes[n - 1]);
            if self.levels.len() == level + 1 {
                self.levels.push(Level::default());
            }
            self.levels[level + 1].nodes.push(parent);
            level += 1;
        }
    }

    /// Drops everything after the first `size` leaves (undoing a batch whose commit failed).
    /// `size` is never below the last [`Tree::settle`]d size.
    pub fn truncate(&mut self, size: u64) {
        for (level, l) in self.levels.iter_mut().enumerate() {
            let keep = (size >> level).saturating_sub(l.base);
            l.nodes.truncate(keep as usize);
        }
    }

    /// Forgets, from memory, the nodes of tiles that filled up below durable size `durable`:
    /// storage holds them now. The leaf tiles go to the cache, as recent entries are read most.
    pub fn settle(&mut self, durable: u64) {
        let Some(cold) = &self.cold else { return };
        for (level, l) in self.levels.iter_mut().enumerate() {
            let keep_from = window_start(level as u32, durable);
            if keep_from <= l.base {
                continue;
            }
            let gone: Vec<Hash> = l.nodes.drain(..(keep_from - l.base) as usize).collect();
            if level % 8 == 0 {
                for (i, tile) in gone.chunks_exact(TILE_WIDTH as usize).enumerate() {
                    if let Some(e) = Expanded::new(tile.to_vec()) {
                        cold.cache.insert(((level / 8) as u8, l.base / TILE_WIDTH + i as u64), Arc::new(e));
                    }
                }
            }
            l.base = keep_from;
        }
    }

    /// The tree of the first `size` leaves (at most [`Tree::size`]), as a copy that nothing
    /// done to this tree later changes: readers prove against it without a lock the writer
    /// holds ([`crate::snapshot`]). It copies what memory keeps below `size`, a partial tile
    /// per tile level (at most 16 KiB each), and shares the full tiles (storage and cache).
    /// `size` must be durable: the full tiles left of the copy are read from storage.
    pub fn frozen(&self, size: u64) -> Tree {
        let size = size.min(self.size());
        let mut levels = Vec::with_capacity(self.levels.len());
        for (level, l) in self.levels.iter().enumerate() {
            let end = size >> level;
            if level > 0 && end == 0 {
                break;
            }
            let start = match self.cold {
                Some(_) => window_start(level as u32, size).max(l.base),
                None => l.base,
            };
            // Below a base past `end`, every node is in a full tile: the copy holds none.
            let base = start.min(end);
            let held = base.checked_sub(l.base).and_then(|from| l.nodes.get(from as usize..(end - l.base) as usize));
            levels.push(Level { base, nodes: held.unwrap_or_default().to_vec() });
        }
        Tree { levels, cold: self.cold.clone() }
    }

    /// Root hash of the tree of the first `size` leaves.
    pub fn root(&self, size: u64) -> Result<Hash, ProofError> {
        self.check(size)?;
        let r = Reading::new(self, None);
        let root = merkle::root(&r, size);
        r.finish(root)
    }

    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
        self.check(size)?;
        let r = Reading::new(self, None);
        let proof = merkle::inclusion_proof(&r, index, size);
        r.finish(proof)?
    }

    pub fn consistency_proof(&self, first: u64, second: u64) -> Result<Vec<Hash>, ProofError> {
        self.check(second)?;
        let r = Reading::new(self, None);
        let proof = merkle::consistency_proof(&r, first, second);
        r.finish(proof)?
    }

    /// The right edge of the tree of `size` leaves, to prove against that size repeatedly.
    pub fn right_edge(&self, size: u64) -> Result<RightEdge, ProofError> {
        self.check(size)?;
        let r = Reading::new(self, None);
        let ranges = merkle::right_edge(&r, size);
        r.finish(RightEdge { size, ranges })
    }

    /// [`Tree::inclusion_proof`] against `edge.size`, taking right-edge hashes from `edge`.
    pub fn inclusion_proof_at(&self, edge: &RightEdge, index: u64) -> Result<Vec<Hash>, ProofError> {
        self.check(edge.size)?;
        let r = Reading::new(self, Some(edge));
        let proof = merkle::inclusion_proof(&r, index, edge.size);
        r.finish(proof)?
    }

    /// [`Tree::consistency_proof`] from `first` to `edge.size`, taking right-edge hashes from `edge`.
    pub fn consistency_proof_at(&self, first: u64, edge: &RightEdge) -> Result<Vec<Hash>, ProofError> {
        self.check(edge.size)?;
        let r = Reading::new(self, Some(edge));
        let proof = merkle::consistency_proof(&r, first, edge.size);
        r.finish(proof)?
    }

    /// The leaf hash at `index`, if the tree has that many leaves.
    pub fn leaf(&self, index: u64) -> Result<Option<Hash>, StorageError> {
        if index >= self.size() {
            return Ok(None);
        }
        self.get(0, index).map(Some)
    }

    /// The nodes of one level from `start`, at most `count` of them: a tile's contents.
    pub fn level_slice(&self, level: u32, start: u64, count: u64) -> Result<Vec<Hash>, StorageError> {
        let Some(l) = self.levels.get(level as usize) else { return Ok(Vec::new()) };
        let end = start.saturating_add(count).min(l.len());
        (start.min(end)..end).map(|i| self.get(level, i)).collect()
    }

    /// (tiles cached, hits, misses).
    pub fn cache_stats(&self) -> (usize, u64, u64) {
        self.cold.as_ref().map_or((0, 0, 0), |c| c.cache.stats())
    }

    /// Node `index` of tree level `level`, which the caller knows exists.
    fn get(&self, level: u32, index: u64) -> Result<Hash, StorageError> {
        self.get_noting(level, index, None)
    }

    /// [`Tree::get`], keeping in `last` the full tile each tile level was last read from: a
    /// proof takes up to eight nodes from each tile it crosses, and asks the cache once.
    fn get_noting(&self, level: u32, index: u64, last: Option<&LastTiles>) -> Result<Hash, StorageError> {
        if let Some(l) = self.levels.get(level as usize) {
            if index >= l.base {
                return l.nodes.get((index - l.base) as usize).copied().ok_or_else(|| {
                    StorageError::Corrupt(format!("node {index} of level {level} is past the tree ({} nodes)", l.len()))
                });
            }
        }
        let (tile_level, inner) = ((level / 8) as u8, level % 8);
        let first = index << inner;
        let id = (tile_level, first / TILE_WIDTH);
        let at = (first % TILE_WIDTH) >> inner;
        let outside = || StorageError::Corrupt(format!("node {index} of level {level} is outside its tile"));
        if let Some(node) = last.and_then(|l| l.node(id, inner, at)) {
            return node.ok_or_else(outside);
        }
        let tile = self.full_tile(tile_level, id.1)?;
        let node = tile.node(inner, at).ok_or_else(outside);
        if let Some(l) = last {
            l.note(id, tile);
        }
        node
    }

    fn full_tile(&self, tile_level: u8, index: u64) -> Result<Arc<Expanded>, StorageError> {
        let cold = self.cold.as_ref().ok_or_else(|| StorageError::Corrupt("a node the in-memory tree does not hold".into()))?;
        if let Some(t) = cold.cache.get((tile_level, index)) {
            return Ok(t);
        }
        let tile = match self.stored_leaf_tile(cold, tile_level, index)? {
            Some(tile) => tile,
            None => {
                let nodes = cold.store.nodes(tile_level, index * TILE_WIDTH, TILE_WIDTH)?;
                Expanded::new(nodes).ok_or_else(|| StorageError::Corrupt(format!("tile {tile_level}/{index} is not full")))?
            }
        };
        let tile = Arc::new(tile);
        cold.cache.insert((tile_level, index), tile.clone());
        Ok(tile)
    }

    /// A leaf tile stored with its inner levels: one read and no hashing but one node, which
    /// checks that the tile belongs under this tree's node one tile level up.
    fn stored_leaf_tile(&self, cold: &Cold, tile_level: u8, index: u64) -> Result<Option<Expanded>, StorageError> {
        if tile_level != 0 {
            return Ok(None);
        }
        let Some(bytes) = cold.store.leaf_tile(index)? else { return Ok(None) };
        let corrupt = |why: &str| StorageError::Corrupt(format!("stored leaf tile {index} {why}"));
        let tile = Expanded::from_bytes(&bytes).ok_or_else(|| corrupt(&format!("has {} bytes, not 510 hashes", bytes.len())))?;
        if tile.root() != self.get(8, index)? {
            return Err(corrupt("does not match the tree above it"));
        }
        Ok(Some(tile))
    }

    fn check(&self, size: u64) -> Result<(), ProofError> {
        if size > self.size() {
            return Err(ProofError::SizeOutOfRange { size, available: self.size() });
        }
        Ok(())
    }
}

/// The full tile each tile level was last read from, during one proof.
#[derive(Default)]
struct LastTiles(RefCell<[Option<(TileId, Arc<Expanded>)>; 8]>);

impl LastTiles {
    /// The node, if `id` is the tile noted for its level (`Some(None)`: noted, but no such
    /// node). Read under the borrow: cloning the tile's `Arc` for each node would write its
    /// count, a cache line that every worker reading the same tile shares (issue 40).
    fn node(&self, id: TileId, inner: u32, at: u64) -> Option<Option<Hash>> {
        let last = self.0.borrow();
        let (noted, tile) = last.get(id.0 as usize)?.as_ref()?;
        (*noted == id).then(|| tile.node(inner, at))
    }

    fn note(&self, id: TileId, tile: Arc<Expanded>) {
        if let Some(slot) = self.0.borrow_mut().get_mut(id.0 as usize) {
            *slot = Some((id, tile));
        }
    }
}

/// The tree as [`merkle`]'s proof builders see it. Their node source cannot fail, and a
/// stored node can: the first failure is kept here, the computation finishes on a
/// placeholder, and [`Reading::finish`] turns its result into that error.
struct Reading<'a> {
    tree: &'a Tree,
    edge: Option<&'a RightEdge>,
    failed: RefCell<Option<StorageError>>,
    last: LastTiles,
}

impl<'a> Reading<'a> {
    fn new(tree: &'a Tree, edge: Option<&'a RightEdge>) -> Self {
        Reading { tree, edge, failed: RefCell::new(None), last: LastTiles::default() }
    }

    fn finish<T>(self, value: T) -> Result<T, ProofError> {
        match self.failed.into_inner() {
            Some(e) => Err(ProofError::Unavailable(e.to_string())),
            None => Ok(value),
        }
    }
}

impl Nodes for Reading<'_> {
    fn node(&self, level: u32, index: u64) -> Hash {
        self.tree.get_noting(level, index, Some(&self.last)).unwrap_or_else(|e| {
            self.failed.borrow_mut().get_or_insert(e);
            [0; 32]
        })
    }

    fn known_range(&self, lo: u64, hi: u64) -> Option<Hash> {
        let edge = self.edge?;
        if hi != edge.size {
            return None;
        }
        // At most 63 ranges, sorted by start.
        let i = edge.ranges.binary_search_by_key(&lo, |&(start, _)| start).ok()?;
        Some(edge.ranges[i].1)
    }
}

/// The hashes of the incomplete subtrees on the right edge of one tree size
/// ([`merkle::right_edge`]). Without them every proof against the head rehashes the edge.
pub struct RightEdge {
    pub size: u64,
    ranges: Vec<(u64, Hash)>,
}

#[cfg(test)]
mod tests;
