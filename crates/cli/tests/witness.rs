//! Witnessing end to end: one signet instance witnesses another's Rekor v2 log, which
//! serves its checkpoints cosigned; the witness's HTTP answers follow c2sp.org/tlog-witness.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use signet_core::note::SignedNote;
use signet_core::notekey::VerifierKey;

const WITNESS_NAME: &str = "witness.test/w1";

/// `signet witness vkey`: makes the key if missing and prints its vkey.
fn vkey(key: &Path, name: &str, log: bool) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_signet"));
    cmd.args(["witness", "vkey", "--name", name, "--key"]).arg(key);
    if log {
        cmd.arg("--log");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn write_config(dir: &Path, text: &str) -> String {
    let path = dir.join("signet.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Waits for the log's served checkpoint to reach `size` with a cosignature by `witness`.
fn wait_cosigned(agent: &ureq::Agent, url: &str, witness: &VerifierKey, size: u64) -> SignedNote {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = get(agent, &format!("{url}/api/v2/checkpoint")).unwrap().text();
        let note = SignedNote::parse(&text).unwrap();
        if note.checkpoint.size >= size && witness.verify(&note).is_some() {
            return note;
        }
        assert!(Instant::now() < deadline, "no checkpoint of size {size} cosigned by {witness} in 30 s; last served:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_signet_log_is_cosigned_by_a_signet_witness_and_served_with_the_cosignature() {
    let (wdir, ldir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Keys first, as an operator would exchange them: the log's Ed25519 checkpoint key, named
    // by its origin (the host of a dev instance's URL), and the witness's cosigning key.
    let log_vkey = vkey(&ldir.path().join("keys/rekor-v2-note.pem"), "127.0.0.1", true);
    let witness_vkey = vkey(&wdir.path().join("keys/witness.pem"), WITNESS_NAME, false);
    let witness_key = VerifierKey::parse(&witness_vkey).unwrap();

    let wconf = write_config(
        wdir.path(),
        &format!("[witness]\nname = \"{WITNESS_NAME}\"\n[[witness.logs]]\norigin = \"127.0.0.1\"\nvkeys = [\"{log_vkey}\"]\n"),
    );
    let mut witness = Server::start(wdir.path(), &["--config", &wconf]);
    assert_eq!(std::fs::read_to_string(wdir.path().join("witness.vkey")).unwrap().trim(), witness_vkey);
    let lconf = write_config(
        ldir.path(),
        &format!("[log.witnesses]\nquorum = 1\nmembers = [{{ url = \"{}\", vkey = \"{witness_vkey}\" }}]\n", witness.url),
    );
    let log = Server::start(ldir.path(), &["--config", &lconf]);
    let agent = agent();

    // The genesis entry's checkpoint is cosigned first (taken on trust: old size 0).
    let first = wait_cosigned(&agent, &log.url, &witness_key, 1);
    // The served checkpoint is still the log's: its ECDSA and Ed25519 lines both verify.
    let log_key = VerifierKey::parse(&log_vkey).unwrap();
    assert!(log_key.verify(&first).is_some());

    // More entries: the next cosignature needs a consistency proof from what the witness holds.
    let signer = Signer::new();
    for i in 0..5 {
        let r = post_json(&agent, &format!("{}/api/v2/log/entries", log.url), &signer.v2_entry(format!("w{i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let later = wait_cosigned(&agent, &log.url, &witness_key, 6);
    assert!(later.checkpoint.size > first.checkpoint.size);

    // The witness restarts and remembers: it refuses an old size it no longer holds, with the
    // size it holds, and goes on cosigning the log's new checkpoints.
    witness.kill();
    let witness = Server::start_on(wdir.path(), witness.url.trim_start_matches("http://"), &["--config", &wconf]);
    let stale = format!("old 0\n\n{}", strip_cosignatures(&later, &log_key));
    let r = post_raw(&agent, &format!("{}/add-checkpoint", witness.url), "text/plain", stale.into_bytes()).unwrap();
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/x.tlog.size"));
    let held: u64 = r.text().trim().parse().unwrap();
    assert!(held >= later.checkpoint.size, "the witness forgot: holds {held}");
    let r = post_json(&agent, &format!("{}/api/v2/log/entries", log.url), &signer.v2_entry(b"after restart")).unwrap();
    assert_eq!(r.status, 201);
    wait_cosigned(&agent, &log.url, &witness_key, held + 1);

    // A bundle: its checkpoint is the log's own, so a witness policy refuses it; with the
    // served, cosigned copy of the same checkpoint in its place, the policy is met.
    let work = tempfile::tempdir().unwrap();
    let (bundle, artifact, root, issuer) = sign_v2(&log, work.path(), &[]);
    let policy = work.path().join("witnesses.policy");
    std::fs::write(&policy, format!("witness w1 {witness_vkey}\ngroup all-of-them all w1\nquorum all-of-them\n")).unwrap();
    let verify = |policy: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_signet"));
        cmd.args(["verify-bundle", "--bundle", bundle.to_str().unwrap(), "--trusted-root", root.to_str().unwrap()]);
        cmd.args(["--certificate-identity", "you@example.com", "--certificate-oidc-issuer", &issuer]);
        if let Some(p) = policy {
            cmd.arg("--witness-policy").arg(p);
        }
        cmd.arg(&artifact).output().unwrap()
    };
    assert!(verify(None).status.success(), "{}", String::from_utf8_lossy(&verify(None).stderr));
    let refused = verify(Some(&policy));
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("lacks the witness quorum"), "{}", String::from_utf8_lossy(&refused.stderr));
    // sign-bundle --witness-wait puts the witnesses' cosigned copy of the same checkpoint in
    // (nothing else appends here, so the witness cosigns exactly the entry's checkpoint).
    let second = work.path().join("second");
    std::fs::create_dir(&second).unwrap();
    let (witnessed, _, _, _) = sign_v2(&log, &second, &["--witness-wait", "20"]);
    std::fs::copy(&witnessed, &bundle).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let envelope = json["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"]["envelope"].as_str().unwrap();
    assert!(witness_key.verify(&SignedNote::parse(envelope).unwrap()).is_some(), "{envelope}");
    let met = verify(Some(&policy));
    assert!(met.status.success(), "{}", String::from_utf8_lossy(&met.stderr));

    // The witness knows the log by its key: an online rotation of the v2 log to a new key is
    // refused (409, saying why), while the CT log, which no witness follows, rotates.
    let token = crate::shards::admin_token(&["--data-dir".as_ref(), ldir.path().as_os_str()]);
    let log_url = log.url.clone();
    let rotate = |which: &str| {
        (0..40)
            .map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                Command::new(env!("CARGO_BIN_EXE_signet")).args(["admin", "log", "rotate", "--log", which, "--url", &log_url, "--token", &token]).output().unwrap()
            })
            .find(|o| !String::from_utf8_lossy(&o.stderr).contains("HTTP 401"))
            .expect("the admin token was never accepted")
    };
    let refused = rotate("rekor-v2");
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("409") && why.contains("witnesses") && why.contains("by its key"), "{why}");
    assert!(rotate("ct").status.success());
    let r = post_json(&agent, &format!("{}/api/v2/log/entries", log.url), &signer.v2_entry(b"after the refused rotation")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
}

/// Issue 41, "Restore never forks": a copy of the data dir from before the witness cosigned
/// a larger tree (a disk snapshot restored, which carries this instance's own watermarks as
/// they were then) is behind its witness. The witness's 409 says so; the instance stops
/// taking appends on every log, and says why, while reads go on.
#[test]
fn a_log_behind_its_witness_refuses_appends() {
    let (wdir, ldir, copy) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log_vkey = vkey(&ldir.path().join("keys/rekor-v2-note.pem"), "127.0.0.1", true);
    let witness_vkey = vkey(&wdir.path().join("keys/witness.pem"), WITNESS_NAME, false);
    let witness_key = VerifierKey::parse(&witness_vkey).unwrap();
    let wconf = write_config(
        wdir.path(),
        &format!("[witness]\nname = \"{WITNESS_NAME}\"\n[[witness.logs]]\norigin = \"127.0.0.1\"\nvkeys = [\"{log_vkey}\"]\n"),
    );
    let witness = Server::start(wdir.path(), &["--config", &wconf]);
    let members = format!("[log.witnesses]\nquorum = 1\nmembers = [{{ url = \"{}\", vkey = \"{witness_vkey}\" }}]\n", witness.url);
    let lconf = write_config(ldir.path(), &members);
    let (agent, signer) = (agent(), Signer::new());

    let log = Server::start(ldir.path(), &["--config", &lconf]);
    let early = wait_cosigned(&agent, &log.url, &witness_key, 1).checkpoint.size;
    drop(log);
    let snapshot = copy.path().join("data");
    copy_dir(ldir.path(), &snapshot);

    let log = Server::start(ldir.path(), &["--config", &lconf]);
    for i in 0..3 {
        let r = post_json(&agent, &format!("{}/api/v2/log/entries", log.url), &signer.v2_entry(format!("b{i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let cosigned = wait_cosigned(&agent, &log.url, &witness_key, early + 3).checkpoint.size;
    drop(log);

    let sconf = write_config(&snapshot, &members);
    let restored = Server::start(&snapshot, &["--config", &sconf]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let ready = loop {
        let ready = get(&agent, &format!("{}/readyz", restored.url)).unwrap();
        if ready.status == 503 || Instant::now() > deadline {
            break ready;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!((ready.status, ready.json()["status"].as_str()), (503, Some("appends refused")), "{}", ready.text());
    for path in ["/api/v2/log/entries", "/api/v1/log/entries"] {
        let entry = if path.contains("v2") { signer.v2_entry(b"after the restore") } else { signer.v1_entry(b"after the restore") };
        let r = post_json(&agent, &format!("{}{path}", restored.url), &entry).unwrap();
        assert_eq!(r.status, 503, "{path}: {}", r.text());
        let why = r.text();
        assert!(why.contains(&format!("cosigned the Rekor v2 log at {cosigned} entries")) && why.contains("signet restore"), "{why}");
    }
    // Reads go on.
    assert_eq!(get(&agent, &format!("{}/api/v2/checkpoint", restored.url)).unwrap().status, 200);
}


/// Signs a file with `sign-bundle` over the Rekor v2 log: (bundle, artifact, trusted root, issuer).
fn sign_v2(server: &Server, dir: &Path, extra: &[&str]) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf, String) {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap();
        assert!(out.status.success(), "signet {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let data = server.data_dir.to_str().unwrap();
    let trust = dir.join("trust");
    run(&["trust", "export", "--data-dir", data, "--out", trust.to_str().unwrap(), "--url", &server.url]);
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(trust.join("signing_config.json")).unwrap()).unwrap();
    let v2_only: Vec<serde_json::Value> =
        config["rekorTlogUrls"].as_array().unwrap().iter().filter(|s| s["majorApiVersion"] == 2).cloned().collect();
    config["rekorTlogUrls"] = serde_json::json!(v2_only);
    let signing_config = dir.join("signing_config_v2.json");
    std::fs::write(&signing_config, config.to_string()).unwrap();
    let token = run(&["dev-token", "--data-dir", data, "--subject", "you@example.com"]).trim().to_string();
    let (file, bundle) = (dir.join("artifact.txt"), dir.join("artifact.sigstore.json"));
    std::fs::write(&file, b"witnessed artifact").unwrap();
    let root = trust.join("trusted_root.json");
    let mut args = vec![
        "sign-bundle", "--identity-token", &token, "--bundle", bundle.to_str().unwrap(),
        "--signing-config", signing_config.to_str().unwrap(), "--trusted-root", root.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push(file.to_str().unwrap());
    run(&args);
    (bundle, file, root, format!("{}/oidc", server.url))
}

/// The note with only the log's own signature lines.
fn strip_cosignatures(note: &SignedNote, _log: &VerifierKey) -> String {
    let lines: String = note
        .signatures
        .iter()
        .filter(|s| s.name == note.checkpoint.origin)
        .map(signet_core::notekey::signature_line)
        .collect();
    format!("{}\n{lines}", note.text)
}

#[test]
fn the_witness_answers_as_the_spec_says() {
    let (wdir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log_vkey = vkey(&other.path().join("log.pem"), "log.test", true);
    let wconf = write_config(wdir.path(), &format!("[[witness.logs]]\norigin = \"log.test\"\nvkeys = [\"{log_vkey}\"]\n"));
    let witness = Server::start(wdir.path(), &["--config", &wconf]);
    let agent = agent();
    let post = |body: &str, ct: &str| post_raw(&agent, &format!("{}/add-checkpoint", witness.url), ct, body.as_bytes().to_vec()).unwrap();

    // The log's key signs a checkpoint here (signet witness vkey made it; the test signs with it).
    let key = signet_keys::NoteSigner::load_or_generate(&other.path().join("log.pem"), "log.test", signet_core::notekey::NoteKeyType::Ed25519).unwrap();
    let note = |size: u64, root: [u8; 32]| {
        let text = signet_core::note::Checkpoint { origin: "log.test".into(), size, root_hash: root }.body();
        format!("{text}\n{}", signet_core::notekey::signature_line(&key.sign(&text, 0).unwrap()))
    };
    let r = post(&format!("old 0\n\n{}", note(3, [1; 32])), "text/plain");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().starts_with("\u{2014} ") && r.text().ends_with('\n'));
    // The default name is the instance's host + "/witness".
    assert!(r.text().starts_with("\u{2014} 127.0.0.1/witness "), "{}", r.text());

    for (body, status, says) in [
        (format!("old 0\n\n{}", note(5, [2; 32])), 409, "3\n"),
        (format!("old 3\n\n{}", note(3, [9; 32])), 409, "3\n"),
        (format!("old 3\n\n{}", note(2, [2; 32])), 400, "above"),
        (format!("old 3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n{}", note(5, [2; 32])), 422, "does not verify"),
        (format!("old 3\n\n{}", note(5, [2; 32]).replace("log.test\n5", "log.test\n6")), 403, "no signature"),
        ("old 0\n\nother.test\n1\nAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n\n\u{2014} other.test AAAAAAAA\n".to_string(), 404, "does not witness"),
        ("old x\n\n".to_string(), 400, "malformed"),
    ] {
        let r = post(&body, "text/plain");
        assert_eq!(r.status, status, "{body:?}: {}", r.text());
        assert!(r.text().contains(says), "{body:?}: {}", r.text());
    }
    // A JSON content type is not what this route takes.
    assert_eq!(post("old 0\n\n", "application/json").status, 415);

    // Each answer is counted by its outcome.
    let metrics = get(&agent, &format!("{}/metrics", witness.url)).unwrap().text();
    for outcome in ["cosigned", "stale_old_size", "fork", "old_above_new", "bad_proof", "bad_signature", "unknown_log", "malformed"] {
        assert!(metrics.contains(&format!("signet_witness_requests_total{{outcome=\"{outcome}\"}} 1\n")), "{outcome}:\n{metrics}");
    }
}

#[test]
fn a_witness_polls_a_log_that_does_not_submit_and_follows_it_through_its_tiles() {
    let (wdir, ldir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = Server::start(ldir.path(), &[]);
    // The log's ECDSA key, as a PEM file: the Rekor v2 way of signing checkpoints.
    let spki = signet_keys::Signer::load_or_generate(&ldir.path().join("keys/rekor-v2.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap().spki_der().to_vec();
    let pem_path = wdir.path().join("log.pem");
    std::fs::write(&pem_path, signet_core::pem::encode("PUBLIC KEY", &spki)).unwrap();
    let conf = write_config(
        wdir.path(),
        &format!(
            "[witness]\npoll_interval_secs = 1\n[[witness.logs]]\norigin = \"127.0.0.1\"\npublic_keys = [\"{}\"]\nurl = \"{}/api/v2\"\n",
            pem_path.display(),
            log.url
        ),
    );
    let witness = Server::start(wdir.path(), &["--config", &conf]);
    let agent = agent();
    let witness_key = VerifierKey::parse(std::fs::read_to_string(wdir.path().join("witness.vkey")).unwrap().trim()).unwrap();
    let latest = |size: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = get(&agent, &format!("{}/witness/checkpoint?origin=127.0.0.1", witness.url)).unwrap();
            if r.status == 200 {
                let note = SignedNote::parse(&r.text()).unwrap();
                if note.checkpoint.size >= size {
                    assert!(witness_key.verify(&note).is_some(), "{}", r.text());
                    return note;
                }
            }
            assert!(Instant::now() < deadline, "the witness did not cosign size {size} in 30 s: {} {}", r.status, r.text());
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    latest(1);
    let missing = get(&agent, &format!("{}/witness/checkpoint", witness.url)).unwrap();
    assert_eq!((missing.status, missing.header("content-type")), (400, Some("application/json")), "{}", missing.text());
    // 300 entries: more than a full tile, so the proof comes from full and partial tiles.
    let signer = Signer::new();
    for i in 0..300 {
        let r = post_json(&agent, &format!("{}/api/v2/log/entries", log.url), &signer.v2_entry(format!("p{i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201);
    }
    let grown = latest(301);
    assert_eq!(grown.checkpoint.size, 301);
    let metrics = get(&agent, &format!("{}/metrics", witness.url)).unwrap().text();
    assert!(!metrics.contains("outcome=\"bad_proof\"} 1"), "{metrics}");
}

/// The monitor inside `serve` follows the instance's own Rekor v2 log, and goes on following
/// it across an online rotation: the new tree under the new key is a new range, not a tree
/// that shrank or a checkpoint signed by a stranger.
#[test]
fn serve_runs_the_monitor_over_its_own_log() {
    let dir = tempfile::tempdir().unwrap();
    let watch = dir.path().join("watch.toml");
    std::fs::write(&watch, "emails = [\"you@example.com\"]\n").unwrap();
    let conf = write_config(dir.path(), &format!("[monitor]\nwatch = \"{}\"\ninterval_secs = 1\n", watch.display()));
    let server = Server::start(&dir.path().join("data"), &["--config", &conf]);
    let agent = agent();
    let alerts = |kind: &str| {
        let metrics = get(&agent, &format!("{}/metrics", server.url)).unwrap().text();
        metrics
            .lines()
            .find(|l| l.starts_with("signet_monitor_alerts_total{") && l.contains(&format!("kind=\"{kind}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    let matches = || alerts("match");
    let work = tempfile::tempdir().unwrap();
    sign_v2(&server, work.path(), &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while matches() != Some(1) {
        assert!(Instant::now() < deadline, "no match alert from the monitor inside serve in 30 s: {:?}", matches());
        std::thread::sleep(Duration::from_millis(200));
    }
    // Exactly one: later polls don't raise it again.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(matches(), Some(1));
    assert!(dir.path().join("data/monitor").is_dir());

    // Rotated online: the next signature lands in the new tree, and is found there.
    let token = crate::shards::admin_token(&["--data-dir".as_ref(), dir.path().join("data").as_os_str()]);
    crate::log_key_rotation::rotate_online(&server.url, &token, "rekor-v2");
    let work = tempfile::tempdir().unwrap();
    sign_v2(&server, work.path(), &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while matches() != Some(2) {
        assert!(Instant::now() < deadline, "no match alert in the rotated log in 30 s: {:?}", matches());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(alerts("rotated"), Some(1));
    for kind in ["bad_signature", "inconsistent", "origin_changed", "entries_mismatch"] {
        assert_eq!(alerts(kind), Some(0), "the monitor raised {kind} over an online rotation");
    }
    let state: serde_json::Value = std::fs::read_dir(dir.path().join("data/monitor"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .unwrap();
    assert_eq!(state["retired"].as_array().map(Vec::len), Some(1), "{state}");
    assert!(state["broken"].is_null(), "{state}");
}

/// `signet monitor --rekor-v1` follows a Rekor v1 log into its next shard: the online rotation
/// (a new tree, key and origin) raises `rotated`, not `origin_changed`, and the entries of the
/// new shard are matched at their log-wide indices.
#[test]
fn the_monitor_follows_a_rekor_v1_shard_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &[]);
    let agent = agent();
    let signer = Signer::new();
    let watch = dir.path().join("watch.toml");
    std::fs::write(&watch, format!("keys = [\"sha256:{}\"]\n", hex::encode(signet_core::hash::sha256(&signer.spki)))).unwrap();
    let append = |i: u32| {
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(format!("m{i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap()
    };
    let monitor = |n: u32| {
        let trust = dir.path().join(format!("trust-{n}"));
        let export = Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["trust", "export", "--data-dir", data.to_str().unwrap(), "--out", trust.to_str().unwrap(), "--url", &server.url])
            .output()
            .unwrap();
        assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
        let out = Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["monitor", "--once", "--rekor-v1", &server.url, "--watch", watch.to_str().unwrap()])
            .args(["--state", dir.path().join("state").to_str().unwrap()])
            .args(["--trusted-root", trust.join("trusted_root.json").to_str().unwrap()])
            .env("SIGNET_LOG", "warn")
            .output()
            .unwrap();
        let alerts: Vec<serde_json::Value> =
            String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (out.status.code(), alerts, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let matched = |alerts: &[serde_json::Value]| -> Vec<u64> {
        alerts.iter().filter(|a| a["kind"] == "match").map(|a| a["entry"]["index"].as_u64().unwrap()).collect()
    };

    let before = vec![append(0), append(1)];
    let (code, alerts, stderr) = monitor(0);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(matched(&alerts), before, "{alerts:?}");

    let token = crate::shards::admin_token(&["--data-dir".as_ref(), data.as_os_str()]);
    crate::log_key_rotation::rotate_online(&server.url, &token, "rekor-v1");
    let after = vec![append(2), append(3)];
    assert!(after[0] > before[1]);
    let (code, alerts, stderr) = monitor(1);
    assert_eq!(code, Some(0), "{stderr}\n{alerts:?}");
    let kinds: Vec<&str> = alerts.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "rotated").count(), 1, "{alerts:?}");
    assert!(kinds.iter().all(|k| *k == "rotated" || *k == "match"), "{alerts:?}");
    assert_eq!(matched(&alerts), after, "the new shard's entries at their log-wide indices: {alerts:?}");

    // Followed from there on: nothing new, nothing raised.
    let (code, alerts, stderr) = monitor(2);
    assert_eq!((code, alerts.len()), (Some(0), 0), "{stderr}\n{alerts:?}");
}
