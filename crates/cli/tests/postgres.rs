//! signet on PostgreSQL, end to end: `signet migrate`, a server that logs, restarts and
//! reads back from the database, and a database that goes away and comes back under load.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap()
}

#[test]
fn migrate_applies_the_schema_once() {
    let Some(db) = postgres_database() else { return };
    let first = signet(&["migrate", "--storage", &db]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(String::from_utf8_lossy(&first.stdout).contains("applied schema migrations 1, 2"), "{first:?}");
    let again = signet(&["migrate", "--storage", &db]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("schema already current"), "{again:?}");

    // The same command on the embedded default.
    let dir = tempfile::tempdir().unwrap();
    let sqlite = signet(&["migrate", "--data-dir", dir.path().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&sqlite.stdout).contains("applied schema migrations 1"), "{sqlite:?}");

    // A URL that is not one: exit 2, naming what is expected, and no password echoed.
    let bad = signet(&["migrate", "--storage", "mysql://root:hunter2@db/x"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("expected sqlite://PATH or postgres://") && !err.contains("hunter2"), "{err}");
}

#[test]
fn a_server_on_postgres_logs_restarts_and_reads_back() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let signer = Signer::new();
    let (v1_index, v2_index, head) = {
        let server = Server::start(dir.path(), &["--storage", &db]);
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"on postgres v1")).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let v1_index = r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap();
        let dup = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"on postgres v1")).unwrap();
        // ECDSA signatures differ each time, so this is a new entry; the exact same body must be a 409.
        assert_eq!(dup.status, 201);
        let r = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(b"on postgres v2")).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let v2_index = r.json()["logIndex"].as_str().unwrap().parse::<u64>().unwrap();
        let head = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
        (v1_index, v2_index, head)
    };
    // Nothing of the log lives in the data dir: a server on a fresh data dir with the same keys
    // would read the same log. Here, the same data dir restarts and rebuilds from PostgreSQL.
    let server = Server::start(dir.path(), &["--storage", &db]);
    let again = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    assert_eq!(again["rootHash"], head["rootHash"]);
    assert_eq!(again["treeSize"], head["treeSize"]);
    let e = get(&agent, &format!("{}/api/v1/log/entries?logIndex={v1_index}", server.url)).unwrap();
    assert_eq!(e.status, 200, "{}", e.text());
    let bundle = get(&agent, &format!("{}/api/v2/tile/entries/000.p/{}", server.url, v2_index + 1)).unwrap();
    assert_eq!(bundle.status, 200);
    assert!(!dir.path().join("signet.sqlite").exists(), "no SQLite file beside a PostgreSQL store");
}

/// A PostgreSQL cluster of this test's own, so that stopping it disturbs no other test.
struct OwnCluster {
    dir: tempfile::TempDir,
    url: String,
}

fn services_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/services")
}

impl OwnCluster {
    fn start() -> OwnCluster {
        let dir = tempfile::Builder::new().prefix("signet-pg-").tempdir_in("/tmp").unwrap();
        let out = Command::new(services_script()).args(["start"]).arg(dir.path()).env("SIGNET_SERVICES", "postgres").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let url = text
            .lines()
            .find_map(|l| l.strip_prefix("export SIGNET_TEST_POSTGRES="))
            .expect("the services script prints the URL")
            .to_string();
        OwnCluster { dir, url }
    }

    fn pg_ctl(&self, what: &[&str]) {
        let out = Command::new(services_script()).arg(what[0]).arg(self.dir.path()).env("SIGNET_SERVICES", "postgres").output().unwrap();
        assert!(out.status.success(), "{what:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = Command::new(services_script()).arg("stop").arg(self.dir.path()).output();
    }
}

/// Issue 18, "Database down": stop PostgreSQL under load. Clients get clean 503s with
/// Retry-After (never a 500, never a hang), reads served from memory go on, and appends
/// succeed again once the database is back, with no restart of signet.
#[test]
fn a_database_outage_costs_503s_and_heals_without_a_restart() {
    if postgres_database().is_none() {
        return;
    }
    let cluster = OwnCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--storage", &cluster.url]);
    let stop = Arc::new(AtomicBool::new(false));
    let statuses: Arc<Mutex<Vec<(u16, Option<String>)>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, stop, statuses) = (server.url.clone(), stop.clone(), statuses.clone());
            std::thread::spawn(move || {
                let (agent, signer) = (agent(), Signer::new());
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let entry = signer.v1_entry(format!("outage writer {w} entry {i}").as_bytes());
                    let r = post_json(&agent, &format!("{url}/api/v1/log/entries"), &entry).unwrap();
                    statuses.lock().unwrap().push((r.status, r.header("retry-after").map(str::to_string)));
                    if r.status != 201 {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
        })
        .collect();
    let agent = agent();
    std::thread::sleep(Duration::from_millis(500));

    cluster.pg_ctl(&["stop"]);
    std::thread::sleep(Duration::from_millis(1500));
    // Served from memory: the tree head.
    assert_eq!(get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().status, 200);
    // Needs the database: a clean 503 that says why, at once.
    let started = Instant::now();
    let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex=0", server.url)).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("storage is unavailable"), "{}", r.text());
    assert!(started.elapsed() < Duration::from_secs(6), "the refusal took {:?}", started.elapsed());

    cluster.pg_ctl(&["start"]);
    let healed = Instant::now();
    let signer = Signer::new();
    loop {
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"after the outage")).unwrap();
        if r.status == 201 {
            break;
        }
        assert!(healed.elapsed() < Duration::from_secs(20), "appends did not resume: {} {}", r.status, r.text());
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|h| h.join().unwrap());

    let statuses = statuses.lock().unwrap();
    let refused: Vec<_> = statuses.iter().filter(|(s, _)| *s != 201).collect();
    assert!(!refused.is_empty(), "the outage was not seen by the writers");
    assert!(statuses.iter().any(|(s, _)| *s == 201), "nothing was appended before the outage");
    for (status, retry_after) in refused {
        assert_eq!(*status, 503, "an outage answers 503, not {status}");
        assert_eq!(retry_after.as_deref(), Some("1"), "a 503 says when to retry");
    }
    // The log is whole: the head verifies and every entry in it reads back.
    let head = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let size = head["treeSize"].as_u64().unwrap();
    let page = get(&agent, &format!("{}/api/v1/log/entries?logIndex={}", server.url, size - 1)).unwrap();
    assert_eq!(page.status, 200);
}

