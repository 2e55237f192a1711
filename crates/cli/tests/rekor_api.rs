//! The Rekor v1 and v2 HTTP APIs against a real `signet serve --dev` process.

use crate::common;

use common::*;
use serde_json::{json, Value};
use signet_core::{b64, jcs};
use signet_log::{checkpoint, merkle};

fn v1_key(server: &Server, agent: &ureq::Agent) -> Vec<u8> {
    let pem = get(agent, &format!("{}/api/v1/log/publicKey", server.url)).unwrap().text();
    signet_core::pem::decode_first(pem.as_bytes()).unwrap().der
}

fn v2_key(server: &Server) -> Vec<u8> {
    signet_keys::Signer::load_or_generate(&server.data_dir.join("keys/rekor-v2.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap().spki_der().to_vec()
}

#[test]
fn v1_entries_are_durable_provable_and_signed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let spki = v1_key(&server, &agent);
    let info = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let tree_id: i64 = info["treeID"].as_str().unwrap().parse().unwrap();
    assert_eq!(info["treeSize"], 1, "a new log holds only its genesis entry");

    let signer = Signer::new();
    let entry = signer.v1_entry(b"artifact one");
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &entry).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let uuid = r.header("etag").unwrap().to_string();
    assert_eq!(uuid.len(), 80);
    assert_eq!(&uuid[..16], format!("{tree_id:016x}"));
    assert_eq!(r.header("location").unwrap(), format!("/api/v1/log/entries/{uuid}"));
    let map = r.json();
    let e = &map[&uuid];
    assert_eq!(e["logID"], hex::encode(signet_core::hash::sha256(&spki)));
    let body = b64::decode(e["body"].as_str().unwrap()).unwrap();
    let leaf = merkle::leaf_hash(&body);
    assert_eq!(hex::encode(leaf), &uuid[16..]);
    let canonical: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(jcs::to_vec(&canonical), body, "stored body is RFC 8785 canonical");
    assert_eq!(canonical["spec"]["data"], entry["spec"]["data"]);

    // Inclusion proof against a checkpoint signed by the log key, with Rekor's v1 origin.
    let proof = &e["verification"]["inclusionProof"];
    let cp = checkpoint::verify(proof["checkpoint"].as_str().unwrap(), "127.0.0.1", &spki).unwrap();
    assert_eq!(cp.origin, format!("127.0.0.1 - {tree_id}"));
    assert_eq!(cp.size, proof["treeSize"].as_u64().unwrap());
    assert_eq!(hex::encode(cp.root_hash), proof["rootHash"].as_str().unwrap());
    let hashes: Vec<[u8; 32]> = proof["hashes"].as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect();
    let index = e["logIndex"].as_u64().unwrap();
    merkle::verify_inclusion(&leaf, index, cp.size, &hashes, &cp.root_hash).unwrap();

    // The SET signs the canonical {body, integratedTime, logID, logIndex}.
    let set = b64::decode(e["verification"]["signedEntryTimestamp"].as_str().unwrap()).unwrap();
    let payload = jcs::to_vec(&json!({"body": e["body"], "integratedTime": e["integratedTime"], "logID": e["logID"], "logIndex": e["logIndex"]}));
    assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(&spki, &payload, &set));

    // The same entry again is a 409 pointing at the first.
    let dup = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &entry).unwrap();
    assert_eq!(dup.status, 409);
    assert_eq!(dup.header("location").unwrap(), format!("/api/v1/log/entries/{uuid}"));
    assert_eq!(dup.json()["code"], 409);

    // Read back every way Rekor offers.
    let by_index = get(&agent, &format!("{}/api/v1/log/entries?logIndex={index}", server.url)).unwrap().json();
    assert_eq!(by_index[&uuid]["body"], e["body"]);
    assert_eq!(by_index[&uuid]["verification"]["signedEntryTimestamp"], e["verification"]["signedEntryTimestamp"]);
    let by_uuid = get(&agent, &format!("{}/api/v1/log/entries/{uuid}", server.url)).unwrap().json();
    assert_eq!(by_uuid[&uuid]["logIndex"], index);
    let by_hash = get(&agent, &format!("{}/api/v1/log/entries/{}", server.url, &uuid[16..])).unwrap().json();
    assert_eq!(by_hash[&uuid]["logIndex"], index);
    let retrieved = post_json(&agent, &format!("{}/api/v1/log/entries/retrieve", server.url), &json!({"entryUUIDs": [uuid], "logIndexes": [index]})).unwrap().json();
    assert_eq!(retrieved.as_array().unwrap().len(), 2);
    let digest = entry["spec"]["data"]["hash"]["value"].as_str().unwrap();
    let found = post_json(&agent, &format!("{}/api/v1/index/retrieve", server.url), &json!({"hash": format!("sha256:{digest}")})).unwrap().json();
    assert_eq!(found, json!([uuid]));

    // More entries, then every earlier size is provably a prefix of the new tree.
    let mut sizes = vec![(cp.size, cp.root_hash)];
    for i in 0..5 {
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(format!("more {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201);
        let m = r.json();
        let p = &m.as_object().unwrap().values().next().unwrap()["verification"]["inclusionProof"];
        sizes.push((p["treeSize"].as_u64().unwrap(), hex32(p["rootHash"].as_str().unwrap())));
    }
    let head = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let head_size = head["treeSize"].as_u64().unwrap();
    let head_root = hex32(head["rootHash"].as_str().unwrap());
    assert_eq!(head_size, 7);
    for (size, root) in sizes {
        let p = get(&agent, &format!("{}/api/v1/log/proof?firstSize={size}&lastSize={head_size}", server.url)).unwrap().json();
        let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect();
        assert_eq!(hex32(p["rootHash"].as_str().unwrap()), head_root);
        merkle::verify_consistency(size, head_size, &hashes, &root, &head_root).unwrap();
    }
}

#[test]
fn v2_entries_and_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let spki = v2_key(&server);
    let key_id = signet_core::hash::sha256(&spki);

    // 300 entries from 10 threads: more than one full tile.
    let url = server.url.clone();
    let handles: Vec<_> = (0..10)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let (agent, signer) = (agent(), Signer::new());
                for i in 0..30 {
                    let r = post_json(&agent, &format!("{url}/api/v2/log/entries"), &signer.v2_entry(format!("{t}/{i}").as_bytes())).unwrap();
                    assert_eq!(r.status, 201, "{}", r.text());
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());

    let agent = agent();
    let signer = Signer::new();
    let entry = signer.v2_entry(b"v2 artifact");
    let r = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &entry).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let tle = r.json();
    let keys: Vec<&String> = tle.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["canonicalizedBody", "inclusionProof", "kindVersion", "logId", "logIndex"]);
    assert_eq!(tle["logIndex"], "301");
    assert_eq!(tle["kindVersion"], json!({"kind": "hashedrekord", "version": "0.0.2"}));
    assert_eq!(tle["logId"]["keyId"], b64::encode(key_id));
    let body = b64::decode(tle["canonicalizedBody"].as_str().unwrap()).unwrap();
    let req = &entry["hashedRekordRequestV002"];
    let expected = jcs::to_vec(&json!({"apiVersion": "0.0.2", "kind": "hashedrekord", "spec": {"hashedRekordV002": {
        "data": {"algorithm": "SHA2_256", "digest": req["digest"]},
        "signature": {"content": req["signature"]["content"], "verifier": {
            "keyDetails": "PKIX_ECDSA_P256_SHA_256", "publicKey": {"rawBytes": req["signature"]["verifier"]["publicKey"]["rawBytes"]}}}}}}));
    assert_eq!(body, expected);

    let proof = &tle["inclusionProof"];
    assert_eq!(proof["treeSize"], "302");
    let note = proof["checkpoint"]["envelope"].as_str().unwrap();
    let cp = checkpoint::verify(note, "127.0.0.1", &spki).unwrap();
    assert_eq!((cp.origin.as_str(), cp.size), ("127.0.0.1", 302));
    assert_eq!(b64::encode(cp.root_hash), proof["rootHash"].as_str().unwrap());
    let hashes: Vec<[u8; 32]> = proof["hashes"].as_array().unwrap().iter().map(|h| b64::decode(h.as_str().unwrap()).unwrap().try_into().unwrap()).collect();
    merkle::verify_inclusion(&merkle::leaf_hash(&body), 301, 302, &hashes, &cp.root_hash).unwrap();

    let dup = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &entry).unwrap();
    assert_eq!(dup.status, 409);
    assert_eq!(dup.header("x-log-index"), Some("301"));

    // The checkpoint endpoint serves the same head.
    let head = get(&agent, &format!("{}/api/v2/checkpoint", server.url)).unwrap().text();
    assert_eq!(checkpoint::verify(&head, "127.0.0.1", &spki).unwrap(), cp);

    // Tiles: the full leaf tile, a partial one, a level-1 tile, and entry bundles.
    let full = get(&agent, &format!("{}/api/v2/tile/0/000", server.url)).unwrap();
    assert_eq!(full.status, 200);
    assert!(full.header("cache-control").unwrap().contains("immutable"));
    assert_eq!(full.body.len(), 256 * 32);
    let bundle = get(&agent, &format!("{}/api/v2/tile/entries/000", server.url)).unwrap();
    assert_eq!(bundle.status, 200);
    let mut rest = bundle.body.as_slice();
    let mut leaves = Vec::new();
    while !rest.is_empty() {
        let len = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        leaves.push(merkle::leaf_hash(&rest[2..2 + len]));
        rest = &rest[2 + len..];
    }
    assert_eq!(leaves.len(), 256);
    assert_eq!(leaves.concat(), full.body, "tile hashes are the leaf hashes of the bundled entries");
    let partial = get(&agent, &format!("{}/api/v2/tile/0/001.p/46", server.url)).unwrap();
    assert_eq!((partial.status, partial.body.len()), (200, 46 * 32));
    assert_eq!(&partial.body[45 * 32..], merkle::leaf_hash(&body));
    let level1 = get(&agent, &format!("{}/api/v2/tile/1/000.p/1", server.url)).unwrap();
    // The single level-1 node is the root of the first 256 leaves.
    let mut t = signet_log::tree::Tree::new();
    leaves.iter().for_each(|l| t.push(*l));
    assert_eq!(level1.body, t.root(256).unwrap());
    assert_eq!(get(&agent, &format!("{}/api/v2/tile/0/001", server.url)).unwrap().status, 404, "full tile 1 does not exist yet");
    assert_eq!(get(&agent, &format!("{}/api/v2/tile/0/001.p/47", server.url)).unwrap().status, 404);
}

