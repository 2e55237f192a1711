//! Rekor v1 `dsse` 0.0.1: a DSSE envelope, verified and recorded by its hashes.
//!
//! The proposed entry carries the envelope as a JSON string and the keys that verify it:
//! `{apiVersion:"0.0.1", kind:"dsse", spec:{proposedContent:{envelope, verifiers:[b64 PEM]}}}`.
//! As in Rekor (`pkg/types/dsse/v0.0.1`), every signature must verify over the DSSE PAE with
//! one of the verifiers, and the stored body keeps hashes, not the envelope:
//! `{apiVersion, kind, spec:{envelopeHash, payloadHash, signatures:[{signature, verifier}]}}`,
//! where `envelopeHash` is SHA-256 of the envelope string exactly as sent, `payloadHash`
//! SHA-256 of the decoded payload, and the signatures are sorted by their base64 text, each
//! with its key re-armoured as Go's `encoding/pem` writes it. Rekor v2 has no DSSE kind: a
//! client logs an envelope there as a hashedrekord over the digest of its PAE.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};
use signet_core::pubkey::HashAlg;
use signet_core::wire::{self, Base64};
use signet_core::{b64, hash::sha256, jcs, pem};

use super::{malformed, pem_key, rejected, EntryError, VerifiedEntry};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = DsseV001Spec)]
pub(super) struct DsseSpec {
    #[serde(deserialize_with = "wire::object")]
    proposed_content: ProposedContent,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DsseV001ProposedContent)]
