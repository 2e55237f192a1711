//! What a crypto backend offers the benchmark: one small trait per kind of operation, and the
//! key material both backends share.
//!
//! Each backend (aws-lc-rs, OpenSSL) implements these traits by calling its library, so the
//! runner prepares and times the two alike. Keys are generated once per run with OpenSSL and
//! handed to both backends as PKCS#8 DER: both sign and verify with the same keys, and a
//! signature made by one verifies under the other (the tests check this).

use ::openssl::ec::{EcGroup, EcKey};
use ::openssl::error::ErrorStack;
use ::openssl::nid::Nid;
use ::openssl::pkey::PKey;
use ::openssl::rsa::Rsa;

/// The signature schemes measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigAlg {
    /// RSA-2048, PKCS#1 v1.5 padding, SHA-256.
    Rsa2048Sha256,
    /// ECDSA over P-256 with SHA-256, DER-encoded signatures.
    EcdsaP256Sha256,
    /// ECDSA over P-384 with SHA-384, DER-encoded signatures (as Fulcio's CA key signs).
    EcdsaP384Sha384,
    /// Ed25519 (pure, RFC 8032).
    Ed25519,
}

impl SigAlg {
    pub const ALL: [SigAlg; 4] = [SigAlg::Rsa2048Sha256, SigAlg::EcdsaP256Sha256, SigAlg::EcdsaP384Sha384, SigAlg::Ed25519];

    /// A short name for case ids.
    pub fn id(self) -> &'static str {
        match self {
            SigAlg::Rsa2048Sha256 => "rsa2048",
            SigAlg::EcdsaP256Sha256 => "ecdsa-p256",
            SigAlg::EcdsaP384Sha384 => "ecdsa-p384",
            SigAlg::Ed25519 => "ed25519",
        }
    }

    /// The name printed in the table.
    pub fn label(self) -> &'static str {
        match self {
            SigAlg::Rsa2048Sha256 => "RSA-2048 PKCS#1 v1.5 SHA-256",
            SigAlg::EcdsaP256Sha256 => "ECDSA P-256 SHA-256",
            SigAlg::EcdsaP384Sha384 => "ECDSA P-384 SHA-384",
            SigAlg::Ed25519 => "Ed25519",
        }
    }
}

/// The AEADs measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AeadAlg {
    Aes128Gcm,
    Aes256Gcm,
}

impl AeadAlg {
    pub const ALL: [AeadAlg; 2] = [AeadAlg::Aes128Gcm, AeadAlg::Aes256Gcm];

    pub fn id(self) -> &'static str {
        match self {
            AeadAlg::Aes128Gcm => "aes-128-gcm",
            AeadAlg::Aes256Gcm => "aes-256-gcm",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            AeadAlg::Aes128Gcm => "AES-128-GCM",
            AeadAlg::Aes256Gcm => "AES-256-GCM",
        }
    }

    pub fn key_len(self) -> usize {
        match self {
            AeadAlg::Aes128Gcm => 16,
            AeadAlg::Aes256Gcm => 32,
        }
    }
}

/// Sign and verify with one key pair. The private key and the parsed public key are set up
/// once, when the backend builds the value; each call is one full operation, message hashing
/// included.
pub trait Signature {
    /// Signs `msg` into `out` (at least 512 bytes) and returns the signature's length.
    fn sign(&self, msg: &[u8], out: &mut [u8]) -> usize;
    /// Whether `sig` is a valid signature of `msg` under the public key.
    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool;
}

/// One-shot SHA-256.
pub trait Digest {
    fn sha256(&self, data: &[u8]) -> [u8; 32];
}

/// HMAC-SHA256 under a key given when the backend builds the value.
pub trait Mac {
    fn hmac_sha256(&self, data: &[u8]) -> [u8; 32];
}

/// One AEAD session: a key whose schedule (AES round keys, GHASH table) is set up once, when
/// the backend builds the session, then used for every record. Nonces follow TLS 1.3: the
/// session's IV XOR a record counter that starts at 0 ([`nonce`]).
pub trait AeadSession {
    /// Seals `record` in place under the next nonce, with `aad`, and returns the tag.
    fn seal(&mut self, aad: &[u8], record: &mut [u8]) -> [u8; 16];
}

