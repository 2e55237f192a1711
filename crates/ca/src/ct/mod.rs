//! signet's certificate transparency log (RFC 6962) and the SCTs the CA embeds.
//!
//! Every leaf certificate is first logged as a precertificate entry; the log answers with a
//! Signed Certificate Timestamp (v1, ECDSA P-256/SHA-256, the only kind sigstore-python
//! accepts), and the SCT goes into the final certificate. The SCT is returned only once
//! its entry is durable in the log, so it is a kept promise, not merely a promise to merge.
//! A CT client may also submit a certificate of this CA's itself (`add-chain`, an X.509
//! entry) or a precertificate (`add-pre-chain`): the same log, the same SCT.
//!
//! [`submission`] checks what `add-chain` and `add-pre-chain` are sent.
//!
//! The log reuses the `log` crate's engine. Its leaves are RFC 6962 `MerkleTreeLeaf`s of
//! precertificate entries; a `MerkleTreeLeaf` and the data an SCT signs are byte-identical
//! (both start with two zero bytes: version and leaf type / signature type).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use der::asn1::OctetString;
use der::Encode;
use signet_keys::Signer;
use signet_log::{AppendError, Log, Sequenced};
use x509_cert::ext::Extension;

use crate::authority::OID_CT_SCT_LIST;

pub mod submission;

pub use signet_core::ctleaf::{leaf_entry, leaf_tbs, LeafEntry};

