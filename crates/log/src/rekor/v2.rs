//! Rekor v2 `hashedRekordRequestV002` entries and the protojson `TransparencyLogEntry` reply.
//!
//! The stored body must be byte-identical to what sigstore-go and sigstore-python rebuild
//! from a bundle: the RFC 8785 JSON of the protojson `Entry`
//! `{apiVersion:"0.0.2", kind:"hashedrekord", spec:{hashedRekordV002:{data, signature}}}`.
//!
//! Rekor v2 has no DSSE kind (rekor-tiles `CLIENTS.md`; `DSSERequestV002` is deprecated and
//! Rekor v2 refuses it): a client logs an envelope as a hashedrekord whose digest is the
//! SHA-256 of the envelope's PAE and whose signature is the envelope's, which is what
//! sigstore-python 4.5 and sigstore-go 1.3 rebuild when they verify a DSSE bundle.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};
use signet_core::wire::{self, Base64};
use signet_core::{b64, jcs};

use signet_core::pubkey::{HashAlg, KeyKind, PublicKey};
use super::{malformed, rejected, EntryError};

#[derive(Debug, Clone)]
pub struct HashedRekordV2 {
    pub body: Vec<u8>,
    /// `<algorithm>:<hex>` in Rekor v1 spelling (`sha256:…`), so one search key fits both logs.
    pub digest_key: String,
}

/// What a `keyDetails` value promises: the key type and the digest it signs.
fn key_details(name: &str) -> Option<(fn(KeyKind) -> bool, HashAlg, &'static str)> {
    fn p256(k: KeyKind) -> bool {
        k == KeyKind::EcdsaP256
    }
    fn p384(k: KeyKind) -> bool {
        k == KeyKind::EcdsaP384
    }
    fn rsa2048(k: KeyKind) -> bool {
        k == KeyKind::Rsa { bits: 2048 }
    }
    fn rsa3072(k: KeyKind) -> bool {
        k == KeyKind::Rsa { bits: 3072 }
    }
    fn rsa4096(k: KeyKind) -> bool {
        k == KeyKind::Rsa { bits: 4096 }
    }
    fn ed(k: KeyKind) -> bool {
        k == KeyKind::Ed25519
    }
    Some(match name {
        "PKIX_ECDSA_P256_SHA_256" => (p256, HashAlg::Sha256, "SHA2_256"),
        "PKIX_ECDSA_P384_SHA_384" => (p384, HashAlg::Sha384, "SHA2_384"),
        "PKIX_RSA_PKCS1V15_2048_SHA256" | "PKIX_RSA_PSS_2048_SHA256" => (rsa2048, HashAlg::Sha256, "SHA2_256"),
        "PKIX_RSA_PKCS1V15_3072_SHA256" | "PKIX_RSA_PSS_3072_SHA256" => (rsa3072, HashAlg::Sha256, "SHA2_256"),
        "PKIX_RSA_PKCS1V15_4096_SHA256" | "PKIX_RSA_PSS_4096_SHA256" => (rsa4096, HashAlg::Sha256, "SHA2_256"),
        "PKIX_ED25519_PH" => (ed, HashAlg::Sha512, "SHA2_512"),
        _ => return None,
    })
}

/// A `CreateEntryRequest` as protojson writes it.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateEntryRequest {
    #[serde(default, deserialize_with = "wire::object_opt")]
    hashed_rekord_request_v002: Option<HashedRekordRequest>,
    /// Not supported: refused with a message that says what to send instead.
    #[schema(value_type = Option<Object>)]
    dsse_request_v002: Option<IgnoredAny>,
}

/// The request schemas of `POST /api/v2/log/entries`, for the OpenAPI description.
pub fn request_schemas(out: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
    use utoipa::{PartialSchema, ToSchema};
    out.push((CreateEntryRequest::name().into_owned(), <CreateEntryRequest as PartialSchema>::schema()));
    CreateEntryRequest::schemas(out);
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HashedRekordRequestV002)]
struct HashedRekordRequest {
    digest: Base64,
    #[serde(deserialize_with = "wire::object")]
    signature: Signature,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SignatureV002)]
struct Signature {
    content: Base64,
    #[serde(deserialize_with = "wire::object")]
    verifier: Verifier,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = VerifierV002)]
struct Verifier {
    #[serde(default, deserialize_with = "wire::object_opt")]
    public_key: Option<RawBytes>,
    #[serde(default, deserialize_with = "wire::object_opt")]
    x509_certificate: Option<RawBytes>,
    key_details: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = RawBytesV002)]
