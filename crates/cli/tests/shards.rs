//! `signet admin log rotate`: the Rekor v1 log cut into shards, as Rekor has them. Old
//! shards stay readable and provable, indices are log-wide across shards, each shard has its
//! own key and origin, and the trust documents list every shard's key with its window.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use common::*;
use serde_json::Value;
use signet_core::b64;
use signet_log::rekor::v1::set_payload;
use signet_log::{checkpoint, merkle};

fn rotate(data: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["admin", "log", "rotate", "--log", "rekor-v1", "--data-dir"])
        .arg(data)
        .args(extra)
        .output()
        .unwrap()
}

fn spki_of(agent: &ureq::Agent, url: &str) -> Vec<u8> {
    let pem = get(agent, url).unwrap().text();
    signet_core::pem::decode_first(pem.as_bytes()).unwrap().der
}

/// The single entry of a Rekor v1 entry map.
fn only(map: &Value) -> (String, Value) {
    let (uuid, e) = map.as_object().unwrap().iter().next().unwrap();
    (uuid.clone(), e.clone())
}

/// Checks an entry the way a Rekor v1 client does: the SET over the log-wide index with the
/// key of its logID, and the inclusion proof (at the shard's index) against a checkpoint
/// signed by that key. Returns (logIndex, proof logIndex, checkpoint origin).
fn check(e: &Value, spki: &[u8]) -> (u64, u64, String) {
    assert_eq!(e["logID"], hex::encode(signet_core::hash::sha256(spki)));
    let body = b64::decode(e["body"].as_str().unwrap()).unwrap();
    let index = e["logIndex"].as_u64().unwrap();
    let payload = set_payload(&body, e["integratedTime"].as_i64().unwrap(), e["logID"].as_str().unwrap(), index);
    let set = b64::decode(e["verification"]["signedEntryTimestamp"].as_str().unwrap()).unwrap();
    assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(spki, &payload, &set), "SET does not verify over logIndex {index}");
    let p = &e["verification"]["inclusionProof"];
    let cp = checkpoint::verify(p["checkpoint"].as_str().unwrap(), "127.0.0.1", spki).unwrap();
    let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect();
    let local = p["logIndex"].as_u64().unwrap();
    merkle::verify_inclusion(&merkle::leaf_hash(&body), local, cp.size, &hashes, &cp.root_hash).unwrap();
    (index, local, cp.origin)
}

/// Reads the acknowledged entry `uuid` back by its log-wide `index` from the instance at
/// `url`, and checks it as a client does ([`check`]) under the key `spki`.
fn read_back(agent: &ureq::Agent, url: &str, uuid: &str, index: u64, spki: &[u8]) {
    let got = get(agent, &format!("{url}/api/v1/log/entries?logIndex={index}")).unwrap();
    assert_eq!(got.status, 200, "{}", got.text());
    let (got_uuid, got_e) = only(&got.json());
    assert_eq!(got_uuid, uuid);
    assert_eq!(check(&got_e, spki).0, index);
}

