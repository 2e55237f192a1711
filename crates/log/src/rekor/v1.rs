//! Rekor v1 `hashedrekord` 0.0.1: parsing, verification, canonical bodies and SETs. The
//! entry parser also takes `dsse` 0.0.1 and `intoto` 0.0.2 and 0.0.1, whose formats live in
//! [`super::dsse`], [`super::intoto`] and [`super::intoto_v001`].
//!
//! The canonical body is what Rekor stores and hashes into the tree: the RFC 8785 JSON of
//! `{apiVersion, kind, spec: {data: {hash}, signature: {content, publicKey: {content}}}}`,
//! with the key re-armoured as Go's `encoding/pem` writes it. Byte-identical canonical
//! bodies are what deduplication compares.

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;
use signet_core::{b64, hexfmt, jcs};
use signet_keys::{KeyError, Signer};
use signet_core::wire::{self, Base64, Hex};

use signet_core::pubkey::HashAlg;
use super::{malformed, pem_key, rejected, EntryError, VerifiedEntry};
use crate::shared::Stamper;

/// A proposed entry as sent: its `spec` is read once `kind` says what it is.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProposedEntry {
    /// `0.0.1` (`0.0.2` or `0.0.1` for intoto).
    api_version: String,
    /// `hashedrekord`, `dsse` or `intoto`.
    kind: String,
    #[schema(schema_with = spec_schema)]
    spec: Box<RawValue>,
}

/// `spec` is one of the kinds' specs, read once `kind` is known.
fn spec_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::OneOfBuilder;
    use utoipa::openapi::Ref;
    OneOfBuilder::new()
        .item(Ref::from_schema_name("HashedRekordV001Spec"))
        .item(Ref::from_schema_name("DsseV001Spec"))
        .item(Ref::from_schema_name("IntotoV002Spec"))
        .item(Ref::from_schema_name("IntotoV001Spec"))
        .description(Some("the spec of the entry's kind: hashedrekord 0.0.1, dsse 0.0.1, intoto 0.0.2 or intoto 0.0.1"))
        .into()
}

/// The request schemas of `POST /api/v1/log/entries`, for the OpenAPI description.
pub fn request_schemas(out: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
    use utoipa::{PartialSchema, ToSchema};
    fn add<T: ToSchema>(out: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        out.push((T::name().into_owned(), <T as PartialSchema>::schema()));
        T::schemas(out);
    }
    add::<ProposedEntry>(out);
    add::<HashedRekordSpec>(out);
    add::<super::dsse::DsseSpec>(out);
    add::<super::intoto::IntotoSpec>(out);
    add::<super::intoto_v001::IntotoSpec>(out);
}

/// `spec` of a hashedrekord 0.0.1.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HashedRekordV001Spec)]
struct HashedRekordSpec {
    #[serde(deserialize_with = "wire::object")]
    data: Data,
    #[serde(deserialize_with = "wire::object")]
    signature: Signature,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HashedRekordV001Data)]
struct Data {
    #[serde(deserialize_with = "wire::object")]
    hash: DataHash,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HashedRekordV001Hash)]
struct DataHash {
    algorithm: HashAlg,
    value: Hex,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = HashedRekordV001Signature)]
struct Signature {
    content: Base64,
    #[serde(deserialize_with = "wire::object")]
    public_key: KeyContent,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HashedRekordV001PublicKey)]
struct KeyContent {
    content: Base64,
}

/// Parses and verifies a proposed entry (`POST /api/v1/log/entries`): a hashedrekord, or a
/// dsse envelope (see [`super::dsse`]).
pub fn parse(request: &[u8]) -> Result<VerifiedEntry, EntryError> {
    verify(&wire::from_slice(request)?)
}

/// [`parse`], for a request held as a JSON value (tests, and signet's own entries).
pub fn parse_value(request: &serde_json::Value) -> Result<VerifiedEntry, EntryError> {
    parse(&serde_json::to_vec(request).map_err(|e| malformed("", e.to_string()))?)
}

