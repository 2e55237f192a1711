//! `signet admin log rotate --log ct|rekor-v2`: the CT log and the Rekor v2 log rotate into
//! new logs, offline or online. After it, the new key signs (a new SCT log ID, a new
//! checkpoint key), the trust documents list both keys with adjoining windows (and TUF
//! publishes them), and a rotation cut short is finished by running it again. Online, under
//! writers, nothing acknowledged is lost or answered twice, on one instance (SQLite) and on
//! two sharing PostgreSQL, where the other instance follows within seconds.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use common::*;
use der::{Decode, Encode};
use serde_json::Value;
use signet_core::{b64, hash::sha256, pem};
use signet_log::{checkpoint, merkle};

fn rotate(data: &std::path::Path, log: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["admin", "log", "rotate", "--log", log, "--data-dir"])
        .arg(data)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spki(path: &std::path::Path) -> Vec<u8> {
    signet_keys::Signer::load_or_generate(path, signet_keys::Algorithm::EcdsaP256Sha256).unwrap().spki_der().to_vec()
}

/// A certificate from the CA; returns its SCT's log ID and timestamp (ms), having checked the
/// SCT's signature with `ct_spki` over the precertificate.
fn sct_of_new_cert(agent: &ureq::Agent, server: &Server, ct_spki: &[u8]) -> ([u8; 32], u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["dev-token", "--data-dir"])
        .arg(&server.data_dir)
        .args(["--subject", "alice@example.com"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let r = post_raw(agent, &format!("{}/api/v2/signingCert", server.url), "application/json", cert_request(&token, "alice@example.com")).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let chain = r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"].clone();
    let leaf = x509_cert::Certificate::from_der(&pem::decode_first(chain[0].as_str().unwrap().as_bytes()).unwrap().der).unwrap();
    let issuer = x509_cert::Certificate::from_der(&pem::decode_first(chain[1].as_str().unwrap().as_bytes()).unwrap().der).unwrap();
    let mut tbs = leaf.tbs_certificate.clone();
    let exts = tbs.extensions.as_mut().unwrap();
    let pos = exts.iter().position(|e| e.extn_id == signet_ca::authority::OID_CT_SCT_LIST).unwrap();
    let ext = exts.remove(pos);
    let list = der::asn1::OctetString::from_der(ext.extn_value.as_bytes()).unwrap();
    let sct = &list.as_bytes()[4..];
    let log_id: [u8; 32] = sct[1..33].try_into().unwrap();
    let timestamp = u64::from_be_bytes(sct[33..41].try_into().unwrap());
    let sig_len = u16::from_be_bytes([sct[45], sct[46]]) as usize;
    let issuer_key_hash = sha256(&issuer.tbs_certificate.subject_public_key_info.to_der().unwrap());
    let signed = signet_ca::ct::precert_leaf(timestamp, &issuer_key_hash, &tbs.to_der().unwrap()).unwrap();
    assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(ct_spki, &signed, &sct[47..47 + sig_len]), "the SCT does not verify with the CT key expected");
    (log_id, timestamp)
}

/// Appends a v2 entry; checks it as a Rekor v2 client does (checkpoint signed by `v2_spki`
/// under the host's name, inclusion proof); returns its log index and checkpoint origin.
fn v2_append(agent: &ureq::Agent, server: &Server, signer: &Signer, artifact: &[u8], v2_spki: &[u8]) -> (u64, String) {
    let r = post_json(agent, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(artifact)).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let e = r.json();
    assert_eq!(e["logId"]["keyId"], b64::encode(sha256(v2_spki)));
    let p = &e["inclusionProof"];
    let cp = checkpoint::verify(p["checkpoint"]["envelope"].as_str().unwrap(), "127.0.0.1", v2_spki).unwrap();
    let body = b64::decode(e["canonicalizedBody"].as_str().unwrap()).unwrap();
    let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| b64::decode(h.as_str().unwrap()).unwrap().try_into().unwrap()).collect();
    let index: u64 = e["logIndex"].as_str().unwrap().parse().unwrap();
    merkle::verify_inclusion(&merkle::leaf_hash(&body), index, cp.size, &hashes, &cp.root_hash).unwrap();
    (index, cp.origin)
}

fn key_of(log: &Value) -> Vec<u8> {
    b64::decode(log["publicKey"]["rawBytes"].as_str().unwrap()).unwrap()
}

/// Unix seconds of an RFC 3339 time as the trust documents write it (`YYYY-MM-DDTHH:MM:SSZ`).
fn unix(rfc3339: &Value) -> i64 {
    let s = rfc3339.as_str().unwrap();
    let n = |r: std::ops::Range<usize>| s[r].parse::<u8>().unwrap();
    let t = der::DateTime::new(s[0..4].parse().unwrap(), n(5..7), n(8..10), n(11..13), n(14..16), n(17..19)).unwrap();
    t.unix_duration().as_secs() as i64
}

