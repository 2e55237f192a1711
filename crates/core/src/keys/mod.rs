//! The signing keys of signet's logs and TSA: ECDSA P-256 with SHA-256.
//!
//! P-256 is not a free choice: sigstore-go verifies Rekor SETs and checkpoints only with
//! ECDSA P-256/SHA-256, and a key ID is SHA-256 of the SubjectPublicKeyInfo DER.
//!
//! - [`source`]: where a key is kept, as configured: a file or a PKCS#11 URI.
//! - [`pkcs11`]: keys on a token, signed with through a pool of sessions.
//!
//! A key in a file is PKCS#8 PEM with mode 0600; one on a token never leaves it.

use std::path::Path;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair};

use crate::{files, hash, pem};

pub mod pkcs11;
pub mod source;

pub use source::{KeySource, Pkcs11Settings, Pkcs11Uri};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("reading key {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("writing key {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("key {path} is not usable: {why}")]
    Invalid { path: String, why: String },
    #[error("signing failed")]
    Sign,
    /// The key on a token cannot be used as configured (at start, or when made).
    #[error("key {key}: {why}")]
    Hsm { key: String, why: String },
    /// The token did not sign now (unplugged, busy, restarting); a later try may succeed.
    #[error("key {key} cannot sign now: {why}")]
    Unavailable { key: String, why: String },
}

impl KeyError {
    /// Whether the key may sign again later without anyone changing anything: the request is
    /// answered 503 with Retry-After, not 500.
    pub fn is_transient(&self) -> bool {
        matches!(self, KeyError::Unavailable { .. })
    }
}

/// An ECDSA P-256 key that signs checkpoints, SETs, SCTs and timestamps.
pub struct SigningKey {
    backend: Backend,
    spki_der: Vec<u8>,
    key_id: hash::Hash,
}

enum Backend {
    /// In this process's memory, from a file or generated.
    Memory { pair: EcdsaKeyPair, rng: SystemRandom },
    /// On a PKCS#11 token.
    Pkcs11(pkcs11::Key),
}

impl std::fmt::Debug for SigningKey {
    // Never print key material, only the public identity.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", hex::encode(self.key_id))
    }
}

impl SigningKey {
    pub fn generate() -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| KeyError::Sign)?;
        Self::from_pkcs8(doc.as_ref(), "<generated>")
    }

    pub fn from_pkcs8(der: &[u8], origin: &str) -> Result<Self, KeyError> {
        let pair = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, der)
            .map_err(|e| KeyError::Invalid {
                path: origin.to_string(),
                why: format!("expected a PKCS#8 ECDSA P-256 private key ({e})"),
            })?;
        let spki_der = pair
            .public_key()
            .as_der()
            .map_err(|_| KeyError::Sign)?
            .as_ref()
            .to_vec();
        let key_id = hash::sha256(&spki_der);
        Ok(SigningKey { backend: Backend::Memory { pair, rng: SystemRandom::new() }, spki_der, key_id })
    }

    /// The key `source` names: a file is read (or, when `generate` is set, made 0600 where it
    /// is missing); a token's key is looked up, never made (that is `signet init --keys`).
    pub fn open(source: &KeySource, settings: &Pkcs11Settings, generate: bool) -> Result<Self, KeyError> {
        match source {
            KeySource::File(path) if generate => Self::load_or_generate(path),
            KeySource::File(path) => {
                let bytes = std::fs::read(path).map_err(|source| KeyError::Read { path: path.display().to_string(), source })?;
                Self::from_pkcs8(&pkcs8_of(path, &bytes)?, &path.display().to_string())
            }
            KeySource::Pkcs11(uri) => {
                let (key, spki_der) = pkcs11::Key::open(uri, settings)?;
                let key = SigningKey { key_id: hash::sha256(&spki_der), spki_der, backend: Backend::Pkcs11(key) };
                // A key whose public half is not its private half's would sign what nobody verifies.
                let probe = key.sign(b"signet: does this token's key pair match?")?;
                if !verify_p256(&key.spki_der, b"signet: does this token's key pair match?", &probe) {
                    return Err(KeyError::Hsm { key: uri.to_string(), why: "its private key's signatures do not verify with its public key".into() });
                }
                Ok(key)
            }
        }
    }

    /// Whether the private key is on a token (it cannot be copied).
    pub fn on_token(&self) -> bool {
        matches!(self.backend, Backend::Pkcs11(_))
    }

    /// Loads the key at `path`, or generates one there (0600) if the file does not exist.
    pub fn load_or_generate(path: &Path) -> Result<Self, KeyError> {
        let der = load_or_generate_pkcs8(path)?;
        Self::from_pkcs8(&der, &path.display().to_string())
    }

    /// ASN.1 DER ECDSA signature over SHA-256(`message`).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        count_signature();
        match &self.backend {
            Backend::Memory { pair, rng } => pair.sign(rng, message).map(|s| s.as_ref().to_vec()).map_err(|_| KeyError::Sign),
            Backend::Pkcs11(key) => key.sign(message),
        }
    }

    /// SubjectPublicKeyInfo DER of the public key.
    pub fn spki_der(&self) -> &[u8] {
        &self.spki_der
    }

    /// SHA-256 of the SPKI DER: Rekor's `logID` and the trusted root's `logId.keyId`.
    pub fn key_id(&self) -> &hash::Hash {
        &self.key_id
    }

    pub fn public_pem(&self) -> String {
        pem::encode("PUBLIC KEY", &self.spki_der)
    }
}