/// Verifies a proposed entry read by [`parse`], and makes its canonical body.
pub fn verify(request: &ProposedEntry) -> Result<VerifiedEntry, EntryError> {
    let kind = request.kind.as_str();
    let versions: &[&str] = match kind {
        "hashedrekord" | "dsse" => &["0.0.1"],
        "intoto" => &["0.0.2", "0.0.1"],
        _ => return Err(malformed("kind", format!("unsupported kind {kind:?}; this log accepts \"hashedrekord\", \"dsse\" and \"intoto\""))),
    };
    let version = request.api_version.as_str();
    if !versions.contains(&version) {
        let expected = versions.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" or ");
        return Err(malformed("apiVersion", format!("unsupported {kind} version {version:?}; expected {expected}")));
    }
    match (kind, version) {
        ("intoto", "0.0.2") => return super::intoto::parse_spec(request.spec.get()),
        ("intoto", _) => return super::intoto_v001::parse_spec(request.spec.get()),
        ("dsse", _) => return super::dsse::parse_spec(request.spec.get()),
        _ => {}
    }
    let spec: HashedRekordSpec = wire::from_slice(request.spec.get().as_bytes()).map_err(|e| e.within("spec"))?;

    let alg = spec.data.hash.algorithm;
    let alg_name = alg.name();
    let digest = &spec.data.hash.value.0;
    if digest.len() != alg.len() {
        return Err(malformed(
            "spec.data.hash.value",
            format!("{} digest must be {} hex characters, got {}", alg_name, alg.len() * 2, digest.len() * 2),
        ));
    }
    let sig = &spec.signature.content.0;
    if sig.is_empty() {
        return Err(malformed("spec.signature.content", "signature is empty"));
    }
    let (block, key) = pem_key(&spec.signature.public_key.content.0, "spec.signature.publicKey.content")?;
    key.verify_digest(alg, digest, sig).map_err(|e| rejected("spec.signature.content", e))?;

    let identity = (block.label == "CERTIFICATE").then(|| super::certificate_identity(&block.der)).flatten();
    let hex_value = hex::encode(digest);
    let canonical_key = signet_core::pem::encode(&block.label, &block.der);
    let body = canonical_body(alg_name, &hex_value, sig, canonical_key.as_bytes());
    let public_key = super::public_key_index_of_pem(&canonical_key);
    Ok(VerifiedEntry { body, digest_key: format!("{alg_name}:{hex_value}"), identity, public_key, attestation: None })
}