/// The target `name` as the TUF repository's current targets list it.
fn tuf_target(agent: &ureq::Agent, url: &str, name: &str) -> Value {
    let tuf = |n: &str| get(agent, &format!("{url}/tuf/{n}")).unwrap().json();
    let snapshot = tuf("timestamp.json")["signed"]["meta"]["snapshot.json"]["version"].as_u64().unwrap();
    let targets_v = tuf(&format!("{snapshot}.snapshot.json"))["signed"]["meta"]["targets.json"]["version"].as_u64().unwrap();
    let sha = tuf(&format!("{targets_v}.targets.json"))["signed"]["targets"][name]["hashes"]["sha256"].as_str().unwrap().to_string();
    tuf(&format!("targets/{sha}.{name}"))
}

#[test]
fn the_ct_and_rekor_v2_logs_rotate_offline_into_new_logs_under_new_keys() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (agent, signer) = (agent(), Signer::new());
    let listen = format!("127.0.0.1:{}", free_port());

    // Nothing to rotate before the logs exist.
    std::fs::create_dir_all(&data).unwrap();
    let early = rotate(&data, "ct");
    assert!(!early.status.success());
    assert!(stderr(&early).contains("ct.pem does not exist"), "{}", stderr(&early));

    let mut server = Server::start_on(&data, &listen, &[]);
    let (old_ct, old_v2) = (spki(&data.join("keys/ct.pem")), spki(&data.join("keys/rekor-v2.pem")));
    let (old_sct_id, old_sct_time) = sct_of_new_cert(&agent, &server, &old_ct);
    assert_eq!(old_sct_id, sha256(&old_ct));
    let (old_index, old_origin) = v2_append(&agent, &server, &signer, b"before", &old_v2);
    assert_eq!((old_index, old_origin.as_str()), (1, "127.0.0.1"), "after the genesis entry");
    let old_head = get(&agent, &format!("{}/api/v2/checkpoint", server.url)).unwrap().text();
    let trust_before = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();

    // Offline: refused beside a running server, which goes on serving.
    for log in ["ct", "rekor-v2"] {
        let refused = rotate(&data, log);
        assert!(!refused.status.success());
        assert!(stderr(&refused).contains("stop the server first"), "{}", stderr(&refused));
    }
    assert_eq!(v2_append(&agent, &server, &signer, b"still before", &old_v2).0, 2);
    server.kill();

    // CT: a new key, so a new log ID; the report says so.
    let rotated = rotate(&data, "ct");
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    let report: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    let new_ct_path = std::path::PathBuf::from(report["key"].as_str().unwrap());
    assert_eq!(new_ct_path, data.join("keys/ct.shard-1.pem"));
    assert_eq!(std::fs::metadata(&new_ct_path).unwrap().permissions().mode() & 0o777, 0o600);
    let new_ct = spki(&new_ct_path);
    assert_ne!(new_ct, old_ct);
    assert_eq!((report["log"].as_str(), report["frozen"]["shard"].as_u64(), report["active"]["shard"].as_u64()), (Some("ct"), Some(0), Some(1)));
    assert_eq!(report["frozen"]["treeSize"], 1, "one certificate was logged");
    assert_eq!(report["active"]["logID"], b64::encode(sha256(&new_ct)));

    // Rekor v2, cut short after the freeze: the next start refuses, and running it again
    // finishes the rotation at the size it was frozen at.
    {
        let store = signet_log::storage::open(&signet_log::storage::StorageUrl::parse(None, &data).unwrap()).unwrap();
        let zero = signet_log::shards::Shard { number: 0, log_id: 2, tree_id: 0, start: 0, spki: old_v2.clone(), valid_from: None, frozen: None, imported: None };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        signet_log::shards::freeze(store.as_ref(), "rekor_v2", &zero, 3, now + 1).unwrap();
    }
    let serve = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("SIGNET_LOG", "warn")
        .output()
        .unwrap();
    assert!(!serve.status.success());
    assert!(stderr(&serve).contains("rotation was cut short; run `signet admin log rotate --log rekor-v2` again"), "{}", stderr(&serve));
    let finished = rotate(&data, "rekor-v2");
    assert!(finished.status.success(), "{}", stderr(&finished));
    let report: Value = serde_json::from_slice(&finished.stdout).unwrap();
    assert_eq!(report["frozen"]["treeSize"], 3, "the genesis entry and two appends");
    assert!(report["active"].get("startIndex").is_none(), "a new Rekor v2 log counts from 0");
    let new_v2 = spki(&data.join("keys/rekor-v2.shard-1.pem"));
    assert_eq!(report["active"]["logID"], b64::encode(sha256(&new_v2)));

    // After the restart, the new keys sign: SCTs under the new log ID, v2 entries in a new
    // tree (its own genesis entry first) under the new checkpoint key, named after the host.
    let server = Server::start_on(&data, &listen, &[]);
    let (new_sct_id, new_sct_time) = sct_of_new_cert(&agent, &server, &new_ct);
    assert_eq!(new_sct_id, sha256(&new_ct));
    let (new_index, new_origin) = v2_append(&agent, &server, &signer, b"after", &new_v2);
    assert_eq!((new_index, new_origin.as_str()), (1, "127.0.0.1"));
    let new_head = get(&agent, &format!("{}/api/v2/checkpoint", server.url)).unwrap().text();
    assert!(checkpoint::verify(&new_head, "127.0.0.1", &old_v2).is_err(), "the old key must not sign the new log");
    assert_eq!(checkpoint::verify(&new_head, "127.0.0.1", &new_v2).unwrap().size, 2);
    assert_eq!(checkpoint::verify(&old_head, "127.0.0.1", &old_v2).unwrap().size, 2, "the old log's checkpoint is still its own");
    // An entry of the old log may be logged again in the new one.
    assert_eq!(v2_append(&agent, &server, &signer, b"before", &new_v2).0, 2);

    // The trust documents list both keys of each log, with adjoining windows.
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    let ct = root["ctlogs"].as_array().unwrap();
    assert_eq!(ct.iter().map(key_of).collect::<Vec<_>>(), [old_ct.clone(), new_ct.clone()]);
    assert_eq!(ct[0]["publicKey"]["validFor"]["start"], trust_before["ctlogs"][0]["publicKey"]["validFor"]["start"]);
    let (ct_end, ct_start) = (unix(&ct[0]["publicKey"]["validFor"]["end"]), unix(&ct[1]["publicKey"]["validFor"]["start"]));
    assert_eq!(ct_end, ct_start + 1, "the old window ends a second after the rotation, where the new one starts (rounded)");
    assert!(ct[1]["publicKey"]["validFor"].get("end").is_none());
    assert!((old_sct_time / 1000) as i64 <= ct_end && (new_sct_time / 1000) as i64 >= ct_start, "each SCT is dated inside its key's window");
    assert_eq!(ct[0]["baseUrl"], ct[1]["baseUrl"]);
    let tlogs = root["tlogs"].as_array().unwrap();
    assert_eq!(tlogs.len(), 3, "the Rekor v1 key and both Rekor v2 keys");
    assert_eq!(tlogs[1..].iter().map(key_of).collect::<Vec<_>>(), [old_v2.clone(), new_v2.clone()]);
    // The cut-short rotation's window ended at its freeze; the new one starts when it was finished.
    let (v2_end, v2_start) = (unix(&tlogs[1]["publicKey"]["validFor"]["end"]), unix(&tlogs[2]["publicKey"]["validFor"]["start"]));
    assert!(v2_end <= v2_start + 1 && v2_start - v2_end < 60, "old window ends {v2_end}, new starts {v2_start}");
    assert_eq!(tlogs[2]["logId"]["keyId"], b64::encode(sha256(&new_v2)));
    assert!(tlogs.iter().all(|t| t["baseUrl"] == server.url.as_str()));
    // The signing config is unchanged: the same URLs serve the new logs.
    let sc_before = get(&agent, &format!("{}/trust/signing_config.json", server.url)).unwrap().json();
    assert_eq!(sc_before["rekorTlogUrls"].as_array().unwrap().len(), 2);
    // TUF published the new trusted root at the start (the same address: only the keys changed).
    assert_eq!(tuf_target(&agent, &server.url, "trusted_root.json"), root);
    assert_ne!(root, trust_before);
}