/// Signatures made by this process with any of signet's keys (logs, CA, TSA), for
/// `/metrics`: what an unauthenticated request can make signet sign is a cost to bound, and
/// this counter is how a test or an operator sees it. One relaxed add per signature.
static SIGNATURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts one signature; every signing path calls it.
pub fn count_signature() {
    SIGNATURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

pub fn signatures_made() -> u64 {
    SIGNATURES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Reads the PKCS#8 ECDSA P-256 private key at `path`, or generates one there with mode 0600
/// if the file does not exist. Returns the PKCS#8 DER.
pub fn load_or_generate_pkcs8(path: &Path) -> Result<Vec<u8>, KeyError> {
    load_or_generate_pkcs8_for(path, &signature::ECDSA_P256_SHA256_ASN1_SIGNING)
}

/// Like [`load_or_generate_pkcs8`], for any ECDSA curve (the CA's keys are P-384).
pub fn load_or_generate_pkcs8_for(path: &Path, alg: &'static signature::EcdsaSigningAlgorithm) -> Result<Vec<u8>, KeyError> {
    let shown = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => pkcs8_of(path, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let rng = SystemRandom::new();
            let doc = EcdsaKeyPair::generate_pkcs8(alg, &rng).map_err(|_| KeyError::Sign)?;
            let text = pem::encode("PRIVATE KEY", doc.as_ref());
            files::write_atomic(path, text.as_bytes(), 0o600).map_err(|source| KeyError::Write { path: shown, source })?;
            Ok(doc.as_ref().to_vec())
        }
        Err(source) => Err(KeyError::Read { path: shown, source }),
    }
}

/// The PKCS#8 DER in the PEM `bytes` read from `path`.
fn pkcs8_of(path: &Path, bytes: &[u8]) -> Result<Vec<u8>, KeyError> {
    let shown = || path.display().to_string();
    let block = pem::decode_first(bytes).map_err(|e| KeyError::Invalid { path: shown(), why: e.to_string() })?;
    if block.label != "PRIVATE KEY" {
        return Err(KeyError::Invalid { path: shown(), why: format!("expected a PRIVATE KEY (PKCS#8) block, found {}", block.label) });
    }
    Ok(block.der)
}

/// Verifies an ASN.1 ECDSA P-256/SHA-256 signature against an SPKI DER public key.
pub fn verify_p256(spki_der: &[u8], message: &[u8], sig: &[u8]) -> bool {
    signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, spki_der)
        .verify(message, sig)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_key_persists_with_0600_and_signs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.key");
        let k1 = SigningKey::load_or_generate(&path).unwrap();
        let k2 = SigningKey::load_or_generate(&path).unwrap();
        assert_eq!(k1.key_id(), k2.key_id(), "second start loads the same key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let sig = k1.sign(b"note").unwrap();
        assert!(verify_p256(k2.spki_der(), b"note", &sig));
        assert!(!verify_p256(k2.spki_der(), b"other", &sig));
        assert!(!format!("{k1:?}").contains("PRIVATE"));
    }

    #[test]
    fn rejects_wrong_pem_label() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.key");
        std::fs::write(&path, pem::encode("PUBLIC KEY", b"xx")).unwrap();
        let err = SigningKey::load_or_generate(&path).unwrap_err().to_string();
        assert!(err.contains("expected a PRIVATE KEY"), "{err}");
    }
}
