//! Log entries for Rekor v1 (hashedrekord 0.0.1, dsse 0.0.1) and v2 (hashedrekord 0.0.2),
//! and the bundle `tlogEntries` element each reply becomes.
//!
//! Rekor v2 has no DSSE kind: a DSSE envelope goes there as a hashedrekord whose digest is
//! the SHA-256 of the envelope's PAE and whose signature is the envelope's (rekor-tiles
//! `CLIENTS.md`), as sigstore-python 4.5 and sigstore-go 1.3 do. So [`v2_request`] serves
//! both, given the digest of what was signed.
//!
//! A Rekor v2 reply already is a protobuf-JSON `TransparencyLogEntry`. A v1 reply is Rekor's
//! swagger shape (hex log ID and hashes, a SET beside the proof), so it is translated.

use serde_json::{json, Value};
use signet_core::{b64, pem};

use crate::ClientError;

pub const V1_PATH: &str = "/api/v1/log/entries";
pub const V2_PATH: &str = "/api/v2/log/entries";

/// A Rekor v1 hashedrekord 0.0.1 over a SHA-256 digest, signed by the key in `cert_der`.
pub fn v1_request(digest: &[u8; 32], signature: &[u8], cert_der: &[u8]) -> Value {
    json!({
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hex::encode(digest)}},
            "signature": {"content": b64::encode(signature), "publicKey": {"content": b64::encode(pem::encode("CERTIFICATE", cert_der))}},
        }
    })
}

/// A Rekor v1 dsse 0.0.1 over an envelope (its JSON text, which the log hashes as sent),
/// verified by the key in `cert_der`.
pub fn v1_dsse_request(envelope_json: &str, cert_der: &[u8]) -> Value {
    json!({
        "apiVersion": "0.0.1",
        "kind": "dsse",
        "spec": {
            "proposedContent": {"envelope": envelope_json, "verifiers": [b64::encode(pem::encode("CERTIFICATE", cert_der))]},
        }
    })
}

/// A Rekor v2 `hashedRekordRequestV002` for an ECDSA P-256 signature over a SHA-256 digest.
pub fn v2_request(digest: &[u8; 32], signature: &[u8], cert_der: &[u8]) -> Value {
    json!({
        "hashedRekordRequestV002": {
            "digest": b64::encode(digest),
            "signature": {
                "content": b64::encode(signature),
                "verifier": {"keyDetails": "PKIX_ECDSA_P256_SHA_256", "x509Certificate": {"rawBytes": b64::encode(cert_der)}},
            },
        }
    })
}

fn bad(why: impl Into<String>) -> ClientError {
    ClientError::Service { service: "Rekor", url: V1_PATH.into(), why: why.into() }
}

/// Translates a Rekor v1 `{uuid: entry}` reply into a bundle `TransparencyLogEntry`.
pub fn v1_to_bundle_entry(reply: &Value) -> Result<Value, ClientError> {
    let entry = reply
        .as_object()
        .filter(|m| m.len() == 1)
        .and_then(|m| m.values().next())
        .ok_or_else(|| bad("reply is not a map of one entry UUID to its entry"))?;
    let str_at = |ptr: &str| entry.pointer(ptr).and_then(Value::as_str).ok_or_else(|| bad(format!("entry has no {ptr}")));
    let int_at = |ptr: &str| entry.pointer(ptr).and_then(Value::as_i64).ok_or_else(|| bad(format!("entry has no integer {ptr}")));
    let hex_b64 = |h: &str, what: &str| hex::decode(h).map(b64::encode).map_err(|_| bad(format!("{what} is not hex")));

    let body_b64 = str_at("/body")?;
    let body: Value = b64::decode(body_b64)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| bad("body is not base64 of JSON"))?;
    let hashes: Vec<String> = entry
        .pointer("/verification/inclusionProof/hashes")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("entry has no inclusion proof hashes"))?
        .iter()
        .map(|h| h.as_str().ok_or_else(|| bad("a proof hash is not a string")).and_then(|h| hex_b64(h, "a proof hash")))
        .collect::<Result<_, _>>()?;
    Ok(json!({
        "logIndex": int_at("/logIndex")?.to_string(),
        "logId": {"keyId": hex_b64(str_at("/logID")?, "logID")?},
        "kindVersion": {"kind": body["kind"], "version": body["apiVersion"]},
        "integratedTime": int_at("/integratedTime")?.to_string(),
        "inclusionPromise": {"signedEntryTimestamp": str_at("/verification/signedEntryTimestamp")?},
        "inclusionProof": {
            "logIndex": int_at("/verification/inclusionProof/logIndex")?.to_string(),
            "rootHash": hex_b64(str_at("/verification/inclusionProof/rootHash")?, "rootHash")?,
            "treeSize": int_at("/verification/inclusionProof/treeSize")?.to_string(),
            "hashes": hashes,
            "checkpoint": {"envelope": str_at("/verification/inclusionProof/checkpoint")?},
        },
        "canonicalizedBody": body_b64,
    }))
}

