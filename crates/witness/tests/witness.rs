//! The witness against trees built here: what it cosigns, what it refuses, and that it
//! never cosigns two roots for one size, even when requests race.

use std::sync::Arc;

use signet_core::hash::Hash;
use signet_core::note::{Checkpoint, SignedNote};
use signet_core::notekey::{signature_line, NoteKeyType};
use signet_keys::NoteSigner;
use signet_log::merkle::{self, Nodes};
use signet_witness::request::format;
use signet_witness::{LogKey, Refused, SqliteStore, Witness, WitnessedLog};

const ORIGIN: &str = "example.com/test-log";

/// A tree hashed from its leaves up.
struct Tree(Vec<Hash>);
impl Nodes for Tree {
    fn node(&self, level: u32, index: u64) -> Hash {
        let lo = (index << level) as usize;
        mth(&self.0[lo..lo + (1usize << level)])
    }
}
fn mth(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => merkle::empty_root(),
        1 => leaves[0],
        n => {
            let k = 1usize << (63 - ((n - 1) as u64).leading_zeros());
            merkle::node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
        }
    }
}
fn tree(n: usize, salt: u8) -> Tree {
    Tree((0..n).map(|i| merkle::leaf_hash(&[salt, i as u8, (i >> 8) as u8])).collect())
}

struct Log {
    key: NoteSigner,
}
impl Log {
    fn new() -> Log {
        Log { key: NoteSigner::generate(ORIGIN, NoteKeyType::Ed25519).unwrap() }
    }
    fn checkpoint(&self, t: &Tree, size: usize) -> String {
        let text = Checkpoint { origin: ORIGIN.into(), size: size as u64, root_hash: mth(&t.0[..size]) }.body();
        format!("{text}\n{}", signature_line(&self.key.sign(&text, 0).unwrap()))
    }
    fn body(&self, t: &Tree, old: usize, new: usize) -> String {
        let proof = if old == 0 { vec![] } else { merkle::consistency_proof(t, old as u64, new as u64).unwrap() };
        format(old as u64, &proof, &self.checkpoint(t, new))
    }
}

fn witness(dir: &std::path::Path, log: &Log) -> Witness {
    let store = Arc::new(SqliteStore::open(&dir.join("witness.sqlite")).unwrap());
    let signer = NoteSigner::load_or_generate(&dir.join("witness.pem"), "witness.example/w1", NoteKeyType::Cosignature).unwrap();
    let logs = vec![WitnessedLog { origin: ORIGIN.into(), keys: vec![LogKey::Note(log.key.vkey().clone())] }];
    Witness::new(signer, logs, store)
}

/// The cosignature lines verify with the witness's key over the checkpoint it was sent.
fn assert_cosigned(w: &Witness, checkpoint: &str, lines: &str) {
    let note = SignedNote::parse(&format!("{checkpoint}{lines}")).unwrap();
    assert!(w.vkey().verify(&note).is_some(), "cosignature does not verify: {lines}");
}