#[test]
fn a_rotated_rekor_v1_log_serves_every_shard_with_log_wide_indices() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let agent = agent();
    let signer = Signer::new();
    let entries = |url: &str| format!("{url}/api/v1/log/entries");

    let mut server = Server::start(&data, &[]);
    let old_spki = spki_of(&agent, &format!("{}/api/v1/log/publicKey", server.url));
    let mut before = Vec::new();
    for i in 0..5 {
        let r = post_json(&agent, &entries(&server.url), &signer.v1_entry(format!("before {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        before.push(only(&r.json()));
    }
    let old_info = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let old_tree = old_info["treeID"].as_str().unwrap().to_string();
    assert_eq!(old_info["treeSize"], 6, "the genesis entry and five appends");
    assert!(old_info.get("inactiveShards").is_none());

    // Rotation is offline: refused beside a running server, which goes on serving.
    let refused = rotate(&data, &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("stop the server first"), "{}", String::from_utf8_lossy(&refused.stderr));
    server.kill();

    let rotated = rotate(&data, &[]);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let out: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    assert_eq!(out["frozen"]["treeSize"], 6);
    assert_eq!(out["frozen"]["treeID"], old_tree.as_str());
    assert_eq!(out["active"]["startIndex"], 6);
    let key_file = std::path::PathBuf::from(out["key"].as_str().unwrap());
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    let new_tree = out["active"]["treeID"].as_str().unwrap().to_string();
    assert_ne!(new_tree, old_tree);

    let server = Server::start(&data, &[]);
    let url = server.url.clone();
    let new_spki = spki_of(&agent, &format!("{url}/api/v1/log/publicKey"));
    assert_ne!(new_spki, old_spki, "a new shard signs with a new key");
    assert_eq!(spki_of(&agent, &format!("{url}/api/v1/log/publicKey?treeID={old_tree}")), old_spki);
    let info = get(&agent, &format!("{url}/api/v1/log")).unwrap().json();
    assert_eq!(info["treeID"], new_tree.as_str());
    assert_eq!(info["treeSize"], 1, "the new shard begins with its own genesis entry");
    assert_eq!(info["inactiveShards"].as_array().unwrap().len(), 1);
    assert_eq!(info["inactiveShards"][0]["treeID"], old_tree.as_str());
    assert_eq!(info["inactiveShards"][0]["treeSize"], 6);
    assert_eq!(info["inactiveShards"][0]["rootHash"], old_info["rootHash"]);

    // New appends: log-wide indices after the frozen shard's, proofs and SETs of the new key.
    let mut after = Vec::new();
    for i in 0..3 {
        let r = post_json(&agent, &entries(&url), &signer.v1_entry(format!("after {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let (uuid, e) = only(&r.json());
        assert!(uuid.starts_with(&format!("{:016x}", new_tree.parse::<i64>().unwrap())));
        let (index, local, origin) = check(&e, &new_spki);
        assert_eq!((index, local), (7 + i, 1 + i));
        assert_eq!(origin, format!("127.0.0.1 - {new_tree}"));
        after.push((uuid, e));
    }

    // Old entries: by log-wide index, by UUID (with or without the tree ID), with proofs of
    // the frozen shard and SETs of the old key, exactly as they were answered.
    for (uuid, e) in &before {
        let index = e["logIndex"].as_u64().unwrap();
        for got in [
            get(&agent, &format!("{url}/api/v1/log/entries?logIndex={index}")).unwrap(),
            get(&agent, &format!("{url}/api/v1/log/entries/{uuid}")).unwrap(),
            get(&agent, &format!("{url}/api/v1/log/entries/{}", &uuid[16..])).unwrap(),
        ] {
            assert_eq!(got.status, 200, "{}", got.text());
            let (got_uuid, got_e) = only(&got.json());
            assert_eq!(&got_uuid, uuid);
            assert_eq!(check(&got_e, &old_spki), (index, index, format!("127.0.0.1 - {old_tree}")));
            assert_eq!(got_e["verification"]["signedEntryTimestamp"], e["verification"]["signedEntryTimestamp"]);
        }
    }
    let got = get(&agent, &format!("{url}/api/v1/log/entries?logIndex=8")).unwrap();
    assert_eq!(only(&got.json()).0, after[1].0);
    assert_eq!(get(&agent, &format!("{url}/api/v1/log/entries?logIndex=10")).unwrap().status, 404);
    let stranger = format!("{:016x}{}", 12345, &before[0].0[16..]);
    assert_eq!(get(&agent, &format!("{url}/api/v1/log/entries/{stranger}")).unwrap().status, 404);

    // Dedupe is per shard, as in Rekor: an entry of a frozen shard is logged again once.
    let again = signer.v1_entry(b"before 1");
    let r = post_json(&agent, &entries(&url), &again).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let (_, e) = only(&r.json());
    assert_eq!(check(&e, &new_spki).0, 10);
    assert_eq!(post_json(&agent, &entries(&url), &again).unwrap().status, 409);

    // Search finds it in both shards, in log-wide order, and pages across the boundary.
    let digest = format!("sha256:{}", hex::encode(signet_core::hash::sha256(b"before 1")));
    let found = post_json(&agent, &format!("{url}/api/v1/index/retrieve"), &serde_json::json!({"hash": digest})).unwrap().json();
    let found: Vec<&str> = found.as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    assert_eq!(found.len(), 2);
    assert!(found[0].starts_with(&old_tree_hex(&old_tree)) && found[1].starts_with(&old_tree_hex(&new_tree)));
    let found = post_json(&agent, &format!("{url}/api/v1/index/retrieve?after=2"), &serde_json::json!({"hash": digest})).unwrap().json();
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");

    // Consistency proofs of a frozen shard, by treeID.
    let p = get(&agent, &format!("{url}/api/v1/log/proof?treeID={old_tree}&firstSize=3&lastSize=6")).unwrap();
    assert_eq!(p.status, 200, "{}", p.text());
    let p = p.json();
    assert_eq!(p["rootHash"], old_info["rootHash"]);
    assert_eq!(get(&agent, &format!("{url}/api/v1/log/proof?treeID=1&firstSize=1")).unwrap().status, 404);
    assert_eq!(get(&agent, &format!("{url}/api/v1/log/proof?treeID=x&firstSize=1")).unwrap().status, 400);

    // The trust documents list both keys; the frozen one's window ends.
    let root = get(&agent, &format!("{url}/trust/trusted_root.json")).unwrap().json();
    let tlogs = root["tlogs"].as_array().unwrap();
    assert_eq!(tlogs.len(), 3, "two Rekor v1 shards and Rekor v2");
    assert_eq!(tlogs[0]["logId"]["keyId"], b64::encode(signet_core::hash::sha256(&old_spki)));
    assert_eq!(tlogs[1]["logId"]["keyId"], b64::encode(signet_core::hash::sha256(&new_spki)));
    // The windows overlap by the second of the rotation: what either shard took in it verifies.
    let end = tlogs[0]["publicKey"]["validFor"]["end"].as_str().unwrap();
    let start = tlogs[1]["publicKey"]["validFor"]["start"].as_str().unwrap();
    assert!(start < end, "the new shard's window starts at {start}, after the old one's ends at {end}");
    assert!(tlogs[1]["publicKey"]["validFor"].get("end").is_none());
    drop(server);

    // A second rotation starts shard 2 after both.
    let rotated = rotate(&data, &[]);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let out: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    assert_eq!((out["frozen"]["treeSize"].as_u64(), out["active"]["startIndex"].as_u64()), (Some(5), Some(11)));
    let server = Server::start(&data, &[]);
    let info = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    assert_eq!(info["inactiveShards"].as_array().unwrap().len(), 2);
    let got = get(&agent, &format!("{}/api/v1/log/entries?logIndex=3", server.url)).unwrap();
    assert_eq!(only(&got.json()).0, before[2].0);
    let r = post_json(&agent, &entries(&server.url), &signer.v1_entry(b"third shard")).unwrap();
    assert_eq!(only(&r.json()).1["logIndex"], 12);
}

fn old_tree_hex(tree: &str) -> String {
    format!("{:016x}", tree.parse::<i64>().unwrap())
}

#[test]
fn rotation_refuses_what_it_cannot_do_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // No log yet.
    std::fs::create_dir_all(&data).unwrap();
    let out = rotate(&data, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rekor-v1.pem does not exist"), "{}", String::from_utf8_lossy(&out.stderr));
    // An unknown log is named, with the ones there are.
    let out = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["admin", "log", "rotate", "--log", "rekor-v3", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected rekor-v1, rekor-v2 or ct"), "{}", String::from_utf8_lossy(&out.stderr));

    // A shard's key that is missing stops the start with a message naming the file.
    drop(Server::start(&data, &[]));
    let out = rotate(&data, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let key: Value = serde_json::from_slice(&out.stdout).unwrap();
    std::fs::remove_file(key["key"].as_str().unwrap()).unwrap();
    let serve = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("SIGNET_LOG", "warn")
        .output()
        .unwrap();
    assert!(!serve.status.success());
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains("rekor-v1.shard-1.pem is missing"), "{err}");
}

/// `signet admin log rotate` on PostgreSQL: offline (every instance stopped), the rotation
/// waits for the sequencer lease; online it goes through any running instance.
#[test]
fn a_rotation_on_postgresql_offline_waits_for_the_sequencer_lease() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let agent = agent();
    let signer = Signer::new();
    let mut server = Server::start(&data, &["--storage", &db]);
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"pg before")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let before = only(&r.json());

    let refused = rotate(&data, &["--storage", &db]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("holds the sequencer lease"), "{}", String::from_utf8_lossy(&refused.stderr));
    server.kill();
    // The killed sequencer's lease lapses within its TTL (3 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let rotated = loop {
        let out = rotate(&data, &["--storage", &db]);
        if out.status.success() || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let out: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    assert_eq!(out["active"]["startIndex"], 2);
    // Sealed into the database as well: an instance whose data dir lacks the file takes it
    // from there at start.
    let key_file = std::path::PathBuf::from(out["key"].as_str().unwrap());
    let made = std::fs::read(&key_file).unwrap();
    std::fs::remove_file(&key_file).unwrap();

    let server = Server::start(&data, &["--storage", &db]);
    assert_eq!(std::fs::read(&key_file).unwrap(), made, "the key taken from the database is not the one the rotation made");
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"pg after")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(only(&r.json()).1["logIndex"], 3);
    let got = get(&agent, &format!("{}/api/v1/log/entries?logIndex=1", server.url)).unwrap();
    assert_eq!(only(&got.json()).0, before.0);
}

/// Rotates through the admin API of the instance at `url`, retrying while a new token is not
/// yet seen there (tokens reach every instance within moments).
fn rotate_online(url: &str, token: &str) -> Output {
    (0..25)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(200));
            Command::new(env!("CARGO_BIN_EXE_signet"))
                .args(["admin", "log", "rotate", "--log", "rekor-v1", "--url", url, "--token", token])
                .output()
                .unwrap()
        })
        .find(|o| !String::from_utf8_lossy(&o.stderr).contains("HTTP 401"))
        .expect("the admin token was never accepted")
}

