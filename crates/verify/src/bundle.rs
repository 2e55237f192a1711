//! Sigstore bundles (protobuf-specs `Bundle`, JSON) v0.1 to v0.3, parsed into typed values
//! with every base64 field decoded, so that later checks work on bytes and never re-parse.

use serde::Deserialize;
use signet_core::b64;
use signet_core::pubkey::HashAlg;

use crate::cert::Cert;
use crate::error::{Result, VerifyError};

/// The bundle format versions, which differ in what they must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    V01,
    V02,
    V03,
}

/// What the signature is made with.
#[derive(Debug, Clone)]
pub enum Material {
    /// The leaf certificate (v0.3 `certificate`, or the first of a v0.1/v0.2 chain).
    Certificate(Box<Cert>),
    /// A managed key; the hint is only a hint.
    PublicKey { hint: Option<String> },
}

#[derive(Debug, Clone)]
pub struct MessageSignature {
    pub digest: Option<(HashAlg, Vec<u8>)>,
    pub signature: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct DsseEnvelope {
    pub payload: Vec<u8>,
    pub payload_type: String,
    pub signatures: Vec<Vec<u8>>,
}

#[derive(Debug, Clone)]
pub enum Content {
    Message(MessageSignature),
    Dsse(DsseEnvelope),
}

#[derive(Debug, Clone)]
pub struct InclusionProof {
    pub log_index: u64,
    pub root_hash: [u8; 32],
    pub tree_size: u64,
    pub hashes: Vec<[u8; 32]>,
    pub checkpoint: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TlogEntry {
    pub log_index: u64,
    pub log_id: Vec<u8>,
    pub kind: String,
    pub version: String,
    /// 0 when absent (Rekor v2 entries have none).
    pub integrated_time: i64,
    pub set: Option<Vec<u8>>,
    pub inclusion_proof: Option<InclusionProof>,
    pub body: Vec<u8>,
    /// The body as the bundle spells it in base64, which the SET signs.
    pub body_b64: String,
}

#[derive(Debug, Clone)]
pub struct Bundle {
    pub version: Version,
    pub material: Material,
    /// The certificates after the leaf in a v0.1/v0.2 `x509CertificateChain`.
    pub extra_chain: Vec<Vec<u8>>,
    pub tlog_entries: Vec<TlogEntry>,
    pub timestamps: Vec<Vec<u8>>,
    pub content: Content,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BundleJson {
    media_type: String,
    verification_material: MaterialJson,
    message_signature: Option<MessageSignatureJson>,
    dsse_envelope: Option<EnvelopeJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MaterialJson {
    certificate: Option<RawBytesJson>,
    x509_certificate_chain: Option<ChainJson>,
    public_key: Option<KeyIdJson>,
    #[serde(default)]
    tlog_entries: Vec<EntryJson>,
    timestamp_verification_data: Option<TimestampDataJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytesJson {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct ChainJson {
    #[serde(default)]
    certificates: Vec<RawBytesJson>,
}

#[derive(Deserialize)]
struct KeyIdJson {
    hint: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimestampDataJson {
    #[serde(default)]
    rfc3161_timestamps: Vec<SignedTimestampJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SignedTimestampJson {
    signed_timestamp: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryJson {
    log_index: String,
    log_id: LogIdJson,
    kind_version: KindVersionJson,
    integrated_time: Option<String>,
    inclusion_promise: Option<PromiseJson>,
    inclusion_proof: Option<ProofJson>,
    canonicalized_body: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogIdJson {
    key_id: String,
}

#[derive(Deserialize)]
struct KindVersionJson {
    kind: String,
    version: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromiseJson {
    signed_entry_timestamp: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProofJson {
    log_index: String,
    root_hash: String,
    tree_size: String,
    #[serde(default)]
    hashes: Vec<String>,
    checkpoint: Option<CheckpointJson>,
}

#[derive(Deserialize)]
struct CheckpointJson {
    envelope: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageSignatureJson {
    message_digest: Option<DigestJson>,
    signature: String,
}

#[derive(Deserialize)]
struct DigestJson {
    algorithm: String,
    digest: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeJson {
    payload: String,
    payload_type: String,
    #[serde(default)]
    signatures: Vec<EnvelopeSigJson>,
}

#[derive(Deserialize)]
struct EnvelopeSigJson {
    sig: String,
}

fn bad(m: impl Into<String>) -> VerifyError {
    VerifyError::Bundle(m.into())
}

/// protojson bytes. Like Go's and Python's decoders we skip line breaks, which `base64`
/// tools insert every 76 characters.
fn decode(field: &str, s: &str) -> Result<Vec<u8>> {
    let decoded = if s.contains(['\n', '\r']) {
        b64::decode(&s.replace(['\n', '\r'], ""))
    } else {
        b64::decode(s)
    };
    decoded.map_err(|_| bad(format!("{field} is not valid base64")))
}

fn hash32(field: &str, s: &str) -> Result<[u8; 32]> {
    decode(field, s)?.try_into().map_err(|_| bad(format!("{field} is not a 32-byte hash")))
}

/// protojson writes int64 as a decimal string; a negative or garbled value is rejected.
fn index(field: &str, s: &str) -> Result<u64> {
    if s.starts_with('-') {
        return Err(bad(format!("{field} is negative ({s})")));
    }
    s.parse().map_err(|_| bad(format!("{field} {s:?} is not a non-negative integer")))
}

/// The protobuf-specs `HashAlgorithm` names.
pub fn hash_alg(name: &str) -> Option<HashAlg> {
    match name {
        "SHA2_256" => Some(HashAlg::Sha256),
        "SHA2_384" => Some(HashAlg::Sha384),
        "SHA2_512" => Some(HashAlg::Sha512),
        _ => None,
    }
}

fn version_of(media_type: &str) -> Result<Version> {
    match media_type {
        "application/vnd.dev.sigstore.bundle+json;version=0.1" => Ok(Version::V01),
        "application/vnd.dev.sigstore.bundle+json;version=0.2" | "application/vnd.dev.sigstore.bundle.v0.2+json" => {
            Ok(Version::V02)
        }
        "application/vnd.dev.sigstore.bundle+json;version=0.3" | "application/vnd.dev.sigstore.bundle.v0.3+json" => {
            Ok(Version::V03)
        }
        other => Err(bad(format!("unsupported mediaType {other:?} (expected a Sigstore bundle v0.1, v0.2 or v0.3)"))),
    }
}

impl Bundle {
    pub fn from_json(json: &[u8]) -> Result<Bundle> {
        let raw: BundleJson = serde_json::from_slice(json).map_err(|e| bad(format!("not a valid bundle JSON document: {e}")))?;
        let version = version_of(&raw.media_type)?;
        let vm = raw.verification_material;

        let (material, extra_chain) = match (vm.certificate, vm.x509_certificate_chain, vm.public_key) {
            (Some(c), None, None) => {
                if version < Version::V03 {
                    return Err(bad("verificationMaterial.certificate needs a v0.3 bundle"));
                }
                (Material::Certificate(Box::new(leaf(&decode("certificate.rawBytes", &c.raw_bytes)?)?)), vec![])
            }
            (None, Some(chain), None) => {
                if version >= Version::V03 {
                    return Err(bad("v0.3 bundles carry one certificate, not x509CertificateChain"));
                }
                let mut ders = chain
                    .certificates
                    .iter()
                    .map(|c| decode("x509CertificateChain.certificates.rawBytes", &c.raw_bytes))
                    .collect::<Result<Vec<_>>>()?;
                if ders.is_empty() {
                    return Err(bad("x509CertificateChain has no certificates"));
                }
                let leaf_der = ders.remove(0);
                (Material::Certificate(Box::new(leaf(&leaf_der)?)), ders)
            }
            (None, None, Some(k)) => (Material::PublicKey { hint: k.hint }, vec![]),
            (None, None, None) => return Err(bad("verificationMaterial has no certificate, chain or public key")),
            _ => return Err(bad("verificationMaterial must hold exactly one of certificate, x509CertificateChain, publicKey")),
        };

        let tlog_entries = vm.tlog_entries.iter().map(entry).collect::<Result<Vec<_>>>()?;
        for (i, e) in tlog_entries.iter().enumerate() {
            if e.inclusion_proof.is_none() && (version >= Version::V02 || e.set.is_none()) {
                return Err(bad(format!(
                    "tlogEntries[{i}] has no inclusionProof (a v0.2+ bundle needs one; a v0.1 bundle needs one or a SET)"
                )));
            }
        }
        let timestamps = vm
            .timestamp_verification_data
            .map(|t| t.rfc3161_timestamps)
            .unwrap_or_default()
            .iter()
            .map(|t| decode("rfc3161Timestamps.signedTimestamp", &t.signed_timestamp))
            .collect::<Result<Vec<_>>>()?;

        let content = match (raw.message_signature, raw.dsse_envelope) {
            (Some(m), None) => {
                let digest = match m.message_digest {
                    None => None,
                    Some(d) => {
                        let alg = hash_alg(&d.algorithm)
                            .ok_or_else(|| bad(format!("messageDigest algorithm {:?} is not supported", d.algorithm)))?;
                        let bytes = decode("messageSignature.messageDigest.digest", &d.digest)?;
                        if bytes.len() != alg.len() {
                            return Err(bad("messageDigest.digest has the wrong length for its algorithm"));
                        }
                        Some((alg, bytes))
                    }
                };
                Content::Message(MessageSignature { digest, signature: decode("messageSignature.signature", &m.signature)? })
            }
            (None, Some(e)) => Content::Dsse(DsseEnvelope {
                payload: decode("dsseEnvelope.payload", &e.payload)?,
                payload_type: e.payload_type,
                signatures: e.signatures.iter().map(|s| decode("dsseEnvelope.signatures.sig", &s.sig)).collect::<Result<_>>()?,
            }),
            _ => return Err(bad("bundle must carry exactly one of messageSignature, dsseEnvelope")),
        };
        if tlog_entries.is_empty() && timestamps.is_empty() {
            return Err(bad("bundle has neither tlog entries nor RFC 3161 timestamps"));
        }
        Ok(Bundle { version, material, extra_chain, tlog_entries, timestamps, content })
    }

    /// The signature bytes that timestamps cover: the message signature or the DSSE one.
    pub fn signature_bytes(&self) -> &[u8] {
        match &self.content {
            Content::Message(m) => &m.signature,
            Content::Dsse(e) => e.signatures.first().map_or(&[], |s| s.as_slice()),
        }
    }
}

fn leaf(der: &[u8]) -> Result<Cert> {
    Cert::parse(der).map_err(|e| bad(format!("signing certificate: {e}")))
}

impl TlogEntry {
    /// One `TransparencyLogEntry` on its own, as a Rekor v2 log answers an append (and as
    /// signet keeps its audit anchors).
    pub fn from_json(json: &[u8]) -> Result<TlogEntry> {
        let e: EntryJson = serde_json::from_slice(json).map_err(|e| bad(format!("transparency log entry: {e}")))?;
        entry(&e)
    }
}

fn entry(e: &EntryJson) -> Result<TlogEntry> {
    let integrated_time = match e.integrated_time.as_deref() {
        None => 0,
        Some(t) => t.parse::<i64>().ok().filter(|t| *t >= 0).ok_or_else(|| bad(format!("integratedTime {t:?} is invalid")))?,
    };
    let inclusion_proof = match &e.inclusion_proof {
        None => None,
        Some(p) => Some(InclusionProof {
            log_index: index("inclusionProof.logIndex", &p.log_index)?,
            root_hash: hash32("inclusionProof.rootHash", &p.root_hash)?,
            tree_size: index("inclusionProof.treeSize", &p.tree_size)?,
            hashes: p.hashes.iter().map(|h| hash32("inclusionProof.hashes", h)).collect::<Result<_>>()?,
            checkpoint: p.checkpoint.as_ref().map(|c| c.envelope.clone()),
        }),
    };
    Ok(TlogEntry {
        log_index: index("tlogEntries.logIndex", &e.log_index)?,
        log_id: decode("tlogEntries.logId.keyId", &e.log_id.key_id)?,
        kind: e.kind_version.kind.clone(),
        version: e.kind_version.version.clone(),
        integrated_time,
        set: e.inclusion_promise.as_ref().map(|p| decode("signedEntryTimestamp", &p.signed_entry_timestamp)).transpose()?,
        inclusion_proof,
        body: decode("canonicalizedBody", &e.canonicalized_body)?,
        body_b64: e.canonicalized_body.clone(),
    })
}
