//! Many instances on one PostgreSQL database (issue 18): a follower serves reads and queues
//! its appends, the sequencer logs them, a follower that is promoted picks up what was left
//! queued, and a follower never serves a checkpoint that does not verify.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use signet_keys::Signer;
use signet_log::checkpoint::{Checkpoint, NoteSigner};
use signet_log::storage::{PostgresStorage, Queue};
use signet_log::{BatchPolicy, Log, LogConfig, Role, Sequenced};

fn config(key: &Arc<Signer>) -> LogConfig {
    LogConfig {
        id: 1,
        origin: "follow.test".into(),
        key_name: "follow.test".into(),
        key: key.clone(),
        batch: BatchPolicy { max_entries: 64, max_delay: Duration::from_millis(2) },
        stamper: None,
        max_pending: 0,
        tile_cache: signet_log::DEFAULT_TILE_CACHE,
        entry_cache: signet_log::DEFAULT_ENTRY_CACHE,
        note_key: None,
        genesis: None,
    }
}

async fn open(db: &str, key: &Arc<Signer>, role: Role) -> (Log, Arc<PostgresStorage>) {
    let store = Arc::new(PostgresStorage::open(db).unwrap());
    let log = Log::open_shared(config(key), store.clone(), store.clone(), role).await.unwrap();
    (log, store)
}