/// Checks that a Rekor v2 reply carries what a bundle needs, and returns it as the entry.
pub fn v2_to_bundle_entry(reply: Value) -> Result<Value, ClientError> {
    for ptr in ["/logIndex", "/logId/keyId", "/kindVersion/kind", "/inclusionProof/checkpoint/envelope", "/canonicalizedBody"] {
        if reply.pointer(ptr).is_none() {
            return Err(ClientError::Service { service: "Rekor", url: V2_PATH.into(), why: format!("entry has no {ptr}") });
        }
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_reply_becomes_protobuf_json() {
        let body = b64::encode(br#"{"apiVersion":"0.0.1","kind":"hashedrekord","spec":{}}"#);
        let reply = json!({"24296fb24b8ad77aab": {
            "body": body, "integratedTime": 1700000000, "logID": "0a0b", "logIndex": 7,
            "verification": {
                "inclusionProof": {"checkpoint": "cp\n", "hashes": ["00ff"], "logIndex": 7, "rootHash": "ff00", "treeSize": 8},
                "signedEntryTimestamp": "U0VU",
            }
        }});
        let e = v1_to_bundle_entry(&reply).unwrap();
        assert_eq!(e["logIndex"], "7");
        assert_eq!(e["logId"]["keyId"], b64::encode([0x0a, 0x0b]));
        assert_eq!(e["kindVersion"], json!({"kind": "hashedrekord", "version": "0.0.1"}));
        assert_eq!(e["inclusionProof"]["hashes"][0], b64::encode([0x00, 0xff]));
        assert_eq!(e["inclusionProof"]["treeSize"], "8");
        assert_eq!(e["inclusionPromise"]["signedEntryTimestamp"], "U0VU");
        assert!(v1_to_bundle_entry(&json!({"a": {}, "b": {}})).is_err());
    }

    #[test]
    fn dsse_requests() {
        let env = crate::dsse::envelope(b"{}", b"sig").to_string();
        let v1 = v1_dsse_request(&env, b"cert");
        assert_eq!(v1["kind"], "dsse");
        assert_eq!(v1["apiVersion"], "0.0.1");
        assert_eq!(v1["spec"]["proposedContent"]["envelope"], env, "the envelope travels as JSON text");
        let pem = b64::decode(v1["spec"]["proposedContent"]["verifiers"][0].as_str().unwrap()).unwrap();
        assert_eq!(pem::decode_first(&pem).unwrap().der, b"cert");
        // On Rekor v2 the envelope is a hashedrekord over the digest of its PAE.
        let digest = signet_core::hash::sha256(&crate::dsse::pae(b"{}"));
        let v2 = v2_request(&digest, b"sig", b"cert");
        assert_eq!(v2["hashedRekordRequestV002"]["digest"], b64::encode(digest));
        assert_eq!(v2["hashedRekordRequestV002"]["signature"]["content"], b64::encode(b"sig"));
    }
}
