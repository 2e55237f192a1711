//! `signet trust export` and `/trust/*`: the documents describe the running instance.

use crate::common;

use std::process::Command;

use common::*;
use serde_json::Value;
use signet_core::{b64, hash::sha256, pem};
use signet_log::checkpoint;

fn export(dir: &std::path::Path, out: &std::path::Path, url: Option<&str>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_signet"));
    c.args(["trust", "export", "--data-dir"]).arg(dir).arg("--out").arg(out);
    if let Some(u) = url {
        c.args(["--url", u]);
    }
    c.output().unwrap()
}

fn spki_of(key: &Value) -> Vec<u8> {
    b64::decode(key["publicKey"]["rawBytes"].as_str().unwrap()).unwrap()
}

#[test]
fn exported_documents_match_the_instance() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let out = dir.path().join("trust");
    let r = export(dir.path(), &out, None);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let read = |n: &str| -> Value { serde_json::from_slice(&std::fs::read(out.join(n)).unwrap()).unwrap() };
    let (root, sc, ctc) = (read("trusted_root.json"), read("signing_config.json"), read("client_trust_config.json"));
    assert_eq!(ctc["trustedRoot"], root);
    assert_eq!(ctc["signingConfig"], sc);
    assert_eq!(get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json(), root);
    // The TUF root clients bootstrap from is the one served.
    assert_eq!(std::fs::read_to_string(out.join("tuf_root.json")).unwrap(), get(&agent, &format!("{}/tuf/1.root.json", server.url)).unwrap().text());

    // tlogs[0] is the v1 log: its key is the one /api/v1/log/publicKey serves.
    let v1_pem = get(&agent, &format!("{}/api/v1/log/publicKey", server.url)).unwrap().text();
    let v1 = &root["tlogs"][0];
    assert_eq!(spki_of(v1), pem::decode_first(v1_pem.as_bytes()).unwrap().der);
    assert_eq!(v1["logId"]["keyId"], b64::encode(sha256(&spki_of(v1))));
    // tlogs[1] is the v2 log: its key verifies the v2 checkpoint, named after the URL's host.
    let v2 = &root["tlogs"][1];
    let note = get(&agent, &format!("{}/api/v2/checkpoint", server.url)).unwrap().text();
    checkpoint::verify(&note, "127.0.0.1", &spki_of(v2)).unwrap();
    assert_eq!(v2["baseUrl"], server.url);

    // The CA and TSA chains are the ones the services hand out.
    let bundle = get(&agent, &format!("{}/api/v2/trustBundle", server.url)).unwrap().json();
    let chain: Vec<Vec<u8>> = bundle["chains"][0]["certificates"].as_array().unwrap().iter().map(|c| pem::decode_first(c.as_str().unwrap().as_bytes()).unwrap().der).collect();
    let exported: Vec<Vec<u8>> = root["certificateAuthorities"][0]["certChain"]["certificates"].as_array().unwrap().iter().map(|c| b64::decode(c["rawBytes"].as_str().unwrap()).unwrap()).collect();
    assert_eq!(chain, exported);
    let tsa_chain = get(&agent, &format!("{}/api/v1/timestamp/certchain", server.url)).unwrap().text();
    let tsa: Vec<Vec<u8>> = pem::decode_all(tsa_chain.as_bytes()).unwrap().into_iter().map(|b| b.der).collect();
    let exported: Vec<Vec<u8>> = root["timestampAuthorities"][0]["certChain"]["certificates"].as_array().unwrap().iter().map(|c| b64::decode(c["rawBytes"].as_str().unwrap()).unwrap()).collect();
    assert_eq!(tsa, exported);
    let ct_spki = signet_keys::Signer::load_or_generate(&dir.path().join("keys/ct.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap().spki_der().to_vec();
    assert_eq!(spki_of(&root["ctlogs"][0]), ct_spki);

    // The signing config points every service at this instance.
    assert_eq!(sc["tsaUrls"][0]["url"], format!("{}/api/v1/timestamp", server.url));
    assert_eq!(sc["oidcUrls"][0]["url"], format!("{}/oidc", server.url));

    // Another port on the same host is fine; another host is refused.
    let same_host = export(dir.path(), &dir.path().join("t2"), Some("https://127.0.0.1:8443"));
    assert!(same_host.status.success());
    let other = export(dir.path(), &dir.path().join("t3"), Some("https://sign.example.com"));
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains("differs from the instance's host"));
    assert!(!dir.path().join("t3").exists(), "nothing is written on refusal");
}

#[test]
fn export_needs_an_instance() {
    let dir = tempfile::tempdir().unwrap();
    let r = export(dir.path(), &dir.path().join("out"), None);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("start `signet serve`"));
}

