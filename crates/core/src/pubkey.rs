//! Public keys (ECDSA P-256/P-384, RSA, Ed25519) and signature checks over a digest or a message.
//!
//! hashedrekord entries carry only the artifact's digest, so [`PublicKey::verify_digest`]
//! verifies over a digest. That rules out pure Ed25519 (it signs the whole message);
//! Ed25519ph signs SHA-512(message) and is accepted.

use aws_lc_rs::digest::{self, Digest};
use aws_lc_rs::signature::{self, VerificationAlgorithm};
use der::asn1::{ObjectIdentifier, UintRef};
use der::{Decode, Reader};
use spki::SubjectPublicKeyInfoRef;

use crate::verifications::{self, Algorithm};

const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    EcdsaP256,
    EcdsaP384,
    Rsa { bits: usize },
    Ed25519,
}

/// A digest algorithm. Read from JSON by its Rekor and timestamp-authority name (`"sha256"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HashAlg {
    Sha256,
    Sha384,
    Sha512,
}

impl HashAlg {
    /// `sha256`, `sha384`, `sha512`: the name Rekor and timestamp-authority use.
    pub fn name(self) -> &'static str {
        match self {
            HashAlg::Sha256 => "sha256",
            HashAlg::Sha384 => "sha384",
            HashAlg::Sha512 => "sha512",
        }
    }

    pub fn len(self) -> usize {
        match self {
            HashAlg::Sha256 => 32,
            HashAlg::Sha384 => 48,
            HashAlg::Sha512 => 64,
        }
    }

    /// The digest of `data` under this algorithm.
    pub fn digest(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.aws(), data).as_ref().to_vec()
    }

    fn aws(self) -> &'static digest::Algorithm {
        match self {
            HashAlg::Sha256 => &digest::SHA256,
            HashAlg::Sha384 => &digest::SHA384,
            HashAlg::Sha512 => &digest::SHA512,
        }
    }
}

/// A signer's public key, parsed and classified.
#[derive(Debug, Clone)]
pub struct PublicKey {
    pub kind: KeyKind,
    pub spki_der: Vec<u8>,
    /// The subjectPublicKey bits (the point, the RSAPublicKey, or the raw Ed25519 key).
    raw: Vec<u8>,
    /// AWS-LC's parsed key, for the key's natural algorithm ([`natural_algorithm`]): parsed once
    /// here, where it is checked, rather than again at every verification.
    parsed: Parsed,
}

/// AWS-LC's parsed key. Verifying never changes it, so a panic cannot leave it half-changed:
/// a `PublicKey` stays unwind-safe, as callers that verify under `catch_unwind` need.
#[derive(Debug, Clone)]
struct Parsed(signature::ParsedPublicKey);

impl std::panic::UnwindSafe for Parsed {}
impl std::panic::RefUnwindSafe for Parsed {}

/// The algorithm a key is parsed for: the one it verifies with most (Fulcio's proof of
/// possession, Rekor's hashedrekord over SHA-256, a P-384 key's SHA-384).
fn natural_algorithm(kind: KeyKind) -> &'static dyn VerificationAlgorithm {
    match kind {
        KeyKind::EcdsaP256 => &signature::ECDSA_P256_SHA256_ASN1,
        KeyKind::EcdsaP384 => &signature::ECDSA_P384_SHA384_ASN1,
        KeyKind::Rsa { .. } => &signature::RSA_PKCS1_2048_8192_SHA256,
        KeyKind::Ed25519 => &signature::ED25519,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("public key is not a valid SubjectPublicKeyInfo: {0}")]
    Malformed(String),
    #[error("certificate does not parse as X.509: {0}")]
    BadCertificate(String),
    #[error("unsupported key type {0}: expected ECDSA P-256/P-384, RSA 2048-4096 or Ed25519")]
    Unsupported(String),
    #[error("RSA key of {0} bits is outside the accepted 2048-4096")]
    RsaSize(usize),
    #[error("{0}")]
    Mismatch(String),
    #[error("signature does not verify against the public key and digest")]
    BadSignature,
}

