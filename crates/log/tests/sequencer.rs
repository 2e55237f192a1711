//! The sequencer under failure: a panic while preparing a batch, and a failed commit, each
//! cost that batch only, and the entries in it can be appended again.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use signet_keys::{KeyError, Signer};
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
/// is set, a commit lands but reports that the connection broke, and so does the commit
/// numbered `lose_answer_of` (counting commits with entries from 1); while `land_late` is set,
/// a commit reports that the connection broke and lands only after the next read of the
/// checkpoint (a COMMIT delayed past the read-back); while `blind` is set, the latest
/// checkpoint cannot be read. `slow` makes each commit take 20 ms, so that batches are
/// prepared behind it; `skew` is added to each batch's integrated time as stored. A commit
/// with entries waits while the test holds `hold`, after it is counted in `commits`.
struct FlakyStorage {
    inner: SqliteStorage,
    fail: AtomicBool,
    lose_answer: AtomicBool,
    lose_answer_of: AtomicU64,
    land_late: AtomicBool,
    late: Mutex<Option<Batch>>,
    blind: AtomicBool,
    slow: AtomicBool,
    skew: AtomicI64,
    commits: AtomicU64,
    hold: Mutex<()>,
}

impl FlakyStorage {
    fn new(inner: SqliteStorage) -> FlakyStorage {
        FlakyStorage {
            inner,
            fail: AtomicBool::new(false),
            lose_answer: AtomicBool::new(false),
            lose_answer_of: AtomicU64::new(0),
            land_late: AtomicBool::new(false),
            late: Mutex::new(None),
            blind: AtomicBool::new(false),
            slow: AtomicBool::new(false),
            skew: AtomicI64::new(0),
            commits: AtomicU64::new(0),
            hold: Mutex::new(()),
        }
    }
}

impl Storage for FlakyStorage {
    fn commit(&self, batch: &Batch) -> Result<(), StorageError> {
        if batch.entries.is_empty() {
            return self.inner.commit(batch);
        }
        if self.slow.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.fail.load(Ordering::SeqCst) {
            return Err(StorageError::Backend("disk on fire".into()));
        }
        let n = self.commits.fetch_add(1, Ordering::SeqCst) + 1;
        drop(self.hold.lock().unwrap());
        let mut batch = batch.clone();
        batch.integrated_time += self.skew.load(Ordering::SeqCst);
        if self.land_late.load(Ordering::SeqCst) {
            *self.late.lock().unwrap() = Some(batch);
            return Err(StorageError::Unavailable("connection reset before COMMIT's answer".into()));
        }
        self.inner.commit(&batch)?;
        if self.lose_answer.load(Ordering::SeqCst) || self.lose_answer_of.load(Ordering::SeqCst) == n {
            return Err(StorageError::Unavailable("connection reset after COMMIT".into()));
        }
        Ok(())
    }
    fn freeze(&self, log: LogId) -> Result<u64, StorageError> {
        self.inner.freeze(log)
    }
    fn latest_checkpoint(&self, log: LogId) -> Result<Option<StoredCheckpoint>, StorageError> {
        if self.blind.load(Ordering::SeqCst) {
            return Err(StorageError::Unavailable("connection refused".into()));
        }
        let read = self.inner.latest_checkpoint(log);
        if let Some(late) = self.late.lock().unwrap().take() {
            self.inner.commit(&late).unwrap();
        }
        read
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
    fn find_public_key_async(&self, log: LogId, key: Vec<u8>, after: Option<u64>, limit: usize) -> signet_log::storage::ReadFuture<'_, Vec<u64>> {
        self.inner.find_public_key_async(log, key, after, limit)
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
    fn backfill_search_keys(&self, log: LogId, keys: &[signet_log::storage::Backfill]) -> Result<(), StorageError> {
        self.inner.backfill_search_keys(log, keys)
    }
    fn put_meta(&self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        self.inner.put_meta(key, value)
    }
}

fn config(stamper: Option<Arc<dyn Stamper>>) -> LogConfig {
    LogConfig {
        id: 1,
        origin: "test.example/log".into(),
        key_name: "test.example".into(),
        key: Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap()),
        batch: BatchPolicy { max_entries: 16, max_delay: Duration::from_millis(1) },
        stamper,
        max_pending: 0,
        tile_cache: signet_log::DEFAULT_TILE_CACHE,
        entry_cache: signet_log::DEFAULT_ENTRY_CACHE,
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

/// A full batch's SETs are signed on several threads (issue 46): each entry's SET is still
/// its own, over its body, time and index, and a panic on a helper thread costs that batch
/// only, as on the sequencer's own thread.
#[tokio::test]
async fn a_large_batchs_sets_are_each_signed_for_their_own_index() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap());
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let stamper = Arc::new(signet_log::rekor::v1::SetSigner::new(key.clone()));
    let cfg = LogConfig { batch: BatchPolicy { max_entries: 256, max_delay: Duration::from_millis(300) }, ..config(Some(stamper)) };
    let log = Log::open(cfg, storage).await.unwrap();