#[test]
fn a_tsa_rotation_is_offline_keeps_the_old_certificate_for_its_window_and_refuses_a_wrong_root_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let signet = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap();
    let mut server = Server::start(&data, &[]);
    let agent = agent();
    let chain_before = get(&agent, &format!("{}/api/v1/timestamp/certchain", server.url)).unwrap().text();
    // Not while the server runs.
    let busy = signet(&["trust", "rotate", "--tsa", "--data-dir", d]);
    assert!(!busy.status.success() && String::from_utf8_lossy(&busy.stderr).contains("stop the server first"), "{}", String::from_utf8_lossy(&busy.stderr));
    server.kill();

    // Not with a key that is not the root's; nothing changes.
    let wrong = dir.path().join("wrong.pem");
    signet_keys::Signer::load_or_generate(&wrong, signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
    let refused = signet(&["trust", "rotate", "--tsa", "--data-dir", d, "--root-key", wrong.to_str().unwrap()]);
    assert!(!refused.status.success(), "a P-256 key is not the P-384 root's");
    assert!(!data.join("ca").join("rotations.json").exists() && !data.join("ca").join("retired").exists());
    let tsa_key = std::fs::read(data.join("keys").join("tsa.pem")).unwrap();

    let rotated = signet(&["trust", "rotate", "--tsa", "--data-dir", d]);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let report: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    assert_ne!(std::fs::read(data.join("keys").join("tsa.pem")).unwrap(), tsa_key, "a new key; the old one is gone");
    let retired = std::fs::read(data.join(report["retired_cert"].as_str().unwrap())).unwrap();
    assert!(chain_before.starts_with(std::str::from_utf8(&retired).unwrap().trim_end()), "the retired certificate is the one served before");

    let server = Server::start(&data, &[]);
    let chain_after = get(&agent, &format!("{}/api/v1/timestamp/certchain", server.url)).unwrap().text();
    assert_ne!(chain_after, chain_before);
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    let tsas = root["timestampAuthorities"].as_array().unwrap();
    assert_eq!(tsas.len(), 2);
    assert_eq!(tsas[0]["validFor"]["end"], report["retired_window"][1]);
    assert_eq!(tsas[1]["validFor"]["start"], report["new_from"]);
    assert!(tsas[1]["validFor"].get("end").is_none());
    // A second rotation retires the second certificate from where the first left off.
    drop(server);
    let again = signet(&["trust", "rotate", "--tsa", "--data-dir", d]);
    assert!(again.status.success());
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["retired_window"][0], report["new_from"]);
    let doctor = signet(&["doctor", "--data-dir", d, "--offline"]);
    assert!(doctor.status.success(), "{}", String::from_utf8_lossy(&doctor.stdout));
}

/// After `trust rotate --intermediate`, certificates come from a new intermediate; bundles
/// signed before verify with the new trusted root, through the retired intermediate it lists
/// for its window, and without that entry they would not.
#[test]
fn an_intermediate_rotation_keeps_bundles_signed_before_it_verifiable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let signet = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap();
    let agent = agent();
    // Signs `name` against the running instance; answers (artifact, bundle, OIDC issuer).
    let sign = |server: &Server, name: &str| {
        let trust = dir.path().join(format!("trust-{name}"));
        assert!(signet(&["trust", "export", "--data-dir", d, "--out", &path(&trust)]).status.success());
        let token = String::from_utf8(signet(&["dev-token", "--data-dir", d, "--subject", "you@example.com"]).stdout).unwrap();
        let (artifact, bundle) = (dir.path().join(format!("{name}.txt")), dir.path().join(format!("{name}.sigstore.json")));
        std::fs::write(&artifact, format!("signed {name} the rotation\n")).unwrap();
        let signed = signet(&[
            "sign-bundle", "--identity-token", token.trim(), "--signing-config", &path(&trust.join("signing_config.json")),
            "--trusted-root", &path(&trust.join("trusted_root.json")), "--bundle", &path(&bundle), &path(&artifact),
        ]);
        assert!(signed.status.success(), "{}", String::from_utf8_lossy(&signed.stderr));
        (artifact, bundle, format!("{}/oidc", server.url))
    };
    let verify = |signed: &(std::path::PathBuf, std::path::PathBuf, String), root: &std::path::Path| {
        signet(&[
            "verify-bundle", "--bundle", &path(&signed.1), "--trusted-root", &path(root),
            "--certificate-identity", "you@example.com", "--certificate-oidc-issuer", &signed.2, &path(&signed.0),
        ])
    };

    let mut server = Server::start(&data, &[]);
    let bundle_before = get(&agent, &format!("{}/api/v2/trustBundle", server.url)).unwrap().json();
    let before = sign(&server, "before");
    server.kill();
    let key_before = std::fs::read(data.join("keys").join("ca-intermediate.pem")).unwrap();
    let rotated = signet(&["trust", "rotate", "--intermediate", "--data-dir", d]);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let report: Value = serde_json::from_slice(&rotated.stdout).unwrap();
    assert_eq!(report["authority"], "intermediate");
    assert_ne!(std::fs::read(data.join("keys").join("ca-intermediate.pem")).unwrap(), key_before, "a new key; the old one is gone");
    assert!(std::fs::read_to_string(data.join(report["retired_cert"].as_str().unwrap()))
        .unwrap()
        .starts_with(bundle_before["chains"][0]["certificates"][0].as_str().unwrap().trim_end()));

    let server = Server::start(&data, &[]);
    let bundle_after = get(&agent, &format!("{}/api/v2/trustBundle", server.url)).unwrap().json();
    assert_ne!(bundle_after["chains"][0]["certificates"][0], bundle_before["chains"][0]["certificates"][0]);
    assert_eq!(bundle_after["chains"][0]["certificates"][1], bundle_before["chains"][0]["certificates"][1], "the same root");
    let after = sign(&server, "after");
    let root_path = dir.path().join("trust-after").join("trusted_root.json");
    let root: Value = serde_json::from_slice(&std::fs::read(&root_path).unwrap()).unwrap();
    let cas = root["certificateAuthorities"].as_array().unwrap();
    assert_eq!(cas.len(), 2);
    assert_eq!(cas[0]["validFor"]["end"], report["retired_window"][1]);
    assert_eq!(cas[1]["validFor"]["start"], report["new_from"]);

    for signed in [&before, &after] {
        let out = verify(signed, &root_path);
        assert!(out.status.success(), "{}: {}", signed.0.display(), String::from_utf8_lossy(&out.stderr));
    }
    // Without the retired intermediate, the bundle from before has no chain.
    let mut current_only = root.clone();
    current_only["certificateAuthorities"].as_array_mut().unwrap().remove(0);
    let current_only_path = dir.path().join("current-only.json");
    std::fs::write(&current_only_path, serde_json::to_vec(&current_only).unwrap()).unwrap();
    assert!(!verify(&before, &current_only_path).status.success(), "the old certificate verified without its intermediate");
    assert!(verify(&after, &current_only_path).status.success());
    let doctor = signet(&["doctor", "--data-dir", d, "--offline"]);
    assert!(doctor.status.success(), "{}", String::from_utf8_lossy(&doctor.stdout));
}