/// The nonce of record `seq` in a session with this IV (RFC 8446, section 5.3).
pub fn nonce(iv: &[u8; 12], seq: u64) -> [u8; 12] {
    let mut n = *iv;
    for (b, s) in n[4..].iter_mut().zip(seq.to_be_bytes()) {
        *b ^= s;
    }
    n
}

/// A crypto library, as the benchmark sees it.
pub trait Backend {
    /// `aws-lc` or `openssl`: the key of its results in the JSON.
    fn name(&self) -> &'static str;
    fn signature(&self, alg: SigAlg, keys: &Keys) -> Result<Box<dyn Signature>, BackendError>;
    fn digest(&self) -> Box<dyn Digest>;
    fn mac(&self, key: &[u8]) -> Result<Box<dyn Mac>, BackendError>;
    fn aead_session(&self, alg: AeadAlg, key: &[u8], iv: [u8; 12]) -> Result<Box<dyn AeadSession>, BackendError>;
}

/// What a backend fails with while it sets an operation up (keys, contexts, sessions).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// OpenSSL could not generate one of the run's keys (`what`: RSA, P-256, ...).
    #[error("generating the {what} key: {source}")]
    KeyGen { what: &'static str, source: ErrorStack },
    /// aws-lc-rs refused a key (the PKCS#8 private key, or the public key derived from it).
    #[error("aws-lc: {} key: {source}", .alg.label())]
    AwsLcKey { alg: SigAlg, source: aws_lc_rs::error::KeyRejected },
    /// OpenSSL could not parse a key or re-encode its public half.
    #[error("openssl: {} key: {source}", .alg.label())]
    OpenSslKey { alg: SigAlg, source: ErrorStack },
    #[error("openssl: HMAC key: {0}")]
    OpenSslHmacKey(#[source] ErrorStack),
    /// An AEAD key of the wrong length for `alg`.
    #[error("{backend}: {} key of {len} bytes", .alg.label())]
    AeadKeyLength { backend: &'static str, alg: AeadAlg, len: usize },
    /// OpenSSL could not set up a cipher context.
    #[error("openssl: {} session: {source}", .alg.label())]
    OpenSslSession { alg: AeadAlg, source: ErrorStack },
}

/// The private keys of one run, as PKCS#8 DER (v1, unencrypted).
pub struct Keys {
    rsa2048: Vec<u8>,
    p256: Vec<u8>,
    p384: Vec<u8>,
    ed25519: Vec<u8>,
}

impl Keys {
    /// Fresh keys from OpenSSL's generators.
    pub fn generate() -> Result<Keys, BackendError> {
        let err = |what: &'static str| move |source: ErrorStack| BackendError::KeyGen { what, source };
        let ec = |nid: Nid, what: &'static str| -> Result<Vec<u8>, BackendError> {
            let group = EcGroup::from_curve_name(nid).map_err(err(what))?;
            let key = PKey::from_ec_key(EcKey::generate(&group).map_err(err(what))?).map_err(err(what))?;
            key.private_key_to_pkcs8().map_err(err(what))
        };
        let rsa = PKey::from_rsa(Rsa::generate(2048).map_err(err("RSA"))?).map_err(err("RSA"))?;
        Ok(Keys {
            rsa2048: rsa.private_key_to_pkcs8().map_err(err("RSA"))?,
            p256: ec(Nid::X9_62_PRIME256V1, "P-256")?,
            p384: ec(Nid::SECP384R1, "P-384")?,
            ed25519: PKey::generate_ed25519().and_then(|k| k.private_key_to_pkcs8()).map_err(err("Ed25519"))?,
        })
    }

    /// The PKCS#8 DER private key for `alg`.
    pub fn pkcs8(&self, alg: SigAlg) -> &[u8] {
        match alg {
            SigAlg::Rsa2048Sha256 => &self.rsa2048,
            SigAlg::EcdsaP256Sha256 => &self.p256,
            SigAlg::EcdsaP384Sha384 => &self.p384,
            SigAlg::Ed25519 => &self.ed25519,
        }
    }
}