    let bodies: Vec<Vec<u8>> = (0..200).map(|i| format!("entry {i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
    let log_id = hex::encode(key.key_id());
    let mut sizes = std::collections::HashSet::new();
    for (body, answer) in refs.iter().zip(futures_join(&log, &refs).await) {
        let Ok(Sequenced::New { index, integrated_time, stamp: Some(set), checkpoint }) = answer else { panic!("expected a stamped entry, got {answer:?}") };
        sizes.insert(checkpoint.checkpoint.size);
        let payload = signet_log::rekor::v1::set_payload(body, integrated_time, &log_id, index);
        assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(key.spki_der(), &payload, &set), "entry {index}'s SET");
    }
    assert!(sizes.len() < 10, "the 200 entries came in a few large batches, not {} small ones", sizes.len());

    // A stamper that panics on a helper thread's share of a large batch.
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap());
    let cfg = LogConfig { batch: BatchPolicy { max_entries: 256, max_delay: Duration::from_millis(300) }, ..config(Some(Arc::new(PanickyStamper))) };
    let log = Log::open(cfg, storage).await.unwrap();
    // Last, so that on a machine with two or more cores it falls in a helper thread's share.
    let fine: Vec<Vec<u8>> = (0..199).map(|i| format!("fine {i}").into_bytes()).collect();
    let mut bodies: Vec<&[u8]> = fine.iter().map(|b| b.as_slice()).collect();
    bodies.push(b"boom");
    let answers = futures_join(&log, &bodies).await;
    assert!(answers.iter().any(|a| matches!(a, Err(AppendError::Aborted))), "the batch with the panic was aborted");
    assert!(answers.iter().all(|a| matches!(a, Err(AppendError::Aborted) | Ok(Sequenced::New { .. }))), "{answers:?}");
    let logged = answers.iter().filter(|a| a.is_ok()).count() as u64;
    assert_eq!(log.head().checkpoint.size, logged, "only the batches without the panic were logged");
    assert!(matches!(log.append(b"after".to_vec(), None).await, Ok(Sequenced::New { index, .. }) if index == logged));
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
    // Each batch's failure is reconciled: storage shows it did not land, and its waiters hear
    // the failure's own cause (the batches dropped behind it: a retry).
    assert!(failed.iter().all(|r| matches!(r, Err(AppendError::Storage(_) | AppendError::Unavailable(_)))), "{failed:?}");
    assert!(failed.iter().any(|r| matches!(r, Err(AppendError::Storage(e)) if e.contains("disk on fire"))), "{failed:?}");
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

/// Stamps each entry with its own index, so that a SET read back shows which index it was made for.
struct IndexStamper;

impl Stamper for IndexStamper {
    fn stamp(&self, index: u64, _time: i64, _body: &[u8]) -> Result<Vec<u8>, KeyError> {
        Ok(index.to_be_bytes().to_vec())
    }
}

/// The entry cache holds what was committed, never a batch that failed: after a failed
/// commit the same indices hold other entries, and every read, from memory or not, is what
/// storage holds. Reads of what was just logged come from memory.
#[tokio::test]
async fn reads_of_just_logged_entries_come_from_memory_and_are_what_storage_holds() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let log = Log::open(config(Some(Arc::new(IndexStamper))), storage.clone()).await.unwrap();
    log.append(b"first".to_vec(), None).await.unwrap();
    storage.fail.store(true, Ordering::SeqCst);
    assert!(futures_join(&log, &[b"a".as_slice(), b"b", b"c"]).await.iter().all(Result::is_err));
    storage.fail.store(false, Ordering::SeqCst);
    assert!(futures_join(&log, &[b"c".as_slice(), b"a", b"b"]).await.iter().all(Result::is_ok));
    assert_eq!(log.head().checkpoint.size, 4);

