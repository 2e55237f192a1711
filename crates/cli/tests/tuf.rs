//! The TUF repository at `/tuf/`: made at the first start, served, signed again before it
//! expires, and published again when the trust documents change. (Real clients bootstrap
//! from it in interop/python/test_tuf.py.)

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn tuf_json(agent: &ureq::Agent, server: &Server, name: &str) -> Value {
    get(agent, &format!("{}/tuf/{name}", server.url)).unwrap().json()
}

fn snapshot_version(agent: &ureq::Agent, server: &Server) -> u64 {
    tuf_json(agent, server, "timestamp.json")["signed"]["meta"]["snapshot.json"]["version"].as_u64().unwrap()
}

/// The target `name` as the current targets metadata lists it, fetched by its hash.
pub(crate) fn target(agent: &ureq::Agent, server: &Server, name: &str) -> Value {
    let snapshot = snapshot_version(agent, server);
    let snap = tuf_json(agent, server, &format!("{snapshot}.snapshot.json"));
    let targets_v = snap["signed"]["meta"]["targets.json"]["version"].as_u64().unwrap();
    let targets = tuf_json(agent, server, &format!("{targets_v}.targets.json"));
    let sha = targets["signed"]["targets"][name]["hashes"]["sha256"].as_str().unwrap().to_string();
    tuf_json(agent, server, &format!("targets/{sha}.{name}"))
}

#[test]
fn the_repository_is_served_and_its_timestamp_signed_again_before_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[tuf]\ntimestamp_expiry_secs = 4\n").unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let agent = agent();

    let root = tuf_json(&agent, &server, "1.root.json");
    assert_eq!(root["signed"]["_type"], "root");
    assert_eq!(root["signed"]["consistent_snapshot"], true);
    // No newer root: the 404 that ends a client's walk of the root chain.
    assert_eq!(get(&agent, &format!("{}/tuf/2.root.json", server.url)).unwrap().status, 404);
    // The targets are the instance's own trust documents.
    let served = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    assert_eq!(target(&agent, &server, "trusted_root.json"), served);
    let config_target = target(&agent, &server, "signing_config.v0.2.json");
    assert_eq!(config_target["mediaType"], "application/vnd.dev.sigstore.signingconfig.v0.2+json");

    // A 4 s timestamp is signed again at half its life: a new version, still valid.
    let first = tuf_json(&agent, &server, "timestamp.json")["signed"]["version"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let renewed = loop {
        let t = tuf_json(&agent, &server, "timestamp.json")["signed"].clone();
        if t["version"].as_u64().unwrap() > first {
            break t;
        }
        assert!(Instant::now() < deadline, "the timestamp was not signed again");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(renewed["meta"]["snapshot.json"]["version"].as_u64().unwrap(), snapshot_version(&agent, &server));

    // The role keys are private; nothing outside the repository is reachable through /tuf/.
    for role in ["root", "targets", "snapshot", "timestamp"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.join("keys").join(format!("tuf-{role}.pem"))).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{role}");
    }
    for probe in ["..%2Fkeys%2Ftuf-root.pem", "%2E%2E/keys/tuf-root.pem", "targets/..%2F..%2Fkeys%2Ftuf-root.pem", ".root.json.tmp1"] {
        let r = get(&agent, &format!("{}/tuf/{probe}", server.url)).unwrap();
        assert_eq!(r.status, 404, "{probe}");
        assert!(!r.text().contains("PRIVATE KEY"), "{probe}");
    }
}

#[test]
fn a_restart_at_a_new_address_publishes_new_targets_under_the_same_root() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let mut first = Server::start(dir.path(), &[]);
    let root = get(&agent, &format!("{}/tuf/1.root.json", first.url)).unwrap().text();
    let snapshot = snapshot_version(&agent, &first);
    let old_url = first.url.clone();
    first.kill();

    let second = Server::start(dir.path(), &[]);
    assert_ne!(second.url, old_url);
    assert_eq!(get(&agent, &format!("{}/tuf/1.root.json", second.url)).unwrap().text(), root, "the root is kept");
    assert_eq!(get(&agent, &format!("{}/tuf/2.root.json", second.url)).unwrap().status, 404);
    assert!(snapshot_version(&agent, &second) > snapshot, "new targets need a new snapshot");
    let config = target(&agent, &second, "signing_config.v0.2.json");
    assert!(config.to_string().contains(&second.url), "the published signing config names the new address: {config}");
    // The previous snapshot stays, for a client that read the previous timestamp.
    assert_eq!(get(&agent, &format!("{}/tuf/{snapshot}.snapshot.json", second.url)).unwrap().status, 200);
}