/// A DSSE envelope over an in-toto statement about `subject`, signed by a fresh P-256 key:
/// `(statement, envelope JSON text, signature, SPKI)`.
fn dsse_envelope(subject: &[u8]) -> (Vec<u8>, String, Vec<u8>, Vec<u8>) {
    signed_envelope(subject, "")
}

/// [`dsse_envelope`], with `padding` in the statement's predicate.
fn signed_envelope(subject: &[u8], padding: &str) -> (Vec<u8>, String, Vec<u8>, Vec<u8>) {
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    let statement = json!({"_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "s", "digest": {"sha256": hex::encode(signet_core::hash::sha256(subject))}}],
        "predicateType": "https://example.com/p", "predicate": if padding.is_empty() { json!({}) } else { json!({"padding": padding}) }})
    .to_string()
    .into_bytes();
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let pae = signet_log::rekor::dsse::pae("application/vnd.in-toto+json", &statement);
    let sig = pair.sign(&aws_lc_rs::rand::SystemRandom::new(), &pae).unwrap().as_ref().to_vec();
    let envelope = json!({"payload": b64::encode(&statement), "payloadType": "application/vnd.in-toto+json",
        "signatures": [{"keyid": "", "sig": b64::encode(&sig)}]})
    .to_string();
    (statement, envelope, sig, pair.public_key().as_der().unwrap().as_ref().to_vec())
}

