//! Rekor v1 `intoto` 0.0.2: a DSSE envelope with a key beside each signature.
//!
//! What sigstore-js sends for `attest` (and cosign looks attestations up by):
//! `{apiVersion:"0.0.2", kind:"intoto", spec:{content:{envelope:{payload, payloadType,
//! signatures:[{keyid?, sig, publicKey}]}, hash, payloadHash?}}}`. As in Rekor
//! (`pkg/types/intoto/v0.0.2`), the envelope's `payload` and each `sig` are base64 of DSSE's own
//! base64 text (encoded twice), `publicKey` is base64 of a PEM key or certificate, and `hash`
//! is the client's digest of its envelope, which the server cannot recompute (clients
//! serialise the envelope differently) and records as sent.
//!
//! Every signature must verify over the DSSE PAE with one of the keys, and every key must
//! verify one of the signatures. The stored body drops the payload and keeps its SHA-256:
//! `{apiVersion, kind, spec:{content:{envelope:{payloadType, signatures}, hash, payloadHash}}}`,
//! Rekor's `json.Marshal` of it put in RFC 8785 form (`types.CanonicalizeEntry`), so that a
//! body is byte for byte what Rekor stores for the same request.

use serde::Deserialize;
use signet_core::pubkey::HashAlg;
use signet_core::wire::{self, Base64};
use serde_json::{json, Value};
use signet_core::{b64, hash::sha256, jcs};

use super::dsse::{first_sha256_subject, pae, MAX_SIGNATURES};
use super::{malformed, pem_key, rejected, Attestation, EntryError, VerifiedEntry};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = IntotoV002Spec)]
pub(super) struct IntotoSpec {
    #[serde(deserialize_with = "wire::object")]
    content: Content,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = IntotoV002Content)]
struct Content {
    #[serde(deserialize_with = "wire::object")]
    envelope: Envelope,
    /// The client's SHA-256 of its envelope: recorded, not recomputed.
    #[serde(deserialize_with = "wire::object")]
    hash: Digest,
    /// SHA-256 of the decoded payload; the server computes it, and refuses another value.
    #[serde(default, deserialize_with = "wire::object_opt")]
    payload_hash: Option<Digest>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = IntotoV002Envelope)]
struct Envelope {
    /// Base64 of the DSSE payload's base64 text.
    #[schema(value_type = String)]
    payload: Base64,
    payload_type: String,
    #[serde(deserialize_with = "wire::objects")]
    signatures: Vec<Signature>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = IntotoV002Signature)]
struct Signature {
    #[serde(default)]
    keyid: Option<String>,
    /// Base64 of the DSSE signature's base64 text.
    #[schema(value_type = String)]
    sig: Base64,
    /// Base64 of a PEM public key or certificate.
    #[schema(value_type = String)]
    public_key: Base64,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = IntotoV002Digest)]
struct Digest {
    /// `sha256`.
    algorithm: String,
    /// 64 hex characters.
    value: String,
}

impl Digest {
    /// The hex value, checked as Rekor's schema does (`sha256`, 64 hex characters).
    fn checked(&self, field: &str) -> Result<&str, EntryError> {
        if self.algorithm != "sha256" {
            return Err(malformed(format!("{field}.algorithm"), format!("unsupported algorithm {:?}; expected \"sha256\"", self.algorithm)));
        }
        if self.value.len() != 64 || !self.value.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed(format!("{field}.value"), "a SHA-256 digest must be 64 hex characters"));
        }
        Ok(&self.value)
    }
}

/// DSSE's own base64 (the text inside the outer encoding), decoded.
fn inner_base64(text: &[u8], field: &str) -> Result<Vec<u8>, EntryError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| b64::decode(t).ok())
        .ok_or_else(|| malformed(field, "must be base64 of DSSE's base64 text (intoto 0.0.2 encodes it twice); the inner text is not base64"))
}

