//! One TUF repository for several instances on one PostgreSQL database: every instance
//! serves the same bytes, only the sequencer-lease holder signs, a change it publishes
//! reaches the others within seconds, and after a takeover the new holder signs on from
//! the published versions.

use crate::common;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap()
}

fn fetch(agent: &ureq::Agent, url: &str, name: &str) -> Reply {
    get(agent, &format!("{url}/tuf/{name}")).unwrap()
}

/// Every `timestamp.json` seen, by version: a version signed twice with different bytes is
/// what a TUF client behind a load balancer would take for an attack.
#[derive(Default)]
struct Seen(HashMap<u64, Vec<u8>>);

impl Seen {
    fn timestamp(&mut self, agent: &ureq::Agent, url: &str) -> (u64, Vec<u8>) {
        let r = fetch(agent, url, "timestamp.json");
        assert_eq!(r.status, 200, "{url}: {}", r.text());
        let version = r.json()["signed"]["version"].as_u64().unwrap();
        if let Some(before) = self.0.insert(version, r.body.clone()) {
            assert_eq!(before, r.body, "timestamp version {version} was served with two different signatures ({url})");
        }
        (version, r.body)
    }

    fn newest(&self) -> u64 {
        self.0.keys().copied().max().unwrap_or(0)
    }
}

/// The files the timestamp names, down to the targets: (name, bytes).
fn current_files(agent: &ureq::Agent, url: &str, timestamp: &[u8]) -> Vec<(String, Vec<u8>)> {
    let t: Value = serde_json::from_slice(timestamp).unwrap();
    let snapshot = format!("{}.snapshot.json", t["signed"]["meta"]["snapshot.json"]["version"]);
    let snap = fetch(agent, url, &snapshot);
    assert_eq!(snap.status, 200, "{url}: {snapshot}: {}", snap.text());
    let targets = format!("{}.targets.json", snap.json()["signed"]["meta"]["targets.json"]["version"]);
    let tg = fetch(agent, url, &targets);
    assert_eq!(tg.status, 200, "{url}: {targets}");
    let mut files = vec![(snapshot, snap.body.clone()), (targets, tg.body.clone())];
    for (name, meta) in tg.json()["signed"]["targets"].as_object().unwrap() {
        let file = format!("targets/{}.{name}", meta["hashes"]["sha256"].as_str().unwrap());
        let r = fetch(agent, url, &file);
        assert_eq!(r.status, 200, "{url}: {file}");
        files.push((file, r.body));
    }
    files
}

