//! The sequencer under failure: a panic while preparing a batch, and a failed commit, each
//! cost that batch only, and the entries in it can be appended again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use signet_core::keys::{KeyError, SigningKey};
use signet_log::storage::{Batch, EntryKeys, LogId, SqliteStorage, Storage, StorageError, StoredCheckpoint, StoredEntry, Tile};
use signet_log::{AppendError, BatchPolicy, Log, LogConfig, Sequenced, Stamper};

/// Stamps every entry, but panics on the body `boom`: a bug reached by one request.
struct PanickyStamper;

impl Stamper for PanickyStamper {
    fn stamp(&self, index: u64, _time: i64, body: &[u8]) -> Result<Vec<u8>, KeyError> {
        if body == b"boom" {
            panic!("stamper bug at index {index}");
        }
        Ok(vec![1])
    }
}

/// SQLite, except that a commit with entries fails while `fail` is set; while `lose_answer`
/// is set, a commit lands but reports that the connection broke; while `blind` is set, the
/// latest checkpoint cannot be read.
struct FlakyStorage {
    inner: SqliteStorage,
    fail: AtomicBool,
    lose_answer: AtomicBool,
    blind: AtomicBool,
}

impl FlakyStorage {
    fn new(inner: SqliteStorage) -> FlakyStorage {
        FlakyStorage { inner, fail: AtomicBool::new(false), lose_answer: AtomicBool::new(false), blind: AtomicBool::new(false) }
    }
}

impl Storage for FlakyStorage {
    fn commit(&self, batch: &Batch) -> Result<(), StorageError> {
        if !batch.entries.is_empty() && self.fail.load(Ordering::SeqCst) {
            return Err(StorageError::Backend("disk on fire".into()));
        }
        self.inner.commit(batch)?;
        if !batch.entries.is_empty() && self.lose_answer.load(Ordering::SeqCst) {
            return Err(StorageError::Unavailable("connection reset after COMMIT".into()));
        }
        Ok(())
    }
    fn latest_checkpoint(&self, log: LogId) -> Result<Option<StoredCheckpoint>, StorageError> {
        if self.blind.load(Ordering::SeqCst) {
            return Err(StorageError::Unavailable("connection refused".into()));
        }
        self.inner.latest_checkpoint(log)
    }
    fn tiles(&self, log: LogId, level: u8) -> Result<Vec<Tile>, StorageError> {
        self.inner.tiles(log, level)
    }
    fn tile(&self, log: LogId, level: u8, index: u64) -> Result<Option<Tile>, StorageError> {
        self.inner.tile(log, level, index)
    }
    fn leaf_tile(&self, log: LogId, index: u64) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.leaf_tile(log, index)
    }
    fn find_leaves(&self, log: LogId, leaves: &[[u8; 32]]) -> Result<Vec<(usize, u64)>, StorageError> {
        self.inner.find_leaves(log, leaves)
    }
    fn find_digest_async(&self, log: LogId, digest: Vec<u8>, after: Option<u64>, limit: usize) -> signet_log::storage::ReadFuture<'_, Vec<u64>> {
        self.inner.find_digest_async(log, digest, after, limit)
    }
    fn find_identity_async(&self, log: LogId, identity: Vec<u8>, after: Option<u64>, limit: usize) -> signet_log::storage::ReadFuture<'_, Vec<u64>> {
        self.inner.find_identity_async(log, identity, after, limit)
    }
    fn keys(&self, log: LogId, start: u64, count: u64) -> Result<Vec<EntryKeys>, StorageError> {
        self.inner.keys(log, start, count)
    }
    fn entry(&self, log: LogId, index: u64) -> Result<Option<StoredEntry>, StorageError> {
        self.inner.entry(log, index)
    }
    fn entries(&self, log: LogId, start: u64, count: u64) -> Result<Vec<StoredEntry>, StorageError> {
        self.inner.entries(log, start, count)
    }
    fn get_or_init_meta(&self, key: &str, init: &[u8]) -> Result<Vec<u8>, StorageError> {
        self.inner.get_or_init_meta(key, init)
    }
    fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.meta(key)
    }
}

fn config(stamper: Option<Arc<dyn Stamper>>) -> LogConfig {
    LogConfig {
        id: 1,
        origin: "test.example/log".into(),
        key_name: "test.example".into(),
        key: Arc::new(SigningKey::generate().unwrap()),
        batch: BatchPolicy { max_entries: 16, max_delay: Duration::from_millis(1) },
        stamper,
        max_pending: 0,
        tile_cache: signet_log::DEFAULT_TILE_CACHE,
        note_key: None,
        genesis: None,
    }
}

