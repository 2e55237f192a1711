//! Regression tests for issue 17 (hardening): each names the item it covers. Every one of
//! them failed on the code before its fix.

mod common;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use common::*;
use serde_json::json;
use signet_core::{b64, hash};

/// A self-signed certificate that carries `padding` bytes of a private extension, and a
/// signature over `artifact` by its key. Rekor never checks the certificate's own
/// signature, so any client can make an entry as large as the body limit allows.
fn large_certificate(artifact: &[u8], padding: usize) -> (Vec<u8>, Vec<u8>) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["big.example".to_string()]).unwrap();
    params.custom_extensions.push(rcgen::CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 99999, 1], vec![0x55; padding]));
    let cert = params.self_signed(&key).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &key.serialize_der()).unwrap();
    let sig = pair.sign(&SystemRandom::new(), artifact).unwrap();
    (cert.der().to_vec(), sig.as_ref().to_vec())
}

fn v2_entry_with_large_certificate(artifact: &[u8], padding: usize) -> serde_json::Value {
    let (cert, sig) = large_certificate(artifact, padding);
    json!({"hashedRekordRequestV002": {
        "digest": b64::encode(hash::sha256(artifact)),
        "signature": {"content": b64::encode(&sig), "verifier": {
            "x509Certificate": {"rawBytes": b64::encode(&cert)}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}})
}

fn v1_entry_with_large_certificate(artifact: &[u8], padding: usize) -> serde_json::Value {
    let (cert, sig) = large_certificate(artifact, padding);
    json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
        "signature": {"content": b64::encode(&sig), "publicKey": {"content": b64::encode(signet_core::pem::encode("CERTIFICATE", &cert))}},
        "data": {"hash": {"algorithm": "sha256", "value": hex::encode(hash::sha256(artifact))}}}})
}

/// Item 1: an entry over 65,535 bytes used to be logged, and from then on its entry-bundle
/// tile could be neither built nor read (a `u16` length `expect`ed in tiles.rs).
#[test]
fn oversized_v2_entry_is_refused_and_the_log_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let (agent, u) = (agent(), |p: &str| format!("{}{p}", server.url));

    let big = post_json(&agent, &u("/api/v2/log/entries"), &v2_entry_with_large_certificate(b"big", 70_000)).unwrap();
    assert_eq!(big.status, 413, "{}", big.text());
    let message = big.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains("32768") && message.contains("max_entry_bytes"), "names the limit: {message}");
    // Just under the 16-bit limit but over the default entry limit: refused too.
    let mid = post_json(&agent, &u("/api/v2/log/entries"), &v2_entry_with_large_certificate(b"mid", 40_000)).unwrap();
    assert_eq!(mid.status, 413, "{}", mid.text());
    // The same kind of entry at a normal size is fine.
    let small = post_json(&agent, &u("/api/v2/log/entries"), &v2_entry_with_large_certificate(b"small", 1_000)).unwrap();
    assert_eq!(small.status, 201, "{}", small.text());

    let signer = Signer::new();
    let r = post_json(&agent, &u("/api/v2/log/entries"), &signer.v2_entry(b"after")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["logIndex"], "2", "genesis, the small certificate entry, this one");
    let bundle = get(&agent, &u("/api/v2/tile/entries/000.p/3")).unwrap();
    assert_eq!(bundle.status, 200, "{}", bundle.text());
    let tile = get(&agent, &u("/api/v2/tile/0/000.p/3")).unwrap();
    assert_eq!((tile.status, tile.body.len()), (200, 3 * 32));

    // Rekor v1 has the same admission limit.
    let v1 = post_json(&agent, &u("/api/v1/log/entries"), &v1_entry_with_large_certificate(b"v1 big", 40_000)).unwrap();
    assert_eq!(v1.status, 413, "{}", v1.text());
    let v1 = post_json(&agent, &u("/api/v1/log/entries"), &v1_entry_with_large_certificate(b"v1 small", 1_000)).unwrap();
    assert_eq!(v1.status, 201, "{}", v1.text());
}

/// Item 2: a multibyte character in a 64- or 80-byte UUID made `split_at(16)` panic.
#[test]
fn entry_uuids_are_validated_before_they_are_sliced() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    // 15 ASCII characters, then 'é' (2 bytes) across the split at byte 16, 80 bytes in all.
    let eighty = format!("{}é{}", "0".repeat(15), "0".repeat(63));
    let sixty_four = format!("{}é{}", "0".repeat(30), "0".repeat(32));
    for uuid in [eighty, sixty_four, "ü".repeat(32)] {
        assert!(uuid.len() == 80 || uuid.len() == 64);
        let encoded: String = uuid.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
        let r = get(&agent, &format!("{}/api/v1/log/entries/{encoded}", server.url)).unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains("not hex"));
        let r = post_json(&agent, &format!("{}/api/v1/log/entries/retrieve", server.url), &json!({"entryUUIDs": [uuid]})).unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
    }
    // The server is still there.
    assert_eq!(get(&agent, &format!("{}/healthz", server.url)).unwrap().status, 200);
}

/// Item 15: the retrieve and index routes ignored unknown fields, and tile paths had
/// non-canonical aliases.
#[test]
fn unknown_fields_and_noncanonical_tile_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let (agent, u) = (agent(), |p: &str| format!("{}{p}", server.url));
    let hash = format!("sha256:{}", "ab".repeat(32));
    for (path, body) in [
        ("/api/v1/log/entries/retrieve", json!({"logIndexes": [0], "logIndex": [1]})),
        ("/api/v1/index/retrieve", json!({"hash": hash, "hashes": []})),
        ("/api/v1/index/retrieve", json!({"hash": hash, "operator": "xor"})),
    ] {
        let r = post_json(&agent, &u(path), &body).unwrap();
        assert_eq!(r.status, 400, "{path} {body}: {}", r.text());
    }
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries/retrieve"), &json!({"logIndexes": [0]})).unwrap().status, 200);
    assert_eq!(post_json(&agent, &u("/api/v1/index/retrieve"), &json!({"hash": hash, "operator": "and"})).unwrap().status, 200);

    assert_eq!(get(&agent, &u("/api/v2/tile/0/000.p/1")).unwrap().status, 200);
    for alias in ["/api/v2/tile/00/000.p/1", "/api/v2/tile/0/000.p/01", "/api/v2/tile/0/x000/000.p/1", "/api/v2/tile/entries/x000/000.p/1"] {
        let r = get(&agent, &u(alias)).unwrap();
        assert_eq!(r.status, 400, "{alias}: {}", r.text());
    }
}