#[tokio::test]
async fn a_growing_log_is_cosigned_and_refusals_follow_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new();
    let w = witness(dir.path(), &log);
    let t = tree(300, 1);

    // The first checkpoint is taken on trust (old 0, no proof); then each extends the last.
    let lines = w.add_checkpoint(log.body(&t, 0, 10).as_bytes()).await.unwrap();
    assert_cosigned(&w, &log.checkpoint(&t, 10), &lines);
    let lines = w.add_checkpoint(log.body(&t, 10, 257).as_bytes()).await.unwrap();
    assert_cosigned(&w, &log.checkpoint(&t, 257), &lines);
    // The same checkpoint again is cosigned again.
    w.add_checkpoint(log.body(&t, 257, 257).as_bytes()).await.unwrap();

    // A stale old size: 409 with the size held.
    let err = w.add_checkpoint(log.body(&t, 10, 300).as_bytes()).await.unwrap_err();
    assert_eq!((err.status(), err.known_size()), (409, Some(257)), "{err}");
    // A bad proof: 422 (a proof of the right length from another tree).
    let other = tree(300, 2);
    let mut bad = merkle::consistency_proof(&t, 257, 300).unwrap();
    bad[0] = merkle::consistency_proof(&other, 257, 300).unwrap()[0];
    let err = w.add_checkpoint(format(257, &bad, &log.checkpoint(&t, 300)).as_bytes()).await.unwrap_err();
    assert_eq!(err.status(), 422, "{err}");
    // Old above new: 400. Unknown origin: 404. Signed by another key: 403. Garbage: 400.
    let err = w.add_checkpoint(format(257, &[], &log.checkpoint(&t, 200)).as_bytes()).await.unwrap_err();
    assert!(matches!(err, Refused::OldAboveNew { old: 257, new: 200 }) && err.status() == 400, "{err}");
    let stranger = NoteSigner::generate("example.com/other", NoteKeyType::Ed25519).unwrap();
    let text = Checkpoint { origin: "example.com/other".into(), size: 1, root_hash: [0; 32] }.body();
    let unknown = format(0, &[], &format!("{text}\n{}", signature_line(&stranger.sign(&text, 0).unwrap())));
    assert_eq!(w.add_checkpoint(unknown.as_bytes()).await.unwrap_err().status(), 404);
    let impostor = Log { key: NoteSigner::generate(ORIGIN, NoteKeyType::Ed25519).unwrap() };
    assert_eq!(w.add_checkpoint(impostor.body(&t, 257, 300).as_bytes()).await.unwrap_err().status(), 403);
    assert_eq!(w.add_checkpoint(b"old x\n\n").await.unwrap_err().status(), 400);

    // None of the refusals moved the state; the good request still goes through, and the
    // state survives a restart.
    assert_eq!(w.latest(ORIGIN).await.unwrap().unwrap().size, 257);
    drop(w);
    let w = witness(dir.path(), &log);
    let lines = w.add_checkpoint(log.body(&t, 257, 300).as_bytes()).await.unwrap();
    assert_cosigned(&w, &log.checkpoint(&t, 300), &lines);
}

#[tokio::test]
async fn two_roots_for_one_size_are_never_both_cosigned() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new();
    let w = Arc::new(witness(dir.path(), &log));
    let (a, b) = (tree(40, 1), tree(40, 2));
    w.add_checkpoint(log.body(&a, 0, 8).as_bytes()).await.unwrap();
    // Fork b shares nothing with a: its checkpoints of size 8 and 20 differ from a's.
    let err = w.add_checkpoint(format(8, &[], &log.checkpoint(&b, 8)).as_bytes()).await.unwrap_err();
    assert_eq!((err.status(), err.reason()), (409, "fork"));

    // Race requests for size 20 from both trees at once: b's proofs start from b's root at
    // 8, which is not the one the witness holds, so only a's can ever be cosigned.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (w, body) = (w.clone(), if i % 2 == 0 { log.body(&a, 8, 20) } else { log.body(&b, 8, 20) });
        tasks.push(tokio::spawn(async move { (i % 2, w.add_checkpoint(body.as_bytes()).await) }));
    }
    let mut cosigned_roots = std::collections::HashSet::new();
    for t in tasks {
        let (fork, outcome) = t.await.unwrap();
        if outcome.is_ok() {
            cosigned_roots.insert(fork);
        }
    }
    assert_eq!(cosigned_roots.into_iter().collect::<Vec<_>>(), vec![0], "only tree a's size-20 root is ever cosigned");

    // A log that forks itself after the witness saw it: same key, two trees sharing the
    // first 8 leaves. Whichever of the two size-20 checkpoints comes second is refused.
    let mut c = tree(40, 3);
    c.0[..8].copy_from_slice(&a.0[..8]);
    let second = w.add_checkpoint(log.body(&c, 8, 20).as_bytes()).await.unwrap_err();
    assert_eq!(second.status(), 409, "{second}");
    let at_20 = w.latest(ORIGIN).await.unwrap().unwrap();
    assert_eq!((at_20.size, at_20.root), (20, mth(&a.0[..20])));
    // And a consistency proof for c from 20 onwards does not verify against a's root.
    let err = w.add_checkpoint(log.body(&c, 20, 30).as_bytes()).await.unwrap_err();
    assert_eq!(err.status(), 422, "{err}");
}

