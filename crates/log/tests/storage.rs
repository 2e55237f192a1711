//! The storage contract, one suite run against every backend (see `common::backends`): what
//! a commit makes durable, what a failed or conflicting one leaves behind (nothing), reads
//! at and past the ends, restarts, and schema versions.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::backends;
use signet_keys::Signer;
use signet_log::merkle;
use signet_log::storage::{Attestation, Batch, LeafTile, NewEntry, PostgresStorage, Queue, QueuedEntry, SqliteStorage, Storage, StorageError, StorageUrl, StoredCheckpoint, Tile};
use signet_log::tilecache::Expanded;
use signet_log::{BatchPolicy, Log, LogConfig, Sequenced};

fn entry(index: u64, body: &[u8]) -> NewEntry {
    NewEntry {
        index,
        leaf_hash: merkle::leaf_hash(body),
        digest: Some(format!("sha256:{:064x}", index % 2).into_bytes()),
        identity: identity(index),
        public_key: public_key(index),
        body: body.to_vec(),
        stamp: Some(vec![index as u8; 3]),
        integrated_time: None,
        attestation: None,
    }
}

const ALICE: &[u8] = b"email:alice@example.com";
const CI: &[u8] = b"uri:https://ci.example/workflow@refs/heads/main";

/// Entry `index`'s identity key: Alice, the CI workflow, or none (a bare key), in turn.
fn identity(index: u64) -> Option<Vec<u8>> {
    [Some(ALICE.to_vec()), Some(CI.to_vec()), None][index as usize % 3].clone()
}

/// The key index of one signer's key (see `signet_log::rekor::public_key_index`).
const KEY_A: &[u8] = b"sha256:5e4fd20f00c3d3d1d1a4ff5b5ee4e8b4e14cf0ab0be3e7e4f8e1b5a4e7e3b2c1";

/// Entry `index`'s signer key index: the one key on even entries, none on odd ones.
fn public_key(index: u64) -> Option<Vec<u8>> {
    (index % 2 == 0).then(|| KEY_A.to_vec())
}

/// Entries `start..end` of `log` with checkpoint note `note`.
fn batch(log: u8, start: u64, end: u64, time: i64) -> Batch {
    Batch {
        log,
        integrated_time: time,
        entries: (start..end).map(|i| entry(i, format!("log {log} entry {i}").as_bytes())).collect(),
        tiles: vec![],
        leaf_tiles: vec![],
        checkpoint: StoredCheckpoint { size: end, note: format!("log {log} at {end}\n") },
    }
}

#[test]
fn commits_read_back_per_log() {
    for b in backends() {
        let s = &b.storage;
        let mut first = batch(1, 0, 3, 1700);
        first.tiles = vec![Tile { level: 1, index: 0, hashes: vec![1; 96] }];
        s.commit(&first).unwrap();
        s.commit(&batch(2, 0, 1, 1800)).unwrap();
        let mut next = batch(1, 3, 5, 1900);
        next.tiles = vec![Tile { level: 1, index: 0, hashes: vec![2; 160] }, Tile { level: 2, index: 0, hashes: vec![3; 32] }];
        next.leaf_tiles = vec![LeafTile { index: 0, nodes: vec![4; 16_320] }, LeafTile { index: 1, nodes: vec![5; 16_320] }];
        s.commit(&next).unwrap();

        assert_eq!(s.latest_checkpoint(1).unwrap().unwrap(), StoredCheckpoint { size: 5, note: "log 1 at 5\n".into() }, "{}", b.name);
        assert_eq!(s.latest_checkpoint(2).unwrap().unwrap().size, 1, "{}", b.name);
        assert_eq!(s.latest_checkpoint(3).unwrap(), None, "{}", b.name);

        let e = s.entry(1, 1).unwrap().unwrap();
        assert_eq!((e.index, e.body.as_slice(), e.integrated_time), (1, &b"log 1 entry 1"[..], 1700), "{}", b.name);
        assert_eq!(e.leaf_hash, merkle::leaf_hash(b"log 1 entry 1"));
        assert_eq!(e.stamp.as_deref(), Some(&[1u8, 1, 1][..]));
        assert_eq!(s.entry(1, 4).unwrap().unwrap().integrated_time, 1900, "{}", b.name);

        let all = s.entries(1, 0, 100).unwrap();
        assert_eq!(all.iter().map(|e| e.index).collect::<Vec<_>>(), [0, 1, 2, 3, 4], "{}", b.name);
        assert_eq!(s.entries(1, 2, 2).unwrap().iter().map(|e| e.index).collect::<Vec<_>>(), [2, 3], "{}", b.name);
        assert_eq!(s.entries(2, 0, 10).unwrap().len(), 1, "{}", b.name);

        let keys = s.keys(1, 0, 10).unwrap();
        assert_eq!(keys.len(), 5, "{}", b.name);
        assert_eq!(keys[2].leaf_hash, merkle::leaf_hash(b"log 1 entry 2"));
        assert_eq!(keys[1].digest.as_deref(), Some(format!("sha256:{:064x}", 1).as_bytes()), "{}", b.name);

        // A later commit replaces a partial tile; tiles come back in index order per level.
        assert_eq!(s.tiles(1, 1).unwrap(), vec![Tile { level: 1, index: 0, hashes: vec![2; 160] }], "{}", b.name);
        assert_eq!(s.tiles(1, 2).unwrap().len(), 1, "{}", b.name);
        assert!(s.tiles(2, 1).unwrap().is_empty(), "{}", b.name);

        // Leaf tiles per log and index; absent ones (and any past the end) are None.
        assert_eq!(s.leaf_tile(1, 1).unwrap(), Some(vec![5; 16_320]), "{}", b.name);
        assert_eq!(s.leaf_tile(1, 0).unwrap(), Some(vec![4; 16_320]), "{}", b.name);
        assert_eq!(s.leaf_tile(1, 2).unwrap(), None, "{}", b.name);
        assert_eq!(s.leaf_tile(2, 0).unwrap(), None, "{}", b.name);
        assert_eq!(s.leaf_tile(1, u64::MAX).unwrap(), None, "{}", b.name);
    }
}