    let before = log.entry_cache_stats();
    assert_eq!((before.entries, before.hits, before.misses), (4, 0, 0), "the landed batches are kept, the failed one is not");
    for i in 0..4 {
        let stored = storage.inner.entry(1, i).unwrap().unwrap();
        assert_eq!(log.entry_async(i).await.unwrap().as_ref(), Some(&stored), "entry {i}");
        assert_eq!(log.entry(i).unwrap().as_ref(), Some(&stored), "entry {i}");
        assert_eq!(stored.stamp.as_deref(), Some(i.to_be_bytes().as_slice()));
        assert_eq!(log.entry_by_leaf(&stored.leaf_hash).await.unwrap(), Some(stored));
    }
    assert_eq!(log.entries_async(0, 4).await.unwrap(), storage.inner.entries(1, 0, 4).unwrap());
    let after = log.entry_cache_stats();
    assert_eq!((after.hits, after.misses), (13, 0), "every read was answered from memory");
    // Nothing past the head, whatever the cache holds.
    assert_eq!(log.entry_async(4).await.unwrap(), None);
}

/// A log opened on entries it did not commit keeps what reads bring from storage; with no
/// budget it keeps nothing and reads as before.
#[tokio::test]
async fn the_entry_cache_keeps_what_reads_bring_and_can_be_off() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap());
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let log = Log::open(LogConfig { key: key.clone(), ..config(None) }, storage.clone()).await.unwrap();
    futures_join(&log, &[b"x".as_slice(), b"y", b"z"]).await;
    drop(log);

    for (budget, hits) in [(signet_log::DEFAULT_ENTRY_CACHE, 2), (0, 0)] {
        let log = Log::open(LogConfig { key: key.clone(), entry_cache: budget, ..config(None) }, storage.clone()).await.unwrap();
        let first = log.entry_async(1).await.unwrap();
        assert_eq!(first, storage.entry(1, 1).unwrap());
        assert_eq!(log.entry_async(1).await.unwrap(), first);
        assert_eq!(log.entry_by_leaf(&first.unwrap().leaf_hash).await.unwrap().map(|e| e.index), Some(1));
        let s = log.entry_cache_stats();
        assert_eq!((s.hits, s.entries), (hits, hits as usize / 2), "budget {budget}");
        drop(log);
    }
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

/// The same, when the checkpoint cannot be read back either: the entry's request fails
/// after `ANSWER_WITHIN` (it may be retried, and is then a duplicate), nothing is committed
/// while storage is unreadable, and once it can be read the log adopts the batch that did
/// land, rather than stalling or forking.
#[tokio::test]
async fn a_lost_commit_that_cannot_be_checked_is_adopted_once_storage_answers() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let log = Log::open(config(None), storage.clone()).await.unwrap();
    storage.lose_answer.store(true, Ordering::SeqCst);
    storage.blind.store(true, Ordering::SeqCst);
    let started = std::time::Instant::now();
    assert!(matches!(log.append(b"landed".to_vec(), None).await, Err(AppendError::Unavailable(_))));
    assert!(started.elapsed() >= signet_log::reconcile::ANSWER_WITHIN);
    assert_eq!(log.head().checkpoint.size, 0);
    storage.lose_answer.store(false, Ordering::SeqCst);
    // While storage cannot be read, nothing is prepared or committed.
    assert!(matches!(log.append(b"meanwhile".to_vec(), None).await, Err(AppendError::Unavailable(_))));
    assert_eq!(storage.inner.latest_checkpoint(1).unwrap().unwrap().size, 1);
    storage.blind.store(false, Ordering::SeqCst);

    wait_for_size(&log, 1).await;
    assert!(matches!(log.append(b"landed".to_vec(), None).await.unwrap(), Sequenced::Duplicate { index: 0 }));
    assert!(matches!(log.append(b"second".to_vec(), None).await.unwrap(), Sequenced::New { index: 1, .. }));
    let (head, stored) = (log.head(), storage.inner.latest_checkpoint(1).unwrap().unwrap());
    assert_eq!((head.checkpoint.size, &head.note), (2, &stored.note));
    let proof = log.inclusion_proof(0, 2).unwrap();
    signet_core::merkle::verify_inclusion(&signet_log::merkle::leaf_hash(b"landed"), 0, 2, &proof, &log.root(2).unwrap()).unwrap();
}