fn v1_dsse_entry(envelope: &str, spki: &[u8]) -> Value {
    json!({"apiVersion": "0.0.1", "kind": "dsse", "spec": {"proposedContent": {
        "envelope": envelope, "verifiers": [b64::encode(signet_core::pem::encode("PUBLIC KEY", spki))]}}})
}

#[test]
fn dsse_envelopes_on_both_logs() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let u = |p: &str| format!("{}{p}", server.url);
    let (statement, envelope, sig, spki) = dsse_envelope(b"the subject");

    // Rekor v1: a dsse 0.0.1 entry that records the envelope by its hashes, as Rekor does.
    let entry = v1_dsse_entry(&envelope, &spki);
    let r = post_json(&agent, &u("/api/v1/log/entries"), &entry).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let uuid = r.header("etag").unwrap().to_string();
    let map = r.json();
    let body = b64::decode(map[&uuid]["body"].as_str().unwrap()).unwrap();
    let expected = jcs::to_vec(&json!({"apiVersion": "0.0.1", "kind": "dsse", "spec": {
        "envelopeHash": {"algorithm": "sha256", "value": hex::encode(signet_core::hash::sha256(envelope.as_bytes()))},
        "payloadHash": {"algorithm": "sha256", "value": hex::encode(signet_core::hash::sha256(&statement))},
        "signatures": [{"signature": b64::encode(&sig), "verifier": b64::encode(signet_core::pem::encode("PUBLIC KEY", &spki))}]}}));
    assert_eq!(body, expected);
    assert_eq!(hex::encode(merkle::leaf_hash(&body)), &uuid[16..]);
    assert!(map[&uuid]["verification"]["signedEntryTimestamp"].is_string());
    // Found by the subject's digest, and a duplicate on the second try.
    let subject = hex::encode(signet_core::hash::sha256(b"the subject"));
    let found = post_json(&agent, &u("/api/v1/index/retrieve"), &json!({"hash": format!("sha256:{subject}")})).unwrap().json();
    assert_eq!(found, json!([uuid]));
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries"), &entry).unwrap().status, 409);
    let retrieved = post_json(&agent, &u("/api/v1/log/entries/retrieve"), &json!({"entries": [entry]})).unwrap().json();
    assert_eq!(retrieved[0][&uuid]["body"], map[&uuid]["body"]);
    // cosign's attestation lookup asks for the dsse and the intoto 0.0.1 form together; the
    // envelope was logged as dsse, so the intoto one finds nothing, without failing the other.
    let intoto = json!({"kind": "intoto", "apiVersion": "0.0.1", "spec": {"content": {
        "envelope": envelope, "hash": {"algorithm": "sha256", "value": hex::encode(signet_core::hash::sha256(envelope.as_bytes()))}},
        "publicKey": b64::encode(signet_core::pem::encode("PUBLIC KEY", &spki))}});
    let both = post_json(&agent, &u("/api/v1/log/entries/retrieve"), &json!({"entries": [entry, intoto]})).unwrap();
    assert_eq!(both.status, 200, "{}", both.text());
    assert_eq!(both.json().as_array().unwrap().len(), 1, "{}", both.text());
    assert_eq!(both.json()[0][&uuid]["body"], map[&uuid]["body"]);
    let unknown = post_json(&agent, &u("/api/v1/log/entries/retrieve"), &json!({"entries": [{"kind": "nonsense", "apiVersion": "0.0.1", "spec": {}}]})).unwrap();
    assert_eq!(unknown.status, 400, "a kind no Rekor knows is still an error: {}", unknown.text());

    // Rekor v2 has no DSSE kind: the envelope is a hashedrekord over the SHA-256 of its PAE.
    let pae = signet_log::rekor::dsse::pae("application/vnd.in-toto+json", &statement);
    let request = json!({"hashedRekordRequestV002": {
        "digest": b64::encode(signet_core::hash::sha256(&pae)),
        "signature": {"content": b64::encode(&sig), "verifier": {
            "publicKey": {"rawBytes": b64::encode(&spki)}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}});
    let r = post_json(&agent, &u("/api/v2/log/entries"), &request).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["kindVersion"], json!({"kind": "hashedrekord", "version": "0.0.2"}));
    let refused = post_json(&agent, &u("/api/v2/log/entries"), &json!({"dsseRequestV002": {"envelope": {}, "verifiers": []}})).unwrap();
    assert_eq!(refused.status, 400);
    assert!(refused.json()["message"].as_str().unwrap().contains("hashedRekordRequestV002"), "{}", refused.text());
}