struct RawBytes {
    raw_bytes: Base64,
}

/// Parses and verifies a `CreateEntryRequest` (`POST /api/v2/log/entries`).
pub fn parse(request: &[u8]) -> Result<HashedRekordV2, EntryError> {
    verify(wire::from_slice(request)?)
}

/// [`parse`], for a request held as a JSON value (tests, and signet's own entries).
pub fn parse_value(request: &Value) -> Result<HashedRekordV2, EntryError> {
    verify(wire::from_value(request, "")?)
}

/// Verifies a request read by [`parse`], and makes its canonical body.
pub fn verify(request: CreateEntryRequest) -> Result<HashedRekordV2, EntryError> {
    const AT: &str = "hashedRekordRequestV002";
    if request.dsse_request_v002.is_some() {
        return Err(malformed(
            "dsseRequestV002",
            "Rekor v2 has no DSSE entry type; send a hashedRekordRequestV002 whose digest is the SHA-256 of the envelope's PAE and whose signature is the envelope's",
        ));
    }
    let req = request.hashed_rekord_request_v002.ok_or_else(|| malformed(AT, "required field is missing"))?;
    let (digest, content, verifier) = (req.digest.0, req.signature.content.0, req.signature.verifier);
    if content.is_empty() {
        return Err(malformed(format!("{AT}.signature.content"), "signature is empty"));
    }
    let details = verifier.key_details.as_str();
    let (kind_ok, alg, alg_name) = key_details(details).ok_or_else(|| {
        rejected(
            format!("{AT}.signature.verifier.keyDetails"),
            format!("unsupported {details:?}; expected ECDSA P-256/P-384, RSA 2048-4096 (SHA-256) or PKIX_ED25519_PH"),
        )
    })?;
    if digest.len() != alg.len() {
        return Err(malformed(format!("{AT}.digest"), format!("{details} signs {}-byte digests, got {} bytes", alg.len(), digest.len())));
    }

    let (key, verifier_json) = match (verifier.public_key, verifier.x509_certificate) {
        (Some(pk), None) => {
            let raw = pk.raw_bytes.0;
            let key = PublicKey::from_spki(&raw).map_err(|e| rejected(format!("{AT}.signature.verifier.publicKey.rawBytes"), e))?;
            (key, json!({"keyDetails": details, "publicKey": {"rawBytes": b64::encode(&raw)}}))
        }
        (None, Some(cert)) => {
            let raw = cert.raw_bytes.0;
            let key = PublicKey::from_certificate(&raw)
                .map_err(|e| rejected(format!("{AT}.signature.verifier.x509Certificate.rawBytes"), e))?;
            (key, json!({"keyDetails": details, "x509Certificate": {"rawBytes": b64::encode(&raw)}}))
        }
        _ => return Err(malformed(format!("{AT}.signature.verifier"), "exactly one of publicKey or x509Certificate is required")),
    };
    if !kind_ok(key.kind) {
        return Err(rejected(format!("{AT}.signature.verifier.keyDetails"), format!("{details} does not match the key, which is {:?}", key.kind)));
    }
    key.verify_digest(alg, &digest, &content).map_err(|e| rejected(format!("{AT}.signature.content"), e))?;

    let body = jcs::to_vec(&json!({
        "apiVersion": "0.0.2",
        "kind": "hashedrekord",
        "spec": {"hashedRekordV002": {
            "data": {"algorithm": alg_name, "digest": b64::encode(&digest)},
            "signature": {"content": b64::encode(&content), "verifier": verifier_json},
        }}
    }));
    Ok(HashedRekordV2 { body, digest_key: format!("{}:{}", alg.name(), hex::encode(&digest)) })
}

/// A `TransparencyLogEntry` in strict protojson: int64 as strings, bytes as base64, and
/// nothing Rekor v2 does not send (no integratedTime, no promise). `hashes` is written even
/// when empty (a tree of one): sigstore-python's model requires the field.
pub struct TransparencyLogEntry<'a> {
    pub index: u64,
    pub key_id: &'a [u8],
    pub body: &'a [u8],
    pub proof: &'a [[u8; 32]],
    pub root_hash: &'a [u8; 32],
    pub tree_size: u64,
    pub checkpoint: &'a str,
}