#[test]
fn reads_past_the_end_are_empty_not_errors() {
    for b in backends() {
        let s = &b.storage;
        s.commit(&batch(1, 0, 2, 1)).unwrap();
        assert_eq!(s.entry(1, 2).unwrap(), None, "{}", b.name);
        assert_eq!(s.entry(1, u64::MAX).unwrap(), None, "{}", b.name);
        assert_eq!(s.entry(1, 1 << 48).unwrap(), None, "{}", b.name);
        assert!(s.entries(1, u64::MAX - 1, u64::MAX).unwrap().is_empty(), "{}", b.name);
        assert!(s.entries(1, 5, 10).unwrap().is_empty(), "{}", b.name);
        assert!(s.keys(1, u64::MAX, 10).unwrap().is_empty(), "{}", b.name);
        assert_eq!(s.entries(1, 1, u64::MAX).unwrap().len(), 1, "{}", b.name);
    }
}

#[test]
fn receipts_are_the_time_and_stamp_of_the_entries_that_exist() {
    for b in backends() {
        let s = &b.storage;
        s.commit(&batch(1, 0, 3, 1700)).unwrap();
        s.commit(&batch(1, 3, 4, 1800)).unwrap();
        let mut got = s.receipts(1, &[3, 0, 9]).unwrap();
        got.sort();
        assert_eq!(got, vec![(0, 1700, Some(vec![0; 3])), (3, 1800, Some(vec![3; 3]))], "{}", b.name);
        assert!(s.receipts(2, &[0]).unwrap().is_empty(), "{}", b.name);
    }
}

/// Dedupe and search go to storage: every committed entry is found from the moment its
/// commit returns, by leaf hash and by digest, per log, in pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaves_and_digests_are_found_from_the_commit_on() {
    for b in backends() {
        let s = b.storage.clone();
        let leaf = |log: u8, i: u64| merkle::leaf_hash(format!("log {log} entry {i}").as_bytes());
        let d = |n: u64| format!("sha256:{n:064x}").into_bytes();
        tokio::task::spawn_blocking({
            let s = s.clone();
            move || {
                s.commit(&batch(1, 0, 3, 1700)).unwrap();
                s.commit(&batch(1, 3, 7, 1800)).unwrap();
                s.commit(&batch(2, 0, 2, 1800)).unwrap();
            }
        })
        .await
        .unwrap();
        let wanted = vec![leaf(1, 5), [9; 32], leaf(1, 0), leaf(2, 1)];
        let mut found = s.find_leaves_async(1, wanted.clone()).await.unwrap();
        found.sort();
        assert_eq!(found, vec![(0, 5), (2, 0)], "{}: log 2's entry is not log 1's", b.name);
        let blocking = { let s = s.clone(); tokio::task::spawn_blocking(move || s.find_leaves(1, &wanted).unwrap()) }.await.unwrap();
        assert_eq!(blocking.len(), 2, "{}", b.name);
        assert!(s.find_leaves_async(1, vec![]).await.unwrap().is_empty(), "{}", b.name);
        // The read of an entry by UUID: found and read in one.
        let e = s.entry_by_leaf_async(1, leaf(1, 5)).await.unwrap().expect("entry 5 by its leaf hash");
        assert_eq!((e.index, e.leaf_hash, e.integrated_time), (5, leaf(1, 5), 1800), "{}", b.name);
        assert!(s.entry_by_leaf_async(2, leaf(1, 5)).await.unwrap().is_none(), "{}: log 1's entry is not log 2's", b.name);
        assert!(s.entry_by_leaf_async(1, [9; 32]).await.unwrap().is_none(), "{}", b.name);

        // Even indices have digest 0, odd ones digest 1.
        assert_eq!(s.find_digest_async(1, d(0), None, 10).await.unwrap(), [0, 2, 4, 6], "{}", b.name);
        assert_eq!(s.find_digest_async(1, d(1), None, 2).await.unwrap(), [1, 3], "{}", b.name);
        assert_eq!(s.find_digest_async(1, d(1), Some(3), 10).await.unwrap(), [5], "{}", b.name);
        assert_eq!(s.find_digest_async(2, d(1), None, 10).await.unwrap(), [1], "{}", b.name);
        assert!(s.find_digest_async(1, d(7), None, 10).await.unwrap().is_empty(), "{}", b.name);
        // And after a restart, from the backend's own index.
        drop(s);
        let s = b.reopen();
        assert_eq!(s.find_digest_async(1, d(0), Some(0), 10).await.unwrap(), [2, 4, 6], "{}", b.name);
        let found = { let s = s.clone(); tokio::task::spawn_blocking(move || s.find_leaves(1, &[leaf(1, 6)]).unwrap()) }.await.unwrap();
        assert_eq!(found, [(0, 6)], "{}", b.name);
    }
}

