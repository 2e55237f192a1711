//! `signet monitor` against a test double: a C2SP tile log served from trees built with
//! signet_log, that can be switched to another tree or to a tampered checkpoint, to show
//! that forks, inconsistent growth and bad signatures are caught.

use crate::monitor_common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use monitor_common::*;
use signet_keys::Signer;
use signet_log::checkpoint::{Checkpoint, NoteSigner};
use signet_log::merkle;
use signet_log::storage::{Batch, NewEntry, SqliteStorage, Storage, StoredCheckpoint};
use signet_log::tree::{StoredNodes, Tree};
use signet_log::tiles::{self, TilePath, TILE_WIDTH};
use signet_log::{BatchPolicy, Log, LogConfig};

const ORIGIN: &str = "double.example/log";

/// A log holding `bodies`, on SQLite under `dir`, signed by `key`: written in one batch
/// through the storage API as the sequencer would (entries, tiles, a signed checkpoint),
/// then opened as a `Log` to serve.
fn build(rt: &tokio::runtime::Runtime, dir: &Path, key: &Arc<Signer>, bodies: &[Vec<u8>]) -> Log {
    let storage = Arc::new(SqliteStorage::open(&dir.join("log.sqlite")).unwrap());
    let signer = NoteSigner::new(ORIGIN, key.clone());
    let mut tree = Tree::open(Box::new(StoredNodes { storage: storage.clone(), log: 1 }), 0, 0).unwrap();
    let entries: Vec<NewEntry> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| NewEntry { index: i as u64, leaf_hash: merkle::leaf_hash(b), digest: None, identity: None, public_key: None, body: b.clone(), stamp: None, integrated_time: None, attestation: None })
        .collect();
    for e in &entries {
        tree.push(e.leaf_hash);
    }
    let size = bodies.len() as u64;
    let root = tree.root(size).unwrap();
    let cp = signer.sign(Checkpoint { origin: ORIGIN.into(), size, root_hash: root }).unwrap();
    let batch = Batch {
        log: 1,
        integrated_time: 1_764_000_000,
        entries,
        tiles: signet_log::sequencer::changed_tiles(&tree, 0, size).unwrap(),
        leaf_tiles: signet_log::sequencer::filled_leaf_tiles(&tree, 0, size).unwrap(),
        checkpoint: StoredCheckpoint { size, note: cp.note },
    };
    storage.commit(&batch).unwrap();
    rt.block_on(async {
        let cfg = LogConfig {
            id: 1,
            origin: ORIGIN.into(),
            key_name: ORIGIN.into(),
            key: key.clone(),
            batch: BatchPolicy::default(),
            stamper: None,
            max_pending: 0,
            tile_cache: 16,
            entry_cache: signet_log::DEFAULT_ENTRY_CACHE,
            genesis: None,
            note_key: None,
        };
        Log::open(cfg, storage).await.unwrap()
    })
}

/// What the double serves: a log's tiles, and its checkpoint or a replacement note.
#[derive(Clone)]
struct Serving {
    log: Log,
    note: Option<String>,
    /// Entry bundles from this log instead: entries the checkpoint does not sign.
    entries_from: Option<Log>,
}

fn serve(now: Arc<Mutex<Serving>>) -> String {
    http_server(Arc::new(move |_method: &str, path: &str, _body: &[u8]| {
        let serving = now.lock().unwrap().clone();
        if path == "/checkpoint" {
            return (200, serving.note.unwrap_or_else(|| serving.log.head().note.clone()).into_bytes());
        }
        let Some(tile) = path.strip_prefix("/tile/") else { return (404, vec![]) };
        let found = match tiles::parse(tile) {
            Ok(TilePath::Hashes { level, index, width }) => serving.log.tile(level, index, width).unwrap(),
            Ok(TilePath::Entries { index, width }) => {
                let entries = serving.entries_from.as_ref().unwrap_or(&serving.log).entries(index * TILE_WIDTH, width).unwrap();
                (entries.len() as u64 == width).then(|| tiles::entry_bundle(entries.iter().map(|e| e.body.as_slice())).unwrap())
            }
            Err(_) => None,
        };
        found.map_or((404, vec![]), |b| (200, b))
    }))
}

fn bodies(tag: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{{\"entry\":{i},\"tree\":\"{tag}\"}}").into_bytes()).collect()
}

struct Double {
    _tmp: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    key: Arc<Signer>,
    now: Arc<Mutex<Serving>>,
    url: String,
    args: Vec<String>,
    dir: std::path::PathBuf,
}

