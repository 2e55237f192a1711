//! What an entry says about who signed what: the certificate's identities and OIDC issuer,
//! the signing key, and the artifact digest. Entries are untrusted bytes from the log, so
//! nothing here panics, and a body that does not parse is counted, never fatal.
//!
//! Kinds read (their canonical bodies, as Rekor and signet store them):
//! - Rekor v2 `hashedrekord` 0.0.2 and `dsse` 0.0.2 (`spec.hashedRekordV002` / `spec.dsseV002`);
//! - Rekor v1 `hashedrekord` 0.0.1 (`spec.data.hash`, `spec.signature.publicKey.content`)
//!   and `dsse` 0.0.1 (`spec.payloadHash`, `spec.signatures[].verifier`);
//! - a CT log's `MerkleTreeLeaf`s: the X.509 entry's certificate, the precert entry's TBS.

use der::{Decode, Encode};
use serde::Deserialize;
use signet_core::ctleaf::LeafEntry;
use signet_core::pem::{self, PemError};
use signet_core::{b64, hash::sha256};
use x509_cert::certificate::TbsCertificate;
use x509_cert::der::oid::{AssociatedOid, ObjectIdentifier};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;

/// Fulcio's OIDC issuer extension (a DER UTF8String), and its deprecated raw-bytes form.
/// (github.com/sigstore/fulcio docs/oid-info.md)
const ISSUER_V2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
const ISSUER_V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");

