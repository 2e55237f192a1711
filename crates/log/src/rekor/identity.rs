//! The signing identity of an entry, for `POST /api/v1/index/retrieve` by identity or email.
//!
//! An entry signed with a Fulcio certificate carries the signer's identity in the
//! certificate's Subject Alternative Name: an email address or a URI (Fulcio issues one). The
//! index key says which it is, so that a search by email finds email SANs only, and holds
//! emails lower-cased, since the address's case does not name another signer:
//! `email:<address, lower-cased>`, `uri:<uri, exactly>`, or `name:<user!domain>` for the
//! otherName of Fulcio's `username` issuers. Entries signed with a bare key have no identity.
//!
//! [`stored_keys`] finds both again in a stored canonical body, for entries logged before the
//! store kept them (`signet admin log reindex`).

use x509_cert::der::oid::AssociatedOid;
use x509_cert::der::Decode;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;

/// The index key of `cert_der`'s first email or URI SAN; `None` for a certificate without
/// one, or one that does not parse (never an error: the identity only makes it searchable).
pub fn certificate_identity(cert_der: &[u8]) -> Option<String> {
    let cert = x509_cert::Certificate::from_der(cert_der).ok()?;
    let extensions = cert.tbs_certificate.extensions?;
    let ext = extensions.iter().find(|e| e.extn_id == SubjectAltName::OID)?;
    let names = SubjectAltName::from_der(ext.extn_value.as_bytes()).ok()?;
    names.0.iter().find_map(|n| match n {
        GeneralName::Rfc822Name(s) => Some(email_key(s.as_str())),
        GeneralName::UniformResourceIdentifier(s) => Some(format!("uri:{}", s.as_str())),
        GeneralName::OtherName(other) if other.type_id == FULCIO_USERNAME => {
            other.value.decode_as::<x509_cert::der::asn1::Utf8StringRef>().ok().map(|u| format!("name:{}", u.as_str()))
        }
        _ => None,
    })
}

/// Fulcio's otherName type for a `username` issuer's `user!domain`.
const FULCIO_USERNAME: x509_cert::der::oid::ObjectIdentifier = x509_cert::der::oid::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.7");

/// The index key of an email address.
pub fn email_key(address: &str) -> String {
    format!("email:{}", address.to_lowercase())
}

/// The index key of an identity as a search names it: an email address (no scheme, an `@`),
/// a user name (`user!domain`: no scheme, no `@`), or a URI. A URI always has a `:` after its
/// scheme; an email address, unquoted, has none.
pub fn identity_key(value: &str) -> String {
    if value.contains(':') {
        format!("uri:{value}")
    } else if value.contains('@') {
        email_key(value)
    } else {
        format!("name:{value}")
    }
}

/// What a stored entry is searchable by, besides its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKeys {
    /// The identity key ([`certificate_identity`]) of the first certificate among its signers.
    pub identity: Option<String>,
    /// The key index ([`public_key_index`]) of its first signer.
    pub public_key: String,
}

