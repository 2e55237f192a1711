//! Searching the Rekor v1 log by signing identity over HTTP: an entry signed with a dev-CA
//! certificate (`signet sign-bundle` with a `dev-token`) is found by its certificate's email,
//! in any case, and by nothing else; a search names exactly one criterion.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{agent, post_json, Server};
use serde_json::{json, Value};
use signet_core::{b64, hash::sha256};

fn signet(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().expect("run signet");
    assert!(out.status.success(), "signet {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Signs `artifact` as `email` over the Rekor v1 log; returns the entry's leaf hash (hex).
fn sign_v1(server: &Server, dir: &Path, email: &str, artifact: &[u8]) -> String {
    let data = server.data_dir.to_str().unwrap();
    let trust = dir.join("trust");
    signet(&["trust", "export", "--data-dir", data, "--out", trust.to_str().unwrap(), "--url", &server.url]);
    let mut config: Value = serde_json::from_slice(&std::fs::read(trust.join("signing_config.json")).unwrap()).unwrap();
    let v1_only: Vec<Value> = config["rekorTlogUrls"].as_array().unwrap().iter().filter(|s| s["majorApiVersion"] == 1).cloned().collect();
    config["rekorTlogUrls"] = json!(v1_only);
    let signing_config = dir.join("signing_config_v1.json");
    std::fs::write(&signing_config, config.to_string()).unwrap();
    let token = signet(&["dev-token", "--data-dir", data, "--subject", email]).trim().to_string();
    let (file, bundle) = (dir.join("artifact.txt"), dir.join("artifact.sigstore.json"));
    std::fs::write(&file, artifact).unwrap();
    signet(&[
        "sign-bundle", "--identity-token", &token, "--bundle", bundle.to_str().unwrap(),
        "--signing-config", signing_config.to_str().unwrap(), "--trusted-root", trust.join("trusted_root.json").to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    let bundle: Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let body = b64::decode(bundle["verificationMaterial"]["tlogEntries"][0]["canonicalizedBody"].as_str().unwrap()).unwrap();
    hex::encode(signet_log::merkle::leaf_hash(&body))
}

#[test]
fn an_entry_is_found_by_its_signers_identity() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let leaf = sign_v1(&server, dir.path(), "alice@example.com", b"signed by alice\n");
    // An entry signed with a bare key names nobody.
    let bare = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &common::Signer::new().v1_entry(b"no identity")).unwrap();
    assert_eq!(bare.status, 201, "{}", bare.text());

    let search = |query: Value| post_json(&agent(), &format!("{}/api/v1/index/retrieve", server.url), &query).unwrap();
    let by_hash = search(json!({"hash": format!("sha256:{}", hex::encode(sha256(b"signed by alice\n")))}));
    assert_eq!(by_hash.status, 200, "{}", by_hash.text());
    let uuids = by_hash.json();
    assert!(uuids.as_array().unwrap().len() == 1 && uuids[0].as_str().unwrap().ends_with(&leaf), "{uuids}");

    for query in [
        json!({"identity": "alice@example.com"}),
        json!({"email": "ALICE@example.com"}),
        json!({"identity": "Alice@Example.COM"}),
        json!({"subject": "alice@example.com"}), // Rekor 1.5's name for the field
    ] {
        let found = search(query.clone());
        assert_eq!(found.status, 200, "{query}: {}", found.text());
        assert_eq!(found.json(), uuids, "{query}");
    }
    for query in [json!({"identity": "bob@example.com"}), json!({"email": "bob@example.com"}), json!({"identity": "https://example.com/alice@example.com"})] {
        let found = search(query.clone());
        assert_eq!((found.status, found.json()), (200, json!([])), "{query}");
    }

    let both = search(json!({"hash": format!("sha256:{}", "0".repeat(64)), "identity": "alice@example.com"}));
    assert_eq!(both.status, 400, "{}", both.text());
    assert!(both.text().contains("hash and identity"), "{}", both.text());
    let none = search(json!({}));
    assert_eq!(none.status, 400, "{}", none.text());
    assert!(none.text().contains("one of hash, email or identity"), "{}", none.text());
    let by_key = search(json!({"publicKey": {"format": "x509"}}));
    assert_eq!(by_key.status, 400, "{}", by_key.text());
    assert!(by_key.text().contains("search by publicKey is not supported"), "{}", by_key.text());
    let not_an_email = search(json!({"email": "alice"}));
    assert_eq!(not_an_email.status, 400, "{}", not_an_email.text());
}
