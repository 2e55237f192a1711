//! Searching the Rekor v1 log by signing identity over HTTP: an entry signed with a dev-CA
//! certificate (`signet sign-bundle` with a `dev-token`) is found by its certificate's email,
//! in any case, and by nothing else; by the signer's key or certificate (rekor-cli `search
//! --public-key`, gitsign); several criteria combined as Rekor's `operator` says.

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

    // Several criteria: Rekor's "or" (the default) is the union, "and" the intersection.
    let nothing = format!("sha256:{}", "0".repeat(64));
    let either = search(json!({"hash": nothing, "identity": "alice@example.com"}));
    assert_eq!((either.status, either.json()), (200, uuids.clone()), "{}", either.text());
    let both = search(json!({"hash": nothing, "identity": "alice@example.com", "operator": "and"}));
    assert_eq!((both.status, both.json()), (200, json!([])), "{}", both.text());
    let none = search(json!({}));
    assert_eq!(none.status, 400, "{}", none.text());
    assert!(none.text().contains("one of hash, publicKey, email or identity"), "{}", none.text());
    let not_an_email = search(json!({"email": "alice"}));
    assert_eq!(not_an_email.status, 400, "{}", not_an_email.text());
}

#[test]
fn an_entry_is_found_by_its_signers_key_or_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let search = |query: Value| post_json(&agent(), &format!("{}/api/v1/index/retrieve", server.url), &query).unwrap();
    let by_key = |pem_text: &str| search(json!({"publicKey": {"format": "x509", "content": b64::encode(pem_text)}}));

    // A bare key: every entry it signed, and no other.
    let (signer, other) = (common::Signer::new(), common::Signer::new());
    let mut mine = Vec::new();
    for artifact in [&b"one"[..], b"two"] {
        let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(artifact)).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        mine.push(json!(r.header("etag").unwrap()));
    }
    let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &other.v1_entry(b"three")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let key_pem = signet_core::pem::encode("PUBLIC KEY", &signer.spki);
    let found = by_key(&key_pem);
    assert_eq!((found.status, found.json()), (200, json!(mine)), "{}", found.text());
    // However the PEM is wrapped: the key is what is looked up, not its spelling.
    let rewrapped = format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", b64::encode(&signer.spki));
    assert_eq!(by_key(&rewrapped).json(), json!(mine));
    // With the artifact's hash, "and" keeps the one entry of both, "or" (gitsign's) all three.
    let one = format!("sha256:{}", hex::encode(sha256(b"one")));
    let content = b64::encode(&key_pem);
    let and = search(json!({"hash": one, "publicKey": {"format": "x509", "content": content}, "operator": "and"}));
    assert_eq!(and.json(), json!([mine[0]]), "{}", and.text());
    let three = format!("sha256:{}", hex::encode(sha256(b"three")));
    let or = search(json!({"hash": three, "publicKey": {"format": "x509", "content": content}}));
    assert_eq!(or.json().as_array().unwrap().len(), 3, "{}", or.text());

    // A certificate: the entries it signed (sigstore's keyless flow), not those of its bare key.
    let leaf = sign_v1(&server, dir.path(), "carol@example.com", b"signed by carol\n");
    let bundle: Value = serde_json::from_slice(&std::fs::read(dir.path().join("artifact.sigstore.json")).unwrap()).unwrap();
    let cert_der = b64::decode(bundle["verificationMaterial"]["certificate"]["rawBytes"].as_str().unwrap()).unwrap();
    let found = by_key(&signet_core::pem::encode("CERTIFICATE", &cert_der));
    assert_eq!(found.status, 200, "{}", found.text());
    let uuids = found.json();
    assert!(uuids.as_array().unwrap().len() == 1 && uuids[0].as_str().unwrap().ends_with(&leaf), "{uuids}");

    // Each way of asking wrongly is a 400 naming the field.
    for (query, field, why) in [
        (json!({"publicKey": {"format": "x509"}}), "publicKey.content", "required"),
        (json!({"publicKey": {"format": "ssh", "content": b64::encode("ssh-ed25519 AAAA")}}), "publicKey.format", "x509"),
        (json!({"publicKey": {"format": "x509", "url": "http://127.0.0.1:1/key.pem"}}), "publicKey.url", "does not fetch"),
        (json!({"publicKey": {"format": "x509", "content": b64::encode("not pem")}}), "publicKey.content", "PEM"),
        (json!({"publicKey": {"format": "x509", "content": b64::encode(signet_core::pem::encode("PUBLIC KEY", b"junk"))}}), "publicKey.content", ""),
        (json!({"publicKey": "x509"}), "publicKey", ""),
        (json!({"hash": one, "operator": "xor"}), "operator", ""),
    ] {
        let r = search(query.clone());
        assert_eq!(r.status, 400, "{query}: {}", r.text());
        assert_eq!(r.json()["path"], field, "{query}: {}", r.text());
        assert!(r.text().contains(why), "{query}: {}", r.text());
    }
}