/// A proposed intoto 0.0.2 entry as sigstore-js's `attest` makes it: the envelope's payload
/// and signature base64-encoded twice, the key beside the signature.
fn v1_intoto_entry(statement: &[u8], sig: &[u8], spki: &[u8]) -> Value {
    let envelope_hash = hex::encode(signet_core::hash::sha256(b"the client's own digest of its envelope"));
    json!({"apiVersion": "0.0.2", "kind": "intoto", "spec": {"content": {
        "envelope": {"payloadType": "application/vnd.in-toto+json", "payload": b64::encode(b64::encode(statement)),
            "signatures": [{"sig": b64::encode(b64::encode(sig)), "publicKey": b64::encode(signet_core::pem::encode("PUBLIC KEY", spki))}]},
        "hash": {"algorithm": "sha256", "value": envelope_hash},
        "payloadHash": {"algorithm": "sha256", "value": hex::encode(signet_core::hash::sha256(statement))}}}})
}

#[test]
fn intoto_entries_are_logged_found_and_looked_up() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let u = |p: &str| format!("{}{p}", server.url);
    let (statement, _envelope, sig, spki) = dsse_envelope(b"an intoto subject");
    let entry = v1_intoto_entry(&statement, &sig, &spki);

    let r = post_json(&agent, &u("/api/v1/log/entries"), &entry).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let uuid = r.header("etag").unwrap().to_string();
    let map = r.json();
    let body: Value = serde_json::from_slice(&b64::decode(map[&uuid]["body"].as_str().unwrap()).unwrap()).unwrap();
    // Rekor's stored form: no payload, its hash instead; the signature and key as sent.
    assert_eq!(body["kind"], "intoto");
    assert_eq!(body["apiVersion"], "0.0.2");
    let content = &body["spec"]["content"];
    assert!(content["envelope"].get("payload").is_none(), "{body}");
    assert_eq!(content["payloadHash"]["value"], hex::encode(signet_core::hash::sha256(&statement)));
    assert_eq!(content["hash"], entry["spec"]["content"]["hash"]);
    assert_eq!(content["envelope"]["signatures"], entry["spec"]["content"]["envelope"]["signatures"]);
    assert!(map[&uuid]["verification"]["signedEntryTimestamp"].is_string());
    // The statement is kept beside the entry and served with every read of it (not with the
    // append's answer, as in Rekor).
    assert!(map[&uuid].get("attestation").is_none(), "{map}");
    let by_uuid = get(&agent, &u(&format!("/api/v1/log/entries/{uuid}"))).unwrap().json();
    assert_eq!(by_uuid[&uuid]["attestation"], json!({"data": b64::encode(&statement)}));
    let by_index = get(&agent, &u("/api/v1/log/entries?logIndex=1")).unwrap().json();
    assert_eq!(by_index[&uuid]["attestation"], by_uuid[&uuid]["attestation"]);
    assert_eq!(by_index[&uuid]["body"], map[&uuid]["body"]);

    // Found by the subject's digest, looked up by the proposed entry, refused as a duplicate.
    let subject = hex::encode(signet_core::hash::sha256(b"an intoto subject"));
    let found = post_json(&agent, &u("/api/v1/index/retrieve"), &json!({"hash": format!("sha256:{subject}")})).unwrap().json();
    assert_eq!(found, json!([uuid]));
    let retrieved = post_json(&agent, &u("/api/v1/log/entries/retrieve"), &json!({"entries": [entry]})).unwrap();
    assert_eq!(retrieved.status, 200, "{}", retrieved.text());
    assert_eq!(retrieved.json()[0][&uuid]["body"], map[&uuid]["body"]);
    assert_eq!(retrieved.json()[0][&uuid]["attestation"], by_uuid[&uuid]["attestation"]);
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries"), &entry).unwrap().status, 409);

    // A signature over another payload is refused by name, and logs nothing.
    let mut forged = entry.clone();
    forged["spec"]["content"]["envelope"]["payload"] = json!(b64::encode(b64::encode(b"{\"_type\":\"forged\"}")));
    forged["spec"]["content"].as_object_mut().unwrap().remove("payloadHash");
    let r = post_json(&agent, &u("/api/v1/log/entries"), &forged).unwrap();
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("spec.content.envelope.signatures[0].sig"), "{}", r.text());
    let size = get(&agent, &u("/api/v1/log")).unwrap().json()["treeSize"].clone();
    assert_eq!(size, 2, "the genesis entry and the one intoto entry");
}

