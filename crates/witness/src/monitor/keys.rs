//! Which keys a log's checkpoints must be signed by: the log's entries in a trusted root
//! (`signet trust export`, or Sigstore's), and keys given per log on the command line; and
//! the checks of a checkpoint (a signed note) and of a CT log's signed tree head.
//! A log the monitor holds no key for is refused up front: following a log whose
//! signatures cannot be checked would prove nothing.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use signet_core::hash::{sha256, Hash};
use signet_core::note::{Checkpoint, NoteError, SignedNote};
use signet_core::pem::PemError;
use signet_core::pubkey::{HashAlg, KeyError, PublicKey};
use signet_verify::trust_root::{LogKey, TrustedRoot};

/// Why a log's key file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", path.display())]
    Pem { path: PathBuf, source: PemError },
    #[error("{}: PEM {label:?}; expected PUBLIC KEY", path.display())]
    Label { path: PathBuf, label: String },
    #[error("{}: {source}", path.display())]
    Key { path: PathBuf, source: KeyError },
}

/// Why a checkpoint (or a CT log's signed tree head) is not trusted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Untrusted {
    #[error(transparent)]
    Note(#[from] NoteError),
    #[error("the signature line of {name:?} by a trusted key does not verify")]
    BadSignature { name: String },
    #[error("no signature line under {name:?} by any of the {keys} trusted key(s) for this log")]
    NoSignature { name: String, keys: usize },
    #[error("not a signed tree head: {0}")]
    NotTreeHead(#[source] serde_json::Error),
    #[error("sha256_root_hash is not 32 bytes of base64")]
    RootHash,
    #[error("tree_head_signature is not base64")]
    SignatureNotBase64,
    #[error("tree_head_signature is shorter than its header")]
    SignatureTooShort,
    /// The DigitallySigned header: its hash algorithm and length, and the signature's length.
    #[error("tree_head_signature: hash algorithm {hash} and length {length}; expected SHA-256 (4) and {actual}")]
    SignatureHeader { hash: u8, length: u16, actual: usize },
    #[error("the tree head's signature does not verify with any of the {keys} trusted key(s) for this log")]
    TreeHeadSignature { keys: usize },
}

/// The trusted root's keys for the log at `url`: those of every tlog (for a CT log, every
/// ctlog) whose `baseUrl` is `url` or a prefix of it at a path boundary (signet's v2 tiles
/// sit under `<baseUrl>/api/v2`). A log has several when its keys were rotated (shards).
pub fn from_trusted_root(root: &TrustedRoot, url: &str, ct: bool) -> Vec<PublicKey> {
    let url = url.trim_end_matches('/');
    let logs: &[LogKey] = if ct { &root.ctlogs } else { &root.tlogs };
    logs.iter()
        .filter(|l| {
            let base = l.base_url.trim_end_matches('/');
            !base.is_empty() && url.strip_prefix(base).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
        .filter_map(|l| l.key.as_ref().ok().cloned())
        .collect()
}

/// A PEM public key (SubjectPublicKeyInfo) from a file.
pub fn from_pem_file(path: &Path) -> Result<PublicKey, KeyFileError> {
    let text = std::fs::read(path).map_err(|source| KeyFileError::Read { path: path.to_path_buf(), source })?;
    let block = signet_core::pem::decode_first(&text).map_err(|source| KeyFileError::Pem { path: path.to_path_buf(), source })?;
    if block.label != "PUBLIC KEY" {
        return Err(KeyFileError::Label { path: path.to_path_buf(), label: block.label });
    }
    PublicKey::from_spki(&block.der).map_err(|source| KeyFileError::Key { path: path.to_path_buf(), source })
}

/// The name a log signs its checkpoints under: the origin, without Rekor v1's
/// " - <tree ID>" suffix.
fn signer_name(origin: &str) -> &str {
    match origin.split_once(" - ") {
        Some((name, tree)) if !tree.is_empty() && tree.bytes().all(|c| c.is_ascii_digit()) => name,
        _ => origin,
    }
}

/// Verifies `note` with any of `keys`; the checkpoint it holds and the key that signed it,
/// or why it is not trusted.
pub fn verify<'k>(note: &str, keys: &'k [PublicKey]) -> Result<(Checkpoint, &'k PublicKey), Untrusted> {
    let parsed = SignedNote::parse(note)?;
    let name = signer_name(&parsed.checkpoint.origin);
    let mut bad = false;
    for key in keys {
        match parsed.verify(name, key) {
            Ok(cp) => return Ok((cp.clone(), key)),
            Err(NoteError::BadSignature) => bad = true,
            Err(_) => {}
        }
    }
    Err(match bad {
        true => Untrusted::BadSignature { name: name.to_string() },
        false => Untrusted::NoSignature { name: name.to_string(), keys: keys.len() },
    })
}

/// RFC 6962 §4.3's `get-sth` answer.
#[derive(Deserialize)]
struct SignedTreeHead {
    tree_size: u64,
    timestamp: u64,
    sha256_root_hash: String,
    tree_head_signature: String,
}

/// Verifies a CT log's signed tree head (§3.5, the JSON `get-sth` serves) with any of
/// `keys`: the tree it signs, as a checkpoint whose origin is the log's ID (base64 of its
/// key's SHA-256, as CT names logs), and the key that signed it.
pub fn verify_sth<'k>(json: &str, keys: &'k [PublicKey]) -> Result<(Checkpoint, &'k PublicKey), Untrusted> {
    let sth: SignedTreeHead = serde_json::from_str(json).map_err(Untrusted::NotTreeHead)?;
    let root: Hash = signet_core::b64::decode(&sth.sha256_root_hash).ok().and_then(|r| r.try_into().ok()).ok_or(Untrusted::RootHash)?;
    // DigitallySigned: hash and signature algorithm, a 2-byte length, the signature.
    let signed = signet_core::b64::decode(&sth.tree_head_signature).map_err(|_| Untrusted::SignatureNotBase64)?;
    let (header, signature) = signed.split_at_checked(4).ok_or(Untrusted::SignatureTooShort)?;
    let length = u16::from_be_bytes([header[2], header[3]]);
    if header[0] != 4 || usize::from(length) != signature.len() {
        return Err(Untrusted::SignatureHeader { hash: header[0], length, actual: signature.len() });
    }
    let mut data = Vec::with_capacity(50);
    data.extend_from_slice(&[0, 1]); // v1, tree_hash
    data.extend_from_slice(&sth.timestamp.to_be_bytes());
    data.extend_from_slice(&sth.tree_size.to_be_bytes());
    data.extend_from_slice(&root);
    let key = keys
        .iter()
        .find(|k| k.verify_with_hash(HashAlg::Sha256, &data, signature).is_ok())
        .ok_or(Untrusted::TreeHeadSignature { keys: keys.len() })?;
    let origin = signet_core::b64::encode(sha256(&key.spki_der));
    Ok((Checkpoint { origin, size: sth.tree_size, root_hash: root }, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use signet_keys::{Algorithm, Signer};

    fn sth(key: &Signer, size: u64, root: [u8; 32]) -> serde_json::Value {
        let mut data = vec![0u8, 1];
        data.extend_from_slice(&1_700_000_000_000u64.to_be_bytes());
        data.extend_from_slice(&size.to_be_bytes());
        data.extend_from_slice(&root);
        let sig = key.sign(&data).unwrap();
        let mut signed = vec![4, 3];
        signed.extend_from_slice(&(sig.len() as u16).to_be_bytes());
        signed.extend_from_slice(&sig);
        serde_json::json!({"tree_size": size, "timestamp": 1_700_000_000_000u64,
            "sha256_root_hash": signet_core::b64::encode(root), "tree_head_signature": signet_core::b64::encode(signed)})
    }

    #[test]
    fn a_signed_tree_head_verifies_with_its_key_only_and_as_signed() {
        let (key, other) = (Signer::generate(Algorithm::EcdsaP256Sha256).unwrap(), Signer::generate(Algorithm::EcdsaP256Sha256).unwrap());
        let keys = [PublicKey::from_spki(other.spki_der()).unwrap(), PublicKey::from_spki(key.spki_der()).unwrap()];
        let good = sth(&key, 7, [9; 32]);
        let (cp, by) = verify_sth(&good.to_string(), &keys).unwrap();
        assert_eq!((cp.size, cp.root_hash, by.spki_der.as_slice()), (7, [9; 32], key.spki_der()));
        assert_eq!(cp.origin, signet_core::b64::encode(sha256(key.spki_der())), "the CT log ID");
        assert!(verify_sth(&good.to_string(), &keys[..1]).unwrap_err().to_string().contains("does not verify"));
        for (field, value) in [("tree_size", serde_json::json!(8)), ("timestamp", serde_json::json!(1)), ("sha256_root_hash", serde_json::json!(signet_core::b64::encode([8u8; 32])))] {
            let mut forged = good.clone();
            forged[field] = value;
            assert!(verify_sth(&forged.to_string(), &keys).is_err(), "a changed {field} does not verify");
        }
        for bad in ["{}", "[]", "not json", r#"{"tree_size":1,"timestamp":1,"sha256_root_hash":"AA==","tree_head_signature":""}"#] {
            assert!(verify_sth(bad, &keys).is_err(), "{bad}");
        }
        let mut short = good.clone();
        short["tree_head_signature"] = serde_json::json!(signet_core::b64::encode([4u8, 3, 0]));
        assert!(verify_sth(&short.to_string(), &keys).is_err());
    }
}
