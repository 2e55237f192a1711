//! Keys held in this process's memory: read from a PKCS#8 PEM file (mode 0600), made there
//! on first start, or generated for a test.

use std::path::Path;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use signet_core::{files, pem};

use crate::{Algorithm, KeyError};

/// A private key in memory.
pub(crate) enum Pair {
    Ecdsa(EcdsaKeyPair, SystemRandom),
    Ed25519(Ed25519KeyPair),
}

impl Pair {
    /// The key in the PKCS#8 DER `der`, of whichever of `wanted` it is.
    pub(crate) fn from_pkcs8(der: &[u8], wanted: &[Algorithm], origin: &str) -> Result<(Pair, Algorithm), KeyError> {
        for alg in Algorithm::ALL {
            if let Some(pair) = Pair::parse(alg, der) {
                return match wanted.contains(&alg) {
                    true => Ok((pair, alg)),
                    false => Err(KeyError::wrong(origin, wanted, alg)),
                };
            }
        }
        let expected = wanted.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(" or ");
        Err(KeyError::Invalid { path: origin.to_string(), why: format!("expected a PKCS#8 {expected} private key") })
    }

    fn parse(alg: Algorithm, der: &[u8]) -> Option<Pair> {
        match alg.ecdsa() {
            // aws-lc refuses a key on another curve, so the first curve that parses is the key's.
            Some(ecdsa) => EcdsaKeyPair::from_pkcs8(ecdsa, der).ok().map(|p| Pair::Ecdsa(p, SystemRandom::new())),
            None => Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).ok().map(Pair::Ed25519),
        }
    }

    pub(crate) fn spki_der(&self) -> Result<Vec<u8>, KeyError> {
        match self {
            Pair::Ecdsa(p, _) => p.public_key().as_der().map(|d| d.as_ref().to_vec()).map_err(|_| KeyError::Sign),
            Pair::Ed25519(p) => p.public_key().as_der().map(|d| d.as_ref().to_vec()).map_err(|_| KeyError::Sign),
        }
    }

    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        match self {
            Pair::Ecdsa(p, rng) => p.sign(rng, message).map(|s| s.as_ref().to_vec()).map_err(|_| KeyError::Sign),
            Pair::Ed25519(p) => Ok(p.sign(message).as_ref().to_vec()),
        }
    }
}

/// A new private key of `alg`, as PKCS#8 DER.
pub fn generate_pkcs8(alg: Algorithm) -> Result<Vec<u8>, KeyError> {
    let doc = match alg.ecdsa() {
        Some(ecdsa) => EcdsaKeyPair::generate_pkcs8(ecdsa, &SystemRandom::new()).map(|d| d.as_ref().to_vec()),
        None => Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).map(|d| d.as_ref().to_vec()),
    };
    doc.map_err(|_| KeyError::Sign)
}

/// Reads the PKCS#8 private key at `path`, or generates one of `alg` there with mode 0600 if
/// the file does not exist. Returns the PKCS#8 DER (of whatever kind the file holds).
pub fn load_or_generate_pkcs8(path: &Path, alg: Algorithm) -> Result<Vec<u8>, KeyError> {
    let shown = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => pkcs8_of(path, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let der = generate_pkcs8(alg)?;
            write_pkcs8(path, &der)?;
            Ok(der)
        }
        Err(source) => Err(KeyError::Read { path: shown, source }),
    }
}

/// Writes the PKCS#8 DER `der` to `path` as PEM, mode 0600, atomically.
pub fn write_pkcs8(path: &Path, der: &[u8]) -> Result<(), KeyError> {
    let text = pem::encode("PRIVATE KEY", der);
    files::write_atomic(path, text.as_bytes(), 0o600).map_err(|source| KeyError::Write { path: path.display().to_string(), source })
}

/// Reads the PKCS#8 private key at `path`; the file must exist.
pub fn read_pkcs8(path: &Path) -> Result<Vec<u8>, KeyError> {
    let bytes = std::fs::read(path).map_err(|source| KeyError::Read { path: path.display().to_string(), source })?;
    pkcs8_of(path, &bytes)
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