/// Parses and verifies the `spec` of a proposed intoto 0.0.2 entry.
pub fn parse_spec(spec: &str) -> Result<VerifiedEntry, EntryError> {
    let spec: IntotoSpec = wire::from_slice(spec.as_bytes()).map_err(|e| e.within("spec"))?;
    let Content { envelope, hash, payload_hash } = spec.content;
    let hash = hash.checked("spec.content.hash")?;
    if envelope.payload.0.is_empty() {
        return Err(malformed("spec.content.envelope.payload", "the envelope has no payload"));
    }
    let payload = inner_base64(&envelope.payload.0, "spec.content.envelope.payload")?;
    if envelope.signatures.is_empty() {
        return Err(malformed("spec.content.envelope.signatures", "must be a list of one or more signatures"));
    }
    if envelope.signatures.len() > MAX_SIGNATURES {
        return Err(malformed(
            "spec.content.envelope.signatures",
            format!("at most {MAX_SIGNATURES} signatures, got {}", envelope.signatures.len()),
        ));
    }
    let payload_digest = sha256(&payload);
    let payload_hex = hex::encode(payload_digest);
    if let Some(claimed) = &payload_hash {
        if !claimed.checked("spec.content.payloadHash")?.eq_ignore_ascii_case(&payload_hex) {
            return Err(rejected("spec.content.payloadHash.value", format!("is not the SHA-256 of the envelope's payload ({payload_hex})")));
        }
    }

    let mut keys = Vec::with_capacity(envelope.signatures.len());
    let mut sigs = Vec::with_capacity(envelope.signatures.len());
    let mut identity = None;
    let mut public_key = String::new();
    for (i, s) in envelope.signatures.iter().enumerate() {
        let at = format!("spec.content.envelope.signatures[{i}]");
        let sig = inner_base64(&s.sig.0, &format!("{at}.sig"))?;
        if sig.is_empty() {
            return Err(malformed(format!("{at}.sig"), "signature is empty"));
        }
        let (block, key) = pem_key(&s.public_key.0, &format!("{at}.publicKey"))?;
        if i == 0 {
            public_key = super::public_key_index(&block.label, &block.der);
        }
        if identity.is_none() && block.label == "CERTIFICATE" {
            identity = super::certificate_identity(&block.der);
        }
        keys.push(key);
        sigs.push(sig);
    }

    // Rekor's rule (go-securesystemslib's envelope verifier, one key at a time): each
    // signature verifies with some key, and each key verifies some signature. Rekor
    // verifies with SHA-256 whatever the key.
    let message = pae(&envelope.payload_type, &payload);
    let mut verified = vec![[false; MAX_SIGNATURES]; keys.len()];
    for (k, key) in keys.iter().enumerate() {
        for (s, sig) in sigs.iter().enumerate() {
            verified[k][s] = key.verify_with_hash(HashAlg::Sha256, &message, sig).is_ok();
        }
    }
    for s in 0..sigs.len() {
        if !verified.iter().any(|row| row[s]) {
            return Err(rejected(
                format!("spec.content.envelope.signatures[{s}].sig"),
                "a signature over the DSSE PAE does not verify with any of the envelope's keys",
            ));
        }
    }
    if let Some(k) = verified.iter().position(|row| !row.iter().any(|&v| v)) {
        return Err(rejected(format!("spec.content.envelope.signatures[{k}].publicKey"), "this key verifies none of the envelope's signatures"));
    }

    let body = canonical_body(&envelope, hash, &payload_hex);
    let subject = (envelope.payload_type == "application/vnd.in-toto+json").then(|| first_sha256_subject(&payload)).flatten();
    let attestation = Some(Attestation { digest: payload_digest, data: payload });
    Ok(VerifiedEntry { body, digest_key: format!("sha256:{}", subject.unwrap_or(payload_hex)), identity, public_key, attestation })
}