/// Issue 17 item 3: a panic in the sequencer used to end its task, and from then on every
/// append failed while reads went on: a server that answers but never commits.
#[tokio::test]
async fn a_panic_while_preparing_costs_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap());
    let log = Log::open(config(Some(Arc::new(PanickyStamper))), storage).await.unwrap();
    let before = signet_log::sequencer::panics();

    assert!(matches!(log.append(b"boom".to_vec(), None).await, Err(AppendError::Aborted)));
    // The waiter learns of the failure as the panic unwinds; the count follows a moment later.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while signet_log::sequencer::panics() == before {
        assert!(std::time::Instant::now() < deadline, "the panic is counted");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(log.head().checkpoint.size, 0);

    // The log goes on: the next entries get the indices the failed batch would have had.
    for (i, body) in [b"one".as_slice(), b"two"].into_iter().enumerate() {
        match log.append(body.to_vec(), None).await.unwrap() {
            Sequenced::New { index, checkpoint, .. } => {
                assert_eq!(index, i as u64);
                assert_eq!(checkpoint.checkpoint.size, i as u64 + 1);
            }
            other => panic!("expected a new entry, got {other:?}"),
        }
    }
    let proof = log.inclusion_proof(1, 2).unwrap();
    let root = log.root(2).unwrap();
    signet_core::merkle::verify_inclusion(&signet_log::merkle::leaf_hash(b"two"), 1, 2, &proof, &root).unwrap();
}

/// Issue 17 item 14: an entry whose batch failed to commit is neither in flight nor present
/// afterwards, and appending it again logs it.
#[tokio::test]
async fn an_entry_whose_commit_failed_can_be_appended_again() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let log = Log::open(config(None), storage.clone()).await.unwrap();
    assert!(matches!(log.append(b"first".to_vec(), None).await.unwrap(), Sequenced::New { index: 0, .. }));

    storage.fail.store(true, Ordering::SeqCst);
    let failed: Vec<_> = futures_join(&log, &[b"a".as_slice(), b"b", b"c", b"a"]).await;
    assert!(failed.iter().all(|r| matches!(r, Err(AppendError::Storage(_)))), "{failed:?}");
    assert_eq!(log.head().checkpoint.size, 1);
    assert_eq!(log.find_leaf(&signet_log::merkle::leaf_hash(b"a")).await.unwrap(), None);

    storage.fail.store(false, Ordering::SeqCst);
    let again = futures_join(&log, &[b"c".as_slice(), b"a", b"b"]).await;
    let mut indices: Vec<u64> = again
        .into_iter()
        .map(|r| match r {
            Ok(Sequenced::New { index, .. }) => index,
            other => panic!("a retry must log the entry, got {other:?}"),
        })
        .collect();
    indices.sort();
    assert_eq!(indices, [1, 2, 3]);
    assert_eq!(log.entry(1).unwrap().map(|e| e.body.len()), Some(1));
    // And now they are duplicates.
    assert!(matches!(log.append(b"a".to_vec(), None).await.unwrap(), Sequenced::Duplicate { .. }));
}

/// A commit that lands while its answer is lost (the database connection broke after COMMIT)
/// is found by reading the checkpoint back: its entries are acknowledged, not failed, and the
/// log goes on from them.
#[tokio::test]
async fn a_commit_whose_answer_was_lost_is_found_and_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let log = Log::open(config(None), storage.clone()).await.unwrap();
    storage.lose_answer.store(true, Ordering::SeqCst);
    assert!(matches!(log.append(b"landed".to_vec(), None).await.unwrap(), Sequenced::New { index: 0, .. }));
    storage.lose_answer.store(false, Ordering::SeqCst);
    assert!(matches!(log.append(b"next".to_vec(), None).await.unwrap(), Sequenced::New { index: 1, .. }));
    assert_eq!(log.head().checkpoint.size, 2);
    assert_eq!(storage.inner.latest_checkpoint(1).unwrap().unwrap().note, log.head().note);
}

