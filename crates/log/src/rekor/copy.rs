//! A Rekor v1 log's entries as its API serves them, checked before they are copied
//! ([`crate::import`], `signet import rekor`). Each must be the entry the log says: at the
//! index asked for, under the log's ID, its UUID the hash of its body, and its SET signed by
//! the log's key over exactly those. Its place in the tree is proven for all entries at once,
//! against the log's signed checkpoint ([`crate::import::Import::finish`]).

use serde::Deserialize;
use signet_core::pubkey::PublicKey;
use signet_core::{b64, hash::sha256};

use super::stored_keys;
use crate::import::CopiedEntry;

/// One entry of a `POST /api/v1/log/entries/retrieve` or `GET /api/v1/log/entries` answer
/// (the value of its `{uuid: entry}` map), the fields a copy keeps.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Served {
    pub body: String,
    pub integrated_time: i64,
    #[serde(rename = "logID")]
    pub log_id: String,
    pub log_index: u64,
    pub verification: Option<Verification>,
    /// What a Rekor with attestation storage serves beside an intoto entry.
    #[serde(default)]
    pub attestation: Option<ServedAttestation>,
}

#[derive(Debug, Deserialize)]
pub struct ServedAttestation {
    /// Base64 of the statement.
    pub data: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub signed_entry_timestamp: Option<String>,
}

/// Why a served entry is not copied: it is not the entry asked for, or not as the log
/// signed it. Each names the entry (its index, and its UUID when it says which).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    #[error("entry {uuid} names log {named}, not {expected} (the key given)")]
    OtherLog { uuid: String, named: String, expected: String },
    #[error("asked for entry {asked}, got entry {got} ({uuid})")]
    OtherIndex { uuid: String, asked: u64, got: u64 },
    #[error("entry {index}: its body is not base64: {source}")]
    Body { index: u64, source: base64::DecodeError },
    #[error("entry {index}: its UUID {uuid} is not its body's leaf hash {leaf} in tree {tree_id:016x}")]
    Uuid { index: u64, uuid: String, leaf: String, tree_id: i64 },
    #[error("entry {index} ({uuid}) has no signedEntryTimestamp")]
    NoSet { index: u64, uuid: String },
    #[error("entry {index}: its signedEntryTimestamp is not base64: {source}")]
    SetEncoding { index: u64, source: base64::DecodeError },
    #[error("entry {index} ({uuid}): its signedEntryTimestamp does not verify with the log's key")]
    SetSignature { index: u64, uuid: String },
}

/// `served` (under `uuid`), checked to be entry `index` of tree `tree_id` of the log whose
/// key is `key`, as it will be stored.
pub fn check(uuid: &str, served: &Served, index: u64, tree_id: i64, key: &PublicKey) -> Result<CopiedEntry, CopyError> {
    let log_id = hex::encode(sha256(&key.spki_der));
    if !served.log_id.eq_ignore_ascii_case(&log_id) {
        return Err(CopyError::OtherLog { uuid: uuid.to_string(), named: served.log_id.clone(), expected: log_id });
    }
    if served.log_index != index {
        return Err(CopyError::OtherIndex { uuid: uuid.to_string(), asked: index, got: served.log_index });
    }
    let body = b64::decode(&served.body).map_err(|source| CopyError::Body { index, source })?;
    let leaf = crate::merkle::leaf_hash(&body);
    let leaf_hex = hex::encode(leaf);
    let named = uuid.to_ascii_lowercase();
    if named != leaf_hex && named != super::v1::entry_uuid(tree_id, &leaf) {
        return Err(CopyError::Uuid { index, uuid: uuid.to_string(), leaf: leaf_hex, tree_id });
    }
    let set = served
        .verification
        .as_ref()
        .and_then(|v| v.signed_entry_timestamp.as_deref())
        .ok_or_else(|| CopyError::NoSet { index, uuid: uuid.to_string() })?;
    let set = b64::decode(set).map_err(|source| CopyError::SetEncoding { index, source })?;
    key.verify_message(&super::v1::set_payload(&body, served.integrated_time, &served.log_id, index), &set)
        .map_err(|_| CopyError::SetSignature { index, uuid: uuid.to_string() })?;
    let keys = stored_keys(&body);
    let attestation = served_attestation(served, &body);
    // With the statement at hand, an intoto entry is found by its subject, as an append's is.
    let digest = match attestation.as_ref().and_then(|a| super::dsse::first_sha256_subject(&a.data)) {
        Some(subject) => Some(format!("sha256:{subject}")),
        None => stored_digest(&body),
    };
    Ok(CopiedEntry {
        digest: digest.map(String::into_bytes),
        attestation,
        identity: keys.as_ref().and_then(|k| k.identity.clone()).map(String::into_bytes),
        public_key: keys.map(|k| k.public_key.into_bytes()),
        integrated_time: served.integrated_time,
        stamp: Some(set),
        body,
    })
}