#[test]
fn optional_columns_and_large_bodies_round_trip() {
    for b in backends() {
        let big = vec![0xa5u8; 65_535];
        let mut e = entry(0, &big);
        (e.digest, e.stamp) = (None, None);
        let batch = Batch {
            log: 7,
            integrated_time: -1,
            entries: vec![e],
            tiles: vec![],
            leaf_tiles: vec![],
            checkpoint: StoredCheckpoint { size: 1, note: "ünïcode note — 1\n".into() },
        };
        b.storage.commit(&batch).unwrap();
        let got = b.storage.entry(7, 0).unwrap().unwrap();
        assert_eq!((got.body.len(), got.stamp, got.integrated_time), (65_535, None, -1), "{}", b.name);
        assert_eq!(b.storage.keys(7, 0, 1).unwrap()[0].digest, None, "{}", b.name);
        assert_eq!(b.storage.latest_checkpoint(7).unwrap().unwrap().note, "ünïcode note — 1\n", "{}", b.name);
    }
}

/// The number of rows `sql` (a `SELECT count(*)`) counts in `b`'s store.
fn count(b: &common::Backend, sql: &str) -> i64 {
    match &b.url {
        StorageUrl::Sqlite(path) => rusqlite::Connection::open(path).unwrap().query_row(sql, [], |r| r.get(0)).unwrap(),
        StorageUrl::Postgres(url) => common::psql_i64(url, sql),
    }
}

/// An attestation is stored once however many entries name it, read with each of them by
/// every entry read, and written in its batch's transaction or not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attestations_are_kept_once_and_read_with_their_entries() {
    for b in backends() {
        let s = &b.storage;
        let (a, other) = (Attestation::new(b"statement a".to_vec()), Attestation::new(vec![7; 100 * 1024]));
        let mut first = batch(1, 0, 4, 1);
        first.entries[0].attestation = Some(a.clone());
        first.entries[1].attestation = Some(a.clone());
        first.entries[2].attestation = Some(other.clone());
        s.commit(&first).unwrap();
        let mut next = batch(1, 4, 5, 2);
        next.entries[0].attestation = Some(a.clone());
        s.commit(&next).unwrap();

        let expected = [Some(&a.data), Some(&a.data), Some(&other.data), None, Some(&a.data)];
        let all = s.entries(1, 0, 10).unwrap();
        assert_eq!(all.iter().map(|e| e.attestation.as_ref()).collect::<Vec<_>>(), expected, "{}", b.name);
        assert_eq!(s.entries_async(1, 0, 10).await.unwrap(), all, "{}", b.name);
        for (i, e) in all.iter().enumerate() {
            assert_eq!(s.entry(1, i as u64).unwrap().as_ref(), Some(e), "{}", b.name);
            assert_eq!(s.entry_by_leaf_async(1, e.leaf_hash).await.unwrap().as_ref(), Some(e), "{}", b.name);
        }
        assert_eq!(count(&b, "SELECT count(*) FROM attestations"), 2, "{}: one row per content", b.name);

        // A batch that fails writes no attestation either.
        let mut bad = batch(1, 5, 6, 3);
        bad.entries[0].attestation = Some(Attestation::new(b"statement c".to_vec()));
        bad.entries.push(entry(0, b"a repeat of index 0"));
        bad.checkpoint.size = 7;
        assert!(s.commit(&bad).is_err(), "{}", b.name);
        assert_eq!(count(&b, "SELECT count(*) FROM attestations"), 2, "{}", b.name);
    }
}

#[test]
fn a_failed_batch_leaves_nothing_behind() {
    for b in backends() {
        let s = &b.storage;
        s.commit(&batch(1, 0, 1, 1)).unwrap();
        // Index 1 is new but index 0 repeats: the primary key refuses it, and the batch rolls back whole.
        let mut bad = batch(1, 1, 2, 2);
        bad.entries.push(entry(0, b"dup"));
        bad.checkpoint.size = 3;
        bad.tiles = vec![Tile { level: 1, index: 0, hashes: vec![9; 32] }];
        assert!(s.commit(&bad).is_err(), "{}", b.name);
        assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().size, 1, "{}", b.name);
        assert_eq!(s.entry(1, 1).unwrap(), None, "{}", b.name);
        assert!(s.tiles(1, 1).unwrap().is_empty(), "{}", b.name);
        // The store goes on: the right next batch commits.
        s.commit(&batch(1, 1, 3, 3)).unwrap();
        assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().size, 3, "{}", b.name);
    }
}

