//! Large logs built through the storage API, as the sequencer commits: entries, the tiles they
//! change, and a signed checkpoint per batch. Minutes where appending over HTTP would take
//! hours; `bench scale` and `bench monitor` build their logs so.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use signet_core::merkle::ProofError;
use signet_keys::{Algorithm, KeyError, Signer};
use signet_log::checkpoint::{Checkpoint, NoteSigner};
use signet_log::storage::{Batch, NewEntry, Storage, StorageError, StoredCheckpoint};
use signet_log::tree::Tree;

/// Entries per commit.
pub const BATCH: u64 = 4096;

/// What building a log fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FillError {
    /// The log's directory could not be made.
    #[error("{}: {source}", .path.display())]
    Dir { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The tree has no root at a size it holds.
    #[error(transparent)]
    Tree(#[from] ProofError),
    /// The log's key could not be loaded, made, or sign.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The directory `dir`, made if it is missing.
pub fn create_dir(dir: &Path) -> Result<(), FillError> {
    std::fs::create_dir_all(dir).map_err(|source| FillError::Dir { path: dir.to_path_buf(), source })
}

/// The log's key in `dir` (`log.pem`), made on first use.
pub fn key(dir: &Path) -> Result<Arc<Signer>, FillError> {
    Ok(Arc::new(Signer::load_or_generate(&dir.join("log.pem"), Algorithm::EcdsaP256Sha256)?))
}

/// Commits `entries` (indices `old..`) to log `log` as the sequencer would: the tree extended,
/// its changed tiles, and a checkpoint signed under `origin`, in one batch.
pub fn commit_entries(
    storage: &dyn Storage,
    tree: &mut Tree,
    signer: &NoteSigner,
    (log, origin): (u8, &str),
    old: u64,
    entries: Vec<NewEntry>,
) -> Result<(), FillError> {
    let new = old + entries.len() as u64;
    for e in &entries {
        tree.push(e.leaf_hash);
    }
    let root = tree.root(new)?;
    let tiles = signet_log::sequencer::changed_tiles(tree, old, new)?;
    let leaf_tiles = signet_log::sequencer::filled_leaf_tiles(tree, old, new)?;
    let cp = signer.sign(Checkpoint { origin: origin.into(), size: new, root_hash: root })?;
    let batch = Batch { log, integrated_time: 1_764_000_000, entries, tiles, leaf_tiles, checkpoint: StoredCheckpoint { size: new, note: cp.note } };
    storage.commit(&batch)?;
    tree.settle(new);
    Ok(())
}
