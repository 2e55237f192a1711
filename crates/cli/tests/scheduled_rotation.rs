//! TSA and intermediate rotations scheduled on running instances (`signet trust rotate
//! --at`): the new key is published before it signs, the hand-over loses no request, and
//! everything signed on either side verifies with the trusted root served after.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};
use signet_core::b64;

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap()
}

fn cert_der(path: &std::path::Path) -> Vec<u8> {
    signet_core::pem::decode_first(&std::fs::read(path).unwrap()).unwrap().der
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

fn unix(rfc3339: &Value) -> i64 {
    rfc3339.as_str().unwrap().parse::<jiff::Timestamp>().unwrap().as_second()
}

/// Stamps `sha256(signature)` and returns the DER response; panics on anything but 200.
fn stamp(agent: &ureq::Agent, url: &str, signature: &[u8]) -> Vec<u8> {
    let digest = signet_core::hash::sha256(signature);
    let r = post_json(agent, &format!("{url}/api/v1/timestamp"), &json!({"artifactHash": b64::encode(digest), "hashAlgorithm": "sha256", "certificates": true})).unwrap();
    assert_eq!(r.status, 200, "a stamp was refused: {}", r.text());
    r.body
}

/// Stamps in a loop until `until` (Unix seconds): every stamp with the bytes it covers.
fn stamp_until(url: String, until: i64) -> std::thread::JoinHandle<Vec<(Vec<u8>, Vec<u8>)>> {
    std::thread::spawn(move || {
        let agent = agent();
        let mut out = Vec::new();
        for n in 0u64.. {
            if unix_now() > until {
                break;
            }
            let signature = format!("signature {n}").into_bytes();
            out.push((stamp(&agent, &url, &signature), signature));
            std::thread::sleep(Duration::from_millis(20));
        }
        out
    })
}

/// Checks every stamp against `root`: genTime before `from` by `old`, from `from` on by `new`.
fn check_stamps(stamps: &[(Vec<u8>, Vec<u8>)], root: &signet_verify::trust_root::TrustedRoot, from: i64, old: &[u8], new: &[u8]) -> (usize, usize) {
    let (mut before, mut after) = (0, 0);
    for (der, signature) in stamps {
        let verified = signet_verify::timestamp::verify(root, der, signature).unwrap_or_else(|e| panic!("a stamp does not verify with the trusted root served after: {e}"));
        let by = &verified.tsa.chain[0].der;
        if verified.time < from {
            assert_eq!(by, old, "a stamp dated {} before the hand-over at {from} by another key than the old one", verified.time);
            before += 1;
        } else {
            assert_eq!(by, new, "a stamp dated {} after the hand-over at {from} by another key than the new one", verified.time);
            after += 1;
        }
    }
    (before, after)
}

/// Waits until `url` serves a trusted root listing `n` timestamp authorities; how long it took.
fn listing_tsas(agent: &ureq::Agent, url: &str, n: usize) -> (Duration, Value) {
    let started = Instant::now();
    loop {
        let root = get(agent, &format!("{url}/trust/trusted_root.json")).unwrap().json();
        if root["timestampAuthorities"].as_array().unwrap().len() == n {
            return (started.elapsed(), root);
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{url} lists no new TSA 10 s after the rotation was scheduled: {}", root["timestampAuthorities"]);
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_until(unix: i64) {
    while unix_now() < unix {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// On one running instance: both rotations scheduled 12 s ahead are published at once
/// (trusted_root.json and TUF) while the old keys go on signing; at the second, stamps and
/// certificates come from the new keys with no request refused; the files are promoted, and
/// a restart serves the same.
#[test]
fn a_tsa_and_intermediate_rotation_scheduled_on_a_running_instance_is_published_first_and_hands_over_at_its_second() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let agent = agent();
    let mut server = Server::start(&data, &[]);
    let old_tsa = cert_der(&data.join("ca/tsa.pem"));
    let old_ca = cert_der(&data.join("ca/intermediate.pem"));
    let old_tsa_key = std::fs::read(data.join("keys/tsa.pem")).unwrap();

    // Signs `name` with the instance's current trust documents; (artifact, bundle).
    let sign = |name: &str| {
        let trust = dir.path().join(format!("trust-{name}"));
        assert!(signet(&["trust", "export", "--data-dir", d, "--out", &path(&trust)]).status.success());
        let token = String::from_utf8(signet(&["dev-token", "--data-dir", d, "--subject", "you@example.com"]).stdout).unwrap();
        let (artifact, bundle) = (dir.path().join(format!("{name}.txt")), dir.path().join(format!("{name}.sigstore.json")));
        std::fs::write(&artifact, format!("signed {name}\n")).unwrap();
        let signed = signet(&[
            "sign-bundle", "--identity-token", token.trim(), "--signing-config", &path(&trust.join("signing_config.json")),
            "--trusted-root", &path(&trust.join("trusted_root.json")), "--bundle", &path(&bundle), &path(&artifact),
        ]);
        assert!(signed.status.success(), "{}", String::from_utf8_lossy(&signed.stderr));
        (artifact, bundle)
    };
    let verify = |signed: &(std::path::PathBuf, std::path::PathBuf), root: &std::path::Path| {
        signet(&[
            "verify-bundle", "--bundle", &path(&signed.1), "--trusted-root", &path(root),
            "--certificate-identity", "you@example.com", "--certificate-oidc-issuer", &format!("{}/oidc", server.url), &path(&signed.0),
        ])
    };
    let leaf_issuer_key = |signed: &(std::path::PathBuf, std::path::PathBuf)| -> Vec<u8> {
        let bundle: Value = serde_json::from_slice(&std::fs::read(&signed.1).unwrap()).unwrap();
        let vm = &bundle["verificationMaterial"];
        let leaf = vm["certificate"]["rawBytes"].as_str().or_else(|| vm["x509CertificateChain"]["certificates"][0]["rawBytes"].as_str()).unwrap();
        let leaf = <x509_cert::Certificate as der::Decode>::from_der(&b64::decode(leaf).unwrap()).unwrap();
        // The authority key identifier: both intermediates have the same subject.
        let aki = der::asn1::ObjectIdentifier::new_unwrap("2.5.29.35");
        leaf.tbs_certificate.extensions.unwrap().into_iter().find(|e| e.extn_id == aki).unwrap().extn_value.as_bytes().to_vec()
    };
    let before = sign("before");

    // Refused: too soon, and (without --at) while the server runs.
    let soon = signet(&["trust", "rotate", "--tsa", "--data-dir", d, "--at", "+3s"]);
    assert!(!soon.status.success() && String::from_utf8_lossy(&soon.stderr).contains("less than 10 s away"), "{}", String::from_utf8_lossy(&soon.stderr));
    let bad = signet(&["trust", "rotate", "--tsa", "--data-dir", d, "--at", "tomorrow"]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected an RFC 3339 time"));

    let scheduled = Instant::now();
    let tsa = signet(&["trust", "rotate", "--tsa", "--data-dir", d, "--at", "+14s", "--wait", "10"]);
    assert!(tsa.status.success(), "{}", String::from_utf8_lossy(&tsa.stderr));
    let published_after = scheduled.elapsed();
    let tsa: Value = serde_json::from_slice(&tsa.stdout).unwrap();
    let inter = signet(&["trust", "rotate", "--intermediate", "--data-dir", d, "--at", tsa["new_from"].as_str().unwrap(), "--wait", "10"]);
    assert!(inter.status.success(), "{}", String::from_utf8_lossy(&inter.stderr));
    let inter: Value = serde_json::from_slice(&inter.stdout).unwrap();
    let again = signet(&["trust", "rotate", "--tsa", "--data-dir", d, "--at", "+1h"]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already scheduled"));
    let from = unix(&tsa["new_from"]);
    assert_eq!(unix(&tsa["retired_window"][1]), from, "the old TSA's window ends at the hand-over");
    assert_eq!(unix(&inter["retired_window"][1]), from + 600, "the old intermediate's a leaf's lifetime later");
    let (new_tsa, new_ca) = (cert_der(&data.join("ca/next/tsa.pem")), cert_der(&data.join("ca/next/intermediate.pem")));
    eprintln!("published {published_after:?} after scheduling");
    let doctor = signet(&["doctor", "--data-dir", d, "--offline"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("timestamp authority's rotation to keys/tsa.next.pem signs from") && said.contains("published at"), "{said}");

    // Published before it signs: the served trusted root and TUF's list both, with their windows.
    let (_, root) = listing_tsas(&agent, &server.url, 2);
    let tuf = crate::tuf::target(&agent, &server, "trusted_root.json");
    for served in [&root, &tuf] {
        let (tsas, cas) = (served["timestampAuthorities"].as_array().unwrap(), served["certificateAuthorities"].as_array().unwrap());
        assert_eq!((tsas.len(), cas.len()), (2, 2), "{served}");
        assert_eq!(tsas[0]["validFor"]["end"], tsa["retired_window"][1]);
        assert_eq!(tsas[1]["validFor"]["start"], tsa["new_from"]);
        assert_eq!(cas[0]["validFor"]["end"], inter["retired_window"][1]);
        assert_eq!(cas[1]["validFor"]["start"], inter["new_from"]);
        assert_eq!(b64::decode(tsas[1]["certChain"]["certificates"][0]["rawBytes"].as_str().unwrap()).unwrap(), new_tsa);
    }
    // The old keys sign until the second comes.
    let chain = get(&agent, &format!("{}/api/v1/timestamp/certchain", server.url)).unwrap().text();
    assert!(chain.starts_with(signet_core::pem::encode("CERTIFICATE", &old_tsa).trim_end()));
    let just_before = sign("just-before");
    assert_eq!(leaf_issuer_key(&just_before), leaf_issuer_key(&before));

    // Stamps through the hand-over: none refused.
    let stamper = stamp_until(server.url.clone(), from + 3);
    wait_until(from + 1);
    let after = sign("after");
    let stamps = stamper.join().unwrap();
    let chain = get(&agent, &format!("{}/api/v1/timestamp/certchain", server.url)).unwrap().text();
    assert!(chain.starts_with(signet_core::pem::encode("CERTIFICATE", &new_tsa).trim_end()), "the new TSA's chain is served after the hand-over");

    let final_root_path = dir.path().join("trust-after").join("trusted_root.json");
    let final_root = signet_verify::trust_root::TrustedRoot::from_json(&std::fs::read(&final_root_path).unwrap()).unwrap();
    let (stamped_before, stamped_after) = check_stamps(&stamps, &final_root, from, &old_tsa, &new_tsa);
    eprintln!("{stamped_before} stamps by the old TSA, {stamped_after} by the new, none refused");
    assert!(stamped_before > 0 && stamped_after > 0, "{stamped_before} {stamped_after}");
    for signed in [&before, &just_before, &after] {
        let out = verify(signed, &final_root_path);
        assert!(out.status.success(), "{}: {}", signed.0.display(), String::from_utf8_lossy(&out.stderr));
    }
    assert_ne!(leaf_issuer_key(&after), leaf_issuer_key(&before));
    let bundle_after = get(&agent, &format!("{}/api/v2/trustBundle", server.url)).unwrap().json();
    let served_ca = signet_core::pem::decode_first(bundle_after["chains"][0]["certificates"][0].as_str().unwrap().as_bytes()).unwrap().der;
    assert_eq!(served_ca, new_ca, "the CA serves the new intermediate's chain after the hand-over");

    // Promoted: the new certificates and keys in place, the old key file destroyed.
    let started = Instant::now();
    while data.join("ca/next/tsa.pem").exists() || data.join("ca/next/intermediate.pem").exists() {
        assert!(started.elapsed() < Duration::from_secs(5), "not promoted 5 s after the hand-over");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(cert_der(&data.join("ca/tsa.pem")), new_tsa);
    assert_eq!(cert_der(&data.join("ca/intermediate.pem")), new_ca);
    assert!(!data.join("keys/tsa.next.pem").exists() && !data.join("keys/ca-intermediate.next.pem").exists());
    assert_ne!(std::fs::read(data.join("keys/tsa.pem")).unwrap(), old_tsa_key);
    let rotations: Value = serde_json::from_slice(&std::fs::read(data.join("ca/rotations.json")).unwrap()).unwrap();
    assert!(rotations["tsa"].get("next").is_none() && rotations["intermediate"].get("next").is_none(), "{rotations}");
    assert_eq!(cert_der(&data.join(rotations["tsa"]["retired"][0]["cert"].as_str().map(|c| format!("ca/{c}")).unwrap())), old_tsa);
    assert_eq!(cert_der(&data.join(rotations["intermediate"]["retired"][0]["cert"].as_str().map(|c| format!("ca/{c}")).unwrap())), old_ca);

    // A restart serves the same trust and the new keys.
    server.kill();
    let server = Server::start(&data, &[]);
    let root_restarted = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    // The same chains and windows (the URLs name the new port).
    let windows = |root: &Value, field: &str| -> Vec<(Value, Value)> {
        root[field].as_array().unwrap().iter().map(|a| (a["certChain"].clone(), a["validFor"].clone())).collect()
    };
    for field in ["timestampAuthorities", "certificateAuthorities"] {
        assert_eq!(windows(&root_restarted, field), windows(&root, field), "{field}");
    }
    let restamped = stamp(&agent, &server.url, b"after the restart");
    let verified = signet_verify::timestamp::verify(&final_root, &restamped, b"after the restart").unwrap();
    assert_eq!(verified.tsa.chain[0].der, new_tsa);
    let doctor = signet(&["doctor", "--data-dir", d, "--offline"]);
    assert!(doctor.status.success(), "{}", String::from_utf8_lossy(&doctor.stdout));
}

/// On PostgreSQL: a TSA rotation scheduled on a follower's data dir reaches the sequencer
/// through the database (its file key sealed), which publishes it through TUF; both hand
/// over at the second with no stamp refused, and keep the same key file.
#[test]
fn on_postgresql_a_scheduled_tsa_rotation_reaches_every_instance_before_its_second() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let (a, a_dir, b, b_dir) = crate::shards::two_instances(&db, dir.path(), |_| ());
    let old_tsa = cert_der(&a_dir.join("ca/tsa.pem"));
    assert_eq!(get(&agent, &format!("{}/readyz", b.url)).unwrap().json()["role"], "follower");
    let scheduled = signet(&["trust", "rotate", "--tsa", "--data-dir", b_dir.to_str().unwrap(), "--at", "+12s", "--wait", "10"]);
    assert!(scheduled.status.success(), "{}", String::from_utf8_lossy(&scheduled.stderr));
    let report: Value = serde_json::from_slice(&scheduled.stdout).unwrap();
    let from = unix(&report["new_from"]);
    let new_tsa = cert_der(&b_dir.join("ca/next/tsa.pem"));
    let (took, root_a) = listing_tsas(&agent, &a.url, 2);
    eprintln!("the sequencer published the rotation {took:?} after the follower did");
    assert_eq!(cert_der(&a_dir.join("ca/next/tsa.pem")), new_tsa, "A took the new certificate into its data dir");
    let started = Instant::now();
    let tuf = loop {
        let tuf = crate::tuf::target(&agent, &a, "trusted_root.json");
        if tuf["timestampAuthorities"].as_array().unwrap().len() == 2 {
            break tuf;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "TUF does not list the new TSA 5 s after the sequencer did");
        std::thread::sleep(Duration::from_millis(100));
    };
    for root in [&root_a, &tuf] {
        assert_eq!(b64::decode(root["timestampAuthorities"][1]["certChain"]["certificates"][0]["rawBytes"].as_str().unwrap()).unwrap(), new_tsa);
        assert_eq!(root["timestampAuthorities"][0]["validFor"]["end"], report["retired_window"][1]);
    }
    assert!(unix_now() < from, "published before the hand-over");

    let stampers = [stamp_until(a.url.clone(), from + 3), stamp_until(b.url.clone(), from + 3)];
    let stamps: Vec<_> = stampers.into_iter().flat_map(|s| s.join().unwrap()).collect();
    let root = signet_verify::trust_root::TrustedRoot::from_json(get(&agent, &format!("{}/trust/trusted_root.json", a.url)).unwrap().body.as_slice()).unwrap();
    let (stamped_before, stamped_after) = check_stamps(&stamps, &root, from, &old_tsa, &new_tsa);
    eprintln!("{stamped_before} stamps by the old TSA, {stamped_after} by the new, on both instances, none refused");
    assert!(stamped_before > 0 && stamped_after > 0);
    for url in [&a.url, &b.url] {
        let chain = get(&agent, &format!("{url}/api/v1/timestamp/certchain")).unwrap().text();
        assert!(chain.starts_with(signet_core::pem::encode("CERTIFICATE", &new_tsa).trim_end()), "{url}");
    }
    let started = Instant::now();
    while a_dir.join("keys/tsa.next.pem").exists() || b_dir.join("keys/tsa.next.pem").exists() {
        assert!(started.elapsed() < Duration::from_secs(5), "not promoted 5 s after the hand-over");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read(a_dir.join("keys/tsa.pem")).unwrap(), std::fs::read(b_dir.join("keys/tsa.pem")).unwrap(), "the same new key on both");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(b_dir.join("keys/tsa.pem")).unwrap().permissions().mode() & 0o777, 0o600);
}