/// The fence: a writer whose view of the log is stale (a paused sequencer, or one whose
/// earlier commit landed although its answer was lost) can write nothing.
#[test]
fn a_checkpoint_moves_only_from_the_size_its_batch_extends() {
    for b in backends() {
        let s = &b.storage;
        s.commit(&batch(1, 0, 4, 1)).unwrap();
        // Another writer built on size 2: its entries 2..4 collide, but the checkpoint check
        // must refuse it even where the entries would not (a batch of none, say).
        let stale = Batch { entries: vec![], ..batch(1, 2, 2, 2) };
        match s.commit(&stale) {
            Err(StorageError::Conflict { log: 1, expected: 2, stored: 4 }) => {}
            other => panic!("{}: a stale checkpoint was not refused: {other:?}", b.name),
        }
        let ahead = Batch { entries: vec![entry(9, b"x")], ..batch(1, 9, 10, 2) };
        assert!(matches!(s.commit(&ahead), Err(StorageError::Conflict { expected: 9, stored: 4, .. })), "{}", b.name);
        assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().note, "log 1 at 4\n", "{}", b.name);
        assert_eq!(s.entry(1, 9).unwrap(), None, "{}", b.name);
        s.commit(&batch(1, 4, 6, 3)).unwrap();
    }
}

#[test]
fn meta_is_set_once() {
    for b in backends() {
        assert_eq!(b.storage.meta("tree").unwrap(), None, "{}", b.name);
        assert_eq!(b.storage.get_or_init_meta("tree", b"x").unwrap(), b"x", "{}", b.name);
        assert_eq!(b.storage.get_or_init_meta("tree", b"y").unwrap(), b"x", "{}", b.name);
        assert_eq!(b.storage.meta("tree").unwrap().as_deref(), Some(&b"x"[..]), "{}", b.name);
        assert_eq!(b.reopen().get_or_init_meta("tree", b"z").unwrap(), b"x", "{}", b.name);
        assert_eq!(b.reopen().meta("tree").unwrap().as_deref(), Some(&b"x"[..]), "{}", b.name);
        assert_eq!(b.storage.meta("other").unwrap(), None, "{}", b.name);
    }
}

#[test]
fn what_was_committed_survives_a_reopen() {
    for b in backends() {
        b.storage.commit(&batch(1, 0, 10, 5)).unwrap();
        drop(b.storage.clone());
        let again = b.reopen();
        assert_eq!(again.latest_checkpoint(1).unwrap().unwrap().size, 10, "{}", b.name);
        assert_eq!(again.entries(1, 0, 10).unwrap().len(), 10, "{}", b.name);
        // And it takes the next batch: reopening ran the migrations again, harmlessly.
        again.commit(&batch(1, 10, 11, 6)).unwrap();
    }
}

#[test]
fn a_schema_newer_than_this_build_is_refused() {
    for b in backends() {
        match &b.url {
            StorageUrl::Sqlite(path) => {
                let c = rusqlite::Connection::open(path).unwrap();
                c.execute_batch("PRAGMA user_version = 999").unwrap();
            }
            StorageUrl::Postgres(url) => common::psql(url, "INSERT INTO signet_schema(version, name) VALUES (999, 'future')"),
        }
        let err = signet_log::storage::open(&b.url).err().expect("a newer schema is refused");
        assert!(err.to_string().contains("version 999, newer than this signet"), "{}: {err}", b.name);
    }
}

#[test]
fn reads_during_commits_see_whole_batches() {
    for b in backends() {
        let s = b.storage.clone();
        let writer = {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    s.commit(&batch(1, i * 4, i * 4 + 4, i as i64)).unwrap();
                }
            })
        };
        let mut seen = 0;
        while !writer.is_finished() || seen < 200 {
            let Some(cp) = s.latest_checkpoint(1).unwrap() else { continue };
            // Everything the checkpoint covers is readable, whole.
            let entries = s.entries(1, 0, cp.size).unwrap();
            assert!(entries.len() as u64 >= cp.size, "{}: checkpoint {} but {} entries", b.name, cp.size, entries.len());
            assert_eq!(entries.len() % 4, 0, "{}: a batch was seen in part", b.name);
            seen = cp.size;
        }
        writer.join().unwrap();
    }
}