/// `signet trust include`: another deployment's trusted root joins this one's (after its own
/// entries), is listed and removed by name; what is not a trusted root, a key that does not
/// parse, or a name with a path in it is refused and nothing is written.
#[test]
fn an_included_trusted_root_joins_the_exported_one_until_it_is_removed() {
    let (old, new) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    drop(Server::start(old.path(), &[]));
    drop(Server::start(new.path(), &[]));
    let (old_out, new_out) = (old.path().join("trust"), new.path().join("trust"));
    assert!(export(old.path(), &old_out, None).status.success());
    let signet = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_signet")).args(args).arg("--data-dir").arg(new.path()).output().unwrap();
    let read = |p: &std::path::Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    assert!(export(new.path(), &new_out, None).status.success());
    let own = read(&new_out.join("trusted_root.json"));

    let old_root = old_out.join("trusted_root.json");
    let r = signet(&["trust", "include", old_root.to_str().unwrap(), "--name", "earlier"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(export(new.path(), &new_out, None).status.success());
    let merged = read(&new_out.join("trusted_root.json"));
    let theirs = read(&old_root);
    for field in ["tlogs", "ctlogs", "certificateAuthorities", "timestampAuthorities"] {
        let (m, o, t) = (merged[field].as_array().unwrap(), own[field].as_array().unwrap(), theirs[field].as_array().unwrap());
        assert_eq!(m.len(), o.len() + t.len(), "{field}");
        assert_eq!(&m[..o.len()], &o[..], "{field}: the instance's own come first");
        assert_eq!(&m[o.len()..], &t[..], "{field}");
    }
    let listed = String::from_utf8_lossy(&signet(&["trust", "include", "--list"]).stdout).to_string();
    assert!(listed.contains("earlier.json: 2 tlogs, 1 ctlogs, 1 certificate authorities, 1 timestamp authorities"), "{listed}");

    // Refused, and nothing written: not a trusted root; a key that does not parse; a path as a name.
    let bad = new.path().join("bad.json");
    let mut broken = theirs.clone();
    broken["tlogs"][0]["logId"]["keyId"] = "not base64!".into();
    for (doc, name, expected) in [
        (serde_json::json!({"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}), "x", "trusted root"),
        (broken, "x", "not base64"),
        (theirs.clone(), "../escape", "give --name"),
    ] {
        std::fs::write(&bad, serde_json::to_vec(&doc).unwrap()).unwrap();
        let r = signet(&["trust", "include", bad.to_str().unwrap(), "--name", name]);
        assert_eq!(r.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&r.stderr).contains(expected), "{}", String::from_utf8_lossy(&r.stderr));
    }
    assert_eq!(std::fs::read_dir(new.path().join("trust/include")).unwrap().count(), 1);

    assert!(signet(&["trust", "include", "--remove", "earlier"]).status.success());
    assert!(export(new.path(), &new_out, None).status.success());
    assert_eq!(read(&new_out.join("trusted_root.json")), own);
}