fn new_index(s: &Sequenced) -> u64 {
    match s {
        Sequenced::New { index, .. } => *index,
        other => panic!("expected a new entry, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_serves_reads_and_its_appends_are_logged_by_the_sequencer() {
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let (sequencer, store) = open(&db, &key, Role::Sequencer).await;
    for i in 0..3 {
        sequencer.append(format!("on the sequencer {i}").into_bytes(), None).await.unwrap();
    }
    let (follower, _) = open(&db, &key, Role::Follower).await;
    assert_eq!(follower.role(), Role::Follower);
    assert_eq!(follower.head().checkpoint.size, 3, "a follower opens at the stored checkpoint");

    // Appends on the follower: each answered once integrated, with its own index.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let f = follower.clone();
        tasks.push(tokio::spawn(async move { f.append(format!("on the follower {i}").into_bytes(), Some(b"sha256:ab".to_vec())).await }));
    }
    let mut indices = Vec::new();
    for t in tasks {
        let s = t.await.unwrap().unwrap();
        let index = new_index(&s);
        if let Sequenced::New { checkpoint, .. } = &s {
            assert!(checkpoint.checkpoint.size > index);
        }
        // The follower itself serves the entry and proves it at once.
        let e = follower.entry_async(index).await.unwrap().expect("the follower reads its own append");
        assert!(String::from_utf8(e.body).unwrap().starts_with("on the follower"));
        follower.inclusion_proof(index, follower.head().checkpoint.size).unwrap();
        indices.push(index);
    }
    indices.sort();
    indices.dedup();
    assert_eq!(indices.len(), 40, "no index handed out twice");
    assert!(indices[0] >= 3);

    // Read again, they come from the follower's memory: its first reads kept them. The
    // sequencer kept them as it committed them, and both are what the database holds.
    let (follower_hits, sequencer_hits) = (follower.entry_cache_stats().hits, sequencer.entry_cache_stats().hits);
    for &i in &indices {
        let again = follower.entry_async(i).await.unwrap();
        assert_eq!(again, signet_log::storage::Storage::entry(store.as_ref(), 1, i).unwrap(), "entry {i}");
        assert_eq!(sequencer.entry_async(i).await.unwrap(), again, "entry {i}");
    }
    assert_eq!(follower.entry_cache_stats().hits - follower_hits, 40);
    assert_eq!(sequencer.entry_cache_stats().hits - sequencer_hits, 40);

    // A repeat is a duplicate, found by the follower or by the sequencer.
    let again = follower.append(b"on the follower 7".to_vec(), None).await.unwrap();
    assert!(matches!(again, Sequenced::Duplicate { .. }), "{again:?}");
    let repeat_of_sequencer = follower.append(b"on the sequencer 1".to_vec(), None).await.unwrap();
    assert!(matches!(repeat_of_sequencer, Sequenced::Duplicate { index: 1 }), "{repeat_of_sequencer:?}");

    // Written through the sequencer a moment ago, read through the follower now.
    let fresh = new_index(&sequencer.append(b"just now".to_vec(), None).await.unwrap());
    assert!(follower.entry_async(fresh).await.unwrap().is_some(), "a read past a follower's head catches up first");
    assert_eq!(follower.root(fresh + 1).unwrap(), sequencer.root(fresh + 1).unwrap());
    assert_eq!(follower.find_leaf(&signet_log::merkle::leaf_hash(b"just now")).await.unwrap(), Some(fresh));

    // Everything queued was logged, and is forgotten. The sequencer clears a round's rows after
    // their batch is durable, and the follower's appends may be answered (from storage) before
    // it has, so the queue empties soon after, not at once.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = store.clone();
        let left = tokio::task::spawn_blocking(move || s.dequeue(1, 10)).await.unwrap().unwrap();
        if left.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{} entries still in the queue after 20 s", left.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_follower_logs_what_waited_for_a_dead_sequencer() {
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());

    // The first sequencer runs on a runtime of its own, so that it can die with it.
    let old = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let size = {
        let (db, key) = (db.clone(), key.clone());
        old.spawn(async move {
            let (log, _store) = open(&db, &key, Role::Sequencer).await;
            for i in 0..5 {
                log.append(format!("before {i}").into_bytes(), None).await.unwrap();
            }
            log.head().checkpoint.size
        })
        .await
        .unwrap()
    };
    let (follower, queue) = open(&db, &key, Role::Follower).await;
    old.shutdown_background();

    // Appends wait in the queue while nobody sequences.
    let mut waiting = Vec::new();
    for i in 0..10 {
        let f = follower.clone();
        waiting.push(tokio::spawn(async move { f.append(format!("while nobody sequences {i}").into_bytes(), None).await }));
    }
    // The same entry again (a client retrying): it waits too, but is queued once.
    let repeat = {
        let f = follower.clone();
        tokio::spawn(async move { f.append(b"while nobody sequences 0".to_vec(), None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(waiting.iter().all(|t| !t.is_finished()) && !repeat.is_finished(), "an append was answered with no sequencer");
    let queued = tokio::task::spawn_blocking(move || queue.dequeue(1, 100)).await.unwrap().unwrap();
    assert_eq!(queued.len(), 10, "a repeated entry is queued once");

    follower.promote().await.unwrap();
    assert_eq!(follower.role(), Role::Sequencer);
    let mut indices = Vec::new();
    for t in waiting {
        indices.push(new_index(&tokio::time::timeout(Duration::from_secs(10), t).await.unwrap().unwrap().unwrap()));
    }
    let repeat = tokio::time::timeout(Duration::from_secs(10), repeat).await.unwrap().unwrap().unwrap();
    assert!(indices.contains(&new_index(&repeat)), "the repeat is answered with its entry's index: {repeat:?}");
    indices.sort();
    assert_eq!(indices, (size..size + 10).collect::<Vec<_>>(), "the queued appends follow the old sequencer's entries");
    let direct = follower.append(b"after the promotion".to_vec(), None).await.unwrap();
    assert_eq!(new_index(&direct), size + 10);
}

/// A sequencer that dies between creating a log and writing its genesis entry: the instance
/// that takes over writes it, at index 0, before the appends that were queued meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_follower_writes_the_genesis_a_dead_sequencer_did_not() {
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let genesis = signet_log::Genesis { body: b"genesis".to_vec(), digest: None };
    let old = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    {
        // Created (its empty checkpoint is stored), and gone before its genesis was written.
        let (db, key) = (db.clone(), key.clone());
        old.spawn(async move { drop(open(&db, &key, Role::Sequencer).await) }).await.unwrap();
    }
    old.shutdown_background();
    let store = Arc::new(PostgresStorage::open(&db).unwrap());
    let cfg = LogConfig { genesis: Some(genesis.clone()), ..config(&key) };
    let follower = Log::open_shared(cfg, store.clone(), store, Role::Follower).await.unwrap();
    assert_eq!(follower.head().checkpoint.size, 0);
    let waiting = {
        let f = follower.clone();
        tokio::spawn(async move { f.append(b"queued before the takeover".to_vec(), None).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    follower.promote().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), follower.genesis_written()).await.unwrap().unwrap();
    assert_eq!(follower.entry_async(0).await.unwrap().unwrap().body, genesis.body, "the genesis is index 0");
    let queued = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(new_index(&queued), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_never_serves_a_checkpoint_that_does_not_verify() {
    let Some(server) = common::postgres_url() else { return };
    let db = common::fresh_database(&server);
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let (sequencer, _store) = open(&db, &key, Role::Sequencer).await;
    sequencer.append(b"one".to_vec(), None).await.unwrap();
    let (follower, _) = open(&db, &key, Role::Follower).await;
    let head = follower.head();
    assert_eq!(head.checkpoint.size, 1);

    // Someone with write access to the database, but not the log's key, adds an entry.
    let forged_body = b"forged";
    let leaf = signet_log::merkle::leaf_hash(forged_body);
    let mut tree = signet_log::tree::Tree::new();
    tree.push(signet_log::merkle::leaf_hash(b"one"));
    tree.push(leaf);
    let root = tree.root(2).unwrap();
    let other = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let forged = NoteSigner::new("follow.test", other).sign(Checkpoint { origin: "follow.test".into(), size: 2, root_hash: root }).unwrap();
    common::psql(
        &db,
        &format!(
            "INSERT INTO entries(log, idx, leaf_hash, integrated_time, body) VALUES (1, 1, '\\x{}', 0, '\\x{}');
             UPDATE checkpoints SET size = 2, note = $${}$$ WHERE log = 1;",
            hex::encode(leaf),
            hex::encode(forged_body),
            forged.note
        ),
    );
    assert!(follower.entry_async(1).await.unwrap().is_none(), "an entry under a forged checkpoint was served");
    assert_eq!(follower.head().note, head.note);

    // Signed by the right key, but over another root: not the stored entries' tree either.
    let wrong_root = NoteSigner::new("follow.test", key.clone())
        .sign(Checkpoint { origin: "follow.test".into(), size: 2, root_hash: [7; 32] })
        .unwrap();
    common::psql(&db, &format!("UPDATE checkpoints SET note = $${}$$ WHERE log = 1;", wrong_root.note));
    assert!(follower.entry_async(1).await.unwrap().is_none(), "a checkpoint over other entries was served");
    assert_eq!(follower.head().checkpoint.size, 1);

    // The genuine one is taken.
    let genuine = NoteSigner::new("follow.test", key.clone())
        .sign(Checkpoint { origin: "follow.test".into(), size: 2, root_hash: root })
        .unwrap();
    common::psql(&db, &format!("UPDATE checkpoints SET note = $${}$$ WHERE log = 1;", genuine.note));
    assert_eq!(follower.entry_async(1).await.unwrap().unwrap().body, forged_body);
    assert_eq!(follower.head().checkpoint.size, 2);
}