/// The log engine over each backend: appends, a restart that rebuilds the tree from
/// storage, and proofs that agree before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_rebuilds_from_each_backend() {
    for b in backends() {
        let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
        let cfg = || LogConfig {
            id: 1,
            origin: "test.example/log".into(),
            key_name: "test.example".into(),
            key: key.clone(),
            batch: BatchPolicy { max_entries: 32, max_delay: Duration::from_millis(2) },
            stamper: None,
            max_pending: 0,
            tile_cache: signet_log::DEFAULT_TILE_CACHE,
            entry_cache: signet_log::DEFAULT_ENTRY_CACHE,
            note_key: None,
            genesis: None,
        };
        let log = Log::open(cfg(), b.storage.clone()).await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..300u32 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move { log.append(format!("entry {i}").into_bytes(), None).await }));
        }
        for t in tasks {
            assert!(matches!(t.await.unwrap().unwrap(), Sequenced::New { .. }), "{}", b.name);
        }
        assert!(matches!(log.append(b"entry 7".to_vec(), None).await.unwrap(), Sequenced::Duplicate { .. }), "{}", b.name);
        let head = log.head();
        assert_eq!(head.checkpoint.size, 300, "{}", b.name);
        let proof = log.inclusion_proof(123, 300).unwrap();
        drop(log);

        // The full leaf tile went into storage with its inner levels; the partial one did not.
        let leaves: Vec<[u8; 32]> = b.storage.keys(1, 0, 256).unwrap().into_iter().map(|k| k.leaf_hash).collect();
        let expected = Expanded::new(leaves).unwrap().to_bytes();
        assert_eq!(b.storage.leaf_tile(1, 0).unwrap(), Some(expected), "{}", b.name);
        assert_eq!(b.storage.leaf_tile(1, 1).unwrap(), None, "{}", b.name);

        let reopened = Log::open(cfg(), b.reopen()).await.unwrap();
        assert_eq!(reopened.head().note, head.note, "{}", b.name);
        assert_eq!(reopened.inclusion_proof(123, 300).unwrap(), proof, "{}", b.name);
        let index = reopened.find_leaf(&merkle::leaf_hash(b"entry 299")).await.unwrap().unwrap();
        assert_eq!(reopened.entry(index).unwrap().unwrap().body, b"entry 299", "{}", b.name);
        assert!(matches!(reopened.append(b"entry 300".to_vec(), None).await.unwrap(), Sequenced::New { index: 300, .. }));
    }
}

/// The async reads return what the blocking ones do, on every backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_reads_agree_with_blocking_reads() {
    for b in backends() {
        let s = b.storage.clone();
        tokio::task::spawn_blocking({
            let s = s.clone();
            move || s.commit(&batch(1, 0, 6, 9)).unwrap()
        })
        .await
        .unwrap();
        let blocking = { let s = s.clone(); tokio::task::spawn_blocking(move || (s.entry(1, 3).unwrap(), s.entries(1, 1, 4).unwrap())) }.await.unwrap();
        assert_eq!(s.entry_async(1, 3).await.unwrap(), blocking.0, "{}", b.name);
        assert_eq!(s.entries_async(1, 1, 4).await.unwrap(), blocking.1, "{}", b.name);
        assert_eq!(s.entry_async(1, 6).await.unwrap(), None, "{}", b.name);
        assert_eq!(s.entry_async(1, u64::MAX).await.unwrap(), None, "{}", b.name);
        assert!(s.entries_async(1, 6, 10).await.unwrap().is_empty(), "{}", b.name);
    }
}

/// PostgreSQL's sequencer lease: one holder at a time, a takeover only after expiry, and a
/// holder that was taken over writes nothing and learns it at its next renewal.
#[test]
fn a_taken_over_lease_fences_the_old_holder() {
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let a = signet_log::storage::PostgresStorage::open(&db).unwrap();
    let b = signet_log::storage::PostgresStorage::open(&db).unwrap();
    let la = a.acquire_lease("a", Duration::from_millis(300)).unwrap().expect("a free lease is taken");
    assert_eq!(la.epoch, 1);
    assert_eq!(b.acquire_lease("b", Duration::from_secs(5)).unwrap(), None, "a held lease is not taken");
    a.commit(&batch(1, 0, 2, 1)).unwrap();
    assert!(a.renew_lease(&la, Duration::from_millis(300)).unwrap());

    std::thread::sleep(Duration::from_millis(400));
    let lb = b.acquire_lease("b", Duration::from_secs(5)).unwrap().expect("an expired lease is taken over");
    assert_eq!(lb.epoch, 2);
    match a.commit(&batch(1, 2, 3, 2)) {
        Err(StorageError::Fenced(why)) => assert!(why.contains("b (epoch 2)"), "{why}"),
        other => panic!("the old holder's commit was not fenced: {other:?}"),
    }
    assert!(!a.renew_lease(&la, Duration::from_secs(5)).unwrap(), "the old holder renewed a lease it lost");
    b.commit(&batch(1, 2, 3, 3)).unwrap();
    assert_eq!(b.latest_checkpoint(1).unwrap().unwrap().size, 3);
    assert_eq!(a.lease_holder().unwrap().as_deref(), Some("b"));
}

/// A storage future, waited for from a test's thread.
fn block<T: Send + 'static>(f: impl std::future::Future<Output = T> + Send + 'static) -> T {
    signet_db::runtime::block(f).unwrap()
}