#[test]
fn the_repository_can_be_turned_off_and_bad_expiries_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let off = dir.path().join("off.toml");
    std::fs::write(&off, "[tuf]\nenabled = false\n").unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--config", off.to_str().unwrap()]);
    let r = get(&agent(), &format!("{}/tuf/1.root.json", server.url)).unwrap();
    assert_eq!(r.status, 404);
    assert!(r.text().contains("enabled = false"), "{}", r.text());
    assert!(!data.join("tuf").exists() && !data.join("keys").join("tuf-root.pem").exists());

    for (toml, named) in [
        ("[tuf]\ntimestamp_expiry_secs = 2\n", "tuf.timestamp_expiry_secs must be 4..="),
        ("[tuf]\ntimestamp_expiry_secs = 900000\n", "tuf.timestamp_expiry_secs (900000) must not be longer than tuf.snapshot_expiry_secs"),
        ("[tuf]\nexpiry = 3\n", "expiry"),
    ] {
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, toml).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("bad-data"))
            .arg("--config")
            .arg(&bad)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(named), "{toml}: {stderr}");
    }
}

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap()
}

#[test]
fn with_the_targets_key_offline_a_copy_is_signed_and_the_server_publishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (data, offline) = (dir.path().join("data"), dir.path().join("offline-keys"));
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[tuf]\ntimestamp_expiry_secs = 8\n").unwrap();
    let agent = agent();
    let mut first = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let old_url = first.url.clone();
    first.kill();
    // The root and targets keys leave the machine.
    std::fs::create_dir(&offline).unwrap();
    for role in ["root", "targets"] {
        let name = format!("tuf-{role}.pem");
        std::fs::rename(data.join("keys").join(&name), offline.join(&name)).unwrap();
    }

    // A new address changes the trust documents; without the targets key the server keeps
    // serving the targets it has, and says why.
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    assert!(target(&agent, &server, "signing_config.v0.2.json").to_string().contains(&old_url));
    let status = signet(&["tuf", "status", "--data-dir", data.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    assert!(text.contains("root        version 1") && text.contains("key offline") && text.contains("target      trusted_root.json"), "{text}");

    // Signed on a copy where the key is, and carried back.
    let trust = dir.path().join("trust");
    assert!(signet(&["trust", "export", "--data-dir", data.to_str().unwrap(), "--out", trust.to_str().unwrap()]).status.success());
    let copy = dir.path().join("copy");
    copy_dir(&data.join("tuf"), &copy);
    let signed = signet(&["tuf", "sign", "--repo", copy.to_str().unwrap(), "--keys", offline.to_str().unwrap(), "--trust", trust.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&signed.stdout);
    assert!(signed.status.success() && said.contains("targets.json; copy it and targets/"), "{said}{}", String::from_utf8_lossy(&signed.stderr));
    let version = said.split_whitespace().nth(1).unwrap().trim_end_matches(';').trim_end_matches(".targets.json").to_string();
    std::fs::copy(copy.join(format!("{version}.targets.json")), data.join("tuf").join(format!("{version}.targets.json"))).unwrap();
    copy_dir(&copy.join("targets"), &data.join("tuf").join("targets"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !target(&agent, &server, "signing_config.v0.2.json").to_string().contains(&server.url) {
        assert!(Instant::now() < deadline, "the server did not publish the targets signed offline");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Bad input is named, and nothing is signed.
    let no_trust = signet(&["tuf", "sign", "--repo", copy.to_str().unwrap(), "--keys", offline.to_str().unwrap(), "--trust", "/nonexistent"]);
    assert_eq!(no_trust.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_trust.stderr).contains("signet trust export"));
    let no_key = signet(&["tuf", "sign", "--repo", copy.to_str().unwrap(), "--keys", dir.path().to_str().unwrap(), "--trust", trust.to_str().unwrap()]);
    assert_eq!(no_key.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_key.stderr).contains("holds no tuf-targets.pem"));
    std::fs::copy(trust.join("signing_config.json"), trust.join("trusted_root.json")).unwrap();
    let swapped = signet(&["tuf", "sign", "--repo", copy.to_str().unwrap(), "--keys", offline.to_str().unwrap(), "--trust", trust.to_str().unwrap()]);
    assert_eq!(swapped.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&swapped.stderr).contains("trusted_root.json: mediaType"), "{}", String::from_utf8_lossy(&swapped.stderr));
}

/// `signet tuf rotate`: offline only; a bad role is a usage error; a rotation that stopped
/// after the new root was written (the new key still beside the old as `.next`) is finished
/// by running it again, and the server then serves metadata the new key signed.
#[test]
fn a_key_rotation_is_offline_and_one_stopped_part_way_is_finished_by_running_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let mut server = Server::start(&data, &[]);
    let busy = signet(&["tuf", "rotate", "--data-dir", d, "--role", "timestamp"]);
    assert!(!busy.status.success() && String::from_utf8_lossy(&busy.stderr).contains("stop the server first"));
    server.kill();
    let bad = signet(&["tuf", "rotate", "--data-dir", d, "--role", "mirror"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected root, targets, snapshot or timestamp"));

    // Without the root key, nothing is written.
    let root_key = data.join("keys").join("tuf-root.pem");
    let offline = dir.path().join("offline-root.pem");
    std::fs::rename(&root_key, &offline).unwrap();
    let no_root = signet(&["tuf", "rotate", "--data-dir", d, "--role", "timestamp"]);
    assert!(!no_root.status.success() && String::from_utf8_lossy(&no_root.stderr).contains("--root-key"));
    assert!(!data.join("keys").join("tuf-timestamp.pem.next").exists());
    std::fs::rename(&offline, &root_key).unwrap();

    let key = data.join("keys").join("tuf-timestamp.pem");
    let old_key = std::fs::read(&key).unwrap();
    let rotated = signet(&["tuf", "rotate", "--data-dir", d, "--role", "timestamp"]);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    assert_ne!(std::fs::read(&key).unwrap(), old_key);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);

    // As if the run had stopped before its last step: the new key still `.next`, the old in place.
    let next = data.join("keys").join("tuf-timestamp.pem.next");
    std::fs::rename(&key, &next).unwrap();
    std::fs::write(&key, &old_key).unwrap();
    let finished = signet(&["tuf", "rotate", "--data-dir", d, "--role", "timestamp"]);
    assert!(finished.status.success(), "{}", String::from_utf8_lossy(&finished.stderr));
    assert!(String::from_utf8_lossy(&finished.stdout).contains("finished"), "{}", String::from_utf8_lossy(&finished.stdout));
    assert!(!next.exists() && std::fs::read(&key).unwrap() != old_key);

    // The server serves root 2 and a timestamp whose signature is by the key root 2 names.
    let server = Server::start(&data, &[]);
    let agent = agent();
    let root = tuf_json(&agent, &server, "2.root.json");
    let named = root["signed"]["roles"]["timestamp"]["keyids"][0].as_str().unwrap().to_string();
    let timestamp = tuf_json(&agent, &server, "timestamp.json");
    assert_eq!(timestamp["signatures"][0]["keyid"], named.as_str());
    assert_eq!(get(&agent, &format!("{}/tuf/3.root.json", server.url)).unwrap().status, 404, "one rotation, one new root");
}

/// The ceremony's failure paths against a running server: an unsigned root is refused by
/// `publish` itself; one put in `staged/` by hand is moved aside by the server with its reason,
/// which `doctor` reports; a root naming a timestamp key the instance lacks stays staged,
/// and `publish --wait` says it was not published.
#[test]
fn staged_metadata_the_server_cannot_take_up_is_refused_or_kept_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let agent = agent();
    let (d, tuf) = (data.to_str().unwrap(), data.join("tuf"));
    let ceremony = dir.path().join("ceremony");
    let c = ceremony.to_str().unwrap();
    let text = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);

    // Unsigned: publish refuses it and stages nothing.
    let out = signet(&["tuf", "propose", "root", "--repo", tuf.to_str().unwrap(), "--out", c]);
    assert!(out.status.success(), "{}", text(&out));
    let root = ceremony.join("2.root.json");
    let out = signet(&["tuf", "publish", "--data-dir", d, root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("0 valid signatures of the 1 needed from the 1 root keys"), "{}", text(&out));
    assert!(!tuf.join("staged/2.root.json").exists());

    // Staged by hand all the same: the server moves it aside, and doctor says why.
    std::fs::create_dir_all(tuf.join("staged")).unwrap();
    std::fs::copy(&root, tuf.join("staged/2.root.json")).unwrap();
    let refused = tuf.join("staged/2.root.json.refused.why");
    let started = std::time::Instant::now();
    while !refused.exists() {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the server did not refuse the staged root");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(std::fs::read_to_string(&refused).unwrap().contains("0 valid signatures"));
    assert_eq!(get(&agent, &format!("{}/tuf/2.root.json", server.url)).unwrap().status, 404);
    let doctor = signet(&["doctor", "--data-dir", d, "--offline"]);
    assert!(text(&doctor).contains("2.root.json staged by `signet tuf publish` was refused: "), "{}", text(&doctor));

    // A new timestamp key this instance does not hold: checked and staged, never published.
    let other = dir.path().join("other-timestamp.pem");
    assert!(signet(&["tuf", "pubkey", "--make", "--key", other.to_str().unwrap()]).status.success());
    let out = signet(&["tuf", "propose", "root", "--repo", tuf.to_str().unwrap(), "--out", c, "--timestamp-key", other.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(signet(&["tuf", "sign", "--key", data.join("keys/tuf-root.pem").to_str().unwrap(), root.to_str().unwrap()]).status.success());
    let out = signet(&["tuf", "publish", "--data-dir", d, "--wait", "4", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not published after 4 s"), "{}", text(&out));
    assert!(!tuf.join("staged/2.root.json.refused").exists(), "an earlier refusal is cleared when the file is staged again");
    let doctor = signet(&["doctor", "--data-dir", d, "--offline"]);
    assert!(text(&doctor).contains("TUF 2.root.json is staged and not yet published"), "{}", text(&doctor));
    let status = text(&signet(&["tuf", "status", "--data-dir", d]));
    assert!(status.contains("staged      2.root.json"), "{status}");
    assert_eq!(get(&agent, &format!("{}/tuf/2.root.json", server.url)).unwrap().status, 404);
}