/// The search keys of a stored Rekor v1 canonical body: those [`super::v1::verify`] gave it at
/// append, found again in the body alone. `None` for a body that names no signer in a form
/// read here (signet's genesis entry; Rekor kinds other than hashedrekord, dsse, intoto and
/// x509 rekord). A dsse body records its signatures sorted by signature, not in the order
/// they were proposed: of an envelope signed by several keys, the first *recorded* signer is
/// the key found here.
pub fn stored_keys(body: &[u8]) -> Option<StoredKeys> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    let spec = doc.get("spec")?;
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    // Each signer as the body holds it: base64 of a PEM key or certificate.
    let signers: Vec<String> = match (doc.get("kind")?.as_str()?, doc.get("apiVersion")?.as_str()?) {
        ("hashedrekord", "0.0.1") => vec![text(spec.pointer("/signature/publicKey/content")?)?],
        ("rekord", "0.0.1") if spec.pointer("/signature/format")?.as_str()? == "x509" => {
            vec![text(spec.pointer("/signature/publicKey/content")?)?]
        }
        ("dsse", "0.0.1") => spec.get("signatures")?.as_array()?.iter().filter_map(|s| text(s.get("verifier")?)).collect(),
        ("intoto", "0.0.2") => {
            let signatures = spec.pointer("/content/envelope/signatures")?.as_array()?;
            signatures.iter().filter_map(|s| text(s.get("publicKey")?)).collect()
        }
        ("intoto", "0.0.1") => vec![text(spec.get("publicKey")?)?],
        _ => return None,
    };
    let blocks: Vec<signet_core::pem::Block> = signers
        .iter()
        .map(|b64| signet_core::b64::decode(b64).ok().and_then(|pem| signet_core::pem::decode_first(&pem).ok()))
        .collect::<Option<_>>()?;
    let first = blocks.first()?;
    let identity = blocks.iter().filter(|b| b.label == "CERTIFICATE").find_map(|b| certificate_identity(&b.der));
    Some(StoredKeys { identity, public_key: public_key_index(&first.label, &first.der) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_name_emails_in_any_case_and_uris_exactly() {
        assert_eq!(identity_key("Alice@Example.com"), "email:alice@example.com");
        assert_eq!(identity_key("https://github.com/o/r/.github/workflows/w.yml@refs/heads/main"),
            "uri:https://github.com/o/r/.github/workflows/w.yml@refs/heads/main");
        assert_eq!(identity_key("spiffe://x/Y"), "uri:spiffe://x/Y");
        assert_eq!(identity_key("alice!example.com"), "name:alice!example.com");
        assert_eq!(certificate_identity(b"not a certificate"), None);
    }
}

/// The index key of a signer's key or certificate (rekor-cli `search --public-key`), as
/// Rekor's: `sha256:<hex>` of its PEM as Go's `encoding/pem` writes it (Rekor's
/// `CanonicalValue`), so that the same key or certificate finds it however its PEM was
/// wrapped. `label` is `PUBLIC KEY` or `CERTIFICATE`.
pub fn public_key_index(label: &str, der: &[u8]) -> String {
    public_key_index_of_pem(&signet_core::pem::encode(label, der))
}

/// [`public_key_index`] of a PEM already written by [`signet_core::pem::encode`] (a canonical
/// body holds it, so an append need not write it twice).
pub fn public_key_index_of_pem(pem: &str) -> String {
    let mut key = String::with_capacity(7 + 64);
    key.push_str("sha256:");
    signet_core::hexfmt::push(&mut key, &signet_core::hash::sha256(pem.as_bytes()));
    key
}

#[cfg(test)]
mod stored_keys_tests {
    use super::*;
    use crate::rekor::dsse::{pae, tests::STATEMENT};
    use crate::rekor::v1::tests::{certified, signed_request};
    use crate::rekor::v1::parse_value;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    use serde_json::{json, Value};
    use signet_core::{b64, pem};

    /// A signer: a bare key, or one certified for `san`; and its PEM.
    fn signer(san: Option<&str>) -> (EcdsaKeyPair, String) {
        match san {
            Some(san) => {
                let (pair, cert) = certified(san);
                (pair, pem::encode("CERTIFICATE", &cert))
            }
            None => {
                let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
                let spki = pair.public_key().as_der().unwrap().as_ref().to_vec();
                (pair, pem::encode("PUBLIC KEY", &spki))
            }
        }
    }

    fn sign(pair: &EcdsaKeyPair, message: &[u8]) -> String {
        b64::encode(pair.sign(&SystemRandom::new(), message).unwrap().as_ref())
    }

    /// One proposed entry of each kind signed by `san`'s signer.
    fn requests(san: Option<&str>) -> Vec<Value> {
        let (pair, signer_pem) = signer(san);
        let mut hashedrekord = signed_request(b"artifact");
        hashedrekord["spec"]["signature"] = json!({"content": sign(&pair, b"artifact"), "publicKey": {"content": b64::encode(&signer_pem)}});
        let payload_type = "application/vnd.in-toto+json";
        let signature = sign(&pair, &pae(payload_type, STATEMENT.as_bytes()));
        let envelope = json!({"payload": b64::encode(STATEMENT), "payloadType": payload_type, "signatures": [{"keyid": "", "sig": signature}]});
        let dsse = json!({"apiVersion": "0.0.1", "kind": "dsse", "spec": {"proposedContent": {
            "envelope": envelope.to_string(), "verifiers": [b64::encode(&signer_pem)]}}});
        let intoto = json!({"apiVersion": "0.0.2", "kind": "intoto", "spec": {"content": {
            "envelope": {"payloadType": payload_type, "payload": b64::encode(b64::encode(STATEMENT)),
                "signatures": [{"sig": b64::encode(&signature), "publicKey": b64::encode(&signer_pem)}]},
            "hash": {"algorithm": "sha256", "value": "ab".repeat(32)}}}});
        vec![hashedrekord, dsse, intoto]
    }

    #[test]
    fn a_stored_body_gives_the_keys_its_append_gave() {
        for san in [None, Some("Alice@Example.com"), Some("https://ci.example/wf@refs/heads/main")] {
            for req in requests(san) {
                let e = parse_value(&req).unwrap();
                let found = stored_keys(&e.body).unwrap_or_else(|| panic!("no keys in {}", String::from_utf8_lossy(&e.body)));
                assert_eq!(found, StoredKeys { identity: e.identity.clone(), public_key: e.public_key.clone() }, "{}", req["kind"]);
                assert_eq!(found.identity.is_some(), san.is_some());
            }
        }
    }

    #[test]
    fn a_body_without_a_signer_read_here_has_none() {
        for body in [&b"not json"[..], br#"{"kind":"hashedrekord","apiVersion":"0.0.1","spec":{}}"#,
            br#"{"kind":"rekord","apiVersion":"0.0.1","spec":{"signature":{"format":"pgp","publicKey":{"content":"AA=="}}}}"#,
            br#"{"kind":"hashedrekord","apiVersion":"0.0.1","spec":{"signature":{"publicKey":{"content":"bm90IHBlbQ=="}}}}"#,
            br#"{"kind":"alpine","apiVersion":"0.0.1","spec":{}}"#]
        {
            assert_eq!(stored_keys(body), None, "{}", String::from_utf8_lossy(body));
        }
    }
}