/// The shared TUF repository's table: a write is one new generation holding all its files,
/// read back whole or from a generation on; only the lease holder writes, a stale epoch or a
/// stale generation writes nothing, and a published version never changes its bytes.
#[test]
fn tuf_files_are_written_whole_by_the_lease_holder_only() {
    use signet_log::storage::TufFile;
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let a = signet_log::storage::PostgresStorage::open(&db).unwrap();
    let b = signet_log::storage::PostgresStorage::open(&db).unwrap();
    let file = |name: &str, bytes: &[u8]| TufFile { name: name.into(), bytes: bytes.to_vec() };
    assert_eq!(block(a.tuf_generation()).unwrap(), 0);
    assert_eq!(block(a.tuf_files_since(0)).unwrap(), (0, vec![]));
    // Without the lease, nothing is written.
    match block(a.write_tuf_files(0, &[file("1.root.json", b"r1")])) {
        Err(StorageError::Fenced(why)) => assert!(why.contains("does not hold the sequencer lease"), "{why}"),
        other => panic!("a write without the lease was not refused: {other:?}"),
    }

    let la = a.acquire_lease("a", Duration::from_millis(300)).unwrap().unwrap();
    let first = [file("1.root.json", b"r1"), file("1.snapshot.json", b"s1"), file("timestamp.json", b"t1"), file("targets/ab.trusted_root.json", b"x")];
    assert_eq!(block(a.write_tuf_files(0, &first)).unwrap(), 1);
    let (generation, mut read) = block(b.tuf_files_since(0)).unwrap();
    read.sort_by(|x, y| x.name.cmp(&y.name));
    let mut want = first.to_vec();
    want.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!((generation, read), (1, want));
    // A stale generation (a writer that did not read the last write) writes nothing.
    assert!(matches!(block(a.write_tuf_files(0, &[file("timestamp.json", b"t-stale")])), Err(StorageError::Fenced(_))));
    // The timestamp is replaced; a version already published is never given other bytes.
    assert_eq!(block(a.write_tuf_files(1, &[file("2.snapshot.json", b"s2"), file("timestamp.json", b"t2"), file("1.root.json", b"r1")])).unwrap(), 2);
    match block(a.write_tuf_files(2, &[file("1.snapshot.json", b"other"), file("timestamp.json", b"t3")])) {
        Err(StorageError::Corrupt(why)) => assert!(why.contains("1.snapshot.json"), "{why}"),
        other => panic!("a published version was rewritten: {other:?}"),
    }
    // A reader at generation 1 gets only what generation 2 changed.
    let (generation, mut since) = block(b.tuf_files_since(1)).unwrap();
    since.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!((generation, since), (2, vec![file("2.snapshot.json", b"s2"), file("timestamp.json", b"t2")]));
    assert_eq!(block(b.tuf_generation()).unwrap(), 2, "the refused writes left nothing");

    // After a takeover, the old holder's write is fenced by its epoch; the new holder's lands.
    drop(la);
    std::thread::sleep(Duration::from_millis(400));
    let lb = b.acquire_lease("b", Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(lb.epoch, 2);
    match block(a.write_tuf_files(2, &[file("3.snapshot.json", b"s3-old"), file("timestamp.json", b"t3-old")])) {
        Err(StorageError::Fenced(why)) => assert!(why.contains("b (epoch 2)"), "{why}"),
        other => panic!("the old holder's TUF write was not fenced: {other:?}"),
    }
    assert_eq!(block(b.write_tuf_files(2, &[file("3.snapshot.json", b"s3"), file("timestamp.json", b"t3")])).unwrap(), 3);
    let (_, all) = block(a.tuf_files_since(0)).unwrap();
    assert_eq!(all.iter().find(|f| f.name == "timestamp.json").unwrap().bytes, b"t3");
    assert_eq!(all.iter().find(|f| f.name == "3.snapshot.json").unwrap().bytes, b"s3");
}

/// Search by signing identity: every committed entry with that identity key, from the
/// commit on, per log, oldest first, in pages that read at most what they return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_are_found_in_pages_from_the_commit_on() {
    for b in backends() {
        let s = b.storage.clone();
        tokio::task::spawn_blocking({
            let s = s.clone();
            move || {
                s.commit(&batch(1, 0, 4, 1700)).unwrap();
                s.commit(&batch(1, 4, 10, 1800)).unwrap();
                s.commit(&batch(2, 0, 2, 1800)).unwrap();
            }
        })
        .await
        .unwrap();
        let find = |who: &[u8], after, limit| s.find_identity_async(1, who.to_vec(), after, limit);
        assert_eq!(find(ALICE, None, 10).await.unwrap(), [0, 3, 6, 9], "{}", b.name);
        assert_eq!(find(CI, None, 10).await.unwrap(), [1, 4, 7], "{}", b.name);
        // A page is at most `limit`, and the next one starts after its last.
        assert_eq!(find(ALICE, None, 2).await.unwrap(), [0, 3], "{}", b.name);
        assert_eq!(find(ALICE, Some(3), 2).await.unwrap(), [6, 9], "{}", b.name);
        assert!(find(ALICE, Some(9), 2).await.unwrap().is_empty(), "{}", b.name);
        assert!(find(b"email:mallory@example.com", None, 10).await.unwrap().is_empty(), "{}", b.name);
        assert!(find(b"email:ALICE@example.com", None, 10).await.unwrap().is_empty(), "{}: keys match exactly", b.name);
        assert_eq!(s.find_identity_async(2, ALICE.to_vec(), None, 10).await.unwrap(), [0], "{}: per log", b.name);
        // The identity is a key of its own: it is not a digest, nor a digest an identity.
        assert!(s.find_digest_async(1, ALICE.to_vec(), None, 10).await.unwrap().is_empty(), "{}", b.name);
        assert!(find(format!("sha256:{:064x}", 0).as_bytes(), None, 10).await.unwrap().is_empty(), "{}", b.name);
        let keys = { let s = s.clone(); tokio::task::spawn_blocking(move || s.keys(1, 0, 3).unwrap()) }.await.unwrap();
        assert_eq!(keys.iter().map(|k| k.identity.clone()).collect::<Vec<_>>(), [identity(0), identity(1), identity(2)], "{}", b.name);
        assert_eq!(keys.iter().map(|k| k.public_key.clone()).collect::<Vec<_>>(), [public_key(0), public_key(1), public_key(2)], "{}", b.name);
        // The signer's key, likewise: an index of its own, paged the same way.
        let by_key = |after, limit| s.find_public_key_async(1, KEY_A.to_vec(), after, limit);
        assert_eq!(by_key(None, 10).await.unwrap(), [0, 2, 4, 6, 8], "{}", b.name);
        assert_eq!(by_key(Some(4), 2).await.unwrap(), [6, 8], "{}", b.name);
        assert!(s.find_identity_async(1, KEY_A.to_vec(), None, 10).await.unwrap().is_empty(), "{}", b.name);
        assert!(s.find_public_key_async(1, ALICE.to_vec(), None, 10).await.unwrap().is_empty(), "{}", b.name);

        // And after a restart, from the backend's own index.
        drop(s);
        let s = b.reopen();
        assert_eq!(s.find_identity_async(1, CI.to_vec(), Some(1), 10).await.unwrap(), [4, 7], "{}", b.name);
        assert_eq!(s.find_public_key_async(1, KEY_A.to_vec(), Some(5), 10).await.unwrap(), [6, 8], "{}", b.name);
    }
}