/// A proposed intoto 0.0.1 entry as cosign's `intotoEntry` makes it: the envelope's JSON
/// text and the key that signed it.
fn v1_intoto_v001_entry(envelope: &str, spki: &[u8]) -> Value {
    json!({"apiVersion": "0.0.1", "kind": "intoto", "spec": {"content": {"envelope": envelope},
        "publicKey": b64::encode(signet_core::pem::encode("PUBLIC KEY", spki))}})
}

/// intoto 0.0.1 beside 0.0.2 and dsse: logged in Rekor's stored form, its attestation served
/// on reads up to `limits.max_attestation_bytes`, and one retrieve answering all three kinds.
#[test]
fn intoto_v001_entries_and_the_attestation_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    // Room for the small statements below, not for the large one.
    std::fs::write(&config, "[limits]\nmax_attestation_bytes = 2048\n").unwrap();
    let server = Server::start(&dir.path().join("data"), &["--config", config.to_str().unwrap()]);
    let agent = agent();
    let u = |p: &str| format!("{}{p}", server.url);

    let (statement, envelope, _sig, spki) = dsse_envelope(b"a cosign attestation");
    let entry = v1_intoto_v001_entry(&envelope, &spki);
    let r = post_json(&agent, &u("/api/v1/log/entries"), &entry).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let uuid = r.header("etag").unwrap().to_string();
    let body = b64::decode(r.json()[&uuid]["body"].as_str().unwrap()).unwrap();
    let expected = format!(
        r#"{{"apiVersion":"0.0.1","kind":"intoto","spec":{{"content":{{"hash":{{"algorithm":"sha256","value":"{}"}},"payloadHash":{{"algorithm":"sha256","value":"{}"}}}},"publicKey":"{}"}}}}"#,
        hex::encode(signet_core::hash::sha256(envelope.as_bytes())),
        hex::encode(signet_core::hash::sha256(&statement)),
        b64::encode(signet_core::pem::encode("PUBLIC KEY", &spki))
    );
    assert_eq!(String::from_utf8(body).unwrap(), expected);
    let read = get(&agent, &u(&format!("/api/v1/log/entries/{uuid}"))).unwrap().json();
    assert_eq!(read[&uuid]["attestation"], json!({"data": b64::encode(&statement)}));
    let subject = hex::encode(signet_core::hash::sha256(b"a cosign attestation"));
    let found = post_json(&agent, &u("/api/v1/index/retrieve"), &json!({"hash": format!("sha256:{subject}")})).unwrap().json();
    assert_eq!(found, json!([uuid]));
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries"), &entry).unwrap().status, 409);

    // The same envelope signed by another key than the one named is refused, by field.
    let (_, _, _, stranger) = dsse_envelope(b"another");
    let r = post_json(&agent, &u("/api/v1/log/entries"), &v1_intoto_v001_entry(&envelope, &stranger)).unwrap();
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("spec.content.envelope.signatures"), "{}", r.text());

    // A statement over the limit: logged, but kept and served without it.
    let (big, big_envelope, _, big_spki) = signed_envelope(b"a large attestation", &"x".repeat(4096));
    assert!(big.len() > 4096);
    let r = post_json(&agent, &u("/api/v1/log/entries"), &v1_intoto_v001_entry(&big_envelope, &big_spki)).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let big_uuid = r.header("etag").unwrap().to_string();
    let read = get(&agent, &u(&format!("/api/v1/log/entries/{big_uuid}"))).unwrap().json();
    assert!(read[&big_uuid].get("attestation").is_none(), "{read}");
    assert!(read[&big_uuid]["body"].is_string());

    // One retrieve with every kind this log holds, and a hashedrekord beside them.
    let (dsse_statement, dsse_envelope_text, sig, dsse_spki) = dsse_envelope(b"a dsse subject");
    let dsse = v1_dsse_entry(&dsse_envelope_text, &dsse_spki);
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries"), &dsse).unwrap().status, 201);
    let v002 = v1_intoto_entry(&dsse_statement, &sig, &dsse_spki);
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries"), &v002).unwrap().status, 201);
    let mixed = post_json(&agent, &u("/api/v1/log/entries/retrieve"), &json!({"entries": [entry, dsse, v002], "logIndexes": [1]})).unwrap();
    assert_eq!(mixed.status, 200, "{}", mixed.text());
    let mixed = mixed.json();
    let kinds: Vec<(String, String, bool)> = mixed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let e = m.as_object().unwrap().values().next().unwrap();
            let body: Value = serde_json::from_slice(&b64::decode(e["body"].as_str().unwrap()).unwrap()).unwrap();
            (body["kind"].as_str().unwrap().into(), body["apiVersion"].as_str().unwrap().into(), e.get("attestation").is_some())
        })
        .collect();
    let expected = [("intoto", "0.0.1", true), ("intoto", "0.0.1", true), ("dsse", "0.0.1", false), ("intoto", "0.0.2", true)];
    assert_eq!(kinds, expected.map(|(k, v, a)| (k.to_string(), v.to_string(), a)), "{mixed}");
}

