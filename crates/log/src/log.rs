//! One transparency log: its tree, key, sequencer and storage, behind a cloneable handle.

use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::RwLock;
use signet_keys::Signer;
use tokio::sync::{mpsc, oneshot};

use crate::checkpoint::{self, Checkpoint, NoteSigner, SignedCheckpoint};
use crate::follow::{self, Follower, Role};
use crate::merkle;
use crate::error::{AppendError, OpenError};
use crate::pipeline::{BatchPolicy, Pending, Sequenced};
use crate::sequencer;
use crate::shared::{Shared, Stamper};
use crate::storage::{Attestation, Batch, LogId, Queue, Storage, StorageError, StoredCheckpoint};
use crate::snapshot::Snapshot;
use crate::tree::{StoredNodes, Tree};

mod leaf;
mod reads;

pub use leaf::Leaf;
pub use reads::DigestPage;

pub struct LogConfig {
    /// Storage namespace of this log.
    pub id: LogId,
    /// First line of every checkpoint.
    pub origin: String,
    /// Name on the checkpoint signature line.
    pub key_name: String,
    pub key: Arc<Signer>,
    pub batch: BatchPolicy,
    pub stamper: Option<Arc<dyn Stamper>>,
    /// How many appends may be admitted and not yet answered ([`Log::admit`]); 0 is no bound.
    pub max_pending: usize,
    /// How many full tiles (16 KiB each) the tree keeps in memory beside its right edge.
    pub tile_cache: usize,
    /// Bytes of entries kept in memory for reads ([`crate::entrycache`]); 0 keeps none.
    pub entry_cache: usize,
    /// An Ed25519 key that signs every checkpoint too, under the origin, for C2SP witnesses
    /// that verify only Ed25519 log keys (`[log.witnesses]`).
    pub note_key: Option<Arc<signet_keys::NoteSigner>>,
    /// The entry the log begins with (see [`crate::rekor::genesis`]), written at index 0 by
    /// whichever instance sequences the log while it is empty: at its creation, or after a
    /// takeover from a sequencer that died before writing it.
    pub genesis: Option<Genesis>,
}

/// A log's first entry.
#[derive(Clone)]
pub struct Genesis {
    pub body: Vec<u8>,
    pub digest: Option<Vec<u8>>,
}

type Answer = oneshot::Receiver<Result<Sequenced, AppendError>>;

/// [`LogConfig::tile_cache`] by default: 64 MiB, every tile of a million entries.
pub const DEFAULT_TILE_CACHE: usize = 4096;

/// [`LogConfig::entry_cache`] by default: 64 MiB, about 50,000 hashedrekord entries.
pub const DEFAULT_ENTRY_CACHE: usize = 64 << 20;

/// What an entry is searchable by, besides its leaf hash.
#[derive(Debug, Clone, Default)]
struct SearchKeys {
    digest: Option<Vec<u8>>,
    identity: Option<Vec<u8>>,
    public_key: Option<Vec<u8>>,
}

#[derive(Clone)]
pub struct Log {
    shared: Arc<Shared>,
    /// The sequencer's pool; `None` while this instance follows.
    tx: Arc<RwLock<Option<mpsc::Sender<Pending>>>>,
    /// Set when this instance may follow (storage shared by many instances).
    follower: Option<Arc<Follower>>,
    queue: Option<Arc<dyn Queue>>,
    batch: BatchPolicy,
    gate: Arc<Gate>,
    genesis: Option<Genesis>,
    /// The answer to the genesis entry, once the sequencer has it in its pool.
    genesis_answer: Arc<parking_lot::Mutex<Option<Answer>>>,
    /// The sequencer's task while this instance sequences: it ends once the pool is closed
    /// and everything in it is durable and answered ([`Log::freeze`]), handing its tree back.
    sequencer: Arc<parking_lot::Mutex<Option<tokio::task::JoinHandle<Tree>>>>,
    /// The tree while no task owns it: from open until a sequencer or follower takes it, and
    /// while the log is frozen.
    parked: Arc<parking_lot::Mutex<Option<Tree>>>,
}

/// The admission count behind [`Log::admit`].
struct Gate {
    count: std::sync::atomic::AtomicUsize,
    limit: usize,
    /// Why this log takes no appends at all, when it doesn't ([`Log::refuse_appends`]).
    refused: std::sync::OnceLock<String>,
}

