//! Rekor v1 `intoto` 0.0.1: a DSSE envelope as a JSON string, and the one key that signed it.
//!
//! What cosign before v3 sends for `attest` (`TLogUploadInTotoAttestation`), and what cosign
//! and policy-controller still look attestations up by:
//! `{apiVersion:"0.0.1", kind:"intoto", spec:{content:{envelope:"<envelope JSON>"}, publicKey:"<b64 PEM>"}}`.
//! As in Rekor (`pkg/types/intoto/v0.0.1`), one signature verifying with the key is enough
//! (go-securesystemslib's envelope verifier at threshold 1: the entry claims only that this key
//! signed this envelope), and the client's `hash` and `payloadHash`, if sent, are replaced by
//! the server's. The stored body keeps the two hashes and the key, re-armoured as Go writes
//! PEM: `{apiVersion, kind, spec:{content:{hash, payloadHash}, publicKey}}`, Rekor's
//! `json.Marshal` of it put in RFC 8785 form, byte for byte what Rekor stores for the same
//! request. Every value is hex, base64 or a fixed name, so the text is written directly.

use serde::Deserialize;
use signet_core::pubkey::HashAlg;
use signet_core::wire::{self, Base64};
use signet_core::{b64, hash::sha256, pem};

use super::dsse::{first_sha256_subject, pae, parse_envelope, ParsedEnvelope};
use super::{malformed, pem_key, rejected, Attestation, EntryError, VerifiedEntry};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = IntotoV001Spec)]
pub(super) struct IntotoSpec {
    #[serde(deserialize_with = "wire::object")]
    content: Content,
    /// Base64 of the PEM public key or certificate that signed the envelope.
    #[schema(value_type = String)]
    public_key: Base64,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = IntotoV001Content)]
struct Content {
    /// The envelope as the client wrote it: its hash is of these exact bytes.
    envelope: String,
    /// Recomputed by the server, as Rekor does; accepted so that a client may send it.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    #[allow(dead_code)]
    hash: Option<serde::de::IgnoredAny>,
    /// Recomputed by the server, as Rekor does.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    #[allow(dead_code)]
    payload_hash: Option<serde::de::IgnoredAny>,
}

