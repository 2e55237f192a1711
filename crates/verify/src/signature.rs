//! The artifact signature of a `messageSignature` bundle: over the artifact's bytes, or over
//! its digest when only the digest is given (hashedrekord style).

use signet_core::pubkey::{HashAlg, KeyKind, PublicKey};

use crate::bundle::MessageSignature;
use crate::error::{Result, VerifyError};

/// What was signed: the artifact itself, or only its digest.
#[derive(Debug, Clone, Copy)]
pub enum Artifact<'a> {
    Bytes(&'a [u8]),
    Digest(HashAlg, &'a [u8]),
}

/// The digest that the signature (and so the log entry) covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedDigest {
    pub alg: HashAlg,
    pub digest: Vec<u8>,
}

fn err(m: impl Into<String>) -> VerifyError {
    VerifyError::Signature(m.into())
}

pub fn alg_name(alg: HashAlg) -> &'static str {
    match alg {
        HashAlg::Sha256 => "SHA-256",
        HashAlg::Sha384 => "SHA-384",
        HashAlg::Sha512 => "SHA-512",
    }
}

/// Checks the artifact against `messageDigest` and the signature against `key`.
pub fn verify_message(m: &MessageSignature, artifact: Artifact<'_>, key: &PublicKey) -> Result<SignedDigest> {
    let (alg, digest) = match artifact {
        Artifact::Bytes(bytes) => {
            let alg = m.digest.as_ref().map_or(HashAlg::Sha256, |(a, _)| *a);
            (alg, alg.digest(bytes))
        }
        Artifact::Digest(alg, d) => {
            if d.len() != alg.len() {
                return Err(err(format!("the given {} digest is {} bytes, expected {}", alg_name(alg), d.len(), alg.len())));
            }
            (alg, d.to_vec())
        }
    };
    if let Some((bundle_alg, bundle_digest)) = &m.digest {
        if *bundle_alg != alg || *bundle_digest != digest {
            return Err(err(format!(
                "the artifact's {} digest does not match the bundle's messageDigest",
                alg_name(alg)
            )));
        }
    }
    let checked = match (artifact, key.kind) {
        // Pure Ed25519 signs the message, so it needs the bytes.
        (Artifact::Bytes(bytes), KeyKind::Ed25519) => key.verify_message(bytes, &m.signature),
        _ => key.verify_digest(alg, &digest, &m.signature),
    };
    checked.map_err(|e| err(format!("signature over the artifact does not verify with the signing key ({e})")))?;
    Ok(SignedDigest { alg, digest })
}
