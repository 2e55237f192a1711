//! Opening a log's shard: its config, genesis entry and batches, and on shared storage the
//! catching up with shards another instance made.

use crate::shards::error::ShardError;
use crate::shards::homes::KeyHomes;
use crate::shards::kind::Kind;
use signet_keys::Signer;
use signet_log::shards::Shard;
use signet_log::storage::Storage;
use std::path::PathBuf;
use std::sync::Arc;

/// Opens a shard's log: at start, and for the new shard of an online rotation.
#[derive(Clone)]
pub struct ShardOpener {
    pub storage: Arc<dyn Storage>,
    /// On PostgreSQL: the queue, for the active shard. Its role is this instance's when it
    /// opens: the sequencer's once it holds the lease ([`crate::lease::holding`]).
    pub shared: Option<Arc<signet_log::storage::PostgresStorage>>,
    /// On PostgreSQL: what seals new shards' keys for the other instances ([`sealed`]);
    /// `None` when this data dir's is missing or not theirs.
    pub seal: Option<Arc<super::sealed::SealKey>>,
    /// Where later shards' keys are made and found.
    pub homes: KeyHomes,
    pub data_dir: PathBuf,
    pub host: String,
    pub batch: signet_log::BatchPolicy,
    /// The CT log's: certificates wait on their SCT, so its batches are cut sooner.
    pub ct_batch: signet_log::BatchPolicy,
    pub max_pending: usize,
    pub tile_cache: usize,
    /// Bytes of entries each log keeps for reads (`log.entry_cache_mb`).
    pub entry_cache: usize,
    /// The Rekor v2 log's checkpoints' second signature, for witnesses (`[log.witnesses]`).
    pub v2_note_key: Option<Arc<signet_keys::NoteSigner>>,
}

/// How long a follower waits for the sequencer to make a new shard, or to reach a frozen
/// size, before it gives up for this round (the next look tries again).
pub const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(10);

impl ShardOpener {
    /// Opens Rekor v1 `shard` with `key` ([`ShardOpener::open_kind`]).
    pub async fn open(&self, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::Log, crate::StartError> {
        self.open_kind(Kind::RekorV1, shard, key).await
    }

    /// What `kind`'s `shard` is opened with: its origin, its genesis entry (a Rekor log's
    /// active shard begins with one) and its batches.
    fn config(&self, kind: Kind, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::LogConfig, crate::StartError> {
        let genesis = |made: Result<(Vec<u8>, String), signet_log::rekor::EntryError>| match shard.frozen {
            None => made
                .map(|(body, digest)| Some(signet_log::Genesis { body, digest: Some(digest.into_bytes()) }))
                .map_err(crate::StartError::GenesisEntry),
            Some(_) => Ok(None),
        };
        let host = self.host.clone();
        Ok(match (kind, shard.imported.clone()) {
            // Origin "<host> - <tree ID>", as sigstore-go's v1 checkpoint path expects.
            // A shard copied from another Rekor keeps that log's names: its checkpoint is
            // the one that log signed. It is frozen, so it makes no genesis entry and no SET.
            (Kind::RekorV1, Some(names)) => {
                signet_log::LogConfig {
                    id: shard.log_id,
                    genesis: None,
                    origin: names.origin,
                    key_name: names.key_name,
                    stamper: None,
                    key,
                    batch: self.batch,
                    max_pending: self.max_pending,
                    tile_cache: self.tile_cache,
                    entry_cache: self.entry_cache,
                    note_key: None,
                }
            }
            (Kind::RekorV1, None) => {
                let origin = format!("{host} - {}", shard.tree_id);
                signet_log::LogConfig {
                    id: shard.log_id,
                    genesis: genesis(signet_log::rekor::genesis::v1_entry(&key, &origin))?,
                    origin,
                    key_name: host,
                    stamper: Some(Arc::new(signet_log::rekor::v1::SetSigner::for_shard(key.clone(), shard.start))),
                    key,
                    batch: self.batch,
                    max_pending: self.max_pending,
                    tile_cache: self.tile_cache,
                    entry_cache: self.entry_cache,
                    note_key: None,
                }
            }
            // The bare host of the log's base URL, in every shard: sigstore-go checks a v2
            // checkpoint's origin against that host. A new shard is told apart by its key.
            (Kind::RekorV2, _) => signet_log::LogConfig {
                id: shard.log_id,
                genesis: genesis(signet_log::rekor::genesis::v2_entry(&key, &host))?,
                origin: host.clone(),
                key_name: host,
                key,
                batch: self.batch,
                stamper: None,
                max_pending: self.max_pending,
                tile_cache: self.tile_cache,
                entry_cache: self.entry_cache,
                note_key: self.v2_note_key.clone(),
            },
            // Its key names it (the SCTs' log ID); its checkpoints are internal.
            (Kind::Ct, _) => signet_log::LogConfig {
                id: shard.log_id,
                origin: match shard.number {
                    0 => format!("{host}/ct"),
                    n => format!("{host}/ct/{n}"),
                },
                key_name: host,
                key,
                batch: self.ct_batch,
                stamper: None,
                // Certificates are bounded by the CA's own admission (one CT entry each).
                max_pending: 0,
                genesis: None,
                tile_cache: self.tile_cache,
                entry_cache: self.entry_cache,
                note_key: None,
            },
        })
    }

    /// Opens `kind`'s `shard` with `key`. An active shard is shared with the other instances
    /// (as sequencer once this instance holds the lease); a frozen one takes no appends, so
    /// it is opened alone, and its stored tree must have the size it was frozen at.
    pub async fn open_kind(&self, kind: Kind, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::Log, crate::StartError> {
        let cfg = self.config(kind, shard, key)?;
        let log = match (&self.shared, shard.frozen) {
            (Some(pg), None) => {
                let role = if crate::lease::holding() { signet_log::Role::Sequencer } else { signet_log::Role::Follower };
                signet_log::Log::open_shared(cfg, self.storage.clone(), pg.clone(), role).await?
            }
            _ => signet_log::Log::open(cfg, self.storage.clone()).await?,
        };
        if let Some(frozen) = shard.frozen {
            let size = log.head().checkpoint.size;
            if size != frozen.size {
                return Err(ShardError::FrozenAt { kind, number: shard.number, frozen: frozen.size, stored: size }.into());
            }
        }
        Ok(log)
    }

    /// Opens a new active shard after a rotation: as its sequencer when this instance holds
    /// the lease (which writes a Rekor log's genesis entry), else once the sequencer has made
    /// it, waiting at most [`CATCH_UP`].
    pub async fn open_active(&self, kind: Kind, shard: &Shard, key: Arc<Signer>) -> Result<signet_log::Log, FollowError> {
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            if self.shared.is_none() || crate::lease::holding() {
                break;
            }
            let made = self.storage.latest_checkpoint_async(shard.log_id).await.map_err(ShardError::from)?;
            if made.is_some() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(FollowError::NotMade { kind, number: shard.number });
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let log = self.open_kind(kind, shard, key).await.map_err(|e| FollowError::Open(Box::new(e)))?;
        log.genesis_written().await.map_err(ShardError::from)?;
        Ok(log)
    }
}

/// Why this instance does not serve a new shard yet: one another instance's rotation made,
/// or its own rotation's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FollowError {
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error("the sequencer has not made {} shard {number} within {:?}", .kind.title(), CATCH_UP)]
    NotMade { kind: Kind, number: u32 },
    /// The shard's log did not open, as it would not at a start.
    #[error(transparent)]
    Open(Box<crate::StartError>),
}
