//! `signet admin log rotate --log ct|rekor-v2`: the CT log and the Rekor v2 log rotate
//! offline into new logs. After it, the new key signs (a new SCT log ID, a new checkpoint
//! key), the trust documents list both keys with adjoining windows (and TUF publishes them),
//! a rotation cut short is finished by running it again, and a running server refuses it.

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
    signet_core::keys::SigningKey::load_or_generate(path).unwrap().spki_der().to_vec()
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
    assert!(signet_core::keys::verify_p256(ct_spki, &signed, &sct[47..47 + sig_len]), "the SCT does not verify with the CT key expected");
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

    // Offline only: refused beside a running server (and online), which goes on serving.
    for log in ["ct", "rekor-v2"] {
        let refused = rotate(&data, log);
        assert!(!refused.status.success());
        assert!(stderr(&refused).contains("stop the server first"), "{}", stderr(&refused));
    }
    let token = {
        let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(["admin", "token", "create", "--role", "admin", "--data-dir"]).arg(&data).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    // The server sees a new token within moments.
    let online = (0..40)
        .map(|_| {
            let o = Command::new(env!("CARGO_BIN_EXE_signet"))
                .args(["admin", "log", "rotate", "--log", "ct", "--url", &server.url, "--token", &token])
                .output()
                .unwrap();
            if stderr(&o).contains("HTTP 401") {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            o
        })
        .find(|o| !stderr(o).contains("HTTP 401"))
        .expect("the admin token was never accepted");
    assert!(!online.status.success());
    assert!(stderr(&online).contains("rotates offline only"), "{}", stderr(&online));
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
        let zero = signet_log::shards::Shard { number: 0, log_id: 2, tree_id: 0, start: 0, spki: old_v2.clone(), valid_from: None, frozen: None };
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