/// Waits until both instances serve the same timestamp, then checks that everything it
/// names, and the root, is byte-identical on both. Returns the timestamp's version.
fn same_on_both(agent: &ureq::Agent, seen: &mut Seen, a: &str, b: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (va, ta) = seen.timestamp(agent, a);
        let (vb, tb) = seen.timestamp(agent, b);
        if ta == tb {
            for (name, bytes) in current_files(agent, a, &ta) {
                assert_eq!(fetch(agent, b, &name).body, bytes, "{name} differs between the instances");
            }
            assert_eq!(fetch(agent, a, "1.root.json").body, fetch(agent, b, "1.root.json").body);
            return va;
        }
        assert!(Instant::now() < deadline, "the instances did not serve the same timestamp (versions {va} and {vb})");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The signing config the current targets hold, as text.
fn signing_config(agent: &ureq::Agent, url: &str, seen: &mut Seen) -> String {
    let (_, t) = seen.timestamp(agent, url);
    let files = current_files(agent, url, &t);
    let (_, bytes) = files.iter().find(|(n, _)| n.ends_with(".signing_config.v0.2.json")).unwrap();
    String::from_utf8(bytes.clone()).unwrap()
}

fn wait_for(what: &str, secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "timed out after {secs} s waiting until {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Two instances on `db`, in `dir/a` (started first: the sequencer) and `dir/b` (a backup of
/// a: the same keys), with a 4 s TUF timestamp, signed again every 2 s or so. (a, b, a's dir).
fn two_instances(dir: &std::path::Path, db: &str) -> (Server, Server, std::path::PathBuf) {
    let config = dir.join("signet.toml");
    std::fs::write(&config, "[tuf]\ntimestamp_expiry_secs = 4\n").unwrap();
    let (a_dir, b_dir) = (dir.join("a"), dir.join("b"));
    let args = ["--storage", db, "--config", config.to_str().unwrap()];
    let a = Server::start(&a_dir, &args);
    let copy = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let b = Server::start(&b_dir, &args);
    (a, b, a_dir)
}

#[test]
fn instances_on_one_database_serve_one_repository_and_a_takeover_signs_on_from_it() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mut a, b, a_dir) = two_instances(dir.path(), &db);
    let agent = agent();
    let mut seen = Seen::default();

    // (a) The same bytes on both, and again after the holder signed new timestamps. B listens
    // elsewhere, so its own documents differ: as a follower it publishes none of them.
    let first = same_on_both(&agent, &mut seen, &a.url, &b.url);
    wait_for("the timestamp is signed again twice", 15, || seen.timestamp(&agent, &a.url).0 >= first + 2);
    let later = same_on_both(&agent, &mut seen, &a.url, &b.url);
    assert!(later >= first + 2);
    assert!(!signing_config(&agent, &b.url, &mut seen).contains(&b.url), "the follower published its own documents");
    assert_eq!(fetch(&agent, &b.url, "2.root.json").status, 404);

    // (b) Targets signed offline (`signet tuf sign` on a copy, with the targets key alone),
    // copied into the sequencer's data dir: it publishes them, and the follower serves them.
    let (trust, offline, repo_copy) = (dir.path().join("trust"), dir.path().join("offline"), dir.path().join("repo-copy"));
    let out = signet(&["trust", "export", "--data-dir", a_dir.to_str().unwrap(), "--out", trust.to_str().unwrap(), "--url", "http://127.0.0.1:9"]);
    assert!(out.status.success(), "{out:?}");
    std::fs::create_dir(&offline).unwrap();
    std::fs::copy(a_dir.join("keys/tuf-targets.pem"), offline.join("tuf-targets.pem")).unwrap();
    copy_dir(&a_dir.join("tuf"), &repo_copy);
    let signed = signet(&["tuf", "sign", "--repo", repo_copy.to_str().unwrap(), "--keys", offline.to_str().unwrap(), "--trust", trust.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&signed.stdout).to_string();
    assert!(signed.status.success(), "{said}{}", String::from_utf8_lossy(&signed.stderr));
    let name = said.split_whitespace().nth(1).unwrap().trim_end_matches(';').to_string();
    std::fs::copy(repo_copy.join(&name), a_dir.join("tuf").join(&name)).unwrap();
    copy_dir(&repo_copy.join("targets"), &a_dir.join("tuf/targets"));
    let copied = Instant::now();
    wait_for("the follower serves the targets signed offline", 10, || signing_config(&agent, &b.url, &mut seen).contains("127.0.0.1:9/"));
    eprintln!("targets signed offline served by the follower {:?} after they were copied to the sequencer", copied.elapsed());
    assert_eq!(fetch(&agent, &b.url, &name).body, std::fs::read(repo_copy.join(&name)).unwrap(), "{name} as signed offline");
    same_on_both(&agent, &mut seen, &a.url, &b.url);

    // (c) The sequencer dies; the follower takes the lease and signs on from what was
    // published: its own documents as new targets, and timestamps past every version seen.
    let before = seen.newest();
    a.kill();
    wait_for("the new sequencer publishes its own documents", 20, || signing_config(&agent, &b.url, &mut seen).contains(&b.url));
    let (v, _) = seen.timestamp(&agent, &b.url);
    assert!(v > before, "the new sequencer's timestamp {v} does not follow the published {before}");
    wait_for("the new sequencer signs the timestamp again", 15, || seen.timestamp(&agent, &b.url).0 >= v + 2);
    assert_eq!(fetch(&agent, &b.url, "2.root.json").status, 404, "the root is kept");
    // Every version ever served went up one at a time and was signed once (checked by Seen).
    let (_, t) = seen.timestamp(&agent, &b.url);
    let files = current_files(&agent, &b.url, &t);
    assert!(files.iter().any(|(n, _)| n.starts_with("targets/")));
}

/// A follower on a database with no repository serves 503 and makes none (no keys, no
/// repository); it makes one only once it holds the lease.
#[test]
fn a_follower_waits_for_the_repository_and_makes_it_only_as_the_sequencer() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (off, on) = (dir.path().join("off.toml"), dir.path().join("on.toml"));
    std::fs::write(&off, "[tuf]\nenabled = false\n").unwrap();
    std::fs::write(&on, "[tuf]\ntimestamp_expiry_secs = 4\n").unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let mut a = Server::start(&a_dir, &["--storage", &db, "--config", off.to_str().unwrap()]);
    let copy = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let b = Server::start(&b_dir, &["--storage", &db, "--config", on.to_str().unwrap()]);
    let agent = agent();
    std::thread::sleep(Duration::from_secs(2));
    let r = fetch(&agent, &b.url, "1.root.json");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("not published yet"), "{}", r.text());
    assert!(!b_dir.join("keys/tuf-root.pem").exists() && !b_dir.join("tuf/1.root.json").exists(), "the follower made a repository");

    a.kill();
    wait_for("the new sequencer makes and serves the repository", 20, || fetch(&agent, &b.url, "timestamp.json").status == 200);
    assert_eq!(fetch(&agent, &b.url, "1.root.json").status, 200);
    assert!(b_dir.join("keys/tuf-root.pem").exists());
}