/// The same, when the checkpoint cannot be read back either: the entry's request fails (it
/// may be retried, and is then a duplicate), the next commit conflicts, and the log adopts
/// the batch that did land rather than stalling or forking.
#[tokio::test]
async fn a_lost_commit_that_cannot_be_checked_is_adopted_at_the_next_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let log = Log::open(config(None), storage.clone()).await.unwrap();
    storage.lose_answer.store(true, Ordering::SeqCst);
    storage.blind.store(true, Ordering::SeqCst);
    assert!(matches!(log.append(b"landed".to_vec(), None).await, Err(AppendError::Unavailable(_))));
    assert_eq!(log.head().checkpoint.size, 0);
    storage.lose_answer.store(false, Ordering::SeqCst);
    storage.blind.store(false, Ordering::SeqCst);

    // This batch was built on size 0 and conflicts with the landed one, which is adopted.
    assert!(log.append(b"second".to_vec(), None).await.is_err());
    assert_eq!(log.head().checkpoint.size, 1);
    assert!(matches!(log.append(b"landed".to_vec(), None).await.unwrap(), Sequenced::Duplicate { index: 0 }));
    assert!(matches!(log.append(b"second".to_vec(), None).await.unwrap(), Sequenced::New { index: 1, .. }));
    let (head, stored) = (log.head(), storage.inner.latest_checkpoint(1).unwrap().unwrap());
    assert_eq!((head.checkpoint.size, &head.note), (2, &stored.note));
    let proof = log.inclusion_proof(0, 2).unwrap();
    signet_core::merkle::verify_inclusion(&signet_log::merkle::leaf_hash(b"landed"), 0, 2, &proof, &log.root(2).unwrap()).unwrap();
}

async fn futures_join(log: &Log, bodies: &[&[u8]]) -> Vec<Result<Sequenced, AppendError>> {
    let tasks: Vec<_> = bodies
        .iter()
        .map(|b| {
            let (log, body) = (log.clone(), b.to_vec());
            tokio::spawn(async move { log.append(body, None).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Admission: past `max_pending`, `admit` refuses at once; an answered append frees its slot.
/// And a pool that holds every admitted append is flushed without waiting out `max_delay`
/// (here 30 s, far past the test's own time limit): no more entries could come.
#[tokio::test]
async fn admission_is_bounded_and_a_full_pool_flushes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap());
    let cfg = LogConfig { max_pending: 2, batch: BatchPolicy { max_entries: 256, max_delay: Duration::from_secs(30) }, ..config(None) };
    let log = Log::open(cfg, storage).await.unwrap();

    let first = log.admit().unwrap();
    let second = log.admit().unwrap();
    assert!(matches!(log.admit(), Err(AppendError::Overloaded { limit: 2 })));
    assert_eq!(log.pending(), 2, "a refusal holds no slot");

    let bodies = [b"one".as_slice(), b"two"];
    let appends = futures_join(&log, &bodies);
    let done = tokio::time::timeout(Duration::from_secs(10), appends).await.expect("flushed without waiting out max_delay");
    assert!(done.iter().all(|r| matches!(r, Ok(Sequenced::New { .. }))), "{done:?}");
    drop((first, second));
    assert_eq!(log.pending(), 0);
    let _again = log.admit().unwrap();
}

/// A shard rotation freezes the active log: whatever was submitted before is durable and
/// answered, nothing is taken after, and the final checkpoint is the stored one.
#[tokio::test]
async fn a_frozen_log_logs_what_it_took_and_nothing_after() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap());
    let log = Log::open(config(None), storage.clone()).await.unwrap();
    // Submitted concurrently with the freeze: each is either logged or refused, never lost.
    let appends: Vec<_> = (0..50u32)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move { log.append(format!("e{i}").into_bytes(), None).await })
        })
        .collect();
    tokio::task::yield_now().await;
    let head = log.freeze().await.unwrap();
    let mut logged = 0;
    for a in appends {
        match a.await.unwrap() {
            Ok(Sequenced::New { index, .. }) => {
                assert!(index < head.checkpoint.size, "logged at {index}, past the frozen size {}", head.checkpoint.size);
                logged += 1;
            }
            Err(AppendError::Closed) => {}
            other => panic!("unexpected {:?}", other.map(|_| ())),
        }
    }
    assert_eq!(logged, head.checkpoint.size, "every logged entry was answered, and only those");
    assert_eq!(storage.latest_checkpoint(1).unwrap().unwrap().size, head.checkpoint.size);
    assert!(matches!(log.append(b"late".to_vec(), None).await, Err(AppendError::Closed)));
    assert!(!log.is_running());
    // Reads go on.
    if head.checkpoint.size > 0 {
        assert!(log.entry(0).unwrap().is_some());
    }
    // Resumed, it takes entries again, after the frozen size.
    log.resume();
    match log.append(b"again".to_vec(), None).await.unwrap() {
        Sequenced::New { index, .. } => assert_eq!(index, head.checkpoint.size),
        Sequenced::Duplicate { .. } => panic!("not a duplicate"),
    }
}