/// The RFC 8785 form of a hashedrekord 0.0.1 body, written directly: every value is an
/// algorithm name, hex or base64, none of which JSON escapes, and the keys are in sorted order.
/// The signature and the key's PEM are base64'd in place. A test holds it equal to
/// `jcs::to_vec` of the same document.
fn canonical_body(alg: &str, hex_value: &str, sig: &[u8], key_pem: &[u8]) -> Vec<u8> {
    let mut out = String::with_capacity(160 + hex_value.len() + (sig.len() + key_pem.len()) * 4 / 3 + 8);
    out.push_str(r#"{"apiVersion":"0.0.1","kind":"hashedrekord","spec":{"data":{"hash":{"algorithm":""#);
    out.push_str(alg);
    out.push_str(r#"","value":""#);
    out.push_str(hex_value);
    out.push_str(r#""}},"signature":{"content":""#);
    b64::push(&mut out, sig);
    out.push_str(r#"","publicKey":{"content":""#);
    b64::push(&mut out, key_pem);
    out.push_str(r#""}}}}"#);
    out.into_bytes()
}

/// Signs Signed Entry Timestamps: ECDSA over the canonical JSON of
/// `{body, integratedTime, logID, logIndex}`, the promise Rekor v1 clients check offline.
pub struct SetSigner {
    key: std::sync::Arc<Signer>,
    log_id_hex: String,
    /// The virtual index of the tree's entry 0 (see [`crate::shards`]): a SET promises the
    /// index clients see, the log-wide one.
    start: u64,
}

impl SetSigner {
    pub fn new(key: std::sync::Arc<Signer>) -> Self {
        Self::for_shard(key, 0)
    }

    /// The signer of a shard whose entry 0 has virtual index `start`.
    pub fn for_shard(key: std::sync::Arc<Signer>, start: u64) -> Self {
        let log_id_hex = hex::encode(key.key_id());
        SetSigner { key, log_id_hex, start }
    }
}

/// The bytes a SET signs: the canonical JSON (RFC 8785) of the entry's body, time, log ID and
/// index. Written directly, once per appended entry: the keys are fixed and already in JCS's
/// order, base64 needs no escaping, and an integer up to 2^53 prints as itself. Anything else
/// (a log ID that needs escaping, a number past 2^53) takes the general path, which agrees.
pub fn set_payload(body: &[u8], integrated_time: i64, log_id_hex: &str, index: u64) -> Vec<u8> {
    const EXACT: u64 = 1 << 53;
    let plain = |s: &str| s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if integrated_time.unsigned_abs() > EXACT || index > EXACT || !plain(log_id_hex) {
        return jcs::to_vec(&json!({
            "body": b64::encode(body),
            "integratedTime": integrated_time,
            "logID": log_id_hex,
            "logIndex": index,
        }));
    }
    let mut out = Vec::with_capacity(body.len().div_ceil(3) * 4 + log_id_hex.len() + 80);
    out.extend_from_slice(b"{\"body\":\"");
    b64::encode_into(body, &mut out);
    out.extend_from_slice(b"\",\"integratedTime\":");
    out.extend_from_slice(integrated_time.to_string().as_bytes());
    out.extend_from_slice(b",\"logID\":\"");
    out.extend_from_slice(log_id_hex.as_bytes());
    out.extend_from_slice(b"\",\"logIndex\":");
    out.extend_from_slice(index.to_string().as_bytes());
    out.push(b'}');
    out
}

impl Stamper for SetSigner {
    fn stamp(&self, index: u64, integrated_time: i64, body: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.key.sign(&set_payload(body, integrated_time, &self.log_id_hex, self.start + index))
    }

    /// As the key spreads its signatures: over the cores in memory, over its sessions on a
    /// token, many at once in a KMS.
    fn spread(&self) -> signet_keys::Spread {
        self.key.spread()
    }
}

/// The entry UUID Rekor hands out: the 16-hex tree ID followed by the 64-hex leaf hash.
pub fn entry_uuid(tree_id: i64, leaf_hash: &[u8]) -> String {
    let mut s = format!("{:016x}", tree_id);
    hexfmt::push(&mut s, leaf_hash);
    s
}

/// One `LogEntry` map (`{uuid: {...}}`) as Rekor v1 returns it.
pub struct EntryView<'a> {
    pub uuid: &'a str,
    pub body: &'a [u8],
    pub integrated_time: i64,
    pub log_id_hex: &'a str,
    /// The log-wide (virtual) index.
    pub index: u64,
    /// The index within the shard's tree, which the inclusion proof is for.
    pub proof_index: u64,
    pub set: Option<&'a [u8]>,
    pub proof: &'a [[u8; 32]],
    pub root_hash: &'a [u8; 32],
    pub tree_size: u64,
    pub checkpoint: &'a str,
    /// An intoto entry's kept attestation, served as `attestation.data` (Rekor's field).
    pub attestation: Option<&'a [u8]>,
}

impl EntryView<'_> {
    /// The JSON text, written directly: this is the hot path of every entry read, and every
    /// field but the checkpoint is hex, base64 or a number, so only that one needs escaping.
    pub fn to_json_string(&self) -> String {
        use std::fmt::Write as _;
        let attestation_len = self.attestation.map_or(0, |a| a.len() * 4 / 3 + 24);
        let mut s = String::with_capacity(self.body.len() * 4 / 3 + self.proof.len() * 70 + 600 + attestation_len);
        s.push_str("{\"");
        s.push_str(self.uuid);
        s.push_str("\":{");
        // First, as Go orders Rekor's LogEntryAnon fields.
        if let Some(data) = self.attestation {
            s.push_str("\"attestation\":{\"data\":\"");
            b64::push(&mut s, data);
            s.push_str("\"},");
        }
        s.push_str("\"body\":\"");
        b64::push(&mut s, self.body);
        // Writing into a String cannot fail.
        let _ = write!(s, "\",\"integratedTime\":{},\"logID\":\"", self.integrated_time);
        s.push_str(self.log_id_hex);
        let _ = write!(s, "\",\"logIndex\":{},\"verification\":{{\"inclusionProof\":{{\"checkpoint\":", self.index);
        // Serializing a `&str` cannot fail; an empty string would still be valid JSON.
        s.push_str(&serde_json::to_string(self.checkpoint).unwrap_or_else(|_| "\"\"".into()));
        s.push_str(",\"hashes\":[");
        for (i, h) in self.proof.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push('"');
            hexfmt::push(&mut s, h);
            s.push('"');
        }
        let _ = write!(s, "],\"logIndex\":{},\"rootHash\":\"", self.proof_index);
        hexfmt::push(&mut s, self.root_hash);
        let _ = write!(s, "\",\"treeSize\":{}}}", self.tree_size);
        if let Some(set) = self.set {
            s.push_str(",\"signedEntryTimestamp\":\"");
            b64::push(&mut s, set);
            s.push('"');
        }
        s.push_str("}}}");
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;
    use signet_core::pem;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

    pub(crate) fn signed_request(artifact: &[u8]) -> Value {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
        let sig = pair.sign(&SystemRandom::new(), artifact).unwrap();
        let spki = pair.public_key().as_der().unwrap();
        let pem = pem::encode("PUBLIC KEY", spki.as_ref());
        json!({
            "apiVersion": "0.0.1", "kind": "hashedrekord",
            "spec": {
                "signature": {"content": b64::encode(sig.as_ref()), "publicKey": {"content": b64::encode(pem)}},
                "data": {"hash": {"algorithm": "sha256", "value": hex::encode(signet_core::hash::sha256(artifact))}}
            }
        })
    }

    /// A P-256 key pair, and a self-signed certificate for it naming `san` (an email, or a URI).
    pub(crate) fn certified(san: &str) -> (EcdsaKeyPair, Vec<u8>) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![if san.contains(':') {
            rcgen::SanType::URI(san.try_into().unwrap())
        } else {
            rcgen::SanType::Rfc822Name(san.try_into().unwrap())
        }];
        let cert = params.self_signed(&key).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &key.serialize_der()).unwrap();
        (pair, cert.der().to_vec())
    }

    #[test]
    fn an_entry_signed_with_a_certificate_is_searchable_by_its_san() {
        for (san, key) in [("Alice@Example.com", "email:alice@example.com"), ("https://ci.example/wf@refs/heads/main", "uri:https://ci.example/wf@refs/heads/main")] {
            let (pair, cert) = certified(san);
            let mut req = signed_request(b"signed");
            let sig = pair.sign(&SystemRandom::new(), b"signed").unwrap();
            req["spec"]["signature"] = json!({"content": b64::encode(sig.as_ref()), "publicKey": {"content": b64::encode(pem::encode("CERTIFICATE", &cert))}});
            assert_eq!(parse_value(&req).unwrap().identity.as_deref(), Some(key));
        }
        assert_eq!(parse_value(&signed_request(b"signed")).unwrap().identity, None, "a bare key names nobody");
    }

    #[test]
    fn canonical_body_is_sorted_jcs() {
        let req = signed_request(b"hello");
        let entry = parse_value(&req).unwrap();
        let text = String::from_utf8(entry.body.clone()).unwrap();
        assert!(text.starts_with(r#"{"apiVersion":"0.0.1","kind":"hashedrekord","spec":{"data":{"hash":{"algorithm":"sha256","value":""#));
        assert!(entry.digest_key.starts_with("sha256:"));
        // Upper-case hex and unpadded base64 canonicalize to the same body.
        let mut req2 = req.clone();
        let v = req2["spec"]["data"]["hash"]["value"].as_str().unwrap().to_uppercase();
        req2["spec"]["data"]["hash"]["value"] = Value::String(v);
        assert_eq!(parse_value(&req2).unwrap().body, entry.body);
    }

    #[test]
    fn direct_canonical_body_equals_jcs() {
        // "c2ln" and "a2V5" are base64 of "sig" and "key".
        let direct = canonical_body("sha256", "ab", b"sig", b"key");
        let via_jcs = jcs::to_vec(&json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": "ab"}},
            "signature": {"content": "c2ln", "publicKey": {"content": "a2V5"}}}}));
        assert_eq!(direct, via_jcs);
    }

    #[test]
    fn refuses_each_kind_of_bad_input_naming_the_field() {
        let good = signed_request(b"x");
        let cases: Vec<(&str, Box<dyn Fn(&mut Value)>)> = vec![
            ("kind", Box::new(|v| v["kind"] = json!("rekord"))),
            ("apiVersion", Box::new(|v| v["apiVersion"] = json!("0.0.2"))),
            ("spec.data.hash.algorithm", Box::new(|v| v["spec"]["data"]["hash"]["algorithm"] = json!("md5"))),
            ("spec.data.hash.value", Box::new(|v| v["spec"]["data"]["hash"]["value"] = json!("abc"))),
            ("spec.data.hash.value", Box::new(|v| v["spec"]["data"]["hash"]["value"] = json!("zz".repeat(32)))),
            ("spec.signature.content", Box::new(|v| v["spec"]["signature"]["content"] = json!("@@@"))),
            ("spec.signature.content", Box::new(|v| v["spec"]["data"]["hash"]["value"] = json!("00".repeat(32)))),
            ("spec.signature.publicKey.content", Box::new(|v| v["spec"]["signature"]["publicKey"]["content"] = json!(b64::encode("not pem")))),
            ("spec.signature.publicKey.content", Box::new(|v| v["spec"]["signature"]["publicKey"]["content"] = json!(b64::encode(pem::encode("CERTIFICATE", b"bogus"))))),
            ("spec.extra", Box::new(|v| v["spec"]["extra"] = json!(1))),
            ("spec.signature.publicKey", Box::new(|v| v["spec"]["signature"].as_object_mut().unwrap().remove("publicKey").map(drop).unwrap())),
            ("spec.data.hash.value", Box::new(|v| v["spec"]["data"]["hash"]["value"] = json!(7))),
            ("extra", Box::new(|v| v["extra"] = json!(1))),
        ];
        for (field, mutate) in cases {
            let mut req = good.clone();
            mutate(&mut req);
            let err = parse_value(&req).unwrap_err();
            assert_eq!(err.field(), field, "{err}");
        }
    }

    #[test]
    fn entry_view_is_rekor_shaped_json() {
        let proof = [[1u8; 32], [2u8; 32]];
        let text = EntryView {
            uuid: "ab",
            body: b"{}",
            integrated_time: 17,
            log_id_hex: "cd",
            index: 13,
            proof_index: 3,
            set: Some(b"sig"),
            proof: &proof,
            root_hash: &[3u8; 32],
            tree_size: 4,
            checkpoint: "o\n4\nr\n\n\u{2014} o x\n",
            attestation: None,
        }
        .to_json_string();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"ab": {"body": "e30=", "integratedTime": 17, "logID": "cd", "logIndex": 13, "verification": {
                "inclusionProof": {"checkpoint": "o\n4\nr\n\n\u{2014} o x\n", "hashes": [hex::encode([1u8; 32]), hex::encode([2u8; 32])],
                                   "logIndex": 3, "rootHash": hex::encode([3u8; 32]), "treeSize": 4},
                "signedEntryTimestamp": "c2ln"}}})
        );
    }

    #[test]
    fn the_set_payload_is_what_jcs_writes_for_every_input() {
        let general = |body: &[u8], t: i64, id: &str, i: u64| {
            jcs::to_vec(&json!({"body": b64::encode(body), "integratedTime": t, "logID": id, "logIndex": i}))
        };
        let bodies: [&[u8]; 4] = [b"", b"a", b"ab", &[0xff; 700]];
        let ids = ["", "c0ffee", "quote\"back\\slash", "tab\tnl\n", "\u{1}", "\u{2014}é"];
        let times = [0, -1, 1_700_000_000, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1, i64::MIN, i64::MAX];
        let indices = [0, 7, 1 << 53, (1 << 53) + 1, u64::MAX];
        for body in bodies {
            for id in ids {
                for t in times {
                    for i in indices {
                        let fast = set_payload(body, t, id, i);
                        assert_eq!(fast, general(body, t, id, i), "{:?} {t} {id:?} {i}", String::from_utf8_lossy(&fast));
                    }
                }
            }
        }
    }

    #[test]
    fn set_verifies_over_canonical_payload() {
        let key = std::sync::Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
        let signer = SetSigner::new(key.clone());
        let set = signer.stamp(5, 1700000000, b"body").unwrap();
        let payload = set_payload(b"body", 1700000000, &hex::encode(key.key_id()), 5);
        assert_eq!(
            String::from_utf8(payload.clone()).unwrap(),
            format!(r#"{{"body":"Ym9keQ==","integratedTime":1700000000,"logID":"{}","logIndex":5}}"#, hex::encode(key.key_id()))
        );
        assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(key.spki_der(), &payload, &set));
        // A later shard's SET promises the log-wide index.
        let set = SetSigner::for_shard(key.clone(), 100).stamp(5, 1700000000, b"body").unwrap();
        assert!(!signet_keys::Algorithm::EcdsaP256Sha256.verify(key.spki_der(), &payload, &set));
        let payload = set_payload(b"body", 1700000000, &hex::encode(key.key_id()), 105);
        assert!(signet_keys::Algorithm::EcdsaP256Sha256.verify(key.spki_der(), &payload, &set));
    }
}
