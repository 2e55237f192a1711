//! The genesis entry at index 0 of each Rekor log.
//!
//! Go's protojson leaves out zero values, so when cosign re-encodes a bundle for an entry at
//! index 0 of a tree of size 1, `logIndex` and the empty `hashes` disappear, and
//! sigstore-python then refuses the bundle as malformed. A new log therefore begins with one
//! entry of its own: a hashedrekord of the text `signet genesis <origin>`, signed by the
//! log's key. It is well-formed and verifiable like any other entry, and no client's entry
//! is ever at index 0.

use serde_json::json;
use signet_keys::Signer;
use signet_core::{b64, hash::sha256, hexfmt, pem};

use super::{v1, v2, EntryError};

fn statement(origin: &str) -> Vec<u8> {
    format!("signet genesis {origin}").into_bytes()
}

/// The genesis entry of a Rekor v1 log: `(canonical body, digest key)`.
pub fn v1_entry(key: &Signer, origin: &str) -> Result<(Vec<u8>, String), EntryError> {
    let message = statement(origin);
    let sig = key.sign(&message).map_err(|e| super::rejected("genesis", e))?;
    let request = json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
        "signature": {"content": b64::encode(&sig), "publicKey": {"content": b64::encode(pem::encode("PUBLIC KEY", key.spki_der()))}},
        "data": {"hash": {"algorithm": "sha256", "value": hexfmt::encode(&sha256(&message))}}}});
    let e = v1::parse_value(&request)?;
    Ok((e.body, e.digest_key))
}

/// The genesis entry of a Rekor v2 log: `(canonical body, digest key)`.
pub fn v2_entry(key: &Signer, origin: &str) -> Result<(Vec<u8>, String), EntryError> {
    let message = statement(origin);
    let sig = key.sign(&message).map_err(|e| super::rejected("genesis", e))?;
    let request = json!({"hashedRekordRequestV002": {
        "digest": b64::encode(sha256(&message)),
        "signature": {"content": b64::encode(&sig), "verifier": {
            "publicKey": {"rawBytes": b64::encode(key.spki_der())}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}});
    let e = v2::parse_value(&request)?;
    Ok((e.body, e.digest_key))
}