/// Parses and verifies the `spec` of a proposed intoto 0.0.1 entry.
pub fn parse_spec(spec: &str) -> Result<VerifiedEntry, EntryError> {
    let spec: IntotoSpec = wire::from_slice(spec.as_bytes()).map_err(|e| e.within("spec"))?;
    let (block, key) = pem_key(&spec.public_key.0, "spec.publicKey")?;
    let envelope_text = spec.content.envelope;
    if envelope_text.is_empty() {
        return Err(malformed("spec.content.envelope", "the envelope is required: a DSSE envelope as JSON text"));
    }
    let ParsedEnvelope { payload_type, payload, signatures } = parse_envelope(&envelope_text, "spec.content.envelope")?;

    // Rekor verifies with SHA-256 whatever the key; Ed25519 signs the PAE itself.
    let message = pae(&payload_type, &payload);
    if !signatures.iter().any(|sig| key.verify_with_hash(HashAlg::Sha256, &message, sig).is_ok()) {
        return Err(rejected("spec.content.envelope.signatures", "no signature over the DSSE PAE verifies with spec.publicKey"));
    }

    let payload_digest = sha256(&payload);
    let payload_hex = hex::encode(payload_digest);
    let canonical_key = b64::encode(pem::encode(&block.label, &block.der));
    let body = format!(
        concat!(
            r#"{{"apiVersion":"0.0.1","kind":"intoto","spec":{{"content":{{"hash":{{"algorithm":"sha256","value":"{}"}},"#,
            r#""payloadHash":{{"algorithm":"sha256","value":"{}"}}}},"publicKey":"{}"}}}}"#
        ),
        hex::encode(sha256(envelope_text.as_bytes())),
        payload_hex,
        canonical_key
    )
    .into_bytes();
    let identity = (block.label == "CERTIFICATE").then(|| super::certificate_identity(&block.der)).flatten();
    let public_key = super::public_key_index(&block.label, &block.der);
    let subject = (payload_type == "application/vnd.in-toto+json").then(|| first_sha256_subject(&payload)).flatten();
    Ok(VerifiedEntry {
        body,
        digest_key: format!("sha256:{}", subject.unwrap_or(payload_hex)),
        identity,
        public_key,
        attestation: Some(Attestation { digest: payload_digest, data: payload }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rekor::dsse::tests::STATEMENT;
    use crate::rekor::v1::parse_value;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    use serde_json::{json, Value};

    const TYPE: &str = "application/vnd.in-toto+json";

    fn pair() -> EcdsaKeyPair {
        EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap()
    }

    fn sig(pair: &EcdsaKeyPair, payload: &[u8]) -> String {
        b64::encode(pair.sign(&SystemRandom::new(), &pae(TYPE, payload)).unwrap().as_ref())
    }

    fn key_pem(pair: &EcdsaKeyPair) -> String {
        pem::encode("PUBLIC KEY", pair.public_key().as_der().unwrap().as_ref())
    }

    /// A proposed entry as cosign's `intotoEntry` makes it: the envelope's JSON text, the key.
    fn request(envelope: &Value, key_pem: &str) -> Value {
        json!({"apiVersion": "0.0.1", "kind": "intoto", "spec": {"content": {"envelope": envelope.to_string()}, "publicKey": b64::encode(key_pem)}})
    }

    fn envelope(sigs: &[String], payload: &[u8]) -> Value {
        json!({"payloadType": TYPE, "payload": b64::encode(payload), "signatures": sigs.iter().map(|s| json!({"keyid": "", "sig": s})).collect::<Vec<_>>()})
    }

    /// Rekor's stored form (`interop/python/test_import_rekor.py` compares it with a real
    /// Rekor's), and the same document as `jcs` writes it.
    #[test]
    fn the_body_is_what_rekor_stores() {
        let a = pair();
        let env = envelope(&[sig(&a, STATEMENT.as_bytes())], STATEMENT.as_bytes());
        let req = request(&env, &key_pem(&a));
        let e = parse_value(&req).unwrap();
        let expected = format!(
            r#"{{"apiVersion":"0.0.1","kind":"intoto","spec":{{"content":{{"hash":{{"algorithm":"sha256","value":"{}"}},"payloadHash":{{"algorithm":"sha256","value":"{}"}}}},"publicKey":"{}"}}}}"#,
            hex::encode(sha256(env.to_string().as_bytes())),
            hex::encode(sha256(STATEMENT.as_bytes())),
            b64::encode(key_pem(&a))
        );
        assert_eq!(String::from_utf8(e.body.clone()).unwrap(), expected);
        let doc: Value = serde_json::from_slice(&e.body).unwrap();
        assert_eq!(signet_core::jcs::to_vec(&doc), e.body);
        assert_eq!(e.digest_key, "sha256:a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf", "indexed by subject");
        assert_eq!(e.identity, None, "a bare key names nobody");
        let att = e.attestation.as_ref().unwrap();
        assert_eq!((att.data.as_slice(), att.digest), (STATEMENT.as_bytes(), sha256(STATEMENT.as_bytes())));
        // The search keys found again in the stored body are the ones the append gave.
        let found = crate::rekor::stored_keys(&e.body).unwrap();
        assert_eq!((found.identity, found.public_key), (e.identity.clone(), e.public_key.clone()));

        // The client's own hashes are replaced, as Rekor replaces them; a PEM wrapped another
        // way is the same key.
        let mut with_hashes = req.clone();
        with_hashes["spec"]["content"]["hash"] = json!({"algorithm": "sha256", "value": "00".repeat(32)});
        with_hashes["spec"]["content"]["payloadHash"] = json!({"algorithm": "sha256", "value": "11".repeat(32)});
        with_hashes["spec"]["publicKey"] = json!(b64::encode(key_pem(&a).replace('\n', "\r\n")));
        assert_eq!(parse_value(&with_hashes).unwrap().body, e.body);
    }

    #[test]
    fn one_signature_by_the_key_is_enough() {
        let (a, b) = (pair(), pair());
        let payload = STATEMENT.as_bytes();
        let both = envelope(&[sig(&b, payload), sig(&a, payload)], payload);
        assert!(parse_value(&request(&both, &key_pem(&a))).is_ok());
        let err = parse_value(&request(&envelope(&[sig(&b, payload)], payload), &key_pem(&a))).unwrap_err();
        assert_eq!(err.field(), "spec.content.envelope.signatures", "{err}");
        assert!(matches!(err, EntryError::Rejected { .. }));
    }

    #[test]
    fn a_certificate_names_the_signer() {
        let (pair, cert) = crate::rekor::v1::tests::certified("ada@example.com");
        let env = envelope(&[sig(&pair, STATEMENT.as_bytes())], STATEMENT.as_bytes());
        let e = parse_value(&request(&env, &pem::encode("CERTIFICATE", &cert))).unwrap();
        assert_eq!(e.identity.as_deref(), Some("email:ada@example.com"));
        assert_eq!(crate::rekor::stored_keys(&e.body).unwrap().identity, e.identity);
    }

    #[test]
    fn refuses_each_kind_of_bad_input_naming_the_field() {
        let a = pair();
        let payload = STATEMENT.as_bytes();
        let good = request(&envelope(&[sig(&a, payload)], payload), &key_pem(&a));
        let with = |f: &dyn Fn(&mut Value)| {
            let mut r = good.clone();
            f(&mut r);
            r
        };
        let env = |f: &dyn Fn(&mut Value)| {
            let mut e = envelope(&[sig(&a, payload)], payload);
            f(&mut e);
            request(&e, &key_pem(&a))
        };
        let cases: Vec<(&str, Value)> = vec![
            ("apiVersion", with(&|r| r["apiVersion"] = json!("0.0.3"))),
            ("spec.publicKey", with(&|r| drop(r["spec"].as_object_mut().unwrap().remove("publicKey")))),
            ("spec.publicKey", with(&|r| r["spec"]["publicKey"] = json!(b64::encode("not pem")))),
            ("spec.publicKey", with(&|r| r["spec"]["publicKey"] = json!("%%"))),
            ("spec.content", with(&|r| drop(r["spec"].as_object_mut().unwrap().remove("content")))),
            ("spec.content.envelope", with(&|r| r["spec"]["content"]["envelope"] = json!(""))),
            ("spec.content.envelope", with(&|r| r["spec"]["content"]["envelope"] = json!("{not json"))),
            ("spec.content.envelope", with(&|r| r["spec"]["content"]["envelope"] = json!({"payload": ""}))),
            ("spec.content.extra", with(&|r| r["spec"]["content"]["extra"] = json!(1))),
            ("spec.content.envelope.payload", env(&|e| e["payload"] = json!("%%%"))),
            ("spec.content.envelope.signatures", env(&|e| e["signatures"] = json!([]))),
            ("spec.content.envelope.signatures[0].sig", env(&|e| e["signatures"][0]["sig"] = json!(""))),
            ("spec.content.envelope.signatures", env(&|e| e["payload"] = json!(b64::encode(b"tampered")))),
            ("spec.content.envelope.signatures", env(&|e| e["payloadType"] = json!("text/plain"))),
            ("spec.content.envelope.signatures", env(&|e| e["signatures"] = json!(vec![e["signatures"][0].clone(); super::super::dsse::MAX_SIGNATURES + 1]))),
        ];
        for (field, req) in cases {
            let err = parse_value(&req).unwrap_err();
            assert_eq!(err.field(), field, "{err}");
        }
    }
}