#[test]
fn bad_input_is_refused_with_json_errors_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let u = |p: &str| format!("{}{p}", server.url);
    let signer = Signer::new();
    let good = signer.v1_entry(b"good");
    assert_eq!(post_json(&agent, &u("/api/v1/log/entries"), &good).unwrap().status, 201);
    let good_v2 = signer.v2_entry(b"good");
    assert_eq!(post_json(&agent, &u("/api/v2/log/entries"), &good_v2).unwrap().status, 201);

    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = signer.v1_entry(b"fresh artifact");
        f(&mut v);
        v
    };
    let (_, envelope, _, dsse_spki) = dsse_envelope(b"fresh subject");
    let (_, stranger_envelope, _, _) = dsse_envelope(b"fresh subject");
    let dsse_with = |f: &dyn Fn(&mut Value)| {
        let mut env: Value = serde_json::from_str(&envelope).unwrap();
        f(&mut env);
        v1_dsse_entry(&env.to_string(), &dsse_spki)
    };
    // secp256k1 is not an accepted curve.
    let k1 = hex::decode(format!("3056301006072a8648ce3d020106052b8104000a034200{}", "04".repeat(65))).unwrap();
    let oversized = vec![b' '; 200 * 1024];
    let cases: Vec<(&str, Box<dyn Fn() -> Reply>, u16, &str)> = vec![
        ("malformed JSON", Box::new(|| post_raw(&agent, &u("/api/v1/log/entries"), "application/json", b"{bad".to_vec()).unwrap()), 400, "not valid JSON"),
        ("JSON array", Box::new(|| post_raw(&agent, &u("/api/v1/log/entries"), "application/json", b"[]".to_vec()).unwrap()), 400, "JSON object"),
        ("unknown kind", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["kind"] = json!("rpm"))).unwrap()), 400, "kind"),
        ("unknown apiVersion", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["apiVersion"] = json!("9.9.9"))).unwrap()), 400, "apiVersion"),
        ("bad base64", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["spec"]["signature"]["content"] = json!("***"))).unwrap()), 400, "spec.signature.content"),
        ("bad hex", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["spec"]["data"]["hash"]["value"] = json!("g".repeat(64)))).unwrap()), 400, "spec.data.hash.value"),
        ("wrong digest length", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["spec"]["data"]["hash"]["value"] = json!("ab".repeat(20)))).unwrap()), 400, "64 hex"),
        ("signature does not verify", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["spec"]["data"]["hash"]["value"] = json!("ab".repeat(32)))).unwrap()), 422, "does not verify"),
        ("unsupported key type", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["spec"]["signature"]["publicKey"]["content"] = json!(b64::encode(signet_core::pem::encode("PUBLIC KEY", &k1))))).unwrap()), 422, "curve"),
        ("certificate does not parse", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &with(&|v| v["spec"]["signature"]["publicKey"]["content"] = json!(b64::encode(signet_core::pem::encode("CERTIFICATE", b"nope"))))).unwrap()), 422, "X.509"),
        ("body over the limit", Box::new(|| post_raw(&agent, &u("/api/v1/log/entries"), "application/json", oversized.clone()).unwrap()), 413, "limit"),
        ("wrong content type", Box::new(|| post_raw(&agent, &u("/api/v1/log/entries"), "text/plain", b"{}".to_vec()).unwrap()), 415, "application/json"),
        ("dsse envelope not JSON", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &v1_dsse_entry("{nope", &dsse_spki)).unwrap()), 400, "spec.proposedContent.envelope"),
        ("dsse payload not base64", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &dsse_with(&|e| e["payload"] = json!("%%%"))).unwrap()), 400, "spec.proposedContent.envelope.payload"),
        ("dsse without signatures", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &dsse_with(&|e| e["signatures"] = json!([]))).unwrap()), 400, "spec.proposedContent.envelope.signatures"),
        ("dsse without verifiers", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &{ let mut v = v1_dsse_entry(&envelope, &dsse_spki); v["spec"]["proposedContent"]["verifiers"] = json!([]); v }).unwrap()), 400, "spec.proposedContent.verifiers"),
        ("dsse server-side fields", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &{ let mut v = v1_dsse_entry(&envelope, &dsse_spki); v["spec"]["payloadHash"] = json!({}); v }).unwrap()), 400, "unknown field"),
        ("dsse tampered payload", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &dsse_with(&|e| e["payload"] = json!(b64::encode(b"{}")))).unwrap()), 422, "does not verify"),
        ("dsse signed by another key", Box::new(|| post_json(&agent, &u("/api/v1/log/entries"), &v1_dsse_entry(&stranger_envelope, &dsse_spki)).unwrap()), 422, "does not verify"),
        ("v2 dsseRequestV002", Box::new(|| post_json(&agent, &u("/api/v2/log/entries"), &json!({"dsseRequestV002": {"envelope": {}, "verifiers": []}})).unwrap()), 400, "dsseRequestV002"),
        ("negative logIndex", Box::new(|| get(&agent, &u("/api/v1/log/entries?logIndex=-1")).unwrap()), 400, "logIndex"),
        ("huge logIndex", Box::new(|| get(&agent, &u("/api/v1/log/entries?logIndex=99999999999999999999")).unwrap()), 400, "logIndex"),
        ("absent logIndex", Box::new(|| get(&agent, &u("/api/v1/log/entries?logIndex=9223372036854775807")).unwrap()), 404, "no entry"),
        ("firstSize > lastSize", Box::new(|| get(&agent, &u("/api/v1/log/proof?firstSize=2&lastSize=1")).unwrap()), 400, "firstSize"),
        ("lastSize beyond the tree", Box::new(|| get(&agent, &u("/api/v1/log/proof?firstSize=1&lastSize=9")).unwrap()), 400, "lastSize"),
        ("bad UUID", Box::new(|| get(&agent, &u("/api/v1/log/entries/xyz")).unwrap()), 400, "UUID"),
        ("search by a key format no entry has", Box::new(|| post_json(&agent, &u("/api/v1/index/retrieve"), &json!({"publicKey": {"format": "pgp", "content": "AA=="}})).unwrap()), 400, "x509"),
        ("v2 wrong digest length", Box::new(|| post_json(&agent, &u("/api/v2/log/entries"), &{ let mut v = signer.v2_entry(b"z"); v["hashedRekordRequestV002"]["digest"] = json!(b64::encode([0u8; 31])); v }).unwrap()), 400, "digest"),
        ("v2 unknown field", Box::new(|| post_json(&agent, &u("/api/v2/log/entries"), &{ let mut v = signer.v2_entry(b"z"); v["x"] = json!(1); v }).unwrap()), 400, "unknown field"),
        ("v2 bad signature", Box::new(|| post_json(&agent, &u("/api/v2/log/entries"), &{ let mut v = signer.v2_entry(b"z"); v["hashedRekordRequestV002"]["digest"] = json!(b64::encode([0u8; 32])); v }).unwrap()), 422, "does not verify"),
        ("malformed tile path", Box::new(|| get(&agent, &u("/api/v2/tile/0/12")).unwrap()), 400, "tile"),
        ("tile beyond the tree", Box::new(|| get(&agent, &u("/api/v2/tile/0/x001/000")).unwrap()), 404, "tile"),
        ("unknown endpoint", Box::new(|| get(&agent, &u("/api/v9/nothing")).unwrap()), 404, "endpoint"),
        ("wrong method", Box::new(|| get(&agent, &u("/api/v2/log/entries")).unwrap()), 405, "method"),
    ];
    for (name, call, status, needle) in cases {
        let r = call();
        assert_eq!(r.status, status, "{name}: {}", r.text());
        let body = r.json();
        assert_eq!(body["code"], status, "{name}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(needle), "{name}: message {message:?} should mention {needle:?}");
    }
    // Nothing was written by any of them: each log holds its genesis entry and the good one.
    assert_eq!(get(&agent, &u("/api/v1/log")).unwrap().json()["treeSize"], 2);
    let head = get(&agent, &u("/api/v2/checkpoint")).unwrap().text();
    assert_eq!(head.lines().nth(1), Some("2"));
}