/// The attestation a Rekor served with an intoto entry, kept only if it is the statement the
/// body names (its SHA-256 is the body's `payloadHash`): the SET does not cover it.
fn served_attestation(served: &Served, body: &[u8]) -> Option<super::Attestation> {
    let data = b64::decode(served.attestation.as_ref()?.data.as_deref()?).ok()?;
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    if doc.get("kind")?.as_str()? != "intoto" {
        return None;
    }
    let named = doc.pointer("/spec/content/payloadHash")?;
    let attestation = super::Attestation::new(data);
    (named.get("algorithm")?.as_str()? == "sha256" && named.get("value")?.as_str()?.eq_ignore_ascii_case(&hex::encode(attestation.digest)))
        .then_some(attestation)
}

/// The artifact digest a stored body is searchable by, `<algorithm>:<hex>`: a hashedrekord's
/// or rekord's data hash, a dsse or intoto entry's payload hash (the in-toto subjects an
/// append reads are in the payload, which the body does not keep).
pub fn stored_digest(body: &[u8]) -> Option<String> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    let spec = doc.get("spec")?;
    let hash = match doc.get("kind")?.as_str()? {
        "hashedrekord" | "rekord" => spec.pointer("/data/hash")?,
        "dsse" => spec.get("payloadHash")?,
        "intoto" => spec.pointer("/content/payloadHash")?,
        _ => return None,
    };
    let (alg, value) = (hash.get("algorithm")?.as_str()?, hash.get("value")?.as_str()?);
    // Rekor's names only: another (one with a `:` in it, found by the `rekor_import` fuzz
    // target) would make a key that reads as a different algorithm and digest.
    let known = matches!(alg, "sha256" | "sha384" | "sha512");
    (known && !value.is_empty() && value.bytes().all(|b| b.is_ascii_hexdigit())).then(|| format!("{alg}:{}", value.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rekor::v1::{parse_value, tests::signed_request};
    use signet_keys::{Algorithm, Signer};

    /// Entry `index` of a log with key `key`, as Rekor serves it.
    fn served(key: &Signer, body: &[u8], index: u64) -> Served {
        let log_id = hex::encode(key.key_id());
        let set = key.sign(&crate::rekor::v1::set_payload(body, 1_700_000_000, &log_id, index)).unwrap();
        Served {
            body: b64::encode(body),
            integrated_time: 1_700_000_000,
            log_id,
            log_index: index,
            verification: Some(Verification { signed_entry_timestamp: Some(b64::encode(&set)) }),
            attestation: None,
        }
    }

    #[test]
    fn an_attestation_is_kept_only_if_it_is_the_statement_the_body_names() {
        use crate::rekor::dsse::tests::STATEMENT;
        let key = Signer::generate(Algorithm::EcdsaP256Sha256).unwrap();
        let public = PublicKey::from_spki(key.spki_der()).unwrap();
        let (request, _) = crate::rekor::dsse::tests::request(STATEMENT.as_bytes());
        let envelope = request["spec"]["proposedContent"]["envelope"].as_str().unwrap();
        let verifier = &request["spec"]["proposedContent"]["verifiers"][0];
        let e = parse_value(&serde_json::json!({"apiVersion": "0.0.1", "kind": "intoto",
            "spec": {"content": {"envelope": envelope}, "publicKey": verifier}}))
        .unwrap();
        let uuid = hex::encode(crate::merkle::leaf_hash(&e.body));
        let with = |data: &[u8]| {
            let mut s = served(&key, &e.body, 3);
            s.attestation = Some(ServedAttestation { data: Some(b64::encode(data)) });
            check(&uuid, &s, 3, 1, &public).unwrap()
        };
        let copied = with(STATEMENT.as_bytes());
        assert_eq!(copied.attestation.as_ref().map(|a| a.data.as_slice()), Some(STATEMENT.as_bytes()));
        assert_eq!(copied.digest.as_deref(), Some(e.digest_key.as_bytes()), "found by its subject, as when appended");
        let other = with(b"another statement");
        assert_eq!(other.attestation, None);
        assert_eq!(other.digest, stored_digest(&e.body).map(String::into_bytes), "found by the payload hash");
        let plain = parse_value(&signed_request(b"artifact")).unwrap();
        let mut s = served(&key, &plain.body, 3);
        s.attestation = Some(ServedAttestation { data: Some(b64::encode(STATEMENT)) });
        assert_eq!(check(&hex::encode(crate::merkle::leaf_hash(&plain.body)), &s, 3, 1, &public).unwrap().attestation, None);
    }

    #[test]
    fn an_entry_is_copied_only_as_the_log_served_and_signed_it() {
        let key = Signer::generate(Algorithm::EcdsaP256Sha256).unwrap();
        let public = PublicKey::from_spki(key.spki_der()).unwrap();
        let e = parse_value(&signed_request(b"artifact")).unwrap();
        let uuid = crate::rekor::v1::entry_uuid(77, &crate::merkle::leaf_hash(&e.body));
        let copied = check(&uuid, &served(&key, &e.body, 5), 5, 77, &public).unwrap();
        assert_eq!(copied.body, e.body);
        assert_eq!(copied.digest.as_deref(), Some(e.digest_key.as_bytes()));
        assert_eq!(copied.public_key.as_deref(), Some(e.public_key.as_bytes()));
        assert_eq!(copied.integrated_time, 1_700_000_000);
        // The bare leaf hash names it as well.
        assert!(check(&uuid[16..], &served(&key, &e.body, 5), 5, 77, &public).is_ok());

        let other = Signer::generate(Algorithm::EcdsaP256Sha256).unwrap();
        let mut forged = served(&other, &e.body, 5);
        forged.log_id = hex::encode(key.key_id());
        assert!(check(&uuid, &forged, 5, 77, &public).unwrap_err().to_string().contains("does not verify"));
        assert!(check(&uuid, &served(&other, &e.body, 5), 5, 77, &public).unwrap_err().to_string().contains("names log"));
        assert!(check(&uuid, &served(&key, &e.body, 6), 5, 77, &public).unwrap_err().to_string().contains("asked for entry 5"));
        assert!(check(&uuid, &served(&key, &e.body, 5), 5, 78, &public).unwrap_err().to_string().contains("UUID"));
        let mut moved = served(&key, &e.body, 5);
        moved.integrated_time += 1;
        assert!(check(&uuid, &moved, 5, 77, &public).unwrap_err().to_string().contains("does not verify"), "the SET covers the time");
        let mut unsigned = served(&key, &e.body, 5);
        unsigned.verification = None;
        assert!(check(&uuid, &unsigned, 5, 77, &public).unwrap_err().to_string().contains("no signedEntryTimestamp"));
    }

    #[test]
    fn each_kind_is_found_by_the_digest_its_body_names() {
        let e = parse_value(&signed_request(b"artifact")).unwrap();
        assert_eq!(stored_digest(&e.body), Some(e.digest_key));
        assert_eq!(
            stored_digest(br#"{"kind":"intoto","apiVersion":"0.0.2","spec":{"content":{"payloadHash":{"algorithm":"sha256","value":"AB"}}}}"#).as_deref(),
            Some("sha256:ab")
        );
        assert_eq!(stored_digest(br#"{"kind":"alpine","spec":{}}"#), None);
        for (alg, value) in [("sh:a589", "11cc"), ("", "11cc"), ("md5", "11cc"), ("sha256", ""), ("sha256", "xyz")] {
            let body = format!(r#"{{"kind":"hashedrekord","spec":{{"data":{{"hash":{{"algorithm":"{alg}","value":"{value}"}}}}}}}}"#);
            assert_eq!(stored_digest(body.as_bytes()), None, "{alg}:{value}");
        }
    }
}