impl Double {
    /// Serving a log of `first`'s entries.
    fn new(first: &[Vec<u8>]) -> Double {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
        std::fs::create_dir_all(dir.join("a")).unwrap();
        let log = build(&rt, &dir.join("a"), &key, first);
        let now = Arc::new(Mutex::new(Serving { log, note: None, entries_from: None }));
        let url = serve(now.clone());
        std::fs::write(dir.join("key.pem"), key.public_pem()).unwrap();
        std::fs::write(dir.join("watch.toml"), "emails = [\"nobody@example.com\"]\n").unwrap();
        let p = |f: &str| dir.join(f).to_str().unwrap().to_string();
        let args = vec![
            "--log".into(), url.clone(),
            "--log-key".into(), format!("{url}={}", p("key.pem")),
            "--watch".into(), p("watch.toml"),
            "--state".into(), p("state"),
        ];
        Double { _tmp: tmp, rt, key, now, url, args, dir }
    }

    /// A log of `entries` (same key, same origin).
    fn other(&self, name: &str, entries: &[Vec<u8>]) -> Log {
        std::fs::create_dir_all(self.dir.join(name)).unwrap();
        build(&self.rt, &self.dir.join(name), &self.key, entries)
    }

    /// Serves another tree from now on.
    fn switch_to(&self, name: &str, entries: &[Vec<u8>]) {
        let log = self.other(name, entries);
        *self.now.lock().unwrap() = Serving { log, note: None, entries_from: None };
    }

    /// Serves a tree of `entries` signed by `key` from now on (same origin).
    fn switch_to_key(&self, name: &str, key: &Arc<Signer>, entries: &[Vec<u8>]) {
        std::fs::create_dir_all(self.dir.join(name)).unwrap();
        let log = build(&self.rt, &self.dir.join(name), key, entries);
        *self.now.lock().unwrap() = Serving { log, note: None, entries_from: None };
    }