/// A dev OIDC token from the instance whose data dir is `data`.
fn dev_token(data: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(["dev-token", "--data-dir"]).arg(data).args(["--subject", "alice@example.com"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// An SCT as a certificate carries it: the log ID, and the signature over what it signed.
struct Sct {
    log_id: [u8; 32],
    signed: Vec<u8>,
    signature: Vec<u8>,
}

/// The SCT of a certificate the CA answered (`chain`: its PEM chain).
fn sct_of(chain: &Value) -> Sct {
    let pem_at = |i: usize| pem::decode_first(chain[i].as_str().unwrap().as_bytes()).unwrap().der;
    let leaf = x509_cert::Certificate::from_der(&pem_at(0)).unwrap();
    let issuer = x509_cert::Certificate::from_der(&pem_at(1)).unwrap();
    let mut tbs = leaf.tbs_certificate.clone();
    let exts = tbs.extensions.as_mut().unwrap();
    let pos = exts.iter().position(|e| e.extn_id == signet_ca::authority::OID_CT_SCT_LIST).unwrap();
    let list = der::asn1::OctetString::from_der(exts.remove(pos).extn_value.as_bytes()).unwrap();
    let sct = &list.as_bytes()[4..];
    let timestamp = u64::from_be_bytes(sct[33..41].try_into().unwrap());
    let sig_len = u16::from_be_bytes([sct[45], sct[46]]) as usize;
    let issuer_key_hash = sha256(&issuer.tbs_certificate.subject_public_key_info.to_der().unwrap());
    Sct {
        log_id: sct[1..33].try_into().unwrap(),
        signed: signet_ca::ct::precert_leaf(timestamp, &issuer_key_hash, &tbs.to_der().unwrap()).unwrap(),
        signature: sct[47..47 + sig_len].to_vec(),
    }
}

/// What writers were answered while the logs rotated under them.
#[derive(Default)]
struct Answers {
    /// Each v2 append's `TransparencyLogEntry`, and the instance that answered it.
    v2: Vec<(String, Value)>,
    scts: Vec<Sct>,
    /// 503s retried (the moment a follower's queued entries met the frozen tree).
    retried: usize,
}

/// On each instance (its URL and data dir: its dev OIDC issuer signs the tokens it takes), a
/// Rekor v2 writer and a certificate writer, until the returned flag is
/// set. `retry`: a 503 is retried, as clients do (on PostgreSQL a follower's entries queued
/// into a tree another instance froze are told to retry); otherwise every answer must succeed.
fn writers(instances: &[(String, &std::path::Path)], retry: bool) -> (std::sync::Arc<std::sync::atomic::AtomicBool>, Vec<std::thread::JoinHandle<()>>, std::sync::Arc<std::sync::Mutex<Answers>>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<Mutex<Answers>> = Arc::default();
    let mut handles = Vec::new();
    for (w, (url, data)) in instances.iter().enumerate() {
        let token = dev_token(data);
        for certs in [false, true] {
            let (url, stop, answers, token) = (url.clone(), stop.clone(), answers.clone(), token.clone());
            handles.push(std::thread::spawn(move || {
                let (agent, signer) = (agent(), Signer::new());
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let mut tries = 0;
                    let r = loop {
                        let r = match certs {
                            false => post_json(&agent, &format!("{url}/api/v2/log/entries"), &signer.v2_entry(format!("writer {w} entry {i}").as_bytes())),
                            true => post_raw(&agent, &format!("{url}/api/v2/signingCert"), "application/json", cert_request(&token, "alice@example.com")),
                        }
                        .unwrap();
                        tries += 1;
                        if !retry || r.status != 503 || tries == 50 {
                            break r;
                        }
                        answers.lock().unwrap().retried += 1;
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    };
                    let mut got = answers.lock().unwrap();
                    match certs {
                        false => {
                            assert_eq!(r.status, 201, "a v2 append on {url} failed during a rotation: {}", r.text());
                            got.v2.push((url.clone(), r.json()));
                        }
                        true => {
                            assert_eq!(r.status, 200, "a certificate on {url} failed during a rotation: {}", r.text());
                            got.scts.push(sct_of(&r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"]));
                        }
                    }
                    drop(got);
                    // Certificates cost more; they need not crowd out the appends.
                    if certs {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
            }));
        }
    }
    (stop, handles, answers)
}

impl Answers {
    /// Every answer verifies under the key it names, which is one of `v2_keys` / `ct_keys`
    /// (oldest first); no two v2 answers share a log and an index. How many each key got.
    fn check(&self, v2_keys: &[Vec<u8>], ct_keys: &[Vec<u8>]) -> (Vec<usize>, Vec<usize>) {
        let mut v2_counts = vec![0; v2_keys.len()];
        let mut seen = std::collections::HashSet::new();
        for (url, e) in &self.v2 {
            let key_id = e["logId"]["keyId"].as_str().unwrap();
            let k = v2_keys.iter().position(|k| b64::encode(sha256(k)) == key_id).unwrap_or_else(|| panic!("{url} answered under an unknown key {key_id}"));
            v2_counts[k] += 1;
            let p = &e["inclusionProof"];
            let cp = checkpoint::verify(p["checkpoint"]["envelope"].as_str().unwrap(), "127.0.0.1", &v2_keys[k]).unwrap();
            let body = b64::decode(e["canonicalizedBody"].as_str().unwrap()).unwrap();
            let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| b64::decode(h.as_str().unwrap()).unwrap().try_into().unwrap()).collect();
            let index: u64 = e["logIndex"].as_str().unwrap().parse().unwrap();
            merkle::verify_inclusion(&merkle::leaf_hash(&body), index, cp.size, &hashes, &cp.root_hash).unwrap();
            assert!(seen.insert((k, index)), "two appends answered with index {index} of v2 log {k}");
        }
        let mut ct_counts = vec![0; ct_keys.len()];
        for sct in &self.scts {
            let k = ct_keys.iter().position(|k| sha256(k) == sct.log_id).expect("an SCT from an unknown CT log");
            assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(&ct_keys[k], &sct.signed, &sct.signature), "an SCT does not verify under its log's key");
            ct_counts[k] += 1;
        }
        (v2_counts, ct_counts)
    }
}

/// Rotates `log` through the admin API at `url`, retrying while a new token is not yet seen
/// there; the report it printed.
pub(crate) fn rotate_online(url: &str, token: &str, log: &str) -> Value {
    admin_log_rotate(url, token, log, &[])
}

/// `signet admin log rotate --log LOG --url URL --token TOKEN EXTRA…`, retried while the token
/// is not yet seen there; what it printed.
fn admin_log_rotate(url: &str, token: &str, log: &str, extra: &[&str]) -> Value {
    let out = (0..40)
        .map(|_| {
            let o = Command::new(env!("CARGO_BIN_EXE_signet"))
                .args(["admin", "log", "rotate", "--log", log, "--url", url, "--token", token])
                .args(extra)
                .output()
                .unwrap();
            if stderr(&o).contains("HTTP 401") {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            o
        })
        .find(|o| !stderr(o).contains("HTTP 401"))
        .expect("the admin token was never accepted");
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The keys `url`'s trusted root lists under `field` (`ctlogs`, `tlogs`).
fn listed_keys(agent: &ureq::Agent, url: &str, field: &str) -> Vec<Vec<u8>> {
    let root = get(agent, &format!("{url}/trust/trusted_root.json")).unwrap().json();
    root[field].as_array().unwrap().iter().map(key_of).collect()
}

/// Waits until `url` serves the new keys: its v2 checkpoint is signed by `v2`, and its trust
/// documents list `ct`. How long that took.
fn serving_new_keys(agent: &ureq::Agent, url: &str, v2: &[u8], ct: &[u8]) -> std::time::Duration {
    let started = std::time::Instant::now();
    loop {
        let head = get(agent, &format!("{url}/api/v2/checkpoint")).unwrap().text();
        if checkpoint::verify(&head, "127.0.0.1", v2).is_ok() && listed_keys(agent, url, "ctlogs").iter().any(|k| k == ct) {
            return started.elapsed();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{url} does not serve the rotated logs 10 s after the rotation");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_ct_and_rekor_v2_logs_rotate_online_under_writers_losing_nothing() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let agent = agent();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = Server::start_on(&data, &listen, &[]);
    let (old_ct, old_v2) = (spki(&data.join("keys/ct.pem")), spki(&data.join("keys/rekor-v2.pem")));
    let token = crate::shards::admin_token(&["--data-dir".as_ref(), data.as_os_str()]);

    let (stop, handles, answers) = writers(&[(server.url.clone(), &data)], false);
    std::thread::sleep(std::time::Duration::from_millis(600));
    let ct_report = rotate_online(&server.url, &token, "ct");
    std::thread::sleep(std::time::Duration::from_millis(600));
    let v2_report = rotate_online(&server.url, &token, "rekor-v2");
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().for_each(|h| h.join().unwrap());

    // The reports name the new logs, whose keys are private files in the data dir.
    let (new_ct, new_v2) = (spki(&data.join("keys/ct.shard-1.pem")), spki(&data.join("keys/rekor-v2.shard-1.pem")));
    for (report, log, key, file) in [(&ct_report, "ct", &new_ct, "ct.shard-1.pem"), (&v2_report, "rekor-v2", &new_v2, "rekor-v2.shard-1.pem")] {
        assert_eq!((report["log"].as_str(), report["frozen"]["shard"].as_u64(), report["active"]["shard"].as_u64()), (Some(log), Some(0), Some(1)), "{report}");
        assert_eq!(report["active"]["logID"], b64::encode(sha256(key)));
        assert!(report["active"].get("startIndex").is_none(), "a new log counts from 0");
        assert_eq!(std::fs::metadata(data.join("keys").join(file)).unwrap().permissions().mode() & 0o777, 0o600);
    }

    // Every answer verifies under its log's key; writes went to both logs of each kind.
    let answers = answers.lock().unwrap();
    let (v2_counts, ct_counts) = answers.check(&[old_v2.clone(), new_v2.clone()], &[old_ct.clone(), new_ct.clone()]);
    eprintln!("v2 appends per log {v2_counts:?}, certificates per CT log {ct_counts:?}");
    assert!(v2_counts.iter().all(|&n| n > 0) && ct_counts.iter().all(|&n| n > 0), "v2 {v2_counts:?}, CT {ct_counts:?}");
    // The frozen log holds exactly what it acknowledged: its genesis entry, then every append.
    let old_size = v2_report["frozen"]["treeSize"].as_u64().unwrap();
    assert_eq!(old_size, 1 + v2_counts[0] as u64, "the frozen v2 log holds its genesis entry and every acknowledged append");
    assert_eq!(ct_report["frozen"]["treeSize"].as_u64().unwrap(), ct_counts[0] as u64, "the frozen CT log holds every certificate it acknowledged");

    // Served from now on: the new v2 log, and trust documents listing both keys of each log
    // (TUF publishes them too).
    serving_new_keys(&agent, &server.url, &new_v2, &new_ct);
    assert_eq!(listed_keys(&agent, &server.url, "ctlogs"), [old_ct.clone(), new_ct.clone()]);
    assert_eq!(listed_keys(&agent, &server.url, "tlogs")[1..], [old_v2.clone(), new_v2.clone()]);
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    assert_eq!(tuf_target(&agent, &server.url, "trusted_root.json"), root);

    // A restart opens the rotated logs where they are.
    server.kill();
    let server = Server::start_on(&data, &listen, &[]);
    let (index, _) = v2_append(&agent, &server, &Signer::new(), b"after the restart", &new_v2);
    assert_eq!(index, 1 + v2_counts[1] as u64, "after the new log's genesis entry and every append it acknowledged");
    assert_eq!(sct_of_new_cert(&agent, &server, &new_ct).0, sha256(&new_ct));
}

/// On PostgreSQL: the CT log rotated through a follower, the Rekor v2 log through the
/// sequencer; the other instance serves each new log within seconds, with its key taken from
/// the database, while writers on both go on.
#[test]
fn on_postgresql_the_ct_and_rekor_v2_logs_rotate_online_and_every_instance_follows() {
    use std::sync::atomic::Ordering;
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let (a, a_dir, mut b, b_dir) = crate::shards::two_instances(&db, dir.path(), |_| ());
    let (old_ct, old_v2) = (spki(&a_dir.join("keys/ct.pem")), spki(&a_dir.join("keys/rekor-v2.pem")));
    let token = crate::shards::admin_token(&["--storage".as_ref(), db.as_ref()]);

    let (stop, handles, answers) = writers(&[(a.url.clone(), &a_dir), (b.url.clone(), &b_dir)], true);
    std::thread::sleep(std::time::Duration::from_millis(600));
    rotate_online(&b.url, &token, "ct");
    std::thread::sleep(std::time::Duration::from_millis(600));
    let v2_report = rotate_online(&a.url, &token, "rekor-v2");
    let new_v2 = spki(&a_dir.join("keys/rekor-v2.shard-1.pem"));
    let new_ct = spki(&b_dir.join("keys/ct.shard-1.pem"));
    let took = [serving_new_keys(&agent, &a.url, &new_v2, &new_ct), serving_new_keys(&agent, &b.url, &new_v2, &new_ct)];
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().for_each(|h| h.join().unwrap());
    eprintln!("after the rotations the instances served the new logs within {took:?}");

    // Each instance holds the other's new key, the same file, taken from the database.
    for file in ["keys/ct.shard-1.pem", "keys/rekor-v2.shard-1.pem"] {
        assert_eq!(std::fs::read(a_dir.join(file)).unwrap(), std::fs::read(b_dir.join(file)).unwrap(), "{file}");
        assert_eq!(std::fs::metadata(a_dir.join(file)).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let answers = answers.lock().unwrap();
    let (v2_counts, ct_counts) = answers.check(&[old_v2.clone(), new_v2.clone()], &[old_ct.clone(), new_ct.clone()]);
    eprintln!("v2 appends per log {v2_counts:?}, certificates per CT log {ct_counts:?}, {} 503s retried", answers.retried);
    assert!(v2_counts.iter().all(|&n| n > 0) && ct_counts.iter().all(|&n| n > 0), "v2 {v2_counts:?}, CT {ct_counts:?}");
    assert_eq!(v2_report["frozen"]["treeSize"].as_u64().unwrap(), 1 + v2_counts[0] as u64, "the frozen v2 log holds its genesis entry and every acknowledged append");
    // Both list both CT keys, and come to serve one checkpoint of the new v2 log, which holds
    // every entry it acknowledged.
    for url in [&a.url, &b.url] {
        assert_eq!(listed_keys(&agent, url, "ctlogs"), [old_ct.clone(), new_ct.clone()]);
    }
    let heads = |agent: &ureq::Agent| [&a.url, &b.url].map(|u| checkpoint::verify(&get(agent, &format!("{u}/api/v2/checkpoint")).unwrap().text(), "127.0.0.1", &new_v2).unwrap());
    let started = std::time::Instant::now();
    let agreed = loop {
        let [ha, hb] = heads(&agent);
        if (ha.size, ha.root_hash) == (hb.size, hb.root_hash) {
            break ha;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "the instances disagree on the new v2 log: {} and {}", ha.size, hb.size);
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(agreed.size, 1 + v2_counts[1] as u64, "the new v2 log holds its genesis entry and every acknowledged append");

    // B restarts on what it took from the database.
    b.kill();
    let b = Server::start(&b_dir, &["--storage", &db]);
    let (index, _) = v2_append(&agent, &b, &Signer::new(), b"after the restart", &new_v2);
    assert!(index > v2_counts[1] as u64, "{index}");
    assert_eq!(sct_of_new_cert(&agent, &b, &new_ct).0, sha256(&new_ct));
}

/// `admin log rotate --prepare` through the API.
fn prepare_online(url: &str, token: &str, log: &str) -> Value {
    admin_log_rotate(url, token, log, &["--prepare"])
}

/// `--prepare`: the CT and Rekor v2 logs' next keys are published (trust documents and TUF)
/// beside the active ones while these go on signing; the rotations, later, take exactly those
/// keys, and only then do the old windows end.
#[test]
fn a_prepared_log_key_is_published_before_it_signs_and_the_rotation_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let agent = agent();
    let server = Server::start(&data, &[]);
    let (old_ct, old_v2) = (spki(&data.join("keys/ct.pem")), spki(&data.join("keys/rekor-v2.pem")));
    let token = crate::shards::admin_token(&["--data-dir".as_ref(), data.as_os_str()]);

    let ct = prepare_online(&server.url, &token, "ct");
    let v2 = prepare_online(&server.url, &token, "rekor-v2");
    let (new_ct, new_v2) = (spki(&data.join("keys/ct.shard-1.pem")), spki(&data.join("keys/rekor-v2.shard-1.pem")));
    for (report, key, file) in [(&ct, &new_ct, "ct.shard-1.pem"), (&v2, &new_v2, "rekor-v2.shard-1.pem")] {
        assert_eq!(report["prepared"]["shard"], 1, "{report}");
        assert_eq!(b64::decode(report["prepared"]["publicKey"].as_str().unwrap()).unwrap(), *key);
        assert_eq!(std::fs::metadata(data.join("keys").join(file)).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // Again: the same key, published from the same time.
    assert_eq!(prepare_online(&server.url, &token, "ct"), ct);

    // Published beside the active keys, with no end to either; the old keys still sign.
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    assert_eq!(listed_keys(&agent, &server.url, "ctlogs"), [old_ct.clone(), new_ct.clone()]);
    assert_eq!(listed_keys(&agent, &server.url, "tlogs")[1..], [old_v2.clone(), new_v2.clone()]);
    for log in root["ctlogs"].as_array().unwrap() {
        assert!(log["publicKey"]["validFor"].get("end").is_none(), "{log}");
    }
    assert_eq!(root["ctlogs"][1]["publicKey"]["validFor"]["start"], ct["prepared"]["publishedFrom"]);
    assert_eq!(tuf_target(&agent, &server.url, "trusted_root.json"), root, "TUF publishes it too");
    assert_eq!(sct_of_new_cert(&agent, &server, &old_ct).0, sha256(&old_ct));
    let signer = Signer::new();
    v2_append(&agent, &server, &signer, b"before the rotation", &old_v2);

    // The rotations take the prepared keys; the old windows end there.
    let ct_rotated = rotate_online(&server.url, &token, "ct");
    let v2_rotated = rotate_online(&server.url, &token, "rekor-v2");
    assert_eq!(ct_rotated["active"]["logID"], b64::encode(sha256(&new_ct)));
    assert_eq!(v2_rotated["active"]["logID"], b64::encode(sha256(&new_v2)));
    assert_eq!(sct_of_new_cert(&agent, &server, &new_ct).0, sha256(&new_ct));
    v2_append(&agent, &server, &signer, b"after the rotation", &new_v2);
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    let ctlogs = root["ctlogs"].as_array().unwrap();
    assert_eq!(ctlogs.len(), 2, "the prepared key is listed once: {root}");
    assert!(unix(&ctlogs[0]["publicKey"]["validFor"]["end"]) >= unix(&ctlogs[1]["publicKey"]["validFor"]["start"]));
    assert_eq!(listed_keys(&agent, &server.url, "tlogs")[1..], [old_v2.clone(), new_v2.clone()]);

    // Rekor v1 likewise: its next shard's key listed first, then taken by the rotation.
    let old_v1 = spki(&data.join("keys/rekor-v1.pem"));
    let v1 = prepare_online(&server.url, &token, "rekor-v1");
    let new_v1 = b64::decode(v1["prepared"]["publicKey"].as_str().unwrap()).unwrap();
    assert_eq!(listed_keys(&agent, &server.url, "tlogs"), [old_v1.clone(), new_v1.clone(), old_v2.clone(), new_v2.clone()]);
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    assert!(root["tlogs"][0]["publicKey"]["validFor"].get("end").is_none(), "the active v1 key is not ended by a prepared one");
    rotate_online(&server.url, &token, "rekor-v1");
    assert_eq!(spki(&data.join("keys/rekor-v1.shard-1.pem")), new_v1, "the rotation took the prepared key");
    assert_eq!(listed_keys(&agent, &server.url, "tlogs"), [old_v1, new_v1, old_v2, new_v2]);
}

/// On PostgreSQL: a key prepared through the follower is listed by the sequencer (and its
/// TUF) within a look; the rotation through the sequencer takes it, the follower follows.
#[test]
fn on_postgresql_a_key_prepared_through_one_instance_is_listed_by_every_instance() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let (a, a_dir, b, b_dir) = crate::shards::two_instances(&db, dir.path(), |_| ());
    let old_ct = spki(&a_dir.join("keys/ct.pem"));
    let token = crate::shards::admin_token(&["--storage".as_ref(), db.as_ref()]);
    let prepared = prepare_online(&b.url, &token, "ct");
    let new_ct = b64::decode(prepared["prepared"]["publicKey"].as_str().unwrap()).unwrap();
    let started = std::time::Instant::now();
    while listed_keys(&agent, &a.url, "ctlogs") != [old_ct.clone(), new_ct.clone()] {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the sequencer does not list the prepared key 10 s later");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    eprintln!("the sequencer listed the key prepared through the follower {:?} later", started.elapsed());
    let root = get(&agent, &format!("{}/trust/trusted_root.json", a.url)).unwrap().json();
    let started = std::time::Instant::now();
    while tuf_target(&agent, &a.url, "trusted_root.json")["ctlogs"] != root["ctlogs"] {
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "TUF does not list the prepared key");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(sct_of_new_cert(&agent, &a, &old_ct).0, sha256(&old_ct), "the old key signs until the rotation");

    let rotated = rotate_online(&a.url, &token, "ct");
    assert_eq!(rotated["active"]["logID"], b64::encode(sha256(&new_ct)), "the rotation took the prepared key");
    assert_eq!(sct_of_new_cert(&agent, &a, &new_ct).0, sha256(&new_ct));
    let started = std::time::Instant::now();
    loop {
        if listed_keys(&agent, &b.url, "ctlogs").len() == 2 && b_dir.join("keys/ct.shard-1.pem").exists() {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the follower does not follow the rotation");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(spki(&b_dir.join("keys/ct.shard-1.pem")), new_ct);
    let started = std::time::Instant::now();
    while sct_of_new_cert_log(&agent, &b) != sha256(&new_ct) {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the follower does not sign SCTs with the new key");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The log ID of the SCT in a certificate `server` issues now (no signature check).
fn sct_of_new_cert_log(agent: &ureq::Agent, server: &Server) -> [u8; 32] {
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(["dev-token", "--data-dir"]).arg(&server.data_dir).args(["--subject", "alice@example.com"]).output().unwrap();
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let r = post_raw(agent, &format!("{}/api/v2/signingCert", server.url), "application/json", cert_request(&token, "alice@example.com")).unwrap();
    if r.status != 200 {
        return [0; 32];
    }
    let chain = r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"].clone();
    let leaf = x509_cert::Certificate::from_der(&pem::decode_first(chain[0].as_str().unwrap().as_bytes()).unwrap().der).unwrap();
    let exts = leaf.tbs_certificate.extensions.unwrap();
    let ext = exts.iter().find(|e| e.extn_id == signet_ca::authority::OID_CT_SCT_LIST).unwrap();
    let list = der::asn1::OctetString::from_der(ext.extn_value.as_bytes()).unwrap();
    list.as_bytes()[5..37].try_into().unwrap()
}
