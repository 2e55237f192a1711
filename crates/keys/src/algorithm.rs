//! The three kinds of key signet signs with, and what each signs.
//!
//! - ECDSA P-256 with SHA-256: the logs' checkpoints and SETs, SCTs, timestamps. Not a free
//!   choice: sigstore-go verifies Rekor SETs and checkpoints only with it.
//! - ECDSA P-384 with SHA-384: the CA's root (and intermediate, when configured so), as
//!   Fulcio's.
//! - Ed25519: TUF roles, note keys (witness cosignatures), the audit anchor.
//!
//! ECDSA signatures are ASN.1 DER, as X.509, CMS and Sigstore carry them; Ed25519's are the
//! raw 64 bytes.

use std::fmt;

use aws_lc_rs::signature::{self, EcdsaSigningAlgorithm};
use der::asn1::ObjectIdentifier;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    EcdsaP256Sha256,
    EcdsaP384Sha384,
    Ed25519,
}

pub(crate) const ID_EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
pub(crate) const PRIME256V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
pub(crate) const SECP384R1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
pub(crate) const ID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

impl Algorithm {
    pub const ALL: [Algorithm; 3] = [Algorithm::EcdsaP256Sha256, Algorithm::EcdsaP384Sha384, Algorithm::Ed25519];

    /// aws-lc's signing algorithm for an ECDSA key; `None` for Ed25519.
    pub(crate) fn ecdsa(self) -> Option<&'static EcdsaSigningAlgorithm> {
        match self {
            Algorithm::EcdsaP256Sha256 => Some(&signature::ECDSA_P256_SHA256_ASN1_SIGNING),
            Algorithm::EcdsaP384Sha384 => Some(&signature::ECDSA_P384_SHA384_ASN1_SIGNING),
            Algorithm::Ed25519 => None,
        }
    }

    /// The curve's OID as a token's CKA_EC_PARAMS names it.
    pub(crate) fn curve(self) -> ObjectIdentifier {
        match self {
            Algorithm::EcdsaP256Sha256 => PRIME256V1,
            Algorithm::EcdsaP384Sha384 => SECP384R1,
            Algorithm::Ed25519 => ID_ED25519,
        }
    }

    pub(crate) fn of_curve(oid: ObjectIdentifier) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.curve() == oid)
    }

    /// What a token signs for `message`: its digest for ECDSA (only the digest crosses to the
    /// token, whatever the message's length), the message itself for Ed25519.
    pub(crate) fn to_be_signed(self, message: &[u8]) -> Vec<u8> {
        use aws_lc_rs::digest;
        match self {
            Algorithm::EcdsaP256Sha256 => digest::digest(&digest::SHA256, message).as_ref().to_vec(),
            Algorithm::EcdsaP384Sha384 => digest::digest(&digest::SHA384, message).as_ref().to_vec(),
            Algorithm::Ed25519 => message.to_vec(),
        }
    }

    /// Bytes of each of r and s in a raw ECDSA signature.
    pub(crate) fn scalar_len(self) -> usize {
        match self {
            Algorithm::EcdsaP256Sha256 => 32,
            Algorithm::EcdsaP384Sha384 => 48,
            Algorithm::Ed25519 => 32,
        }
    }

    /// Verifies `sig` over `message` with the SPKI DER `spki`.
    pub fn verify(self, spki: &[u8], message: &[u8], sig: &[u8]) -> bool {
        let alg: &dyn signature::VerificationAlgorithm = match self {
            Algorithm::EcdsaP256Sha256 => &signature::ECDSA_P256_SHA256_ASN1,
            Algorithm::EcdsaP384Sha384 => &signature::ECDSA_P384_SHA384_ASN1,
            Algorithm::Ed25519 => &signature::ED25519,
        };
        match self {
            // aws-lc's Ed25519 key is the raw 32 bytes, not an SPKI.
            Algorithm::Ed25519 => ed25519_raw(spki).is_some_and(|raw| signature::UnparsedPublicKey::new(alg, raw).verify(message, sig).is_ok()),
            _ => signature::UnparsedPublicKey::new(alg, spki).verify(message, sig).is_ok(),
        }
    }
}

/// The raw 32-byte key in an Ed25519 SPKI DER (RFC 8410: a fixed 12-byte prefix).
pub fn ed25519_raw(spki: &[u8]) -> Option<&[u8]> {
    const PREFIX: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
    spki.strip_prefix(&PREFIX[..]).filter(|raw| raw.len() == 32)
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::EcdsaP256Sha256 => "ECDSA P-256",
            Algorithm::EcdsaP384Sha384 => "ECDSA P-384",
            Algorithm::Ed25519 => "Ed25519",
        })
    }
}
