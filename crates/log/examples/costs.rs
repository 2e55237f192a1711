use std::time::Instant;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::json;
use signet_core::{b64, pem};
use signet_log::storage::*;

fn main() {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let spki = pair.public_key().as_der().unwrap();
    let rng = SystemRandom::new();
    let n = 2000;
    let reqs: Vec<_> = (0..n).map(|i: u32| {
        let art = i.to_be_bytes();
        let sig = pair.sign(&rng, &art).unwrap();
        json!({"apiVersion":"0.0.1","kind":"hashedrekord","spec":{"signature":{"content":b64::encode(sig.as_ref()),"publicKey":{"content":b64::encode(pem::encode("PUBLIC KEY", spki.as_ref()))}},"data":{"hash":{"algorithm":"sha256","value":hex::encode(signet_core::hash::sha256(&art))}}}})
    }).collect();
    let msgs: Vec<_> = (0..n).map(|i: u32| (signet_core::hash::sha256(&i.to_be_bytes()), pair.sign(&rng, &i.to_be_bytes()).unwrap())).collect();
    let t = Instant::now();
    for (d, sig) in &msgs {
        let dg = aws_lc_rs::digest::Digest::import_less_safe(d, &aws_lc_rs::digest::SHA256).unwrap();
        aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1, spki.as_ref()).verify_digest(&dg, sig.as_ref()).unwrap();
    }
    println!("raw verify: {:?}/entry", t.elapsed() / n);
    let pk = aws_lc_rs::signature::ParsedPublicKey::new(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1, spki.as_ref()).unwrap();
    let t = Instant::now();
    for (d, sig) in &msgs {
        let dg = aws_lc_rs::digest::Digest::import_less_safe(d, &aws_lc_rs::digest::SHA256).unwrap();
        pk.verify_digest_sig(&dg, sig.as_ref()).unwrap();
    }
    println!("parsed verify: {:?}/entry", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..n { aws_lc_rs::signature::ParsedPublicKey::new(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1, spki.as_ref()).unwrap(); }
    println!("parse key: {:?}/entry", t.elapsed() / n);
    let t = Instant::now();
    let bodies: Vec<_> = reqs.iter().map(|r| signet_log::rekor::v1::parse(r).unwrap()).collect();
    println!("parse+verify: {:?}/entry", t.elapsed() / n);
    let key = signet_core::keys::SigningKey::generate().unwrap();
    let t = Instant::now();
    for b in &bodies { key.sign(&b.body).unwrap(); }
    println!("sign: {:?}/entry", t.elapsed() / n);
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStorage::open(&dir.path().join("x.db")).unwrap();
    let t = Instant::now();
    let mut idx = 0u64;
    for chunk in bodies.chunks(256) {
        let entries: Vec<_> = chunk.iter().map(|b| { idx += 1; NewEntry { index: idx, leaf_hash: signet_log::merkle::leaf_hash(&b.body), digest: Some(b.digest_key.clone().into_bytes()), body: b.body.clone(), stamp: Some(vec![0; 71]) } }).collect();
        s.commit(&Batch { log: 1, integrated_time: 1, entries, tiles: vec![Tile{level:0,index:idx/256,hashes:vec![0;8192]}], checkpoint: StoredCheckpoint { size: idx, note: "x".into() } }).unwrap();
    }
    println!("store: {:?}/entry ({} batches)", t.elapsed() / n, n / 256);
    println!("body len {}", bodies[0].body.len());
}

#[allow(dead_code)]
fn unused() {}