    fn run(&self) -> Run {
        monitor(&self.args.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

#[test]
fn a_forked_log_raises_an_inconsistency_alert() {
    let a = bodies("a", 300);
    let d = Double::new(&a);
    let first = d.run();
    assert_eq!((first.code, first.alerts.len()), (0, 0), "{}", first.stderr);
    assert!(first.stderr.contains("300 entries read"), "{}", first.stderr);

    // Same size, one entry different: another root under the same key.
    let mut b = a.clone();
    b[299] = b"{\"entry\":299,\"tree\":\"b\"}".to_vec();
    d.switch_to("b", &b);
    let forked = d.run();
    assert_eq!(forked.code, 1, "{}", forked.stderr);
    assert_eq!(forked.alerts.len(), 1, "{:?}", forked.alerts);
    let alert = &forked.alerts[0];
    assert_eq!(alert["kind"], "inconsistent");
    assert!(alert["detail"].as_str().unwrap().contains("fork"), "{alert}");
    // The evidence: both signed checkpoints of size 300.
    let evidence = alert["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 2);
    assert!(evidence.iter().all(|n| n.as_str().unwrap().starts_with(&format!("{ORIGIN}\n300\n"))));
    assert_ne!(evidence[0], evidence[1]);

    // The log stays marked: later runs fail without raising the same alert again.
    let later = d.run();
    assert_eq!((later.code, later.alerts.len()), (1, 0), "{}", later.stderr);
}

#[test]
fn growth_that_rewrites_history_is_inconsistent() {
    let a = bodies("a", 260);
    let d = Double::new(&a);
    assert_eq!(d.run().code, 0);
    // A larger tree whose first 260 entries are not the ones seen.
    let mut c = bodies("c", 600);
    c.truncate(600);
    d.switch_to("c", &c);
    let run = d.run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.alerts.len(), 1, "{:?}", run.alerts);
    assert_eq!(run.alerts[0]["kind"], "inconsistent");
    assert!(run.alerts[0]["detail"].as_str().unwrap().contains("not consistent"), "{}", run.alerts[0]);
}

#[test]
fn honest_growth_is_followed_and_only_new_entries_are_read() {
    let mut entries = bodies("a", 100);
    let d = Double::new(&entries);
    assert_eq!(d.run().code, 0);
    entries.extend(bodies("a2", 500));
    d.switch_to("grown", &entries);
    let run = d.run();
    assert_eq!((run.code, run.alerts.len()), (0, 0), "{}", run.stderr);
    assert!(run.stderr.contains("500 entries read"), "{}", run.stderr);
}

#[test]
fn a_bad_checkpoint_signature_raises_an_alert() {
    let d = Double::new(&bodies("a", 10));
    assert_eq!(d.run().code, 0);
    // The same checkpoint text with one byte of its signature changed.
    let good = d.now.lock().unwrap().log.head().note.clone();
    let (text, sig_line) = good.trim_end().rsplit_once('\n').unwrap();
    let (prefix, sig) = sig_line.rsplit_once(' ').unwrap();
    let mut blob = signet_core::b64::decode(sig).unwrap();
    let last = blob.len() - 1;
    blob[last] ^= 1;
    let tampered = format!("{text}\n{prefix} {}\n", signet_core::b64::encode(&blob));
    d.now.lock().unwrap().note = Some(tampered.clone());

    let run = d.run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.alerts.len(), 1, "{:?}", run.alerts);
    assert_eq!(run.alerts[0]["kind"], "bad_signature");
    assert_eq!(run.alerts[0]["evidence"][0], tampered);
    // One alert per bad note, not one per poll.
    let again = d.run();
    assert_eq!((again.code, again.alerts.len()), (1, 0), "{}", again.stderr);

    // A checkpoint signed by another key under the log's name is refused the same way.
    let other = Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
    let forged = signet_log::checkpoint::NoteSigner::new(ORIGIN, Arc::new(other))
        .sign(d.now.lock().unwrap().log.head().checkpoint.clone())
        .unwrap();
    d.now.lock().unwrap().note = Some(forged.note);
    let run = d.run();
    assert_eq!((run.code, run.alerts.len()), (1, 1), "{}", run.stderr);
    assert_eq!(run.alerts[0]["kind"], "bad_signature");

    // Once the log serves its real checkpoint again, it is followed again.
    d.now.lock().unwrap().note = None;
    let ok = d.run();
    assert_eq!((ok.code, ok.alerts.len()), (0, 0), "{}", ok.stderr);
    let _ = &d.url;
}

#[test]
fn entries_other_than_the_signed_ones_are_caught() {
    let a = bodies("a", 700);
    let d = Double::new(&a);
    // The checkpoint and hash tiles of tree a, but the entry bundles of tree b: the
    // signature and the (empty) history check out, the entries do not.
    let mut b = a.clone();
    b[650] = b"{\"entry\":650,\"tree\":\"b\"}".to_vec();
    let lie = d.other("b", &b);
    d.now.lock().unwrap().entries_from = Some(lie);
    let run = d.run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.alerts.len(), 1, "{:?}", run.alerts);
    assert_eq!(run.alerts[0]["kind"], "entries_mismatch");
    assert!(run.alerts[0]["detail"].as_str().unwrap().contains("0..700"), "{}", run.alerts[0]);
}


/// A shard rotation as Rekor v2's: a new tree from entry 0 under another of the log's trusted
/// keys, with the same origin. It is followed as a new tree, not taken for a tree that shrank;
/// and the tree it left never grows again unnoticed.
#[test]
fn a_rotation_to_another_trusted_key_is_followed_and_the_old_tree_stays_frozen() {
    let mut d = Double::new(&bodies("a", 300));
    let new_key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let pem = d.dir.join("new.pem");
    std::fs::write(&pem, new_key.public_pem()).unwrap();
    d.args.extend(["--log-key".to_string(), format!("{}={}", d.url, pem.display())]);
    assert_eq!(d.run().code, 0);

    d.switch_to_key("b", &new_key, &bodies("b", 20));
    let run = d.run();
    assert_eq!((run.code, run.alerts.len()), (0, 1), "{}", run.stderr);
    assert_eq!(run.alerts[0]["kind"], "rotated", "{}", run.alerts[0]);
    assert!(run.stderr.contains("20 entries read"), "{}", run.stderr);
    d.switch_to_key("b2", &new_key, &[bodies("b", 20), bodies("b2", 10)].concat());
    let grown = d.run();
    assert_eq!((grown.code, grown.alerts.len()), (0, 0), "{}", grown.stderr);
    assert!(grown.stderr.contains("10 entries read"), "{}", grown.stderr);

    // The old tree's last checkpoint again (a cache, a lagging replica) is no news.
    let old_key = d.key.clone();
    d.switch_to_key("a-again", &old_key, &bodies("a", 300));
    let stale = d.run();
    assert_eq!((stale.code, stale.alerts.len()), (0, 0), "{}", stale.stderr);

    // The old key signing a grown tree is a second history under that key.
    d.switch_to_key("a-grown", &old_key, &bodies("a", 310));
    let forked = d.run();
    assert_eq!((forked.code, forked.alerts.len()), (1, 1), "{}", forked.stderr);
    assert_eq!(forked.alerts[0]["kind"], "inconsistent");
    assert!(forked.alerts[0]["detail"].as_str().unwrap().contains("rotated away from"), "{}", forked.alerts[0]);
}