/// `signet doctor` names a TUF key that is not the one the root names: such an instance
/// could not sign the shared repository as the sequencer.
#[test]
fn doctor_names_a_tuf_key_the_root_does_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data, &[]);
    server.kill();
    let d = data.to_str().unwrap();
    let fine = signet(&["doctor", "--offline", "--data-dir", d]);
    assert!(String::from_utf8_lossy(&fine.stdout).contains("ok    TUF repository current"), "{fine:?}");
    let pkcs8 = aws_lc_rs::signature::Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap();
    std::fs::write(data.join("keys/tuf-timestamp.pem"), signet_core::pem::encode("PRIVATE KEY", pkcs8.as_ref())).unwrap();
    let out = signet(&["doctor", "--offline", "--data-dir", d]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL  keys/tuf-timestamp.pem is not the key the TUF root names for timestamp"), "{text}");
}

/// A sequencer whose TUF keys are not the ones the published root names signs nothing and
/// serves the repository as published (the instance that made it is gone).
#[test]
fn a_sequencer_with_other_tuf_keys_serves_what_is_published_and_signs_nothing() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[tuf]\ntimestamp_expiry_secs = 4\n").unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let args = ["--storage", db.as_str(), "--config", config.to_str().unwrap()];
    let mut a = Server::start(&a_dir, &args);
    let copy = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let pkcs8 = aws_lc_rs::signature::Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap();
    std::fs::write(b_dir.join("keys/tuf-timestamp.pem"), signet_core::pem::encode("PRIVATE KEY", pkcs8.as_ref())).unwrap();
    let b = Server::start(&b_dir, &args);
    let agent = agent();
    let mut seen = Seen::default();
    same_on_both(&agent, &mut seen, &a.url, &b.url);
    a.kill();
    // B takes the lease within about 3.5 s, and signs again every second or two if it can.
    std::thread::sleep(Duration::from_secs(8));
    let (v, t) = seen.timestamp(&agent, &b.url);
    assert_eq!(v, seen.newest(), "B served an older timestamp than A published");
    let root = fetch(&agent, &b.url, "1.root.json").json();
    let named = root["signed"]["roles"]["timestamp"]["keyids"][0].as_str().unwrap().to_string();
    let t: Value = serde_json::from_slice(&t).unwrap();
    assert_eq!(t["signatures"][0]["keyid"].as_str(), Some(named.as_str()), "a timestamp signed by a key the root does not name was published");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(seen.timestamp(&agent, &b.url).0, v, "B signed with keys the root does not name");
}