/// Why an entry could not be read: it is counted as unparsed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    #[error("not a Rekor entry body: {0}")]
    NotABody(#[source] serde_json::Error),
    /// The body's kind and version, and the field of `spec` it lacks.
    #[error("{kind} {version} without spec.{field}")]
    NoSpec { kind: &'static str, version: &'static str, field: &'static str },
    #[error("entry kind {kind} {version} is not one the monitor reads")]
    UnknownKind { kind: String, version: String },
    #[error("digest algorithm {0:?} is unknown")]
    DigestAlgorithm(String),
    /// What is not: the digest, certificate, public key or verifier.
    #[error("{0} is not base64")]
    NotBase64(&'static str),
    #[error("verifier holds neither a certificate nor a public key")]
    NoVerifier,
    #[error("verifier is not PEM: {0}")]
    NotPem(#[source] PemError),
    #[error("verifier is a PEM {0:?}")]
    PemLabel(String),
    #[error("not an RFC 6962 MerkleTreeLeaf of an X.509 or precert entry")]
    NotCtLeaf,
    /// What does not parse: the certificate, the precertificate TBS, or one of its extensions.
    #[error("{what} does not parse: {source}")]
    Der { what: &'static str, source: der::Error },
    /// The key's SubjectPublicKeyInfo cannot be encoded again (to fingerprint it).
    #[error(transparent)]
    Spki(der::Error),
}

/// A Subject Alternative Name of a signing certificate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum San {
    Email(String),
    Uri(String),
    Dns(String),
}

impl San {
    pub fn value(&self) -> &str {
        match self {
            San::Email(s) | San::Uri(s) | San::Dns(s) => s,
        }
    }
}

/// One signer of an entry: a certificate (with its identities) or a bare key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signer {
    pub sans: Vec<San>,
    pub issuer: Option<String>,
    /// SHA-256 of the DER SubjectPublicKeyInfo.
    pub key_sha256: [u8; 32],
    pub is_certificate: bool,
}

/// What one entry says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    pub kind: String,
    pub signers: Vec<Signer>,
    /// `<algorithm>:<hex>`, algorithms spelled as Rekor v1 does (`sha256`).
    pub digests: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    kind: String,
    api_version: String,
    spec: Spec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Spec {
    hashed_rekord_v002: Option<HashedRekordV2>,
    dsse_v002: Option<DsseV2>,
    data: Option<DataV1>,
    signature: Option<SignatureV1>,
    payload_hash: Option<HashV1>,
    signatures: Option<Vec<DsseSignatureV1>>,
}

#[derive(Deserialize)]
struct HashedRekordV2 {
    data: DigestV2,
    signature: SignatureV2,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DsseV2 {
    payload_hash: DigestV2,
    #[serde(default)]
    signatures: Vec<SignatureV2>,
}

#[derive(Deserialize)]
struct DigestV2 {
    algorithm: String,
    digest: String,
}

#[derive(Deserialize)]
struct SignatureV2 {
    verifier: VerifierV2,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VerifierV2 {
    public_key: Option<RawBytes>,
    x509_certificate: Option<RawBytes>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytes {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct DataV1 {
    hash: HashV1,
}

#[derive(Deserialize)]
struct HashV1 {
    algorithm: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SignatureV1 {
    public_key: ContentV1,
}

#[derive(Deserialize)]
struct ContentV1 {
    content: String,
}

#[derive(Deserialize)]
struct DsseSignatureV1 {
    verifier: String,
}

/// Reads an entry body. `Err` names why it could not be read (unknown kind, bad JSON, a
/// certificate that does not parse).
pub fn parse(body: &[u8]) -> Result<Facts, EntryError> {
    let b: Body = serde_json::from_slice(body).map_err(EntryError::NotABody)?;
    let mut facts = Facts { kind: format!("{} {}", b.kind, b.api_version), ..Facts::default() };
    let spec = b.spec;
    match (b.kind.as_str(), b.api_version.as_str()) {
        ("hashedrekord", "0.0.2") => {
            let hr = spec.hashed_rekord_v002.ok_or(EntryError::NoSpec { kind: "hashedrekord", version: "0.0.2", field: "hashedRekordV002" })?;
            facts.digests.push(digest_v2(&hr.data)?);
            facts.signers.push(signer_v2(&hr.signature.verifier)?);
        }
        ("dsse", "0.0.2") => {
            let d = spec.dsse_v002.ok_or(EntryError::NoSpec { kind: "dsse", version: "0.0.2", field: "dsseV002" })?;
            facts.digests.push(digest_v2(&d.payload_hash)?);
            for s in &d.signatures {
                facts.signers.push(signer_v2(&s.verifier)?);
            }
        }
        ("hashedrekord", "0.0.1") => {
            let hash = spec.data.ok_or(EntryError::NoSpec { kind: "hashedrekord", version: "0.0.1", field: "data" })?.hash;
            facts.digests.push(format!("{}:{}", hash.algorithm.to_ascii_lowercase(), hash.value.to_ascii_lowercase()));
            let key = spec.signature.ok_or(EntryError::NoSpec { kind: "hashedrekord", version: "0.0.1", field: "signature" })?.public_key.content;
            facts.signers.push(signer_pem(&key)?);
        }
        ("dsse", "0.0.1") => {
            let hash = spec.payload_hash.ok_or(EntryError::NoSpec { kind: "dsse", version: "0.0.1", field: "payloadHash" })?;
            facts.digests.push(format!("{}:{}", hash.algorithm.to_ascii_lowercase(), hash.value.to_ascii_lowercase()));
            for s in spec.signatures.unwrap_or_default() {
                facts.signers.push(signer_pem(&s.verifier)?);
            }
        }
        (kind, version) => return Err(EntryError::UnknownKind { kind: kind.to_string(), version: version.to_string() }),
    }
    Ok(facts)
}

/// A v2 digest as `sha256:<hex>`: the algorithm enum's name in Rekor v1 spelling.
fn digest_v2(d: &DigestV2) -> Result<String, EntryError> {
    let alg = match d.algorithm.as_str() {
        "SHA2_256" => "sha256",
        "SHA2_384" => "sha384",
        "SHA2_512" => "sha512",
        other => return Err(EntryError::DigestAlgorithm(other.to_string())),
    };
    let bytes = b64::decode(&d.digest).map_err(|_| EntryError::NotBase64("digest"))?;
    Ok(format!("{alg}:{}", hex::encode(bytes)))
}

fn signer_v2(v: &VerifierV2) -> Result<Signer, EntryError> {
    match (&v.x509_certificate, &v.public_key) {
        (Some(c), _) => certificate(&b64::decode(&c.raw_bytes).map_err(|_| EntryError::NotBase64("certificate"))?),
        (None, Some(k)) => {
            let spki = b64::decode(&k.raw_bytes).map_err(|_| EntryError::NotBase64("public key"))?;
            Ok(Signer { key_sha256: sha256(&spki), ..Signer::default() })
        }
        (None, None) => Err(EntryError::NoVerifier),
    }
}

/// A v1 verifier: base64 of a PEM certificate or public key.
fn signer_pem(content: &str) -> Result<Signer, EntryError> {
    let text = b64::decode(content).map_err(|_| EntryError::NotBase64("verifier"))?;
    let block = pem::decode_first(&text).map_err(EntryError::NotPem)?;
    match block.label.as_str() {
        "CERTIFICATE" => certificate(&block.der),
        "PUBLIC KEY" => Ok(Signer { key_sha256: sha256(&block.der), ..Signer::default() }),
        _ => Err(EntryError::PemLabel(block.label)),
    }
}

/// Reads a CT log's entry (an RFC 6962 `MerkleTreeLeaf`): the certificate or precertificate
/// it logs, as the signer of a Rekor entry is read.
pub fn parse_ct_leaf(leaf: &[u8]) -> Result<Facts, EntryError> {
    let (kind, signer) = match signet_core::ctleaf::leaf_entry(leaf).ok_or(EntryError::NotCtLeaf)? {
        LeafEntry::X509(der) => ("ct x509_entry", certificate(der)?),
        LeafEntry::Precert { tbs } => {
            let tbs = TbsCertificate::from_der(tbs).map_err(|source| EntryError::Der { what: "precertificate TBS", source })?;
            ("ct precert_entry", tbs_signer(&tbs)?)
        }
    };
    Ok(Facts { kind: kind.into(), signers: vec![signer], ..Facts::default() })
}

/// A certificate's identities, its Fulcio issuer, and its key's fingerprint.
pub fn certificate(der_bytes: &[u8]) -> Result<Signer, EntryError> {
    let cert = x509_cert::Certificate::from_der(der_bytes).map_err(|source| EntryError::Der { what: "certificate", source })?;
    tbs_signer(&cert.tbs_certificate)
}

fn tbs_signer(tbs: &TbsCertificate) -> Result<Signer, EntryError> {
    let spki = tbs.subject_public_key_info.to_der().map_err(EntryError::Spki)?;
    let mut signer = Signer { key_sha256: sha256(&spki), is_certificate: true, ..Signer::default() };
    let mut legacy_issuer = None;
    for ext in tbs.extensions.iter().flatten() {
        let value = ext.extn_value.as_bytes();
        if ext.extn_id == SubjectAltName::OID {
            let names = SubjectAltName::from_der(value).map_err(|source| EntryError::Der { what: "subjectAltName", source })?;
            signer.sans.extend(names.0.into_iter().filter_map(|n| match n {
                GeneralName::Rfc822Name(s) => Some(San::Email(s.to_string())),
                GeneralName::UniformResourceIdentifier(s) => Some(San::Uri(s.to_string())),
                GeneralName::DnsName(s) => Some(San::Dns(s.to_string())),
                _ => None,
            }));
        } else if ext.extn_id == ISSUER_V2 {
            let s = der::asn1::Utf8StringRef::from_der(value).map_err(|source| EntryError::Der { what: "OIDC issuer extension", source })?;
            signer.issuer = Some(s.as_str().to_string());
        } else if ext.extn_id == ISSUER_V1 {
            legacy_issuer = std::str::from_utf8(value).ok().map(str::to_string);
        }
    }
    if signer.issuer.is_none() {
        signer.issuer = legacy_issuer;
    }
    Ok(signer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_malformed_bodies_are_errors_not_panics() {
        for body in [&b""[..], b"{", b"[]", br#"{"kind":"x","apiVersion":"1","spec":{}}"#,
            br#"{"kind":"hashedrekord","apiVersion":"0.0.2","spec":{}}"#,
            br#"{"kind":"hashedrekord","apiVersion":"0.0.2","spec":{"hashedRekordV002":{"data":{"algorithm":"SHA2_256","digest":"%"},"signature":{"verifier":{}}}}}"#,
            br#"{"kind":"hashedrekord","apiVersion":"0.0.2","spec":{"hashedRekordV002":{"data":{"algorithm":"SHA2_256","digest":"AA=="},"signature":{"verifier":{"x509Certificate":{"rawBytes":"AAAA"}}}}}}"#] {
            assert!(parse(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn reads_a_v2_entry_with_a_bare_key() {
        let body = br#"{"apiVersion":"0.0.2","kind":"hashedrekord","spec":{"hashedRekordV002":{"data":{"algorithm":"SHA2_256","digest":"AAEC"},"signature":{"content":"AA==","verifier":{"keyDetails":"PKIX_ECDSA_P256_SHA_256","publicKey":{"rawBytes":"AQID"}}}}}}"#;
        let f = parse(body).unwrap();
        assert_eq!(f.digests, vec!["sha256:000102".to_string()]);
        assert_eq!(f.signers[0].key_sha256, sha256(&[1, 2, 3]));
        assert!(!f.signers[0].is_certificate && f.signers[0].sans.is_empty());
    }

    /// Every truncation and every single-byte change of a valid body reads or fails, never panics.
    #[test]
    fn mutated_bodies_never_panic() {
        let body: &[u8] = br#"{"apiVersion":"0.0.1","kind":"hashedrekord","spec":{"data":{"hash":{"algorithm":"sha256","value":"ab"}},"signature":{"content":"AA==","publicKey":{"content":"LS0tLS1CRUdJTiBQVUJMSUMgS0VZLS0tLS0KQVFJRAotLS0tLUVORCBQVUJMSUMgS0VZLS0tLS0K"}}}}"#;
        assert!(parse(body).is_ok());
        for cut in 0..body.len() {
            let _ = parse(&body[..cut]);
        }
        for i in 0..body.len() {
            for b in [0u8, b'"', b'{', b'A', 0xff] {
                let mut m = body.to_vec();
                m[i] = b;
                let _ = parse(&m);
            }
        }
        for junk in [&[0x30u8, 0x82, 0xff, 0xff][..], &[0x30, 0x03, 0x02, 0x01], &[]] {
            assert!(certificate(junk).is_err());
        }
    }
}