/// Entries logged before search by identity and key existed (their keys empty, as the schema
/// migrations left them) are found by neither; `signet admin log reindex`, through the running
/// server, makes them searchable, resumes from its cursor after a restart, and a second run
/// finds nothing left to do. On SQLite, and on PostgreSQL when the suite has one.
#[test]
fn entries_logged_before_the_index_are_found_after_a_reindex() {
    let mut stores: Vec<Option<String>> = vec![None];
    stores.extend(common::postgres_database().map(Some));
    for db in stores {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let store: Vec<&str> = db.as_deref().map(|db| vec!["--storage", db]).unwrap_or_default();
        let mut server = Server::start(&data, &store);
        let alice = sign_v1(&server, dir.path(), "alice@example.com", b"signed by alice\n");
        // More entries than one window (signet_log::reindex::WINDOW), by one bare key.
        let (signer, other) = (common::Signer::new(), common::Signer::new());
        for i in 0..1100 {
            let by = if i % 500 == 7 { &other } else { &signer };
            let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &by.v1_entry(format!("artifact {i}").as_bytes())).unwrap();
            assert_eq!(r.status, 201, "{}", r.text());
        }
        server.kill();
        match &db {
            None => {
                let path = data.join("signet.sqlite");
                rusqlite::Connection::open(&path).unwrap().execute_batch("UPDATE entry_keys SET identity = NULL, public_key = NULL").unwrap();
                let keys = rusqlite::Connection::open(data.join("signet.sqlite.keys")).unwrap();
                keys.execute_batch("DELETE FROM identities; DELETE FROM public_keys").unwrap();
            }
            Some(db) => common::psql(db, "UPDATE entries SET identity = NULL, public_key = NULL"),
        }
        // Made while no server runs: a running one reads new tokens at its next poll.
        let data_arg = data.to_str().unwrap();
        let mut create = vec!["admin", "token", "create", "--data-dir", data_arg, "--role", "admin"];
        create.extend(&store);
        let token = signet(&create).trim().to_string();

        let mut server = Server::start(&data, &store);
        let search = |server: &Server, query: Value| {
            let r = post_json(&agent(), &format!("{}/api/v1/index/retrieve", server.url), &query).unwrap();
            assert_eq!(r.status, 200, "{query}: {}", r.text());
            r.json().as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_string()).collect::<Vec<_>>()
        };
        let key_of = |s: &common::Signer| json!({"publicKey": {"format": "x509", "content": b64::encode(signet_core::pem::encode("PUBLIC KEY", &s.spki))}});
        let (by_key, by_other) = (key_of(&signer), key_of(&other));
        assert!(search(&server, json!({"email": "alice@example.com"})).is_empty(), "emptied keys are not found");
        assert!(search(&server, by_key.clone()).is_empty());

        let reindex = |server: &Server| -> Value {
            let out = Command::new(env!("CARGO_BIN_EXE_signet"))
                .args(["admin", "log", "reindex", "--url", &server.url])
                .env("SIGNET_TOKEN", &token)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice(&out.stdout).unwrap()
        };
        let first = reindex(&server);
        assert_eq!(first["state"], "done", "{first}");
        let shard = &first["shards"][0];
        // The genesis entry, Alice's, and the 1,100: every one names its signer.
        assert_eq!((shard["from"].as_u64(), shard["missing"].as_u64(), shard["indexed"].as_u64()), (Some(0), Some(1102), Some(1102)), "{first}");
        assert_eq!(shard["through"], shard["treeSize"], "{first}");
        let found = search(&server, json!({"email": "alice@example.com"}));
        assert!(found.len() == 1 && found[0].ends_with(&alice), "{found:?}");
        // A full page (Rekor's are 256) of the one key's 1,097, and the other's 3.
        assert_eq!(search(&server, by_key.clone()).len(), 256);
        assert_eq!(search(&server, by_other.clone()).len(), 3);

        // After a restart the next run starts at the cursor: nothing is looked at twice.
        server.kill();
        let server = Server::start(&data, &store);
        let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &other.v1_entry(b"logged now")).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let second = reindex(&server);
        let shard = &second["shards"][0];
        assert_eq!((shard["from"].as_u64(), shard["missing"].as_u64(), shard["indexed"].as_u64()), (Some(1102), Some(0), Some(0)), "{second}");
        assert_eq!(shard["treeSize"].as_u64(), Some(1103), "{second}");
        assert_eq!(search(&server, by_other).len(), 4);

        // The route is the admin's: a reader's token, and none, are refused.
        let status = common::get(&agent(), &format!("{}/api/admin/log/reindex", server.url)).unwrap();
        assert_eq!(status.status, 401, "{}", status.text());
        let wrong = post_json(&agent(), &format!("{}/api/admin/log/reindex", server.url), &json!({"log": "ct"})).unwrap();
        assert_eq!(wrong.status, 401, "{}", wrong.text());
        let wrong = common::reply(
            agent()
                .post(&format!("{}/api/admin/log/reindex", server.url))
                .header("authorization", &format!("Bearer {token}"))
                .header("content-type", "application/json")
                .send(br#"{"log": "ct"}"#.to_vec()),
        )
        .unwrap();
        assert_eq!((wrong.status, wrong.json()["path"].as_str()), (400, Some("log")), "{}", wrong.text());
    }
}