/// One admitted append; the slot is free again when this is dropped (answered or abandoned).
pub struct Admission {
    gate: Arc<Gate>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.gate.count.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Log {
    /// Opens (or creates) the log in `storage` and starts its sequencer on the current runtime.
    pub async fn open(cfg: LogConfig, storage: Arc<dyn Storage>) -> Result<Log, OpenError> {
        Self::open_as(cfg, storage, None, Role::Sequencer).await
    }

    /// Opens the log in storage that several instances share (see [`crate::follow`]): as its
    /// sequencer, which also logs what the others queue, or as a follower, which serves reads
    /// and queues its appends until [`Log::promote`].
    pub async fn open_shared(cfg: LogConfig, storage: Arc<dyn Storage>, queue: Arc<dyn Queue>, role: Role) -> Result<Log, OpenError> {
        Self::open_as(cfg, storage, Some(queue), role).await
    }

    async fn open_as(cfg: LogConfig, storage: Arc<dyn Storage>, queue: Option<Arc<dyn Queue>>, role: Role) -> Result<Log, OpenError> {
        let signer = NoteSigner::new(cfg.key_name.clone(), cfg.key.clone()).with_note_key(cfg.note_key.clone());
        let store = storage.clone();
        let id = cfg.id;
        let cache = cfg.tile_cache;
        let (tree, stored) = tokio::task::spawn_blocking(move || reopen(store, id, cache))
            .await
            .map_err(|e| OpenError::Corrupt { log: id, why: e.to_string() })??;
        let root = tree.root(tree.size()).map_err(|e| OpenError::Corrupt { log: id, why: e.to_string() })?;
        let head = match stored {
            Some(sc) => {
                // The origin (and the key name) come from the public URL's host: a different one
                // is a configuration change, not corruption, and deserves its own message.
                let stored_origin = sc.note.lines().next().unwrap_or("");
                if stored_origin != cfg.origin {
                    return Err(OpenError::OriginChanged { log: id, stored: stored_origin.to_string(), configured: cfg.origin });
                }
                let parsed = checkpoint::verify(&sc.note, &cfg.key_name, cfg.key.spki_der()).map_err(|e| OpenError::Corrupt {
                    log: id,
                    why: format!("latest checkpoint does not verify with the configured key: {e}"),
                })?;
                if parsed.root_hash != root || parsed.size != tree.size() || parsed.origin != cfg.origin {
                    return Err(OpenError::Corrupt {
                        log: id,
                        why: format!(
                            "checkpoint (origin {:?}, size {}) does not match the stored tree (origin {:?}, size {})",
                            parsed.origin, parsed.size, cfg.origin, tree.size()
                        ),
                    });
                }
                SignedCheckpoint { checkpoint: parsed, note: sc.note }
            }
            None if role == Role::Follower => return Err(OpenError::NotCreated { log: id }),
            None => {
                // A new log: make its empty checkpoint durable so readers always have one.
                let cp = signer.sign(Checkpoint { origin: cfg.origin.clone(), size: 0, root_hash: root })?;
                let batch = Batch {
                    log: id,
                    integrated_time: 0,
                    entries: vec![],
                    tiles: vec![],
                    leaf_tiles: vec![],
                    checkpoint: StoredCheckpoint { size: 0, note: cp.note.clone() },
                };
                storage.clone().start_commit(batch).await.map_err(|e| OpenError::Corrupt { log: id, why: e.to_string() })?.1?;
                cp
            }
        };
        let shared = Arc::new(Shared {
            id,
            origin: cfg.origin,
            signer,
            stamper: cfg.stamper,
            storage,
            published: ArcSwap::from_pointee(Snapshot::of(&tree, Arc::new(head))),
            inflight: Default::default(),
            max_pending: cfg.max_pending,
            in_pipeline: Default::default(),
            stats: Default::default(),
            closing: Default::default(),
            frozen_in_storage: Default::default(),
            frozen_notice: Default::default(),
            entry_cache: crate::entrycache::EntryCache::new(cfg.entry_cache),
        });
        let gate = Arc::new(Gate { count: Default::default(), limit: cfg.max_pending, refused: Default::default() });
        let (follower, parked) = match (&queue, role) {
            (Some(q), Role::Follower) => (Some(Follower::start(shared.clone(), q.clone(), tree)), None),
            _ => (None, Some(tree)),
        };
        let log = Log {
            shared,
            tx: Default::default(),
            follower,
            queue,
            batch: cfg.batch,
            gate,
            genesis: cfg.genesis,
            genesis_answer: Default::default(),
            sequencer: Default::default(),
            parked: Arc::new(parking_lot::Mutex::new(parked)),
        };
        if role == Role::Sequencer {
            if let Some(tree) = log.parked.lock().take() {
                log.start_sequencer(tree, None);
            }
        }
        Ok(log)
    }

    /// Starts the sequencer on `tree` (and, on shared storage, the drain of the queue).
    fn start_sequencer(&self, tree: Tree, promoted_from: Option<Arc<Follower>>) {
        let (tx, rx) = mpsc::channel(self.batch.max_entries.max(1) * 64);
        // An empty log's genesis goes into the pool before anything else can (the queue's
        // drain starts below), so that it is index 0.
        if let Some(g) = self.genesis.as_ref().filter(|_| self.shared.durable_size() == 0) {
            let (reply, answer) = oneshot::channel();
            let body = g.body.clone();
            let pending = Pending {
                leaf_hash: merkle::leaf_hash(&body),
                digest: g.digest.clone(),
                identity: None,
                public_key: None,
                body,
                extra: None,
                attestation: None,
                reply,
                queued: std::time::Instant::now(),
            };
            if tx.try_send(pending).is_ok() {
                *self.genesis_answer.lock() = Some(answer);
            }
        }
        let task = tokio::spawn(sequencer::run(self.shared.clone(), rx, self.batch, tree));
        let id = self.shared.id;
        *self.sequencer.lock() = Some(tokio::spawn(async move {
            match task.await {
                Ok(tree) => tree,
                Err(e) => {
                    // The task that owns the tree died mid-batch: what it acknowledged is
                    // durable, but its tree is gone. A server that answers but never commits
                    // is worse than none, so stop, and let the restart rebuild from storage.
                    tracing::error!(log = id, error = %e, "the log's sequencer failed; stopping signet (acknowledged entries are durable; restart to resume)");
                    std::process::exit(1);
                }
            }
        }));
        if let Some(queue) = &self.queue {
            tokio::spawn(follow::drain(self.shared.clone(), tx.clone(), queue.clone(), promoted_from));
        }
        *self.tx.write() = Some(tx);
    }

    /// Makes a follower the log's sequencer, once this instance holds the sequencer lease:
    /// it catches up with the stored log, then sequences from there. Appends waiting on it
    /// are answered as their queued entries are logged.
    pub async fn promote(&self) -> Result<(), StorageError> {
        let Some(follower) = &self.follower else { return Ok(()) };
        follower.promote(|tree| self.start_sequencer(tree, Some(follower.clone()))).await
    }

    /// Waits until the genesis entry this instance put in its pool is logged (at once if it
    /// put none: the log was not empty, or this instance does not sequence it).
    pub async fn genesis_written(&self) -> Result<(), AppendError> {
        let answer = self.genesis_answer.lock().take();
        match answer {
            Some(a) => a.await.map_err(|_| AppendError::Aborted)?.map(|_| ()),
            None => Ok(()),
        }
    }

    /// Stops taking entries, for good: waits until everything already submitted is durable
    /// and answered, and returns the final checkpoint. Reads go on, and appends from now on
    /// fail with [`AppendError::Closed`]. (A shard rotation freezes the active shard.) On
    /// shared storage the queue's drain stops too; what other instances queue from then on
    /// waits for [`crate::storage::Storage::freeze`], after which their retries go to the next shard. A
    /// follower has nothing of its own to finish: see [`Log::follow_until`].
    pub async fn freeze(&self) -> Result<Arc<SignedCheckpoint>, AppendError> {
        self.shared.closing.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(self.tx.write().take());
        let task = self.sequencer.lock().take();
        if let Some(task) = task {
            // The task ends once every entry in its pool is committed (or failed) and answered.
            let tree = task.await.map_err(|_| AppendError::Aborted)?;
            *self.parked.lock() = Some(tree);
        }
        Ok(self.head())
    }

    /// On a follower of a log frozen at `size` (a rotation): catches up to it, answering the
    /// appends whose entries made it in, then stops following. Appends still waiting, and any
    /// from now on, are told to retry (their entries go to the next shard). If it cannot
    /// catch up within `within`, it goes on following and says how far it got: call again.
    pub async fn follow_until(&self, size: u64, within: std::time::Duration) -> Result<Arc<SignedCheckpoint>, AppendError> {
        let Some(follower) = self.follower.as_ref().filter(|f| !f.is_promoted()) else { return self.freeze().await };
        let deadline = tokio::time::Instant::now() + within;
        while self.shared.durable_size() < size && tokio::time::Instant::now() < deadline {
            follower.poll_now().await;
        }
        let head = self.head();
        if head.checkpoint.size != size {
            return Err(AppendError::Unavailable(format!(
                "the frozen tree has size {size}, but this instance has reached only {} of it",
                head.checkpoint.size
            )));
        }
        follower.close(AppendError::Closed);
        Ok(head)
    }

    /// Resolves once a commit of this instance finds the tree frozen in storage (a rotation
    /// made by another instance, which this one has yet to serve), with the frozen size.
    pub async fn frozen_in_storage(&self) -> u64 {
        loop {
            if let Some(size) = self.shared.frozen_in_storage.get() {
                return *size;
            }
            self.shared.frozen_notice.notified().await;
        }
    }

    /// Takes entries again after [`Log::freeze`] (when what was to follow the freeze failed).
    pub fn resume(&self) {
        // A follower that never sequenced here has no sequencer to resume.
        if self.tx.read().is_none() && self.follower.as_ref().is_none_or(|f| f.is_promoted()) {
            let tree = self.parked.lock().take();
            match tree {
                Some(tree) => {
                    self.shared.closing.store(false, std::sync::atomic::Ordering::SeqCst);
                    self.start_sequencer(tree, self.follower.clone())
                }
                None => tracing::error!(log = self.shared.id, "the frozen log's tree is gone; it takes no appends until signet restarts"),
            }
        }
    }

    /// Whether this instance sequences the log (or only follows it).
    pub fn role(&self) -> Role {
        if self.tx.read().is_some() {
            Role::Sequencer
        } else {
            Role::Follower
        }
    }

    /// Admits one append, or refuses it at once when `max_pending` are already waiting.
    ///
    /// Callers take this before they parse or verify anything, so that an overloaded log
    /// sheds excess requests for the price of a counter, not of a signature check: the
    /// admitted ones keep a bounded latency, and the rest get a fast 503 to retry instead of
    /// a place in a queue that grows until clients time out (Tessera's pushback).
    pub fn admit(&self) -> Result<Admission, AppendError> {
        use std::sync::atomic::Ordering;
        let p = &self.gate;
        if let Some(why) = p.refused.get() {
            return Err(AppendError::Refused(why.clone()));
        }
        let before = p.count.fetch_add(1, Ordering::Relaxed);
        let admission = Admission { gate: p.clone() };
        if p.limit != 0 && before >= p.limit {
            return Err(AppendError::Overloaded { limit: p.limit });
        }
        Ok(admission)
    }

    /// From now on, every append is refused with `why`, and reads go on: a restored backup's
    /// logs, whose original may have acknowledged entries past the copy (`signet restore`).
    /// The first reason given stays.
    pub fn refuse_appends(&self, why: impl Into<String>) {
        let _ = self.gate.refused.set(why.into());
    }

    /// Why appends are refused, when they are.
    pub fn appends_refused(&self) -> Option<&str> {
        self.gate.refused.get().map(String::as_str)
    }

    /// Appends admitted and not yet answered.
    pub fn pending(&self) -> usize {
        self.gate.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Submits one entry and waits until it is durable (or found to be a duplicate).
    pub async fn append(&self, body: impl Into<Leaf>, digest: Option<Vec<u8>>) -> Result<Sequenced, AppendError> {
        self.submit(body, SearchKeys { digest, ..SearchKeys::default() }, None, None).await
    }

    /// [`Log::append`], searchable by the signing identity key `identity` and the signer's key
    /// index `public_key` as well ([`Log::indices_by_identity`], [`Log::indices_by_public_key`];
    /// see [`crate::rekor::identity_key`] and [`crate::rekor::public_key_index`]), and with
    /// `attestation` kept beside it ([`crate::storage::NewEntry::attestation`]). An entry found
    /// to be a duplicate keeps what the first one stored.
    pub async fn append_searchable(
        &self,
        body: impl Into<Leaf>,
        digest: Option<Vec<u8>>,
        identity: Option<Vec<u8>>,
        public_key: Option<Vec<u8>>,
        attestation: Option<Attestation>,
    ) -> Result<Sequenced, AppendError> {
        self.submit(body, SearchKeys { digest, identity, public_key }, None, attestation).await
    }

    /// [`Log::append`], keeping `extra` as the entry's stamp (for a log without a
    /// [`Stamper`]): bytes made once at submission and served with the entry ever after.
    pub async fn append_with_extra(
        &self,
        body: impl Into<Leaf>,
        digest: Option<Vec<u8>>,
        extra: Option<Vec<u8>>,
    ) -> Result<Sequenced, AppendError> {
        self.submit(body, SearchKeys { digest, ..SearchKeys::default() }, extra, None).await
    }

    async fn submit(
        &self,
        leaf: impl Into<Leaf>,
        keys: SearchKeys,
        extra: Option<Vec<u8>>,
        attestation: Option<Attestation>,
    ) -> Result<Sequenced, AppendError> {
        let SearchKeys { digest, identity, public_key } = keys;
        if let Some(why) = self.gate.refused.get() {
            return Err(AppendError::Refused(why.clone()));
        }
        if self.shared.frozen_in_storage.get().is_some() {
            return Err(AppendError::Closed);
        }
        let (reply, rx) = oneshot::channel();
        let (body, leaf_hash) = leaf.into().into_parts();
        let pending = Pending { leaf_hash, digest, identity, public_key, body, extra, attestation, reply, queued: std::time::Instant::now() };
        let tx = self.tx.read().clone();
        match (tx, &self.follower) {
            (Some(tx), _) => tx.send(pending).await.map_err(|_| AppendError::Closed)?,
            (None, Some(follower)) => {
                follower.append(&self.shared, pending).await;
                return match tokio::time::timeout(follow::FOLLOWER_APPEND_TIMEOUT, rx).await {
                    Ok(answer) => answer.map_err(|_| AppendError::Aborted)?,
                    Err(_) => Err(AppendError::Unavailable(format!(
                        "the entry was handed to the sequencing instance but not logged within {:?}; retrying is safe",
                        follow::FOLLOWER_APPEND_TIMEOUT
                    ))),
                };
            }
            (None, None) => return Err(AppendError::Closed),
        }
        // The reply is dropped unanswered only when its batch panicked (see the sequencer).
        rx.await.map_err(|_| AppendError::Aborted)?
    }

    /// Whether the log still takes entries: false once its sequencer has stopped, once it is
    /// frozen (here, or found frozen in storage), and for a follower of a frozen log.
    pub fn is_running(&self) -> bool {
        if self.shared.frozen_in_storage.get().is_some() {
            return false;
        }
        match &*self.tx.read() {
            Some(tx) => !tx.is_closed(),
            None => self.follower.as_ref().is_some_and(|f| !f.is_closed()),
        }
    }

    pub fn origin(&self) -> &str {
        &self.shared.origin
    }

    pub fn key(&self) -> &Signer {
        self.shared.signer.key()
    }

    pub fn storage_id(&self) -> LogId {
        self.shared.id
    }

    /// The storage this log lives in (for [`crate::reindex`], which works on stored entries
    /// beside the sequencer rather than through it).
    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.shared.storage
    }

}

/// Opens the tree at the latest durable checkpoint, from its right edge in storage: a few
/// tiles, however long the log (see [`crate::tree`]).
pub(crate) fn reopen(store: Arc<dyn Storage>, id: LogId, cache_tiles: usize) -> Result<(Tree, Option<StoredCheckpoint>), OpenError> {
    let stored = store.latest_checkpoint(id)?;
    let size = stored.as_ref().map_or(0, |c| c.size);
    let tree = Tree::open(Box::new(StoredNodes { storage: store, log: id }), cache_tiles, size).map_err(|e| match e {
        StorageError::Corrupt(why) => OpenError::Corrupt { log: id, why },
        other => OpenError::Storage(other),
    })?;
    Ok((tree, stored))
}