/// Two instances on the PostgreSQL database `db`: A in `dir/a`, then B from a backup of A's
/// data dir (as the docs add an instance), changed by `prepare` before B starts.
pub(crate) fn two_instances(db: &str, dir: &std::path::Path, prepare: impl FnOnce(&std::path::Path)) -> (Server, std::path::PathBuf, Server, std::path::PathBuf) {
    let (a_dir, b_dir) = (dir.join("a"), dir.join("b"));
    let a = Server::start(&a_dir, &["--storage", db]);
    let copy = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(copy.status.success(), "{}", String::from_utf8_lossy(&copy.stderr));
    prepare(&b_dir);
    let b = Server::start(&b_dir, &["--storage", db]);
    (a, a_dir, b, b_dir)
}

/// Waits until the instance at `url` serves shard `tree_id` as its active one; how long it took.
fn serving(agent: &ureq::Agent, url: &str, tree_id: &str) -> std::time::Duration {
    let started = std::time::Instant::now();
    loop {
        let info = get(agent, &format!("{url}/api/v1/log")).unwrap().json();
        if info["treeID"] == tree_id {
            return started.elapsed();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{url} still serves {info} 10 s after the rotation to {tree_id}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// On PostgreSQL any instance rotates online, follower or sequencer; the others serve the
/// new shard within a second or two, with its key taken from the database (sealed with the
/// seal key their data dirs share), while writers on both go on: no acknowledged entry is
/// lost or doubled, and each verifies under the key of the shard that holds it.
#[test]
fn on_postgresql_any_instance_rotates_online_and_every_instance_follows() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let (a, a_dir, mut b, b_dir) = two_instances(&db, dir.path(), |_| ());
    let zero_spki = spki_of(&agent, &format!("{}/api/v1/log/publicKey", a.url));
    let token = admin_token(&["--storage".as_ref(), db.as_ref()]);

    // Writers on both instances throughout; a 503 (the moment of the rotation) is retried,
    // as clients do.
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let writers: Vec<_> = [a.url.clone(), b.url.clone()]
        .into_iter()
        .enumerate()
        .map(|(w, url)| {
            let (stop, acked) = (stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let (agent, signer) = (common::agent(), Signer::new());
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let entry = signer.v1_entry(format!("writer {w} entry {i}").as_bytes());
                    let mut tries = 0;
                    let r = loop {
                        let r = post_json(&agent, &format!("{url}/api/v1/log/entries"), &entry).unwrap();
                        tries += 1;
                        if r.status != 503 || tries == 50 {
                            break r;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    };
                    assert_eq!(r.status, 201, "an append on {url} failed during the rotation: {}", r.text());
                    acked.lock().unwrap().push(only(&r.json()));
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));

    // Rotates through `through` to shard `n`; returns what it printed, the new tree ID, and how
    // long `other` took to serve it. Writers go on for a moment after.
    let rotate_to = |n: u64, through: &str, other: &str| {
        let out = rotate_online(through, &token);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out["active"]["shard"], n);
        let tree = out["active"]["treeID"].as_str().unwrap().to_string();
        let took = serving(&agent, other, &tree);
        serving(&agent, through, &tree);
        std::thread::sleep(std::time::Duration::from_millis(500));
        (out, tree, took)
    };
    // Through B, a follower: the sequencer A follows. Then through A: B follows.
    let (first, _, took_a) = rotate_to(1, &b.url, &a.url);
    let (second, tree_2, took_b) = rotate_to(2, &a.url, &b.url);
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|h| h.join().unwrap());
    eprintln!("the other instance served the new shard after {took_a:?} (a follower's rotation) and {took_b:?} (the sequencer's)");

    // Both instances hold each shard's key: the same one, taken from the database by the
    // instance that did not make it.
    for n in [1, 2] {
        let file = format!("keys/rekor-v1.shard-{n}.pem");
        assert_eq!(std::fs::read(a_dir.join(&file)).unwrap(), std::fs::read(b_dir.join(&file)).unwrap(), "{file}");
        assert_eq!(std::fs::metadata(b_dir.join(&file)).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let spki_2 = spki_of(&agent, &format!("{}/api/v1/log/publicKey", b.url));
    assert_eq!(spki_2, spki_of(&agent, &format!("{}/api/v1/log/publicKey", a.url)));
    let spki_1 = {
        let pem = std::fs::read(a_dir.join("keys/rekor-v1.shard-1.pem")).unwrap();
        let der = signet_core::pem::decode_first(&pem).unwrap().der;
        signet_keys::Signer::from_pkcs8(&der, "shard 1", &[signet_keys::Algorithm::EcdsaP256Sha256]).unwrap().spki_der().to_vec()
    };
    let (start_1, start_2) = (first["active"]["startIndex"].as_u64().unwrap(), second["active"]["startIndex"].as_u64().unwrap());

    // Every acknowledged entry, once, at its index, on both instances, under its shard's key.
    let acked = acked.lock().unwrap();
    let mut indices: Vec<u64> = acked.iter().map(|(_, e)| e["logIndex"].as_u64().unwrap()).collect();
    indices.sort();
    indices.dedup();
    assert_eq!(indices.len(), acked.len(), "two appends answered with one index");
    let in_shard = |lo: u64, hi: u64| acked.iter().filter(|(_, e)| (lo..hi).contains(&e["logIndex"].as_u64().unwrap())).count();
    assert!(in_shard(0, start_1) > 0 && in_shard(start_1, start_2) > 0 && in_shard(start_2, u64::MAX) > 0, "appends in each shard: {} {} {}", in_shard(0, start_1), in_shard(start_1, start_2), in_shard(start_2, u64::MAX));
    for url in [&a.url, &b.url] {
        for (uuid, e) in acked.iter() {
            let index = e["logIndex"].as_u64().unwrap();
            let spki = match index {
                i if i < start_1 => &zero_spki,
                i if i < start_2 => &spki_1,
                _ => &spki_2,
            };
            read_back(&agent, url, uuid, index, spki);
        }
        // Each serves the frozen shards at their final sizes, and lists all three keys.
        let info = get(&agent, &format!("{url}/api/v1/log")).unwrap().json();
        let sizes: Vec<u64> = info["inactiveShards"].as_array().unwrap().iter().map(|s| s["treeSize"].as_u64().unwrap()).collect();
        assert_eq!(sizes.iter().sum::<u64>(), start_2, "{info}");
        let root = get(&agent, &format!("{url}/trust/trusted_root.json")).unwrap().json();
        let keys: Vec<&str> = root["tlogs"].as_array().unwrap().iter().filter_map(|t| t["logId"]["keyId"].as_str()).collect();
        for spki in [&zero_spki, &spki_1, &spki_2] {
            assert!(keys.contains(&b64::encode(signet_core::hash::sha256(spki)).as_str()), "{url} does not list a shard key: {root}");
        }
    }

    // B restarts on what it took from the database.
    b.kill();
    let b = Server::start(&b_dir, &["--storage", &db]);
    assert_eq!(get(&agent, &format!("{}/api/v1/log", b.url)).unwrap().json()["treeID"], tree_2.as_str());
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", b.url), &Signer::new().v1_entry(b"after the restart")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(only(&r.json()).1["logIndex"].as_u64().unwrap() > start_2);
}

/// A rotation cut short right after the database froze the tree (the rotating instance died
/// before it recorded the next shard): the sequencer takes no entry into the frozen tree and
/// says to retry, and the next rotation, through another instance, finishes it; then writes
/// resume on every instance.
#[test]
fn on_postgresql_a_rotation_cut_short_after_the_freeze_is_finished_by_the_next() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let signer = Signer::new();
    let (a, a_dir, b, _) = two_instances(&db, dir.path(), |_| ());
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", a.url), &signer.v1_entry(b"before")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    // `signet doctor` reads the registry as storage has it, and changes nothing.
    let config = dir.path().join("doctor.toml");
    std::fs::write(&config, format!("storage = \"{db}\"\n")).unwrap();
    let doctor = || {
        let out = Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["doctor", "--offline", "--config", config.to_str().unwrap(), "--data-dir", a_dir.to_str().unwrap()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(doctor().contains("ok    no log rotation left unfinished"), "{}", doctor());

    // What the dead rotation did: the freeze (shard 0 is storage namespace 1), and the
    // registry's record of it, but not the next shard's.
    let frozen: u64 = crate::postgres::query_text(&db, "UPDATE checkpoints SET frozen = true WHERE log = 1 RETURNING size::text").parse().unwrap();
    assert_eq!(frozen, 2);
    let said = doctor();
    assert!(said.contains("FAIL  the Rekor v1 log's newest shard (0) is frozen in storage but not recorded as rotated"), "{said}");
    crate::postgres::query_text(
        &db,
        "INSERT INTO meta(key, value) VALUES ('rekor_v1.shard.0.frozen', \
         convert_to('{\"size\": 2, \"valid_to\": ' || (extract(epoch FROM now())::bigint + 1)::text || '}', 'UTF8')) RETURNING key",
    );
    let said = doctor();
    assert!(said.contains("FAIL  the Rekor v1 log's newest shard (0) is frozen and no shard follows it") && said.contains("--log rekor-v1"), "{said}");
    for i in 0..3 {
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", a.url), &signer.v1_entry(format!("during {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 503, "{}", r.text());
        assert!(r.text().contains("rotated to a new shard"), "{}", r.text());
    }
    // The sequencer says in /readyz what to do.
    let started = std::time::Instant::now();
    let ready = loop {
        let ready = get(&agent, &format!("{}/readyz", a.url)).unwrap();
        if ready.text().contains("cut short") || started.elapsed() > std::time::Duration::from_secs(5) {
            break ready;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(ready.status, 503, "{}", ready.text());
    assert!(ready.text().contains("admin log rotate"), "{}", ready.text());
    assert_eq!(get(&agent, &format!("{}/api/v1/log", a.url)).unwrap().json()["treeSize"], 2, "the frozen tree grew");

    let token = admin_token(&["--storage".as_ref(), db.as_ref()]);
    let done = rotate_online(&b.url, &token);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let done: Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(done["frozen"]["treeSize"], 2);
    assert_eq!(done["active"]["startIndex"], 2);
    let tree = done["active"]["treeID"].as_str().unwrap().to_string();
    serving(&agent, &a.url, &tree);
    assert!(doctor().contains("ok    no log rotation left unfinished"), "{}", doctor());
    for (n, url) in [&a.url, &b.url].into_iter().enumerate() {
        let r = post_json(&agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(format!("after {n}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        assert!(only(&r.json()).1["logIndex"].as_u64().unwrap() >= 3, "{}", r.text());
    }
}

/// An instance whose data dir has another seal key than the database's instances share can't
/// hand a new shard's key to them, so it refuses to rotate, and says what to copy.
#[test]
fn on_postgresql_an_instance_without_the_shared_seal_key_refuses_to_rotate() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a, a_dir, b, b_dir) = two_instances(&db, dir.path(), |b_dir| std::fs::remove_file(b_dir.join("keys/shard-seal.key")).unwrap());
    let token = admin_token(&["--storage".as_ref(), db.as_ref()]);
    let refused = rotate_online(&b.url, &token);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("shard-seal.key") && err.contains("copy theirs here"), "{err}");
    assert!(!b_dir.join("keys/shard-seal.key").exists(), "an instance must not make a seal key of its own beside the shared one");

    // doctor says so, and what to copy; of A's data dir, that all is well.
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, format!("storage = \"{db}\"\n")).unwrap();
    let doctor = |data: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["doctor", "--offline", "--config", config.to_str().unwrap(), "--data-dir", data.to_str().unwrap()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let b_says = doctor(&b_dir);
    assert!(b_says.contains("FAIL") && b_says.contains("shard-seal.key is missing") && b_says.contains("copy it from one of them"), "{b_says}");
    let a_says = doctor(&a_dir);
    assert!(a_says.contains("is the seal key this database's instances share"), "{a_says}");

    // A rotates: B cannot open the new shard's key, so it stops taking appends and says why in
    // /readyz (a load balancer sends writers elsewhere), while its reads go on.
    let agent = agent();
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", b.url), &Signer::new().v1_entry(b"before")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let before = only(&r.json());
    let rotated = rotate_online(&a.url, &token);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    // (For a moment /readyz may say only that the frozen shard's log stopped: the reason
    // comes with the next look at the registry, within 500 ms.)
    let started = std::time::Instant::now();
    let ready = loop {
        let ready = get(&agent, &format!("{}/readyz", b.url)).unwrap();
        if (ready.status == 503 && ready.text().contains("shard-seal.key")) || started.elapsed() > std::time::Duration::from_secs(10) {
            break ready;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(ready.status, 503, "{}", ready.text());
    assert!(ready.text().contains("shard-seal.key"), "{}", ready.text());
    let refused = post_json(&agent, &format!("{}/api/v1/log/entries", b.url), &Signer::new().v1_entry(b"after")).unwrap();
    assert_eq!(refused.status, 503, "{}", refused.text());
    let read = get(&agent, &format!("{}/api/v1/log/entries/{}", b.url, before.0)).unwrap();
    assert_eq!(read.status, 200, "{}", read.text());
}

/// A new admin token, in the data dir (`--data-dir DIR`) or the database (`--storage URL`).
pub(crate) fn admin_token(place: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["admin", "token", "create", "--role", "admin"])
        .args(place)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn a_running_instance_rotates_online_under_load_losing_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let url = server.url.clone();
    let token = admin_token(&["--data-dir".as_ref(), data.as_os_str()]);
    let agent = agent();
    let old_spki = spki_of(&agent, &format!("{url}/api/v1/log/publicKey"));

    // Writers append throughout the rotation; every answer is kept.
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, stop, acked) = (url.clone(), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let (agent, signer) = (common::agent(), Signer::new());
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let r = post_json(&agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(format!("w{w} e{i}").as_bytes())).unwrap();
                    assert_eq!(r.status, 201, "an append failed during the rotation: {}", r.text());
                    acked.lock().unwrap().push(only(&r.json()));
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(400));

    // Refused without an admin token.
    let unauthenticated = post_json(&agent, &format!("{url}/api/admin/log/rotate"), &serde_json::json!({"log": "rekor-v1"})).unwrap();
    assert_eq!(unauthenticated.status, 401, "{}", unauthenticated.text());
    let rotate_cli = |log: &str| {
        Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["admin", "log", "rotate", "--log", log, "--url", &url, "--token", &token])
            .output()
            .unwrap()
    };
    let rotated = rotate_cli("rekor-v1");
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let out: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    let start = out["active"]["startIndex"].as_u64().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|h| h.join().unwrap());

    // Appends went on: some before the rotation, some after, none lost or doubled.
    let new_spki = spki_of(&agent, &format!("{url}/api/v1/log/publicKey"));
    assert_ne!(new_spki, old_spki);
    let acked = acked.lock().unwrap();
    let (before, after): (Vec<_>, Vec<_>) = acked.iter().partition(|(_, e)| e["logIndex"].as_u64().unwrap() < start);
    assert!(before.len() > 10 && after.len() > 10, "{} before, {} after the rotation", before.len(), after.len());
    let mut indices: Vec<u64> = acked.iter().map(|(_, e)| e["logIndex"].as_u64().unwrap()).collect();
    indices.sort();
    indices.dedup();
    assert_eq!(indices.len(), acked.len(), "two appends answered with one index");
    for (uuid, e) in acked.iter() {
        let index = e["logIndex"].as_u64().unwrap();
        let spki = if index < start { &old_spki } else { &new_spki };
        read_back(&agent, &url, uuid, index, spki);
    }
    let info = get(&agent, &format!("{url}/api/v1/log")).unwrap().json();
    assert_eq!(info["inactiveShards"][0]["treeSize"].as_u64(), Some(start), "the frozen shard ends where the new one starts");
    // Every shard's tile cache is reported.
    let metrics = get(&agent, &format!("{url}/metrics")).unwrap().text();
    for tree in [info["inactiveShards"][0]["treeID"].as_str().unwrap(), info["treeID"].as_str().unwrap(), "x"] {
        let label = format!("signet_log_tile_cache_bytes{{log=\"rekor_v1/{tree}\"}}");
        assert_eq!(metrics.contains(&label), tree != "x", "{label} in {metrics}");
    }
    assert!(metrics.contains("signet_log_tile_cache_lookups_total{log=\"ct\",result=\"hit\"}"), "{metrics}");
    // Each shard kept the entries it committed: the reads back were answered from memory.
    for tree in [info["inactiveShards"][0]["treeID"].as_str().unwrap(), info["treeID"].as_str().unwrap()] {
        let label = format!("signet_log_entry_cache_lookups_total{{log=\"rekor_v1/{tree}\",result=\"hit\"}} ");
        let hits: u64 = metrics.lines().find_map(|l| l.strip_prefix(label.as_str())).and_then(|v| v.parse().ok()).unwrap_or(0);
        assert!(hits > 10, "{label}{hits} in {metrics}");
    }
    // The trust documents list the new shard at once, without a restart.
    let root = get(&agent, &format!("{url}/trust/trusted_root.json")).unwrap().json();
    assert_eq!(root["tlogs"].as_array().unwrap().len(), 3);
    assert_eq!(root["tlogs"][1]["logId"]["keyId"], b64::encode(signet_core::hash::sha256(&new_spki)));
    drop(server);

    // And the next start serves the same shards.
    let server = Server::start(&data, &[]);
    let again = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    assert_eq!(again["treeID"], info["treeID"]);
    assert_eq!(again["treeSize"], info["treeSize"]);
}

/// A rotation cut short after the freeze (a crash between the two records) stops the next
/// start with a message that says what to do, and doing it finishes the rotation.
#[test]
fn a_rotation_cut_short_is_reported_at_start_and_finished_by_running_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let agent = agent();
    let server = Server::start(&data, &[]);
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &Signer::new().v1_entry(b"one")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    drop(server);
    // What a rotation that died between its two writes leaves: shard 0 frozen, no shard 1.
    let db = rusqlite::Connection::open(data.join("signet.sqlite")).unwrap();
    db.execute("INSERT INTO meta(key, value) VALUES ('rekor_v1.shard.0.frozen', ?1)", [br#"{"size":2,"valid_to":1}"#.to_vec()]).unwrap();
    drop(db);
    let doctor = || {
        let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(["doctor", "--offline", "--data-dir"]).arg(&data).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (passed, said) = doctor();
    assert!(!passed && said.contains("FAIL  the Rekor v1 log's newest shard (0) is frozen and no shard follows it"), "{said}");

    let serve = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("SIGNET_LOG", "warn")
        .output()
        .unwrap();
    assert!(!serve.status.success());
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains("a rotation was cut short") && err.contains("signet admin log rotate"), "{err}");

    let finished = rotate(&data, &[]);
    assert!(finished.status.success(), "{}", String::from_utf8_lossy(&finished.stderr));
    let out: Value = serde_json::from_slice(&finished.stdout).unwrap();
    assert_eq!((out["frozen"]["treeSize"].as_u64(), out["active"]["startIndex"].as_u64()), (Some(2), Some(2)));
    assert!(doctor().1.contains("ok    no log rotation left unfinished"), "{}", doctor().1);
    let server = Server::start(&data, &[]);
    let info = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    assert_eq!(info["inactiveShards"][0]["treeSize"], 2);
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &Signer::new().v1_entry(b"two")).unwrap();
    assert_eq!(only(&r.json()).1["logIndex"], 3);
}
