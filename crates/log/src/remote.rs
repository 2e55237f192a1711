//! Another log's tree, read through its C2SP tiles: proofs that a client builds itself.
//!
//! A tile log serves no proofs, only tiles; a client that holds an old checkpoint and sees
//! a new one proves them consistent from the tiles of the new tree (c2sp.org/tlog-tiles).
//! [`TileNodes`] is that tree as [`merkle::Nodes`]: each node hash comes out of the one tile
//! that holds its subtree's level, fetched once (by a caller-given function, so that this
//! crate does no I/O), so the proofs are the same code the log itself serves them with.

use std::cell::RefCell;
use std::collections::HashMap;

use signet_core::hash::Hash;

use crate::merkle::{self, Nodes, ProofError};
use crate::tiles::{format_index, TILE_WIDTH};

/// Fetches a tile by its path under the log's tile root (`tile/0/x001/234.p/17`); `E` is
/// why it could not.
pub type Fetch<'a, E> = dyn Fn(&str) -> Result<Vec<u8>, E> + 'a;

/// Why a remote tree gave no proof or root: a tile that could not be fetched (`E`, the
/// fetcher's reason), or one that does not hold what its path promises.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError<E> {
    #[error("{path}: {source}")]
    Fetch { path: String, source: E },
    /// Fewer hashes than the tile's width, or not whole hashes.
    #[error("{path}: {len} bytes, expected {width} hashes of 32")]
    ShortTile { path: String, len: usize, width: u64 },
    #[error("tile {tile_level}/{tile} lacks the hashes of node {level}/{index}")]
    MissingNode { tile_level: u32, tile: u64, level: u32, index: u64 },
    #[error(transparent)]
    Proof(#[from] ProofError),
}

/// The tree of `size` leaves of a remote log, read from its hash tiles.
pub struct TileNodes<'a, E> {
    size: u64,
    fetch: &'a Fetch<'a, E>,
    tiles: RefCell<HashMap<(u32, u64), Vec<Hash>>>,
    /// The first fetch that failed: `Nodes` cannot fail, so its hashes are zeros from then
    /// on, and [`TileNodes::consistency_proof`] reports this instead of a proof.
    failed: RefCell<Option<RemoteError<E>>>,
}

impl<'a, E> TileNodes<'a, E> {
    pub fn new(size: u64, fetch: &'a Fetch<'a, E>) -> Self {
        TileNodes { size, fetch, tiles: RefCell::default(), failed: RefCell::default() }
    }

    /// The RFC 9162 consistency proof from the tree of `first` leaves to this one.
    pub fn consistency_proof(&self, first: u64) -> Result<Vec<Hash>, RemoteError<E>> {
        let proof = merkle::consistency_proof(self, first, self.size)?;
        self.checked(proof)
    }

    /// The root of this tree, from its tiles (to compare with a checkpoint's).
    pub fn root(&self) -> Result<Hash, RemoteError<E>> {
        let root = merkle::root(self, self.size);
        self.checked(root)
    }

    fn checked<T>(&self, value: T) -> Result<T, RemoteError<E>> {
        match self.failed.borrow_mut().take() {
            Some(why) => Err(why),
            None => Ok(value),
        }
    }

    /// The hashes of tile (`tile_level`, `index`) at this tree's size.
    fn tile(&self, tile_level: u32, index: u64) -> Option<Vec<Hash>> {
        if let Some(t) = self.tiles.borrow().get(&(tile_level, index)) {
            return Some(t.clone());
        }
        let nodes_at_level = self.size >> (8 * tile_level);
        let width = nodes_at_level.saturating_sub(index * TILE_WIDTH).min(TILE_WIDTH);
        let mut path = format!("tile/{tile_level}/{}", format_index(index));
        if width < TILE_WIDTH {
            path.push_str(&format!(".p/{width}"));
        }
        let bytes = match (self.fetch)(&path) {
            Ok(b) => b,
            Err(source) => {
                self.fail(RemoteError::Fetch { path, source });
                return None;
            }
        };
        // A full tile may answer for a partial one; more hashes than asked for are fine.
        if bytes.len() < width as usize * 32 || bytes.len() % 32 != 0 {
            self.fail(RemoteError::ShortTile { path, len: bytes.len(), width });
            return None;
        }
        let hashes: Vec<Hash> = bytes.chunks_exact(32).filter_map(|c| <Hash>::try_from(c).ok()).collect();
        self.tiles.borrow_mut().insert((tile_level, index), hashes.clone());
        Some(hashes)
    }