/// Issue 18, "Exactly one sequencer per log": a second instance on the same database waits as
/// a standby (not ready); when the sequencer is paused (SIGSTOP) past its lease, the standby
/// takes over and takes writes; when the old one wakes (SIGCONT), it writes nothing and stops.
/// Every acknowledged entry is in the log, and every checkpoint is consistent with the last.
#[test]
fn a_standby_takes_over_from_a_paused_sequencer_and_the_old_one_is_fenced() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let agent = agent();
    let signer = Signer::new();
    let mut a = Server::start(&a_dir, &["--storage", &db]);
    let mut acked = Vec::new();
    let mut checkpoints = Vec::new();
    let append = |url: &str, what: &str| post_json(&agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(what.as_bytes())).unwrap();
    for i in 0..5 {
        let r = append(&a.url, &format!("before {i}"));
        assert_eq!(r.status, 201, "{}", r.text());
        let map = r.json();
        let e = map.as_object().unwrap().values().next().unwrap().clone();
        acked.push(e["logIndex"].as_u64().unwrap());
        checkpoints.push(e["verification"]["inclusionProof"]["checkpoint"].as_str().unwrap().to_string());
    }
    // The standby shares the keys (a copy of A's data dir) and the database.
    let copy = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let standby = {
        let (b_dir, db) = (b_dir.clone(), db.clone());
        std::thread::spawn(move || Server::start(&b_dir, &["--storage", &db]))
    };
    std::thread::sleep(Duration::from_secs(2));
    assert!(!standby.is_finished(), "a second instance became ready while the first held the lease");

    // SAFETY: signals to a child process this test started.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGSTOP) };
    let paused = Instant::now();
    let b = standby.join().unwrap();
    let takeover = paused.elapsed();
    eprintln!("takeover after SIGSTOP: {takeover:?}");
    assert!(takeover < Duration::from_secs(10), "the standby took {takeover:?} to take over");
    let r = append(&b.url, "after the takeover");
    assert_eq!(r.status, 201, "{}", r.text());
    acked.push(r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap());

    // The old sequencer wakes: it must not write, and it stops by itself.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGCONT) };
    let woke = Instant::now();
    let status = loop {
        if let Some(s) = a.child.try_wait().unwrap() {
            break s;
        }
        // Whatever it answers meanwhile, it is never a new entry.
        if let Ok(r) = post_json(&agent, &format!("{}/api/v1/log/entries", a.url), &signer.v1_entry(b"to the old sequencer")) {
            assert_ne!(r.status, 201, "the fenced sequencer logged an entry: {}", r.text());
        }
        assert!(woke.elapsed() < Duration::from_secs(10), "the old sequencer did not stop");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!status.success(), "the old sequencer exited with {status}");
    a.kill();

    // Everything acknowledged is there, and every checkpoint is a prefix of the log.
    let head = get(&agent, &format!("{}/api/v1/log", b.url)).unwrap().json();
    let size = head["treeSize"].as_u64().unwrap();
    let root = hex32(head["rootHash"].as_str().unwrap());
    for index in &acked {
        assert_eq!(get(&agent, &format!("{}/api/v1/log/entries?logIndex={index}", b.url)).unwrap().status, 200, "entry {index} lost");
    }
    let pem = get(&agent, &format!("{}/api/v1/log/publicKey", b.url)).unwrap().text();
    let spki = signet_core::pem::decode_first(pem.as_bytes()).unwrap().der;
    for note in &checkpoints {
        let cp = signet_log::checkpoint::verify(note, "127.0.0.1", &spki).unwrap();
        let p = get(&agent, &format!("{}/api/v1/log/proof?firstSize={}&lastSize={size}", b.url, cp.size)).unwrap().json();
        let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect();
        signet_log::merkle::verify_consistency(cp.size, size, &hashes, &cp.root_hash, &root).unwrap();
    }
}