/// Issue 43: a ceremony on a PostgreSQL cluster. Root and targets move to 2 of 3 keys (files
/// here; tokens in `hsm.rs`), staged in the sequencer's data dir by `signet tuf publish`: the
/// sequencer adopts them and stores them in the database, the follower serves the same bytes,
/// and after a takeover the follower goes on signing timestamps (its old targets key, no
/// longer named, does not stop it: targets now come from ceremonies).
#[test]
fn a_ceremony_published_to_the_sequencer_reaches_every_instance_and_survives_a_takeover() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mut a, b, a_dir) = two_instances(dir.path(), &db);
    let agent = agent();
    let mut seen = Seen::default();
    same_on_both(&agent, &mut seen, &a.url, &b.url);

    let holders = dir.path().join("holders");
    std::fs::create_dir(&holders).unwrap();
    let pubkey = |name: &str| -> String {
        let key = holders.join(format!("{name}.pem"));
        let out = signet(&["tuf", "pubkey", "--make", "--key", key.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let public = holders.join(format!("{name}.pub"));
        std::fs::write(&public, &out.stdout).unwrap();
        public.to_str().unwrap().to_string()
    };
    let ceremony = dir.path().join("ceremony");
    let tuf = a_dir.join("tuf");
    let mut propose = vec!["tuf".to_string(), "propose".into(), "root".into(), "--repo".into(), tuf.to_str().unwrap().into()];
    propose.extend(["--out".into(), ceremony.to_str().unwrap().into(), "--root-threshold".into(), "2".into(), "--targets-threshold".into(), "2".into()]);
    for i in 1..=3 {
        propose.extend(["--root-key".into(), pubkey(&format!("root{i}")), "--targets-key".into(), pubkey(&format!("targets{i}"))]);
    }
    let out = signet(&propose.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trust = dir.path().join("trust");
    assert!(signet(&["trust", "export", "--data-dir", a_dir.to_str().unwrap(), "--out", trust.to_str().unwrap()]).status.success());
    let out = signet(&["tuf", "propose", "targets", "--repo", tuf.to_str().unwrap(), "--out", ceremony.to_str().unwrap(), "--trust", trust.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (root_file, targets_file) = (ceremony.join("2.root.json"), ceremony.join("2.targets.json"));
    for (key, file) in [
        (a_dir.join("keys/tuf-root.pem"), &root_file),
        (holders.join("root1.pem"), &root_file),
        (holders.join("root3.pem"), &root_file),
        (holders.join("targets2.pem"), &targets_file),
        (holders.join("targets3.pem"), &targets_file),
    ] {
        let out = signet(&["tuf", "sign", "--key", key.to_str().unwrap(), file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let published = Instant::now();
    let out = signet(&["tuf", "publish", "--data-dir", a_dir.to_str().unwrap(), "--wait", "20", root_file.to_str().unwrap(), targets_file.to_str().unwrap()]);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    wait_for("the follower serves the new root", 10, || fetch(&agent, &b.url, "2.root.json").status == 200);
    eprintln!("a ceremony's root served by the follower {:?} after `tuf publish` began", published.elapsed());
    assert!(fetch(&agent, &b.url, "2.root.json").body == std::fs::read(&root_file).unwrap(), "2.root.json is served with other bytes than the holders signed");
    let targets = fetch(&agent, &b.url, "2.targets.json").json();
    assert_eq!(targets["signatures"].as_array().unwrap().len(), 2);
    same_on_both(&agent, &mut seen, &a.url, &b.url);

    // The follower takes over and signs timestamps on, under the new root.
    let before = seen.newest();
    a.kill();
    wait_for("the new sequencer signs a timestamp", 20, || seen.timestamp(&agent, &b.url).0 > before + 1);
    let root = fetch(&agent, &b.url, "2.root.json").json();
    let named = root["signed"]["roles"]["timestamp"]["keyids"][0].as_str().unwrap().to_string();
    let (_, t) = seen.timestamp(&agent, &b.url);
    let t: Value = serde_json::from_slice(&t).unwrap();
    assert_eq!(t["signatures"][0]["keyid"].as_str(), Some(named.as_str()));
    assert_eq!(fetch(&agent, &b.url, "3.root.json").status, 404);
}