    fn fail(&self, why: RemoteError<E>) {
        self.failed.borrow_mut().get_or_insert(why);
    }
}

impl<E> Nodes for TileNodes<'_, E> {
    fn node(&self, level: u32, index: u64) -> Hash {
        // The subtree's hashes sit 0..7 levels above the tile level that holds its base.
        let (tile_level, above) = (level / 8, level % 8);
        let first = index << above;
        let Some(tile) = self.tile(tile_level, first / TILE_WIDTH) else { return [0; 32] };
        let start = (first % TILE_WIDTH) as usize;
        let Some(base) = tile.get(start..start + (1usize << above)) else {
            self.fail(RemoteError::MissingNode { tile_level, tile: first / TILE_WIDTH, level, index });
            return [0; 32];
        };
        perfect_root(base)
    }
}

/// The root of a perfect subtree from its 2^k base hashes.
fn perfect_root(base: &[Hash]) -> Hash {
    let mut level = base.to_vec();
    while level.len() > 1 {
        level = level.chunks(2).map(|p| merkle::node_hash(&p[0], p.get(1).unwrap_or(&p[0]))).collect();
    }
    level.first().copied().unwrap_or([0; 32])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of `n` leaves, and its hash tiles as a tile server would serve them.
    fn served(n: u64) -> (Vec<Hash>, HashMap<String, Vec<u8>>) {
        let leaves: Vec<Hash> = (0..n).map(|i| merkle::leaf_hash(&i.to_be_bytes())).collect();
        let mut tiles = HashMap::new();
        let mut level = leaves.clone();
        let mut tile_level = 0;
        while !level.is_empty() {
            for (index, chunk) in level.chunks(TILE_WIDTH as usize).enumerate() {
                let mut path = format!("tile/{tile_level}/{}", format_index(index as u64));
                if chunk.len() < TILE_WIDTH as usize {
                    path.push_str(&format!(".p/{}", chunk.len()));
                }
                tiles.insert(path, chunk.concat());
            }
            // Eight levels up: the roots of each full run of 256.
            level = level.chunks_exact(TILE_WIDTH as usize).map(perfect_root).collect();
            tile_level += 1;
        }
        (leaves, tiles)
    }

    struct Direct(Vec<Hash>);
    impl Nodes for Direct {
        fn node(&self, level: u32, index: u64) -> Hash {
            let lo = (index << level) as usize;
            perfect_root(&self.0[lo..lo + (1 << level)])
        }
    }

    #[test]
    fn proofs_from_tiles_match_proofs_from_the_leaves() {
        for n in [1u64, 2, 255, 256, 257, 600, 65_536 + 300] {
            let (leaves, tiles) = served(n);
            let fetch = |p: &str| tiles.get(p).cloned().ok_or_else(|| format!("no tile {p}"));
            let remote = TileNodes::new(n, &fetch);
            let direct = Direct(leaves);
            assert_eq!(remote.root().unwrap(), merkle::root(&direct, n), "root of {n}");
            for first in [1, n / 3, n / 2, n - 1, n].into_iter().filter(|f| *f >= 1) {
                let proof = remote.consistency_proof(first).unwrap();
                assert_eq!(proof, merkle::consistency_proof(&direct, first, n).unwrap(), "{first} → {n}");
                let (old, new) = (merkle::root(&direct, first), merkle::root(&direct, n));
                merkle::verify_consistency(first, n, &proof, &old, &new).unwrap();
            }
        }
    }

    #[test]
    fn a_missing_or_short_tile_is_an_error_not_a_proof() {
        let (_, mut tiles) = served(600);
        tiles.remove("tile/0/002.p/88");
        let fetch = |p: &str| tiles.get(p).cloned().ok_or_else(|| format!("404 for {p}"));
        let e = TileNodes::new(600, &fetch).consistency_proof(300).unwrap_err().to_string();
        assert!(e.contains("tile/0/002.p/88"), "{e}");
        let short = |_: &str| Ok::<_, String>(vec![0u8; 40]);
        assert!(TileNodes::new(600, &short).root().unwrap_err().to_string().contains("expected"));
    }
}