impl PublicKey {
    pub fn from_spki(der_bytes: &[u8]) -> Result<Self, KeyError> {
        let spki = SubjectPublicKeyInfoRef::from_der(der_bytes).map_err(|e| KeyError::Malformed(e.to_string()))?;
        let raw = spki
            .subject_public_key
            .as_bytes()
            .ok_or_else(|| KeyError::Malformed("subjectPublicKey has unused bits".into()))?
            .to_vec();
        let oid = spki.algorithm.oid;
        let kind = if oid == EC_PUBLIC_KEY {
            let curve: ObjectIdentifier = spki
                .algorithm
                .parameters
                .ok_or_else(|| KeyError::Malformed("EC key without a named curve".into()))?
                .decode_as()
                .map_err(|_| KeyError::Unsupported("EC key with explicit curve parameters".into()))?;
            match curve {
                c if c == P256 => KeyKind::EcdsaP256,
                c if c == P384 => KeyKind::EcdsaP384,
                c => return Err(KeyError::Unsupported(format!("EC curve {c}"))),
            }
        } else if oid == RSA {
            let bits = rsa_modulus_bits(&raw)?;
            if !(2048..=4096).contains(&bits) {
                return Err(KeyError::RsaSize(bits));
            }
            KeyKind::Rsa { bits }
        } else if oid == ED25519 {
            if raw.len() != 32 {
                return Err(KeyError::Malformed("Ed25519 key must be 32 bytes".into()));
            }
            KeyKind::Ed25519
        } else {
            return Err(KeyError::Unsupported(format!("algorithm {oid}")));
        };
        // Points off the curve and the like are refused here, so a bad key is a 400 at parse time.
        let parsed = signature::ParsedPublicKey::new(natural_algorithm(kind), der_bytes)
            .map_err(|e| KeyError::Malformed(format!("key rejected: {e}")))?;
        Ok(PublicKey { kind, spki_der: der_bytes.to_vec(), raw, parsed: Parsed(parsed) })
    }

    /// The subject public key of an X.509 certificate in DER.
    pub fn from_certificate(cert_der: &[u8]) -> Result<Self, KeyError> {
        use der::Encode;
        let cert = x509_cert::Certificate::from_der(cert_der).map_err(|e| KeyError::BadCertificate(e.to_string()))?;
        let spki = cert
            .tbs_certificate
            .subject_public_key_info
            .to_der()
            .map_err(|e| KeyError::BadCertificate(e.to_string()))?;
        Self::from_spki(&spki)
    }

    /// The subjectPublicKey bits: the EC point, the DER RSAPublicKey, or the 32-byte Ed25519 key.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// Verifies `sig` over `digest` (the output of `hash`).
    pub fn verify_digest(&self, hash: HashAlg, digest_bytes: &[u8], sig: &[u8]) -> Result<(), KeyError> {
        if digest_bytes.len() != hash.len() {
            return Err(KeyError::Mismatch(format!(
                "digest is {} bytes but {:?} digests are {}",
                digest_bytes.len(),
                hash,
                hash.len()
            )));
        }
        let d = Digest::import_less_safe(digest_bytes, hash.aws()).map_err(|_| KeyError::BadSignature)?;
        self.counted();
        let ok = match (self.kind, hash) {
            (KeyKind::EcdsaP256, HashAlg::Sha256) | (KeyKind::EcdsaP384, HashAlg::Sha384) => self.parsed.0.verify_digest_sig(&d, sig).is_ok(),
            (KeyKind::EcdsaP256 | KeyKind::EcdsaP384, _) => {
                let alg: &'static dyn VerificationAlgorithm = match (self.kind, hash) {
                    (KeyKind::EcdsaP256, HashAlg::Sha256) => &signature::ECDSA_P256_SHA256_ASN1,
                    (KeyKind::EcdsaP256, HashAlg::Sha384) => &signature::ECDSA_P256_SHA384_ASN1,
                    (KeyKind::EcdsaP256, HashAlg::Sha512) => &signature::ECDSA_P256_SHA512_ASN1,
                    (_, HashAlg::Sha256) => &signature::ECDSA_P384_SHA256_ASN1,
                    (_, HashAlg::Sha384) => &signature::ECDSA_P384_SHA384_ASN1,
                    (_, HashAlg::Sha512) => &signature::ECDSA_P384_SHA512_ASN1,
                };
                signature::UnparsedPublicKey::new(alg, &self.spki_der).verify_digest(&d, sig).is_ok()
            }
            (KeyKind::Rsa { .. }, HashAlg::Sha256) => {
                self.parsed.0.verify_digest_sig(&d, sig).is_ok()
                    || signature::UnparsedPublicKey::new(&signature::RSA_PSS_2048_8192_SHA256, &self.spki_der).verify_digest(&d, sig).is_ok()
            }
            (KeyKind::Rsa { .. }, _) => {
                let (pkcs1, pss): (&'static dyn VerificationAlgorithm, &'static dyn VerificationAlgorithm) = match hash {
                    HashAlg::Sha256 => (&signature::RSA_PKCS1_2048_8192_SHA256, &signature::RSA_PSS_2048_8192_SHA256),
                    HashAlg::Sha384 => (&signature::RSA_PKCS1_2048_8192_SHA384, &signature::RSA_PSS_2048_8192_SHA384),
                    HashAlg::Sha512 => (&signature::RSA_PKCS1_2048_8192_SHA512, &signature::RSA_PSS_2048_8192_SHA512),
                };
                signature::UnparsedPublicKey::new(pkcs1, &self.spki_der).verify_digest(&d, sig).is_ok()
                    || signature::UnparsedPublicKey::new(pss, &self.spki_der).verify_digest(&d, sig).is_ok()
            }
            (KeyKind::Ed25519, _) => {
                if hash != HashAlg::Sha512 {
                    return Err(KeyError::Mismatch(
                        "Ed25519 keys verify digests only as Ed25519ph, which needs a SHA-512 digest".into(),
                    ));
                }
                ed25519ph_verify_digest(&self.raw, digest_bytes, sig)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(KeyError::BadSignature)
        }
    }
}