/// A Signed Certificate Timestamp for a precertificate entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sct {
    pub log_id: [u8; 32],
    pub timestamp_ms: u64,
    /// ASN.1 DER ECDSA P-256 signature.
    pub signature: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum CtError {
    #[error("CT log append failed: {0}")]
    Append(#[from] AppendError),
    #[error("signing the SCT failed")]
    Sign,
    /// The CT log's key is on a token that did not sign now: 503, try again.
    #[error("the CT log's key cannot sign now: {0}")]
    KeyUnavailable(String),
    #[error("signing for the CT log: {0}")]
    Panicked(#[from] signet_core::cpu::Panicked),
    #[error("a certificate of {0} bytes is too large for a CT entry")]
    TooLarge(usize),
}

fn sct_failed(e: signet_keys::KeyError) -> CtError {
    match e.is_transient() {
        true => CtError::KeyUnavailable(e.to_string()),
        false => CtError::Sign,
    }
}

/// RFC 6962 §3.4 `MerkleTreeLeaf` of a precert entry, which is also the §3.2 signed data.
pub fn precert_leaf(timestamp_ms: u64, issuer_key_hash: &[u8; 32], tbs: &[u8]) -> Result<Vec<u8>, CtError> {
    if tbs.len() >= 1 << 24 {
        return Err(CtError::TooLarge(tbs.len()));
    }
    let mut out = Vec::with_capacity(2 + 8 + 2 + 32 + 3 + tbs.len() + 2);
    out.extend_from_slice(&[0, 0]); // v1; timestamped_entry (certificate_timestamp when signed)
    out.extend_from_slice(&timestamp_ms.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes()); // precert_entry
    out.extend_from_slice(issuer_key_hash);
    out.extend_from_slice(&(tbs.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(tbs);
    out.extend_from_slice(&0u16.to_be_bytes()); // no extensions
    Ok(out)
}

/// RFC 6962 §3.4 `MerkleTreeLeaf` of an X.509 entry (a final certificate, `add-chain`),
/// which is also the §3.2 signed data.
pub fn x509_leaf(timestamp_ms: u64, certificate: &[u8]) -> Result<Vec<u8>, CtError> {
    if certificate.len() >= 1 << 24 {
        return Err(CtError::TooLarge(certificate.len()));
    }
    let mut out = Vec::with_capacity(2 + 8 + 2 + 3 + certificate.len() + 2);
    out.extend_from_slice(&[0, 0]); // v1; timestamped_entry (certificate_timestamp when signed)
    out.extend_from_slice(&timestamp_ms.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // x509_entry
    opaque24(&mut out, certificate);
    out.extend_from_slice(&0u16.to_be_bytes()); // no extensions
    Ok(out)
}

impl Sct {
    /// The `add-chain`/`add-pre-chain` answer (RFC 6962 §4.1).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "sct_version": 0,
            "id": signet_core::b64::encode(self.log_id),
            "timestamp": self.timestamp_ms,
            "extensions": "",
            "signature": signet_core::b64::encode(digitally_signed(&self.signature)),
        })
    }

    /// The TLS encoding of §3.2 `SignedCertificateTimestamp`.
    pub fn to_tls(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + 32 + 8 + 2 + 4 + self.signature.len());
        out.push(0);
        out.extend_from_slice(&self.log_id);
        out.extend_from_slice(&self.timestamp_ms.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&[4, 3]); // sha256, ecdsa
        out.extend_from_slice(&(self.signature.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.signature);
        out
    }

    /// Checks the SCT over a precert entry against the log's SPKI.
    pub fn verify(&self, log_spki: &[u8], issuer_key_hash: &[u8; 32], tbs: &[u8]) -> bool {
        let Ok(data) = precert_leaf(self.timestamp_ms, issuer_key_hash, tbs) else { return false };
        signet_core::hash::sha256(log_spki) == self.log_id && signet_keys::Algorithm::EcdsaP256Sha256.verify(log_spki, &data, &self.signature)
    }
}

/// The §3.3 SCT list extension, as embedded in the final certificate.
pub fn sct_list_extension(scts: &[Sct]) -> Result<Extension, der::Error> {
    let mut list = Vec::new();
    for sct in scts {
        let tls = sct.to_tls();
        list.extend_from_slice(&(tls.len() as u16).to_be_bytes());
        list.extend_from_slice(&tls);
    }
    let mut value = (list.len() as u16).to_be_bytes().to_vec();
    value.extend_from_slice(&list);
    // extnValue holds the DER of an OCTET STRING that holds the TLS-encoded list.
    Ok(Extension { extn_id: OID_CT_SCT_LIST, critical: false, extn_value: OctetString::new(OctetString::new(value)?.to_der()?)? })
}

/// The CT log: a log-engine tree of precert leaves and its SCT key.
#[derive(Clone)]
pub struct CtLog {
    log: Log,
    key: Arc<Signer>,
    /// The signed tree head of the newest checkpoint, made once per tree head: `get-sth`
    /// is unauthenticated, and must not cost a signature per request.
    sth: Arc<parking_lot::Mutex<Option<SignedTreeHead>>>,
}

#[derive(Clone)]
struct SignedTreeHead {
    size: u64,
    root: [u8; 32],
    json: serde_json::Value,
}

impl CtLog {
    pub fn new(log: Log, key: Arc<Signer>) -> CtLog {
        CtLog { log, key, sth: Default::default() }
    }

    pub fn log(&self) -> &Log {
        &self.log
    }

    pub fn key(&self) -> &Signer {
        &self.key
    }

    /// Logs the precert entry for `tbs` (the precertificate's TBS without its poison) and
    /// returns its SCT once the entry is durable. `precertificate` (the signed precertificate
    /// DER) is stored beside the entry, for `get-entries` to serve without signing again.
    pub async fn submit(&self, issuer_key_hash: &[u8; 32], tbs: &[u8], precertificate: Vec<u8>) -> Result<Sct, CtError> {
        let timestamp_ms = now_ms();
        let leaf = precert_leaf(timestamp_ms, issuer_key_hash, tbs)?;
        Ok(self.log_leaf(timestamp_ms, leaf, precertificate).await?.sct)
    }

    /// Logs a submitted entry (`add-chain`, `add-pre-chain`): `extra` is what `get-entries`
    /// serves beside it (the precertificate, or the chain of an X.509 entry).
    pub async fn submit_entry(&self, entry: LeafEntry<'_>, issuer_key_hash: &[u8; 32], extra: Vec<u8>) -> Result<Logged, CtError> {
        let timestamp_ms = now_ms();
        let leaf = match entry {
            LeafEntry::X509(certificate) => x509_leaf(timestamp_ms, certificate)?,
            LeafEntry::Precert { tbs } => precert_leaf(timestamp_ms, issuer_key_hash, tbs)?,
        };
        self.log_leaf(timestamp_ms, leaf, extra).await
    }

    async fn log_leaf(&self, timestamp_ms: u64, leaf: Vec<u8>, extra: Vec<u8>) -> Result<Logged, CtError> {
        // One signature: a short job, run in place with its panic caught (signet_core::cpu).
        let signature = signet_core::cpu::inline(|| self.key.sign(&leaf))?.map_err(sct_failed)?;
        let leaf = signet_log::Leaf::new(leaf);
        let leaf_hash = *leaf.hash();
        let index = match self.log.append_with_extra(leaf, None, Some(extra)).await? {
            Sequenced::New { index, .. } | Sequenced::Duplicate { index } => index,
        };
        Ok(Logged { sct: Sct { log_id: *self.key.key_id(), timestamp_ms, signature }, index, leaf_hash })
    }
}

/// An entry in the CT log, durable, and its SCT.
#[derive(Debug, Clone)]
pub struct Logged {
    pub sct: Sct,
    pub index: u64,
    /// RFC 6962's leaf hash (`get-proof-by-hash` finds the entry by it).
    pub leaf_hash: [u8; 32],
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// RFC 6962 §3.5: the signed tree head for the log's newest durable checkpoint. It is
/// signed the first time it is asked for, and served from memory until the tree grows: its
/// timestamp is that first request's time, which §3.5 allows (a tree head may be older
/// than the request, within the maximum merge delay).
pub fn signed_tree_head(ct: &CtLog) -> Result<serde_json::Value, CtError> {
    let head = ct.log.head();
    let mut cached = ct.sth.lock();
    if let Some(sth) = cached.as_ref().filter(|s| s.size == head.checkpoint.size && s.root == head.checkpoint.root_hash) {
        return Ok(sth.json.clone());
    }
    let timestamp_ms = now_ms();
    let mut data = Vec::with_capacity(50);
    data.extend_from_slice(&[0, 1]); // v1, tree_hash
    data.extend_from_slice(&timestamp_ms.to_be_bytes());
    data.extend_from_slice(&head.checkpoint.size.to_be_bytes());
    data.extend_from_slice(&head.checkpoint.root_hash);
    let sig = signet_core::cpu::inline(|| ct.key.sign(&data))?.map_err(sct_failed)?;
    let json = serde_json::json!({
        "tree_size": head.checkpoint.size,
        "timestamp": timestamp_ms,
        "sha256_root_hash": signet_core::b64::encode(head.checkpoint.root_hash),
        "tree_head_signature": signet_core::b64::encode(digitally_signed(&sig)),
    });
    *cached = Some(SignedTreeHead { size: head.checkpoint.size, root: head.checkpoint.root_hash, json: json.clone() });
    Ok(json)
}

/// TLS `DigitallySigned` with SHA-256 and ECDSA.
fn digitally_signed(sig: &[u8]) -> Vec<u8> {
    let mut out = vec![4, 3];
    out.extend_from_slice(&(sig.len() as u16).to_be_bytes());
    out.extend_from_slice(sig);
    out
}

/// TLS `opaque<1..2^24-1>`: a 3-byte length, then the bytes.
pub fn opaque24(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sct_signs_the_precert_leaf_and_encodes_per_rfc6962() {
        let key = Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
        let ikh = [7u8; 32];
        let tbs = b"tbs bytes";
        let leaf = precert_leaf(1_700_000_000_123, &ikh, tbs).unwrap();
        assert_eq!(&leaf[..2], &[0, 0]);
        assert_eq!(&leaf[10..12], &[0, 1]);
        assert_eq!(&leaf[44..47], &[0, 0, 9]);
        let sct = Sct { log_id: *key.key_id(), timestamp_ms: 1_700_000_000_123, signature: key.sign(&leaf).unwrap() };
        assert!(sct.verify(key.spki_der(), &ikh, tbs));
        assert!(!sct.verify(key.spki_der(), &ikh, b"other tbs"));
        assert!(!sct.verify(key.spki_der(), &[8u8; 32], tbs));

        let tls = sct.to_tls();
        assert_eq!(tls[0], 0);
        assert_eq!(&tls[1..33], key.key_id());
        assert_eq!(&tls[41..43], &[0, 0]);
        assert_eq!(&tls[43..45], &[4, 3]);
        let ext = sct_list_extension(&[sct.clone()]).unwrap();
        let inner = ext.extn_value.as_bytes();
        // OCTET STRING header, then the list length, then one length-prefixed SCT.
        assert_eq!(inner[0], 0x04);
        let list = &inner[2..];
        assert_eq!(u16::from_be_bytes([list[0], list[1]]) as usize, tls.len() + 2);
        assert_eq!(&list[4..], &tls[..]);
    }
}