/// The log pages a search by identity as it pages one by digest: `limit` at a time, and
/// `next_after` until the last page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_pages_a_search_by_identity() {
    for b in backends() {
        let log = common::open_log(b.storage.clone()).await;
        for i in 0..7u64 {
            log.append_searchable(format!("entry {i}").into_bytes(), None, identity(i), public_key(i), None).await.unwrap();
        }
        let mut pages = Vec::new();
        let mut after = None;
        loop {
            let page = log.indices_by_identity(ALICE, after, 2).await.unwrap();
            pages.push(page.indices.clone());
            match page.next_after {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(pages, [vec![0, 3], vec![6]], "{}", b.name);
        assert!(log.indices_by_identity(b"uri:nobody", None, 2).await.unwrap().indices.is_empty(), "{}", b.name);
        let page = log.indices_by_public_key(KEY_A, Some(2), 2).await.unwrap();
        assert_eq!((page.indices, page.next_after), (vec![4, 6], None), "{}", b.name);
    }
}

/// A store of the schema before identities (and signers' keys) upgrades at open: the entries
/// it holds stay searchable by digest and have neither; entries committed after have both.
#[test]
fn a_store_from_before_identities_upgrades() {
    // Some(true): by digest; Some(false): by identity; None: by key.
    let search = |s: &Arc<dyn Storage>, digest: Option<bool>, value: &[u8]| {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(match digest {
            Some(true) => s.find_digest_async(1, value.to_vec(), None, 100),
            Some(false) => s.find_identity_async(1, value.to_vec(), None, 100),
            None => s.find_public_key_async(1, value.to_vec(), None, 100),
        })
        .unwrap()
    };
    for b in backends() {
        b.storage.commit(&batch(1, 0, 3, 1)).unwrap();
        drop(b.storage.clone());
        // Back to the schema before both: no identity or key columns, no such indexes.
        let applied = match &b.url {
            StorageUrl::Sqlite(path) => {
                let c = rusqlite::Connection::open(path).unwrap();
                // Version 2 had no attestations either.
                c.execute_batch(
                    "ALTER TABLE entry_keys DROP COLUMN identity; ALTER TABLE entry_keys DROP COLUMN public_key; \
                     ALTER TABLE entry_bodies DROP COLUMN attestation; DROP TABLE attestations; PRAGMA user_version = 2;",
                )
                .unwrap();
                let index = rusqlite::Connection::open(format!("{}.keys", path.display())).unwrap();
                index.execute_batch("DROP TABLE identities; DROP TABLE public_keys").unwrap();
                drop((c, index));
                SqliteStorage::open(path).unwrap().applied_migrations.clone()
            }
            StorageUrl::Postgres(url) => {
                common::psql(
                    url,
                    "ALTER TABLE entries DROP COLUMN identity, DROP COLUMN public_key; ALTER TABLE queue DROP COLUMN identity, DROP COLUMN public_key; \
                     DELETE FROM signet_schema WHERE version IN (8, 12);",
                );
                PostgresStorage::open(url).unwrap().applied_migrations.clone()
            }
        };
        assert_eq!(applied, match b.url { StorageUrl::Sqlite(_) => vec![3, 4, 5], StorageUrl::Postgres(_) => vec![8, 12] }, "{}", b.name);
        let s = b.reopen();
        assert_eq!(s.keys(1, 0, 3).unwrap().iter().map(|k| k.identity.clone()).collect::<Vec<_>>(), [None, None, None], "{}", b.name);
        assert_eq!(s.keys(1, 0, 3).unwrap().iter().map(|k| k.public_key.clone()).collect::<Vec<_>>(), [None, None, None], "{}", b.name);
        assert_eq!(search(&s, Some(true), format!("sha256:{:064x}", 0).as_bytes()), [0, 2], "{}: old entries by digest", b.name);
        assert!(search(&s, Some(false), ALICE).is_empty(), "{}: old entries have no identity", b.name);
        assert!(search(&s, None, KEY_A).is_empty(), "{}: old entries have no key", b.name);
        s.commit(&batch(1, 3, 7, 2)).unwrap();
        assert_eq!(search(&s, Some(false), ALICE), [3, 6], "{}: new entries by identity", b.name);
        assert_eq!(search(&s, None, KEY_A), [4, 6], "{}: new entries by key", b.name);
    }
}

/// Entries queued by an instance that does not sequence keep their identity and attestation
/// for the one that does.
#[test]
fn the_queue_keeps_the_identity_and_the_attestation() {
    let Some(server) = common::postgres_url() else { return };
    let q = PostgresStorage::open(&common::fresh_database(&server)).unwrap();
    let queued = |body: &[u8], identity: Option<&[u8]>| QueuedEntry {
        leaf_hash: merkle::leaf_hash(body),
        digest: None,
        identity: identity.map(<[u8]>::to_vec),
        public_key: identity.map(|_| KEY_A.to_vec()),
        body: body.to_vec(),
        extra: None,
        attestation: identity.map(|_| Attestation::new(b"statement".to_vec())),
    };
    let sent = vec![queued(b"a", Some(ALICE)), queued(b"b", None)];
    q.enqueue(1, &sent).unwrap();
    let got: Vec<QueuedEntry> = q.dequeue(1, 10).unwrap().into_iter().map(|(_, e)| e).collect();
    assert_eq!(got, sent);
}

/// Issue 41: a row lock held elsewhere (a paused writer, an operator's open transaction) fails
/// a commit with `Unavailable` within the writer's lock timeout, instead of holding it until
/// the lock is released; once it is, the same store commits again.
#[test]
fn a_commit_behind_a_held_row_lock_fails_within_the_lock_timeout() {
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let s = PostgresStorage::open(&db).unwrap();
    s.commit(&batch(1, 0, 2, 1)).unwrap();

    let (locked_tx, locked) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let url = db.clone();
    let holder = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (mut client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            let tx = client.transaction().await.unwrap();
            tx.query("SELECT size FROM checkpoints WHERE log = 1 FOR UPDATE", &[]).await.unwrap();
            locked_tx.send(()).unwrap();
            let _ = tokio::task::spawn_blocking(move || released.recv_timeout(Duration::from_secs(30))).await;
            tx.rollback().await.unwrap();
        });
    });
    locked.recv().unwrap();
    let started = std::time::Instant::now();
    let held = s.commit(&batch(1, 2, 4, 2));
    assert!(matches!(held, Err(StorageError::Unavailable(_))), "{held:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "failed after {:?}", started.elapsed());
    assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().size, 2, "nothing was written");

    release.send(()).unwrap();
    holder.join().unwrap();
    s.commit(&batch(1, 2, 4, 2)).unwrap();
    assert_eq!(s.latest_checkpoint(1).unwrap().unwrap().size, 4);
}