/// Issue 41: a commit whose answer is lost while batches are already prepared behind it.
/// Those batches were built on a tree that storage may not have: they are dropped (503), the
/// tree is rebuilt from storage, and what is acknowledged is exactly what is stored, each
/// entry at its index with a proof that verifies, under one history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_with_batches_prepared_behind_it_forks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let cfg = LogConfig { batch: BatchPolicy { max_entries: 4, max_delay: Duration::from_millis(1) }, ..config(None) };
    let log = Log::open(cfg, storage.clone()).await.unwrap();
    storage.slow.store(true, Ordering::SeqCst);
    storage.lose_answer_of.store(3, Ordering::SeqCst);

    let bodies: Vec<Vec<u8>> = (0..64).map(|i| format!("entry {i}").into_bytes()).collect();
    let results = futures_join(&log, &bodies.iter().map(Vec::as_slice).collect::<Vec<_>>()).await;
    let mut acknowledged: Vec<(u64, &[u8])> = Vec::new();
    let mut retry = Vec::new();
    for (body, r) in bodies.iter().zip(&results) {
        match r {
            Ok(Sequenced::New { index, .. }) => acknowledged.push((*index, body)),
            Ok(other) => panic!("no entry was a duplicate, got {other:?}"),
            Err(e) => retry.push((body.as_slice(), e)),
        }
    }
    check_one_history(&log, &storage.inner, &acknowledged, true);
    assert!(!retry.is_empty(), "the batches behind the lost answer were dropped");
    assert!(retry.iter().all(|(_, e)| matches!(e, AppendError::Unavailable(_))), "a dropped entry is told to retry: {retry:?}");
    assert!(acknowledged.iter().any(|&(i, _)| (8..12).contains(&i)), "the batch whose answer was lost had landed and is acknowledged");
    let retry: Vec<&[u8]> = retry.into_iter().map(|(b, _)| b).collect();

    // The dropped entries go in on retry, on top of the same history.
    storage.slow.store(false, Ordering::SeqCst);
    for (body, r) in retry.iter().zip(futures_join(&log, &retry).await) {
        match r.unwrap() {
            Sequenced::New { index, .. } => acknowledged.push((index, body)),
            other => panic!("a retried entry is new, got {other:?}"),
        }
    }
    check_one_history(&log, &storage.inner, &acknowledged, true);
    assert_eq!(log.head().checkpoint.size, 64);
}

/// Issue 41: a COMMIT that lands after the read-back said it had not. The entry was answered
/// 503; the next commit conflicts with what landed, and the log adopts it instead of failing
/// every commit from then on.
#[tokio::test]
async fn a_commit_that_lands_after_its_read_back_is_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let log = Log::open(config(None), storage.clone()).await.unwrap();
    storage.land_late.store(true, Ordering::SeqCst);
    assert!(matches!(log.append(b"late".to_vec(), None).await, Err(AppendError::Unavailable(_))));
    storage.land_late.store(false, Ordering::SeqCst);
    assert_eq!(storage.inner.latest_checkpoint(1).unwrap().unwrap().size, 1, "the delayed COMMIT landed after the read-back");
    assert_eq!(log.head().checkpoint.size, 0);

    // This batch extends size 0 and conflicts; the log reconciles to what landed.
    assert!(matches!(log.append(b"after".to_vec(), None).await, Err(AppendError::Unavailable(_))));
    assert_eq!(log.head().checkpoint.size, 1);
    assert!(matches!(log.append(b"after".to_vec(), None).await.unwrap(), Sequenced::New { index: 1, .. }));
    assert!(matches!(log.append(b"late".to_vec(), None).await.unwrap(), Sequenced::Duplicate { index: 0 }));
    check_one_history(&log, &storage.inner, &[(0, b"late"), (1, b"after")], true);
}

/// Issue 41: integrated times never go backwards within a log, across a restart or takeover
/// by an instance whose clock is behind the one that wrote last.
#[tokio::test]
async fn integrated_time_never_goes_backwards_across_a_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let cfg = || LogConfig { key: key.clone(), ..config(None) };
    let log = Log::open(cfg(), storage.clone()).await.unwrap();
    // The last writer's clock was 15 minutes ahead of this one's.
    storage.skew.store(900, Ordering::SeqCst);
    log.append(b"ahead".to_vec(), None).await.unwrap();
    storage.skew.store(0, Ordering::SeqCst);
    let ahead = storage.inner.entry(1, 0).unwrap().unwrap().integrated_time;
    drop(log);

    let log = Log::open(cfg(), storage.clone()).await.unwrap();
    match log.append(b"next".to_vec(), None).await.unwrap() {
        Sequenced::New { index: 1, integrated_time, .. } => assert!(integrated_time >= ahead, "{integrated_time} < {ahead}"),
        other => panic!("expected a new entry, got {other:?}"),
    }
    assert!(storage.inner.entry(1, 1).unwrap().unwrap().integrated_time >= ahead);
}