/// A new database on the test PostgreSQL (`SIGNET_TEST_POSTGRES`, started by `scripts/test`),
/// left empty: the store applies its own migration when it first connects; `None` (skipped)
/// when none is configured, unless
/// `SIGNET_TEST_REQUIRE_POSTGRES=1`.
async fn postgres_database() -> Option<String> {
    let server = match std::env::var("SIGNET_TEST_POSTGRES") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            assert_ne!(std::env::var("SIGNET_TEST_REQUIRE_POSTGRES").as_deref(), Ok("1"), "SIGNET_TEST_POSTGRES is not set");
            eprintln!("SIGNET_TEST_POSTGRES is not set: PostgreSQL case skipped (scripts/test runs it)");
            return None;
        }
    };
    let name = format!("signet_witness_{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
    let (client, conn) = tokio_postgres::connect(&server, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    Some(format!("{}/{name}", &server[..server.rfind('/').unwrap()]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn witnesses_sharing_postgres_never_cosign_two_roots_for_one_size() {
    let Some(url) = postgres_database().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = Log::new();
    // Two instances of one witness (one key), each with its own connection to the shared table.
    let signer_path = dir.path().join("witness.pem");
    let instance = || {
        let signer = NoteSigner::load_or_generate(&signer_path, "witness.example/w1", NoteKeyType::Cosignature).unwrap();
        let logs = vec![WitnessedLog { origin: ORIGIN.into(), keys: vec![LogKey::Note(log.key.vkey().clone())] }];
        Arc::new(Witness::new(signer, logs, Arc::new(signet_witness::PostgresStore::new(&url).unwrap())))
    };
    let (one, two) = (instance(), instance());
    let a = tree(64, 1);
    one.add_checkpoint(log.body(&a, 0, 8).as_bytes()).await.unwrap();
    // The other instance sees the state the first stored.
    let err = two.add_checkpoint(log.body(&a, 0, 8).as_bytes()).await.unwrap_err();
    assert_eq!((err.status(), err.known_size()), (409, Some(8)));
    // Two logs' views of size 30 race across the instances: a's extends what is held, and
    // c (a fork of a after 8 leaves) does too; exactly one is cosigned, whichever is first.
    let mut c = tree(64, 3);
    c.0[..8].copy_from_slice(&a.0[..8]);
    let (body_a, body_c) = (log.body(&a, 8, 30), log.body(&c, 8, 30));
    let (ra, rc) = tokio::join!(one.add_checkpoint(body_a.as_bytes()), two.add_checkpoint(body_c.as_bytes()));
    assert!(ra.is_ok() != rc.is_ok(), "exactly one of two forks is cosigned: {ra:?} {rc:?}");
    let held = two.latest(ORIGIN).await.unwrap().unwrap();
    let winner = if ra.is_ok() { &a } else { &c };
    assert_eq!((held.size, held.root), (30, mth(&winner.0[..30])));
}

#[tokio::test]
async fn a_log_signing_the_rekor_v2_way_is_witnessed_by_its_ecdsa_key() {
    use signet_keys::Signer;
    use signet_log::checkpoint::NoteSigner as LogSigner;
    let dir = tempfile::tempdir().unwrap();
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let spki = signet_core::pubkey::PublicKey::from_spki(key.spki_der()).unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("witness.sqlite")).unwrap());
    let signer = NoteSigner::generate("witness.example/w1", NoteKeyType::Cosignature).unwrap();
    let w = Witness::new(signer, vec![WitnessedLog { origin: "rekor.example".into(), keys: vec![LogKey::Spki(spki)] }], store);
    let log = LogSigner::new("rekor.example", key);
    let t = tree(20, 4);
    let note = |n: usize| log.sign(Checkpoint { origin: "rekor.example".into(), size: n as u64, root_hash: mth(&t.0[..n]) }).unwrap().note;
    let lines = w.add_checkpoint(format(0, &[], &note(10)).as_bytes()).await.unwrap();
    assert_cosigned(&w, &note(10), &lines);
    let proof = merkle::consistency_proof(&t, 10, 20).unwrap();
    assert_cosigned(&w, &note(20), &w.add_checkpoint(format(10, &proof, &note(20)).as_bytes()).await.unwrap());
    // Another ECDSA key under the same name is not the log's.
    let other = LogSigner::new("rekor.example", Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap()));
    let forged = other.sign(Checkpoint { origin: "rekor.example".into(), size: 20, root_hash: mth(&t.0[..20]) }).unwrap().note;
    assert_eq!(w.add_checkpoint(format(20, &[], &forged).as_bytes()).await.unwrap_err().status(), 403);
}