impl TransparencyLogEntry<'_> {
    pub fn to_json(&self) -> Value {
        let inclusion = json!({
            "logIndex": self.index.to_string(),
            "rootHash": b64::encode(self.root_hash),
            "treeSize": self.tree_size.to_string(),
            "hashes": self.proof.iter().map(b64::encode).collect::<Vec<_>>(),
            "checkpoint": {"envelope": self.checkpoint},
        });
        json!({
            "logIndex": self.index.to_string(),
            "logId": {"keyId": b64::encode(self.key_id)},
            "kindVersion": {"kind": "hashedrekord", "version": "0.0.2"},
            "inclusionProof": inclusion,
            "canonicalizedBody": b64::encode(self.body),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

    fn request(artifact: &[u8]) -> Value {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
        let sig = pair.sign(&SystemRandom::new(), artifact).unwrap();
        let spki = pair.public_key().as_der().unwrap();
        json!({"hashedRekordRequestV002": {
            "digest": b64::encode(signet_core::hash::sha256(artifact)),
            "signature": {"content": b64::encode(sig.as_ref()), "verifier": {
                "publicKey": {"rawBytes": b64::encode(spki.as_ref())}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}
        }})
    }

    #[test]
    fn body_matches_the_entry_clients_rebuild() {
        let req = request(b"a");
        let e = parse_value(&req).unwrap();
        let body: Value = serde_json::from_slice(&e.body).unwrap();
        let r = &req["hashedRekordRequestV002"];
        assert_eq!(
            body,
            json!({"apiVersion": "0.0.2", "kind": "hashedrekord", "spec": {"hashedRekordV002": {
                "data": {"algorithm": "SHA2_256", "digest": r["digest"]},
                "signature": {"content": r["signature"]["content"], "verifier": {
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "publicKey": {"rawBytes": r["signature"]["verifier"]["publicKey"]["rawBytes"]}}}}}})
        );
        assert!(String::from_utf8(e.body).unwrap().starts_with(r#"{"apiVersion":"0.0.2","kind":"hashedrekord","spec":{"hashedRekordV002":{"data":{"algorithm":"SHA2_256","digest":""#));
    }

    #[test]
    fn refuses_bad_requests() {
        let good = request(b"a");
        let cases: Vec<(&str, Box<dyn Fn(&mut Value)>)> = vec![
            ("hashedRekordRequestV002.digest", Box::new(|v| v["hashedRekordRequestV002"]["digest"] = json!(b64::encode([1u8; 20])))),
            ("hashedRekordRequestV002.digest", Box::new(|v| v["hashedRekordRequestV002"]["digest"] = json!("%%%"))),
            ("hashedRekordRequestV002.signature.content", Box::new(|v| v["hashedRekordRequestV002"]["digest"] = json!(b64::encode([1u8; 32])))),
            ("hashedRekordRequestV002.digest", Box::new(|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["keyDetails"] = json!("PKIX_ECDSA_P384_SHA_384"))),
            ("hashedRekordRequestV002.signature.verifier.keyDetails", Box::new(|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["keyDetails"] = json!("PKIX_RSA_PKCS1V15_2048_SHA256"))),
            ("hashedRekordRequestV002.signature.verifier.keyDetails", Box::new(|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["keyDetails"] = json!("PKIX_ED25519"))),
            ("hashedRekordRequestV002.signature.verifier.publicKey.rawBytes", Box::new(|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["publicKey"]["rawBytes"] = json!(b64::encode(b"junk")))),
            ("dsseRequestV002", Box::new(|v| *v = json!({"dsseRequestV002": {}}))),
            ("other", Box::new(|v| v["other"] = json!(1))),
            ("hashedRekordRequestV002.signature.verifier", Box::new(|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["x509Certificate"] = json!({"rawBytes": ""}))),
            ("hashedRekordRequestV002.signature.verifier.keyDetails", Box::new(|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["keyDetails"] = json!(null))),
            ("hashedRekordRequestV002", Box::new(|v| *v = json!({}))),
        ];
        for (field, mutate) in cases {
            let mut req = good.clone();
            mutate(&mut req);
            let err = parse_value(&req).unwrap_err();
            assert_eq!(err.field(), field, "{err}");
        }
    }

    #[test]
    fn protojson_shape() {
        let v = TransparencyLogEntry {
            index: 3,
            key_id: &[1, 2],
            body: b"{}",
            proof: &[],
            root_hash: &[0; 32],
            tree_size: 4,
            checkpoint: "note",
        }
        .to_json();
        assert_eq!(v["logIndex"], "3");
        assert_eq!(v["inclusionProof"]["treeSize"], "4");
        assert_eq!(v["inclusionProof"]["hashes"], json!([]), "present even when empty");
        assert!(v.get("integratedTime").is_none() && v.get("inclusionPromise").is_none());
        assert_eq!(v.as_object().unwrap().len(), 5);
    }
}