/// Checks from outside that the log shows one history: the stored checkpoint is the log's
/// head; its root is the root of the stored entries (computed here, not by the log); each
/// acknowledged entry is stored at its index, once, with an inclusion proof that verifies;
/// and, if `exact`, nothing is stored that was not acknowledged.
fn check_one_history(log: &Log, storage: &SqliteStorage, acknowledged: &[(u64, &[u8])], exact: bool) {
    let head = log.head();
    let stored = storage.latest_checkpoint(1).unwrap().unwrap();
    assert_eq!((head.checkpoint.size, &head.note), (stored.size, &stored.note), "the head is the stored checkpoint");
    let entries = storage.entries(1, 0, stored.size).unwrap();
    assert_eq!(entries.len() as u64, stored.size);
    let leaves: Vec<[u8; 32]> = entries.iter().map(|e| signet_core::merkle::leaf_hash(&e.body)).collect();
    assert_eq!(tree_hash(&leaves), head.checkpoint.root_hash, "the checkpoint's root is the stored entries' root");
    let mut indices: Vec<u64> = acknowledged.iter().map(|a| a.0).collect();
    indices.sort();
    indices.dedup();
    assert_eq!(indices.len(), acknowledged.len(), "no index was acknowledged twice");
    for &(index, body) in acknowledged {
        assert_eq!(entries[index as usize].body, body, "entry {index} is the acknowledged one");
        let proof = log.inclusion_proof(index, stored.size).unwrap();
        signet_core::merkle::verify_inclusion(&leaves[index as usize], index, stored.size, &proof, &head.checkpoint.root_hash).unwrap();
    }
    if exact {
        assert_eq!(acknowledged.len() as u64, stored.size, "every stored entry was acknowledged");
    }
}

/// RFC 6962's Merkle tree hash, written out: the checker's own, not the log's.
fn tree_hash(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => signet_core::merkle::empty_root(),
        1 => leaves[0],
        n => {
            let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
            signet_core::merkle::node_hash(&tree_hash(&leaves[..k]), &tree_hash(&leaves[k..]))
        }
    }
}

/// The sequencer's task owns its tree, and readers see only what it published: while a
/// commit hangs, with its batch already on the tree, every read answers at once, from the
/// durable head and nothing past it. (When readers shared a lock with the writers, a read
/// waited for the whole commit.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_answer_from_the_durable_head_while_a_commit_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FlakyStorage::new(SqliteStorage::open(&dir.path().join("db.sqlite")).unwrap()));
    let log = Log::open(config(None), storage.clone()).await.unwrap();
    let bodies: Vec<Vec<u8>> = (0u32..300).map(|i| i.to_le_bytes().to_vec()).collect();
    let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
    assert!(futures_join(&log, &refs).await.iter().all(|r| r.is_ok()));
    assert_eq!(log.head().checkpoint.size, 300);

    let held = storage.hold.lock().unwrap();
    let before = storage.commits.load(Ordering::SeqCst);
    let hung = {
        let log = log.clone();
        tokio::spawn(async move { log.append(b"hung".to_vec(), None).await })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while storage.commits.load(Ordering::SeqCst) == before {
        assert!(std::time::Instant::now() < deadline, "the commit never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let reader = log.clone();
    let reads = std::thread::spawn(move || {
        let size = reader.head().checkpoint.size;
        let proof = reader.inclusion_proof(1, size).unwrap();
        let root = reader.root(size).unwrap();
        let leaf = reader.leaf_hash(1).unwrap().unwrap();
        signet_log::merkle::verify_inclusion(&leaf, 1, size, &proof, &root).unwrap();
        reader.consistency_proof(10, size).unwrap();
        reader.tile(0, 0, 256).unwrap().unwrap();
        assert!(reader.inclusion_proof(1, size + 1).is_err(), "a proof against a size that is not durable");
        size
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !reads.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let answered = reads.is_finished();
    drop(held);
    assert!(answered, "a read waited for the commit");
    assert_eq!(reads.join().unwrap(), 300);
    match hung.await.unwrap() {
        Ok(Sequenced::New { index, .. }) => assert_eq!(index, 300),
        other => panic!("the held append: {other:?}"),
    }
    assert_eq!(log.head().checkpoint.size, 301);
}

async fn wait_for_size(log: &Log, size: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while log.head().checkpoint.size < size {
        assert!(std::time::Instant::now() < deadline, "the log reached size {size}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