/// A new database's first minute: autovacuum has not analyzed `entries` yet, and with no
/// statistics the planner once chose to scan a log's whole range for the dedupe's leaf
/// lookup. The lookup must probe `entries_by_leaf` for every leaf whatever the planner knows.
#[test]
fn the_leaf_lookup_probes_its_index_on_a_table_never_analyzed() {
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let s = PostgresStorage::open(&db).unwrap();
    common::psql(&db, "ALTER TABLE entries SET (autovacuum_enabled = false)");
    for start in (0..4000).step_by(250) {
        s.commit(&batch(1, start, start + 250, 1)).unwrap();
    }
    assert_eq!(common::psql_i64(&db, "SELECT count(*) FROM pg_stats WHERE tablename = 'entries'"), 0, "the table has statistics");
    let wanted: Vec<Vec<u8>> = (3744..4000).map(|i| merkle::leaf_hash(format!("log 1 entry {i}").as_bytes()).to_vec()).collect();
    let plan: Vec<String> = common::with_client(&db, move |client| async move {
        let rows = client
            .query(&format!("EXPLAIN {}", signet_log::storage::postgres::FIND_LEAVES), &[&1i16, &wanted])
            .await
            .unwrap();
        rows.iter().map(|r| r.get::<_, String>(0)).collect()
    });
    let plan = plan.join("\n");
    assert!(plan.contains("entries_by_leaf") && plan.contains("leaf_hash = w.leaf"), "not one probe per leaf:\n{plan}");
    assert!(!plan.contains("Filter"), "rows are filtered, not found:\n{plan}");
    let mut found = s.find_leaves(1, &[merkle::leaf_hash(b"log 1 entry 3999"), merkle::leaf_hash(b"log 1 entry 7"), [9; 32], merkle::leaf_hash(b"log 1 entry 7")]).unwrap();
    found.sort();
    assert_eq!(found, [(0, 3999), (1, 7), (3, 7)], "a leaf asked for twice is found for both");
}
