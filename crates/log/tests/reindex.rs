//! `signet_log::reindex` on every backend: entries logged without search keys (as every entry
//! before schema 3 and 4 was) get the keys their bodies name, the cursor survives a restart,
//! entries that have keys keep them, and a second pass changes nothing.

use crate::common;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::json;
use signet_core::{b64, pem};
use signet_log::rekor::{v1, VerifiedEntry};
use signet_log::{reindex, Log};

/// A signer: its key pair and PEM (a certificate naming `email`, or the bare key).
fn signer(email: Option<&str>) -> (EcdsaKeyPair, String) {
    match email {
        Some(email) => {
            let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.subject_alt_names = vec![rcgen::SanType::Rfc822Name(email.try_into().unwrap())];
            let cert = params.self_signed(&key).unwrap();
            let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &key.serialize_der()).unwrap();
            (pair, pem::encode("CERTIFICATE", cert.der()))
        }
        None => {
            let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
            let spki = pair.public_key().as_der().unwrap().as_ref().to_vec();
            (pair, pem::encode("PUBLIC KEY", &spki))
        }
    }
}

/// A hashedrekord entry over `artifact` by `signer`, verified as an append verifies it.
fn hashedrekord(signer: &(EcdsaKeyPair, String), artifact: &[u8]) -> VerifiedEntry {
    let sig = signer.0.sign(&SystemRandom::new(), artifact).unwrap();
    v1::parse_value(&json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
        "data": {"hash": {"algorithm": "sha256", "value": hex::encode(signet_core::hash::sha256(artifact))}},
        "signature": {"content": b64::encode(sig.as_ref()), "publicKey": {"content": b64::encode(&signer.1)}}}}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_logged_without_keys_get_them_from_their_bodies() {
    let alice = signer(Some("Alice@Example.com"));
    let bare = signer(None);
    let alice_key = hashedrekord(&alice, b"x").public_key;
    let bare_key = hashedrekord(&bare, b"x").public_key;
    for b in common::backends() {
        let log = common::open_log(b.storage.clone()).await;
        // Entries 0..7 logged as before the index: a digest, no identity or key.
        for i in 0..7u64 {
            let e = hashedrekord(if i % 2 == 0 { &alice } else { &bare }, format!("artifact {i}").as_bytes());
            log.append(e.body, Some(e.digest_key.into_bytes())).await.unwrap();
        }
        // Entry 7 logged now, with its keys; and 8, a body that names no signer.
        let e = hashedrekord(&bare, b"artifact 7");
        log.append_searchable(e.body, Some(e.digest_key.into_bytes()), e.identity.map(String::into_bytes), Some(e.public_key.into_bytes()), None)
            .await
            .unwrap();
        log.append(b"not a rekor body".to_vec(), None).await.unwrap();
        let by_identity = |log: &Log| {
            let log = log.clone();
            async move { log.indices_by_identity(b"email:alice@example.com", None, 100).await.unwrap().indices }
        };
        let by_key = |log: &Log, key: &str| {
            let (log, key) = (log.clone(), key.as_bytes().to_vec());
            async move { log.indices_by_public_key(&key, None, 100).await.unwrap().indices }
        };
        assert!(by_identity(&log).await.is_empty(), "{}", b.name);
        assert_eq!(by_key(&log, &bare_key).await, [7], "{}", b.name);

        // A first window, then a restart: the cursor is in storage.
        let first = {
            let log = log.clone();
            tokio::task::spawn_blocking(move || reindex::step(&log, 0, 3)).await.unwrap().unwrap()
        };
        assert_eq!(first, reindex::Step { through: 3, missing: 3, indexed: 3 }, "{}", b.name);
        assert_eq!(b.reopen().meta("reindex.1").unwrap(), Some(3u64.to_be_bytes().to_vec()), "{}", b.name);
        assert_eq!(by_identity(&log).await, [0, 2], "{}: found as soon as its window is done", b.name);

        let rest = {
            let log = log.clone();
            tokio::task::spawn_blocking(move || {
                let from = reindex::cursor(&log).unwrap();
                reindex::step(&log, from, u64::MAX).unwrap()
            })
            .await
            .unwrap()
        };
        assert_eq!(rest, reindex::Step { through: 9, missing: 5, indexed: 4 }, "{}: entry 7 has keys, 8 names no signer", b.name);
        assert_eq!(by_identity(&log).await, [0, 2, 4, 6], "{}", b.name);
        assert_eq!(by_key(&log, &alice_key).await, [0, 2, 4, 6], "{}", b.name);
        assert_eq!(by_key(&log, &bare_key).await, [1, 3, 5, 7], "{}", b.name);

        // Again from the start: only entry 8 is still without keys, and nothing changes.
        let again = {
            let log = log.clone();
            tokio::task::spawn_blocking(move || reindex::step(&log, 0, u64::MAX)).await.unwrap().unwrap()
        };
        assert_eq!(again, reindex::Step { through: 9, missing: 1, indexed: 0 }, "{}", b.name);
        assert_eq!(by_key(&log, &bare_key).await, [1, 3, 5, 7], "{}", b.name);

        // And after a restart, from the stored index.
        log.freeze().await.unwrap();
        drop(log);
        let s = b.reopen();
        assert_eq!(s.find_identity_async(1, b"email:alice@example.com".to_vec(), None, 100).await.unwrap(), [0, 2, 4, 6], "{}", b.name);
    }
}
