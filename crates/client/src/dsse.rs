//! DSSE envelopes over in-toto statements (github.com/secure-systems-lab/dsse): what is
//! signed (the PAE), the envelope, and the checks a statement passes before it is signed.

use serde_json::{json, Value};
use signet_core::b64;

use crate::ClientError;

/// The payload type of an in-toto statement.
pub const IN_TOTO: &str = "application/vnd.in-toto+json";

/// The bytes a DSSE signature covers: "DSSEv1" SP len(type) SP type SP len(body) SP body.
pub fn pae(payload: &[u8]) -> Vec<u8> {
    signet_verify::dsse::pae(IN_TOTO, payload)
}

/// The protobuf-JSON `io.intoto.Envelope` with one signature (no key ID, as Sigstore clients
/// write it: the bundle's certificate names the key).
pub fn envelope(payload: &[u8], signature: &[u8]) -> Value {
    json!({"payload": b64::encode(payload), "payloadType": IN_TOTO, "signatures": [{"sig": b64::encode(signature)}]})
}

/// Checks that `statement` is an in-toto statement a verifier can match an artifact against:
/// a JSON object whose `_type` is an in-toto Statement and with at least one subject that has
/// a digest. The bytes are signed exactly as given.
pub fn check_statement(statement: &[u8]) -> Result<(), ClientError> {
    let bad = |why: String| ClientError::Statement(why);
    let v: Value = serde_json::from_slice(statement).map_err(|e| bad(format!("not JSON: {e}")))?;
    let type_ = v.get("_type").and_then(Value::as_str).ok_or_else(|| bad("has no string _type".into()))?;
    if !type_.starts_with("https://in-toto.io/Statement/") {
        return Err(bad(format!("_type {type_:?} is not an in-toto Statement (https://in-toto.io/Statement/v1)")));
    }
    let subjects = v.get("subject").and_then(Value::as_array).filter(|s| !s.is_empty());
    let subjects = subjects.ok_or_else(|| bad("needs a non-empty subject list: a verifier matches the artifact against it".into()))?;
    for (i, s) in subjects.iter().enumerate() {
        let digests = s.get("digest").and_then(Value::as_object).filter(|d| !d.is_empty());
        let digests = digests.ok_or_else(|| bad(format!("subject[{i}] has no digest")))?;
        if let Some((alg, _)) = digests.iter().find(|(_, d)| !d.as_str().is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_hexdigit()))) {
            return Err(bad(format!("subject[{i}].digest.{alg} is not a hex string")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_the_in_toto_encoding() {
        assert_eq!(pae(b"{\"a\":1}"), b"DSSEv1 28 application/vnd.in-toto+json 7 {\"a\":1}".to_vec());
        assert_eq!(pae(b""), b"DSSEv1 28 application/vnd.in-toto+json 0 ".to_vec());
        // Lengths are byte lengths, not character counts.
        assert!(pae("é".as_bytes()).ends_with(" 2 é".as_bytes()));
    }

    #[test]
    fn statements_are_checked_before_signing() {
        let good = br#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a","digest":{"sha256":"ab01"}}],"predicateType":"x","predicate":{}}"#;
        check_statement(good).unwrap();
        for (bad, why) in [
            (&b"not json"[..], "not JSON"),
            (br#"{"subject":[]}"#, "_type"),
            (br#"{"_type":"https://example.com/Other","subject":[{"digest":{"sha256":"ab"}}]}"#, "not an in-toto"),
            (br#"{"_type":"https://in-toto.io/Statement/v1","subject":[]}"#, "non-empty subject"),
            (br#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a"}]}"#, "subject[0] has no digest"),
            (br#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"xyz"}}]}"#, "subject[0].digest.sha256"),
        ] {
            let err = check_statement(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
    }
}