impl PublicKey {
    /// Verifies `sig` over `message` with the key's natural hash: SHA-256 for P-256 and RSA,
    /// SHA-384 for P-384, and pure Ed25519. This is how Fulcio checks a proof of possession.
    pub fn verify_message(&self, message: &[u8], sig: &[u8]) -> Result<(), KeyError> {
        self.counted();
        let ok = match self.kind {
            KeyKind::EcdsaP256 | KeyKind::EcdsaP384 | KeyKind::Ed25519 => self.parsed.0.verify_sig(message, sig).is_ok(),
            KeyKind::Rsa { .. } => {
                self.parsed.0.verify_sig(message, sig).is_ok() || verify_with(&signature::RSA_PSS_2048_8192_SHA256, &self.spki_der, message, sig)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(KeyError::BadSignature)
        }
    }
}

impl PublicKey {
    fn counted(&self) {
        verifications::count(match self.kind {
            KeyKind::EcdsaP256 => Algorithm::P256,
            KeyKind::EcdsaP384 => Algorithm::P384,
            KeyKind::Rsa { .. } => Algorithm::Rsa,
            KeyKind::Ed25519 => Algorithm::Ed25519,
        });
    }

    /// Verifies `sig` over `message` hashed with an explicit `hash`, as X.509 and CMS
    /// signatures name it in their algorithm identifier. Ed25519 signs the message itself.
    pub fn verify_with_hash(&self, hash: HashAlg, message: &[u8], sig: &[u8]) -> Result<(), KeyError> {
        match self.kind {
            KeyKind::Ed25519 => self.verify_message(message, sig),
            _ => self.verify_digest(hash, &hash.digest(message), sig),
        }
    }
}

fn verify_with(alg: &'static dyn VerificationAlgorithm, key: &[u8], message: &[u8], sig: &[u8]) -> bool {
    signature::UnparsedPublicKey::new(alg, key).verify(message, sig).is_ok()
}

/// RFC 8032 Ed25519ph over a SHA-512 digest, with an empty context, through AWS-LC.
fn ed25519ph_verify_digest(public_key: &[u8], digest: &[u8], sig: &[u8]) -> bool {
    if public_key.len() != 32 || digest.len() != 64 || sig.len() != 64 {
        return false;
    }
    // SAFETY: all three buffers have the fixed lengths AWS-LC reads (64, 64, 32 bytes); the
    // context pointer is unused when its length is zero.
    unsafe {
        aws_lc_sys::ED25519ph_verify_digest(digest.as_ptr(), sig.as_ptr(), public_key.as_ptr(), std::ptr::null(), 0) == 1
    }
}

fn rsa_modulus_bits(rsa_public_key: &[u8]) -> Result<usize, KeyError> {
    let mut reader = der::SliceReader::new(rsa_public_key).map_err(|e| KeyError::Malformed(e.to_string()))?;
    let modulus = reader
        .sequence(|r| {
            let n = UintRef::decode(r)?;
            let _e = UintRef::decode(r)?;
            Ok(n)
        })
        .map_err(|e| KeyError::Malformed(format!("RSAPublicKey: {e}")))?;
    let bytes = modulus.as_bytes();
    let lead = bytes.first().copied().unwrap_or(0);
    Ok(bytes.len() * 8 - lead.leading_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, RsaKeyPair};

    fn sha(alg: HashAlg, data: &[u8]) -> Vec<u8> {
        digest::digest(alg.aws(), data).as_ref().to_vec()
    }

    #[test]
    fn ecdsa_p256_and_p384_over_digests() {
        let rng = SystemRandom::new();
        for (sign_alg, hash) in [
            (&signature::ECDSA_P256_SHA256_ASN1_SIGNING, HashAlg::Sha256),
            (&signature::ECDSA_P384_SHA384_ASN1_SIGNING, HashAlg::Sha384),
        ] {
            let pair = EcdsaKeyPair::generate(sign_alg).unwrap();
            let spki = pair.public_key().as_der().unwrap();
            let key = PublicKey::from_spki(spki.as_ref()).unwrap();
            let sig = pair.sign(&rng, b"artifact").unwrap();
            key.verify_digest(hash, &sha(hash, b"artifact"), sig.as_ref()).unwrap();
            assert_eq!(hash.digest(b"artifact"), sha(hash, b"artifact"));
            key.verify_with_hash(hash, b"artifact", sig.as_ref()).unwrap();
            assert_eq!(key.verify_with_hash(hash, b"other", sig.as_ref()), Err(KeyError::BadSignature));
            assert_eq!(key.verify_digest(hash, &sha(hash, b"other"), sig.as_ref()), Err(KeyError::BadSignature));
            assert!(matches!(key.verify_digest(hash, &[0; 20], sig.as_ref()), Err(KeyError::Mismatch(_))));
            key.verify_message(b"artifact", sig.as_ref()).unwrap();
            assert_eq!(key.verify_message(b"other", sig.as_ref()), Err(KeyError::BadSignature));
        }
    }

    #[test]
    fn rsa_pkcs1_and_pss() {
        let rng = SystemRandom::new();
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let spki = pair.public_key().as_der().unwrap();
        let key = PublicKey::from_spki(spki.as_ref()).unwrap();
        assert_eq!(key.kind, KeyKind::Rsa { bits: 2048 });
        let d = sha(HashAlg::Sha256, b"x");
        for enc in [&signature::RSA_PKCS1_SHA256 as &dyn signature::RsaEncoding, &signature::RSA_PSS_SHA256] {
            let mut sig = vec![0; pair.public_modulus_len()];
            pair.sign(enc, &rng, b"x", &mut sig).unwrap();
            key.verify_digest(HashAlg::Sha256, &d, &sig).unwrap();
            key.verify_message(b"x", &sig).unwrap();
            sig[10] ^= 1;
            assert!(key.verify_digest(HashAlg::Sha256, &d, &sig).is_err());
            assert!(key.verify_message(b"x", &sig).is_err());
        }
        for enc in [&signature::RSA_PKCS1_SHA384 as &dyn signature::RsaEncoding, &signature::RSA_PSS_SHA384] {
            let mut sig = vec![0; pair.public_modulus_len()];
            pair.sign(enc, &rng, b"x", &mut sig).unwrap();
            key.verify_digest(HashAlg::Sha384, &sha(HashAlg::Sha384, b"x"), &sig).unwrap();
            assert!(key.verify_digest(HashAlg::Sha256, &d, &sig).is_err());
        }
    }

    #[test]
    fn ed25519ph_and_unsupported() {
        let seed = [7u8; 32];
        let pair = signature::Ed25519KeyPair::from_seed_unchecked(&seed).unwrap();
        let raw = pair.public_key().as_ref().to_vec();
        // SPKI for Ed25519 is a fixed 12-byte prefix and the raw key (RFC 8410).
        let mut spki = hex::decode("302a300506032b6570032100").unwrap();
        spki.extend_from_slice(&raw);
        let key = PublicKey::from_spki(&spki).unwrap();
        assert_eq!(key.kind, KeyKind::Ed25519);
        let d = sha(HashAlg::Sha512, b"msg");
        let mut sig = [0u8; 64];
        let mut private = [0u8; 64];
        private[..32].copy_from_slice(&seed);
        private[32..].copy_from_slice(&raw);
        assert_eq!(
            unsafe { aws_lc_sys::ED25519ph_sign_digest(sig.as_mut_ptr(), d.as_ptr(), private.as_ptr(), std::ptr::null(), 0) },
            1
        );
        key.verify_digest(HashAlg::Sha512, &d, &sig).unwrap();
        assert!(key.verify_digest(HashAlg::Sha512, &sha(HashAlg::Sha512, b"other"), &sig).is_err());
        assert!(matches!(key.verify_digest(HashAlg::Sha256, &[0; 32], &sig), Err(KeyError::Mismatch(_))));

        key.verify_with_hash(HashAlg::Sha256, b"msg", pair.sign(b"msg").as_ref()).unwrap();
        assert!(key.verify_with_hash(HashAlg::Sha256, b"other", pair.sign(b"msg").as_ref()).is_err());

        assert!(matches!(PublicKey::from_spki(b"junk"), Err(KeyError::Malformed(_))));
        assert!(matches!(PublicKey::from_certificate(b"junk"), Err(KeyError::BadCertificate(_))));
    }
}