struct ProposedContent {
    /// The envelope as the client wrote it: its hash is of these exact bytes.
    envelope: String,
    verifiers: Vec<Base64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Envelope {
    payload: Base64,
    payload_type: String,
    #[serde(deserialize_with = "wire::objects")]
    signatures: Vec<EnvelopeSignature>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeSignature {
    #[serde(default)]
    #[allow(dead_code)] // Read so that it is allowed; Rekor ignores it, and so do we.
    keyid: Option<String>,
    sig: Base64,
}

/// The most signatures (and verifiers) an envelope may carry. Sigstore's clients sign with
/// one; the bound keeps the signature checks of one request (up to signatures × keys) few.
pub const MAX_SIGNATURES: usize = 8;

/// DSSE v1 pre-authentication encoding: "DSSEv1" SP len(type) SP type SP len(body) SP body.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!("DSSEv1 {} {} {} ", payload_type.len(), payload_type, payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out
}

/// Parses and verifies the `spec` of a proposed dsse 0.0.1 entry.
pub fn parse_spec(spec: &str) -> Result<VerifiedEntry, EntryError> {
    let spec: DsseSpec = wire::from_slice(spec.as_bytes()).map_err(|e| e.within("spec"))?;
    let ProposedContent { envelope: envelope_text, verifiers: verifier_values } = spec.proposed_content;
    let ParsedEnvelope { payload_type, payload, signatures } = parse_envelope(&envelope_text, "spec.proposedContent.envelope")?;
    let payload_type = payload_type.as_str();

    if verifier_values.is_empty() {
        return Err(malformed("spec.proposedContent.verifiers", "must be a list of one or more base64 PEM keys or certificates"));
    }
    if verifier_values.len() > MAX_SIGNATURES {
        return Err(malformed("spec.proposedContent.verifiers", format!("at most {MAX_SIGNATURES} verifiers, got {}", verifier_values.len())));
    }
    let mut verifiers = Vec::with_capacity(verifier_values.len());
    let mut first_certificate = None;
    let mut public_key = String::new();
    for (i, v) in verifier_values.iter().enumerate() {
        let (block, key) = pem_key(&v.0, &format!("spec.proposedContent.verifiers[{i}]"))?;
        if i == 0 {
            public_key = super::public_key_index(&block.label, &block.der);
        }
        if block.label == "CERTIFICATE" && first_certificate.is_none() {
            first_certificate = Some(block.der.clone());
        }
        verifiers.push((key, b64::encode(pem::encode(&block.label, &block.der))));
    }

    // Rekor verifies with SHA-256 whatever the key (sigstore `LoadVerifier(key, SHA256)`);
    // Ed25519 signs the PAE itself.
    let message = pae(payload_type, &payload);
    let mut recorded = BTreeMap::new();
    for (i, sig) in signatures.iter().enumerate() {
        let verifier = verifiers
            .iter()
            .find(|(key, _)| key.verify_with_hash(HashAlg::Sha256, &message, sig).is_ok())
            .map(|(_, pem_b64)| pem_b64.clone())
            .ok_or_else(|| {
                rejected(
                    format!("spec.proposedContent.envelope.signatures[{i}].sig"),
                    "a signature over the DSSE PAE does not verify with any of the verifiers",
                )
            })?;
        recorded.insert(b64::encode(sig), verifier);
    }

    let payload_hash = hex::encode(sha256(&payload));
    let body = jcs::to_vec(&json!({
        "apiVersion": "0.0.1",
        "kind": "dsse",
        "spec": {
            "envelopeHash": {"algorithm": "sha256", "value": hex::encode(sha256(envelope_text.as_bytes()))},
            "payloadHash": {"algorithm": "sha256", "value": payload_hash},
            "signatures": recorded.iter().map(|(s, v)| json!({"signature": s, "verifier": v})).collect::<Vec<_>>(),
        }
    }));
    let subject = (payload_type == "application/vnd.in-toto+json").then(|| first_sha256_subject(&payload)).flatten();
    let identity = first_certificate.and_then(|der| super::certificate_identity(&der));
    Ok(VerifiedEntry { body, digest_key: format!("sha256:{}", subject.unwrap_or(payload_hash)), identity, public_key, attestation: None })
}

/// A DSSE envelope's parts, decoded.
pub(super) struct ParsedEnvelope {
    pub payload_type: String,
    pub payload: Vec<u8>,
    /// Each signature, decoded and not empty; one to [`MAX_SIGNATURES`].
    pub signatures: Vec<Vec<u8>>,
}

/// Reads the DSSE envelope JSON `text` (sent as a string field at `field`).
pub(super) fn parse_envelope(text: &str, field: &str) -> Result<ParsedEnvelope, EntryError> {
    let envelope: Envelope = wire::from_str_at(text, field)?;
    if envelope.signatures.is_empty() {
        return Err(malformed(format!("{field}.signatures"), "must be a list of one or more signatures"));
    }
    if envelope.signatures.len() > MAX_SIGNATURES {
        return Err(malformed(format!("{field}.signatures"), format!("at most {MAX_SIGNATURES} signatures, got {}", envelope.signatures.len())));
    }
    let mut signatures = Vec::with_capacity(envelope.signatures.len());
    for (i, s) in envelope.signatures.into_iter().enumerate() {
        if s.sig.0.is_empty() {
            return Err(malformed(format!("{field}.signatures[{i}].sig"), "signature is empty"));
        }
        signatures.push(s.sig.0);
    }
    Ok(ParsedEnvelope { payload_type: envelope.payload_type, payload: envelope.payload.0, signatures })
}

/// The first `subject[].digest.sha256` of an in-toto statement, lower-case, if well-formed.
pub(super) fn first_sha256_subject(payload: &[u8]) -> Option<String> {
    let statement: Value = serde_json::from_slice(payload).ok()?;
    statement.get("subject")?.as_array()?.iter().find_map(|s| {
        let d = s.pointer("/digest/sha256")?.as_str()?.to_ascii_lowercase();
        (d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit())).then_some(d)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

    pub(crate) const STATEMENT: &str = r#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a.txt","digest":{"sha256":"A0CFC71271D6E278E57CD332FF957C3F7043FDDA354C4CBB190A30D56EFA01BF"}}],"predicateType":"https://example.com/p","predicate":{}}"#;

    /// A proposed dsse entry signed by a fresh P-256 key, and that key's SPKI.
    pub(crate) fn request(payload: &[u8]) -> (Value, Vec<u8>) {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
        let sig = pair.sign(&SystemRandom::new(), &pae("application/vnd.in-toto+json", payload)).unwrap();
        let spki = pair.public_key().as_der().unwrap().as_ref().to_vec();
        let envelope = json!({"payload": b64::encode(payload), "payloadType": "application/vnd.in-toto+json",
            "signatures": [{"keyid": "", "sig": b64::encode(sig.as_ref())}]});
        let req = json!({"apiVersion": "0.0.1", "kind": "dsse", "spec": {"proposedContent": {
            "envelope": envelope.to_string(), "verifiers": [b64::encode(pem::encode("PUBLIC KEY", &spki))]}}});
        (req, spki)
    }

    #[test]
    fn the_identity_is_the_first_certificate_verifiers() {
        let (bare, _) = request(STATEMENT.as_bytes());
        assert_eq!(super::super::v1::parse_value(&bare).unwrap().identity, None, "a bare key names nobody");

        let (pair, cert) = super::super::v1::tests::certified("bob@example.com");
        let (_, other) = super::super::v1::tests::certified("carol@example.com");
        let sig = pair.sign(&SystemRandom::new(), &pae("application/vnd.in-toto+json", STATEMENT.as_bytes())).unwrap();
        let envelope = json!({"payload": b64::encode(STATEMENT), "payloadType": "application/vnd.in-toto+json",
            "signatures": [{"keyid": "", "sig": b64::encode(sig.as_ref())}]});
        let verifiers = [bare["spec"]["proposedContent"]["verifiers"][0].clone(), json!(b64::encode(pem::encode("CERTIFICATE", &cert))),
            json!(b64::encode(pem::encode("CERTIFICATE", &other)))];
        let req = json!({"apiVersion": "0.0.1", "kind": "dsse", "spec": {"proposedContent": {
            "envelope": envelope.to_string(), "verifiers": verifiers}}});
        assert_eq!(super::super::v1::parse_value(&req).unwrap().identity.as_deref(), Some("email:bob@example.com"));
    }

    #[test]
    fn pae_matches_the_dsse_spec_example() {
        assert_eq!(pae("http://example.com/HelloWorld", b"hello world"), b"DSSEv1 29 http://example.com/HelloWorld 11 hello world");
    }

    #[test]
    fn body_records_hashes_and_signatures_as_rekor_does() {
        let (req, spki) = request(STATEMENT.as_bytes());
        let e = super::super::v1::parse_value(&req).unwrap();
        let envelope_text = req["spec"]["proposedContent"]["envelope"].as_str().unwrap();
        let envelope: Value = serde_json::from_str(envelope_text).unwrap();
        let expected = json!({"apiVersion": "0.0.1", "kind": "dsse", "spec": {
            "envelopeHash": {"algorithm": "sha256", "value": hex::encode(sha256(envelope_text.as_bytes()))},
            "payloadHash": {"algorithm": "sha256", "value": hex::encode(sha256(STATEMENT.as_bytes()))},
            "signatures": [{"signature": envelope["signatures"][0]["sig"], "verifier": b64::encode(pem::encode("PUBLIC KEY", &spki))}]}});
        assert_eq!(e.body, jcs::to_vec(&expected));
        assert_eq!(e.digest_key, "sha256:a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf", "indexed by subject");
        let (other, _) = request(b"not a statement");
        assert_eq!(super::super::v1::parse_value(&other).unwrap().digest_key, format!("sha256:{}", hex::encode(sha256(b"not a statement"))));
    }

    #[test]
    fn refuses_each_kind_of_bad_input_naming_the_field() {
        let (good, _) = request(STATEMENT.as_bytes());
        let env = |f: &dyn Fn(&mut Value)| {
            let mut e: Value = serde_json::from_str(good["spec"]["proposedContent"]["envelope"].as_str().unwrap()).unwrap();
            f(&mut e);
            let mut r = good.clone();
            r["spec"]["proposedContent"]["envelope"] = json!(e.to_string());
            r
        };
        let with = |f: &dyn Fn(&mut Value)| {
            let mut r = good.clone();
            f(&mut r);
            r
        };
        let (stranger, _) = request(STATEMENT.as_bytes());
        let cases: Vec<(&str, Value)> = vec![
            ("apiVersion", with(&|v| v["apiVersion"] = json!("0.0.2"))),
            ("spec.signatures", with(&|v| v["spec"]["signatures"] = json!([]))),
            ("spec.proposedContent", with(&|v| v["spec"] = json!({}))),
            ("spec.proposedContent.envelope", with(&|v| v["spec"]["proposedContent"]["envelope"] = json!("{not json"))),
            ("spec.proposedContent.envelope", with(&|v| v["spec"]["proposedContent"]["envelope"] = json!({"payload": ""}))),
            ("spec.proposedContent.envelope.extra", env(&|e| e["extra"] = json!(1))),
            ("spec.proposedContent.envelope.payload", env(&|e| e["payload"] = json!("%%%"))),
            ("spec.proposedContent.envelope.payloadType", env(&|e| e.as_object_mut().unwrap().remove("payloadType").map(drop).unwrap())),
            ("spec.proposedContent.envelope.signatures", env(&|e| e["signatures"] = json!([]))),
            ("spec.proposedContent.envelope.signatures[0].sig", env(&|e| e["signatures"][0]["sig"] = json!("@@"))),
            ("spec.proposedContent.envelope.signatures[0].sig", env(&|e| e["payload"] = json!(b64::encode(b"tampered")))),
            ("spec.proposedContent.envelope.signatures[0].sig", env(&|e| e["payloadType"] = json!("text/plain"))),
            ("spec.proposedContent.envelope.signatures[0].sig", with(&|v| v["spec"]["proposedContent"]["verifiers"] = stranger["spec"]["proposedContent"]["verifiers"].clone())),
            ("spec.proposedContent.verifiers", with(&|v| v["spec"]["proposedContent"]["verifiers"] = json!([]))),
            ("spec.proposedContent.verifiers[0]", with(&|v| v["spec"]["proposedContent"]["verifiers"] = json!([b64::encode("not pem")]))),
            ("spec.proposedContent.verifiers[0]", with(&|v| v["spec"]["proposedContent"]["verifiers"] = json!([b64::encode(pem::encode("CERTIFICATE", b"bogus"))]))),
            ("spec.proposedContent.verifiers[0]", with(&|v| v["spec"]["proposedContent"]["verifiers"] = json!([7]))),
            ("spec.proposedContent.envelope.signatures[0].keyid", env(&|e| e["signatures"][0]["keyid"] = json!(1))),
            ("spec.proposedContent.envelope.signatures", env(&|e| e["signatures"] = json!(vec![e["signatures"][0].clone(); MAX_SIGNATURES + 1]))),
            ("spec.proposedContent.verifiers", with(&|v| v["spec"]["proposedContent"]["verifiers"] = json!(vec![v["spec"]["proposedContent"]["verifiers"][0].clone(); MAX_SIGNATURES + 1]))),
        ];
        for (field, req) in cases {
            let err = super::super::v1::parse_value(&req).unwrap_err();
            assert_eq!(err.field(), field, "{err}");
        }
    }
}
