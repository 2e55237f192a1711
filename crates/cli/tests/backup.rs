//! `signet backup` of a running instance, restored into a fresh data dir: the restored log
//! serves, and every checkpoint published before the backup is consistent with it. The copy
//! refuses appends until `signet restore` continues each log in a new shard: the original took
//! entries after the copy, and their indices must never get a second history.

use crate::common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use signet_core::b64;
use signet_log::{checkpoint, merkle};

fn hashes(v: &serde_json::Value) -> Vec<[u8; 32]> {
    v.as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect()
}

#[test]
fn a_backup_taken_under_load_restores_a_consistent_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let client = agent();
    let pem = get(&client, &format!("{}/api/v1/log/publicKey", server.url)).unwrap().text();
    let spki = signet_core::pem::decode_first(pem.as_bytes()).unwrap().der;

    // Writers append throughout; each acknowledgement's checkpoint is kept with the time it was seen.
    let stop = Arc::new(AtomicBool::new(false));
    let backup_started = Arc::new(AtomicBool::new(false));
    let before: Arc<Mutex<Vec<(u64, [u8; 32], u64, [u8; 32])>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, stop, started, before, spki) = (server.url.clone(), stop.clone(), backup_started.clone(), before.clone(), spki.clone());
            std::thread::spawn(move || {
                let (agent, signer) = (agent(), Signer::new());
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let r = post_json(&agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(format!("w{w} e{i}").as_bytes())).unwrap();
                    assert_eq!(r.status, 201, "{}", r.text());
                    if started.load(Ordering::SeqCst) {
                        continue;
                    }
                    let map = r.json();
                    let e = map.as_object().unwrap().values().next().unwrap();
                    let cp = checkpoint::verify(e["verification"]["inclusionProof"]["checkpoint"].as_str().unwrap(), "127.0.0.1", &spki).unwrap();
                    let leaf = merkle::leaf_hash(&b64::decode(e["body"].as_str().unwrap()).unwrap());
                    before.lock().unwrap().push((cp.size, cp.root_hash, e["logIndex"].as_u64().unwrap(), leaf));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    backup_started.store(true, Ordering::SeqCst);
    let out = dir.path().join("backup");
    let b = Command::new(env!("CARGO_BIN_EXE_signet")).args(["backup", "--data-dir"]).arg(&data).arg("--out").arg(&out).output().unwrap();
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    assert!(String::from_utf8_lossy(&b.stdout).contains("signet.sqlite"), "{}", String::from_utf8_lossy(&b.stdout));
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|h| h.join().unwrap());
    drop(server);

    // A second backup to the same place is refused, and changes nothing.
    let again = Command::new(env!("CARGO_BIN_EXE_signet")).args(["backup", "--data-dir"]).arg(&data).arg("--out").arg(&out).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", String::from_utf8_lossy(&again.stderr));

    // Restore: serve the backup as a data dir.
    let restored = Server::start(&out, &[]);
    let agent = client;
    let head = get(&agent, &format!("{}/api/v1/log", restored.url)).unwrap().json();
    let size = head["treeSize"].as_u64().unwrap();
    let root = hex32(head["rootHash"].as_str().unwrap());
    checkpoint::verify(head["signedTreeHead"].as_str().unwrap(), "127.0.0.1", &spki).unwrap();
    let before = before.lock().unwrap();
    assert!(before.len() > 20, "only {} appends before the backup", before.len());
    for (cp_size, cp_root, index, leaf) in before.iter() {
        assert!(*cp_size <= size, "checkpoint {cp_size} published before the backup is beyond the restored size {size}");
        let p = get(&agent, &format!("{}/api/v1/log/proof?firstSize={cp_size}&lastSize={size}", restored.url)).unwrap().json();
        merkle::verify_consistency(*cp_size, size, &hashes(&p["hashes"]), cp_root, &root)
            .unwrap_or_else(|e| panic!("checkpoint {cp_size} is not consistent with the restored log: {e}"));
        let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={index}", restored.url)).unwrap();
        assert_eq!(r.status, 200);
        let map = r.json();
        let e = map.as_object().unwrap().values().next().unwrap();
        assert_eq!(merkle::leaf_hash(&b64::decode(e["body"].as_str().unwrap()).unwrap()), *leaf);
    }
    // Served as it is, the copy refuses appends to every log, says why and what to do, and is
    // not ready for writes; reads went on above.
    let signer = Signer::new();
    let refused = post_json(&agent, &format!("{}/api/v1/log/entries", restored.url), &signer.v1_entry(b"after backup")).unwrap();
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(refused.text().contains("signet restore --data-dir"), "{}", refused.text());
    assert_eq!(refused.header("retry-after"), None, "waiting does not help; an operator must act");
    let v2 = post_json(&agent, &format!("{}/api/v2/log/entries", restored.url), &signer.v2_entry(b"after backup")).unwrap();
    assert_eq!(v2.status, 503, "{}", v2.text());
    let ready = get(&agent, &format!("{}/readyz", restored.url)).unwrap();
    assert_eq!((ready.status, ready.json()["status"].as_str()), (503, Some("appends refused")), "{}", ready.text());
    assert_eq!(get(&agent, &format!("{}/api/v1/log", restored.url)).unwrap().json()["treeSize"].as_u64(), Some(size));
    drop(restored);

    // `signet restore`: each log continues in a new shard, with a new key.
    let signet = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_signet")).args(args).arg("--data-dir").arg(&out).output().unwrap();
    let r = signet(&["restore"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let said = String::from_utf8_lossy(&r.stdout);
    for log in ["rekor-v1", "rekor-v2", "ct"] {
        assert!(said.contains(&format!("\"log\":\"{log}\"")), "{log} was not rotated: {said}");
    }
    let again = signet(&["restore"]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("restored already"));

    let restored = Server::start(&out, &[]);
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", restored.url), &signer.v1_entry(b"after restore")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let map = r.json();
    let e = map.as_object().unwrap().values().next().unwrap();
    // Rekor v1 indices run on across shards: the new shard starts where the copy ended.
    assert!(e["logIndex"].as_u64().unwrap() >= size, "{e}");
    let new_pem = get(&agent, &format!("{}/api/v1/log/publicKey", restored.url)).unwrap().text();
    let new_spki = signet_core::pem::decode_first(new_pem.as_bytes()).unwrap().der;
    assert_ne!(new_spki, spki, "the new shard signs with a new key");
    assert_eq!(e["logID"].as_str().unwrap(), hex::encode(signet_core::hash::sha256(&new_spki)));
    checkpoint::verify(e["verification"]["inclusionProof"]["checkpoint"].as_str().unwrap(), "127.0.0.1", &new_spki).unwrap();
    assert_eq!(get(&agent, &format!("{}/readyz", restored.url)).unwrap().status, 200);
    let v2 = post_json(&agent, &format!("{}/api/v2/log/entries", restored.url), &signer.v2_entry(b"after restore")).unwrap();
    assert_eq!(v2.status, 201, "{}", v2.text());
    // What the copy held is still there, under its old key.
    let (_, _, index, leaf) = before[0];
    let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={index}", restored.url)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let map = r.json();
    let e = map.as_object().unwrap().values().next().unwrap();
    assert_eq!(merkle::leaf_hash(&b64::decode(e["body"].as_str().unwrap()).unwrap()), leaf);
    assert_eq!(e["logID"].as_str().unwrap(), hex::encode(signet_core::hash::sha256(&spki)));
}

/// A PostgreSQL server binary (pg_dump, pg_restore) of the version the test server runs.
fn pg_tool(name: &str) -> std::path::PathBuf {
    let dir = std::env::var("SIGNET_TEST_POSTGRES_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into());
    std::path::Path::new(&dir).join(name)
}

/// Waits until this instance's watermark for Rekor v1 covers `size` entries.
fn wait_for_watermark(data_dir: &std::path::Path, size: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let marks: serde_json::Value =
            std::fs::read(data_dir.join("log-watermarks.json")).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let covered = marks["logs"].as_object().into_iter().flatten().any(|(name, m)| name.contains(" - ") && m["size"].as_u64() >= Some(size));
        if covered {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "no watermark of {size} entries: {marks}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 41, "Restore never forks": a PostgreSQL database restored from a dump carries no mark,
/// and used to take appends at the indices its original had already acknowledged. The instance
/// that served the log knows better (its watermarks): it refuses appends to every log the
/// dump is behind on, saying why and what to do; reads go on; `signet restore --storage`
/// continues each log in a new shard, and the old entries stay readable.
#[test]
fn a_database_restored_from_a_dump_refuses_appends_until_signet_restore() {
    let Some(db) = postgres_database() else { return };
    let (dir, agent, signer) = (tempfile::tempdir().unwrap(), agent(), Signer::new());
    let append = |url: &str, what: &[u8]| post_json(&agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(what)).unwrap();
    let server = Server::start(dir.path(), &["--storage", &db]);
    for i in 0..3u8 {
        assert_eq!(append(&server.url, &[b'a', i]).status, 201);
    }
    let dumped = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json()["treeSize"].as_u64().unwrap();
    let dump = dir.path().join("signet.dump");
    let out = Command::new(pg_tool("pg_dump")).args(["--format=custom", "--file"]).arg(&dump).arg(&db).output().unwrap();
    assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));
    // Acknowledged after the dump: these indices must never get other entries.
    let mut after = Vec::new();
    for i in 0..3u8 {
        let r = append(&server.url, &[b'b', i]);
        assert_eq!(r.status, 201, "{}", r.text());
        after.push(r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap());
    }
    assert!(after.iter().all(|&i| i >= dumped));
    wait_for_watermark(dir.path(), dumped + 3);
    drop(server);

    // The dump restored into an empty database, and the same instance started on it.
    let restored_db = postgres_database().unwrap();
    let out = Command::new(pg_tool("pg_restore")).args(["--no-owner", "--dbname"]).arg(&restored_db).arg(&dump).output().unwrap();
    assert!(out.status.success(), "pg_restore: {}", String::from_utf8_lossy(&out.stderr));
    let server = Server::start(dir.path(), &["--storage", &restored_db]);
    assert_eq!(get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json()["treeSize"].as_u64(), Some(dumped));
    let refused = append(&server.url, b"after the restore");
    assert_eq!(refused.status, 503, "{}", refused.text());
    let why = refused.text();
    for said in ["restored from a backup", &format!("indices {dumped}..{}", dumped + 2), "signet restore --data-dir"] {
        assert!(why.contains(said), "the refusal does not say {said:?}: {why}");
    }
    let ready = get(&agent, &format!("{}/readyz", server.url)).unwrap();
    assert_eq!((ready.status, ready.json()["status"].as_str()), (503, Some("appends refused")), "{}", ready.text());
    // Reads go on: what the dump holds is served and provable.
    let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={}", server.url, dumped - 1)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get(&agent, &format!("{}/api/v1/log/entries?logIndex={dumped}", server.url)).unwrap().status, 404);
    drop(server);

    // `signet restore --storage`: each log continues in a new shard.
    let signet = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_signet")).args(args).arg("--data-dir").arg(dir.path()).args(["--storage", &restored_db]).output().unwrap()
    };
    // The killed instance's sequencer lease lapses within its 2.5 s; until then the restore
    // refuses, as a rotation does, and changes nothing.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = signet(&["restore"]);
        if r.status.success() || std::time::Instant::now() > deadline {
            break r;
        }
        assert!(String::from_utf8_lossy(&r.stderr).contains("holds the sequencer lease"), "{}", String::from_utf8_lossy(&r.stderr));
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let said = String::from_utf8_lossy(&r.stdout);
    assert!(said.contains("\"log\":\"rekor-v1\"") && said.contains("the logs in PostgreSQL"), "{said}");
    let server = Server::start(dir.path(), &["--storage", &restored_db]);
    let r = append(&server.url, b"after signet restore");
    assert_eq!(r.status, 201, "{}", r.text());
    let index = r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap();
    assert!(index >= dumped, "the new shard's indices run on from the restored size: {index}");
    assert_eq!(get(&agent, &format!("{}/readyz", server.url)).unwrap().status, 200);
    let v2 = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(b"after signet restore")).unwrap();
    assert_eq!(v2.status, 201, "{}", v2.text());
    let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={}", server.url, dumped - 1)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The same on SQLite, where the database is a file in the data dir: restored from a disk
/// snapshot (the database files put back, the rest of the data dir left as it was), the log
/// is behind what the instance served. Appends are refused; `signet restore` asks for
/// `--force` (there is no backup mark), and with it each log continues in a new shard.
#[test]
fn a_data_dir_whose_database_went_back_refuses_appends_until_signet_restore_force() {
    let (dir, snapshot, agent, signer) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), agent(), Signer::new());
    let append = |url: &str, what: &[u8]| post_json(&agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(what)).unwrap();
    let database_files = |from: &std::path::Path, to: &std::path::Path| {
        for e in std::fs::read_dir(from).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("signet.sqlite") {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    };
    let server = Server::start(dir.path(), &[]);
    for i in 0..3u8 {
        assert_eq!(append(&server.url, &[b'a', i]).status, 201);
    }
    let snapped = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json()["treeSize"].as_u64().unwrap();
    drop(server);
    database_files(dir.path(), snapshot.path());
    let server = Server::start(dir.path(), &[]);
    for i in 0..3u8 {
        assert_eq!(append(&server.url, &[b'b', i]).status, 201);
    }
    wait_for_watermark(dir.path(), snapped + 3);
    drop(server);
    for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("signet.sqlite") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    database_files(snapshot.path(), dir.path());

    let server = Server::start(dir.path(), &[]);
    let refused = append(&server.url, b"after the snapshot");
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(refused.text().contains(&format!("indices {snapped}..{}", snapped + 2)), "{}", refused.text());
    drop(server);
    let signet = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_signet")).args(args).arg("--data-dir").arg(dir.path()).output().unwrap();
    let unforced = signet(&["restore"]);
    assert!(!unforced.status.success() && String::from_utf8_lossy(&unforced.stderr).contains("--force"), "{unforced:?}");
    let forced = signet(&["restore", "--force"]);
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    let server = Server::start(dir.path(), &[]);
    let r = append(&server.url, b"after signet restore --force");
    assert_eq!(r.status, 201, "{}", r.text());
    let index = r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap();
    assert!(index >= snapped, "{index}");
    assert_eq!(get(&agent, &format!("{}/readyz", server.url)).unwrap().status, 200);
}