/// The stored entry: the RFC 8785 form of Go's `json.Marshal` of it (see the module's comment).
fn canonical_body(envelope: &Envelope, hash: &str, payload_hex: &str) -> Vec<u8> {
    let signatures: Vec<Value> = envelope
        .signatures
        .iter()
        .map(|s| {
            let mut sig = json!({"publicKey": b64::encode(&s.public_key.0), "sig": b64::encode(&s.sig.0)});
            // Go's `omitempty`: an empty key ID is left out.
            if let Some(keyid) = s.keyid.as_deref().filter(|k| !k.is_empty()) {
                sig["keyid"] = json!(keyid);
            }
            sig
        })
        .collect();
    jcs::to_vec(&json!({"apiVersion": "0.0.2", "kind": "intoto", "spec": {"content": {
        "envelope": {"payloadType": envelope.payload_type, "signatures": signatures},
        "hash": {"algorithm": "sha256", "value": hash},
        "payloadHash": {"algorithm": "sha256", "value": payload_hex},
    }}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rekor::dsse::tests::STATEMENT;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    use signet_core::pem;

    fn signed(pair: &EcdsaKeyPair, payload_type: &str, payload: &[u8]) -> String {
        b64::encode(pair.sign(&SystemRandom::new(), &pae(payload_type, payload)).unwrap().as_ref())
    }

    fn key_pem(pair: &EcdsaKeyPair) -> String {
        pem::encode("PUBLIC KEY", pair.public_key().as_der().unwrap().as_ref())
    }

    /// A proposed intoto 0.0.2 entry as sigstore-js makes it: one signature, its key beside it.
    fn request(pair: &EcdsaKeyPair, payload: &[u8]) -> Value {
        let payload_type = "application/vnd.in-toto+json";
        json!({"apiVersion": "0.0.2", "kind": "intoto", "spec": {"content": {
            "envelope": {"payloadType": payload_type, "payload": b64::encode(b64::encode(payload)),
                "signatures": [{"sig": b64::encode(signed(pair, payload_type, payload)), "publicKey": b64::encode(key_pem(pair))}]},
            "hash": {"algorithm": "sha256", "value": "ab".repeat(32)},
            "payloadHash": {"algorithm": "sha256", "value": hex::encode(sha256(payload))}}}})
    }

    fn pair() -> EcdsaKeyPair {
        EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap()
    }

    /// Rekor's stored form: its `json.Marshal`, then RFC 8785 (which sorts the keys and
    /// undoes Go's `\u003c` escapes). `interop/python/test_import_rekor.py` compares it with a
    /// real Rekor's.
    #[test]
    fn the_body_is_what_rekor_stores() {
        let pair = pair();
        let mut req = request(&pair, STATEMENT.as_bytes());
        req["spec"]["content"]["envelope"]["signatures"][0]["keyid"] = json!("k<1>&");
        let e = super::super::v1::parse_value(&req).unwrap();
        let s = &req["spec"]["content"]["envelope"]["signatures"][0];
        let expected = format!(
            concat!(
                r#"{{"apiVersion":"0.0.2","kind":"intoto","spec":{{"content":{{"envelope":{{"payloadType":"application/vnd.in-toto+json","#,
                r#""signatures":[{{"keyid":"k<1>&","publicKey":"{}","sig":"{}"}}]}},"#,
                r#""hash":{{"algorithm":"sha256","value":"{}"}},"payloadHash":{{"algorithm":"sha256","value":"{}"}}}}}}}}"#
            ),
            s["publicKey"].as_str().unwrap(),
            s["sig"].as_str().unwrap(),
            "ab".repeat(32),
            hex::encode(sha256(STATEMENT.as_bytes()))
        );
        assert_eq!(String::from_utf8(e.body.clone()).unwrap(), expected);
        // The same document as any JSON reader sees it, the payload left out.
        let body: Value = serde_json::from_slice(&e.body).unwrap();
        assert!(body["spec"]["content"]["envelope"].get("payload").is_none());
        assert_eq!(body["spec"]["content"]["envelope"]["signatures"][0]["keyid"], "k<1>&");
        assert_eq!(e.digest_key, "sha256:a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf", "indexed by subject");
        assert_eq!(e.identity, None, "a bare key names nobody");

        // An empty key ID is left out, as Go's omitempty does; no payloadHash is computed.
        let mut bare = req.clone();
        bare["spec"]["content"]["envelope"]["signatures"][0]["keyid"] = json!("");
        bare["spec"]["content"].as_object_mut().unwrap().remove("payloadHash");
        let body = String::from_utf8(super::super::v1::parse_value(&bare).unwrap().body).unwrap();
        assert!(body.contains(r#""signatures":[{"publicKey":"#), "{body}");
        assert!(body.contains(&hex::encode(sha256(STATEMENT.as_bytes()))), "{body}");
    }

    #[test]
    fn every_signature_and_every_key_must_verify() {
        let (a, b) = (pair(), pair());
        let payload_type = "application/vnd.in-toto+json";
        let payload = STATEMENT.as_bytes();
        let item = |sig_by: &EcdsaKeyPair, key: &EcdsaKeyPair| {
            json!({"sig": b64::encode(signed(sig_by, payload_type, payload)), "publicKey": b64::encode(key_pem(key))})
        };
        let with = |sigs: Vec<Value>| {
            let mut r = request(&a, payload);
            r["spec"]["content"]["envelope"]["signatures"] = json!(sigs);
            r
        };
        // Keys and signatures need not pair up item by item (Rekor's rule).
        assert!(super::super::v1::parse_value(&with(vec![item(&a, &b), item(&b, &a)])).is_ok());
        let err = super::super::v1::parse_value(&with(vec![item(&a, &a), item(&a, &b)])).unwrap_err();
        assert_eq!(err.field(), "spec.content.envelope.signatures[1].publicKey", "{err}");
        let stranger = pair();
        let err = super::super::v1::parse_value(&with(vec![item(&stranger, &a)])).unwrap_err();
        assert_eq!(err.field(), "spec.content.envelope.signatures[0].sig", "{err}");
        let many = (0..=MAX_SIGNATURES).map(|_| item(&a, &a)).collect();
        assert_eq!(super::super::v1::parse_value(&with(many)).unwrap_err().field(), "spec.content.envelope.signatures");
    }

    #[test]
    fn refuses_each_kind_of_bad_input_naming_the_field() {
        let a = pair();
        let good = request(&a, STATEMENT.as_bytes());
        let with = |f: &dyn Fn(&mut Value)| {
            let mut r = good.clone();
            f(&mut r["spec"]["content"]);
            r
        };
        let cases: Vec<(&str, Value)> = vec![
            ("apiVersion", {
                let mut r = good.clone();
                r["apiVersion"] = json!("0.0.3");
                r
            }),
            ("spec.content", json!({"apiVersion": "0.0.2", "kind": "intoto", "spec": {}})),
            ("spec.content.hash", with(&|c| drop(c.as_object_mut().unwrap().remove("hash")))),
            ("spec.content.hash.algorithm", with(&|c| c["hash"]["algorithm"] = json!("sha1"))),
            ("spec.content.hash.value", with(&|c| c["hash"]["value"] = json!("abc"))),
            ("spec.content.payloadHash.value", with(&|c| c["payloadHash"]["value"] = json!("cd".repeat(32)))),
            ("spec.content.extra", with(&|c| c["extra"] = json!(1))),
            ("spec.content.envelope.payload", with(&|c| c["envelope"]["payload"] = json!(""))),
            ("spec.content.envelope.payload", with(&|c| c["envelope"]["payload"] = json!("%%"))),
            ("spec.content.envelope.payload", with(&|c| c["envelope"]["payload"] = json!(b64::encode("not*base64")))),
            ("spec.content.envelope.payloadType", with(&|c| drop(c["envelope"].as_object_mut().unwrap().remove("payloadType")))),
            ("spec.content.envelope.signatures", with(&|c| c["envelope"]["signatures"] = json!([]))),
            ("spec.content.envelope.signatures", with(&|c| c["envelope"]["signatures"] = json!(null))),
            ("spec.content.envelope.signatures[0].sig", with(&|c| c["envelope"]["signatures"][0]["sig"] = json!(b64::encode("")))),
            ("spec.content.envelope.signatures[0].sig", with(&|c| {
                c["envelope"]["payload"] = json!(b64::encode(b64::encode("tampered")));
                c.as_object_mut().unwrap().remove("payloadHash");
            })),
            ("spec.content.envelope.signatures[0].sig", with(&|c| c["envelope"]["payloadType"] = json!("text/plain"))),
            ("spec.content.envelope.signatures[0].publicKey", with(&|c| c["envelope"]["signatures"][0]["publicKey"] = json!(b64::encode("not pem")))),
            ("spec.content.envelope.signatures[0].publicKey", with(&|c| drop(c["envelope"]["signatures"][0].as_object_mut().unwrap().remove("publicKey")))),
            ("spec.content.envelope.signatures[0].keyid", with(&|c| c["envelope"]["signatures"][0]["keyid"] = json!(7))),
        ];
        for (field, req) in cases {
            let err = super::super::v1::parse_value(&req).unwrap_err();
            assert_eq!(err.field(), field, "{err}");
        }
    }

    #[test]
    fn a_certificate_names_the_signer() {
        let (pair, cert) = super::super::v1::tests::certified("ada@example.com");
        let mut req = request(&pair, STATEMENT.as_bytes());
        req["spec"]["content"]["envelope"]["signatures"][0]["publicKey"] = json!(b64::encode(pem::encode("CERTIFICATE", &cert)));
        assert_eq!(super::super::v1::parse_value(&req).unwrap().identity.as_deref(), Some("email:ada@example.com"));
    }
}