#[test]
fn restart_keeps_identity_and_contents() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let agent = agent();
    let signer = Signer::new();
    let entry = signer.v1_entry(b"persist");
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &entry).unwrap();
    assert_eq!(r.status, 201);
    let uuid = r.header("etag").unwrap().to_string();
    let before = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let key_before = get(&agent, &format!("{}/api/v1/log/publicKey", server.url)).unwrap().text();
    server.kill();
    let server = Server::start(dir.path(), &[]);
    let after = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    assert_eq!(before, after);
    assert_eq!(get(&agent, &format!("{}/api/v1/log/publicKey", server.url)).unwrap().text(), key_before);
    // The lookup indexes are rebuilt: the entry is found by UUID and by digest, and is still a duplicate.
    assert_eq!(get(&agent, &format!("{}/api/v1/log/entries/{uuid}", server.url)).unwrap().status, 200);
    let digest = entry["spec"]["data"]["hash"]["value"].as_str().unwrap();
    let found = post_json(&agent, &format!("{}/api/v1/index/retrieve", server.url), &json!({"hash": digest})).unwrap().json();
    assert_eq!(found, json!([uuid]));
    assert_eq!(post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &entry).unwrap().status, 409);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for k in ["keys/rekor-v1.pem", "keys/rekor-v2.pem"] {
            let mode = std::fs::metadata(dir.path().join(k)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{k}");
        }
    }
}
